"""The refcount picture, checked on its data: the values it shows at t are the recorder's
(the replayed reference counts), its step lines follow the refcount events, and the text
names every reference's holder."""
import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import refcounts  # noqa: E402


@pytest.fixture(scope="module")
def tr():
    mt.manual_seed(0)
    W = mt.randn(3, 2, requires_grad=True)
    W.name = "W"
    x = mt.randn(4, 3)
    x.name = "x"
    with mt.memory.step_arena(mt.memory.Arena(capacity=4096)), mt.trace() as tr:
        h = (x @ W).relu()
        loss = (h * h).sum()
        loss.backward()
    return tr


def test_values_at_t_equal_the_recorders_refcounts(tr):
    painter = refcounts.RefcountPainter(tr, max_rows=64)
    for t in range(len(tr)):
        f = painter.draw(t).facts
        state = tr.state_at(t)
        assert {sid: c for sid, _, c, _ in f.live} == state.refcounts
        for row in f.rows:
            if row.value is not None:
                assert row.value == state.refcounts[row.current.storage]
            for line in row.lines:  # the drawn step line agrees with the replay at every t
                assert line.value_at(t) == (state.refcounts[line.storage] if line.storage in state.storages
                                            else None), (t, line.storage)
        # the numbers printed at the right of the rows
        printed = [txt.get_text() for txt in painter.values.texts if txt.get_visible()]
        assert printed == ["–" if r.value is None else str(r.value) for r in f.rows]


def test_step_lines_follow_the_refcount_events(tr):
    f = refcounts.refcount_facts(tr, None, max_rows=64)
    lines = {ln.storage: ln for r in f.rows for ln in r.lines}
    for e in tr.events:
        if e["kind"] == "refcount":
            ln = lines[e["storage"]]
            assert ln.value_at(e["step"]) == e["refcount"]
        if e["kind"] == "free":
            assert lines[e["storage"]].freed == e["step"]
        if e["kind"] == "alloc":
            assert lines[e["storage"]].born == e["step"] and lines[e["storage"]].values[0] == 0


def test_drawn_segments_and_markers(tr):
    fig = refcounts.render(tr, len(tr) // 2, max_rows=64)
    f = fig.facts
    ax = fig.axes[0]
    coll = next(c for c in ax.collections if c.get_gid() == "refcount-lines")
    segs = coll.get_segments()
    drawn = [ln for r in f.rows for ln in r.lines]
    assert len(segs) == len(drawn)
    for i, (row, seg) in enumerate(zip([r for r in f.rows for _ in r.lines], segs)):
        ln = drawn[i]
        base = f.rows.index(row) + 0.85
        heights = {round(base - refcounts._BAND * f.height(v), 9) for v in ln.values}
        assert {round(y, 9) for y in seg[:, 1]} <= heights
        assert seg[0, 0] == ln.born
    freed = next(line for line in ax.lines if line.get_gid() == "refcount-freed")
    assert sorted(freed.get_xdata()) == sorted(ln.freed for ln in drawn if ln.freed is not None)
    assert fig._suptitle.get_text().startswith("Storage refcounts · event") and ax.get_xlabel()


def test_holders_in_words(tr):
    t = next(i for i, e in enumerate(tr.events) if e["kind"] == "backward")
    text = refcounts.describe(tr, t)
    assert "held by" in text
    assert "node" in text and "Backward" in text  # saved tensors hold references
    state = tr.state_at(t)
    for sid, s in state.storages.items():
        assert f"refcount {s.refcount}" in text
    assert "W" in text and "x" in text
    end = refcounts.describe(tr, len(tr) - 1)
    assert "Freed so far" in end


def test_many_storages_share_rows_without_overlap(tr):
    f = refcounts.refcount_facts(tr, len(tr) // 2, max_rows=4)
    assert f.shared_rows and len(f.rows) <= 4
    for row in f.rows:
        spans = sorted((ln.born, ln.freed if ln.freed is not None else len(tr)) for ln in row.lines)
        for (_, stop), (start, _) in zip(spans, spans[1:]):
            assert stop < start  # one storage's line ends before the next one in the row starts
    live_rows = [r for r in f.rows if r.value is not None]
    assert all(r.current.live_at(f.t) for r in live_rows)
    text = refcounts.facts_text(f)
    assert "share a row" in text


def test_flat_parameter_buffers_use_a_log_scale():
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(3, 3), mt.nn.Linear(3, 1))
    with mt.trace() as tr:
        model(mt.randn(2, 3)).sum().backward()
    f = refcounts.refcount_facts(tr, None)
    if f.max_count > 4:
        assert f.log_scale and 0 < f.height(1) < f.height(2) < f.height(f.max_count) == 1
