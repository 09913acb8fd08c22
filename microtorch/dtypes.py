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


# numpy integer widths microtorch has no dtype for, but whose values int64 holds exactly:
# a copy (mt.tensor, mt.load) widens them; a zero-copy view (mt.from_numpy) cannot
_WIDENED = {np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16, np.uint32)}


def of_array(dtype: np.dtype, copy: bool = True) -> np.dtype:
    """The microtorch dtype for numpy data of ``dtype``, or PyTorch's TypeError.

    Supported dtypes map to themselves; with ``copy`` (the values are copied anyway) the
    narrower integer types widen to int64. Everything else — complex, strings, datetimes,
    objects, uint64 (whose values int64 cannot hold) — is refused, as PyTorch refuses the
    types it has no tensor for: "can't convert np.ndarray of type numpy.complex128. The
    only supported types are: ...". Used by ``mt.tensor``, ``mt.from_numpy`` and ``mt.load``.
    """
    dtype = np.dtype(dtype)
    if dtype.name in _ALL:
        if dtype.isnative:
            return dtype
        if copy:  # big-endian bytes: the copy is in native order
            return dtype.newbyteorder("=")
        raise TypeError(f"can't view a numpy array of byte order {dtype.byteorder!r} (not this "
                        "machine's) without copying; pass array.astype(array.dtype.newbyteorder('=')) "
                        "or use mt.tensor(array), which copies")
    if copy and dtype.newbyteorder("=") in _WIDENED:
        return int64
    allowed = ["float64", "float32", "float16", "int64", "int32"]
    if copy:
        allowed += ["int16", "int8", "uint32", "uint16", "uint8"]
    raise TypeError(f"can't convert np.ndarray of type numpy.{dtype.type.__name__}. The only supported "
                    f"types are: {', '.join(allowed)}, and bool."
                    + " (microtorch has no complex, string, date, object or uint64 tensors; "
                    "convert the array first, e.g. array.astype(np.float32), or array.real for complex data)"
                    + ("" if copy else "; mt.from_numpy shares the array's bytes, so an integer "
                       "array of another width needs mt.tensor(array), which copies"))
