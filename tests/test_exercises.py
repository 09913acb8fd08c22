"""The notebook exercise checkers accept correct answers and explain wrong ones."""
import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises.pool import even_classes


# -- reference solutions (the same as in notebooks/01_tensors_and_graphs.ipynb) ---------------
def contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def element_offset(index, strides, offset):
    return offset + sum(i * s for i, s in zip(index, strides))


def my_unbroadcast(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    if dims:
        g = g.sum(dim=dims, keepdim=True)
    return g.reshape(shape)


def test_every_checker_is_exported_and_refuses_an_answer_that_returns_nothing():
    import importlib
    import pkgutil

    defined = {name for info in pkgutil.iter_modules(mt.exercises.__path__)
               for name, obj in vars(importlib.import_module(f"microtorch.exercises.{info.name}")).items()
               if name.startswith("check_") and callable(obj)
               and obj.__module__ == f"microtorch.exercises.{info.name}"}
    exported = {n for n in mt.exercises.__all__ if n.startswith("check_")}
    assert defined == exported  # every checker reachable as mt.exercises.check_...
    for name in sorted(exported):
        # a function that returns nothing is refused, saying why: it returned nothing, it is not
        # the class the exercise asks for, or (an in-place update) it did not change the parameters
        with pytest.raises(AssertionError, match="return|needs your class|did not change") as info:
            getattr(mt.exercises, name)(lambda *args, **kwargs: None)
        assert "✓" not in str(info.value), name


@pytest.mark.parametrize("check, solution", [
    ("check_strides", contiguous_strides),
    ("check_element_offset", element_offset),
    ("check_unbroadcast", my_unbroadcast),
])
def test_reference_solutions_pass(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_numpy_answers_are_accepted_too():
    mt.exercises.check_strides(lambda shape: np.array(contiguous_strides(shape)))
    mt.exercises.check_unbroadcast(lambda g, shape: np.asarray(my_unbroadcast(g, shape)))


@pytest.mark.parametrize("wrong, words", [
    (lambda shape: None, "did you forget `return`"),
    (lambda shape: tuple(4 * s for s in contiguous_strides(shape)), "byte strides"),
    (lambda shape: tuple(int(np.prod(shape[:d])) for d in range(len(shape))), "column-major"),
    (lambda shape: contiguous_strides(shape)[1:], "one stride per dimension"),
    (lambda shape: tuple(1 for _ in shape), "product of all the sizes to its right"),
    (lambda shape: tuple(n for n in shape), "its stride is 1"),
    (lambda shape: 1 / 0, "ZeroDivisionError"),
    (lambda shape: "abc", "return a tuple of ints"),
])
def test_wrong_strides_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for shape") as info:
        mt.exercises.check_strides(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("wrong, words", [
    (lambda idx, st, off: sum(i * s for i, s in zip(idx, st)), "left out the offset"),
    (lambda idx, st, off: off + sum(i * s for i, s in zip(idx, reversed(st))), "wrong dimensions"),
    (lambda idx, st, off: off + sum(idx), "position = offset + sum"),
])
def test_wrong_element_offsets_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_element_offset(wrong)
    assert words in str(info.value) and "lives at storage position" in str(info.value)


def _mean_instead_of_sum(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    return (g.mean(dim=dims, keepdim=True) if dims else g).reshape(shape)


def _in_place(g, shape):
    g._data *= 1.5
    return my_unbroadcast(g, shape)


@pytest.mark.parametrize("wrong, words", [
    (lambda g, shape: g, "must have the operand's shape"),
    (lambda g, shape: g.sum(dim=0) if g.ndim > len(shape) else g, "keepdim=True"),
    (_mean_instead_of_sum, "you averaged"),
    (lambda g, shape: my_unbroadcast(g, shape) * 0, "wrong numbers"),
    (_in_place, "changed g in place"),
    (lambda g, shape: None, "did you forget `return`"),
    (lambda g, shape: g.sum(dim=5), "your function raised IndexError"),
])
def test_wrong_unbroadcasts_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for a gradient g of shape") as info:
        mt.exercises.check_unbroadcast(wrong)
    assert words in str(info.value)


# -- notebook 02: backpropagation --------------------------------------------------------------
def topo_order(root):
    """Iterative depth-first post-order, reversed (the notebook's reference solution)."""
    order, visited = [], {root}
    stack = [(root, iter(root.next_functions))]
    while stack:
        node, edges = stack[-1]
        for child, _ in edges:
            if isinstance(child, mt.Function) and child not in visited:
                visited.add(child)
                stack.append((child, iter(child.next_functions)))
                break
        else:
            stack.pop()
            order.append(node)
    return order[::-1]


def kahn_order(root):
    """Another valid answer: the dependency-counting schedule itself."""
    counts = dependency_counts(root)
    order, ready = [], [root]
    while ready:
        node = ready.pop()
        order.append(node)
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function):
                counts[child] -= 1
                if counts[child] == 0:
                    ready.append(child)
    return order


def dependency_counts(root):
    counts, stack = {root: 0}, [root]
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function):
                if child not in counts:
                    counts[child] = 0
                    stack.append(child)
                counts[child] += 1
    return counts


def numerical_grad(f, x, eps=1e-6, data=None):
    """Central differences of f at x, perturbing ``data`` (x's own bytes unless given)."""
    grad = np.zeros(x.shape)
    data = x.numpy() if data is None else data  # x.numpy() shares x's bytes
    for i in np.ndindex(x.shape):
        old = data[i]
        data[i] = old + eps
        hi = f(x).item()
        data[i] = old - eps
        lo = f(x).item()
        data[i] = old
        grad[i] = (hi - lo) / (2 * eps)
    return grad


@pytest.mark.parametrize("check, solution", [
    ("check_topo_order", topo_order),
    ("check_topo_order", kahn_order),
    ("check_dependency_counts", dependency_counts),
    ("check_numerical_grad", numerical_grad),
])
def test_reference_solutions_pass_02(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_checkers_refuse_the_engines_own_walk_and_agree_with_its_counts():
    # delegating to the engine's walk is refused while the checker runs; afterwards it works again
    engine = lambda root: mt.autograd._topological_order([(root, None, None)])  # noqa: E731
    with pytest.raises(AssertionError, match="write topo_order yourself"):
        mt.exercises.check_topo_order(engine)
    x = mt.tensor(1.0, requires_grad=True)
    y = x * 2
    z = y * y + y
    mt.autograd._dependencies([(z.grad_fn, None, z)])
    assert y.grad_fn.pending == dependency_counts(z.grad_fn)[y.grad_fn] == 3


def _recursive_topo(root):
    order, visited = [], set()

    def visit(node):
        if node in visited:
            return
        visited.add(node)
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function):
                visit(child)
        order.append(node)
    visit(root)
    return order[::-1]


def _bfs_order(root):
    order, seen, queue = [], {root}, [root]
    while queue:
        node = queue.pop(0)
        order.append(node)
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function) and child not in seen:
                seen.add(child)
                queue.append(child)
    return order


def _with_leaves(root):
    out = topo_order(root)
    for node in list(out):
        out += [e for e, _ in node.next_functions if isinstance(e, mt.Tensor)]
    return out


def _no_visited_set(root):
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack += [c for c, _ in node.next_functions if isinstance(c, mt.Function)]
    return order


def _first_edge_only(root):
    order, node = [], root
    while isinstance(node, mt.Function):
        order.append(node)
        node = node.next_functions[0][0] if node.next_functions else None
    return order


def _kahn_on_distinct_consumers(root, first_in_first_out=False):
    """Kahn's schedule on counts of distinct consumers: a node that one consumer uses twice reaches 0
    before its other consumers have run."""
    counts, stack = {root: 0}, [root]
    while stack:
        for child in {c for c, _ in stack.pop().next_functions if isinstance(c, mt.Function)}:
            if child not in counts:
                counts[child] = 0
                stack.append(child)
            counts[child] += 1
    order, ready = [], [root]
    while ready:
        node = ready.pop(0) if first_in_first_out else ready.pop()
        order.append(node)
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function):
                counts[child] -= 1
                if counts[child] == 0:
                    ready.append(child)
    return order


@pytest.mark.parametrize("wrong, words", [
    (lambda root: None, "did you forget `return`"),
    (_recursive_topo, "recursion limit"),
    (_bfs_order, "which feeds it its gradient"),
    (lambda root: topo_order(root)[::-1], "producers-first"),
    (_with_leaves, "Leaves are not nodes"),
    (_no_visited_set, "appears more than once"),
    (_first_edge_only, "Follow every edge"),
    (_kahn_on_distinct_consumers, "which feeds it its gradient"),
    (lambda root: _kahn_on_distinct_consumers(root, first_in_first_out=True), "which feeds it its gradient"),
    (lambda root: [(root, 0)], "(node, 0) pairs"),
    (lambda root: 1 / 0, "ZeroDivisionError"),
])
def test_wrong_topo_orders_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for the graph") as info:
        mt.exercises.check_topo_order(wrong)
    assert words in str(info.value)


def _distinct_consumers(root):
    counts, stack = {root: 0}, [root]
    while stack:
        node = stack.pop()
        for child in {c for c, _ in node.next_functions if isinstance(c, mt.Function)}:
            if child not in counts:
                counts[child] = 0
                stack.append(child)
            counts[child] += 1
    return counts


def _count_on_first_visit(root):
    counts, stack = {root: 0}, [root]
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function) and child not in counts:
                counts[child] = 1
                stack.append(child)
    return counts


def _count_per_path(root):
    counts, stack = {root: 0}, [root]
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function):
                counts[child] = counts.get(child, 0) + 1
                stack.append(child)
    return counts


def _counts_with_leaves(root):
    counts = dependency_counts(root)
    for node in list(counts):
        for e, _ in node.next_functions:
            if isinstance(e, mt.Tensor):
                counts[e] = counts.get(e, 0) + 1
    return counts


def _recursive_counts(root):
    counts = {root: 0}

    def visit(node):
        for child, _ in node.next_functions:
            if isinstance(child, mt.Function):
                if child not in counts:
                    counts[child] = 0
                    visit(child)
                counts[child] += 1
    visit(root)
    return counts


@pytest.mark.parametrize("wrong, words", [
    (lambda root: None, "did you forget `return`"),
    (lambda root: [root], "return a dict"),
    (_distinct_consumers, "count edges, not consumers"),
    (_count_on_first_visit, "Too low"),
    (_count_per_path, "Too high"),
    (_counts_with_leaves, "Leaves do not wait"),
    (lambda root: {**dependency_counts(root), root: 1}, "The loss's node has no consumers"),
    (_recursive_counts, "recursion limit"),
])
def test_wrong_dependency_counts_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for the graph") as info:
        mt.exercises.check_dependency_counts(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("hidden", [False, True])
def test_every_node_of_the_walk_graphs_is_labelled_by_what_it_made(hidden):
    """A message never calls a node of the graph tried "a node from some other graph": the random graphs'
    partial sums of the loss are labelled too ("the node that made v2 + v5")."""
    from microtorch.exercises import backprop_walks, checking

    before, checking._HIDDEN[0] = checking._HIDDEN[0], hidden
    try:
        cases = backprop_walks._graph_cases(deep=50)
    finally:
        checking._HIDDEN[0] = before
    for what, loss, labels in cases:
        nodes = mt.autograd._topological_order([(loss.grad_fn, None, None)])
        assert all(n in labels for n in nodes), what
        assert len({labels[n] for n in nodes}) == len(nodes), what


def _one_sided(f, x, eps=1e-6):
    grad, data = np.zeros(x.shape), x.numpy()
    base = f(x).item()
    for i in np.ndindex(x.shape):
        old = data[i]
        data[i] = old + eps
        grad[i] = (f(x).item() - base) / eps
        data[i] = old
    return grad


def _divided_by_eps(f, x, eps=1e-6):
    return 2 * numerical_grad(f, x, eps)


def _not_restored(f, x, eps=1e-6):
    grad = numerical_grad(f, x, eps)
    x.numpy()[...] += eps
    return grad


def _perturbs_a_copy(f, x, eps=1e-6):
    return numerical_grad(f, x, eps, data=x.numpy().copy())  # f never sees the changes


@pytest.mark.parametrize("wrong, words", [
    (lambda f, x, eps: None, "did you forget `return`"),
    (_one_sided, "one-sided differences"),
    (_divided_by_eps, "Divide by 2 * eps"),
    (_not_restored, "holds different numbers"),
    (_perturbs_a_copy, "f never saw your perturbation"),
    (lambda f, x, eps: numerical_grad(f, x, eps).reshape(-1), "x's shape"),
    (lambda f, x, eps: numerical_grad(f, x, eps) + 1e-3, "Perturb one element at a time"),
])
def test_wrong_numerical_grads_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for f") as info:
        mt.exercises.check_numerical_grad(wrong)
    assert words in str(info.value)


# -- notebook 07: in-place ops and versions ----------------------------------------------------
def derivative_from_output(op, z):
    """The notebook's reference solution."""
    if op == "relu":
        return (z > 0).astype(z.dtype)
    if op == "exp":
        return z
    if op == "sigmoid":
        return z * (1 - z)
    if op == "tanh":
        return 1 - z * z
    if op == "sqrt":
        return 1 / (2 * z)
    if op == "log":
        return np.exp(-z)
    if op == "neg":
        return -np.ones_like(z)
    return None  # square, abs: the output has lost the sign of x


def can_run_in_place(c):
    """The notebook's reference solution."""
    if not c.fits or not c.made_by_op:
        return False
    if c.op in ("Mul", "Div") and c.other_needs_grad:
        return False
    return not (c.saved_by or c.later_reads or c.alive_at_end)


@pytest.mark.parametrize("check, solution", [
    ("check_derivative_from_output", derivative_from_output),
    ("check_derivative_from_output", lambda op, z: -1.0 if op == "neg" else derivative_from_output(op, z)),
    ("check_inplace_safe", can_run_in_place),
])
def test_reference_solutions_pass_07(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def _as_if_input(op, z):
    if op == "sigmoid":
        s = 1 / (1 + np.exp(-z))
        return s * (1 - s)
    return derivative_from_output(op, z)


@pytest.mark.parametrize("wrong, words", [
    (lambda op, z: None, "you returned None"),
    (lambda op, z: 2 * np.sqrt(z) if op == "square" else derivative_from_output(op, z),
     "no function of z can be right"),
    (lambda op, z: np.sign(z) if op == "abs" else derivative_from_output(op, z), "lost the sign of x"),
    (_as_if_input, "you used z as if it were the input"),
    (lambda op, z: (z >= 0).astype(float) if op == "relu" else derivative_from_output(op, z),
     "z = 0 happens for every x ≤ 0"),
    (lambda op, z: 1 - z if op == "tanh" else derivative_from_output(op, z), "1 − z²"),
    (lambda op, z: [1.0, 2.0] if op == "exp" else derivative_from_output(op, z), "return an array of z's shape"),
    (lambda op, z: 1 / 0, "ZeroDivisionError"),
])
def test_wrong_derivatives_from_output_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="at z = ") as info:
        mt.exercises.check_derivative_from_output(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("wrong, words", [
    (lambda c: True, "you said yes"),
    (lambda c: False, "you said no"),
    (lambda c: c.fits and c.made_by_op and not c.later_reads and not c.alive_at_end,
     "for its backward"),
    (lambda c: c.fits and c.made_by_op and not c.saved_by and not c.alive_at_end
     and not (c.op in ("Mul", "Div") and c.other_needs_grad), "reads B later"),
    (lambda c: c.fits and c.made_by_op and not c.saved_by and not c.later_reads
     and not (c.op in ("Mul", "Div") and c.other_needs_grad), "still holds k"),
    (lambda c: not c.saved_by and not c.later_reads and not c.alive_at_end, "does not fit"),
    (lambda c: None, "did you forget `return`"),
    (lambda c: "yes", "return True or False"),
])
def test_wrong_inplace_verdicts_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="in the program") as info:
        mt.exercises.check_inplace_safe(wrong)
    message = str(info.value)
    assert words in message
    if "return" not in words:  # a wrong verdict (not a wrong type) shows the candidate's facts
        assert "The facts:" in message
    else:
        assert "The facts:" not in message and "you said" not in message


def test_inplace_candidates_read_the_trace():
    from microtorch.exercises.inplace_safety import candidates

    x = mt.randn(3, 4)
    w = mt.randn(4, 4, requires_grad=True)
    x.name, w.name = "x", "w"

    def body():
        h = x @ w
        h.name = "h"
        s = h.sigmoid()
        s.name = "s"
        t = s * 2.0
        t.name = "t"
        return t.sum()

    with mt.trace() as tr:
        body().backward()
    cs = {(c.line, c.overwrites): c for c in candidates(tr)}
    s = cs["s = sigmoid(h)", "h"]
    assert s.made_by_op and not s.saved_by and not s.later_reads and not s.alive_at_end
    assert not cs["t = mul(s, a number)", "a number"].fits
    t = cs["t = mul(s, a number)", "s"]
    # Mul saves s only for the gradient of the number, which needs none: so it does not save it
    assert t.saved_by == ("Sigmoid",) and not t.saved_by_itself and not t.other_needs_grad, str(t)
    assert "saved by other ops           : Sigmoid" in str(t)


# -- notebook 08: training ---------------------------------------------------------------------
def sgd_momentum_step(p, g, buf, step, lr, momentum, dampening, weight_decay):
    """The notebook's reference solution."""
    d = g + weight_decay * p
    if momentum:
        if step == 1:
            buf[...] = d
        else:
            buf *= momentum
            buf += (1 - dampening) * d
        d = buf
    p -= lr * d


def clip_grad_norm(grads, max_norm):
    """The notebook's reference solution."""
    total = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for g in grads:
            g *= coef
    return total


def _global_clip_without_eps(grads, max_norm):
    total = np.sqrt(sum((g * g).sum() for g in grads))
    if total > max_norm:
        for g in grads:
            g *= max_norm / total
    return total


@pytest.mark.parametrize("check, solution", [
    ("check_momentum_update", sgd_momentum_step),
    ("check_clip_grad_norm", clip_grad_norm),
    ("check_clip_grad_norm", _global_clip_without_eps),
])
def test_reference_solutions_pass_08(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def _rebinds_p(p, g, buf, step, lr, momentum, dampening, weight_decay):
    d = g + weight_decay * p
    p = p - lr * d  # noqa: F841 — the bug: a new array


def _rebinds_buf(p, g, buf, step, lr, momentum, dampening, weight_decay):
    d = g + weight_decay * p
    if momentum:
        buf = d if step == 1 else momentum * buf + (1 - dampening) * d
        d = buf
    p -= lr * d


def _dampens_first_step(p, g, buf, step, lr, momentum, dampening, weight_decay):
    d = g + weight_decay * p
    if momentum:
        buf *= momentum
        buf += (1 - dampening) * d
        d = buf
    p -= lr * d


def _no_weight_decay(p, g, buf, step, lr, momentum, dampening, weight_decay):
    sgd_momentum_step(p, g, buf, step, lr, momentum, dampening, 0.0)


def _decoupled(p, g, buf, step, lr, momentum, dampening, weight_decay):
    p *= 1 - lr * weight_decay
    sgd_momentum_step(p, g, buf, step, lr, momentum, dampening, 0.0)


def _uphill(p, g, buf, step, lr, momentum, dampening, weight_decay):
    sgd_momentum_step(p, -g - 2 * weight_decay * p, buf, step, lr, momentum, dampening, weight_decay)


def _step_with_g_not_buf(p, g, buf, step, lr, momentum, dampening, weight_decay):
    d = g + weight_decay * p
    if momentum:
        sgd_momentum_step(np.zeros_like(p), g, buf, step, lr, momentum, dampening, weight_decay)
    p -= lr * d


@pytest.mark.parametrize("wrong, words", [
    (_rebinds_p, "p holds the same numbers"),
    (_rebinds_buf, "buf holds the same numbers"),
    (_dampens_first_step, "the first step PyTorch does not dampen"),
    (_no_weight_decay, "You left out weight decay"),
    (_decoupled, "decoupled weight decay"),
    (_step_with_g_not_buf, "p -= lr * buf"),
    (lambda *a: 1 / 0, "ZeroDivisionError"),
])
def test_wrong_momentum_updates_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="at step") as info:
        mt.exercises.check_momentum_update(wrong)
    assert words in str(info.value)


def _per_tensor(grads, max_norm):
    total = clip_grad_norm([g.copy() for g in grads], np.inf)
    for g in grads:
        n = np.sqrt((g * g).sum())
        if n > max_norm:
            g *= max_norm / n
    return total


def _returns_after(grads, max_norm):
    clip_grad_norm(grads, max_norm)
    return np.sqrt(sum((g * g).sum() for g in grads))


def _not_in_place(grads, max_norm):
    total = np.sqrt(sum((g * g).sum() for g in grads))
    for g in grads:
        g = g * min(1.0, max_norm / total)  # noqa: F841, PLW2901
    return total


def _replaces_entries(grads, max_norm):
    total = np.sqrt(sum((g * g).sum() for g in grads))
    for i in range(len(grads)):
        grads[i] = grads[i] * min(1.0, max_norm / total)
    return total


def _always_scales(grads, max_norm):
    total = np.sqrt(sum((g * g).sum() for g in grads))
    for g in grads:
        g *= max_norm / (total + 1e-6)
    return total


def _sum_of_norms(grads, max_norm):
    total = sum(np.sqrt((g * g).sum()) for g in grads)
    clip_grad_norm(grads, max_norm)
    return total


@pytest.mark.parametrize("wrong, words", [
    (lambda grads, max_norm: None, "returned None"),
    (_returns_after, "norm AFTER clipping"),
    (_per_tensor, "each gradient by its own norm"),
    (_not_in_place, "in place: `g *= coef`"),
    (_replaces_entries, "replaced the entries of the list"),
    (_always_scales, "clipping only ever shrinks"),
    (_sum_of_norms, "added up the norms"),
    (lambda grads, max_norm: 1 / 0, "ZeroDivisionError"),
])
def test_wrong_gradient_clipping_is_explained(wrong, words):
    with pytest.raises(AssertionError, match="max_norm=") as info:
        mt.exercises.check_clip_grad_norm(wrong)
    assert words in str(info.value)


# -- notebook 06: views and aliasing -----------------------------------------------------------
def view_extent(offset, shape, strides):
    """The notebook's reference solution: start at the offset, walk each dimension up or down."""
    lo = hi = offset
    for n, s in zip(shape, strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi


def view_positions(offset, shape, strides):
    return {offset + sum(i * s for i, s in zip(index, strides)) for index in np.ndindex(*shape)}


def shares_element(a, b):
    """Brute force over both index spaces (the notebook's reference solution)."""
    (alo, ahi), (blo, bhi) = view_extent(*a), view_extent(*b)
    if ahi < blo or bhi < alo:
        return False
    return not view_positions(*a).isdisjoint(view_positions(*b))


def window_layout(length, stride, size, step):
    return ((length - size) // step + 1, size), (step * stride, stride)


@pytest.mark.parametrize("check, solution", [
    ("check_extent", view_extent),
    ("check_alias_by_strides", shares_element),
    ("check_windows", window_layout),
])
def test_reference_solutions_pass_06(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_view_checkers_refuse_the_engines_own_answers():
    # the engine's extent, alias verdict and unfold are switched off while the learner's code runs
    from microtorch.memory.aliasing import layout

    with pytest.raises(AssertionError, match="write extent yourself"):
        mt.exercises.check_extent(lambda off, shape, strides: layout(
            mt.zeros(64).as_strided(shape, strides, off)).extent())

    def engine_windows(length, stride, size, step):
        w = mt.zeros(100).as_strided((length,), (stride,), 50).unfold(0, size, step)
        return w.shape, w.stride()

    with pytest.raises(AssertionError, match="write windows yourself"):
        mt.exercises.check_windows(engine_windows)


def _extent_by_abs(offset, shape, strides):
    return offset, offset + sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def _extent_ignoring_negative(offset, shape, strides):
    return offset, offset + sum((n - 1) * s for n, s in zip(shape, strides))


@pytest.mark.parametrize("wrong, words", [
    (lambda off, shape, strides: None, "did you forget `return`"),
    (lambda off, shape, strides: 1 / 0, "ZeroDivisionError"),
    (lambda off, shape, strides: off, "return two ints"),
    (_extent_ignoring_negative, "ignored negative strides"),
    (_extent_by_abs, "took |stride|"),
    (lambda off, shape, strides: (off, off + sum(n * s for n, s in zip(shape, strides))), "Off by one"),
    (lambda off, shape, strides: tuple(e * 4 + 4 * k for k, e in enumerate(view_extent(off, shape, strides))),
     "Those are bytes"),
    (lambda off, shape, strides: (view_extent(off, shape, strides)[0], view_extent(off, shape, strides)[1] + 1),
     "Both ends are inclusive"),
    (lambda off, shape, strides: view_extent(off, shape, strides)[::-1], "swapped"),
    (lambda off, shape, strides: tuple(e - off for e in view_extent(off, shape, strides)),
     "left out the offset"),
])
def test_wrong_extents_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for the view") as info:
        mt.exercises.check_extent(wrong)
    assert words in str(info.value)


def test_the_negative_stride_hint_names_the_lowest_element():
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_extent(_extent_ignoring_negative)
    msg = str(info.value)
    assert "x[::-1]" in msg and "offset + (n − 1)·stride" in msg and "lowest 0, highest 23" in msg


def _by_extents(a, b):
    (alo, ahi), (blo, bhi) = view_extent(*a), view_extent(*b)
    return alo <= bhi and blo <= ahi


def _gcd_test(a, b):
    import math

    if not _by_extents(a, b):
        return False
    g = math.gcd(*(s for n, s in zip(a[1] + b[1], a[2] + b[2]) if n > 1))
    return (b[0] - a[0]) % g == 0 if g else a[0] == b[0]


def _positive_strides_only(a, b):
    return shares_element(a, b) if min(a[2] + b[2], default=0) >= 0 else False


def _without_stride_0(a, b):
    return shares_element(a, b) if 0 not in a[2] + b[2] else False


@pytest.mark.parametrize("wrong, words", [
    (lambda a, b: None, "did you forget `return`"),
    (lambda a, b: 1, "return True or False"),
    (lambda a, b: a[5], "IndexError"),
    (_by_extents, "only mean they MAY share"),
    (_gcd_test, "A gcd test cannot rule this pair out"),
    (lambda a, b: False, "both read storage position 12"),
    (lambda a, b: shares_element(a, b) or not _by_extents(a, b), "They are not even close"),
    (_positive_strides_only, "negative stride"),
    (_without_stride_0, "A stride of 0"),
])
def test_wrong_alias_answers_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for a = ") as info:
        mt.exercises.check_alias_by_strides(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("wrong, words", [
    (lambda n, st, size, step: None, "did you forget `return`"),
    (lambda n, st, size, step: (n, size), "return (shape, strides)"),
    (lambda n, st, size, step: (((n - size) // step, size), (step * st, st)), "One window short"),
    (lambda n, st, size, step: ((-(-n // step), size), (step * st, st)), "Too many windows"),
    (lambda n, st, size, step: (((n - size) // step + 1, size), (step, 1)), "assumed the signal is contiguous"),
    (lambda n, st, size, step: (((n - size) // step + 1, size), (st, step * st)), "strides are swapped"),
    (lambda n, st, size, step: ((size, (n - size) // step + 1), (st, step * st)), "Window index first"),
    (lambda n, st, size, step: (((n - size) // step + 1, size), (step * st, 1)), "one signal element at a time"),
    (lambda n, st, size, step: (((n - size) // step + 1, size, 1), (step * st, st, 1)), "Two dimensions"),
])
def test_wrong_windows_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for windows of size") as info:
        mt.exercises.check_windows(wrong)
    assert words in str(info.value)


# -- notebook 03: reference counts and lifetimes -------------------------------------------------
def refcounts_after(program):
    """The notebook's reference solution: a model of who holds each storage."""
    storage_of, count, graph = {}, {}, {}
    for op, name, *args in program:
        if op == "tensor":
            storage_of[name] = len(count)
            count[storage_of[name]] = 1
        elif op in ("view", "numpy"):
            storage_of[name] = storage_of[args[0]]
            count[storage_of[name]] += 1
            if op == "view":
                graph[name] = {"saved": [], "inputs": args}
        elif op in ("mul", "add", "tanh", "sum"):
            storage_of[name] = len(count)
            count[storage_of[name]] = 1
            saved = {"mul": args, "add": [], "tanh": [name], "sum": []}[op]
            graph[name] = {"saved": [storage_of[x] for x in saved], "inputs": args}
            for sid in graph[name]["saved"]:
                count[sid] += 1
        elif op == "del":
            count[storage_of.pop(name)] -= 1
        elif op == "backward":
            stack = [name]
            while stack:
                node = graph.get(stack.pop())
                if node is None:
                    continue
                for sid in node["saved"]:
                    count[sid] -= 1
                node["saved"] = []
                stack += node["inputs"]
    return {name: count[sid] for name, sid in storage_of.items()}


def leaked_storages(trace):
    alive = set()
    for e in trace.filter("alloc", "free"):
        if e["kind"] == "alloc":
            alive.add(e["storage"])
        else:
            alive.discard(e["storage"])
    return alive


def _leaks_from_lifetimes(trace):
    return {l.storage for l in trace.lifetimes() if l.death is None and not l.preexisting}


@pytest.mark.parametrize("check, solution", [
    ("check_refcounts", refcounts_after),
    ("check_leaked_storages", leaked_storages),
    ("check_leaked_storages", _leaks_from_lifetimes),
])
def test_reference_solutions_pass_03(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_refcount_programs_are_what_the_engine_does():
    # every program's final counts, straight from the engine, match the reference model
    from microtorch.exercises.refcounts import REFCOUNT_PROGRAMS, _run_program, program_source
    for _, program in REFCOUNT_PROGRAMS:
        assert _run_program(program)[0] == refcounts_after(program), program_source(program)


def test_leak_cases_leak_what_they_say():
    from microtorch.exercises.refcounts import _leak_cases, leaks_of
    cases, _keep = _leak_cases()
    leaks = {what.split(" (")[0]: leaks_of(tr) for what, tr in cases}
    clean, kept = leaks["a training loop that keeps loss.item()"], leaks["a training loop that keeps the loss tensors, losses.append(loss)"]
    assert clean == set() and len(kept) == 3
    graph = leaks["an evaluation loop WITHOUT no_grad that keeps the loss tensors"]
    assert len(graph) > len(leaks["an evaluation loop under no_grad that keeps the loss tensors"]) == 2


def _replace(program, old, new):
    return [tuple(new(i)) if i[0] == old else i for i in program]


def _mul_saves_nothing(program):
    return refcounts_after(_replace(program, "mul", lambda i: ("add",) + tuple(i[1:])))


def _tanh_saves_its_input(program):
    return refcounts_after(_replace(program, "tanh", lambda i: ("mul", i[1], i[2], i[2])))


def _keeps_deleted_names(program):
    out = refcounts_after(program)
    out.update({args[0]: 0 for op, *args in program if op == "del"})
    return out


@pytest.mark.parametrize("wrong, words", [
    (lambda program: None, "did you forget `return`"),
    (lambda program: [1, 2], "return a dict"),
    (_mul_saves_nothing, "Mul saves both inputs"),
    (lambda program: refcounts_after([i for i in program if i[0] != "backward"]), "releases what it saved"),
    (_keeps_deleted_names, "leave deleted names out"),
    (_tanh_saves_its_input, "Tanh saves its OUTPUT"),
    (lambda program: refcounts_after(_replace(program, "numpy", lambda i: ("tensor", i[1]))), ".numpy() holds the storage"),
    (lambda program: {k: v for k, v in list(refcounts_after(program).items())[1:]}, "has no entry for"),
])
def test_wrong_refcounts_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for the program") as info:
        mt.exercises.check_refcounts(wrong)
    assert words in str(info.value)


def test_wrong_refcount_explanations_name_the_holders():
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_refcounts(_mul_saves_nothing)
    assert "held by: the tensor a; the graph node MulBackward (a saved slot)" in str(info.value)


def _remove_not_discard(trace):
    alive = set()
    for e in trace.filter("alloc", "free"):
        if e["kind"] == "alloc":
            alive.add(e["storage"])
        else:
            alive.remove(e["storage"])
    return alive


def _still_referenced(trace):
    return {sid for sid, s in trace.state_at(-1).storages.items() if s.refcount > 0}


@pytest.mark.parametrize("wrong, words", [
    (lambda tr: None, "did you forget `return`"),
    (lambda tr: "abc", "return a set of storage ids"),
    (lambda tr: set(), "you missed it"),
    (lambda tr: {e["storage"] for e in tr.filter("alloc")}, "pair every 'alloc' with the 'free'"),
    (_still_referenced, "before recording started"),
    (_remove_not_discard, "ignore them"),
])
def test_wrong_leak_answers_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for the trace of") as info:
        mt.exercises.check_leaked_storages(wrong)
    assert words in str(info.value)


# -- notebook 04: the arena allocator ------------------------------------------------------------
def my_align_up(n, a):
    return (n + a - 1) & ~(a - 1)


def bump_offsets(sizes, alignment):
    offsets, padding, top = [], 0, 0
    for n in sizes:
        start = my_align_up(top, alignment)
        padding += start - top
        offsets.append(start)
        top = start + n
    return offsets, padding


def chunk_plan(sizes, capacity, alignment, growth):
    chunks = [my_align_up(capacity, alignment)]
    placements, top = [], 0
    for n in sizes:
        start = my_align_up(top, alignment)
        if start + n > chunks[-1]:
            chunks.append(max(my_align_up(n, alignment), my_align_up(int(sum(chunks) * (growth - 1)), alignment)))
            start = 0
        placements.append((len(chunks) - 1, start))
        top = start + n
    return placements, chunks


@pytest.mark.parametrize("check, solution", [
    ("check_align_up", my_align_up),
    ("check_align_up", mt.memory.align_up),
    ("check_align_up", lambda n, a: -(-n // a) * a),
    ("check_bump_offsets", bump_offsets),
    ("check_chunk_plan", chunk_plan),
])
def test_reference_solutions_pass_04(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_arena_checkers_leave_no_arenas_behind():
    # an arena's blocks point back at it; the checkers reset theirs, so they do not linger
    # (and appear in the next trace's baseline) until the cycle collector runs
    from microtorch.memory.block import allocators
    before = {a.name for a in list(allocators.values())}
    mt.exercises.check_align_up(my_align_up)
    mt.exercises.check_bump_offsets(bump_offsets)
    mt.exercises.check_chunk_plan(chunk_plan)
    assert {a.name for a in list(allocators.values())} == before


@pytest.mark.parametrize("wrong, words", [
    (lambda n, a: (n // a + 1) * a, "already a multiple"),
    (lambda n, a: n // a * a, "rounded down"),
    (lambda n, a: -(-n / a) * a, "return an int"),
    (lambda n, a: my_align_up(n, a) + a if n > 100 else my_align_up(n, a), "not the smallest one"),
    (lambda n, a: None, "did you forget `return`"),
])
def test_wrong_align_ups_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="alignment =") as info:
        mt.exercises.check_align_up(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("wrong, words", [
    (lambda s, a: ([sum(s[:i]) for i in range(len(s))], 0), "forgot the alignment"),
    (lambda s, a: (bump_offsets(s, a)[0], sum(my_align_up(x, a) - x for x in s)), "LAST block"),
    (lambda s, a: (bump_offsets(s, a)[0], 0), "padding = sum over blocks"),
    (lambda s, a: (bump_offsets(s, a)[0][:-1], bump_offsets(s, a)[1]), "one per block"),
    (lambda s, a: bump_offsets(s, a)[0], "return a pair (offsets, padding)"),
])
def test_wrong_bump_offsets_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for sizes") as info:
        mt.exercises.check_bump_offsets(wrong)
    assert words in str(info.value)


def _chunk_times_growth(sizes, capacity, alignment, growth):
    chunks = [my_align_up(capacity, alignment)]
    placements, top = [], 0
    for n in sizes:
        start = my_align_up(top, alignment)
        if start + n > chunks[-1]:
            chunks.append(max(my_align_up(n, alignment), my_align_up(int(chunks[-1] * growth), alignment)))
            start = 0
        placements.append((len(chunks) - 1, start))
        top = start + n
    return placements, chunks


def _never_grows(sizes, capacity, alignment, growth):
    return [(0, o) for o in bump_offsets(sizes, alignment)[0]], [my_align_up(capacity, alignment)]


@pytest.mark.parametrize("wrong, words", [
    (_chunk_times_growth, "TOTAL capacity"),
    (_never_grows, "Chain a new chunk"),
    (lambda *a: (chunk_plan(*a)[0], [a[1]] + chunk_plan(*a)[1][1:]), "rounded up to the alignment"),
    (lambda *a: None, "did you forget `return`"),
])
def test_wrong_chunk_plans_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for sizes") as info:
        mt.exercises.check_chunk_plan(wrong)
    assert words in str(info.value)


# -- notebook 05: the memory pool ----------------------------------------------------------------
def size_classes_for(bound):
    classes = [64]
    while classes[-1] < 1 << 20:
        n = classes[-1] + 1
        c = int(n / (1 - bound)) // 8 * 8
        classes.append(min(max(c, classes[-1] + 8), 1 << 20))
    return classes


def _engine_spacing(bound):
    m = 1
    while 1 / (m + 1) > bound:
        m *= 2
    return even_classes(m)  # the engine's spacing, written out (mt.memory.size_classes is off)


def size_class_of(n, per_doubling):
    if n > 1 << 20:
        return None
    n = max(n, 64)
    if n == 64:
        return 0
    k = (n - 1).bit_length() - 1
    step = (1 << k) // per_doubling
    return (k - 6) * per_doubling + -(-(n - (1 << k)) // step)


def _bisect_class(n, per_doubling):
    import bisect
    classes = mt.memory.size_classes(per_doubling=per_doubling)
    return None if n > classes[-1] else bisect.bisect_left(classes, max(n, 64))


@pytest.mark.parametrize("check, solution", [
    ("check_size_classes", size_classes_for),
    ("check_size_classes", _engine_spacing),
    ("check_size_class_of", size_class_of),
    ("check_size_class_of", _bisect_class),
])
def test_reference_solutions_pass_05(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_size_class_bound_is_computed_over_every_request():
    from microtorch.exercises.pool import greedy_classes, worst_waste
    for m in (1, 2, 4, 8):
        waste, n, c = worst_waste(mt.memory.size_classes(per_doubling=m))
        assert waste < 1 / (m + 1)
        # brute force over every request agrees
        classes = np.array(mt.memory.size_classes(per_doubling=m))
        req = np.arange(64, (1 << 20) + 1)
        got = classes[np.searchsorted(classes, req)]
        assert np.isclose(((got - req) / got).max(), waste)
    for bound in (0.125, 0.25, 0.5):
        assert worst_waste(greedy_classes(bound))[0] <= bound


@pytest.mark.parametrize("wrong, words", [
    (lambda b: [64 * 2 ** k for k in range(15)], "the gap is too wide"),
    (lambda b: even_classes(32), "not a multiple of 8"),
    (lambda b: size_classes_for(b)[:-1], "has no class"),
    (lambda b: [32] + size_classes_for(b), "start at 64"),
    (lambda b: list(range(64, (1 << 20) + 1, 8)), "the engine needs only"),
    (lambda b: size_classes_for(b)[::-1], "increasing"),
    (lambda b: None, "did you forget `return`"),
])
def test_wrong_size_classes_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for bound") as info:
        mt.exercises.check_size_classes(wrong)
    assert words in str(info.value)


def _bisect_right(n, m):
    import bisect
    classes = mt.memory.size_classes(per_doubling=m)
    return None if n > classes[-1] else bisect.bisect_right(classes, max(n, 64))


def _class_size(n, m):
    i = _bisect_class(n, m)
    return None if i is None else mt.memory.size_classes(per_doubling=m)[i]


@pytest.mark.parametrize("wrong, words", [
    (_bisect_right, "bisect_left, not bisect_right"),
    (_class_size, "return its index"),
    (lambda n, m: _bisect_class(min(n, 1 << 20), m), "Return None"),
    (lambda n, m: 0 if n > 1 << 20 else _bisect_class(n, m), "Return None"),
    (lambda n, m: _bisect_class(n, m) if n <= 64 else max(0, _bisect_class(n, m) - 1), "round UP"),
    (lambda n, m: None, "None is only for requests above 1 MiB"),
])
def test_wrong_size_class_of_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="classes per doubling") as info:
        mt.exercises.check_size_class_of(wrong)
    assert words in str(info.value)
