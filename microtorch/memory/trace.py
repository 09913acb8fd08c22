"""The trace recorder: the engine reports what it does as events.

``with mt.trace() as tr:`` makes ``tr`` the active recorder. Engine code calls
``trace.active`` (a module global, ``None`` when nothing records — one attribute read per
event site, so recording off costs next to nothing) and, when a recorder is active,
appends one event per thing it did: an op ran, a node was created or released, a storage
was allocated or freed or its reference count changed, a backward node ran, a gradient
was accumulated.

An event emitted by another thread than the one that opened the recorder carries that
thread's id (``thread``), so a trace of work spread over threads says who did what
(:func:`microtorch.memory.numa.simulate` places ops by it).

Every picture in :mod:`microtorch.viz` is a pure function of a recorded trace and a step
index ``t`` (the event's position), so the same trace can be replayed, saved, compared and
tested headless.

**What a trace rebuilds** (:mod:`microtorch.memory.replay`, pure functions of the events):

* ``tr.state_at(t)`` → a :class:`~microtorch.memory.replay.MemoryState`: the memory right
  after event ``t`` (events ``0..t`` replayed; negative ``t`` counts from the end). It has
  ``blocks`` (every live block: allocator, chunk/slab, offset, size, nbytes, padding, tag,
  size class, the storage using it), ``arenas`` (chunks incl. growths, generation, used),
  ``pools`` and ``pool_classes`` (per size class: blocks in use / free / held back,
  requested vs reserved bytes, slabs), ``storages`` (refcount, and ``holders``: "tensor 3",
  "node 7 (MulBackward)", "a numpy array from .numpy()"), ``freed`` (storage → step),
  ``live_bytes``/``peak_bytes``, ``tensors`` (live ones seen), ``nodes`` (graph nodes whose
  record is live, and whether their backward ran), ``node_records`` (live count, top slot),
  ``pending``/``ready`` (the backward engine's counts) and ``summary()`` in words. Replay is
  incremental (a snapshot every 64 events, a cursor for scrubbing forward): visiting
  every ``t`` of a 2,000-event trace takes ~10 ms in order, under 0.1 s in random order.
* ``tr.lifetimes()`` → one :class:`~microtorch.memory.replay.Lifetime` per storage: birth
  and death step, nbytes, tag, allocator (the input of liveness pictures);
  ``tr.live_bytes()`` the live-bytes curve and ``tr.peak()`` → ``(bytes, step)``.
* ``tr.mark(label, **fields)`` puts your own marker event in the trace.
* ``tr.save(path)`` writes plain JSON tagged ``"format": "microtorch-trace/1"``;
  ``Trace.load(path)`` checks the file against :mod:`microtorch.memory.trace_schema` (version,
  fields of each event kind, allocation and reference-count bookkeeping) before returning it.

**Before recording started.** Entering ``mt.trace()`` first records a ``baseline`` event:
the live blocks of every allocator, the storages using them (found through each block's
``user`` weakref) with their refcounts, and the node records — so replay starts from the
real state, not from empty. References taken before recording are counted but unnamed.
A nested ``mt.trace()`` takes the events while it is active; when it ends, the outer trace
records a fresh ``baseline`` and replay resynchronises there. Events name allocators by
``name``, so an allocator created with the name of another live one is numbered
(``"pool #2"``).
"""
from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Iterator

from . import trace_schema

active: "Trace | None" = None

#: What each event kind means, and the fields it carries (besides ``kind`` and ``step``).
KINDS = {
    "tensor": "a tensor seen for the first time, or seen again after its name, requires_grad, "
              "is_leaf or storage (repointed) changed (the latest event wins): tensor, name, shape, "
              "dtype, requires_grad, is_leaf, storage",
    "alloc": "a storage got its bytes: storage, nbytes, dtype, tag, allocator (name, 'heap' for plain "
             "numpy), block (None on the heap)",
    "free": "a storage's bytes were released (its refcount reached 0): storage, nbytes, stale (its "
            "arena was reset before, so the bytes had already stopped counting)",
    "refcount": "a storage's reference count changed: storage, refcount (new value), delta, holder",
    "op": "an op ran: op, phase ('forward', 'backward' or 'recompute'), node (None if no graph was recorded), "
          "slot (the node's record in the node arena), inputs, output (tensor ids), shape, dtype, "
          "saved (storage ids), next (where input grads go), input_storages and output_storage "
          "(storage ids), input_strides (in elements), inplace (True: the op wrote into its first "
          "input's bytes and bumped that storage's version by one; output is then an alias of them)",
    "backward": "a backward pass starts: order ('deps' or 'topo'), roots (tensor ids backward starts "
                "from), pending (node -> count) and ready, or schedule",
    "node_run": "a node's backward ran: node, op, grad_shape, grad_storage (the incoming gradient's "
                "storage), pending (counts after it ran), ready",
    "grad": "a gradient was accumulated into a leaf's .grad: tensor, shape, norm, storage (the .grad's), "
            "source (the accumulated gradient's storage)",
    "optimizer_step": "an optimizer updated its parameters: optimizer (class name), params and grads "
                      "(the storages of its flat parameter and gradient buffers)",
    "release": "a node let go of its saved tensors and freed its record: node, slot (None if the "
               "record was already freed), dropped (True: its graph was dropped without backward)",
    "alloc_block": "an allocator handed out a block: allocator, block, chunk, offset, nbytes, size, "
                   "tag, and padding (arena) or size_class, reused and slab_bytes (pool; chunk is "
                   "the class's slab, -1 for a direct block)",
    "free_block": "a block went back to its allocator: allocator, block, and held (pool: deferred release)",
    "arena_chunk": "an arena got a chunk of backing memory: arena, chunk, nbytes, growth (False for the first)",
    "arena_reset": "an arena freed every block at once: arena, generation (after the reset), blocks "
                   "(ids freed), stale (storages whose bytes it reclaimed under live references)",
    "pool_epoch": "a pool advanced its epoch: allocator, epoch, held (blocks still held back), "
                  "released (held blocks now on their free lists)",
    "baseline": "what was already live when recording started (first event; again when a nested "
                "trace ends): live_bytes, peak_bytes, allocators (pools: name, kind, epoch, "
                "defer_epochs, classes [{size_class, size, slabs, free}], held [[block, size_class]]; "
                "arenas: name, kind, chunks, generation, resets, used, padding), blocks (the "
                "alloc_block fields plus storage), storages (storage, nbytes, dtype, tag, "
                "allocator, block, refcount, stale), node_records {live, top}",
    "thread_cache": "a pool's thread cache went to the central free lists under the lock: allocator, "
                    "thread, action ('refill': blocks taken into the cache; 'flush': blocks given back), "
                    "size_class, blocks, cached (bytes in that thread's cache now), lock_acquisitions "
                    "(the pool's count so far); alloc_block and free_block then carry thread and cached too",
    "fit_alloc": "a best-fit allocator handed out a block: allocator, block, heap, offset, nbytes, size, tag",
    "fit_free": "a block went back to a best-fit allocator: allocator, block, and the free block it "
                "is part of after merging with its neighbours: heap, offset, size",
    "mmap_pages": "a snapshot of which pages of a mapped file are in memory (MappedFile.record_pages): "
                  "allocator, pages, label, resident (count), first (is page 0 resident), runs (lengths "
                  "of alternating resident / not-resident runs, starting with page 0's state)",
    "buddy_alloc": "a buddy allocator handed out a block: allocator, block, heap, offset, order, nbytes, "
                   "size, tag, splits ([offset, order] of each block split on the way down), heaps, "
                   "heap_bytes, min_order",
    "buddy_free": "a block went back to a buddy allocator: allocator, block, merges ([offset, order] of "
                  "each merged block on the way up)",
    "mark": "a marker put in the trace with tr.mark(label, **fields): label, plus those fields",
    "read": "a tensor's values were read outside an op: tensor, storage, how ('item', 'tolist' or "
            "'numpy'), copy (False: numpy() handed out an array over the bytes themselves, which reads "
            "them for as long as it lives — until its reference is dropped)",
    "checkpoint": "a checkpointed region ran forward (microtorch.utils.checkpoint): stage ('begin' or "
                  "'end'), checkpoint (its id), fn, reentrant, kept_bytes (its inputs' bytes, kept for "
                  "backward); at begin inputs, at end outputs (tensor ids), dropped (saved tensors left "
                  "to recomputation) and dropped_bytes",
    "recompute": "backward reran a checkpointed region: stage ('begin' or 'end'), checkpoint, fn, "
                 "tensors (how many saved tensors it refills), kept_bytes; at end recomputed_bytes and "
                 "stopped_early (True: the rerun stopped inside the op that saved the last tensor needed; "
                 "that op's result was computed, its op event is not recorded). The rerun's ops in "
                 "between have phase 'recompute'",
}

_tensor_ids = itertools.count(1)
_node_ids = itertools.count(1)


def emit(kind: str, **fields) -> None:
    """Record an event if a recorder is active (allocators call this; hot paths inline the check)."""
    if active is not None:
        active.emit(kind, **fields)


def read(t, how: str, copy: bool = True) -> None:
    """Record that ``t``'s values left the engine through ``how`` (``item``, ``tolist``,
    ``numpy``): a read no op event shows, which in-place analysis must respect."""
    rec = active
    if rec is not None:
        rec.emit("read", tensor=rec.tensor(t), storage=t._storage.id, how=how, copy=copy)


def tensor_id(t) -> int:
    """A stable id for a tensor, assigned the first time a recorder sees it."""
    if t._tid is None:
        t._tid = next(_tensor_ids)
    return t._tid


def node_id(n) -> int:
    """A stable id for a graph node, assigned the first time a recorder sees it."""
    if n._nid is None:
        n._nid = next(_node_ids)
    return n._nid


class Trace:
    """An ordered list of events; event ``i`` happened at step ``i``.

    Each event is a plain dict with at least ``"kind"`` (see :data:`KINDS`) and ``"step"``,
    so a trace saves to JSON and loads back unchanged.
    """

    def __init__(self, events: list[dict] | None = None):
        self.events: list[dict] = list(events or [])
        self.phase = "forward"  # the backward engine sets "backward" while it runs
        self._seen_tensors: dict[int, tuple] = {}  # tensor id -> (name, requires_grad, is_leaf, storage) last recorded
        self._previous: Trace | None = None
        self._replay = None  # built on first use by state_at / lifetimes / peak
        self._lock = threading.Lock()  # a data loader's worker threads emit too
        self._thread = threading.get_ident()  # the thread recording; others' events say which they are

    # -- recording -----------------------------------------------------------------
    def emit(self, kind: str, **fields) -> None:
        fields["kind"] = kind
        if "thread" not in fields and (me := threading.get_ident()) != self._thread:
            fields["thread"] = me  # an event from another thread than the recording one
        with self._lock:  # step numbers stay the positions, whichever thread emits
            fields["step"] = len(self.events)
            self.events.append(fields)

    def tensor(self, t) -> int:
        """Id of ``t``; record a ``tensor`` event describing it the first time it is seen,
        and again if its name, autograd flags or storage changed since (``a = mt.randn(3,
        requires_grad=True); a.name = "a"`` is first seen inside ``randn``, nameless)."""
        tid = tensor_id(t)
        state = (t.name, t.requires_grad, t.grad_fn is None, t._storage.id)
        if self._seen_tensors.get(tid) != state:
            self._seen_tensors[tid] = state
            self.emit(
                "tensor",
                tensor=tid,
                name=t.name,
                shape=list(t.shape),
                dtype=t.dtype.name,
                requires_grad=t.requires_grad,
                is_leaf=t.grad_fn is None,
                storage=t._storage.id,
            )
        return tid

    def mark(self, label: str, **fields) -> int:
        """Put a ``mark`` event in the trace (a named moment to jump to); returns its step."""
        self.emit("mark", label=label, **fields)
        return len(self.events) - 1

    def __enter__(self) -> "Trace":
        global active
        self._previous, active = active, self
        self.emit("baseline", **baseline())
        return self

    def __exit__(self, *exc) -> None:
        global active
        active = self._previous
        if active is not None:  # the outer trace missed what happened while this one recorded
            active.emit("baseline", **baseline())

    # -- reading -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.events)

    def __getitem__(self, i):
        return self.events[i]

    def filter(self, *kinds: str) -> list[dict]:
        """The events of the given kinds, in order."""
        return [e for e in self.events if e["kind"] in kinds]

    def kinds(self) -> dict[str, int]:
        """How many events of each kind were recorded."""
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e["kind"]] = counts.get(e["kind"], 0) + 1
        return counts

    def __repr__(self) -> str:
        summary = ", ".join(f"{k}={n}" for k, n in self.kinds().items())
        return f"Trace({len(self)} events: {summary})"

    # -- replaying -----------------------------------------------------------------------
    def replay(self):
        """The :class:`~microtorch.memory.replay.Replay` of this trace (built once, extended
        as the trace grows)."""
        from .replay import Replay

        r = self._replay
        if r is None or r.events is not self.events or r._main.t >= len(self.events):
            r = self._replay = Replay(self.events)
        return r

    def state_at(self, t: int):
        """The memory right after event ``t``: a :class:`~microtorch.memory.replay.MemoryState`."""
        return self.replay().state_at(t)

    def lifetimes(self) -> list:
        """When each storage's bytes were live: :class:`~microtorch.memory.replay.Lifetime` records."""
        return self.replay().lifetimes()

    def live_bytes(self) -> list[int]:
        """Live bytes after each event."""
        return self.replay().live_bytes()

    def peak(self) -> tuple[int, int | None]:
        """``(peak live bytes, step where it is first reached)``."""
        return self.replay().peak()

    # -- saving --------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the events as JSON (no pickle: a trace file is plain data), tagged with the
        trace format version (``"format": "microtorch-trace/1"``)."""
        doc = {"format": f"{trace_schema.FORMAT}{trace_schema.VERSIONS[-1]}", "events": self.events}
        Path(path).write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        """Read a trace written by :meth:`save`, checked before anything replays it: a file that
        is not JSON, of a format version this microtorch does not read, with a malformed event
        or with events missing (an alloc removed, a count that does not add up) raises
        :class:`~microtorch.memory.trace_schema.TraceFormatError` naming the first bad event."""
        where = str(path)
        try:
            # JSON object keys are strings; the only int-keyed dicts in events map node ids to
            # counts ("pending"), so digit keys become ints again and the trace loads back unchanged
            doc = json.loads(Path(path).read_bytes(), object_pairs_hook=_int_keys)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise trace_schema.TraceFormatError(
                f"{where} is not a microtorch trace file: it is not JSON ({e}); "
                "trace files are written by tr.save(path)") from None
        events = trace_schema.check_document(doc, where)
        trace_schema.check_events(events, KINDS, where)
        return cls(events)


def _int_keys(pairs) -> dict:
    return {int(k) if k.isdigit() else k: v for k, v in pairs}


def baseline() -> dict:
    """The fields of a ``baseline`` event: what is live right now (see :data:`KINDS`)."""
    from . import placement
    from .block import allocators
    from .node_arena import nodes
    from .pool import Pool

    described, blocks, storages = [], [], []

    def block_fields(name, b):
        storage = b.user() if b.user is not None else None
        if storage is not None and not storage.freed and storage.stale is None:
            storages.append({"storage": storage.id, "nbytes": storage.nbytes,
                             "dtype": storage.data.dtype.name, "tag": storage.tag, "allocator": name,
                             "block": b.id, "refcount": storage.refcount, "stale": False})
        else:
            storage = None
        blocks.append({"allocator": name, "block": b.id, "chunk": b.chunk, "offset": b.offset,
                       "nbytes": b.nbytes, "size": b.size, "padding": b.padding, "tag": b.tag,
                       "size_class": b.size_class, "storage": storage.id if storage is not None else None})

    for a in list(allocators.values()):
        if isinstance(a, Pool):
            described.append({
                "name": a.name, "kind": "pool", "epoch": a.epoch, "defer_epochs": a.defer_epochs,
                "classes": [{"size_class": c, "size": size, "slabs": [s.nbytes for s in a.slabs[c]],
                             "free": len(a.free_lists[c])}
                            for c, size in enumerate(a.classes) if a.slabs[c]],
                "held": [[b.id, b.size_class] for _, b in a.held]})
            live = a.live
        else:
            described.append({"name": a.name, "kind": "arena", "chunks": [c.nbytes for c in a.chunks],
                              "generation": a.generation, "resets": a.resets, "used": a.used,
                              "padding": a.padding})
            live = a.live_blocks
        for b in list(live.values()):
            block_fields(a.name, b)
    return {"live_bytes": placement.live_bytes, "peak_bytes": placement.peak_bytes,
            "allocators": described, "blocks": blocks, "storages": storages,
            "node_records": {"live": nodes.live, "top": nodes.top}}


def record() -> Trace:
    """``with mt.trace() as tr:`` — record what the engine does inside the block."""
    return Trace()
