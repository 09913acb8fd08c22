"""No picture cuts a word or hides its data: every title and label lies inside its figure,
no legend covers plotted data, no two labels are drawn over each other.

The checks (:func:`microtorch.viz.figure.layout_problems`) lay a figure out headless with
matplotlib's renderer and compare the window extent of every text it draws with the
figure's box (and a legend's box with the points each axes plots). They run here

* on figures made to fail them (so a check that cannot fail would be caught),
* on every matplotlib panel at every step of representative traces (a training step in a
  step arena, a pool with long names and big numbers, an in-place write into a view, the
  alias picture over the notebooks' views),
* and on every figure the notebooks draw: each notebook runs on a kernel with a hook that
  checks every panel figure as it is drawn to SVG and every pyplot figure at the end.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import alias, arena, figure, liveness, pool, refcounts  # noqa: E402
from microtorch.viz.events import select_steps  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


# -- the checks can fail --------------------------------------------------------------------------
def test_a_title_past_the_edge_is_reported():
    fig = figure.new_figure(3, 2.5)
    ax = fig.add_axes((0.15, 0.2, 0.8, 0.65))
    ax.set_title("a title much too long for a figure three inches wide: it runs past the edge", loc="left")
    problems = figure.clipped_texts(fig)
    assert len(problems) == 1 and "right edge" in problems[0] and "a title much too long" in problems[0]
    ax.set_title("short", loc="left")
    assert figure.clipped_texts(fig) == []


def test_tick_labels_cut_on_the_left_are_reported():
    fig = figure.new_figure(4, 2.5)
    ax = fig.add_axes((0.05, 0.2, 0.9, 0.7))
    ax.set_yticks([0, 1], ["a long row label", "another long one"])
    assert any("left edge" in p for p in figure.clipped_texts(fig))


def test_a_text_cut_by_its_axes_is_reported():
    fig = figure.new_figure(4, 3)
    ax = fig.add_axes((0.1, 0.1, 0.5, 0.8))  # the text ends inside the figure, outside its axes
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.text(0.97, 0.5, "half outside", clip_on=True)
    assert figure.clipped_texts(fig) == ["'half outside' is cut by its axes"]


def test_a_legend_over_a_line_is_reported_and_one_beside_it_is_not():
    import numpy as np

    fig = figure.new_figure(5, 3)
    ax = fig.add_axes((0.1, 0.15, 0.85, 0.75))
    x = np.linspace(0, 1, 50)
    ax.plot(x, np.full_like(x, 0.9), label="high line")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    assert figure.legends_over_data(fig) and "high line" in figure.legends_over_data(fig)[0]
    ax.legend(loc="lower left")
    assert figure.legends_over_data(fig) == []
    # a sparse line: the segment between two far-apart points counts, not just its ends
    fig2 = figure.new_figure(5, 3)
    ax2 = fig2.add_axes((0.1, 0.15, 0.85, 0.75))
    ax2.plot([0, 1], [0.95, 0.95], label="two points")
    ax2.set(xlim=(-0.1, 1.1), ylim=(0, 1))
    ax2.legend(loc="upper center")
    assert figure.legends_over_data(fig2)


def test_texts_over_each_other_are_reported():
    fig = figure.new_figure(4, 3)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.text(0.5, 0.5, "peak 3,000 B", transform=ax.transAxes)
    ax.text(0.52, 0.5, "now 2,000 B", transform=ax.transAxes)
    assert figure.overlapping_texts(fig)
    assert figure.layout_problems(fig, overlaps=False) == []


def test_first_that_fits_shortens_by_width():
    fig = figure.new_figure(4, 2)
    ax = fig.add_axes((0.1, 0.1, 0.4, 0.8))  # 1.6 in: about 18 characters at 10 pt
    long, short = "a" * 60, "short"
    assert figure.first_that_fits(ax, [long, short], 10) == short
    assert figure.first_that_fits(ax, [short, long], 10) == short
    assert figure.first_that_fits(ax, [long, long + "b"], 10) == long + "b"  # nothing fits: the last


# -- every panel at every step of representative traces -----------------------------------------
def _training_trace():
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    step = mt.memory.Arena(capacity=1024, name="step arena")
    with mt.trace() as tr:
        for _ in range(2):
            with mt.memory.step_arena(step):
                mt.mse_loss(model(x), y).backward()
    return tr


def _pool_trace():
    """A pool with a long name and six-figure byte counts (notebook 05's training run)."""
    train_pool = mt.memory.Pool(name="a training pool with a long name")
    with mt.memory.use_pool(train_pool):
        mt.manual_seed(0)
        model = mt.nn.MLP(32, [64], 10)
        opt = mt.optim.SGD(model.parameters(), lr=0.1)
        X, Y = mt.randn(64, 32), mt.randn(64, 10)
        with mt.trace() as tr:
            for _ in range(2):
                opt.zero_grad()
                mt.mse_loss(model(X), Y).backward()
                opt.step()
    return tr, {"pools": [train_pool.name]}


def _view_write_trace():
    """An in-place write into a view, then backward (notebook 07's CopySlices player)."""
    w = mt.randn(4, requires_grad=True)
    w.name = "w"
    keep = [mt.randn(3) for _ in range(5)]  # storages alive before recording, never touched
    with mt.trace() as tr:
        b = w * 2
        b.name = "b"
        v = b[1:3]
        v.name = "v"
        v.mul_(10)
        (b * b).sum().backward()
    tr.keep = keep
    return tr


TRACES = {"training": lambda: (_training_trace(), {}), "pool": _pool_trace,
          "view write": lambda: (_view_write_trace(), {})}
PAINTERS = {"arena": arena.ArenaPainter, "pool": pool.PoolPainter, "refcounts": refcounts.RefcountPainter,
            "liveness": liveness.LivenessPainter}


@pytest.fixture(scope="module")
def traces():
    return {name: make() for name, make in TRACES.items()}


@pytest.mark.parametrize("trace_name", list(TRACES))
@pytest.mark.parametrize("panel", list(PAINTERS))
@pytest.mark.parametrize("width", [9.0, 6.5])
def test_panels_lay_out_cleanly_at_every_step(traces, trace_name, panel, width):
    tr, options = traces[trace_name]
    options = options if panel == "pool" else {}
    painter = PAINTERS[panel](tr, width=width, **options)
    steps = select_steps(tr, "events")
    every = max(1, len(steps) // 12)  # a dozen steps through the trace, its peak and its end
    shown = steps[::every] + [tr.peak()[1]] + [steps[-1]]
    seen = {}
    for t in shown:
        for problem in figure.layout_problems(painter.draw(t, steps)):
            seen.setdefault(problem, t)
    assert not seen, f"{panel} over the {trace_name} trace: " + "; ".join(
        f"at event {t}: {p}" for p, t in list(seen.items())[:5])


def test_liveness_now_and_peak_do_not_collide_at_the_peak(traces):
    tr, _ = traces["training"]
    peak, at = tr.peak()
    for t in (at - 1, at, at + 1):
        fig = liveness.render(tr, t)
        assert figure.overlapping_texts(fig) == [], t
        assert any(f"now (●): {peak:,} B" in x.get_text() for x in figure.titles(fig.axes[1])) or t != at


def test_alias_pictures_lay_out_cleanly():
    x = mt.arange(24.0).reshape(4, 6)
    s30 = mt.arange(30.0)
    cases = [((x[::-1, ::-2], x[:, 3:4].expand(4, 5), x.diagonal()), {}),
             ((s30.unfold(0, 2, 5), s30[3::5]), {"names": ["s.unfold(0, 2, 5)", "s[3::5]"]}),
             ((x[:, ::2], x[:, 1::2]), {"names": ["x[:, ::2]", "x[:, 1::2]"], "exact": False}),
             ((x.T, x[2]), {"names": ["x.T", "x[2]"]}),
             ((x[1], x[1:3, 2]), {})]
    for views, kw in cases:
        fig = alias.render(*views, **kw)
        assert figure.layout_problems(fig) == [], kw.get("names")


# -- every figure the notebooks draw ----------------------------------------------------------------
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))

_HOOK = '''
import matplotlib.pyplot as _plt
import microtorch.viz.figure as _mt_figure
_mt_layout_problems, _mt_to_svg = [], _mt_figure.to_svg
def _mt_checked_to_svg(fig):
    _mt_layout_problems.extend(f"{fig._suptitle.get_text() if fig._suptitle else 'a panel'}: {p}"
                               for p in _mt_figure.layout_problems(fig))
    return _mt_to_svg(fig)
_mt_figure.to_svg = _mt_checked_to_svg
'''

_CHECK = '''
for _n in _plt.get_fignums():
    _f = _plt.figure(_n)
    _mt_layout_problems.extend(f"pyplot figure {_n}: {p}" for p in _mt_figure.layout_problems(_f))
print("LAYOUT PROBLEMS:", sorted(set(_mt_layout_problems)))
assert not _mt_layout_problems, sorted(set(_mt_layout_problems))
'''


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_figures_lay_out_cleanly(path, monkeypatch):
    """Each notebook on a fresh kernel (pyplot on Agg, so its figures stay open to be checked
    at the end; panel figures are checked as they are drawn)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_HOOK))
    nb.cells.append(nbformat.v4.new_code_cell(_CHECK))
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name}: {str(exc)[-3000:]}")
