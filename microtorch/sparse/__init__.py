"""Sparse tensors and sparse gradients (``mt.sparse``), named as in PyTorch.

* :mod:`~microtorch.sparse.coo` — COO tensors: ``mt.sparse_coo_tensor``, ``.coalesce()``,
  ``.is_coalesced()``, ``.indices()``, ``.values()``, ``.to_dense()``, ``t.to_sparse()``;
* :mod:`~microtorch.sparse.csr` — CSR matrices: ``mt.sparse_csr_tensor``, ``.to_sparse_csr()``,
  ``.crow_indices()``, ``.col_indices()``, conversions both ways;
* :mod:`~microtorch.sparse.spmm` — ``mt.sparse.mm(S, D)`` / ``S @ D`` with backward
  (dD = Sᵀ G, dS on S's pattern);
* :mod:`~microtorch.sparse.base` — what both share: autograd through the values, ``S * c``,
  ``S + S2``, ``S.sum()``, and clear errors for dense ops that would silently densify;
* :mod:`~microtorch.sparse.embedding` — the lookup whose gradient is sparse
  (``nn.Embedding(n, d, sparse=True)``);
* :mod:`~microtorch.sparse.gradient` — accumulating sparse gradients: merge, coalesce,
  the density threshold (``options``, ``gradient_options``);
* :mod:`~microtorch.sparse.buffers` — index and value arrays in refcounted pool storages;
  sparse gradients in their own pool (``gradient_pool()``), reused across steps;
* :mod:`~microtorch.sparse.stats` — ``stats()``, ``reset_stats()``, ``record()`` (the log
  the pictures in :mod:`microtorch.viz.sparse` draw).
"""
from .base import SparseTensor
from .buffers import gradient_pool
from .coo import SparseCOOTensor, sparse_coo_tensor, to_sparse
from .csr import SparseCSRTensor, sparse_csr_tensor, to_sparse_csr
from .gradient import GradientOptions, gradient_options, options
from .spmm import mm
from .stats import record, reset_stats, stats

# as a method: S @ D (dense → sparse, t.to_sparse() and t.to_sparse_csr(), are Tensor's methods)
SparseTensor.__matmul__ = mm

__all__ = ["GradientOptions", "SparseCOOTensor", "SparseCSRTensor", "SparseTensor", "gradient_options",
           "gradient_pool", "mm", "options", "record", "reset_stats", "sparse_coo_tensor",
           "sparse_csr_tensor", "stats", "to_sparse", "to_sparse_csr"]
