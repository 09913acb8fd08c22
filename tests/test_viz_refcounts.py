"""The refcount picture, checked on its data: the values it shows at t are the recorder's
(the replayed reference counts), its step lines follow the refcount events, and the text
names every reference's holder."""
import math

import pytest

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import refcounts  # noqa: E402


def counts_from_events(trace, t):
    """storage -> reference count after event t, folded from the raw events (not the replay):
    the baseline's counts, 0 at an alloc, the count a refcount event states, gone at a free."""
    counts = {}
    for e in trace.events[:t + 1]:
        if e["kind"] == "baseline":
            counts.update({s["storage"]: s["refcount"] for s in e["storages"]})
        elif e["kind"] == "alloc":
            counts[e["storage"]] = 0
        elif e["kind"] == "refcount":
            counts[e["storage"]] = e["refcount"]
        elif e["kind"] == "free":
            counts.pop(e["storage"], None)
    return counts


def counts_over_time(trace):
    """storage -> every count it takes, folded from the raw events."""
    seen = {}
    for t in range(len(trace)):
        for sid, c in counts_from_events(trace, t).items():
            seen.setdefault(sid, set()).add(c)
    return seen


def expected_height(v, max_count):
    """The panel's documented scale: linear up to a maximum of 4, log2(1 + count) above."""
    if max_count > 4:
        return math.log2(1 + v) / math.log2(1 + max_count)
    return v / max_count


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


@pytest.fixture(scope="module")
def views_tr():
    """Six row views of one leaf, alive together: its storage's count climbs past 4."""
    mt.manual_seed(0)
    x = mt.randn(6, 3, requires_grad=True)
    with mt.trace() as tr:
        rows = [x[i] for i in range(6)]
        y = sum((r * r).sum() for r in rows)
        y.backward()
        del rows, y
    return tr


def test_values_at_t_equal_the_counts_in_the_events(tr):
    painter = refcounts.RefcountPainter(tr, max_rows=64)
    for t in range(len(tr)):
        f = painter.draw(t).facts
        counts = counts_from_events(tr, t)
        drawn = {ln.storage for r in f.rows for ln in r.lines}
        assert {sid: c for sid, _, c, _ in f.live} == {s: c for s, c in counts.items() if s in drawn}
        assert f.untouched == len(set(counts) - drawn)
        for row in f.rows:
            if row.value is not None:
                assert row.value == counts[row.current.storage]
            for line in row.lines:  # the drawn step line agrees with the events at every t
                assert line.value_at(t) == counts.get(line.storage), (t, line.storage)
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


@pytest.mark.parametrize("which", ["tr", "views_tr"])
def test_drawn_segments_and_markers(which, request):
    tr = request.getfixturevalue(which)
    fig = refcounts.render(tr, len(tr) // 2, max_rows=64)
    f = fig.facts
    ax = fig.axes[0]
    coll = next(c for c in ax.collections if c.get_gid() == "refcount-lines")
    segs = coll.get_segments()
    drawn = [ln for r in f.rows for ln in r.lines]
    assert len(segs) == len(drawn)
    over_time = counts_over_time(tr)
    max_count = max(max(v) for v in over_time.values())
    assert f.max_count == max_count
    for i, (row, seg) in enumerate(zip([r for r in f.rows for _ in r.lines], segs)):
        ln = drawn[i]
        base = f.rows.index(row) + 0.85
        heights = {round(base - refcounts._BAND * expected_height(v, max_count), 9)
                   for v in over_time[ln.storage]}
        assert {round(y, 9) for y in seg[:, 1]} == heights  # every count the storage had is drawn
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


def test_counts_above_four_use_a_log_scale(views_tr):
    f = refcounts.refcount_facts(views_tr, None)
    assert f.max_count == max(max(v) for v in counts_over_time(views_tr).values()) > 4
    assert f.log_scale and 0 < f.height(1) < f.height(2) < f.height(f.max_count) == 1
    for v in range(f.max_count + 1):
        assert f.height(v) == pytest.approx(math.log2(1 + v) / math.log2(1 + f.max_count))
    assert "log scale" in refcounts.render(views_tr, len(views_tr) - 1).axes[0].get_title(loc="left")
    mt.manual_seed(0)  # flat parameter buffers: counts stay at or below 4, a linear scale
    model = mt.nn.Sequential(mt.nn.Linear(3, 3), mt.nn.Linear(3, 1))
    with mt.trace() as small_tr:
        model(mt.randn(2, 3)).sum().backward()
    small = refcounts.refcount_facts(small_tr, None)
    assert small.max_count == max(max(v) for v in counts_over_time(small_tr).values()) <= 4
    assert not small.log_scale and small.height(1) == pytest.approx(1 / small.max_count)


@pytest.fixture(scope="module")
def tr_after_others():
    """A program recorded after other tensors were made and left alive (as in a notebook's
    later cells): those are in the trace's baseline, but the program never touches them."""
    mt.manual_seed(1)
    bystanders = [mt.randn(5) for _ in range(6)] + [mt.randn(3) * 2]
    w = mt.randn(4, requires_grad=True)
    w.name = "w"
    with mt.trace() as tr:
        b = w * 2
        b.name = "b"
        v = b[1:3]
        v.name = "v"
        ((b * b).sum() + (v * 3).sum()).backward()
    tr.bystanders = bystanders  # keep them alive with the trace
    return tr


def test_only_storages_the_program_touched_get_rows(tr_after_others):
    tr = tr_after_others
    bystander_ids = {t._storage.id for t in tr.bystanders}
    baseline = {s["storage"] for s in tr.events[0]["storages"]}
    assert bystander_ids <= baseline  # they were alive when recording started
    for t in range(len(tr)):
        f = refcounts.refcount_facts(tr, t)
        drawn = {ln.storage for r in f.rows for ln in r.lines}
        assert not drawn & bystander_ids
        assert not {sid for sid, *_ in f.live} & bystander_ids
        assert f.untouched >= len(bystander_ids)
    assert f"{f.untouched} other storage(s) were alive but nothing in the trace used them" in refcounts.describe(tr)
    # every storage an event of the program names is drawn
    touched = set()
    for e in tr.events[1:]:
        if e["kind"] in ("alloc", "free", "refcount", "tensor"):
            touched.add(e["storage"])
        if e["kind"] == "op":
            touched.update(e["input_storages"], e["saved"], [e["output_storage"]])
    assert touched == {ln.storage for r in refcounts.refcount_facts(tr).rows for ln in r.lines}


def test_every_row_is_named(tr_after_others):
    import re

    fig = refcounts.render(tr_after_others, None)
    for r in fig.facts.rows:
        assert not re.fullmatch(r"#\d+", r.label.strip()), r.label
    shown = {t.get_text() for t in fig.axes[0].texts if t.get_visible()}
    assert {r.label for r in fig.facts.rows} <= shown


def test_the_picture_names_who_holds_each_reference(tr_after_others):
    tr = tr_after_others
    painter = refcounts.RefcountPainter(tr)
    t = next(i for i, e in enumerate(tr.events) if e["kind"] == "backward")
    fig = painter.draw(t)
    state = tr.state_at(t)
    printed = [x.get_text() for x in painter.holders.texts if x.get_visible()]
    live_rows = [r for r in fig.facts.rows if r.value is not None]
    assert len(printed) == len([r for r in live_rows if r.holders])
    for r in live_rows:  # as many holders as references, each named as the events name it
        assert len(r.holders) == state.refcounts[r.current.storage]
    b_row = next(r for r in live_rows if r.current.label.startswith(f"#{r.current.storage} b"))
    assert "b" in b_row.holders and "v" in b_row.holders  # a view holds its base's storage
    assert any(h.endswith("Backward") for h in b_row.holders)  # Mul saved b for backward
    words = refcounts.holders_words(b_row.holders)
    assert words in printed or any(p.endswith("…") and words.startswith(p[:-1]) for p in printed)
    assert refcounts.holders_words(["x", "MulBackward", "MulBackward"]) == "x, 2× MulBackward"


def test_legend_lists_only_what_occurs(tr_after_others, tr):
    def legend(fig):
        return [t.get_text() for t in fig.legends[0].get_texts()]

    no_arena = legend(refcounts.render(tr_after_others))
    assert "bytes reclaimed by arena reset" not in no_arena
    assert "freed: count reached 0" in no_arena  # backward freed its temporaries
    kinds = {ln.kind for r in refcounts.refcount_facts(tr_after_others).rows for ln in r.lines}
    from microtorch.viz import palette
    assert {palette.label(k) for k in kinds} <= set(no_arena)
    assert not {palette.label(k) for k in ("parameter", "activation", "gradient", "data") if k not in kinds} \
        & set(no_arena)
    with mt.trace() as empty:
        pass
    assert legend(refcounts.render(empty)) == ["now (t)"]
