"""Storage reference counts: +1 per tensor viewing a storage, +1 per node slot that saved it.

The counts are the engine's real bookkeeping (a storage is freed when its count reaches 0),
so these tests follow one storage through views, saved tensors, backward, retain_graph and
``del``. The cyclic garbage collector is switched off in every test: the counts must be
right by reference counting alone, with no cycle left for a collector to find.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt


pytestmark = pytest.mark.usefixtures("no_cycle_collector")  # in every test (tests/conftest.py)


def test_a_new_tensor_holds_one_reference():
    x = mt.randn(3)
    assert x.storage.refcount == 1 and not x.storage.freed


def test_each_view_adds_one_and_deleting_it_removes_one():
    x = mt.zeros(4, 3)
    s = x.storage
    views = [x.T, x[1:], x.reshape(12), x.unsqueeze(0), x[:, :1].expand(4, 5), x.detach()]
    assert s.refcount == 1 + len(views)
    for i in range(len(views)):
        views.pop()
        assert s.refcount == len(views) + 1
    assert s.refcount == 1


def test_storage_freed_exactly_when_the_last_view_goes():
    x = mt.zeros(5)
    s = x.storage
    v = x[2:]
    del x
    assert v._base is not None  # the view keeps its base tensor alive, as in PyTorch
    assert s.refcount == 2 and not s.freed and s.data is not None
    assert v.tolist() == [0.0, 0.0, 0.0]  # the bytes are still there
    del v
    assert s.refcount == 0 and s.freed and s.data is None


def test_a_copy_does_not_touch_the_source_count():
    x = mt.ones(3)
    c = x.clone()
    r = x.T.reshape(3) if x.ndim > 1 else x * 1
    assert x.storage.refcount == 1
    assert c.storage.refcount == 1 and r.storage.refcount == 1


def test_nodes_add_one_per_saved_slot():
    x = mt.randn(3, requires_grad=True)
    w = mt.randn(3, requires_grad=True)
    y = x * w  # Mul saves both inputs
    assert x.storage.refcount == 2 and w.storage.refcount == 2
    assert y.storage.refcount == 1  # nothing saved y (yet)
    z = y * y  # saves y twice: two slots
    assert y.storage.refcount == 3
    e = z.exp()  # Exp saves its own output
    assert e.storage.refcount == 2
    a = x + w  # Add saves nothing
    assert x.storage.refcount == 2 and a.storage.refcount == 1


def test_no_grad_saves_nothing():
    x = mt.randn(3, requires_grad=True)
    with mt.no_grad():
        y = (x * x).exp()
    assert x.storage.refcount == 1 and y.storage.refcount == 1 and y.grad_fn is None


def test_saved_tensors_released_after_backward():
    x = mt.randn(3, requires_grad=True)
    h = x.tanh()          # saves its output h
    hs = h.storage
    loss = (h * h).sum()  # Mul saves h twice
    assert hs.refcount == 4
    del h
    assert hs.refcount == 3 and not hs.freed  # the graph keeps the bytes alive
    loss.backward()
    assert hs.refcount == 0 and hs.freed and hs.data is None
    assert x.storage.refcount == 1  # only x itself


def test_retain_graph_keeps_saved_tensors_until_the_last_backward():
    x = mt.randn(3, requires_grad=True)
    h = x.tanh()
    hs = h.storage
    loss = (h * h).sum()
    del h
    loss.backward(retain_graph=True)
    assert hs.refcount == 3 and not hs.freed
    loss.backward(retain_graph=True)
    assert hs.refcount == 3
    loss.backward()
    assert hs.refcount == 0 and hs.freed


def test_deleting_an_unbackwarded_graph_releases_saved_tensors():
    x = mt.randn(3, requires_grad=True)
    h = x.exp()
    hs = h.storage
    loss = (h * x).sum()
    assert hs.refcount == 3 and x.storage.refcount == 2
    del h
    assert hs.refcount == 2
    del loss
    assert hs.freed and hs.refcount == 0
    assert x.storage.refcount == 1 and not x.storage.freed


def test_view_saved_by_a_node_keeps_the_base_storage():
    x = mt.randn(4, 3, requires_grad=True)
    y = x * 2
    ys = y.storage
    loss = (y.T[1:] * 3.0).sum()  # views, then Mul by a constant: y's values are not needed
    loss2 = (y[1:] * y[1:]).sum()  # Mul saves two views of y's storage (each for the other's grad)
    del y
    assert ys.refcount == 2 and not ys.freed  # the two slots in loss2's Mul
    del loss
    assert ys.refcount == 2
    loss2.backward()
    assert ys.freed
    np.testing.assert_allclose(x.grad.numpy()[1:], 8 * x.detach().numpy()[1:])
    assert (x.grad.numpy()[0] == 0).all()


def test_leaf_grad_has_its_own_storage():
    x = mt.randn(2, 3, requires_grad=True)
    x.expand(4, 2, 3).sum().backward()  # the raw gradient is a stride-0 view
    assert x.grad.storage is not x.storage
    assert x.grad.storage.refcount == 1 and x.grad.is_contiguous()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 4.0))


def test_refcount_events_match_the_counts():
    with mt.trace() as tr:
        x = mt.randn(3, requires_grad=True)
        y = x.exp()
        ys = y.storage
        loss = y.sum()
        del y
        loss.backward()
    events = [e for e in tr.filter("refcount", "free") if e["storage"] == ys.id]
    counts = [e["refcount"] for e in events if e["kind"] == "refcount"]
    deltas = [e["delta"] for e in events if e["kind"] == "refcount"]
    assert counts == list(np.cumsum(deltas))  # each event's value is the running sum
    assert counts[-1] == 0 and events[-1]["kind"] == "free"
    assert sum(e["kind"] == "free" for e in events) == 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["view", "T", "slice", "op", "drop", "drop_first"]), min_size=1, max_size=12))
def test_random_view_and_drop_sequences(actions):
    """The count always equals the number of live tensors viewing the storage; freed exactly at 0.

    A view keeps its base tensor alive through ``_base`` (as in PyTorch), so the base counts
    as live while any view of it is.
    """
    live = [mt.zeros(4, 4)]
    s, base_id = live[0].storage, id(live[0])

    def expected():
        base_held = bool(live) and all(id(t) != base_id for t in live)
        return len(live) + base_held

    for act in actions:
        if not live:
            break
        if act == "view":
            live.append(live[-1].reshape(-1) if live[-1].is_contiguous() else live[-1].T)
        elif act == "T":
            live.append(live[-1].T)
        elif act == "slice":  # stays non-empty (an empty result shares no bytes to count)
            live.append(live[-1][1:] if live[-1].shape[0] > 1 else live[-1][:])
        elif act == "op":
            assert (live[-1] * 2).storage is not s  # a new storage, not counted on s
        elif act == "drop":
            live.pop()
        else:
            live.pop(0)
        assert s.refcount == expected()
        assert s.freed == (expected() == 0)
    live.clear()
    assert s.freed and s.refcount == 0 and s.data is None
