"""What the matplotlib pictures share: a figure that shows itself, its facts and its words.

Pictures use :class:`matplotlib.figure.Figure` directly, never ``pyplot``: a figure made
this way is not registered with pyplot's figure manager, so drawing any number of them
opens no window and leaks nothing (``len(plt.get_fignums())`` does not change), and it
is freed like any Python object.

:class:`PanelFigure` is such a figure plus ``facts`` (the plain data it draws — what tests
assert on) and ``description`` (the same facts in words). It shows itself in Jupyter as SVG with
the text as the plain-text alternative, whether or not pyplot's inline backend is loaded.

A :class:`Painter` draws one panel of one trace: it builds its figure once and
:meth:`Painter.draw` updates it for a time ``t``. A panel's ``render(trace, t)`` is
``Painter(trace).draw(t)`` — a fresh figure, a pure function of the trace — and the
player keeps one painter per panel so scrubbing redraws in place.

Sizes come from the data: a width (inches, adjustable) and a height that grows with the
rows to show, within :data:`MIN_HEIGHT` and :data:`MAX_HEIGHT`. In the player the SVG
scales down to the width it is shown in.
"""
from __future__ import annotations

import io
import math
import re

from . import text_metrics

MIN_HEIGHT, MAX_HEIGHT = 2.2, 9.0  # inches
DEFAULT_WIDTH = 9.0  # inches; a panel's ``width=`` option changes it

#: matplotlib settings every picture is drawn with: text stays text in the SVG (it scales,
#: it can be searched, and it is much faster to write than outlines)
RC = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial", "Liberation Sans", "sans-serif"],
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "hatch.linewidth": 0.6,
    "svg.hashsalt": "microtorch",
}


def label_margin(labels, fontsize: float, width: float, lo: float = 0.08, hi: float = 0.4) -> float:
    """The fraction of a ``width``-inch figure that row labels of ``fontsize`` need on the left."""
    longest = max((max(len(line) for line in str(s).split("\n")) for s in labels), default=0)
    return max(lo, min(hi, (longest * fontsize * 0.6 + 14) / 72 / width))


def clamp_height(h: float) -> float:
    return max(MIN_HEIGHT, min(MAX_HEIGHT, h))


def _figure_class():
    from matplotlib.figure import Figure

    class PanelFigure(Figure):
        """A matplotlib figure with the facts it draws (``facts``) and their words (``description``)."""

        facts = None
        description = ""

        def svg(self) -> str:
            """The figure as an ``<svg>`` element (no XML prolog)."""
            return to_svg(self)

        def _repr_mimebundle_(self, include=None, exclude=None):
            return {"image/svg+xml": self.svg(), "text/plain": self.description or repr(self)}

    return PanelFigure


_PanelFigure = None


def new_figure(width: float, height: float):
    """A :class:`PanelFigure` (not registered with pyplot) of ``width`` × ``height`` inches."""
    global _PanelFigure
    if _PanelFigure is None:
        _PanelFigure = _figure_class()
    import matplotlib as mpl

    with mpl.rc_context(RC):
        fig = _PanelFigure(figsize=(width, clamp_height(height)), dpi=100)
    fig.patch.set_facecolor("white")
    return fig


def to_svg(fig) -> str:
    """``fig`` drawn as an ``<svg>`` element (text as text; no prolog)."""
    import matplotlib as mpl

    buf = io.StringIO()
    with mpl.rc_context(RC), text_metrics.kept():
        fig.savefig(buf, format="svg", facecolor="white")
    out = buf.getvalue()
    return out[out.find("<svg"):]


def rc():
    """``with rc():`` — draw with :data:`RC` (fonts, sizes) in effect."""
    import matplotlib as mpl

    return mpl.rc_context(RC)


class Painter:
    """Draws one panel of one trace; ``draw(t)`` updates its one figure to time ``t``.

    Subclasses set ``fig`` in ``__init__`` (static parts: axes, labels, legend) and
    implement ``facts(t)`` (plain data, no matplotlib) and ``update(facts)`` (move the
    artists); ``text(facts)`` gives the words. ``steps``: a player's step axis, so titles
    can say "step 2 of 21 · event 15".

    **Drawing in two layers** (:meth:`svg`, what the player shows). Most of a picture does
    not change from one step to the next — axes, ticks, legends, a Gantt chart's bars —
    and laying out its text is most of the cost of drawing it. A painter lists the artists
    that do change in ``dynamic_artists()``; :meth:`svg` draws everything else once (again
    only when ``static_key(facts)`` changes) and, per step, only the changing artists, and
    stacks the two SVG layers (the changing ones on top). The picture is the same as
    drawing the figure whole (``to_svg(painter.draw(t))``), except that changing artists
    are always drawn above unchanging ones.
    """

    fig = None

    def __init__(self, trace, **options):
        self.trace = trace
        self.options = options
        self._facts_cache: tuple | None = None
        self._static: tuple | None = None  # (static key, SVG of the unchanging layer)
        self.dynamic: list = []  # artists made for one step (removed at the next)

    def dynamic_artists(self) -> list:
        """The artists :meth:`update` changes (the default: the per-step ones in ``dynamic``)."""
        return list(self.dynamic)

    def static_key(self, facts):
        """What the unchanging layer depends on (it is redrawn when this changes)."""
        return None

    def facts(self, t: int | None, steps=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, facts) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def text(self, facts) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _facts(self, t, steps):
        key = (t, tuple(steps) if steps else None)
        if self._facts_cache is None or self._facts_cache[0] != key:
            self._facts_cache = (key, self.facts(t, steps))
        return self._facts_cache[1]

    def draw(self, t: int | None = None, steps=None):
        """The figure, updated to show time ``t`` (the same figure object every call)."""
        f = self._facts(t, steps)
        with rc():
            self.update(f)
        self.fig.facts = f
        self.fig.description = self.text(f)
        return self.fig

    def describe(self, t: int | None = None, steps=None) -> str:
        return self.text(self._facts(t, steps))

    def svg(self, t: int | None = None, steps=None) -> str:
        """The picture at time ``t`` as SVG, drawn in two layers (see the class docstring)."""
        fig = self.draw(t, steps)
        changing = self.dynamic_artists()
        key = self.static_key(fig.facts)
        if self._static is None or self._static[0] != key:
            self._static = (key, _layer(fig, hide=changing))
        return stack(self._static[1], _layer(fig, only=changing))


def _leaves(fig) -> list:
    """Every artist a figure draws, with axes opened up into their parts."""
    out = [fig.patch, *fig.texts, *fig.legends, *fig.lines, *fig.patches, *fig.images]
    for ax in fig.axes:
        out.extend(ax.get_children())
    return out


def _layer(fig, hide=(), only=None) -> str:
    """``fig`` as SVG with the artists in ``hide`` left out — or, with ``only``, with every
    artist but those left out."""
    if only is not None:
        keep = {id(a) for a in only}
        hide = [a for a in _leaves(fig) if id(a) not in keep]
    hidden = [a for a in hide if a.get_visible()]
    for a in hidden:
        a.set_visible(False)
    try:
        return to_svg(fig)
    finally:
        for a in hidden:
            a.set_visible(True)


def stack(below: str, above: str) -> str:
    """One SVG: the drawing of ``above`` on top of ``below`` (two SVGs of one figure, so the
    same size). The upper layer's ids get a suffix so the document keeps unique ids."""
    start = above.index(">", above.index("<svg")) + 1
    body = above[start: above.rindex("</svg>")]
    body = re.sub(r"<metadata>.*?</metadata>", "", body, flags=re.S)
    body = re.sub(r'\bid="([^"]+)"', r'id="\1-up"', body)
    body = re.sub(r"url\(#([^)]+)\)", r"url(#\1-up)", body)
    body = re.sub(r'href="#([^"]+)"', r'href="#\1-up"', body)
    return below[: below.rindex("</svg>")] + body + "</svg>\n"


def titles(ax) -> list:
    """An axes' three title texts (centre, left, right: ``set_title(loc=...)`` fills one)."""
    return [t for t in (getattr(ax, n, None) for n in ("title", "_left_title", "_right_title")) if t is not None]


def remove_all(artists: list) -> None:
    """Take the artists of the previous step off their axes."""
    for a in artists:
        a.remove()
    artists.clear()


def byte_ticks(top: float, n: int = 6) -> tuple[list[float], list[str]]:
    """Tick positions (bytes) from 0 to ``top`` at round numbers of the unit that suits
    ``top`` — ``0, 2,000 B, 4,000 B`` or ``0, 128 KiB, 256 KiB`` — and their labels."""
    if top <= 0:
        return [0], ["0 B"]
    unit, name = (1, "B") if top < 100_000 else (1024, "KiB") if top < 2 * 1024 ** 2 else (1024 ** 2, "MiB")
    span = top / unit
    raw = span / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= 0.75 * raw)
    if name != "B" and span >= 8:  # binary units read best at powers of two
        step = 2 ** math.ceil(math.log2(raw))
    ticks = [i * step for i in range(int(span // step) + 1)]
    fmt = (lambda v: f"{v:,.0f}") if float(step).is_integer() else (lambda v: f"{v:,.1f}")
    return [v * unit for v in ticks], [("0" if v == 0 else f"{fmt(v)} {name}") for v in ticks]


def first_that_fits(ax, variants, fontsize: float, bold: bool = True) -> str:
    """The first of ``variants`` (longest first) whose longest line fits the width of ``ax``
    at ``fontsize`` (estimated from the number of characters; no drawing needed); the last
    one if none does. For titles whose numbers grow: they shorten instead of running past
    the figure's edge."""
    width = ax.get_position().width * ax.figure.get_figwidth() * 72
    per_char = fontsize * (0.6 if bold else 0.53)  # DejaVu Sans: 0.53–0.60 bold, 0.45–0.52 regular
    for words in variants:
        if max(len(line) for line in words.split("\n")) * per_char <= width:
            return words
    return variants[-1]


def legend_columns(labels, width: float, fontsize: float = 8.5, most: int = 6, handlelength: float = 1.6,
                   columnspacing: float = 1.2) -> int:
    """The most columns (up to ``most``) a figure legend of ``labels`` can have and still fit
    a ``width``-inch figure (matplotlib fills a legend column by column)."""
    labels = [str(x) for x in labels]
    for n in range(min(most, len(labels)), 1, -1):
        rows = -(-len(labels) // n)
        columns = [labels[i:i + rows] for i in range(0, len(labels), rows)]
        points = sum(max(len(x) for x in col) * fontsize * 0.6 + (handlelength + 0.8) * fontsize
                     for col in columns) + (len(columns) - 1) * columnspacing * fontsize
        if points <= 0.94 * width * 72:
            return n
    return 1


def points_per_unit(ax) -> float:
    """How many points one data unit of ``ax``'s x axis is wide (from the axes' size in the
    figure: no drawing needed)."""
    lo, hi = ax.get_xlim()
    return ax.get_position().width * ax.figure.get_figwidth() * 72 / (hi - lo)


def text_fits(ax, x0: float, x1: float, text: str, fontsize: float = 8.0, scale: float | None = None) -> bool:
    """Whether ``text`` fits between data x-coordinates ``x0`` and ``x1`` of ``ax``
    (``scale``: :func:`points_per_unit`, if already known)."""
    span = (x1 - x0) * (scale if scale is not None else points_per_unit(ax))
    return span >= len(text) * fontsize * 0.6 + 4


class TextPool:
    """Texts that change every step, reused rather than made anew (making a matplotlib
    ``Text`` costs more than moving one): ``show([(x, y, words), ...])`` puts the first
    texts at those places and hides the rest. ``texts`` lists them all (visible or not)."""

    def __init__(self, ax, **style):
        self.ax, self.style, self.texts = ax, style, []

    def show(self, items) -> None:
        k = 0
        for k, (x, y, words) in enumerate(items, 1):
            if k > len(self.texts):
                self.texts.append(self.ax.text(x, y, words, **self.style))
            else:
                t = self.texts[k - 1]
                t.set_position((x, y))
                t.set_text(words)
                t.set_visible(True)
        for t in self.texts[k:]:
            t.set_visible(False)


# ---------------------------------------------------------------------------------------------
# layout checks: what a reader would see as a cut word or a legend over the data
# ---------------------------------------------------------------------------------------------
def drawn_texts(fig) -> list:
    """``(text, extent)`` for every text ``fig`` draws (visible, not empty), ``extent`` its
    box in display pixels as laid out by matplotlib's renderer. Only texts actually drawn
    count: tick labels outside the view limits, hidden texts and empty ones do not."""
    from matplotlib.text import Text

    drawn = []
    original = Text.draw

    def spy(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip() and self.figure is not None:
            drawn.append((self, self.get_window_extent(renderer)))

    Text.draw = spy
    try:
        with rc():
            fig.draw_without_rendering()
    finally:
        Text.draw = original
    return drawn


def _inside(inner, outer, slack: float = 0.5) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.y0 >= outer.y0 - slack
            and inner.x1 <= outer.x1 + slack and inner.y1 <= outer.y1 + slack)


def clipped_texts(fig) -> list[str]:
    """The texts of ``fig`` that are cut: partly outside the figure, or outside the box they
    are clipped to. Each as ``"'words' runs past the right edge"``; empty when none is."""
    problems = []
    edge = fig.bbox
    for text, box in drawn_texts(fig):
        words = text.get_text().replace("\n", " ⏎ ")
        sides = [side for side, cut in (("left", box.x0 < edge.x0 - 0.5), ("right", box.x1 > edge.x1 + 0.5),
                                        ("bottom", box.y0 < edge.y0 - 0.5), ("top", box.y1 > edge.y1 + 0.5))
                 if cut]
        if sides:
            problems.append(f"{words!r} runs past the figure's {' and '.join(sides)} edge")
        elif text.get_clip_on() and text.get_clip_box() is not None and not _inside(box, text.get_clip_box()):
            problems.append(f"{words!r} is cut by its axes")
    return problems


def _data_points(ax):
    """Display coordinates of what ``ax`` plots: line vertices (with points along each
    segment), scatter offsets, bar and patch corners."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    out = []
    for a in ax.get_children():
        if not a.get_visible():
            continue
        if isinstance(a, Line2D):
            xy = np.asarray(a.get_xydata(), dtype=float)
            if len(xy) == 0:
                continue
            pts = a.get_transform().transform(xy)
            pts = pts[np.isfinite(pts).all(axis=1)]
            if len(pts) > 1 and a.get_linestyle() not in ("None", "none", "", " "):
                steps = np.linspace(0, 1, 24)[:, None, None]
                pts = (pts[:-1] + steps * (pts[1:] - pts[:-1])).reshape(-1, 2)
            out.append(pts)
        elif isinstance(a, PathCollection) and len(a.get_offsets()):
            out.append(a.get_offset_transform().transform(np.asarray(a.get_offsets(), dtype=float)))
        elif isinstance(a, Rectangle) and a is not ax.patch and a.get_width() and a.get_height():
            corners = a.get_patch_transform().transform([(0, 0), (1, 0), (1, 1), (0, 1), (0.5, 0.5)])
            out.append(a.get_data_transform().transform(corners))
    return np.concatenate(out) if out else np.zeros((0, 2))


def legends_over_data(fig) -> list[str]:
    """Legends of ``fig`` (an axes' own, or the figure's) that cover plotted data: a line,
    a marker or a bar of an axes they overlap. Each as ``"legend 'a, b' covers data of 'title'"``."""
    import numpy as np

    drawn_texts(fig)  # lays the figure out
    renderer = fig._get_renderer()
    legends = [(lg, None) for lg in fig.legends] + [(ax.get_legend(), ax) for ax in fig.axes if ax.get_legend()]
    problems = []
    for lg, owner in legends:
        if not lg.get_visible():
            continue
        box = lg.get_window_extent(renderer)
        for ax in ([owner] if owner is not None else fig.axes):
            clip = ax.bbox
            pts = _data_points(ax)
            if not len(pts):
                continue
            inside_axes = ((pts[:, 0] >= clip.x0) & (pts[:, 0] <= clip.x1) & (pts[:, 1] >= clip.y0)
                           & (pts[:, 1] <= clip.y1))
            under = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
                     & inside_axes)
            if np.any(under):
                names = ", ".join(t.get_text() for t in lg.get_texts())
                where = ax.get_title() or ax.get_title(loc="left") or ax.get_ylabel() or "an axes"
                problems.append(f"legend {names!r} covers data of {where!r}")
    return problems


def overlapping_texts(fig, ignore_ticks: bool = True) -> list[str]:
    """Pairs of texts of ``fig`` drawn over each other (tick labels left out by default)."""
    from matplotlib.axis import Tick

    texts = drawn_texts(fig)
    if ignore_ticks:
        ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                 for tick in axis.get_major_ticks() + axis.get_minor_ticks() if isinstance(tick, Tick)
                 for t in (tick.label1, tick.label2)}
        texts = [(t, b) for t, b in texts if id(t) not in ticks]
    problems = []
    for i, (a, ba) in enumerate(texts):
        for b, bb in texts[i + 1:]:
            if ba.overlaps(bb) and min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 1 \
                    and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 1:
                problems.append(f"{a.get_text()!r} and {b.get_text()!r} are drawn over each other")
    return problems


def layout_problems(fig, *, legends: bool = True, overlaps: bool = True) -> list[str]:
    """Everything a reader would see as a broken layout in ``fig``: texts cut by the figure's
    edge or their axes (:func:`clipped_texts`), legends over plotted data
    (:func:`legends_over_data`), texts drawn over each other (:func:`overlapping_texts`).
    Empty when the figure is fine; what the tests assert on."""
    out = clipped_texts(fig)
    if legends:
        out += legends_over_data(fig)
    if overlaps:
        out += overlapping_texts(fig)
    return out
