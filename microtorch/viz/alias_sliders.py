"""The alias player: sliders for a view's offset and strides over the alias picture.

The alias picture (:mod:`~microtorch.viz.alias`) is about layouts, not about a moment of a
trace, so its player moves a layout instead of a time::

    x = mt.arange(24.).reshape(4, 6)
    mt.viz.alias_player(x, x[:, ::2], against=[x[:, 1::2]], names=["moved", "x[:, 1::2]"])

    [offset ──●── 0] [stride 0 ──●── 6] [stride 1 ──●── 2]
    Now — moved = x.as_strided((4, 3), (6, 2), 0): elements 0 … 22 · NO alias: ...
    <mt.viz.alias.render(moved, *against), redrawn as a slider moves, with its text description>

The first view's shape stays; one slider moves its offset and one each of its strides
(in elements, negative strides included). Each position is drawn by the pure function
``mt.viz.alias.render(layout, *against)`` of the layouts — no tensor is made, so a layout
that reaches outside the storage is not drawn: the line above the picture says which
element it would touch and that ``as_strided`` refuses it. As in the step-through player
(:mod:`~microtorch.viz.player`), every position's HTML is kept (the last ``cache``), so
moving back costs nothing.
"""
from __future__ import annotations

import html
from collections import OrderedDict

from . import alias as alias_picture
from .figure import DEFAULT_WIDTH
from .player import DESCRIPTION_STYLE, _fit_svg, _require_widgets, description_html


class AliasPlayer:
    """The widgets of one alias player and the layout they show.

    ``box`` is the container to display (:func:`alias_player` returns it; it keeps a
    reference back as ``box.player``); ``offset`` and ``strides`` are the sliders,
    ``label`` the line above the picture, ``picture`` the HTML widget the picture is drawn
    into; ``layout()`` is the moved view's layout now, :meth:`set` moves the sliders.
    """

    def __init__(self, base, view, *, against=(), names=None, stride_range: int | None = None,
                 exact: bool = True, grid="auto", width: float = DEFAULT_WIDTH, cache: int = 256):
        W = _require_widgets()
        from ..memory.aliasing import layout

        self.base = layout(base)
        start = layout(view)
        if start.storage != self.base.storage:
            raise ValueError("alias_player: the moved view must be a view of base's storage")
        self.against = [layout(v) for v in against]
        self.names = list(names) if names is not None else ["moved"] + [
            getattr(v, "name", None) or f"view {i + 1}" for i, v in enumerate(against)]
        if len(self.names) != 1 + len(self.against):
            raise ValueError(f"{len(self.names)} names for {1 + len(self.against)} views")
        self.shape = start.shape
        self.exact, self.width = exact, width
        if grid == "auto":  # one grid for every position: the picture must not jump between forms
            whole = getattr(base, "ndim", 0) == 2 and base.is_contiguous() and base.numel() == self.base.storage_size
            grid = tuple(base.shape) if whole else None
        self.grid = grid
        n = self.base.storage_size
        reach = stride_range if stride_range is not None else max(n - 1, 1)
        self.offset = W.IntSlider(value=start.offset, min=0, max=n - 1, description="offset",
                                  tooltip="the first element's position in the storage",
                                  continuous_update=True, layout=W.Layout(flex="1 1 220px", max_width="420px"))
        self.strides = [W.IntSlider(value=s, min=-reach, max=reach, description=f"stride {d}",
                                    tooltip=f"elements to step for the next index along dimension {d}",
                                    continuous_update=True, layout=W.Layout(flex="1 1 220px", max_width="420px"))
                        for d, s in enumerate(start.strides)]
        self.label = W.HTML(layout=W.Layout(width="100%", margin="2px 0 6px 0"))
        self.picture = W.HTML(layout=W.Layout(width="100%", overflow="auto"))
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = cache
        for s in [self.offset, *self.strides]:
            s.observe(lambda _: self._show(), names="value")
        controls = W.HBox([self.offset, *self.strides],
                          layout=W.Layout(flex_flow="row wrap", align_items="center", width="100%"))
        self.box = W.VBox([controls, self.label, self.picture], layout=W.Layout(width="100%"))
        self.box.player = self
        self._show()

    def layout(self):
        """The moved view's layout at the sliders' values."""
        from ..memory.aliasing import Layout

        b = self.base
        return Layout(b.storage, self.offset.value, self.shape, tuple(s.value for s in self.strides), b.itemsize,
                      b.storage_size)

    def set(self, offset: int | None = None, strides=None) -> None:
        """Move the sliders (and so the picture) to ``offset`` and ``strides``."""
        if offset is not None:
            self.offset.value = int(offset)
        for slider, s in zip(self.strides, strides or ()):
            slider.value = int(s)

    def call(self) -> str:
        """``base.as_strided((4, 3), (6, 2), 0)``: the moved view as code."""
        la = self.layout()
        return f"as_strided({tuple(la.shape)}, {tuple(la.strides)}, {la.offset})"

    def _show(self) -> None:
        key = (self.offset.value, tuple(s.value for s in self.strides))
        if key not in self._cache:
            self._cache[key] = self._draw()
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        self.label.value, self.picture.value = self._cache[key]

    def _draw(self) -> tuple[str, str]:
        la = self.layout()
        lo, hi = la.extent() or (la.offset, la.offset)
        name = html.escape(self.names[0])
        if lo < 0 or hi >= la.storage_size:
            where = lo if lo < 0 else hi
            words = (f"{self.names[0]} = {self.call()} would touch element {where}, outside the storage's "
                     f"{la.storage_size} elements (0 … {la.storage_size - 1}): as_strided refuses this layout. "
                     "Move the offset or a stride back.")
            return (f'<div style="line-height:1.45"><b>Now</b> — <b>{name}</b>: out of bounds</div>',
                    f'<pre style="{DESCRIPTION_STYLE}">{html.escape(words)}</pre>')
        fig = alias_picture.render(la, *self.against, names=self.names, exact=self.exact, grid=self.grid,
                                   width=self.width)
        verdict = alias_picture._VERDICT_WORDS[fig.facts.verdict]
        line = (f'<div style="line-height:1.45; overflow-wrap:break-word"><b>Now</b> — <b>{name}</b> = '
                f"{html.escape(self.call())}: elements {lo} … {hi} · <b>{html.escape(verdict)}</b></div>")
        return line, _fit_svg(fig.svg()) + description_html(fig.description)


def alias_player(base, view, *, against=(), names=None, stride_range: int | None = None, exact: bool = True,
                 grid="auto", width: float = DEFAULT_WIDTH):
    """An ipywidgets box: sliders for ``view``'s offset and strides (``view`` a view of
    ``base``'s storage; its shape stays), and the alias picture of the moved view against
    the views in ``against``, redrawn as the sliders move.

    ``names``: one per view (the moved one first). ``stride_range``: the sliders run from
    ``-stride_range`` to ``stride_range`` (default: the storage's size − 1). ``exact``,
    ``grid``, ``width``: as in :func:`microtorch.viz.alias.render` (``grid="auto"`` draws a
    2-D contiguous ``base`` as its matrix at every position). The box has ``.player``
    (the :class:`AliasPlayer`: ``.offset``, ``.strides``, ``.label``, ``.picture``,
    ``.set(offset, strides)``, ``.layout()``)."""
    return AliasPlayer(base, view, against=against, names=names, stride_range=stride_range, exact=exact,
                       grid=grid, width=width).box
