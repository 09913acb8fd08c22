"""Gradient utilities (``mt.nn.utils``): clipping the global gradient norm."""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from .flat import collect_parameters, flat_of

__all__ = ["clip_grad_norm_", "get_total_norm"]


def _grad_pieces(parameters) -> list[np.ndarray]:
    """The gradients as 1-D numpy arrays: runs of the flat gradient buffer when the
    parameters live in one (usually a single array), else one array per ``.grad``."""
    params, names = collect_parameters(parameters, "clip_grad_norm_")
    sparse = [n for n, p in zip(names, params) if p.grad is not None and p.grad.is_sparse]
    if sparse:  # (PyTorch has no sparse kernel for this either)
        raise RuntimeError(f"clip_grad_norm_ / get_total_norm: {sparse[0]} has a sparse gradient, which "
                           "gradient norms do not support; clip the dense parameters only, or the sparse "
                           "gradient's values yourself: g = p.grad.coalesce(); g.values() holds them")
    flat = flat_of(params)
    if flat is not None:
        has = flat.sync_grads()
        return [flat.grad._data[sl] for sl, _ in flat.segments(has)]
    return [p.grad._data.reshape(-1) if p.grad._data.flags.c_contiguous else p.grad._data
            for p in params if p.grad is not None]


def _norm(pieces: list[np.ndarray], norm_type: float) -> float:
    if not pieces:
        return 0.0
    if math.isinf(norm_type):
        return max(float(np.max(np.abs(x))) if x.size else 0.0 for x in pieces)
    if norm_type == 2.0:
        return math.sqrt(sum(float(np.dot(x.ravel(), x.ravel())) for x in pieces))
    return sum(float(np.sum(np.abs(x) ** norm_type)) for x in pieces) ** (1.0 / norm_type)


def get_total_norm(parameters, norm_type: float = 2.0) -> Tensor:
    """‖(g₁, g₂, …)‖ₚ: the norm of all gradients seen as one long vector."""
    from ..creation import tensor

    pieces = _grad_pieces(parameters)
    dtype = pieces[0].dtype if pieces else np.float32
    return tensor(_norm(pieces, float(norm_type)), dtype=dtype)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    """Scale all gradients by min(1, max_norm / (‖g‖ + 1e-6)) and return the total norm ‖g‖.

    ``parameters`` is a module, an iterable of tensors, or one tensor; parameters without a
    ``.grad`` are skipped. When they live in a flat gradient buffer (after an optimizer was
    made, or ``mt.nn.flatten_parameters``) the norm is one dot product over the buffer and
    the scaling one in-place multiply. As in PyTorch.
    """
    pieces = _grad_pieces(parameters)
    norm_type = float(norm_type)
    total = _norm(pieces, norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped. To disable this error and scale the "
                           "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0 or math.isnan(coef):
        for x in pieces:
            x *= coef
    from ..creation import tensor

    return tensor(total, dtype=pieces[0].dtype if pieces else np.float32)
