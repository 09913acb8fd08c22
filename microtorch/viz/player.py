"""The step-through player: one step index, many panels, all replaying one trace.

``player(trace)`` returns an ipywidgets box::

    [Play ▶] [◀ back] [step slider ─────●──] [forward ▶]
    step 5 of 21 · event 28 (op): forward: Matmul(h [4, 5], W2 [5, 1]) → ...
    <each panel: render(trace, t), redrawn in place, with its text description>

Widgets only move the step; every panel is a pure ``render(trace, t)`` of the recorded
trace, so scrubbing backwards is as cheap as forwards and every panel always shows the
same moment. ``steps`` chooses what one step is: ``"ops"`` (forward ops, the start of
backward, each node run, each gradient accumulation — what a student scrubs through),
``"events"`` (every event, memory traffic included), a list of event kinds, or a
predicate on events.

Panels come from :data:`PANELS` by name. Adding a picture is one entry::

    register_panel("arena", "microtorch.viz.arena:render", "microtorch.viz.arena:describe")

A panel's ``render`` may return anything displayable: an object with ``to_html()``
(e.g. :class:`~microtorch.viz.dot.GraphPicture`), a matplotlib ``Figure`` (drawn to SVG
and closed, so no figure leaks), or anything with ``_repr_html_``/``_repr_svg_``.
"""
from __future__ import annotations

import html
import importlib
import io
import itertools
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from .events import describe_event, events_of, select_steps

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
    ``describe(trace, t, **options) -> str``. Either may be given as ``"module:function"``
    so registering a panel imports nothing."""

    name: str
    render: Callable | str
    describe: Callable | str | None = None
    title: str = ""

    def _resolve(self, fn):
        if isinstance(fn, str):
            module, _, attr = fn.partition(":")
            fn = getattr(importlib.import_module(module), attr)
        return fn

    def draw(self, trace, t: int, options: dict) -> Any:
        return self._resolve(self.render)(trace, t, **options)

    def text(self, trace, t: int, options: dict) -> str | None:
        if self.describe is None:
            return None
        return self._resolve(self.describe)(trace, t, **options)


#: Panels by name.
PANELS: dict[str, Panel] = {}


def register_panel(name: str, render: Callable | str, describe: Callable | str | None = None,
                   title: str = "") -> Panel:
    """Make ``name`` usable in ``player(trace, panels=[name])``."""
    PANELS[name] = Panel(name, render, describe, title or name)
    return PANELS[name]


register_panel("graph", "microtorch.viz.graph:render", "microtorch.viz.graph:describe",
               "Computation graph")


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
    """HTML for one panel's picture (closes matplotlib figures it was given)."""
    if hasattr(obj, "to_html"):
        out = obj.to_html()
        return _fit_svg(out) if out.lstrip().startswith("<svg") else out
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
    return "<pre>" + html.escape(str(obj)) + "</pre>"


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
    it; it keeps a reference back as ``box.player``). ``step`` is the position on the
    step axis, ``t`` the event index it stands for; ``panel_html[name]`` is what each
    panel shows now.
    """

    def __init__(self, trace, panels=("graph",), steps="ops", *, start: int | str = 0,
                 interval: int = 800, options: dict | None = None, cache: int = 256):
        W = _require_widgets()
        self.trace = trace
        self.panels = [_panel(p) for p in ([panels] if isinstance(panels, str) else panels)]
        self.options = {p.name: dict((options or {}).get(p.name, {})) for p in self.panels}
        # with no step selected, show the last event — unless the engine did nothing at all
        # (a trace's opening ``baseline`` only describes what was there before)
        did = [i for i, e in enumerate(events_of(trace)) if e["kind"] != "baseline"]
        self.steps = select_steps(trace, steps) or ([did[-1]] if did else [-1])
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = cache
        last = len(self.steps) - 1
        if isinstance(start, str):  # an event kind: the first step showing one
            events = events_of(trace)
            start = next((k for k, i in enumerate(self.steps) if i >= 0 and events[i]["kind"] == start), 0)
        start = max(0, min(start if start >= 0 else last + 1 + start, last))

        self.play = W.Play(value=start, min=0, max=last, step=1, interval=interval,
                           description="Play", tooltip="Play through the steps (and pause)")
        self.slider = W.IntSlider(value=start, min=0, max=last, step=1, description="Step",
                                  tooltip="Drag to move to any step", continuous_update=True,
                                  layout=W.Layout(width="50%"))
        self.link = W.jslink((self.play, "value"), (self.slider, "value"))  # moves in the browser
        self.back = W.Button(description="◀ back", tooltip="Go back one step",
                             layout=W.Layout(width="auto"))
        self.forward = W.Button(description="forward ▶", tooltip="Go forward one step",
                                layout=W.Layout(width="auto"))
        self.back.on_click(lambda _: self.go(self.slider.value - 1))
        self.forward.on_click(lambda _: self.go(self.slider.value + 1))
        self.label = W.HTML(description="Now:", tooltip="What the engine did at this step")
        self.panel_widgets = {p.name: W.HTML(layout=W.Layout(width="100%", overflow="auto"))
                              for p in self.panels}
        self.panel_html: dict[str, str] = {}
        self.slider.observe(self._on_value, names="value")

        controls = W.HBox([self.play, self.back, self.slider, self.forward])
        self.box = W.VBox([controls, self.label, *self.panel_widgets.values()])
        self.box.player = self
        self._show(start)

    # -- moving ---------------------------------------------------------------------------------
    @property
    def step(self) -> int:
        return self.slider.value

    @property
    def t(self) -> int:
        """The event index the panels show."""
        return self.steps[self.slider.value]

    def go(self, step: int) -> None:
        """Move every panel to position ``step`` on the step axis (clamped to the ends)."""
        self.slider.value = max(self.slider.min, min(int(step), self.slider.max))

    def _on_value(self, change) -> None:
        self._show(change["new"])

    # -- drawing --------------------------------------------------------------------------------
    def _show(self, k: int) -> None:
        t = self.steps[k]
        n = len(self.steps)
        kind = events_of(self.trace)[t]["kind"] if t >= 0 else "-"
        self.label.value = (f"<b>step {k + 1} of {n}</b> · event {t} ({html.escape(kind)}): "
                            f"{html.escape(describe_event(self.trace, t))}")
        for p in self.panels:
            self.panel_html[p.name] = self._panel_html(p, t)
            self.panel_widgets[p.name].value = self.panel_html[p.name]
        self.back.disabled = k <= 0
        self.forward.disabled = k >= n - 1

    def _panel_html(self, p: Panel, t: int) -> str:
        key = (p.name, t)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        opts = self.options[p.name]
        try:
            body = to_html(p.draw(self.trace, t, opts))
            text = p.text(self.trace, t, opts)
        except Exception as exc:  # a broken panel must not take the player down
            body = (f"<pre>panel {html.escape(p.name)!s} failed at event {t}: "
                    f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</pre>")
            text = None
        if text:
            body += ("<details><summary>Text description</summary><pre style=\"white-space:"
                     f"pre-wrap\">{html.escape(text)}</pre></details>")
        self._cache[key] = body
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return body


def player(trace, panels=("graph",), steps="ops", *, start: int | str = 0, interval: int = 800,
           options: dict | None = None):
    """An ipywidgets box that steps every panel through ``trace`` together.

    ``panels``: registered names (see :data:`PANELS`), :class:`Panel` objects, or render
    functions ``render(trace, t)``. ``steps``: ``"ops"``, ``"events"``, a list of event
    kinds, or a predicate. ``start``: the first step shown (negative counts from the end), or
    an event kind such as ``"backward"``: the first step showing one.
    ``interval``: milliseconds per step when playing. ``options``: per-panel keyword
    arguments, e.g. ``{"graph": {"show_saved": True, "max_nodes": 20}}``.

    The returned box has ``.player`` (the :class:`Player`: ``.slider``, ``.play``,
    ``.back``, ``.forward``, ``.label``, ``.panel_widgets``, ``.go(step)``, ``.t``).
    """
    return Player(trace, panels, steps, start=start, interval=interval, options=options).box
