"""Graph nodes: every op is a :class:`Function`, and applying it records one node.

Every op is a ``Function`` subclass with ``forward`` and ``backward`` side by side
(PyTorch's ``ctx`` style). Applying an op to tensors that require grad keeps the instance
as the output's ``grad_fn``; it records

* ``next``: for each tensor input, where its gradient goes: the input's own node, the
  input tensor itself if it is a leaf that requires grad, or ``None``;
* ``saved``: the tensors ``forward`` saved for ``backward`` (:class:`SavedTensor`), each
  holding a storage reference, so the bytes stay alive exactly as long as backward may need
  them, and a version check refuses bytes an in-place op changed since;
* ``pending``: its dependency count while backward runs (consumers still to send it a
  gradient), kept by the backward engine (:mod:`microtorch.autograd`);
* ``record``: its 64-byte record in the node arena (:mod:`microtorch.memory.node_arena`) at
  index ``slot``: a mirror of the node (op, inputs, saved storages) written once, for the
  memory statistics and for looking at; the graph itself is these node objects.
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from . import dtypes, grad_mode
from . import recording as _trace
from .memory.node_arena import nodes as _node_arena
from .memory.storage import empty_storage
from .memory.views import register as _register_view
from .tensor import Tensor, _init


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
        data = self.checked(node)
        if self.leaf is not None:
            return self.leaf
        t = object.__new__(Tensor)
        grad_fn = node if self.is_output else self.grad_fn
        return _init(t, data, self.storage, None, self.requires_grad, grad_fn)

    def checked(self, node: "Function") -> np.ndarray:
        """The saved bytes as a numpy array, if backward may still read them (else raise)."""
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
        return self.data

    def release(self, node: "Function") -> None:
        if self.storage is not None:
            storage, self.storage, self.data, self.leaf = self.storage, None, None, None
            storage.decref(node)


def _made_by(producer) -> str:
    """", which is output 0 of MulBackward," — PyTorch names the node that made the tensor
    (nothing for a leaf)."""
    return "" if producer is None else f", which is output 0 of {producer.name},"


#: What makes the saved-tensor records of the op being applied: ``None`` means
#: :class:`SavedTensor`. Inside a checkpointed region :mod:`microtorch.utils.checkpoint` sets a
#: hook that keeps no bytes and recomputes them in backward (PyTorch's ``saved_tensors_hooks``);
#: it is called like ``SavedTensor(t, node, is_output)`` and returns a record with the same methods.
pack_hook = None


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
    inplace = False  # the op writes its result into its first input's bytes (functions/inplace_ops.py)
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
    pending = 0  # dependency count while backward runs: consumers still to send a gradient
    record = None  # this node's 64-byte record in the node arena, a mirror (None once released)
    slot = None  # the record's index in the node arena (None once released)

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
        return self._at_save_positions([s.unpack(self) for s in self.saved])

    def saved_arrays(self) -> tuple[np.ndarray | None, ...]:
        """The saved tensors' numpy arrays, checked like :attr:`saved_tensors` but without
        making tensor objects: for a backward that computes with numpy (no graph to record)."""
        return self._at_save_positions([s.checked(self) for s in self.saved])

    def _at_save_positions(self, items: list) -> tuple:
        """One item per saved tensor, at its ``save_for_backward`` position (``None`` where
        forward passed ``None``)."""
        if self._saved_layout is None:
            return tuple(items)
        it = iter(items)
        return tuple([next(it) if present else None for present in self._saved_layout])

    # -- applying ---------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **kwargs) -> Tensor:
        ctx = cls()
        inputs = [a for a in args if isinstance(a, Tensor)]
        requires_grad = False
        if grad_mode._grad_enabled:
            needs = tuple([t.requires_grad for t in inputs])
            if True in needs:
                requires_grad = True
                ctx.needs_input_grad = needs
        out = cls.forward(ctx, *args, **kwargs)  # may read ctx.needs_input_grad to save less
        grad_fn = ctx if requires_grad else None
        made = ctx._out
        if made is not None and out is made[0]:
            result = _init(object.__new__(Tensor), out, made[1], None, requires_grad, grad_fn)
        elif cls.is_view and (np.may_share_memory(out, inputs[0]._storage.data) or (out.size == 0 and out.base is not None)):
            result = Tensor._view(out, inputs[0], requires_grad, grad_fn)
            _register_view(result, grad_mode._grad_enabled)  # in-place writes rebase live views
        else:
            result = Tensor._wrap(out if type(out) is np.ndarray else np.asarray(out), requires_grad, grad_fn)
        if requires_grad:  # record the node (without a graph, ctx is dropped right here)
            ctx._out = None
            ctx.input_shapes = tuple([t._data.shape for t in inputs])
            ctx.next = tuple([(t.grad_fn or t) if t.requires_grad else None for t in inputs])
            to_save = ctx._to_save
            if to_save or ctx._save_output:
                pack = SavedTensor if pack_hook is None else pack_hook
                saved = [pack(t, ctx) for t in to_save if t is not None]
                if len(saved) != len(to_save):  # forward skipped what no gradient needs: remember the positions
                    ctx._saved_layout = tuple([t is not None for t in to_save])
                if ctx._save_output:
                    saved.append(pack(result, ctx, True))
                ctx.saved = tuple(saved)
                ctx._to_save = ()  # the tensors themselves are not kept: only SavedTensor records
            ctx.record, ctx.slot = _node_arena.new(ctx)
        rec = _trace.active
        if rec is not None:
            rec.emit("op", op=cls.__name__, phase=rec.phase,
                     node=_trace.node_id(ctx) if requires_grad else None,
                     slot=int(ctx.record["slot"]) if requires_grad else None,
                     inputs=[rec.tensor(t) for t in inputs], output=rec.tensor(result),
                     shape=list(result.shape), dtype=result.dtype.name,
                     saved=[s.storage.id for s in ctx.saved if s.storage.id],  # (0: kept nothing)
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
        # a graph dropped without backward (e.g. `del loss`) lets go of its bytes too (nothing
        # to do for a node never recorded, an op run without a graph, nor for one released
        # already: its saved tensors went with its record)
        if self.record is not None:
            self._let_go(dropped=True)

    def _let_go(self, dropped: bool) -> None:
        for s in self.saved:
            s.release(self)
        record = self.record
        if record is not None:
            self.record = self.slot = None
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
