"""The lookup with a sparse gradient: ``F.embedding(idx, W, sparse=True)``.

Forward is the same gather as the dense lookup, out[..., :] = W[idx, :]. Its gradient is
d(loss)/dW[r] = Σ over the positions p with idx[p] = r of G[p] — non-zero only in the rows
looked up. The dense lookup writes that into a zero matrix the size of W (for a
100,000 × 64 table and 1,024 ids: 6.4 M numbers to touch 65 k); this one returns it as a
sparse COO gradient — indices = the ids (1 × n, duplicates kept), values = the rows of G
(n × d) — which the engine accumulates with :func:`microtorch.sparse.gradient.accumulate`.

When W is not a leaf (``F.embedding(idx, W * 2, sparse=True)``) its gradient flows into a
dense op's backward, so it is returned dense.
"""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor import Tensor
from .gradient import embedding_gradient


class Embedding(Function):
    """out = W[idx];  dW = the rows of G at the looked-up ids, as a sparse gradient."""

    @staticmethod
    def forward(ctx, weight, idx):
        ctx.idx, ctx.shape = idx, weight.shape  # idx: a copy, made by the caller
        out = ctx.empty(idx.shape + weight.shape[1:], weight.dtype)
        return np.take(weight._data, idx, axis=0, out=out, mode="clip")  # ids checked by the caller

    @staticmethod
    def backward(ctx, g):
        if isinstance(ctx.next[0], Tensor):  # W is a leaf: its .grad stays sparse
            return embedding_gradient(ctx.idx.reshape(-1), g._data.reshape(-1, ctx.shape[1]), ctx.shape)
        from ..functions.shape import IndexAdd

        return IndexAdd.apply(g, ctx.shape, (ctx.idx,))


def embedding(idx: np.ndarray, weight: Tensor) -> Tensor:
    """Checked integer ids (a numpy array, copied here) → rows of ``weight``, sparse gradient."""
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-d (num_embeddings × embedding_dim), got "
                           f"size {list(weight.shape)}")
    return Embedding.apply(weight, np.array(idx, dtype=np.int64))
