"""Recomputation in backward: the saved-tensor placeholders of a checkpointed region.

This is PyTorch's non-reentrant checkpoint (``use_reentrant=False``). The region's ops record
their graph nodes as usual, but each tensor they would save for backward is replaced by a
:class:`Placeholder` that holds no bytes. Only the region's inputs are kept (by its
:class:`Frame`). The first time backward unpacks a placeholder, the frame runs the region
again from its inputs, with the random-number state of the first run, and catches the
tensors the ops save: the k-th tensor saved by the rerun fills the k-th placeholder. The
original nodes then run their own backward on those bytes, so the gradients are exactly the
ones of the run without checkpoints.

Which tensors become placeholders: those whose storage was made inside the region. A
tensor that existed before (an input, a parameter, a constant the function closes over) is
saved the usual way: its bytes are alive anyway. In a nested checkpoint "the usual way" is
the enclosing region's hook, so an inner region's inputs are placeholders of the outer one.
"""
from __future__ import annotations

import itertools

from .. import grad_mode, node as _node
from ..memory import storage as _storage
from ..memory import trace as _trace
from ..node import SavedTensor
from ..tensor import Tensor, _init

_frame_ids = itertools.count(1)


class _NotKept:
    """The ``storage`` of a placeholder before its bytes were recomputed (id 0: none, the
    node arena's and the trace's "no storage")."""

    __slots__ = ()
    id = 0
    version = 0


NOT_KEPT = _NotKept()


def rng_state(generator):
    """The state of a :class:`~microtorch.Generator` (numpy's bit-generator state dict)."""
    return generator.rng.bit_generator.state


def set_rng_state(generator, state) -> None:
    generator.rng.bit_generator.state = state


def _ahead():
    """Every storage made from now on has a larger id than the one this returns."""
    return next(_storage._storage_ids)


class Frame:
    """One checkpointed call ``fn(*args)``: its inputs (kept), its random state, and the
    placeholders its ops saved instead of tensors."""

    def __init__(self, fn, args: tuple, kwargs: dict, generator=None):
        self.id = next(_frame_ids)
        self.name = f"checkpoint {self.id}"
        self.fn, self.kwargs, self.generator = fn, kwargs, generator
        self.rng = rng_state(generator) if generator is not None else None
        pack = _node.pack_hook or SavedTensor  # nested: the enclosing region decides
        self.parent = pack
        self.inputs = [pack(a, self) if isinstance(a, Tensor) else a for a in args]
        self.metas: list[tuple] = []  # (shape, dtype) of each placeholder, in save order
        self.placeholders = 0  # placeholders not yet released
        self.slots: list | None = None  # after a recompute: what fills each placeholder
        self.dropped: dict[int, int] = {}  # storage id -> nbytes, of what the region did not keep
        self.recomputes = 0

    def __repr__(self) -> str:  # (how refcount events name the frame as a holder)
        return self.name

    # -- forward -------------------------------------------------------------------------
    def run(self, args: tuple):
        """Run the region the first time: its ops save placeholders."""
        self.start = _ahead()
        previous, _node.pack_hook = _node.pack_hook, self.pack
        try:
            out = self.fn(*args, **self.kwargs)
        finally:
            _node.pack_hook = previous
        if self.placeholders == 0:  # nothing to recompute: let the inputs go now
            self._release_inputs()
        return out

    def pack(self, t: Tensor, owner, is_output: bool = False):
        if t._storage.id < self.start:
            return self.parent(t, owner, is_output)
        self.dropped[t._storage.id] = t._storage.nbytes
        self.metas.append((t._data.shape, t._data.dtype))
        self.placeholders += 1
        return Placeholder(self, len(self.metas) - 1, t, is_output)

    def kept_bytes(self) -> int:
        """Bytes of the inputs the frame keeps (each storage once)."""
        seen = {}
        for s in self.inputs:
            st = getattr(s, "storage", None)
            if st is not None and st.id:
                seen[st.id] = st.nbytes
        return sum(seen.values())

    # -- backward --------------------------------------------------------------------------
    def recompute(self) -> None:
        """Run the region again from its inputs and keep what its ops save, slot by slot."""
        rec = _trace.active
        if rec is not None:
            phase = rec.phase
            rec.emit("recompute", stage="begin", checkpoint=self.id, fn=_name(self.fn),
                     tensors=len(self.metas), kept_bytes=self.kept_bytes())
            rec.phase = "recompute"
        args = [s.unpack(self) if hasattr(s, "unpack") else s for s in self.inputs]
        self.slots, self._k = [None] * len(self.metas), 0
        self._start = _ahead()
        now = rng_state(self.generator) if self.rng is not None else None
        previous, _node.pack_hook = _node.pack_hook, self._capture
        try:
            if now is not None:
                set_rng_state(self.generator, self.rng)
            with grad_mode.enable_grad():
                self.fn(*args, **self.kwargs)
        finally:
            _node.pack_hook = previous
            if now is not None:
                set_rng_state(self.generator, now)
            if rec is not None:
                rec.phase = phase
        if self._k != len(self.metas):
            raise RuntimeError(
                "microtorch.utils.checkpoint: A different number of tensors was saved during the "
                f"original forward and recomputation.\nNumber of tensors saved during forward: "
                f"{len(self.metas)}\nNumber of tensors saved during recomputation: {self._k}.\n"
                "The checkpointed function must run the same ops every time it is called (no "
                "branching on random numbers or on state that changes between forward and backward).")
        self.recomputes += 1
        if rec is not None:
            recomputed = {}
            for slot in self.slots:
                if slot is not None:
                    recomputed[slot[1].id] = slot[1].nbytes
            rec.emit("recompute", stage="end", checkpoint=self.id, fn=_name(self.fn),
                     tensors=len(self.metas), recomputed_bytes=sum(recomputed.values()),
                     kept_bytes=self.kept_bytes())

    def _capture(self, t: Tensor, owner, is_output: bool = False):
        """The pack hook of a rerun: tensors made by the rerun go to the slots."""
        if t._storage.id < self._start:
            return SavedTensor(t, owner, is_output)  # (an input or parameter: alive anyway)
        k, self._k = self._k, self._k + 1
        if k >= len(self.metas):
            return Dropped()  # counted; the error is raised when the rerun ends
        shape, dtype = self.metas[k]
        if t._data.shape != shape or t._data.dtype != dtype:
            raise RuntimeError(
                "microtorch.utils.checkpoint: Recomputed values for the following tensors have "
                f"different metadata than during the forward pass.\ntensor at position {k}:\n"
                f"saved metadata: {{'shape': {list(shape)}, 'dtype': {dtype}}}\nrecomputed metadata: "
                f"{{'shape': {list(t._data.shape)}, 'dtype': {t._data.dtype}}}\nThe checkpointed "
                "function must compute the same shapes every time it is called.")
        t._storage.incref(self)
        self.slots[k] = (t._data, t._storage)
        return Dropped()

    def take(self, k: int) -> tuple:
        """The recomputed bytes of placeholder ``k`` (recomputing the region if needed)."""
        if self.slots is None or self.slots[k] is None:
            self.recompute()
        slot, self.slots[k] = self.slots[k], None
        return slot

    def released(self, k: int) -> None:
        """Placeholder ``k``'s node let go of it."""
        if self.slots is not None and self.slots[k] is not None:  # recomputed, never unpacked
            _, storage = self.slots[k]
            self.slots[k] = None
            storage.decref(self)
        self.placeholders -= 1
        if self.placeholders == 0:
            self._release_inputs()

    def _release_inputs(self) -> None:
        for s in self.inputs:
            if hasattr(s, "release"):
                s.release(self)
        self.inputs = [None if hasattr(s, "release") else s for s in self.inputs]

    def __del__(self):
        for slot in self.slots or ():
            if slot is not None and not slot[1].freed:
                slot[1].decref(self)


class Placeholder:
    """What a checkpointed region's node saved instead of a tensor: no bytes until backward
    unpacks it; then the frame's recomputation fills it (same methods as
    :class:`~microtorch.node.SavedTensor`)."""

    __slots__ = ("frame", "k", "data", "storage", "version", "requires_grad", "grad_fn", "leaf",
                 "is_output")

    def __init__(self, frame: Frame, k: int, t: Tensor, is_output: bool):
        self.frame, self.k = frame, k
        self.data, self.storage, self.version, self.leaf = None, NOT_KEPT, 0, None
        self.requires_grad, self.is_output = t.requires_grad, is_output
        self.grad_fn = None if is_output else t.grad_fn

    def checked(self, node):
        if self.storage is NOT_KEPT:
            self.data, self.storage = self.frame.take(self.k)
        if self.storage is None:
            SavedTensor.checked(self, node)  # raises "backward through the graph a second time"
        return self.data

    def unpack(self, node) -> Tensor:
        data = self.checked(node)  # (with create_graph, backward's graph links to the original nodes)
        grad_fn = node if self.is_output else self.grad_fn
        return _init(object.__new__(Tensor), data, self.storage, None, self.requires_grad, grad_fn)

    def release(self, node) -> None:
        storage = self.storage
        if storage is None:
            return
        self.storage, self.data = None, None
        if storage is not NOT_KEPT:
            storage.decref(self.frame)
        self.frame.released(self.k)


class Dropped:
    """The saved-tensor record of a rerun's node: the rerun's nodes never run backward (the
    original nodes do, on the bytes the rerun filled in), so they keep nothing."""

    __slots__ = ("version",)
    storage = NOT_KEPT
    is_output = False

    def __init__(self):
        self.version = 0

    def release(self, node) -> None:
        pass

    def checked(self, node):
        raise RuntimeError("microtorch.utils.checkpoint: a recomputation's own graph does not run "
                           "backward: use the tensors the checkpointed function returned the first time")

    unpack = checked


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
