"""Mutation run 7, ``exercises/backprop.py``'s graph walks (since split: ``backprop_walks.py``;
notebook 02's exercises 1 and 2, ``check_topo_order`` and ``check_dependency_counts``): what a
learner is shown.

* a catalogue of wrong answers per checker, each a mistake the notebook warns about or an
  off-by-one: for the order, a breadth-first walk, a depth-first pre-order, the post-order not
  reversed, the root first and the rest producers-first, a node twice, a node missing, a node of
  another graph, the leaves listed, ``(node, 0)`` pairs, names instead of nodes, recursion, a walk
  along the first edge only, no visited set, Kahn's schedule on distinct-consumer counts; for the
  counts, distinct consumers, counting on the first visit only, counting per path, the leaves
  counted, the root counted, every count one too high or too low, a node of another graph,
  names as keys, a count that is not a number, recursion; and for both a function that raises
  and one returning the wrong type. Each is rejected on a named graph with the node, the numbers
  and the hint for that mistake, visible and hidden;
* the references (``_reachable``, ``_edge_counts``) against the engine's own walks
  (``autograd._topological_order``, ``autograd._dependencies``: the pending counts) and against
  hand-worked counts of the stored graphs;
* the graphs are the kinds the checkers promise: a plain chain, a node used three times (twice
  by one consumer), a node reached by paths of different lengths, a doubling chain, a small MLP,
  a 5,000-node chain deeper than Python's recursion limit, then random graphs (reproducible,
  other and more of them in the hidden run, each value made as its description says); every
  node is labelled with the value it made;
* the pass message counts the graphs the learner's function was called on.

The stored and random graphs are built once per run (visible, hidden) for the whole file
(``_graph_cases`` is wrapped in a cache): building them, with the 5,000-node chain, is most of
a checker call's time.

Record: tests/mutation-run-7/exercises-backprop-walks.md.
"""
from __future__ import annotations

import re
import sys
from collections import Counter

import pytest

import microtorch as mt
from microtorch import autograd
from microtorch.exercises import backprop_walks as ex, checking

from checker_probes import Recorder, cases_counted, failure
from test_exercise_checkers import _solutions
from test_exercises import _first_edge_only  # follows next_functions[0] only

SOLUTION = _solutions("02_backpropagation")  # the notebook's reference answers
topo_order = SOLUTION["topo_order"]
dependency_counts = SOLUTION["dependency_counts"]

_BUILT: dict = {}
_BUILD = ex._graph_cases


def _cases_once(*args):
    key = (checking.hidden(), args)
    if key not in _BUILT:
        _BUILT[key] = _BUILD(*args)  # as the checkers call it: no argument, the default depth
    return _BUILT[key]


@pytest.fixture(autouse=True, scope="module")
def _let_the_cached_graphs_go():
    """The cache lives as long as this file's tests: the suite's later tests (the pictures count live
    storages) must not see its tensors."""
    yield
    _BUILT.clear()
    import gc
    gc.collect()


@pytest.fixture(autouse=True)
def _graphs_built_once(monkeypatch):
    monkeypatch.setattr(ex, "_graph_cases", _cases_once)


def _cases(hidden: bool = False) -> list:
    before, checking._HIDDEN[0] = checking._HIDDEN[0], hidden
    try:
        return _cases_once()
    finally:
        checking._HIDDEN[0] = before


def _stored(hidden: bool = False) -> list:
    """The stored graphs: the cases before the first random one."""
    cases = _cases(hidden)
    return cases[:next(k for k, c in enumerate(cases) if c[0].startswith("random graph #"))]


def _randoms(hidden: bool = False) -> list:
    return _cases(hidden)[len(_stored(hidden)):]


def _stored_named(start: str):
    return next(c for c in _stored() if c[0].startswith(start))


def _edges(node) -> list:
    """The graph nodes ``node`` sends a gradient to, one per edge (from ``next_functions``)."""
    return [e for e, _ in node.next_functions if isinstance(e, mt.Function)]


def _leaf_edges(node) -> list:
    return [e for e, _ in node.next_functions if isinstance(e, mt.Tensor)]


def _engine_order(root) -> list:
    return autograd._topological_order([(root, None, None)])


def _engine_pending(root) -> dict:
    return {n: n.pending for n in autograd._dependencies([(root, None, None)])}


def _except_on(solution, call, change):
    """The notebook's solution, except on the ``call``-th call: there ``change(root, answer)``."""
    seen = [0]

    def answer(root):
        k, seen[0] = seen[0], seen[0] + 1
        right = solution(root)
        return change(root, right) if k == call else right
    return answer


OTHER = (mt.tensor(1.0, requires_grad=True) * 2.0).grad_fn  # a node of a graph no case reaches

CHAIN = "for the graph: a plain chain, loss = (tanh(x * w) + b).sum()\n"
SHARED = "for the graph: h = tanh(x * w) used three times, loss = (h * h + h).sum()\n"
PATHS = ("for the graph: two paths of different lengths from u to the loss, a = exp(u), "
         "c3 = tanh(tanh(2 * u)), loss = (a + c3).sum()\n")
DEEP = "for the graph: a deep chain of 5,000 nodes, y1 = x * 1.0001, y2 = y1 * 1.0001, ...\n"
LOSS, Y, H, U = ("SumBackward (the node that made loss)", "AddBackward (the node that made y)",
                 "TanhBackward (the node that made h)", "MulBackward (the node that made u)")
HH = "MulBackward (the node that made hh)"
TOO_EARLY = "A node may run only after *every* node that uses its result has run"


# ----------------------------------------------------------------------------------------------
# exercise 1: a topological order
# ----------------------------------------------------------------------------------------------
def _bfs(root):
    order, seen, queue = [], {root}, [root]
    while queue:
        node = queue.pop(0)
        order.append(node)
        for child in _edges(node):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return order


def _preorder(root):
    """Depth-first, but a node is listed when first reached (pre-order), not after its inputs."""
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend(reversed(_edges(node)))
    return order


def _recursive(root):
    order, seen = [], set()

    def visit(node):
        if node not in seen:
            seen.add(node)
            for child in _edges(node):
                visit(child)
            order.append(node)
    visit(root)
    return order[::-1]


def _no_visited_set(root):
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack += _edges(node)
    return order


def _kahn_on_first_visit(root):
    """Kahn's schedule on counts taken on the first visit only (1 each): a shared node runs too early."""
    counts, stack = {root: 0}, [root]
    while stack:
        for child in _edges(stack.pop()):
            if child not in counts:
                counts[child] = 1
                stack.append(child)
    order, ready = [], [root]
    while ready:
        node = ready.pop()
        order.append(node)
        for child in _edges(node):
            counts[child] -= 1
            if counts[child] == 0:
                ready.append(child)
    return order


def _with_leaves(root):
    out = topo_order(root)
    return out + [e for n in list(out) for e in _leaf_edges(n)]


TOPO_MISTAKES = [  # (wrong answer, where, what the message says, words of its hint or None)
    (_bfs, PATHS, f"{U} came at position 4, before MulBackward (the node that made c1) at position 6, "
                  "which feeds it its gradient.\n", "a breadth-first walk puts it too early"),
    (_preorder, PATHS, f"{U} came at position 3, before MulBackward (the node that made c1) at position 6,",
     TOO_EARLY),
    (_kahn_on_first_visit, SHARED, f"{H} came at position 2, before {HH} at position 4, which feeds it", TOO_EARLY),
    (lambda root: topo_order(root)[::-1], CHAIN, f"your list starts with {U}, but backward starts at the "
     f"loss's node, {LOSS}: nothing can run before it", "Your list ends with the loss's node: it is producers-first"),
    (lambda root: topo_order(root)[:1] + topo_order(root)[:0:-1], CHAIN,
     f"{U} came at position 1, before {H} at position 2, which feeds it its gradient.", TOO_EARLY),
    (lambda root: topo_order(root) + topo_order(root)[-1:], CHAIN,
     f"{U} appears more than once (at positions 3 and 4).", "keep a set of the nodes you have already visited"),
    (lambda root: topo_order(root)[:-1], CHAIN, f"your list has 3 nodes, but 4 nodes are reachable from the loss; "
     f"missing, e.g.: {U}.", "not just the first"),
    (lambda root: topo_order(root) + [OTHER], CHAIN,
     "your list contains MulBackward (a node from some other graph), which the loss does not reach: no gradient "
     "goes there.", None),
    (_with_leaves, CHAIN, "your list contains the leaf tensor b. Leaves are not nodes", "skip edges that are tensors"),
    (lambda root: [(n, 0) for n in topo_order(root)], CHAIN, "your list contains the tuple (<SumBackward",
     "next_functions holds (node, 0) pairs: take the node, element [0]."),
    (lambda root: [n.name for n in topo_order(root)], CHAIN,
     "your list contains 'SumBackward', which is not a graph node", "instances of mt.Function"),
    (lambda root: None, CHAIN, "your function returned None: did you forget `return`?", None),
    (lambda root: len(topo_order(root)), CHAIN, "your function returned int; return a list of nodes.", None),
    (lambda root: 1 / 0, CHAIN, "your function raised ZeroDivisionError: division by zero\n",
     "It should return an answer for this graph."),
    (_recursive, DEEP, "your function hit Python's recursion limit (about 1000 nested calls).",
     "Walk with an explicit stack"),
    (_first_edge_only, PATHS, "your list has 4 nodes, but 7 nodes are reachable from the loss; missing, e.g.: "
     "TanhBackward (the node that made c3).", "Follow every edge of every node"),
    (_no_visited_set, SHARED, f"{H} appears more than once (at positions 2 and 5).",
     "keep a set of the nodes you have already visited"),
]
TOPO_IDS = ["bfs", "preorder", "kahn-first-visit", "reversed", "root-then-reversed", "twice", "missing", "other-graph",
            "leaves", "pairs", "names", "none", "int", "raises", "recursive", "first-edge", "no-visited-set"]


@pytest.mark.parametrize("wrong, where, what, hint", TOPO_MISTAKES, ids=TOPO_IDS)
def test_each_wrong_order_is_rejected_with_its_graph_node_and_hint(wrong, where, what, hint):
    """A catalogued ordering mistake fails on its first wrong graph, named, with the node(s) and the hint."""
    msg = failure(mt.exercises.check_topo_order, wrong)
    assert msg.startswith(where)
    assert what in msg and (hint is None or hint in msg)


@pytest.mark.parametrize("wrong, where, what, hint", TOPO_MISTAKES, ids=TOPO_IDS)
def test_each_wrong_order_is_rejected_in_the_hidden_run_too(wrong, where, what, hint):
    """The hidden run tries the stored graphs too: the same graph, node and hint."""
    msg = failure(mt.exercises.check_topo_order, wrong, hidden=True)
    assert msg.startswith(where) and what in msg and (hint is None or hint in msg)


def test_the_producers_first_hint_needs_the_loss_last():
    """The root not first but not last either (the first two swapped): no producers-first hint."""
    msg = failure(mt.exercises.check_topo_order, lambda root: (lambda o: [o[1], o[0], *o[2:]])(topo_order(root)))
    assert msg.startswith(CHAIN + f"your list starts with {Y}, but backward starts at the loss's node, {LOSS}")
    assert "producers-first" not in msg
    # the loss's node last but the list otherwise right after it: still told it is producers-first
    msg = failure(mt.exercises.check_topo_order, lambda root: topo_order(root)[1:] + topo_order(root)[:1])
    assert msg.startswith(CHAIN + f"your list starts with {Y}") and "producers-first" in msg


def test_an_unnamed_tensor_in_the_order_is_called_unnamed():
    """A tensor without a name (not one of the graph's leaves) is 'the leaf tensor (unnamed)'."""
    msg = failure(mt.exercises.check_topo_order, lambda root: topo_order(root) + [mt.tensor(1.0)])
    assert msg.startswith(CHAIN + "your list contains the leaf tensor (unnamed). Leaves are not nodes")


def test_the_order_may_be_any_iterable_and_any_valid_order():
    """A tuple, a generator, Kahn's schedule on the engine's counts: all pass."""
    for fn in (lambda root: tuple(topo_order(root)), lambda root: iter(topo_order(root))):
        mt.exercises.check_topo_order(fn, hidden=True)

    def kahn(root):
        counts, order, ready = dependency_counts(root), [], [root]
        while ready:
            node = ready.pop()
            order.append(node)
            for child in _edges(node):
                counts[child] -= 1
                if counts[child] == 0:
                    ready.append(child)
        return order
    mt.exercises.check_topo_order(kahn, hidden=True)


def test_an_order_wrong_only_on_a_later_graph_is_told_that_graph(capsys):
    """Right on every graph but one: the message names that graph (each stored one, and a random one)."""
    cases = _cases(False)
    for k in (1, 3, 4, len(_stored()) - 1, len(cases) - 1):
        what = cases[k][0]
        msg = failure(mt.exercises.check_topo_order, _except_on(topo_order, k, lambda root, right: right[::-1]))
        assert msg.startswith(f"for the graph: {what}\nyour list starts with ")
        assert "producers-first" in msg


def test_the_order_pass_message_counts_the_graphs_tried(capsys):
    """'all N cases right': N is how often the learner's function was called, more in the hidden run."""
    counted = []
    for hidden in (False, True):
        spy = Recorder(topo_order)
        mt.exercises.check_topo_order(spy, hidden=hidden)
        out = capsys.readouterr().out
        n = len(_cases(hidden))
        assert cases_counted(out, "check_topo_order") == n
        assert out.startswith(f"✓ check_topo_order: all {n} cases right" + (" (the hidden ones)." if hidden else "."))
        # the graphs first (then, in the visible run, the engine's own tests with the function plugged in)
        assert [args[0] for args in spy.calls[:n]] == [loss.grad_fn for _, loss, _ in _cases(hidden)]
        assert hidden == (len(spy.calls) == n)
        counted.append(n)
    assert counted[1] > counted[0]


# ----------------------------------------------------------------------------------------------
# exercise 2: dependency counts
# ----------------------------------------------------------------------------------------------
def _walk_counts(root, *, distinct=False, first_visit_only=False, per_path=False):
    counts, stack = {root: 0}, [root]
    while stack:
        node = stack.pop()
        children = _edges(node)
        for child in (list(dict.fromkeys(children)) if distinct else children):
            if per_path:
                counts[child] = counts.get(child, 0) + 1
                stack.append(child)
                continue
            if child not in counts:
                counts[child] = 0
                stack.append(child)
            elif first_visit_only:
                continue
            counts[child] += 1
    return counts


def _counts_with_leaves(root):
    counts = dependency_counts(root)
    for node in list(counts):
        for leaf in _leaf_edges(node):
            counts[leaf] = counts.get(leaf, 0) + 1
    return counts


def _recursive_counts(root):
    counts = {root: 0}

    def visit(node):
        for child in _edges(node):
            if child not in counts:
                counts[child] = 0
                visit(child)
            counts[child] += 1
    visit(root)
    return counts


class _ItemsOnly:
    """A mapping-like answer with ``items`` but no ``get``."""

    def __init__(self, counts):
        self.counts = counts

    def items(self):
        return self.counts.items()


DISTINCT = ("You counted distinct consumers. A node that uses the same input twice (y = x + x, h * h) has two "
            "edges to it, and each edge sends its own part of the gradient: count edges, not consumers.")
TOO_LOW = "Too low. Count every edge that points at a node, also when you reach a node you have already visited"
TOO_HIGH = "Too high. If you walked into a node again each time you reached it"
ROOT = "The loss's node has no consumers: backward starts there, its count is 0."
H_EDGES = f"the engine counts 3: 3 edges point at it, from {Y} and {HH} twice."

DEPS_MISTAKES = [  # (wrong answer, where, what the message says, its hint or None)
    (lambda root: _walk_counts(root, distinct=True), SHARED, f"you counted 2 for {H}; {H_EDGES}\n", DISTINCT),
    (lambda root: _walk_counts(root, first_visit_only=True), SHARED, f"you counted 1 for {H}; {H_EDGES}\n", TOO_LOW),
    (lambda root: _walk_counts(root, per_path=True), SHARED,
     f"you counted 3 for {U}; the engine counts 1: 1 edge points at it, from {H}.\n", TOO_HIGH),
    (_counts_with_leaves, CHAIN, "your dict has a count for the leaf tensor b. Leaves do not wait for anything",
     "skip edges that are tensors"),
    (lambda root: {**dependency_counts(root), root: 1}, CHAIN,
     f"you counted 1 for {LOSS}; the engine counts 0: it is the loss's own node.\n", ROOT),
    (lambda root: {n: c + 1 if n is not root else 0 for n, c in dependency_counts(root).items()}, CHAIN,
     f"you counted 2 for {Y}; the engine counts 1: 1 edge points at it, from {LOSS}.\n", TOO_HIGH),
    (lambda root: {n: max(c - 1, 0) for n, c in dependency_counts(root).items()}, CHAIN,
     f"you counted 0 for {Y}; the engine counts 1: 1 edge points at it, from {LOSS}.\n", TOO_LOW),
    (lambda root: {**dependency_counts(root), OTHER: 1}, CHAIN,
     "your dict has a count for MulBackward (a node from some other graph), which the loss does not reach.", None),
    (lambda root: {n.name: c for n, c in dependency_counts(root).items()}, CHAIN,
     "your dict has the key 'SumBackward'; the keys should be the nodes themselves (instances of mt.Function).", None),
    (lambda root: {**dependency_counts(root), root: "none"}, CHAIN,
     f"the count for {LOSS} is 'none'; counts are integers.", None),
    (lambda root: {**dependency_counts(root), root: None}, CHAIN, f"the count for {LOSS} is None; counts are integers.",
     None),
    (lambda root: list(dependency_counts(root)), CHAIN, "your function returned list; return a dict {node: count}.",
     None),
    (lambda root: _ItemsOnly(dependency_counts(root)), CHAIN,
     "your function returned _ItemsOnly; return a dict {node: count}.", None),
    (lambda root: None, CHAIN, "your function returned None: did you forget `return`?", None),
    (lambda root: {}[root], CHAIN, "your function raised KeyError: ", "It should return an answer for this graph."),
    (_recursive_counts, DEEP, "your function hit Python's recursion limit", "Walk with an explicit stack"),
]
DEPS_IDS = ["distinct", "first-visit", "per-path", "leaves", "root-counted", "one-too-high", "one-too-low",
            "other-graph", "names", "text-count", "none-count", "list", "items-only", "none", "raises", "recursive"]


@pytest.mark.parametrize("wrong, where, what, hint", DEPS_MISTAKES, ids=DEPS_IDS)
def test_each_wrong_count_is_rejected_with_its_graph_node_numbers_and_hint(wrong, where, what, hint):
    """A catalogued counting mistake fails on its first wrong graph, named, with the node, both counts,
    the edges that point at it and the hint."""
    msg = failure(mt.exercises.check_dependency_counts, wrong)
    assert msg.startswith(where)
    assert what in msg and (hint is None or hint in msg)


@pytest.mark.parametrize("wrong, where, what, hint", DEPS_MISTAKES, ids=DEPS_IDS)
def test_each_wrong_count_is_rejected_in_the_hidden_run_too(wrong, where, what, hint):
    msg = failure(mt.exercises.check_dependency_counts, wrong, hidden=True)
    assert msg.startswith(where) and what in msg and (hint is None or hint in msg)


def test_counts_left_out_are_zero_and_any_mapping_or_int_like_count_passes():
    """The docstring's promise: nodes left out count as 0 (here the loss's node); a Counter, float counts pass."""
    def without_root(root):
        counts = dependency_counts(root)
        del counts[root]
        return counts
    mt.exercises.check_dependency_counts(without_root, hidden=True)
    mt.exercises.check_dependency_counts(lambda root: Counter(dependency_counts(root)), hidden=True)
    mt.exercises.check_dependency_counts(lambda root: {n: float(c) for n, c in dependency_counts(root).items()},
                                         hidden=True)


def _consumers(nodes) -> dict:
    """node -> the nodes whose edges point at it, one entry per edge."""
    users: dict = {n: [] for n in nodes}
    for u in nodes:
        for v in _edges(u):
            users[v].append(u)
    return users


def _uses_of(labels, consumers):
    """The consumers, each once, 'twice' after one whose two edges point here."""
    uses = Counter(consumers)
    assert max(uses.values()) <= 2  # no op of the graphs takes one input three times
    return [labels[u] + ("" if k == 1 else " twice")
            for u, k in uses.items()]


@pytest.mark.parametrize("hidden", [False, True])
def test_a_wrong_count_on_any_graph_lists_the_edges_that_point_at_the_node(hidden):
    """On every graph, a count one too high on its most shared node: the message names the graph, the node,
    both counts and every consumer (with 'twice' for a consumer using it twice), then 'Too high'."""
    cases, tried = _cases(hidden), 0
    for k, (what, loss, labels) in enumerate(cases):
        nodes = _engine_order(loss.grad_fn)
        pending = _engine_pending(loss.grad_fn)
        users = _consumers(nodes)
        node = max((n for n in nodes[1:] if all(u in labels for u in [n, *users[n]])),
                   key=lambda n: (len(set(users[n])), pending[n]), default=None)
        if node is None:  # every node feeds the loss's unlabelled partial sums
            continue
        tried += 1
        w = pending[node]
        wrong = _except_on(dependency_counts, k, lambda root, right: {**right, node: right[node] + 1})
        msg = failure(mt.exercises.check_dependency_counts, wrong, hidden=hidden)
        start = (f"for the graph: {what}\nyou counted {w + 1} for {labels[node]}; the engine counts {w}: "
                 f"{w} edge{'s point' if w > 1 else ' points'} at it, from ")
        end = (f".\n{TOO_HIGH}, everything below a shared node was counted once per path. Visit each node once (a "
               "visited set), and for each visited node count each of its edges once.")
        assert msg.startswith(start) and msg.endswith(end), msg
        uses = msg[len(start):-len(end)]
        parts = re.split(r", | and ", uses)
        assert uses == (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1])
        assert sorted(parts) == sorted(_uses_of(labels, users[node]))
    assert tried >= len(cases) - 2
    # three distinct consumers of one node ('A, B and C'): in the hidden run at least
    assert not hidden or any(len(set(u)) >= 3 for _, loss, _ in cases for u in _consumers(_engine_order(loss.grad_fn)).values())


def test_the_counts_pass_message_counts_the_graphs_tried(capsys):
    counted = []
    for hidden in (False, True):
        spy = Recorder(dependency_counts)
        mt.exercises.check_dependency_counts(spy, hidden=hidden)
        out = capsys.readouterr().out
        n = len(_cases(hidden))
        assert out.startswith(f"✓ check_dependency_counts: all {n} cases right"
                              + (" (the hidden ones)." if hidden else "."))
        assert [args[0] for args in spy.calls[:n]] == [loss.grad_fn for _, loss, _ in _cases(hidden)]
        assert hidden == (len(spy.calls) == n)
        counted.append(n)
    assert counted[1] > counted[0] > 0


# ----------------------------------------------------------------------------------------------
# the references against the engine and by hand
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", [False, True])
def test_the_references_are_the_engines_reachable_nodes_and_pending_counts(hidden):
    """_reachable: the nodes the engine's sort lists, the loss's node first, each once;
    _edge_counts: the engine's pending counts."""
    for what, loss, _ in _cases(hidden):
        root = loss.grad_fn
        mine = ex._reachable(root)
        assert mine[0] is root and len(set(mine)) == len(mine)
        assert set(mine) == set(_engine_order(root))
        assert all(isinstance(n, mt.Function) for n in mine)
        assert ex._edge_counts(mine) == _engine_pending(root), what


def test_the_reference_counts_of_the_stored_graphs_by_hand():
    """Hand-worked: the chain all 1; h used three times (twice by h * h); u reached twice; each doubling
    node twice; the MLP's diff twice (d * d); the deep chain all 1. The loss's node 0."""
    want = {"a plain chain": [0, 1, 1, 1], "h = tanh(x * w) used three times": [0, 1, 1, 3, 1],
            "two paths": [0, 1, 1, 1, 1, 1, 2], "doubling": [0, 2, 2, 2, 2, 2], "a small MLP": [0, 1, 2, 1, 1, 1, 1, 1],
            "a deep chain": [0] + [1] * 4999}
    for start, counts in want.items():
        what, loss, _ = _stored_named(start)
        got = ex._edge_counts(ex._reachable(loss.grad_fn))
        assert sorted(got.values()) == sorted(counts), what
        assert got[loss.grad_fn] == 0


# ----------------------------------------------------------------------------------------------
# the graphs: the kinds promised
# ----------------------------------------------------------------------------------------------
def _kinds(loss) -> Counter:
    return Counter(n.name for n in _engine_order(loss.grad_fn))


def _depths(root) -> dict:
    """node -> (shortest, longest) number of edges from the root."""
    order = _engine_order(root)
    lo, hi = {root: 0}, {root: 0}
    for u in order:
        for v in _edges(u):
            lo[v] = min(lo.get(v, 10 ** 9), lo[u] + 1)
            hi[v] = max(hi.get(v, -1), hi[u] + 1)
    return {n: (lo[n], hi[n]) for n in order}


def test_the_stored_graphs_are_the_ones_their_descriptions_promise():
    """A plain chain; h used three times; u on paths of different lengths; doubling; a small MLP; a chain of
    5,000 nodes, deeper than Python's recursion limit. Each graph is the formula it is described with."""
    chain, shared, paths, doubling, mlp, deep = (_stored_named(start) for start in (
        "a plain chain", "h = tanh(x * w) used three times", "two paths", "doubling", "a small MLP", "a deep chain"))
    assert _stored()[:3] == [chain, shared, paths]  # the small ones a learner can work by hand come first
    assert chain[0] == CHAIN[len("for the graph: "):-1]
    assert _kinds(chain[1]) == Counter(SumBackward=1, AddBackward=1, TanhBackward=1, MulBackward=1)
    assert all(len(_edges(n)) <= 1 for n in _engine_order(chain[1].grad_fn))  # a chain
    assert sorted(t.name for n in _engine_order(chain[1].grad_fn) for t in _leaf_edges(n)) == ["b", "w"]

    assert shared[0] == SHARED[len("for the graph: "):-1]
    assert _kinds(shared[1]) == Counter(SumBackward=1, AddBackward=1, MulBackward=2, TanhBackward=1)
    tanh = next(n for n in _engine_order(shared[1].grad_fn) if n.name == "TanhBackward")
    users = Counter(u.name for u in _engine_order(shared[1].grad_fn) for e in _edges(u) if e is tanh)
    assert users == Counter(MulBackward=2, AddBackward=1)  # h * h, then + h

    assert paths[0] == PATHS[len("for the graph: "):-1]
    assert _kinds(paths[1]) == Counter(SumBackward=1, AddBackward=1, ExpBackward=1, TanhBackward=2, MulBackward=2)
    lo, hi = max(_depths(paths[1].grad_fn).values(), key=lambda d: d[1] - d[0])
    assert (lo, hi) == (3, 5)  # u: loss ← s ← a ← u, and loss ← s ← c3 ← c2 ← c1 ← u

    assert doubling[0].startswith("doubling, y1 = x + x, y2 = y1 + y1, ..., y6 = y5 + y5")
    nodes = _engine_order(doubling[1].grad_fn)
    assert _kinds(doubling[1]) == Counter(AddBackward=6)
    assert all(len(set(_edges(n))) == 1 == len(_edges(n)) / 2 for n in nodes[:-1])
    assert [t.name for t in _leaf_edges(nodes[-1])] == ["x", "x"]

    assert mlp[0] == "a small MLP, loss = mean((relu(X @ W1 + b1) @ W2 + b2 - T) ** 2)"
    assert _kinds(mlp[1]) == Counter(MeanBackward=1, MulBackward=1, SubBackward=1, AddBackward=2,
                                     MatmulBackward=2, ReluBackward=1)
    assert sorted(t.name for n in _engine_order(mlp[1].grad_fn) for t in _leaf_edges(n)) == ["W1", "W2", "b1", "b2"]

    assert deep[0] == DEEP[len("for the graph: "):-1]
    nodes = _engine_order(deep[1].grad_fn)
    assert _kinds(deep[1]) == Counter(MulBackward=5000) and len(nodes) > sys.getrecursionlimit()
    assert all(len(_edges(n)) == 1 for n in nodes[:-1]) and [t.name for t in _leaf_edges(nodes[-1])] == ["x"]


def test_the_graphs_are_stored_then_random_reproducible_and_more_when_hidden():
    """Visible and hidden runs share the stored graphs; then random graphs #1, #2, ... (other and more when
    hidden); building the cases again gives the same graphs."""
    visible, hidden = _cases(False), _cases(True)
    stored = [what for what, _, _ in _stored(False)]
    assert [what for what, _, _ in _stored(True)] == stored and len(stored) >= 6
    for cases in (visible, hidden):
        randoms = [what for what, _, _ in cases[len(stored):]]
        assert [w.split(":")[0] for w in randoms] == [f"random graph #{k + 1}" for k in range(len(randoms))]
    assert len(_randoms(True)) > len(_randoms(False)) > 0
    assert not {w.split(": ", 1)[1] for w, _, _ in _randoms(False)} & {w.split(": ", 1)[1] for w, _, _ in _randoms(True)}
    again = _BUILD()
    assert [(w, _kinds(loss)) for w, loss, _ in again] == [(w, _kinds(loss)) for w, loss, _ in visible]


OPS = {"*": "MulBackward", "+": "AddBackward"}


@pytest.mark.parametrize("hidden", [False, True])
def test_each_random_graph_is_the_program_its_description_lists(hidden):
    """'v0 = x0 * x1; v1 = tanh(v0); ...; loss = (v1 + v3).sum()': each node labelled 'made vK' does what its
    line says, on the values it names (leaves x0, x1 or earlier nodes); the loss sums the values it names."""
    for what, loss, labels in _randoms(hidden):
        lines = what.split(": ", 1)[1].split("; ")
        made = {re.search(r"made (.+)\)$", label).group(1): node for node, label in labels.items()}

        def value(name, node_edge):
            if isinstance(node_edge, mt.Tensor):
                return node_edge.name == name
            return made.get(name) is node_edge
        for line in lines[:-1]:
            name, expr = line.split(" = ")
            node = made[name]
            inputs = [e for e, _ in node.next_functions]
            if expr.startswith("tanh("):
                assert node.name == "TanhBackward" and value(expr[5:-1], inputs[0]), line
            else:
                a, op, b = expr.split(" ")
                assert node.name == OPS[op] and value(a, inputs[0]) and value(b, inputs[1]), line
        picks = re.fullmatch(r"loss = \((.*)\)\.sum\(\)", lines[-1]).group(1).split(" + ")
        assert loss.grad_fn.name == "SumBackward" and labels[loss.grad_fn] == "SumBackward (the node that made loss)"
        total, summed = loss.grad_fn.next_functions[0][0], []
        for _ in picks[1:]:
            assert total.name == "AddBackward"
            summed.append(total.next_functions[1][0])
            total = total.next_functions[0][0]
        summed.append(total)
        assert all(value(p, e) for p, e in zip(picks, summed[::-1])) and len(set(picks)) == len(picks)
        assert picks[-1] == lines[-2].split(" = ")[0]  # the last value made is always in the loss
        assert 4 <= len(lines) - 1 <= 11


def test_the_random_graphs_mix_the_three_ops_and_share_values():
    """Across the random graphs: products, sums and tanh; a value used twice by one op; a node with several
    consumers; losses summing several values."""
    randoms = _randoms(False) + _randoms(True)
    text = " ".join(what for what, _, _ in randoms)
    assert " * " in text and " + " in text and "tanh(" in text
    assert re.search(r"= (\w+) [*+] \1;", text)
    assert any(max(Counter(e for n in _engine_order(loss.grad_fn) for e in set(_edges(n))).values()) >= 2
               for _, loss, _ in randoms)
    assert max(what.split("; ")[-1].count(" + ") for what, _, _ in randoms) >= 2


@pytest.mark.parametrize("hidden", [False, True])
def test_every_node_of_a_stored_graph_is_labelled_with_the_value_it_made(hidden):
    """Each node a learner can be told about: '<its kind> (the node that made <name>)', one name per node;
    leaves carry their names."""
    for what, loss, labels in _stored(hidden):
        nodes = _engine_order(loss.grad_fn)
        names = [labels[n] for n in nodes]
        assert all(label == f"{n.name} (the node that made {label.split('made ')[1][:-1]})"
                   for n, label in zip(nodes, names))
        assert len(set(names)) == len(names), what
        assert all(t.name for n in nodes for t in _leaf_edges(n)), what


# ----------------------------------------------------------------------------------------------
# added in run 9 (tests/mutation-run-9/exercises-backprop-walks.md): the names a learner is told
# ----------------------------------------------------------------------------------------------
STORED_NAMES = {  # per stored graph: (node kind, the value it made) for every node; the leaves' names
    "a plain chain": ([("AddBackward", "y"), ("MulBackward", "u"), ("SumBackward", "loss"), ("TanhBackward", "h")],
                      ["b", "w"]),  # x needs no gradient: no edge
    "h = tanh(x * w) used three times": ([("AddBackward", "y"), ("MulBackward", "hh"), ("MulBackward", "u"),
                                          ("SumBackward", "loss"), ("TanhBackward", "h")], ["w", "x"]),
    "two paths": ([("AddBackward", "s"), ("ExpBackward", "a"), ("MulBackward", "c1"), ("MulBackward", "u"),
                   ("SumBackward", "loss"), ("TanhBackward", "c2"), ("TanhBackward", "c3")], ["x"]),
    "doubling": ([("AddBackward", f"y{k}") for k in range(1, 7)], ["x", "x"]),
    "a small MLP": ([("AddBackward", "a1"), ("AddBackward", "pred"), ("MatmulBackward", "z1"), ("MatmulBackward", "z2"),
                     ("MeanBackward", "loss"), ("MulBackward", "sq"), ("ReluBackward", "h1"), ("SubBackward", "diff")],
                    ["W1", "W2", "b1", "b2"]),  # X and T need no gradient
    "a deep chain": (sorted(("MulBackward", f"y{k}") for k in range(1, 5001)), ["x"]),
    "h = tanh(x) used by three consumers": ([("AddBackward", "p + s"), ("AddBackward", "s"), ("MulBackward", "hh"),
                                             ("SumBackward", "loss"), ("TanhBackward", "h"), ("TanhBackward", "p"),
                                             ("TanhBackward", "q"), ("TanhBackward", "q1")], ["x"]),
}


def test_every_stored_graph_names_its_nodes_and_leaves_as_its_formula_does():
    """The words a message shows a learner: each node "<kind> (the node that made <name>)" with the name
    of the value in the graph's formula, the loss's node "... made loss", and each leaf that needs a
    gradient (an edge of the graph) under its own name."""
    stored = _stored()
    assert len(stored) == len(STORED_NAMES)
    for start, (nodes, leaves) in STORED_NAMES.items():
        what, loss, labels = _stored_named(start)
        order = _engine_order(loss.grad_fn)
        made = sorted((n.name, re.fullmatch(rf"{n.name} \(the node that made (.+)\)", labels[n]).group(1))
                      for n in order)
        assert made == nodes, what
        assert sorted(t.name for n in order for t in _leaf_edges(n)) == leaves, what


def test_the_doubling_and_three_consumer_graphs_are_described_in_full():
    """The two stored graphs the catalogue's messages do not quote whole: their descriptions word for word."""
    assert _stored_named("doubling")[0] == ("doubling, y1 = x + x, y2 = y1 + y1, ..., y6 = y5 + y5 "
                                            "(each node feeds the next one twice)")
    assert _stored_named("h = tanh(x) used by three consumers")[0] == (
        "h = tanh(x) used by three consumers side by side, twice by one of them: p = tanh(h), "
        "hh = h * h, q1 = tanh(h), q = tanh(q1), s = hh + q, loss = (p + s).sum()")


@pytest.mark.parametrize("hidden", [False, True])
def test_each_partial_sum_of_a_random_loss_is_labelled_with_the_values_it_adds(hidden):
    """loss = (v2 + v5 + v7).sum(): the Add nodes made "v2 + v5 + v7" and, below it, "v2 + v5"."""
    for what, loss, labels in _randoms(hidden):
        picks = re.fullmatch(r"loss = \((.*)\)\.sum\(\)", what.split("; ")[-1]).group(1).split(" + ")
        total = loss.grad_fn.next_functions[0][0]
        for i in range(len(picks), 1, -1):
            assert labels[total] == f"AddBackward (the node that made {' + '.join(picks[:i])})", what
            total = total.next_functions[0][0]


def test_the_random_graphs_take_their_operands_from_both_leaves_and_the_values_made():
    """Each value is made from one or two earlier ones, any of them: across the visible random graphs, both
    leaves x0 and x1 and made values are operands."""
    operands = set()
    for what, _, _ in _randoms(False):
        for line in what.split(": ", 1)[1].split("; ")[:-1]:
            operands |= set(re.findall(r"\b[xv]\d+\b", line.split(" = ")[1]))
    assert {"x0", "x1"} <= operands and any(o.startswith("v") for o in operands)
