"""COO (coordinate) sparse tensors: ``indices`` (sparse_dim × nnz) and ``values`` (nnz × dense dims).

Element ``k`` says: at ``indices[:, k]`` the tensor holds ``values[k]``::

    S = mt.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3))
    S.to_dense()  # [[0, 0, 3], [4, 0, 5]]

The same position may appear several times (the tensor holds their **sum**) and in any
order: such a tensor is *uncoalesced*, which is what appending makes cheap — a gradient
merged from two steps is just both lists, concatenated. :meth:`SparseCOOTensor.coalesce`
sorts the positions (row-major) and sums the duplicates; ``indices()`` and ``values()`` are
only defined for a coalesced tensor (``_indices()`` / ``_values()`` read what is stored),
as in PyTorch.

A *hybrid* tensor keeps some trailing dims dense: an embedding gradient is
``indices`` (1 × n) — the rows — and ``values`` (n × embedding_dim), size (rows, dim).
"""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor
from .base import SparseTensor, as_index_array, as_values
from .buffers import array_tensor


class SparseCOOTensor(SparseTensor):
    """A COO sparse tensor; make one with :func:`sparse_coo_tensor` or ``t.to_sparse()``."""

    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices: Tensor, values: Tensor, shape: tuple[int, ...], coalesced: bool):
        self._indices_t = indices  # int64 (sparse_dim, nnz), its own storage
        self._values_t = values  # (nnz, *dense dims), its own storage
        self._shape = tuple(int(s) for s in shape)
        self._coalesced = bool(coalesced)

    # -- reading -------------------------------------------------------------------------
    def _index_tensors(self):
        return (self._indices_t,)

    def _indices(self) -> Tensor:
        """The stored indices (duplicates and any order included)."""
        return self._indices_t

    def _values(self) -> Tensor:
        """The stored values, one per stored index."""
        return self._values_t

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._indices_t

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._values_t

    def _nnz(self) -> int:
        return self._indices_t.shape[1]

    def sparse_dim(self) -> int:
        return self._indices_t.shape[0]

    def dense_dim(self) -> int:
        return len(self._shape) - self.sparse_dim()

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _with_values(self, values: Tensor) -> "SparseCOOTensor":
        return SparseCOOTensor(self._indices_t, values, self._shape, self._coalesced)

    # -- coalescing ------------------------------------------------------------------------
    def coalesce(self) -> "SparseCOOTensor":
        """Positions sorted row-major, each once, holding the sum of its duplicates.

        Differentiable in the values: d(out[u])/d(values[k]) = 1 where position k went to u,
        so the backward gathers ``g[inverse]`` (:class:`Coalesce`)."""
        if self._coalesced:
            return self
        plan = coalesce_plan(self._indices_t._data, self._shape[:self.sparse_dim()])
        values = Coalesce.apply(self._values_t, plan)
        return SparseCOOTensor(array_tensor(plan.indices), values, self._shape, True)

    def zero_(self) -> "SparseCOOTensor":
        """No stored elements any more (in place, as ``torch.Tensor.zero_`` on a sparse tensor)."""
        self._indices_t = array_tensor(np.zeros((self.sparse_dim(), 0), np.int64))
        self._values_t = array_tensor(np.zeros((0,) + self._shape[self.sparse_dim():], self.dtype))
        self._coalesced = True
        return self

    # -- conversions -----------------------------------------------------------------------
    def to_dense(self) -> Tensor:
        """The dense tensor: zeros with every stored value added at its position
        (differentiable: the gradient of each value is the output gradient at its position)."""
        from ..functions.shape import IndexAdd

        key = tuple(self._indices_t._data.copy())  # a copy: backward reads it after S may be gone
        return IndexAdd.apply(self._values_t, self._shape, key)

    def to_sparse(self, sparse_dim: int | None = None) -> "SparseCOOTensor":
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: this tensor already has sparse_dim={self.sparse_dim()}; "
                               f"go through .to_dense() to change it to {sparse_dim}")
        return self

    def to_sparse_coo(self) -> "SparseCOOTensor":
        return self

    def to_sparse_csr(self):
        """The same matrix as CSR (2-D, no dense dims): coalesced, rows compressed into pointers
        (:func:`microtorch.sparse.csr.coo_to_csr`; the CSR class, whose module builds on this
        one, is found by its layout)."""
        return self._layouts["sparse_csr"]._from_coo(self)

    # -- arithmetic ------------------------------------------------------------------------
    def _add_sparse(self, other) -> "SparseCOOTensor":
        """Both lists of positions, concatenated (coalesced again if both were)."""
        other = other.to_sparse() if other.layout != "sparse_coo" else other
        if other._shape != self._shape:
            raise RuntimeError(f"add: sizes do not match: {self._shape} and {other._shape}")
        if other.dtype != self.dtype:
            raise TypeError(f"add: dtypes do not match: {self.dtype.name} and {other.dtype.name}; "
                            "convert one with .to(dtype) of its values")
        if other.sparse_dim() != self.sparse_dim():
            raise RuntimeError("add: both sparse tensors need the same sparse_dim")
        from ..functions import cat

        indices = array_tensor(np.concatenate([self._indices_t._data, other._indices_t._data], axis=1))
        out = SparseCOOTensor(indices, cat([self._values_t, other._values_t]), self._shape, False)
        return out.coalesce() if self._coalesced and other._coalesced else out

    def __repr__(self) -> str:
        def body(t):
            return np.array2string(t._data, separator=", ", prefix="       indices=tensor(",
                                   precision=4, threshold=200, edgeitems=3)
        return (f"tensor(indices=tensor({body(self._indices_t)}),\n       values=tensor("
                f"{body(self._values_t)}),\n       " + self._repr_tail())


class CoalescePlan:
    """Where each stored element goes when a COO tensor is coalesced (numpy arrays):
    ``order`` sorts them, ``starts`` are where each run of equal positions begins in that
    order, ``inverse[k]`` is the output slot of element k, ``indices`` the unique positions."""

    __slots__ = ("order", "starts", "inverse", "indices", "nnz")

    def __init__(self, order, starts, inverse, indices, nnz):
        self.order, self.starts, self.inverse, self.indices, self.nnz = order, starts, inverse, indices, nnz


def coalesce_plan(indices: np.ndarray, sparse_shape: tuple[int, ...]) -> CoalescePlan:
    """Sort positions row-major (stable) and group equal ones."""
    nnz = indices.shape[1]
    if nnz == 0:
        empty = np.zeros(0, np.int64)
        return CoalescePlan(empty, empty, empty, indices.copy(), 0)
    linear = np.ravel_multi_index(tuple(indices), sparse_shape) if len(sparse_shape) > 1 else indices[0]
    order = np.argsort(linear, kind="stable")
    ordered = linear[order]
    new = np.empty(nnz, bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    inverse = np.empty(nnz, np.int64)
    inverse[order] = np.cumsum(new) - 1
    unique = ordered[starts]
    if len(sparse_shape) > 1:
        out = np.stack(np.unravel_index(unique, sparse_shape)).astype(np.int64)
    else:
        out = unique.reshape(1, -1)
    return CoalescePlan(order, starts, inverse, out, nnz)


def sum_duplicates(values: np.ndarray, plan: CoalescePlan) -> np.ndarray:
    """out[u] = Σ values[k] over the elements k that share position u, in their stored order
    (numpy): each position's first element, then the (usually few) repeats added on."""
    first = plan.order[plan.starts]
    out = values[first]
    if len(plan.starts) < plan.nnz:
        repeats = np.ones(plan.nnz, bool)
        repeats[first] = False
        later = np.flatnonzero(repeats)  # in stored order, so each sum runs left to right
        np.add.at(out, plan.inverse[later], values[later])
    return out


class Coalesce(Function):
    """out[u] = Σ_{k → u} values[k] (duplicates summed);  d(values[k]) = g[inverse[k]]."""

    @staticmethod
    def forward(ctx, values, plan):
        ctx.inverse = plan.inverse
        return sum_duplicates(values._data, plan)

    @staticmethod
    def backward(ctx, g):
        return g[ctx.inverse]


# -- making COO tensors -------------------------------------------------------------------------
def sparse_coo_tensor(indices, values, size=None, *, dtype=None, requires_grad: bool = False,
                      is_coalesced: bool | None = None) -> SparseCOOTensor:
    """A COO tensor with ``values[k]`` at ``indices[:, k]`` (as ``torch.sparse_coo_tensor``).

    ``indices``: integers of shape (sparse_dim, nnz); ``values``: shape (nnz, *dense dims);
    ``size``: the tensor's size (default: one past the largest index in each sparse dim,
    then the values' dense dims). Every index is checked against ``size`` — a negative or
    too-large index is an error here, not a wrong number later. ``is_coalesced=True``
    promises sorted, distinct positions (checked); otherwise the tensor is uncoalesced
    until :meth:`~SparseCOOTensor.coalesce`, as in PyTorch. Indices and values are copied
    into the pool; values that are part of a graph stay part of it.
    """
    idx = as_index_array(indices, "sparse_coo_tensor: indices")
    if idx.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must have shape (sparse_dim, nnz), got "
                           f"shape {list(idx.shape)}; for one sparse dim write [[i0, i1, ...]]")
    vals = as_values(values, dtype, requires_grad)
    nnz = idx.shape[1]
    if vals.ndim == 0 or vals.shape[0] != nnz:
        raise RuntimeError(f"sparse_coo_tensor: indices and values must have the same number of "
                           f"elements (nnz): indices has {nnz} columns but values has shape "
                           f"{list(vals.shape)} (its first dim must be {nnz})")
    sparse_dim = idx.shape[0]
    if (idx < 0).any():
        d, k = np.argwhere(idx < 0)[0]
        raise RuntimeError(f"sparse_coo_tensor: found negative index {int(idx[d, k])} for dim {d} "
                           f"(element {k}); indices count from 0")
    dense_shape = tuple(vals.shape[1:])
    if size is None:
        size = tuple(int(m) + 1 for m in idx.max(axis=1)) if nnz else (0,) * sparse_dim
        size = size + dense_shape
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + len(dense_shape):
        raise RuntimeError(f"sparse_coo_tensor: number of dimensions must be sparse_dim ({sparse_dim}) "
                           f"+ dense_dim ({len(dense_shape)}), but got {len(size)} (size={size})")
    if size[sparse_dim:] != dense_shape:
        raise RuntimeError(f"sparse_coo_tensor: the values' dense dims {list(dense_shape)} do not match "
                           f"size {list(size)} after the {sparse_dim} sparse dim(s)")
    if nnz:
        top = idx.max(axis=1)
        for d in range(sparse_dim):
            if top[d] >= size[d]:
                k = int(np.argmax(idx[d]))
                raise RuntimeError(f"sparse_coo_tensor: size is inconsistent with indices: for dim {d}, "
                                   f"size is {size[d]} but found index {int(top[d])} (element {k}); "
                                   f"valid indices are 0..{size[d] - 1}")
    if is_coalesced:
        _check_sorted(idx, size[:sparse_dim])
    return SparseCOOTensor(array_tensor(idx), vals, size, bool(is_coalesced))


def _check_sorted(idx: np.ndarray, sparse_shape) -> None:
    if idx.shape[1] < 2:
        return
    linear = np.ravel_multi_index(tuple(idx), sparse_shape)
    bad = np.flatnonzero(linear[1:] <= linear[:-1])
    if bad.size:
        k = int(bad[0]) + 1
        what = "repeats" if linear[k] == linear[k - 1] else "comes before"
        raise RuntimeError(f"sparse_coo_tensor: is_coalesced=True but the indices are not sorted and "
                           f"distinct: element {k} at {idx[:, k].tolist()} {what} element {k - 1} at "
                           f"{idx[:, k - 1].tolist()}. Sort them row-major and sum duplicates, or leave "
                           "is_coalesced unset and call .coalesce()")


def to_sparse(t: Tensor, sparse_dim: int | None = None) -> SparseCOOTensor:
    """``t.to_sparse()``: the non-zeros of a dense tensor as a coalesced COO tensor.

    With ``sparse_dim`` < ``t.ndim`` the trailing dims stay dense (a row is kept when any
    of its elements is non-zero). Differentiable: the values are ``t[positions]``."""
    if isinstance(t, SparseTensor):
        return t.to_sparse(sparse_dim)
    sparse_dim = t.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < sparse_dim <= t.ndim:
        raise RuntimeError(f"to_sparse: sparse_dim must be in 1..{t.ndim} for a {t.ndim}-d tensor, got {sparse_dim}")
    data = t._data
    mask = data != 0
    if sparse_dim < t.ndim:
        mask = mask.any(axis=tuple(range(sparse_dim, t.ndim)))
    positions = np.nonzero(mask)
    idx = np.stack(positions).astype(np.int64) if positions else np.zeros((sparse_dim, 0), np.int64)
    values = t[positions] if t.requires_grad else array_tensor(data[positions])
    return SparseCOOTensor(array_tensor(idx.reshape(sparse_dim, -1)), values, t.shape, True)

