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


def tid(t):
    """The id the recorder gave a tensor."""
    return t._tid


def sid(t):
    """The id of a tensor's storage."""
    return t._storage.id


def nid(n):
    """The id the recorder gave a graph node."""
    return n._nid


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


# -- the gradient sink: .grad, homes in a flat buffer, version counters --------------------------
def test_a_leafs_own_grad_is_a_gradient_storage_bumped_once_per_accumulation():
    x = leaf([1.0, -2.0, 0.5])
    c = mt.tensor([2.0, 3.0, -1.0], dtype=mt.float64)
    versions = []
    for _ in range(3):
        (x * c).sum().backward()
        versions.append(x.grad._version)
    assert x.grad._storage.tag == "gradient"  # served by the allocator for gradients
    assert versions == [versions[0], versions[0] + 1, versions[0] + 2]  # each += is one in-place write
    assert np.array_equal(x.grad.numpy(), 3 * np.array([2.0, 3.0, -1.0]))


def test_the_grad_a_graph_saved_is_refused_after_another_backward_added_into_it():
    x = leaf([1.0, 2.0])
    (x * 3.0).sum().backward()
    w = leaf([1.0, 1.0])
    y = (x.grad * w).sum()  # saves x.grad for w's gradient
    (x * 3.0).sum().backward()  # x.grad += 3, in place
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_placed_leaf_gets_its_gradient_in_its_home_with_one_version_step_per_write():
    x = leaf([1.0, -2.0, 0.5])
    c = np.array([2.0, 3.0, -1.0])
    buffer = mt.zeros(5, dtype=mt.float64)
    buffer.zero_()
    buffer.zero_()  # the buffer's storage has seen writes before: its version is not 0
    home = buffer[1:4]
    gradient_sink.place(x, home)
    try:
        v0 = home._version
        assert v0 >= 2
        (x * mt.tensor(c, dtype=mt.float64)).sum().backward()
        assert x.grad is home and home._version == v0 + 1
        assert np.array_equal(buffer.numpy(), [0.0, *c, 0.0])
        (x * mt.tensor(c, dtype=mt.float64)).sum().backward()
        assert x.grad is home and home._version == v0 + 2
        assert np.array_equal(buffer.numpy(), [0.0, *(2 * c), 0.0])
    finally:
        gradient_sink.remove(x)


def test_linear_computes_its_weight_gradient_straight_into_the_flat_buffer_only_in_a_plain_backward():
    rng = np.random.default_rng(1)
    model = nn.Linear(3, 2).double()
    flat = nn.flatten_parameters(model)
    x0 = rng.standard_normal((4, 3))
    x = mt.tensor(x0, dtype=mt.float64)
    w_home, b_home = flat.homes[0], flat.homes[1]
    with mt.trace() as tr:
        model(x).sum().backward()
    grads = {e["tensor"]: e for e in events(tr, "grad")}
    w_event, b_event = grads[model.weight._tid], grads[model.bias._tid]
    # the node wrote into the homes: what was accumulated is the home itself (nothing copied)
    assert w_event["source"] == w_event["storage"] == flat.grad._storage.id
    assert b_event["source"] == b_event["storage"] == flat.grad._storage.id
    assert model.weight.grad is w_home and model.bias.grad is b_home
    assert np.allclose(w_home.numpy(), np.tile(x0.sum(0), (2, 1)))  # d sum(x W^T + b) / dW = 1^T x
    assert np.allclose(b_home.numpy(), [4.0, 4.0])
    # grad() and backward(inputs=...) are not plain: nothing may be written into the homes of a
    # fresh model's leaves (their .grad is None, so a plain backward would write there)
    for call in ("grad", "inputs", "create_graph"):
        model = nn.Linear(3, 2).double()
        flat = nn.flatten_parameters(model)
        assert model.weight.grad is None and np.all(flat.grad.numpy() == 0)
        xin = mt.tensor(x0, dtype=mt.float64, requires_grad=True)
        if call == "grad":
            gw, = mt.grad(model(xin).sum(), [model.weight])
            assert np.allclose(gw.numpy(), np.tile(x0.sum(0), (2, 1)))
        elif call == "inputs":
            model(xin).sum().backward(inputs=[xin])
        else:
            model(xin).sum().backward(inputs=[xin], create_graph=True)
        assert np.all(flat.grad.numpy() == 0) and model.weight.grad is None
        if call != "grad":
            assert np.allclose(xin.grad.detach().numpy(), np.tile(model.weight.detach().numpy().sum(0), (4, 1)))


def test_gradient_sink_homes_are_by_identity_and_go_with_their_leaf():
    sink = GradientSink()
    x, y = mt.zeros(3, requires_grad=True), mt.zeros(3, requires_grad=True)
    hx, hy = mt.zeros(3), mt.zeros(3)
    sink.place(x, hx)
    sink.place(y, hy)
    assert sink.home(x) is hx and sink.home(y) is hy and len(sink) == 2
    assert sink.home(mt.zeros(3, requires_grad=True)) is None
    sink.remove(mt.zeros(3))  # a leaf without a home: nothing happens
    assert len(sink) == 2
    sink.remove(x)
    assert sink.home(x) is None and sink.home(y) is hy and len(sink) == 1
    del y
    gc.collect()
    assert len(sink) == 0  # the entry went with its leaf
    with pytest.raises(ValueError, match="must match its leaf"):
        sink.place(x, mt.zeros(2))
    with pytest.raises(ValueError, match="must match its leaf"):
        sink.place(x, mt.zeros(3, dtype=mt.float64))
    with pytest.raises(ValueError, match="must match its leaf"):
        sink.place(x, mt.zeros(2, dtype=mt.float64))


def test_destinations_are_homes_only_for_a_placed_leaf_without_grad_that_feeds_the_node_once():
    sink = GradientSink()
    a, b = mt.zeros(2, requires_grad=True), mt.zeros(2, requires_grad=True)
    ha, hb = mt.zeros(2), mt.zeros(2)
    sink.place(a, ha)
    sink.place(b, hb)
    c = mt.ones(2)  # needs no gradient: its edge is None

    def dest(node):
        return [("home a" if d is ha else "home b" if d is hb else d) for d in sink.destinations(node)]

    assert dest((a * c).grad_fn) == ["home a", None]
    assert dest((b * b).grad_fn) == [None, None]  # b feeds it twice: its two gradients must be added
    assert dest(((a * 1.0) * b).grad_fn) == [None, "home b"]  # a node's edge: never a destination
    a.grad = mt.ones(2)  # a already has a gradient: the next one is added to it, not written
    assert dest((a * c).grad_fn) == [None, None]
    assert dest((c * b).grad_fn) == [None, "home b"]


def test_a_sparse_gradient_stays_sparse_and_densifies_into_the_leafs_home():
    rows = np.array([1, 4, 1])
    coeff = np.arange(6.0).reshape(3, 2) + 1
    w = leaf(np.zeros((6, 2)))
    buffer = mt.zeros(14, dtype=mt.float64)
    home = buffer[1:13].reshape(6, 2)
    expected = np.zeros((6, 2))
    np.add.at(expected, rows, coeff)

    def loss():
        return (nn.functional.embedding(mt.tensor(rows), w, sparse=True) * mt.tensor(coeff, dtype=mt.float64)).sum()

    gradient_sink.place(w, home)
    try:
        with mt.sparse.gradient_options(densify_threshold=0.1), mt.trace() as tr:
            loss().backward()
            first = w.grad
            assert first.is_sparse and np.allclose(first.to_dense().numpy(), expected)
            loss().backward()  # merged: rows 1 and 4 of 6 are more than 10 %: dense, in the home
        assert not w.grad.is_sparse and w.grad is home
        assert np.allclose(buffer.numpy()[1:13].reshape(6, 2), 2 * expected)
        assert buffer.numpy()[0] == 0 and buffer.numpy()[13] == 0
    finally:
        gradient_sink.remove(w)
    g1, g2 = events(tr, "grad")
    assert g1["tensor"] == w._tid and g1["shape"] == [6, 2]
    assert g1["storage"] == g1["source"] == first._values_t._storage.id  # the first one became .grad
    assert g1["norm"] == pytest.approx(np.linalg.norm(coeff), rel=1e-12)  # its stored values, uncoalesced
    assert g2["storage"] == buffer._storage.id and g2["norm"] == pytest.approx(np.linalg.norm(2 * expected))


def test_the_grad_events_norm_is_summed_in_float64():
    x = mt.tensor([1.0, 2.0, 3.0, 4.0], dtype=mt.float32, requires_grad=True)
    with mt.trace() as tr:
        (x * 1e20).sum().backward()  # a float32 gradient of 1e20: its square overflows float32
    g, = events(tr, "grad")
    assert g["norm"] == pytest.approx(2e20, rel=1e-6)


# -- create_graph, inputs=, retain_graph -------------------------------------------------------
def test_create_graph_makes_grad_a_graph_tensor_and_adds_the_next_one_with_a_graph():
    x = leaf([0.5, -1.0])
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None and np.allclose(x.grad.detach().numpy(), 3 * np.array([0.5, -1.0]) ** 2)
    first = x.grad
    (x ** 3).sum().backward(create_graph=True)  # retained by default with create_graph: again
    assert x.grad is not first and x.grad.grad_fn is not None
    assert np.allclose(x.grad.detach().numpy(), 6 * np.array([0.5, -1.0]) ** 2)
    g = x.grad
    x.grad = None
    g.sum().backward()  # d/dx sum(6 x^2) = 12 x
    assert np.allclose(x.grad.numpy(), 12 * np.array([0.5, -1.0]))


def test_backward_into_non_leaf_inputs_with_create_graph_gives_graph_gradients():
    x = leaf([0.3, 0.7])
    h = x.exp()
    y = (h * h).sum()
    y.backward(inputs=[h, x], create_graph=True)
    e = np.exp([0.3, 0.7])
    assert np.allclose(h.grad.detach().numpy(), 2 * e) and h.grad.grad_fn is not None
    assert np.allclose(x.grad.detach().numpy(), 2 * e * e) and x.grad.grad_fn is not None
    gh = h.grad
    x.grad = None
    gh.sum().backward(inputs=[x])  # d/dx sum(2 e^x) = 2 e^x
    assert np.allclose(x.grad.numpy(), 2 * e)


def test_backward_inputs_fills_only_the_leaves_asked_for():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a * b).sum().backward(inputs=[a])
    assert b.grad is None and np.array_equal(a.grad.numpy(), [3.0, 4.0])
    (a * b).sum().backward(inputs=b)  # one tensor, not a list
    assert np.array_equal(b.grad.numpy(), [1.0, 2.0]) and np.array_equal(a.grad.numpy(), [3.0, 4.0])


def test_retain_graph_defaults_to_create_graph_and_an_explicit_value_wins():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()  # retained: runs again, then releases
    assert np.allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    z = (x.exp() * x).sum()
    z.backward(create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        z.backward()
    g, = mt.grad((x.exp() * x).sum(), [x], create_graph=True)
    g.sum().backward()  # the first graph is still there (retained by create_graph)
    w = (x.exp() * x).sum()
    mt.grad(w, [x], retain_graph=True)
    mt.grad(w, [x])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        mt.grad(w, [x])


# -- mt.grad -----------------------------------------------------------------------------------
def test_grad_sums_every_edge_into_a_leaf_and_detaches_without_create_graph():
    x = leaf([1.0, -2.0])
    y = x.exp()
    gx, gy = mt.grad((x * x * y).sum(), [x, y], retain_graph=False)
    e = np.exp([1.0, -2.0])
    # x enters Mul twice and Exp once: 2 x e^x + x^2 e^x; y's gradient: x^2
    assert np.allclose(gx.numpy(), 2 * np.array([1.0, -2.0]) * e + np.array([1.0, -2.0]) ** 2 * e)
    assert np.allclose(gy.numpy(), [1.0, 4.0])
    assert gx.grad_fn is None and gy.grad_fn is None and x.grad is None
    gv, = mt.grad(x * x, [x], grad_outputs=mt.tensor([1.0, 10.0], dtype=mt.float64))
    assert np.allclose(gv.numpy(), [2.0, -40.0])
    g2, = mt.grad((x * x).sum(), x, create_graph=True)  # a single tensor is fine too
    assert g2.grad_fn is not None and np.allclose(g2.detach().numpy(), [2.0, -4.0])
    h, = mt.grad(g2.sum(), [x])
    assert np.allclose(h.numpy(), [2.0, 2.0])


def test_grad_of_an_unused_input_raises_unless_allowed():
    x, u = leaf([1.0]), leaf([2.0])
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        mt.grad((x * 2).sum(), [x, u])
    gx, gu = mt.grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gu is None and np.array_equal(gx.numpy(), [2.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        mt.grad((x * 2).sum(), [mt.ones(1)])


# -- which passes are plain -------------------------------------------------------------------
def test_in_plain_backward_tells_the_innermost_pass_and_comes_back_after_a_nested_one():
    seen = []

    class Inner(mt.Function):
        @staticmethod
        def forward(ctx, x):
            return x._data * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(("inner", autograd.in_plain_backward()))
            return g

    class Outer(mt.Function):
        @staticmethod
        def forward(ctx, x):
            return x._data * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(("outer before", autograd.in_plain_backward()))
            u = mt.ones(2, requires_grad=True)
            with mt.enable_grad():
                mt.grad(Inner.apply(u).sum(), [u])  # a nested pass, not plain
            seen.append(("outer after", autograd.in_plain_backward()))
            return g

    assert autograd.in_plain_backward() is False
    x = mt.ones(2, requires_grad=True)
    Outer.apply(x).sum().backward()
    assert seen == [("outer before", True), ("inner", False), ("outer after", True)]
    seen.clear()
    Outer.apply(x).sum().backward(create_graph=True)
    Inner.apply(x).sum().backward(inputs=[x])
    assert seen == [("outer before", False), ("inner", False), ("outer after", False), ("inner", False)]
    assert autograd.in_plain_backward() is False


# -- roots ------------------------------------------------------------------------------------
def test_roots_may_be_leaves_repeated_nodes_and_array_gradients():
    x = leaf([1.0, 2.0])
    x.backward(np.array([3.0, 4.0]))  # a leaf root: its gradient goes straight to .grad
    assert np.array_equal(x.grad.numpy(), [3.0, 4.0])
    x.grad = None
    y = x * 2.0
    mt.backward([y, y], [mt.ones(2, dtype=mt.float64), mt.tensor([10.0, 20.0], dtype=mt.float64)])
    assert np.array_equal(x.grad.numpy(), [22.0, 42.0])  # both seeds summed, the node run once
    assert x.grad.grad_fn is None and not x.grad.requires_grad  # no create_graph by default
    with pytest.raises(RuntimeError, match="second time"):  # nor retain_graph
        mt.backward(y, mt.ones(2, dtype=mt.float64))
    x.grad = None
    z = (x * 2.0).exp()  # the same node given twice counts its edges once: Mul still runs
    mt.backward([z, z], [mt.ones(2, dtype=mt.float64), mt.ones(2, dtype=mt.float64)])
    assert np.allclose(x.grad.numpy(), 4 * np.exp([2.0, 4.0]))
    x32 = mt.tensor([1.0, 2.0], requires_grad=True)  # float32
    (x32 * 2.0).backward(np.array([1.0, 0.5]))  # a float64 array gradient takes the output's dtype
    assert x32.grad.dtype == mt.float32 and np.array_equal(x32.grad.numpy(), [2.0, 1.0])
    x32.grad = None
    (x32 * 2.0).sum().backward(3.0)  # and so does a Python number
    assert x32.grad.dtype == mt.float32 and np.array_equal(x32.grad.numpy(), [6.0, 6.0])
    x.grad = None
    s = (x * x).sum()
    s.backward(mt.tensor(2.0, dtype=mt.float64))
    assert np.array_equal(x.grad.numpy(), [4.0, 8.0])
    x.grad = None
    (x * x).sum().backward()  # a scalar: the seed is one
    assert np.array_equal(x.grad.numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="got 1 tensors and 2 gradients"):
        mt.autograd.backward(x * 1.0, [mt.ones(2), mt.ones(2)])
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 1.0).backward(mt.ones(3, dtype=mt.float64))


# -- the topological-order variant: each node once, consumers first ------------------------------
def _schedule(roots, grads):
    with mt.trace() as tr:
        mt.backward(roots, grads, order="topo")
    bw, = events(tr, "backward")
    return bw["schedule"]


def test_topo_schedules_a_shared_node_once_after_all_its_consumers():
    x = leaf([0.5, 1.5])
    h = x.exp()
    a, b = h * 2.0, h * 3.0
    y = (a + b).sum()
    add = y.grad_fn.next[0]
    assert _schedule([y], [None]) == [y.grad_fn._nid, add._nid, b.grad_fn._nid, a.grad_fn._nid, h.grad_fn._nid]
    assert np.allclose(x.grad.numpy(), 5 * np.exp([0.5, 1.5]))


def test_topo_skips_leaf_roots_and_roots_already_scheduled():
    x = leaf([0.5, 1.5])
    y = x.exp()
    z = y * 2.0
    w = z * 3.0
    one = mt.ones(2, dtype=mt.float64)
    sched = _schedule([x, z, w, z], [one, one, one, one])
    assert sched == [w.grad_fn._nid, z.grad_fn._nid, y.grad_fn._nid]  # each once, consumers first
    e = np.exp([0.5, 1.5])
    assert np.allclose(x.grad.numpy(), 1 + 2 * e + 2 * e + 6 * e)


def test_topo_runs_the_roots_after_a_leaf_root():
    x = leaf([0.5, 1.5])
    y = x.exp()
    one = mt.ones(2, dtype=mt.float64)
    x.backward(one, order="topo")  # only a leaf: nothing to schedule
    assert np.array_equal(x.grad.numpy(), [1.0, 1.0])
    x.grad = None
    mt.backward([x, y], [one, one], order="topo")
    assert np.allclose(x.grad.numpy(), 1 + np.exp([0.5, 1.5]))


# -- a second backward through a released graph ---------------------------------------------------
FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
         "after they have already been freed). Saved intermediate values of the graph are freed "
         "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
         "backward through the graph a second time or if you need to access saved tensors after "
         "calling backward.")


def test_a_second_backward_names_a_node_that_saved_nothing():
    x = leaf([1.0, 2.0])
    y = x * x  # Mul saved x: PyTorch's message as it is
    y.backward(mt.ones(2, dtype=mt.float64))
    with pytest.raises(RuntimeError) as e:
        y.backward(mt.ones(2, dtype=mt.float64))
    assert str(e.value) == FREED
    s = (x * 2.0).sum()  # Sum saved nothing: PyTorch would run it again; microtorch says why not
    s.backward()
    with pytest.raises(RuntimeError) as e:
        s.backward()
    assert str(e.value) == FREED + (" (In microtorch this holds for SumBackward too, although it saved "
                                    "no tensors: its record in the node arena was freed after it ran.)")


# -- node.py: saved tensors -----------------------------------------------------------------------
def test_saved_outputs_and_saved_non_leaves_unpack_with_their_graph_for_double_backward():
    x = leaf([0.3, -0.8])
    e = np.exp([0.3, -0.8])
    z = x.exp()  # Exp saves its output
    assert z.grad_fn.saved_tensors[0].grad_fn is z.grad_fn
    g, = mt.grad(z.sum(), [x], create_graph=True)  # g = exp(x), through the saved output
    h, = mt.grad(g.sum(), [x])
    assert np.allclose(h.numpy(), e)
    y = x.exp()
    w = y * y  # Mul saves y, a non-leaf: unpacked with y's node
    assert w.grad_fn.saved_tensors[0].grad_fn is y.grad_fn
    g, = mt.grad(w.sum(), [x], create_graph=True)  # 2 e^{2x}
    h, = mt.grad(g.sum(), [x])
    assert np.allclose(h.numpy(), 4 * e * e)
    c = mt.tensor([2.0, 5.0], dtype=mt.float64)
    m = x * c  # Mul saves c (no grad) for x's gradient, and nothing of x
    saved_c, = [t for t in m.grad_fn.saved_tensors if t is not None]
    assert saved_c is not c and saved_c.requires_grad is False and saved_c.grad_fn is None
    assert (x * x).grad_fn.saved_tensors[0] is x  # a saved leaf is the leaf itself


def test_a_node_keeps_the_bytes_it_saved_not_the_tensor_objects(no_cycle_collector):
    import weakref

    x = leaf([1.0, 2.0])
    c = mt.tensor([2.0, 5.0], dtype=mt.float64)
    h = x.exp()
    y = (h * c).sum()
    refs = [weakref.ref(c), weakref.ref(h)]
    del c, h
    assert [r() for r in refs] == [None, None]  # the Mul node holds their storages only
    y.backward()
    assert np.allclose(x.grad.numpy(), 2 * np.exp(1.0) * np.array([1.0, 0]) + np.exp(2.0) * np.array([0, 5.0]))


def test_a_dropped_graph_frees_its_nodes_and_saved_bytes_without_the_cycle_collector(no_cycle_collector):
    x = leaf([1.0, 2.0])
    with mt.trace() as tr:
        z = x.exp()  # saves its own output: no cycle node -> saved -> node
        node_id, slot, storage = z.grad_fn._nid, z.grad_fn.slot, z._storage
        del z
    assert storage.freed
    rel = [e for e in events(tr, "release") if e["node"] == node_id]
    assert [(e["slot"], e["dropped"]) for e in rel] == [(slot, True)]
    with mt.trace() as tr:
        loss = (x.exp() * x).sum()
        nodes = [loss.grad_fn._nid, loss.grad_fn.next[0]._nid]
        slots = [loss.grad_fn.slot, loss.grad_fn.next[0].slot]
        del loss
    rel = {e["node"]: e for e in events(tr, "release")}
    assert [(rel[n]["slot"], rel[n]["dropped"]) for n in nodes] == [(s, True) for s in slots]


def test_refcount_events_name_the_node_for_saved_inputs_too():
    x = leaf([1.0, 2.0])
    c = mt.tensor([2.0, 5.0], dtype=mt.float64)
    with mt.trace() as tr:
        m = x * c
        nid, cs = m.grad_fn._nid, c._storage.id
    held = [e for e in events(tr, "refcount") if e["storage"] == cs and e["delta"] == 1]
    assert [(h["holder"].kind, h["holder"].id) for h in held] == [("node", nid)]
    del m


def test_an_in_place_change_of_saved_bytes_names_the_tensors_maker_in_the_error():
    x = leaf([1.0, 2.0])
    c = mt.tensor([2.0, 5.0], dtype=mt.float64)
    y = (x * c).sum()  # c, a tensor no node made
    c.add_(1.0)
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert "inplace operation: [mt.float64 [2]] is at version 1; expected version 0 instead." in str(e.value)
    h = x.exp()
    y = (h * leaf([1.0, 1.0])).sum()  # saves h, made by Exp
    with mt.no_grad():
        h.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"\[mt.float64 \[2\]\], which is output 0 of ExpBackward, is at version"):
        y.backward()


def test_an_in_place_change_is_caught_on_the_numpy_backward_path_too():
    x = mt.tensor(np.ones((3, 2)), dtype=mt.float64)
    model = nn.Linear(2, 1).double()
    y = model(x).sum()  # Linear saves x for W's gradient; its backward without a graph is numpy
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*after LinearBackward saved them"):
        y.backward()


# -- node.py: in-place variants ------------------------------------------------------------------
def test_in_place_variants_say_what_their_backward_uses_and_are_declared_with_their_class():
    from microtorch.memory import inplace_analysis
    from microtorch.node import InplaceVariant

    # the words the in-place plan shows (tests/test_inplace_plan.py pins relu_'s in a plan)
    assert InplaceVariant("relu_", reads="output").backward_uses() == "relu_ takes its gradient from its output"
    assert InplaceVariant("neg_", reads="nothing").backward_uses() == "neg_ needs no values for backward"
    assert InplaceVariant("mul_", reads="other operand").backward_uses() == "mul_ needs only the other operand"
    assert InplaceVariant("clamp_", reads="mask", why="x in [lo, hi]").backward_uses() == \
        "clamp_ keeps a boolean mask (x in [lo, hi])"
    assert inplace_analysis.VARIANTS["Relu"] == ("relu_", (0,))
    assert inplace_analysis.VARIANTS["Add"] == ("add_", (0, 1))
    assert inplace_analysis._BACKWARD_USES["Relu"] == \
        "relu_ takes its gradient from its output (x > 0 exactly where relu(x) > 0)"

    try:
        class Halve(mt.Function):
            inplace_variant = InplaceVariant("halve_", reads="nothing", overwrites=(1,))

            @staticmethod
            def forward(ctx, x):
                return x._data / 2

        class HalveAgain(Halve):  # inherits the variant: declares nothing of its own
            pass

        assert inplace_analysis.VARIANTS["Halve"] == ("halve_", (1,))
        assert inplace_analysis._BACKWARD_USES["Halve"] == "halve_ needs no values for backward"
        assert "HalveAgain" not in inplace_analysis.VARIANTS
    finally:  # the registry again as the engine declared it (test_inplace_variants.py checks)
        inplace_analysis.VARIANTS.pop("Halve", None)
        inplace_analysis._BACKWARD_USES.pop("Halve", None)


# -- node.py: applying ops -----------------------------------------------------------------------
def test_a_result_computed_into_ctx_empty_keeps_those_bytes():
    made = []

    class Twice(mt.Function):
        @staticmethod
        def forward(ctx, x):
            out = ctx.empty(x._data.shape, x._data.dtype)
            np.multiply(x._data, 2, out=out)
            made.append(out)
            return out

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    x = leaf([1.0, 2.0, 3.0])
    y = Twice.apply(x)
    assert y._data is made[0]  # no copy: the result owns the storage empty() made
    y.sum().backward()
    assert np.array_equal(y.detach().numpy(), [2.0, 4.0, 6.0]) and np.array_equal(x.grad.numpy(), [2.0] * 3)


def test_views_share_storage_carry_the_graph_and_copies_do_not_pretend_to_be_views():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    v = x[1:3]
    assert v.storage is x.storage and v.requires_grad is True and v.grad_fn is not None
    (v * v).sum().backward()
    assert np.array_equal(x.grad.numpy(), [0.0, 4.0, 6.0, 0.0])
    assert x.detach()[1:].requires_grad is False
    e = x[2:2]
    assert e.numel() == 0 and e.storage is x.storage
    t = mt.arange(6.0).reshape(2, 3).T  # not contiguous: reshape must copy
    r = t.reshape(6)
    assert r.storage is not t.storage
    t.mul_(10.0)
    assert np.array_equal(r.numpy(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0])
    one = mt.arange(6.0).reshape(2, 3).T.reshape(6)[0:1]
    assert one.numel() == 1


def test_in_place_writes_into_views_follow_pytorchs_rules():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0:2].add_(1.0)
    h = x * 1.0
    with mt.no_grad():
        v = h[0:2]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        v.add_(1.0)
    w = h[0:2]
    w.mul_(3.0)  # a view made in grad mode: allowed, and its base's history is rebased
    h.sum().backward()
    assert np.array_equal(x.grad.numpy(), [3.0, 3.0, 1.0])


def test_results_without_a_graph_are_plain_and_keyword_arguments_reach_forward():
    x = leaf([1.0, 2.0])
    for out in (mt.ones(2) * 2, x.detach() + 1):
        assert out.requires_grad is False and out.grad_fn is None
    a, b = mt.ones((2, 1)), mt.zeros((2, 2))
    assert mt.cat([a, b], dim=1).shape == (2, 3)  # Cat.apply(*tensors, dim=1)


def test_retain_grad_keeps_a_non_leaf_gradient_once_per_backward():
    x = leaf([1.0, 2.0])
    h = x.exp()
    h.retain_grad()
    h.retain_grad()  # a second call changes nothing
    y = (h * h).sum()
    y.backward(retain_graph=True)
    e = np.exp([1.0, 2.0])
    assert np.allclose(h.grad.numpy(), 2 * e)
    y.backward()
    assert np.allclose(h.grad.numpy(), 4 * e)  # added, as a leaf's would be


def test_a_checkpointed_region_keeps_no_bytes_for_what_it_can_recompute():
    from microtorch.utils.checkpoint import checkpoint

    x = leaf([0.2, 0.4])
    with mt.trace() as tr:
        y = checkpoint(lambda t: (t.exp() * 3.0).exp(), x, use_reentrant=False)
    first = next(e for e in events(tr, "op") if e["op"] == "Exp")
    assert first["saved"] == []  # the inner exp's output is recomputed in backward, not kept
    y.sum().backward()
    e = np.exp([0.2, 0.4])
    assert np.allclose(x.grad.numpy(), np.exp(3 * e) * 3 * e)


def test_a_temporary_that_forward_saved_lets_go_of_its_tensor_after_the_op_event():
    logits = leaf(np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]]))
    target = mt.tensor([1, 2])
    with mt.trace() as tr:
        loss = nn.functional.cross_entropy(logits, target)
    op = next(e for e in events(tr, "op") if e["op"] == "CrossEntropy")
    temporaries = set(op["saved"]) - {logits._storage.id, target._storage.id}  # the probabilities
    assert len(temporaries) == 1
    probs, = temporaries
    drops = [e for e in events(tr, "refcount") if e["storage"] == probs and e["delta"] == -1]
    assert drops and all(e["holder"].kind == "tensor" and e.step > op.step for e in drops)
    del loss


def test_a_forward_may_return_a_number_or_a_numpy_scalar():
    class Total(mt.Function):  # returns what numpy's and Python's sums give: not an ndarray
        @staticmethod
        def forward(ctx, x, as_float):
            s = x._data.sum()
            return float(s) if as_float else s

        @staticmethod
        def backward(ctx, g):
            return g.expand(3)

    for as_float in (True, False):
        x = leaf([1.0, 2.0, 4.0])
        y = Total.apply(x, as_float)
        assert y.shape == () and y.item() == 7.0 and y.dtype == mt.float64
        y.backward()
        assert np.array_equal(x.grad.numpy(), [1.0, 1.0, 1.0])


def test_releasing_a_node_twice_records_a_second_release_without_a_slot():
    x = leaf([1.0, 2.0])
    y = x.exp()
    node = y.grad_fn
    with mt.trace() as tr:
        slot = node.slot
        node.release()  # what backward does after the node ran
        node.release()  # its record was freed already: "slot None"
    first, second = events(tr, "release")
    assert (first["node"], first["slot"], first["dropped"]) == (node._nid, slot, False)
    assert (second["node"], second["slot"], second["dropped"]) == (node._nid, None, False)
    assert node.record is None and node.slot is None
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_a_gradient_for_an_input_that_needs_none_is_dropped():
    class Plus(mt.Function):  # one gradient per tensor input, needed or not
        @staticmethod
        def forward(ctx, a, b):
            return a._data + b._data

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = leaf([1.0, 2.0])
    c = mt.tensor([5.0, 5.0], dtype=mt.float64)
    Plus.apply(x, c).sum().backward()
    assert np.array_equal(x.grad.numpy(), [1.0, 1.0]) and c.grad is None
    Plus.apply(c, x).sum().backward(order="topo")
    assert np.array_equal(x.grad.numpy(), [2.0, 2.0]) and c.grad is None


def test_the_topo_variant_also_retains_fills_non_leaf_inputs_and_writes_into_homes():
    x = leaf([0.5, 1.5])
    h = x.exp()
    y = (h * h).sum()
    y.backward(retain_graph=True, order="topo")
    y.backward(inputs=[h], order="topo")  # retained: runs again; h's gradient into h.grad
    e = np.exp([0.5, 1.5])
    assert np.allclose(h.grad.numpy(), 2 * e) and np.allclose(x.grad.numpy(), 2 * e * e)
    model = nn.Linear(3, 2).double()
    flat = nn.flatten_parameters(model)
    with mt.trace() as tr:
        model(mt.ones((2, 3), dtype=mt.float64)).sum().backward(order="topo")
    w_event = next(g for g in events(tr, "grad") if g["tensor"] == model.weight._tid)
    assert w_event["source"] == w_event["storage"] == flat.grad._storage.id  # computed in place
    assert np.allclose(model.weight.grad.numpy(), 2.0)
