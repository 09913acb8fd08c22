"""Liveness intervals: when each storage's bytes were live, and live bytes over time.

Top: a Gantt chart of storage lifetimes from :meth:`~microtorch.Trace.lifetimes` — one bar
per storage from the event its bytes were allocated (birth) to the event they stopped
being live (death: its refcount reached 0, or its arena was reset), coloured and hatched
by the kind of bytes, its **height by its size** (the largest storage fills its row; the
bars live at ``t`` are labelled with their size where it fits).
Storages already live when recording started begin at the baseline; storages still live
at the end run to the right edge. Bars live at ``t`` are drawn solid, the others faded.

With more storages than ``max_rows`` (default 40), storages whose lifetimes do not
overlap share a row (greedy interval partitioning — the same packing a memory planner
does: the number of rows is the most storages ever live at once).

Bottom: live bytes after every event (:meth:`~microtorch.Trace.live_bytes`), the peak
marked (:meth:`~microtorch.Trace.peak`), and the value at ``t`` (a dot on the curve, the
number above it). A vertical line marks ``t`` in both.

``render(trace, t)`` returns a :class:`~microtorch.viz.figure.PanelFigure` whose ``facts``
(:class:`LivenessFacts`) holds the bars, the curve and the peak; ``describe(trace, t)``
is the text alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import palette
from .events import clamp_step, step_label
from .figure import (DEFAULT_WIDTH, Painter, TextPool, byte_ticks, first_that_fits, label_margin, legend_columns,
                     new_figure, points_per_unit, text_fits, titles)
from .timeline import as_trace, fmt_bytes, lanes, timeline

MAX_ROWS = 40
KINDS = ("parameter", "activation", "gradient", "data", "unknown")


@dataclass
class Bar:
    """One storage's lifetime, as drawn."""
    storage: int
    label: str
    kind: str
    birth: int
    death: int | None  # None: still live at the end
    end: str | None  # "free", "reset", "gap", None (see Lifetime)
    nbytes: int
    row: int
    height: float  # 0..1 of the row: by size

    def live_at(self, t: int) -> bool:
        return self.birth <= t and (self.death is None or t < self.death)


@dataclass
class LivenessFacts:
    t: int
    when: str
    n_events: int
    bars: list  # Bar per storage lifetime, in birth order
    n_rows: int
    shared_rows: bool
    live_bytes: np.ndarray  # after each event
    peak: tuple  # (bytes, event): tr.peak()
    now_bytes: int  # live bytes at t
    live_now: list  # storage ids live at t

    @property
    def max_nbytes(self) -> int:
        return max((b.nbytes for b in self.bars), default=0)


def _bars(trace, max_rows: int):
    """The lifetime bars and their rows for the whole trace, kept with its replay."""
    return trace.replay().facts(("liveness bars", max_rows), lambda: _build_bars(trace, max_rows))


def _build_bars(trace, max_rows: int):
    tl = timeline(trace)
    lives = trace.lifetimes()
    biggest = max((lf.nbytes for lf in lives), default=1) or 1
    end = tl.n
    intervals = [(i, lf.birth or 0, (lf.death if lf.death is not None else end) + (lf.death == lf.birth))
                 for i, lf in enumerate(lives)]
    shared = len(lives) > max_rows
    rows = lanes(intervals) if shared else {i: i for i in range(len(lives))}
    bars = []
    for i, lf in enumerate(lives):
        info = tl.info(lf.storage)
        kind = info.kind if lf.storage in tl.storages else palette.memory_kind(lf.tag)
        height = 0.3 + 0.6 * math.sqrt(lf.nbytes / biggest) if lf.nbytes else 0.3
        bars.append(Bar(lf.storage, info.label, kind, lf.birth or 0, lf.death, lf.end, lf.nbytes, rows[i],
                        height))
    return (bars, (max(rows.values()) + 1) if rows else 0, shared)


def liveness_facts(trace, t: int | None = None, steps=None, *, max_rows: int = MAX_ROWS) -> LivenessFacts:
    """The liveness picture at time ``t`` as numbers (no matplotlib)."""
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    tl = timeline(trace)
    bars, n_rows, shared = _bars(trace, max_rows)
    curve = tl.live_bytes
    now = int(curve[t]) if t >= 0 and len(curve) else 0
    return LivenessFacts(t, step_label(trace, t, steps), tl.n, bars, n_rows, shared, curve, tuple(tl.peak), now,
                         [b.storage for b in bars if b.live_at(t)])


def facts_text(f: LivenessFacts) -> str:
    peak, at = f.peak
    lines = [f"Liveness at {f.when}: {len(f.live_now)} storage(s) live, {fmt_bytes(f.now_bytes)} "
             f"(peak {fmt_bytes(peak)} at event {at})." if at is not None else
             f"Liveness at {f.when}: nothing recorded."]
    if f.shared_rows:
        lines.append(f"{len(f.bars)} storage lifetimes packed into {f.n_rows} rows (at most {f.n_rows} "
                     "storages were live at once).")
    for b in f.bars:
        death = "still live at the end" if b.death is None else {
            "free": f"freed at event {b.death}", "reset": f"reclaimed by an arena reset at event {b.death}",
            "gap": f"gone by event {b.death} (freed while another trace recorded)"}.get(b.end, f"dead at {b.death}")
        now = " — live now" if b.live_at(f.t) else ""
        lines.append(f"  {b.label}: {fmt_bytes(b.nbytes)} {palette.label(b.kind)}, born at event {b.birth}, "
                     f"{death}{now}")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, max_rows: int = MAX_ROWS, **_) -> str:
    """The liveness picture's facts at time ``t`` in words."""
    return facts_text(liveness_facts(trace, t, steps, max_rows=max_rows))


class LivenessPainter(Painter):
    """The liveness picture of one trace; ``draw(t)`` moves it to time ``t``."""

    def __init__(self, trace, *, max_rows: int = MAX_ROWS, width: float = DEFAULT_WIDTH):
        from matplotlib.collections import PolyCollection
        from matplotlib.patches import Patch
        from matplotlib.lines import Line2D

        trace = as_trace(trace)
        super().__init__(trace, max_rows=max_rows)
        f = liveness_facts(trace, None, max_rows=max_rows)
        n_rows = max(1, f.n_rows)
        row_h = 0.24 if n_rows <= 20 else max(0.09, 4.6 / n_rows)
        gantt_h, curve_h, top_h, gap, bottom_h = n_rows * row_h, 1.5, 0.75, 0.45, 1.05
        self.fig = fig = new_figure(width, top_h + gantt_h + gap + curve_h + bottom_h)
        h = fig.get_figheight()
        gantt_h = h - top_h - gap - curve_h - bottom_h  # after the height bounds
        left = label_margin([] if f.shared_rows else [b.label for b in f.bars], 8, width, lo=1.15 / width)
        w = 0.96 - left
        self.ax = ax = fig.add_axes((left, (bottom_h + curve_h + gap) / h, w, gantt_h / h))
        self.ax2 = ax2 = fig.add_axes((left, bottom_h / h, w, curve_h / h), sharex=ax)
        x1 = max(1, f.n_events - 1) + 0.5
        ax.set_xlim(-0.5, x1)
        ax.set_ylim(n_rows, 0)
        ax.spines[["top", "right"]].set_visible(False)
        ax2.spines[["top", "right"]].set_visible(False)
        ax.tick_params(axis="x", labelbottom=False)
        self.bar_colls = {}
        self.fade_colls = {}
        by_kind: dict[str, list] = {}
        for b in f.bars:
            by_kind.setdefault(b.kind, []).append(b)
        self._by_kind = by_kind
        for k in KINDS:
            if k not in by_kind:
                continue
            verts = [_bar_box(b, f.n_events) for b in by_kind[k]]
            faded = PolyCollection(verts, facecolors=palette.fill(k), edgecolors=palette.color(k), alpha=0.45,
                                   linewidths=0.5, hatch=palette.hatch(k) or None, zorder=2)
            faded.set_gid(f"liveness-{k}")
            ax.add_collection(faded)
            solid = PolyCollection([], facecolors=palette.fill(k), edgecolors=palette.color(k), linewidths=0.9,
                                   hatch=palette.hatch(k) or None, zorder=3)
            ax.add_collection(solid)
            self.fade_colls[k], self.bar_colls[k] = faded, solid
        if f.shared_rows:
            ax.set_yticks([])
            ax.set_ylabel(f"storages\n({f.n_rows} rows, shared by\nlifetimes that do not overlap)", fontsize=9)
        else:
            ax.set_yticks([b.row + 0.5 for b in f.bars], [b.label for b in f.bars], fontsize=8)
            ax.tick_params(axis="y", length=0)
        # the live-bytes curve
        curve = np.asarray(f.live_bytes)
        if curve.size:  # only where the value changes (and the last event): the same step curve
            keep = np.flatnonzero(np.diff(curve, prepend=curve[0] - 1) != 0)
            xs, ys = np.append(keep, curve.size - 1), np.append(curve[keep], curve[-1])
        else:
            xs = ys = np.zeros(0)
        ax2.step(xs, ys, where="post", color=palette.color("parameter"), linewidth=1.4, gid="liveness-curve")
        ax2.fill_between(xs, ys, step="post", color=palette.fill("parameter"), alpha=0.6)
        peak, at = f.peak
        top = max(1, peak) * 1.3
        ax2.set_ylim(0, top)
        ax2.set_yticks(*byte_ticks(top, 5))
        ax2.set_ylabel("live bytes", fontsize=9)
        ax2.set_xlabel("event (time →)")
        if at is not None:
            self.peak_marker, = ax2.plot([at], [peak], marker="v", color=palette.color("ready"), markersize=8,
                                         linestyle="none", zorder=5, gid="liveness-peak")
            ax2.annotate(f"peak {fmt_bytes(peak)} at event {at}", (at, peak), xytext=(0, 7),
                         textcoords="offset points", ha="left" if at < 0.6 * x1 else "right", va="bottom",
                         fontsize=8.5, color=palette.color("ready"), fontweight="bold")
        self.cursors = [a.axvline(0, color="black", linewidth=1.2, zorder=6) for a in (ax, ax2)]
        self.now_dot, = ax2.plot([0], [0], marker="o", color="black", markersize=5, linestyle="none", zorder=7)
        self.title = fig.suptitle("", fontsize=12, fontweight="bold", y=1 - 0.1 / h, va="top")
        handles = [Patch(facecolor=palette.fill(k), edgecolor=palette.color(k), hatch=palette.hatch(k) or None,
                         label=palette.label(k)) for k in KINDS if k in by_kind]
        handles += [Line2D([0], [0], color="black", linewidth=1.2, label="now (t)"),
                    Line2D([0], [0], marker="v", color=palette.color("ready"), linestyle="none", label="peak")]
        fig.legend(handles=handles, loc="lower center", frameon=False, fontsize=8.5,
                   ncol=legend_columns([hd.get_label() for hd in handles], width),
                   handlelength=1.6, columnspacing=1.2, bbox_to_anchor=(0.5, 0.0))
        self._x1 = x1
        self._label_sizes = not f.shared_rows
        self.sizes = TextPool(ax, ha="center", va="center", fontsize=7, zorder=4)

    def facts(self, t, steps=None) -> LivenessFacts:
        return liveness_facts(self.trace, t, steps, **self.options)

    def text(self, f) -> str:
        return facts_text(f)

    def dynamic_artists(self) -> list:
        return [*self.sizes.texts, *self.bar_colls.values(), *self.cursors, self.now_dot, self.title,
                *titles(self.ax), *titles(self.ax2)]

    def update(self, f: LivenessFacts) -> None:
        t = max(f.t, 0)
        for k, solid in self.bar_colls.items():
            solid.set_verts([_bar_box(b, f.n_events) for b in self._by_kind[k] if b.live_at(f.t)])
        labels = []
        if self._label_sizes:  # the sizes of the storages live at t, on their bars where they fit
            scale = points_per_unit(self.ax)
            for b in f.bars:
                stop = b.death if b.death is not None else f.n_events - 1
                words = fmt_bytes(b.nbytes)
                if b.live_at(f.t) and text_fits(self.ax, b.birth, stop, words, 7, scale):
                    labels.append(((b.birth + stop) / 2, b.row + 0.5, words))
        self.sizes.show(labels)
        for c in self.cursors:
            c.set_xdata([t, t])
        self.now_dot.set_data([t], [f.now_bytes])
        # the value at t above the curve, not on it: on the curve it would cover the peak's label
        self.ax2.set_title(f"live bytes now (●): {fmt_bytes(f.now_bytes)}", loc="left", fontsize=9,
                           fontweight="normal", y=1.0, pad=3)
        self.title.set_text(f"Storage lifetimes · {f.when}")
        live = f"{len(f.live_now)} of {len(f.bars)} storages live at t"
        self.ax.set_title(first_that_fits(self.ax, [f"{live} (solid) · bar height: size", live], 9.5, bold=False),
                          loc="left", fontsize=9.5, fontweight="normal", y=1.0, pad=6)


def _bar_box(b: Bar, n_events: int):
    x0 = b.birth
    x1 = b.death if b.death is not None else max(n_events - 1, x0) + 0.5
    if x1 <= x0:
        x1 = x0 + 0.5
    y1 = b.row + 0.5 + b.height / 2
    y0 = b.row + 0.5 - b.height / 2
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def render(trace, t: int | None = None, steps=None, *, max_rows: int = MAX_ROWS, width: float = DEFAULT_WIDTH):
    """The liveness picture at time ``t`` (``None``: the end): a fresh
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`LivenessFacts`)."""
    return LivenessPainter(trace, max_rows=max_rows, width=width).draw(t, steps)
