"""Storage: the bytes behind tensors, with an explicit reference count.

A :class:`~microtorch.Tensor` is only a *view* (shape, strides, offset, dtype) over a
``Storage``. Several tensors can view one storage (that is what zero-copy views are), and
autograd nodes that saved a tensor for backward hold the storage too. ``refcount`` counts
exactly those holders:

* +1 for each tensor viewing the storage, −1 when that tensor object goes away
  (CPython frees objects deterministically when their last reference goes);
* +1 for each saved-for-backward slot, −1 when the node releases its saved tensors
  (right after it ran in backward, unless ``retain_graph=True``).

When the count reaches 0 the block goes back to the allocator it came from and the storage
is marked ``freed``. The ``version`` counter is bumped by every in-place write; a saved
tensor remembers the version it saw, so backward can refuse to use bytes that changed.

Where the bytes come from is decided by :mod:`~microtorch.memory.placement`: a size-class
pool by default, the step arena for activations inside ``step_arena()``, or plain numpy
("heap") inside ``use_heap()``. :func:`new_storage` and :func:`empty_storage` are the only
two places the engine allocates.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from . import placement
from .. import recording as _trace

_storage_ids = itertools.count(1)


class StaleTensorError(RuntimeError):
    """A tensor whose bytes were reclaimed (its arena was reset) was used."""


class Storage:
    """A flat buffer of one dtype with a reference count and a version counter."""

    __slots__ = ("data", "nbytes", "refcount", "version", "freed", "id", "block", "tag", "stale",
                 "views", "__weakref__")

    def __init__(self, flat: np.ndarray, block=None, tag: str = "activation"):
        self.data = flat  # 1-D array over the whole buffer
        self.nbytes = nbytes = flat.nbytes
        self.refcount = 0
        self.version = 0
        self.freed = False
        self.stale = None  # why the bytes are gone, once an arena reset reclaimed them
        self.id = next(_storage_ids)
        self.block = block
        self.tag = tag
        self.views = None
        if block is not None:
            block.user = weakref.ref(self)  # a trace's baseline finds live storages through their blocks
            if block.owner.resets_under_users:
                # an arena can reclaim bytes under live tensors: remember them to poison on reset
                self.views = []
        placement.track_alloc(nbytes)
        rec = _trace.active
        if rec is not None:
            rec.emit("alloc", storage=self.id, nbytes=nbytes, dtype=flat.dtype.name, tag=tag,
                     allocator=block.owner.name if block is not None else "heap",
                     block=block.id if block is not None else None)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def incref(self, holder) -> None:
        """Another tensor or saved slot (``holder``) now refers to these bytes."""
        self.refcount += 1
        if self.views is not None and hasattr(holder, "_tid"):
            self.views.append(weakref.ref(holder))
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
        """Hand the bytes back to their allocator. Any later use is a bug and raises."""
        self.data = None
        self.freed = True
        if self.stale is None:  # a stale storage's bytes were already counted out at the reset
            placement.track_free(self.nbytes)
        block = self.block
        if block is not None:
            block.owner.free(block)  # a no-op for a block its arena already reset
        rec = _trace.active
        if rec is not None:
            rec.emit("free", storage=self.id, nbytes=self.nbytes, stale=self.stale is not None)

    def invalidate(self, why: str) -> None:
        """The bytes were reclaimed under live tensors: make every use of them raise."""
        self.stale = why
        placement.track_free(self.nbytes)
        message = (f"use after reset: storage #{self.id} ({self.nbytes} bytes, {self.tag}) — {why}, "
                   "so its bytes now belong to something else. Copy out what you need before the "
                   "step ends: loss.item(), t.tolist(), or t.numpy() (a copy for arena tensors).")
        for ref in self.views:
            t = ref()
            if t is not None:
                t._data = _Stale(message)
        self.data = None

    def __repr__(self) -> str:
        state = ("stale: " + self.stale) if self.stale else "freed" if self.freed else f"refcount={self.refcount}"
        where = f" in {self.block.owner.name}" if self.block is not None else ""
        return f"<Storage #{self.id} {self.nbytes} bytes{where}, {state}, version={self.version}>"


class _Stale:
    """Stands in for a tensor's numpy view once its arena was reset: touching it raises."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        object.__setattr__(self, "message", message)

    def __getattr__(self, name):
        raise StaleTensorError(self.message)

    def __len__(self):
        raise StaleTensorError(self.message)


def new_storage(array: np.ndarray, tag: str = "activation") -> Storage:
    """A storage holding ``array``'s values (C-contiguous): its own bytes on the heap,
    or a copy in a block of the allocator that serves ``tag``."""
    allocator = placement.allocator_for(tag)
    if allocator is None:
        return Storage(array.reshape(-1), None, tag)
    block = allocator.alloc(array.nbytes, tag)
    flat = np.frombuffer(block.memory, array.dtype, array.size)
    flat[...] = array.reshape(-1)
    return Storage(flat, block, tag)


def empty_storage(count: int, dtype: np.dtype, tag: str = "activation") -> Storage:
    """An uninitialised storage of ``count`` elements — ops write their results into it (``out=``)."""
    allocator = placement.allocator_for(tag)
    if allocator is None:
        return Storage(np.empty(count, dtype), None, tag)
    block = allocator.alloc(count * dtype.itemsize, tag)
    # the block's first bytes as `count` elements of `dtype` (frombuffer: half the time of .view)
    return Storage(np.frombuffer(block.memory, dtype, count), block, tag)


def _describe(holder, rec) -> _trace.Holder:
    """Who holds the reference, for a refcount event: a tensor, a graph node (``node 7
    (MulBackward)``) or something named in words."""
    nid = getattr(holder, "_nid", False)
    if nid is not False:  # a graph node holding a saved tensor
        return _trace.Holder.of_node(_trace.node_id(holder), holder.name)
    return _trace.Holder.of_tensor(rec.tensor(holder)) if hasattr(holder, "_tid") else _trace.Holder(str(holder))
