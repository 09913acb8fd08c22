"""The backward engine: dependency counting (and the topological-sort variant), centralized
gradient accumulation, ``backward`` and ``grad``.

**Backward** (:func:`backward`) runs on explicit dependency counts, like the C engine in
the seeds: first count, for every node reachable from the loss, how many consumers will
send it a gradient (the count lives in each node's record); then run nodes whose count
reached zero, summing each node's incoming gradients in one buffer. Every node runs
exactly once, so the pass is linear in the graph size. ``order="topo"`` runs the teaching
variant — an iterative depth-first topological sort, then nodes in reverse order — which
must give identical gradients.

Leaf gradients accumulate into ``leaf.grad`` (PyTorch semantics: a second backward adds
to it). A node releases its saved tensors right after it ran unless ``retain_graph=True``.
Nodes themselves are :class:`microtorch.node.Function` instances; grad mode lives in
:mod:`microtorch.grad_mode`.
"""
from __future__ import annotations

import functools
import weakref

import numpy as np

from . import grad_mode
from .memory import trace as _trace
from .memory.node_arena import PENDING
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
    roots = _roots(tensors, grad_tensors, create_graph)
    sink, on_node = _accumulate_into_leaf, None  # the common case, without a partial's keyword call
    if inputs is not None or create_graph:
        only = None if inputs is None else {id(t) for t in _as_tuple(inputs)}
        sink = functools.partial(_accumulate_into_leaf, create_graph=create_graph, only=only)
    if inputs is not None:
        wanted: dict = {}  # non-leaf inputs, by the node that produced them
        for t in _as_tuple(inputs):
            if t.grad_fn is not None:
                wanted.setdefault(t.grad_fn, []).append(t)
        if wanted:
            def on_node(node, g):
                for t in wanted.get(node, ()):
                    _accumulate_into_leaf(t, g, create_graph)

    global _adopt_homes
    before, _adopt_homes = _adopt_homes, sink is _accumulate_into_leaf
    try:
        _run(roots, sink, retain_graph=create_graph if retain_graph is None else retain_graph,
             create_graph=create_graph, order=order, on_node=on_node)
    finally:
        _adopt_homes = before


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

    _run(_roots(outputs, grad_outputs, create_graph), sink,
         retain_graph=create_graph if retain_graph is None else retain_graph,
         create_graph=create_graph, on_node=on_node)
    result = []
    for t in inputs:
        g = captured.get(id(t))
        if g is None and not allow_unused:
            raise RuntimeError("One of the differentiated Tensors appears to not have been used "
                               "in the graph. Set allow_unused=True if this is the desired behavior.")
        result.append(g if (g is None or create_graph) else g.detach())
    return tuple(result)


def _as_tuple(x):
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _roots(tensors, grads, create_graph):
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


class GradHomes:
    """Leaves whose gradient has a fixed home: leaf -> a tensor viewing its slice of a flat
    gradient buffer (registered by :func:`microtorch.nn.flatten_parameters`). When such a
    leaf's ``.grad`` is None (before its first backward, or after
    ``zero_grad(set_to_none=True)``), backward copies the gradient into the home and makes
    it ``.grad`` again: no allocation.

    Keyed by identity, and an entry goes when its leaf does (a ``WeakKeyDictionary`` would
    compare tensors with ``==``, which is elementwise).
    """

    def __init__(self):
        self._homes: dict[int, tuple[weakref.ref, Tensor]] = {}

    def __len__(self) -> int:
        return len(self._homes)

    def __setitem__(self, leaf: Tensor, home: Tensor) -> None:
        key, homes = id(leaf), self._homes
        homes[key] = (weakref.ref(leaf, lambda _, key=key: homes.pop(key, None)), home)

    def get(self, leaf: Tensor) -> Tensor | None:
        entry = self._homes.get(id(leaf))
        return entry[1] if entry is not None and entry[0]() is leaf else None

    def pop(self, leaf: Tensor, default=None):
        home = self.get(leaf)
        if home is None:
            return default
        del self._homes[id(leaf)]
        return home


grad_homes = GradHomes()
_adopt_homes = False  # a plain backward() is running: leaves' gradient homes may be handed out


def grad_buffer(node: Function, i: int, shape: tuple[int, ...], dtype) -> Tensor:
    """Memory for the gradient of ``node``'s tensor input ``i``, for a backward that writes
    it with numpy (``out=``): a fresh tensor — or, during a plain ``backward()`` (no
    ``inputs=``, no ``create_graph``), when that input is a leaf with a gradient home whose
    ``.grad`` is None and that feeds the node once, the home itself, so that accumulation
    adopts it without copying (the largest gradient, W's, is written once, in place)."""
    leaf = node.next[i]
    if (_adopt_homes and isinstance(leaf, Tensor) and leaf.grad is None
            and (home := grad_homes.get(leaf)) is not None and home._data.shape == shape
            and home._data.dtype == dtype and [e is leaf for e in node.next].count(True) == 1):
        return home  # (counted by identity: a tensor's == is elementwise)
    return Tensor._empty(shape, dtype)


def _accumulate_into_leaf(leaf: Tensor, g: Tensor, create_graph: bool = False, only=None) -> None:
    """Centralized gradient accumulation: ``leaf.grad += g`` (or set it the first time)."""
    if only is not None and id(leaf) not in only:
        return
    if g.is_sparse or (leaf.grad is not None and leaf.grad.is_sparse):
        # a sparse gradient (Embedding(sparse=True)): merged, coalesced or densified by
        # microtorch.sparse.gradient — never copied into the dense flat gradient buffer
        accumulate_sparse(leaf, g, grad_homes.get(leaf))
    elif leaf.grad is None:
        # a fresh copy: g may be shared (add's backward hands one tensor to both inputs) or a
        # view (a stride-0 expand), and .grad must own its bytes for later in-place accumulation
        if create_graph:
            leaf.grad = g
        elif (home := grad_homes.get(leaf)) is not None:
            if g is not home:  # (it is when the node wrote it there: see grad_buffer)
                home._data[...] = g._data  # straight into the flat gradient buffer
            home._storage.version += 1
            leaf._grad = home  # (right by construction: no need for the checked .grad setter)
        else:
            leaf.grad = Tensor._empty(g.shape, g.dtype, "gradient")
            leaf.grad._data[...] = g._data
    elif create_graph:
        leaf.grad = leaf.grad + g
    else:
        np.add(leaf.grad._data, g._data, out=leaf.grad._data)
        leaf.grad._storage.version += 1
    rec = _trace.active
    if rec is not None:
        dense = leaf.grad._values_t if leaf.grad.is_sparse else leaf.grad  # a sparse grad: its values
        source = g._values_t if g.is_sparse else g
        rec.emit("grad", tensor=rec.tensor(leaf), shape=list(leaf.grad.shape),
                 storage=dense._storage.id, source=source._storage.id,
                 norm=float(np.sqrt(np.sum(np.square(dense._data, dtype=np.float64)))))


def _dependencies(roots) -> list:
    """Count, in the record of every node reachable from the roots, how many edges point
    at it (its consumers); a node runs once that ``pending`` count is back to zero.
    Returns the reachable nodes, the roots' own first."""
    stack = [r for r, _, _ in roots if isinstance(r, Function)]
    if len(stack) > 1:  # a node given twice runs once: its edges count once
        stack = list(dict.fromkeys(stack))
    for node in stack:
        _alive(node).words[PENDING] = 0
    reachable, seen = list(stack), set(stack)
    while stack:
        for e in stack.pop().next:
            if isinstance(e, Function):
                if e in seen:
                    e.words[PENDING] += 1
                else:  # its first consumer
                    _alive(e).words[PENDING] = 1
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
    """node id -> pending count, read from the records (0 for nodes already released)."""
    return {_trace.node_id(n): (n.words[PENDING] if n.words is not None else 0) for n in nodes}


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


def _run(roots, sink, retain_graph, create_graph, order="deps", on_node=None) -> None:
    """Run the backward pass from ``roots`` (``(edge, grad, tensor)`` triples)."""
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
    try:
        _execute(roots, buffers, sink, retain_graph, order, on_node, rec)
    finally:
        grad_mode._grad_enabled = grad_enabled
        if rec is not None:
            rec.phase = "forward"


def _execute(roots, buffers, sink, retain_graph, order, on_node, rec) -> None:
    if order == "topo":
        schedule = [_alive(n) for n in _topological_order(roots)]
        if rec is not None:
            rec.emit("backward", order="topo", roots=[rec.tensor(t) for _, _, t in roots],
                     schedule=[_trace.node_id(n) for n in schedule])
        for node in schedule:
            if node in buffers:
                _run_node(node, buffers, sink, retain_graph, on_node, rec, None, None)
        return
    reachable = _dependencies(roots)
    # the roots' nodes, once each in the order given, are the keys buffers holds so far
    ready = [n for n in buffers if n.words[PENDING] == 0]
    if rec is not None:
        rec.emit("backward", order="deps", roots=[rec.tensor(t) for _, _, t in roots],
                 pending=_pending(reachable), ready=[_trace.node_id(n) for n in ready])
    while ready:
        _run_node(ready.pop(), buffers, sink, retain_graph, on_node, rec, reachable, ready)


def _run_node(node, buffers, sink, retain_graph, on_node, rec, reachable, ready) -> None:
    g = buffers.pop(node)
    if on_node is not None:
        on_node(node, g)
    if node._retained:
        for ref in node._retained:
            t = ref()
            if t is not None:
                t.grad = g.detach() if t.grad is None else t.grad + g.detach()
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
                words = edge.words
                pending = words[PENDING] - 1
                words[PENDING] = pending
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
