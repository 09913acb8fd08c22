"""The size-class pool at time ``t``: blocks per class, and what rounding costs.

For each pool, one row per size class (every class the trace ever used, smallest first;
``direct`` for requests too large for any class, served one buffer each), two charts:

* **blocks** — how many blocks of that class are *in use*, *free* (on the class's free
  list, ready to be reused by the next request of that class) and *held back* (freed, but
  kept off the free list until a later epoch: deferred release, ``defer_epochs``);
* **bytes of the blocks in use** — *requested* (what the tensors asked for) inside
  *reserved* (the class size times the blocks): the hatched rest is internal
  fragmentation, the bytes lost to rounding each request up to its class (below 1/9 of a
  block from 64 B up with 8 classes per doubling; see :mod:`microtorch.memory.pool`).

The title gives the pool's totals, its epoch and its internal fragmentation
(1 − requested / reserved).

``render(trace, t)`` returns a :class:`~microtorch.viz.figure.PanelFigure` with ``facts``
(:class:`PoolFacts`: the bars as numbers) and ``description``; ``describe(trace, t)`` is the
text alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import palette
from .events import clamp_step, step_label
from .figure import (DEFAULT_WIDTH, Painter, TextPool, byte_ticks, first_that_fits, label_margin, legend_columns,
                     new_figure, titles)
from .timeline import as_trace, fmt_bytes, timeline


@dataclass
class ClassRow:
    """One size class of one pool at time t (``size_class`` None: direct blocks)."""
    size_class: int | None
    size: int | None
    in_use: int = 0
    free: int = 0
    held: int = 0
    requested: int = 0
    reserved: int = 0
    slab_bytes: int = 0

    @property
    def label(self) -> str:
        return "direct" if self.size_class is None else f"{self.size:,} B"

    @property
    def waste(self) -> int:
        return self.reserved - self.requested

    @property
    def fragmentation(self) -> float:
        return self.waste / self.reserved if self.reserved else 0.0


@dataclass
class PoolSummary:
    name: str
    epoch: int
    defer_held: int  # blocks held back (deferred release)
    rows: list = field(default_factory=list)

    @property
    def requested(self) -> int:
        return sum(r.requested for r in self.rows)

    @property
    def reserved(self) -> int:
        return sum(r.reserved for r in self.rows)

    @property
    def fragmentation(self) -> float:
        return 1 - self.requested / self.reserved if self.reserved else 0.0

    def total(self, what: str) -> int:
        return sum(getattr(r, what) for r in self.rows)


@dataclass
class PoolFacts:
    t: int
    when: str
    pools: list  # PoolSummary per pool the trace uses


def pool_facts(trace, t: int | None = None, steps=None, *, pools=None) -> PoolFacts:
    """The pool picture's bars at time ``t`` as numbers (no matplotlib). ``pools``: names to
    show (default: every pool the trace uses)."""
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    tl = timeline(trace)
    state = trace.state_at(t) if t >= 0 else None
    out = []
    for name in (pools if pools is not None else list(tl.pool_classes)):
        p = state.pools.get(name) if state is not None else None
        summary = PoolSummary(name, p.epoch if p else 0, p.held if p else 0)
        classes = state.size_classes(name) if state is not None else {}
        for c, size in tl.pool_classes.get(name, []):
            cls = classes.get(c)
            if cls is None:
                summary.rows.append(ClassRow(c, size))
            else:
                summary.rows.append(ClassRow(c, cls.size if cls.size is not None else size, cls.in_use,
                                             cls.free, cls.held, cls.requested, cls.reserved, sum(cls.slabs)))
        out.append(summary)
    return PoolFacts(t, step_label(trace, t, steps), out)


def facts_text(f: PoolFacts) -> str:
    lines = [f"Pool size classes at {f.when}."]
    if not f.pools:
        lines.append("No pool block in this trace (every tensor lived in an arena or on the heap).")
    for p in f.pools:
        lines.append(
            f"{p.name} (epoch {p.epoch}): {p.total('in_use')} block(s) in use, {p.total('free')} free, "
            f"{p.total('held')} held back; {fmt_bytes(p.requested)} requested in {fmt_bytes(p.reserved)} "
            f"reserved: internal fragmentation {p.fragmentation:.1%}.")
        for r in p.rows:
            if not (r.in_use or r.free or r.held):
                lines.append(f"  {r.label}: no blocks at this step")
                continue
            lines.append(f"  {r.label}: {r.in_use} in use, {r.free} free, {r.held} held back; "
                         f"{r.requested:,} B requested of {r.reserved:,} B reserved "
                         f"({r.waste:,} B lost to rounding, {r.fragmentation:.0%})")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, pools=None, **_) -> str:
    """The pool picture's facts at time ``t`` in words."""
    return facts_text(pool_facts(trace, t, steps, pools=pools))


_BLOCKS = (("in_use", "in use"), ("free", "free"), ("held", "held"))


class PoolPainter(Painter):
    """The pool picture of one trace; ``draw(t)`` moves it to time ``t``."""

    def __init__(self, trace, *, pools=None, width: float = DEFAULT_WIDTH):
        from matplotlib.patches import Patch

        trace = as_trace(trace)
        super().__init__(trace, pools=pools)
        tl = timeline(trace)
        first = pool_facts(trace, None, pools=pools)
        n = max(1, len(first.pools))
        rows = [max(1, len(p.rows)) for p in first.pools] or [1]
        row_h, gap, top_h, bottom_h = 0.3, 0.95, 0.75, 0.95
        height = top_h + sum(0.25 + r * row_h for r in rows) + (n - 1) * gap + bottom_h
        self.fig = fig = new_figure(width, height)
        h = fig.get_figheight()
        # room for the class labels and the "size class" axis label on the left
        left = label_margin([r.label for p in first.pools for r in p.rows] + ["direct"], 9, width) + 0.22 / width
        gs = fig.add_gridspec(n, 2, height_ratios=[0.25 + r * row_h for r in rows], left=left, right=0.97,
                              top=1 - top_h / h, bottom=bottom_h / h, wspace=0.32,
                              hspace=gap / (0.25 + max(rows) * row_h))
        self.title = fig.suptitle("", fontsize=12, fontweight="bold", y=1 - 0.1 / h, va="top")
        self.parts = []
        self.percent: dict[str, TextPool] = {}  # per pool: the "lost to rounding" share of each class
        if not first.pools:
            ax = fig.add_subplot(gs[0, :])
            ax.set_axis_off()
            ax.text(0.5, 0.5, "No pool block in this trace", ha="center", va="center", transform=ax.transAxes)
        for i, p in enumerate(first.pools):
            ax_b, ax_y = fig.add_subplot(gs[i, 0]), fig.add_subplot(gs[i, 1])
            ax_b.set_gid(f"pool-blocks:{p.name}")
            ax_y.set_gid(f"pool-bytes:{p.name}")
            labels = [r.label for r in p.rows]
            ys = list(range(len(labels)))
            bars = {}
            left = [0] * len(ys)
            for key, kind in _BLOCKS:
                bars[key] = ax_b.barh(ys, [0] * len(ys), left=left, height=0.62, color=palette.fill(kind),
                                      edgecolor=palette.color(kind) if kind != "free" else "#555555",
                                      hatch=palette.hatch(kind) or None, linewidth=0.9,
                                      label=palette.label(kind))
                for row, rect in enumerate(bars[key].patches):
                    rect.set_gid(f"pool-{key}:{p.name}:{row}")
            reserved = ax_y.barh(ys, [0] * len(ys), height=0.62, color="white", edgecolor="#555555",
                                 hatch=palette.hatch("padding"), linewidth=0.9,
                                 label="reserved, not requested (rounding)")
            requested = ax_y.barh(ys, [0] * len(ys), height=0.62, color=palette.fill("in use"),
                                  edgecolor=palette.color("in use"), linewidth=0.9, label="requested")
            for what, container in (("reserved", reserved), ("requested", requested)):
                for row, rect in enumerate(container.patches):
                    rect.set_gid(f"pool-{what}:{p.name}:{row}")
            for ax in (ax_b, ax_y):
                ax.set_yticks(ys, labels)
                ax.set_ylim(len(ys) - 0.5, -0.5)
                ax.spines[["top", "right"]].set_visible(False)
                ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
                ax.set_axisbelow(True)
            ax_b.set_ylabel("size class")
            ax_b.set_xlabel("blocks")
            ax_y.set_xlabel("bytes of the blocks in use")
            ax_b.set_xlim(0, max(1, tl.pool_max_blocks.get(p.name, 1)) * 1.08)
            top = max(1, tl.pool_max_reserved.get(p.name, 1)) * 1.3
            ax_y.set_xlim(0, top)
            ax_y.set_xticks(*byte_ticks(top, 5))
            ax_b.xaxis.get_major_locator().set_params(integer=True)
            self.parts.append((p.name, ax_b, ax_y, bars, reserved, requested))
            self.percent[p.name] = TextPool(ax_y, va="center", ha="left", fontsize=8, color="#333333")
        handles = [Patch(facecolor=palette.fill(k), edgecolor=palette.color(k) if k != "free" else "#555555",
                         hatch=palette.hatch(k) or None, label=f"blocks {palette.label(k)}")
                   for _, k in _BLOCKS]
        handles += [Patch(facecolor=palette.fill("in use"), edgecolor=palette.color("in use"),
                          label="bytes requested"),
                    Patch(facecolor="white", edgecolor="#555555", hatch=palette.hatch("padding"),
                          label="reserved, lost to rounding")]
        fig.legend(handles=handles, loc="lower center", frameon=False, fontsize=8.5,
                   ncol=legend_columns([hd.get_label() for hd in handles], width, most=5, columnspacing=1.1),
                   handlelength=1.6, columnspacing=1.1, bbox_to_anchor=(0.5, 0.01))

    def facts(self, t, steps=None) -> PoolFacts:
        return pool_facts(self.trace, t, steps, **self.options)

    def dynamic_artists(self) -> list:
        out = [self.title] + [t for pool in self.percent.values() for t in pool.texts]
        for _, ax_b, ax_y, bars, reserved, requested in self.parts:
            out += [*titles(ax_b), *titles(ax_y), *reserved.patches, *requested.patches]
            for container in bars.values():
                out += container.patches
        return out

    def text(self, f) -> str:
        return facts_text(f)

    def update(self, f: PoolFacts) -> None:
        if not f.pools:
            self.title.set_text(f"Pool size classes · {f.when}")
            return
        self.title.set_text(f"Pool size classes · {f.when}")
        by_name = {p.name: p for p in f.pools}
        for name, ax_b, ax_y, bars, reserved, requested in self.parts:
            p = by_name[name]
            left = [0] * len(p.rows)
            for key, _ in _BLOCKS:
                for rect, r, x in zip(bars[key].patches, p.rows, left):
                    v = getattr(r, key)
                    rect.set_x(x)
                    rect.set_width(v)
                    rect.set_visible(v > 0)
                left = [x + getattr(r, key) for x, r in zip(left, p.rows)]
            for rect, r in zip(reserved.patches, p.rows):
                rect.set_width(r.reserved)
                rect.set_visible(r.reserved > 0)
            for rect, r in zip(requested.patches, p.rows):
                rect.set_width(r.requested)
                rect.set_visible(r.requested > 0)
            counts = f"{p.total('in_use')} in use, {p.total('free')} free, {p.total('held')} held"
            ax_b.set_title(first_that_fits(ax_b, [f"{name} (epoch {p.epoch}): {counts}", f"{name}: {counts}",
                                                  counts], 10), loc="left", fontsize=10, y=1.0, pad=6)
            req, res, lost = fmt_bytes(p.requested), fmt_bytes(p.reserved), f"{p.fragmentation:.0%} lost"
            ax_y.set_title(first_that_fits(ax_y, [f"{req} requested / {res} reserved: {lost}",
                                                  f"{req} / {res} reserved: {lost}", f"{req} / {res}: {lost}"],
                                           10), loc="left", fontsize=10, y=1.0, pad=6)
            pad = 0.01 * ax_y.get_xlim()[1]  # (SVG collapses a leading space: move the text instead)
            self.percent[name].show([(r.reserved + pad, y, f"{r.fragmentation:.0%}")
                                     for y, r in enumerate(p.rows) if r.reserved])


def render(trace, t: int | None = None, steps=None, *, pools=None, width: float = DEFAULT_WIDTH):
    """The pool picture at time ``t`` (``None``: the end): a fresh
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`PoolFacts`)."""
    return PoolPainter(trace, pools=pools, width=width).draw(t, steps)
