"""The NUMA placement map (a model, not a measurement): where each storage's pages live, and what each op paid.

:func:`microtorch.memory.numa.simulate` replays a trace's ops on a modelled two-socket
machine, with a thread affinity (which socket runs each op) and a placement policy. This
picture shows its result up to ``t``:

* **left** — one row per storage placed so far: its bytes split by the node its pages live on;
* **right** — the modelled time of each op so far, coloured by the socket that ran it, the
  remote part hatched.

The title states that the numbers are the model's. ``render(trace, t, affinity=..., policy=...)``
returns a :class:`~microtorch.viz.figure.PanelFigure` with ``facts`` (:class:`NumaFacts`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import palette
from .events import clamp_step, replay_of, step_label
from .figure import DEFAULT_WIDTH, Painter, new_figure
from .timeline import as_trace, fmt_bytes

NODE_COLORS = ("blue", "orange", "bluish_green", "reddish_purple")


@dataclass
class NumaFacts:
    t: int
    when: str
    policy: str
    nodes: int
    storages: list = field(default_factory=list)  # (storage, nbytes, {node: fraction}) placed by t
    ops: list = field(default_factory=list)  # (step, op, node, ns, remote ns) run by t
    local_bytes: int = 0
    remote_bytes: int = 0

    @property
    def total_ns(self) -> float:
        return sum(o[3] for o in self.ops)


def on_socket_0(i: int, e) -> int:
    """The default affinity: every op runs on socket 0."""
    return 0


@dataclass(frozen=True)
class NumaConcern:
    """One run of the model (affinity, policy, topology) as a reducer of the trace's one
    replay: ``replay.follow(NumaConcern(...), t)`` keeps one cursor per run."""
    affinity: object
    policy: object
    topology: object

    def __call__(self, events: list) -> "NumaReplayer":
        return NumaReplayer(events, self.affinity, self.policy, self.topology)


class NumaReplayer:
    """Charges each op as its event comes (:func:`microtorch.memory.numa.charge`), with the
    storage sizes and the threads seen so far; ``snapshot()`` is the report after event ``t``
    and the op events charged."""

    def __init__(self, events: list, affinity, policy, topology):
        from ..memory import numa

        self.events, self.t = events, -1
        self.topology, self.affinity = topology, affinity
        self.place = numa.placement_policy(policy)
        self.report = numa.NumaReport(getattr(self.place, "__name__", str(policy)))
        self.sizes: dict[int, int] = {}
        self.ops: list = []
        self.threads = {None: 0}  # the recording thread, then the others in order of appearance

    def apply(self, e) -> None:
        from ..memory import numa

        self.t += 1
        if "thread" in e:
            self.threads.setdefault(e["thread"], len(self.threads) % self.topology.nodes)
        if e["kind"] == "baseline":
            self.sizes.update((s["storage"], s["nbytes"]) for s in e["storages"])
        elif e["kind"] == "alloc":
            self.sizes[e["storage"]] = e["nbytes"]
        elif e["kind"] == "op":
            i = len(self.ops)
            node = self.threads[e.get("thread")] if self.affinity == "thread" else self.affinity(i, e)
            numa.charge(self.report, i, e, node, self.place, self.topology, self.sizes)
            self.ops.append(e)

    def snapshot(self):
        r = self.report
        report = type(r)(r.policy, dict(r.placement), list(r.op_ns), r.local_bytes, r.remote_bytes)
        return report, list(self.ops)


def numa_facts(trace, t: int | None = None, steps=None, *, affinity=None, policy="first_touch",
               topology=None) -> NumaFacts:
    """The model's placement and op costs for the ops up to ``t`` (no matplotlib), charged
    op by op by the trace's one replay (:class:`NumaReplayer`)."""
    from ..memory import numa
    from ..memory.workload import storage_sizes

    trace = as_trace(trace)
    t = clamp_step(trace, t)
    topology = topology or numa.Topology()
    replay = replay_of(trace)
    concern = NumaConcern(affinity or on_socket_0, policy, topology)
    if t >= 0:
        report, ops = replay.follow(concern, t)
    else:
        report, ops = concern(trace.events).snapshot()
    sizes = replay.facts("storage sizes", lambda: storage_sizes(trace))
    f = NumaFacts(t, step_label(trace, t, steps), report.policy, topology.nodes,
                  local_bytes=report.local_bytes, remote_bytes=report.remote_bytes)
    f.storages = [(s, sizes.get(s, 0), where) for s, where in report.placement.items()]
    for (step, op, node, ns), e in zip(report.op_ns, ops):
        remote = 0.0
        for s in [*(e.get("input_storages") or []), e.get("output_storage")]:
            if s is None:
                continue
            for mem, frac in report.placement[s].items():
                if mem != node:
                    remote += topology.access_ns(node, mem, int(sizes.get(s, 0) * frac))
        f.ops.append((step, op, node, ns, min(ns, remote)))
    return f


def facts_text(f: NumaFacts) -> str:
    total = f.local_bytes + f.remote_bytes
    lines = [f"NUMA model (simulated, {f.nodes} sockets, policy {f.policy}) at {f.when}: {len(f.ops)} op(s), "
             f"{f.total_ns / 1000:,.1f} µs modelled; {fmt_bytes(f.remote_bytes)} of {fmt_bytes(total)} "
             f"read or written remotely ({f.remote_bytes / total:.0%})." if total else
             f"NUMA model (simulated) at {f.when}: no op yet."]
    for s, nbytes, where in f.storages:
        lines.append(f"  storage #{s} ({fmt_bytes(nbytes)}): "
                     + ", ".join(f"{frac:.0%} on node {n}" for n, frac in sorted(where.items())))
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, **options) -> str:
    return facts_text(numa_facts(trace, t, steps, **options))


class NumaPainter(Painter):
    """The NUMA placement map of one trace under one affinity and policy."""

    def __init__(self, trace, *, affinity=None, policy="first_touch", topology=None,
                 width: float = DEFAULT_WIDTH):
        trace = as_trace(trace)
        super().__init__(trace, affinity=affinity, policy=policy, topology=topology)
        last = numa_facts(trace, None, affinity=affinity, policy=policy, topology=topology)
        self.order = [s for s, _, _ in last.storages]
        self.n_ops = max(1, len(last.ops))
        self.max_bytes = max((b for _, b, _ in last.storages), default=1) or 1
        self.max_ns = max((o[3] for o in last.ops), default=1.0) or 1.0
        self.fig = fig = new_figure(width, 1.8 + 0.22 * max(4, len(self.order)))
        self.left, self.right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
        self.left.set_ylim(len(self.order), 0)
        self.left.set_xlim(0, self.max_bytes)
        self.left.set_yticks([i + 0.5 for i in range(len(self.order))], [f"#{s}" for s in self.order])
        self.left.set_xlabel("bytes of the storage, by node")
        self.left.set_ylabel("storage")
        self.right.set_xlim(-0.5, self.n_ops - 0.5)
        self.right.set_ylim(0, self.max_ns * 1.1)
        self.right.set_xlabel("op (in order)")
        self.right.set_ylabel("modelled time (ns)")
        from matplotlib.patches import Patch
        handles = [Patch(color=self._colour(n), label=f"node {n}") for n in range(last.nodes)]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="remote part"))
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
        self.title = fig.suptitle("")
        fig.subplots_adjust(left=0.1, right=0.98, top=0.88, bottom=0.22, wspace=0.3)

    @staticmethod
    def _colour(node: int) -> str:
        return palette.OKABE_ITO[NODE_COLORS[node % len(NODE_COLORS)]]

    def facts(self, t, steps=None):
        return numa_facts(self.trace, t, steps, **self.options)

    def update(self, f: NumaFacts) -> None:
        for a in self.dynamic:
            a.remove()
        self.dynamic = [self.title]
        rows = {s: i for i, s in enumerate(self.order)}
        for s, nbytes, where in f.storages:
            x = 0.0
            for node, frac in sorted(where.items()):
                self.dynamic.append(self.left.barh(rows[s] + 0.5, nbytes * frac, left=x, height=0.7,
                                                   color=self._colour(node))[0])
                x += nbytes * frac
        for i, (_, _, node, ns, remote) in enumerate(f.ops):
            self.dynamic.append(self.right.bar(i, ns, width=0.8, color=self._colour(node))[0])
            if remote:
                self.dynamic.append(self.right.bar(i, remote, width=0.8, facecolor="none", edgecolor="black",
                                                   hatch="//", linewidth=0)[0])
        total = f.local_bytes + f.remote_bytes
        self.title.set_text(f"NUMA placement (a model, not measured): {f.policy}, "
                            f"{f.remote_bytes / total if total else 0:.0%} remote bytes, "
                            f"{f.total_ns / 1000:,.1f} µs ({f.when})")

    def text(self, f: NumaFacts) -> str:
        return facts_text(f)


def render(trace, t: int | None = None, steps=None, *, affinity=None, policy="first_touch", topology=None,
           width: float = DEFAULT_WIDTH):
    """The NUMA placement map at ``t`` (``None``: the end)."""
    return NumaPainter(trace, affinity=affinity, policy=policy, topology=topology, width=width).draw(t, steps)
