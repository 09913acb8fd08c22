"""Broadcasting: how operands meet in an op, and how gradients go back to each operand.

Forward, numpy broadcasts (PyTorch's rules are the same: align trailing dimensions; each
pair must be equal or one of them 1). Backward, a gradient arrives with the *output's*
shape, so each operand's gradient must be summed over the dimensions broadcasting
invented or stretched — :func:`unbroadcast`.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..creation import tensor
from ..tensor_base import TensorBase as Tensor


def unbroadcast(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``g`` down to ``shape``: over leading dims broadcasting added, and over dims
    where ``shape`` has 1 but ``g`` does not.  d(sum_j y_j)/dx = sum over copies of x."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    g = g.sum(dim=tuple(range(lead)) + stretched, keepdim=True)
    return g.reshape(shape)


def broadcast_error(op: str, a: Tensor, b: Tensor) -> RuntimeError:
    """The error for operands whose shapes do not broadcast, naming both shapes and the op."""
    sa, sb = a.shape, b.shape
    for i in range(1, min(len(sa), len(sb)) + 1):
        if sa[-i] != sb[-i] and 1 not in (sa[-i], sb[-i]):
            where = f"at dimension {-i}: {sa[-i]} vs {sb[-i]}"
            break
    return RuntimeError(f"{op}: shapes {list(sa)} and {list(sb)} cannot be broadcast together ({where}); "
                        "each trailing dimension must be equal, or 1 in one of them")


def broadcastable(a: Tensor, b: Tensor) -> bool:
    """Whether the shapes of ``a`` and ``b`` broadcast together."""
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return False
    return True


def as_tensor_like(value, like: Tensor) -> Tensor:
    """A Python/numpy scalar (or array-like) as a constant tensor that meets ``like``.

    Scalars are "weak" as in PyTorch: ``float32_tensor * 2.5`` stays float32; an integer
    tensor times a float scalar becomes the default float dtype.
    """
    if isinstance(value, (numbers.Real, np.bool_)) and not isinstance(value, np.timedelta64):
        kind = like.dtype.kind
        if isinstance(value, (bool, np.bool_)) or kind == "f":
            dtype = like.dtype
        elif isinstance(value, numbers.Integral):  # (np.integer registers as one)
            dtype = like.dtype if kind != "b" else dtypes.int64  # bool tensor + 2 is int64, as in PyTorch
        else:
            dtype = dtypes.default_float
        return Tensor._wrap(np.array(value, dtype=dtype))
    if isinstance(value, (numbers.Number, np.generic)):
        raise TypeError(f"cannot combine a Tensor with {type(value).__name__} {value!r}: microtorch "
                        "computes with real numbers (bool, int, float) only")
    try:
        return tensor(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"cannot combine a Tensor with {type(value).__name__}: {e}") from None


def operands(a, b) -> tuple[Tensor, Tensor]:
    """Both operands as tensors of one dtype (float beats int; wider float beats narrower)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype == b._data.dtype:
        return a, b  # the common case, decided at once
    if not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    elif not isinstance(a, Tensor):
        a = as_tensor_like(a, b)
    if a.dtype != b.dtype:
        if (a.ndim == 0) != (b.ndim == 0) and _category(a.dtype) == _category(b.dtype):
            # PyTorch: a 0-d tensor does not widen a dimensioned one of its own kind (f32 (3,) + f64 () is f32)
            dtype = b.dtype if a.ndim == 0 else a.dtype
        else:
            dtype = promoted_dtype((a.dtype, b.dtype))
        a, b = a.to(dtype), b.to(dtype)
    return a, b


def promoted_dtype(dtypes) -> np.dtype:
    """PyTorch's dtype for tensors combined (an op's operands, tensors joined by ``cat``): the
    highest kind among them (float beats int beats bool, whatever the widths), and the widest
    dtype of that kind — so int64 with float32 is float32 (numpy's rule would widen to float64)."""
    top = max(_category(d) for d in dtypes)
    return np.result_type(*[d for d in dtypes if _category(d) == top])


def _category(dtype) -> int:
    return 2 if dtype.kind == "f" else 1 if dtype.kind in "iu" else 0
