"""The backward engine (microtorch/autograd.py) and graph nodes (microtorch/node.py), pinned
where mutation testing (`make mutate`, tests/README.md) found behaviour no other test fixed.

Expected values never come from the code under test: trace events are checked against the
graph worked out by hand (which node waits for how many gradients, which storages each op
saves), gradients against formulas written here in numpy.
"""
from __future__ import annotations

import gc

import numpy as np
import pytest

import microtorch as mt
import microtorch.autograd as autograd
from microtorch import nn
from microtorch.autograd import GradientSink, gradient_sink


def leaf(values):
    return mt.tensor(values, dtype=mt.float64, requires_grad=True)


def events(tr, kind):
    return [e for e in tr.events if e.kind == kind]


# -- trace events of one backward pass, worked out by hand -------------------------------------
# loss = sum(exp(x * c) * x): four nodes in a chain Sum <- Mul2 <- Exp <- Mul1, and x feeds both
# Mul1 and Mul2. d loss / dx = exp(xc) + x c exp(xc).
X0, C0 = np.array([1.0, 2.0]), np.array([3.0, -1.0])


def _chain_graph():
    x, c = leaf(X0), mt.tensor(C0, dtype=mt.float64)
    y = x * c
    z = y.exp()
    p = z * x
    loss = p.sum()
    return x, c, y, z, p, loss


def test_forward_op_events_say_what_each_op_read_saved_and_recorded():
    with mt.trace() as tr:
        x, c, y, z, p, loss = _chain_graph()
        mul1, exp, mul2, sm = y.grad_fn, z.grad_fn, p.grad_fn, loss.grad_fn
        slots = [n.slot for n in (mul1, exp, mul2, sm)]
        ops = events(tr, "op")
    tid = lambda t: t._tid  # noqa: E731 (ids the recorder gave each tensor and node)
    sid = lambda t: t._storage.id  # noqa: E731
    nid = lambda n: n._nid  # noqa: E731
    assert [e["op"] for e in ops] == ["Mul", "Exp", "Mul", "Sum"]
    assert all(e["phase"] == "forward" and e["dtype"] == "float64" and e["inplace"] is False for e in ops)
    assert [e["node"] for e in ops] == [nid(mul1), nid(exp), nid(mul2), nid(sm)]
    assert len(set(e["node"] for e in ops)) == 4 and None not in [e["node"] for e in ops]
    assert [e["slot"] for e in ops] == slots and len(set(slots)) == 4
    assert [e["inputs"] for e in ops] == [[tid(x), tid(c)], [tid(y)], [tid(z), tid(x)], [tid(p)]]
    assert [e["output"] for e in ops] == [tid(y), tid(z), tid(p), tid(loss)]
    assert [e["shape"] for e in ops] == [[2], [2], [2], []]
    # x * c with only x needing a gradient keeps c; exp keeps its output; z * x keeps both; sum nothing
    assert [e["saved"] for e in ops] == [[sid(c)], [sid(z)], [sid(z), sid(x)], []]
    assert [e["next"] for e in ops] == [[{"leaf": tid(x)}, None], [{"node": nid(mul1)}],
                                        [{"node": nid(exp)}, {"leaf": tid(x)}], [{"node": nid(mul2)}]]
    assert [e["input_storages"] for e in ops] == [[sid(x), sid(c)], [sid(y)], [sid(z), sid(x)], [sid(p)]]
    assert [e["input_strides"] for e in ops] == [[[1], [1]], [[1]], [[1], [1]], [[1]]]
    assert [e["output_storage"] for e in ops] == [sid(y), sid(z), sid(p), sid(loss)]


def test_op_events_without_a_graph_and_of_in_place_ops_and_strided_inputs():
    at = mt.arange(6.0).reshape(2, 3).T  # a strided view
    with mt.trace() as tr:
        t = at * 2.0  # no input requires grad: no node
        t.add_(1.0)  # in place
    mul, add_ = events(tr, "op")
    assert mul["op"] == "Mul" and mul["node"] is None and mul["slot"] is None
    assert mul["next"] == [] and mul["saved"] == []
    assert mul["input_strides"][0] == [1, 3] and mul["shape"] == [3, 2]
    assert add_["inplace"] is True and mul["inplace"] is False
    assert add_["output_storage"] == add_["input_storages"][0] == t._storage.id


def test_saved_tensors_are_held_by_their_node_in_the_refcount_events():
    with mt.trace() as tr:
        x, c, y, z, p, loss = _chain_graph()
        exp = z.grad_fn
        node_id, zs = exp._nid, z._storage.id
        loss.backward()
    by_node = [e for e in events(tr, "refcount") if e["holder"].kind == "node" and e["holder"].id == node_id]
    # Exp saved its output once (+1) and let go of it after it ran (-1)
    assert [(e["storage"], e["delta"]) for e in by_node] == [(zs, 1), (zs, -1)]
    assert all(e["holder"] == f"node {node_id} (ExpBackward)" for e in by_node)


def test_a_backward_pass_in_the_trace_counts_dependencies_as_worked_out_by_hand():
    x, c, y, z, p, loss = _chain_graph()
    seed = mt.tensor(1.0, dtype=mt.float64)
    with mt.trace() as tr:
        s, m2, e, m1 = loss.grad_fn, p.grad_fn, z.grad_fn, y.grad_fn
        slots = {n: n.slot for n in (s, m2, e, m1)}
        loss.backward(seed)
        after = mt.ones(1) * 2  # recorded after backward: forward again
        ops = events(tr, "op")
    ids = {n: n._nid for n in (s, m2, e, m1)}
    S, M2, E, M1 = (ids[n] for n in (s, m2, e, m1))
    bw, = events(tr, "backward")
    assert bw["order"] == "deps" and bw["roots"] == [loss._tid]
    assert bw["pending"] == {S: 0, M2: 1, E: 1, M1: 1} and bw["ready"] == [S]
    runs = events(tr, "node_run")
    assert [r["node"] for r in runs] == [S, M2, E, M1]
    assert [r["op"] for r in runs] == ["SumBackward", "MulBackward", "ExpBackward", "MulBackward"]
    assert [r["grad_shape"] for r in runs] == [[], [2], [2], [2]]
    assert [r["pending"] for r in runs] == [{S: 0, M2: 0, E: 1, M1: 1}, {S: 0, M2: 0, E: 0, M1: 1},
                                            {S: 0, M2: 0, E: 0, M1: 0}, {S: 0, M2: 0, E: 0, M1: 0}]
    assert [r["ready"] for r in runs] == [[M2], [E], [M1], []]
    # each node's incoming gradient: the seed for the root, else a storage an op of the backward made
    made_in_backward = {o["output_storage"] for o in ops if o["phase"] == "backward"}
    assert runs[0]["grad_storage"] == seed._storage.id
    assert all(r["grad_storage"] in made_in_backward for r in runs[1:])
    assert made_in_backward and all(o["phase"] in ("forward", "backward") for o in ops)
    assert ops[-1]["phase"] == "forward" and ops[-1]["output"] == after._tid
    releases = events(tr, "release")
    assert [(r["node"], r["slot"], r["dropped"]) for r in releases] == [
        (ids[n], slots[n], False) for n in (s, m2, e, m1)]


def test_grad_events_give_the_leaf_its_grad_storage_the_source_and_the_norm():
    x, c, y, z, p, loss = _chain_graph()
    with mt.trace() as tr:
        loss.backward()
    ez = np.exp(X0 * C0)
    first, second = events(tr, "grad")  # x gets one gradient from Mul2, then one from Mul1
    assert first["tensor"] == second["tensor"] == x._tid
    assert first["shape"] == second["shape"] == [2]
    assert first["storage"] == second["storage"] == x.grad._storage.id
    assert first["norm"] == pytest.approx(np.linalg.norm(ez), rel=1e-12)  # d(z x)/dx = z
    assert second["norm"] == pytest.approx(np.linalg.norm(ez + X0 * C0 * ez), rel=1e-12)
    assert np.allclose(x.grad.numpy(), ez + X0 * C0 * ez)
    for g in (first, second):  # the source is the gradient the op just computed, not the .grad
        before = [o for o in events(tr, "op") if o.step < g.step]
        assert g["source"] == before[-1]["output_storage"] != g["storage"]


def test_the_topological_order_variant_records_its_schedule():
    x, c, y, z, p, loss = _chain_graph()
    nodes = [loss.grad_fn, p.grad_fn, z.grad_fn, y.grad_fn]
    with mt.trace() as tr:
        loss.backward(order="topo")
    bw, = events(tr, "backward")
    assert bw["order"] == "topo" and bw["roots"] == [loss._tid]
    assert bw["schedule"] == [n._nid for n in nodes]  # consumers first
    runs = events(tr, "node_run")
    assert [r["node"] for r in runs] == [n._nid for n in nodes]
    assert all(r["pending"] is None and r["ready"] is None for r in runs)
    assert np.allclose(x.grad.numpy(), np.exp(X0 * C0) * (1 + X0 * C0))
