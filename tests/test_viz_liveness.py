"""The liveness picture, checked on its data: its bars are the trace's lifetimes, its
curve is the trace's live bytes, and its peak is ``tr.peak()``."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import liveness  # noqa: E402


@pytest.fixture(scope="module")
def tr():
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    with mt.trace() as tr:
        for _ in range(2):
            with mt.memory.step_arena(mt.memory.Arena(capacity=2048)):
                mt.mse_loss(model(x), y).backward()
    return tr


def test_peak_equals_the_traces_peak(tr):
    fig = liveness.render(tr, 10)
    assert fig.facts.peak == tr.peak()
    peak, at = tr.peak()
    ax2 = fig.axes[1]
    marker = next(line for line in ax2.lines if line.get_gid() == "liveness-peak")
    assert list(marker.get_xdata()) == [at] and list(marker.get_ydata()) == [peak]
    assert f"peak {peak:,} B at event {at}" in fig.description
    assert any(f"peak {peak:,} B at event {at}" in t.get_text() for t in ax2.texts)


def test_curve_is_live_bytes_and_now_is_its_value_at_t(tr):
    curve = tr.live_bytes()
    fig = liveness.render(tr, len(tr) // 2)
    line = next(line for line in fig.axes[1].lines if line.get_gid() == "liveness-curve")
    xs, ys = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    rebuilt = [ys[np.searchsorted(xs, i, side="right") - 1] for i in range(len(curve))]  # a step curve
    assert rebuilt == curve
    for t in (0, 5, len(tr) // 3, len(tr) - 1):
        assert liveness.liveness_facts(tr, t).now_bytes == curve[t]


def test_bars_are_the_lifetimes(tr):
    lives = tr.lifetimes()
    painter = liveness.LivenessPainter(tr, max_rows=1000)  # one row per storage
    f = painter.draw(0).facts
    assert not f.shared_rows and len(f.bars) == len(lives)
    for b, lf in zip(f.bars, lives):
        assert (b.storage, b.birth, b.death, b.nbytes) == (lf.storage, lf.birth or 0, lf.death, lf.nbytes)
    sizes = [b.nbytes for b in f.bars]
    big, small = f.bars[sizes.index(max(sizes))], f.bars[sizes.index(min(sizes))]
    assert big.height >= small.height  # bar height by size
    drawn = sum(len(c.get_paths()) for c in painter.fade_colls.values())
    assert drawn == len(lives)
    for t in range(0, len(tr), 11):  # solid bars: exactly the storages live at t
        painter.draw(t)
        solid = sum(len(c.get_paths()) for c in painter.bar_colls.values())
        live = [lf for lf in lives if (lf.birth or 0) <= t and (lf.death is None or t < lf.death)]
        assert solid == len(live) == len(painter.facts(t).live_now)


def test_packed_rows_never_overlap(tr):
    f = liveness.liveness_facts(tr, None, max_rows=5)
    assert f.shared_rows
    by_row = {}
    for b in f.bars:
        by_row.setdefault(b.row, []).append(b)
    for bars in by_row.values():
        bars.sort(key=lambda b: b.birth)
        for a, b in zip(bars, bars[1:]):
            assert a.death is not None and a.death <= b.birth
    most_live = max(len(liveness.liveness_facts(tr, t, max_rows=5).live_now) for t in range(len(tr)))
    assert f.n_rows >= most_live


def test_titles_labels_text_and_the_cursor(tr):
    t = len(tr) // 4
    fig = liveness.render(tr, t)
    ax, ax2 = fig.axes
    assert fig._suptitle.get_text() == f"Storage lifetimes · event {t} of {len(tr) - 1}"
    assert ax2.get_xlabel() and ax2.get_ylabel()
    assert all(list(c.get_xdata()) == [t, t] for c in fig.axes[0].lines[-1:])
    assert liveness.describe(tr, t) == fig.description
    assert fig.description.count("live now") == len(fig.facts.live_now)
