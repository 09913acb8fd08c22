"""Elementwise ops. Each op's backward sits right under its forward; the docstring states
the derivative. Binary ops broadcast, and their backward reduces each gradient back to its
operand's shape with :func:`~microtorch.functions.broadcast.unbroadcast`.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..creation import tensor
from ..node import Function, InplaceVariant
from ..tensor_base import TensorBase as Tensor
from .broadcast import broadcast_error, broadcastable, operands, unbroadcast


def _broadcasting(ctx, op: str, fn, a: Tensor, b: Tensor) -> np.ndarray:
    """``fn(a, b)`` with PyTorch's broadcasting, written straight into the result's storage."""
    x, y = a._data, b._data
    shape = x.shape
    # numpy works out the result's shape, unless y's shape ends x's (a bias row, a scalar): then it is x's
    if shape != y.shape and shape[len(shape) - len(y.shape):] != y.shape:
        try:
            shape = np.broadcast_shapes(shape, y.shape)
        except ValueError:
            raise broadcast_error(op, a, b) from None
    return fn(x, y, out=ctx.empty(shape, x.dtype))


def _ieee(ufunc):
    """``ufunc`` without numpy's floating-point warnings: ln 0 = −inf, ln −1 = NaN, √−1 = NaN,
    1/0 = inf, 0/0 = NaN and e¹⁰⁰⁰ = inf are IEEE's answers, returned silently as PyTorch does
    (numpy would also print a ``RuntimeWarning`` pointing into microtorch)."""

    def quiet(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return ufunc(*args, **kwargs)

    quiet.__name__ = quiet.__qualname__ = ufunc.__name__
    return quiet


true_divide = _ieee(np.true_divide)


def _unary(ctx, fn, x: Tensor) -> np.ndarray:
    """``fn(x)`` written straight into the result's storage."""
    data = x._data
    return fn(data, out=ctx.empty(data.shape, data.dtype))


class Add(Function):
    """z = a + b;  dz/da = 1, dz/db = 1."""

    inplace_variant = InplaceVariant("add_", reads="nothing", overwrites=(0, 1))

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        return _broadcasting(ctx, "add", np.add, a, b)

    @staticmethod
    def backward(ctx, g):
        ga, gb = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if ga else None,
                unbroadcast(g, ctx.shapes[1]) if gb else None)


class Sub(Function):
    """z = a - b;  dz/da = 1, dz/db = -1."""

    inplace_variant = InplaceVariant("sub_", reads="nothing")

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        return _broadcasting(ctx, "sub", np.subtract, a, b)

    @staticmethod
    def backward(ctx, g):
        ga, gb = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if ga else None,
                unbroadcast(-g, ctx.shapes[1]) if gb else None)


class Mul(Function):
    """z = a * b;  dz/da = b, dz/db = a."""

    inplace_variant = InplaceVariant("mul_", reads="other operand", overwrites=(0, 1),
                                     why="its own old values only if the other operand needs a gradient")

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad or (False, False)
        ctx.save_for_backward(a if need_b else None, b if need_a else None)  # each grad needs the other
        ctx.shapes = a.shape, b.shape
        return _broadcasting(ctx, "mul", np.multiply, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = unbroadcast(g * b, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(g * a, ctx.shapes[1]) if ctx.needs_input_grad[1] else None
        return ga, gb


class Div(Function):
    """z = a / b;  dz/da = 1/b, dz/db = -a/b²."""

    inplace_variant = InplaceVariant("div_", reads="other operand",
                                     why="its own old values only if the divisor needs a gradient")

    @staticmethod
    def forward(ctx, a, b):
        need_b = (ctx.needs_input_grad or (False, False))[1]
        ctx.save_for_backward(a if need_b else None, b)  # a only matters for b's gradient
        ctx.shapes = a.shape, b.shape
        return _broadcasting(ctx, "div", true_divide, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = unbroadcast(g / b, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(-g * a / (b * b), ctx.shapes[1]) if ctx.needs_input_grad[1] else None
        return ga, gb


class Neg(Function):
    """z = -x;  dz/dx = -1."""

    inplace_variant = InplaceVariant("neg_", reads="nothing")
    compute = np.negative

    @staticmethod
    def forward(ctx, x):
        return _unary(ctx, np.negative, x)

    @staticmethod
    def backward(ctx, g):
        return -g


class Pow(Function):
    """z = x ** p for a constant exponent p;  dz/dx = p · x^(p-1)."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x)
        ctx.p = p
        out = ctx.empty(x.shape, x.dtype)
        if p == 2:  # x · x, as PyTorch computes a square (np.power's general loop is far slower)
            return np.square(x._data, out=out)
        return np.power(x._data, p, out=out)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.p == 0:  # d(x⁰)/dx = 0 everywhere, also at x = 0 (where 0 · x⁻¹ would be nan), as in PyTorch
            return Tensor._wrap(np.zeros(x.shape, dtype=g.dtype))
        if ctx.p == 2:  # the common square: one op fewer
            return g * (2 * x)
        return g * ctx.p * x ** (ctx.p - 1)

    @staticmethod
    def numpy_backward(ctx, g):
        """The square's ``g * (2 * x)`` as two numpy passes over one fresh result (the same
        products in the same order); any other exponent, or mixed dtypes, take ``backward``."""
        (x,) = ctx.saved_arrays()
        if ctx.p != 2 or x.dtype != g._data.dtype:
            return Pow.backward(ctx, g)
        out = Tensor._empty(x.shape, x.dtype)
        np.multiply(x, 2, out=out._data)
        np.multiply(g._data, out._data, out=out._data)
        return out


class PowTensor(Function):
    """z = a ** b elementwise, both tensors (broadcasting);

        dz/da = b · a^(b−1)   (0 where b = 0, as in PyTorch),
        dz/db = z · ln a      (0 where a = 0 and b ≥ 0: the limit, as in PyTorch).
    """

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        ctx.save_output()
        ctx.shapes = a.shape, b.shape
        if a.dtype.kind in "iu" and (b._data < 0).any():
            if not broadcastable(a, b):
                raise broadcast_error("pow", a, b)
            return _integer_power(a._data, b._data)
        with np.errstate(invalid="ignore", divide="ignore"):  # (-1) ** 0.5 is NaN, 0 ** -1 inf: no warning
            return _broadcasting(ctx, "pow", np.power, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b, z = ctx.saved_tensors
        ga = gb = None
        with np.errstate(invalid="ignore", divide="ignore"):  # NaN/inf where the math has them, as in PyTorch
            if ctx.needs_input_grad[0]:
                ga = where(Tensor._wrap(np.asarray(b._data == 0)), 0.0, g * b * a ** (b - 1))
                ga = unbroadcast(ga, ctx.shapes[0])
            if ctx.needs_input_grad[1]:
                limit = Tensor._wrap(np.asarray((a._data == 0) & (b._data >= 0)))
                gb = unbroadcast(where(limit, 0.0, g * z * log(a)), ctx.shapes[1])
        return ga, gb


def _integer_power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Integer x ** y with some y < 0 (numpy refuses): PyTorch's integer answer, x^y rounded
    toward zero — 1 for x = 1, ±1 for x = −1, else 0."""
    neg = y < 0
    out = np.power(x, np.where(neg, 0, y))
    small = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0))
    return np.where(neg, small, out).astype(out.dtype, copy=False)


class FloorDivide(Function):
    """z = ⌊a / b⌋ (rounding toward −∞, PyTorch's ``//``). Not differentiable: as in PyTorch,
    the result keeps a node, and backward through it raises."""

    @staticmethod
    def forward(ctx, a, b):
        _no_integer_zero(a, b)
        with np.errstate(invalid="ignore", divide="ignore"):  # x.float() // 0 is ±inf (or NaN), as in PyTorch
            return _broadcasting(ctx, "floor_divide", np.floor_divide, a, b)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for floor_divide is not implemented (⌊a / b⌋ is a step "
                           "function: its gradient is 0 almost everywhere); detach() its inputs, "
                           "or use a / b")


class Remainder(Function):
    """z = a − ⌊a / b⌋ · b (the sign of b, Python's and PyTorch's ``%``);
    dz/da = 1, dz/db = −⌊a / b⌋."""

    @staticmethod
    def forward(ctx, a, b):
        _no_integer_zero(a, b)
        if ctx.needs_input_grad and ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b)
        ctx.shapes = a.shape, b.shape
        with np.errstate(invalid="ignore", divide="ignore"):  # x.float() % 0 is NaN, as in PyTorch
            return _broadcasting(ctx, "remainder", np.remainder, a, b)

    @staticmethod
    def backward(ctx, g):
        ga = unbroadcast(g, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            a, b = ctx.saved_tensors
            with np.errstate(invalid="ignore", divide="ignore"):
                gb = unbroadcast(-g * Tensor._wrap(np.floor_divide(a._data, b._data)), ctx.shapes[1])
        return ga, gb


def _no_integer_zero(a: Tensor, b: Tensor) -> None:
    if b.dtype.kind in "iub" and not b._data.all():
        raise RuntimeError("ZeroDivisionError: integer division (// or %) by zero; divide floats "
                           "(x.float() // 0 is inf) or mask the zeros first")


class Exp(Function):
    """z = eˣ;  dz/dx = eˣ = z (the output is saved, not recomputed)."""

    inplace_variant = InplaceVariant("exp_", reads="output")
    compute = _ieee(np.exp)  # e¹⁰⁰⁰ = inf, silently

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()
        return _unary(ctx, Exp.compute, x)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * z


class Log(Function):
    """z = ln x;  dz/dx = 1/x."""

    compute = _ieee(np.log)  # ln 0 = −inf, ln −1 = NaN, silently

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _unary(ctx, Log.compute, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / x


class Sqrt(Function):
    """z = √x;  dz/dx = 1 / (2√x) = 1 / (2z)."""

    inplace_variant = InplaceVariant("sqrt_", reads="output")
    compute = _ieee(np.sqrt)  # √−1 = NaN, silently

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()
        return _unary(ctx, Sqrt.compute, x)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g / (2 * z)


class Tanh(Function):
    """z = tanh x;  dz/dx = 1 - z²."""

    inplace_variant = InplaceVariant("tanh_", reads="output")
    compute = np.tanh

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()
        return _unary(ctx, np.tanh, x)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * (1 - z * z)


class Sigmoid(Function):
    """z = 1 / (1 + e⁻ˣ);  dz/dx = z (1 - z)."""

    inplace_variant = InplaceVariant("sigmoid_", reads="output")

    @staticmethod
    def compute(x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """σ(x) into ``out`` (which may be ``x`` itself: the in-place variant)."""
        e = np.exp(-np.abs(x))  # the two branches avoid overflow of e^(-x) for very negative x
        np.copyto(out, np.where(x >= 0, 1 / (1 + e), e / (1 + e)), casting="unsafe")
        return out

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()
        return _unary(ctx, Sigmoid.compute, x)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * z * (1 - z)


class Relu(Function):
    """z = max(x, 0);  dz/dx = 1 where x > 0, else 0, so dL/dx = g ⊙ (z ≠ 0).

    z is ≥ 0 or NaN, so ``z != 0`` is "x > 0, or x is NaN": a NaN input passes its gradient
    on, as in PyTorch (whose mask is "not z ≤ 0").

    ``backward`` multiplies g by the mask (z ≠ 0) as a microtorch op, so with
    ``create_graph`` the product is recorded as a differentiable graph; ``numpy_backward``
    (the engine's choice when no graph is recorded) is the same product in one numpy call
    (PyTorch's ``threshold_backward``).
    """

    inplace_variant = InplaceVariant("relu_", reads="output", why="x > 0 exactly where relu(x) > 0")

    @staticmethod
    def compute(x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """max(x, 0) into ``out`` (which may be ``x`` itself: the in-place variant)."""
        return np.maximum(x, 0, out=out)

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()  # z > 0 exactly where x > 0, so the output is enough (as in PyTorch)
        return Relu.compute(x._data, ctx.empty(x.shape, x.dtype))

    @staticmethod
    def mask(z: Tensor, dtype) -> Tensor:
        """(z ≠ 0) as a tensor of ``dtype``: the derivative, read from the output."""
        mask = Tensor._empty(z.shape, dtype)
        mask._data[...] = z._data != 0
        return mask

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        mask = Relu.mask(z, g.dtype)
        return g * mask

    @staticmethod
    def numpy_backward(ctx, g):
        (z,) = ctx.saved_arrays()
        out = Tensor._empty(z.shape, g.dtype)
        np.multiply(g._data, z != 0, out=out._data)
        return out


class Abs(Function):
    """z = |x|;  dz/dx = sign(x) (0 at x = 0 and at NaN, as in PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _unary(ctx, np.abs, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = x._data
        return g * Tensor._wrap((d > 0).astype(g.dtype) - (d < 0))


class Clamp(Function):
    """z = min(max(x, lo), hi);  dz/dx = 1 where lo ≤ x ≤ hi, else 0."""

    inplace_variant = InplaceVariant("clamp_", reads="mask")

    @staticmethod
    def forward(ctx, x, lo, hi):
        if lo is None and hi is None:
            raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return np.clip(x._data, lo, hi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return Clamp.masked(g, Clamp.inside(x._data, ctx.lo, ctx.hi))

    @staticmethod
    def inside(x: np.ndarray, lo, hi) -> np.ndarray:
        """The mask lo ≤ x ≤ hi (a missing bound holds everywhere): where the gradient passes."""
        inside = np.ones(x.shape, dtype=bool)
        if lo is not None:
            inside &= x >= lo
        if hi is not None:
            inside &= x <= hi
        return inside

    @staticmethod
    def masked(g: Tensor, inside: np.ndarray) -> Tensor:
        """dL/dx = g where the input was inside the bounds, else 0."""
        return g * Tensor._wrap(inside.astype(g.dtype))


class Where(Function):
    """z = a where cond else b;  dz/da = cond, dz/db = not cond (cond gets no gradient)."""

    @staticmethod
    def forward(ctx, a, b, cond):
        ctx.shapes = a.shape, b.shape
        ctx.cond = cond._data.astype(bool)
        try:
            return np.where(ctx.cond, a._data, b._data)
        except ValueError:
            if broadcastable(a, b):  # then the condition clashes with one of them
                name, other = ("condition, input", a) if not broadcastable(cond, a) else ("condition, other", b)
                raise broadcast_error(f"where ({name})", cond, other) from None
            raise broadcast_error("where", a, b) from None

    @staticmethod
    def backward(ctx, g):
        keep = Tensor._wrap(np.broadcast_to(ctx.cond, g.shape).astype(g.dtype))
        return unbroadcast(g * keep, ctx.shapes[0]), unbroadcast(g * (1 - keep), ctx.shapes[1]), None


class Maximum(Function):
    """z = max(a, b) elementwise;  the gradient goes to the larger input, split evenly on ties.

    Where a or b is NaN (z is NaN) neither is smaller, so both get the whole gradient — PyTorch's
    rule (a's share is 0 only where a < b, ½ where a = b, else 1).
    """

    ufunc, loses = np.maximum, np.less  # a gets no gradient where loses(a, b)

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return _broadcasting(ctx, cls.ufunc.__name__, cls.ufunc, a, b)

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        x, y = a._data, b._data
        tie = 0.5 * (x == y)
        wa = Tensor._wrap(np.broadcast_to(1 - tie - cls.loses(x, y), g.shape).astype(g.dtype))
        wb = Tensor._wrap(np.broadcast_to(1 - tie - cls.loses(y, x), g.shape).astype(g.dtype))
        return unbroadcast(g * wa, a.shape), unbroadcast(g * wb, b.shape)


class Minimum(Maximum):
    """z = min(a, b) elementwise;  the gradient goes to the smaller input (ties and NaN as in
    :class:`Maximum`)."""

    ufunc, loses = np.minimum, np.greater


class Cast(Function):
    """z = x converted to another dtype;  dz/dx = 1 (the gradient is cast back)."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return x._data.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dtype)


# -- the functional API -----------------------------------------------------------------------
def add(a, b):
    return Add.apply(*operands(a, b))


def sub(a, b):
    if _is_bool(a) or _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return Sub.apply(*operands(a, b))


def mul(a, b):
    return Mul.apply(*operands(a, b))


def div(a, b):
    a, b = operands(a, b)
    if not a.dtype.kind == "f":  # true division of integers gives floats, as in PyTorch
        a, b = a.float(), b.float()
    return Div.apply(a, b)


def _is_bool(v) -> bool:
    """A bool tensor or a bool scalar (subtraction refuses both, as in PyTorch)."""
    return v._data.dtype.kind == "b" if isinstance(v, Tensor) else isinstance(v, (bool, np.bool_))


def neg(x):
    if x._data.dtype.kind == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                        "To invert a mask, use mt.logical_not(mask) or (~mask)")
    return Neg.apply(x)


def pow(x, exponent):  # noqa: A001 — PyTorch's name
    """x ** exponent: a number exponent (:class:`Pow`), or a tensor one — then both
    gradients (:class:`PowTensor`); ``2 ** x`` (a number base) is the tensor case too.
    Dtypes follow PyTorch's promotion (``int ** 0.5`` is float32)."""
    if isinstance(exponent, Tensor) or not isinstance(x, Tensor):
        a, b = operands(x, exponent)
        if a.dtype == np.bool_:
            raise NotImplementedError('"pow" not implemented for \'Bool\' tensors; convert them first, e.g. a.long()')
        return PowTensor.apply(a, b)
    if isinstance(exponent, np.generic):
        exponent = exponent.item()
    if not isinstance(exponent, numbers.Real):
        raise TypeError(f"pow: the exponent must be a number or a tensor, got {type(exponent).__name__}")
    if isinstance(exponent, float):  # int tensor ** 0.5 is a float32 tensor, as in PyTorch
        x = _floating(x)
    elif x.dtype.kind in "iub":
        if exponent < 0 and not isinstance(exponent, bool):
            raise RuntimeError("Integers to negative integer powers are not allowed. (Use a float "
                               "tensor: x.float() ** -1)")
        if x.dtype == np.bool_ and not isinstance(exponent, bool):
            x = x.long()  # bool ** 2 is int64, as in PyTorch
        elif x.dtype == np.bool_:
            return Pow.apply(x.long(), int(exponent)).bool()
    return Pow.apply(x, exponent)


def floor_divide(a, b):
    """⌊a / b⌋, rounding toward −∞ (PyTorch's ``//``); integers stay integers."""
    a, b = operands(a, b)
    if a.dtype == np.bool_:
        raise NotImplementedError('"floor_divide" not implemented for \'Bool\' tensors')
    return FloorDivide.apply(a, b)


def remainder(a, b):
    """a − ⌊a / b⌋ · b: the remainder with the sign of b (PyTorch's and Python's ``%``)."""
    a, b = operands(a, b)
    if a.dtype == np.bool_:
        raise NotImplementedError('"remainder" not implemented for \'Bool\' tensors')
    return Remainder.apply(a, b)


def _floating(x):
    """Integer/bool inputs of float-valued ops become the default float dtype (PyTorch), not
    numpy's float64."""
    return x if x.dtype.kind == "f" else x.to(dtypes.default_float)


def exp(x):
    return Exp.apply(_floating(x))


def log(x):
    return Log.apply(_floating(x))


def sqrt(x):
    return Sqrt.apply(_floating(x))


def tanh(x):
    return Tanh.apply(_floating(x))


def sigmoid(x):
    return Sigmoid.apply(_floating(x))


def relu(x):
    if x._data.dtype.kind == "b":
        raise RuntimeError("relu is not implemented for bool tensors (as in PyTorch); convert with "
                           "x.float() or x.long() first")
    return Relu.apply(x)


def abs(x):  # noqa: A001
    if x._data.dtype.kind == "b":
        raise NotImplementedError("abs is not implemented for bool tensors (as in PyTorch)")
    return Abs.apply(x)


def clamp(x, min=None, max=None):  # noqa: A002 — PyTorch's argument names
    """min(max(x, min), max) for number bounds. The result type is PyTorch's: an integer
    tensor with a float bound becomes the default float dtype (``int.clamp(-1.5, 2.5)`` is
    float32); number bounds never widen a float tensor."""
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and not isinstance(bound, (numbers.Real, np.number, np.bool_)):
            raise TypeError(f"clamp(): argument '{name}' must be a number, got {type(bound).__name__} "
                            f"({bound!r}); for tensor bounds use mt.maximum / mt.minimum")
    min, max = (v.item() if isinstance(v, np.generic) else v for v in (min, max))  # numpy scalars are weak too
    if x.dtype.kind != "f" and any(isinstance(v, float) for v in (min, max)):
        x = x.to(dtypes.default_float)
    return Clamp.apply(x, min, max)


def where(condition, input, other):  # noqa: A002
    if not isinstance(condition, Tensor):
        condition = tensor(condition)
    if condition.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool tensor, got {condition.dtype.name}; "
                        "compare first, e.g. x > 0")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):  # where(mask, 1.0, 0.0)
        input = tensor(input)
    a, b = operands(input, other)
    return Where.apply(a, b, condition)


def maximum(a, b):
    return Maximum.apply(*operands(a, b))


def minimum(a, b):
    return Minimum.apply(*operands(a, b))


class Clone(Function):
    """z = a copy of x in fresh, contiguous bytes;  dz/dx = 1."""

    @staticmethod
    def forward(ctx, x):
        return np.array(x._data, order="C")

    @staticmethod
    def backward(ctx, g):
        return g


def clone(x):
    return Clone.apply(x)
