"""Graph nodes: every op is a :class:`Function`, and applying it records one node.

Every op is a ``Function`` subclass with ``forward`` and ``backward`` side by side
(PyTorch's ``ctx`` style) — the op contract, in :class:`Function`'s docstring: forward
returns a numpy array that the engine places by one rule (:meth:`Function._wrap_result`),
an optional ``numpy_backward`` the engine picks in one place (:meth:`Function._call_backward`),
and an optional in-place form (:class:`InplaceVariant`). Applying an op to tensors that
require grad keeps the instance as the output's ``grad_fn``; it records

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
from dataclasses import dataclass

import numpy as np

from . import dtypes, grad_mode
from . import recording as _trace
from .memory import inplace_analysis as _inplace_analysis
from .memory.node_arena import nodes as _node_arena
from .memory.storage import empty_storage
from .memory.views import register as _register_view
from .tensor_base import TensorBase as Tensor


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
        grad_fn = node if self.is_output else self.grad_fn
        return Tensor._over(data, self.storage, self.requires_grad, grad_fn)

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
# in-place variants
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InplaceVariant:
    """An op's in-place form, declared on the op class next to its forward and backward::

        class Relu(Function):
            inplace_variant = InplaceVariant("relu_", reads="output")

    ``method`` is the Tensor method; ``reads`` is what the variant's backward uses, since the
    input's old values are gone: ``"output"`` (saved after the write), ``"nothing"``,
    ``"other operand"`` (mul_, div_) or ``"mask"`` (clamp_); ``overwrites``: the inputs whose
    bytes it may take (``(0, 1)`` for add and mul: either operand); ``why``: optional words.
    The in-place ops (:mod:`microtorch.functions.inplace_ops`) and
    :func:`~microtorch.memory.inplace_plan` both read this one declaration.
    """

    method: str
    reads: str
    overwrites: tuple = (0,)
    why: str = ""

    def backward_uses(self) -> str:
        """What the variant's backward uses, in words: "relu_ takes its gradient from its output"."""
        words = {"output": "takes its gradient from its output", "nothing": "needs no values for backward",
                 "other operand": "needs only the other operand", "mask": "keeps a boolean mask"}[self.reads]
        return f"{self.method} {words}" + (f" ({self.why})" if self.why else "")


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
    pass itself is recorded and can be differentiated again. An op may also define
    ``numpy_backward(ctx, g)``: the same formula computed on numpy arrays (``ctx.saved_arrays()``),
    recording nothing. The engine runs it instead of ``backward`` when the backward pass
    records no graph (no ``create_graph``) — the choice is made in one place,
    :meth:`_call_backward`, never inside an op (PyTorch's ``once_differentiable`` idea).

    **The op contract.** ``forward`` returns a numpy array, and the engine decides where the
    result's bytes live (:meth:`_wrap_result`): in the storage of ``ctx.empty(shape, dtype)``
    if forward computed into that (``out=``), in its first input's storage if the op is a
    view op (``is_view = True``) and the array reads those bytes (checked, not assumed), else
    in a new storage.
    """

    is_view = False
    inplace_variant: InplaceVariant | None = None  # the op's in-place form, if it has one
    numpy_backward = None  # optional: backward's formula on numpy arrays, for a pass that records no graph
    fills_destinations = False  # numpy_backward(ctx, g, out) may write gradient i into out[i] (from the engine)
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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        variant = cls.__dict__.get("inplace_variant")
        if variant is not None:  # what inplace_plan may rewrite this op into
            _inplace_analysis.declare(cls.__name__, variant.method, variant.overwrites, variant.backward_uses())

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
        """Run the op on ``args``: forward computes a numpy array, :meth:`_wrap_result` gives
        it its bytes, and if a gradient will flow back, :meth:`_record_node` keeps the node."""
        ctx = cls()
        inputs = [a for a in args if isinstance(a, Tensor)]
        requires_grad = False
        if grad_mode._grad_enabled:
            needs = tuple([t.requires_grad for t in inputs])
            if True in needs:
                requires_grad = True
                ctx.needs_input_grad = needs
        out = cls.forward(ctx, *args, **kwargs)  # may read ctx.needs_input_grad to save less
        result = ctx._wrap_result(out, inputs, requires_grad)
        forward_saved = ctx._to_save  # held to the end: a temporary forward saved is freed after its op event
        if requires_grad:  # (without a graph, ctx is dropped right here)
            ctx._record_node(inputs, result)
        rec = _trace.active
        if rec is not None:
            ctx._emit_op(rec, inputs, result, requires_grad)
        return result

    def _wrap_result(self, out: np.ndarray, inputs: list, requires_grad: bool) -> Tensor:
        """The result tensor over ``out``, the array forward returned. One rule for where its
        bytes come from, the same for every op:

        1. ``out`` is the array :meth:`empty` handed out: the result owns that storage;
        2. the op is a view op (``is_view``) and ``out`` reads its first input's bytes: the
           result is a view, sharing that input's storage (zero-copy);
        3. anything else is a new array: it gets a storage of its own.
        """
        grad_fn = self if requires_grad else None
        made = self._out
        if made is not None and out is made[0]:
            self._out = None
            return Tensor._over(out, made[1], requires_grad, grad_fn)
        if self.is_view and _reads_bytes_of(out, inputs[0]):
            result = Tensor._view(out, inputs[0], requires_grad, grad_fn)
            _register_view(result, grad_mode._grad_enabled)  # in-place writes rebase live views
            return result
        return Tensor._wrap(out if type(out) is np.ndarray else np.asarray(out), requires_grad, grad_fn)

    def _record_node(self, inputs: list, result: Tensor) -> None:
        """Keep what backward needs: the inputs' shapes, where their gradients go (``next``),
        the saved tensors (as :class:`SavedTensor` records, not the tensors), a node record."""
        self.input_shapes = tuple([t._data.shape for t in inputs])
        self.next = tuple([(t.grad_fn or t) if t.requires_grad else None for t in inputs])
        to_save = self._to_save
        if to_save or self._save_output:
            pack = SavedTensor if pack_hook is None else pack_hook
            saved = [pack(t, self) for t in to_save if t is not None]
            if len(saved) != len(to_save):  # forward skipped what no gradient needs: remember the positions
                self._saved_layout = tuple([t is not None for t in to_save])
            if self._save_output:
                saved.append(pack(result, self, True))
            self.saved = tuple(saved)
            self._to_save = ()  # the tensors themselves are not kept: only SavedTensor records
        self.record, self.slot = _node_arena.new(self)

    def _emit_op(self, rec, inputs: list, result: Tensor, requires_grad: bool) -> None:
        """Tell the trace recorder this op ran (what it read, wrote, saved and recorded)."""
        rec.emit("op", op=type(self).__name__, phase=rec.phase,
                 node=_trace.node_id(self) if requires_grad else None,
                 slot=int(self.record["slot"]) if requires_grad else None,
                 inputs=[rec.tensor(t) for t in inputs], output=rec.tensor(result),
                 shape=list(result.shape), dtype=result.dtype.name,
                 saved=[s.storage.id for s in self.saved if s.storage.id],  # (0: kept nothing)
                 next=[_edge_id(e) for e in self.next],
                 input_storages=[t._storage.id for t in inputs], input_strides=[list(t.stride()) for t in inputs],
                 output_storage=result._storage.id, inplace=type(self).inplace)

    # -- running backward (called by the engine, microtorch.autograd) -----------------------
    def _call_backward(self, g: Tensor, out: list | None = None):
        """This node's gradients for the inputs, given ``g`` = d(loss)/d(output). The engine
        sets grad mode to ``create_graph`` for the backward pass; with grad mode off no graph
        of the backward is needed, so the op's ``numpy_backward``, if it has one, runs instead
        of ``backward`` (the same formula on arrays, no op applications). ``out``: for an op
        that ``fills_destinations``, the engine's destination per input (a tensor to write
        that gradient into, or None); the op never asks where a gradient goes."""
        op = type(self)
        if op.numpy_backward is not None and not grad_mode._grad_enabled:
            return op.numpy_backward(self, g) if out is None else op.numpy_backward(self, g, out)
        return op.backward(self, g)

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


def _reads_bytes_of(out: np.ndarray, t: Tensor) -> bool:
    """Whether the array ``out`` is a view into ``t``'s storage (an empty view counts: it
    has no bytes to share, but it is still numpy's view of ``t``'s array)."""
    return np.may_share_memory(out, t._storage.data) or (out.size == 0 and out.base is not None)


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
