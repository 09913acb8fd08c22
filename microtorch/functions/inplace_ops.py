"""The in-place ops as autograd Functions (``Add_``, ``Mul_``, ..., ``IndexPut_``): each one's
forward writes into its first input's bytes, its backward sits beside it.

A backward here cannot read the overwritten values, so each one's docstring says what it
keeps instead. Nothing here checks, bumps versions or rebases histories: the methods
(``t.add_(o)``, ...) and the driver that runs these ops are in :mod:`microtorch.functions.inplace`.
"""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor
from .broadcast import unbroadcast
from .elementwise import clone
from .strided import writable


def _data(o):
    return o._data if isinstance(o, Tensor) else o


def _zeros_like(g: Tensor) -> Tensor:
    """A gradient of zeros in g's shape that costs one element (stride-0 view)."""
    return Tensor._wrap(np.zeros((), dtype=g.dtype)).expand(*g.shape)


# ----------------------------------------------------------------------------------------------
# the ops (forward writes into x; backward beside it)
# ----------------------------------------------------------------------------------------------
class _InplaceOp(Function):
    is_view = True  # the result is x's own bytes
    inplace = True


class Add_(_InplaceOp):
    """x ← x + α·o;  d/dx = 1, d/do = α  (o: a tensor or a number)."""

    @staticmethod
    def forward(ctx, x, o, alpha):
        ctx.shape, ctx.alpha = getattr(o, "shape", None), alpha
        out = writable(x)
        np.add(out, _data(o) if alpha == 1 else _data(o) * alpha, out=out, casting="unsafe")
        return x._data

    @staticmethod
    def backward(ctx, g):
        if len(ctx.next) == 1:  # o was a number
            return g
        if not ctx.needs_input_grad[1]:
            return g, None
        go = unbroadcast(g, ctx.shape)
        return g, go if ctx.alpha == 1 else go * ctx.alpha


def _save_operand_and_old(ctx, x, o) -> None:
    """For x ← x·o and x ← x/o: keep a number operand as is; save a tensor operand, plus a
    (differentiable) copy of x's old values only when o's own gradient will need them."""
    if not isinstance(o, Tensor):
        ctx.number = o
    elif ctx.needs_input_grad and ctx.needs_input_grad[1]:
        ctx.save_for_backward(o, clone(x))
    else:
        ctx.save_for_backward(o)


class Mul_(_InplaceOp):
    """x ← x · o;  d/dx = o, d/do = x_old (a copy of x_old is kept only if o requires grad)."""

    @staticmethod
    def forward(ctx, x, o):
        _save_operand_and_old(ctx, x, o)
        out = writable(x)
        np.multiply(out, _data(o), out=out, casting="unsafe")
        return x._data

    @staticmethod
    def backward(ctx, g):
        if len(ctx.next) == 1:
            return g * ctx.number
        saved = ctx.saved_tensors
        o = saved[0]
        gx = g * o if ctx.needs_input_grad[0] else None
        go = unbroadcast(g * saved[1], o.shape) if ctx.needs_input_grad[1] else None
        return gx, go


class Div_(_InplaceOp):
    """x ← x / o;  d/dx = 1/o, d/do = -x_old/o² (a copy of x_old is kept only if o requires
    grad, as in PyTorch — it does not save the result, so later writes into x are fine)."""

    @staticmethod
    def forward(ctx, x, o):
        _save_operand_and_old(ctx, x, o)
        out = writable(x)
        np.true_divide(out, _data(o), out=out)
        return x._data

    @staticmethod
    def backward(ctx, g):
        if len(ctx.next) == 1:
            return g / ctx.number
        saved = ctx.saved_tensors
        o = saved[0]
        gx = g / o if ctx.needs_input_grad[0] else None
        go = unbroadcast(-g * saved[1] / (o * o), o.shape) if ctx.needs_input_grad[1] else None
        return gx, go


class Clamp_(_InplaceOp):
    """x ← min(max(x, lo), hi);  d/dx = 1 where lo ≤ x_old ≤ hi (a boolean mask is kept)."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        if lo is None and hi is None:
            raise RuntimeError("clamp_: at least one of 'min' or 'max' must not be None")
        d = x._data
        inside = np.ones(d.shape, dtype=bool)
        if lo is not None:
            inside &= d >= lo
        if hi is not None:
            inside &= d <= hi
        ctx.inside = inside
        out = writable(x)
        np.clip(out, lo, hi, out=out)
        return x._data

    @staticmethod
    def backward(ctx, g):
        return g * Tensor._wrap(ctx.inside.astype(g.dtype))


class Relu_(_InplaceOp):
    """x ← max(x, 0);  d/dx = 1 where the *output* is ≠ 0 (x_old > 0, or NaN as in PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()
        out = writable(x)
        np.maximum(out, 0, out=out)
        return x._data

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * Tensor._wrap((z._data != 0).astype(g.dtype))


class _UnaryFromOutput(_InplaceOp):
    """x ← f(x) for an f whose derivative is a function of its output (saved after the write)."""

    ufunc = None

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_output()
        out = writable(x)
        cls.compute(out)
        return x._data

    @classmethod
    def compute(cls, out):
        cls.ufunc(out, out=out)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return type(ctx).derivative(g, z)


class Exp_(_UnaryFromOutput):
    """x ← eˣ;  d/dx = eˣ = the output."""

    ufunc = np.exp

    @staticmethod
    def derivative(g, z):
        return g * z


class Sigmoid_(_UnaryFromOutput):
    """x ← σ(x);  d/dx = z (1 - z)."""

    @classmethod
    def compute(cls, out):
        e = np.exp(-np.abs(out))
        np.copyto(out, np.where(out >= 0, 1 / (1 + e), e / (1 + e)), casting="unsafe")

    @staticmethod
    def derivative(g, z):
        return g * z * (1 - z)


class Tanh_(_UnaryFromOutput):
    """x ← tanh x;  d/dx = 1 - z²."""

    ufunc = np.tanh

    @staticmethod
    def derivative(g, z):
        return g * (1 - z * z)


class Sqrt_(_UnaryFromOutput):
    """x ← √x;  d/dx = 1 / (2z)."""

    ufunc = np.sqrt

    @staticmethod
    def derivative(g, z):
        return g / (2 * z)


class Neg_(_InplaceOp):
    """x ← -x;  d/dx = -1."""

    @staticmethod
    def forward(ctx, x):
        out = writable(x)
        np.negative(out, out=out)
        return x._data

    @staticmethod
    def backward(ctx, g):
        return -g


class Copy_(_InplaceOp):
    """x ← src (broadcast, converted to x's dtype);  d/dx = 0 (overwritten), d/dsrc = 1."""

    @staticmethod
    def forward(ctx, x, src):
        ctx.shape, ctx.dtype = src.shape, src.dtype
        np.copyto(writable(x), src._data, casting="unsafe")
        return x._data

    @staticmethod
    def backward(ctx, g):
        gs = unbroadcast(g, ctx.shape) if ctx.needs_input_grad[1] else None
        return _zeros_like(g), (gs if gs is None or gs.dtype == ctx.dtype else gs.to(ctx.dtype))


class Fill_(_InplaceOp):
    """x ← value everywhere;  d/dx = 0, d/dvalue = Σ g (for a 0-d tensor value)."""

    @staticmethod
    def forward(ctx, x, value):
        v = value._data if isinstance(value, Tensor) else value
        writable(x)[...] = v
        return x._data

    @staticmethod
    def backward(ctx, g):
        if len(ctx.next) == 1:
            return _zeros_like(g)
        return _zeros_like(g), g.sum()


class IndexPut_(_InplaceOp):
    """x[key] ← v for an integer-array / boolean-mask key;  d/dx = g with the written
    positions zeroed, d/dv = g at those positions (summed back to v's shape)."""

    @staticmethod
    def forward(ctx, x, v, key, index_tensors=()):
        ctx.key, ctx.shape = key, v.shape
        if index_tensors:
            ctx.save_for_backward(*index_tensors)  # for their versions (see shape._index_tensors)
        out = writable(x)
        try:
            out[key] = v._data
        except (IndexError, ValueError) as e:
            raise IndexError(f"{e} (assigning a value of shape {list(v.shape)} into a tensor of shape "
                             f"{list(x.shape)})".replace("axis", "dimension")) from None
        keep = np.ones(x.shape, dtype=bool)
        keep[key] = False
        ctx.keep = keep
        return x._data

    @staticmethod
    def backward(ctx, g):
        ctx.saved_arrays()  # raises if an index tensor was written in place since forward
        gx = g * Tensor._wrap(ctx.keep.astype(g.dtype)) if ctx.needs_input_grad[0] else None
        gv = unbroadcast(g[ctx.key], ctx.shape) if ctx.needs_input_grad[1] else None
        return gx, gv
