"""The computation graph as plain facts: :class:`GraphState`, replayed from a trace's events.

:func:`graph_state` is the op nodes, leaves, outputs, gradients and where backward stands
after events ``0..t``: :class:`GraphReplayer` is the graph concern of the trace's one replay
(:meth:`microtorch.trace.replay.Replay.follow` drives it with its cursor); the text (:mod:`~microtorch.viz.graph_text`) and the DOT source
(:mod:`~microtorch.viz.graph_dot`) of the graph picture are both drawn from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .events import clamp_step, int_keys, replay_of


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
        if bw is None or self.ops[nid].step > bw["step"]:
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


def graph_state(trace, t: int | None = None) -> GraphState:
    """The graph after events ``0..t`` (``None``: all), from the trace's one replay
    (:meth:`~microtorch.trace.replay.Replay.follow`); treat it as read-only."""
    t = clamp_step(trace, t)
    return replay_of(trace).follow(GraphReplayer, t)


class GraphReplayer:
    """The graph concern of a trace's replay: applies events one by one (op, backward,
    node_run, grad, release) and hands out :class:`GraphState` snapshots."""

    def __init__(self, events: list):
        self.events, self.t = events, -1
        self.ops: dict[int, dict] = {}
        self.producer: dict[int, int] = {}
        self.sources: dict[int, list] = {}
        self.consumers: dict[int, list[int]] = {}
        self.grads: dict[int, dict] = {}
        self.backward: dict | None = None
        self.released: set[int] = set()
        self.untracked_ops = 0
        self.edges_into: dict[int, dict | None] = {}  # leaf tensor id -> its grad edge (from the op's next)

    def apply(self, e) -> None:
        self.t += 1
        kind = e["kind"]
        if kind == "op" and e.get("phase", "forward") != "backward":
            nid = e.get("node")
            if nid is None:
                self.untracked_ops += 1
                return
            self.ops[nid] = e
            self.sources[nid] = [self.producer.get(tid) for tid in e["inputs"]]
            nxt = e.get("next") or [None] * len(e["inputs"])
            for tid, edge in zip(e["inputs"], nxt):
                self.consumers.setdefault(tid, []).append(nid)
                if tid not in self.producer:
                    self.edges_into.setdefault(tid, edge)
            self.producer[e["output"]] = nid
            if e.get("inplace") and e["inputs"]:  # the written tensor now comes from this node
                self.producer[e["inputs"][0]] = nid
        elif kind == "backward":
            self.backward = {"order": e.get("order", "deps"), "step": e["step"],
                             "roots": list(e.get("roots", [])), "pending": int_keys(e.get("pending")),
                             "ready": [int(n) for n in e.get("ready") or []],
                             "schedule": [int(n) for n in e.get("schedule") or []], "done": []}
        elif kind == "node_run" and self.backward is not None:
            bw = self.backward = dict(self.backward)  # snapshots handed out keep the old one
            bw["done"] = bw["done"] + [int(e["node"])]
            if e.get("pending") is not None:
                bw["pending"] = int_keys(e["pending"])
            if e.get("ready") is not None:
                bw["ready"] = [int(n) for n in e["ready"]]
        elif kind == "grad":
            g = self.grads.get(e["tensor"], {"count": 0})
            self.grads[e["tensor"]] = {"shape": e["shape"], "norm": e["norm"],
                                       "count": g["count"] + 1, "step": e["step"]}
        elif kind == "release":
            self.released.add(int(e["node"]))

    def snapshot(self) -> GraphState:
        t, events = self.t, self.events
        s = GraphState(t=t, n_events=len(events), current=events[t] if t >= 0 else None,
                       ops=dict(self.ops), producer=dict(self.producer), sources=dict(self.sources),
                       consumers={tid: list(ns) for tid, ns in self.consumers.items()},
                       grads=dict(self.grads), backward=self.backward, released=set(self.released),
                       untracked_ops=self.untracked_ops)
        for tid, edge in self.edges_into.items():
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
