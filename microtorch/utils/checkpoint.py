"""Activation checkpointing: keep a region's inputs, recompute its insides in backward.

``y = checkpoint(fn, x, use_reentrant=False)`` computes ``fn(x)`` but keeps, for backward,
only ``fn``'s inputs; when backward reaches the region it runs ``fn`` again and then its
backward. Memory goes down by the bytes ``fn``'s ops would have saved; time goes up by one
more forward of ``fn``. The gradients are exactly those of the plain run (the same ops on
the same numbers, with the random state of the first run: dropout draws the same mask).

Two variants, as in PyTorch (``torch.utils.checkpoint``):

* ``use_reentrant=False`` (recommended): the region's graph is recorded, but its saved
  tensors are placeholders filled by recomputation (:mod:`microtorch.utils.recompute`).
  Works with ``mt.grad``, ``inputs=``, ``create_graph=True``, nested checkpoints, and
  parameters used inside ``fn`` when no input requires grad.
* ``use_reentrant=True``: one graph node, :class:`CheckpointFunction`; ``fn`` runs under
  ``no_grad`` in forward, and its backward reruns ``fn`` with grad on and calls
  ``backward`` again inside backward (re-entering the engine). Only plain ``.backward()``.

Leaving ``use_reentrant`` out warns and picks ``True``, PyTorch's current behaviour.

``checkpoint_sequential(functions, segments, input)`` cuts a chain into ``segments`` pieces
and checkpoints all but the last. ``schedule(chain, budget_bytes)`` picks where to cut from
a cost model (:mod:`microtorch.utils.checkpoint_cost`, :mod:`microtorch.utils.checkpoint_schedule`);
``run_schedule`` runs a chain that way, ``measure`` and ``trace_step`` measure and record it.

The random state kept is the default generator's (``mt.manual_seed``), as PyTorch keeps its
default generators': a layer with its own ``generator=`` draws anew on recomputation.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from .. import autograd, grad_mode
from ..creation import default_generator
from ..memory import placement
from .. import recording as _trace
from ..trace.recorder import record
from ..node import Function
from ..tensor import Tensor
from .recompute import Frame, _name, rng_state, set_rng_state
from .checkpoint_cost import (Chain, Layer, chain_of, flops_model, layer_costs, measure_layer,
                              store_or_recompute)
from .checkpoint_schedule import (Schedule, _check_segments, brute_force, frontier, min_peak, no_checkpoint,
                                  optimal, predict, schedule, sqrt_n, sqrt_segments)

__all__ = ["Chain", "CheckpointFunction", "Layer", "Schedule", "brute_force", "chain_of", "checkpoint",
           "checkpoint_sequential", "flops_model", "frontier", "layer_costs", "measure", "measure_layer",
           "min_peak", "no_checkpoint", "optimal", "predict", "run_schedule", "schedule", "sqrt_n",
           "sqrt_segments", "store_or_recompute", "trace_step"]


def checkpoint(function, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True,
               **kwargs):
    """``function(*args, **kwargs)``, keeping only its inputs for backward and recomputing
    the rest when backward needs it (see the module docstring). Returns what ``function``
    returns (a tensor, a tuple with several tensors, non-tensors too)."""
    if use_reentrant is None:
        warnings.warn(
            "microtorch.utils.checkpoint: the use_reentrant parameter should be passed "
            "explicitly (as in torch.utils.checkpoint). use_reentrant=False is recommended; "
            "pass use_reentrant=True to keep the current default behavior.", stacklevel=2)
        use_reentrant = True
    if not callable(function):
        raise TypeError(f"checkpoint: the first argument must be the function to run, got "
                        f"{type(function).__name__}")
    generator = default_generator if preserve_rng_state else None
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return _checkpoint_reentrant(function, generator, args)
    frame = Frame(function, args, kwargs, generator)
    rec = _trace.active
    if rec is not None:
        rec.emit("checkpoint", stage="begin", checkpoint=frame.id, fn=_name(function), reentrant=False,
                 inputs=[rec.tensor(a) for a in args if isinstance(a, Tensor)], kept_bytes=frame.kept_bytes())
    out = frame.run(args)
    if rec is not None:
        rec.emit("checkpoint", stage="end", checkpoint=frame.id, fn=_name(function), reentrant=False,
                 outputs=[rec.tensor(o) for o in _tensors(out)], dropped=len(frame.metas),
                 dropped_bytes=sum(frame.dropped.values()), kept_bytes=frame.kept_bytes())
    return out


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          preserve_rng_state: bool = True):
    """Run ``functions`` (a list, or an ``nn.Sequential``) one after another on ``input``, in
    ``segments`` pieces of ``len(functions) // segments`` (the last takes the rest): every
    piece but the last is checkpointed (the last one's backward runs right after, so there
    is nothing to gain). As ``torch.utils.checkpoint.checkpoint_sequential``."""
    if use_reentrant is None:
        warnings.warn("microtorch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly (as in torch.utils.checkpoint); use_reentrant=False is recommended.",
                      stacklevel=2)
        use_reentrant = True
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    if segments > len(functions):
        raise ValueError(f"checkpoint_sequential: {segments} segments for {len(functions)} functions; "
                         "use at most one segment per function")

    def run(start: int, stop: int):
        def forward(x):
            for f in functions[start:stop]:
                x = f(x)
            return x
        forward.__qualname__ = f"layers {start}..{stop - 1}"
        return forward

    size = len(functions) // segments
    stop = 0
    for start in range(0, size * (segments - 1), size):
        stop = start + size
        input = checkpoint(run(start, stop), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
    return run(stop, len(functions))(input)


# --------------------------------------------------------------------------------------------
# running a schedule, and measuring it
# --------------------------------------------------------------------------------------------
def run_schedule(layers, sched, input, use_reentrant: bool = False):
    """Run the chain's layers on ``input`` following ``sched`` (a :class:`Schedule` or its
    segments): each checkpointed segment through :func:`~microtorch.utils.checkpoint.checkpoint`."""
    layers = list(layers.children()) if hasattr(layers, "children") else list(layers)
    segs = _check_segments(len(layers), sched.segments if isinstance(sched, Schedule) else sched)
    x = input
    for a, b, ckpt in segs:
        run = _piece(layers, a, b)
        x = checkpoint(run, x, use_reentrant=use_reentrant) if ckpt else run(x)
    return x


def _piece(layers, a: int, b: int):
    def forward(x):
        for f in layers[a:b]:
            x = f(x)
        return x
    forward.__qualname__ = f"layers {a}..{b - 1}"
    return forward


def measure(layers, sched, input, loss=None, repeat: int = 3, use_reentrant: bool = False) -> dict:
    """Run forward + backward with ``sched`` and measure it with the allocators' counters:
    ``kept_bytes`` (live after forward minus before: what is kept for backward),
    ``peak_bytes`` (the allocator's peak over the step minus what was live before — what
    the model's peak predicts), and ``time`` (best of ``repeat`` steps, seconds).

    Parameters' ``.grad`` are allocated before measuring (a first step), so the bytes are
    the step's own. ``loss`` maps the output to a scalar (default: its sum).
    """
    loss = loss or (lambda y: y.sum())
    params = [p for f in (layers.children() if hasattr(layers, "children") else layers)
              if hasattr(f, "parameters") for p in f.parameters()]

    def step():
        y = run_schedule(layers, sched, input, use_reentrant)
        kept = placement.live_bytes
        loss(y).backward()
        return kept

    step()  # gradients get their buffers; caches warm up
    best, kept_bytes, peak_bytes = math.inf, 0, 0
    for _ in range(repeat):
        for p in params:
            if p.grad is not None:
                p.grad._data.fill(0)
        before = placement.live_bytes
        placement.reset_peak()
        t0 = time.perf_counter()
        kept = step()
        best = min(best, time.perf_counter() - t0)
        kept_bytes, peak_bytes = kept - before, placement.peak_bytes - before
    return {"kept_bytes": kept_bytes, "peak_bytes": peak_bytes, "time": best}


def trace_step(layers, sched, input, loss=None, use_reentrant: bool = False):
    """One forward + backward with ``sched``, recorded (``mt.trace()``): the trace the
    pictures read (the live bytes of the step, its ``checkpoint`` and ``recompute`` events).
    A first, unrecorded step gives the parameters their ``.grad`` (zeroed before the
    recorded one), as in :func:`measure`."""
    loss = loss or (lambda y: y.sum())
    loss(run_schedule(layers, sched, input, use_reentrant)).backward()  # parameters get their .grad
    for f in (layers.children() if hasattr(layers, "children") else layers):
        for p in (f.parameters() if hasattr(f, "parameters") else ()):
            if p.grad is not None:
                p.grad._data.fill(0)
    with record() as tr:
        y = run_schedule(layers, sched, input, use_reentrant)  # (held through backward, as in a training loop)
        loss(y).backward()
    return tr


# --------------------------------------------------------------------------------------------
# the reentrant variant: one node whose backward reruns the region and calls backward
# --------------------------------------------------------------------------------------------
class CheckpointFunction(Function):
    """``use_reentrant=True``: forward runs ``run(*args)`` without a graph and saves the
    tensor arguments; backward reruns it with grad on and backpropagates through the rerun
    (a backward inside backward). Several tensor outputs travel as one flat result that the
    caller slices apart (so the node has one output, as every microtorch node)."""

    @staticmethod
    def forward(ctx, run, generator, *args):
        ctx.run, ctx.generator = run, generator
        ctx.rng = rng_state(generator) if generator is not None else None
        ctx.layout = [isinstance(a, Tensor) for a in args]
        ctx.constants = [a for a in args if not isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        with grad_mode.no_grad():
            out = run(*args)
        ctx.structure = _structure(out)
        parts = _tensors(out)
        if not parts:
            raise RuntimeError("checkpoint (use_reentrant=True): the function returned no tensor, "
                               "so there is nothing to backpropagate through")
        if len(parts) == 1:
            return parts[0]._data
        dtypes = {p.dtype for p in parts}
        if len(dtypes) > 1:
            raise TypeError("checkpoint (use_reentrant=True): outputs of different dtypes "
                            f"({sorted(d.name for d in dtypes)}) cannot travel through one node; "
                            "use use_reentrant=False")
        return np.concatenate([p._data.reshape(-1) for p in parts])

    @staticmethod
    def backward(ctx, g):
        if not autograd.in_plain_backward():
            raise RuntimeError(
                "Checkpointing is not compatible with .grad() or when an `inputs` parameter is "
                "passed to .backward(). Please use .backward() and do not pass its `inputs` "
                "argument. (In microtorch create_graph=True needs use_reentrant=False too.)")
        inputs = iter(ctx.saved_tensors)
        constants = iter(ctx.constants)
        detached = []
        args = []
        for is_tensor in ctx.layout:
            if is_tensor:
                t = next(inputs)
                d = t.detach()
                d.requires_grad = t.requires_grad
                detached.append(d)
                args.append(d)
            else:
                args.append(next(constants))
        rec = _trace.active
        if rec is not None:
            phase = rec.phase
            rec.emit("recompute", stage="begin", checkpoint=_trace.node_id(ctx), fn=_name(ctx.run),
                     tensors=None, kept_bytes=sum(d._storage.nbytes for d in detached))
            rec.phase = "recompute"
        now = rng_state(ctx.generator) if ctx.rng is not None else None
        try:
            if now is not None:
                set_rng_state(ctx.generator, ctx.rng)
            with grad_mode.enable_grad():
                outs = _tensors(ctx.run(*args))
        finally:
            if now is not None:
                set_rng_state(ctx.generator, now)
            if rec is not None:
                rec.phase = phase
        if rec is not None:
            rec.emit("recompute", stage="end", checkpoint=_trace.node_id(ctx), fn=_name(ctx.run),
                     tensors=None, recomputed_bytes=None, kept_bytes=sum(d._storage.nbytes for d in detached))
        grads, at = [], 0
        for o in outs:
            n = o._data.size
            grads.append(g if len(outs) == 1 else g[at:at + n].reshape(o.shape))
            at += n
        pairs = [(o, gi) for o, gi in zip(outs, grads) if o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        autograd.backward([o for o, _ in pairs], [gi for _, gi in pairs])
        if rec is not None:
            rec.phase = phase  # the inner backward set it back to "forward"
        return tuple(d.grad if d.requires_grad else None for d in detached)


def _checkpoint_reentrant(function, generator, args):
    if grad_mode._grad_enabled and not any(a.requires_grad for a in args if isinstance(a, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=3)
    if not grad_mode._grad_enabled or not any(a.requires_grad for a in args if isinstance(a, Tensor)):
        with grad_mode.no_grad():  # no node would be recorded: the outputs need no grad (PyTorch)
            return function(*args)
    rec = _trace.active
    if rec is not None:
        tensors = [a for a in args if isinstance(a, Tensor)]
        rec.emit("checkpoint", stage="begin", checkpoint=None, fn=_name(function), reentrant=True,
                 inputs=[rec.tensor(a) for a in tensors], kept_bytes=sum(a._storage.nbytes for a in tensors))
    flat = CheckpointFunction.apply(function, generator, *args)
    node = flat.grad_fn
    out = _rebuild(node.structure, flat)
    if rec is not None:
        rec.emit("checkpoint", stage="end", checkpoint=_trace.node_id(node), fn=_name(function),
                 reentrant=True, outputs=[rec.tensor(o) for o in _tensors(out)], dropped=None,
                 dropped_bytes=None, kept_bytes=sum(s.storage.nbytes for s in node.saved))
    return out


def _tensors(out) -> list[Tensor]:
    """The tensors of a function's result (itself, or the tensors of a tuple/list)."""
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, Tensor)]
    return []


def _structure(out):
    """How to rebuild ``out`` from the flat result: (kind, [(shape) or ('const', value)])."""
    if isinstance(out, Tensor):
        return ("tensor", out.shape)
    return (type(out), [("tensor", o.shape) if isinstance(o, Tensor) else ("const", o) for o in out])


def _rebuild(structure, flat: Tensor):
    kind, items = structure
    if kind == "tensor":
        return flat
    n_tensors = sum(1 for k, _ in items if k == "tensor")
    if n_tensors == 1:
        parts = iter([flat])
    else:
        pieces, at = [], 0
        for k, shape in items:
            if k == "tensor":
                n = int(np.prod(shape))
                pieces.append(flat[at:at + n].reshape(shape))
                at += n
        parts = iter(pieces)
    return kind(next(parts) if k == "tensor" else v for k, v in items)
