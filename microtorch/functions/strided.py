"""Views with explicit strides: ``as_strided``, ``diagonal`` and ``unfold`` (all zero-copy).

Each is a new (shape, strides, offset) over the *same storage* — no byte is copied:

* ``x.diagonal(offset=0, dim1=0, dim2=1)``: the diagonal is one dimension whose stride is
  ``stride[dim1] + stride[dim2]`` (step one row and one column at once).
* ``x.unfold(dimension, size, step)``: sliding windows. Dimension ``dimension`` becomes the
  window index (stride ``stride·step``) and a new last dimension of length ``size`` walks
  inside a window (stride ``stride``). Windows overlap when ``step < size`` — then several
  output elements read one input element.
* ``x.as_strided(size, stride, storage_offset=None)``: any layout you like, relative to the
  *storage* (not to ``x``'s first element), as in PyTorch. It is bounds-checked: a layout
  reaching outside the storage raises an error naming the elements it needs and the
  storage's size. Unlike PyTorch, negative strides are allowed (microtorch's slices with
  negative steps make them too); both ends of the layout are checked.

Gradients. ``diagonal`` and ``unfold`` read input elements, so their backward scatter-adds
the gradient into zeros of the input's shape (overlapping windows add up). ``as_strided``
reads *storage positions*, some of which may not belong to ``x`` at all; its backward
scatter-adds the gradient into a storage-shaped buffer, then reads that buffer back at
``x``'s layout (positions outside ``x`` get no gradient, as in PyTorch; if ``x`` itself
reads a position several times, e.g. an expanded ``x``, that position's gradient is shared
equally among them, again as PyTorch does).
"""
from __future__ import annotations

import math

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor, _dim, _sizes
from .shape import IndexAdd


# -- numpy arrays over storage bytes ----------------------------------------------------------
def strided_array(flat: np.ndarray, shape, strides, offset: int) -> np.ndarray:
    """A numpy view of the 1-D array ``flat`` with ``shape``, element ``strides`` and element
    ``offset`` (no copy; writable if ``flat`` is). The caller checked the bounds."""
    item = flat.itemsize
    if math.prod(shape) == 0:  # an empty view reads nothing: its offset may lie past the end of flat
        offset = min(offset, flat.size)  # (a diagonal of an empty unfold, mapped onto element numbers)
    return np.ndarray(tuple(shape), flat.dtype, buffer=flat, offset=offset * item,
                      strides=tuple(s * item for s in strides))


def check_bounds(storage_size: int, shape, strides, offset: int, itemsize: int, op: str) -> None:
    """Raise if the layout reads outside a storage of ``storage_size`` elements."""
    shape, strides = tuple(shape), tuple(strides)
    if len(shape) != len(strides):
        raise RuntimeError(f"{op}: mismatch in length of strides and shape ({len(strides)} strides "
                           f"for {len(shape)} sizes)")
    if any(n < 0 for n in shape):
        raise RuntimeError(f"{op}: sizes must be non-negative, got {list(shape)}")
    if offset < 0:
        raise RuntimeError(f"{op}: storage_offset must be non-negative, got {offset}")
    if math.prod(shape) == 0:
        if offset > storage_size:
            raise RuntimeError(f"{op}: storage_offset {offset} is past the end of the storage "
                               f"({storage_size} elements)")
        return
    lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    if lo < 0 or hi >= storage_size:
        raise RuntimeError(
            f"{op}: sizes {list(shape)}, strides {list(strides)} and storage offset {offset} reach "
            f"elements {lo} .. {hi} of the storage (bytes {lo * itemsize} .. {(hi + 1) * itemsize}), "
            f"but the storage holds only {storage_size} elements ({storage_size * itemsize} bytes): "
            "the view would read outside it")


def writable(t: Tensor) -> np.ndarray:
    """``t``'s elements as a writable numpy array over the same bytes.

    ``t._data`` is read-only when numpy made it from a broadcast (``expand``) — even for a
    slice of it that no longer overlaps itself; this rebuilds the same view from the
    storage's (writable) flat array.
    """
    data = t._data
    if data.flags.writeable:
        return data
    return strided_array(t._storage.data, data.shape, t.stride(), t.storage_offset())


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _element_numbers(shape, geometry) -> tuple:
    """For a view made from a tensor of ``shape`` by ``geometry`` ((shape, strides, offset) ->
    the view's), which element each view element reads: an advanced-index key into ``shape``.
    (The same geometry, applied to the numbers 0, 1, 2, ... laid out contiguously.)"""
    view_shape, strides, offset = geometry(shape, _contiguous_strides(shape), 0)
    numbers = np.arange(max(math.prod(shape), 1), dtype=np.int64)
    idx = strided_array(numbers, view_shape, strides, offset)
    return np.unravel_index(idx, shape) if len(shape) else ()


class _GeometryView(Function):
    """A view given by a geometry function (shape, strides, offset) -> (shape', strides',
    offset'); the backward scatter-adds into the input's elements (overlaps add up)."""

    is_view = True

    @staticmethod
    def forward(ctx, x, geometry):
        ctx.shape, ctx.geometry = x.shape, geometry
        shape, strides, offset = geometry(x.shape, x.stride(), x.storage_offset())
        return strided_array(x._storage.data, shape, strides, offset)

    @staticmethod
    def backward(ctx, g):
        return IndexAdd.apply(g, ctx.shape, _element_numbers(ctx.shape, ctx.geometry))


class Diagonal(_GeometryView):
    """z = the diagonal of x over ``dim1, dim2`` (stride ``s1 + s2``, a view);
    dz/dx: g written onto that diagonal of zeros."""


class Unfold(_GeometryView):
    """z = the sliding windows of x along one dimension (a view; windows may overlap);
    dz/dx: each window's gradient added back where it was read (overlaps add up)."""


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal ``x[..., i, i + offset]`` over ``dim1`` and ``dim2``, as a last dimension
    (``offset > 0`` above the main diagonal, ``< 0`` below). A view, as in PyTorch."""
    if x.ndim < 2:
        raise RuntimeError(f"diagonal: the tensor must have at least 2 dimensions, got {x.ndim} "
                           f"(shape {list(x.shape)})")
    d1, d2 = _dim(dim1, x.ndim, "diagonal"), _dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = int(offset)

    def geometry(shape, strides, start):
        n1, n2 = shape[d1], shape[d2]
        if offset >= 0:
            length, first = max(0, min(n1, n2 - offset)), start + offset * strides[d2]
        else:
            length, first = max(0, min(n1 + offset, n2)), start - offset * strides[d1]
        keep = [d for d in range(len(shape)) if d not in (d1, d2)]
        return ([shape[d] for d in keep] + [length], [strides[d] for d in keep] + [strides[d1] + strides[d2]],
                first if length else start)  # an empty diagonal stays at x's offset, as in PyTorch

    return Diagonal.apply(x, geometry)


def unfold(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Windows of ``size`` elements every ``step`` elements along ``dimension``: shape
    ``[..., (n - size) // step + 1, ..., size]`` (a view; PyTorch's ``Tensor.unfold``)."""
    if x.ndim == 0:  # as in PyTorch: dimension 0 (or -1) holds one window, of shape [size]
        return unfold(x.reshape(1), _dim(dimension, 0, "unfold"), size, step)[0]
    d = _dim(dimension, x.ndim, "unfold")
    size, step = _whole("unfold", "size", size), _whole("unfold", "step", step)
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > x.shape[d]:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {x.shape[d]} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")

    def geometry(shape, strides, start):
        shape, strides = list(shape), list(strides)
        count = (shape[d] - size) // step + 1
        return (shape[:d] + [count] + shape[d + 1:] + [size],
                strides[:d] + [strides[d] * step] + strides[d + 1:] + [strides[d]], start)

    return Unfold.apply(x, geometry)


# -- as_strided ---------------------------------------------------------------------------------
class AsStrided(Function):
    """z = the storage read with any (size, stride, storage_offset);  dz/dx: scatter-add g into
    a storage-shaped buffer at z's positions, then read that buffer at x's positions."""

    is_view = True

    @staticmethod
    def forward(ctx, x, size, stride, storage_offset):
        storage = x._storage
        item = x._data.itemsize
        check_bounds(storage.nbytes // item, size, stride, storage_offset, item, "as_strided")
        ctx.src = (tuple(size), tuple(stride), storage_offset)
        ctx.dst = (x.shape, x.stride(), x.storage_offset())
        return strided_array(storage.data, size, stride, storage_offset)

    @staticmethod
    def backward(ctx, g):
        src, dst = _addresses(*ctx.src), _addresses(*ctx.dst)
        lo = min(src.min(initial=0), dst.min(initial=0))
        counts = None
        if dst.size:
            _, inverse, repeat = np.unique(dst, return_inverse=True, return_counts=True)
            if repeat.max() > 1:  # x reads some positions several times (e.g. expanded)
                counts = 1.0 / repeat[inverse].reshape(dst.shape)
        return Regather.apply(g, src - lo, dst - lo, None, counts)


def _addresses(shape, strides, offset) -> np.ndarray:
    addr = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        addr += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return addr


class Regather(Function):
    """z[j] = w_dst[j] · Σ_{i: src[i] = dst[j]} w_src[i] · g[i] — scatter-add ``g`` into a flat
    buffer at positions ``src``, read it back at positions ``dst`` (optional weights).
    Linear in g; its backward is the same op with src and dst (and the weights) swapped."""

    @staticmethod
    def forward(ctx, g, src, dst, w_src, w_dst):
        ctx.args = src, dst, w_src, w_dst
        size = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        buf = np.zeros(size, dtype=g.dtype)
        values = g._data if w_src is None else g._data * w_src
        np.add.at(buf, src.ravel(), np.broadcast_to(values, src.shape).ravel())
        out = buf[dst]
        return out if w_dst is None else (out * w_dst).astype(g.dtype, copy=False)

    @staticmethod
    def backward(ctx, gg):
        src, dst, w_src, w_dst = ctx.args
        return Regather.apply(gg, dst, src, w_dst, w_src)


def as_strided(x: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view of ``x``'s storage with the given sizes, strides (elements) and storage offset
    (default: ``x``'s own). Bounds-checked against the storage; negative strides allowed."""
    size = _sizes("as_strided", (size,))
    stride = tuple(_whole("as_strided", "stride", s) for s in stride)
    offset = x.storage_offset() if storage_offset is None else _whole("as_strided", "storage_offset",
                                                                      storage_offset)
    return AsStrided.apply(x, size, stride, offset)


def _whole(op: str, name: str, n) -> int:
    """An int argument (a float is a TypeError, not silently truncated)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(n).__name__} ({n!r})")
    return int(n)
