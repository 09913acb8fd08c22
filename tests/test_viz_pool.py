"""The pool picture, checked on its data: the bars at t are the replayed class table at t
(blocks in use / free / held back per size class, requested vs reserved bytes)."""
import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import pool as pool_panel  # noqa: E402


def live_classes(p):
    """The live pool's own numbers per size class (None: direct blocks), read from the engine
    object while recording: (in use, free, held back, requested bytes, reserved bytes)."""
    out = {}
    for c in range(len(p.classes)):
        out[c] = [0, len(p.free_lists[c]), 0, 0, 0]
    out[None] = [0, 0, 0, 0, 0]
    for b in p.live.values():
        row = out[b.size_class]
        row[0] += 1
        row[3] += b.nbytes
        row[4] += b.size
    for _, b in p.held:
        out[b.size_class][2] += 1
    return {c: tuple(v) for c, v in out.items()}


@pytest.fixture(scope="module")
def recorded():
    """Two training steps whose activations go to a pool with deferred release, and the live
    pool's class table at several moments (event index -> live_classes)."""
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    p = mt.memory.Pool(name="deferred pool", defer_epochs=1)
    snapshots = {}
    with mt.memory.use_pool(p), mt.trace() as tr:
        for _ in range(2):
            loss = mt.mse_loss(model(x), y)
            snapshots[len(tr.events) - 1] = live_classes(p)  # forward done, graph alive
            loss.backward()
            del loss
            snapshots[len(tr.events) - 1] = live_classes(p)
            p.advance_epoch()
            snapshots[len(tr.events) - 1] = live_classes(p)
        big = mt.zeros(300_000)  # larger than any class: a direct block
        snapshots[len(tr.events) - 1] = live_classes(p)
        del big
        snapshots[len(tr.events) - 1] = live_classes(p)
    return tr, snapshots


@pytest.fixture(scope="module")
def tr(recorded):
    return recorded[0]


def bars(fig, gid_axes, gid_bar):
    ax = next(a for a in fig.axes if a.get_gid() == gid_axes)
    return [(round(r.get_x()), round(r.get_width())) for r in ax.patches
            if (r.get_gid() or "").split(":")[0] == gid_bar]


def test_bars_equal_the_class_table_at_every_step(tr):
    painter = pool_panel.PoolPainter(tr)
    name = "deferred pool"
    seen = {"free": 0, "held": 0, "direct": 0}
    for t in range(0, len(tr), 4):
        fig = painter.draw(t)
        state = tr.state_at(t)
        summary = next(p for p in fig.facts.pools if p.name == name)
        classes = state.size_classes(name)
        for row in summary.rows:
            cls = classes.get(row.size_class)
            want = (cls.in_use, cls.free, cls.held, cls.requested, cls.reserved) if cls else (0, 0, 0, 0, 0)
            assert (row.in_use, row.free, row.held, row.requested, row.reserved) == want, (t, row)
        assert set(classes) <= {r.size_class for r in summary.rows}
        # the drawn bars: widths are those numbers, stacked in use | free | held
        order = [r.size_class for r in summary.rows]
        in_use = bars(fig, f"pool-blocks:{name}", "pool-in_use")
        free = bars(fig, f"pool-blocks:{name}", "pool-free")
        held = bars(fig, f"pool-blocks:{name}", "pool-held")
        for k, c in enumerate(order):
            cls = classes.get(c)
            u, f_, h = (cls.in_use, cls.free, cls.held) if cls else (0, 0, 0)
            assert in_use[k] == (0, u) and free[k] == (u, f_) and held[k] == (u + f_, h)
        requested = bars(fig, f"pool-bytes:{name}", "pool-requested")
        reserved = bars(fig, f"pool-bytes:{name}", "pool-reserved")
        for k, c in enumerate(order):
            cls = classes.get(c)
            assert requested[k][1] == (cls.requested if cls else 0)
            assert reserved[k][1] == (cls.reserved if cls else 0)
        seen["free"] += summary.total("free") > 0
        seen["held"] += summary.total("held") > 0
        seen["direct"] += any(r.size_class is None and r.in_use for r in summary.rows)
    assert all(seen.values()), seen  # the trace shows free, held and direct blocks


def test_rows_equal_the_live_pools_own_counts(recorded):
    tr, snapshots = recorded
    painter = pool_panel.PoolPainter(tr)
    seen = set()
    for t, live in snapshots.items():
        summary = next(p for p in painter.draw(t).facts.pools if p.name == "deferred pool")
        rows = {r.size_class: (r.in_use, r.free, r.held, r.requested, r.reserved) for r in summary.rows}
        for c, want in live.items():
            assert rows.get(c, (0, 0, 0, 0, 0)) == want, (t, c)
            seen |= {k for k, n in zip(("in_use", "free", "held"), want) if n}
        assert rows[None][0] == live[None][0]  # the direct row
    assert seen == {"in_use", "free", "held"}, seen


def test_fragmentation_and_titles(tr):
    t = len(tr) // 2
    fig = pool_panel.render(tr, t)
    state = tr.state_at(t)
    p = next(p for p in fig.facts.pools if p.name == "deferred pool")
    classes = state.size_classes("deferred pool").values()
    req, res = sum(c.requested for c in classes), sum(c.reserved for c in classes)
    assert p.requested == req and p.reserved == res
    assert p.fragmentation == pytest.approx(1 - req / res)
    assert p.epoch == state.pools["deferred pool"].epoch
    ax = next(a for a in fig.axes if a.get_gid() == "pool-bytes:deferred pool")
    assert f"{p.fragmentation:.0%} lost" in ax.get_title(loc="left")
    assert ax.get_xlabel() and fig._suptitle.get_text().startswith("Pool size classes · event")
    text = pool_panel.describe(tr, t)
    assert text == fig.description and f"internal fragmentation {p.fragmentation:.1%}" in text
    assert "direct" in text  # the oversized request's row (no blocks at t, or one)


def test_class_labels_are_sizes_and_direct_comes_last(tr):
    fig = pool_panel.render(tr, None)
    p = next(p for p in fig.facts.pools if p.name == "deferred pool")
    sizes = [r.size for r in p.rows if r.size_class is not None]
    assert sizes == sorted(sizes)
    assert p.rows[-1].size_class is None and p.rows[-1].label == "direct"
    ax = next(a for a in fig.axes if a.get_gid() == "pool-blocks:deferred pool")
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.label for r in p.rows]


def test_no_pool_in_trace_says_so():
    tr = mt.Trace([])  # (a live recording's baseline would show the default pool)
    assert "No pool block" in pool_panel.describe(tr)
    assert pool_panel.render(tr).facts.pools == []


def test_pool_events_read_as_sentences(tr):
    from microtorch.viz.events import describe_event

    kinds = set()
    for i, e in enumerate(tr.events):
        if e["kind"] in ("alloc_block", "free_block", "pool_epoch"):
            words = describe_event(tr, i)
            assert "=" not in words, words
            kinds.add(e["kind"])
            if e["kind"] == "free_block" and e.get("held"):
                assert "held back" in words
            if e["kind"] == "alloc_block" and e.get("size_class") is None and "size_class" in e:
                assert "direct block" in words
    assert kinds == {"alloc_block", "free_block", "pool_epoch"}
