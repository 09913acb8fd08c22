"""Tests written to kill surviving mutants (issue #21) of ``functions/linalg.py``, ``loss.py``,
``reduction.py`` and ``shape.py``: behaviour the rest of the suite did not pin down.

Each test asserts real behaviour with expected values computed independently (numpy written
out by hand, finite differences in float64, worked examples); none copies its expected value
from the code under test. Which mutant each test kills is listed in ``tests/README.md``
("Mutation testing").
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
import microtorch.functions as F


def T(a, requires_grad=False):
    return mt.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# -- shape.py -----------------------------------------------------------------------------------
def test_broadcast_to_names_itself_in_a_size_error():
    x = T([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^broadcast_to\(\): argument 'size' must be tuple of ints"):
        F.broadcast_to(x, (2, 2.5))


# -- loss.py: shifted by each row's own maximum ---------------------------------------------------
# Rows at very different scales: shifting by one global maximum (or not shifting, or adding
# the maximum) underflows or overflows to 0/0 or inf/inf. Expected values worked by hand:
# softmax([0, 1]) = [1, e] / (1 + e), and adding a constant to a row changes nothing.
SCALES = np.array([[0.0, 1.0], [1000.0, 1001.0], [-1000.0, -999.0]])
SOFT_ROW = np.array([1.0, np.e]) / (1.0 + np.e)


def test_softmax_and_log_softmax_of_rows_far_apart_stay_finite():
    want = np.vstack([SOFT_ROW] * 3)
    np.testing.assert_allclose(F.softmax(T(SCALES), 1).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(F.softmax(T(SCALES.T), 0).numpy(), want.T, rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(T(SCALES), 1).numpy(), np.log(want), rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(T(SCALES.T), 0).numpy(), np.log(want).T, rtol=1e-12)


def test_cross_entropy_of_rows_far_apart_stays_finite():
    target = np.array([0, 1, 1])
    per_row = -np.log(SOFT_ROW[target])  # [log(1 + e), log(1 + e) - 1, log(1 + e) - 1]
    got = F.cross_entropy(T(SCALES), mt.tensor(target), reduction="none")
    np.testing.assert_allclose(got.numpy(), per_row, rtol=1e-12)
    x = T(SCALES, requires_grad=True)
    F.cross_entropy(x, mt.tensor(target), reduction="sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), np.vstack([SOFT_ROW] * 3) - np.eye(2)[target], rtol=1e-12)


# -- reduction.py ---------------------------------------------------------------------------------
def test_max_shares_the_gradient_with_nans_but_amax_gives_nan():
    x = T([1.0, np.nan, 3.0], requires_grad=True)
    v = x.max()
    assert np.isnan(v.item())
    v.backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]  # PyTorch's max(): the NaN is the maximum
    y = T([[1.0, np.nan, 3.0], [4.0, 2.0, 0.0]], requires_grad=True)
    y.amax().backward()
    assert np.isnan(y.grad.numpy()).all()  # amax marks no element: 0/0


def test_amax_and_amin_split_the_gradient_between_ties():
    x = T([[2.0, 5.0, 5.0], [7.0, 7.0, 7.0]], requires_grad=True)
    x.amax(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-15)
    y = T([[2.0, 2.0, 5.0], [1.0, 0.0, 0.0]], requires_grad=True)
    y.amin(dim=1, keepdim=True).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [[0.5, 0.5, 0], [0, 0.5, 0.5]], rtol=1e-15)
    z = T([[2.0, 2.0, 5.0]], requires_grad=True)
    z.min().backward()
    np.testing.assert_allclose(z.grad.numpy(), [[0.5, 0.5, 0]], rtol=1e-15)


def test_reduction_dims_accept_numpy_ints_and_lists_and_refuse_bools():
    a = np.arange(6.0).reshape(2, 3)
    assert F.sum(T(a), np.int64(1)).tolist() == [3.0, 12.0]
    assert F.sum(T(a), [0, 1]).item() == 15.0
    assert F.mean(T(a), (np.int32(-1),)).tolist() == [1.0, 4.0]
    with pytest.raises(TypeError, match=r"sum\(\): argument 'dim' must be an int or a tuple of ints"):
        F.sum(T(a), True)
    with pytest.raises(TypeError, match=r"mean\(\): argument 'dim'"):
        F.mean(T(a), (0, 1.0))
    with pytest.raises(RuntimeError, match="names a dimension twice"):
        F.sum(T(a), (1, -1))
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got -3"):
        F.sum(T(a), -3)


def test_a_0d_tensor_reduces_over_dim_0_or_minus_1():
    for d in (0, -1, (0,), [-1]):
        s = T(5.0, requires_grad=True)
        out = F.sum(s, d)
        assert out.shape == () and out.item() == 5.0
        out.backward()
        assert s.grad.item() == 1.0
    with pytest.raises(IndexError):
        F.sum(T(5.0), 1)


def test_mean_of_nothing_is_nan_and_its_gradient_is_empty():
    for shape, dim, out_shape in [((0, 3), None, ()), ((0, 3), 0, (3,)), ((2, 0), 1, (2,))]:
        e = T(np.zeros(shape), requires_grad=True)
        with np.errstate(invalid="ignore", divide="ignore"), pytest.warns(RuntimeWarning):
            m = F.mean(e, dim)
        assert m.shape == out_shape and np.isnan(m.detach().numpy()).all()
        m.sum().backward()
        assert e.grad.shape == shape


def test_mean_backward_divides_by_the_reduced_count_in_the_gradients_dtype():
    for dtype in (mt.float32, mt.float64):
        x = mt.tensor(np.ones((2, 3, 4)), dtype=dtype, requires_grad=True)
        x.mean((0, 2)).sum().backward()
        assert x.grad.dtype == dtype
        np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3, 4), 1 / 8), rtol=1e-7)
        y = mt.tensor(np.ones((2, 3)), dtype=dtype, requires_grad=True)
        (g,) = mt.autograd.grad(y.mean(1, keepdim=True).sum(), [y], create_graph=True)
        np.testing.assert_allclose(g.numpy(), np.full((2, 3), 1 / 3), rtol=1e-7)


def test_var_corrections():
    a = np.array([[1.0, 2.0, 4.0, 7.0], [0.0, 0.0, 3.0, 1.0]])
    ss_all = ((a - a.mean()) ** 2).sum()
    ss_rows = ((a - a.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    np.testing.assert_allclose(F.var(T(a), correction=2).item(), ss_all / 6, rtol=1e-14)
    np.testing.assert_allclose(F.var(T(a), unbiased=True).item(), ss_all / 7, rtol=1e-14)
    np.testing.assert_allclose(F.var(T(a), (1,), unbiased=False).numpy(), ss_rows / 4, rtol=1e-14)
    np.testing.assert_allclose(F.var(T(a), 1, keepdim=True).numpy(), (ss_rows / 3)[:, None], rtol=1e-14)
    with pytest.raises(TypeError, match="either unbiased or correction"):
        F.var(T(a), unbiased=True, correction=1)


# -- linalg.py: what forward saves ----------------------------------------------------------------
@pytest.mark.parametrize("op", ["matmul", "linear"])
@pytest.mark.parametrize("need_first", [True, False])
def test_forward_saves_only_the_operand_the_needed_gradient_reads(op, need_first):
    """dL/da = G Bᵀ reads only b, dL/db = Aᵀ G only a (likewise x and W in linear): the other
    operand is not saved, so writing it in place before backward is allowed (as in PyTorch)."""
    rng = np.random.default_rng(1)
    a0, b0 = rng.standard_normal((3, 4)), rng.standard_normal((5, 4) if op == "linear" else (4, 5))
    leaf_a, leaf_b = T(a0, requires_grad=need_first), T(b0, requires_grad=not need_first)
    a, b = leaf_a * 1.0, leaf_b * 1.0
    y = F.linear(a, b) if op == "linear" else F.matmul(a, b)
    (a if need_first else b).add_(1.0)  # the operand no needed gradient reads
    y.sum().backward()
    g = np.ones((3, 5))
    w = b0.T if op == "linear" else b0  # y = a @ w
    if need_first:
        assert leaf_b.grad is None
        np.testing.assert_allclose(leaf_a.grad.numpy(), g @ w.T, rtol=1e-12)
    else:
        assert leaf_a.grad is None
        gw = a0.T @ g
        np.testing.assert_allclose(leaf_b.grad.numpy(), gw.T if op == "linear" else gw, rtol=1e-12)


# -- linalg.py: linear's argument checks -----------------------------------------------------------
def test_linear_dtype_error_lists_each_operand_and_its_dtype():
    x, w = mt.ones(2, 3), mt.ones(4, 3, dtype=mt.float64)
    with pytest.raises(RuntimeError, match=r"same dtype, got input mt\.float32, weight mt\.float64, bias mt\.float32; "):
        F.linear(x, w, mt.ones(4))
    with pytest.raises(RuntimeError, match=r"same dtype, got input mt\.float32, weight mt\.float64; "):
        F.linear(x, w)


def test_linear_refuses_a_bias_shaped_like_the_weight():
    """b of W's shape (4, 3) does not broadcast to the output (2, 4): linear's own error, not numpy's."""
    with pytest.raises(RuntimeError, match=r"bias of shape \[4, 3\] does not broadcast to the output shape \[2, 4\]"):
        F.linear(mt.ones(2, 3), mt.ones(4, 3), mt.ones(4, 3))
