"""Reading a recorded trace: names for tensors and nodes, and each event in plain words.

Shared by every panel and by the player. Pure functions of the trace: nothing here
touches live engine objects, so a trace loaded from JSON reads the same as a fresh one.
"""
from __future__ import annotations

from typing import Callable, Iterable

#: The events a student scrubs through with ``steps="ops"``: forward ops, the start of
#: backward, each node run, each gradient accumulation. (Ops *inside* backward are the
#: gradient arithmetic, not graph nodes; ``steps="events"`` shows them and everything else.)
OPS_STEPS = ("op", "backward", "node_run", "grad", "checkpoint", "recompute")


def events_of(trace) -> list[dict]:
    """The event list of a :class:`~microtorch.Trace` (or of a plain list of event dicts)."""
    return trace.events if hasattr(trace, "events") else list(trace)


def clamp_step(trace, t: int | None) -> int:
    """``t`` as an event index: ``None`` → the last event; negatives count from the end."""
    n = len(events_of(trace))
    if t is None:
        return n - 1
    if t < 0:
        t += n
    return max(-1, min(int(t), n - 1))


def step_label(trace, t: int, steps=None) -> str:
    """When ``t`` is, in the one notion every picture uses.

    On a player's step axis (``steps``: the event indices it steps through) this is
    ``"step 2 of 21 · event 15"`` — the position on the slider (counted from 1) and the
    event it shows. Without a step axis (a picture drawn on its own) it is
    ``"event 15 of 267"``; before any event, ``"before event 0"``.
    """
    n = len(events_of(trace))
    if t < 0:
        return "before event 0" if n else "empty trace"
    if steps:
        k = _position(steps, t)
        if k is not None:
            return f"step {k + 1} of {len(steps)} · event {t}"
    return f"event {t} of {n - 1}"


def _position(steps, t: int) -> int | None:
    import bisect
    k = bisect.bisect_left(steps, t)
    return k if k < len(steps) and steps[k] == t else None


def select_steps(trace, steps="ops") -> list[int]:
    """The event indices a player steps through.

    ``steps`` is ``"ops"`` (:data:`OPS_STEPS`, forward-phase ops only), ``"events"``
    (every event), a collection of event kinds, or a predicate ``event -> bool``.
    """
    events = events_of(trace)
    if steps == "events":
        return list(range(len(events)))
    if steps == "ops":
        keep: Callable[[dict], bool] = lambda e: (e["kind"] in OPS_STEPS and not
                                                 (e["kind"] == "op" and e.get("phase") == "backward"))
    elif callable(steps):
        keep = steps
    elif isinstance(steps, Iterable) and not isinstance(steps, str):
        kinds = set(steps)
        keep = lambda e: e["kind"] in kinds
    else:
        raise ValueError(f"steps must be 'ops', 'events', a list of event kinds or a predicate, "
                         f"got {steps!r}")
    return [i for i, e in enumerate(events) if keep(e)]


class TraceIndex:
    """Look-ups over one trace: each tensor's recorded descriptions, each node's op."""

    def __init__(self, events: list[dict]):
        self.tensor_events: dict[int, list[dict]] = {}
        self.node_op: dict[int, dict] = {}  # node id -> the forward op event that created it
        self.producer: dict[int, int] = {}  # tensor id -> the node whose op made it
        for e in events:
            if e["kind"] == "tensor":
                self.tensor_events.setdefault(e["tensor"], []).append(e)
            elif e["kind"] == "op" and e.get("node") is not None and e.get("phase") != "backward":
                self.node_op.setdefault(e["node"], e)
                self.producer.setdefault(e["output"], e["node"])

    def tensor_at(self, tid: int, t: int) -> dict | None:
        """The latest description of tensor ``tid`` recorded at or before step ``t``
        (the first one if it was only described later)."""
        found = self.tensor_events.get(tid)
        if not found:
            return None
        best = found[0]
        for e in found:
            if e.step <= t:
                best = e
        return best

    def tensor_name(self, tid: int, t: int) -> str:
        """``W`` for a named tensor, ``node 3's result`` for a graph op's unnamed result,
        ``tensor 5`` otherwise."""
        e = self.tensor_at(tid, t)
        if e and e.get("name"):
            return e["name"]
        return f"node {self.producer[tid]}'s result" if tid in self.producer else f"tensor {tid}"

    def tensor_label(self, tid: int, t: int) -> str:
        """``W [3, 2]``: the name and shape."""
        e = self.tensor_at(tid, t)
        shape = f" {e['shape']}" if e else ""
        return self.tensor_name(tid, t) + shape

    def node_name(self, nid) -> str:
        """``Relu (node 3)``."""
        nid = int(nid)
        op = self.node_op.get(nid)
        return f"{op['op']} (node {nid})" if op else f"node {nid}"


def replay_of(trace):
    """The one replay of ``trace`` (:meth:`microtorch.Trace.replay`) that every panel reads:
    its memory states, the graph follower, the shared per-trace facts. A plain list of
    events gets a replay of its own (nothing to keep it on)."""
    if hasattr(trace, "replay"):
        return trace.replay()
    from ..trace.replay import Replay

    return Replay(events_of(trace))


def index(trace) -> TraceIndex:
    """The :class:`TraceIndex` of ``trace``, kept with its replay until the trace grows."""
    events = events_of(trace)
    return replay_of(trace).facts(TraceIndex, lambda: TraceIndex(events))


def int_keys(d: dict | None) -> dict[int, int]:
    """Node-id dicts with int keys (JSON turns ``{3: 1}`` into ``{"3": 1}``)."""
    return {int(k): v for k, v in (d or {}).items()}


def describe_event(trace, i: int) -> str:
    """Event ``i`` of ``trace`` in one plain sentence."""
    events = events_of(trace)
    if not 0 <= i < len(events):
        return "nothing recorded yet" if i < 0 else f"no event {i} (the trace has {len(events)})"
    e = events[i]
    ix = index(trace)
    kind = e["kind"]
    T = lambda tid: ix.tensor_label(tid, i)  # noqa: E731
    if kind == "tensor":
        flags = ("leaf" if e.get("is_leaf") else "op result") + (
            ", requires grad" if e.get("requires_grad") else "")
        name = f" ({e['name']})" if e.get("name") else ""
        return (f"tensor {e['tensor']}{name} recorded: shape {e['shape']}, {e['dtype']}, {flags}, "
                f"viewing storage #{e['storage']}")
    if kind == "alloc":
        return f"storage #{e['storage']} allocated: {e['nbytes']} bytes of {e['dtype']}"
    if kind == "free":
        return f"storage #{e['storage']} freed: its {e['nbytes']} bytes are given back"
    if kind == "refcount":
        before = e["refcount"] - e["delta"]
        verb = "took" if e["delta"] > 0 else "dropped"
        return (f"storage #{e['storage']} refcount {before} → {e['refcount']}: "
                f"{e.get('holder', '?')} {verb} a reference")
    if kind == "op":
        out = e["output"]
        result = T(out) if ix.producer.get(out) != e.get("node") or ix.tensor_at(out, i).get("name") \
            else f"a new tensor {e['shape']}" + (" (scalar)" if not e["shape"] else "")
        call = f"{e['op']}({', '.join(T(x) for x in e['inputs'])}) → {result}"
        if e.get("phase") == "backward":
            return f"inside backward: {call} (gradient arithmetic, not a graph node)"
        if e.get("phase") == "recompute":
            return f"recompute (checkpoint rerun in backward): {call}"
        if e.get("node") is None:
            return f"forward: {call}; no graph node (no input requires grad, or grad is off)"
        saved = e.get("saved") or []
        holders = {}
        for x in list(e["inputs"]) + [out]:
            te = ix.tensor_at(x, i)
            if te is not None:
                holders.setdefault(te["storage"], ix.tensor_name(x, i) if x != out else "its result")
        keeps = (", saving " + ", ".join(f"{holders.get(st, 'a tensor')} (storage #{st})" for st in saved)
                 + " for backward") if saved else ""
        return f"forward: {call}; added to the graph as node {e['node']}{keeps}"
    if kind == "backward":
        roots = ", ".join(T(r) for r in e.get("roots", [])) or "the output"
        if e.get("order") == "topo":
            sched = ", ".join(ix.node_name(n) for n in e.get("schedule", []))
            return f"backward starts from {roots} (topological order): schedule {sched}"
        ready = ", ".join(ix.node_name(n) for n in e.get("ready", [])) or "none"
        pend = ", ".join(f"{ix.node_name(n)}: {c}" for n, c in int_keys(e.get("pending")).items())
        return (f"backward starts from {roots}: pending counts {{{pend}}}; ready: {ready}")
    if kind == "node_run":
        ready = e.get("ready")
        now = "" if ready is None else (
            "; now ready: " + (", ".join(ix.node_name(n) for n in ready) or "none"))
        return (f"backward ran node {e['node']} ({e['op']}) on an incoming gradient of shape "
                f"{e['grad_shape']}{now}")
    if kind == "grad":
        return (f"gradient accumulated into {ix.tensor_name(e['tensor'], i)}.grad: "
                f"shape {e['shape']}, norm {e['norm']:.4g}")
    if kind == "release":
        how = " (its graph was dropped without backward)" if e.get("dropped") else ""
        return f"{ix.node_name(e['node'])} released its saved tensors and its node record{how}"
    if kind == "alloc_block":
        where = e["allocator"]
        if "size_class" in e:  # a pool
            if e.get("size_class") is None:
                how = "a direct block (too big for any size class)"
            else:
                how = (f"size class {e['size']:,} B, {'reused from the free list' if e.get('reused') else 'a fresh block'}"
                       f" at slab {e['chunk']} offset {e['offset']:,}")
            return (f"{where} handed out block {e['block']}: {e['size']:,} B for a {e['nbytes']:,}-byte "
                    f"request ({how})")
        pad = f", after {e['padding']} B of alignment padding" if e.get("padding") else ""
        return (f"{where} handed out block {e['block']}: {e['nbytes']:,} B at chunk {e['chunk']} offset "
                f"{e['offset']:,}{pad}")
    if kind == "free_block":
        if e.get("held"):
            return f"block {e['block']} went back to {e['allocator']}, held back until a later epoch"
        return f"block {e['block']} went back to {e['allocator']}"
    if kind == "arena_chunk":
        grew = f"chunk {e['chunk']}: it ran out of room and grew" if e.get("growth") else "its first chunk"
        return f"{e['arena']} got {e['nbytes']:,} bytes of backing memory ({grew})"
    if kind == "arena_reset":
        stale = e.get("stale") or []
        lost = (f"; {len(stale)} storage(s) still referenced lost their bytes (touching them raises)"
                if stale else "")
        return (f"{e['arena']} was reset: {len(e.get('blocks') or [])} block(s) freed at once, generation "
                f"{e.get('generation', '?')}{lost}")
    if kind == "pool_epoch":
        released = len(e.get("released") or [])
        return (f"{e['allocator']} advanced to epoch {e['epoch']}: {released} held block(s) released to "
                f"their free lists, {e.get('held', 0)} still held back")
    if kind == "baseline":
        return (f"what was live when recording (re)started: {len(e.get('storages', []))} storages "
                f"in {len(e.get('blocks', []))} blocks of {len(e.get('allocators', []))} allocators, "
                f"{e.get('live_bytes', 0)} bytes live in all")
    if kind == "read":
        how = ("an array over the same bytes (it reads them until it is dropped)"
               if e.get("copy") is False else "a copy of its values")
        return f"{T(e['tensor'])} read by .{e['how']}() from storage #{e['storage']}: {how}"
    if kind == "checkpoint":
        if e.get("stage") == "begin":
            return (f"checkpoint {e.get('checkpoint')} ({e.get('fn')}) starts: only its inputs "
                    f"({e.get('kept_bytes', 0):,} B) are kept for backward")
        dropped = e.get("dropped_bytes")
        what = f"{dropped:,} B of saved tensors left to recompute" if dropped is not None else \
            "its insides ran without a graph"
        return f"checkpoint {e.get('checkpoint')} ({e.get('fn')}) ends: {what}"
    if kind == "recompute":
        if e.get("stage") == "begin":
            return (f"backward recomputes checkpoint {e.get('checkpoint')} ({e.get('fn')}) from its "
                    f"kept inputs ({e.get('kept_bytes', 0):,} B)")
        got = e.get("recomputed_bytes")
        return (f"checkpoint {e.get('checkpoint')} recomputed" +
                (f": {got:,} B of saved tensors are back for backward" if got is not None else ""))
    if kind == "mark":
        extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("kind", "step", "label"))
        return f"mark: {e.get('label', '')}" + (f" ({extra})" if extra else "")
    fields = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("kind", "step"))
    return f"{kind}: {fields}"
