"""Storage: the bytes behind tensors, with an explicit reference count.

A :class:`~microtorch.Tensor` is only a *view* (shape, strides, offset, dtype) over a
``Storage``. Several tensors can view one storage (that is what zero-copy views are), and
autograd nodes that saved a tensor for backward hold the storage too. ``refcount`` counts
exactly those holders:

* +1 for each tensor viewing the storage, −1 when that tensor object goes away
  (CPython frees objects deterministically when their last reference goes);
* +1 for each saved-for-backward slot, −1 when the node releases its saved tensors
  (right after it ran in backward, unless ``retain_graph=True``).

When the count reaches 0 the bytes are handed back and the storage is marked ``freed``.
The ``version`` counter is bumped by every in-place write; a saved tensor remembers the
version it saw, so backward can refuse to use bytes that changed under it.

Allocation goes through one small interface, :func:`new_storage`, so the allocators in
:mod:`microtorch.memory` can own the bytes without the rest of the engine changing.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import trace as _trace

_storage_ids = itertools.count(1)


class Storage:
    """A flat buffer of one dtype with a reference count and a version counter."""

    __slots__ = ("data", "nbytes", "refcount", "version", "freed", "id", "__weakref__")

    def __init__(self, flat: np.ndarray):
        self.data = flat  # 1-D array over the whole buffer
        self.nbytes = flat.nbytes
        self.refcount = 0
        self.version = 0
        self.freed = False
        self.id = next(_storage_ids)
        rec = _trace.active
        if rec is not None:
            rec.emit("alloc", storage=self.id, nbytes=self.nbytes, dtype=flat.dtype.name)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def incref(self, holder) -> None:
        """Another tensor or saved slot (``holder``) now refers to these bytes."""
        self.refcount += 1
        rec = _trace.active
        if rec is not None:
            rec.emit("refcount", storage=self.id, refcount=self.refcount, delta=1, holder=_describe(holder, rec))

    def decref(self, holder) -> None:
        """``holder`` let go; at zero references the bytes are released."""
        self.refcount -= 1
        rec = _trace.active
        if rec is not None:
            rec.emit("refcount", storage=self.id, refcount=self.refcount, delta=-1, holder=_describe(holder, rec))
        if self.refcount == 0:
            self.release()

    def release(self) -> None:
        """Hand the bytes back. Any later use is a bug and raises."""
        self.data = None
        self.freed = True
        rec = _trace.active
        if rec is not None:
            rec.emit("free", storage=self.id, nbytes=self.nbytes)

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"refcount={self.refcount}"
        return f"<Storage #{self.id} {self.nbytes} bytes, {state}, version={self.version}>"


def new_storage(array: np.ndarray) -> Storage:
    """Give a C-contiguous ``array``'s bytes to a new storage (zero-copy).

    This is the single allocation point of the engine: op results and creation functions
    come through here.
    """
    return Storage(array.reshape(-1))


def _describe(holder, rec) -> str:
    """How a refcount event names who holds the reference (``tensor 3``, ``node 7 (MulBackward)``)."""
    nid = getattr(holder, "_nid", False)
    if nid is not False:  # a graph node holding a saved tensor
        return f"node {_trace.node_id(holder)} ({holder.name})"
    return f"tensor {rec.tensor(holder)}" if hasattr(holder, "_tid") else str(holder)
