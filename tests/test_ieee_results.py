"""Where the math has an infinity or a NaN, an op returns IEEE's answer silently, as PyTorch does.

ln 0 = −inf, ln −1 = NaN, √−1 = NaN, 1/0 = inf, 0/0 = NaN, e¹⁰⁰⁰ = inf and the mean of nothing
(0/0) are the numbers PyTorch returns, without a warning. numpy computes the same numbers but
also prints a ``RuntimeWarning`` ("divide by zero encountered in log") that points into
microtorch's own code — noise a learner cannot act on. Each case below runs with warnings
turned into errors, and checks the value against numpy's own answer (computed here with its
warnings off) and, with torch installed, against PyTorch.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import microtorch as mt

X = np.array([-1.0, 0.0, 4.0, 1000.0], np.float32)
ZEROS = np.zeros(4, np.float32)

# name: (microtorch, numpy's value of the same math, the same in torch)
CASES = {
    "log": (lambda t: mt.log(t), lambda a: np.log(a), lambda t, torch: torch.log(t)),
    "sqrt": (lambda t: t.sqrt(), lambda a: np.sqrt(a), lambda t, torch: t.sqrt()),
    "exp": (lambda t: t.exp(), lambda a: np.exp(a), lambda t, torch: t.exp()),
    "x / 0": (lambda t: t / 0.0, lambda a: a / np.float32(0), lambda t, torch: t / 0.0),
    "1 / x": (lambda t: 1.0 / t, lambda a: np.float32(1) / a, lambda t, torch: 1.0 / t),
    "x / zeros": (lambda t: t / mt.tensor(ZEROS), lambda a: a / ZEROS, lambda t, torch: t / torch.tensor(ZEROS)),
    "exp_": (lambda t: t.clone().exp_(), lambda a: np.exp(a), lambda t, torch: t.clone().exp_()),
    "sqrt_": (lambda t: t.clone().sqrt_(), lambda a: np.sqrt(a), lambda t, torch: t.clone().sqrt_()),
    "div_": (lambda t: t.clone().div_(0.0), lambda a: a / np.float32(0), lambda t, torch: t.clone().div_(0.0)),
}


def _quiet_numpy(f, a):
    with np.errstate(all="ignore"):
        return f(a)


@pytest.mark.parametrize("name", list(CASES))
def test_ieee_answers_come_back_without_a_warning(name):
    ours, theirs, _ = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ours(mt.tensor(X)).numpy()
    np.testing.assert_array_equal(got, _quiet_numpy(theirs, X))
    assert not np.isfinite(got).all()  # each case has an inf or a NaN in it


@pytest.mark.parametrize("op", ["log", "sqrt", "div"])
def test_their_gradients_at_the_singularity_come_back_without_a_warning(op):
    x = mt.tensor([0.0, -1.0, 4.0], requires_grad=True)
    zero = mt.tensor([0.0, 0.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = {"log": lambda: mt.log(x), "sqrt": lambda: x.sqrt(), "div": lambda: x / zero}[op]()
        y.sum().backward()
    with np.errstate(all="ignore"):  # d/dx ln x = 1/x; d/dx √x = 1/(2√x); d/da a/b = 1/b, d/db = −a/b²
        a, b = np.array([0.0, -1.0, 4.0], np.float32), np.array([0.0, 0.0, 2.0], np.float32)
        want = {"log": 1 / a, "sqrt": 1 / (2 * np.sqrt(a)), "div": 1 / b}[op]
    np.testing.assert_array_equal(x.grad.numpy(), want)
    if op == "div":
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(zero.grad.numpy(), -a / (b * b))


def test_the_mean_of_nothing_is_nan_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = mt.zeros(0, 3).mean()
        rows = mt.zeros(0, 3).mean(0)
    assert np.isnan(m.item()) and rows.shape == (3,) and np.isnan(rows.numpy()).all()


@pytest.mark.oracle
@pytest.mark.parametrize("name", list(CASES))
def test_the_answers_are_pytorchs(name):
    torch = pytest.importorskip("torch")
    ours, _, theirs = CASES[name]
    # the same infinities and NaNs; finite values to float32 rounding (the two libraries' exp differ in the last bit)
    np.testing.assert_allclose(ours(mt.tensor(X)).numpy(), theirs(torch.tensor(X), torch).numpy(), rtol=1e-6)
