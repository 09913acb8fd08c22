"""In-place ops: ``add_``, ``sub_``, ``mul_``, ``div_``, ``clamp_``, ``relu_``, ``exp_``,
``sigmoid_``, ``tanh_``, ``neg_``, ``sqrt_``, ``zero_``, ``fill_``, ``copy_`` and
``t[idx] = v``, on tensors and on views — with PyTorch's rules and errors.

**What an in-place op does.** It writes its result into the bytes of the tensor it is
called on (no new storage) and returns that same tensor. Every write bumps the storage's
``version`` counter (shared by the base and all its views). Tensors saved for backward
remember the version they saw, so backward through a node whose saved bytes changed since
raises PyTorch's "one of the variables needed for gradient computation has been modified by
an inplace operation" error instead of computing with the wrong numbers.

**Refused, as in PyTorch** (each checked before any byte is written): a leaf that requires
grad, a result type the tensor cannot hold, a written-to tensor whose elements share bytes, an
input that shares some but not all of its bytes — see :mod:`microtorch.functions.inplace_checks`.

**Autograd.** An in-place op is a :class:`~microtorch.node.Function` like any other
(class ``Add_``, node ``Add_Backward``; the classes are in
:mod:`microtorch.functions.inplace_ops`): its ``forward`` writes into the first input's
bytes. Afterwards the written tensor *is* the op's output, so its ``grad_fn`` becomes the
new node (its history is "rebased"). Its backward must not need the overwritten values;
what it reads instead is declared on the out-of-place op (``Relu.inplace_variant``, a
:class:`~microtorch.node.InplaceVariant`): ``relu_``, ``exp_``, ``sigmoid_``, ``tanh_`` and
``sqrt_`` use their *output* (saved after the write) — those, and ``neg_``, are derived from
their op (:func:`~microtorch.functions.inplace_ops.inplace_of`: the op's formula and
backward, written once); ``mul_`` and ``div_`` use the other operand, plus a copy of the old
values only if the other operand requires grad (what PyTorch does too); ``clamp_`` keeps
:class:`~microtorch.functions.elementwise.Clamp`'s boolean mask.

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

import numpy as np

from .. import dtypes
from ..creation import tensor
from ..grad_mode import is_grad_enabled, no_grad
from ..node import Function
from ..memory import views as _views
from ..tensor_base import TensorBase as Tensor
from .inplace_checks import (_check_autograd, _check_broadcast, _check_inputs, _check_result_type,
                             _check_written, _scalar_dtype)
from .inplace_ops import (Add_, Clamp_, Copy_, Div_, Exp_, Fill_, IndexPut_, Mul_, Neg_, Relu_,
                          Sigmoid_, Sqrt_, Tanh_)
from .shape import _index_key, _index_tensors, _is_advanced, ints_first
from .strided import as_strided, strided_array


# ----------------------------------------------------------------------------------------------
# the driver: check, write, bump, rebase
# ----------------------------------------------------------------------------------------------
def _inplace(op_cls, name: str, t: Tensor, *args, tensors=()) -> Tensor:
    """Run in-place op ``op_cls`` on ``t``; ``tensors`` are the tensor arguments (checked
    for overlap with ``t``)."""
    base = _check_autograd(t, name)
    _check_written(t)
    _check_inputs(t, *tensors)
    floating = dtypes.is_floating(t.dtype)
    # a view's place in its base, found before any byte is written: _region refuses a view
    # that reaches outside its base's elements (only needed when the write is recorded)
    region = _region(base, t) if base is not None and floating and _records(t, args) else None
    if floating:
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
        _set_history(t, node)
        owner = t
    else:
        _set_history(base, CopySlices.apply(base, result, *region).grad_fn)
        owner = base
    del result  # a temporary alias of t's bytes: not a view anyone holds
    _rebase_views(owner)
    return t


def _records(t: Tensor, args) -> bool:
    """Will the op record a node? (grad mode on, and ``t`` or a tensor argument requires
    grad: :meth:`Function.apply`'s rule.)"""
    return is_grad_enabled() and (t.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args))


def _set_history(t: Tensor, node) -> None:
    """``t``'s values are now ``node``'s output. A retained gradient follows the new node
    (PyTorch: after ``y.retain_grad(); y.mul_(3)``, ``y.grad`` is d(loss)/d(the new y))."""
    old, t.grad_fn = t.grad_fn, node
    t.requires_grad = node is not None or t.requires_grad
    if t._retains_grad and node is not old:
        if old is not None and old._retained:
            old._retained = [ref for ref in old._retained if ref() is not t] or None
        if node is not None:
            node._retain(t)


def _rebase_views(base: Tensor) -> None:
    """Every live differentiable view of ``base`` reads the new bytes: make its grad_fn an
    as_strided view of the new ``base``."""
    for v in _views.live_views(base._storage):
        if v._base is base:
            fresh = as_strided(base, v.shape, v.stride(), v.storage_offset())
            _set_history(v, fresh.grad_fn)
            v.requires_grad = fresh.requires_grad


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


def _as_operand(value, t: Tensor):
    """A tensor operand in ``t``'s dtype (a differentiable cast if needed), or a plain
    Python number (numpy computes with it in ``t``'s dtype: no tensor, no allocation)."""
    if isinstance(value, Tensor):
        return value if value.dtype == t.dtype else value.to(t.dtype)
    return value.item() if isinstance(value, np.generic) else value


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
    if t._data.dtype.kind == "b" or (other._data.dtype.kind == "b" if isinstance(other, Tensor)
                                     else isinstance(other, (bool, np.bool_))):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
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
    if t.dtype == np.bool_:
        raise RuntimeError("relu_ is not implemented for bool tensors (as in PyTorch)")
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
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return _inplace(Neg_, "neg_", t)


def copy_(t: Tensor, src) -> Tensor:
    """Write ``src`` (broadcast to ``t``'s shape, converted to its dtype) into ``t``."""
    if not isinstance(src, Tensor):
        src = tensor(src, dtype=t.dtype)
    _check_broadcast(t, src, "copy_")
    return _inplace(Copy_, "copy_", t, src, tensors=(src,))


def fill_(t: Tensor, value) -> Tensor:
    """Set every element of ``t`` to ``value`` (a number or a 0-d tensor)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions")
        # no overlap check: the one value is read before any write, so t.fill_(t[1]) is fine (PyTorch)
        return _inplace(Fill_, "fill_", t, value)
    _scalar_dtype(value, t.dtype)  # a clear error for non-numbers
    return _inplace(Fill_, "fill_", t, value)


def zero_(t: Tensor) -> Tensor:
    """Set every element of ``t`` to 0."""
    return _inplace(Fill_, "zero_", t, 0)


def setitem(t: Tensor, key, value) -> None:
    """``t[key] = value``. Basic keys (ints, slices, None, ...) write through a view
    (``t[key].copy_(value)``, so CopySlices rebases ``t``'s history); integer-array and
    boolean-mask keys write directly into ``t`` (PyTorch's ``index_put_``)."""
    split = ints_first(key)
    if split is not None:  # PyTorch's order: into the integers' view, at the rest of the key
        setitem(t[split[0]], split[1], value)
        return
    if isinstance(value, Tensor) and value.ndim and value.shape[0] == 1:
        # PyTorch drops a value's leading size-1 dims first: t[...] = v of shape (1, n) fills a t of shape (n,)
        sizes = list(value.shape)
        while sizes and sizes[0] == 1:
            sizes.pop(0)
        value = value.reshape(sizes)
    index_tensors, key = _index_tensors(key), _index_key(key)
    if _is_advanced(key):
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=t.dtype)
        elif value.dtype != t.dtype:
            value = value.to(t.dtype)
        _inplace(IndexPut_, "index_put_", t, value, key, index_tensors, tensors=(value,))
        return
    target = t[key]
    if isinstance(value, Tensor):
        copy_(target, value)
    else:
        fill_(target, value)
