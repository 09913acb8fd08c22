"""Recomputation in backward: the saved-tensor placeholders of a checkpointed region.

This is PyTorch's non-reentrant checkpoint (``use_reentrant=False``). The region's ops record
their graph nodes as usual, but each tensor they would save for backward is replaced by a
:class:`Placeholder` that holds no bytes. Only the region's inputs are kept (by its
:class:`Frame`). The first time backward unpacks a placeholder, the frame runs the region
again from its inputs, with the random-number state of the first run, and catches the
tensors the ops save: the k-th tensor saved by the rerun fills the k-th placeholder. The
original nodes then run their own backward on those bytes, so the gradients are exactly the
ones of the run without checkpoints.

Which tensors become placeholders: those whose storage was made inside the region (one
slot per distinct view; the region's own output is kept, not recomputed; a rerun stops as
soon as the slots backward waits for are filled, PyTorch's "early stop"). A
tensor that existed before (an input, a parameter, a constant the function closes over) is
saved the usual way: its bytes are alive anyway. In a nested checkpoint "the usual way" is
the enclosing region's hook, so an inner region's inputs are placeholders of the outer one.
"""
from __future__ import annotations

import itertools

from .. import grad_mode, node as _node
from ..memory import storage as _storage
from .. import recording as _trace
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


class _Done(Exception):
    """Raised inside a rerun once every placeholder waiting for bytes has them: the rest of
    the region need not run again (PyTorch's early stop)."""


def _view_key(t: Tensor) -> tuple:
    """Which bytes a saved tensor is: its storage and its view (start in bytes, shape, strides)."""
    d, storage = t._data, t._storage
    if d.nbytes == storage.nbytes and d.nbytes and d.flags.c_contiguous:
        start = 0  # it spans its whole storage (an op's result: the usual case), so it starts there
    else:
        start = d.__array_interface__["data"][0] - storage.data.__array_interface__["data"][0]
    return storage.id, start, d.shape, d.strides


class Frame:
    """One checkpointed call ``fn(*args)``: its inputs (kept), its random state, and the
    placeholders its ops saved instead of tensors.

    Placeholders are grouped in *slots*, one per distinct saved view: ReLU's saved output is
    also the next Linear's saved input, one slot for both. A slot whose bytes are the
    region's output is filled when the forward ends (the output is alive anyway, as in the
    plain run); the others wait for a recomputation, which stops as soon as every waiting
    slot is filled.
    """

    def __init__(self, fn, args: tuple, kwargs: dict, generator=None):
        self.id = next(_frame_ids)
        self.name = f"checkpoint {self.id}"
        self.fn, self.kwargs, self.generator = fn, kwargs, generator
        self.rng = rng_state(generator) if generator is not None else None
        pack = _node.pack_hook or SavedTensor  # nested: the enclosing region decides
        self.parent = pack
        self.inputs = [pack(a, self) if isinstance(a, Tensor) else a for a in args]
        self.metas: list[tuple] = []  # (shape, dtype) of each slot
        self.seq: list[int] = []  # the slot of each tensor the region's ops saved, in save order
        self.slots: list = []  # per slot: None, or (data, storage, version) once filled
        self.waiting: list[int] = []  # per slot: placeholders that have not taken its bytes yet
        self.placeholders = 0  # placeholders not yet released
        self.dropped: dict[int, int] = {}  # storage id -> nbytes, of what is left to recompute
        self.recomputes = 0
        self.stopped_early = False

    def __repr__(self) -> str:  # (how refcount events name the frame as a holder)
        return self.name

    # -- forward -------------------------------------------------------------------------
    def run(self, args: tuple):
        """Run the region the first time: its ops save placeholders."""
        self.start, views = _ahead(), {}
        self._views, self._storage_of = views, []  # (slot -> (storage id, nbytes), while it runs)
        previous, _node.pack_hook = _node.pack_hook, self.pack
        try:
            out = self.fn(*args, **self.kwargs)
        finally:
            _node.pack_hook = previous
            del self._views
        outputs = [out] if isinstance(out, Tensor) else [o for o in out if isinstance(o, Tensor)] \
            if isinstance(out, (tuple, list)) else []
        for o in outputs:  # saved bytes that are the region's output need no recomputation
            k = views.get(_view_key(o))
            if k is not None and self.slots[k] is None:
                self._fill(k, o)
        for k, slot in enumerate(self.slots):
            if slot is None:
                st = self._storage_of[k]
                self.dropped[st[0]] = st[1]
        del self._storage_of
        if self.placeholders == 0:  # nothing to recompute: let the inputs go now
            self._release_inputs()
        return out

    def pack(self, t: Tensor, owner, is_output: bool = False):
        if t._storage.id < self.start:
            return self.parent(t, owner, is_output)
        key = _view_key(t)
        k = self._views.get(key)
        if k is None:
            k = self._views[key] = len(self.metas)
            self.metas.append((t._data.shape, t._data.dtype))
            self.slots.append(None)
            self.waiting.append(0)
            self._storage_of.append((t._storage.id, t._storage.nbytes))
        self.seq.append(k)
        self.waiting[k] += 1
        self.placeholders += 1
        return Placeholder(self, k, t, is_output)

    def _fill(self, k: int, t: Tensor) -> None:
        """Slot ``k`` gets ``t``'s bytes: one reference for each placeholder still waiting."""
        for _ in range(self.waiting[k]):
            t._storage.incref(self)
        self.slots[k] = (t._data, t._storage, t._storage.version)

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
        """Run the region again from its inputs and fill the slots still waiting for bytes."""
        rec = _trace.active
        needed = {k for k, slot in enumerate(self.slots) if slot is None and self.waiting[k]}
        if rec is not None:
            phase = rec.phase
            rec.emit("recompute", stage="begin", checkpoint=self.id, fn=_name(self.fn),
                     tensors=len(needed), kept_bytes=self.kept_bytes())
            rec.phase = "recompute"
        args = [s.unpack(self) if hasattr(s, "unpack") else s for s in self.inputs]
        self._needed, self._j, self._start = set(needed), 0, _ahead()
        now = rng_state(self.generator) if self.rng is not None else None
        previous, _node.pack_hook = _node.pack_hook, self._capture
        early = False
        try:
            if now is not None:
                set_rng_state(self.generator, self.rng)
            with grad_mode.enable_grad():
                self.fn(*args, **self.kwargs)
        except _Done:
            early = True
        finally:
            _node.pack_hook = previous
            if now is not None:
                set_rng_state(self.generator, now)
            if rec is not None:
                rec.phase = phase
        if not early and (self._j != len(self.seq) or self._needed):
            raise RuntimeError(
                "microtorch.utils.checkpoint: A different number of tensors was saved during the "
                f"original forward and recomputation.\nNumber of tensors saved during forward: "
                f"{len(self.seq)}\nNumber of tensors saved during recomputation: {self._j}.\n"
                "The checkpointed function must run the same ops every time it is called (no "
                "branching on random numbers or on state that changes between forward and backward).")
        self.recomputes += 1
        self.stopped_early = early
        if rec is not None:
            recomputed = {self.slots[k][1].id: self.slots[k][1].nbytes for k in needed}
            rec.emit("recompute", stage="end", checkpoint=self.id, fn=_name(self.fn),
                     tensors=len(needed), recomputed_bytes=sum(recomputed.values()),
                     kept_bytes=self.kept_bytes(), stopped_early=early)

    def _capture(self, t: Tensor, owner, is_output: bool = False):
        """The pack hook of a rerun: the j-th tensor saved fills the j-th save's slot. The
        rerun's nodes never run backward (the original ones do), so they keep nothing."""
        if t._storage.id < self._start:
            return Dropped()  # (an input or a parameter)
        j, self._j = self._j, self._j + 1
        if j < len(self.seq) and self.seq[j] in self._needed:
            k = self.seq[j]
            shape, dtype = self.metas[k]
            if t._data.shape != shape or t._data.dtype != dtype:
                raise RuntimeError(
                    "microtorch.utils.checkpoint: Recomputed values for the following tensors have "
                    f"different metadata than during the forward pass.\ntensor at position {j}:\n"
                    f"saved metadata: {{'shape': {list(shape)}, 'dtype': {dtype}}}\nrecomputed metadata: "
                    f"{{'shape': {list(t._data.shape)}, 'dtype': {t._data.dtype}}}\nThe checkpointed "
                    "function must compute the same shapes every time it is called.")
            self._fill(k, t)
            self._needed.discard(k)
            if not self._needed:
                raise _Done  # (nothing below holds a reference yet: every record so far is Dropped)
        return Dropped()

    def take(self, k: int) -> tuple:
        """Slot ``k``'s bytes for one of its placeholders (recomputing the region if needed);
        the placeholder gets one of the slot's references."""
        if self.slots[k] is None:
            self.recompute()
        slot = self.slots[k]
        self.waiting[k] -= 1
        if self.waiting[k] == 0:
            self.slots[k] = None
        return slot

    def released(self, k: int, took: bool) -> None:
        """A placeholder of slot ``k`` was let go of (after taking its bytes, or without)."""
        if not took:
            self.waiting[k] -= 1
            if self.slots[k] is not None:  # filled, never taken: the reference kept for it goes
                self.slots[k][1].decref(self)
                if self.waiting[k] == 0:
                    self.slots[k] = None
        self.placeholders -= 1
        if self.placeholders == 0:
            self._release_inputs()

    def _release_inputs(self) -> None:
        for s in self.inputs:
            if hasattr(s, "release"):
                s.release(self)
        self.inputs = [None if hasattr(s, "release") else s for s in self.inputs]

    def __del__(self):
        for k, slot in enumerate(self.slots):
            if slot is not None and not slot[1].freed:
                for _ in range(self.waiting[k]):
                    slot[1].decref(self)


class Placeholder:
    """What a checkpointed region's node saved instead of a tensor: no bytes until backward
    unpacks it; then its frame's slot gives them (same methods as
    :class:`~microtorch.node.SavedTensor`, whose checks it reuses)."""

    __slots__ = ("frame", "k", "data", "storage", "version", "requires_grad", "grad_fn", "leaf",
                 "is_output")

    def __init__(self, frame: Frame, k: int, t: Tensor, is_output: bool):
        self.frame, self.k = frame, k
        self.data, self.storage, self.version, self.leaf = None, NOT_KEPT, 0, None
        self.requires_grad, self.is_output = t.requires_grad, is_output
        self.grad_fn = None if is_output else t.grad_fn

    def checked(self, node):
        if self.storage is NOT_KEPT:
            self.data, self.storage, self.version = self.frame.take(self.k)
        return SavedTensor.checked(self, node)  # freed ("backward a second time") and version checks

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
        self.frame.released(self.k, took=storage is not NOT_KEPT)


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
