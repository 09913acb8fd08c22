"""The liveness equations solved by iteration, one block update at a time (Graphviz).

The control-flow graph of a program: one box per basic block with its statements,
``use``/``def``, and the ``live_in``/``live_out`` sets as they stand after update ``k`` of
the iteration (``program.liveness().history[k]``). The block just updated is outlined
thick; if its sets changed, the new members are marked with ``+``. The title says the pass
number and whether the pass has changed anything yet — the last pass changes nothing,
which is the proof the fixed point is reached.

``render(program, k)`` → :class:`~microtorch.viz.dot.GraphPicture`; ``describe(program, k)``
the same in words; ``k`` counts updates from 0 (``-1``: the last).
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from . import palette
from .dot import GraphPicture


@dataclass
class FixedPointFacts:
    k: int
    n_updates: int
    iteration: int
    iterations: int
    block: str
    changed: bool
    live_in: dict  # block -> sorted list, after this update
    live_out: dict
    added_in: dict  # block -> members new in this update
    added_out: dict


def fixed_point_facts(program, k: int = -1) -> FixedPointFacts:
    lv = program.liveness()
    hist = lv.history
    n = len(hist)
    k = max(0, min(k if k >= 0 else n + k, n - 1))
    u = hist[k]
    before = hist[k - 1] if k else None
    order = list(program.buffers)
    srt = lambda s: sorted(s, key=order.index)  # noqa: E731
    empty = frozenset()
    added_in = {b: srt(u.live_in[b] - (before.live_in[b] if before else empty)) for b in u.live_in}
    added_out = {b: srt(u.live_out[b] - (before.live_out[b] if before else empty)) for b in u.live_out}
    return FixedPointFacts(k, n, u.iteration, lv.iterations, u.block, u.changed,
                           {b: srt(s) for b, s in u.live_in.items()}, {b: srt(s) for b, s in u.live_out.items()},
                           added_in, added_out)


def facts_text(f: FixedPointFacts, program) -> str:
    lv = program.liveness()
    s = lambda xs: "{" + ", ".join(xs) + "}"  # noqa: E731
    last = " — the last pass: nothing changes, so this is the fixed point" if f.iteration == f.iterations else ""
    lines = [f"Update {f.k + 1} of {f.n_updates}: pass {f.iteration} of {f.iterations}, block {f.block} "
             f"{'changed' if f.changed else 'did not change'}{last}."]
    for b in program.blocks:
        mark = "  ← updated now" if b.name == f.block else ""
        lines.append(f"  {b.name} (→ {', '.join(b.successors) or 'the program end'}): use {s(sorted(lv.block_use[b.name]))}, "
                     f"def {s(sorted(lv.block_def[b.name]))}, live_in {s(f.live_in[b.name])}, "
                     f"live_out {s(f.live_out[b.name])}{mark}")
    return "\n".join(lines)


def describe(program, k: int = -1) -> str:
    return facts_text(fixed_point_facts(program, k), program)


def _set(xs, added) -> str:
    return "{" + ", ".join(f"<B>+{html.escape(x)}</B>" if x in added else html.escape(x) for x in xs) + "}"


def render(program, k: int = -1) -> GraphPicture:
    f = fixed_point_facts(program, k)
    lv = program.liveness()
    lines = ["digraph cfg {", '  rankdir=TB; node [shape=plaintext, fontname="Helvetica", fontsize=10];',
             '  edge [color="#555555", fontname="Helvetica", fontsize=9];',
             f'  labelloc=t; fontname="Helvetica"; fontsize=12; label=<<B>Liveness by iteration: pass '
             f'{f.iteration} of {f.iterations}, update {f.k + 1} of {f.n_updates}</B><BR/>'
             f'{"the last pass changes nothing: fixed point" if f.iteration == f.iterations else "live_in[b] = use[b] ∪ (live_out[b] − def[b]),  live_out[b] = ∪ live_in[s]"}>;']
    for b in program.blocks:
        now = b.name == f.block
        border = palette.color("ready") if now else "#777777"
        fill = palette.fill("highlight") if now else "#FFFFFF"
        body = "".join(f'<TR><TD ALIGN="LEFT">{html.escape(program.instructions[i].text)}</TD></TR>'
                       for i in b.instructions) or '<TR><TD ALIGN="LEFT"><I>(empty)</I></TD></TR>'
        use = html.escape("{" + ", ".join(sorted(lv.block_use[b.name])) + "}")
        dfn = html.escape("{" + ", ".join(sorted(lv.block_def[b.name])) + "}")
        label = (f'<<TABLE BORDER="{3 if now else 1}" COLOR="{border}" CELLBORDER="0" CELLSPACING="0" '
                 f'CELLPADDING="3" BGCOLOR="{fill}">'
                 f'<TR><TD ALIGN="LEFT">live_in = {_set(f.live_in[b.name], f.added_in[b.name])}</TD></TR>'
                 f'<TR><TD ALIGN="LEFT"><B>{html.escape(b.name)}</B>{"  (updated now)" if now else ""}'
                 f'  use {use}  def {dfn}</TD></TR>{body}'
                 f'<TR><TD ALIGN="LEFT">live_out = {_set(f.live_out[b.name], f.added_out[b.name])}</TD></TR>'
                 '</TABLE>>')
        lines.append(f'  "{b.name}" [label={label}];')
    exits = [b.name for b in program.blocks if not b.successors]
    for b in program.blocks:
        for s in b.successors:
            back = program.blocks.index(program.block_of[s]) <= program.blocks.index(b)
            lines.append(f'  "{b.name}" -> "{s}"' + (' [style=dashed, constraint=false, label=" back edge"]'
                                                     if back else "") + ";")
    if exits:
        outs = html.escape("{" + ", ".join(sorted(program.outputs)) + "}")
        lines.append(f'  "(exit)" [shape=ellipse, label="exit\\noutputs {outs}"];')
        lines += [f'  "{b}" -> "(exit)";' for b in exits]
    lines.append("}")
    return GraphPicture("\n".join(lines), facts_text(f, program),
                        f"Liveness by iteration: update {f.k + 1} of {f.n_updates}")
