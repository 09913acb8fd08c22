"""Engine results and semantics that once differed from PyTorch (issue 13), each pinned here.

Every case states the PyTorch behaviour it matches; the ``oracle`` tests run the same code in
torch 2.13 (skipped per test when torch is missing).
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")


# -- retain_grad follows an in-place op ---------------------------------------------------------
def test_retained_grad_follows_the_in_place_op():
    x = mt.tensor([1., 2.], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * y).sum().backward()
    assert y.grad.tolist() == [12., 24.]  # d(sum y²)/dy of the new y = 6x
    assert x.grad.tolist() == [72., 144.]


def test_retained_grad_of_a_base_follows_an_in_place_op_on_its_view():
    x = mt.tensor([1., 2.], requires_grad=True)
    b = x * 1
    b.retain_grad()
    b[0:1].mul_(5)
    (b * b).sum().backward()
    assert b.grad.tolist() == [10., 4.]


@pytest.mark.oracle
def test_retained_grad_after_in_place_ops_matches_torch(torch):
    def run(lib, x):
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        y.add_(1)
        z = y[1:]
        z.mul_(2)
        (y * y).sum().backward()
        return y.grad.tolist(), x.grad.tolist()

    ours = run(mt, mt.tensor([1., 2., 3.], dtype=mt.float64, requires_grad=True))
    theirs = run(torch, torch.tensor([1., 2., 3.], dtype=torch.float64, requires_grad=True))
    np.testing.assert_allclose(ours, theirs)
