"""The trace recorder: events only inside ``with mt.trace()``, one per engine step, replayable.

The pictures are pure functions of a trace, so the trace must be complete and consistent
on its own: refcount values are running sums, every free follows an alloc, every node that
ran in backward is reported once, and a saved trace loads back equal.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import microtorch as mt
from microtorch import recording as trace_module
from microtorch.trace.events import KINDS


def small_training_step():
    x = mt.randn(4, 3, requires_grad=True)
    w = mt.randn(3, 2, requires_grad=True)
    h = (x @ w).tanh()
    loss = (h * h).mean()
    loss.backward()
    return x, w, loss


def test_recording_is_off_by_default_and_only_inside_the_block():
    assert trace_module.active is None
    small_training_step()  # runs fine with nothing recording
    assert trace_module.active is None
    with mt.trace() as tr:
        assert trace_module.active is tr
        mt.ones(2) * 2
    n = len(tr)
    assert n > 0
    assert trace_module.active is None
    small_training_step()
    assert len(tr) == n  # nothing recorded after the block


def test_active_is_restored_after_an_exception_and_when_nested():
    with pytest.raises(ValueError):
        with mt.trace():
            raise ValueError
    assert trace_module.active is None
    with mt.trace() as outer:
        with mt.trace() as inner:
            mt.ones(1) + 1
        assert trace_module.active is outer
        mt.ones(1) * 3
    assert trace_module.active is None
    assert [e["op"] for e in inner.filter("op")] == ["Add"]
    assert [e["op"] for e in outer.filter("op")] == ["Mul"]


def test_all_event_kinds_appear_in_a_training_step():
    from microtorch.memory import Arena, Pool, step_arena, use_pool

    with mt.trace() as tr:
        # a small arena (so it grows) and a pool with deferred release (so epochs count)
        with use_pool(Pool(defer_epochs=1)) as pool, step_arena(Arena(capacity=64)):
            _, w, loss = small_training_step()
            loss.item()  # a read outside an op
            mt.optim.SGD([w], lr=0.1).step()  # the update: an optimizer_step event
            pool.advance_epoch()
        x = mt.randn(3, requires_grad=True)  # a checkpointed region: checkpoint and recompute events
        mt.utils.checkpoint.checkpoint(lambda z: z.tanh().exp(), x, use_reentrant=False).sum().backward()
        tr.mark("step done")  # the one kind only a user emits
    kinds = tr.kinds()
    # kinds of allocators a training step does not use (tested in test_buddy / test_thread_cache)
    elsewhere = {"buddy_alloc", "buddy_free", "fit_alloc", "fit_free", "mmap_pages", "thread_cache"}
    assert set(kinds) == set(KINDS) - elsewhere
    for i, e in enumerate(tr):
        assert e["step"] == i and e["kind"] in KINDS
    assert sum(kinds.values()) == len(tr)
    assert tr.filter("grad") and all(e["kind"] == "grad" for e in tr.filter("grad"))


def test_op_events_describe_forward_and_backward():
    with mt.trace() as tr:
        x = mt.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        loss = y.sum()
        with mt.no_grad():
            z = x * 2
        loss.backward()
    ops = tr.filter("op")
    forward = [e for e in ops if e["phase"] == "forward"]
    assert [e["op"] for e in forward] == ["Exp", "Sum", "Mul"]
    exp, s, mul = forward
    assert exp["shape"] == [2] and exp["dtype"] == "float32"
    assert exp["node"] is not None and exp["next"] == [{"leaf": x._tid}]
    assert exp["saved"] == [y.storage.id]  # Exp saves its output
    assert s["next"] == [{"node": exp["node"]}]
    assert mul["node"] is None  # under no_grad no graph is recorded
    assert all(e["phase"] == "backward" for e in ops[ops.index(mul) + 1:])
    assert z.grad_fn is None


def test_node_runs_and_grads_match_the_engine():
    with mt.trace() as tr:
        x, w, loss = small_training_step()
    runs = tr.filter("node_run")
    assert [e["op"] for e in runs] == ["MeanBackward", "MulBackward", "TanhBackward", "MatmulBackward"]
    assert len({e["node"] for e in runs}) == len(runs)
    assert runs[-1]["pending"] and all(c == 0 for c in runs[-1]["pending"].values())
    (start,) = tr.filter("backward")
    assert start["order"] == "deps" and start["step"] < runs[0]["step"]
    grads = {e["tensor"]: e for e in tr.filter("grad")}
    for leaf in (x, w):
        e = grads[leaf._tid]
        assert e["shape"] == list(leaf.shape)
        assert e["norm"] == pytest.approx(float(np.linalg.norm(leaf.grad.numpy())), rel=1e-6)


def test_memory_events_are_consistent():
    with mt.trace() as tr:
        x, w, loss = small_training_step()
        del loss
    allocated, freed, count = set(), set(), {}
    for e in tr:
        if e["kind"] == "alloc":
            assert e["storage"] not in allocated
            allocated.add(e["storage"])
            count[e["storage"]] = 0
        elif e["kind"] == "refcount":
            assert e["storage"] in allocated and e["storage"] not in freed
            count[e["storage"]] += e["delta"]
            assert e["refcount"] == count[e["storage"]]  # the new value is the running sum
        elif e["kind"] == "free":
            assert count[e["storage"]] == 0
            freed.add(e["storage"])
    assert freed  # intermediates and saved tensors were freed inside the block
    # the trace's final counts are the live engine's counts
    for t in (x, w, x.grad, w.grad):
        assert count[t.storage.id] == t.storage.refcount
    tensors = {e["tensor"]: e for e in tr.filter("tensor")}
    assert tensors[x._tid]["shape"] == [4, 3] and tensors[x._tid]["storage"] == x.storage.id


def test_release_events_follow_backward():
    with mt.trace() as tr:
        x = mt.tensor([1.0, 2.0], requires_grad=True)
        loss = (x * x).sum()
        loss.backward(retain_graph=True)
        n_retained = len(tr.filter("release"))
        loss.backward()
    assert n_retained == 0
    # after the second backward both nodes (Mul, Sum) let go: saved tensors and node records
    assert len(tr.filter("release")) == 2
    assert {e["node"] for e in tr.filter("release")} == {e["node"] for e in tr.filter("op") if e["node"]}


def test_save_load_round_trip(tmp_path):
    with mt.trace() as tr:
        small_training_step()
        a = mt.randn(3, requires_grad=True)
        (a * a).sum().backward(order="topo")
    path = tmp_path / "step.json"
    tr.save(path)
    doc = json.loads(path.read_text())  # plain JSON
    assert doc["format"] == "microtorch-trace/1" and len(doc["events"]) == len(tr)
    back = mt.Trace.load(path)
    assert back.events == tr.events
    assert back.kinds() == tr.kinds()
    assert repr(back) == repr(tr)


def test_load_rejects_other_files(tmp_path):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"events": []}))
    with pytest.raises(ValueError, match="not a microtorch trace"):
        mt.Trace.load(p)


def test_trace_reading_helpers():
    tr = mt.Trace([{"kind": "alloc", "step": 0}, {"kind": "op", "step": 1}, {"kind": "alloc", "step": 2}])
    assert len(tr) == 3 and tr[1]["kind"] == "op"
    assert [e["step"] for e in tr.filter("alloc")] == [0, 2]
    assert tr.kinds() == {"alloc": 2, "op": 1}
    assert "alloc=2" in repr(tr)
