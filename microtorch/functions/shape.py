"""Shape ops. Most are *views*: the output reads the input's storage with other strides
(zero-copy), so they cost no bytes. Their backward puts the gradient back into the
input's shape.
"""
from __future__ import annotations

import numpy as np

from ..node import Function
from ..tensor_base import TensorBase as Tensor, _dim, _sizes
from .broadcast import promoted_dtype, unbroadcast


def _dims_arg(op: str, dims) -> tuple[int, ...]:
    """Accept ``f(1, 0)`` and ``f((1, 0))`` like PyTorch; each dim an int."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    for i, d in enumerate(dims):
        if not isinstance(d, (int, np.integer)):
            raise TypeError(f"{op}(): argument 'dims' must be tuple of ints, but found element of "
                            f"type {type(d).__name__} at pos {i}")
    return tuple(int(d) for d in dims)


def _bad_shape(shape, x) -> RuntimeError:
    if list(shape).count(-1) > 1:
        return RuntimeError(f"only one dimension can be inferred (shape {list(shape)} has several -1)")
    return RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.numel()} "
                        f"(input shape {list(x.shape)})")


class View(Function):
    """z = x read with a new shape, never copying;  dz/dx: reshape the gradient back."""

    is_view = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x._data.reshape(shape, copy=False)
        except ValueError:
            known = int(np.prod([n for n in shape if n != -1]))
            fits = (known > 0 and x.numel() % known == 0) if -1 in shape else known == x.numel()
            if fits and shape.count(-1) < 2:  # the size is right, so the strides are what forbid a view
                raise RuntimeError(
                    f"view size is not compatible with input tensor's size and stride (at least one "
                    f"dimension spans across two contiguous subspaces): shape {list(x.shape)} with "
                    f"strides {list(x.stride())} cannot be viewed as {list(shape)}. "
                    "Use .reshape(...) instead (it copies when it must).") from None
            raise _bad_shape(shape, x) from None

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Reshape(Function):
    """Like :class:`View` but copies when the strides do not allow a view."""

    is_view = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x._data.reshape(shape)
        except ValueError:
            raise _bad_shape(shape, x) from None

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Permute(Function):
    """z = x with its dimensions reordered (strides permuted);  dz/dx: the inverse permutation."""

    is_view = True

    @staticmethod
    def forward(ctx, x, dims):
        n = x.ndim
        dims = tuple(d % n if -n <= d < n else d for d in dims) if n else tuple(dims)
        if sorted(dims) != list(range(n)):
            raise RuntimeError(f"permute: dims {list(dims)} must be a permutation of "
                               f"0..{n - 1} for a tensor of shape {list(x.shape)}")
        inverse = [0] * n
        for i, d in enumerate(dims):
            inverse[d] = i
        ctx.inverse = tuple(inverse)
        return x._data.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        return g.permute(*ctx.inverse)


class Transpose(Function):
    """z = x with two dimensions swapped (a view);  dz/dx: swap them back."""

    is_view = True

    @staticmethod
    def forward(ctx, x, dim0, dim1):
        ctx.dims = _dim(dim0, x.ndim, "transpose"), _dim(dim1, x.ndim, "transpose")
        return x._data.swapaxes(*ctx.dims) if x.ndim else x._data.view()  # a 0-d tensor: itself

    @staticmethod
    def backward(ctx, g):
        return g.transpose(*ctx.dims)


class Unsqueeze(Function):
    """z = x with a new dimension of size 1 at ``dim``;  dz/dx: drop it again."""

    is_view = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = _dim(dim, x.ndim + 1, "unsqueeze", new=True)
        return np.expand_dims(x._data, ctx.dim)

    @staticmethod
    def backward(ctx, g):
        return g.squeeze(ctx.dim)


class Squeeze(Function):
    """z = x without size-1 dimensions (all, or the ones named);  dz/dx: reshape back."""

    is_view = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.shape = x.shape
        if dim is None:
            return np.squeeze(x._data)
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(d for d in (_dim(d, x.ndim, "squeeze") for d in dims) if x.ndim and x.shape[d] == 1)
        return np.squeeze(x._data, axis=dims) if dims else x._data.view()

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Expand(Function):
    """z = x repeated along size-1 (or new leading) dims with stride 0 — no bytes copied;
    dz/dx = the sum of the gradient over the copies."""

    is_view = True

    @staticmethod
    def forward(ctx, x, shape):
        lead = len(shape) - x.ndim
        if lead < 0:
            raise RuntimeError(f"expand: the number of sizes provided ({len(shape)}) must be greater "
                               f"or equal to the number of dimensions in the tensor ({x.ndim})")
        if -1 in shape[:lead]:
            raise RuntimeError(f"expand: the expanded size of the tensor (-1) isn't allowed in a leading, "
                               f"non-existing dimension {shape.index(-1)} (shape {list(shape)})")
        target = shape if -1 not in shape else tuple(x.shape[i - lead] if n == -1 and i >= lead else n
                                                     for i, n in enumerate(shape))
        ctx.shape = x.shape
        try:
            return _broadcast(x._data, target)
        except ValueError:
            raise RuntimeError(f"expand: the expanded size {list(shape)} must match the existing size "
                               f"{list(x.shape)} at every non-singleton dimension") from None

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shape)


def _broadcast(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(a, shape)``: a read-only view of ``a`` with stride 0 along new dims
    and size-1 dims (as numpy sets them). Built straight from the strides when ``a`` is
    contiguous (a fast path: numpy's own walks an nditer, twice as long); anything else, and
    shapes that do not broadcast (ValueError), go to numpy."""
    lead = len(shape) - a.ndim
    strides = [0] * lead
    for n, m, step in zip(shape[lead:], a.shape, a.strides):
        if n != m and m != 1:
            return np.broadcast_to(a, shape)
        strides.append(0 if m == 1 else step)
    try:
        view = np.ndarray(shape, a.dtype, a, 0, strides)
    except ValueError:  # a is not contiguous, or a size is negative
        return np.broadcast_to(a, shape)
    view.flags.writeable = False
    return view


def _index_key(key):
    """Tensors inside an index become numpy arrays and numpy arrays are copied (backward
    reads the key later: a change to the caller's array must not change the gradient);
    everything else passes through."""
    if isinstance(key, tuple):
        return tuple(_index_key(k) for k in key)
    if isinstance(key, Tensor):
        return key.detach().numpy()  # holds a storage reference: backward reads it later
    if isinstance(key, np.ndarray):
        return key.copy()
    if isinstance(key, list):
        array = np.asarray(key)
        # an empty list selects nothing (PyTorch: an empty index); numpy would read it as floats
        return array.astype(np.int64) if array.size == 0 and array.dtype.kind == "f" else array
    return key


def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _dims_taken(k) -> int:
    """How many of the indexed tensor's dimensions key entry ``k`` uses up (a mask: its ndim)."""
    if isinstance(k, Tensor):
        return k.ndim if k.dtype == np.bool_ else 1
    if isinstance(k, (list, np.ndarray)):
        array = np.asarray(k)
        return array.ndim if array.dtype == np.bool_ else 1
    return 1


def ints_first(key):
    """PyTorch's order for a key holding both integers and index arrays: the integers select
    first (each drops its dimension), then the rest of the key indexes what is left. numpy
    instead counts such an integer as one more index array, and when the arrays are not side
    by side it moves their dimension to the front: ``x[0, :, [1, 2]]`` of a (2, 3, 4) tensor is
    (2, 3) in numpy, (3, 2) in PyTorch. Returns (the integers' key, the rest of the key), or
    None when no integer sits beside an index array (numpy and PyTorch then agree)."""
    keys = key if isinstance(key, tuple) else (key,)
    arrays = any(isinstance(k, (list, np.ndarray, Tensor)) for k in keys)
    if not arrays or not any(_is_int(k) for k in keys):
        return None
    first = []
    for k in keys:
        if k is Ellipsis or _is_int(k):
            first.append(k)
        elif k is not None:  # None adds a dimension: it takes none of x's
            first.extend([slice(None)] * _dims_taken(k))
    return tuple(first), tuple(k for k in keys if not _is_int(k))


def _index_tensors(key) -> tuple:
    """The tensors inside an index (integer arrays, boolean masks). An op indexing with them
    saves them for backward, as PyTorch does: an in-place change to one before backward
    raises the version error instead of scattering the gradient to the wrong places."""
    return tuple(k for k in (key if isinstance(key, tuple) else (key,)) if isinstance(k, Tensor))


def _is_advanced(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, np.ndarray) for k in keys)


class Index(Function):
    """z = x[key]. Basic indexing (ints, slices, None, ...) is a view; integer-array or
    boolean-mask indexing copies. dz/dx: scatter-add the gradient into zeros of x's shape
    (repeated indices receive the sum).

    Slices may have negative steps (``x[::-1]`` is a view with a negative stride), as in
    numpy. PyTorch refuses them ("step must be greater than zero"); microtorch allows them
    on purpose, and every stride-aware part of it (alias analysis, ``as_strided``, in-place
    writes) handles negative strides."""

    is_view = True

    @staticmethod
    def forward(ctx, x, key, index_tensors=()):
        ctx.shape, ctx.key = x.shape, key
        if index_tensors:
            ctx.save_for_backward(*index_tensors)  # for their versions (see _index_tensors)
        try:
            out = x._data[key]
            if not isinstance(out, np.ndarray):  # an all-integer key: numpy gives a scalar copy,
                out = x._data[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]  # PyTorch a 0-d view
            return out
        except IndexError as e:
            raise IndexError(f"{e} (indexing a tensor of shape {list(x.shape)})".replace("axis", "dimension")) from None

    @staticmethod
    def backward(ctx, g):
        ctx.saved_arrays()  # raises if an index tensor was written in place since forward
        return IndexAdd.apply(g, ctx.shape, ctx.key)


class IndexAdd(Function):
    """z = zeros(shape) with g added at ``key`` (the backward of indexing);  dz/dg = z[key]."""

    @staticmethod
    def forward(ctx, g, shape, key):
        ctx.key = key
        out = np.zeros(shape, dtype=g.dtype)
        if _is_advanced(key):
            np.add.at(out, key, g._data)
        else:
            out[key] = g._data
        return out

    @staticmethod
    def backward(ctx, gg):
        return gg[ctx.key]


class Cat(Function):
    """z = the inputs joined along ``dim``;  each input's gradient is its slice of g."""

    @staticmethod
    def forward(ctx, *tensors, dim=0):
        if not tensors:
            raise RuntimeError("cat: expected a non-empty list of tensors")
        d = _dim(dim, tensors[0].ndim, "cat")
        ctx.dim, ctx.sizes = d, [t.shape[d] if t.ndim else 0 for t in tensors]
        try:
            return np.concatenate([t._data for t in tensors], axis=d)
        except ValueError:
            shapes = ", ".join(str(list(t.shape)) for t in tensors)
            raise RuntimeError(f"cat: tensors must have the same shape except in dimension {dim}; "
                               f"got {shapes}") from None

    @staticmethod
    def backward(ctx, g):
        grads, start = [], 0
        for n in ctx.sizes:
            idx = (slice(None),) * ctx.dim + (slice(start, start + n),)
            grads.append(g[idx])
            start += n
        return tuple(grads)


# -- the functional API -----------------------------------------------------------------------
def view(x, *shape):
    return View.apply(x, _sizes("view", shape, infer=True))


def reshape(x, *shape):
    return Reshape.apply(x, _sizes("reshape", shape, infer=True))


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = _dim(start_dim, x.ndim, "flatten"), _dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:  # nothing to merge: the tensor itself, as in PyTorch
        return x
    return x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:]) if x.numel() else x.reshape(
        x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:])


def permute(x, *dims):
    return Permute.apply(x, _dims_arg("permute", dims))


def transpose(x, dim0, dim1):
    return Transpose.apply(x, dim0, dim1)


def unsqueeze(x, dim):
    return Unsqueeze.apply(x, dim)


def squeeze(x, dim=None):
    return Squeeze.apply(x, dim)


def expand(x, *sizes):
    return Expand.apply(x, _sizes("expand", sizes, infer=True))


def broadcast_to(x, shape):
    return Expand.apply(x, _sizes("broadcast_to", (shape,), infer=True))


def index(x, key):
    split = ints_first(key)
    if split is not None:  # PyTorch's order: the integers' view first, then the rest
        return index(index(x, split[0]), split[1])
    return Index.apply(x, _index_key(key), _index_tensors(key))


def cat(tensors, dim=0):
    tensors = list(tensors)
    if tensors and len({t.dtype for t in tensors}) > 1:  # PyTorch promotes; the gradients come back in each dtype
        dtype = promoted_dtype([t.dtype for t in tensors])
        tensors = [t if t.dtype == dtype else t.to(dtype) for t in tensors]
    return Cat.apply(*tensors, dim=dim)


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors")
    shapes = {t.shape for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack: expects each tensor to be equal size, but got "
                           f"{', '.join(str(list(t.shape)) for t in tensors)}")
    d = _dim(dim, tensors[0].ndim + 1, "stack", new=True)
    return cat([t.unsqueeze(d) for t in tensors], d)
