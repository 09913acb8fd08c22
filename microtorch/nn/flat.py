"""Flat parameter and gradient buffers: centralized gradient accumulation for a module.

:func:`flatten_parameters` moves a module's parameters into ONE flat storage and gives
their gradients ONE flat storage too::

    params  [ w1 ........ | b1 .. | w2 ...... | b2 ]   one Storage (tag "tensor")
    grads   [ w1.grad ... | ..    | ......... | .. ]   one Storage (tag "gradient")

Each parameter stays the same Python object, but its bytes become a view of its slice of
the parameter buffer (``np.shares_memory(p.numpy(), flat.data.numpy())``), and its
``.grad`` becomes a view of its slice of the gradient buffer. Backward then writes every
parameter's gradient into that one buffer (copied into the view, or ``leaf.grad += g``
through it when a gradient is already there), so an optimizer can update *all* parameters
with a few vectorized numpy calls over two flat arrays, and the global gradient norm is
one dot product.

**Refcounts.** Moving a parameter is :func:`microtorch.tensor.repoint`: +1 on the flat
storage, −1 on its old storage (freed if the parameter was its only holder). So the
parameter buffer's refcount is 1 (the flat tensor) + one per parameter, and the gradient
buffer's is 1 + one per gradient view.

**``.grad`` is None until the first backward**, as in PyTorch: the view is placed on the
engine's gradient sink as the parameter's *gradient home*
(``autograd.gradient_sink.place(p, view)``, :class:`microtorch.autograd.GradientSink`), and
the first gradient is written into it (``Linear``'s backward, handed the view by the engine,
computes it there; another op's gradient is copied in) — no allocation. ``zero_grad()`` sets every ``.grad`` back to
None (PyTorch's default) and the next backward refills the homes the same way: one write
of the buffer per step. ``zero_grad(set_to_none=False)`` is one ``fill(0)`` of the buffer
instead, and backward then adds into the zeros (a fill, then a read and a write).

Differences from PyTorch, on purpose: views you took of a parameter *before* flattening
keep reading the old bytes; after ``backward(create_graph=True)`` a parameter's ``.grad``
is a new graph tensor (as in PyTorch), which :meth:`FlatParameters.sync_grads` (run by
every optimizer step and by ``clip_grad_norm_``) copies into the buffer, putting the view
back as ``.grad``.
"""
from __future__ import annotations

import weakref

import numpy as np
from numpy.lib.array_utils import byte_bounds

from .. import dtypes
from ..autograd import gradient_sink
from ..grad_mode import no_grad
from ..memory.storage import empty_storage
from ..tensor_base import TensorBase as Tensor, repoint  # (below tensor.py, whose x.data setter calls assign_data)

# storage id of a parameter buffer -> the FlatParameters that owns it (while it is alive)
_registry: "weakref.WeakValueDictionary[int, FlatParameters]" = weakref.WeakValueDictionary()


class FlatParameters:
    """Parameters whose values live in one flat buffer and whose gradients live in another.

    ``data`` and ``grad`` are 1-D tensors over the two buffers; ``params[i]`` reads
    ``data[offsets[i] : offsets[i] + numels[i]]`` reshaped to ``shapes[i]``. Made by
    :func:`flatten_parameters`.
    """

    def __init__(self, params: list[Tensor], names: list[str] | None = None):
        self.params = params
        self.names = names or [f"param{i}" for i in range(len(params))]
        self.shapes = [p.shape for p in params]
        self.numels = [p.numel() for p in params]
        self.offsets = [0]
        for n in self.numels[:-1]:
            self.offsets.append(self.offsets[-1] + n)
        self.numel = sum(self.numels)
        self.dtype = params[0].dtype
        with no_grad():
            self.data = _flat_tensor(self.numel, self.dtype, "tensor")
            self.grad = _flat_tensor(self.numel, self.dtype, "gradient")
        self.grad._data.fill(0)
        self.homes: list[Tensor] = []
        for p, start, n, shape in zip(params, self.offsets, self.numels, self.shapes):
            piece = self.data._data[start:start + n].reshape(shape)
            np.copyto(piece, p._data)
            repoint(p, piece, self.data._storage)
            home = Tensor._view(self.grad._data[start:start + n].reshape(shape), self.grad)
            if p.grad is not None and not p.grad.is_sparse:  # an existing gradient moves in too
                np.copyto(home._data, p.grad._data)
                p.grad = home
            gradient_sink.place(p, home)
            self.homes.append(home)
        _registry[self.data._storage.id] = self

    # -- reading -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.params)

    def slice_of(self, i: int) -> slice:
        """Where parameter ``i`` lives in both buffers."""
        return slice(self.offsets[i], self.offsets[i] + self.numels[i])

    def layout(self) -> list[dict]:
        """One row per parameter: name, offset, numel, shape (what a picture of the buffer shows)."""
        return [{"name": name, "offset": o, "numel": n, "shape": tuple(s)}
                for name, o, n, s in zip(self.names, self.offsets, self.numels, self.shapes)]

    def __repr__(self) -> str:
        return (f"FlatParameters({len(self.params)} tensors, {self.numel} {dtypes.name(self.dtype)} "
                f"values; params in storage #{self.data._storage.id}, grads in storage "
                f"#{self.grad._storage.id})")

    # -- keeping the buffers true ------------------------------------------------------------
    def check(self) -> None:
        """Raise if a parameter no longer lives in the buffer (moved by ``.to()``/another flatten)."""
        storage = self.data._storage
        for name, p in zip(self.names, self.params):
            if p._storage is not storage:
                raise RuntimeError(
                    f"parameter {name!r} no longer lives in this flat parameter buffer (it was "
                    "moved, e.g. by module.to()/.double() or by flattening it again elsewhere); "
                    "create the optimizer after converting the model")

    def sync_grads(self) -> list[bool]:
        """Make the gradient buffer hold every gradient; return which parameters have one
        there (a sparse ``.grad`` stays where it is and counts as not in the buffer).

        A ``.grad`` that is not the view (set after ``backward(create_graph=True)``, or
        assigned by hand) is copied into the buffer and the view becomes ``.grad`` again.
        A parameter whose ``.grad`` is None has no gradient (its slice is not read).
        """
        self.check()
        has = []
        for p, home in zip(self.params, self.homes):
            g = p.grad
            if g is not None and g.is_sparse:  # stays sparse: optimizers update its rows
                has.append(False)
                continue
            if g is not home and g is not None:
                if g.shape != home.shape:
                    raise RuntimeError(f"a parameter of shape {list(home.shape)} has a .grad of shape "
                                       f"{list(g.shape)}")
                np.copyto(home._data, g._data)
                home._storage.version += 1
                p.grad = home
                gradient_sink.place(p, home)
            has.append(g is not None)
        return has

    def segments(self, has: list[bool], key=None) -> list[tuple[slice, slice]]:
        """Runs of neighbouring parameters that have a gradient (and equal ``key[i]``) as
        ``(slice of the buffers, slice of the parameter indices)`` — usually one run over everything."""
        n = len(has)
        keys = key.tolist() if isinstance(key, np.ndarray) else key
        if all(has) and (keys is None or keys.count(keys[0]) == n):  # the usual case: one run
            return [(slice(0, self.numel), slice(0, n))]
        runs: list[tuple[slice, slice]] = []
        i = 0
        while i < n:
            if not has[i]:
                i += 1
                continue
            j = i + 1
            while j < n and has[j] and (keys is None or keys[j] == keys[i]):
                j += 1
            runs.append((slice(self.offsets[i], self.offsets[j - 1] + self.numels[j - 1]), slice(i, j)))
            i = j
        return runs

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every ``.grad`` to None (nothing is written; the next backward copies each first
        gradient into the buffer), or with ``set_to_none=False`` every gradient to zero with
        ONE ``fill(0)`` of the gradient buffer.
        """
        self.check()
        if set_to_none:
            for p in self.params:
                p._grad = None  # (the slot itself: None needs no check)
            return
        self.grad._data.fill(0)
        self.grad._storage.version += 1
        for p, home in zip(self.params, self.homes):
            if p.grad is not None and p.grad.is_sparse:
                p.grad.zero_()  # a sparse gradient stays sparse, with no entries (as in PyTorch)
            elif p.grad is not None and p.grad is not home:
                p.grad = home  # a graph .grad from create_graph=True: back to the (zeroed) view

    def bump_version(self) -> None:
        """Record an in-place update of the parameter values (saved tensors then refuse them)."""
        self.data._storage.version += 1


def assign_data(p: Tensor, value: Tensor) -> bool:
    """``p.data = value`` for a parameter that lives in a flat buffer: a value of its shape
    and dtype is copied into its slice (True: done, the buffer stays whole). Anything else
    returns False and ``p`` is repointed at ``value``'s bytes, leaving the buffer; its
    gradient home goes with it (:meth:`FlatParameters.check` then names it)."""
    flat = _registry.get(p._storage.id)
    if flat is None or not any(q is p for q in flat.params):
        return False
    if value.shape == p.shape and value.dtype == p.dtype:
        np.copyto(p._data, value._data)
        flat.bump_version()
        return True
    gradient_sink.remove(p)
    return False


def _flat_tensor(numel: int, dtype, tag: str) -> Tensor:
    storage = empty_storage(numel, np.dtype(dtype), tag)
    return Tensor._over(storage.data[:numel], storage)


def collect_parameters(params_or_module, what: str = "flatten_parameters") -> tuple[list[Tensor], list[str]]:
    """The distinct tensors (in order) and their names from a module (anything with
    ``named_parameters()``: this file sits below :mod:`.module`, which imports it) or an
    iterable of tensors."""
    if _is_module(params_or_module):
        named = list(params_or_module.named_parameters())
    elif isinstance(params_or_module, Tensor):
        named = [("param0", params_or_module)]
    else:
        named = [(f"param{i}", p) for i, p in enumerate(params_or_module)]
    seen, params, names = set(), [], []
    for name, p in named:
        if not isinstance(p, Tensor):
            raise TypeError(f"{what}: expected Tensors (parameters), got {type(p).__name__}")
        if id(p) not in seen:
            seen.add(id(p))
            params.append(p)
            names.append(name)
    return params, names


def flat_of(params: list[Tensor]) -> FlatParameters | None:
    """The live FlatParameters holding exactly ``params`` (same tensors, same order), if any."""
    if not params:
        return None
    flat = _registry.get(params[0]._storage.id)
    if flat is None or len(flat.params) != len(params):
        return None
    storage = flat.data._storage
    for a, b in zip(flat.params, params):
        if a is not b or b._storage is not storage:
            return None
    return flat


def flatten_parameters(params_or_module, *, what: str = "flatten_parameters") -> FlatParameters:
    """Move parameters (a Module, or an iterable of leaf tensors) into one flat buffer.

    Returns the :class:`FlatParameters`; if the same tensors already share a live flat
    buffer, that one is returned unchanged. The values are copied once; afterwards every
    parameter (same Python object) reads its slice of ``flat.data`` and its gradient lives
    in ``flat.grad``. Optimizers call this on construction, so you rarely need to.
    """
    params, names = collect_parameters(params_or_module, what)
    if not params:
        raise ValueError(f"{what}: got an empty parameter list")
    for name, p in zip(names, params):
        if p.grad_fn is not None:
            raise ValueError(f"{what}: can't optimize a non-leaf Tensor ({name} was computed by "
                             f"{p.grad_fn.name}); pass leaf tensors, e.g. parameters or "
                             "t.detach().requires_grad_()")
        if not dtypes.is_floating(p.dtype):
            raise TypeError(f"{what}: {name} has dtype {dtypes.name(p.dtype)}; only floating "
                            "point tensors can be optimized")
    kinds = sorted({dtypes.name(p.dtype) for p in params})
    if len(kinds) > 1:
        raise TypeError(f"{what}: the parameters mix dtypes {kinds}; one flat buffer holds one "
                        "dtype, so convert the model first (e.g. model.double())")
    existing = flat_of(params)
    if existing is not None:
        return existing
    _check_no_overlap(params, names, what)
    flat = FlatParameters(params, names)
    if _is_module(params_or_module):
        params_or_module.__dict__["_flat"] = flat  # the module keeps its buffers' owner alive
    return flat


def _is_module(x) -> bool:
    return hasattr(type(x), "named_parameters")


def _check_no_overlap(params, names, what) -> None:
    """Parameters that share bytes (tied by a view) cannot each get their own slice."""
    by_storage: dict[int, list[int]] = {}
    for i, p in enumerate(params):
        by_storage.setdefault(p._storage.id, []).append(i)
    for members in by_storage.values():
        if len(members) < 2:
            continue
        bounds = sorted((byte_bounds(params[i]._data), i) for i in members if params[i].numel())
        for ((_, hi), i), ((lo, _), j) in zip(bounds, bounds[1:]):
            if lo < hi:
                raise ValueError(f"{what}: {names[i]} and {names[j]} share memory (one is a view of "
                                 "the other); flattening would untie them — pass only one of them")
