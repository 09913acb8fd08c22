"""Reverse-mode autodiff: graph nodes, saved tensors, and the backward engine.

**Nodes.** Every op is a :class:`Function` subclass with ``forward`` and ``backward`` side
by side (PyTorch's ``ctx`` style). Applying an op to tensors that require grad creates one
node — an instance of that class — which records

* ``next``: for each tensor input, where its gradient goes: the input's own node, the
  input tensor itself if it is a leaf that requires grad, or ``None``;
* ``saved``: the tensors ``forward`` saved for ``backward``, each holding a storage
  reference (so the bytes stay alive exactly as long as backward may need them).

**Backward** (:func:`backward`) runs on explicit dependency counts, like the C engine in
the seeds: first count, for every node reachable from the loss, how many consumers will
send it a gradient; then run nodes whose count reached zero, summing each node's incoming
gradients in one buffer. Every node runs exactly once, so the pass is linear in the graph
size. ``order="topo"`` runs the teaching variant — an iterative depth-first topological
sort, then nodes in reverse order — which must give identical gradients.

Leaf gradients accumulate into ``leaf.grad`` (PyTorch semantics: a second backward adds
to it). A node releases its saved tensors right after it ran unless ``retain_graph=True``.
"""
from __future__ import annotations

import contextlib
import functools
import math
import weakref

import numpy as np

from . import dtypes
from .memory import trace as _trace
from .memory.nodes import nodes as _node_arena
from .memory.storage import empty_storage
from .memory.views import register as _register_view
from .tensor import Tensor

# --------------------------------------------------------------------------------------------
# grad mode
# --------------------------------------------------------------------------------------------
_grad_enabled = True


def is_grad_enabled() -> bool:
    return _grad_enabled


class set_grad_enabled(contextlib.ContextDecorator):
    """Turn graph recording on or off inside a ``with`` block (or a decorated function)."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        global _grad_enabled
        self.prev, _grad_enabled = _grad_enabled, self.mode

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self.prev


class no_grad(set_grad_enabled):
    """``with mt.no_grad():`` or ``@mt.no_grad()``: ops inside record no graph."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    def __init__(self):
        super().__init__(True)


# --------------------------------------------------------------------------------------------
# saved tensors
# --------------------------------------------------------------------------------------------
class SavedTensor:
    """A tensor kept for backward: a storage reference, the view, and the version it saw.

    It deliberately does not keep the tensor object alive (for non-leaves), only its bytes,
    so ``refcount`` reads "+1 for this node". Unpacking checks the storage's version
    counter: if an in-place op wrote to the bytes since, backward would compute with the
    wrong numbers, so it raises PyTorch's error instead.
    """

    __slots__ = ("data", "storage", "version", "requires_grad", "grad_fn", "leaf", "is_output")

    def __init__(self, t: Tensor, node: "Function", is_output: bool = False):
        self.data = t._data
        self.storage = t._storage
        self.version = t._storage.version
        self.requires_grad = t.requires_grad
        self.is_output = is_output
        self.grad_fn = None if is_output else t.grad_fn  # an output's grad_fn is the node itself
        self.leaf = t if (t.requires_grad and t.grad_fn is None) else None
        t._storage.incref(node)

    def unpack(self, node: "Function") -> Tensor:
        if self.storage is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the "
                "graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or "
                "if you need to access saved tensors after calling backward.")
        if self.storage.version != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{dtypes.name(self.data.dtype)} {list(self.data.shape)}]"
                f"{_made_by(node if self.is_output else self.grad_fn)} is at version "
                f"{self.storage.version}; expected version {self.version} instead. Hint: its bytes "
                f"were written in place (add_, mul_, relu_, x[...] = ..., an optimizer step) after "
                f"{node.name} saved them for backward; compute out of place (y = y * 2) or write "
                "into a clone() instead.")
        if self.leaf is not None:
            return self.leaf
        t = object.__new__(Tensor)
        from .tensor import _init

        grad_fn = node if self.is_output else self.grad_fn
        return _init(t, self.data, self.storage, None, self.requires_grad, grad_fn)

    def release(self, node: "Function") -> None:
        if self.storage is not None:
            storage, self.storage, self.data, self.leaf = self.storage, None, None, None
            storage.decref(node)


def _made_by(producer) -> str:
    """", which is output 0 of MulBackward," — PyTorch names the node that made the tensor
    (nothing for a leaf)."""
    return "" if producer is None else f", which is output 0 of {producer.name},"


# --------------------------------------------------------------------------------------------
# nodes
# --------------------------------------------------------------------------------------------
class Function:
    """Base class of every op. ``Op.apply(*args)`` runs ``forward`` and, if any tensor input
    requires grad (and grad mode is on), keeps the instance as the output's ``grad_fn``.

    Subclasses write::

        @staticmethod
        def forward(ctx, x, y):        # x, y: Tensors (or plain Python values)
            ctx.save_for_backward(x, y)
            return x._data * y._data   # a numpy array
        @staticmethod
        def backward(ctx, g):          # g: Tensor, d(loss)/d(output)
            x, y = ctx.saved_tensors
            return g * y, g * x        # one gradient per *tensor* input

    ``backward`` is written with microtorch ops, so with ``create_graph=True`` the backward
    pass itself is recorded and can be differentiated again.

    View ops (``is_view = True``) may return a numpy view of their first input; the output
    then shares that input's storage (zero-copy) — checked, not assumed.
    """

    is_view = False
    inplace = False  # the op writes its result into its first input's bytes (functions/inplace.py)
    # Per-node state. Class-level defaults keep creating a node cheap: a node only gets
    # instance attributes for what it actually records.
    next: tuple = ()  # where each tensor input's gradient goes (node, leaf tensor, or None)
    saved: tuple = ()  # SavedTensor records (each holds a storage reference)
    needs_input_grad: tuple = ()
    input_shapes: tuple = ()  # backward checks each returned gradient against these
    _to_save: tuple = ()
    _saved_layout = None  # which save_for_backward positions held a tensor, if some were None
    _out = None  # (array, storage) handed out by empty() for the op's result
    _save_output = False
    _retained = None  # weakrefs to outputs that asked for retain_grad()
    _nid = None  # id in a recorded trace
    record = None  # this node's 64-byte record in the node arena (None once released)

    # -- ctx API (used inside forward) -----------------------------------------------------
    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep these tensors' bytes for backward (``None`` for one that no gradient needs)."""
        self._to_save = tensors

    def save_output(self) -> None:
        """Ask for the op's *output* to be saved too (appended last to ``saved_tensors``)."""
        self._save_output = True

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Memory for the op's result, from the active allocator: forward computes into it
        with ``out=`` instead of letting numpy allocate (and then copying)."""
        storage = empty_storage(math.prod(shape), dtype)
        out = storage.data.reshape(shape)
        self._out = (out, storage)
        return out

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The tensors forward saved, in order (``None`` where it saved ``None``)."""
        unpacked = [s.unpack(self) for s in self.saved]
        if self._saved_layout is None:
            return tuple(unpacked)
        it = iter(unpacked)
        return tuple(next(it) if present else None for present in self._saved_layout)

    # -- applying ---------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **kwargs) -> Tensor:
        ctx = cls()
        inputs = [a for a in args if type(a) is Tensor or isinstance(a, Tensor)]
        requires_grad = False
        if _grad_enabled:
            for t in inputs:
                if t.requires_grad:
                    requires_grad = True
                    ctx.needs_input_grad = tuple([t.requires_grad for t in inputs])
                    break
        out = cls.forward(ctx, *args, **kwargs)  # may read ctx.needs_input_grad to save less
        grad_fn = ctx if requires_grad else None
        if ctx._out is not None and out is ctx._out[0]:
            result = Tensor._over(out, ctx._out[1], requires_grad, grad_fn)
            ctx._out = None
        elif cls.is_view and (np.may_share_memory(out, inputs[0]._storage.data) or (out.size == 0 and out.base is not None)):
            result = Tensor._view(out, inputs[0], requires_grad, grad_fn)
            _register_view(result, _grad_enabled)  # in-place writes rebase live views
        else:
            result = Tensor._wrap(out if type(out) is np.ndarray else np.asarray(out), requires_grad, grad_fn)
        if requires_grad:
            ctx.input_shapes = tuple([t._data.shape for t in inputs])
            ctx.next = tuple([(t.grad_fn or t) if t.requires_grad else None for t in inputs])
            to_save = ctx._to_save
            if any(t is None for t in to_save):  # forward skipped what no gradient needs: remember the positions
                ctx._saved_layout = tuple(t is not None for t in to_save)
            saved = [SavedTensor(t, ctx) for t in to_save if t is not None]
            if ctx._save_output:
                saved.append(SavedTensor(result, ctx, is_output=True))
            ctx.saved = tuple(saved)
            ctx.record = _node_arena.new(ctx)
        if ctx._to_save:
            ctx._to_save = ()  # the tensors themselves are not kept: only SavedTensor records
        rec = _trace.active
        if rec is not None:
            rec.emit("op", op=cls.__name__, phase=rec.phase,
                     node=_trace.node_id(ctx) if requires_grad else None,
                     slot=int(ctx.record["slot"]) if requires_grad else None,
                     inputs=[rec.tensor(t) for t in inputs], output=rec.tensor(result),
                     shape=list(result.shape), dtype=result.dtype.name,
                     saved=[s.storage.id for s in ctx.saved],
                     next=[_edge_id(e) for e in ctx.next],
                     input_storages=[t._storage.id for t in inputs], input_strides=[list(t.stride()) for t in inputs],
                     output_storage=result._storage.id, inplace=cls.inplace)
        return result

    def _retain(self, t: Tensor) -> None:
        if self._retained is None:
            self._retained = []
        self._retained.append(weakref.ref(t))

    def release(self) -> None:
        """Drop the saved tensors (their storage references) and free the node's record —
        done right after the node ran in backward, unless the graph is retained."""
        self._let_go(dropped=False)

    def __del__(self):
        # a graph dropped without backward (e.g. `del loss`) lets go of its bytes too
        self._let_go(dropped=True)

    def _let_go(self, dropped: bool) -> None:
        for s in self.saved:
            s.release(self)
        record = self.record
        if record is not None:
            self.record = None
            _node_arena.free(self)
        rec = _trace.active
        if rec is not None and (record is not None or not dropped):
            rec.emit("release", node=_trace.node_id(self),
                     slot=None if record is None else int(record["slot"]), dropped=dropped)

    @property
    def name(self) -> str:
        """PyTorch-style node name: the ``Mul`` op's node is ``MulBackward``."""
        return type(self).__name__ + "Backward"

    @property
    def next_functions(self) -> tuple:
        """PyTorch-style ``((node_or_leaf_or_None, 0), ...)``."""
        return tuple((e, 0) for e in self.next)

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _edge(t: Tensor):
    """Where ``t``'s gradient goes: its node, itself if it is a leaf that requires grad, or nowhere."""
    if not t.requires_grad:
        return None
    return t.grad_fn if t.grad_fn is not None else t


def _edge_id(e):
    if e is None:
        return None
    if isinstance(e, Function):
        return {"node": _trace.node_id(e)}
    return {"leaf": _trace.tensor_id(e)}


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
    only = None if inputs is None else {id(t) for t in _as_tuple(inputs)}
    sink = functools.partial(_accumulate_into_leaf, create_graph=create_graph, only=only)
    wanted: dict = {}  # non-leaf inputs, by the node that produced them
    for t in () if inputs is None else _as_tuple(inputs):
        if t.grad_fn is not None:
            wanted.setdefault(t.grad_fn, []).append(t)

    def on_node(node, g):
        for t in wanted.get(node, ()):
            _accumulate_into_leaf(t, g, create_graph=create_graph, only=None)

    _run(roots, sink, retain_graph=create_graph if retain_graph is None else retain_graph,
         create_graph=create_graph, order=order, on_node=on_node if wanted else None)


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
            if t.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(this output has shape {list(t.shape)}); pass gradient=... "
                                   f"of that shape, or reduce it first, e.g. .sum()")
            g = Tensor._wrap(np.ones(t.shape, dtype=t.dtype))
        elif not isinstance(g, Tensor):
            g = Tensor._wrap(np.asarray(g, dtype=t.dtype))
        if tuple(g.shape) != tuple(t.shape):
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

    def __bool__(self) -> bool:
        return bool(self._homes)

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


def _accumulate_into_leaf(leaf: Tensor, g: Tensor, create_graph: bool, only) -> None:
    """Centralized gradient accumulation: ``leaf.grad += g`` (or set it the first time)."""
    if only is not None and id(leaf) not in only:
        return
    if leaf.grad is None:
        # a fresh copy: g may be shared (add's backward hands one tensor to both inputs) or a
        # view (a stride-0 expand), and .grad must own its bytes for later in-place accumulation
        if create_graph:
            leaf.grad = g
        elif grad_homes and (home := grad_homes.get(leaf)) is not None:
            np.copyto(home._data, g._data)  # straight into the flat gradient buffer
            home._storage.version += 1
            leaf.grad = home
        else:
            storage = empty_storage(g.numel(), g.dtype, "gradient")
            leaf.grad = Tensor._over(storage.data.reshape(g.shape), storage)
            np.copyto(leaf.grad._data, g._data)
    elif create_graph:
        leaf.grad = leaf.grad + g
    else:
        np.add(leaf.grad._data, g._data, out=leaf.grad._data)
        leaf.grad._storage.version += 1
    rec = _trace.active
    if rec is not None:
        rec.emit("grad", tensor=rec.tensor(leaf), shape=list(leaf.grad.shape),
                 norm=float(np.sqrt(np.sum(np.square(leaf.grad._data, dtype=np.float64)))))


def _dependencies(roots) -> list:
    """Count, in the record of every node reachable from the roots, how many edges point
    at it (its consumers); a node runs once that ``pending`` count is back to zero.
    Returns the reachable nodes."""
    stack = [r for r, _, _ in roots if isinstance(r, Function)]
    for node in stack:
        _alive(node).record["pending"] = 0
    reachable, seen = list(stack), set(stack)
    while stack:
        node = stack.pop()
        for e in node.next:
            if isinstance(e, Function):
                if e not in seen:
                    _alive(e).record["pending"] = 0
                    seen.add(e)
                    reachable.append(e)
                    stack.append(e)
                e.record["pending"] += 1
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
    return {_trace.node_id(n): (int(n.record["pending"]) if n.record is not None else 0) for n in nodes}


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
    try:
        _execute(roots, buffers, sink, retain_graph, create_graph, order, on_node, rec)
    finally:
        if rec is not None:
            rec.phase = "forward"


def _execute(roots, buffers, sink, retain_graph, create_graph, order, on_node, rec) -> None:
    with set_grad_enabled(create_graph):
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
        ready = [r for r, _, _ in roots if isinstance(r, Function) and r.record["pending"] == 0]
        ready = list(dict.fromkeys(ready))
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
    grads = type(node).backward(node, g)
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != len(node.next):
        raise RuntimeError(f"function {node.name} returned {len(grads)} gradients, expected {len(node.next)}")
    for i, (edge, gi, shape) in enumerate(zip(node.next, grads, node.input_shapes)):
        if edge is None or gi is None:
            continue
        if gi.shape != shape:
            raise RuntimeError(f"Function {node.name} returned an invalid gradient at index {i} - got "
                               f"{list(gi.shape)} but expected shape compatible with {list(shape)}")
        if isinstance(edge, Function):
            buffers[edge] = buffers[edge] + gi if edge in buffers else gi
            if ready is not None:
                record = edge.record
                record["pending"] -= 1
                if record["pending"] == 0:
                    ready.append(edge)
        else:
            sink(edge, gi)
    if not retain_graph:
        node.release()
    if rec is not None:
        rec.emit("node_run", node=_trace.node_id(node), op=node.name,
                 grad_shape=list(g.shape),
                 pending=None if reachable is None else _pending(reachable),
                 ready=None if ready is None else [_trace.node_id(n) for n in ready])
