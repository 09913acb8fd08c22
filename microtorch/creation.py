"""Making tensors: from data, filled, ranges, random (seeded), and zero-copy from numpy."""
from __future__ import annotations

import numbers

import numpy as np

from . import dtypes
from .memory.storage import Storage
from .tensor_base import TensorBase as Tensor, _sizes


def _new(array: np.ndarray, requires_grad: bool) -> Tensor:
    t = Tensor._wrap(array, tag="tensor")
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(array: np.ndarray, data):
    """PyTorch's inference: Python floats → float32; ints → int64; bools → bool;
    a numpy array keeps its dtype (narrow integers widen to int64; int32 stays, as in PyTorch)."""
    if isinstance(data, (np.ndarray, np.generic)):
        return dtypes.of_array(array.dtype)
    if array.dtype.kind == "f":
        return dtypes.default_float
    if array.dtype.kind in "iu":
        if array.dtype == np.uint64:  # numpy's type for Python ints past int64's range
            raise RuntimeError("Overflow when unpacking long: an integer in the data does not fit "
                               "in int64; pass floats (or dtype=mt.float64) for such values")
        return dtypes.int64
    if array.dtype.kind == "b":
        return dtypes.bool_
    raise TypeError(f"cannot make a tensor from {type(data).__name__} data "
                    f"(numpy sees dtype {array.dtype}); give numbers or nested lists of numbers")


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays, tensors)."""
    if isinstance(data, Tensor):
        data = data._data
    try:
        array = np.array(data)
    except ValueError:
        raise ValueError(f"tensor(): {_ragged(data)}; nested lists must be rectangular "
                         "(every row of a dimension the same length)") from None
    inferred = _infer_dtype(array, data)  # refuses complex, strings, dates, objects, uint64
    target = dtypes.as_dtype(dtype) if dtype is not None else inferred
    return _new(np.array(array, dtype=target, order="C"), requires_grad)


def _ragged(data) -> str:
    """Where nested lists stop being rectangular, in PyTorch's words: "expected sequence of
    length 2 at dim 1 (got 1)" (the expected lengths come from the first elements)."""
    shape, d = [], data
    while isinstance(d, (list, tuple)) and d:
        shape.append(len(d))
        d = d[0]

    def walk(d, dim):
        if dim == len(shape):
            return None if np.ndim(d) == 0 or isinstance(d, str) else \
                f"expected a number at dim {dim} (got a sequence of length {len(d)})"
        if not isinstance(d, (list, tuple)):
            return f"expected sequence of length {shape[dim]} at dim {dim} (got {type(d).__name__})"
        if len(d) != shape[dim]:
            return f"expected sequence of length {shape[dim]} at dim {dim} (got {len(d)})"
        return next((r for r in (walk(e, dim + 1) for e in d) if r), None)

    return walk(data, 0) or "the data is not rectangular"


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor over ``array``'s own bytes: writes through one are seen by the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    dtypes.of_array(array.dtype, copy=False)  # PyTorch's error for dtypes microtorch has no tensor for
    if not array.flags.c_contiguous:
        raise ValueError("from_numpy: the array is not C-contiguous, so microtorch cannot view it "
                         "without copying; pass np.ascontiguousarray(array) (a copy) instead")
    return Tensor._over(array, Storage(array.reshape(-1), None, "tensor"))  # numpy keeps owning the bytes


def zeros(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    return _new(np.zeros(_sizes("zeros", size), dtype=dtypes.as_dtype(dtype)), requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    return _new(np.ones(_sizes("ones", size), dtype=dtypes.as_dtype(dtype)), requires_grad)


def empty(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    return _new(np.empty(_sizes("empty", size), dtype=dtypes.as_dtype(dtype)), requires_grad)


def _number(op: str, name: str, value) -> None:
    if not isinstance(value, (numbers.Real, np.number, np.bool_)):
        raise TypeError(f"{op}(): argument '{name}' must be a number, got {type(value).__name__} ({value!r})")


def _count(op: str, name: str, value) -> int:
    """A non-negative whole number (steps, n, m): PyTorch's TypeError / RuntimeError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(value).__name__} ({value!r})")
    if value < 0:
        raise RuntimeError(f"{op}(): {name} must be greater or equal to 0, got {value}")
    return int(value)


def full(size, fill_value, dtype=None, requires_grad: bool = False) -> Tensor:
    _number("full", "fill_value", fill_value)
    if dtype is None:
        dtype = (dtypes.bool_ if isinstance(fill_value, bool) else dtypes.int64
                 if isinstance(fill_value, numbers.Integral) else dtypes.default_float)
    return _new(np.full(_sizes("full", (size,)), fill_value, dtype=dtypes.as_dtype(dtype)), requires_grad)


def zeros_like(t: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, requires_grad: bool = False) -> Tensor:
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad: bool = False) -> Tensor:
    """``arange(5)`` → 0..4; integer arguments give int64, any float gives float32 (PyTorch)."""
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        _number("arange", name, value)
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = dtypes.int64 if ints else dtypes.default_float
    return _new(np.arange(start, end, step).astype(dtypes.as_dtype(dtype)), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` (both included)."""
    _number("linspace", "start", start)
    _number("linspace", "end", end)
    if not isinstance(steps, bool) and isinstance(steps, (numbers.Integral, np.integer)) and steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    steps = _count("linspace", "steps", steps)
    return _new(np.linspace(start, end, steps).astype(dtypes.as_dtype(dtype)), requires_grad)


def eye(n, m=None, dtype=None, requires_grad: bool = False) -> Tensor:
    """The n×m identity matrix (m = n by default)."""
    n = _count("eye", "n", n)
    m = n if m is None else _count("eye", "m", m)
    return _new(np.eye(n, m, dtype=dtypes.as_dtype(dtype)), requires_grad)


# -- random numbers ----------------------------------------------------------------------------
class Generator:
    """A seeded source of random numbers (numpy's PCG64 underneath).

    ``g = mt.Generator().manual_seed(0)``; pass ``generator=g`` to random functions, or use
    ``mt.manual_seed(0)`` to seed the default generator. Same seed → same numbers.
    """

    def __init__(self, seed: int | None = None):
        self.manual_seed(0 if seed is None else seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    @property
    def rng(self) -> np.random.Generator:
        return self._rng


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (what ``randn`` etc. use without ``generator=``)."""
    return default_generator.manual_seed(seed)


def _rng(generator):
    return (generator or default_generator).rng


def _float_dtype(dtype):
    d = dtypes.as_dtype(dtype)
    if d.kind != "f" or d == dtypes.float16:
        raise TypeError(f"random floats come as float32 or float64, not {d.name}")
    return d


def randn(*size, dtype=None, generator=None, requires_grad: bool = False) -> Tensor:
    """Samples of the standard normal distribution N(0, 1)."""
    a = _rng(generator).standard_normal(_sizes("randn", size), dtype=_float_dtype(dtype))
    return _new(a, requires_grad)


def rand(*size, dtype=None, generator=None, requires_grad: bool = False) -> Tensor:
    """Samples of the uniform distribution on [0, 1)."""
    a = _rng(generator).random(_sizes("rand", size), dtype=_float_dtype(dtype))
    return _new(a, requires_grad)


def randint(low, high=None, size=(), dtype=None, generator=None) -> Tensor:
    """Integers uniform on [low, high) (``randint(high, size)`` starts at 0)."""
    if isinstance(high, (tuple, list)):  # PyTorch's randint(high, size)
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
            raise TypeError(f"randint(): argument '{name}' must be int, not {type(value).__name__} ({value!r})")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high} "
                           "(randint draws from [low, high): high must be larger)")
    a = _rng(generator).integers(low, high, size=_sizes("randint", (size,)) if size != () else ())
    return _new(a.astype(dtypes.as_dtype(dtype or dtypes.int64)), False)


def randperm(n: int, generator=None) -> Tensor:
    n = _count("randperm", "n", n)
    return _new(_rng(generator).permutation(n).astype(np.int64), False)


def randn_like(t: Tensor, generator=None, requires_grad: bool = False) -> Tensor:
    return randn(t.shape, dtype=t.dtype, generator=generator, requires_grad=requires_grad)


def rand_like(t: Tensor, generator=None, requires_grad: bool = False) -> Tensor:
    return rand(t.shape, dtype=t.dtype, generator=generator, requires_grad=requires_grad)
