"""Storage reference counts over time, and who holds each reference at time ``t``.

The picture shows the storages the recorded program touched — allocated, freed, viewed by
a tensor, read or written by an op, saved for backward, or whose count changed while
recording; storages that merely existed when recording started and that nothing in the
trace used are left out (the text says how many). Each (``#7 W1``, ``#12 Relu``, ``#15
tensor 9 [4]``: its id and what it holds) gets a step line of its reference count over the
whole trace, coloured by the kind of bytes it holds. A vertical
line marks ``t``; the lines of storages live at ``t`` are drawn thick, and each row's count
at ``t`` is printed at its right. Line height is the count (on a log2(1 + count) scale once
counts above 4 occur, so a count of 1 stays visible next to a flat buffer's many views). Where a storage's
count reached 0 and its bytes were given back, its line ends in a ✕; where an arena reset
reclaimed its bytes while references remained (the tensors still exist, but touching them
raises), a ◆ marks the reset.

A reference is held by each tensor viewing the storage and by each graph node that saved
a tensor over it for backward. The column at the right of each row names them at ``t``
(``x, MulBackward``; "before trace" for references taken before recording started); the
text form lists, for every storage live at ``t``, its count and all of its holders
("tensor 3 (x)", "node 7 (MulBackward)"). The legend lists only what the picture draws.

**Rows.** With at most ``max_rows`` storages (default 24) each has its own row. With more,
storages whose lifetimes do not overlap share a row (greedy interval partitioning: as many
rows as storages were ever live at once), and each row is labelled with the storage it
holds at ``t``; if even that is too many, the rows holding the storages most recently
active at ``t`` are shown. The text lists every live storage either way.

``render(trace, t)`` returns a :class:`~microtorch.viz.figure.PanelFigure` whose ``facts``
(:class:`RefcountFacts`) holds the step lines and the values at ``t``; ``describe(trace,
t)`` is the text alone.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from ..recording import Holder
from . import palette
from .events import clamp_step, index, step_label
from .figure import (DEFAULT_WIDTH, Painter, TextPool, first_that_fits, label_margin, legend_columns, new_figure,
                     remove_all, titles)
from .timeline import as_trace, lanes, timeline

MAX_ROWS = 24
HOLDERS_FONT = 8  # the "held by" column


@dataclass
class StorageLine:
    """One storage's reference count over time."""
    storage: int
    label: str
    kind: str
    steps: list  # events where the count changed (the first: when the storage was first seen)
    values: list  # the count from each of those events on
    born: int
    freed: int | None  # event its count reached 0 and its bytes went back (None: never)
    reset: int | None  # event an arena reset reclaimed its bytes under live references

    def value_at(self, t: int) -> int | None:
        """The count right after event ``t`` (None: not live then)."""
        if t < self.born or (self.freed is not None and t >= self.freed):
            return None
        return self.values[bisect.bisect_right(self.steps, t) - 1]

    def live_at(self, t: int) -> bool:
        return self.born <= t and (self.freed is None or t < self.freed)


@dataclass
class RefRow:
    """One row of the picture: one storage, or several whose lifetimes do not overlap."""
    row: int
    lines: list  # StorageLine, in time order
    current: StorageLine | None  # the storage the row is about at t
    value: int | None  # its count at t (None: no storage of the row is live at t)
    holders: tuple = ()  # who holds its references at t, short (``("x", "MulBackward")``)

    @property
    def label(self) -> str:
        return self.current.label if self.current is not None else "—"


@dataclass
class RefcountFacts:
    t: int
    when: str
    n_events: int
    shared_rows: bool  # rows hold several storages (more storages than max_rows)
    rows: list  # RefRow, top to bottom
    live: list  # every touched storage live at t: (storage, label, refcount, holders in words)
    hidden: int  # storages live at t in no row shown
    max_count: int = 1
    untouched: int = 0  # storages live at t that nothing in the trace used (not drawn)

    @property
    def log_scale(self) -> bool:
        """Counts above 4 occur: line heights follow log2(1 + count), so 1 stays visible."""
        return self.max_count > 4

    def height(self, v: int) -> float:
        """How far up its row a count of ``v`` draws (0 to 1)."""
        if self.log_scale:
            return math.log2(1 + v) / math.log2(1 + self.max_count)
        return v / self.max_count

    def values(self) -> dict[int, int]:
        """storage -> count at t, for the storages the rows show live."""
        return {r.current.storage: r.value for r in self.rows if r.value is not None}


def _lines(trace):
    tl = timeline(trace)
    out = {}
    for sid, s in tl.refcounts.items():
        if sid not in tl.touched:
            continue
        info = tl.info(sid)
        out[sid] = StorageLine(sid, info.label, info.kind, [p for p, _ in s], [v for _, v in s], s[0][0],
                               tl.freed.get(sid), tl.reset.get(sid))
    return out


def _tensor_holder_name(ix, holder, t: int) -> str | None:
    """The name at ``t`` of the tensor a :class:`~microtorch.recording.Holder` is (None: not a tensor)."""
    holder = Holder.parse(holder)
    return ix.tensor_name(holder.id, t) if holder.kind == "tensor" else None


def _holder(ix, holder, t: int) -> str:
    """``tensor 4 (x)``, ``tensor 9 (node 3's result)``; ``?`` in words."""
    if Holder.parse(holder).kind == "unknown":
        return "a reference taken before recording started"
    name = _tensor_holder_name(ix, holder, t)
    return holder if name is None or name == holder else f"{holder} ({name})"


def _short_holder(ix, holder: str, t: int) -> str:
    """A holder in a few letters, for the picture: ``x``, ``tensor 9``, ``MulBackward``."""
    holder = Holder.parse(holder)
    if holder.kind == "unknown":
        return "before trace"
    if (name := _tensor_holder_name(ix, holder, t)) is not None:
        return str(holder) if name.endswith("'s result") else name
    if holder.kind == "node" and holder.endswith(")") and " (" in holder:
        return holder[holder.index(" (") + 2:-1]
    return str(holder)


def holders_words(holders) -> str:
    """``x, MulBackward, 2× before trace``: each holder once, with how many references it holds."""
    counts: dict[str, int] = {}
    for h in holders:
        counts[h] = counts.get(h, 0) + 1
    return ", ".join(h if n == 1 else f"{n}× {h}" for h, n in counts.items())


def _rows_layout(trace, max_rows: int):
    """(shared?, row of each storage) for the whole trace, kept with its replay."""
    return trace.replay().facts(("refcount rows", max_rows), lambda: _build_rows_layout(trace, max_rows))


def _build_rows_layout(trace, max_rows: int):
    tl = timeline(trace)
    lines = _lines(trace)
    order = sorted(lines.values(), key=lambda ln: (ln.born, ln.storage))
    if len(order) <= max_rows:
        return (False, {ln.storage: i for i, ln in enumerate(order)}, lines)
    end = tl.n
    return (True, lanes([(ln.storage, ln.born, (ln.freed if ln.freed is not None else end) + 1)
                         for ln in order]), lines)


def refcount_facts(trace, t: int | None = None, steps=None, *, max_rows: int = MAX_ROWS) -> RefcountFacts:
    """The refcount picture at time ``t`` as numbers (no matplotlib)."""
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    tl = timeline(trace)
    state = trace.state_at(t) if t >= 0 else None
    live = state.storages if state is not None else {}
    shared, row_of, lines = _rows_layout(trace, max_rows)
    ix = index(trace)
    by_row: dict[int, list] = {}
    for sid, r in row_of.items():
        by_row.setdefault(r, []).append(lines[sid])
    rows = []
    for r in sorted(by_row):
        group = sorted(by_row[r], key=lambda ln: ln.born)
        now = next((ln for ln in group if ln.live_at(t)), None)
        current = now or next((ln for ln in reversed(group) if ln.born <= t), None) or group[0]
        value = live[current.storage].refcount if now is not None and current.storage in live else None
        rows.append(RefRow(r, group, current, value, () if value is None else tuple(
            _short_holder(ix, h, t) for h in state.holders(current.storage))))
    hidden = 0
    if len(rows) > max_rows:  # keep the rows whose storage at t was active most recently
        def last_change(row):
            ln = row.current
            k = bisect.bisect_right(ln.steps, t) - 1
            return (row.value is not None, ln.steps[k] if k >= 0 else -1)
        keep = sorted(rows, key=last_change, reverse=True)[:max_rows]
        hidden = sum(1 for row in rows if row.value is not None and row not in keep)
        rows = sorted(keep, key=lambda row: row.row)
    live_list = [(sid, tl.info(sid).label, st.refcount, tuple(_holder(ix, h, t) for h in state.holders(sid)))
                 for sid, st in sorted(live.items()) if sid in lines]
    top = max((v for ln in lines.values() for v in ln.values), default=1)
    return RefcountFacts(t, step_label(trace, t, steps), tl.n, shared, rows, live_list, hidden, max(1, top),
                         sum(1 for sid in live if sid not in lines))


def facts_text(f: RefcountFacts) -> str:
    lines = [f"Storage reference counts at {f.when}: {len(f.live)} storage(s) live."]
    for sid, label, count, holders in f.live:
        who = ", ".join(holders) if holders else "nobody (its bytes are given back next)"
        lines.append(f"  {label}: refcount {count} — held by {who}")
    seen = [ln for r in f.rows for ln in r.lines]
    freed = sorted((ln for ln in seen if ln.freed is not None and ln.freed <= f.t), key=lambda ln: ln.freed)
    if freed:
        lines.append("Freed so far (count reached 0, bytes given back): " + ", ".join(
            f"{ln.label} at event {ln.freed}" for ln in freed))
    reset = [ln for ln in seen if ln.reset is not None and ln.reset <= f.t and ln.live_at(f.t)]
    if reset:
        lines.append("Bytes reclaimed by an arena reset while references remain (using them raises): "
                     + ", ".join(f"{ln.label} at event {ln.reset}" for ln in reset))
    if f.shared_rows:
        lines.append("(Storages whose lifetimes do not overlap share a row in the picture.)")
    if f.hidden:
        lines.append(f"({f.hidden} live storage(s) have no row in the picture; all are listed above.)")
    if f.untouched:
        lines.append(f"({f.untouched} other storage(s) were alive but nothing in the trace used them: "
                     "not drawn.)")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, max_rows: int = MAX_ROWS, **_) -> str:
    """The refcount picture's facts at time ``t`` in words, with every reference's holder."""
    return facts_text(refcount_facts(trace, t, steps, max_rows=max_rows))


_BAND = 0.7  # a count of max_count reaches this far up its row (rows are 1 unit tall)


class RefcountPainter(Painter):
    """The refcount picture of one trace; ``draw(t)`` moves it to time ``t``."""

    def __init__(self, trace, *, max_rows: int = MAX_ROWS, width: float = DEFAULT_WIDTH):
        from matplotlib.collections import LineCollection
        from matplotlib.lines import Line2D
        from matplotlib.transforms import blended_transform_factory

        trace = as_trace(trace)
        super().__init__(trace, max_rows=max_rows)
        tl = timeline(trace)
        shared, row_of, lines = _rows_layout(trace, max_rows)
        n_rows = max(1, min(max_rows, len(set(row_of.values()))))
        row_h, top_h, bottom_h = 0.3, 0.75, 1.05
        self.fig = fig = new_figure(width, top_h + n_rows * row_h + bottom_h)
        h = fig.get_figheight()
        left = label_margin([tl.info(sid).label for sid in row_of] + ["storage at t"], 8.5, width)
        # the right: the count at t, then who holds the references (about a quarter of the width)
        right = 0.985 - max(0.22, min(0.3, 2.6 / width))
        self.ax = ax = fig.add_axes((left, bottom_h / h, right - left, 1 - (top_h + bottom_h) / h))
        self._count_x, self._holders_x = right + 0.012, right + 0.065
        self._holders_chars = int((0.99 - self._holders_x) * width * 72 / (HOLDERS_FONT * 0.6))
        columns = blended_transform_factory(fig.transFigure, ax.transAxes)
        self.n_rows = n_rows
        ax.set_xlim(-0.5, max(1, tl.n - 1) + 0.5)
        ax.set_ylim(n_rows, 0)
        ax.set_yticks([])
        ax.set_xlabel("event (time →)")
        ax.spines[["top", "right", "left"]].set_visible(False)
        self.lines = LineCollection([], linewidths=1.8, gid="refcount-lines", zorder=3)
        ax.add_collection(self.lines)
        self.baselines = LineCollection([], colors="#DDDDDD", linewidths=0.8, zorder=1)
        ax.add_collection(self.baselines)
        self.now_lines = LineCollection([], linewidths=3.2, gid="refcount-live", zorder=4)
        ax.add_collection(self.now_lines)
        self.freed, = ax.plot([], [], linestyle="none", marker="X", markersize=6.5, color="black",
                              markeredgecolor="white", markeredgewidth=0.6, zorder=5, gid="refcount-freed")
        self.reset, = ax.plot([], [], linestyle="none", marker="D", markersize=6,
                              color=palette.color("ready"), zorder=5, gid="refcount-reset")
        self.cursor = ax.axvline(0, color="black", linewidth=1.2, zorder=6)
        self.title = fig.suptitle("", fontsize=12, fontweight="bold", y=1 - 0.1 / h, va="top")
        ax.text(self._count_x, 1.0, "count\nat t", transform=columns, ha="left", va="bottom", fontsize=8.5,
                color="#333333")
        ax.text(self._holders_x, 1.0, "held by\n(at t)", transform=columns, ha="left", va="bottom",
                fontsize=8.5, color="#333333")
        ax.text(-0.01, 1.0, "storage at t\n(rows shared)" if shared else "storage", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8.5, color="#333333")
        self._shared = shared
        self.row_texts: list = []  # row labels (change only with the rows, or every step if shared)
        self.shared_labels = TextPool(ax, transform=ax.transAxes, ha="right", va="center", fontsize=8.5)
        self.values = TextPool(ax, transform=columns, ha="left", va="center", fontsize=9, fontweight="bold")
        self.holders = TextPool(ax, transform=columns, ha="left", va="center", fontsize=HOLDERS_FONT,
                                color="#333333")
        self._rows_key = None
        # the legend: only what this picture draws
        drawn = [ln for sid, ln in lines.items() if sid in row_of]
        kinds = [k for k in ("parameter", "activation", "gradient", "data", "unknown")
                 if any(ln.kind == k for ln in drawn)]
        handles = [Line2D([0], [0], color=palette.ink(k), linewidth=2, label=palette.label(k)) for k in kinds]
        if any(ln.freed is not None for ln in drawn):
            handles.append(Line2D([0], [0], linestyle="none", marker="X", color="black", markersize=7,
                                  label="freed: count reached 0"))
        if any(ln.reset is not None for ln in drawn):
            handles.append(Line2D([0], [0], linestyle="none", marker="D", color=palette.color("ready"),
                                  markersize=6, label="bytes reclaimed by arena reset"))
        handles.append(Line2D([0], [0], color="black", linewidth=1.2, label="now (t)"))
        fig.legend(handles=handles, loc="lower center", frameon=False,
                   ncol=legend_columns([hd.get_label() for hd in handles], width, most=4, handlelength=1.8),
                   fontsize=8.5, handlelength=1.8, columnspacing=1.2, bbox_to_anchor=(0.5, 0.0))

    def facts(self, t, steps=None) -> RefcountFacts:
        return refcount_facts(self.trace, t, steps, **self.options)

    def text(self, f) -> str:
        return facts_text(f)

    def static_key(self, f: RefcountFacts):
        return tuple(r.row for r in f.rows)

    def dynamic_artists(self) -> list:
        return [self.cursor, self.title, *titles(self.ax), self.now_lines, *self.values.texts,
                *self.holders.texts, *self.shared_labels.texts]

    def _draw_rows(self, f: RefcountFacts) -> None:
        """The step lines, markers and (unshared) labels: redrawn only when the rows change."""
        ax = self.ax
        remove_all(self.row_texts)
        end = f.n_events - 1
        segs, colors, freed, reset, bases = [], [], [], [], []
        self._segments = {}  # storage -> its drawn step line
        for i, r in enumerate(f.rows):
            base = i + 0.85
            for ln in r.lines:
                stop = ln.freed if ln.freed is not None else end
                pts = []
                for k, (s, v) in enumerate(zip(ln.steps, ln.values)):
                    y = base - _BAND * f.height(v)
                    if k:
                        pts.append((s, pts[-1][1]))
                    pts.append((s, y))
                pts.append((stop, pts[-1][1]))
                segs.append(pts)
                self._segments[ln.storage] = pts
                colors.append(palette.ink(ln.kind))
                bases.append([(ln.born, base), (stop, base)])
                if ln.freed is not None:
                    freed.append((ln.freed, base))
                if ln.reset is not None:
                    reset.append((ln.reset, base - _BAND * f.height(ln.value_at(ln.reset) or 0)))
        self.lines.set_segments(segs)
        self.lines.set_colors(colors)
        self.baselines.set_segments(bases)
        self.freed.set_data([x for x, _ in freed], [y for _, y in freed])
        self.reset.set_data([x for x, _ in reset], [y for _, y in reset])

    def _label(self, i: int, words: str, **kw):
        return self.ax.text(-0.01, 1 - (i + 0.55) / self.n_rows, words, transform=self.ax.transAxes,
                            ha="right", va="center", fontsize=8.5, **kw)

    def update(self, f: RefcountFacts) -> None:
        key = self.static_key(f)
        if key != self._rows_key:
            self._rows_key = key
            self._draw_rows(f)
            if not f.shared_rows:  # one storage per row: the labels change only with the rows
                self.row_texts.extend(self._label(i, r.label) for i, r in enumerate(f.rows))
        y = lambda i: 1 - (i + 0.55) / self.n_rows  # noqa: E731
        if f.shared_rows:  # each row is labelled with the storage it holds at t
            self.shared_labels.show([(-0.01, y(i), r.label) for i, r in enumerate(f.rows)])
            for text, r in zip(self.shared_labels.texts, f.rows):
                text.set_color("black" if r.value is not None else "#888888")
        ax = self.ax
        self.cursor.set_xdata([max(f.t, 0)] * 2)
        live = [r.current for r in f.rows if r.value is not None]
        self.now_lines.set_segments([self._segments[ln.storage] for ln in live])
        self.now_lines.set_colors([palette.ink(ln.kind) for ln in live])
        self.values.show([(self._count_x, y(i), "–" if r.value is None else str(r.value))
                          for i, r in enumerate(f.rows)])
        self.holders.show([(self._holders_x, y(i), _fit(holders_words(r.holders), self._holders_chars))
                           for i, r in enumerate(f.rows) if r.holders])
        for text, r in zip(self.values.texts, f.rows):
            text.set_color("black" if r.value is not None else "#888888")
        more = f" · {f.hidden} more live: see the text" if f.hidden else ""
        self.title.set_text(f"Storage refcounts · {f.when}")
        scale = f"log scale, full row = {f.max_count}" if f.log_scale else f"full row = {f.max_count}"
        ax.set_title(first_that_fits(ax, [f"{len(f.live)} live (thick lines) · height = refcount ({scale}){more}",
                                          f"{len(f.live)} live (thick lines) · height = refcount ({scale})",
                                          f"{len(f.live)} live · height = refcount ({scale})",
                                          f"{len(f.live)} live · height = refcount"
                                          + (" (log scale)" if f.log_scale else ""),
                                          f"{len(f.live)} live" + (" · log scale" if f.log_scale else "")],
                                     9.5, bold=False),
                     loc="left", fontsize=9.5, fontweight="normal", y=1.0, pad=6)


def _fit(words: str, chars: int) -> str:
    """``words`` cut to ``chars`` characters (ending in "…"); the text lists them all."""
    return words if len(words) <= chars else words[: max(1, chars - 1)].rstrip(", ") + "…"


def render(trace, t: int | None = None, steps=None, *, max_rows: int = MAX_ROWS, width: float = DEFAULT_WIDTH):
    """The refcount picture at time ``t`` (``None``: the end): a fresh
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`RefcountFacts`)."""
    return RefcountPainter(trace, max_rows=max_rows, width=width).draw(t, steps)
