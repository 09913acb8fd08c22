"""The graph picture in words: :func:`describe`, and the labels and status lines the DOT
picture shares with it.

The shared words are this module's public interface, used by :mod:`.graph_dot` so the
picture and its text description never disagree: :func:`shape_text`, :func:`dtype_text`,
:func:`grad_text` (a leaf's gradient), :func:`status_text` (a node's status in backward),
:func:`saved_text` (what an op saved), :func:`group_text` (a collapsed group),
:func:`summary_text` (where backward stands), :func:`headline_text` (the latest change) and
:func:`is_graph_event`.
"""
from __future__ import annotations

from collections import Counter

from .events import describe_event, events_of, index, step_label
from .graph_collapse import MAX_NODES, Group, collapse
from .graph_state import GraphState, graph_state

NOT_COMPUTED = "gradients not computed yet (call .backward())"


def shape_text(shape) -> str:
    """A shape in words: ``[2, 3]``, ``[] (scalar)``."""
    return f"{list(shape)}" + (" (scalar)" if len(shape) == 0 else "")


def dtype_text(dtype: str | None) -> str:
    """`` float64`` after a shape, nothing for the default float32."""
    return "" if dtype in (None, "float32") else f" {dtype}"


def grad_text(s: GraphState, tid: int) -> str:
    """A leaf's gradient at this step: a parameter's ``.grad`` (norm) or that it has none yet."""
    if s.leaves.get(tid) != "parameter":
        return "no grad (constant)" if s.leaves.get(tid) == "constant" else ""
    g = s.grads.get(tid)
    if g is not None:
        times = f", accumulated {g['count']}×" if g["count"] > 1 else ""
        return f"grad {shape_text(g['shape'])}, norm {g['norm']:.4g}{times}"
    if s.backward is None:
        return "grad: not computed yet"
    return "grad: not arrived yet"


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def status_text(s: GraphState, nid: int) -> str:
    """A node's status in backward: waiting on how many, ready, ran (in which order), released."""
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


def summary_text(s: GraphState) -> str:
    """One line: where backward stands."""
    bw = s.backward
    if bw is None:
        return NOT_COMPUTED[0].upper() + NOT_COMPUTED[1:]
    total = len([n for n in s.ops if s.status(n) != "forward"])
    ran = len(bw["done"])
    later = [n for n in s.ops if s.status(n) == "forward"]
    rerun = [n for n in later if s.ops[n].get("phase") == "recompute"]  # a checkpoint's rerun in backward
    later = [n for n in later if n not in rerun]
    tail = (f"; {len(later)} op(s) recorded since: their gradients are not computed yet"
            if later else "")
    if rerun:
        tail += (f"; {len(rerun)} op(s) rerun by a checkpoint's recomputation (the original nodes "
                 "use their results)")
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
    lines = [f"Computation graph at {step_label(trace, s.t, steps)}: {headline_text(trace, s)}",
             summary_text(s) + "."]
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
            extra = grad_text(s, tid)
            lines.append(f"  {name(tid)} {shape_text(e.get('shape', []))}{dtype_text(e.get('dtype'))}: {what}"
                         + (f"; {extra}" if extra and kind == "parameter" else ""))
    if s.ops:
        lines.append("Ops (in the order they ran):")
        shown_groups = set()
        for nid, e in s.ops.items():
            g = in_group.get(nid)
            if g is not None:
                if g.gid not in shown_groups:
                    shown_groups.add(g.gid)
                    lines.append("  " + group_text(s, g).replace("\n", "; "))
                continue
            args = ", ".join(name(x) for x in e["inputs"])
            line = f"  node {nid}: {e['op']}({args}) -> {shape_text(e['shape'])}{dtype_text(e.get('dtype'))}"
            st = status_text(s, nid)
            if st:
                line += f"; {st}"
            if show_saved:
                line += f"; {saved_text(s, ix, e)}"
            lines.append(line)
    if s.outputs:
        lines.append("Outputs (results no recorded op used): " + ", ".join(
            f"{name(tid)} {shape_text(s.ops[s.producer[tid]]['shape'])}" for tid in s.outputs))
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


def saved_text(s: GraphState, ix, e: dict) -> str:
    """What the op event ``e`` saved for backward, tensors named as at this step."""
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


def group_text(s: GraphState, g: Group) -> str:
    """A collapsed group of nodes in words: how many of each op, and their status."""
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


def is_graph_event(e: dict) -> bool:
    """Whether event ``e`` changes the graph picture (an op with a node, or a backward event)."""
    return e["kind"] in ("backward", "node_run", "grad", "release") or (
        e["kind"] == "op" and e.get("phase") != "backward")


def headline_text(trace, s: GraphState) -> str:
    """What the graph's latest change was: event ``t`` itself if it is a graph event (an op,
    a backward step, a gradient, a release), else the latest graph event before it."""
    if s.t < 0:
        return "nothing recorded yet"
    events = events_of(trace)
    if is_graph_event(events[s.t]):
        return describe_event(trace, s.t)
    j = next((i for i in range(s.t, -1, -1) if is_graph_event(events[i])), None)
    if j is None:
        return f"the graph is still empty (event {s.t}: {describe_event(trace, s.t)})"
    return f"last change to the graph, at event {j}: {describe_event(trace, j)}"
