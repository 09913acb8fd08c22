"""The math of the layers as functions (``mt.nn.functional``, PyTorch's ``F``).

Modules hold parameters; these functions say what they compute. Each is a microtorch op
(``linear``, the activations and losses) or built from them, so its backward — and with
``create_graph=True`` its second derivative — comes from the ops' own backward functions.
"""
from __future__ import annotations

import numpy as np

from ..creation import default_generator
from ..functions import (cross_entropy, linear, log_softmax, mse_loss, nll_loss, relu, sigmoid,
                         softmax, tanh, where)
from ..tensor import Tensor

__all__ = ["cross_entropy", "dropout", "embedding", "layer_norm", "linear", "log_softmax",
           "mse_loss", "nll_loss", "relu", "sigmoid", "softmax", "tanh"]


def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator=None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1/(1 − p), so the
    expected value is unchanged (inverted dropout). The identity when not ``training``.

    The mask is a constant of the graph: d(out)/dx = mask / (1 − p).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = (generator or default_generator).rng.random(x.shape) >= p
    return x * Tensor._wrap((keep / (1.0 - p)).astype(x.dtype))


def embedding(indices, weight: Tensor, padding_idx: int | None = None, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` picked by integer ``indices`` (any shape): out[..., :] = W[idx, :].

    It is integer-array indexing, so the gradient is a scatter-add: dL/dW[r] is the sum of
    the output gradients of every position that picked row r (a dense gradient of W's shape).
    With ``sparse=True`` that gradient is a sparse COO tensor holding only the picked rows
    (:mod:`microtorch.sparse.embedding`), as in PyTorch. ``padding_idx``: that row is read
    like any other but gets no gradient (dL/dW[padding_idx] = 0), as in PyTorch — the row a
    padded position looks up stays what it is.
    """
    idx = indices._data if isinstance(indices, Tensor) else np.asarray(indices)  # checked here only
    if idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be integers (int64), got {idx.dtype.name}; "
                        "convert them with .long()")
    n = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].flat[0]
        raise IndexError(f"embedding: index {int(bad)} is out of range for an embedding with "
                         f"{n} rows (valid: 0..{n - 1})")
    if padding_idx is not None:
        padding_idx = _padding_row(padding_idx, n)
    if sparse:
        from ..sparse.embedding import embedding as sparse_embedding

        out = sparse_embedding(idx, weight)
    else:
        out = weight[indices if isinstance(indices, Tensor) else idx]  # indexing saves a tensor's version
    if padding_idx is not None and (idx == padding_idx).any():
        # the padded positions read a detached copy: the same numbers, no gradient to that row
        out = where(Tensor._wrap(idx != padding_idx)[..., None], out, out.detach())
    return out


def _padding_row(padding_idx, n: int) -> int:
    """``padding_idx`` as a row number 0..n−1 (a negative one counts from the end, as in PyTorch)."""
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)):
        raise TypeError(f"embedding: padding_idx must be an int or None, got {type(padding_idx).__name__}")
    if not -n <= padding_idx < n:
        raise ValueError(f"Padding_idx must be within num_embeddings: got {padding_idx} for {n} rows "
                         f"(valid: {-n}..{n - 1})")
    return int(padding_idx) % n


def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the last ``len(normalized_shape)`` dims, then scale and shift:

        y = (x − μ) / √(σ² + ε) · γ + β,   μ, σ² the mean and (biased) variance of those dims.
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise RuntimeError(f"layer_norm: expected input with shape [*, {', '.join(map(str, shape))}], "
                           f"but got input of size {list(x.shape)}")
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    centered = x - x.mean(dim=dims, keepdim=True)
    var = (centered * centered).mean(dim=dims, keepdim=True)
    y = centered / (var + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y
