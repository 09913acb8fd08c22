"""Comparisons (``<``, ``==``, ...): bool tensors, outside the graph (they have no gradient)."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor

_NUMPY = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "eq": np.equal, "ne": np.not_equal}


def compare(op: str, a, b) -> Tensor:
    from .functions.broadcast import broadcast_error, operands

    a, b = operands(a, b)
    try:
        return Tensor._wrap(np.asarray(_NUMPY[op](a._data, b._data)))
    except ValueError:
        raise broadcast_error(op, a, b) from None


def logical_not(x: Tensor) -> Tensor:
    """``~mask``: True where ``x`` is False (or zero)."""
    return Tensor._wrap(np.logical_not(x._data))


def logical_and(a, b) -> Tensor:
    from .functions.broadcast import operands

    a, b = operands(a, b)
    return Tensor._wrap(np.logical_and(a._data, b._data))


def logical_or(a, b) -> Tensor:
    from .functions.broadcast import operands

    a, b = operands(a, b)
    return Tensor._wrap(np.logical_or(a._data, b._data))
