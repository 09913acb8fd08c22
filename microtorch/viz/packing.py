"""The packing picture: a plan drawn as rectangles in time × address.

Each planned buffer is a rectangle: across, the instructions it is live (its interval);
up, the bytes it occupies in the arena (``[offset, offset + size)``). A valid plan is
rectangles that never overlap. Two horizontal lines: the **lower bound** (the most bytes
live at one instruction — no plan can go below it) and the plan's ``arena_bytes``.

``render(plan, k)`` draws the first ``k`` buffers in the order the planner placed them
(``plan.order``), the ``k``-th outlined — step ``k`` with a player to watch greedy-by-size
put the big ones first and fill the gaps after. ``k=None``: all of them.
``render`` → :class:`~microtorch.viz.figure.PanelFigure` with ``.facts``
(:class:`PackingFacts`); ``describe(plan, k)`` the text.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import palette
from .figure import DEFAULT_WIDTH, byte_ticks, new_figure

_KIND = {"activation": "activation", "gradient": "gradient", "temporary": "highlight", "input": "data",
         "parameter": "parameter"}


@dataclass
class PackingFacts:
    strategy: str
    k: int  # buffers placed so far
    n: int
    rects: list  # (buffer, label, kind, first, last, offset, size), in placement order
    current: str | None  # the buffer placed at step k
    top: int  # highest byte reached by the placed buffers
    arena_bytes: int
    lower_bound: int
    n_instructions: int


def packing_facts(plan, k: int | None = None) -> PackingFacts:
    prog = plan.program
    order = plan.order or sorted(plan.offsets, key=lambda x: plan.offsets[x])
    n = len(order)
    k = n if k is None else max(0, min(k if k >= 0 else n + 1 + k, n))
    iv = prog.intervals()
    b = prog.buffers
    rects = [(x, b[x].label, b[x].kind, iv[x].first, iv[x].last, plan.offsets[x], b[x].size) for x in order[:k]]
    top = max((r[5] + r[6] for r in rects), default=0)
    return PackingFacts(plan.strategy, k, n, rects, order[k - 1] if k else None, top, plan.arena_bytes,
                        prog.lower_bound(), len(prog.instructions))


def facts_text(f: PackingFacts) -> str:
    lines = [f"{f.strategy}: {f.k} of {f.n} buffers placed, reaching {f.top:,} B; the whole plan needs "
             f"{f.arena_bytes:,} B, the lower bound is {f.lower_bound:,} B "
             f"({f.arena_bytes / f.lower_bound if f.lower_bound else 1:.3f}×)."]
    for x, label, kind, first, last, offset, size in f.rects:
        now = "  ← placed now" if x == f.current else ""
        lines.append(f"  {label}: {size:,} B at [{offset:,}, {offset + size:,}), live [{first}, {last}]{now}")
    return "\n".join(lines)


def describe(plan, k: int | None = None) -> str:
    return facts_text(packing_facts(plan, k))


def render(plan, k: int | None = None, *, width: float = DEFAULT_WIDTH):
    f = packing_facts(plan, k)
    fig = new_figure(width, 4.6)
    ax = fig.add_axes((0.11, 0.2, 0.86, 0.66))
    for x, label, kind, first, last, offset, size in f.rects:
        pk = _KIND.get(kind, "unknown")
        now = x == f.current
        ax.broken_barh([(first - 0.45, last - first + 0.9)], (offset, size), facecolors=palette.fill(pk),
                       edgecolors="black" if now else palette.color(pk), linewidth=2.0 if now else 0.6,
                       hatch=palette.hatch(pk) or None, gid=f"buffer-{x}")
    top = max(f.arena_bytes, f.lower_bound, 1) * 1.12
    ax.axhline(f.lower_bound, color=palette.color("done"), linestyle="--", linewidth=1.4,
               label=f"lower bound {f.lower_bound:,} B")
    ax.axhline(f.arena_bytes, color=palette.color("ready"), linestyle="-", linewidth=1.2,
               label=f"{f.strategy} arena {f.arena_bytes:,} B")
    ax.set_xlim(-0.6, max(f.n_instructions, 1) - 0.4)
    ax.set_ylim(0, top)
    ax.set_yticks(*byte_ticks(top, 6))
    ax.set_xlabel("instruction (time →)")
    ax.set_ylabel("arena offset (bytes)")
    ax.spines[["top", "right"]].set_visible(False)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8.5, frameon=False)
    now = f" · placing {f.rects[-1][1][:40]}" if f.current else ""
    ax.set_title(f"{f.k} of {f.n} buffers placed{now}", fontsize=9.5, loc="left", fontweight="normal")
    fig.suptitle(f"Packing: {f.strategy}, {f.arena_bytes:,} B for a lower bound of {f.lower_bound:,} B",
                 fontsize=11, fontweight="bold")
    fig.facts, fig.description = f, facts_text(f)
    return fig
