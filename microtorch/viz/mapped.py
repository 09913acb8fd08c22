"""A mapped file's pages: which were in memory at each snapshot.

``MappedFile.record_pages(label)`` puts the file's resident pages (``mincore``) in the
trace; this picture draws one row per snapshot up to ``t``, the file's pages left to right
(binned when there are more pages than the picture is wide: a bin's shade is the fraction of
its pages in memory). Pages become resident when first touched — and the kernel reads
ahead, so touching a few rows brings in many more pages than they span.

``render(trace, t)`` returns a :class:`~microtorch.viz.figure.PanelFigure` with ``facts``
(:class:`PagesFacts`); ``describe(trace, t)`` is the text alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import palette
from .events import clamp_step, replay_of, step_label
from .figure import DEFAULT_WIDTH, Painter, new_figure
from .timeline import as_trace

MAX_BINS = 256


@dataclass
class Snapshot:
    step: int
    label: str
    pages: int
    resident: int
    mask: np.ndarray  # bool per page


@dataclass
class PagesFacts:
    t: int
    when: str
    allocator: str | None
    snapshots: list = field(default_factory=list)  # Snapshot, up to t


def _mask(e: dict) -> np.ndarray:
    values = [(i % 2 == 0) == e["first"] for i in range(len(e["runs"]))]
    return np.repeat(np.array(values, bool), e["runs"]) if e["runs"] else np.zeros(0, bool)


class PagesReplayer:
    """The mapped-pages concern of a trace's replay (:meth:`~microtorch.trace.replay.Replay.follow`
    drives it): every mapped file's page snapshots so far."""

    def __init__(self, events: list):
        self.events, self.t = events, -1
        self.snapshots: dict[str, tuple] = {}  # allocator -> its Snapshots so far

    def apply(self, e) -> None:
        self.t += 1
        if e["kind"] == "mmap_pages":
            shot = Snapshot(e["step"], e["label"], e["pages"], e["resident"], _mask(e))
            self.snapshots[e["allocator"]] = self.snapshots.get(e["allocator"], ()) + (shot,)

    def snapshot(self) -> dict[str, tuple]:
        return dict(self.snapshots)


def _first_file(trace):
    return next((e["allocator"] for e in trace.events if e["kind"] == "mmap_pages"), None)


def pages_facts(trace, t: int | None = None, steps=None, *, allocator: str | None = None) -> PagesFacts:
    """The page snapshots of one mapped file up to ``t`` (no matplotlib), from the trace's one replay."""
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    replay = replay_of(trace)
    if allocator is None:
        allocator = replay.facts("mapped file", lambda: _first_file(trace))
    f = PagesFacts(t, step_label(trace, t, steps), allocator)
    if t >= 0:
        f.snapshots = list(replay.follow(PagesReplayer, t).get(allocator, ()))
    return f


def facts_text(f: PagesFacts) -> str:
    if not f.snapshots:
        return f"Mapped pages at {f.when}: no page snapshot of a mapped file yet."
    lines = [f"Pages of {f.allocator!r} in memory, {len(f.snapshots)} snapshot(s) up to {f.when}:"]
    for s in f.snapshots:
        lines.append(f"  event {s.step} {s.label or ''}: {s.resident:,} of {s.pages:,} pages resident "
                     f"({s.resident / s.pages:.0%})")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, allocator: str | None = None, **_) -> str:
    return facts_text(pages_facts(trace, t, steps, allocator=allocator))


class PagesPainter(Painter):
    """The mapped-pages picture of one trace; ``draw(t)`` shows the snapshots up to ``t``."""

    def __init__(self, trace, *, allocator: str | None = None, width: float = DEFAULT_WIDTH):
        trace = as_trace(trace)
        super().__init__(trace, allocator=allocator)
        last = pages_facts(trace, None, allocator=allocator)
        self.rows = max(1, len(last.snapshots))
        self.pages = max((s.pages for s in last.snapshots), default=1)
        self.bins = min(MAX_BINS, self.pages)
        self.fig = fig = new_figure(width, 1.6 + 0.35 * self.rows)
        self.ax = ax = fig.add_subplot(1, 1, 1)
        ax.set_xlim(0, self.pages)
        ax.set_ylim(self.rows, 0)
        ax.set_yticks([i + 0.5 for i in range(len(last.snapshots))],
                      [s.label or f"event {s.step}" for s in last.snapshots])
        ax.set_xlabel(f"page of the file ({self.pages:,} pages"
                      + (f"; each column {self.pages / self.bins:.1f} pages)" if self.bins < self.pages else ")"))
        from matplotlib.colors import LinearSegmentedColormap
        self.cmap = LinearSegmentedColormap.from_list("resident", ["#FFFFFF", palette.OKABE_ITO["blue"]])
        self.image = ax.imshow(np.zeros((self.rows, self.bins)), aspect="auto", cmap=self.cmap, vmin=0, vmax=1,
                               extent=(0, self.pages, self.rows, 0), interpolation="nearest")
        self.title = fig.suptitle("")
        fig.subplots_adjust(left=0.22, right=0.97, top=0.82, bottom=0.28 if self.rows < 3 else 0.15)

    def dynamic_artists(self) -> list:
        return [self.image, self.title]

    def facts(self, t, steps=None):
        return pages_facts(self.trace, t, steps, **self.options)

    def update(self, f: PagesFacts) -> None:
        grid = np.full((self.rows, self.bins), np.nan)
        for i, s in enumerate(f.snapshots):
            edges = np.linspace(0, s.pages, self.bins + 1).astype(int)
            grid[i] = [s.mask[a:b].mean() if b > a else 0 for a, b in zip(edges[:-1], edges[1:])]
        self.image.set_data(np.nan_to_num(grid, nan=0.0))
        s = f.snapshots[-1] if f.snapshots else None
        self.title.set_text("Mapped file pages in memory" + (f": {s.resident:,} of {s.pages:,} at the last "
                                                             f"snapshot ({f.when})" if s else f" ({f.when})"))

    def text(self, f: PagesFacts) -> str:
        return facts_text(f)


def render(trace, t: int | None = None, steps=None, *, allocator: str | None = None,
           width: float = DEFAULT_WIDTH):
    """The mapped-pages picture at ``t`` (``None``: the end)."""
    return PagesPainter(trace, allocator=allocator, width=width).draw(t, steps)
