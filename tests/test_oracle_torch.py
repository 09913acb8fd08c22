"""PyTorch as the oracle: forward values and gradients of microtorch match torch's (float64).

Random programs (tests/_programs.py) compose the ops on random shapes with broadcasting and
shared subexpressions; each op is also compared on its own, including the points where
an op is not differentiable (ties, zeros, clamp bounds), where PyTorch's conventions are
the ones to match. Skipped, with the reason shown, when torch is not installed.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import microtorch as mt

from _programs import MicrotorchBackend, random_program

try:
    import torch
except ModuleNotFoundError:
    torch = None

# Every test here runs torch; each one (not the module) is marked to skip without it.
pytestmark = [pytest.mark.oracle,
              pytest.mark.skipif(torch is None, reason="PyTorch oracle not installed: pip install -e '.[oracle]'")]


class TorchBackend:
    F = torch

    def leaf(self, a):
        return torch.tensor(a, dtype=torch.float64, requires_grad=True)

    def const(self, a):
        return torch.tensor(a, dtype=torch.float64)


def as_np(t):
    if t is None:
        return None
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def assert_close(ours, theirs, what="", rtol=1e-7, atol=1e-9):
    if theirs is None or ours is None:
        assert ours is None and theirs is None, f"{what}: one gradient is None and the other not"
        return
    a, b = as_np(ours), as_np(theirs)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs torch {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


# -- random programs ----------------------------------------------------------------------------
@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(4, 16), st.integers(1, 3))
def test_random_programs_match_torch(seed, n_steps, n_leaves):
    prog = random_program(seed, n_steps, n_leaves)
    ours, loss = prog.run(MicrotorchBackend())
    theirs, tloss = prog.run(TorchBackend())
    text = prog.describe()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_close(a, b, f"forward value v{i} of\n{text}")
    assert_close(loss, tloss, f"loss of\n{text}")
    # gradients w.r.t. every value, leaves and intermediates alike
    grads = mt.grad(loss, ours, allow_unused=True, retain_graph=True)
    tgrads = torch.autograd.grad(tloss, theirs, allow_unused=True)
    for i, (g, tg) in enumerate(zip(grads, tgrads)):
        assert_close(g, tg, f"gradient of v{i} in\n{text}")
    # and .backward() into the leaves agrees with mt.grad
    loss.backward()
    for i in prog.leaf_indices:
        assert_close(ours[i].grad, tgrads[i], f"leaf v{i}.grad in\n{text}")


# -- each op on its own -------------------------------------------------------------------------
def run_both(fn, *arrays, grad_out_seed=0):
    """fn(F, *leaves) on both libraries; compare the output and the gradients of every input."""
    xs = [mt.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    ts = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out, tout = fn(mt, *xs), fn(torch, *ts)
    assert_close(out, tout, "forward")
    v = np.random.default_rng(grad_out_seed).standard_normal(tout.shape)
    (out * mt.tensor(v)).sum().backward()
    (tout * torch.tensor(v)).sum().backward()
    for k, (x, t) in enumerate(zip(xs, ts)):
        assert_close(x.grad, t.grad, f"gradient of input {k}")
    return out, tout


pairs = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)
seeds = st.integers(0, 2**32 - 1)

BINARY = {
    "add": lambda F, a, b: a + b,
    "sub": lambda F, a, b: F.sub(a, b),
    "mul": lambda F, a, b: F.mul(a, b),
    "div": lambda F, a, b: a / b,
    "maximum": lambda F, a, b: F.maximum(a, b),
    "minimum": lambda F, a, b: F.minimum(a, b),
    "where": lambda F, a, b: F.where(a.detach() > b.detach(), a, b),
}


@pytest.mark.parametrize("name", list(BINARY))
@settings(max_examples=15, deadline=None)
@given(shapes=pairs, seed=seeds)
def test_binary_ops_with_broadcasting(name, shapes, seed):
    (sa, sb), _ = shapes
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(sa)
    b = rng.standard_normal(sb) + (3 if name == "div" else 0)
    run_both(BINARY[name], a, b)


def test_maximum_minimum_ties_split_the_gradient_like_torch():
    a = [[1.0, 2.0, 3.0], [0.0, 5.0, -1.0]]
    b = [[1.0, 0.0, 3.0], [0.0, 6.0, -1.0]]
    run_both(lambda F, x, y: F.maximum(x, y), a, b)
    run_both(lambda F, x, y: F.minimum(x, y), a, b)
    run_both(lambda F, x: F.maximum(x, x), a)


UNARY = {
    "exp": lambda F, x: F.exp(x),
    "log": lambda F, x: F.log(x.abs() + 0.1),
    "sqrt": lambda F, x: F.sqrt(x.abs() + 0.1),
    "tanh": lambda F, x: F.tanh(x),
    "sigmoid": lambda F, x: F.sigmoid(x * 30),  # saturates on both sides
    "relu": lambda F, x: F.relu(x),
    "abs": lambda F, x: F.abs(x),
    "neg": lambda F, x: F.neg(x),
    "clamp": lambda F, x: F.clamp(x, -0.5, 0.5),
    "clamp_min": lambda F, x: F.clamp(x, min=0.0),
    "clamp_max": lambda F, x: x.clamp(max=0.25),
    "pow2": lambda F, x: x ** 2,
    "pow3": lambda F, x: F.pow(x, 3),
    "pow0": lambda F, x: x ** 0,
    "pow1": lambda F, x: x ** 1,
    "pow_half": lambda F, x: (x.abs() + 0.1) ** 0.5,
    "pow_neg": lambda F, x: (x.abs() + 0.1) ** -1.5,
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ops(name):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4))
    # exactly the non-differentiable points too: PyTorch's conventions there are the ones to match
    x[0, :4] = [0.0, -0.5, 0.5, 0.25]
    run_both(UNARY[name], x)


def test_sigmoid_and_exp_at_extreme_values():
    x = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    run_both(lambda F, t: F.sigmoid(t), x)
    run_both(lambda F, t: F.tanh(t), x)


MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)),
    ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
    ((3,), (2, 3, 4)), ((2, 4, 3), (3,)), ((1, 2, 3), (6, 3, 1)),
]


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    run_both(lambda F, a, b: F.matmul(a, b), rng.standard_normal(sa), rng.standard_normal(sb))
    run_both(lambda F, a, b: a @ b, rng.standard_normal(sa), rng.standard_normal(sb))


LINEAR_SHAPES = [  # x, W, b (None: no bias)
    ((4, 3), (5, 3), (5,)), ((4, 3), (5, 3), None), ((3,), (5, 3), (5,)), ((3,), (5, 3), None),
    ((2, 4, 3), (5, 3), (5,)), ((2, 1, 4, 3), (2, 3), None), ((4, 3), (5, 3), (1,)),
    ((4, 3), (5, 3), (4, 5)), ((4, 3), (3,), None),
]


@pytest.mark.parametrize("sx, sw, sb", LINEAR_SHAPES, ids=[f"{x}x{w}+{b}" for x, w, b in LINEAR_SHAPES])
def test_linear(sx, sw, sb):
    rng = np.random.default_rng(len(sx) * 10 + len(sw))
    arrays = [rng.standard_normal(s) for s in (sx, sw, sb) if s is not None]
    out, _ = run_both(lambda F, *a: (mt.nn.functional if F is mt else torch.nn.functional).linear(*a), *arrays)
    if len(sw) == 2:
        assert out.grad_fn.name == "LinearBackward"  # one node per layer (PyTorch: AddmmBackward0, ...)


REDUCTIONS = {
    "sum": lambda F, x: x.sum(),
    "sum1": lambda F, x: x.sum(1),
    "sum_keep": lambda F, x: x.sum(-1, keepdim=True),
    "sum_tuple": lambda F, x: F.sum(x, (0, 2)),
    "mean": lambda F, x: x.mean(),
    "mean_tuple_keep": lambda F, x: x.mean((0, -1), keepdim=True),
    "amax": lambda F, x: x.amax((1, 2)),
    "amin_keep": lambda F, x: F.amin(x, 0, keepdim=True),
    "max_all": lambda F, x: x.max(),
    "min_all": lambda F, x: x.min(),
    "var": lambda F, x: x.var(),
    "var_dim": lambda F, x: x.var(1),
    "var_biased": lambda F, x: x.var(dim=(0, 2), unbiased=False),
    "var_keep": lambda F, x: F.var(x, -1, keepdim=True),
    "var_correction": lambda F, x: x.var(0, correction=0),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_reductions(name, ties):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4))
    if ties:  # repeated maxima/minima: max/amax split the gradient evenly, like torch
        x = np.round(x)
        x[:, :, 0] = x[:, :, 1] = 5.0
        x[1, 2, 3] = -7.0
        x[0, 0, :] = -7.0
    run_both(REDUCTIONS[name], x)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_dim_return_values_and_indices(op, dim, keepdim):
    x = np.random.default_rng(3).permutation(24).reshape(2, 3, 4).astype(np.float64)  # no ties
    ours, theirs = run_both(lambda F, t: getattr(t, op)(dim, keepdim=keepdim).values, x)
    r = getattr(mt.tensor(x), op)(dim, keepdim=keepdim)
    tr = getattr(torch.tensor(x), op)(dim, keepdim=keepdim)
    values, indices = r  # a named pair, unpackable like torch.return_types.max
    np.testing.assert_array_equal(values.numpy(), tr.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), tr.indices.numpy())
    assert indices.dtype == mt.int64 and r[1] is indices
    np.testing.assert_array_equal(getattr(mt.tensor(x), "arg" + op)(dim).numpy(),
                                  getattr(torch.tensor(x), "arg" + op)(dim).numpy())
    assert getattr(mt.tensor(x), "arg" + op)().item() == getattr(torch.tensor(x), "arg" + op)().item()


def test_var_unbiased_default_matches_torch():
    x = np.random.default_rng(4).standard_normal((5, 3))
    assert mt.tensor(x).var().item() == pytest.approx(torch.tensor(x).var().item(), rel=1e-12)
    assert mt.tensor(x).var().item() == pytest.approx(np.var(x, ddof=1), rel=1e-12)
    np.testing.assert_allclose(mt.tensor(x).var(0).numpy(), torch.tensor(x).var(0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(mt.tensor(x).var(1, unbiased=False).numpy(),
                               torch.tensor(x).var(1, unbiased=False).numpy(), rtol=1e-12)


SHAPE_OPS = {
    "reshape": lambda F, x: x.reshape(4, 6),
    "reshape_-1": lambda F, x: F.reshape(x, (-1, 3)),
    "view": lambda F, x: x.view(2, 12),
    "flatten": lambda F, x: x.flatten(),
    "flatten_1": lambda F, x: F.flatten(x, 1),
    "transpose": lambda F, x: x.transpose(0, 2),
    "permute": lambda F, x: x.permute(2, 0, 1),
    "mT": lambda F, x: x.mT,
    "unsqueeze": lambda F, x: x.unsqueeze(1),
    "unsqueeze_-1": lambda F, x: F.unsqueeze(x, -1),
    "squeeze": lambda F, x: x[:, :1].squeeze(),
    "squeeze_dim": lambda F, x: x[:, :1].squeeze(1),
    "squeeze_noop": lambda F, x: x.squeeze(0),
    "expand": lambda F, x: x[:, :1].expand(5, 2, 3, 4),
    "expand_-1": lambda F, x: x[:, :1].expand(-1, 2, -1),
    "broadcast_to": lambda F, x: F.broadcast_to(x[0], (3, 3, 4)),
    "transpose_reshape": lambda F, x: x.transpose(0, 1).reshape(-1),
    "int": lambda F, x: x[1],
    "slices": lambda F, x: x[:, 1:, ::2],
    "negative": lambda F, x: x[-1, -2:],
    "ellipsis_none": lambda F, x: x[..., None, 0],
    "int_array": lambda F, x: x[[0, 1, 0, 0]],
    "int_array_dim1": lambda F, x: x[:, [2, 2, 0]],
    "int_arrays_pairs": lambda F, x: x[[0, 1, 1], [2, 0, 2]],
    "int_array_and_slice": lambda F, x: x[[1, 1], 1:],
    "bool_mask": lambda F, x: x[x.detach() > 0],
    "cat0": lambda F, x: F.cat([x, x * 2], 0),
    "cat_-1": lambda F, x: F.cat([x, x[..., :1], x], dim=-1),
    "stack": lambda F, x: F.stack([x, x.exp()]),
    "stack_-1": lambda F, x: F.stack([x, x, x * 3], dim=-1),
}


@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_and_indexing_ops(name):
    x = np.random.default_rng(5).standard_normal((2, 3, 4))
    run_both(SHAPE_OPS[name], x)


def test_index_with_a_tensor_of_indices():
    x = np.random.default_rng(6).standard_normal((4, 3))
    run_both(lambda F, t: t[F.tensor([3, 0, 3])], x)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim):
    x = np.random.default_rng(7).standard_normal((3, 4)) * 5
    x[0, 0] = 800.0  # stable for large logits
    run_both(lambda F, t: F.softmax(t, dim), x)
    run_both(lambda F, t: F.log_softmax(t, dim), x)
    run_both(lambda F, t: t.softmax(dim), x)
    run_both(lambda F, t: t.log_softmax(dim=dim), x)


def _ce(F, logits, target, reduction):
    if F is mt:
        return mt.cross_entropy(logits, mt.tensor(target), reduction=reduction)
    return torch.nn.functional.cross_entropy(logits, torch.tensor(target), reduction=reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction):
    rng = np.random.default_rng(8)
    logits = rng.standard_normal((5, 4)) * 3
    target = np.array([0, 3, 3, 1, 2])
    run_both(lambda F, z: _ce(F, z, target, reduction), logits)
    run_both(lambda F, z: _ce(F, z, np.int64(2), reduction), logits[0])  # unbatched (C,)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    rng = np.random.default_rng(9)
    logp = rng.standard_normal((4, 3))
    target = np.array([2, 0, 2, 1])

    def nll(F, x):
        if F is mt:
            return mt.nll_loss(mt.log_softmax(x, 1), mt.tensor(target), reduction)
        return torch.nn.functional.nll_loss(torch.log_softmax(x, 1), torch.tensor(target), reduction=reduction)

    run_both(nll, logp)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def mse(F, x, y):
        f = mt.mse_loss if F is mt else torch.nn.functional.mse_loss
        return f(x, y, reduction=reduction)

    run_both(mse, a, b)


def test_second_derivative_matches_torch():
    x = np.random.default_rng(11).standard_normal((3,))

    def hessian_vector(F, t):
        grad = mt.grad if F is mt else torch.autograd.grad
        y = (F.tanh(t) * t.exp()).sum() + (t ** 3).sum()
        (g,) = grad(y, t, create_graph=True)
        return g * g

    run_both(hessian_vector, x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_second_derivative_of_cross_entropy_matches_torch(reduction):
    """Through CrossEntropyGrad (cross-entropy's backward, an op): a Hessian-vector product
    of the logits, and of a weight the loss is scaled by."""
    rng = np.random.default_rng(12)
    logits, w = rng.standard_normal((5, 4)) * 2, rng.uniform(0.5, 1.5, 5 if reduction == "none" else ())
    target, v = np.array([0, 3, 3, 1, 2]), rng.standard_normal((5, 4))

    def hvp(F, z, a):
        grad = mt.grad if F is mt else torch.autograd.grad
        (g,) = grad((_ce(F, z, target, reduction) * a).sum(), z, create_graph=True)
        return g * (mt.tensor(v) if F is mt else torch.tensor(v))

    run_both(hvp, logits, w)


def test_float32_programs_close_to_torch():
    """The default dtype path (float32) agrees with torch's float32 to float32 precision."""
    for seed in range(10):
        prog = random_program(seed, 10, 2)

        class T32(TorchBackend):
            def leaf(self, a):
                return torch.tensor(a, dtype=torch.float32, requires_grad=True)

            def const(self, a):
                return torch.tensor(a, dtype=torch.float32)

        ours, loss = prog.run(MicrotorchBackend(np.float32))
        theirs, tloss = prog.run(T32())
        assert loss.dtype == mt.float32
        loss.backward()
        tloss.backward()
        for i in prog.leaf_indices:
            assert_close(ours[i].grad, theirs[i].grad, f"seed {seed} leaf v{i}", rtol=1e-3, atol=1e-4)


# -- dtypes -------------------------------------------------------------------------------------
DTYPES = ["bool", "int32", "int64", "float32", "float64"]


def _make(lib, dtype, zero_dim):
    data = 1 if zero_dim else [1, 0]
    if dtype == "bool":
        data = True if zero_dim else [True, False]
    return lib.tensor(data, dtype=getattr(lib, dtype))


@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("db", DTYPES)
@pytest.mark.parametrize("dims", ["nd-nd", "nd-0d", "0d-nd"])
def test_binary_op_result_dtypes_follow_torch(da, db, dims):
    za, zb = dims.startswith("0d"), dims.endswith("0d")
    theirs = (_make(torch, da, za) * _make(torch, db, zb)).dtype
    ours = (_make(mt, da, za) * _make(mt, db, zb)).dtype
    assert ours.name == str(theirs).replace("torch.", "")


@pytest.mark.parametrize("dtype", DTYPES[1:])
@pytest.mark.parametrize("op", ["exp", "sqrt", "tanh", "sigmoid", "abs", "neg", "relu", "sum", "pow_half", "pow_2", "div2"])
def test_unary_op_result_dtypes_follow_torch(op, dtype):
    def run(lib):
        x = lib.tensor([1, 4], dtype=getattr(lib, dtype))
        if op == "pow_half":
            return x ** 0.5
        if op == "pow_2":
            return x ** 2
        if op == "div2":
            return x / 2
        return getattr(x, op)()
    assert run(mt).dtype.name == str(run(torch).dtype).replace("torch.", "")
