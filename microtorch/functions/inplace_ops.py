"""The in-place ops as autograd Functions (``Add_``, ``Mul_``, ..., ``IndexPut_``): each one's
forward writes into its first input's bytes, its backward sits beside it — or, for the unary
ops whose backward reads only their output (or nothing), both come from the out-of-place op
itself (:func:`inplace_of`, reading the op's ``inplace_variant`` declaration).

A backward here cannot read the overwritten values, so each one's docstring says what it
keeps instead. Nothing here checks, bumps versions or rebases histories: the methods
(``t.add_(o)``, ...) and the driver that runs these ops are in :mod:`microtorch.functions.inplace`.
"""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor
from .broadcast import unbroadcast
from .elementwise import Add, Clamp, Div, Exp, Mul, Neg, Relu, Sigmoid, Sqrt, Tanh, clone, true_divide
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
    variant_of = None  # the out-of-place op whose declared in-place variant this is


class Add_(_InplaceOp):
    """x ← x + α·o;  d/dx = 1, d/do = α  (o: a tensor or a number)."""

    variant_of = Add

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

    variant_of = Mul

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

    variant_of = Div

    @staticmethod
    def forward(ctx, x, o):
        _save_operand_and_old(ctx, x, o)
        out = writable(x)
        true_divide(out, _data(o), out=out)
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
    """x ← min(max(x, lo), hi);  d/dx = 1 where lo ≤ x_old ≤ hi: the mask of :class:`Clamp`
    (:meth:`Clamp.inside`), taken before the write, is all backward keeps."""

    variant_of = Clamp

    @staticmethod
    def forward(ctx, x, lo, hi):
        if lo is None and hi is None:
            raise RuntimeError("clamp_: at least one of 'min' or 'max' must not be None")
        ctx.inside = Clamp.inside(x._data, lo, hi)
        out = writable(x)
        np.clip(out, lo, hi, out=out)
        return x._data

    @staticmethod
    def backward(ctx, g):
        return Clamp.masked(g, ctx.inside)


def inplace_of(op: type[Function], backward=None) -> type[_InplaceOp]:
    """The in-place op of a unary ``op`` whose declared variant's backward reads its output
    or nothing (``op.inplace_variant``), derived from ``op`` itself: forward writes
    ``op.compute`` into x's own bytes (asking for the output to be saved, if backward reads
    it), and backward *is* ``op``'s backward — so the formula exists once (``backward``, if
    given, replaces it: the same formula, built from ``op``'s parts)."""
    reads = op.inplace_variant.reads
    if reads not in ("output", "nothing"):
        raise TypeError(f"{op.__name__}'s in-place variant reads {reads!r}: write it by hand")

    def forward(ctx, x):
        if reads == "output":
            ctx.save_output()  # saved after the write: the new values, which backward reads
        out = writable(x)
        op.compute(out, out=out)
        return x._data

    doc = (f"x ← {op.__name__.lower()}(x) in place, derived from :class:`{op.__name__}` (see "
           f":func:`inplace_of`): backward is its own, reading the {'output' if reads == 'output' else 'incoming gradient only'}.")
    return type(f"{op.__name__}_", (_InplaceOp,), {
        "__doc__": doc, "__module__": __name__, "__qualname__": f"{op.__name__}_", "variant_of": op,
        "forward": staticmethod(forward), "backward": staticmethod(backward) if backward else op.__dict__["backward"]})


def _relu_backward_mask_first(ctx, g):
    """Relu's backward, g ⊙ (z ≠ 0), with the mask a temporary: released before the saved
    output, the order relu_ has always traced (Relu's own releases the output first)."""
    (z,) = ctx.saved_tensors
    return g * Relu.mask(z, g.dtype)


Relu_ = inplace_of(Relu, _relu_backward_mask_first)
Exp_ = inplace_of(Exp)
Sigmoid_ = inplace_of(Sigmoid)
Tanh_ = inplace_of(Tanh)
Sqrt_ = inplace_of(Sqrt)
Neg_ = inplace_of(Neg)


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
