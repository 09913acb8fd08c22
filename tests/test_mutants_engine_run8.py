"""The backward engine (microtorch/autograd.py), pinned where the eighth mutation run
(tests/mutation-run-8/engine.md) found behaviour no other test fixed.

Expected values come from PyTorch's documented behaviour, written here by hand (checked
with torch 2.13), and, where torch is installed, from torch itself.
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt


def _grads_of_the_callers_tensor(lib, grad, needs):
    """What ``grad`` returns when the gradient asked for is the caller's own ``grad_outputs``
    tensor ``v`` (d y / d y; a leaf asked about itself; passed on unchanged by an add), and
    when it is computed (``x * 3``): per case, (is it ``v`` itself, requires_grad, values)."""
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    v = lib.full((3,), 5.0, requires_grad=needs)
    cases = {
        "y wrt y": grad(y, [y], v, retain_graph=True),
        "x wrt x": grad(x, [x], v),
        "x + 1 wrt x": grad(x + 1, [x], v),
        "x * 3 wrt x": grad(x * 3, [x], v),
    }
    return {name: (g is v, g.requires_grad, g.detach().numpy().tolist()) for name, (g,) in cases.items()}


PYTORCH = {  # torch.autograd.grad, torch 2.13: the caller's tensor itself, requires_grad kept
    needs: {
        "y wrt y": (True, needs, [5.0] * 3),
        "x wrt x": (True, needs, [5.0] * 3),
        "x + 1 wrt x": (True, needs, [5.0] * 3),
        "x * 3 wrt x": (False, False, [15.0] * 3),
    }
    for needs in (False, True)
}


@pytest.mark.parametrize("needs", [False, True])
def test_grad_hands_back_the_callers_grad_outputs_tensor_itself_as_pytorch_does(needs):
    """Without create_graph, grad() used to return a detached copy of every gradient: for the
    caller's own grad_outputs tensor that is another tensor object, and one that no longer
    requires grad when the caller's did. PyTorch returns the tensor itself."""
    assert _grads_of_the_callers_tensor(mt, mt.grad, needs) == PYTORCH[needs]


@pytest.mark.parametrize("needs", [False, True])
def test_the_hand_written_pytorch_answers_are_what_torch_gives(needs):
    torch = pytest.importorskip("torch")
    assert _grads_of_the_callers_tensor(torch, torch.autograd.grad, needs) == PYTORCH[needs]


def test_a_gradient_grad_computes_without_create_graph_has_no_graph():
    """The other side of the rule: without create_graph nothing grad() computes carries a
    graph, even when the caller's grad_outputs tensor has one."""
    w = mt.tensor([1.0, 2.0], dtype=mt.float64, requires_grad=True)
    v = w * 10  # a grad_outputs tensor with a graph
    x = mt.tensor([3.0, 4.0], dtype=mt.float64, requires_grad=True)
    gx, = mt.grad(x * x, [x], v)
    assert gx.grad_fn is None and not gx.requires_grad
    assert np.array_equal(gx.numpy(), [60.0, 160.0])  # 2 x * v
    gy, = mt.grad(x * 1, [x], v)  # Mul's gradient is computed: a new tensor
    assert gy is not v and gy.grad_fn is None and np.array_equal(gy.numpy(), [10.0, 20.0])
