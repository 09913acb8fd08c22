"""The notebook exercise checkers accept correct answers and explain wrong ones."""
import numpy as np
import pytest

import microtorch as mt


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


def test_mt_exercises_is_reachable_from_the_package():
    assert mt.exercises.check_strides is not None


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


def numerical_grad(f, x, eps=1e-6):
    grad = np.zeros(x.shape)
    data = x.numpy()  # shares x's bytes
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


def test_checkers_use_the_engines_own_answers():
    # the reference is the engine: its topological order passes, and its counts match ours
    engine = lambda root: mt.autograd._topological_order([(root, None, None)])  # noqa: E731
    mt.exercises.check_topo_order(engine)
    x = mt.tensor(1.0, requires_grad=True)
    y = x * 2
    z = y * y + y
    mt.autograd._dependencies([(z.grad_fn, None, z)])
    assert int(y.grad_fn.record["pending"]) == dependency_counts(z.grad_fn)[y.grad_fn] == 3


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


@pytest.mark.parametrize("wrong, words", [
    (lambda root: None, "did you forget `return`"),
    (_recursive_topo, "recursion limit"),
    (_bfs_order, "which feeds it its gradient"),
    (lambda root: topo_order(root)[::-1], "producers-first"),
    (_with_leaves, "Leaves are not nodes"),
    (_no_visited_set, "appears more than once"),
    (_first_edge_only, "Follow every edge"),
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
    grad, data = np.zeros(x.shape), x.numpy().copy()
    for i in np.ndindex(x.shape):
        old = data[i]
        data[i] = old + eps
        hi = f(x).item()
        data[i] = old - eps
        lo = f(x).item()
        data[i] = old
        grad[i] = (hi - lo) / (2 * eps)
    return grad


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
