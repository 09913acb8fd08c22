"""The recomputation pictures, tested on their data (headless)."""
import numpy as np
import pytest

import microtorch as mt
from microtorch.utils import checkpoint as C

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def setup():
    mt.manual_seed(0)
    blocks = [mt.nn.Sequential(mt.nn.Linear(16, 16), mt.nn.ReLU()) for _ in range(9)]
    x = mt.randn(8, 16)
    chain = C.layer_costs(blocks, x, repeat=1)
    return blocks, x, chain


def test_frontier_facts_and_figure(setup):
    from microtorch.viz import recompute as R

    blocks, x, chain = setup
    sq = C.sqrt_n(chain)
    measured = {"√n": [C.measure(blocks, sq, x, repeat=1)], "none": [(123.0, 0.5)]}
    fig = R.render_frontier(chain, measured=measured)
    f = fig.facts
    # the curve: optimal schedules, each within its budget, cheaper as the budget grows
    assert f.curve and all(peak <= budget for budget, peak, _ in f.curve)
    times = [t for _, _, t in f.curve]
    assert all(a >= b for a, b in zip(times, times[1:]))
    assert f.points["√n"] == (sq.peak, sq.time)
    assert f.measured["none"] == [(123.0, 0.5)]
    assert f.measured["√n"][0][0] == measured["√n"][0]["peak_bytes"]
    ax = fig.axes[0]
    line = next(l for l in ax.get_lines() if l.get_gid() == "frontier-curve")
    assert list(line.get_xdata()) == [p for _, p, _ in f.curve]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title(loc="left")
    assert "√n measured" in fig.description and "frontier" in fig.description
    assert "<svg" in fig.svg()


def test_schedule_picture_shows_checkpoints_and_recompute(setup):
    from microtorch.viz import recompute as R

    blocks, x, chain = setup
    sq = C.sqrt_n(chain)
    plain = C.no_checkpoint(chain)
    after, before = C.trace_step(blocks, sq, x), C.trace_step(blocks, plain, x)
    fig = R.render_schedule(sq, after, before)
    f = fig.facts
    assert f.recomputed == list(range(6)) and f.kept_outputs == [2, 5]
    assert len(f.recompute_spans) == 2 and all(0 < a < b <= 1 for a, b in f.recompute_spans)
    # the measured peak of the recorded step is the model's, and below the plain one
    assert abs(f.measured_peak - sq.peak) <= 16
    assert f.before_peak > f.measured_peak
    ax = fig.axes[0]
    boxes = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("layer-")}
    assert len(boxes) == 9
    assert boxes["layer-0"].get_hatch() == "//" and boxes["layer-8"].get_hatch() is None
    curve = next(l for l in fig.axes[1].get_lines() if l.get_gid() == "curve-after")
    assert np.array_equal(curve.get_ydata(), f.after)
    assert "2 recomputation(s)" in fig.description
    # without traces: the chain alone
    assert R.render_schedule(sq).facts.after is None


def test_budget_player_moves_the_picture(setup):
    pytest.importorskip("ipywidgets")
    from microtorch.viz import recompute as R

    blocks, x, chain = setup
    budgets = [C.min_peak(chain), C.no_checkpoint(chain).peak]
    frames = [(C.optimal(chain, b), C.trace_step(blocks, C.optimal(chain, b), x)) for b in budgets]
    box = R.budget_player(frames, frames[-1][1])
    first = box.picture.value
    assert "<svg" in first and "budget" in box.words.value and "recomputed" in box.words.value
    box.slider.value = 1
    assert box.picture.value != first
    assert "0 of 9 layers run twice" in box.words.value
    with pytest.raises(ValueError, match="at least one"):
        R.budget_player([])
