"""The one place microtorch touches a private matplotlib name: text sizes kept between drawings.

**Why.** The step-through player redraws every panel on each step, and measuring text is
most of the cost of redrawing a figure whose words barely change. matplotlib caches text
sizes per renderer, and every ``savefig`` makes a new renderer, so each drawing measures
every word again. While our own figures are written as SVG (:func:`microtorch.viz.figure.to_svg`),
:func:`kept` swaps matplotlib's private ``matplotlib.text._get_text_metrics_with_cache`` for
one that remembers sizes across drawings — SVG text sizes depend only on the text, the
font and the dpi — and puts the original back afterwards. Nothing else is changed, and
only inside the ``with`` block.

**If matplotlib renames it.** :func:`kept` then draws without the cache (correct, slower),
and ``tests/test_viz_text_metrics.py`` fails, naming :data:`PRIVATE_NAME`, so the loss is
seen rather than silently paid in player latency.
"""
from __future__ import annotations

import contextlib
import re

#: the private matplotlib function this module replaces while our figures are drawn
PRIVATE_NAME = "_get_text_metrics_with_cache"

_metrics: dict = {}
_DIGIT = re.compile(r"[0-9]")
_LIMIT = 20_000  # sizes kept before the store starts over


def available() -> bool:
    """Whether this matplotlib still has :data:`PRIVATE_NAME` (with its five arguments)."""
    import matplotlib.text as mtext

    return callable(getattr(mtext, PRIVATE_NAME, None))


@contextlib.contextmanager
def kept():
    """While the block runs, text sizes measured by matplotlib are kept for the next drawing."""
    import matplotlib.text as mtext

    original = getattr(mtext, PRIVATE_NAME, None)
    if original is None:  # another matplotlib: draw without the cache (the test says so)
        yield
        return

    def measure(renderer, text, fontprop, ismath, dpi):
        # digits are all one width in the fonts we use (tabular figures), so "step 12 of 40"
        # measures like "step 00 of 00": a caption that only counts up is measured once
        key = (_DIGIT.sub("0", text) if not ismath else text, hash(fontprop), ismath, dpi)
        got = _metrics.get(key)
        if got is None:
            if len(_metrics) > _LIMIT:
                _metrics.clear()
            got = _metrics[key] = original(renderer, text, fontprop, ismath, dpi)
        return got

    setattr(mtext, PRIVATE_NAME, measure)
    try:
        yield
    finally:
        setattr(mtext, PRIVATE_NAME, original)
