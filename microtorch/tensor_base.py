"""What a tensor is made of: :class:`TensorBase`, a view (shape, strides, offset, dtype) of
a refcounted :class:`~microtorch.memory.storage.Storage`, and the constructors every op
uses to make one.

**The layers of the core**, each importing only the ones before it (no import cycles)::

    dtypes, grad_mode, memory (storages and allocators)
      -> tensor_base   what a tensor is made of; its constructors
      -> node          Function (the op contract) and SavedTensor
      -> functions/*, creation, comparison, autograd   the ops, factories, the backward engine
      -> tensor        Tensor: TensorBase plus every op as a method

The ops sit below :class:`microtorch.tensor.Tensor` (whose methods call them), so they
name tensors by this base class (``from ..tensor_base import TensorBase as Tensor``: every
tensor is one) and make new ones with its constructors, which create instances of the
class ``microtorch.tensor`` registers as ``TensorBase._tensor_class`` — the same
arrangement as PyTorch, whose C++ core makes instances of the Python class ``torch.Tensor``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .memory.storage import Storage, empty_storage, new_storage


class TensorBase:
    """A tensor's fields: ``_data`` (the numpy view of the bytes it reads), ``_storage``
    (whose bytes they are), ``_base`` (the tensor it is a view of, for autograd), and the
    autograd fields ``requires_grad``, ``_grad``, ``grad_fn``."""

    __slots__ = ("_data", "_storage", "requires_grad", "_grad", "grad_fn", "_base",
                 "_retains_grad", "name", "_tid", "__weakref__")
    #: The class of every tensor the constructors make: :class:`microtorch.tensor.Tensor`
    #: (set once, where that class is defined).
    _tensor_class: type

    @classmethod
    def _wrap(cls, array: np.ndarray, requires_grad: bool = False, grad_fn=None,
              tag: str = "activation") -> "TensorBase":
        """A tensor over a fresh storage holding ``array``'s values (in the allocator serving ``tag``)."""
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        storage = new_storage(array, tag)
        t = object.__new__(TensorBase._tensor_class)
        return _init(t, array if storage.block is None else storage.data.reshape(array.shape),
                     storage, None, requires_grad, grad_fn)

    @classmethod
    def _empty(cls, shape: tuple[int, ...], dtype: np.dtype, tag: str = "activation") -> "TensorBase":
        """An uninitialised tensor in a fresh storage (the caller fills it with ``out=``)."""
        storage = empty_storage(math.prod(shape), dtype, tag)
        return _init(object.__new__(TensorBase._tensor_class), storage.data.reshape(shape), storage,
                     None, False, None)

    @classmethod
    def _over(cls, array: np.ndarray, storage: Storage, requires_grad: bool = False,
              grad_fn=None) -> "TensorBase":
        """A tensor reading ``array``, which views ``storage`` (an op wrote its result there)."""
        return _init(object.__new__(TensorBase._tensor_class), array, storage, None, requires_grad, grad_fn)

    @classmethod
    def _view(cls, array: np.ndarray, base: "TensorBase", requires_grad: bool = False,
              grad_fn=None) -> "TensorBase":
        """A tensor reading ``array``, a numpy view into ``base``'s storage (zero-copy)."""
        return _init(object.__new__(TensorBase._tensor_class), array, base._storage,
                     base._base if base._base is not None else base, requires_grad, grad_fn)

    def __del__(self):
        storage = self._storage
        if not storage.freed:
            storage.decref(self)


def _init(t: TensorBase, array, storage: Storage, base, requires_grad, grad_fn) -> TensorBase:
    t._data = array
    t._storage = storage
    t._base = base
    t.requires_grad = requires_grad
    t._grad = None
    t.grad_fn = grad_fn
    t._retains_grad = False
    t.name = None
    t._tid = None
    storage.incref(t)
    return t


def repoint(t: TensorBase, array: np.ndarray, storage: Storage) -> None:
    """Make ``t`` read ``array``, a numpy view into ``storage``, instead of its old bytes.

    Used to move parameters into one flat buffer (:mod:`microtorch.nn.flat`): the tensor
    object stays the same (modules and optimizers keep referring to it), only the bytes
    behind it change. Refcounts stay exact: +1 on the new storage, then −1 on the old one
    (which frees its block if ``t`` was its last holder). Views taken of ``t`` before the
    move keep reading the old bytes.
    """
    old = t._storage
    storage.incref(t)
    t._data, t._storage, t._base = array, storage, None
    if old.views is not None:  # an arena storage must not poison t when it is reset later
        old.views[:] = [ref for ref in old.views if ref() is not t]
    if not old.freed:
        old.decref(t)


def _sizes(op: str, sizes, infer: bool = False) -> tuple[int, ...]:
    """PyTorch's size arguments, ``f(2, 3)`` or ``f((2, 3))``: ints (or 0-d integer tensors),
    nothing else — ``ones((2, 3.5))`` is a TypeError, not shape (2, 3). Sizes are >= 0; with
    ``infer`` (view, reshape, expand) one may also be -1."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    out = []
    for i, n in enumerate(sizes):
        if type(n) is not int:
            if isinstance(n, TensorBase) and n.ndim == 0 and n.dtype.kind in "iu":
                n = n.item()
            elif isinstance(n, (numbers.Integral, np.integer)):
                n = int(n)
            else:
                raise TypeError(f"{op}(): argument 'size' must be tuple of ints, but found element of "
                                f"type {type(n).__name__} at pos {i} ({n!r}); sizes are whole numbers")
        if n < 0 and not (infer and n == -1):
            if infer:
                raise RuntimeError(f"invalid shape dimension {n} at index {i} of shape {list(sizes)} "
                                   "(sizes are >= 0, or -1 for the one size to infer)")
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(sizes)}")
        out.append(n)
    return tuple(out)


def _dim(dim: int, ndim: int, op: str, new: bool = False) -> int:
    """Normalise a possibly negative ``dim``; a clear IndexError when it is out of range.

    ``new``: ``dim`` places a new dimension (unsqueeze, stack), so ``ndim`` counts the result's
    dimensions, one more than the input has; the message names the input's."""
    if type(dim) is not int and not isinstance(dim, np.integer):
        raise TypeError(f"{op}(): argument 'dim' must be an int, got {type(dim).__name__} ({dim!r})")
    n = max(ndim, 1)  # a 0-d tensor accepts dim 0 and -1, as in PyTorch
    if not -n <= dim < n:
        where = (f"for a new dimension of a tensor with {ndim - 1}" if new else f"for a tensor with {ndim}")
        raise IndexError(f"{op}: dimension {dim} is out of range {where} dimension(s) (valid: {-n} .. {n - 1})")
    return dim % n
