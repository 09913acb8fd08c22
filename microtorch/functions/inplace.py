"""In-place ops: ``add_``, ``sub_``, ``mul_``, ``div_``, ``clamp_``, ``relu_``, ``exp_``,
``sigmoid_``, ``tanh_``, ``neg_``, ``sqrt_``, ``zero_``, ``fill_``, ``copy_`` and
``t[idx] = v``, on tensors and on views — with PyTorch's rules and errors.

**What an in-place op does.** It writes its result into the bytes of the tensor it is
called on (no new storage) and returns that same tensor. Every write bumps the storage's
``version`` counter (shared by the base and all its views). Tensors saved for backward
remember the version they saw, so backward through a node whose saved bytes changed since
raises PyTorch's "one of the variables needed for gradient computation has been modified by
an inplace operation" error instead of computing with the wrong numbers.

**Refused, as in PyTorch** (each checked before any byte is written):

* a leaf that requires grad, or a view of one, with grad mode on ("a leaf Variable that
  requires grad is being used in an in-place operation."). Under ``mt.no_grad()`` it is
  allowed — that is how optimizers update parameters;
* a result type the tensor cannot hold: a float result into an integer tensor, anything
  but bool into a bool tensor ("result type Float can't be cast to the desired output type
  Long"). ``copy_`` and ``fill_`` convert, as in PyTorch;
* a written-to tensor in which several elements share bytes (an ``expand``, overlapping
  ``unfold`` windows): "unsupported operation: more than one element of the written-to
  tensor refers to a single memory location". microtorch decides this exactly
  (:func:`~microtorch.memory.alias.overlaps_itself`), so unlike PyTorch it also refuses
  overlapping ``as_strided``/``unfold`` views PyTorch cannot classify;
* an input that shares some, but not all, bytes with the written-to tensor
  (``x[1:].add_(x[:-1])``): the result would depend on the order elements are visited.
  Again decided exactly, with :func:`~microtorch.memory.alias.alias`. The same view on
  both sides (``x.add_(x)``) is fine.

**Autograd.** An in-place op is a :class:`~microtorch.node.Function` like any other
(class ``Add_``, node ``Add_Backward``): its ``forward`` writes into the first input's
bytes. Afterwards the written tensor *is* the op's output, so its ``grad_fn`` becomes the
new node (its history is "rebased"). Its backward must not need the overwritten values:
``relu_``, ``exp_``, ``sigmoid_``, ``tanh_`` and ``sqrt_`` use their *output* (saved after
the write); ``mul_`` and ``div_`` use the other operand, plus a copy of the old values only
if the other operand requires grad (what PyTorch does too); ``clamp_`` keeps a boolean mask.

**In-place on a view** (PyTorch's CopySlices). Say ``v = b[1:3]`` with ``b`` a non-leaf,
and ``v.mul_(2)``. The bytes of ``b`` changed too, so ``b`` needs a new history:

    b_new = b_old everywhere, except in v's region, where it is f(v_old)

That is what happens, with two nodes:

1. ``Mul_`` is applied to the view ``v`` as usual. Its input edge goes to ``v``'s old
   ``grad_fn`` — the view node, which leads back to ``b_old``. So gradients for the region
   flow ``Mul_ → view → b_old``.
2. A ``CopySlices`` node is recorded on the *base*: its inputs are ``b_old`` and the
   ``Mul_`` result. Backward hands ``b_old`` the gradient with the region zeroed (those
   elements were overwritten) and the ``Mul_`` node the region's gradient. ``b.grad_fn``
   becomes this node.

Then every live view of ``b`` — ``v`` itself and any other view taken earlier, which reads
the changed bytes too — gets a fresh ``grad_fn``: an :func:`as_strided` view of the new
``b``. (PyTorch regenerates view nodes lazily when it notices the base's version changed;
microtorch does it eagerly at the write, using the registry of live views in
:mod:`microtorch.memory.views`.) Graphs built from a view *before* the write keep using
its old node, which is right: they computed with the old values.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..grad_mode import is_grad_enabled, no_grad
from ..node import Function
from ..memory import views as _views
from ..memory.alias import alias, layout, overlaps_itself
from ..tensor import Tensor
from .broadcast import unbroadcast
from .elementwise import clone
from .shape import _index_key, _is_advanced
from .strided import as_strided, strided_array, writable

# PyTorch's names for dtypes in its casting error
_TORCH_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int32": "Int",
                "int64": "Long", "bool": "Bool"}
_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}


# ----------------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------------
def _scalar_dtype(value, like: np.dtype) -> np.dtype:
    """The dtype a Python scalar takes next to a tensor of dtype ``like`` (PyTorch: weak)."""
    if isinstance(value, (bool, np.bool_)):
        return dtypes.bool_
    if isinstance(value, (numbers.Integral, np.integer)):
        return like if like.kind in "iuf" else dtypes.int64
    if isinstance(value, (numbers.Real, np.floating)):
        return like if like.kind == "f" else dtypes.default_float
    raise TypeError(f"in-place ops take tensors or real numbers, got {type(value).__name__}")


def _check_result_type(t: Tensor, *others, result: np.dtype | None = None) -> None:
    """Raise if the op's result type cannot be stored in ``t`` (float into int, ...)."""
    target = t.dtype
    for o in others:
        if o is None:
            continue
        d = o.dtype if isinstance(o, Tensor) else _scalar_dtype(o, target)
        if result is None or _CATEGORY[d.kind] > _CATEGORY[result.kind]:
            result = d
    if result is not None and _CATEGORY[result.kind] > _CATEGORY[target.kind]:
        raise RuntimeError(f"result type {_TORCH_NAMES.get(result.name, result.name)} can't be cast to "
                           f"the desired output type {_TORCH_NAMES.get(target.name, target.name)}")


def _check_autograd(t: Tensor, op: str):
    """PyTorch's refusals for in-place ops under grad mode. Returns t's base if t is a
    differentiable view (its writes must rebase the base's history), else None."""
    made_in_grad_mode = _views.made_in_grad_mode(t)
    base = t._base if made_in_grad_mode is not None else None
    if is_grad_enabled():
        if t.requires_grad and t.grad_fn is None:
            raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place "
                               f"operation. ({op} on a tensor created with requires_grad=True; to "
                               f"update it in place, e.g. as an optimizer does, wrap the update in "
                               f"`with mt.no_grad():`)")
        if base is not None and base.requires_grad:
            if base.grad_fn is None:
                raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                                   f"in-place operation. ({op} on a view of a tensor created with "
                                   "requires_grad=True; use `with mt.no_grad():` or write into a clone())")
            if not made_in_grad_mode:
                raise RuntimeError(
                    "A view was created in no_grad mode and is being modified inplace with grad mode "
                    "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. "
                    "You can clarify your code by moving both the view and the inplace either both "
                    "inside the no_grad block (if you don't want the inplace to be tracked) or both "
                    "outside (if you want the inplace to be tracked).")
    return base


def _check_written(t: Tensor) -> None:
    if t._data.flags.c_contiguous:  # contiguous elements never share bytes
        return
    if overlaps_itself(t):
        where = ", ".join(f"dimension {d} has stride 0" for d, (n, s) in enumerate(zip(t.shape, t.stride()))
                          if s == 0 and n > 1) or "its elements overlap"
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation. "
            f"(shape {list(t.shape)}, strides {list(t.stride())}: {where})")


def _check_inputs(t: Tensor, *others) -> None:
    for o in others:
        if not isinstance(o, Tensor) or o._storage is not t._storage:
            continue
        if layout(o) == layout(t):
            continue  # the very same elements (x.add_(x)): each one reads itself, fine
        report = alias(t, o)
        if report.answer == "must":
            ia, ib = report.witness
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor "
                "refer to a single memory location. Please clone() the tensor before performing the "
                f"operation. (element {list(ia)} of the written-to tensor and element {list(ib)} of "
                f"the input share byte {report.shared_byte} of storage #{t._storage.id})")


def _check_broadcast(t: Tensor, other, op: str) -> None:
    if isinstance(other, Tensor) and other.shape != t.shape and other.ndim:
        try:
            shape = np.broadcast_shapes(t.shape, other.shape)
        except ValueError:
            shape = None
        if shape != t.shape:
            raise RuntimeError(f"{op}: output with shape {list(t.shape)} doesn't match the broadcast "
                               f"shape {list(shape) if shape is not None else '(none)'} (the other "
                               f"operand has shape {list(other.shape)}; it must broadcast to the "
                               "written-to tensor's shape)")


def _as_operand(value, t: Tensor):
    """A tensor operand in ``t``'s dtype (a differentiable cast if needed), or a plain
    Python number (numpy computes with it in ``t``'s dtype: no tensor, no allocation)."""
    if isinstance(value, Tensor):
        return value if value.dtype == t.dtype else value.to(t.dtype)
    return value.item() if isinstance(value, np.generic) else value


def _data(o):
    return o._data if isinstance(o, Tensor) else o


# ----------------------------------------------------------------------------------------------
# the driver: check, write, bump, rebase
# ----------------------------------------------------------------------------------------------
def _inplace(op_cls, name: str, t: Tensor, *args, tensors=()) -> Tensor:
    """Run in-place op ``op_cls`` on ``t``; ``tensors`` are the tensor arguments (checked
    for overlap with ``t``)."""
    base = _check_autograd(t, name)
    _check_written(t)
    _check_inputs(t, *tensors)
    if dtypes.is_floating(t.dtype):
        result = op_cls.apply(t, *args)
    else:  # an integer/bool tensor cannot carry a gradient: no graph
        with no_grad():
            result = op_cls.apply(t, *args)
    storage = t._storage
    storage.version += 1
    node = result.grad_fn
    if node is None:
        return t
    for s in node.saved:
        if s.is_output:  # the output was saved *after* the write: it saw the new version
            s.version = storage.version
    if base is None:
        t.grad_fn, t.requires_grad = node, True
        owner = t
    else:
        rebased = CopySlices.apply(base, result, *_region(base, t)).grad_fn
        base.grad_fn, base.requires_grad = rebased, True
        owner = base
    del result  # a temporary alias of t's bytes: not a view anyone holds
    _rebase_views(owner)
    return t


def _rebase_views(base: Tensor) -> None:
    """Every live differentiable view of ``base`` reads the new bytes: make its grad_fn an
    as_strided view of the new ``base``."""
    for v in _views.live_views(base._storage):
        if v._base is base:
            fresh = as_strided(base, v.shape, v.stride(), v.storage_offset())
            v.grad_fn, v.requires_grad = fresh.grad_fn, fresh.requires_grad


def _region(base: Tensor, view: Tensor):
    """Which elements of ``base`` (flat, row-major) the view's elements are, and a 0/1 mask
    of base's shape that is 0 on them."""
    item = base._data.itemsize
    numbers = np.full(base._storage.nbytes // item, -1, dtype=np.int64)
    strided_array(numbers, base.shape, base.stride(), base.storage_offset())[...] = \
        np.arange(base.numel()).reshape(base.shape)
    idx = strided_array(numbers, view.shape, view.stride(), view.storage_offset()).copy()
    if (idx < 0).any():
        raise RuntimeError("in-place write into a view that reaches outside its base's elements "
                           "(an as_strided view?); write into the base instead")
    keep = np.ones(base.numel(), dtype=base.dtype)
    keep[idx.ravel()] = 0
    return idx, keep.reshape(base.shape)


class CopySlices(Function):
    """The base after an in-place op on one of its views: b_new = b_old outside the view's
    region, the op's result inside. Backward: b_old gets g with the region zeroed, the op's
    node gets g at the region (PyTorch's CopySlices)."""

    is_view = True

    @staticmethod
    def forward(ctx, base, region_result, idx, keep):
        ctx.idx, ctx.keep = idx, keep
        return base._data  # the bytes were already written through the view

    @staticmethod
    def backward(ctx, g):
        outside = g * Tensor._wrap(ctx.keep.astype(g.dtype, copy=False))
        return outside, g.reshape(-1)[ctx.idx]

    @property
    def name(self) -> str:
        return "CopySlices"


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
    elif is_grad_enabled() and o.requires_grad:
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
    """x ← max(x, 0);  d/dx = 1 where the *output* is > 0 (same as x_old > 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_output()
        out = writable(x)
        np.maximum(out, 0, out=out)
        return x._data

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * Tensor._wrap((z._data > 0).astype(g.dtype))


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
    def forward(ctx, x, v, key):
        ctx.key, ctx.shape = key, v.shape
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
        gx = g * Tensor._wrap(ctx.keep.astype(g.dtype)) if ctx.needs_input_grad[0] else None
        gv = unbroadcast(g[ctx.key], ctx.shape) if ctx.needs_input_grad[1] else None
        return gx, gv


# ----------------------------------------------------------------------------------------------
# the methods
# ----------------------------------------------------------------------------------------------
def _binary(op_cls, name, t, other, *extra):
    _check_result_type(t, other)
    o = _as_operand(other, t)
    _check_broadcast(t, o, name)
    return _inplace(op_cls, name, t, o, *extra, tensors=(other,))


def add_(t: Tensor, other, alpha=1) -> Tensor:
    """``t += alpha * other``, in place."""
    if alpha != 1:
        _check_result_type(t, alpha)
    return _binary(Add_, "add_", t, other, alpha)


def sub_(t: Tensor, other, alpha=1) -> Tensor:
    """``t -= alpha * other``, in place."""
    if alpha != 1:
        _check_result_type(t, alpha)
    return _binary(Add_, "sub_", t, other, -alpha)


def mul_(t: Tensor, other) -> Tensor:
    """``t *= other``, in place."""
    return _binary(Mul_, "mul_", t, other)


def div_(t: Tensor, other) -> Tensor:
    """``t /= other``, in place (true division: an integer tensor cannot hold the result)."""
    _check_result_type(t, other, result=dtypes.default_float)
    return _binary(Div_, "div_", t, other)


def clamp_(t: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 — PyTorch's names
    """``t = t.clamp(min, max)``, in place (``min``/``max``: numbers)."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        raise TypeError("clamp_: microtorch takes numbers for min and max; for tensor bounds use "
                        "mt.maximum / mt.minimum (out of place)")
    _check_result_type(t, min, max)
    return _inplace(Clamp_, "clamp_", t, min, max)


def relu_(t: Tensor) -> Tensor:
    """``t = t.relu()``, in place (its backward uses the output, so it is safe to rebase)."""
    return _inplace(Relu_, "relu_", t)


def _floating_only(op_cls, name):
    def method(t: Tensor) -> Tensor:
        _check_result_type(t, result=dtypes.default_float)
        return _inplace(op_cls, name, t)

    method.__name__ = name
    method.__doc__ = f"``t = t.{name[:-1]}()``, in place (floating tensors only)."
    return method


exp_ = _floating_only(Exp_, "exp_")
sigmoid_ = _floating_only(Sigmoid_, "sigmoid_")
tanh_ = _floating_only(Tanh_, "tanh_")
sqrt_ = _floating_only(Sqrt_, "sqrt_")


def neg_(t: Tensor) -> Tensor:
    """``t = -t``, in place."""
    if t.dtype == np.bool_:
        raise TypeError("Negation, the `-` operator, on a bool tensor is not supported.")
    return _inplace(Neg_, "neg_", t)


def copy_(t: Tensor, src) -> Tensor:
    """Write ``src`` (broadcast to ``t``'s shape, converted to its dtype) into ``t``."""
    if not isinstance(src, Tensor):
        from ..creation import tensor

        src = tensor(src, dtype=t.dtype)
    _check_broadcast(t, src, "copy_")
    return _inplace(Copy_, "copy_", t, src, tensors=(src,))


def fill_(t: Tensor, value) -> Tensor:
    """Set every element of ``t`` to ``value`` (a number or a 0-d tensor)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions")
        return _inplace(Fill_, "fill_", t, value, tensors=(value,))
    _scalar_dtype(value, t.dtype)  # a clear error for non-numbers
    return _inplace(Fill_, "fill_", t, value)


def zero_(t: Tensor) -> Tensor:
    """Set every element of ``t`` to 0."""
    return _inplace(Fill_, "zero_", t, 0)


def setitem(t: Tensor, key, value) -> None:
    """``t[key] = value``. Basic keys (ints, slices, None, ...) write through a view
    (``t[key].copy_(value)``, so CopySlices rebases ``t``'s history); integer-array and
    boolean-mask keys write directly into ``t`` (PyTorch's ``index_put_``)."""
    key = _index_key(key)
    if _is_advanced(key):
        if not isinstance(value, Tensor):
            from ..creation import tensor

            value = tensor(value, dtype=t.dtype)
        elif value.dtype != t.dtype:
            value = value.to(t.dtype)
        _inplace(IndexPut_, "index_put_", t, value, key, tensors=(value,))
        return
    target = t[key]
    if isinstance(value, Tensor):
        copy_(target, value)
    else:
        fill_(target, value)


for _name, _fn in (("add_", add_), ("sub_", sub_), ("mul_", mul_), ("div_", div_),
                   ("clamp_", clamp_), ("relu_", relu_), ("exp_", exp_), ("sigmoid_", sigmoid_),
                   ("tanh_", tanh_), ("sqrt_", sqrt_), ("neg_", neg_), ("copy_", copy_),
                   ("fill_", fill_), ("zero_", zero_), ("__setitem__", setitem),
                   # x += y is in place, as in PyTorch (the same checks and version bump as add_)
                   ("__iadd__", add_), ("__isub__", sub_), ("__imul__", mul_), ("__itruediv__", div_)):
    setattr(Tensor, _name, _fn)
