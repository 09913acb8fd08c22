"""Matrix multiplication: 1-D (dot), 2-D, and batched with broadcast batch dimensions."""
from __future__ import annotations

import numpy as np

from ..node import Function
from .broadcast import operands, unbroadcast


def _shape_error(a, b) -> RuntimeError:
    if a.ndim == 0 or b.ndim == 0:
        return RuntimeError(f"matmul: both arguments need at least 1 dimension, but they have "
                            f"{a.ndim} and {b.ndim} (shapes {list(a.shape)} and {list(b.shape)}); "
                            "use * for scaling by a scalar")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        return RuntimeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied "
                            f"(inner dimensions {k_a} != {k_b})")
    return RuntimeError(f"matmul: batch dimensions of {list(a.shape)} and {list(b.shape)} do not broadcast")


def _transposed(t) -> bool:
    """A 2-D view whose transpose is contiguous (e.g. ``W.T``): column-major bytes."""
    return not t._data.flags.c_contiguous and t._data.T.flags.c_contiguous


class Matmul(Function):
    """C = A @ B;  dL/dA = G @ Bᵀ, dL/dB = Aᵀ @ G (batch dims summed where they broadcast).

    A 1-D operand is treated as a row (left) or column (right) vector and the added
    dimension removed again, as in numpy and PyTorch.
    """

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad or (False, False)
        ctx.save_for_backward(a if need_b else None, b if need_a else None)  # each grad needs the other
        ctx.shapes = a.shape, b.shape
        ctx.b_transposed = b.ndim == 2 and _transposed(b)
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]:  # the common case, straight into its storage
            return np.matmul(a._data, b._data, out=ctx.empty((a.shape[0], b.shape[1]), a.dtype))
        try:
            return np.matmul(a._data, b._data)
        except ValueError:
            raise _shape_error(a, b) from None

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        (sa, sb), (need_a, need_b) = ctx.shapes, ctx.needs_input_grad
        if len(sa) == 2 and len(sb) == 2:  # the common case, without the general bookkeeping
            gb = None
            if need_b:  # b = W.T (a linear layer): (gᵀa)ᵀ, so W's gradient comes back contiguous
                gb = (g.mT @ a).mT if ctx.b_transposed else a.mT @ g
            return (g @ b.mT if need_a else None, gb)
        g2 = g.unsqueeze(-1) if len(sb) == 1 else g  # first: for 1-D @ 1-D, g is 0-d
        g2 = g2.unsqueeze(-2) if len(sa) == 1 else g2
        ga = gb = None
        if need_a:
            b2 = b.unsqueeze(-1) if len(sb) == 1 else b
            ga = unbroadcast(g2 @ b2.mT, (1,) + sa if len(sa) == 1 else sa)
            ga = ga if ga.shape == sa else ga.reshape(sa)
        if need_b:
            a2 = a.unsqueeze(0) if len(sa) == 1 else a
            gb = unbroadcast(a2.mT @ g2, sb + (1,) if len(sb) == 1 else sb)
            gb = gb if gb.shape == sb else gb.reshape(sb)
        return ga, gb


def matmul(a, b):
    return Matmul.apply(*operands(a, b))
