"""Trace.load checks a file before anything replays it: not JSON, an unknown format version,
a malformed event or a trace with events cut out raise TraceFormatError naming the file and
the first bad event, never a raw JSONDecodeError/KeyError/TypeError or wrong live bytes."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import microtorch as mt
from microtorch import nn
from microtorch.trace.schema import TraceFormatError


def _record():
    model = nn.MLP(3, [4], 2)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    x, y = mt.randn(5, 3), mt.randint(0, 2, (5,))
    with mt.trace() as tr:
        for _ in range(2):
            with mt.memory.step_arena():
                loss = mt.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                del loss
        h = mt.randn(4, requires_grad=True)
        (h * h).sum().backward()
        del h
    return tr


TRACE = _record()


def _doc(events):
    """A trace file's document; recorded events (typed records) as the plain dicts it holds."""
    return {"format": "microtorch-trace/1", "events": [e.to_dict() if hasattr(e, "to_dict") else e for e in events]}


def _renumber(events):
    return [dict(e, step=i) for i, e in enumerate(events)]


def _load(tmp_path, doc, name="t.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return mt.Trace.load(path)


def test_a_recorded_trace_passes_and_loads_back_equal(tmp_path):
    TRACE.save(tmp_path / "t.json")
    assert mt.Trace.load(tmp_path / "t.json").events == TRACE.events
    assert {"alloc", "free", "refcount", "alloc_block", "free_block", "arena_reset", "baseline"} <= set(TRACE.kinds())


@pytest.mark.parametrize("text", ["", "not json", '{"format": "microtorch-trace/1", "events": [',
                                  "\udcff".encode("utf-8", "surrogateescape").decode("latin-1")])
def test_not_json(tmp_path, text):
    with pytest.raises(TraceFormatError, match="is not a microtorch trace file: it is not JSON") as err:
        _load(tmp_path, text)
    assert "t.json" in str(err.value)


def test_binary_garbage(tmp_path):
    (tmp_path / "t.json").write_bytes(b"\xff\xfe\x00\x81garbage")
    with pytest.raises(TraceFormatError, match="not JSON"):
        mt.Trace.load(tmp_path / "t.json")


@pytest.mark.parametrize("doc", [[], 3, {"events": []}, {"format": "other/1", "events": []},
                                 {"format": "microtorch-trace/1"}])
def test_json_that_is_not_a_trace(tmp_path, doc):
    with pytest.raises(TraceFormatError, match="is not a microtorch trace file"):
        _load(tmp_path, doc)


@pytest.mark.parametrize("version", ["2", "99", "x"])
def test_unknown_version_is_named(tmp_path, version):
    with pytest.raises(TraceFormatError, match=f"format version '{version}'.*reads version 1"):
        _load(tmp_path, {"format": f"microtorch-trace/{version}", "events": []})


def test_events_not_a_list(tmp_path):
    with pytest.raises(TraceFormatError, match='"events" is a dict'):
        _load(tmp_path, {"format": "microtorch-trace/1", "events": {"a": 1}})


@pytest.mark.parametrize("change, message", [
    (lambda e: 7, r"event 3 is a int, expected an object"),
    (lambda e: {**e, "kind": "allocate"}, r"event 3 has unknown kind 'allocate'"),
    (lambda e: {k: v for k, v in e.items() if k != "kind"}, r"event 3 has unknown kind None"),
    (lambda e: {**e, "step": 9}, r"event 3 \(\w+\) has step 9, expected 3"),
])
def test_malformed_event_is_named(tmp_path, change, message):
    events = list(TRACE.events)
    events[3] = change(events[3])
    with pytest.raises(TraceFormatError, match=message):
        _load(tmp_path, _doc(events))


def test_missing_and_mistyped_fields_are_named(tmp_path):
    i = next(e["step"] for e in TRACE if e["kind"] == "alloc")
    events = list(TRACE.events)
    events[i] = {k: v for k, v in events[i].items() if k != "nbytes"}
    with pytest.raises(TraceFormatError, match=rf"event {i} \(alloc\) has no 'nbytes' field"):
        _load(tmp_path, _doc(events))
    events[i] = {**TRACE[i], "nbytes": "64"}
    with pytest.raises(TraceFormatError, match=rf"event {i} \(alloc\): field 'nbytes' is '64' \(str\), expected int"):
        _load(tmp_path, _doc(events))
    j = next(e["step"] for e in TRACE if e["kind"] == "tensor")
    events = list(TRACE.events)
    events[j] = {**TRACE[j], "requires_grad": 1}
    with pytest.raises(TraceFormatError, match=rf"event {j} \(tensor\): field 'requires_grad' is 1 \(int\), expected bool"):
        _load(tmp_path, _doc(events))
    events = list(TRACE.events)
    events[0] = {**TRACE[0], "storages": [{"storage": 1, "nbytes": 4}]}
    with pytest.raises(TraceFormatError, match=r"event 0 \(baseline\): storages\[0\] has no 'refcount'"):
        _load(tmp_path, _doc(events))


def test_alloc_events_removed_is_refused_instead_of_replaying_wrong_live_bytes(tmp_path):
    cut = _renumber([e for e in TRACE if e["kind"] != "alloc"])
    # replaying the cut events as they are gives wrong live bytes without a word
    assert mt.Trace(cut).peak()[0] != TRACE.peak()[0]
    first = next(e for e in cut if e["kind"] == "refcount")
    with pytest.raises(TraceFormatError, match=rf"event {first['step']} \(refcount\) gives storage "
                                               rf"{first['storage']} its first reference, but no alloc"):
        _load(tmp_path, _doc(cut))


def test_one_alloc_removed(tmp_path):
    allocs = [e["step"] for e in TRACE if e["kind"] == "alloc"]
    cut = _renumber([e for e in TRACE if e["step"] != allocs[len(allocs) // 2]])
    with pytest.raises(TraceFormatError, match="no alloc event made it"):
        _load(tmp_path, _doc(cut))


def test_refcounts_that_do_not_add_up(tmp_path):
    i = [e["step"] for e in TRACE if e["kind"] == "refcount"][5]
    events = list(TRACE.events)
    events[i] = {**TRACE[i], "refcount": TRACE[i]["refcount"] + 1}
    with pytest.raises(TraceFormatError, match=rf"event {i} \(refcount\) says storage \d+ went from"):
        _load(tmp_path, _doc(events))


def test_a_free_with_references_left_and_a_double_free(tmp_path):
    frees = [e for e in TRACE if e["kind"] == "free"]
    f = frees[0]
    drop = max(e["step"] for e in TRACE if e["kind"] == "refcount" and e["storage"] == f["storage"]
               and e["step"] < f["step"])
    cut = _renumber([e for e in TRACE if e["step"] != drop])
    with pytest.raises(TraceFormatError, match=rf"frees storage {f['storage']} while it still has 1 reference"):
        _load(tmp_path, _doc(cut))
    doubled = _renumber(TRACE.events[: f["step"] + 1] + [dict(f)] + TRACE.events[f["step"] + 1:])
    with pytest.raises(TraceFormatError, match=rf"uses storage {f['storage']}, which was freed at event {f['step']}"):
        _load(tmp_path, _doc(doubled))


def test_a_block_returned_that_was_never_handed_out(tmp_path):
    cut = _renumber([e for e in TRACE if e["kind"] != "alloc_block"])
    with pytest.raises(TraceFormatError, match=r"\(free_block\) returns block \d+, which no alloc_block"):
        _load(tmp_path, _doc(cut))


def test_an_older_version_1_trace_still_loads(tmp_path):
    # written before op events carried storages/strides and resets listed their blocks
    events = [
        {"kind": "baseline", "step": 0, "live_bytes": 0, "peak_bytes": 0, "allocators": [],
         "blocks": [], "storages": [], "node_records": {"live": 0, "top": 0}},
        {"kind": "arena_chunk", "step": 1, "arena": "step", "chunk": 0, "nbytes": 256, "growth": False},
        {"kind": "alloc_block", "step": 2, "allocator": "step", "block": 1, "chunk": 0, "offset": 0,
         "nbytes": 16, "size": 16, "padding": 0, "tag": "activation"},
        {"kind": "alloc", "step": 3, "storage": 1, "nbytes": 16, "dtype": "float32", "tag": "activation",
         "allocator": "step", "block": 1},
        {"kind": "refcount", "step": 4, "storage": 1, "refcount": 1, "delta": 1, "holder": "tensor 1"},
        {"kind": "op", "step": 5, "op": "Exp", "node": None, "inputs": [1], "output": 2},
        {"kind": "arena_reset", "step": 6, "arena": "step"},
        {"kind": "refcount", "step": 7, "storage": 1, "refcount": 0, "delta": -1, "holder": "tensor 1"},
        {"kind": "free", "step": 8, "storage": 1, "nbytes": 16, "stale": True},
    ]
    tr = _load(tmp_path, _doc(events))
    assert tr.live_bytes() == [0, 0, 0, 16, 16, 16, 0, 0, 0]


_ONE_OF = st.sampled_from([None, True, 0, -1, 3, 2.5, "x", [], [1], {}, {"a": 1}])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_single_event_removed_or_field_changed_loads_and_replays_or_is_refused(tmp_path, data):
    events = [dict(e) for e in TRACE.events]
    i = data.draw(st.integers(0, len(events) - 1))
    if data.draw(st.booleans()):
        events = _renumber(events[:i] + events[i + 1:])
    else:
        field = data.draw(st.sampled_from(sorted(k for k in events[i] if k not in ("kind", "step"))))
        events[i][field] = data.draw(_ONE_OF)
    try:
        tr = _load(tmp_path, _doc(events))
    except TraceFormatError as e:
        assert "t.json: event" in str(e)
        return
    tr.state_at(-1), tr.lifetimes(), tr.live_bytes()
    assert min(tr.live_bytes()) >= 0


def test_nested_baseline_fields_and_holders_are_checked(tmp_path):
    base = TRACE[0]
    assert base["kind"] == "baseline" and base["allocators"]
    events = list(TRACE.events)
    events[0] = {**base, "allocators": [{**base["allocators"][0], "kind": "buddy"}]}
    with pytest.raises(TraceFormatError, match=r"event 0 \(baseline\): allocators\[0\]: kind 'buddy'"):
        _load(tmp_path, _doc(events))
    events[0] = {**base, "allocators": [{"name": "a", "kind": "arena"}]}
    with pytest.raises(TraceFormatError, match=r"allocators\[0\] has no 'chunks' field"):
        _load(tmp_path, _doc(events))
    i = next(e["step"] for e in TRACE if e["kind"] == "refcount" and e["holder"].startswith("tensor "))
    events = list(TRACE.events)
    events[i] = {**TRACE[i], "holder": "tensor x"}
    with pytest.raises(TraceFormatError, match=rf"event {i} \(refcount\): holder 'tensor x' names no tensor id"):
        _load(tmp_path, _doc(events))


def test_every_event_kind_has_a_schema():
    from microtorch.trace import schema as trace_schema
    from microtorch.trace.events import KINDS

    assert set(trace_schema.FIELDS) == set(KINDS)


def test_traces_of_the_other_allocators_and_of_checkpoints_load_back(tmp_path):
    import threading

    import numpy as np

    import microtorch as mt
    from microtorch.memory import BestFit, Buddy, Pool

    mt.save({"x": np.ones((64, 64), np.float32)}, tmp_path / "x.npz")
    x = mt.load(tmp_path / "x.npz", mmap=True)["x"]
    pool, buddy, fit = Pool(name="t pool", thread_cache=2), Buddy(heap_bytes=4096), BestFit(heap_bytes=4096)
    w = mt.randn(8, 8, requires_grad=True)
    with mt.trace() as tr:
        for allocator in (buddy, fit):
            allocator.free(allocator.alloc(300))
        blocks = []
        t = threading.Thread(target=lambda: blocks.extend(pool.alloc(100) for _ in range(4)))
        t.start(), t.join()
        for b in blocks:
            pool.free(b)
        x._storage.block.owner.record_pages("pages")
        for reentrant in (False, True):
            a = mt.randn(2, 8, requires_grad=True)
            y = mt.utils.checkpoint.checkpoint(lambda a: (a @ w).tanh(), a, use_reentrant=reentrant)
            y.sum().backward()
    kinds = set(tr.kinds())
    assert {"buddy_alloc", "fit_free", "thread_cache", "mmap_pages", "checkpoint", "recompute"} <= kinds
    tr.save(tmp_path / "all.json")
    assert mt.Trace.load(tmp_path / "all.json").events == tr.events
