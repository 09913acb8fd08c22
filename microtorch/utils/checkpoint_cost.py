"""The cost model of recomputation: what each layer of a chain costs to store and to recompute.

A chain is layers ``f_0 … f_{n-1}`` applied one after another. For each layer we need four
numbers (a :class:`Layer`):

* ``forward``: the time of its forward (what a recomputation costs) — measured, or FLOPs
  in the second model (:func:`flops_model`);
* ``saved``: the bytes of the tensors it makes that a plain run keeps for backward
  (its output included when something saves it; parameters and its input excluded: they
  belong to someone else);
* ``output``: the bytes of its output (what a segment boundary keeps);
* ``workspace``: the extra bytes its backward needs for a moment (the incoming and
  outgoing gradients, a weight-sized gradient before it is added into ``.grad``).

:func:`layer_costs` measures them by running the layers (the bytes from what the ops
save, in a recorded trace; the times with a clock); :func:`flops_model` computes them from
shapes alone. :func:`store_or_recompute` is the rule of the AI-compiler article for one
tensor.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from .. import grad_mode
from ..memory import placement
from .. import recording as _trace
from ..trace.recorder import record
from ..nn import Linear, Sequential
from ..tensor import Tensor


@dataclass(frozen=True)
class Layer:
    """One layer's costs (times in seconds, or FLOPs; sizes in bytes). ``rerun_free``: a
    recomputation ending with this layer need not run it — it saves nothing of its own but
    its output (kept anyway) and an input the layer before saved too (ReLU then Linear)."""

    forward: float
    saved: int
    output: int
    workspace: int = 0
    backward: float = 0.0
    name: str = ""
    rerun_free: bool = False


@dataclass(frozen=True)
class Chain:
    """The layers of a chain, in order, and the unit their times are in."""

    layers: tuple
    unit: str = "s"

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(self.layers))
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Chain: layer {i} is a {type(layer).__name__}, not a Layer")
            if layer.forward < 0 or layer.saved < 0 or layer.output < 0 or layer.workspace < 0:
                raise ValueError(f"Chain: layer {i} has a negative cost ({layer})")

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i):
        return self.layers[i]

    @classmethod
    def uniform(cls, n: int, forward: float = 1.0, saved: int = 1, output: int = 1,
                workspace: int = 0, backward: float | None = None) -> "Chain":
        """``n`` identical layers (the textbook chain)."""
        b = 2 * forward if backward is None else backward
        return cls([Layer(forward, saved, output, workspace, b, f"layer {i}") for i in range(n)], "units")

    @property
    def plain_bytes(self) -> int:
        """Bytes a plain run keeps for backward: every layer's ``saved``."""
        return sum(layer.saved for layer in self.layers)


def chain_of(layers: list[tuple]) -> Chain:
    """A chain from ``(forward, saved, output[, workspace])`` tuples (for quick experiments)."""
    return Chain([Layer(*t[:4], name=f"layer {i}") for i, t in enumerate(layers)], "units")


# --------------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------------
def measure_layer(layer, x: Tensor, repeat: int = 5, name: str = "", saved: int | None = None) -> tuple[Layer, Tensor]:
    """Run ``layer(x)`` and measure its :class:`Layer` costs; returns them and the output
    (the next layer's input, detached and requiring grad like a layer inside a chain).

    ``saved`` (unless given): a recorded run's ``op`` events list the storages each op
    saved; those allocated inside the layer count. ``workspace``: the allocator's peak
    during the layer's backward above what was live before it (once the parameters have
    their ``.grad``). Times: the best of ``repeat`` runs.
    """
    if saved is None:
        with record() as tr:
            out = layer(x)
        saved = _saved_by_span(tr.events, [0, len(tr.events)])[0]
    else:
        out = layer(x)
    g = Tensor._wrap(np.ones(out.shape, dtype=out.dtype))
    workspace = 0
    if out.requires_grad:
        layer(x).backward(g)  # first: the parameters' .grad get their buffers (they outlive a step)
        before = placement.live_bytes
        placement.reset_peak()
        out.backward(g)
        workspace = max(0, placement.peak_bytes - before)
    forward_t, backward_t = math.inf, math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        y = layer(x)
        t1 = time.perf_counter()
        if y.requires_grad:
            y.backward(g)
        t2 = time.perf_counter()
        forward_t, backward_t = min(forward_t, t1 - t0), min(backward_t, t2 - t1)
        del y
    for p in _parameters(layer):
        p.grad = None
    nxt = out.detach()
    nxt.requires_grad = True
    return Layer(forward_t, saved, out._data.nbytes, workspace, backward_t, name), nxt


def layer_costs(layers, x: Tensor, repeat: int = 5) -> Chain:
    """Measure every layer of a chain (a list of callables or an ``nn.Sequential``) on input ``x``.

    The saved bytes come from one recorded forward of the whole chain (a layer's output
    that the *next* layer saves counts for the layer that made it); workspaces from each
    layer run on its own; forward times from whole forward passes, layer by layer.
    """
    layers = _as_list(layers)
    x = x.detach()
    x.requires_grad = True
    with record() as tr:
        bounds, y, outs = [len(tr.events)], x, [x._storage.id]
        for layer in layers:
            y = layer(y)
            bounds.append(len(tr.events))
            outs.append(y._storage.id)
    saved = _saved_by_span(tr.events, bounds)
    free = _rerun_free(tr.events, bounds, outs)
    del y, tr
    out = []
    x0 = x
    for i, layer in enumerate(layers):
        cost, x = measure_layer(layer, x, repeat, _layer_name(layer, i), saved[i])
        out.append(cost)
    # times inside the chain: a layer run on its own finds its weights in the CPU caches,
    # one in a long chain does not; so time each layer's forward within whole forward passes,
    # the whole backward, and split the backward as the layers' own backward times do
    forward = [math.inf] * len(layers)
    backward = math.inf
    for _ in range(repeat):
        y = x0
        for i, layer in enumerate(layers):
            t0 = time.perf_counter()
            y = layer(y)
            forward[i] = min(forward[i], time.perf_counter() - t0)
        t0 = time.perf_counter()
        y.sum().backward()
        backward = min(backward, time.perf_counter() - t0)
        del y
    own = sum(c.backward for c in out) or 1.0
    for layer in layers:
        for p in _parameters(layer):
            p.grad = None
    return Chain([replace(c, forward=f, backward=backward * c.backward / own, rerun_free=r)
                  for c, f, r in zip(out, forward, free)], "s")


def _rerun_free(events: list, bounds: list, outs: list) -> list[bool]:
    """For each layer: does it save nothing but its output, parameters, and an input the
    layer before saved too? (``outs[i]``: the storage of layer i's input, ``outs[i+1]`` its output.)"""
    made = [{e["storage"] for e in events[a:b] if e["kind"] == "alloc"} for a, b in zip(bounds, bounds[1:])]
    saves = [{sid for e in events[a:b] if e["kind"] == "op" and e.get("phase") == "forward"
              for sid in e.get("saved") or ()} for a, b in zip(bounds, bounds[1:])]
    out = []
    for i, s in enumerate(saves):
        own = (s & made[i]) - {outs[i + 1]}
        needs_input = outs[i] in s and (i == 0 or outs[i] not in saves[i - 1])
        out.append(not own and not needs_input)
    return out


def _saved_by_span(events: list, bounds: list) -> list[int]:
    """For each span ``bounds[i]..bounds[i+1]`` of events: bytes of the storages allocated
    in it that any forward op saved."""
    saved = {sid for e in events if e["kind"] == "op" and e.get("phase") == "forward"
             for sid in e.get("saved") or ()}
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.append(sum(e["nbytes"] for e in events[a:b] if e["kind"] == "alloc" and e["storage"] in saved))
    return out


def flops_model(layers, x: Tensor) -> Chain:
    """The second model: times in floating-point operations, bytes from shapes.

    A ``Linear`` (in → out, B rows) costs 2·B·in·out FLOPs forward and twice that
    backward and saves its input; its weight gradient is a workspace of in·out elements.
    Any other layer (an activation) costs one FLOP per output element and saves its
    output. A tensor saved by the layer that made it or by the next one counts once, for
    the layer that made it; a ``Sequential`` block is the sum of its layers. Workspace:
    the weight gradient plus the incoming and outgoing gradients.
    """
    layers = _as_list(layers)
    walked = []
    with grad_mode.no_grad():
        for layer in layers:
            walked.append(_walk(layer, x))
            x = walked[-1][-1]
    out = []
    for i, (layer, (fwd, saves_input, saves_output, inner, work, y)) in enumerate(zip(layers, walked)):
        nbytes = y._data.nbytes
        next_saves_input = i + 1 < len(walked) and walked[i + 1][1]
        saved = inner + (nbytes if (saves_output or next_saves_input) else 0)
        rerun_free = inner == 0 and (not saves_input or (i > 0 and walked[i - 1][2]))
        out.append(Layer(fwd, saved, nbytes, work * y.dtype.itemsize + 2 * nbytes, 2.0 * fwd,
                         _layer_name(layer, i), rerun_free))
    return Chain(out, "FLOPs")


def _walk(layer, x: Tensor) -> tuple:
    """``(FLOPs, saves its input, saves its output, bytes saved inside, workspace elements,
    output)`` of one layer (a block: its layers in turn)."""
    if isinstance(layer, Sequential):
        parts = []
        for sub in layer:
            parts.append(_walk(sub, x))
            x = parts[-1][-1]
        inner = sum(p[3] for p in parts)
        for a, b in zip(parts, parts[1:]):  # a sub-layer's output, saved by it or by the next
            if a[2] or b[1]:
                inner += a[-1]._data.nbytes
        return (sum(p[0] for p in parts), parts[0][1], parts[-1][2], inner, max(p[4] for p in parts), x)
    y = layer(x)
    if isinstance(layer, Linear):
        w = layer.weight
        rows = y._data.size // w.shape[0]
        return 2.0 * rows * w.shape[0] * w.shape[1], True, False, 0, w._data.size, y
    return float(y._data.size), False, True, 0, 0, y


# --------------------------------------------------------------------------------------------
# the rule for one tensor
# --------------------------------------------------------------------------------------------
def store_or_recompute(memory: float, duration: float, compute_time: float, num_reuse: int = 1,
                       price: float = 1.0) -> tuple[str, float, float]:
    """The AI-compiler article's rule for one tensor:

        Cost_store     = Memory × Duration        (bytes held × how long they are held)
        Cost_recompute = ComputeTime × NumReuse   (one recomputation per later use)

    recompute when Cost_recompute < Cost_store. The two costs are in different units
    (byte·seconds and seconds), so ``price`` says how many seconds of compute one
    byte·second of memory is worth — the exchange rate a memory budget sets. Returns
    ``("store" | "recompute", cost_store, cost_recompute)``.
    """
    if memory < 0 or duration < 0 or compute_time < 0 or num_reuse < 0 or price < 0:
        raise ValueError("store_or_recompute: costs must be non-negative")
    store = price * memory * duration
    recompute = compute_time * num_reuse
    return ("recompute" if recompute < store else "store"), store, recompute


def _as_list(layers) -> list:
    if hasattr(layers, "children"):
        return list(layers.children())
    return list(layers)


def _layer_name(layer, i: int) -> str:
    return f"{i}: {type(layer).__name__}"


def _parameters(layer) -> list:
    return list(layer.parameters()) if hasattr(layer, "parameters") else []
