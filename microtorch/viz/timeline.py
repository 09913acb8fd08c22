"""What every memory picture needs from a trace, computed once per trace.

A picture is a pure function ``render(trace, t)``; scrubbing calls it for many ``t``. The
facts that do not depend on ``t`` — what each storage is called and what kind of bytes it
holds, each storage's reference-count history, each arena's used bytes and capacity after
every event (for the high-water mark and a steady address axis), the pool's size classes —
are gathered here in one pass over the replayed states and kept with the trace's one
replay (:meth:`~microtorch.trace.replay.Replay.facts`) until the trace grows.

Everything comes from the trace's events and :meth:`~microtorch.Trace.state_at` (the
replay); nothing here looks at live engine objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import palette
from .events import events_of

#: Bytes of one node record (:data:`microtorch.memory.node_arena.RECORD`: one cache line).
NODE_RECORD_BYTES = 64


class StorageInfo(NamedTuple):
    """How pictures name and colour one storage."""
    storage: int
    kind: str  # a palette memory kind: parameter, activation, gradient, data, unknown
    short: str  # "#7"
    label: str  # "#7 W1", "#9 Relu", "#12 Mul (backward)", "#3 gradient"
    nbytes: int | None
    tag: str | None
    allocator: str | None


@dataclass
class ArenaSeries:
    """One arena after every event (arrays of length ``n``; 0 before it exists)."""
    name: str
    used: np.ndarray
    capacity: np.ndarray
    requested: np.ndarray
    high_water: np.ndarray  # the most bytes below the top at any event up to t
    first: int  # the first event it exists at

    @property
    def max_capacity(self) -> int:
        return int(self.capacity.max()) if self.capacity.size else 0


@dataclass
class Timeline:
    """Per-trace facts shared by the memory pictures (see the module docstring)."""
    trace: object
    n: int
    storages: dict[int, StorageInfo] = field(default_factory=dict)
    refcounts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # sid -> (step, value)
    born: dict[int, int] = field(default_factory=dict)  # sid -> first step seen (alloc or baseline)
    freed: dict[int, int] = field(default_factory=dict)  # sid -> step of its free event
    reset: dict[int, int] = field(default_factory=dict)  # sid -> step its arena reclaimed its bytes
    arenas: dict[str, ArenaSeries] = field(default_factory=dict)
    node_top: np.ndarray | None = None  # node arena top slot after every event
    node_live: np.ndarray | None = None
    pool_classes: dict[str, list[tuple[int | None, int | None]]] = field(default_factory=dict)
    pool_max_blocks: dict[str, int] = field(default_factory=dict)  # most blocks one class has at once
    pool_max_reserved: dict[str, int] = field(default_factory=dict)  # most bytes one class reserves at once
    live_bytes: np.ndarray | None = None
    peak: tuple[int, int | None] = (0, None)
    touched: set[int] = field(default_factory=set)  # storages an event of the program refers to

    def info(self, sid: int) -> StorageInfo:
        got = self.storages.get(sid)
        return got if got is not None else StorageInfo(sid, "unknown", f"#{sid}", f"#{sid}", None, None, None)

    def kind(self, sid: int | None) -> str:
        return "unknown" if sid is None else self.info(sid).kind


def as_trace(trace):
    """``trace`` if it replays (a :class:`~microtorch.Trace`), else a Trace over its events."""
    if hasattr(trace, "state_at"):
        return trace
    from ..trace.recorder import Trace
    return Trace(list(trace))


def timeline(trace) -> Timeline:
    """The :class:`Timeline` of ``trace``, kept with its replay until the trace grows."""
    trace = as_trace(trace)
    return trace.replay().facts(Timeline, lambda: _build(trace))


def _build(trace) -> Timeline:
    events = events_of(trace)
    n = len(events)
    tl = Timeline(trace, n)

    # -- names and kinds of storages, from the events -------------------------------------------
    names: dict[int, list[str]] = {}
    param: set[int] = set()
    made_by: dict[int, str] = {}
    meta: dict[int, tuple] = {}  # sid -> (nbytes, tag, allocator)
    first_view: dict[int, str] = {}  # sid -> "tensor 35 [4]": the first tensor seen over it
    for e in events:
        kind = e["kind"]
        tl.touched.update(_storages_of(e))
        if kind == "tensor":
            sid = e["storage"]
            first_view.setdefault(sid, f"tensor {e['tensor']} {_shape(e.get('shape'))}")
            if e.get("name"):
                got = names.setdefault(sid, [])
                if e["name"] not in got:
                    got.append(e["name"])
            if e.get("requires_grad") and e.get("is_leaf"):
                param.add(sid)
        elif kind == "op":
            sid = e.get("output_storage")
            if (sid is not None and sid not in made_by and not e.get("inplace")
                    and sid not in (e.get("input_storages") or ())):  # new bytes, not a view
                made_by[sid] = e["op"] + (" (backward)" if e.get("phase") == "backward" else "")
        elif kind == "alloc":
            meta[e["storage"]] = (e["nbytes"], e.get("tag"), e.get("allocator"))
        elif kind == "baseline":
            for s in e.get("storages", ()):
                meta.setdefault(s["storage"], (s["nbytes"], s.get("tag"), s.get("allocator")))
    for sid in set(meta) | set(names) | set(made_by):
        nbytes, tag, allocator = meta.get(sid, (None, None, None))
        kind = palette.memory_kind(tag, sid in param)
        if kind == "unknown" and sid in param:
            kind = "parameter"
        if kind == "parameter" and sid not in names:
            who = "parameter"
        elif sid in names:
            who = names[sid][0] + (f" +{len(names[sid]) - 1}" if len(names[sid]) > 1 else "")
        elif sid in made_by:
            who = made_by[sid]
        elif sid in first_view:
            who = first_view[sid] + (" gradient" if kind == "gradient" else "")
        else:  # bytes no tensor of the trace viewed: say what they are
            who = f"{palette.label(kind)}, {fmt_bytes(nbytes)}" if kind != "unknown" else fmt_bytes(nbytes)
        tl.storages[sid] = StorageInfo(sid, kind, f"#{sid}", f"#{sid} {who}".strip(), nbytes, tag,
                                       allocator)

    # -- reference counts over time ------------------------------------------------------------
    rc = tl.refcounts
    for e in events:
        kind, step = e["kind"], e["step"]
        if kind == "alloc":
            sid = e["storage"]
            rc.setdefault(sid, []).append((step, 0))
            tl.born.setdefault(sid, step)
        elif kind == "refcount":
            sid = e["storage"]
            series = rc.setdefault(sid, [])
            if not series:  # made before recording, first seen here
                series.append((step, e["refcount"] - e["delta"]))
                tl.born.setdefault(sid, step)
            series.append((step, e["refcount"]))
        elif kind == "free":
            tl.freed.setdefault(e["storage"], step)
        elif kind == "arena_reset":
            for sid in e.get("stale") or ():
                tl.reset.setdefault(sid, step)
        elif kind == "baseline":
            for s in e.get("storages", ()):
                sid = s["storage"]
                series = rc.setdefault(sid, [])
                if not series or series[-1][1] != s["refcount"]:
                    series.append((step, s["refcount"]))
                tl.born.setdefault(sid, step)

    # -- arenas, node records and pool classes after every event (one in-order replay) ---------
    replay = trace.replay()
    used: dict[str, np.ndarray] = {}
    cap: dict[str, np.ndarray] = {}
    req: dict[str, np.ndarray] = {}
    first: dict[str, int] = {}
    tl.node_top = np.zeros(n, dtype=np.int64)
    tl.node_live = np.zeros(n, dtype=np.int64)
    classes: dict[str, dict] = {}
    for t in range(n):
        s = replay.state_at(t)
        for name, a in s.arenas.items():
            if name not in used:
                used[name], cap[name], req[name] = (np.zeros(n, dtype=np.int64) for _ in range(3))
                first[name] = t
            used[name][t], cap[name][t], req[name][t] = a.used, a.capacity, a.requested
        tl.node_top[t] = s.node_records.top
        tl.node_live[t] = s.node_records.live
        for (pool, c), cls in s.pool_classes.items():
            known = classes.setdefault(pool, {})
            if known.get(c) is None:
                known[c] = cls.size
            blocks = cls.in_use + cls.free + cls.held
            if blocks > tl.pool_max_blocks.get(pool, 0):
                tl.pool_max_blocks[pool] = blocks
            if cls.reserved > tl.pool_max_reserved.get(pool, 0):
                tl.pool_max_reserved[pool] = cls.reserved
    for name in used:
        u = used[name]
        tl.arenas[name] = ArenaSeries(name, u, cap[name], req[name], np.maximum.accumulate(u), first[name])
    for pool, cs in classes.items():
        tl.pool_classes[pool] = sorted(cs.items(), key=lambda kv: (kv[0] is None, kv[1] or 0, kv[0] or 0))
    tl.live_bytes = np.asarray(trace.live_bytes(), dtype=np.int64)
    tl.peak = trace.peak()
    return tl


def _storages_of(e: dict):
    """The storages an event (other than ``baseline``, which lists what merely exists) is about."""
    kind = e["kind"]
    if kind in ("alloc", "free", "refcount", "tensor"):
        return (e["storage"],)
    if kind == "op":
        out = list(e.get("input_storages") or ()) + list(e.get("saved") or ())
        return out + ([e["output_storage"]] if e.get("output_storage") is not None else [])
    if kind == "arena_reset":
        return tuple(e.get("stale") or ())
    return ()


def _shape(shape) -> str:
    return "scalar" if shape is not None and len(shape) == 0 else str(list(shape)) if shape is not None else ""


def fmt_bytes(n: int | float | None) -> str:
    """``1,536 B`` (exact below 100,000 B), ``312.5 KiB``, ``3.2 MiB``."""
    if n is None:
        return "? B"
    n = int(n)
    if abs(n) < 100_000:
        return f"{n:,} B"
    if abs(n) < 10 * 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def lanes(intervals: list[tuple[int, int, int]]) -> dict[int, int]:
    """Rows for intervals ``(key, start, stop)`` (``stop`` exclusive) so that intervals in one
    row never overlap: each goes, in start order, into the first row free by then (greedy
    interval partitioning: as few rows as the most intervals alive at once)."""
    ends: list[int] = []  # per row: where its last interval stops
    out = {}
    for key, start, stop in sorted(intervals, key=lambda iv: (iv[1], iv[2], iv[0])):
        for row, end in enumerate(ends):
            if end <= start:
                ends[row] = stop
                out[key] = row
                break
        else:
            out[key] = len(ends)
            ends.append(stop)
    return out
