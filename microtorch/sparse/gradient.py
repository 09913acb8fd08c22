"""Sparse gradients: how backward accumulates them into a leaf's ``.grad`` — merge,
coalesce, densify.

``Embedding(sparse=True)``'s backward hands the engine a sparse COO gradient: the looked-up
ids as indices (uncoalesced: an id looked up twice appears twice) and the output gradient
rows as values. The engine's centralized accumulation
(:meth:`microtorch.autograd.GradientSink.accumulate`) passes every sparse gradient here, to :func:`accumulate`:

* **first gradient** (``.grad`` is None): it becomes ``.grad`` as it is — its buffers were
  just made in the sparse gradient pool. It never goes into the dense flat gradient buffer.
* **merge** (``.grad`` is already sparse): concatenate both lists of (index, value) into
  new pool buffers — no sorting, so a merge costs what it copies. The merged gradient is
  coalesced when it stores more than :attr:`GradientOptions.coalesce_limit` entries, so
  repeated accumulation cannot grow it without bound.
* **densify** (selective densification): after a merge, if the gradient touches more than
  :attr:`GradientOptions.densify_threshold` of the rows (exactly: it is coalesced first
  to count them), a dense gradient is cheaper than its index arrays — it becomes dense
  (in the parameter's slice of the flat gradient buffer when it has one), and later
  sparse gradients are added into it.
* a sparse gradient meeting a **dense** ``.grad`` (a tied weight that also got a dense
  gradient) is added into the dense one; a dense gradient meeting a sparse ``.grad``
  densifies it first.

Defaults: ``densify_threshold = 0.5`` and ``coalesce_limit = 65_536`` entries; change them
with ``mt.sparse.options.densify_threshold = 0.1`` or for a block with
``with mt.sparse.gradient_options(densify_threshold=0.1):``. PyTorch never densifies
(``densify_threshold=None`` turns it off here too).
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..tensor_base import TensorBase as Tensor
from . import stats
from .buffers import empty_gradient
from .coo import SparseCOOTensor, coalesce_plan, sum_duplicates


class GradientOptions:
    """When an accumulated sparse gradient is coalesced and when it is densified."""

    __slots__ = ("densify_threshold", "coalesce_limit")

    def __init__(self, densify_threshold: float | None = 0.5, coalesce_limit: int = 65_536):
        self.densify_threshold = densify_threshold  # fraction of rows touched past which .grad becomes dense
        self.coalesce_limit = coalesce_limit  # stored entries past which a merged gradient is coalesced

    def __repr__(self) -> str:
        return (f"GradientOptions(densify_threshold={self.densify_threshold}, "
                f"coalesce_limit={self.coalesce_limit})")


options = GradientOptions()


@contextlib.contextmanager
def gradient_options(**changes):
    """``with mt.sparse.gradient_options(densify_threshold=0.1):`` — other settings inside the block."""
    unknown = set(changes) - set(GradientOptions.__slots__)
    if unknown:
        raise TypeError(f"gradient_options: unknown option(s) {sorted(unknown)}; the options are "
                        f"{sorted(GradientOptions.__slots__)}")
    before = {k: getattr(options, k) for k in changes}
    for k, v in changes.items():
        setattr(options, k, v)
    try:
        yield options
    finally:
        for k, v in before.items():
            setattr(options, k, v)


def embedding_gradient(rows: np.ndarray, grad_rows: np.ndarray, shape: tuple[int, int]) -> SparseCOOTensor:
    """The sparse gradient of a lookup: indices (1 × n) = the looked-up rows, values (n × d) =
    the output gradient rows, both copied into the sparse gradient pool; uncoalesced."""
    n = rows.size
    indices = empty_gradient((1, n), np.int64)
    indices._data[0] = rows
    values = empty_gradient((n, shape[1]), grad_rows.dtype)
    values._data[...] = grad_rows
    stats.count("sparse_grads")
    return SparseCOOTensor(indices, values, shape, False)


def merge(a: SparseCOOTensor, b: SparseCOOTensor) -> SparseCOOTensor:
    """Both gradients' entries, concatenated into new pool buffers (uncoalesced)."""
    na, nb = a._nnz(), b._nnz()
    indices = empty_gradient((a.sparse_dim(), na + nb), np.int64)
    np.concatenate([a._indices_t._data, b._indices_t._data], axis=1, out=indices._data)
    values = empty_gradient((na + nb,) + a.shape[a.sparse_dim():], a.dtype)
    np.concatenate([a._values_t._data, b._values_t._data], axis=0, out=values._data)
    stats.count("merges")
    return SparseCOOTensor(indices, values, a.shape, False)


def coalesced(g: SparseCOOTensor) -> SparseCOOTensor:
    """``g`` coalesced into new pool buffers (no graph: a gradient's values are plain numbers)."""
    if g.is_coalesced():
        return g
    plan = coalesce_plan(g._indices_t._data, g.shape[:g.sparse_dim()])
    summed = sum_duplicates(g._values_t._data, plan)
    indices = empty_gradient(plan.indices.shape, np.int64)
    indices._data[...] = plan.indices
    values = empty_gradient(summed.shape, summed.dtype)
    values._data[...] = summed
    stats.count("coalesces")
    return SparseCOOTensor(indices, values, g.shape, True)


def add_into_dense(dense: np.ndarray, g: SparseCOOTensor) -> None:
    """dense[index] += value for every stored entry (duplicates add up)."""
    c = coalesced(g)  # distinct rows: one fancy-indexed add instead of an unbuffered add.at
    key = tuple(c._indices_t._data)
    dense[key] += c._values_t._data


def densify(g: SparseCOOTensor, home: Tensor | None) -> Tensor:
    """A dense gradient holding ``g``: ``home`` (the leaf's slice of the flat gradient
    buffer, when it has one: no allocation), else a new gradient tensor."""
    if home is None or home.shape != g.shape or home.dtype != g.dtype:
        home = Tensor._empty(g.shape, g.dtype, "gradient")
    home._data.fill(0)
    add_into_dense(home._data, g)
    home._storage.version += 1
    stats.count("densifications")
    return home


def accumulate(leaf: Tensor, g, home: Tensor | None = None) -> None:
    """``leaf.grad`` ⟵ ``leaf.grad`` + ``g`` when either is sparse (see the module docstring);
    ``home``: the leaf's gradient home in a flat buffer, if any (where densifying writes)."""
    old = leaf.grad
    threshold = options.densify_threshold
    if g.shape != leaf.shape:
        raise RuntimeError(f"a sparse gradient of size {g.shape} cannot accumulate into a tensor of "
                           f"size {tuple(leaf.shape)}")
    if old is None:
        leaf.grad = g
        stats.log_entry("new", leaf, g, g, threshold)
    elif old.is_sparse and g.is_sparse:
        merged = merge(old, g)
        action = "merge"
        if merged._nnz() > options.coalesce_limit:
            merged, action = coalesced(merged), "coalesce"
        touched = None
        if threshold is not None and merged._nnz() > threshold * leaf.shape[0]:
            merged, action = coalesced(merged), "coalesce"  # count the rows exactly
            touched = stats.density(merged)
            if touched > threshold:
                leaf.grad = densify(merged, home)
                stats.log_entry("densify", leaf, g, leaf.grad, threshold, touched)
                return
        leaf.grad = merged
        stats.log_entry(action, leaf, g, merged, threshold, touched)
    elif g.is_sparse:  # into a dense gradient
        add_into_dense(old._data, g)
        old._storage.version += 1
        stats.count("dense_adds")
        stats.log_entry("into dense", leaf, g, old, threshold)
    else:  # a dense gradient meets a sparse .grad
        dense = densify(old, home)
        np.add(dense._data, g._data, out=dense._data)
        leaf.grad = dense
        stats.log_entry("densify", leaf, None, dense, threshold)
