"""The conflict (interference) graph of a program's planned buffers (Graphviz).

One node per planned buffer, labelled with its name and size; an edge between two buffers
live at the same instruction (they may not share bytes). Given a plan, nodes are filled by
slot: for ``coloring`` the colour class (buffers of one colour share one slot), for the
other strategies the plan's distinct offsets — buffers at the same offset reuse the same
bytes at different times. Colours come from the colour-blind-safe cycle, and every node
also says its slot and offset in words (colour is never the only cue).

``render(program_or_plan)`` → :class:`~microtorch.viz.dot.GraphPicture`; ``describe`` the text.
Big graphs: only the ``max_nodes`` largest buffers are drawn (the text says how many are left out).
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from . import palette
from .dot import GraphPicture

MAX_NODES = 40


@dataclass
class ConflictFacts:
    nodes: list  # (buffer, label, size, slot or None, offset or None)
    edges: list
    n_slots: int | None
    strategy: str | None
    hidden: int


def conflict_facts(source, max_nodes: int = MAX_NODES) -> ConflictFacts:
    plan = source if hasattr(source, "offsets") else None
    program = plan.program if plan is not None else source
    g = program.conflict_graph()
    keep = sorted(g.nodes, key=lambda x: -g.sizes[x])[:max_nodes]
    keep = [x for x in g.nodes if x in set(keep)]
    slots = None
    if plan is not None:
        if plan.slots is not None:
            slots = dict(plan.slots)
        else:
            distinct = sorted(set(plan.offsets.values()))
            slots = {x: distinct.index(o) for x, o in plan.offsets.items()}
    b = program.buffers
    nodes = [(x, b[x].label, g.sizes[x], slots[x] if slots else None, plan.offsets[x] if plan else None) for x in keep]
    ks = set(keep)
    edges = [(x, y) for x, y in g.edges if x in ks and y in ks]
    return ConflictFacts(nodes, edges, len(set(slots.values())) if slots else None,
                         plan.strategy if plan else None, len(g.nodes) - len(keep))


def facts_text(f: ConflictFacts) -> str:
    head = f"Conflict graph: {len(f.nodes)} buffers, {len(f.edges)} conflicts"
    if f.strategy:
        head += f"; {f.strategy} puts them in {f.n_slots} slot(s) (buffers in one slot reuse the same bytes)"
    lines = [head]
    adj: dict = {x: [] for x, *_ in f.nodes}
    for x, y in f.edges:
        adj[x].append(y)
        adj[y].append(x)
    for x, label, size, slot, offset in f.nodes:
        where = f", slot {slot} at offset {offset:,}" if slot is not None else ""
        lines.append(f"  {label}: {size:,} B{where}; conflicts with {', '.join(adj[x]) or 'nothing'}")
    if f.hidden:
        lines.append(f"  ... {f.hidden} smaller buffers not drawn")
    return "\n".join(lines)


def describe(source, **options) -> str:
    return facts_text(conflict_facts(source, **options))


def render(source, *, max_nodes: int = MAX_NODES) -> GraphPicture:
    """The conflict graph of a program, or of a plan's program coloured by the plan's slots."""
    f = conflict_facts(source, max_nodes)
    title = ("Conflict graph" + (f": {f.strategy}, {f.n_slots} slots" if f.strategy else "")
             + f" ({len(f.nodes)} buffers, {len(f.edges)} conflicts)")
    lines = ["graph conflicts {", '  layout=neato; overlap=false; splines=true; sep="+6";',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=9];',
             '  edge [color="#888888"];',
             f'  labelloc=t; fontname="Helvetica"; fontsize=12; label="{html.escape(title)}";']
    for x, label, size, slot, offset in f.nodes:
        if slot is None:
            fill, border, extra = "#FFFFFF", "#555555", ""
        else:
            c = palette.CYCLE[slot % len(palette.CYCLE)]
            fill, border = palette.tint(c, 0.55), c
            extra = f"\\nslot {slot} @ {offset:,}"
        text = html.escape(label[:28]).replace('"', "'")
        lines.append(f'  "{x}" [label="{text}\\n{size:,} B{extra}", fillcolor="{fill}", color="{border}", '
                     f'penwidth={2 if slot is not None else 1}];')
    lines += [f'  "{x}" -- "{y}";' for x, y in f.edges]
    lines.append("}")
    return GraphPicture("\n".join(lines), facts_text(f), title)
