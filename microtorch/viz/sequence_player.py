"""A player over any sequence of pictures: ``render(k)`` for k = 0 … n − 1, one slider.

The trace player (:mod:`~microtorch.viz.player`) steps through a recorded trace; the
planning pictures step through something else — the updates of the liveness iteration,
the buffers a planner places one by one, the instructions of a program. This is the same
controls (▶ Play, ◀ back, a slider, forward ▶) over a pure function of the step::

    mt.viz.sequence_player(lambda k: packing.render(plan, k + 1),
                           n=len(plan.order), describe=lambda k: packing.describe(plan, k + 1))

Each step's HTML is kept once drawn, so scrubbing back costs nothing. The panel shows its
text description under the picture (``describe(k)``), as every panel does.
"""
from __future__ import annotations

import html

from .player import _require_widgets, to_html


class SequencePlayer:
    """The widgets (``box``) and the step shown (``k``, from 0)."""

    def __init__(self, render, n: int, describe=None, *, title: str = "", start: int = 0, interval: int = 900,
                 labels=None):
        W = _require_widgets()
        if n < 1:
            raise ValueError(f"a sequence player needs at least one step, got n={n}")
        self.render, self.describe, self.n, self.title, self.labels = render, describe, n, title, labels
        self._cache: dict = {}
        start = max(0, min(start if start >= 0 else n + start, n - 1))
        self.play = W.Play(value=start + 1, min=1, max=n, step=1, interval=interval, description="Play",
                           tooltip="Play through the steps (and pause)", layout=W.Layout(flex="0 0 auto"))
        self.slider = W.IntSlider(value=start + 1, min=1, max=n, step=1, description="Step",
                                  tooltip=f"Drag to any step (1 to {n})", continuous_update=True,
                                  layout=W.Layout(flex="1 1 auto", min_width="160px", max_width="640px"))
        self.link = W.jslink((self.play, "value"), (self.slider, "value"))
        self.back = W.Button(description="◀ back", tooltip="Go back one step", layout=W.Layout(width="auto"))
        self.forward = W.Button(description="forward ▶", tooltip="Go forward one step", layout=W.Layout(width="auto"))
        self.back.on_click(lambda _: self.go(self.k - 1))
        self.forward.on_click(lambda _: self.go(self.k + 1))
        self.label = W.HTML(layout=W.Layout(width="100%", margin="2px 0 6px 0"))
        self.panel = W.HTML(layout=W.Layout(width="100%", overflow="auto"))
        self.slider.observe(lambda change: self._show(change["new"] - 1), names="value")
        controls = W.HBox([self.play, self.back, self.slider, self.forward],
                          layout=W.Layout(flex_flow="row wrap", align_items="center", width="100%"))
        self.box = W.VBox([controls, self.label, self.panel], layout=W.Layout(width="100%"))
        self.box.player = self
        self._show(start)

    @property
    def k(self) -> int:
        return self.slider.value - 1

    def go(self, k: int) -> None:
        self.slider.value = max(1, min(int(k) + 1, self.n))

    def html_at(self, k: int) -> str:
        if k not in self._cache:
            body = to_html(self.render(k))
            if self.describe is not None:
                body += ("<details><summary>Text description</summary><pre style=\"white-space:pre-wrap\">"
                         f"{html.escape(self.describe(k))}</pre></details>")
            self._cache[k] = body
        return self._cache[k]

    def _show(self, k: int) -> None:
        what = self.labels(k) if callable(self.labels) else (self.labels[k] if self.labels else "")
        self.label.value = (f"<b>{html.escape(self.title)}</b> — step {k + 1} of {self.n}"
                            + (f": {html.escape(str(what))}" if what else ""))
        self.panel.value = self.html_at(k)
        self.back.disabled = k <= 0
        self.forward.disabled = k >= self.n - 1


def sequence_player(render, n: int, describe=None, **options):
    """An ipywidgets box stepping ``render(k)`` through k = 0 … n − 1 (see the module docstring)."""
    return SequencePlayer(render, n, describe, **options).box


def liveness_player(program, **options):
    """The fixed-point iteration of ``program``'s liveness, one block update per step."""
    from . import fixed_point

    lv = program.liveness()
    return sequence_player(lambda k: fixed_point.render(program, k), len(lv.history),
                           lambda k: fixed_point.describe(program, k), title="Liveness, solved by iteration",
                           labels=lambda k: f"pass {lv.history[k].iteration}, block {lv.history[k].block}"
                           + (" changed" if lv.history[k].changed else " unchanged"), **options)


def packing_player(plan, **options):
    """``plan``'s buffers placed one at a time, in the planner's order."""
    from . import packing

    order = plan.order
    return sequence_player(lambda k: packing.render(plan, k + 1), len(order), lambda k: packing.describe(plan, k + 1),
                           title=f"Packing: {plan.strategy}",
                           labels=lambda k: f"placing {plan.program.buffers[order[k]].label}", **options)


def instruction_player(program, **options):
    """The liveness picture at each instruction of ``program``."""
    from . import live_sets

    return sequence_player(lambda k: live_sets.render(program, k), len(program.instructions),
                           lambda k: live_sets.describe(program, k), title="Liveness by instruction",
                           labels=lambda k: program.instructions[k].text, **options)
