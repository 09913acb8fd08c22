"""Every op of microtorch, forward and backward side by side, grouped by concept.

The ops sit between :mod:`microtorch.node` (the op contract) and :mod:`microtorch.tensor`
(whose methods call them): they import the tensor base (:mod:`microtorch.tensor_base`),
never ``tensor.py``. An op with an in-place form declares it on its class
(``inplace_variant``); :mod:`.inplace_ops` derives the in-place op from it where it can.
"""
from .broadcast import unbroadcast
from .elementwise import (abs, add, clamp, clone, div, exp, floor_divide, log, maximum, minimum, mul,
                          neg, pow, relu, remainder, sigmoid, sqrt, sub, tanh, where)
from .linalg import linear, matmul
from .loss import cross_entropy, log_softmax, mse_loss, nll_loss, softmax
from .reduction import amax, amin, max, mean, min, sum, var
from .shape import (broadcast_to, cat, expand, flatten, index, permute, reshape, squeeze, stack,
                    transpose, unsqueeze, view)
from .strided import as_strided, diagonal, unfold
from . import inplace  # noqa: F401 — add_, mul_, ..., copy_ and t[idx] = v (Tensor's in-place methods call them)

__all__ = [name for name in dir() if not name.startswith("_")]
