"""The backward engine: dependency counting (default) and the topological-sort variant.

Both orders must give the same gradients on random DAGs with shared subexpressions; every
node runs exactly once (so deep chains and repeated doubling stay linear); and the
user-facing rules follow PyTorch: leaf gradients accumulate, non-leaves keep no .grad
unless retain_grad(), a released graph cannot be backwarded twice, no_grad, mt.grad.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt
from _programs import MicrotorchBackend, random_program


def leaf(data, dtype=mt.float64):
    return mt.tensor(data, dtype=dtype, requires_grad=True)


def graph_nodes(t: mt.Tensor) -> set:
    """Every node reachable from ``t.grad_fn`` (walking ``next_functions``)."""
    seen, stack = set(), [t.grad_fn] if t.grad_fn is not None else []
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(e for e, _ in n.next_functions if isinstance(e, mt.Function))
    return seen


# -- the two orders agree -----------------------------------------------------------------------
@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 20), st.integers(1, 4))
def test_deps_and_topo_give_identical_gradients_on_random_dags(seed, n_steps, n_leaves):
    prog = random_program(seed, n_steps, n_leaves)
    vals, loss = prog.run(MicrotorchBackend())
    leaves = [vals[i] for i in prog.leaf_indices]
    loss.backward(retain_graph=True)  # order="deps" is the default
    deps = [None if x.grad is None else x.grad.numpy().copy() for x in leaves]
    for x in leaves:
        x.grad = None
    loss.backward(order="topo")
    assert any(g is not None for g in deps)  # the loss depends on some leaf
    for i, x, g in zip(prog.leaf_indices, leaves, deps):
        if g is None:  # a leaf the loss does not depend on: no gradient in either order
            assert x.grad is None
            continue
        assert x.grad.shape == x.shape
        # the same sums, possibly added in another order: equal up to the last bits
        np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-12, atol=1e-12,
                                   err_msg=f"leaf v{i} of\n{prog.describe()}")


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["deps", "topo"]))
def test_every_node_runs_exactly_once(seed, order):
    prog = random_program(seed, 15, 2)
    vals, loss = prog.run(MicrotorchBackend())
    nodes = graph_nodes(loss)
    with mt.trace() as tr:
        loss.backward(order=order)
    runs = Counter(e["node"] for e in tr.filter("node_run"))
    assert all(n == 1 for n in runs.values()), runs
    assert set(runs) == {n._nid for n in nodes}  # every node reachable from the loss, once
    assert len(tr.filter("backward")) == 1 and tr.filter("backward")[0]["order"] == order


def test_a_node_runs_after_all_its_consumers():
    """Dependency counting: a shared node waits for every consumer's gradient."""
    x = leaf([1.0, 2.0])
    h = x.exp()
    loss = (h * 2 + h.tanh()).sum()
    with mt.trace() as tr:
        loss.backward()
    order = [e["op"] for e in tr.filter("node_run")]
    assert order.index("ExpBackward") > max(order.index("MulBackward"), order.index("TanhBackward"))
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1, 2]) * (2 + 1 - np.tanh(np.exp([1, 2])) ** 2))


@pytest.mark.parametrize("order", ["deps", "topo"])
def test_several_roots_at_once(order):
    x = leaf([1.0, -2.0, 3.0])
    h = x * x
    y1, y2 = h.sum(), (h * x).tanh()
    g2 = mt.tensor([1.0, 0.5, -1.0], dtype=mt.float64)
    mt.backward([y1, y2], [None, g2], order=order)
    expected = 2 * x.detach().numpy() + g2.numpy() * (1 - np.tanh(x.detach().numpy() ** 3) ** 2) * 3 * x.detach().numpy() ** 2
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("order", ["deps", "topo"])
def test_the_same_root_twice_gets_both_gradients(order):
    # PyTorch sums both gradients; the root runs once, so its edges count once in the
    # dependency counts (counted twice, the nodes below it would never run)
    x = leaf([1.0, -2.0, 3.0])
    y = (x * 2).sum()
    mt.backward([y, y], order=order)
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0, 4.0])


# -- linear, not exponential --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("order", ["deps", "topo"])
def test_ten_thousand_node_chain(order):
    x = leaf(1.0)
    y = x
    for _ in range(5000):
        y = y * 1.0001
        y = y + 0.5
    start = time.perf_counter()
    y.backward(order=order)
    elapsed = time.perf_counter() - start
    assert x.grad.item() == pytest.approx(1.0001 ** 5000, rel=1e-9)
    assert elapsed < 5.0  # a sanity bound only (no recursion limit, no per-path blow-up)


@pytest.mark.parametrize("order", ["deps", "topo"])
def test_doubling_forty_times_is_linear(order):
    x = leaf(1.0)
    y = x
    for _ in range(40):
        y = y + y  # both edges of every node point at the previous node: 2**40 paths
    start = time.perf_counter()
    with mt.trace() as tr:
        y.backward(order=order)
    assert time.perf_counter() - start < 5.0
    assert x.grad.item() == 2.0 ** 40
    assert len(tr.filter("node_run")) == 40


@pytest.mark.slow
def test_deleting_a_deep_graph_without_backward():
    x = leaf([1.0, 2.0])
    s = None
    y = x
    for i in range(20000):
        y = (y * 0.5).tanh() if i % 2 else y * 0.9
        if i == 5:
            s = y.storage
    del y  # releases 20000 nodes without hitting the recursion limit
    assert s.freed


# -- PyTorch's rules for .grad ------------------------------------------------------------------
def test_leaf_grads_accumulate_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    first = x.grad
    np.testing.assert_array_equal(first.numpy(), [2.0, 4.0])
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])
    assert x.grad is first  # accumulated in place, like PyTorch's AccumulateGrad
    assert x.grad.grad_fn is None and not x.grad.requires_grad
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_leaf_used_many_times_gets_the_sum():
    x = leaf(3.0)
    y = x * x + x * 2 + x.exp() - x / x
    y.backward()
    assert x.grad.item() == pytest.approx(2 * 3 + 2 + np.exp(3))


def test_non_leaf_grad_stays_none_unless_retain_grad():
    x = leaf([1.0, 2.0])
    h = x * 3
    r = h.exp()
    r.retain_grad()
    assert r.retains_grad and not h.retains_grad
    loss = (r * h).sum()
    loss.backward(retain_graph=True)
    assert h.grad is None and loss.grad is None
    assert not h.is_leaf and x.is_leaf
    np.testing.assert_allclose(r.grad.numpy(), h.detach().numpy())  # d loss / d r = h
    loss.backward()
    np.testing.assert_allclose(r.grad.numpy(), 2 * h.detach().numpy())  # accumulates, as in PyTorch


def test_retain_grad_on_a_leaf_is_a_no_op_and_needs_requires_grad():
    x = leaf([1.0])
    x.retain_grad()
    (x * 2).sum().backward()
    assert x.grad.item() == 2.0
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        mt.ones(2).retain_grad()


def test_backward_on_non_scalar_needs_a_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    y.backward(mt.tensor([1.0, 10.0], dtype=mt.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(mt.ones(3, dtype=mt.float64))


def test_backward_of_a_one_element_non_scalar_is_allowed():
    x = leaf([[2.0]])
    (x * 3).backward()
    assert x.grad.tolist() == [[3.0]]


def test_backward_on_a_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        mt.ones(2).sum().backward()


def test_second_backward_through_a_released_graph_raises():
    x = leaf([1.0, 2.0])
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time") as e:
        loss.backward()
    assert "retain_graph=True" in str(e.value)


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    once = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * once)


def test_backward_with_inputs_only_fills_those():
    a, b = leaf([1.0]), leaf([2.0])
    (a * b).sum().backward(inputs=[a])
    assert a.grad.item() == 2.0 and b.grad is None


def test_backward_inputs_may_be_non_leaves():
    x = leaf([1.0, 2.0])
    h = x * 3
    loss = (h * h).sum()
    loss.backward(inputs=[h, x], retain_graph=True)
    assert h.grad.tolist() == [6.0, 12.0] and x.grad.tolist() == [18.0, 36.0]
    loss.backward(inputs=[h])
    assert h.grad.tolist() == [12.0, 24.0] and x.grad.tolist() == [18.0, 36.0]


def test_leaf_grads_never_alias_each_other_or_the_callers_gradient():
    """Add's backward hands the same gradient tensor to both inputs; accumulating into one
    leaf's .grad in place must not change the other's, nor the tensor passed to backward."""
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    g = mt.tensor([1.0, 1.0], dtype=mt.float64)
    (x + y).backward(g)
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    assert not np.shares_memory(x.grad.numpy(), g.numpy())
    (x * 2).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and y.grad.tolist() == [1.0, 1.0]
    assert g.tolist() == [1.0, 1.0]
    z = leaf([5.0])
    z.backward(g[:1])
    z.backward(g[:1])
    assert z.grad.tolist() == [2.0] and g.tolist() == [1.0, 1.0]


def test_backward_from_a_leaf():
    x = leaf([1.0, 2.0])
    x.backward(mt.tensor([3.0, 4.0], dtype=mt.float64))
    assert x.grad.tolist() == [3.0, 4.0]


def test_detach_stops_the_gradient():
    x = leaf([1.0, 2.0])
    (x * x.detach()).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0]  # only the first factor's path


def test_grad_fn_and_next_functions():
    x = leaf([1.0])
    c = mt.tensor([2.0], dtype=mt.float64)
    y = x * c
    assert y.grad_fn.name == "MulBackward" and repr(y.grad_fn) == "<MulBackward>"
    (e0, _), (e1, _) = y.grad_fn.next_functions
    assert e0 is x and e1 is None  # x is a leaf that requires grad, c needs no gradient
    z = y.exp()
    assert z.grad_fn.next_functions[0][0] is y.grad_fn


# -- grad mode --------------------------------------------------------------------------------
def test_no_grad_context_manager():
    x = leaf([1.0])
    assert mt.is_grad_enabled()
    with mt.no_grad():
        assert not mt.is_grad_enabled()
        y = x * 2
        with mt.enable_grad():
            z = x * 2
    assert mt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    assert z.requires_grad and z.grad_fn is not None


def test_no_grad_decorator_and_restoring_on_exceptions():
    @mt.no_grad()
    def f(t):
        assert not mt.is_grad_enabled()
        return t * 2

    x = leaf([1.0])
    assert not f(x).requires_grad
    assert mt.is_grad_enabled()
    with pytest.raises(ValueError):
        with mt.no_grad():
            raise ValueError
    assert mt.is_grad_enabled()
    with mt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_requires_grad_():
    x = mt.tensor([1.0, 2.0])
    assert not (x * 2).requires_grad
    assert x.requires_grad_() is x and x.requires_grad
    y = x * 2
    assert y.requires_grad
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    x.requires_grad_(False)
    assert not (x * 2).requires_grad
    with pytest.raises(RuntimeError, match="leaf"):
        (leaf([1.0]) * 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        mt.tensor([1, 2]).requires_grad_()


def test_ops_on_non_float_tensors_carry_no_graph():
    x = leaf([1.0, 2.0])
    mask = x > 1.5
    assert mask.dtype == mt.bool_ and not mask.requires_grad


# -- mt.grad ------------------------------------------------------------------------------------
def test_grad_returns_gradients_without_touching_dot_grad():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    loss = (x * w).sum()
    gx, gw = mt.grad(loss, [x, w])
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad


def test_grad_for_non_leaf_inputs():
    x = leaf([1.0, 2.0])
    h = x * 3
    loss = (h * h).sum() + h.sum()
    gh, gx = mt.grad(loss, (h, x))
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy() + 1)
    np.testing.assert_allclose(gx.numpy(), 3 * (2 * h.detach().numpy() + 1))
    assert h.grad is None and x.grad is None


def test_grad_allow_unused():
    x, unused = leaf([1.0]), leaf([2.0])
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        mt.grad((x * 2).sum(), [x, unused])
    gx, gu = mt.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert gx.tolist() == [2.0] and gu is None


def test_grad_of_an_input_that_does_not_require_grad_raises():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        mt.grad((x * 2).sum(), [mt.ones(1)])


def test_grad_with_grad_outputs():
    x = leaf([1.0, 2.0])
    (g,) = mt.grad(x * x, x, grad_outputs=mt.tensor([1.0, -1.0], dtype=mt.float64))
    assert g.tolist() == [2.0, -4.0]


def test_create_graph_second_and_third_derivatives_of_x_cubed():
    xs = np.array([-1.5, 0.0, 2.0])
    x = leaf(xs)
    (d1,) = mt.grad((x ** 3).sum(), x, create_graph=True)
    np.testing.assert_allclose(d1.detach().numpy(), 3 * xs ** 2)
    assert d1.requires_grad and d1.grad_fn is not None
    (d2,) = mt.grad(d1.sum(), x, create_graph=True)
    np.testing.assert_allclose(d2.detach().numpy(), 6 * xs)
    (d3,) = mt.grad(d2.sum(), x)
    np.testing.assert_allclose(d3.numpy(), [6.0, 6.0, 6.0])


def test_backward_with_create_graph_makes_grad_differentiable():
    x = leaf(2.0)
    (x ** 3).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.item() == 12.0
    (d2,) = mt.grad(g, x)
    assert d2.item() == 12.0  # 6x


def test_grad_leaves_the_graph_for_a_later_backward_only_with_retain_graph():
    x = leaf([1.0, 2.0])
    loss = (x.exp()).sum()
    mt.grad(loss, x, retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="second time"):
        mt.grad(loss, x)
