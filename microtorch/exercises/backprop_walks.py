"""Exercises 1 and 2 of notebook 02 (backpropagation): a topological order of the graph, and
dependency counts (how many gradients each node waits for before it can run).

The graphs are built by the engine itself, so their nodes are the real ``grad_fn`` objects.
While the learner's function runs, the engine's own graph walks (``_topological_order``,
``_dependencies``) are switched off. The references are independent: a reachable set and
edge counts walked here.
"""
from __future__ import annotations

from ..creation import randn
from ..tensor import Tensor
from .checker import checker
from .checking import _fail, _passed, hidden, learner, rng


def _graph_cases(deep: int = 5000):
    """Graphs to try a learner's graph walk on: ``(what, loss, labels)``.

    ``labels`` maps each node to words a learner can find in the case's description
    ("MulBackward (the node that made u)"); leaves carry names too. The graphs are built
    by the engine itself, so their nodes are the real ``grad_fn`` objects.
    """
    from ..creation import Generator, tensor

    g = Generator().manual_seed(2)
    cases = []

    def case(what):
        labels = {}

        def name(label, t):
            t.name = label
            if t.grad_fn is not None:
                labels[t.grad_fn] = f"{t.grad_fn.name} (the node that made {label})"
            return t

        return what, labels, name

    what, labels, n = case("a plain chain, loss = (tanh(x * w) + b).sum()")
    x = n("x", randn(3, dtype="float64", generator=g))
    w = n("w", randn(3, dtype="float64", generator=g, requires_grad=True))
    b = n("b", randn(3, dtype="float64", generator=g, requires_grad=True))
    u = n("u", x * w)
    h = n("h", u.tanh())
    y = n("y", h + b)
    cases.append((what, n("loss", y.sum()), labels))

    what, labels, n = case("h = tanh(x * w) used three times, loss = (h * h + h).sum()")
    x = n("x", randn(3, dtype="float64", generator=g, requires_grad=True))
    w = n("w", randn(3, dtype="float64", generator=g, requires_grad=True))
    u = n("u", x * w)
    h = n("h", u.tanh())
    hh = n("hh", h * h)
    y = n("y", hh + h)
    cases.append((what, n("loss", y.sum()), labels))

    what, labels, n = case("two paths of different lengths from u to the loss, a = exp(u), "
                           "c3 = tanh(tanh(2 * u)), loss = (a + c3).sum()")
    x = n("x", randn(4, dtype="float64", generator=g, requires_grad=True))
    u = n("u", x * 0.5)
    a = n("a", u.exp())
    c1 = n("c1", u * 2.0)
    c2 = n("c2", c1.tanh())
    c3 = n("c3", c2.tanh())
    s = n("s", a + c3)
    cases.append((what, n("loss", s.sum()), labels))

    what, labels, n = case("doubling, y1 = x + x, y2 = y1 + y1, ..., y6 = y5 + y5 "
                           "(each node feeds the next one twice)")
    y = n("x", tensor(1.0, dtype="float64", requires_grad=True))
    for k in range(1, 7):
        y = n(f"y{k}", y + y)
    cases.append((what, y, labels))

    what, labels, n = case("a small MLP, loss = mean((relu(X @ W1 + b1) @ W2 + b2 - T) ** 2)")
    X = n("X", randn(4, 3, dtype="float64", generator=g))
    T = n("T", randn(4, 1, dtype="float64", generator=g))
    W1 = n("W1", randn(3, 5, dtype="float64", generator=g, requires_grad=True))
    b1 = n("b1", randn(5, dtype="float64", generator=g, requires_grad=True))
    W2 = n("W2", randn(5, 1, dtype="float64", generator=g, requires_grad=True))
    b2 = n("b2", randn(1, dtype="float64", generator=g, requires_grad=True))
    z1 = n("z1", X @ W1)
    a1 = n("a1", z1 + b1)
    h1 = n("h1", a1.relu())
    z2 = n("z2", h1 @ W2)
    p = n("pred", z2 + b2)
    d = n("diff", p - T)
    sq = n("sq", d * d)
    cases.append((what, n("loss", sq.mean()), labels))

    what, labels, n = case(f"a deep chain of {deep:,} nodes, y1 = x * 1.0001, y2 = y1 * 1.0001, ...")
    y = n("x", tensor(1.0, dtype="float64", requires_grad=True))
    for k in range(1, deep + 1):
        y = n(f"y{k}", y * 1.0001)
    cases.append((what, y, labels))

    # a shared node whose consumers do not feed each other, one using it twice: a schedule that counts
    # distinct consumers runs h too early, whether it takes the ready nodes last-in or first-in first
    what, labels, n = case("h = tanh(x) used by three consumers side by side, twice by one of them: p = tanh(h), "
                           "hh = h * h, q1 = tanh(h), q = tanh(q1), s = hh + q, loss = (p + s).sum()")
    x = n("x", randn(3, dtype="float64", generator=g, requires_grad=True))
    h = n("h", x.tanh())
    p = n("p", h.tanh())
    hh = n("hh", h * h)
    q = n("q", n("q1", h.tanh()).tanh())
    s = n("s", hh + q)
    cases.append((what, n("loss", n("p + s", p + s).sum()), labels))

    r = rng()
    for k in range(12 if hidden() else 4):  # random graphs: each value made from 1-2 earlier ones
        what, labels, n = case(f"random graph #{k + 1}")
        values = [n(f"x{i}", randn(2, dtype="float64", generator=g, requires_grad=True)) for i in range(2)]
        lines = []
        for i in range(int(r.integers(4, 12))):
            a, b = (values[int(j)] for j in r.integers(0, len(values), 2))
            kind = int(r.integers(0, 3))
            v = n(f"v{i}", a * b if kind == 0 else a + b if kind == 1 else a.tanh())
            lines.append(f"v{i} = " + (f"{a.name} * {b.name}", f"{a.name} + {b.name}", f"tanh({a.name})")[kind])
            values.append(v)
        picks = sorted({int(j) for j in r.integers(2, len(values), 2)} | {len(values) - 1})
        loss, text = values[picks[0]], values[picks[0]].name
        for j in picks[1:]:  # each partial sum is a node too: labelled by what it adds up
            text = f"{text} + {values[j].name}"
            loss = n(text, loss + values[j])
        lines.append("loss = (" + " + ".join(values[j].name for j in picks) + ").sum()")
        cases.append((what + ": " + "; ".join(lines), n("loss", loss.sum()), labels))
    return cases


def _reachable(root) -> list:
    """The reference: every node reachable from ``root``, found by a plain worklist walk."""
    from ..node import Function

    seen, todo = {root: None}, [root]
    while todo:
        for e in todo.pop().next:
            if isinstance(e, Function) and e not in seen:
                seen[e] = None
                todo.append(e)
    return list(seen)


def _edge_counts(nodes) -> dict:
    """The reference: for each node, the number of edges from ``nodes`` pointing at it."""
    from ..node import Function

    counts = dict.fromkeys(nodes, 0)
    for u in nodes:
        for v in u.next:
            if isinstance(v, Function):
                counts[v] += 1
    return counts


def _walk_blocks():
    from ..autograd import _dependencies, _topological_order

    return [_topological_order, _dependencies]


def _label(labels: dict, x) -> str:
    from ..node import Function

    if isinstance(x, Function):
        return labels.get(x, f"{x.name} (a node from some other graph)")
    if isinstance(x, Tensor):
        return f"the leaf tensor {x.name or '(unnamed)'}"
    return repr(x)


def _call_walk(fn, where: str, root):
    """``fn(root)``, with a plain-words failure for deep recursion."""
    try:
        with learner():
            return fn(root)
    except RecursionError:
        _fail(f"{where}your function hit Python's recursion limit (about "
              f"{__import__('sys').getrecursionlimit()} nested calls). A recursive walk goes one "
              "call deeper per node, and real graphs (an RNN unrolled over a long sequence, a "
              "deep network) are deeper than that. Walk with an explicit stack (a list you "
              "append to and pop from) instead of recursion.")
    except (AssertionError, NotImplementedError):
        raise
    except Exception as exc:
        _fail(f"{where}your function raised {type(exc).__name__}: {exc}\n"
              "It should return an answer for this graph.")


def _uses(labels: dict, consumers: list) -> str:
    """"A (twice) and B": each consumer once, with how many of its edges point here."""
    from collections import Counter

    parts = [_label(labels, u) + {1: "", 2: " twice"}.get(k, f" {k} times")
             for u, k in Counter(consumers).items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _consumer_edges(nodes) -> list:
    """Every (consumer, producer) edge between graph nodes, in a stable order."""
    from ..node import Function

    return [(u, v) for u in nodes for v in u.next if isinstance(v, Function)]


def check_topo_order(fn) -> None:
    """``fn(root) -> list of nodes``: every node reachable from ``root`` (the loss's
    ``grad_fn``), each once, consumers first: a node comes before every node it sends a
    gradient to (the nodes in its ``next_functions``). That is the order in which backward
    may run them. Checked on graphs built by the engine (shared subexpressions, paths of
    different lengths, a deep chain, random graphs): every reachable node once, and every
    edge respected.
    """
    from ..node import Function

    cases = _graph_cases()
    for what, loss, labels in cases:
        root = loss.grad_fn
        where = f"for the graph: {what}\n"
        want = _reachable(root)
        got = _call_walk(fn, where, root)
        if got is None:
            _fail(f"{where}your function returned None: did you forget `return`?")
        try:
            got = list(got)
        except TypeError:
            _fail(f"{where}your function returned {type(got).__name__}; return a list of nodes.")
        for x in got:
            if not isinstance(x, Function):
                if isinstance(x, Tensor):
                    _fail(f"{where}your list contains {_label(labels, x)}. Leaves are not nodes: "
                          "they have no backward to run (their gradient is just added into .grad). "
                          "Put only nodes (instances of mt.Function) in the order; skip edges that "
                          "are tensors or None.")
                if isinstance(x, tuple):
                    _fail(f"{where}your list contains the tuple {x!r}. next_functions holds "
                          "(node, 0) pairs: take the node, element [0].")
                _fail(f"{where}your list contains {x!r}, which is not a graph node; "
                      "return only nodes (instances of mt.Function).")
        seen: dict = {}
        for i, x in enumerate(got):
            if x in seen:
                _fail(f"{where}{_label(labels, x)} appears more than once (at positions "
                      f"{seen[x]} and {i}). Backward runs each node exactly once; keep a set "
                      "of the nodes you have already visited.")
            seen[x] = i
        missing = [x for x in want if x not in seen]
        if missing:
            _fail(f"{where}your list has {len(got)} nodes, but {len(want)} nodes are reachable "
                  f"from the loss; missing, e.g.: {_label(labels, missing[0])}.\nFollow every "
                  "edge of every node (all of node.next_functions, not just the first), down "
                  "to the leaves.")
        reachable = set(want)
        extra = [x for x in got if x not in reachable]
        if extra:
            _fail(f"{where}your list contains {_label(labels, extra[0])}, which the loss does "
                  "not reach: no gradient goes there.")
        if got[0] is not root:
            hint = ""
            if got[-1] is root:
                hint = ("\nYour list ends with the loss's node: it is producers-first, the order "
                        "forward made the nodes. Backward needs the reverse: consumers first.")
            _fail(f"{where}your list starts with {_label(labels, got[0])}, but backward starts "
                  f"at the loss's node, {_label(labels, root)}: nothing can run before it, "
                  "because every other node waits for a gradient that starts there." + hint)
        for u, v in _consumer_edges(got):
            if seen[v] < seen[u]:
                hint = ("A node may run only after *every* node that uses its result has run "
                        "(they each send it a part of its gradient). Reaching a node once is "
                        "not enough: in a graph where one node is reached by paths of "
                        "different lengths, a breadth-first walk puts it too early. Use a "
                        "depth-first post-order (a node after everything it leads to), then "
                        "reverse the list.")
                _fail(f"{where}{_label(labels, v)} came at position {seen[v]}, before "
                      f"{_label(labels, u)} at position {seen[u]}, which feeds it its "
                      f"gradient.\n" + hint)
    _passed("check_topo_order", len(cases))


check_topo_order = checker("topo_order", blocks=_walk_blocks, suite="topological_order")(check_topo_order)


def check_dependency_counts(fn) -> None:
    """``fn(root) -> {node: count}``: for each node reachable from ``root`` (the loss's
    ``grad_fn``), how many edges point at it, i.e. how many gradients it must receive
    before it can run (the loss's own node: 0; nodes you leave out count as 0). Checked
    against edge counts taken here over the reachable nodes (the engine's ``_dependencies``
    is switched off meanwhile).
    """
    from ..node import Function

    cases = _graph_cases()
    for what, loss, labels in cases:
        root = loss.grad_fn
        where = f"for the graph: {what}\n"
        reachable = _reachable(root)
        want = _edge_counts(reachable)
        got = _call_walk(fn, where, root)
        if got is None:
            _fail(f"{where}your function returned None: did you forget `return`?")
        if not hasattr(got, "get") or not hasattr(got, "items"):
            _fail(f"{where}your function returned {type(got).__name__}; return a dict "
                  "{node: count}.")
        for k, v in got.items():
            if isinstance(k, Tensor):
                _fail(f"{where}your dict has a count for {_label(labels, k)}. Leaves do not "
                      "wait for anything (each gradient that reaches one is added into its .grad "
                      "on arrival), so only nodes get counts; skip edges that are tensors.")
            if not isinstance(k, Function):
                _fail(f"{where}your dict has the key {k!r}; the keys should be the nodes "
                      "themselves (instances of mt.Function).")
            if k not in want:
                _fail(f"{where}your dict has a count for {_label(labels, k)}, which the loss "
                      "does not reach.")
        for node, w in want.items():
            c = got.get(node, 0)
            try:
                c = int(c)
            except (TypeError, ValueError):
                _fail(f"{where}the count for {_label(labels, node)} is {c!r}; counts are integers.")
            if c == w:
                continue
            consumers = [u for u in reachable for v in u.next if v is node]
            distinct = len(set(consumers))
            msg = (f"{where}you counted {c} for {_label(labels, node)}; the engine counts {w}: "
                   + (f"{w} edge{'s point' if w != 1 else ' points'} at it, from "
                      + _uses(labels, consumers) + "." if consumers else "it is the loss's own node."))
            if node is root and c:
                hint = "The loss's node has no consumers: backward starts there, its count is 0."
            elif c == distinct and distinct < w:
                hint = ("You counted distinct consumers. A node that uses the same input twice "
                        "(y = x + x, h * h) has two edges to it, and each edge sends its own part "
                        "of the gradient: count edges, not consumers.")
            elif c < w:
                hint = ("Too low. Count every edge that points at a node, also when you reach a "
                        "node you have already visited: only the walk *into* it is skipped the "
                        "second time, not the counting.")
            else:
                hint = ("Too high. If you walked into a node again each time you reached it, "
                        "everything below a shared node was counted once per path. Visit each "
                        "node once (a visited set), and for each visited node count each of its "
                        "edges once.")
            _fail(msg + "\n" + hint)
    _passed("check_dependency_counts", len(cases))


check_dependency_counts = checker("dependency_counts", blocks=_walk_blocks, suite="dependency_counts")(check_dependency_counts)
