"""Elementwise ops and broadcasting where mutation testing (issue #21, `make mutate`,
tests/README.md) found behaviour no test pinned down: integer powers with negative exponents,
which gradient ``a ** b`` gives when only one operand needs it, NaN/inf results without numpy
warnings, relu's two backward paths, backward computing (and recording: read from the trace)
gradients and allocations only where needed, PyTorch's dtype rules (type promotion, weak Python
and numpy scalars, ``x ** number``, ``where`` and ``clamp`` with number arguments), and the
broadcast error's text (also for ``where``'s condition and integer powers).

No torch needed: expected values come from exact arithmetic (``fractions``), numpy, the
derivative's formula evaluated by hand, or PyTorch's results written out (checked against torch
once, when the test was written).
"""
import warnings
from fractions import Fraction

import numpy as np
import pytest

import microtorch as mt


def leaf(values, dtype=mt.float64):
    return mt.tensor(values, dtype=dtype, requires_grad=True)


def backward_ops(loss):
    """The ops run during ``loss.backward()``, in order (read from the trace)."""
    with mt.trace() as tr:
        loss.backward()
    return [e["op"] for e in tr.filter("op")]


def truncated_power(x: int, y: int) -> int:
    """x ** y rounded toward zero, exactly; 0 ** negative is 0 (PyTorch's integer answer)."""
    if x == 0 and y < 0:
        return 0
    return int(Fraction(x) ** y)  # int() truncates toward zero


@pytest.mark.parametrize("dtype", [mt.int64, mt.int32])
def test_integer_powers_with_negative_exponents_round_toward_zero(dtype):
    xs, ys = list(range(-3, 4)), list(range(-3, 4))  # every base against every exponent, 0 included
    out = mt.tensor([[x] for x in xs], dtype=dtype) ** mt.tensor(ys, dtype=dtype)
    assert out.dtype == dtype and out.shape == (7, 7)
    assert out.tolist() == [[truncated_power(x, y) for y in ys] for x in xs]


def test_integer_power_with_one_negative_exponent_leaves_the_others_exact():
    # one negative exponent sends the whole tensor down the integer path; x ** 0 is 1, x ** 1 is x
    out = mt.tensor([5, 5, 5, -7, 1, -1, -1]) ** mt.tensor([-1, 0, 1, 0, -4, -4, -5])
    assert out.tolist() == [0, 1, 5, 1, 1, 1, -1]


def test_pow_with_a_constant_tensor_exponent_gives_the_base_its_gradient():
    av, bv = np.array([0.5, 2.0, 3.0]), np.array([3.0, -1.0, 0.5])
    a, b = leaf(av), mt.tensor(bv, dtype=mt.float64)  # only the base needs a gradient
    (a ** b).sum().backward()
    assert b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), bv * av ** (bv - 1), rtol=1e-12)

    a, b = mt.tensor(av, dtype=mt.float64), leaf(bv)  # only the exponent does
    (a ** b).sum().backward()
    assert a.grad is None
    np.testing.assert_allclose(b.grad.numpy(), av ** bv * np.log(av), rtol=1e-12)


def test_pow_backward_is_silent_where_the_gradient_is_nan_or_inf():
    # a = 0 with b < 0: 0^b = inf, ln 0 = -inf;  a < 0 with b = 0.5: NaN.  PyTorch warns about none.
    av, bv = np.array([0.0, -1.0, 2.0, 0.0]), np.array([-1.0, 0.5, 2.0, 2.0])
    a, b = leaf(av), leaf(bv)
    z = a ** b
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z.sum().backward()
    with np.errstate(all="ignore"):
        ga = bv * av ** (bv - 1)
        gb = np.where((av == 0) & (bv >= 0), 0.0, av ** bv * np.log(av))
    np.testing.assert_array_equal(a.grad.numpy(), ga)  # [-inf, nan, 4, 0]
    np.testing.assert_array_equal(b.grad.numpy(), gb)  # [-inf, nan, 4 ln 2, 0]


def test_remainder_backward_is_silent_where_the_divisor_is_zero():
    # dz/db = -⌊a / b⌋: -inf for 1 % 0.0, NaN for 0 % 0.0 (PyTorch warns about neither)
    a, b = leaf([1.0, 0.0, 7.0]), leaf([0.0, 0.0, 2.0])
    z = a % b
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_array_equal(b.grad.numpy(), [-np.inf, np.nan, -3.0])


def test_pow_floor_divide_and_remainder_are_silent_where_they_give_nan_or_inf():
    a, b = np.array([0.0, -1.0, 1.0, 0.0]), np.array([-1.0, 0.5, 0.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pow_, floor_, rem = (f(mt.tensor(a), mt.tensor(b)) for f in (mt.pow, mt.floor_divide, mt.remainder))
    with np.errstate(all="ignore"):  # numpy's values, which PyTorch's agree with (no warnings there either)
        np.testing.assert_array_equal(pow_.numpy(), np.power(a, b, dtype=np.float32))  # [inf, nan, 1, 1]
        np.testing.assert_array_equal(floor_.numpy(), np.floor_divide(a, b, dtype=np.float32))  # [-0, -2, inf, nan]
        np.testing.assert_array_equal(rem.numpy(), np.remainder(a, b, dtype=np.float32))  # [0, 0, nan, nan]


@pytest.mark.parametrize("p", [2, 3, -1.5])
def test_pow_by_a_number_computes_straight_into_its_one_result_block(p):
    x = leaf([1.0, 2.0, 3.0], mt.float32)
    with mt.trace() as tr:
        y = x ** p
    allocs = tr.filter("alloc")  # the result's bytes and nothing else (no scratch array left on the node)
    assert [e["storage"] for e in allocs] == [y._storage.id] == [tr.filter("op")[0]["output_storage"]]
    np.testing.assert_allclose(y.detach().numpy(), np.array([1.0, 2.0, 3.0], dtype=np.float32) ** p, rtol=1e-6)


def test_a_squares_backward_without_create_graph_runs_no_ops():
    # numpy_backward: g · 2x computed in numpy, so no Mul op is recorded (Pow.backward would run two)
    x = leaf([1.0, -2.0, 3.0])
    ops = backward_ops((x ** 2).sum())
    assert "Mul" not in ops, ops
    assert x.grad.tolist() == [2.0, -4.0, 6.0]


@pytest.mark.parametrize("create_graph", [False, True], ids=["numpy_backward", "backward"])
def test_relu_gradient_is_the_mask_x_above_zero(create_graph):
    # the engine takes numpy_backward without create_graph and the recorded backward with it
    x, w = leaf([-2.0, 0.0, 3.0, 0.5, 1.0]), leaf([5.0, 7.0, 11.0, 13.0, 17.0])
    (g,) = mt.autograd.grad((mt.relu(x) * w).sum(), x, create_graph=create_graph)
    assert g.requires_grad == create_graph  # with create_graph, a graph of the backward (through w)
    assert g.tolist() == [0.0, 0.0, 11.0, 13.0, 17.0]


C, B = np.array([7.0]), np.array([1.0, 2.5, 3.0])  # a constant of shape (1,), broadcast against b

# d(op)/db for b the second / the first operand, worked from each op's docstring formula
CONSTANT_FIRST = {
    "add": np.ones(3), "sub": -np.ones(3), "mul": np.repeat(C, 3), "div": -C / B ** 2,
    "remainder": -np.floor(C / B), "pow": C ** B * np.log(C),
}
CONSTANT_SECOND = {
    "add": np.ones(3), "sub": np.ones(3), "mul": np.repeat(C, 3), "div": 1 / np.repeat(C, 3),
    "remainder": np.ones(3), "pow": C * B ** (C - 1),
}


@pytest.mark.parametrize("constant_first", [True, False], ids=["c_op_b", "b_op_c"])
@pytest.mark.parametrize("op", sorted(CONSTANT_FIRST))
def test_backward_computes_no_gradient_for_a_broadcast_constant(op, constant_first):
    # the constant's gradient would need a sum over the broadcast dimension: no Sum may run
    # (the gradient of b, of the output's shape, needs none; the loss's sum goes back as an Expand)
    b, c = leaf(B), mt.tensor(C, dtype=mt.float64)
    fn = getattr(mt, op)
    ops = backward_ops((fn(c, b) if constant_first else fn(b, c)).sum())
    assert "Sum" not in ops, ops
    expected = (CONSTANT_FIRST if constant_first else CONSTANT_SECOND)[op]
    np.testing.assert_allclose(b.grad.numpy(), expected, rtol=1e-12)


def test_a_broadcast_error_names_both_shapes_and_the_first_clashing_dimension_word_for_word():
    message = ("add: shapes [2, 3] and [4, 2, 5] cannot be broadcast together (at dimension -1: 3 vs 5); "
               "each trailing dimension must be equal, or 1 in one of them")
    with pytest.raises(RuntimeError) as info:
        mt.ones(2, 3) + mt.ones(4, 2, 5)
    assert str(info.value) == message


@pytest.mark.parametrize("cond_shape, a_shape, b_shape, message", [
    ((2,), (3,), (3,), "where (condition, input): shapes [2] and [3] cannot be broadcast together (at dimension -1: 2 vs 3)"),
    ((2,), (2, 1), (1, 4), "where (condition, other): shapes [2] and [1, 4] cannot be broadcast together (at dimension -1: 2 vs 4)"),
    ((1,), (3,), (2,), "where: shapes [3] and [2] cannot be broadcast together (at dimension -1: 3 vs 2)"),
], ids=["condition-input", "condition-other", "input-other"])
def test_where_with_a_condition_of_a_clashing_shape_says_so(cond_shape, a_shape, b_shape, message):
    # (it raised an UnboundLocalError from broadcast_error when the condition was the odd one out)
    cond = mt.zeros(*cond_shape) > 0
    with pytest.raises(RuntimeError) as info:
        mt.where(cond, mt.ones(*a_shape), mt.ones(*b_shape))
    assert str(info.value).startswith(message + ";"), str(info.value)


# PyTorch's type promotion (its documented rules; each case checked against torch 2 once):
# a higher category (bool < integer < float) wins whatever the widths; within a category a 0-d
# tensor does not widen a dimensioned one; otherwise the wider type
PROMOTION = [
    (([True, False], "bool"), (2, "int64"), "int64", [3, 2]),
    (([1, 2], "int64"), (0.5, "float32"), "float32", [1.5, 2.5]),
    (([1, 2], "int32"), (3, "int64"), "int32", [4, 5]),
    (([1.0, 2.0], "float32"), (0.5, "float64"), "float32", [1.5, 2.5]),
    (([1, 2], "int32"), ([1, 2], "int64"), "int64", [2, 4]),
    ((1.0, "float16"), (2.0, "float32"), "float32", 3.0),
    (([1, 2], "int64"), ([0.5, 1.5], "float16"), "float16", [1.5, 3.5]),
    (([True], "bool"), ([3], "int32"), "int32", [4]),
]


@pytest.mark.parametrize("swap", [False, True], ids=["a_b", "b_a"])
@pytest.mark.parametrize("a, b, dtype, values", PROMOTION, ids=[f"{a[1]}{np.ndim(a[0])}d-{b[1]}{np.ndim(b[0])}d"
                                                                  for a, b, _, _ in PROMOTION])
def test_binary_ops_promote_dtypes_as_pytorch(a, b, dtype, values, swap):
    x, y = (mt.tensor(v, dtype=getattr(mt, d)) for v, d in (a, b))
    out = y + x if swap else x + y
    assert out.dtype == getattr(mt, dtype)
    assert out.tolist() == values


def test_where_with_a_number_for_one_branch_keeps_the_tensor_branch_and_its_gradient():
    cond = mt.tensor([True, False, True])
    x = leaf([1.0, 2.0, 3.0])
    out = mt.where(cond, x, 0.5)  # the number is weak: the result is x's float64
    assert out.dtype == mt.float64 and out.tolist() == [1.0, 0.5, 3.0]
    out.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]
    y = leaf([10.0, 20.0, 30.0])
    out = mt.where(cond, 0.5, y)
    assert out.dtype == mt.float64 and out.tolist() == [0.5, 20.0, 0.5]
    out.sum().backward()
    assert y.grad.tolist() == [0.0, 1.0, 0.0]
    # a number against a 0-d tensor of a narrower kind stays that tensor's dtype (PyTorch's)
    assert mt.where(mt.tensor(True), 1.5, mt.tensor(2.0, dtype=mt.float16)).dtype == mt.float16
    assert mt.where(mt.tensor(False), 3, mt.tensor(2, dtype=mt.int32)).dtype == mt.int32
    both = mt.where(cond, 1.0, 0.0)  # two numbers: the default float
    assert both.dtype == mt.float32 and both.tolist() == [1.0, 0.0, 1.0]


def test_clamp_with_numpy_scalar_bounds_keeps_the_tensors_dtype():
    # numpy scalars are weak like Python numbers: a float64 bound does not widen a float32 tensor
    x = mt.tensor([1.0, -2.0, 3.0])
    for out in (x.clamp(np.float64(0.5)), x.clamp(max=np.float64(0.5)), x.clamp(np.float32(-1), np.float64(2))):
        assert out.dtype == mt.float32
    assert x.clamp(np.float64(0.5)).tolist() == [1.0, 0.5, 3.0]
    assert x.clamp(np.float32(-1), np.float64(2)).tolist() == [1.0, -1.0, 2.0]
    assert mt.tensor([1.0, -2.0], dtype=mt.float64).clamp(0.5, np.float32(0.75)).dtype == mt.float64
    # an integer tensor with a numpy float bound becomes the default float, as with 1.5
    i = mt.tensor([1, 2, 3]).clamp(np.float32(1.5))
    assert i.dtype == mt.float32 and i.tolist() == [1.5, 2.0, 3.0]


# x ** number: PyTorch's result dtypes and values (each case checked against torch 2 once)
NUMBER_POWERS = [
    ([2, 3], "int32", 2, "int32", [4, 9]),
    ([2, 3], "int32", False, "int32", [1, 1]),
    ([2, 3], "int64", 0, "int64", [1, 1]),
    ([2, 3], "int64", True, "int64", [2, 3]),
    ([2, 3], "int64", np.int64(3), "int64", [8, 27]),
    ([2.0, 3.0], "float32", np.float64(2.0), "float32", [4.0, 9.0]),
    ([True, False], "bool", 2, "int64", [1, 0]),
    ([True, False], "bool", True, "bool", [True, False]),
    ([True, False], "bool", False, "bool", [True, True]),
    ([True, False], "bool", 0.5, "float32", [1.0, 0.0]),
]


@pytest.mark.parametrize("values, dtype, p, out_dtype, expected", NUMBER_POWERS,
                         ids=[f"{d}**{p!r}" for _, d, p, _, _ in NUMBER_POWERS])
def test_powers_by_a_number_have_pytorchs_dtype(values, dtype, p, out_dtype, expected):
    out = mt.tensor(values, dtype=getattr(mt, dtype)) ** p
    assert out.dtype == getattr(mt, out_dtype)
    assert out.tolist() == expected


def test_integer_powers_with_negative_exponents_broadcast_or_say_why_not():
    # (the integer path bypassed the broadcast check: numpy's bare ValueError)
    out = mt.tensor([[1], [2]]) ** mt.tensor([-1, 2])
    assert out.tolist() == [[1, 1], [0, 4]]
    for exponents in ([-1, 2], [0, 2]):  # the integer path and numpy's path give one error
        with pytest.raises(RuntimeError) as info:
            mt.tensor([1, 2, 3]) ** mt.tensor(exponents)
        assert str(info.value).startswith("pow: shapes [3] and [2] cannot be broadcast together "
                                          "(at dimension -1: 3 vs 2);"), str(info.value)


def test_mul_saves_each_operand_only_for_the_others_gradient():
    # d(ab)/da = b, d(ab)/db = a: a is kept (one more reference to its bytes) only if b needs a gradient
    a, b = leaf([1.0, 2.0]), mt.tensor([4.0, 8.0], dtype=mt.float64)
    ra, rb = a.storage.refcount, b.storage.refcount
    y = a * b
    assert (a.storage.refcount, b.storage.refcount) == (ra, rb + 1)
    z = b * a
    assert (a.storage.refcount, b.storage.refcount) == (ra, rb + 2)
    y.sum().backward()
    assert a.grad.tolist() == [4.0, 8.0]
    del y, z


# Python numbers are "weak": they never widen a tensor of their kind, even a 0-d one (PyTorch's
# results, each checked against torch 2 once)
WEAK_SCALARS = [
    ("f16_0d + 2.5", lambda: mt.tensor(1.0, dtype=mt.float16) + 2.5, "float16", 3.5),
    ("2.5 - f16_0d", lambda: 2.5 - mt.tensor(1.0, dtype=mt.float16), "float16", 1.5),
    ("i32_0d + 3", lambda: mt.tensor(1, dtype=mt.int32) + 3, "int32", 4),
    ("i32_0d * True", lambda: mt.tensor(3, dtype=mt.int32) * True, "int32", 3),
    ("f64_0d * 2", lambda: mt.tensor(1.5, dtype=mt.float64) * 2, "float64", 3.0),
    ("bool + 2", lambda: mt.tensor([True, False]) + 2, "int64", [3, 2]),
    ("bool + True", lambda: mt.tensor([True, False]) + True, "bool", [True, True]),
    ("i32 + 2.5", lambda: mt.tensor([1, 2], dtype=mt.int32) + 2.5, "float32", [3.5, 4.5]),
]


@pytest.mark.parametrize("make, dtype, value", [c[1:] for c in WEAK_SCALARS], ids=[c[0] for c in WEAK_SCALARS])
def test_python_numbers_are_weak_operands(make, dtype, value):
    out = make()
    assert out.dtype == getattr(mt, dtype)
    assert out.tolist() == value


def test_operands_that_are_not_real_numbers_raise_a_type_error():
    for bad in ("a", 1 + 2j, np.datetime64("2026-01-01")):
        with pytest.raises(TypeError, match="cannot combine a Tensor with"):
            mt.ones(2) + bad
