"""Sparse × dense: ``mt.sparse.mm(S, D)`` and ``S @ D``, with backward.

With S (m × k) stored as (row r_e, column c_e, value v_e) for its elements e, and D (k × n)::

    out[i, :] = Σ_{e : r_e = i} v_e · D[c_e, :]                      (forward)

and, for an output gradient G = dL/d(out) (m × n)::

    dL/dD = Sᵀ G:      dD[c_e, :] += v_e · G[r_e, :]                 (the same product, transposed)
    dL/dv_e = G[r_e, :] · D[c_e, :]                                  (one dot product per element)

The gradient of S lives on S's pattern only — one number per stored element — so a sparse
leaf's ``.grad`` is sparse with S's indices (positions S does not store have no gradient:
they are not parameters). Two ops do all of it, each the other's backward:
:class:`SparseMM` (``out = S @ D`` for a pattern and values) and :class:`SampledDot`
(``out_e = A[r_e] · B[c_e]``), so the backward is itself differentiable.
"""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor
from .base import SparseTensor


def spmm(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, dense: np.ndarray, m: int,
         out: np.ndarray) -> np.ndarray:
    """out (m × n) = S @ dense for S's elements (rows, cols, values).

    Rows are grouped by how many elements they hold: the r rows holding ℓ elements each are
    one batched product, (r × 1 × ℓ) values @ (r × ℓ × n) rows of ``dense`` gathered for
    them — a few numpy calls per distinct row length instead of one per row."""
    if rows.size == 0:
        out.fill(0)
        return out
    if rows.size > 1 and (rows[1:] < rows[:-1]).any():  # COO in any order: group by row first
        order = np.argsort(rows, kind="stable")
        rows, cols, values = rows[order], cols[order], values[order]
    counts = np.bincount(rows, minlength=m)
    starts = np.zeros(m, np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    by_length = np.argsort(counts, kind="stable")
    lengths = counts[by_length]
    edges = np.flatnonzero(np.diff(lengths)) + 1
    for group in np.split(by_length, edges):
        length = counts[group[0]]
        if length == 0:
            out[group] = 0
            continue
        e = starts[group][:, None] + np.arange(length)  # (r × ℓ) element numbers
        out[group] = np.matmul(values[e][:, None, :], dense[cols[e]])[:, 0, :]
    return out


class SparseMM(Function):
    """out = S @ D, S given by its pattern (rows, cols, m rows) and its ``values``.

    d(values)_e = G[r_e] · D[c_e]  (:class:`SampledDot`);   dD = Sᵀ G  (this op, transposed)."""

    @staticmethod
    def forward(ctx, values, dense, rows, cols, m):
        ctx.rows, ctx.cols, ctx.k = rows, cols, dense.shape[0]
        needs = ctx.needs_input_grad or (False, False)  # (values, dense); () without a graph
        ctx.save_for_backward(values if needs[1] else None,  # dD needs the values
                              dense if needs[0] else None)  # d(values) needs D
        out = ctx.empty((m, dense.shape[1]), dense.dtype)
        return spmm(rows, cols, values._data, dense._data, m, out)

    @staticmethod
    def backward(ctx, g):
        values, dense = ctx.saved_tensors
        gv = None if dense is None else SampledDot.apply(g, dense, ctx.rows, ctx.cols)
        gd = None if values is None else SparseMM.apply(values, g, ctx.cols, ctx.rows, ctx.k)
        return gv, gd


class SampledDot(Function):
    """out_e = A[r_e] · B[c_e] (one dot product per element of a pattern).

    dA = S' B and dB = S'ᵀ A with S' the pattern holding the output gradient (:class:`SparseMM`)."""

    @staticmethod
    def forward(ctx, a, b, rows, cols):
        ctx.rows, ctx.cols, ctx.ma, ctx.mb = rows, cols, a.shape[0], b.shape[0]
        ctx.save_for_backward(a, b)
        return np.einsum("ej,ej->e", a._data[rows], b._data[cols])

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = SparseMM.apply(g, b, ctx.rows, ctx.cols, ctx.ma) if ctx.needs_input_grad[0] else None
        gb = SparseMM.apply(g, a, ctx.cols, ctx.rows, ctx.mb) if ctx.needs_input_grad[1] else None
        return ga, gb


def mm(sparse, dense: Tensor) -> Tensor:
    """``sparse @ dense`` for a 2-d COO (no dense dims) or CSR ``sparse`` and a 2-d dense
    tensor; a dense result. Differentiable in both (see the module docstring)."""
    if not isinstance(sparse, SparseTensor):
        if isinstance(sparse, Tensor) and isinstance(dense, Tensor):
            return sparse @ dense
        raise TypeError(f"mm: expected a sparse tensor and a dense tensor, got {type(sparse).__name__}")
    if isinstance(dense, SparseTensor):
        raise TypeError("mm: sparse @ sparse is not supported in microtorch; make the second "
                        "operand dense with .to_dense() (it is the dense one that gets multiplied)")
    if not isinstance(dense, Tensor):
        raise TypeError(f"mm: the second operand must be a dense Tensor, got {type(dense).__name__}")
    if sparse.ndim != 2 or dense.ndim != 2:
        raise RuntimeError(f"mm: both operands must be 2-d matrices, got sizes {sparse.shape} and "
                           f"{tuple(dense.shape)}")
    if sparse.layout == "sparse_coo" and sparse.dense_dim() != 0:
        raise RuntimeError("mm: the sparse operand must have no dense dims")
    (m, k), (k2, n) = sparse.shape, dense.shape
    if k != k2:
        raise RuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})")
    if sparse.dtype != dense.dtype:
        raise TypeError(f"mm: expected both operands to have the same dtype, but got "
                        f"{sparse.dtype.name} for the sparse one and {dense.dtype.name} for the dense one")
    # backward reads the pattern later: copies, since S's index storages may be freed (and
    # their blocks reused) as soon as S goes away
    if sparse.layout == "sparse_csr":
        rows, cols = sparse.row_indices(), sparse._col_t._data.copy()
    else:
        rows, cols = sparse._indices_t._data.copy()
    return SparseMM.apply(sparse._values_t, dense, rows, cols, m)
