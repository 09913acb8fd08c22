"""Reductions: sum, mean, max/min, var. Backward spreads the gradient back over the
reduced dimensions (a broadcast), so ``keepdim`` only changes the shape bookkeeping.
"""
from __future__ import annotations

import builtins
import math
import warnings
from collections import namedtuple

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor


def reduced_dims(op: str, dim, ndim: int) -> tuple[int, ...] | None:
    """``dim`` (None, an int, or a tuple) as sorted non-negative dims; None means all."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim) if isinstance(dim, (tuple, list)) else None
    if dims is None or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
        raise TypeError(f"{op}(): argument 'dim' must be an int or a tuple of ints, got "
                        f"{type(dim).__name__} ({dim!r})")
    n = builtins.max(ndim, 1)
    out = []
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                             f"[{-n}, {n - 1}], but got {d})")
        out.append(int(d) % n)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dim {dims} names a dimension twice")
    return tuple(sorted(out)) if ndim else ()


def _keepdim_shape(shape, dims) -> tuple[int, ...]:
    """The output shape with reduced dims kept as 1 — the shape the gradient broadcasts from."""
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else n for i, n in enumerate(shape))


def _spread(g: Tensor, kept: tuple[int, ...], shape: tuple[int, ...]) -> Tensor:
    """Broadcast a reduction's gradient back over the reduced dims (a stride-0 view)."""
    if g.ndim and g.shape != kept:
        g = g.reshape(kept)
    return g.expand(shape)


class Sum(Function):
    """z = Σ x over ``dim``;  dz/dx = 1 for every summed element (g broadcasts back)."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        dims = reduced_dims("sum", dim, x.ndim)
        ctx.shape, ctx.kept = x.shape, _keepdim_shape(x.shape, dims)
        return x._data.sum(axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        return _spread(g, ctx.kept, ctx.shape)


class Mean(Function):
    """z = (1/n) Σ x over ``dim``;  dz/dx = 1/n."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        if x.dtype.kind != "f":
            raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be floating "
                               f"point, got {x.dtype.name}; use x.float().mean()")
        dims = reduced_dims("mean", dim, x.ndim)
        ctx.shape, ctx.kept = x.shape, _keepdim_shape(x.shape, dims)
        ctx.n = x.numel() // builtins.max(math.prod(ctx.kept), 1) if x.numel() else 0
        if not ctx.n:  # the mean of nothing is 0/0 = NaN, as in PyTorch: without numpy's warnings
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # ("Mean of empty slice")
                return x._data.mean(axis=dims, keepdims=keepdim)
        return x._data.mean(axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        return _spread(g, ctx.kept, ctx.shape) / ctx.n

    @staticmethod
    def numpy_backward(ctx, g):
        """g / n written into one fresh result by numpy (the same division)."""
        if not ctx.n:
            return Mean.backward(ctx, g)
        out = Tensor._empty(ctx.shape, g._data.dtype)
        out._data[...] = np.true_divide(g._data.reshape(ctx.kept), np.array(ctx.n, g._data.dtype))
        return out


class Amax(Function):
    """z = max x over ``dim``;  dz/dx = 1 at the maximum (split evenly between ties).

    A NaN makes z NaN. ``amax`` then marks no element (x == NaN is false): its gradient is
    NaN, as in PyTorch. ``x.max()`` (``nan_hits``) counts the NaNs as the maximum, so they
    share the gradient, as in PyTorch's ``max()``: ``[1, nan, 3]`` → ``[0, 1, 0]``.
    """

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, largest=True, nan_hits=False):
        if x.numel() == 0:
            raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0")
        dims = reduced_dims("max" if largest else "min", dim, x.ndim)
        reduce = np.max if largest else np.min
        ctx.shape, ctx.kept = x.shape, _keepdim_shape(x.shape, dims)
        out = reduce(x._data, axis=dims, keepdims=True)
        hit = x._data == out
        if nan_hits and x.dtype.kind == "f":
            hit |= np.isnan(x._data) & np.isnan(out)
        with np.errstate(invalid="ignore"):  # 0/0 where amax met a NaN: a NaN gradient, on purpose
            ctx.share = hit / hit.sum(axis=dims, keepdims=True)
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(x.shape) if dims is not None and i not in dims))

    @staticmethod
    def backward(ctx, g):
        return _spread(g, ctx.kept, ctx.shape) * Tensor._wrap(ctx.share.astype(g.dtype))


class MaxDim(Function):
    """values = x at ``indices`` (the arg-max/min) along ``dim``;  the gradient goes to those indices."""

    @staticmethod
    def forward(ctx, x, dim, indices, keepdim):
        ctx.indices, ctx.shape, ctx.dim = indices, x.shape, dim
        values = np.take_along_axis(x._data, indices, axis=dim)
        return values if keepdim else np.squeeze(values, axis=dim)

    @staticmethod
    def backward(ctx, g):
        hot = np.zeros(ctx.shape, dtype=g.dtype)
        np.put_along_axis(hot, ctx.indices, 1, axis=ctx.dim)
        kept = list(ctx.shape)
        kept[ctx.dim] = 1
        return g.reshape(tuple(kept)).expand(ctx.shape) * Tensor._wrap(hot)


minmax_result = namedtuple("minmax_result", ["values", "indices"])


def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    """Σ x over ``dim`` (all by default); ``dtype`` converts x first (differentiably), as in
    PyTorch: ``x.sum(dtype=mt.float64)`` sums float32 values in float64."""
    if dtype is not None:
        x = x.to(dtype)
    return Sum.apply(x, dim, keepdim)


def mean(x, dim=None, keepdim=False, *, dtype=None):
    """(1/n) Σ x over ``dim``; ``dtype`` converts x first, as in PyTorch."""
    if dtype is not None:
        x = x.to(dtype)
    return Mean.apply(x, dim, keepdim)


def _extreme(x, dim, keepdim, largest):
    if dim is None:
        return Amax.apply(x, None, keepdim, largest, True)
    op = "max" if largest else "min"
    if x.ndim == 0:
        raise IndexError(f"{op}(): a 0-d tensor has no dimension {dim}; use {op}() without dim")
    (d,) = reduced_dims(op, dim, x.ndim)
    if x.shape[d] == 0:
        raise IndexError(f"{op}(): cannot reduce over dimension {dim}, which has size 0")
    arg = (np.argmax if largest else np.argmin)(x._data, axis=d, keepdims=True)
    values = MaxDim.apply(x, d, arg, keepdim)
    indices = arg if keepdim else np.squeeze(arg, axis=d)
    return minmax_result(values, Tensor._wrap(indices.astype(np.int64)))


def max(x, dim=None, keepdim=False):  # noqa: A001
    """``x.max()`` → the largest value; ``x.max(dim)`` → ``(values, indices)`` like PyTorch."""
    return _extreme(x, dim, keepdim, largest=True)


def min(x, dim=None, keepdim=False):  # noqa: A001
    return _extreme(x, dim, keepdim, largest=False)


def amax(x, dim=None, keepdim=False):
    return Amax.apply(x, dim, keepdim, True)


def amin(x, dim=None, keepdim=False):
    return Amax.apply(x, dim, keepdim, False)


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Σ (x - mean)² / (n - correction); ``correction=1`` (unbiased) by default, as in PyTorch."""
    if unbiased is not None and correction is not None:
        raise TypeError("var: give either unbiased or correction, not both")
    c = correction if correction is not None else (0 if unbiased is False else 1)
    dims = reduced_dims("var", dim, x.ndim)
    n = x.numel() if dims is None else int(np.prod([x.shape[d] for d in dims]))
    centered = x - x.mean(dim=dims, keepdim=True)
    return (centered * centered).sum(dim=dims, keepdim=keepdim) / (n - c)
