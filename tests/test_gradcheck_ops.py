"""Every differentiable op's backward agrees with central differences (float64).

Shapes come from hypothesis (small, so each check stays cheap), operands of binary ops are
drawn as mutually broadcastable shapes, and input values come from a seeded generator and
are moved away from the points where an op is not differentiable (0 for relu/abs, ties for
maximum/minimum/max, the clamp bounds).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import microtorch as mt

OPS = settings(max_examples=25, deadline=None)

seeds = st.integers(0, 2**32 - 1)
shapes = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
nonempty_shapes = array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)
pairs = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3)


def leaf(array) -> mt.Tensor:
    return mt.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def normal(seed, shape, lo_abs=0.0):
    """Standard normal values (float64) whose magnitude is at least ``lo_abs``."""
    a = np.random.default_rng(seed).standard_normal(shape)
    return np.where(a >= 0, a + lo_abs, a - lo_abs)


def positive(seed, shape, lo=0.5):
    return lo + np.random.default_rng(seed).random(shape) * 2


def distinct(seed, shape, gap=0.1):
    """Values whose pairwise differences are all at least ``gap`` (no ties anywhere)."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    return (rng.permutation(n) * gap * 3 - n * gap + rng.random(n) * gap).reshape(shape)


def check(fn, *arrays):
    assert mt.gradcheck(fn, [leaf(a) for a in arrays])


# -- the checker itself can fail ----------------------------------------------------------------
class WrongSquare(mt.Function):
    """x² with a backward that is right everywhere except at flat element 5."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._data ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        wrong = np.full(x.shape, 2.0)
        wrong.reshape(-1)[5] = 3.0
        return g * x * mt.tensor(wrong, dtype=mt.float64)


class RightSquare(WrongSquare):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x * 2


def test_gradcheck_fails_on_a_wrong_backward_and_names_the_element():
    x = leaf(positive(0, (2, 3)))
    with pytest.raises(mt.GradcheckError) as e:
        mt.gradcheck(WrongSquare.apply, [x])
    msg = str(e.value)
    assert "[1, 2]" in msg  # flat element 5 of a (2, 3) tensor
    assert "[2, 3]" in msg  # the input's shape
    assert "input 0" in msg
    # the two numbers it compares: backward's (3x·v) is 3/2 of central differences' (2x·v)
    analytical, numerical = (float(m) for m in re.findall(r"give[s]? (-?[0-9.e+-]+)", msg)[:2])
    assert analytical == pytest.approx(1.5 * numerical, rel=1e-4)
    assert mt.gradcheck(WrongSquare.apply, [x], raise_exception=False) is False
    assert mt.gradcheck(RightSquare.apply, [x]) is True


def test_gradcheck_fails_on_a_wrong_gradient_of_the_second_input():
    class WrongMul(mt.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a._data * b._data

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * b  # second should be g * a

    a, b = leaf(positive(1, (3,))), leaf(positive(2, (3,)) + 3)
    with pytest.raises(mt.GradcheckError, match="input 1"):
        mt.gradcheck(WrongMul.apply, [a, b])


def test_gradcheck_refuses_float32_and_no_grad_inputs():
    with pytest.raises(TypeError, match="float64"):
        mt.gradcheck(lambda x: x * 2, [mt.ones(3, requires_grad=True)])
    with pytest.raises(ValueError, match="requires grad"):
        mt.gradcheck(lambda x: x * 2, [mt.ones(3, dtype=mt.float64)])


# -- elementwise binary ops, with broadcasting ------------------------------------------------
@OPS
@given(pairs, seeds)
def test_add_sub_mul(shapes_, seed):
    (sa, sb), _ = shapes_
    a, b = normal(seed, sa), normal(seed + 1, sb)
    check(lambda x, y: x + y, a, b)
    check(lambda x, y: x - y, a, b)
    check(lambda x, y: x * y, a, b)
    check(lambda x, y: mt.add(mt.mul(x, y), mt.sub(y, x)), a, b)


@OPS
@given(pairs, seeds)
def test_div(shapes_, seed):
    (sa, sb), _ = shapes_
    check(lambda x, y: x / y, normal(seed, sa), normal(seed + 1, sb, lo_abs=0.5))
    check(mt.div, normal(seed, sa), normal(seed + 1, sb, lo_abs=0.5))


@OPS
@given(shapes, seeds, st.sampled_from([2.5, 1.0, -3.0]))
def test_ops_with_python_scalars(shape, seed, c):
    a = normal(seed, shape, lo_abs=0.5)
    check(lambda x: x + c, a)
    check(lambda x: c - x, a)
    check(lambda x: x * c, a)
    check(lambda x: c / x, a)
    check(lambda x: x / c, a)
    check(lambda x: -x, a)
    check(mt.neg, a)


@OPS
@given(pairs, seeds)
def test_maximum_minimum(shapes_, seed):
    (sa, sb), _ = shapes_
    vals = distinct(seed, (2, int(np.prod(np.broadcast_shapes(sa, sb)))))  # 2n values, no ties
    a = vals[0][:int(np.prod(sa))].reshape(sa)
    b = vals[1][:int(np.prod(sb))].reshape(sb)
    check(mt.maximum, a, b)
    check(mt.minimum, a, b)


@OPS
@given(mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3), seeds)
def test_where(shapes_, seed):
    (sc, sa, sb), _ = shapes_
    cond = mt.tensor(np.random.default_rng(seed).random(sc) > 0.5)
    check(lambda x, y: mt.where(cond, x, y), normal(seed, sa), normal(seed + 1, sb))
    check(lambda x: mt.where(cond, x, 0.5), normal(seed, sa))


# -- elementwise unary ops ----------------------------------------------------------------------
@OPS
@given(shapes, seeds)
def test_smooth_unary(shape, seed):
    a = normal(seed, shape)
    check(mt.exp, a)
    check(mt.tanh, a)
    check(mt.sigmoid, a)
    check(lambda x: x.exp().tanh().sigmoid(), a)
    check(lambda x: mt.sigmoid(x * 20), a)  # steep: both branches of the stable formula


@OPS
@given(shapes, seeds)
def test_log_sqrt_on_positive_inputs(shape, seed):
    a = positive(seed, shape)
    check(mt.log, a)
    check(mt.sqrt, a)
    check(lambda x: x.log().sqrt(), a + 1)


@OPS
@given(shapes, seeds, st.sampled_from([2, 3, 0.5, -1, 1.5, -2.5, 1, 0]))
def test_pow_scalar_exponent(shape, seed, p):
    a = positive(seed, shape)
    check(lambda x: x ** p, a)
    check(lambda x: mt.pow(x, p), a)
    if isinstance(p, int):
        check(lambda x: x ** p, normal(seed, shape, lo_abs=0.3))  # integer powers of negatives


@OPS
@given(shapes, seeds)
def test_relu_abs_away_from_zero(shape, seed):
    a = normal(seed, shape, lo_abs=0.1)
    check(mt.relu, a)
    check(mt.abs, a)
    check(lambda x: abs(x), a)


@OPS
@given(shapes, seeds, st.sampled_from([(-0.5, 0.5), (None, 0.3), (-0.2, None)]))
def test_clamp_away_from_bounds(shape, seed, bounds):
    lo, hi = bounds
    a = normal(seed, shape)
    for bound in bounds:
        if bound is not None:
            a = np.where(np.abs(a - bound) < 0.05, a + 0.1, a)
    check(lambda x: mt.clamp(x, lo, hi), a)
    check(lambda x: x.clamp(min=lo, max=hi), a)


# -- matmul -------------------------------------------------------------------------------------
dims = st.integers(1, 3)


@OPS
@given(dims, dims, dims, seeds)
def test_matmul_1d_and_2d(n, k, m, seed):
    check(mt.matmul, normal(seed, (k,)), normal(seed + 1, (k,)))        # dot
    check(mt.matmul, normal(seed, (n, k)), normal(seed + 1, (k, m)))    # matrix
    check(mt.matmul, normal(seed, (k,)), normal(seed + 1, (k, m)))      # vector @ matrix
    check(mt.matmul, normal(seed, (n, k)), normal(seed + 1, (k,)))      # matrix @ vector
    check(lambda x, y: x @ y, normal(seed, (n, k)), normal(seed + 1, (k, m)))


@OPS
@given(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3), dims, dims, dims, seeds)
def test_matmul_batched_with_broadcast_batch_dims(batch, n, k, m, seed):
    (ba, bb), _ = batch
    check(mt.matmul, normal(seed, ba + (n, k)), normal(seed + 1, bb + (k, m)))


@OPS
@given(array_shapes(min_dims=0, max_dims=2, max_side=3), dims, dims, seeds)
def test_matmul_1d_with_nd(batch, k, m, seed):
    check(mt.matmul, normal(seed, (k,)), normal(seed + 1, batch + (k, m)))
    check(mt.matmul, normal(seed, batch + (m, k)), normal(seed + 1, (k,)))


# -- linear (x Wᵀ + b as one op) ----------------------------------------------------------------
@OPS
@given(array_shapes(min_dims=0, max_dims=2, max_side=3), dims, dims,
       st.sampled_from(["none", "vector", "one", "full"]), seeds)
def test_linear_with_batch_dims_and_any_bias(batch, k, m, bias, seed):
    """x of shape batch + (k,) — 1-D when batch is () — W (m, k), and no bias, b (m,), a
    broadcast b (1,), or one bias per output element."""
    x, w = normal(seed, batch + (k,)), normal(seed + 1, (m, k))
    if bias == "none":
        check(mt.nn.functional.linear, x, w)
        return
    b = normal(seed + 2, {"vector": (m,), "one": (1,), "full": batch + (m,)}[bias])
    check(mt.nn.functional.linear, x, w, b)
    check(lambda x, w: mt.nn.functional.linear(x, w, mt.tensor(b)), x, w)  # a constant bias
    check(lambda w, b: mt.nn.functional.linear(mt.tensor(x), w, b), w, b)  # x needs no gradient


# -- reductions ---------------------------------------------------------------------------------
@st.composite
def shape_and_dims(draw, max_dims=3):
    """A non-empty shape and a ``dim`` argument: None, an int (maybe negative) or a tuple."""
    shape = draw(array_shapes(min_dims=1, max_dims=max_dims, max_side=3))
    nd = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return shape, None
    if kind == "int":
        return shape, draw(st.integers(-nd, nd - 1))
    dims = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
    return shape, tuple(d - nd if draw(st.booleans()) else d for d in dims)


@OPS
@given(shape_and_dims(), st.booleans(), seeds)
def test_sum_mean(sd, keepdim, seed):
    shape, dim = sd
    a = normal(seed, shape)
    if dim is None:
        check(lambda x: x.sum(), a)
        check(lambda x: x.mean(), a)
        check(mt.sum, a)
    else:
        check(lambda x: x.sum(dim, keepdim=keepdim), a)
        check(lambda x: x.mean(dim=dim, keepdim=keepdim), a)
        check(lambda x: mt.mean(x, dim, keepdim), a)


@OPS
@given(shape_and_dims(), st.booleans(), seeds)
def test_amax_amin_full_and_tuple_dims(sd, keepdim, seed):
    shape, dim = sd
    a = distinct(seed, shape)
    if dim is None:
        check(lambda x: x.max(), a)
        check(lambda x: x.min(), a)
    check(lambda x: x.amax(dim, keepdim), a)
    check(lambda x: mt.amin(x, dim, keepdim), a)


@OPS
@given(nonempty_shapes, st.data(), st.booleans(), seeds)
def test_max_min_with_dim(shape, data, keepdim, seed):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = distinct(seed, shape)
    check(lambda x: x.max(dim, keepdim=keepdim).values, a)
    check(lambda x: x.min(dim=dim, keepdim=keepdim)[0], a)
    check(lambda x: mt.max(x, dim).values, a)


@OPS
@given(shape_and_dims(), st.booleans(), st.sampled_from([None, True, False]), seeds)
def test_var(sd, keepdim, unbiased, seed):
    shape, dim = sd
    n = int(np.prod(shape)) if dim is None else int(np.prod([shape[d] for d in np.atleast_1d(dim)]))
    assume(n > 1 or unbiased is False)
    a = normal(seed, shape)
    if unbiased is None:
        check(lambda x: x.var(dim, keepdim=keepdim), a)
    else:
        check(lambda x: x.var(dim, unbiased=unbiased, keepdim=keepdim), a)


# -- shape ops ----------------------------------------------------------------------------------
@OPS
@given(nonempty_shapes, seeds)
def test_reshape_view_flatten(shape, seed):
    a = normal(seed, shape)
    n = a.size
    check(lambda x: x.reshape(n), a)
    check(lambda x: x.reshape(-1, 1), a)
    check(lambda x: x.view(n, 1) * 2, a)
    check(lambda x: mt.reshape(x, (1, n)), a)
    check(lambda x: x.flatten(), a)
    check(lambda x: mt.flatten(x, start_dim=-1), a)
    check(lambda x: x.T.reshape(-1), a)  # reshape of a non-contiguous view copies


@OPS
@given(nonempty_shapes, st.data(), seeds)
def test_transpose_permute(shape, data, seed):
    a = normal(seed, shape)
    nd = len(shape)
    d0, d1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
    perm = data.draw(st.permutations(range(nd)))
    # weight each output element differently so a gradient sent to the wrong place shows
    w = mt.tensor(np.arange(1.0, a.size + 1)).reshape(mt.tensor(a).transpose(d0, d1).shape)
    check(lambda x: x.transpose(d0, d1) * w, a)
    check(lambda x: x.permute(*perm), a)
    check(lambda x: mt.permute(x, tuple(perm)), a)
    check(lambda x: x.T, a)
    if nd >= 2:
        check(lambda x: x.mT, a)


@OPS
@given(shapes, st.data(), seeds)
def test_unsqueeze_squeeze(shape, data, seed):
    a = normal(seed, shape)
    nd = len(shape)
    d = data.draw(st.integers(-nd - 1, nd))
    check(lambda x: x.unsqueeze(d), a)
    check(lambda x: x.unsqueeze(d).squeeze(d), a)
    check(lambda x: x.squeeze(), a)
    if nd:
        s = data.draw(st.integers(-nd, nd - 1))
        check(lambda x: mt.squeeze(x, s), a)


@OPS
@given(pairs, seeds)
def test_expand_broadcast_to(shapes_, seed):
    (sa, _), target = shapes_
    a = normal(seed, sa)
    # a distinct weight per copy, so a backward that forgot to sum over copies fails
    w = mt.tensor(np.random.default_rng(seed + 2).standard_normal(target))
    check(lambda x: x.expand(*target) * w, a)
    check(lambda x: mt.broadcast_to(x, target) * w, a)
    check(lambda x: x.expand(*((-1,) * len(sa) if len(sa) == len(target) else target)), a)


# -- indexing -----------------------------------------------------------------------------------
@OPS
@given(nonempty_shapes, st.data(), seeds)
def test_basic_indexing(shape, data, seed):
    a = normal(seed, shape)
    i = data.draw(st.integers(-shape[0], shape[0] - 1))
    start = data.draw(st.integers(0, shape[0] - 1))
    step = data.draw(st.integers(1, 2))
    check(lambda x: x[i], a)
    check(lambda x: x[start::step], a)
    check(lambda x: x[..., None, -1], a)
    check(lambda x: x[None, start:], a)
    if len(shape) >= 2:
        check(lambda x: x[:, 0], a)
        check(lambda x: x[i, start:], a)


@OPS
@given(nonempty_shapes, st.data(), seeds)
def test_integer_array_indexing_with_repeats(shape, data, seed):
    a = normal(seed, shape)
    idx = data.draw(st.lists(st.integers(-shape[0], shape[0] - 1), min_size=1, max_size=6))
    idx = idx + idx[:1]  # at least one repeated index: its gradient must be summed
    check(lambda x: x[mt.tensor(idx)], a)
    check(lambda x: x[idx] * mt.tensor(np.arange(1.0, len(idx) + 1)).reshape((-1,) + (1,) * (len(shape) - 1)), a)
    if len(shape) >= 2:
        j = data.draw(st.lists(st.integers(0, shape[1] - 1), min_size=len(idx), max_size=len(idx)))
        check(lambda x: x[mt.tensor(idx), mt.tensor(j)], a)  # pairs of coordinates
        check(lambda x: x[:, j], a)
    mask = np.random.default_rng(seed).random(shape) > 0.4
    check(lambda x: x[mt.tensor(mask)], a)


# -- joining ------------------------------------------------------------------------------------
@OPS
@given(nonempty_shapes, st.data(), seeds)
def test_cat_stack(shape, data, seed):
    nd = len(shape)
    d = data.draw(st.integers(-nd, nd - 1))
    other = list(shape)
    other[d] = data.draw(st.integers(1, 3))
    a, b = normal(seed, shape), normal(seed + 1, tuple(other))
    check(lambda x, y: mt.cat([x, y, x], dim=d), a, b)
    s = data.draw(st.integers(-nd - 1, nd))
    check(lambda x, y: mt.stack([x, y * 2, x], dim=s), a, normal(seed + 1, shape))
    check(lambda x: mt.stack([x]), a)


# -- softmax and losses -------------------------------------------------------------------------
@OPS
@given(nonempty_shapes, st.data(), seeds)
def test_softmax_log_softmax(shape, data, seed):
    a = normal(seed, shape) * 3
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    w = mt.tensor(np.random.default_rng(seed + 1).standard_normal(shape))
    check(lambda x: mt.softmax(x, d), a)
    check(lambda x: x.log_softmax(d), a)
    check(lambda x: mt.softmax(x, dim=d) * w, a)  # a weighted sum: the sum over dim is constant
    check(lambda x: mt.log_softmax(x, d) * w, a)


@OPS
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from(["mean", "sum", "none"]), seeds)
def test_cross_entropy(n, c, reduction, seed):
    rng = np.random.default_rng(seed)
    target = mt.tensor(rng.integers(0, c, n))
    check(lambda x: mt.cross_entropy(x, target, reduction=reduction), normal(seed, (n, c)) * 2)
    check(lambda x: mt.cross_entropy(x, target[0], reduction=reduction), normal(seed, (c,)))  # unbatched
    check(lambda x: mt.nll_loss(mt.log_softmax(x, 1), target, reduction), normal(seed, (n, c)))


@OPS
@given(shapes, st.sampled_from(["mean", "sum", "none"]), seeds)
def test_mse_loss(shape, reduction, seed):
    a, b = normal(seed, shape), normal(seed + 1, shape)
    check(lambda x, y: mt.mse_loss(x, y, reduction=reduction), a, b)
    check(lambda x: mt.mse_loss(x, mt.tensor(b), reduction), a)


# -- composites and second derivatives ----------------------------------------------------------
@pytest.mark.slow
@OPS
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), seeds)
def test_two_layer_network(n, d, h, seed):
    """An MLP forward: every op above in one graph, each leaf used more than once."""
    rng = np.random.default_rng(seed)
    target = mt.tensor(rng.integers(0, 2, n))

    def net(x, w1, b1, w2):
        hidden = mt.tanh(x @ w1 + b1)
        logits = hidden @ w2 + hidden.sum(1, keepdim=True) * 0.1
        return mt.cross_entropy(logits, target) + (w1 * w1).sum() * 1e-2

    check(net, normal(seed, (n, d)), normal(seed + 1, (d, h)), normal(seed + 2, (h,)), normal(seed + 3, (h, 2)))


SECOND = [
    ("mul", lambda x: x * x * x),
    ("div", lambda x: 1 / (x * x + 1)),
    ("exp", mt.exp),
    ("log", lambda x: mt.log(x * x + 1)),
    ("sqrt", lambda x: mt.sqrt(x * x + 1)),
    ("tanh", mt.tanh),
    ("sigmoid", mt.sigmoid),
    ("pow", lambda x: (x * x + 1) ** 1.5),
    ("matmul", lambda x: x @ x.T),
    ("softmax", lambda x: mt.softmax(x, -1)),
    ("log_softmax", lambda x: mt.log_softmax(x, 0)),
    ("sum_mean_var", lambda x: x.sum(0) * x.mean() + x.var(-1)),
    ("amax", lambda x: x.amax(0) * x),
    ("index_cat", lambda x: mt.cat([x[[0, 0]], x.T[:1].T.expand(-1, 2).T], 0) ** 2),
    ("linear", lambda x: mt.nn.functional.linear(x, x * x, x[0])),
    ("cross_entropy", lambda x: mt.cross_entropy(x * x, mt.tensor([1, 0]), reduction="none")),
]


@pytest.mark.parametrize("name, f", SECOND, ids=[s[0] for s in SECOND])
def test_second_derivatives(name, f):
    """Backward is written in microtorch ops, so with create_graph=True it is differentiable."""
    a = distinct(7, (2, 2))
    v = mt.tensor(np.random.default_rng(3).standard_normal((2, 2)))

    def first_derivative(x):
        with mt.enable_grad():  # gradcheck evaluates fn under no_grad for the differences
            (g,) = mt.grad((f(x) ** 2).sum(), x, create_graph=True)
        return g * v

    check(first_derivative, a)
