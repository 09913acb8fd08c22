"""Bad input gets a clear error at the call site, raised by microtorch (not deep inside numpy).

Each case checks the exception type, that the message names what went wrong (the shapes,
the op, the offending value), and that the last traceback frame is microtorch code.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import microtorch as mt

PACKAGE = Path(mt.__file__).resolve().parent


def raised_by_microtorch(excinfo) -> None:
    last = Path(str(excinfo.traceback[-1].path)).resolve()
    assert PACKAGE in last.parents, f"the error was raised in {last}, not in microtorch"


def check(exc, fn, *fragments):
    with pytest.raises(exc) as e:
        fn()
    msg = str(e.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in the message: {msg}"
    raised_by_microtorch(e)
    # numpy's own error, if there was one, is not chained onto ours ("raise ... from None")
    assert e.value.__context__ is None or e.value.__suppress_context__
    return msg


@pytest.mark.parametrize("op, fn", [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b),
    ("maximum", mt.maximum),
])
def test_shape_mismatch_in_binary_ops_names_both_shapes(op, fn):
    msg = check(RuntimeError, lambda: fn(mt.ones(2, 3), mt.ones(4)), op, "[2, 3]", "[4]")
    assert "broadcast" in msg
    check(RuntimeError, lambda: fn(mt.ones(2, 3, 4), mt.ones(3, 2, 4)), "[2, 3, 4]", "[3, 2, 4]", "3 vs 2")


def test_where_shape_mismatch():
    check(RuntimeError, lambda: mt.where(mt.ones(2) > 0, mt.ones(3), mt.ones(2)), "where", "[3]", "[2]")
    check(TypeError, lambda: mt.where(mt.ones(2), mt.ones(2), mt.ones(2)), "bool")


def test_integer_tensor_cannot_require_grad():
    check(RuntimeError, lambda: mt.tensor([1, 2], requires_grad=True), "floating point", "int64")
    check(RuntimeError, lambda: mt.arange(3).requires_grad_(), "floating point")
    check(RuntimeError, lambda: mt.zeros(2, dtype=mt.int64, requires_grad=True), "floating point")


@pytest.mark.parametrize("key, fragments", [
    (5, ["index 5", "size 2", "[2, 3]"]),
    ((slice(None), 3), ["index 3", "dimension 1", "[2, 3]"]),
    (-3, ["index -3", "[2, 3]"]),
    ([0, 2], ["index 2", "[2, 3]"]),
    ((0, 0, 0), ["too many indices", "[2, 3]"]),
])
def test_indexing_out_of_range(key, fragments):
    x = mt.ones(2, 3)
    check(IndexError, lambda: x[key], *fragments)


def test_indexing_with_a_tensor_out_of_range():
    check(IndexError, lambda: mt.ones(2, 3)[mt.tensor([0, 7])], "index 7", "[2, 3]")


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "var"])
def test_reduction_over_a_missing_dim(op):
    x = mt.ones(2, 3)
    name = op.lstrip("a")  # amax reports itself as max
    check(IndexError, lambda: getattr(x, op)(2), name, "range", "2")
    check(IndexError, lambda: getattr(x, op)((0, -3)), name, "-3")


def test_max_min_over_a_missing_dim():
    check(IndexError, lambda: mt.ones(2, 3).max(dim=4), "max", "4")
    check(IndexError, lambda: mt.ones(2, 3).min(-3), "min", "-3")


def test_reduction_naming_a_dim_twice():
    check(RuntimeError, lambda: mt.ones(2, 3).sum((0, -2)), "sum", "twice")


@pytest.mark.parametrize("sa, sb, fragments", [
    ((2, 3), (4, 5), ["[2, 3]", "[4, 5]", "3 != 4"]),
    ((3,), (4,), ["[3]", "[4]"]),
    ((2, 3), (2,), ["[2, 3]", "[2]"]),
    ((2, 3, 4), (3, 4, 5), ["[2, 3, 4]", "[3, 4, 5]", "batch"]),
    ((), (3,), ["at least 1 dimension"]),
])
def test_matmul_incompatible_shapes(sa, sb, fragments):
    check(RuntimeError, lambda: mt.matmul(mt.ones(*sa), mt.ones(*sb)), "matmul", *fragments)


@pytest.mark.parametrize("x, w, b, exc, fragments", [
    ((4, 3), (5, 2), None, RuntimeError, ["linear", "[4, 3]", "[5, 2]", "3", "2"]),
    ((4, 3), (5, 3), (4,), RuntimeError, ["linear", "bias", "[4]", "[4, 5]"]),
    ((4, 3), (5, 3), (2, 4, 5), RuntimeError, ["bias", "[2, 4, 5]"]),
    ((), (5, 3), None, RuntimeError, ["linear", "at least 1 dimension"]),
    ((4, 3), (2, 5, 3), None, RuntimeError, ["weight", "2-D", "[2, 5, 3]"]),
])
def test_linear_incompatible_shapes(x, w, b, exc, fragments):
    bias = None if b is None else mt.ones(*b)
    check(exc, lambda: mt.nn.functional.linear(mt.ones(*x), mt.ones(*w), bias), *fragments)


def test_linear_dtypes_and_types():
    x, w = mt.ones(4, 3), mt.ones(5, 3)
    check(RuntimeError, lambda: mt.nn.functional.linear(x.double(), w), "same dtype", "float64", "float32")
    check(RuntimeError, lambda: mt.nn.functional.linear(x, w, mt.ones(5).double()), "bias", "float64")
    check(TypeError, lambda: mt.nn.functional.linear(np.ones((4, 3), np.float32), w), "Tensors", "ndarray")
    check(RuntimeError, lambda: mt.nn.Linear(3, 5)(mt.ones(4, 2)), "[4, 2]", "[5, 3]")


def test_mse_loss_shape_mismatch():
    check(ValueError, lambda: mt.mse_loss(mt.ones(4, 1), mt.ones(4)), "mse_loss", "[4, 1]", "[4]")


def test_cross_entropy_targets():
    logits = mt.ones(2, 3)
    check(IndexError, lambda: mt.cross_entropy(logits, mt.tensor([0, 3])), "3", "out of bounds", "0..2")
    check(IndexError, lambda: mt.cross_entropy(logits, mt.tensor([-1, 0])), "-1", "out of bounds")
    check(TypeError, lambda: mt.cross_entropy(logits, mt.tensor([0.0, 1.0])), "integer", "float32")
    check(ValueError, lambda: mt.cross_entropy(logits, mt.tensor([0, 1, 2])), "[3]", "[2]")
    check(ValueError, lambda: mt.cross_entropy(logits, mt.tensor([0, 1]), reduction="avg"), "reduction", "avg")
    check(ValueError, lambda: mt.cross_entropy(mt.ones(2, 3, 4), mt.tensor([0, 1])), "cross_entropy",
          "[2, 3, 4]")
    check(IndexError, lambda: mt.cross_entropy(mt.ones(3), mt.tensor(3)), "3", "out of bounds")  # unbatched
    check(TypeError, lambda: mt.nll_loss(logits, mt.tensor([0.0, 1.0])), "nll_loss", "integer")


def test_view_of_a_non_contiguous_tensor_says_use_reshape():
    msg = check(RuntimeError, lambda: mt.ones(2, 3).T.view(6), "view", "reshape")
    assert "[3, 2]" in msg and "[6]" in msg
    assert mt.ones(2, 3).T.reshape(6).shape == (6,)  # the advice works


def test_reshape_to_the_wrong_number_of_elements():
    check(RuntimeError, lambda: mt.ones(2, 3).reshape(4), "[4]", "size 6")
    msg = check(RuntimeError, lambda: mt.ones(2, 3).view(4, -1), "[4, -1]", "size 6")
    assert "reshape" not in msg  # a wrong size, not a stride problem: reshape would fail too
    check(RuntimeError, lambda: mt.ones(2, 3).T.view(4, -1), "[4, -1]", "size 6")


def test_ragged_lists():
    msg = check(ValueError, lambda: mt.tensor([[1, 2], [3]]), "expected sequence of length 2 at dim 1 (got 1)",
                "rectangular")
    assert "inhomogeneous" not in msg  # numpy's own text does not pass through
    check(ValueError, lambda: mt.tensor([[[1], [2]], [[3], [4, 5]]]), "length 1 at dim 2 (got 2)")
    check(ValueError, lambda: mt.tensor([[1, 2], 3]), "at dim 1 (got int)")
    check(TypeError, lambda: mt.tensor(["a", "b"]), "numbers")


def test_shape_op_errors():
    x = mt.ones(2, 3)
    check(RuntimeError, lambda: mt.cat([x, mt.ones(2, 4)]), "cat", "[2, 3]", "[2, 4]")
    check(RuntimeError, lambda: mt.stack([x, mt.ones(3, 2)]), "stack", "[2, 3]", "[3, 2]")
    check(RuntimeError, lambda: x.expand(4, 3), "expand", "[4, 3]", "[2, 3]")
    check(RuntimeError, lambda: x.permute(0, 0), "permute", "[2, 3]")
    check(IndexError, lambda: x.transpose(0, 2), "transpose", "2")
    check(IndexError, lambda: x.unsqueeze(3), "unsqueeze", "3")
    check(IndexError, lambda: mt.softmax(x, 2), "softmax", "2")


def test_scalar_conversions():
    check(RuntimeError, lambda: mt.ones(2).item(), "2 elements")
    check(RuntimeError, lambda: bool(mt.ones(2)), "ambiguous")


def test_unsupported_dtype_and_exponent():
    check(TypeError, lambda: mt.zeros(2, dtype=np.complex64), "unsupported dtype")
    check(TypeError, lambda: mt.ones(2) ** "2", "exponent must be a number or a tensor", "str")
    check(RuntimeError, lambda: mt.tensor([2, 3]) ** -1, "Integers to negative integer powers")
    check(RuntimeError, lambda: mt.tensor([1, 2]) // 0, "ZeroDivisionError")


def test_numpy_of_a_tensor_that_requires_grad():
    check(RuntimeError, lambda: np.asarray(mt.ones(2, requires_grad=True)), "detach")


# -- issue 13: raw errors that became microtorch's own ------------------------------------------
def test_dim_arguments_must_be_ints():
    x = mt.ones(2, 3)
    for fn in (lambda: x.sum(dim="a"), lambda: x.mean(dim="a"), lambda: x.amax(dim="a"),
               lambda: x.max(dim="a"), lambda: x.var(dim="a"), lambda: x.sum(dim=1.5)):
        check(TypeError, fn, "argument 'dim' must be an int")
    for fn in (lambda: x.softmax("a"), lambda: x.transpose("a", 0), lambda: x.unsqueeze(1.5),
               lambda: x.size("a"), lambda: mt.cat([x, x], dim="a"), lambda: x.squeeze("a")):
        check(TypeError, fn, "argument 'dim' must be an int")


def test_clamp_bounds_must_be_numbers():
    check(TypeError, lambda: mt.ones(2).clamp("a", 1), "clamp", "'min' must be a number", "str")
    check(TypeError, lambda: mt.ones(2).clamp(0, [1]), "'max' must be a number", "list")


def test_creation_counts_and_ranges():
    check(RuntimeError, lambda: mt.linspace(0, 1, -1), "number of steps must be non-negative")
    check(TypeError, lambda: mt.linspace(0, 1, 2.5), "'steps' must be int")
    check(RuntimeError, lambda: mt.randint(5, 2, (3,)), "from=5 >= to=2")
    check(RuntimeError, lambda: mt.randint(5, 2), "'from' to be less than 'to'")
    check(TypeError, lambda: mt.randint(0.5, 2, (3,)), "'low' must be int")
    check(RuntimeError, lambda: mt.eye(-1), "n must be greater or equal to 0, got -1")
    check(RuntimeError, lambda: mt.eye(2, -1), "m must be greater or equal to 0, got -1")
    check(TypeError, lambda: mt.eye(2.5), "'n' must be int")
    check(RuntimeError, lambda: mt.randperm(-1), "n must be greater or equal to 0")
    check(TypeError, lambda: mt.arange("a"), "arange", "must be a number", "str")
    check(TypeError, lambda: mt.full((2,), "a"), "fill_value", "must be a number")
    assert mt.randint(5, (3,)).shape == (3,)  # PyTorch's randint(high, size) still works


def test_load_state_dict_refuses_values_that_are_not_numbers():
    layer = mt.nn.Linear(2, 2)
    check(TypeError, lambda: layer.load_state_dict(None), "Expected state_dict to be dict-like")
    check(TypeError, lambda: layer.load_state_dict({"weight": np.array([["a", "b"], ["c", "d"]]),
                                                    "bias": np.zeros(2)}), "'weight'", "numpy.str_")
    check(TypeError, lambda: layer.load_state_dict({"weight": None, "bias": np.zeros(2)}), "'weight'",
          "NoneType")
    check(TypeError, lambda: layer.load_state_dict({"weight": np.zeros((2, 2), complex), "bias": np.zeros(2)}),
          "numpy.complex128")
    before = layer.weight.tolist()
    with pytest.raises(TypeError):
        layer.load_state_dict({"weight": np.ones((2, 2)), "bias": "x"})
    assert layer.weight.tolist() == before  # nothing was copied
