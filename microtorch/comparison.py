"""Comparisons (``<``, ``==``, ...): bool tensors, outside the graph (they have no gradient)."""
from __future__ import annotations

import numpy as np

from .tensor_base import TensorBase as Tensor
from .functions.broadcast import broadcast_error, operands

_NUMPY = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "eq": np.equal, "ne": np.not_equal}


def compare(op: str, a, b) -> Tensor:
    a, b = operands(a, b)
    try:
        return Tensor._wrap(np.asarray(_NUMPY[op](a._data, b._data)))
    except ValueError:
        raise broadcast_error(op, a, b) from None


def logical_not(x: Tensor) -> Tensor:
    """``~mask``: True where ``x`` is False (or zero)."""
    return Tensor._wrap(np.logical_not(x._data))


def logical_and(a, b) -> Tensor:
    a, b = operands(a, b)
    return Tensor._wrap(np.logical_and(a._data, b._data))


def logical_or(a, b) -> Tensor:
    a, b = operands(a, b)
    return Tensor._wrap(np.logical_or(a._data, b._data))


# -- ~, &, | : bitwise, as in PyTorch (logical on bool tensors, bitwise on integers) -------------
def _bitwise(op: str, fn, *args) -> Tensor:
    ts = operands(*args) if len(args) == 2 else args
    if ts[0].dtype.kind not in "biu":  # (PyTorch: a TypeError for ~, NotImplementedError for & and |)
        raise (TypeError if len(ts) == 1 else NotImplementedError)(f'"{op}" is only supported for integer and bool tensors, got '
                        f"{ts[0].dtype.name} (for a mask write (x > 0); for logic on floats use "
                        "mt.logical_not / logical_and / logical_or)")
    try:
        return Tensor._wrap(np.asarray(fn(*[t._data for t in ts])))
    except ValueError:
        raise broadcast_error(op, *ts) from None


def bitwise_not(x: Tensor) -> Tensor:
    """``~x``: logical not of a bool tensor, bitwise not of an integer one (PyTorch's rule)."""
    return _bitwise("bitwise_not", np.invert, x)


def bitwise_and(a, b) -> Tensor:
    """``a & b``: logical and of bool tensors, bitwise and of integers."""
    return _bitwise("bitwise_and", np.bitwise_and, a, b)


def bitwise_or(a, b) -> Tensor:
    """``a | b``: logical or of bool tensors, bitwise or of integers."""
    return _bitwise("bitwise_or", np.bitwise_or, a, b)
