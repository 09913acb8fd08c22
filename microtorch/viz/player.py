"""The step-through player: one step index, many panels, all replaying one trace.

``player(trace, panels=["graph", "arena", "refcounts"])`` returns an ipywidgets box::

    [▶ Play] [◀ back] [Step ────●──── 5] [forward ▶]
    Now — step 5 of 21 · event 28 (op): forward: Matmul(h [4, 5], W2 [5, 1]) → ...
    <each panel: render(trace, t), redrawn in place, with its text description>

**One notion of "when".** The slider counts *steps* from 1 (its readout is the step
number); each step shows one *event* of the trace. Everything the player shows says it the
same way: "step 5 of 21 · event 28" — the "Now" line, the graph's header, each figure's
title (panels are handed the step axis as ``steps=``; drawn on their own they say
"event 28 of 267").

Widgets only move the step; every panel is a pure ``render(trace, t)`` of the recorded
trace, so scrubbing backwards is as cheap as forwards and every panel always shows the
same moment. ``steps`` chooses what one step is: ``"ops"`` (forward ops, the start of
backward, each node run, each gradient accumulation — what a student scrubs through),
``"events"`` (every event, memory traffic included), a list of event kinds, or a
predicate on events. ``layout="stacked"`` puts the panels one under the other,
``layout="side"`` side by side (wrapping onto new rows on narrow screens); in a side layout
a list inside ``panels`` is one column: ``panels=["graph", ["arena", "liveness"]]`` puts the
graph beside the arena and the liveness picture stacked.

Panels come from :data:`PANELS` by name: ``graph``, ``arena``, ``pool``, ``refcounts``,
``liveness``. Adding a picture is one entry::

    register_panel("mine", "mypkg.pictures:render", "mypkg.pictures:describe")

A panel's ``render`` may return anything displayable: an object with ``to_html()``
(e.g. :class:`~microtorch.viz.dot.GraphPicture`), a matplotlib ``Figure`` (drawn to SVG;
a pyplot figure is closed afterwards, so no figure leaks), or anything with
``_repr_html_``/``_repr_svg_``. If ``render`` (or ``describe``) takes a ``steps``
parameter it gets the player's step axis.

**Redrawing in place, fast.** A panel registered with a ``painter`` (the built-in matplotlib
panels: :class:`~microtorch.viz.figure.Painter` subclasses) keeps one figure for the
player's lifetime and redraws only what changed between steps (see
:meth:`~microtorch.viz.figure.Painter.svg`); its figures are never registered with pyplot,
so the number of open pyplot figures does not change while scrubbing. Every panel's HTML
for a step is kept (the last ``cache`` steps), so stepping back costs nothing.
``benchmarks/player.py`` measures a step of the whole player.
"""
from __future__ import annotations

import html
import importlib
import inspect
import io
import itertools
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from .events import describe_event, events_of, select_steps, step_label

try:
    import ipywidgets as widgets
except ImportError:  # pragma: no cover - exercised only without the viz extra
    widgets = None


# ---------------------------------------------------------------------------------------------
# the panel registry
# ---------------------------------------------------------------------------------------------
@dataclass
class Panel:
    """A named picture: ``render(trace, t, **options)`` and, optionally, its text form
    ``describe(trace, t, **options) -> str``; ``painter``: a
    :class:`~microtorch.viz.figure.Painter` class ``painter(trace, **options)`` the player
    keeps to redraw in place. Each may be given as ``"module:name"`` so registering a panel
    imports nothing."""

    name: str
    render: Callable | str
    describe: Callable | str | None = None
    title: str = ""
    painter: Callable | str | None = None
    _takes_steps: dict = field(default_factory=dict, repr=False, compare=False)

    def _resolve(self, fn):
        if isinstance(fn, str):
            module, _, attr = fn.partition(":")
            fn = getattr(importlib.import_module(module), attr)
        return fn

    def _call(self, which: str, fn, trace, t: int, steps, options: dict):
        fn = self._resolve(fn)
        takes = self._takes_steps.get(which)
        if takes is None:
            try:
                takes = "steps" in inspect.signature(fn).parameters
            except (TypeError, ValueError):
                takes = False
            self._takes_steps[which] = takes
        return fn(trace, t, steps=steps, **options) if takes else fn(trace, t, **options)

    def draw(self, trace, t: int, options: dict, steps=None) -> Any:
        return self._call("render", self.render, trace, t, steps, options)

    def text(self, trace, t: int, options: dict, steps=None) -> str | None:
        if self.describe is None:
            return None
        return self._call("describe", self.describe, trace, t, steps, options)

    def make_painter(self, trace, options: dict):
        """A painter for ``trace`` (None if the panel has none)."""
        if self.painter is None:
            return None
        return self._resolve(self.painter)(trace, **options)


#: Panels by name.
PANELS: dict[str, Panel] = {}


def register_panel(name: str, render: Callable | str, describe: Callable | str | None = None,
                   title: str = "", painter: Callable | str | None = None) -> Panel:
    """Make ``name`` usable in ``player(trace, panels=[name])``."""
    PANELS[name] = Panel(name, render, describe, title or name, painter)
    return PANELS[name]


register_panel("graph", "microtorch.viz.graph:render", "microtorch.viz.graph:describe",
               "Computation graph")
for _name, _class, _title in (("arena", "ArenaPainter", "Arena occupancy"),
                              ("pool", "PoolPainter", "Pool size classes"),
                              ("refcounts", "RefcountPainter", "Storage refcounts"),
                              ("liveness", "LivenessPainter", "Storage lifetimes"),
                              ("buddy", "BuddyPainter", "Buddy tree"),
                              ("threads", "ThreadPainter", "Thread caches"),
                              ("mapped", "PagesPainter", "Mapped file pages"),
                              ("numa", "NumaPainter", "NUMA placement (model)")):
    register_panel(_name, f"microtorch.viz.{_name}:render", f"microtorch.viz.{_name}:describe", _title,
                   f"microtorch.viz.{_name}:{_class}")


def _panel(p) -> Panel:
    if isinstance(p, Panel):
        return p
    if isinstance(p, str):
        try:
            return PANELS[p]
        except KeyError:
            raise KeyError(f"no panel named {p!r}; registered panels: {', '.join(PANELS)}") from None
    if callable(p):
        return Panel(getattr(p, "__name__", "panel"), p)
    raise TypeError(f"a panel is a registered name, a Panel or a render function, got {p!r}")


# ---------------------------------------------------------------------------------------------
# anything displayable -> HTML
# ---------------------------------------------------------------------------------------------
#: A text description's layout: wrapped at spaces only. (Jupyter styles output ``<pre>`` with
#: ``word-break: break-all``, which would cut words — "sa / ving" — at the panel's edge.)
DESCRIPTION_STYLE = "white-space:pre-wrap; word-break:normal; overflow-wrap:break-word"


def description_html(text: str) -> str:
    """A panel's text description, folded under the picture."""
    return (f'<details><summary>Text description</summary><pre style="{DESCRIPTION_STYLE}">'
            f"{html.escape(text)}</pre></details>")


_svg_ids = itertools.count(1)


def _own_ids(svg: str) -> str:
    """Give the SVG's ids a unique prefix. Inline SVGs share one HTML document, and
    ``url(#l_0)`` (a Graphviz gradient, a matplotlib clip path) would otherwise resolve
    to whichever picture on the page defined ``l_0`` first."""
    prefix = f"mt{next(_svg_ids)}-"
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)


def _fit_svg(svg: str) -> str:
    """Let an SVG shrink to the width it is shown in, never grow past its natural size;
    and make its ids unique on the page."""
    svg = _own_ids(svg)
    def fix(m: re.Match) -> str:  # keep width/height (natural size), let CSS shrink it
        tag = re.sub(r'\sstyle="[^"]*"', "", m.group(0))
        return tag[:-1] + ' style="max-width:100%; height:auto">'
    return re.sub(r"<svg\b[^>]*>", fix, svg, count=1)


def to_html(obj) -> str:
    """HTML for one panel's picture (closes pyplot figures it was given)."""
    if hasattr(obj, "to_html"):
        out = obj.to_html()
        return _fit_svg(out) if out.lstrip().startswith("<svg") else out
    if hasattr(obj, "facts") and callable(getattr(obj, "svg", None)):  # a PanelFigure
        return _fit_svg(obj.svg())
    if type(obj).__module__.startswith("matplotlib") and hasattr(obj, "savefig"):
        buf = io.StringIO()
        obj.savefig(buf, format="svg", bbox_inches="tight")
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close(obj)
        return _fit_svg(buf.getvalue()[buf.getvalue().find("<svg"):])
    for method, wrap in (("_repr_html_", None), ("_repr_svg_", _fit_svg)):
        if hasattr(obj, method):
            out = getattr(obj, method)()
            if out is not None:
                return wrap(out) if wrap else out
    return f'<pre style="{DESCRIPTION_STYLE}">' + html.escape(str(obj)) + "</pre>"


# ---------------------------------------------------------------------------------------------
# the player
# ---------------------------------------------------------------------------------------------
def _require_widgets():
    if widgets is None:
        raise ImportError("the player needs ipywidgets: `pip install ipywidgets` "
                          "(or `pip install -e '.[viz]'`)")
    return widgets


class Player:
    """The widgets of one player, and the step they all show.

    ``box`` is the ipywidgets container to display (the :func:`player` function returns
    it; it keeps a reference back as ``box.player``). ``step`` is the step number shown
    (counted from 1, as the slider's readout), ``steps`` the event index of every step,
    ``t`` the event the current step shows; ``panel_html[name]`` is what each panel shows
    now.
    """

    def __init__(self, trace, panels=("graph",), steps="ops", *, start: int | str = 1,
                 interval: int = 800, options: dict | None = None, cache: int = 256,
                 layout: str = "stacked"):
        W = _require_widgets()
        if layout not in ("stacked", "side"):
            raise ValueError(f"layout must be 'stacked' or 'side', got {layout!r}")
        self.trace = trace
        # a list inside `panels` is a column of the side layout (one under the other)
        columns = [[_panel(q) for q in p] if isinstance(p, (list, tuple)) else [_panel(p)]
                   for p in ([panels] if isinstance(panels, str) else panels)]
        self.panels = [p for column in columns for p in column]
        self.options = {p.name: dict((options or {}).get(p.name, {})) for p in self.panels}
        # with no step selected, show the last event — unless the engine did nothing at all
        # (a trace's opening ``baseline`` only describes what was there before)
        did = [i for i, e in enumerate(events_of(trace)) if e["kind"] != "baseline"]
        self.steps = select_steps(trace, steps) or ([did[-1]] if did else [-1])
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = cache
        self._painters: dict[str, Any] = {}
        n = len(self.steps)
        if isinstance(start, str):  # an event kind: the first step showing one
            events = events_of(trace)
            start = next((k + 1 for k, i in enumerate(self.steps) if i >= 0 and events[i]["kind"] == start), 1)
        start = max(1, min(start if start >= 0 else n + 1 + start, n))

        self.play = W.Play(value=start, min=1, max=n, step=1, interval=interval,
                           description="Play", tooltip="Play through the steps (and pause)",
                           layout=W.Layout(flex="0 0 auto"))
        self.slider = W.IntSlider(value=start, min=1, max=n, step=1, description="Step",
                                  tooltip=f"Drag to any step (1 to {n}); the number is the step shown",
                                  continuous_update=True,
                                  layout=W.Layout(flex="1 1 auto", min_width="160px", max_width="640px"))
        self.link = W.jslink((self.play, "value"), (self.slider, "value"))  # moves in the browser
        self.back = W.Button(description="◀ back", tooltip="Go back one step",
                             layout=W.Layout(width="auto", flex="0 0 auto"))
        self.forward = W.Button(description="forward ▶", tooltip="Go forward one step",
                                layout=W.Layout(width="auto", flex="0 0 auto"))
        self.back.on_click(lambda _: self.go(self.slider.value - 1))
        self.forward.on_click(lambda _: self.go(self.slider.value + 1))
        # no `description`: a described HTML widget takes the widget row's height as its line
        # height, so a wrapped sentence gets huge gaps; "Now" is part of the text instead
        self.label = W.HTML(tooltip="What the engine did at this step",
                            layout=W.Layout(width="100%", margin="2px 0 6px 0"))
        side = layout == "side"
        def shown_alone(p):  # a panel that is a column of the side layout by itself
            return side and [p] in columns

        self.panel_widgets = {
            p.name: W.HTML(layout=W.Layout(flex="1 1 420px" if shown_alone(p) else "0 0 auto", min_width="0",
                                           width="auto" if shown_alone(p) else "100%", overflow="auto",
                                           margin="0 8px 8px 0" if shown_alone(p) else "0 0 8px 0"))
            for p in self.panels}
        self.panel_html: dict[str, str] = {}
        self.slider.observe(self._on_value, names="value")

        controls = W.HBox([self.play, self.back, self.slider, self.forward],
                          layout=W.Layout(flex_flow="row wrap", align_items="center", width="100%"))
        if side:
            shown = W.HBox([self.panel_widgets[c[0].name] if len(c) == 1 else
                            W.VBox([self.panel_widgets[p.name] for p in c],
                                   layout=W.Layout(flex="1 1 420px", min_width="0", margin="0 8px 8px 0"))
                            for c in columns],
                           layout=W.Layout(flex_flow="row wrap", align_items="flex-start", width="100%"))
        else:
            shown = W.VBox(list(self.panel_widgets.values()), layout=W.Layout(width="100%"))
        self.box = W.VBox([controls, self.label, shown], layout=W.Layout(width="100%"))
        self.box.player = self
        self._show(start)

    # -- moving ---------------------------------------------------------------------------------
    @property
    def step(self) -> int:
        """The step shown, counted from 1 (the slider's value)."""
        return self.slider.value

    @property
    def t(self) -> int:
        """The event index the panels show."""
        return self.steps[self.slider.value - 1]

    def when(self) -> str:
        """``"step 5 of 21 · event 28"``: the one way the player says when."""
        return step_label(self.trace, self.t, self.steps) if self.t >= 0 else "before any event"

    def go(self, step: int) -> None:
        """Move every panel to step ``step`` (counted from 1; clamped to the ends)."""
        self.slider.value = max(self.slider.min, min(int(step), self.slider.max))

    def _on_value(self, change) -> None:
        self._show(change["new"])

    # -- drawing --------------------------------------------------------------------------------
    def _show(self, k: int) -> None:
        t = self.steps[k - 1]
        n = len(self.steps)
        kind = events_of(self.trace)[t]["kind"] if t >= 0 else "-"
        when = step_label(self.trace, t, self.steps) if t >= 0 else f"step {k} of {n}"
        self.label.value = (
            '<div style="line-height:1.45; white-space:normal; overflow-wrap:break-word">'
            f"<b>Now</b> — <b>{html.escape(when)}</b> ({html.escape(kind)}): "
            f"{html.escape(describe_event(self.trace, t))}</div>")
        for p in self.panels:
            self.panel_html[p.name] = self._panel_html(p, t)
            self.panel_widgets[p.name].value = self.panel_html[p.name]
        self.back.disabled = k <= 1
        self.forward.disabled = k >= n

    def _painter(self, p: Panel):
        if p.name not in self._painters:
            self._painters[p.name] = p.make_painter(self.trace, self.options[p.name])
        return self._painters[p.name]

    def _panel_html(self, p: Panel, t: int) -> str:
        key = (p.name, t)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        opts = self.options[p.name]
        try:
            painter = self._painter(p)
            if painter is not None:
                body = _fit_svg(painter.svg(t, self.steps))
                text = painter.describe(t, self.steps)
            else:
                body = to_html(p.draw(self.trace, t, opts, self.steps))
                text = p.text(self.trace, t, opts, self.steps)
        except Exception as exc:  # a broken panel must not take the player down
            body = (f"<pre>panel {html.escape(p.name)!s} failed at event {t}: "
                    f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</pre>")
            text = None
        if text:
            body += description_html(text)
        self._cache[key] = body
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return body


def player(trace, panels=("graph",), steps="ops", *, start: int | str = 1, interval: int = 800,
           options: dict | None = None, layout: str = "stacked"):
    """An ipywidgets box that steps every panel through ``trace`` together.

    ``panels``: registered names (see :data:`PANELS`: ``"graph"``, ``"arena"``, ``"pool"``,
    ``"refcounts"``, ``"liveness"``), :class:`Panel` objects, or render functions
    ``render(trace, t)``; with ``layout="side"``, a list among them is one column
    (``["graph", ["arena", "liveness"]]``). ``steps``: ``"ops"``, ``"events"``, a list of event kinds, or a
    predicate. ``start``: the first step shown, counted from 1 (negative counts from the
    end), or an event kind such as ``"backward"``: the first step showing one.
    ``interval``: milliseconds per step when playing. ``options``: per-panel keyword
    arguments, e.g. ``{"graph": {"show_saved": True, "max_nodes": 20}, "refcounts":
    {"max_rows": 12}}``. ``layout``: ``"stacked"`` (panels one under the other) or
    ``"side"`` (side by side, wrapping on narrow screens).

    The returned box has ``.player`` (the :class:`Player`: ``.slider``, ``.play``,
    ``.back``, ``.forward``, ``.label``, ``.panel_widgets``, ``.go(step)``, ``.t``).
    """
    return Player(trace, panels, steps, start=start, interval=interval, options=options,
                  layout=layout).box
