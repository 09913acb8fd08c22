"""CSR (compressed sparse row) matrices: ``crow_indices``, ``col_indices``, ``values``.

Row ``i`` holds the elements ``crow_indices[i] : crow_indices[i + 1]`` of ``col_indices``
and ``values`` — the row pointers replace COO's row index of every element by one number
per row (``rows + 1`` pointers instead of ``nnz`` row indices), and a row is a contiguous
slice, which is what a sparse × dense product walks::

    crow = [0, 1, 3]      row 0: elements 0..1   row 1: elements 1..3
    col  = [2, 0, 2]      the columns of those elements, sorted within each row
    values = [3, 4, 5]    → [[0, 0, 3], [4, 0, 5]]

Invariants (checked when you make one, as ``torch.sparse_csr_tensor`` does with
``check_invariants=True``): ``crow[0] == 0``, ``crow`` non-decreasing, ``crow[-1] == nnz``,
every column in ``0..ncols-1``, and columns sorted and distinct within each row.
"""
from __future__ import annotations

import numpy as np

from ..tensor_base import TensorBase as Tensor
from .base import SparseTensor, as_index_array, as_values
from .buffers import array_tensor
from .coo import SparseCOOTensor, to_sparse


class SparseCSRTensor(SparseTensor):
    """A CSR matrix; make one with :func:`sparse_csr_tensor` or ``.to_sparse_csr()``."""

    is_sparse_csr = True
    layout = "sparse_csr"

    def __init__(self, crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]):
        self._crow_t, self._col_t, self._values_t = crow, col, values
        self._shape = (int(shape[0]), int(shape[1]))

    def _index_tensors(self):
        return (self._crow_t, self._col_t)

    def crow_indices(self) -> Tensor:
        return self._crow_t

    def col_indices(self) -> Tensor:
        return self._col_t

    def values(self) -> Tensor:
        return self._values_t

    def _nnz(self) -> int:
        return self._col_t.shape[0]

    def row_indices(self) -> np.ndarray:
        """The row of every element (COO's first index row), expanded from the pointers."""
        crow = self._crow_t._data
        return np.repeat(np.arange(self._shape[0], dtype=np.int64), np.diff(crow))

    def _with_values(self, values: Tensor) -> "SparseCSRTensor":
        return SparseCSRTensor(self._crow_t, self._col_t, values, self._shape)

    def to_sparse(self, sparse_dim: int | None = None) -> SparseCOOTensor:
        """The same matrix as a (coalesced) COO tensor: each row pointer expanded to row indices."""
        idx = np.stack([self.row_indices(), self._col_t._data])
        return SparseCOOTensor(array_tensor(idx), self._values_t, self._shape, True)

    to_sparse_coo = to_sparse

    def to_sparse_csr(self) -> "SparseCSRTensor":
        return self

    @staticmethod
    def _from_coo(s: SparseCOOTensor) -> "SparseCSRTensor":
        """``s.to_sparse_csr()`` of a COO tensor ``s`` (which finds this class by its layout)."""
        return coo_to_csr(s)

    def to_dense(self) -> Tensor:
        return self.to_sparse().to_dense()

    def _add_sparse(self, other) -> "SparseCSRTensor":
        return (self.to_sparse() + other.to_sparse()).to_sparse_csr()

    def __repr__(self) -> str:
        def body(t):
            return np.array2string(t._data, separator=", ", precision=4, threshold=200, edgeitems=3)
        return (f"tensor(crow_indices=tensor({body(self._crow_t)}),\n       col_indices=tensor("
                f"{body(self._col_t)}),\n       values=tensor({body(self._values_t)}),\n       "
                + self._repr_tail())


def coo_to_csr(s: SparseCOOTensor) -> SparseCSRTensor:
    """Coalesce (sorted row-major, duplicates summed), then count the elements of each row:
    ``crow = [0, cumsum(counts)]``."""
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        raise RuntimeError(f"to_sparse_csr: expected a 2-d sparse matrix without dense dims, got "
                           f"size {s.shape} with sparse_dim={s.sparse_dim()}")
    c = s.coalesce()
    rows, cols = c._indices_t._data
    crow = np.zeros(s.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=s.shape[0]), out=crow[1:])
    return SparseCSRTensor(array_tensor(crow), array_tensor(cols), c._values_t, s.shape)


def to_sparse_csr(t) -> SparseCSRTensor:
    """``t.to_sparse_csr()`` for a dense 2-d tensor (or any sparse one)."""
    if isinstance(t, SparseTensor):
        return t.to_sparse_csr()
    if t.ndim != 2:
        raise RuntimeError(f"to_sparse_csr: expected a 2-d tensor, got {t.ndim} dims (size {list(t.shape)})")
    return coo_to_csr(to_sparse(t))


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      requires_grad: bool = False) -> SparseCSRTensor:
    """A CSR matrix (as ``torch.sparse_csr_tensor``); the invariants in the module docstring
    are checked and a broken one is named. ``size`` defaults to (rows from the pointers,
    one past the largest column)."""
    crow = as_index_array(crow_indices, "sparse_csr_tensor: crow_indices")
    col = as_index_array(col_indices, "sparse_csr_tensor: col_indices")
    vals = as_values(values, dtype, requires_grad)
    if crow.ndim != 1 or col.ndim != 1 or vals.ndim != 1:
        raise RuntimeError(f"sparse_csr_tensor: crow_indices, col_indices and values must be 1-d, "
                           f"got shapes {list(crow.shape)}, {list(col.shape)}, {list(vals.shape)}")
    nnz = col.shape[0]
    if vals.shape[0] != nnz:
        raise RuntimeError(f"sparse_csr_tensor: col_indices and values must have the same length "
                           f"(nnz), got {nnz} and {vals.shape[0]}")
    if crow.shape[0] < 1 or crow[0] != 0:
        raise RuntimeError(f"sparse_csr_tensor: crow_indices[0] must be 0 (row 0 starts at element 0), "
                           f"got {crow.tolist()[:1]}")
    drops = np.flatnonzero(np.diff(crow) < 0)
    if drops.size:
        i = int(drops[0])
        raise RuntimeError(f"sparse_csr_tensor: crow_indices must be non-decreasing (row i holds "
                           f"elements crow[i]..crow[i+1]), but crow[{i}] = {crow[i]} > crow[{i + 1}] = "
                           f"{crow[i + 1]}")
    if crow[-1] != nnz:
        raise RuntimeError(f"sparse_csr_tensor: crow_indices[-1] must equal nnz = {nnz} (the number of "
                           f"col_indices), got {crow[-1]}")
    nrows = crow.shape[0] - 1
    if size is None:
        size = (nrows, int(col.max()) + 1 if nnz else 0)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or size[0] != nrows:
        raise RuntimeError(f"sparse_csr_tensor: size {size} does not match crow_indices, which has "
                           f"{nrows} rows (len(crow_indices) = rows + 1)")
    if nnz and (col.min() < 0 or col.max() >= size[1]):
        k = int(np.flatnonzero((col < 0) | (col >= size[1]))[0])
        raise RuntimeError(f"sparse_csr_tensor: col_indices[{k}] = {col[k]} is out of range for "
                           f"{size[1]} columns (valid: 0..{size[1] - 1})")
    rows = np.repeat(np.arange(nrows), np.diff(crow))
    bad = np.flatnonzero((rows[1:] == rows[:-1]) & (col[1:] <= col[:-1]))
    if bad.size:
        k = int(bad[0]) + 1
        raise RuntimeError(f"sparse_csr_tensor: the columns of row {rows[k]} must be sorted and distinct, "
                           f"but col_indices[{k - 1}] = {col[k - 1]} is followed by col_indices[{k}] = "
                           f"{col[k]}; sort each row's columns (and sum duplicates)")
    return SparseCSRTensor(array_tensor(crow), array_tensor(col), vals, size)
