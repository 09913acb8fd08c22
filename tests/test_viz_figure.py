"""What the matplotlib panels share: figures outside pyplot, the palette, and the two-layer
drawing the player uses (every artist that changes between steps must be in the changing
layer, or the player would show a stale picture)."""
import re

import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import arena, figure, liveness, palette, pool, refcounts  # noqa: E402
from microtorch.viz.events import select_steps  # noqa: E402

PAINTERS = [arena.ArenaPainter, pool.PoolPainter, refcounts.RefcountPainter, liveness.LivenessPainter]
# (painter, options): rows shared by several storages, and one row per storage
LAYERED = [(cls, {}) for cls in PAINTERS] + [(refcounts.RefcountPainter, {"max_rows": 500}),
                                             (liveness.LivenessPainter, {"max_rows": 500})]


@pytest.fixture(scope="module")
def tr():
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    arena_ = mt.memory.Arena(capacity=1024, name="step arena")
    with mt.trace() as tr:
        for _ in range(2):
            with mt.memory.step_arena(arena_):
                mt.mse_loss(model(x), y).backward()
    return tr


def snapshot(fig) -> dict:
    """A comparable state of every artist the figure draws (what it would put in the SVG)."""
    out = {}
    for a in figure._leaves(fig):
        state = [a.get_visible()]
        if hasattr(a, "get_paths"):
            state += [p.vertices.tobytes() for p in a.get_paths()]
        if hasattr(a, "get_xydata"):
            state.append(a.get_xydata().tobytes())
        if hasattr(a, "get_text"):
            state += [a.get_text(), a.get_position()]
        if hasattr(a, "get_bbox") and not hasattr(a, "get_text"):
            try:
                state.append(tuple(a.get_bbox().bounds))
            except Exception:
                pass
        if hasattr(a, "get_children"):
            for child in a.get_children():
                if hasattr(child, "get_text"):
                    state += [child.get_text(), child.get_position(), child.get_visible()]
        out[id(a)] = (a, repr(state))
    return out


@pytest.mark.parametrize("cls, options", LAYERED,
                         ids=[f"{c.__name__}{'-' + str(o) if o else ''}" for c, o in LAYERED])
def test_everything_that_changes_is_in_the_changing_layer(tr, cls, options):
    painter = cls(tr, **options)
    steps = select_steps(tr, "ops")
    before = snapshot(painter.draw(steps[0], steps))
    key = painter.static_key(painter.facts(steps[0], steps))
    for t in steps[1::3]:
        after = snapshot(painter.draw(t, steps))
        new_key = painter.static_key(painter.facts(t, steps))
        if new_key == key:
            changing = {id(a) for a in painter.dynamic_artists()}
            for k, (artist, state) in after.items():
                if k in changing:
                    continue
                assert k in before and before[k][1] == state, (cls.__name__, t, artist)
        before, key = after, new_key


@pytest.mark.parametrize("cls", PAINTERS, ids=lambda c: c.__name__)
def test_layered_svg_has_both_layers_and_unique_ids(tr, cls):
    painter = cls(tr)
    t = len(tr) // 2
    svg = painter.svg(t)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>") and svg.count("<svg") == 1
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert len(ids) == len(set(ids))
    for ref in re.findall(r"url\(#([^)]+)\)", svg):
        assert ref in ids
    title = painter.fig._suptitle.get_text()
    assert title and title in svg  # text stays text (svg.fonttype none)


def test_figures_are_not_pyplot_figures(tr):
    plt = pytest.importorskip("matplotlib.pyplot")
    before = len(plt.get_fignums())
    figs = [m.render(tr, 10) for m in (arena, pool, refcounts, liveness)]
    assert len(plt.get_fignums()) == before
    for fig in figs:
        assert fig.facts is not None and fig.description
        bundle = fig._repr_mimebundle_()
        assert bundle["image/svg+xml"].startswith("<svg") and bundle["text/plain"] == fig.description
        assert fig.get_figwidth() == figure.DEFAULT_WIDTH
        assert figure.MIN_HEIGHT <= fig.get_figheight() <= figure.MAX_HEIGHT


def test_widths_are_an_option_and_heights_follow_the_data(tr):
    narrow = refcounts.render(tr, 5, width=5.0)
    assert narrow.get_figwidth() == 5.0
    few = refcounts.render(tr, 5, max_rows=3)
    many = refcounts.render(tr, 5, max_rows=20)
    assert few.get_figheight() < many.get_figheight() <= figure.MAX_HEIGHT


def test_palette_memory_kinds_are_distinct_and_named():
    kinds = [k for k in palette.MEMORY_KINDS if k not in ("free",)]
    looks = {(palette.fill(k), palette.hatch(k)) for k in kinds}
    assert len(looks) == len(kinds)  # colour and hatch together tell every kind apart
    for k in palette.MEMORY_KINDS:
        assert palette.label(k) and palette.KINDS[k].meaning
    assert palette.memory_kind("tensor", True) == "parameter"
    assert palette.memory_kind("tensor", False) == "data"
    assert palette.memory_kind("gradient") == "gradient" and palette.memory_kind("activation") == "activation"
    assert palette.ink("gradient") != palette.color("gradient")  # yellow darkened for thin lines
    assert palette.ink("parameter") == palette.color("parameter")
