"""Softmax and losses. ``log_softmax`` and ``nll_loss`` are ops of their own (stable and
fast); ``cross_entropy`` is their composition, as in PyTorch; ``mse_loss`` is built from
smaller ops."""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor import Tensor, _dim

_REDUCTIONS = ("mean", "sum", "none")


class Softmax(Function):
    """s = eˣ / Σ eˣ along ``dim``;  dL/dx = s ⊙ (g − Σ(g ⊙ s))."""

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = _dim(dim, x.ndim, "softmax")
        ctx.save_output()
        e = np.exp(x._data - x._data.max(axis=ctx.dim, keepdims=True))
        return e / e.sum(axis=ctx.dim, keepdims=True)

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return s * (g - (g * s).sum(dim=ctx.dim, keepdim=True))


class LogSoftmax(Function):
    """y = x − log Σ eˣ along ``dim`` (shifted by the max for stability);
    dL/dx = g − softmax(x) ⊙ Σ g."""

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = _dim(dim, x.ndim, "log_softmax")
        ctx.save_output()
        shifted = x._data - x._data.max(axis=ctx.dim, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=ctx.dim, keepdims=True))

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g - y.exp() * g.sum(dim=ctx.dim, keepdim=True)


class NllLoss(Function):
    """L = −Σᵢ logp[i, targetᵢ] (÷ N for "mean");  dL/dlogp = −onehot(target) (÷ N)."""

    @staticmethod
    def forward(ctx, logp, target, reduction):
        n = logp.shape[0]
        ctx.shape, ctx.target, ctx.reduction = logp.shape, target, reduction
        picked = -logp._data[np.arange(n), target]
        if reduction == "none":
            return picked
        return picked.sum() / (n if reduction == "mean" else 1)

    @staticmethod
    def backward(ctx, g):
        n = ctx.shape[0]
        hot = np.zeros(ctx.shape, dtype=g.dtype)
        hot[np.arange(n), ctx.target] = -1.0 / (n if ctx.reduction == "mean" else 1)
        hot = Tensor._wrap(hot)
        return hot * (g.unsqueeze(1) if ctx.reduction == "none" else g)


def softmax(x, dim):
    return Softmax.apply(x, dim)


def log_softmax(x, dim):
    return LogSoftmax.apply(x, dim)


def _check_reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def nll_loss(logp, target, reduction="mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``logp`` (N, C)."""
    _check_reduction("nll_loss", reduction)
    if logp.ndim != 2:
        raise ValueError(f"nll_loss: expected input of shape (N, C), got {list(logp.shape)}")
    t = target.numpy() if isinstance(target, Tensor) else np.asarray(target)  # numpy() keeps its bytes alive
    if t.dtype.kind not in "iu":
        raise TypeError(f"nll_loss: target must hold integer class indices, got dtype {t.dtype.name} "
                        "(for probabilities use a different loss; convert labels with .long())")
    if t.shape != (logp.shape[0],):
        raise ValueError(f"nll_loss: target shape {list(t.shape)} does not match the batch: input is "
                         f"{list(logp.shape)}, so target must have shape [{logp.shape[0]}]")
    bad = (t < 0) | (t >= logp.shape[1])
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds: there are {logp.shape[1]} "
                         f"classes, so targets must lie in 0..{logp.shape[1] - 1}")
    return NllLoss.apply(logp, t, reduction)


def cross_entropy(logits, target, reduction="mean"):
    """log_softmax over classes, then nll_loss — logits (N, C) or (C,), class-index targets."""
    _check_reduction("cross_entropy", reduction)
    if logits.ndim == 1:
        t = target.reshape(1) if isinstance(target, Tensor) else np.reshape(target, 1)
        loss = nll_loss(log_softmax(logits.unsqueeze(0), 1), t, reduction)
        return loss.squeeze(0) if reduction == "none" else loss
    return nll_loss(log_softmax(logits, 1), target, reduction)


def mse_loss(input, target, reduction="mean"):  # noqa: A002 — PyTorch's name
    """mean((input − target)²). The shapes must match: a silent broadcast of (N,1) against
    (N,) is the classic bug, so it is an error here (PyTorch only warns)."""
    _check_reduction("mse_loss", reduction)
    if not isinstance(target, Tensor):
        from ..creation import tensor

        target = tensor(target, dtype=input.dtype)
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input shape {list(input.shape)} and target shape "
                         f"{list(target.shape)} differ; reshape one so they match (e.g. .reshape(-1))")
    sq = (input - target) ** 2
    return sq if reduction == "none" else sq.mean() if reduction == "mean" else sq.sum()
