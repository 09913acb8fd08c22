"""Forward values of every op, checked against numpy formulas written out here.

Gradient checks cannot see a forward bug whose backward is consistent with it (``exp``
returning 1.5·eˣ with the gradient 1.5·eˣ passes gradcheck), and the PyTorch oracle is an
optional extra. So every public op of :mod:`microtorch.functions` and every in-place op gets a
case here: random float64 inputs (with broadcasting where the op broadcasts), the result
compared with the math in numpy. The list of ops is found by introspection: a new op without
a case here fails :func:`test_every_public_op_has_a_forward_case`.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import microtorch as mt
import microtorch.functions as F
from microtorch.functions import inplace as inplace_module


def T(a):
    return mt.tensor(np.asarray(a, dtype=np.float64))


def positive(rng, *shape):
    return rng.uniform(0.5, 2.0, shape)


def close(got, want, rtol=1e-12, atol=1e-12):
    got = got.numpy() if isinstance(got, mt.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def log_softmax_np(x, dim):
    m = x.max(axis=dim, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=dim, keepdims=True))


def reduce_np(v, reduction):
    return {"mean": v.mean(), "sum": v.sum(), "none": v}[reduction]


# -- elementwise ----------------------------------------------------------------------------------
def case_add(rng):
    a, b = rng.standard_normal((3, 1, 4)), rng.standard_normal((2, 4))
    close(F.add(T(a), T(b)), a + b)
    close(F.add(T(a), 2.5), a + 2.5)


def case_sub(rng):
    a, b = rng.standard_normal((2, 4)), rng.standard_normal((3, 1, 4))
    close(F.sub(T(a), T(b)), a - b)
    close(F.sub(T(a), 0.5), a - 0.5)


def case_mul(rng):
    a, b = rng.standard_normal((4, 1)), rng.standard_normal((1, 5))
    close(F.mul(T(a), T(b)), a * b)
    close(F.mul(T(a), -3.0), a * -3.0)


def case_div(rng):
    a, b = rng.standard_normal((2, 3, 4)), positive(rng, 3, 1)
    close(F.div(T(a), T(b)), a / b)
    close(F.div(T(a), 4.0), a / 4.0)


def case_floor_divide(rng):
    a, b = rng.uniform(-5, 5, (3, 4)), positive(rng, 4) * np.where(rng.random(4) < 0.5, -1, 1)
    close(F.floor_divide(T(a), T(b)), np.floor_divide(a, b))
    close(T(a) // T(b), np.floor_divide(a, b))
    close(F.floor_divide(T(a), 2.5), np.floor_divide(a, 2.5))


def case_remainder(rng):
    a, b = rng.uniform(-5, 5, (3, 4)), positive(rng, 4) * np.where(rng.random(4) < 0.5, -1, 1)
    close(F.remainder(T(a), T(b)), np.remainder(a, b))  # the sign of the divisor, as Python and PyTorch
    close(T(a) % T(b), np.remainder(a, b))
    close(F.remainder(T(a), -1.5), np.remainder(a, -1.5))


def case_neg(rng):
    a = rng.standard_normal((3, 4))
    close(F.neg(T(a)), -a)


def case_pow(rng):
    a = positive(rng, 3, 4)
    close(F.pow(T(a), 2.5), a ** 2.5)
    close(F.pow(T(a), 3), a ** 3)
    close(F.pow(T(a), mt.tensor(-0.5)), a ** -0.5)


def case_exp(rng):
    a = rng.standard_normal((3, 4))
    close(F.exp(T(a)), np.e ** a)


def case_log(rng):
    a = positive(rng, 3, 4)
    close(F.log(T(a)), np.log(a))
    close(F.exp(F.log(T(a))), a)


def case_sqrt(rng):
    a = positive(rng, 5)
    close(F.sqrt(T(a)), a ** 0.5)


def case_tanh(rng):
    a = rng.standard_normal((3, 4))
    close(F.tanh(T(a)), (np.exp(a) - np.exp(-a)) / (np.exp(a) + np.exp(-a)))


def case_sigmoid(rng):
    a = 3 * rng.standard_normal((3, 4))
    close(F.sigmoid(T(a)), 1 / (1 + np.exp(-a)))


def case_relu(rng):
    a = rng.standard_normal((4, 5))
    close(F.relu(T(a)), a * (a > 0))


def case_abs(rng):
    a = rng.standard_normal((4, 5))
    close(F.abs(T(a)), np.sqrt(a * a))


def case_clamp(rng):
    a = rng.standard_normal((4, 5))
    close(F.clamp(T(a), -0.5, 0.7), np.minimum(np.maximum(a, -0.5), 0.7))
    close(F.clamp(T(a), min=0.1), np.maximum(a, 0.1))
    close(F.clamp(T(a), max=-0.1), np.minimum(a, -0.1))


def case_where(rng):
    c, a, b = rng.standard_normal((3, 1)) > 0, rng.standard_normal((1, 4)), rng.standard_normal((3, 4))
    close(F.where(mt.tensor(c), T(a), T(b)), np.where(c, a, b))
    close(F.where(mt.tensor(c), T(a), 7.0), np.where(c, a, 7.0))


def case_maximum(rng):
    a, b = rng.standard_normal((3, 1)), rng.standard_normal((3, 4))
    close(F.maximum(T(a), T(b)), np.where(a > b, a, b))


def case_minimum(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    close(F.minimum(T(a), T(b)), np.where(a < b, a, b))


def case_clone(rng):
    a = rng.standard_normal((3, 4))
    x = T(a)
    y = F.clone(x)
    close(y, a)
    assert y.storage is not x.storage


# -- linear algebra ---------------------------------------------------------------------------------
def matmul_np(a, b):
    """(… n k) @ (… k m) as explicit sums, with 1-d operands promoted and dropped again."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out = (a2[..., :, :, None] * b2[..., None, :, :]).sum(axis=-2)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def case_matmul(rng):
    for sa, sb in [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 5)),
                   ((3, 4), (4,)), ((4,), (4,))]:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        close(F.matmul(T(a), T(b)), matmul_np(a, b))


def case_linear(rng):
    x, w, b = rng.standard_normal((2, 5, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    close(F.linear(T(x), T(w), T(b)), matmul_np(x, w.T) + b)
    close(F.linear(T(x), T(w)), matmul_np(x, w.T))


# -- losses -------------------------------------------------------------------------------------------
def case_softmax(rng):
    x = 3 * rng.standard_normal((4, 5))
    for dim in (0, 1, -1):
        e = np.exp(x)
        close(F.softmax(T(x), dim), e / e.sum(axis=dim, keepdims=True))


def case_log_softmax(rng):
    x = 3 * rng.standard_normal((4, 5))
    for dim in (0, 1):
        close(F.log_softmax(T(x), dim), np.log(np.exp(x) / np.exp(x).sum(axis=dim, keepdims=True)))


def case_nll_loss(rng):
    logp, target = log_softmax_np(rng.standard_normal((6, 4)), 1), rng.integers(0, 4, 6)
    picked = -logp[np.arange(6), target]
    for reduction in ("mean", "sum", "none"):
        close(F.nll_loss(T(logp), mt.tensor(target), reduction=reduction), reduce_np(picked, reduction))


def case_cross_entropy(rng):
    x, target = 2 * rng.standard_normal((6, 4)), rng.integers(0, 4, 6)
    per = np.log(np.exp(x).sum(axis=1)) - x[np.arange(6), target]
    for reduction in ("mean", "sum", "none"):
        close(F.cross_entropy(T(x), mt.tensor(target), reduction=reduction), reduce_np(per, reduction))


def case_mse_loss(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for reduction in ("mean", "sum", "none"):
        close(F.mse_loss(T(a), T(b), reduction=reduction), reduce_np((a - b) ** 2, reduction))


# -- reductions ------------------------------------------------------------------------------------------
def case_sum(rng):
    a = rng.standard_normal((2, 3, 4))
    close(F.sum(T(a)), np.add.reduce(a.ravel()))
    close(F.sum(T(a), 1), a[:, 0] + a[:, 1] + a[:, 2])
    close(F.sum(T(a), (0, 2), keepdim=True), a.sum(axis=(0, 2), keepdims=True))


def case_mean(rng):
    a = rng.standard_normal((2, 3, 4))
    close(F.mean(T(a)), a.sum() / a.size)
    close(F.mean(T(a), -1), a.sum(axis=-1) / 4)
    close(F.mean(T(a), (0, 1), keepdim=True), a.sum(axis=(0, 1), keepdims=True) / 6)


def case_amax(rng):
    a = rng.standard_normal((3, 4))
    close(F.amax(T(a)), np.sort(a.ravel())[-1])
    close(F.amax(T(a), 0), np.sort(a, axis=0)[-1])
    close(F.amax(T(a), 1, keepdim=True), np.sort(a, axis=1)[:, -1:])


def case_amin(rng):
    a = rng.standard_normal((3, 4))
    close(F.amin(T(a)), np.sort(a.ravel())[0])
    close(F.amin(T(a), 1), np.sort(a, axis=1)[:, 0])


def case_max(rng):
    a = rng.standard_normal((3, 4))
    close(F.max(T(a)), np.sort(a.ravel())[-1])
    values, indices = F.max(T(a), 1)
    close(values, np.sort(a, axis=1)[:, -1])
    assert indices.tolist() == [int(np.flatnonzero(row == row.max())[0]) for row in a]
    values, indices = F.max(T(a), 0, keepdim=True)
    assert values.shape == (1, 4) and indices.shape == (1, 4)


def case_min(rng):
    a = rng.standard_normal((3, 4))
    close(F.min(T(a)), np.sort(a.ravel())[0])
    values, indices = F.min(T(a), 0)
    close(values, np.sort(a, axis=0)[0])
    assert indices.tolist() == [int(np.flatnonzero(col == col.min())[0]) for col in a.T]


def case_var(rng):
    a = rng.standard_normal((3, 5))
    dev2 = (a - a.mean()) ** 2
    close(F.var(T(a)), dev2.sum() / (a.size - 1))
    close(F.var(T(a), unbiased=False), dev2.sum() / a.size)
    row_dev2 = (a - a.mean(axis=1, keepdims=True)) ** 2
    close(F.var(T(a), 1), row_dev2.sum(axis=1) / 4)
    close(F.var(T(a), 1, correction=0, keepdim=True), row_dev2.sum(axis=1, keepdims=True) / 5)


# -- shapes and views ------------------------------------------------------------------------------------
def case_view(rng):
    a = rng.standard_normal((2, 6))
    close(F.view(T(a), 3, 4), a.ravel().reshape(3, 4))
    close(F.view(T(a), -1), a.ravel())


def case_reshape(rng):
    a = rng.standard_normal((2, 3, 4))
    close(F.reshape(T(a), 4, -1), a.ravel().reshape(4, 6))
    close(F.reshape(F.transpose(T(a), 0, 2), 12, 2), a.transpose(2, 1, 0).ravel().reshape(12, 2))


def case_flatten(rng):
    a = rng.standard_normal((2, 3, 4))
    close(F.flatten(T(a)), a.ravel())
    close(F.flatten(T(a), 1), a.reshape(2, 12))


def case_permute(rng):
    a = rng.standard_normal((2, 3, 4))
    got = F.permute(T(a), 2, 0, 1)
    want = np.empty((4, 2, 3))
    for i, j, k in np.ndindex(2, 3, 4):
        want[k, i, j] = a[i, j, k]
    close(got, want)


def case_transpose(rng):
    a = rng.standard_normal((2, 3, 4))
    close(F.transpose(T(a), 0, 2), np.einsum("ijk->kji", a))


def case_unsqueeze(rng):
    a = rng.standard_normal((2, 3))
    close(F.unsqueeze(T(a), 1), a[:, None, :])
    close(F.unsqueeze(T(a), -1), a[:, :, None])


def case_squeeze(rng):
    a = rng.standard_normal((2, 1, 3, 1))
    close(F.squeeze(T(a)), a.reshape(2, 3))
    close(F.squeeze(T(a), 1), a.reshape(2, 3, 1))


def case_expand(rng):
    a = rng.standard_normal((3, 1))
    close(F.expand(T(a), 2, 3, 4), np.stack([np.hstack([a] * 4)] * 2))
    close(F.expand(T(a), -1, 5), np.hstack([a] * 5))


def case_broadcast_to(rng):
    a = rng.standard_normal(4)
    close(F.broadcast_to(T(a), (3, 4)), np.vstack([a] * 3))


def case_index(rng):
    a = rng.standard_normal((4, 5))
    close(F.index(T(a), (slice(1, 3), 2)), a[1:3, 2])
    close(F.index(T(a), (slice(None), slice(None, None, 2))), a[:, ::2])
    close(F.index(T(a), [3, 0, 3]), a[[3, 0, 3]])
    mask = a > 0
    close(F.index(T(a), mt.tensor(mask)), a[mask])
    close(T(a)[None, -1], a[None, -1])


def case_cat(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((1, 3))
    close(F.cat([T(a), T(b)]), np.vstack([a, b]))
    c = rng.standard_normal((2, 4))
    close(F.cat([T(a), T(c)], dim=1), np.hstack([a, c]))


def case_stack(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    close(F.stack([T(a), T(b)]), np.array([a, b]))
    close(F.stack([T(a), T(b)], dim=-1), np.dstack([a, b]))


def case_as_strided(rng):
    a = rng.standard_normal(12)
    got = F.as_strided(T(a), (3, 2), (4, 1), 1)
    close(got, [[a[1 + 4 * i + j] for j in range(2)] for i in range(3)])


def case_diagonal(rng):
    a = rng.standard_normal((3, 4))
    close(F.diagonal(T(a)), [a[i, i] for i in range(3)])
    close(F.diagonal(T(a), 1), [a[i, i + 1] for i in range(3)])
    close(F.diagonal(T(a), -1), [a[i + 1, i] for i in range(2)])


def case_unfold(rng):
    a = rng.standard_normal((2, 7))
    close(F.unfold(T(a), 1, 3, 2), [[a[r, 2 * w:2 * w + 3] for w in range(3)] for r in range(2)])


def case_unbroadcast(rng):
    g = rng.standard_normal((2, 3, 4))
    close(F.unbroadcast(T(g), (3, 1)), g.sum(axis=0).sum(axis=1, keepdims=True))
    close(F.unbroadcast(T(g), (4,)), g.sum(axis=(0, 1)))


# -- in place ---------------------------------------------------------------------------------------
def inplace(fn, a, *args):
    """Apply an in-place op to a tensor holding a; it must return that very tensor."""
    x = T(a)
    out = fn(x, *args)
    assert out is x
    return x


def case_add_(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    close(inplace(lambda x: inplace_module.add_(x, T(b)), a), a + b)
    close(inplace(lambda x: inplace_module.add_(x, T(b), alpha=-2.5), a), a - 2.5 * b)
    close(inplace(lambda x: inplace_module.add_(x, 3.0), a), a + 3)


def case_sub_(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 1))
    close(inplace(lambda x: inplace_module.sub_(x, T(b)), a), a - b)
    close(inplace(lambda x: inplace_module.sub_(x, T(b), alpha=0.5), a), a - 0.5 * b)


def case_mul_(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    close(inplace(lambda x: inplace_module.mul_(x, T(b)), a), a * b)
    close(inplace(lambda x: inplace_module.mul_(x, -2.0), a), -2 * a)


def case_div_(rng):
    a, b = rng.standard_normal((3, 4)), positive(rng, 3, 1)
    close(inplace(lambda x: inplace_module.div_(x, T(b)), a), a / b)
    close(inplace(lambda x: inplace_module.div_(x, 8.0), a), a / 8)


def case_clamp_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(lambda x: inplace_module.clamp_(x, -0.3, 0.4), a), np.minimum(np.maximum(a, -0.3), 0.4))
    close(inplace(lambda x: inplace_module.clamp_(x, min=0.2), a), np.maximum(a, 0.2))
    close(inplace(lambda x: inplace_module.clamp_(x, max=0.2), a), np.minimum(a, 0.2))


def case_relu_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(inplace_module.relu_, a), a * (a > 0))


def case_exp_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(inplace_module.exp_, a), np.e ** a)


def case_sigmoid_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(inplace_module.sigmoid_, a), 1 / (1 + np.exp(-a)))


def case_tanh_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(inplace_module.tanh_, a), (np.exp(2 * a) - 1) / (np.exp(2 * a) + 1))


def case_sqrt_(rng):
    a = positive(rng, 3, 4)
    close(inplace(inplace_module.sqrt_, a), a ** 0.5)


def case_neg_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(inplace_module.neg_, a), -a)


def case_copy_(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    close(inplace(lambda x: inplace_module.copy_(x, T(b)), a), np.vstack([b] * 3))
    close(inplace(lambda x: inplace_module.copy_(x, 2.0), a), np.full((3, 4), 2.0))


def case_fill_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(lambda x: inplace_module.fill_(x, -1.5), a), np.full((3, 4), -1.5))
    close(inplace(lambda x: inplace_module.fill_(x, mt.tensor(4.0)), a), np.full((3, 4), 4.0))


def case_zero_(rng):
    a = rng.standard_normal((3, 4))
    close(inplace(inplace_module.zero_, a), np.zeros((3, 4)))


def case_setitem(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal(5)
    want = a.copy()
    want[1] = b
    want[2:, 1::2] = 9.0
    want[[0, 3], 0] = [-1.0, -2.0]
    want[want > 1.5] = 0.0
    x = T(a)
    inplace_module.setitem(x, 1, T(b))
    inplace_module.setitem(x, (slice(2, None), slice(1, None, 2)), 9.0)
    inplace_module.setitem(x, ([0, 3], 0), T([-1.0, -2.0]))
    inplace_module.setitem(x, x > 1.5, 0.0)
    close(x, want)


CASES = {name[len("case_"):]: fn for name, fn in dict(globals()).items() if name.startswith("case_")}


def public_ops():
    """Every public op: microtorch.functions' exports and the in-place module's functions."""
    ops = {name for name in F.__all__ if callable(getattr(F, name)) and not inspect.ismodule(getattr(F, name))}
    ops |= {name for name, obj in vars(inplace_module).items()
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == inplace_module.__name__}
    ops |= {name for name, obj in vars(inplace_module).items()  # exp_, sigmoid_, ... (made by a factory)
            if not name.startswith("_") and inspect.isfunction(obj) and name.endswith("_")}
    return {name for name in ops if "__mutmut_" not in name}  # (copies `make mutate` adds)


def test_every_public_op_has_a_forward_case():
    ops = public_ops()
    assert {"add", "exp", "matmul", "cross_entropy", "unfold", "add_", "exp_", "setitem"} <= ops
    missing = ops - set(CASES)
    assert not missing, f"ops without a forward-value case in {__name__}: {sorted(missing)}"
    assert not set(CASES) - ops, f"cases for ops that are not public: {sorted(set(CASES) - ops)}"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_values_match_numpy(name, seed):
    CASES[name](np.random.default_rng([seed, len(name)]))
