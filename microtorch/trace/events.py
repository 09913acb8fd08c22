"""The event records: one dataclass per kind of thing the engine reports.

``rec.emit("alloc", storage=3, nbytes=64, ...)`` builds an :class:`Alloc` record; the class
is the schema of its kind: each field names what it holds and, in its metadata, the JSON
types a saved trace may give it and whether a valid trace must have it (:mod:`.schema`
checks loaded files against these declarations — there is no second list).

A field an event site did not give is :data:`UNSET` (not ``None``: ``None`` is a value,
e.g. an op recorded without a graph has ``node=None``). Fields no class declares — the
keyword fields of ``tr.mark(label, **fields)``, or extras a newer recorder wrote — go to
``extra``. Records also read like the plain dicts they replace: ``e["kind"]``,
``e.get("size_class")``, ``"padding" in e`` and ``e.to_dict()`` see only the fields that
were given, so a trace saves to JSON and loads back equal.

Records are mutable slotted dataclasses: the recorder stamps ``step`` (and ``thread``)
after building one, and a frozen dataclass's ``__init__`` costs about twice as much —
recording is on while the notebooks run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from ..recording import Holder


class _Unset:
    """The value of a field an event did not carry (falsy, a single instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return "UNSET"


UNSET: Any = _Unset()

INT, STR, BOOL, NUM, LIST, DICT, NONE = "int", "str", "bool", "number", "list", "dict", "null"


def _field(*types: str, required: bool = False):
    """A field of an event record: the JSON ``types`` a saved trace may give it (``"int"``
    excludes booleans, ``"number"`` is int or float) and whether every event must carry it."""
    return dataclasses.field(default=UNSET, metadata={"types": types, "required": required})


def _any():
    """A field whose saved value is not type-checked (it is only shown, never replayed)."""
    return dataclasses.field(default=UNSET, metadata={"types": (), "required": False})


@dataclass(slots=True, kw_only=True)
class Event:
    """What every event has: its ``kind`` (the class's), ``step`` (its position in the
    trace), ``thread`` (only when another thread than the recording one emitted it) and
    ``extra`` (fields no class declares, or ``None``)."""

    kind: ClassVar[str] = ""
    #: one line on what the kind means (the docstring's first line, for :data:`KINDS`)
    step: int = UNSET
    thread: int = _field(INT)
    extra: dict | None = None

    # -- read like a dict (the events were dicts before they were typed) --------------------
    def __getitem__(self, name: str):
        if name == "kind":
            return self.kind
        if name in _FIELD_NAMES[type(self)]:
            value = getattr(self, name)
            if value is not UNSET:
                return value
        extra = self.extra
        if extra is not None and name in extra:
            return extra[name]
        raise KeyError(name)

    def get(self, name: str, default=None):
        if name == "kind":
            return self.kind
        if name in _FIELD_NAMES[type(self)]:
            value = getattr(self, name)
            if value is not UNSET:
                return value
        extra = self.extra
        return default if extra is None else extra.get(name, default)

    def __contains__(self, name: str) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def keys(self) -> list[str]:
        """The names of the fields this event carries: ``kind``, ``step``, then the rest."""
        names = ["kind"] + [n for n in _FIELD_NAMES[type(self)] if getattr(self, n) is not UNSET]
        return names + list(self.extra or ())

    def items(self) -> list[tuple[str, Any]]:
        return [(k, self[k]) for k in self.keys()]

    def to_dict(self) -> dict:
        """The event as the plain dict a trace file holds (only the fields it carries)."""
        return {k: self[k] for k in self.keys()}


# ---- allocations and references ------------------------------------------------------------
@dataclass(slots=True, kw_only=True)
class Alloc(Event):
    """A storage got its bytes (``allocator``: its name, ``'heap'`` for plain numpy; ``block``
    ``None`` on the heap)."""

    kind: ClassVar[str] = "alloc"
    storage: int = _field(INT, required=True)
    nbytes: int = _field(INT, required=True)
    dtype: str = _field(STR)
    tag: str = _field(STR)
    allocator: str = _field(STR)
    block: int | None = _field(INT, NONE)


@dataclass(slots=True, kw_only=True)
class Free(Event):
    """A storage's bytes were released (its refcount reached 0); ``stale``: its arena was
    reset before, so the bytes had already stopped counting."""

    kind: ClassVar[str] = "free"
    storage: int = _field(INT, required=True)
    nbytes: int = _field(INT, required=True)
    stale: bool = _field(BOOL)


@dataclass(slots=True, kw_only=True)
class Refcount(Event):
    """A storage's reference count changed: ``refcount`` (the new value), ``delta`` and
    ``holder`` (who took or dropped the reference: a :class:`~microtorch.recording.Holder`,
    saved as its words ``"tensor 3"``, ``"node 7 (MulBackward)"``, ``"a numpy array from .numpy()"``)."""

    kind: ClassVar[str] = "refcount"
    storage: int = _field(INT, required=True)
    refcount: int = _field(INT, required=True)
    delta: int = _field(INT, required=True)
    holder: Holder = _field(STR)


@dataclass(slots=True, kw_only=True)
class TensorSeen(Event):
    """A tensor seen for the first time, or again after its name, requires_grad, is_leaf or
    storage (repointed) changed (the latest event wins)."""

    kind: ClassVar[str] = "tensor"
    tensor: int = _field(INT, required=True)
    name: str | None = _field(STR, NONE)
    shape: list = _field(LIST, required=True)
    dtype: str = _field(STR, required=True)
    requires_grad: bool = _field(BOOL, required=True)
    is_leaf: bool = _field(BOOL, required=True)
    storage: int = _field(INT, required=True)


@dataclass(slots=True, kw_only=True)
class Read(Event):
    """A tensor's values were read outside an op: ``how`` (``'item'``, ``'tolist'`` or
    ``'numpy'``); ``copy`` False: numpy() handed out an array over the bytes themselves,
    which reads them for as long as it lives."""

    kind: ClassVar[str] = "read"
    tensor: int = _field(INT, required=True)
    storage: int = _field(INT, required=True)
    how: str = _field(STR, required=True)
    copy: bool = _field(BOOL)


# ---- the graph and the backward engine -------------------------------------------------------
@dataclass(slots=True, kw_only=True)
class Op(Event):
    """An op ran: ``phase`` (``'forward'``, ``'backward'`` or ``'recompute'``), ``node`` (None if
    no graph was recorded), ``slot`` (its record in the node arena), ``inputs``/``output``
    (tensor ids), ``saved`` (storage ids), ``next`` (where input grads go), storages and
    strides of inputs and output; ``inplace``: the op wrote into its first input's bytes."""

    kind: ClassVar[str] = "op"
    op: str = _field(STR, required=True)
    phase: str = _field(STR)
    node: int | None = _field(INT, NONE)
    slot: int | None = _field(INT, NONE)
    inputs: list = _field(LIST, required=True)
    output: int = _field(INT, required=True)
    shape: list = _field(LIST)
    dtype: str = _field(STR)
    saved: list = _field(LIST)
    next: list = _field(LIST)
    input_storages: list = _field(LIST)
    input_strides: list = _field(LIST)
    output_storage: int = _field(INT)
    inplace: bool = _field(BOOL)


@dataclass(slots=True, kw_only=True)
class Release(Event):
    """A node let go of its saved tensors and freed its record (``slot`` None if the record was
    already freed; ``dropped``: its graph was dropped without backward)."""

    kind: ClassVar[str] = "release"
    node: int = _field(INT, required=True)
    slot: int | None = _field(INT, NONE)
    dropped: bool = _field(BOOL)


@dataclass(slots=True, kw_only=True)
class Backward(Event):
    """A backward pass starts: ``order`` (``'deps'`` or ``'topo'``), ``roots`` (tensor ids),
    ``pending`` (node -> count) and ``ready``, or ``schedule``."""

    kind: ClassVar[str] = "backward"
    order: str = _field(STR)
    roots: list = _field(LIST)
    pending: dict | None = _field(DICT, NONE)
    ready: list | None = _field(LIST, NONE)
    schedule: list = _field(LIST)


@dataclass(slots=True, kw_only=True)
class NodeRun(Event):
    """A node's backward ran: ``grad_shape``, ``grad_storage`` (the incoming gradient's
    storage), ``pending`` (counts after it ran) and ``ready``."""

    kind: ClassVar[str] = "node_run"
    node: int = _field(INT, required=True)
    op: str = _field(STR)
    grad_shape: list = _field(LIST)
    grad_storage: int | None = _field(INT, NONE)
    pending: dict | None = _field(DICT, NONE)
    ready: list | None = _field(LIST, NONE)


@dataclass(slots=True, kw_only=True)
class Grad(Event):
    """A gradient was accumulated into a leaf's .grad: ``storage`` (the .grad's), ``source``
    (the accumulated gradient's storage), ``norm``."""

    kind: ClassVar[str] = "grad"
    tensor: int = _field(INT, required=True)
    shape: list = _field(LIST)
    norm: float = _field(NUM)
    storage: int | None = _field(INT, NONE)
    source: int | None = _field(INT, NONE)


@dataclass(slots=True, kw_only=True)
class OptimizerStep(Event):
    """An optimizer updated its parameters: ``optimizer`` (class name), ``params`` and ``grads``
    (the storages of its flat parameter and gradient buffers)."""

    kind: ClassVar[str] = "optimizer_step"
    optimizer: str = _field(STR, required=True)
    params: list = _field(LIST)
    grads: list = _field(LIST)


@dataclass(slots=True, kw_only=True)
class Checkpoint(Event):
    """A checkpointed region ran forward (``stage`` ``'begin'`` or ``'end'``): ``kept_bytes``
    (its inputs' bytes, kept for backward); at begin ``inputs``, at end ``outputs``,
    ``dropped`` (how many saved tensors are left to recomputation) and ``dropped_bytes``."""

    kind: ClassVar[str] = "checkpoint"
    stage: str = _field(STR, required=True)
    checkpoint: int | None = _field(INT, NONE, required=True)
    fn: str = _field(STR)
    reentrant: bool = _field(BOOL)
    kept_bytes: int = _field(INT)
    inputs: list = _field(LIST)
    outputs: list = _field(LIST)
    dropped: int | None = _field(INT, NONE)
    dropped_bytes: int | None = _field(INT, NONE)


@dataclass(slots=True, kw_only=True)
class Recompute(Event):
    """Backward reran a checkpointed region (``stage`` ``'begin'`` or ``'end'``): ``tensors``
    (saved tensors it refills), ``kept_bytes``; at end ``recomputed_bytes`` and
    ``stopped_early`` (the rerun stopped inside the op that saved the last tensor needed)."""

    kind: ClassVar[str] = "recompute"
    stage: str = _field(STR, required=True)
    checkpoint: int = _field(INT, required=True)
    fn: str = _field(STR)
    tensors: int | None = _field(INT, NONE)
    kept_bytes: int = _field(INT)
    recomputed_bytes: int | None = _field(INT, NONE)
    stopped_early: bool = _field(BOOL)


# ---- allocators -----------------------------------------------------------------------------
@dataclass(slots=True, kw_only=True)
class AllocBlock(Event):
    """An allocator handed out a block: ``padding`` (arena) or ``size_class``, ``reused`` and
    ``slab_bytes`` (pool; ``chunk`` is the class's slab, -1 for a direct block); ``planned``
    (a planned arena: the buffer's name); ``cached`` (a thread cache's bytes after it)."""

    kind: ClassVar[str] = "alloc_block"
    allocator: str = _field(STR, required=True)
    block: int = _field(INT, required=True)
    chunk: int = _field(INT, required=True)
    offset: int = _field(INT, required=True)
    nbytes: int = _field(INT, required=True)
    size: int = _field(INT, required=True)
    tag: str = _field(STR)
    padding: int = _field(INT)
    size_class: int | None = _field(INT, NONE)
    reused: bool = _field(BOOL)
    slab_bytes: int = _field(INT)
    planned: str = _any()
    cached: int = _field(INT)


@dataclass(slots=True, kw_only=True)
class FreeBlock(Event):
    """A block went back to its allocator (``held``: a pool deferred its release; ``cached``: a
    thread cache's bytes after it)."""

    kind: ClassVar[str] = "free_block"
    allocator: str = _field(STR)
    block: int = _field(INT, required=True)
    held: bool = _field(BOOL)
    cached: int = _field(INT)


@dataclass(slots=True, kw_only=True)
class ArenaChunk(Event):
    """An arena got a chunk of backing memory (``growth`` False for the first)."""

    kind: ClassVar[str] = "arena_chunk"
    arena: str = _field(STR, required=True)
    chunk: int = _field(INT, required=True)
    nbytes: int = _field(INT, required=True)
    growth: bool = _field(BOOL)


@dataclass(slots=True, kw_only=True)
class ArenaReset(Event):
    """An arena freed every block at once: ``generation`` (after the reset), ``blocks`` (ids
    freed), ``stale`` (storages whose bytes it reclaimed under live references)."""

    kind: ClassVar[str] = "arena_reset"
    arena: str = _field(STR, required=True)
    generation: int = _field(INT)
    blocks: list = _field(LIST)
    stale: list = _field(LIST)


@dataclass(slots=True, kw_only=True)
class PoolEpoch(Event):
    """A pool advanced its epoch: ``held`` (blocks still held back), ``released`` (held blocks
    now on their free lists)."""

    kind: ClassVar[str] = "pool_epoch"
    allocator: str = _field(STR, required=True)
    epoch: int = _field(INT, required=True)
    held: int = _field(INT)
    released: list = _field(LIST)


@dataclass(slots=True, kw_only=True)
class ThreadCache(Event):
    """A pool's thread cache went to the central free lists under the lock: ``action``
    (``'refill'``: blocks taken into the cache; ``'flush'``: blocks given back), ``cached``
    (bytes in that thread's cache now), ``lock_acquisitions`` (the pool's count so far)."""

    kind: ClassVar[str] = "thread_cache"
    allocator: str = _field(STR, required=True)
    thread: int = _field(INT, required=True)
    action: str = _field(STR, required=True)
    size_class: int = _field(INT, required=True)
    blocks: int = _field(INT, required=True)
    cached: int = _field(INT, required=True)
    lock_acquisitions: int = _field(INT, required=True)


@dataclass(slots=True, kw_only=True)
class FitAlloc(Event):
    """A best-fit allocator handed out a block."""

    kind: ClassVar[str] = "fit_alloc"
    allocator: str = _field(STR, required=True)
    block: int = _field(INT, required=True)
    heap: int = _field(INT, required=True)
    offset: int = _field(INT, required=True)
    nbytes: int = _field(INT, required=True)
    size: int = _field(INT, required=True)
    tag: str = _field(STR)


@dataclass(slots=True, kw_only=True)
class FitFree(Event):
    """A block went back to a best-fit allocator: ``heap``, ``offset``, ``size`` of the free
    block it is part of after merging with its neighbours."""

    kind: ClassVar[str] = "fit_free"
    allocator: str = _field(STR, required=True)
    block: int = _field(INT, required=True)
    heap: int = _field(INT, required=True)
    offset: int = _field(INT, required=True)
    size: int = _field(INT, required=True)


@dataclass(slots=True, kw_only=True)
class BuddyAlloc(Event):
    """A buddy allocator handed out a block: ``order``, ``splits`` (``[offset, order]`` of each
    block split on the way down), ``heaps``, ``heap_bytes``, ``min_order``."""

    kind: ClassVar[str] = "buddy_alloc"
    allocator: str = _field(STR, required=True)
    block: int = _field(INT, required=True)
    heap: int = _field(INT, required=True)
    offset: int = _field(INT, required=True)
    order: int | None = _field(INT, NONE, required=True)
    nbytes: int = _field(INT, required=True)
    size: int = _field(INT, required=True)
    tag: str = _field(STR)
    splits: list = _field(LIST, required=True)
    heaps: int = _field(INT, required=True)
    heap_bytes: int = _field(INT, required=True)
    min_order: int = _field(INT, required=True)


@dataclass(slots=True, kw_only=True)
class BuddyFree(Event):
    """A block went back to a buddy allocator: ``merges`` (``[offset, order]`` of each merged
    block on the way up)."""

    kind: ClassVar[str] = "buddy_free"
    allocator: str = _field(STR, required=True)
    block: int = _field(INT, required=True)
    merges: list = _field(LIST, required=True)


@dataclass(slots=True, kw_only=True)
class MmapPages(Event):
    """A snapshot of which pages of a mapped file are in memory (``MappedFile.record_pages``):
    ``resident`` (count), ``first`` (is page 0 resident), ``runs`` (lengths of alternating
    resident / not-resident runs, starting with page 0's state)."""

    kind: ClassVar[str] = "mmap_pages"
    allocator: str = _field(STR, required=True)
    pages: int = _field(INT, required=True)
    label: str = _field(STR)
    resident: int = _field(INT, required=True)
    first: bool = _field(BOOL, required=True)
    runs: list = _field(LIST, required=True)


@dataclass(slots=True, kw_only=True)
class Baseline(Event):
    """What was already live when recording started (first event; again when a nested trace
    ends): ``allocators`` (each one's :meth:`describe`), ``blocks`` (the alloc_block fields
    plus storage), ``storages`` (storage, nbytes, dtype, tag, allocator, block, refcount,
    stale), ``node_records`` ``{live, top}``."""

    kind: ClassVar[str] = "baseline"
    live_bytes: int = _field(INT)
    peak_bytes: int = _field(INT)
    allocators: list = _field(LIST)
    blocks: list = _field(LIST)
    storages: list = _field(LIST)
    node_records: dict = _field(DICT)


@dataclass(slots=True, kw_only=True)
class Mark(Event):
    """A marker put in the trace with ``tr.mark(label, **fields)`` (those fields are in ``extra``)."""

    kind: ClassVar[str] = "mark"
    label: str = _field(STR, required=True)


#: kind -> its record class
EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in (
    TensorSeen, Alloc, Free, Refcount, Op, Backward, NodeRun, Grad, OptimizerStep, Release,
    AllocBlock, FreeBlock, ArenaChunk, ArenaReset, PoolEpoch, Baseline, ThreadCache, FitAlloc,
    FitFree, MmapPages, BuddyAlloc, BuddyFree, Mark, Read, Checkpoint, Recompute)}

_FIELD_NAMES: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra",))
    for cls in (Event, *EVENT_TYPES.values())}
_BASE = ("step", "thread")
for _cls, _names in list(_FIELD_NAMES.items()):  # step first, then the kind's own fields, thread last
    _FIELD_NAMES[_cls] = ("step",) + tuple(n for n in _names if n not in _BASE) + ("thread",)

#: What each event kind means (the first lines of its class's docstring).
KINDS: dict[str, str] = {kind: " ".join(cls.__doc__.split()) for kind, cls in EVENT_TYPES.items()}

#: kind -> {field: (JSON types, required)}: what :mod:`.schema` checks a loaded event against.
FIELDS: dict[str, dict[str, tuple[tuple[str, ...], bool]]] = {
    kind: {f.name: (f.metadata["types"], f.metadata["required"]) for f in dataclasses.fields(cls)
           if f.metadata and f.metadata["types"]}
    for kind, cls in EVENT_TYPES.items()}


def make(kind: str, fields: dict) -> Event:
    """The record of ``kind`` with ``fields`` (from an event site or a loaded file); fields the
    class does not declare go to ``extra``."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}: every kind is a record class in "
                         f"microtorch/trace/events.py (known: {', '.join(sorted(EVENT_TYPES))})")
    names = _FIELD_NAMES[cls]
    known = {k: v for k, v in fields.items() if k in names}
    if type(known.get("holder")) is str:  # a refcount event read from a file: its words as a Holder
        known["holder"] = Holder.parse(known["holder"])
    extra = {k: v for k, v in fields.items() if k not in names and k != "kind"}
    return cls(**known, extra=extra or None)


def from_dict(d) -> Event:
    """A record from a plain dict (``d["kind"]`` says which); a record is returned unchanged."""
    if isinstance(d, Event):
        return d
    return make(d.get("kind"), d)
