"""Data types: microtorch's dtypes are numpy dtypes, named like PyTorch's.

``float32`` is the default floating type (as in PyTorch); ``float64`` is what gradient
checks use. Integers and booleans exist for indices, targets and masks; they cannot
require gradients.
"""
from __future__ import annotations

import builtins

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
float16 = np.dtype(np.float16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
float = float32  # noqa: A001  (PyTorch aliases: torch.float, torch.double, torch.long)
double = float64
long = int64

default_float = float32

_ALL = {d.name: d for d in (float16, float32, float64, int32, int64, bool_)}


def as_dtype(dtype) -> np.dtype:
    """Turn ``mt.float64``, ``np.float64``, ``"float64"`` or ``float`` into a dtype, or explain."""
    if dtype is None:
        return default_float
    if dtype is builtins.float:
        return default_float
    if dtype is builtins.int:
        return int64
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is None or d.name not in _ALL:
        raise TypeError(
            f"unsupported dtype {dtype!r}; microtorch supports {', '.join(sorted(_ALL))}"
        )
    return d


def is_floating(dtype: np.dtype) -> bool:
    """True for the float dtypes, the only ones that can carry gradients."""
    return dtype.kind == "f"


def name(dtype: np.dtype) -> str:
    """``float32`` -> ``mt.float32`` for reprs and error messages."""
    return f"mt.{dtype.name}"
