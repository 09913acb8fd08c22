"""The arena picture, checked on its data: the rectangles drawn at t are the blocks the
trace's replay says are live at t (same offsets, same sizes), chunk by chunk."""
import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import arena, palette  # noqa: E402
from microtorch.viz.timeline import NODE_RECORD_BYTES  # noqa: E402


def mlp_in_arena(steps=2, capacity=1024):
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    x.name = "x"
    step_arena = mt.memory.Arena(capacity=capacity, name="step arena")  # small: it has to grow
    with mt.trace() as tr:
        for _ in range(steps):
            with mt.memory.step_arena(step_arena):
                loss = mt.mse_loss(model(x), y)
                loss.backward()
    return tr


@pytest.fixture(scope="module")
def tr():
    return mlp_in_arena()


def rects(ax, kinds):
    """(x, width) of every rectangle drawn in ``ax`` by the collections of ``kinds``."""
    out = []
    for c in ax.collections:
        gid = c.get_gid() or ""
        if gid.startswith("arena-") and gid[len("arena-"):].split(":")[0] in kinds:
            for path in c.get_paths():
                xs = path.vertices[:, 0]
                out.append((float(xs.min()), float(xs.max() - xs.min())))
    return sorted(out)


def expected_blocks(state, name):
    a = state.arenas[name]
    bases = [sum(a.chunks[:i]) for i in range(len(a.chunks))]
    blocks = state.blocks_of(name)
    data = sorted((bases[b.chunk] + b.offset, b.nbytes) for b in blocks)
    pads = sorted((bases[b.chunk] + b.offset - b.padding, b.padding) for b in blocks if b.padding)
    return data, pads


def test_rectangles_are_the_live_blocks_at_every_step(tr):
    painter = arena.ArenaPainter(tr)
    ax = next(a for a in painter.fig.axes if a.get_gid() == "arena:step arena")
    checked = 0
    for t in range(0, len(tr), 3):
        fig = painter.draw(t)
        state = tr.state_at(t)
        if "step arena" not in state.arenas:
            continue
        data, pads = expected_blocks(state, "step arena")
        assert rects(ax, arena.BLOCK_KINDS) == data, t
        assert rects(ax, ("padding",)) == pads, t
        strip = fig.facts.strips[0]
        assert strip.chunks == state.arenas["step arena"].chunks
        assert strip.used == state.arenas["step arena"].used
        assert strip.requested == state.arenas["step arena"].requested
        assert sorted((r.x, r.width) for r in strip.blocks) == data
        checked += 1
    assert checked > 50


def test_freed_space_padding_blocks_and_free_tile_each_chunk(tr):
    """Below the top, every byte is a block, padding, or freed-until-reset; none twice."""
    for t in range(0, len(tr), 5):
        f = arena.arena_facts(tr, t)
        strip = f.strips[0]
        if not strip.exists:
            continue
        runs = sorted((r.x, r.x + r.width) for r in strip.blocks + strip.padding + strip.dead)
        at = 0
        for start, stop in runs:
            assert start == at, (t, runs)
            at = stop
        assert at == strip.used


def test_high_water_growth_and_utilization(tr):
    used = []
    grew = False
    for t in range(len(tr)):
        state = tr.state_at(t)
        a = state.arenas.get("step arena")
        used.append(a.used if a else 0)
        f = arena.arena_facts(tr, t)
        s = f.strips[0]
        if a is not None:
            assert s.high_water == max(used)
            assert s.utilization == pytest.approx(a.requested / a.capacity)
            grew = grew or len(s.chunks) > 1
            assert set(s.growth_steps) == set(range(1, len(s.chunks)))
    assert grew, "the small arena should have chained a chunk"
    fig = arena.render(tr, len(tr) // 3)
    s = fig.facts.strips[0]
    ax = fig.axes[0]
    assert f"({s.utilization:.0%} utilization)" in ax.get_title(loc="left")
    assert fig._suptitle.get_text().startswith("Arena occupancy · event")


def test_node_records_strip_shows_live_node_slots(tr):
    for t in range(0, len(tr), 7):
        state = tr.state_at(t)
        f = arena.arena_facts(tr, t)
        strip = f.strips[-1]
        assert strip.what == "node arena"
        assert sorted(r.x for r in strip.blocks) == sorted(n.slot * NODE_RECORD_BYTES for n in state.nodes.values()
                                                             if n.slot is not None)
        assert strip.used == state.node_records.top * NODE_RECORD_BYTES
        assert all(r.kind == "node record" for r in strip.blocks)


def test_kinds_colours_labels_and_text(tr):
    t = next(i for i, e in enumerate(tr.events) if e["kind"] == "backward")
    fig = arena.render(tr, t)
    kinds = {r.kind for r in fig.facts.strips[0].blocks}
    assert kinds <= {"activation"}  # a step arena holds activations (parameters live in the pool)
    coll = next(c for c in fig.axes[0].collections if c.get_gid() == "arena-activation:step arena")
    from matplotlib.colors import to_hex
    assert to_hex(coll.get_facecolor()[0]) == palette.fill("activation").lower()
    text = arena.describe(tr, t)
    assert text == fig.description
    for r in fig.facts.strips[0].blocks:
        assert r.label in text
    assert "node arena:" in text and "utilization" in text
    labels = [txt.get_text() for txt in fig.axes[0].texts]
    assert any(r.label.split(" ")[0] in lab for r in fig.facts.strips[0].blocks for lab in labels)
    assert fig.axes[-1].get_xlabel()  # axis label on the address axis
    assert fig.legends and fig.legends[0].get_texts()


def test_after_reset_the_arena_is_empty_and_before_it_exists_it_says_so(tr):
    reset = max(i for i, e in enumerate(tr.events) if e["kind"] == "arena_reset")
    f = arena.arena_facts(tr, reset)
    assert f.strips[0].blocks == [] and f.strips[0].used == 0
    with mt.trace() as late:
        w = mt.randn(4, requires_grad=True)
        made = late.mark("making the arena")
        with mt.memory.step_arena(mt.memory.Arena(capacity=256, name="late arena")):
            (w * 3).sum().backward()
    strip = lambda t: next(s for s in arena.arena_facts(late, t).strips if s.name == "late arena")  # noqa: E731
    assert not strip(made).exists and "late arena: not created yet" in arena.describe(late, made)
    assert strip(made + 1).exists and strip(made + 1).chunks == (256,)


def test_a_trace_without_an_arena_and_no_pyplot_figures():
    plt = pytest.importorskip("matplotlib.pyplot")
    with mt.trace() as tr:
        (mt.randn(3, requires_grad=True) * 2).sum().backward()
    before = len(plt.get_fignums())
    fig = arena.render(tr)
    assert "No byte arena" in fig.description
    assert [s.what for s in fig.facts.strips] == ["node arena"]
    assert len(plt.get_fignums()) == before
    assert fig.svg().startswith("<svg")
    assert "image/svg+xml" in fig._repr_mimebundle_()


def test_arena_events_read_as_sentences(tr):
    from microtorch.viz.events import describe_event

    for i, e in enumerate(tr.events):
        if e["kind"] in ("alloc_block", "free_block", "arena_chunk", "arena_reset"):
            words = describe_event(tr, i)
            assert "=" not in words and (e.get("allocator") or e.get("arena")) in words, words
    reset = next(i for i, e in enumerate(tr.events) if e["kind"] == "arena_reset")
    assert "was reset" in describe_event(tr, reset)
