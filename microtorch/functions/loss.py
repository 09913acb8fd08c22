"""Softmax and losses. ``log_softmax`` and ``nll_loss`` are ops of their own (stable and
fast); ``cross_entropy`` is their composition computed as one op (one pass over the logits,
one node); ``mse_loss`` is built from smaller ops."""
from __future__ import annotations

import numpy as np

from ..creation import tensor
from ..node import Function
from ..tensor_base import TensorBase as Tensor, _dim
from .elementwise import where
from .inplace_checks import _TORCH_NAMES

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
    """L = −Σᵢ logp[i, targetᵢ] (÷ N for "mean");  dL/dlogp = −onehot(target) (÷ N).

    The target (class indices, no gradient) is an input saved for backward, as in PyTorch:
    an in-place change to it before backward raises the version error instead of giving
    the gradient of a loss that was never computed.
    """

    @staticmethod
    def forward(ctx, logp, target, reduction):
        n = logp.shape[0]
        ctx.shape, ctx.reduction = logp.shape, reduction
        ctx.save_for_backward(target)
        picked = -logp._data[np.arange(n), target._data]
        if reduction == "none":
            return picked
        return picked.sum() / (n if reduction == "mean" else 1)

    @staticmethod
    def backward(ctx, g):
        (target,) = ctx.saved_arrays()
        n = ctx.shape[0]
        hot = np.zeros(ctx.shape, dtype=g.dtype)
        hot[np.arange(n), target] = -1.0 / (n if ctx.reduction == "mean" else 1)
        hot = Tensor._wrap(hot)
        return hot * (g.unsqueeze(1) if ctx.reduction == "none" else g), None


class CrossEntropy(Function):
    """Cross-entropy of logits x (N, C) and class indices t, log-softmax and nll in one:

        ℓᵢ = log Σⱼ exp(xᵢⱼ) − xᵢ,tᵢ   (computed shifted by the row max, so it cannot overflow),
        L = Σᵢ ℓᵢ / N ("mean"), Σᵢ ℓᵢ ("sum") or the ℓᵢ themselves ("none");
        dL/dx = (softmax(x) − onehot(t)) · g / N  ("mean"),  · g  ("sum"),  · gᵢ per row ("none").

    The same numbers as ``nll_loss(log_softmax(x, 1), t)``, in one pass and one node.
    Forward keeps softmax(x), which it computes anyway, and backward is one op,
    :class:`CrossEntropyGrad`, that starts from it (``numpy_backward``, run when no graph
    is recorded: the same formula straight in numpy). PyTorch records the composition
    (``NllLossBackward0`` after ``LogSoftmaxBackward0``); here the node is ``CrossEntropyBackward``.
    As in PyTorch, the target is an input (with no gradient) saved for backward: changing
    it in place before backward raises the version error.
    """

    @staticmethod
    def forward(ctx, x, target, reduction):
        ctx.divisor = x.shape[0] if reduction == "mean" else 1
        e = x._data - x._data.max(axis=1, keepdims=True)
        picked = e[np.arange(x.shape[0]), target._data]  # the shifted logits of the targets (a copy)
        np.exp(e, out=e)
        total = e.sum(axis=1, keepdims=True)
        losses = np.log(total[:, 0])
        losses -= picked
        if ctx.needs_input_grad:  # backward starts from softmax(x) = e / Σ e: keep it
            probs = Tensor._empty(x.shape, x.dtype)
            np.divide(e, total, out=probs._data)
            ctx.save_for_backward(x, probs, target)
        if reduction == "none":
            return losses
        return losses.sum() / ctx.divisor

    @staticmethod
    def backward(ctx, g):
        x, probs, target = ctx.saved_tensors
        # (CrossEntropyGrad keeps its own copy of the indices: they are not one of its inputs)
        return CrossEntropyGrad.apply(x, g, probs._data, target._data.copy(), ctx.divisor), None

    @staticmethod
    def numpy_backward(ctx, g):
        _, probs, target = ctx.saved_arrays()
        d = Tensor._empty(probs.shape, probs.dtype)
        _softmax_minus_onehot(d._data, probs, target, g._data, ctx.divisor)
        return d, None


class CrossEntropyGrad(Function):
    """Cross-entropy's gradient as an op:  D = (s − onehot(t)) ⊙ c  with s = softmax(x) and
    c = g / n (g 0-d: one factor for all rows; g of shape (N,): one per row). With G = dL/dD:

        dL/dx = s ⊙ (Gc − Σⱼ Gc ⊙ s)   with Gc = G ⊙ c   (softmax's backward),
        dL/dg = Σⱼ G ⊙ (s − onehot(t)) / n   (summed over the rows too when g is 0-d).

    So cross-entropy's backward is one node, not four (softmax, −, ÷, ·), and with
    ``create_graph=True`` this op's own backward gives the second derivative. PyTorch does
    the same with log_softmax, whose backward is an op with a derivative of its own
    (``_log_softmax_backward_data``). Forward takes s as computed by cross-entropy's forward;
    backward (needed only for higher derivatives) recomputes it as a node of the graph.
    """

    @staticmethod
    def forward(ctx, x, g, probs, target, n):
        ctx.save_for_backward(x, g)
        ctx.target, ctx.n = target, n
        return _softmax_minus_onehot(ctx.empty(probs.shape, probs.dtype), probs, target, g._data, n)

    @staticmethod
    def backward(ctx, G):
        x, g = ctx.saved_tensors
        s = softmax(x, 1)
        hot = np.zeros(x.shape, dtype=x.dtype)
        hot[np.arange(x.shape[0]), ctx.target] = 1
        gc = G * ((g.unsqueeze(1) if g.ndim else g) / ctx.n)
        gg = (G * (s - Tensor._wrap(hot))).sum(dim=1 if g.ndim else None) / ctx.n
        return s * (gc - (gc * s).sum(dim=1, keepdim=True)), gg


def _softmax_minus_onehot(out: np.ndarray, probs: np.ndarray, target: np.ndarray, g: np.ndarray,
                          n: int) -> np.ndarray:
    """out = (s − onehot(t)) ⊙ g / n, for g 0-d or one value per row: cross-entropy's gradient."""
    np.copyto(out, probs)
    out[np.arange(out.shape[0]), target] -= 1
    c = g / n
    out *= c[:, None] if g.ndim else c
    return out


def _floating_only(op: str, x) -> None:
    """PyTorch has no integer kernels for softmax and friends: refuse, don't round."""
    if x._data.dtype.kind != "f":
        raise NotImplementedError(f'"{op}" not implemented for {_TORCH_NAMES.get(x.dtype.name, x.dtype.name)!r} '
                                  f"({op} needs a floating tensor; convert with x.float() first)")


def softmax(x, dim):
    _floating_only("softmax", x)
    return Softmax.apply(x, dim)


def log_softmax(x, dim):
    _floating_only("log_softmax", x)
    return LogSoftmax.apply(x, dim)


def _check_reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _class_indices(op, x, target, ignore_index: int = -100) -> tuple[Tensor, bool]:
    """``target`` as a tensor of class indices for the rows of ``x`` (N, C), checked, and
    whether any row holds ``ignore_index`` (such rows contribute nothing). A target that is
    not a tensor (a list, a numpy array) is copied into one: the op saves it for backward,
    which must read the indices forward read."""
    if x.ndim != 2:
        raise ValueError(f"{op}: expected input of shape (N, C), got {list(x.shape)}")
    t = target._data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold integer class indices, got dtype {t.dtype.name} "
                        "(for class probabilities pass a float target of the input's shape; "
                        "convert labels with .long())")
    if t.shape != (x.shape[0],):
        raise ValueError(f"{op}: target shape {list(t.shape)} does not match the batch: input is "
                         f"{list(x.shape)}, so target must have shape [{x.shape[0]}]")
    # one reduction: read as unsigned, a negative index is huge, so max() finds both kinds of bad
    # (and the rows to skip, when ignore_index is itself out of range, as the default -100 is)
    unsigned = t.view(f"u{t.itemsize}") if t.dtype.kind == "i" else t
    ignored = False
    if t.size and (0 <= ignore_index < x.shape[1] or unsigned.max() >= x.shape[1]):
        skipped = t == ignore_index
        bad = ((t < 0) | (t >= x.shape[1])) & ~skipped
        if bad.any():
            raise IndexError(f"Target {int(t[bad][0])} is out of bounds: there are {x.shape[1]} "
                             f"classes, so targets must lie in 0..{x.shape[1] - 1} (or be "
                             f"ignore_index={ignore_index})")
        ignored = bool(skipped.any())
    if isinstance(target, Tensor):
        return target, ignored
    return tensor(t), ignored


def _reduce(losses, reduction, divisor):
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    if divisor == 0:  # every row ignored: the mean is 0/0 = nan and no row gets a gradient (PyTorch)
        return total + float("nan")
    return total / divisor


def _smoothed_nll(logp, target, ignore_index, label_smoothing, reduction):
    """Class-index loss with ignored rows and/or label smoothing, composed from ops (so its
    gradient is theirs, and differentiable again): with ε = label_smoothing and C classes,

        ℓᵢ = −(1 − ε) logp[i, tᵢ] − (ε / C) Σⱼ logp[i, j]   (0 where tᵢ = ignore_index),

    and "mean" divides Σ ℓᵢ by the number of rows not ignored (PyTorch's rule). An ignored
    row is selected away (``where``), not multiplied by 0: its logp may hold −inf (a masked
    logit), and −inf · 0 would make the whole loss NaN."""
    n, c = logp.shape
    t = target._data
    kept = t != ignore_index
    picked = logp[np.arange(n), np.where(kept, t, 0)]
    mask = Tensor._wrap(kept)
    losses = where(mask, -picked, 0.0)
    if label_smoothing:
        losses = (1 - label_smoothing) * losses - (label_smoothing / c) * where(mask, logp.sum(dim=1), 0.0)
    return _reduce(losses, reduction, int(kept.sum()))


def _soft_targets(logp, target, label_smoothing, reduction):
    """Class-probability targets y (N, C):  ℓᵢ = −Σⱼ yᵢⱼ logp[i, j], with y smoothed to
    (1 − ε) y + ε / C; "mean" divides by N. Composed from ops: y gets a gradient too."""
    n, c = logp.shape
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    return _reduce(-(target * logp).sum(dim=1), reduction, n)


def _check_smoothing(op, label_smoothing):
    if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing!r}")


def nll_loss(logp, target, reduction="mean", ignore_index=-100):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``logp`` (N, C);
    rows whose target is ``ignore_index`` contribute nothing (and "mean" does not count them)."""
    _check_reduction("nll_loss", reduction)
    _floating_only("nll_loss", logp)
    target, ignored = _class_indices("nll_loss", logp, target, ignore_index)
    if ignored:
        return _smoothed_nll(logp, target, ignore_index, 0.0, reduction)
    return NllLoss.apply(logp, target, reduction)


def cross_entropy(logits, target, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    """``nll_loss(log_softmax(logits, 1), target)`` — logits (N, C) or (C,).

    ``target`` is class indices (N,) — computed as one op (:class:`CrossEntropy`) — or class
    probabilities of the logits' shape (a float tensor). As in PyTorch, index rows equal to
    ``ignore_index`` contribute nothing, and ``label_smoothing`` ε mixes the target with the
    uniform distribution: (1 − ε) target + ε / C. Those options are composed from ops
    (:func:`_smoothed_nll`, :func:`_soft_targets`)."""
    _check_reduction("cross_entropy", reduction)
    if logits.ndim not in (1, 2):
        raise ValueError(f"cross_entropy: expected logits of shape (N, C) or (C,), got {list(logits.shape)}")
    _floating_only("cross_entropy", logits)
    if label_smoothing != 0.0:
        _check_smoothing("cross_entropy", label_smoothing)
    soft = isinstance(target, Tensor) and target._data.dtype.kind == "f" and target.ndim == logits.ndim
    if logits.ndim == 1:
        if soft:
            t = target.unsqueeze(0)
        else:
            t = target.reshape(1) if isinstance(target, Tensor) else np.reshape(target, 1)
        loss = cross_entropy(logits.unsqueeze(0), t, reduction, ignore_index, label_smoothing)
        return loss.squeeze(0) if reduction == "none" else loss
    if soft:
        if target.shape != logits.shape:
            raise ValueError(f"cross_entropy: a probability target must have the input's shape "
                             f"{list(logits.shape)}, got {list(target.shape)} (class indices are "
                             "integers of shape [N])")
        if target.dtype != logits.dtype:
            raise RuntimeError(f"cross_entropy: expected a probability target of dtype "
                               f"{logits.dtype.name} (the input's), got {target.dtype.name}")
        return _soft_targets(log_softmax(logits, 1), target, label_smoothing, reduction)
    target, ignored = _class_indices("cross_entropy", logits, target, ignore_index)
    if ignored or label_smoothing:
        return _smoothed_nll(log_softmax(logits, 1), target, ignore_index, label_smoothing, reduction)
    return CrossEntropy.apply(logits, target, reduction)


def mse_loss(input, target, reduction="mean"):  # noqa: A002 — PyTorch's name
    """mean((input − target)²). The shapes must match: a silent broadcast of (N,1) against
    (N,) is the classic bug, so it is an error here (PyTorch only warns)."""
    _check_reduction("mse_loss", reduction)
    if not isinstance(target, Tensor):
        target = tensor(target, dtype=input.dtype)
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input shape {list(input.shape)} and target shape "
                         f"{list(target.shape)} differ; reshape one so they match (e.g. .reshape(-1))")
    sq = (input - target) ** 2
    return sq if reduction == "none" else sq.mean() if reduction == "mean" else sq.sum()
