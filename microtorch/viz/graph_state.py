"""The computation graph as plain facts: :class:`GraphState`, replayed from a trace's events.

:func:`graph_state` replays events ``0..t`` into the op nodes, leaves, outputs, gradients
and where backward stands; the text (:mod:`~microtorch.viz.graph_text`) and the DOT source
(:mod:`~microtorch.viz.graph_dot`) of the graph picture are both drawn from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .events import clamp_step, events_of, int_keys


@dataclass
class GraphState:
    """What the graph looks like after events ``0..t``."""

    t: int
    n_events: int
    ops: dict[int, dict] = field(default_factory=dict)        # node id -> its forward op event
    producer: dict[int, int] = field(default_factory=dict)    # tensor id -> node id that made it (latest)
    sources: dict[int, list] = field(default_factory=dict)    # node id -> producer of each input *then*
    consumers: dict[int, list[int]] = field(default_factory=dict)  # tensor id -> node ids using it
    leaves: dict[int, str] = field(default_factory=dict)      # tensor id -> "parameter" | "constant" | "external"
    outputs: list[int] = field(default_factory=list)          # tensor ids no recorded op consumed
    grads: dict[int, dict] = field(default_factory=dict)      # leaf tensor id -> {shape, norm, count, step}
    backward: dict | None = None  # the latest pass: order, step, roots, pending, ready, done, schedule
    released: set[int] = field(default_factory=set)           # nodes that let go of saved tensors
    untracked_ops: int = 0        # forward ops that recorded no graph node
    current: dict | None = None   # event t

    def status(self, nid: int) -> str:
        """``"done"``, ``"ready"``, ``"waiting"``, ``"unreached"`` or ``"forward"``."""
        bw = self.backward
        if bw is None or self.ops[nid]["step"] > bw["step"]:
            return "forward"
        if nid in bw["done"]:
            return "done"
        if nid in bw["ready"]:
            return "ready"
        if bw["order"] == "topo":
            return "waiting" if nid in bw["schedule"] else "unreached"
        return "waiting" if nid in bw["pending"] else "unreached"

    @property
    def n_nodes(self) -> int:
        return len(self.ops) + len(self.leaves) + len(self.outputs)

    @property
    def backward_finished(self) -> bool:
        bw = self.backward
        if bw is None:
            return False
        if bw["order"] == "topo":
            return bool(bw["done"]) and all(n in bw["done"] for n in bw["schedule"] if n in self.ops)
        return not bw["ready"] and all(c == 0 for c in bw["pending"].values())


_recent: list = []  # a few (events, length, t, state): render, describe and to_dot share one replay


def graph_state(trace, t: int | None = None) -> GraphState:
    """Replay events ``0..t`` (``None``: all) into a :class:`GraphState` (treat it as read-only:
    the last few are kept and handed out again)."""
    events = events_of(trace)
    t = clamp_step(trace, t)
    for ev, n, tt, state in _recent:
        if ev is events and n == len(events) and tt == t:
            return state
    state = _graph_state(events, t)
    _recent.insert(0, (events, len(events), t, state))
    del _recent[4:]
    return state


def _graph_state(events: list, t: int) -> GraphState:
    s = GraphState(t=t, n_events=len(events), current=events[t] if t >= 0 else None)
    edges_into: dict[int, dict | None] = {}  # leaf tensor id -> its grad edge (from the op's next)
    for e in events[: t + 1]:
        kind = e["kind"]
        if kind == "op" and e.get("phase", "forward") != "backward":
            nid = e.get("node")
            if nid is None:
                s.untracked_ops += 1
                continue
            s.ops[nid] = e
            s.sources[nid] = [s.producer.get(tid) for tid in e["inputs"]]
            nxt = e.get("next") or [None] * len(e["inputs"])
            for tid, edge in zip(e["inputs"], nxt):
                s.consumers.setdefault(tid, []).append(nid)
                if tid not in s.producer:
                    edges_into.setdefault(tid, edge)
            s.producer[e["output"]] = nid
            if e.get("inplace") and e["inputs"]:  # the written tensor now comes from this node
                s.producer[e["inputs"][0]] = nid
        elif kind == "backward":
            s.backward = {"order": e.get("order", "deps"), "step": e["step"],
                          "roots": list(e.get("roots", [])), "pending": int_keys(e.get("pending")),
                          "ready": [int(n) for n in e.get("ready") or []],
                          "schedule": [int(n) for n in e.get("schedule") or []], "done": []}
        elif kind == "node_run" and s.backward is not None:
            s.backward["done"].append(int(e["node"]))
            if e.get("pending") is not None:
                s.backward["pending"] = int_keys(e["pending"])
            if e.get("ready") is not None:
                s.backward["ready"] = [int(n) for n in e["ready"]]
        elif kind == "grad":
            g = s.grads.get(e["tensor"], {"count": 0})
            s.grads[e["tensor"]] = {"shape": e["shape"], "norm": e["norm"],
                                    "count": g["count"] + 1, "step": e["step"]}
        elif kind == "release":
            s.released.add(int(e["node"]))
    for tid, edge in edges_into.items():
        if tid in s.producer:
            continue
        if edge is None:
            s.leaves[tid] = "constant"
        elif "leaf" in edge:
            s.leaves[tid] = "parameter"
        else:  # its gradient goes to a node recorded before the trace started
            s.leaves[tid] = "external"
    fed = {p for made_by in s.sources.values() for p in made_by if p is not None}
    s.outputs = [e["inputs"][0] if e.get("inplace") and e["inputs"] else e["output"]  # what it wrote
                 for nid, e in s.ops.items() if nid not in fed]
    return s
