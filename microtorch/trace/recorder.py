"""The trace recorder: the engine reports what it does as events.

``with mt.trace() as tr:`` makes ``tr`` the active recorder (:data:`microtorch.recording.active`,
``None`` when nothing records — one attribute read per event site, so recording off costs
next to nothing). Engine code reads it and, when a recorder is active, calls
``rec.emit(kind, **fields)`` — one typed event (:mod:`microtorch.trace.events`) per thing it did: an op ran, a node was created or released, a storage
was allocated or freed or its reference count changed, a backward node ran, a gradient
was accumulated.

An event emitted by another thread than the one that opened the recorder carries that
thread's id (``thread``), so a trace of work spread over threads says who did what
(:func:`microtorch.memory.numa.simulate` places ops by it).

Every picture in :mod:`microtorch.viz` is a pure function of a recorded trace and a step
index ``t`` (the event's position), so the same trace can be replayed, saved, compared and
tested headless.

**What a trace rebuilds** (:mod:`microtorch.trace.replay`, pure functions of the events):

* ``tr.state_at(t)`` → a :class:`~microtorch.trace.replay.MemoryState`: the memory right
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
* ``tr.lifetimes()`` → one :class:`~microtorch.trace.replay.Lifetime` per storage: birth
  and death step, nbytes, tag, allocator (the input of liveness pictures);
  ``tr.live_bytes()`` the live-bytes curve and ``tr.peak()`` → ``(bytes, step)``.
* ``tr.mark(label, **fields)`` puts your own marker event in the trace.
* ``tr.save(path)`` writes plain JSON tagged ``"format": "microtorch-trace/1"``;
  ``Trace.load(path)`` checks the file against :mod:`microtorch.trace.schema` (version,
  fields of each event kind, allocation and reference-count bookkeeping) before returning it.

**Before recording started.** Entering ``mt.trace()`` first records a ``baseline`` event:
each allocator's own description of itself and its live blocks (``describe()``, ``blocks_in_use()``), the storages using them (found through each block's
``user`` weakref) with their refcounts, and the node records — so replay starts from the
real state, not from empty. References taken before recording are counted but unnamed.
A nested ``mt.trace()`` takes the events while it is active; when it ends, the outer trace
records a fresh ``baseline`` and replay resynchronises there. Events name allocators by
``name``, so an allocator created with the name of another live one is numbered
(``"pool #2"``).
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Iterator

from .. import recording
from ..memory import placement
from ..memory.block import allocators
from ..memory.node_arena import nodes
from . import schema
from .events import EVENT_TYPES, KINDS, UNSET, Event, from_dict, make

class Trace:
    """An ordered list of events; event ``i`` happened at step ``i``.

    Each event is a typed record (:mod:`microtorch.trace.events`: ``e.kind``, ``e.step`` and
    the fields of its kind) that also reads like the plain dict it saves as (``e["kind"]``,
    ``e.get("node")``), so a trace saves to JSON and loads back equal. ``Trace(events)``
    takes records or plain dicts (a hand-written trace).
    """

    def __init__(self, events: list | None = None):
        self.events: list[Event] = [from_dict(e) for e in events or ()]
        self.phase = "forward"  # the backward engine sets "backward" while it runs
        self._seen_tensors: dict[int, tuple] = {}  # tensor id -> (name, requires_grad, is_leaf, storage) last recorded
        self._previous: Trace | None = None
        self._replay = None  # built on first use by state_at / lifetimes / peak
        self._lock = threading.Lock()  # a data loader's worker threads emit too
        self._thread = threading.get_ident()  # the thread recording; others' events say which they are

    # -- recording -----------------------------------------------------------------
    def emit(self, kind: str, **fields) -> None:
        """Append the ``kind`` record of ``fields`` (see :mod:`microtorch.trace.events`)."""
        try:
            event = EVENT_TYPES[kind](**fields)
        except (KeyError, TypeError):  # an unknown kind (raises, naming the known ones) or extra fields
            event = make(kind, fields)
        if event.thread is UNSET and (me := threading.get_ident()) != self._thread:
            event.thread = me  # an event from another thread than the recording one
        with self._lock:  # step numbers stay the positions, whichever thread emits
            event.step = len(self.events)
            self.events.append(event)

    def tensor(self, t) -> int:
        """Id of ``t``; record a ``tensor`` event describing it the first time it is seen,
        and again if its name, autograd flags or storage changed since (``a = mt.randn(3,
        requires_grad=True); a.name = "a"`` is first seen inside ``randn``, nameless)."""
        tid = recording.tensor_id(t)
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
        self._previous, recording.active = recording.active, self
        self.emit("baseline", **baseline())
        return self

    def __exit__(self, *exc) -> None:
        recording.active = outer = self._previous
        if outer is not None:  # the outer trace missed what happened while this one recorded
            outer.emit("baseline", **baseline())

    # -- reading -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __getitem__(self, i):
        return self.events[i]

    def filter(self, *kinds: str) -> list[Event]:
        """The events of the given kinds, in order."""
        return [e for e in self.events if e.kind in kinds]

    def kinds(self) -> dict[str, int]:
        """How many events of each kind were recorded."""
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts

    def __repr__(self) -> str:
        summary = ", ".join(f"{k}={n}" for k, n in self.kinds().items())
        return f"Trace({len(self)} events: {summary})"

    # -- replaying -----------------------------------------------------------------------
    def replay(self):
        """The :class:`~microtorch.trace.replay.Replay` of this trace (built once, extended
        as the trace grows)."""
        from .replay import Replay

        r = self._replay
        if r is None or r.events is not self.events or r._main.t >= len(self.events):
            r = self._replay = Replay(self.events)
        return r

    def state_at(self, t: int):
        """The memory right after event ``t``: a :class:`~microtorch.trace.replay.MemoryState`."""
        return self.replay().state_at(t)

    def lifetimes(self) -> list:
        """When each storage's bytes were live: :class:`~microtorch.trace.replay.Lifetime` records."""
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
        trace format version (``"format": "microtorch-trace/1"``, :data:`.schema.VERSIONS`)."""
        doc = {"format": f"{schema.FORMAT}{schema.VERSIONS[-1]}", "events": [e.to_dict() for e in self.events]}
        Path(path).write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        """Read a trace written by :meth:`save`, checked before anything replays it: a file that
        is not JSON, of a format version this microtorch does not read, with a malformed event
        or with events missing (an alloc removed, a count that does not add up) raises
        :class:`~microtorch.memory.schema.TraceFormatError` naming the first bad event."""
        where = str(path)
        try:
            # JSON object keys are strings; the only int-keyed dicts in events map node ids to
            # counts ("pending"), so digit keys become ints again and the trace loads back unchanged
            doc = json.loads(Path(path).read_bytes(), object_pairs_hook=_int_keys)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise schema.TraceFormatError(
                f"{where} is not a microtorch trace file: it is not JSON ({e}); "
                "trace files are written by tr.save(path)") from None
        events = schema.check_document(doc, where)
        schema.check_events(events, KINDS, where)
        return cls([make(e["kind"], e) for e in events])


def _int_keys(pairs) -> dict:
    return {int(k) if k.isdigit() else k: v for k, v in pairs}


def baseline() -> dict:
    """The fields of a ``baseline`` event: what is live right now. Each allocator describes
    itself (``describe()``: a plain dict with its ``name`` and ``kind``) and lists its live
    blocks (``blocks_in_use()``); the storages using them are found through each block's
    ``user`` weakref."""
    described, blocks, storages = [], [], []
    for a in list(allocators.values()):
        described.append(a.describe())
        for b in a.blocks_in_use():
            storage = b.user() if b.user is not None else None
            if storage is not None and not storage.freed and storage.stale is None:
                storages.append({"storage": storage.id, "nbytes": storage.nbytes,
                                 "dtype": storage.data.dtype.name, "tag": storage.tag, "allocator": a.name,
                                 "block": b.id, "refcount": storage.refcount, "stale": False})
            else:
                storage = None
            blocks.append({"allocator": a.name, "block": b.id, "chunk": b.chunk, "offset": b.offset,
                           "nbytes": b.nbytes, "size": b.size, "padding": b.padding, "tag": b.tag,
                           "size_class": b.size_class, "storage": storage.id if storage is not None else None})
    return {"live_bytes": placement.live_bytes, "peak_bytes": placement.peak_bytes,
            "allocators": described, "blocks": blocks, "storages": storages,
            "node_records": {"live": nodes.live, "top": nodes.top}}


def record() -> Trace:
    """``with mt.trace() as tr:`` — record what the engine does inside the block."""
    return Trace()
