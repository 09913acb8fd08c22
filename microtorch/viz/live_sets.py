"""Liveness of a program at one instruction: every buffer's live ranges, and the sets there.

One row per buffer (planned buffers first, then external ones, faded), a bar for each run
of instructions it occupies (:meth:`~microtorch.planning.Program.segments`), the row
height by size. A vertical cursor marks instruction ``i``; the bars of ``live_in[i]`` are
drawn solid, a ``▲`` marks the buffers ``i`` defines and a ``●`` those it uses. Below the
chart: ``use``, ``def``, ``live_in`` and ``live_out`` of ``i`` in words — the equation
``live_in[i] = use[i] ∪ (live_out[i] − def[i])`` with the sets filled in.

``render(program, i)`` → :class:`~microtorch.viz.figure.PanelFigure` with ``.facts``
(:class:`LiveSetsFacts`); ``describe(program, i)`` is the text alone. A pure function of
the program and ``i``: the analysis comes from ``program.liveness()``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import palette
from .figure import DEFAULT_WIDTH, label_margin, new_figure

MAX_ROWS = 48
_KIND = {"activation": "activation", "gradient": "gradient", "parameter": "parameter", "input": "data",
         "temporary": "highlight"}


@dataclass
class LiveSetsFacts:
    i: int
    instruction: str
    rows: list  # (buffer, label, kind, external, [(first, last), ...], nbytes)
    use: list
    defs: list
    live_in: list
    live_out: list
    live_bytes: int  # planned bytes occupying i
    lower_bound: int
    hidden: int  # buffers not drawn (over max_rows)


def live_sets_facts(program, i: int = 0, *, max_rows: int = MAX_ROWS) -> LiveSetsFacts:
    n = len(program.instructions)
    if n == 0:
        raise ValueError("the program has no instructions")
    i = max(0, min(int(i) if i >= 0 else n + int(i), n - 1))
    lv = program.liveness()
    runs = program.segments()
    names = [x for x in program.buffers if x in runs]
    order = sorted(names, key=lambda x: (program.buffers[x].external, runs[x][0][0]))
    occ = lv.live_in[i] | lv.defs[i]
    keep = order[:max_rows]
    if len(order) > max_rows:  # keep what is live at i in view
        keep = [x for x in order if x in occ][:max_rows]
        keep += [x for x in order if x not in occ][:max_rows - len(keep)]
        keep = [x for x in order if x in keep]
    b = program.buffers
    rows = [(x, b[x].label, b[x].kind, b[x].external, runs[x], b[x].nbytes) for x in keep]
    planned = set(program.planned)
    sort = lambda s: sorted(s, key=lambda x: list(program.buffers).index(x))  # noqa: E731
    return LiveSetsFacts(i, program.instructions[i].text, rows, sort(lv.use[i]), sort(lv.defs[i]),
                         sort(lv.live_in[i]), sort(lv.live_out[i]),
                         sum(b[x].size for x in occ if x in planned), program.lower_bound(), len(order) - len(keep))


def facts_text(f: LiveSetsFacts) -> str:
    s = lambda xs: "{" + ", ".join(xs) + "}"  # noqa: E731
    lines = [f"Instruction {f.i}: {f.instruction}",
             f"  use = {s(f.use)}   def = {s(f.defs)}",
             f"  live_out = {s(f.live_out)}",
             f"  live_in = use ∪ (live_out − def) = {s(f.live_in)}",
             f"  planned bytes occupying it: {f.live_bytes:,} (the most at any instruction, the lower bound: "
             f"{f.lower_bound:,})"]
    for x, label, kind, ext, runs, nbytes in f.rows:
        ranges = ", ".join(f"[{a}, {b}]" for a, b in runs)
        lines.append(f"  {label}: {nbytes:,} B {kind}{' (external: not planned)' if ext else ''}, live {ranges}")
    if f.hidden:
        lines.append(f"  ... and {f.hidden} more buffers not drawn")
    return "\n".join(lines)


def describe(program, i: int = 0, **options) -> str:
    return facts_text(live_sets_facts(program, i, **options))


def render(program, i: int = 0, *, max_rows: int = MAX_ROWS, width: float = DEFAULT_WIDTH):
    """Live ranges of every buffer with the sets at instruction ``i``."""
    f = live_sets_facts(program, i, max_rows=max_rows)
    n = len(program.instructions)
    rows = max(1, len(f.rows))
    fig = new_figure(width, 1.8 + 0.24 * rows)
    h = fig.get_figheight()
    left = label_margin([r[1] for r in f.rows], 8, width, lo=0.12)
    # inches, not fractions, for the margins: the title rows and the x label keep their room
    ax = fig.add_axes((left, 0.5 / h, 0.97 - left, 1 - 1.25 / h))
    biggest = max((r[5] for r in f.rows), default=1) or 1
    live_in, defs, uses = set(f.live_in), set(f.defs), set(f.use)
    for k, (x, label, kind, ext, runs, nbytes) in enumerate(f.rows):
        h = 0.3 + 0.6 * math.sqrt(nbytes / biggest) if nbytes else 0.3
        pk = _KIND.get(kind, "unknown")
        solid = x in live_in or x in defs
        for a, b in runs:
            ax.broken_barh([(a - 0.4, b - a + 0.8)], (k + 0.5 - h / 2, h), facecolors=palette.fill(pk),
                           edgecolors=palette.color(pk), linewidth=1.2 if solid else 0.5,
                           alpha=1.0 if solid else (0.25 if ext else 0.45), hatch=palette.hatch(pk) or None,
                           gid=f"run-{x}")
        if x in defs:
            ax.plot([f.i], [k + 0.5], marker="^", color="black", markersize=6, linestyle="none")
        if x in uses:
            ax.plot([f.i + 0.25], [k + 0.5], marker="o", color=palette.color("ready"), markersize=5,
                    linestyle="none")
    ax.axvline(f.i, color="black", linewidth=1.2)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(rows, 0)
    ax.set_yticks([k + 0.5 for k in range(len(f.rows))], [r[1] for r in f.rows], fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    s = lambda xs: "{" + ", ".join(xs[:6]) + (", …" if len(xs) > 6 else "") + "}"  # noqa: E731
    ax.set_title(f"live_in = {s(f.live_in)}    live_out = {s(f.live_out)}", fontsize=9, loc="left",
                 fontweight="normal")
    ax.set_xlabel("instruction (program order →) · solid: occupies the instruction at the cursor · ▲ def · ● use")
    fig.suptitle(f"Liveness at instruction {f.i}: {f.instruction[:60]}", fontsize=11, fontweight="bold")
    fig.facts, fig.description = f, facts_text(f)
    return fig
