"""Tests written to kill surviving mutants (issue #21) of ``functions/linalg.py``, ``loss.py``,
``reduction.py`` and ``shape.py``: behaviour the rest of the suite did not pin down.

Each test asserts real behaviour with expected values computed independently (numpy written
out by hand, finite differences in float64, worked examples); none copies its expected value
from the code under test. Several also pin behaviour ahead of the mutation run (the mutants
of these modules had not all been run when they were written): the row-wise max shift of
softmax and cross-entropy, what matmul and linear save for backward, linear writing into a
flat gradient buffer, the loss options against their formulas.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import microtorch as mt
import microtorch.functions as F


def T(a, requires_grad=False):
    return mt.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# -- shape.py -----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["broadcast_to", "view", "reshape", "expand"])
def test_size_ops_name_themselves_in_a_size_error(op):
    x = T([1.0, 2.0])
    call = {"broadcast_to": lambda: F.broadcast_to(x, (2, 2.5)), "view": lambda: F.view(x, 2, 2.5),
            "reshape": lambda: F.reshape(x, (2, 2.5)), "expand": lambda: F.expand(x, 2, 2.5)}[op]
    with pytest.raises(TypeError, match=rf"^{op}\(\): argument 'size' must be tuple of ints"):
        call()


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
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the 0/0 is on purpose: no RuntimeWarning either
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
    with pytest.raises(TypeError, match=r"^sum\(\): argument 'dim' must be an int or a tuple of ints, got float \(1\.0\)"):
        F.sum(T(a), 1.0)  # neither an int nor a tuple: not iterated
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
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # 0/0 = NaN silently, as in PyTorch (no numpy warning)
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
    with pytest.raises(RuntimeError, match=r"same dtype, got input mt\.float32, weight mt\.float32, bias mt\.float64; "):
        F.linear(x, mt.ones(4, 3), mt.ones(4, dtype=mt.float64))  # only the bias differs


def test_linear_refuses_a_bias_shaped_like_the_weight():
    """b of W's shape (4, 3) does not broadcast to the output (2, 4): linear's own error, not numpy's."""
    with pytest.raises(RuntimeError, match=r"bias of shape \[4, 3\] does not broadcast to the output shape \[2, 4\]"):
        F.linear(mt.ones(2, 3), mt.ones(4, 3), mt.ones(4, 3))


# -- loss.py: the options, against the formulas in numpy --------------------------------------------
def _log_softmax_np(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


LOGITS = np.random.default_rng(3).standard_normal((5, 4))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ignore_index_and_label_smoothing_follow_the_formula(reduction):
    """ℓᵢ = −(1 − ε) logp[i, tᵢ] − (ε / C) Σⱼ logp[i, j], 0 for ignored rows; "mean" ÷ rows kept."""
    t = np.array([1, 7, 3, 0, 7])
    kept = t != 7
    logp = _log_softmax_np(LOGITS)
    for eps in (0.0, 0.25):
        per = -(1 - eps) * logp[np.arange(5), np.where(kept, t, 0)] - eps / 4 * logp.sum(axis=1)
        per = per * kept
        want = {"none": per, "sum": per.sum(), "mean": per.sum() / kept.sum()}[reduction]
        got = F.cross_entropy(T(LOGITS), mt.tensor(t), reduction=reduction, ignore_index=7, label_smoothing=eps)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
        if eps == 0.0:
            got = F.nll_loss(T(logp), mt.tensor(t), reduction=reduction, ignore_index=7)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    smoothed_only = F.cross_entropy(T(LOGITS), mt.tensor(np.where(kept, t, 2)), reduction=reduction,
                                    label_smoothing=0.5)
    t2 = np.where(kept, t, 2)
    per = -0.5 * logp[np.arange(5), t2] - 0.5 / 4 * logp.sum(axis=1)
    np.testing.assert_allclose(smoothed_only.numpy(), {"none": per, "sum": per.sum(), "mean": per.mean()}[reduction],
                               rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_probability_targets_with_smoothing_follow_the_formula(reduction):
    """ℓᵢ = −Σⱼ yᵢⱼ logp[i, j] with y → (1 − ε) y + ε / C; "mean" ÷ N; y gets the gradient −logp."""
    y = np.random.default_rng(4).dirichlet(np.ones(4), size=5)
    logp = _log_softmax_np(LOGITS)
    for eps in (0.0, 0.3):
        ys = (1 - eps) * y + eps / 4
        per = -(ys * logp).sum(axis=1)
        target = T(y, requires_grad=True)
        got = F.cross_entropy(T(LOGITS), target, reduction=reduction, label_smoothing=eps)
        np.testing.assert_allclose(got.detach().numpy(), {"none": per, "sum": per.sum(), "mean": per.mean()}[reduction],
                                   rtol=1e-12)
        got.sum().backward()
        scale = 1 / 5 if reduction == "mean" else 1.0
        np.testing.assert_allclose(target.grad.numpy(), -(1 - eps) * logp * scale, rtol=1e-12)


def test_every_row_ignored_gives_nan_for_mean_and_zero_for_sum():
    t = mt.tensor([-100, -100, -100, -100, -100])
    with np.errstate(invalid="ignore"):
        assert np.isnan(F.cross_entropy(T(LOGITS), t).item())
        assert np.isnan(F.nll_loss(T(_log_softmax_np(LOGITS)), t).item())
    assert F.cross_entropy(T(LOGITS), t, reduction="sum").item() == 0.0


@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_a_numpy_target_changed_after_forward_does_not_change_the_gradient(fn):
    """The loss copies a non-tensor target: backward reads the indices forward read."""
    t = np.array([1, 0, 3, 2, 2])
    want = np.exp(_log_softmax_np(LOGITS)) - np.eye(4)[t] if fn == "cross_entropy" else -np.eye(4)[t]
    x = T(LOGITS if fn == "cross_entropy" else _log_softmax_np(LOGITS), requires_grad=True)
    loss = getattr(F, fn)(x, t, reduction="sum")
    t[:] = 0
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-15)
    x2 = T(LOGITS, requires_grad=True)
    F.cross_entropy(x2, [1, 0, 3, 2, 2], reduction="sum").backward()  # a list works too
    np.testing.assert_allclose(x2.grad.numpy(), np.exp(_log_softmax_np(LOGITS)) - np.eye(4)[[1, 0, 3, 2, 2]],
                               rtol=1e-12, atol=1e-15)


def test_class_index_checks():
    x = T(LOGITS[:2, :3])
    for dtype in (np.uint8, np.int16, np.int32, np.int64):  # unsigned and signed index dtypes
        np.testing.assert_allclose(F.cross_entropy(x, mt.tensor(np.array([2, 0], dtype=dtype)), reduction="none").numpy(),
                                   -_log_softmax_np(LOGITS[:2, :3])[[0, 1], [2, 0]], rtol=1e-12)
    for bad in (3, -2):  # a class past the end, a negative index that is not ignore_index
        with pytest.raises(IndexError, match=rf"^Target {bad} is out of bounds: there are 3 classes"):
            F.cross_entropy(x, mt.tensor([0, bad]))
        with pytest.raises(IndexError, match=rf"^Target {bad} is out of bounds"):
            F.nll_loss(x, mt.tensor([bad, 0]))
    with pytest.raises(IndexError, match=r"or be ignore_index=5\)"):
        F.nll_loss(x, mt.tensor([0, 4]), ignore_index=5)
    with pytest.raises(TypeError, match="target must hold integer class indices, got dtype float32"):
        F.nll_loss(x, mt.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"target must have shape \[2\]"):
        F.cross_entropy(x, mt.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match=r"nll_loss: expected input of shape \(N, C\), got \[3\]"):
        F.nll_loss(x[0], mt.tensor([0]))
    with pytest.raises(ValueError, match=r"cross_entropy: expected logits of shape \(N, C\) or \(C,\), got \[1, 2, 3\]"):
        F.cross_entropy(x.unsqueeze(0), mt.tensor([0]))
    for fn in (F.cross_entropy, F.nll_loss, F.mse_loss):
        with pytest.raises(ValueError, match=r"reduction must be one of \('mean', 'sum', 'none'\), got 'avg'"):
            fn(x, mt.tensor([0, 1]) if fn is not F.mse_loss else x, reduction="avg")


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "nll_loss", "cross_entropy"])
def test_integer_inputs_are_refused_not_rounded(op):
    x = mt.tensor([[1, 2], [3, 4]])
    args = (x, 1) if op in ("softmax", "log_softmax") else (x, mt.tensor([0, 1]))
    with pytest.raises(NotImplementedError, match=rf'^"{op}" not implemented for \'Long\''):
        getattr(F, op)(*args)


def test_label_smoothing_out_of_range_is_refused():
    for eps in (-0.1, 1.5, "0.1"):
        with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
            F.cross_entropy(T(LOGITS), mt.tensor([0] * 5), label_smoothing=eps)
    for eps in (1, 1.0):  # the ends are allowed
        F.cross_entropy(T(LOGITS), mt.tensor([0] * 5), label_smoothing=eps)


def test_mse_loss_makes_a_list_target_a_tensor_of_the_inputs_dtype():
    x = T([[1.0, 2.0], [3.0, 5.0]])
    for reduction, want in (("mean", 6 / 4), ("sum", 6.0), ("none", [[0.0, 1.0], [1.0, 4.0]])):  # (x - t)² = 0, 1, 1, 4
        got = F.mse_loss(x, [[1.0, 1.0], [2.0, 3.0]], reduction=reduction)
        assert got.dtype == mt.float64
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-15)


@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_unreduced_losses_weight_each_rows_gradient(fn):
    t = np.array([1, 0, 3, 2, 2])
    w = np.array([0.5, -1.0, 2.0, 0.0, 3.0])
    x = T(LOGITS if fn == "cross_entropy" else _log_softmax_np(LOGITS), requires_grad=True)
    (getattr(F, fn)(x, mt.tensor(t), reduction="none") * T(w)).sum().backward()
    per_row = (np.exp(_log_softmax_np(LOGITS)) - np.eye(4)[t]) if fn == "cross_entropy" else -np.eye(4)[t]
    np.testing.assert_allclose(x.grad.numpy(), per_row * w[:, None], rtol=1e-12, atol=1e-15)
    x = T(LOGITS if fn == "cross_entropy" else _log_softmax_np(LOGITS), requires_grad=True)
    (getattr(F, fn)(x, mt.tensor(t)) * 3.0).backward()  # "mean": ÷ N, times the incoming 3
    np.testing.assert_allclose(x.grad.numpy(), per_row * 3 / 5, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_second_derivatives_match_finite_differences(reduction):
    """d/dx and d/dv of  Σ (∂L/∂x ⊙ W)  with L = Σ vᵢ ℓᵢ ("none") or v·L: CrossEntropyGrad's backward,
    against central differences of the gradient formula (softmax(x) − onehot(t)) · c in numpy."""
    t = np.array([1, 0, 3, 2, 2])
    W = np.random.default_rng(5).standard_normal((5, 4))
    v0 = np.array([0.5, -1.0, 2.0, 1.5, 3.0]) if reduction == "none" else np.array(1.7)
    n = 5 if reduction == "mean" else 1

    def grad_np(x, v):
        s = np.exp(_log_softmax_np(x))
        return (s - np.eye(4)[t]) * ((v[:, None] if v.ndim else v) / n)

    def f(x, v):
        return (grad_np(x, v) * W).sum()

    x = T(LOGITS, requires_grad=True)
    v = T(v0, requires_grad=True)
    loss = F.cross_entropy(x, mt.tensor(t), reduction=reduction)
    (gx,) = mt.autograd.grad((loss * v).sum(), [x], create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), grad_np(LOGITS, v0), rtol=1e-10, atol=1e-14)
    (gx * T(W)).sum().backward()
    h = 1e-6
    fd_x = np.zeros_like(LOGITS)
    for i in np.ndindex(LOGITS.shape):
        d = np.zeros_like(LOGITS)
        d[i] = h
        fd_x[i] = (f(LOGITS + d, v0) - f(LOGITS - d, v0)) / (2 * h)
    np.testing.assert_allclose(x.grad.numpy(), fd_x, rtol=1e-6, atol=1e-8)
    fd_v = np.zeros(v0.shape)
    for i in np.ndindex(v0.shape):
        d = np.zeros(v0.shape)
        d[i] = h
        fd_v[i] = (f(LOGITS, v0 + d) - f(LOGITS, v0 - d)) / (2 * h)
    np.testing.assert_allclose(v.grad.numpy(), fd_v, rtol=1e-6, atol=1e-8)


# -- shape.py: views and their errors -----------------------------------------------------------------
def test_view_with_two_inferred_sizes_says_so():
    """Not "use .reshape" (a contiguous tensor can be viewed; the shape is what is wrong)."""
    for x in (mt.ones(2, 3), mt.ones(3, 2).T):
        with pytest.raises(RuntimeError, match=r"^only one dimension can be inferred \(shape \[-1, -1\]"):
            x.view(-1, -1)
        with pytest.raises(RuntimeError, match=r"^only one dimension can be inferred"):
            x.reshape(-1, 2, -1)


def test_view_errors_tell_strides_from_sizes():
    x = T(np.arange(6.0).reshape(2, 3))
    for shape in ((-1,), (6,), (2, 3), (-1, 3)):
        with pytest.raises(RuntimeError, match=r"^view size is not compatible .* Use \.reshape"):
            x.T.view(*shape)
        np.testing.assert_array_equal(x.T.reshape(*shape).numpy(), np.arange(6.0).reshape(2, 3).T.reshape(shape))
    for shape in ((4, -1), (4, 2), (0, -1), (7,)):
        for t in (x, x.T):
            with pytest.raises(RuntimeError, match=rf"^shape '\[{', '.join(map(str, shape))}\]' is invalid for input of size 6 \(input shape"):
                t.view(*shape)
            with pytest.raises(RuntimeError, match=r"is invalid for input of size 6"):
                t.reshape(*shape)


def test_expand_and_broadcast_to_are_read_only_stride_0_views():
    base = T([[1.0], [2.0], [3.0]])
    for y in (F.expand(base, 2, 3, 4), F.broadcast_to(base, (2, 3, 4)), F.expand(base, 2, -1, 4)):
        assert y.shape == (2, 3, 4) and y.storage is base.storage
        assert y.stride() == (0, 1, 0)
        np.testing.assert_array_equal(y.numpy(), np.broadcast_to(base.numpy(), (2, 3, 4)))
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            y.add_(1.0)
        with pytest.raises(ValueError):
            y.numpy()[0, 0, 0] = 5.0  # numpy's own read-only flag
    t = T(np.arange(6.0).reshape(2, 3)).T  # a non-contiguous source
    y = F.expand(t, 4, 3, 2)
    assert y.stride() == (0, 1, 3)
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(np.arange(6.0).reshape(2, 3).T, (4, 3, 2)))
    for shape in ((3, 1), (1, 3, 1), (3, 0)):  # size-1 and new dims get stride 0 even when not widened
        want = np.broadcast_to(base.numpy(), shape)
        got = F.expand(base, *shape)
        assert got.stride() == tuple(st // 8 for st in want.strides) == (
            (1, 0) if shape == (3, 1) else (0, 1, 0) if shape == (1, 3, 1) else (1, 0))
    for dtype in (mt.float32, mt.int64, mt.int32, mt.bool):  # the view keeps the source's dtype
        src = mt.tensor([[1], [0], [3]], dtype=dtype)
        got = F.expand(src, 2, 3, 2)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), np.broadcast_to(src.numpy(), (2, 3, 2)))
    strided = T(np.arange(12.0).reshape(3, 4))[:, ::2]  # no contiguous buffer at all: numpy's path
    np.testing.assert_array_equal(F.expand(strided, 2, 3, 2).numpy(),
                                  np.broadcast_to(np.arange(12.0).reshape(3, 4)[:, ::2], (2, 3, 2)))
    s = T(7.0)  # 0-d
    assert F.expand(s, 2, 2).tolist() == [[7.0, 7.0], [7.0, 7.0]]


def test_expand_errors():
    x = T(np.zeros((2, 3)))
    with pytest.raises(RuntimeError, match=r"^expand: the number of sizes provided \(1\) must be greater or equal"):
        F.expand(x, 3)
    with pytest.raises(RuntimeError, match=r"isn't allowed in a leading, non-existing dimension 0"):
        F.expand(x, -1, 2, 3)
    with pytest.raises(RuntimeError, match=r"^expand: the expanded size \[2, 4\] must match the existing size \[2, 3\]"):
        F.expand(x, 2, 4)
    with pytest.raises(RuntimeError, match=r"must match the existing size"):
        F.expand(x.T, 2, 2)  # non-contiguous: numpy's path, the same error
    for a, shape in (([1.0, 2.0, 3.0], (2,)), ([1.0, 2.0], (1,)), ([[1.0, 2.0, 3.0]], (2, 2))):
        with pytest.raises(RuntimeError, match=r"must match the existing size"):  # never a shorter view
            F.expand(T(a), *shape)


def test_expand_backward_sums_over_the_copies():
    x = T([[1.0], [2.0]], requires_grad=True)
    w = np.arange(12.0).reshape(3, 2, 2)
    (F.expand(x, 3, 2, 2) * T(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), w.sum(axis=(0, 2))[:, None], rtol=1e-15)


def test_squeeze_permute_transpose_and_unsqueeze_dims():
    x = T(np.arange(6.0).reshape(1, 2, 1, 3))
    assert F.squeeze(x).shape == (2, 3)
    assert F.squeeze(x, (0, -2)).shape == (2, 3)
    assert F.squeeze(x, [2]).shape == (1, 2, 3)
    assert F.squeeze(x, 1).shape == (1, 2, 1, 3)  # size 2: left alone
    assert F.squeeze(x, (1, 3)).shape == (1, 2, 1, 3)
    assert F.squeeze(T(4.0), 0).shape == () and F.squeeze(T(4.0), -1).shape == ()
    assert F.unsqueeze(T(4.0), -1).shape == (1,)
    assert F.unsqueeze(x, -1).shape == (1, 2, 1, 3, 1) and F.unsqueeze(x, -5).shape == (1, 1, 2, 1, 3)
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(F.permute(T(a), -1, 0, -2).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(F.permute(T(a), (2, 0, 1)).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(F.transpose(T(a), -1, 0).numpy(), a.swapaxes(2, 0))
    assert F.permute(T(4.0)).shape == () and F.transpose(T(4.0), 0, -1).item() == 4.0
    with pytest.raises(RuntimeError, match=r"^permute: dims \[0, 0, 1\] must be a permutation of 0\.\.2"):
        F.permute(T(a), 0, 0, 1)
    with pytest.raises(RuntimeError, match="must be a permutation"):
        F.permute(T(a), 0, 1, 3)
    with pytest.raises(RuntimeError, match="must be a permutation"):
        F.permute(T(a), 0, 1)
    with pytest.raises(TypeError, match=r"^permute\(\): argument 'dims' must be tuple of ints, but found element of type float at pos 1"):
        F.permute(T(a), 0, 1.0, 2)


def test_shape_op_gradients_go_back_to_the_input_layout():
    a = np.arange(24.0).reshape(2, 3, 4)
    w = np.random.default_rng(6).standard_normal((4, 2, 3))
    x = T(a, requires_grad=True)
    (F.permute(x, 2, 0, 1) * T(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), w.transpose(1, 2, 0))
    x = T(a, requires_grad=True)
    (F.transpose(x, 0, 2) * T(w.transpose(0, 2, 1))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), w.transpose(0, 2, 1).swapaxes(0, 2))
    x = T(a[:, :1], requires_grad=True)  # (2, 1, 4)
    (F.squeeze(x, 1) * T(np.ones((2, 4)) * [1.0, 2, 3, 4])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to([1.0, 2, 3, 4], (2, 1, 4)))
    x = T(a[0], requires_grad=True)  # (3, 4)
    (F.unsqueeze(x, 1) * T(np.arange(12.0).reshape(3, 1, 4))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(12.0).reshape(3, 4))


def test_flatten_edge_cases():
    x = T(np.arange(24.0).reshape(2, 3, 4))
    assert F.flatten(x, 1, 1) is x  # nothing to merge: the tensor itself
    assert F.flatten(x, -1) is x
    assert F.flatten(T(5.0)).shape == (1,)
    assert F.flatten(x, 0, 1).shape == (6, 4) and F.flatten(x, -2).shape == (2, 12)
    np.testing.assert_array_equal(F.flatten(x, 1).numpy(), np.arange(24.0).reshape(2, 12))
    e = T(np.zeros((0, 3, 4)))
    assert F.flatten(e, 1).shape == (0, 12) and F.flatten(e).shape == (0,) and F.flatten(e, 0, 1).shape == (0, 4)
    e2 = T(np.zeros((2, 3, 4, 0)))  # empty, the zero outside the merged dims
    assert F.flatten(e2, 0, 1).shape == (6, 4, 0) and F.flatten(e2, 1, 2).shape == (2, 12, 0)
    assert F.flatten(e2, 2).shape == (2, 3, 0)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        F.flatten(x, 2, 1)
    for dims in ((3,), (0, 3), (-4, 1), (0, -4)):  # either dim out of range: flatten's own error
        with pytest.raises(IndexError, match=r"^flatten: dimension -?\d is out of range for a tensor with 3 dimension"):
            F.flatten(x, *dims)
    for dims in ((1.0,), (0, 1.5)):
        with pytest.raises(TypeError, match=r"^flatten\(\): argument 'dim' must be an int, got float"):
            F.flatten(x, *dims)


def test_cat_and_stack_values_gradients_and_errors():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(4.0).reshape(2, 2) + 10
    x, y = T(a, requires_grad=True), T(b, requires_grad=True)
    out = F.cat([x, y], dim=-1)
    np.testing.assert_array_equal(out.detach().numpy(), np.hstack([a, b]))
    w = np.arange(10.0).reshape(2, 5)
    (out * T(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), w[:, :3])
    np.testing.assert_array_equal(y.grad.numpy(), w[:, 3:])
    p, q = T([1.0, 2.0], requires_grad=True), T([3.0, 4.0], requires_grad=True)
    s = F.stack([p, q], dim=-1)
    np.testing.assert_array_equal(s.detach().numpy(), [[1.0, 3.0], [2.0, 4.0]])
    (s * T([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert p.grad.tolist() == [1.0, 3.0] and q.grad.tolist() == [2.0, 4.0]
    assert F.stack((T(1.0), T(2.0))).tolist() == [1.0, 2.0]  # any iterable, 0-d tensors
    with pytest.raises(RuntimeError, match="^cat: expected a non-empty list of tensors"):
        F.cat([])
    with pytest.raises(RuntimeError, match=r"^cat: tensors must have the same shape except in dimension 0; got \[2, 3\], \[2, 2\]"):
        F.cat([T(a), T(b)])
    with pytest.raises(RuntimeError, match="^stack: expected a non-empty list of tensors"):
        F.stack(iter([]))
    with pytest.raises(RuntimeError, match=r"^stack: expects each tensor to be equal size, but got \[2, 3\], \[2, 2\]"):
        F.stack([T(a), T(b)])


def test_indexing_views_copies_and_their_gradients():
    a = np.arange(12.0).reshape(3, 4)
    x = T(a)
    y = x[1, 2]  # all-integer key: a 0-d view, as in PyTorch
    assert y.shape == () and y.storage is x.storage and y.item() == 6.0
    assert x[(2,)].storage is x.storage
    key = np.array([2, 0, 2])
    x = T(a, requires_grad=True)
    z = x[key]
    key[:] = 1  # the caller's array changes after forward: the gradient does not
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([1.0, 0, 2])[:, None] * np.ones((1, 4)))
    x = T(a, requires_grad=True)
    x[[0, 0, 1], [3, 3, 3]].sum().backward()  # repeated indices receive the sum
    want = np.zeros((3, 4))
    want[0, 3], want[1, 3] = 2.0, 1.0
    np.testing.assert_array_equal(x.grad.numpy(), want)
    x = T(a, requires_grad=True)
    x[1:, ::2].sum().backward()  # basic indexing: a plain write
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]])
    x = T(a, requires_grad=True)
    (gx,) = mt.autograd.grad((x[[0, 0, 2]] ** 2).sum(), [x], create_graph=True)
    (gx * T(np.arange(12.0).reshape(3, 4))).sum().backward()  # IndexAdd's backward: gg[key]
    want = np.zeros((3, 4))
    want[0], want[2] = 2 * 2 * np.arange(4.0), 2 * np.arange(8.0, 12.0)
    np.testing.assert_array_equal(x.grad.numpy(), want)
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for dimension 0 with size 3 \(indexing a tensor of shape \[3, 4\]\)"):
        T(a)[5]


# -- linalg.py: Linear's backward ----------------------------------------------------------------------
def _backward_allocations(x_shape, bias, flat):
    """Allocations made by backward of linear(x).sum() with x requiring a gradient, and W, b
    either placed in a flat gradient buffer (flat) or needing no gradient at all."""
    model = mt.nn.Linear(3, 4, bias=bias).double()
    if flat:
        mt.nn.flatten_parameters(model)
    else:
        for p in model.parameters():
            p.requires_grad_(False)
    x = mt.randn(*x_shape, dtype=mt.float64, requires_grad=True)
    loss = model(x).sum()
    before = mt.memory.stats()["allocations"]
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    return mt.memory.stats()["allocations"] - before, model, x, grads


@pytest.mark.parametrize("x_shape,bias", [((5, 3), True), ((2, 5, 3), True), ((3,), False), ((5, 3), False)])
def test_linear_writes_weight_and_bias_gradients_straight_into_the_flat_buffer(x_shape, bias):
    """dL/dW and dL/db cost no allocation when their homes are slices of a flat buffer:
    exactly as many allocations as when W and b need no gradient at all."""
    n_flat, model, x, grads = _backward_allocations(x_shape, bias, flat=True)
    n_frozen, *_ = _backward_allocations(x_shape, bias, flat=False)
    assert n_flat == n_frozen
    xs = x.detach().numpy().reshape(-1, 3)
    np.testing.assert_allclose(grads[0].numpy(), np.ones((4, 1)) * xs.sum(axis=0), rtol=1e-12)  # Gᵀ x, G = 1
    if bias:
        np.testing.assert_allclose(grads[1].numpy(), np.full(4, xs.shape[0]), rtol=1e-15)


def test_linear_weight_gradient_ignores_a_destination_of_another_shape_or_dtype():
    """_destination: the engine's out[i] is used only when it has the gradient's shape and dtype."""
    from microtorch.functions.linalg import _destination
    right = mt.zeros(4, 3, dtype=mt.float64)
    assert _destination([None, right], 1, (4, 3), np.dtype(np.float64)) is right
    for out in (None, [None, None], [None, mt.zeros(3, 4, dtype=mt.float64)], [None, mt.zeros(4, 3)]):
        d = _destination(out, 1, (4, 3), np.dtype(np.float64))
        assert d.shape == (4, 3) and d.dtype == mt.float64 and d is not right
        assert out is None or all(d is not o for o in out)
    assert _destination([right, None], 0, (4, 3), np.dtype(np.float64)) is right


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("x_shape,b_shape", [((5, 3), (4,)), ((2, 5, 3), (4,)), ((3,), (4,)), ((5, 3), (5, 4)),
                                              ((5, 3), (1, 4)), ((2, 5, 3), (5, 1)), ((3,), None), ((2, 5, 3), None)])
def test_linear_gradients_for_every_input_and_bias_shape(x_shape, b_shape, create_graph):
    """dL/dx = G W, dL/dW = Gᵀ x (rows flattened), dL/db = G summed to b's shape; both paths
    (numpy_backward without a graph, the ops with create_graph=True)."""
    rng = np.random.default_rng(7)
    x0, w0 = rng.standard_normal(x_shape), rng.standard_normal((4, 3))
    b0 = None if b_shape is None else rng.standard_normal(b_shape)
    out_shape = x_shape[:-1] + (4,)
    g0 = rng.standard_normal(out_shape)
    x, w = T(x0, requires_grad=True), T(w0, requires_grad=True)
    b = None if b0 is None else T(b0, requires_grad=True)
    y = F.linear(x, w, b)
    want_y = np.einsum("...i,oi->...o", x0, w0) + (0 if b0 is None else b0)
    np.testing.assert_allclose(y.detach().numpy(), want_y, rtol=1e-12)
    inputs = [x, w] + ([] if b is None else [b])
    grads = mt.autograd.grad((y * T(g0)).sum(), inputs, create_graph=create_graph)
    G, X = g0.reshape(-1, 4), x0.reshape(-1, 3)
    np.testing.assert_allclose(grads[0].detach().numpy(), np.einsum("...o,oi->...i", g0, w0), rtol=1e-12)
    np.testing.assert_allclose(grads[1].detach().numpy(), G.T @ X, rtol=1e-12)
    if b is not None:
        want_b = g0.sum(axis=tuple(range(g0.ndim - len(b_shape))))
        want_b = want_b.sum(axis=tuple(i for i, n in enumerate(b_shape) if n == 1), keepdims=True)
        np.testing.assert_allclose(grads[2].detach().numpy(), want_b.reshape(b_shape), rtol=1e-12)
    for gi, t in zip(grads, inputs):
        assert gi.shape == t.shape and gi.dtype == mt.float64
    assert grads[0].requires_grad == grads[1].requires_grad == create_graph  # G W reads W, Gᵀ x reads x


@pytest.mark.parametrize("need", [(True, False, False), (False, True, False), (False, False, True)])
def test_linear_computes_only_the_gradients_asked_for(need):
    x = T(np.ones((2, 3)), requires_grad=need[0])
    w = T(np.ones((4, 3)), requires_grad=need[1])
    b = T(np.ones(4), requires_grad=need[2])
    F.linear(x, w, b).sum().backward()
    assert [t.grad is not None for t in (x, w, b)] == list(need)


def test_linear_with_a_1d_weight_is_a_dot_product():
    x0, w0 = np.arange(6.0).reshape(2, 3), np.array([1.0, -1.0, 2.0])
    x, w, b = T(x0, requires_grad=True), T(w0, requires_grad=True), T(0.5, requires_grad=True)
    y = F.linear(x, w, b)
    np.testing.assert_allclose(y.detach().numpy(), x0 @ w0 + 0.5, rtol=1e-15)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x0.sum(axis=0), rtol=1e-15)
    assert b.grad.item() == 2.0
    np.testing.assert_allclose(F.linear(x, w).detach().numpy(), x0 @ w0, rtol=1e-15)


# -- linalg.py: matmul's backward --------------------------------------------------------------------
def _matmul_grads_np(a, b, g):
    """dL/da = G Bᵀ, dL/db = Aᵀ G by explicit sums, 1-D operands promoted, batch dims summed away."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g.reshape(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1]))
    ga = np.einsum("...nm,...km->...nk", g2, np.broadcast_to(b2, g2.shape[:-2] + b2.shape[-2:]))
    gb = np.einsum("...nk,...nm->...km", np.broadcast_to(a2, g2.shape[:-2] + a2.shape[-2:]), g2)

    def down(x, shape):
        x = x.sum(axis=tuple(range(x.ndim - len(shape)))) if x.ndim > len(shape) else x
        return x.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)
    return down(ga, a2.shape).reshape(a.shape), down(gb, b2.shape).reshape(b.shape)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (2, 4, 5)),
                                   ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5))])
def test_matmul_gradients_for_every_operand_rank(sa, sb, create_graph):
    rng = np.random.default_rng(8)
    a0, b0 = rng.standard_normal(sa), rng.standard_normal(sb)
    a, b = T(a0, requires_grad=True), T(b0, requires_grad=True)
    y = F.matmul(a, b)
    g0 = rng.standard_normal(y.shape)
    ga, gb = mt.autograd.grad((y * T(g0)).sum(), [a, b], create_graph=create_graph)
    want_a, want_b = _matmul_grads_np(a0, b0, g0)
    assert ga.shape == sa and gb.shape == sb
    np.testing.assert_allclose(ga.detach().numpy(), want_a, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gb.detach().numpy(), want_b, rtol=1e-12, atol=1e-14)
    for need_a in (True, False):  # one operand needing no gradient gets none
        a, b = T(a0, requires_grad=need_a), T(b0, requires_grad=not need_a)
        F.matmul(a, b).sum().backward()
        assert (a.grad is None) != need_a and (b.grad is None) == need_a


def test_the_gradient_of_a_transposed_weight_comes_back_in_the_weights_layout():
    """x @ W.T: the gradient reaching W.T is (Gᵀ x)ᵀ, the transpose of a C-contiguous array of
    W's shape, so Transpose's backward gives W a contiguous gradient without a copy; for a
    plain (contiguous) b it is Aᵀ G, itself C-contiguous."""
    rng = np.random.default_rng(9)
    w0, x0 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    w = T(w0, requires_grad=True)
    wt = w.T
    wt.retain_grad()
    (T(x0) @ wt).sum().backward()
    assert wt.grad.stride() == (1, 3) and wt.grad.T.is_contiguous()
    np.testing.assert_allclose(w.grad.numpy(), np.ones((4, 5)) @ x0, rtol=1e-12)
    b = T(w0.T.copy(), requires_grad=True)
    (T(x0) @ b).sum().backward()
    assert b.grad.is_contiguous()
    b2 = T(w0.T.copy(), requires_grad=True) * 1.0  # a non-leaf: its retained gradient is the op's own result
    b2.retain_grad()
    (T(x0) @ b2).sum().backward()
    assert b2.grad.is_contiguous()
    np.testing.assert_allclose(b.grad.numpy(), x0.T @ np.ones((5, 4)), rtol=1e-12)


def test_matmul_errors():
    with pytest.raises(RuntimeError, match=r"^matmul: both arguments need at least 1 dimension, but they have 0 and 1 \(shapes \[\] and \[3\]\); use \* for scaling by a scalar$"):
        F.matmul(T(2.0), T([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match=r"^matmul: shapes \[2, 3\] and \[4\] cannot be multiplied \(inner dimensions 3 != 4\)"):
        F.matmul(T(np.ones((2, 3))), T(np.ones(4)))
    with pytest.raises(RuntimeError, match=r"^matmul: shapes \[2, 2, 3\] and \[4, 5\] cannot be multiplied \(inner dimensions 3 != 4\)"):
        F.matmul(T(np.ones((2, 2, 3))), T(np.ones((4, 5))))
    with pytest.raises(RuntimeError, match=r"^matmul: batch dimensions of \[2, 2, 3\] and \[3, 3, 4\] do not broadcast"):
        F.matmul(T(np.ones((2, 2, 3))), T(np.ones((3, 3, 4))))
    with pytest.raises(RuntimeError, match=r"^expected m1 and m2 to have the same dtype, but got: float != double"):
        F.matmul(mt.ones(2, 2), T(np.ones((2, 2))))
    with pytest.raises(NotImplementedError, match="matmul is not implemented for 'Bool' tensors"):
        F.matmul(mt.tensor([[True]]), mt.tensor([[False]]))
    assert F.matmul(T(np.eye(2)), [[1.0, 2.0], [3.0, 4.0]]).tolist() == [[1.0, 2.0], [3.0, 4.0]]  # a list operand


# -- reduction.py: max/min along a dim ----------------------------------------------------------------
def test_max_and_min_along_a_dim_send_the_gradient_to_the_first_extreme():
    a = np.array([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]])
    x = T(a, requires_grad=True)
    v, i = F.max(x, 1, keepdim=True)
    assert v.shape == (2, 1) and i.shape == (2, 1) and i.dtype == mt.int64 and i.tolist() == [[1], [0]]
    (v * T([[2.0], [3.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 2, 0], [3, 0, 0]])
    x = T(a, requires_grad=True)
    v, i = F.min(x, -2)
    assert v.tolist() == [1.0, 0.0, 5.0] and i.tolist() == [0, 1, 0]
    (v * T([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 0, 3], [0, 2, 0]])
    v, i = F.max(T(a), 0)
    assert v.tolist() == [7.0, 5.0, 7.0] and i.tolist() == [1, 0, 1]
    assert F.max(T(a)).item() == 7.0 and F.min(T(a)).item() == 0.0


def test_max_min_errors():
    with pytest.raises(IndexError, match=r"^max\(\): a 0-d tensor has no dimension 0; use max\(\) without dim"):
        F.max(T(3.0), 0)
    with pytest.raises(IndexError, match=r"^min\(\): a 0-d tensor has no dimension -1"):
        F.min(T(3.0), -1)
    with pytest.raises(IndexError, match=r"^max\(\): cannot reduce over dimension 0, which has size 0"):
        F.max(T(np.zeros((0, 3))), 0)
    with pytest.raises(IndexError, match=r"^min\(\): cannot reduce over dimension -2, which has size 0"):
        F.min(T(np.zeros((0, 3))), -2)
    with pytest.raises(RuntimeError, match=r"Expected reduction dim to be specified for input.numel\(\) == 0"):
        F.amax(T(np.zeros((0, 3))), 1)
    with pytest.raises(IndexError, match=r"^min: Dimension out of range"):
        F.min(T(np.zeros((2, 3))), 2)
    with pytest.raises(IndexError, match=r"^min: Dimension out of range"):
        F.amin(T(np.zeros((2, 3))), 2)


def test_sum_and_mean_keepdim_shapes_and_gradients():
    a = np.arange(24.0).reshape(2, 3, 4)
    for dim in (None, 1, (0, 2), (-1,)):
        for keepdim in (False, True):
            want = a.sum(axis=dim, keepdims=keepdim)
            assert F.sum(T(a), dim, keepdim).shape == want.shape
            x = T(a, requires_grad=True)
            w = np.arange(want.size, dtype=float).reshape(want.shape) + 1
            (F.mean(x, dim, keepdim) * T(w)).sum().backward()
            n = a.size // want.size
            spread = np.broadcast_to(w if keepdim else np.expand_dims(w, dim if dim is not None else (0, 1, 2)),
                                     a.shape) / n
            np.testing.assert_allclose(x.grad.numpy(), spread, rtol=1e-15)
    assert F.sum(T(a), dtype=mt.float32).dtype == mt.float32
    assert F.mean(mt.tensor([1, 2]), dtype=mt.float64).item() == 1.5
    with pytest.raises(RuntimeError, match=r"^mean\(\): could not infer output dtype"):
        F.mean(mt.tensor([1, 2]))


def test_the_op_classes_defaults_reduce_everything_without_keepdim():
    """Function.apply with only the required arguments: the defaults in each forward's
    signature (all dims, no keepdim, the maximum, NaNs not hits, no bias, dim 0)."""
    from microtorch.functions.linalg import Linear
    from microtorch.functions.reduction import Amax, Mean, Sum
    from microtorch.functions.shape import Cat, Index
    a = np.array([[1.0, 4.0], [np.nan, 2.0]])
    assert Sum.apply(T(a[1:])).shape == () and Sum.apply(T(a[:1])).item() == 5.0
    assert Mean.apply(T(a[:1])).shape == () and Mean.apply(T(a[:1])).item() == 2.5
    m = Amax.apply(T(a[:1]))
    assert m.shape == () and m.item() == 4.0
    x = T(a, requires_grad=True)
    Amax.apply(x).backward()  # nan_hits=False: amax's rule, no element marked
    assert np.isnan(x.grad.numpy()).all()
    w = T(np.ones((3, 2)))
    np.testing.assert_array_equal(Linear.apply(T(a[:1]), w).numpy(), [[5.0, 5.0, 5.0]])
    assert Index.apply(T(a), (0, 1)).item() == 4.0
    assert Cat.apply(T(a[:1]), T(a[:1])).shape == (2, 2)


def test_cross_entropy_of_1d_logits_takes_every_kind_of_target():
    """(C,) logits: ℓ = log Σⱼ exp(xⱼ) − x_t, a 0-d result for every reduction; a float target of
    the logits' shape is a probability vector: ℓ = −Σⱼ pⱼ log softmax(x)ⱼ."""
    x0 = np.array([1.0, 2.0, 3.0])
    lse = np.log(np.exp(x0).sum())
    for t in (2, np.int64(2), mt.tensor(2), [2], np.array(2), mt.tensor([2])):
        for reduction in ("mean", "sum", "none"):
            got = F.cross_entropy(T(x0), t, reduction=reduction)
            assert got.shape == ()
            np.testing.assert_allclose(got.item(), lse - 3.0, rtol=1e-14)
    assert F.cross_entropy(T(x0), mt.tensor(-100), reduction="none").item() == 0.0
    smoothed = F.cross_entropy(T(x0), mt.tensor(0), label_smoothing=0.3).item()
    np.testing.assert_allclose(smoothed, 0.7 * (lse - 1.0) + 0.1 * (3 * lse - 6.0), rtol=1e-14)
    p = np.array([0.2, 0.3, 0.5])
    for reduction in ("mean", "sum", "none"):
        got = F.cross_entropy(T(x0), T(p), reduction=reduction)
        assert got.shape == ()
        np.testing.assert_allclose(got.item(), -(p * (x0 - lse)).sum(), rtol=1e-14)
    with pytest.raises(RuntimeError, match=r"expected a probability target of dtype float64 \(the input's\), got float32"):
        F.cross_entropy(T(x0), mt.tensor(p, dtype=mt.float32))
    with pytest.raises(ValueError, match="a probability target must have the input's shape"):
        F.cross_entropy(T(np.ones((2, 3))), T(np.ones((2, 4)) / 4))
    with pytest.raises(TypeError, match="target must hold integer class indices"):
        F.cross_entropy(T(np.ones((2, 3))), T([0.0, 1.0]))  # float, but not of the logits' rank: indices


def test_index_tensors_are_saved_for_their_versions_and_mixed_keys_accumulate():
    x = T(np.arange(12.0).reshape(3, 4), requires_grad=True)
    idx = mt.tensor([0, 2])
    y = x[idx]
    idx.add_(1)  # the index changed before backward: the version error, not a wrong scatter
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x = T(np.arange(12.0).reshape(3, 4), requires_grad=True)
    x[[0, 0, 2], 1:3].sum().backward()  # an array and a slice: repeated rows still add up
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 2, 2, 0], [0, 0, 0, 0], [0, 1, 1, 0]])
    x = T(np.arange(12.0).reshape(3, 4), requires_grad=True)
    x[mt.tensor([1, 1]), mt.tensor([0, 0])].sum().backward()
    assert x.grad.numpy()[1, 0] == 2.0 and x.grad.numpy().sum() == 2.0


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_an_ignored_row_holding_minus_inf_contributes_nothing(label_smoothing):
    """A masked logit (−inf) in an ignored row: that row is 0, not NaN (−inf · 0), as in PyTorch;
    the kept row's loss and gradient are those of cross-entropy on that row alone. In float32."""
    lg = [[-np.inf, 0.0], [1.0, 2.0]]
    row = np.array([1.0, 2.0])
    logp = row - np.log(np.exp(row).sum())
    kept_loss = -(1 - label_smoothing) * logp[1] - label_smoothing / 2 * logp.sum()
    for reduction, want in (("none", [0.0, kept_loss]), ("sum", kept_loss), ("mean", kept_loss)):
        got = F.cross_entropy(mt.tensor(lg), mt.tensor([-100, 1]), reduction=reduction, label_smoothing=label_smoothing)
        assert got.dtype == mt.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    if label_smoothing == 0.0:
        got = F.nll_loss(mt.tensor(lg), mt.tensor([-100, 1]), reduction="none")
        assert got.dtype == mt.float32 and got.tolist() == [0.0, -2.0]
    x = mt.tensor(lg, requires_grad=True)
    F.cross_entropy(x, mt.tensor([-100, 1]), label_smoothing=label_smoothing).backward()
    s = np.exp(logp)
    want_row = s - ((1 - label_smoothing) * np.array([0.0, 1.0]) + label_smoothing / 2)
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0], want_row], rtol=1e-6, atol=1e-7)


def test_linear_refuses_a_3d_weight_whose_middle_size_matches():
    """W (4, 3, 5) with x (2, 3): in_features lines up with W's dim 1, but W must be 2-D."""
    with pytest.raises(RuntimeError, match=r"^linear: weight must be 2-D \(out_features, in_features\), got shape \[4, 3, 5\]"):
        F.linear(mt.ones(2, 3), mt.ones(4, 3, 5))


def test_linear_mismatched_in_features_is_linears_error_not_numpys():
    with pytest.raises(RuntimeError, match=r"^linear: input of shape \[2, 3\] and weight of shape \[4, 5\] cannot be multiplied"):
        F.linear(mt.ones(2, 3), mt.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"the input's last dimension is 3, the weight's is 5"):
        F.linear(mt.ones(2, 3), mt.ones(4, 5), mt.ones(4))
