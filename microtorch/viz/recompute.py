"""Recomputation pictures: the memory/time frontier, and a schedule on the chain with its live bytes.

* :func:`render_frontier` — the trade-off of checkpointing one chain: for each memory budget,
  the optimal schedule's predicted peak and step time (the frontier, a step curve), the
  no-checkpoint and √n schedules as points, and measured points (the allocator's peak and
  the clock's step time) next to the predicted ones.
* :func:`render_schedule` — one schedule: the chain's layers as a row of boxes (kept /
  recomputed, each segment bracketed, the tensors a checkpoint keeps marked ▼), and below
  it the live bytes over one recorded step — before (no checkpoints) and after (this
  schedule), with the budget, the predicted peak, and the recompute spans from the trace's
  ``recompute`` events.
* :func:`budget_player` — a slider over budgets that redraws :func:`render_schedule`.

Pure functions of schedules (:class:`~microtorch.utils.checkpoint.Schedule`) and recorded
traces: nothing here runs the engine. ``.facts`` of each figure holds what it draws.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from ..utils.checkpoint import min_peak, no_checkpoint, optimal, sqrt_n
from . import palette
from .figure import DEFAULT_WIDTH, byte_ticks, new_figure
from .timeline import fmt_bytes

METHOD_STYLE = {  # marker and Okabe–Ito colour per schedule family
    "none": ("o", palette.OKABE_ITO["blue"]),
    "√n": ("s", palette.OKABE_ITO["orange"]),
    "optimal": ("D", palette.OKABE_ITO["bluish_green"]),
}
AFTER = palette.OKABE_ITO["bluish_green"]


# --------------------------------------------------------------------------------------------
# the frontier
# --------------------------------------------------------------------------------------------
@dataclass
class FrontierFacts:
    unit: str  # of the times ("s", "FLOPs", "units")
    curve: list  # (budget, predicted peak, predicted time) of the optimal schedule, by budget
    points: dict  # method -> (predicted peak, predicted time)
    measured: dict  # method -> [(peak bytes, time)]
    infeasible_below: float  # the smallest budget any schedule fits


def frontier_facts(chain, budgets=None, measured=None, points=None) -> FrontierFacts:
    """The frontier's numbers: ``budgets`` (default: 24 from the least feasible peak to the
    plain run's peak), the optimal schedule at each; ``points``: method -> Schedule
    (default none and √n); ``measured``: method -> list of ``{"peak_bytes", "time"}`` dicts
    or ``(peak, time)`` pairs."""
    floor = min_peak(chain)
    plain = no_checkpoint(chain)
    if budgets is None:
        budgets = np.linspace(floor, plain.peak, 24)
    curve = []
    for b in budgets:
        s = optimal(chain, b)
        if s is not None:
            curve.append((float(b), float(s.peak), float(s.time)))
    points = points or {"none": plain, "√n": sqrt_n(chain)}
    pts = {k: (float(s.peak), float(s.time)) for k, s in points.items()}
    meas = {}
    for k, items in (measured or {}).items():
        meas[k] = [(float(m["peak_bytes"]), float(m["time"])) if isinstance(m, dict) else (float(m[0]), float(m[1]))
                   for m in items]
    return FrontierFacts(chain.unit, curve, pts, meas, float(floor))


def frontier_text(f: FrontierFacts) -> str:
    lines = [f"Memory/time frontier: {len(f.curve)} budgets from {fmt_bytes(f.infeasible_below)} "
             "(below it no schedule fits) up."]
    if f.curve:
        lo, hi = f.curve[0], f.curve[-1]
        lines.append(f"Optimal schedule: at {fmt_bytes(lo[0])} it peaks at {fmt_bytes(lo[1])} and takes "
                     f"{_t(lo[2], f.unit)}; at {fmt_bytes(hi[0])}, {fmt_bytes(hi[1])} and {_t(hi[2], f.unit)}.")
    for k, (p, t) in f.points.items():
        lines.append(f"{k}: predicted peak {fmt_bytes(p)}, time {_t(t, f.unit)}.")
    for k, items in f.measured.items():
        for p, t in items:
            lines.append(f"{k} measured: peak {fmt_bytes(p)}, time {_t(t, 's')}.")
    return "\n".join(lines)


def describe_frontier(chain, budgets=None, measured=None, points=None) -> str:
    return frontier_text(frontier_facts(chain, budgets, measured, points))


def render_frontier(chain, budgets=None, measured=None, points=None, width: float = DEFAULT_WIDTH):
    """The frontier as a figure (``.facts``: :class:`FrontierFacts`). Predicted values are
    hollow markers and the line; measured ones filled markers of the same shape."""
    f = frontier_facts(chain, budgets, measured, points)
    fig = new_figure(width, 4.8)
    ax = fig.add_axes((0.1, 0.3, 0.86, 0.6))
    scale, unit = _time_scale(f)
    if f.curve:
        peaks = [c[1] for c in f.curve]
        times = [c[2] * scale for c in f.curve]
        ax.step(peaks, times, where="post", color=METHOD_STYLE["optimal"][1], linewidth=1.6,
                label="optimal, predicted (a point per budget)", gid="frontier-curve")
        ax.plot(peaks, times, marker=METHOD_STYLE["optimal"][0], markersize=4, linestyle="none",
                markerfacecolor="white", color=METHOD_STYLE["optimal"][1])
    for k, (p, t) in f.points.items():
        marker, colour = METHOD_STYLE.get(k, ("^", palette.OKABE_ITO["grey"]))
        ax.plot([p], [t * scale], marker=marker, markersize=9, linestyle="none", markerfacecolor="white",
                markeredgewidth=1.8, color=colour, label=f"{k}, predicted", gid=f"frontier-{k}")
    for k, items in f.measured.items():
        marker, colour = METHOD_STYLE.get(k, ("^", palette.OKABE_ITO["grey"]))
        if items:
            ax.plot([p for p, _ in items], [t * 1e3 for _, t in items], marker=marker,
                    markersize=8, linestyle="none", color=colour, label=f"{k}, measured (ms)",
                    gid=f"frontier-measured-{k}")
    ax.axvline(f.infeasible_below, color=palette.color("dead"), linestyle=":", linewidth=1.2)
    ax.annotate("no schedule fits\nbelow this", (f.infeasible_below, 0), xycoords=("data", "axes fraction"),
                xytext=(-4, 4), textcoords="offset points", ha="right", va="bottom", fontsize=8, color="#555555")
    top = max([c[1] for c in f.curve] + [p for p, _ in f.points.values()] +
              [p for items in f.measured.values() for p, _ in items] + [1])
    ax.set_xlim(0, top * 1.08)
    ax.set_xticks(*byte_ticks(top * 1.08, 6))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("peak bytes of the step (above what was live before it)")
    ax.set_ylabel(f"step time ({unit})")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title("Memory/time frontier of checkpointing: less memory costs recompute time", loc="left",
                 fontsize=11, fontweight="bold")
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False, fontsize=8.5,
               bbox_to_anchor=(0.5, 0.0))
    fig.facts, fig.description = f, frontier_text(f)
    return fig


def _time_scale(f: FrontierFacts) -> tuple[float, str]:
    return (1e3, "ms") if f.unit == "s" else (1.0, f.unit)


def _t(t: float, unit: str) -> str:
    return f"{t * 1e3:.1f} ms" if unit == "s" else f"{t:,.4g} {unit}"


# --------------------------------------------------------------------------------------------
# one schedule on the chain, with the live bytes of a recorded step
# --------------------------------------------------------------------------------------------
@dataclass
class ScheduleFacts:
    n_layers: int
    segments: list  # (start, stop, checkpointed)
    recomputed: list  # layer indices that run twice
    kept_outputs: list  # layers whose output a checkpoint keeps (▼)
    budget: float | None
    predicted_peak: float
    predicted_time: float
    after: np.ndarray | None = None  # live bytes after each event of the step, from its own start
    before: np.ndarray | None = None  # the same for the run without checkpoints
    recompute_spans: list = field(default_factory=list)  # (start, end) as fractions of the step
    measured_peak: int | None = None
    before_peak: int | None = None
    method: str = ""


def _step_curve(trace) -> tuple[np.ndarray, list]:
    """Live bytes over a recorded step, minus what was live at its start; recompute spans."""
    live = np.asarray(trace.live_bytes(), dtype=float)
    if live.size == 0:
        return live, []
    live = live - live[0]
    n = max(1, live.size - 1)
    spans, start = [], None
    for e in trace.events:
        if e["kind"] == "recompute":
            if e.get("stage") == "begin":
                start = e["step"]
            elif start is not None:
                spans.append((start / n, e["step"] / n))
                start = None
    return live, spans


def schedule_facts(sched, trace=None, plain_trace=None) -> ScheduleFacts:
    segs = [tuple(s) for s in sched.segments]
    n = segs[-1][1]
    recomputed = [i for a, b, c in segs if c for i in range(a, b)]
    kept = [b - 1 for a, b, c in segs if c]
    f = ScheduleFacts(n, segs, recomputed, kept, sched.budget, float(sched.peak), float(sched.time),
                      method=sched.method)
    if trace is not None:
        f.after, f.recompute_spans = _step_curve(trace)
        f.measured_peak = int(f.after.max()) if f.after.size else 0
    if plain_trace is not None:
        f.before, _ = _step_curve(plain_trace)
        f.before_peak = int(f.before.max()) if f.before.size else 0
    return f


def schedule_text(f: ScheduleFacts) -> str:
    budget = "no budget" if f.budget is None else f"budget {fmt_bytes(f.budget)}"
    parts = ", ".join(f"{a}–{b - 1}{' (recomputed)' if c else ''}" for a, b, c in f.segments)
    lines = [f"{f.method or 'schedule'} at {budget}: {len(f.segments)} segment(s): {parts}.",
             f"{len(f.recomputed)} of {f.n_layers} layers run twice; the checkpoints keep the outputs of "
             f"layers {f.kept_outputs or 'none'}.",
             f"Predicted peak {fmt_bytes(f.predicted_peak)}, predicted time {_t(f.predicted_time, 's')}."]
    if f.measured_peak is not None:
        lines.append(f"Measured in the recorded step: peak {fmt_bytes(f.measured_peak)} above the start; "
                     f"{len(f.recompute_spans)} recomputation(s) in backward.")
    if f.before_peak is not None:
        lines.append(f"Without checkpoints the same step peaks at {fmt_bytes(f.before_peak)}.")
    return "\n".join(lines)


def describe_schedule(sched, trace=None, plain_trace=None) -> str:
    return schedule_text(schedule_facts(sched, trace, plain_trace))


def render_schedule(sched, trace=None, plain_trace=None, width: float = DEFAULT_WIDTH):
    """One schedule: the chain with its checkpoints, and the live bytes of the recorded step
    (``trace``) against the run without checkpoints (``plain_trace``)."""
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.lines import Line2D

    f = schedule_facts(sched, trace, plain_trace)
    has_curve = f.after is not None or f.before is not None
    fig = new_figure(width, 5.0 if has_curve else 2.2)
    h = fig.get_figheight()
    chain_h = 1.15 / h
    top = 1 - 0.62 / h
    ax = fig.add_axes((0.06, top - chain_h, 0.9, chain_h))
    n = f.n_layers
    recomputed = set(f.recomputed)
    for i in range(n):
        kind = "activation" if i in recomputed else "parameter"
        ax.add_patch(Rectangle((i + 0.1, 0.25), 0.8, 0.5, facecolor=palette.fill(kind), edgecolor=palette.color(kind),
                               hatch="//" if i in recomputed else None, linewidth=0.8, gid=f"layer-{i}"))
    for a, b, c in f.segments:
        ax.plot([a + 0.05, a + 0.05, b - 0.05, b - 0.05], [0.12, 0.05, 0.05, 0.12], color="black", linewidth=1)
    ax.plot([k + 0.95 for k in f.kept_outputs], [0.88] * len(f.kept_outputs), marker="v", linestyle="none",
            color=palette.color("ready"), markersize=7, gid="kept-outputs")
    ax.set_xlim(0, n)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xticks([a for a, _, _ in f.segments] + [n])
    ax.tick_params(axis="x", labelsize=8)
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    budget = "" if f.budget is None else f" · budget {fmt_bytes(f.budget)}"
    fig.suptitle(f"Checkpoint schedule ({f.method}){budget} · {len(f.recomputed)} of {n} layers recomputed",
                 fontsize=11.5, fontweight="bold", y=1 - 0.08 / h, va="top")
    ax.set_title("the chain, layer by layer (boxes); brackets: segments; ▼: a checkpoint keeps this output",
                 loc="left", fontsize=9)
    handles = [Patch(facecolor=palette.fill("parameter"), edgecolor=palette.color("parameter"),
                     label="kept for backward"),
               Patch(facecolor=palette.fill("activation"), edgecolor=palette.color("activation"), hatch="//",
                     label="dropped, recomputed in backward"),
               Line2D([0], [0], marker="v", color=palette.color("ready"), linestyle="none", label="checkpoint keeps")]
    if has_curve:
        ax2 = fig.add_axes((0.15, 0.6 / h + 0.3 / h, 0.81, top - chain_h - 1.45 / h))
        peak = 1.0
        if f.before is not None:
            xs = np.linspace(0, 1, f.before.size)
            ax2.step(xs, f.before, where="post", color=palette.color("dead"), linewidth=1.2, gid="curve-before")
            handles.append(Line2D([0], [0], color=palette.color("dead"), label="before: no checkpoints"))
            peak = max(peak, float(f.before.max()))
        if f.after is not None:
            xs = np.linspace(0, 1, f.after.size)
            ax2.step(xs, f.after, where="post", color=AFTER, linewidth=1.6, gid="curve-after")
            ax2.fill_between(xs, f.after, step="post", color=palette.tint(AFTER, 0.7), alpha=0.5)
            handles.append(Line2D([0], [0], color=AFTER, label="after: this schedule"))
            peak = max(peak, float(f.after.max()))
        for a, b in f.recompute_spans:
            ax2.axvspan(a, b, color=palette.fill("activation"), alpha=0.6, zorder=0)
        if f.recompute_spans:
            handles.append(Patch(facecolor=palette.fill("activation"), label="recomputing"))
        if f.budget is not None:
            ax2.axhline(f.budget, color="black", linestyle="--", linewidth=1)
            handles.append(Line2D([0], [0], color="black", linestyle="--", label="budget"))
            peak = max(peak, float(f.budget))
        ax2.axhline(f.predicted_peak, color=palette.color("ready"), linestyle=":", linewidth=1.4)
        handles.append(Line2D([0], [0], color=palette.color("ready"), linestyle=":", label="predicted peak"))
        ax2.set_ylim(0, peak * 1.15)
        ax2.set_yticks(*byte_ticks(peak * 1.15, 5))
        ax2.set_xlim(0, 1)
        ax2.set_xlabel("time through the step (forward, then backward) →")
        ax2.set_ylabel("live bytes\nabove the start", fontsize=9)
        ax2.spines[["top", "right"]].set_visible(False)
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), frameon=False, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.facts, fig.description = f, schedule_text(f)
    return fig


def budget_player(frames, plain_trace=None, width: float = DEFAULT_WIDTH):
    """A slider over budgets: ``frames`` is a list of ``(schedule, trace)`` (one recorded step
    per schedule, in budget order; it starts at the first, the tightest); each position shows
    :func:`render_schedule` and its words.
    Returns an ipywidgets box (its ``.frames`` and ``.show(i)`` for tests)."""
    import ipywidgets as widgets

    if not frames:
        raise ValueError("budget_player: give at least one (schedule, trace) frame")
    labels = [fmt_bytes(s.budget) if s.budget is not None else s.method for s, _ in frames]
    slider = widgets.SelectionSlider(options=list(zip(labels, range(len(frames)))), value=0,
                                     description="budget", continuous_update=False,
                                     layout=widgets.Layout(width="90%"))
    picture = widgets.HTML()
    words = widgets.HTML()
    cache: dict[int, tuple[str, str]] = {}

    def show(i: int) -> None:
        if i not in cache:
            sched, trace = frames[i]
            fig = render_schedule(sched, trace, plain_trace, width)
            cache[i] = (fig.svg(), fig.description)
        svg, text = cache[i]
        picture.value = svg
        words.value = "<pre style='white-space:pre-wrap;font-size:12px'>" + html.escape(text) + "</pre>"

    slider.observe(lambda change: show(change["new"]), names="value")
    show(slider.value)
    box = widgets.VBox([slider, picture, words])
    box.frames, box.show, box.slider, box.picture, box.words = frames, show, slider, picture, words
    return box
