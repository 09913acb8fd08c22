"""The backward engine: dependency counting (and the topological-sort variant), centralized
gradient accumulation, ``backward`` and ``grad``.

**Backward** (:func:`backward`) runs on explicit dependency counts, like the C engine in
the seeds: first count, for every node reachable from the loss, how many consumers will
send it a gradient (the count lives in each node's record); then run nodes whose count
reached zero, summing each node's incoming gradients in one buffer. Every node runs
exactly once, so the pass is linear in the graph size. ``order="topo"`` runs the teaching
variant — an iterative depth-first topological sort, then nodes in reverse order — which
must give identical gradients.

Leaf gradients go to the **gradient sink** (:class:`GradientSink`, the engine's one
instance :data:`gradient_sink`): by default into ``leaf.grad`` (PyTorch semantics: a second
backward adds to it), or, for a leaf nn placed in a flat gradient buffer, into its slice of
that buffer. No op knows where a gradient goes: a node's backward returns it, the sink
puts it there. A node releases its saved tensors right after it ran unless
``retain_graph=True``. Nodes themselves are :class:`microtorch.node.Function` instances;
grad mode lives in :mod:`microtorch.grad_mode`.
"""
from __future__ import annotations

import weakref

import numpy as np

from . import dtypes, grad_mode
from . import recording as _trace
from .node import Function, _edge
from .sparse.gradient import accumulate as accumulate_sparse
from .tensor_base import TensorBase as Tensor

# --------------------------------------------------------------------------------------------
# the backward engine
# --------------------------------------------------------------------------------------------
def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None,
             order: str = "deps") -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves they depend on.

    ``grad_tensors`` is d(something)/d(tensors); it may be omitted only for scalars (then
    it is 1). ``order="deps"`` (default) runs the dependency-counting engine,
    ``order="topo"`` the topological-sort variant. ``inputs`` restricts accumulation to
    those tensors (leaves, or non-leaves whose ``.grad`` then gets filled, as in PyTorch).
    """
    roots = _roots(tensors, grad_tensors)
    sink, on_node = gradient_sink.accumulate, None  # the common case: every leaf gradient, as is
    if inputs is not None or create_graph:
        only = None if inputs is None else {id(t) for t in _as_tuple(inputs)}

        def sink(leaf, g):
            if only is None or id(leaf) in only:
                gradient_sink.accumulate(leaf, g, create_graph)
    if inputs is not None:
        wanted: dict = {}  # non-leaf inputs, by the node that produced them
        for t in _as_tuple(inputs):
            if t.grad_fn is not None:
                wanted.setdefault(t.grad_fn, []).append(t)
        if wanted:
            def on_node(node, g):
                for t in wanted.get(node, ()):
                    gradient_sink.accumulate(t, g, create_graph)

    _run(roots, sink, retain_graph=create_graph if retain_graph is None else retain_graph,
         create_graph=create_graph, order=order, on_node=on_node,
         plain=inputs is None and not create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False) -> tuple[Tensor | None, ...]:
    """d(outputs)/d(inputs), returned instead of accumulated into ``.grad``.

    Inputs may be leaves or intermediate tensors.
    """
    inputs = _as_tuple(inputs)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    captured: dict[int, Tensor] = {}
    wanted_leaves = {id(t): t for t in inputs if t.grad_fn is None}
    wanted_nodes = {}
    for i, t in enumerate(inputs):
        if t.grad_fn is not None:
            wanted_nodes.setdefault(t.grad_fn, []).append(i)

    def sink(leaf, g):
        if id(leaf) in wanted_leaves:
            captured[id(leaf)] = g if id(leaf) not in captured else captured[id(leaf)] + g

    def on_node(node, g):
        for i in wanted_nodes.get(node, ()):
            captured[id(inputs[i])] = g

    _run(_roots(outputs, grad_outputs), sink,
         retain_graph=create_graph if retain_graph is None else retain_graph,
         create_graph=create_graph, on_node=on_node)
    result = []
    for t in inputs:
        g = captured.get(id(t))
        if g is None and not allow_unused:
            raise RuntimeError("One of the differentiated Tensors appears to not have been used "
                               "in the graph. Set allow_unused=True if this is the desired behavior.")
        # as is, as PyTorch: without create_graph nothing backward computed has a graph, and a
        # gradient that is the caller's own grad_outputs tensor is handed back as that tensor
        result.append(g)
    return tuple(result)


def _as_tuple(x):
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _roots(tensors, grads):
    """Pair each output with its incoming gradient; ones for scalars, else an error."""
    tensors = _as_tuple(tensors)
    if grads is None:
        grads = (None,) * len(tensors)
    elif not isinstance(grads, (list, tuple)):
        grads = (grads,)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grads)} gradients")
    roots = []
    for t, g in zip(tensors, grads):
        if not t.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t._data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(this output has shape {list(t.shape)}); pass gradient=... "
                                   f"of that shape, or reduce it first, e.g. .sum()")
            g = Tensor._empty(t.shape, t.dtype)
            g._data.fill(1)
        else:
            if not isinstance(g, Tensor):
                g = Tensor._wrap(np.asarray(g, dtype=t.dtype))
            if g.shape != t.shape:  # numpy shapes are tuples
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {list(g.shape)} "
                                   f"and output[0] has a shape of {list(t.shape)}.")
        roots.append((_edge(t), g, t))
    return roots


class GradientSink:
    """Where leaf gradients go: the engine's centralized gradient accumulation.

    By default a leaf's gradient accumulates into its own ``.grad``: set (a copy that owns
    its bytes) the first time, added in place by every later backward, as in PyTorch. nn
    configures the one exception with :meth:`place`: "this leaf's gradient lives in
    ``home``", a tensor viewing the leaf's slice of a flat gradient buffer
    (:func:`microtorch.nn.flatten_parameters`). While such a leaf's ``.grad`` is None (before
    its first backward, or after ``zero_grad()``), the sink writes the gradient into the
    home and makes the home ``.grad`` again: no allocation, and the optimizer finds every
    gradient in one buffer. An op that ``fills_destinations`` (``Linear``) is handed those
    homes by the engine (:meth:`destinations`) and computes the gradient there, so nothing is
    copied either. :meth:`remove` undoes a placement (the leaf moved out).

    Keyed by identity, and an entry goes when its leaf does (a ``WeakKeyDictionary`` would
    compare tensors with ``==``, which is elementwise).
    """

    def __init__(self):
        self._homes: dict[int, tuple[weakref.ref, Tensor]] = {}

    def __len__(self) -> int:
        """How many leaves have a placed gradient."""
        return len(self._homes)

    def place(self, leaf: Tensor, home: Tensor) -> None:
        """From now on ``leaf``'s gradient lives in ``home`` (same shape and dtype)."""
        if home.shape != leaf.shape or home.dtype != leaf.dtype:
            raise ValueError(f"a gradient home must match its leaf: the leaf is {dtypes.name(leaf.dtype)} "
                             f"{list(leaf.shape)}, the home {dtypes.name(home.dtype)} {list(home.shape)}")
        key, homes = id(leaf), self._homes
        homes[key] = (weakref.ref(leaf, lambda _, key=key: homes.pop(key, None)), home)

    def home(self, leaf: Tensor) -> Tensor | None:
        """The tensor ``leaf``'s gradient lives in, or None (it gets a ``.grad`` of its own)."""
        entry = self._homes.get(id(leaf))
        return entry[1] if entry is not None and entry[0]() is leaf else None

    def remove(self, leaf: Tensor) -> None:
        """``leaf``'s gradient no longer has a home (nothing happens if it had none)."""
        if self.home(leaf) is not None:
            del self._homes[id(leaf)]

    def destinations(self, node: Function) -> list[Tensor | None]:
        """Where ``node`` may write each input's gradient, for an op that fills destinations
        (``fills_destinations``) in a plain ``backward()``: per input edge, the leaf's home
        when the edge is a placed leaf whose ``.grad`` is None (so :meth:`accumulate` would
        set it, not add to it) and that feeds the node once, else None (a fresh array).
        The op then computes that gradient in place, and accumulating it copies nothing."""
        edges = node.next
        return [home if (isinstance(e, Tensor) and e._grad is None and (home := self.home(e)) is not None
                         and [x is e for x in edges].count(True) == 1)  # (by identity: == is elementwise)
                else None for e in edges]

    def accumulate(self, leaf: Tensor, g: Tensor, create_graph: bool = False) -> None:
        """``leaf.grad += g``, or the first time ``leaf.grad = g`` (into the leaf's home, if placed).

        With ``create_graph`` the sum is recorded (``.grad`` is then a graph tensor).
        """
        grad = leaf._grad
        if g.is_sparse or (grad is not None and grad.is_sparse):
            # a sparse gradient (Embedding(sparse=True)): merged, coalesced or densified by
            # microtorch.sparse.gradient — never copied into the dense flat gradient buffer
            accumulate_sparse(leaf, g, self.home(leaf))
        elif grad is None:
            # a fresh copy: g may be shared (add's backward hands one tensor to both inputs) or a
            # view (a stride-0 expand), and .grad must own its bytes for later in-place accumulation
            if create_graph:
                leaf.grad = g
            elif (home := self.home(leaf)) is not None:
                if g is not home:  # (it is when the node wrote it there: see destinations)
                    np.copyto(home._data, g._data)  # straight into the flat gradient buffer
                home._storage.version += 1
                leaf._grad = home  # (right by construction: no need for the checked .grad setter)
            else:
                leaf.grad = Tensor._empty(g.shape, g.dtype, "gradient")
                leaf.grad._data[...] = g._data
        elif create_graph:
            leaf.grad = grad + g
        else:
            np.add(grad._data, g._data, out=grad._data)
            grad._storage.version += 1
        rec = _trace.active
        if rec is not None:
            dense = leaf.grad._values_t if leaf.grad.is_sparse else leaf.grad  # a sparse grad: its values
            source = g._values_t if g.is_sparse else g
            rec.emit("grad", tensor=rec.tensor(leaf), shape=list(leaf.grad.shape),
                     storage=dense._storage.id, source=source._storage.id,
                     norm=float(np.sqrt(np.sum(np.square(dense._data, dtype=np.float64)))))


gradient_sink = GradientSink()
"""The engine's gradient sink: every backward delivers leaf gradients here."""

_plain: list[bool] = []  # per running backward pass, innermost last: is it a plain .backward()?


def in_plain_backward() -> bool:
    """True while the innermost running backward pass is a plain ``.backward()`` (no
    ``inputs=``, no ``create_graph``, not :func:`grad`): for a node whose backward only
    makes sense there (a reentrant checkpoint, which backpropagates into ``.grad`` itself)."""
    return bool(_plain) and _plain[-1]


def _dependencies(roots) -> list:
    """Count, for every node reachable from the roots, how many edges point at it (its
    consumers): ``node.pending``; a node runs once that count is back to zero.
    Returns the reachable nodes, the roots' own first."""
    stack = [r for r, _, _ in roots if isinstance(r, Function)]
    if len(stack) > 1:  # a node given twice runs once: its edges count once
        stack = list(dict.fromkeys(stack))
    for node in stack:
        _alive(node).pending = 0
    reachable, seen = list(stack), set(stack)
    while stack:
        for e in stack.pop().next:
            if isinstance(e, Function):
                if e in seen:
                    e.pending += 1
                else:  # its first consumer
                    _alive(e).pending = 1
                    seen.add(e)
                    reachable.append(e)
                    stack.append(e)
    return reachable


def _alive(node: "Function") -> "Function":
    if node.record is None:
        note = ("" if node.saved else f" (In microtorch this holds for {node.name} too, although it "
                "saved no tensors: its record in the node arena was freed after it ran.)")
        raise RuntimeError(
            "Trying to backward through the graph a second time (or directly access saved "
            "tensors after they have already been freed). Saved intermediate values of the "
            "graph are freed when you call .backward() or autograd.grad(). Specify "
            "retain_graph=True if you need to backward through the graph a second time or "
            "if you need to access saved tensors after calling backward." + note)
    return node


def _pending(nodes) -> dict:
    """node id -> pending count (a node that ran is at 0)."""
    return {_trace.node_id(n): n.pending for n in nodes}


def _topological_order(roots) -> list:
    """Nodes in reverse topological order (consumers before producers); iterative DFS."""
    order, visited = [], set()
    for root, _, _ in roots:
        if not isinstance(root, Function) or root in visited:
            continue
        visited.add(root)
        stack = [(root, iter(root.next))]
        while stack:
            node, children = stack[-1]
            for e in children:
                if isinstance(e, Function) and e not in visited:
                    visited.add(e)
                    stack.append((e, iter(e.next)))
                    break
            else:
                stack.pop()
                order.append(node)  # post-order: after everything it depends on
    order.reverse()
    return order


def _run(roots, sink, retain_graph, create_graph, order="deps", on_node=None, plain=False) -> None:
    """Run the backward pass from ``roots`` (``(edge, grad, tensor)`` triples); leaf
    gradients go to ``sink(leaf, g)``. ``plain``: see :func:`in_plain_backward`."""
    if order not in ("deps", "topo"):
        raise ValueError(f"order must be 'deps' (dependency counting) or 'topo' (topological sort), got {order!r}")
    buffers: dict = {}
    for edge, g, _ in roots:
        if isinstance(edge, Function):
            buffers[edge] = buffers[edge] + g if edge in buffers else g
        elif edge is not None:
            sink(edge, g)
    rec = _trace.active
    if rec is not None:
        rec.phase = "backward"
    # backward records a graph only with create_graph: grad mode set as set_grad_enabled
    # would, without a context-manager object per backward
    grad_enabled, grad_mode._grad_enabled = grad_mode._grad_enabled, bool(create_graph)
    _plain.append(plain)
    try:
        _execute(roots, buffers, sink, gradient_sink if plain else None, retain_graph, order, on_node, rec)
    finally:
        _plain.pop()
        grad_mode._grad_enabled = grad_enabled
        if rec is not None:
            rec.phase = "forward"


def _execute(roots, buffers, sink, homes, retain_graph, order, on_node, rec) -> None:
    if order == "topo":
        schedule = [_alive(n) for n in _topological_order(roots)]
        if rec is not None:
            rec.emit("backward", order="topo", roots=[rec.tensor(t) for _, _, t in roots],
                     schedule=[_trace.node_id(n) for n in schedule])
        for node in schedule:
            if node in buffers:
                _run_node(node, buffers, sink, homes, retain_graph, on_node, rec, None, None)
        return
    reachable = _dependencies(roots)
    # the roots' nodes, once each in the order given, are the keys buffers holds so far
    ready = [n for n in buffers if n.pending == 0]
    if rec is not None:
        rec.emit("backward", order="deps", roots=[rec.tensor(t) for _, _, t in roots],
                 pending=_pending(reachable), ready=[_trace.node_id(n) for n in ready])
    while ready:
        _run_node(ready.pop(), buffers, sink, homes, retain_graph, on_node, rec, reachable, ready)


def _run_node(node, buffers, sink, homes, retain_graph, on_node, rec, reachable, ready) -> None:
    """Run one node's backward and route its gradients. ``homes``: the gradient sink, in a
    plain ``backward()``, to ask where an op that fills destinations may write (else None)."""
    g = buffers.pop(node)
    if on_node is not None:
        on_node(node, g)
    if node._retained:
        for ref in node._retained:
            t = ref()
            if t is not None:
                t.grad = g.detach() if t.grad is None else t.grad + g.detach()
    if homes is not None and node.fills_destinations:
        grads = node._call_backward(g, homes.destinations(node))
    else:
        grads = node._call_backward(g)
    if not isinstance(grads, tuple):
        grads = (grads,)
    edges = node.next
    if len(grads) != len(edges):
        raise RuntimeError(f"function {node.name} returned {len(grads)} gradients, expected {len(edges)}")
    for i, (edge, gi, shape) in enumerate(zip(edges, grads, node.input_shapes)):
        if edge is None or gi is None:
            continue
        if gi.shape != shape:  # (.shape, not ._data.shape: a gradient may be sparse)
            raise RuntimeError(f"Function {node.name} returned an invalid gradient at index {i} - got "
                               f"{list(gi.shape)} but expected shape compatible with {list(shape)}")
        if isinstance(edge, Function):
            buffers[edge] = buffers[edge] + gi if edge in buffers else gi
            if ready is not None:
                pending = edge.pending - 1
                edge.pending = pending
                if pending == 0:
                    ready.append(edge)
        else:
            sink(edge, gi)
    if not retain_graph:
        node.release()
    if rec is not None:
        rec.emit("node_run", node=_trace.node_id(node), op=node.name,
                 grad_shape=list(g.shape), grad_storage=g._storage.id,
                 pending=None if reachable is None else _pending(reachable),
                 ready=None if ready is None else [_trace.node_id(n) for n in ready])
