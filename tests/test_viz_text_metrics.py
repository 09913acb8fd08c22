"""The private matplotlib name microtorch.viz.text_metrics swaps is still there, and is put back."""
import inspect

import pytest

pytest.importorskip("matplotlib")

import matplotlib.text as mtext  # noqa: E402

from microtorch.viz import text_metrics  # noqa: E402


def test_matplotlib_still_has_the_private_text_metrics_function():
    # If this fails, matplotlib renamed or removed it: the player still works, but every
    # step measures all its text again. Update text_metrics.PRIVATE_NAME (or drop the module).
    assert text_metrics.available(), (
        f"matplotlib.text.{text_metrics.PRIVATE_NAME} is gone: microtorch.viz.text_metrics "
        "can no longer keep text sizes between drawings")
    params = list(inspect.signature(getattr(mtext, text_metrics.PRIVATE_NAME)).parameters)
    assert params == ["renderer", "text", "fontprop", "ismath", "dpi"], params


def test_swapped_only_inside_the_block_and_sizes_are_the_originals():
    from microtorch.viz.figure import new_figure, to_svg

    original = getattr(mtext, text_metrics.PRIVATE_NAME)
    fig = new_figure(4, 3)
    fig.text(0.1, 0.5, "step 12 of 40")
    with text_metrics.kept():
        assert getattr(mtext, text_metrics.PRIVATE_NAME) is not original
    assert getattr(mtext, text_metrics.PRIVATE_NAME) is original
    svg = to_svg(fig)
    assert "step 12 of 40" in svg and getattr(mtext, text_metrics.PRIVATE_NAME) is original
    keys = [k for k in text_metrics._metrics if k[0] == "step 00 of 00"]
    assert keys and text_metrics._metrics[keys[0]][0] > 0  # measured once, a positive width
    n = len(text_metrics._metrics)
    fig.texts[0].set_text("step 13 of 40")  # the same digits' widths: measured already
    to_svg(fig)
    assert len(text_metrics._metrics) == n
