"""Exercises of notebook 02 (backpropagation): topological order, dependency counts, numerical gradients.

While the learner's function runs, the engine's own graph walks (``_topological_order``,
``_dependencies``) and its backward and gradcheck are switched off. The references are
independent: a reachable set and edge counts walked here, and gradients written out by hand
in numpy.
"""
from __future__ import annotations

import numpy as np

from ..creation import randn
from ..tensor import Tensor
from .checking import HIDDEN_SEED, _as_array, _call, _fail, _passed, checker, hidden, learner, rng


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


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numerical_grad_cases():
    """``(what, f, x, grad)``: ``grad(x)`` is the gradient written out by hand, in numpy."""
    from ..creation import Generator, tensor

    g = Generator().manual_seed(HIDDEN_SEED if hidden() else 3)
    W = randn(3, 2, dtype="float64", generator=g)
    Wn = W.numpy()
    cases = [
        ("f(x) = sum(x ** 3)", lambda x: (x ** 3).sum(), lambda x: 3 * x ** 2,
         tensor([0.5, -1.0, 2.0], dtype="float64")),
        ("f(x) = tanh(x * x), x a 0-d tensor", lambda x: (x * x).tanh(),
         lambda x: (1 - np.tanh(x * x) ** 2) * 2 * x, tensor(0.7, dtype="float64")),
        ("f(x) = sum(tanh(x @ W)) for a (2, 3) x", lambda x: (x @ W).tanh().sum(),
         lambda x: (1 - np.tanh(x @ Wn) ** 2) @ Wn.T, randn(2, 3, dtype="float64", generator=g)),
        ("f(x) = log(sum(exp(x)))", lambda x: x.exp().sum().log(),
         lambda x: np.exp(x) / np.exp(x).sum(), randn(2, 2, dtype="float64", generator=g)),
        ("f(x) = mean(x * x.sigmoid())", lambda x: (x * x.sigmoid()).mean(),
         lambda x: (_sigmoid(x) + x * _sigmoid(x) * (1 - _sigmoid(x))) / x.size,
         randn(5, dtype="float64", generator=g)),
    ]
    r = rng()
    for _ in range(6 if hidden() else 2):  # the same functions at random points and shapes
        what, f, grad, x = cases[int(r.integers(0, len(cases)))]
        if x.ndim == 0:
            x = tensor(float(r.uniform(-1.5, 1.5)), dtype="float64")
        elif "@ W" in what:
            x = tensor(r.standard_normal((int(r.integers(1, 4)), 3)), dtype="float64")
        else:
            x = tensor(r.standard_normal(tuple(int(k) for k in r.integers(1, 4, int(r.integers(1, 3))))),
                       dtype="float64")
        cases.append((what, f, grad, x))
    return [(what, f, x, grad) for what, f, grad, x in cases]


def _gradient_blocks():
    from .. import autograd
    from ..gradcheck import gradcheck
    from ..tensor import Tensor

    return [(Tensor, "backward"), autograd.backward, autograd.grad, gradcheck]


def check_numerical_grad(fn, eps: float = 1e-4) -> None:
    """``fn(f, x, eps) -> array shaped like x``: central differences
    ``(f(x + eps·eᵢ) − f(x − eps·eᵢ)) / 2eps`` for every element i of ``x``, where ``f``
    maps a float64 tensor to a 0-d tensor. ``x`` must hold its original numbers again when
    ``fn`` returns. Checked against gradients written out by hand (the engine's backward is
    switched off meanwhile: the exercise is to get them without it).
    """
    cases = _numerical_grad_cases()
    for what, f, x, grad in cases:
        where = f"for {what}, at x of shape {tuple(x.shape)}:\n"
        x0 = np.array(x._data)
        want = np.asarray(grad(x0.copy()), dtype=np.float64)
        got = _call(fn, where.rstrip(":\n") + ",", f, x, eps)
        if got is None:
            _fail(f"{where}your function returned None: did you forget `return`?")
        if not np.array_equal(x._data, x0):
            _fail(f"{where}x holds different numbers after your function returned. Put each "
                  "element back after perturbing it (keep the old value, restore it): other "
                  "code, and the next element's differences, expect the original x.")
        got_a = _as_array(got).astype(np.float64)
        if got_a.shape != tuple(x.shape):
            _fail(f"{where}you returned shape {got_a.shape}; the gradient has x's shape "
                  f"{tuple(x.shape)}: one derivative per element of x.")
        tol = 1e-6 + 1e-5 * np.abs(want)
        if np.all(np.abs(got_a - want) <= tol):
            continue
        one_sided = _one_sided(f, x0, eps)
        msg = f"{where}you returned\n{got_a}\nbut the true gradient is\n{want}\n"
        if np.allclose(got_a, 0):
            hint = ("All zeros: f never saw your perturbation. If you changed a copy (np.array(x), "
                    "x.numpy().copy()), f(x) still reads the old numbers. Either write into "
                    "x.numpy() (it shares x's bytes) and restore afterwards, or call f on a new "
                    "tensor built from the perturbed array.")
        elif np.allclose(got_a, 2 * want, rtol=1e-4, atol=1e-6):
            hint = ("Twice the right answer: you divided by eps, but x + eps and x − eps are "
                    "2·eps apart. Divide by 2 * eps.")
        elif np.allclose(got_a, want / 2, rtol=1e-4, atol=1e-6):
            hint = "Half the right answer: divide the difference by 2 * eps, not by 4 * eps."
        elif any(np.allclose(got_a, o, rtol=1e-6, atol=1e-9) for o in one_sided):
            hint = ("These are one-sided differences, (f(x + eps) − f(x)) / eps: their error "
                    "shrinks only like eps (here ~1e-4). Central differences, "
                    "(f(x + eps) − f(x − eps)) / (2 * eps), cancel the first error term: it "
                    "shrinks like eps², ~1e-8 here.")
        else:
            hint = ("Perturb one element at a time (all others unchanged), by +eps and by −eps, "
                    "and put that element's difference quotient at the same index of the result.")
        _fail(msg + hint)
    _passed("check_numerical_grad", len(cases))


check_numerical_grad = checker("numerical_grad", blocks=_gradient_blocks)(check_numerical_grad)


def _one_sided(f, x0: np.ndarray, eps: float) -> list[np.ndarray]:
    """Forward and backward one-sided differences of f at x0 (to recognise them)."""
    from ..creation import tensor

    base = float(f(tensor(x0)).item())
    fwd, bwd = np.zeros(x0.shape), np.zeros(x0.shape)
    for i in np.ndindex(x0.shape):
        xp = x0.copy()
        xp[i] += eps
        fwd[i] = (float(f(tensor(xp)).item()) - base) / eps
        xp[i] = x0[i] - eps
        bwd[i] = (base - float(f(tensor(xp)).item())) / eps
    return [fwd, bwd]


# ----------------------------------------------------------------------------------------------
# Exercise 4: a new op, forward and backward (LogSumExp over the last dimension)
# ----------------------------------------------------------------------------------------------
def _numpy_logsumexp(x: np.ndarray) -> np.ndarray:
    """The reference: log Σⱼ exp(xⱼ) over the last axis, shifted by the max (no overflow)."""
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


def _numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _lse_cases():
    """``(what, x)``: float64 inputs, fixed (incl. huge and very negative values) and random."""
    r = rng()
    cases = [("a vector", np.array([0.5, -1.0, 2.0])),
             ("a (2, 3) matrix: one logsumexp per row", np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])),
             ("huge values, [1000, 1001, 999] (exp overflows without the max shift)", np.array([1000.0, 1001.0, 999.0])),
             ("very negative values, [-1000, -1002] (exp underflows to 0 without the shift)", np.array([-1000.0, -1002.0])),
             ("a (2, 2, 4) tensor: over the last dimension only", np.arange(16.0).reshape(2, 2, 4) / 4)]
    for k in range(12 if hidden() else 4):
        shape = tuple(int(n) for n in r.integers(1, 5, int(r.integers(1, 4))))
        cases.append((f"random input #{k + 1} of shape {shape}", r.standard_normal(shape) * 3))
    return cases


def _lse_blocks():
    from ..functions import loss
    from ..tensor import Tensor

    blocks = [loss.log_softmax]
    if "log_softmax" in Tensor.__dict__:
        blocks.append((Tensor, "log_softmax"))
    return blocks


def check_logsumexp(cls) -> None:
    """``cls``: a subclass of ``mt.Function`` whose ``cls.apply(x)`` is log Σⱼ exp(x[..., j])
    over the last dimension (the result has shape ``x.shape[:-1]``), with a backward. Checked:
    its values against numpy (also for huge and very negative inputs), its gradient against
    g[..., None] · softmax(x) for a random upstream gradient g, and that the graph records
    your node (``y.grad_fn`` is a ``cls``, and a trace names its op). Fixed and random inputs.
    """
    from ..creation import tensor
    from ..trace.recorder import Trace
    from ..node import Function

    if not (isinstance(cls, type) and issubclass(cls, Function)):
        _fail(f"check_logsumexp needs your class (class LogSumExp(mt.Function): ...), got {cls!r}.")
    r = np.random.default_rng(HIDDEN_SEED if hidden() else 11)
    cases = _lse_cases()
    for what, x0 in cases:
        where = f"for {what}, x = {np.round(x0, 3).tolist()}:"
        want = _numpy_logsumexp(x0)
        x = tensor(x0, dtype="float64", requires_grad=True)
        tr = Trace()
        with tr:
            y = _call(cls.apply, f"{where}\nforward:", x)
        y_a = _as_array(y).astype(np.float64)
        if y_a.shape != want.shape:
            hint = ("You reduced over the wrong dimension: sum over the LAST one (axis=-1)."
                    if x0.ndim > 1 and y_a.shape == x0.shape[1:] else
                    "Reduce the last dimension away: keepdims=False (or take [..., 0] at the end).")
            _fail(f"{where}\nyour forward returned shape {y_a.shape}; the result has x.shape[:-1] = "
                  f"{want.shape}.\n{hint}")
        if not np.all(np.isfinite(y_a)) or not np.allclose(y_a, want, rtol=1e-10, atol=1e-10):
            naive = np.log(np.exp(x0).sum(axis=-1)) if np.all(np.abs(x0) < 700) else None
            if not np.all(np.isfinite(y_a)):
                hint = ("inf or nan: exp(1000) overflows float64. Subtract the row's max m first: "
                        "log Σ exp(x) = m + log Σ exp(x − m).")
            elif naive is not None and np.allclose(y_a, np.log(np.exp(x0).mean(axis=-1))):
                hint = "That is the log of the MEAN of exp(x): sum, do not average."
            elif np.allclose(y_a, x0.max(axis=-1)):
                hint = "That is only the max m: add log Σ exp(x − m) to it."
            else:
                hint = "log Σⱼ exp(xⱼ) = m + log Σⱼ exp(xⱼ − m), with m the max over the last dimension."
            _fail(f"{where}\nyour forward gives {np.round(y_a, 6).tolist()}, but logsumexp is "
                  f"{np.round(want, 6).tolist()}.\n{hint}")
        if not isinstance(getattr(y, "grad_fn", None), cls):
            _fail(f"{where}\nthe result's grad_fn is {getattr(y, 'grad_fn', None)!r}, not a {cls.__name__} "
                  "node: call your op as LogSumExp.apply(x), and let forward return a numpy array.")
        if not any(e["op"] == cls.__name__ for e in tr.filter("op")):
            _fail(f"{where}\nthe trace recorded no {cls.__name__} op.")
        g0 = r.standard_normal(want.shape)
        want_grad = g0[..., None] * _numpy_softmax(x0)
        try:
            with learner():
                (y * tensor(g0, dtype="float64")).sum().backward()
        except (NotImplementedError, AssertionError):
            raise
        except Exception as exc:
            hint = ""
            if "invalid gradient" in str(exc) or "shape" in str(exc):
                hint = ("\nThe gradient for x must have x's shape: g has the output's shape "
                        "x.shape[:-1], so give it back its last dimension (g.unsqueeze(-1), or "
                        "g.reshape(*g.shape, 1)) before multiplying by softmax(x).")
            _fail(f"{where}\nyour backward raised {type(exc).__name__}: {exc}{hint}")
        got = _as_array(x.grad).astype(np.float64) if x.grad is not None else None
        if got is None:
            _fail(f"{where}\nx got no gradient: backward must return the gradient for x.")
        if np.allclose(got, want_grad, rtol=1e-8, atol=1e-10):
            continue
        soft = _numpy_softmax(x0)
        if np.allclose(got, soft, rtol=1e-8, atol=1e-10) or np.allclose(got, np.broadcast_to(soft.sum(-1, keepdims=True), soft.shape)):
            hint = "You left out the upstream gradient g: the chain rule multiplies by it (g[..., None] · softmax)."
        elif np.allclose(got, g0[..., None] * np.exp(x0), rtol=1e-6):
            hint = "exp(x) is not yet the derivative: divide by Σ exp(x) — the derivative is softmax(x) = exp(x − y)."
        else:
            hint = "∂y/∂xⱼ = exp(xⱼ − y) = softmax(x)ⱼ; the gradient for x is g[..., None] · softmax(x)."
        _fail(f"{where}\nfor the upstream gradient g = {np.round(g0, 3).tolist()}, x.grad is\n"
              f"{np.round(got, 5).tolist()}\nbut it should be\n{np.round(want_grad, 5).tolist()}\n{hint}")
    _passed("check_logsumexp", len(cases))


check_logsumexp = checker("LogSumExp", blocks=_lse_blocks)(check_logsumexp)
