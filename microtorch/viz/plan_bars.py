"""Bytes each plan needs, side by side: naive, every strategy, the lower bound, and what the
engine really used (the pool's peak, the step arena's high-water mark).

``measure(program, measured={"pool peak": ..., "step arena high water": ...})`` collects
the numbers (planning with every strategy that can run: ``optimal`` only for small
programs with OR-Tools installed); ``render(numbers)`` draws them as horizontal bars,
the lower bound as a vertical line, each bar labelled with its bytes and its ratio to the
bound. ``render`` → :class:`~microtorch.viz.figure.PanelFigure` with ``.facts``
(:class:`BarsFacts`); ``describe(numbers)`` the text.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..planning import STRATEGIES, plan
from . import palette
from .figure import DEFAULT_WIDTH, byte_ticks, new_figure

LOWER = "lower bound"


def measure(program, measured: dict | None = None, strategies=None) -> dict:
    """``{name: bytes}``: each strategy's ``arena_bytes``, the lower bound, and ``measured``."""
    out = {}
    for s in strategies or STRATEGIES:
        if s == "optimal" and len(program.planned) > 40:
            continue
        try:
            out[s] = plan(program, s).arena_bytes
        except ImportError:
            continue  # optimal without OR-Tools
    out[LOWER] = program.lower_bound()
    out.update(measured or {})
    return out


@dataclass
class BarsFacts:
    bars: list  # (name, bytes, ratio to the lower bound, group: "plan", "bound" or "measured")
    lower_bound: int


def bars_facts(numbers: dict) -> BarsFacts:
    if LOWER not in numbers:
        raise ValueError(f"the numbers need a {LOWER!r} entry (use plan_bars.measure(program))")
    lb = numbers[LOWER]
    bars = []
    for name, v in numbers.items():
        group = "bound" if name == LOWER else "plan" if name in STRATEGIES else "measured"
        bars.append((name, int(v), v / lb if lb else 1.0, group))
    return BarsFacts(bars, lb)


def facts_text(f: BarsFacts) -> str:
    lines = [f"Bytes for the step's activations (lower bound {f.lower_bound:,} B):"]
    for name, v, r, group in f.bars:
        what = {"plan": "plan", "bound": "no plan can use less", "measured": "measured by the engine"}[group]
        lines.append(f"  {name}: {v:,} B = {r:.3f}× the bound ({what})")
    return "\n".join(lines)


def describe(numbers: dict) -> str:
    return facts_text(bars_facts(numbers))


def render(numbers: dict, *, width: float = DEFAULT_WIDTH, title: str = "Memory plans against the lower bound"):
    f = bars_facts(numbers)
    fig = new_figure(width, 1.4 + 0.38 * len(f.bars))
    ax = fig.add_axes((0.24, 0.14, 0.72, 0.74))
    style = {"plan": "activation", "bound": "done", "measured": "data"}
    top = max(v for _, v, _, _ in f.bars) * 1.25 or 1
    for k, (name, v, r, group) in enumerate(f.bars):
        kind = style[group]
        ax.barh(k, v, color=palette.fill(kind), edgecolor=palette.color(kind), hatch=palette.hatch(kind) or None,
                gid=f"bar-{name}")
        ax.text(v + top * 0.01, k, f"{v:,} B  ({r:.2f}×)", va="center", fontsize=8.5)
    ax.axvline(f.lower_bound, color=palette.color("done"), linestyle="--", linewidth=1.3)
    ax.set_yticks(range(len(f.bars)), [name for name, *_ in f.bars], fontsize=9)
    ax.set_ylim(len(f.bars) - 0.5, -0.5)
    ax.set_xlim(0, top)
    ax.set_xticks(*byte_ticks(top, 5))
    ax.set_xlabel("bytes (dashed line: the lower bound)")
    ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle(title, fontsize=11, fontweight="bold")
    fig.facts, fig.description = f, facts_text(f)
    return fig
