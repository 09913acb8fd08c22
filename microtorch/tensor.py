"""Tensor: a view (shape, strides, offset, dtype) over a refcounted :class:`Storage`.

The numbers live in a :class:`~microtorch.memory.storage.Storage`; a tensor only says how
to read them. Zero-copy views (``x.T``, ``x[1:]``, ``x.reshape(...)`` of contiguous data,
``x.expand(...)``) are new tensors over the same storage, so ``x.T.storage is x.storage``.

Autograd fields follow PyTorch: ``requires_grad``, ``grad``, ``grad_fn`` (the node that
made this tensor, ``None`` for leaves), ``is_leaf``, ``retain_grad()``, ``backward()``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import dtypes
from . import recording as _trace
from .memory.storage import Storage, empty_storage, new_storage


class Tensor:
    """An n-dimensional array that can record the operations applied to it."""

    __slots__ = ("_data", "_storage", "requires_grad", "_grad", "grad_fn", "_base",
                 "_retains_grad", "name", "_tid", "__weakref__")
    __array_ufunc__ = None  # numpy defers to our reflected operators: np.float64(2) * t is a Tensor
    __hash__ = object.__hash__  # == is elementwise (as in PyTorch), identity is the hash
    is_sparse = False  # a dense (strided) tensor; microtorch.sparse's COO tensors say True

    def __new__(cls, data, dtype=None, requires_grad: bool = False):
        from .creation import tensor  # the same rules as mt.tensor(...)

        # built in __new__: bad data raises before any object exists (__del__ never meets a half-built one)
        t = tensor(data, dtype=dtype, requires_grad=requires_grad)
        return _init(object.__new__(cls), t._data, t._storage, None, requires_grad, None)

    def __init__(self, data, dtype=None, requires_grad: bool = False):
        pass  # everything happened in __new__

    @classmethod
    def _wrap(cls, array: np.ndarray, requires_grad: bool = False, grad_fn=None,
              tag: str = "activation") -> "Tensor":
        """A tensor over a fresh storage holding ``array``'s values (in the allocator serving ``tag``)."""
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        storage = new_storage(array, tag)
        t = object.__new__(cls)
        return _init(t, array if storage.block is None else storage.data.reshape(array.shape),
                     storage, None, requires_grad, grad_fn)

    @classmethod
    def _empty(cls, shape: tuple[int, ...], dtype: np.dtype, tag: str = "activation") -> "Tensor":
        """An uninitialised tensor in a fresh storage (the caller fills it with ``out=``)."""
        storage = empty_storage(math.prod(shape), dtype, tag)
        return _init(object.__new__(cls), storage.data.reshape(shape), storage, None, False, None)

    @classmethod
    def _over(cls, array: np.ndarray, storage: Storage, requires_grad: bool = False, grad_fn=None) -> "Tensor":
        """A tensor reading ``array``, which views all of ``storage`` (an op wrote its result there)."""
        t = object.__new__(cls)
        return _init(t, array, storage, None, requires_grad, grad_fn)

    @classmethod
    def _view(cls, array: np.ndarray, base: "Tensor", requires_grad: bool = False, grad_fn=None) -> "Tensor":
        """A tensor reading ``array``, a numpy view into ``base``'s storage (zero-copy)."""
        t = object.__new__(cls)
        return _init(t, array, base._storage, base._base if base._base is not None else base,
                     requires_grad, grad_fn)

    def __del__(self):
        storage = self._storage
        if not storage.freed:
            storage.decref(self)

    # -- what a tensor is ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[_dim(dim, self.ndim, "size")]

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def storage(self) -> Storage:
        """The refcounted buffer this tensor views (shared by all its views)."""
        return self._storage

    def untyped_storage(self) -> Storage:
        return self._storage

    def stride(self, dim: int | None = None):
        """Strides in elements (not bytes), as in PyTorch."""
        item = self._data.itemsize
        strides = tuple(s // item for s in self._data.strides)
        return strides if dim is None else strides[_dim(dim, self.ndim, "stride")]

    def storage_offset(self) -> int:
        """Index (in elements) of this view's first element within its storage."""
        start = self._data.__array_interface__["data"][0]
        origin = self._storage.data.__array_interface__["data"][0]
        return (start - origin) // self._data.itemsize

    def is_contiguous(self) -> bool:
        return self._data.flags.c_contiguous

    @property
    def _version(self) -> int:
        """How many in-place writes the storage has seen (PyTorch's ``t._version``)."""
        return self._storage.version

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def data(self) -> "Tensor":
        """A view of the same bytes, detached from the graph (PyTorch's ``.data``): writing
        through it (``x.data[0] = 9.0``) changes ``x`` without recording anything."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        """``x.data = t``: ``x`` (the same object, still a leaf with its ``requires_grad``)
        now reads ``t``'s bytes, whatever their shape and dtype — PyTorch's assignment.

        A parameter living in a flat parameter buffer (:mod:`microtorch.nn.flat`) given
        a value of its own shape and dtype stays in the buffer: the values are *copied*
        into its slice, so optimizers keep updating it (unlike PyTorch, ``x`` then does not
        share ``t``'s bytes). Any other value moves it out of the buffer, and the
        optimizer's next step says so.
        """
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if self.requires_grad and not dtypes.is_floating(value.dtype):
            raise RuntimeError("data set to a tensor that requires gradients must be floating point "
                               f"or complex dtype (got {dtypes.name(value.dtype)})")
        from .nn.flat import assign_data

        if not assign_data(self, value):
            repoint(self, value._data, value._storage)

    def _set_grad(self, value: "Tensor | None") -> None:
        """``x.grad = value``, checked as in PyTorch: a tensor of x's shape and dtype, or None."""
        if value is not None:
            # a sparse COO gradient (nn.Embedding(sparse=True)) is a tensor too, as in PyTorch
            if not isinstance(value, Tensor) and not getattr(value, "is_sparse", False):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value.shape != self._data.shape:
                raise RuntimeError(f"assigned grad has data of a different size: attempting to assign "
                                   f"a gradient of size '{list(value.shape)}' to a tensor of size "
                                   f"'{list(self.shape)}'. Please ensure that the gradient and the "
                                   "tensor are the same size")
            if value.dtype != self._data.dtype:
                raise RuntimeError(f"attempting to assign a gradient with dtype "
                                   f"'{dtypes.name(value.dtype)}' to a tensor with dtype "
                                   f"'{dtypes.name(self.dtype)}'. The gradient must match the "
                                   "tensor's dtype; convert it first (g.to(x.dtype))")
        _grad_slot.__set__(self, value)

    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        return self.transpose(-2, -1)

    # -- leaving microtorch ------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The numpy array over the same bytes (zero-copy, like ``torch.Tensor.numpy``).

        The array holds a reference to the storage (``storage.refcount`` counts it), so the
        bytes stay this array's even after every tensor viewing them is gone — a pool would
        otherwise hand them to the next tensor. Differs from PyTorch on purpose for tensors
        in a step arena: those bytes are reclaimed when the step ends whatever holds them,
        so you get a copy.
        """
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        copy = self._storage.views is not None  # arena-backed: a copy that outlives the step
        _trace.read(self, "numpy", copy)
        return np.array(self._data) if copy else np.asarray(_Export(self))

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            raise RuntimeError("Can't convert a Tensor that requires grad to a numpy array. "
                               "Use tensor.detach().numpy() instead.")
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def tolist(self):
        _trace.read(self, "tolist")
        return self._data.tolist()

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to a "
                               "Python number; item() needs exactly one element")
        _trace.read(self, "item")
        return self._data.reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} elements is ambiguous; "
                               "use .any() or .all()")
        return bool(self.item())

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # -- autograd ----------------------------------------------------------------------------
    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if requires_grad and not dtypes.is_floating(self.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients "
                               f"(this one is {dtypes.name(self.dtype)}; convert with .float() first)")
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables; "
                               "use .detach() to get a tensor outside the graph")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf tensor after backward (leaves always keep it)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None and not self._retains_grad:
            self._retains_grad = True
            self.grad_fn._retain(self)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None,
                 order: str = "deps") -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see :func:`microtorch.autograd.backward`)."""
        _autograd.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph,
                           inputs=inputs, order=order)

    def detach(self) -> "Tensor":
        """Same bytes, no graph: a tensor that does not require grad and is no view of
        ``self`` for autograd (``_base`` None, as in PyTorch), so writing through it — or a
        view of it — is allowed even when ``self`` is a leaf that requires grad. The
        version counter is shared (one storage)."""
        return _init(object.__new__(Tensor), self._data, self._storage, None, False, None)

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self.requires_grad = False
        return self

    # -- copy.copy / copy.deepcopy (as in PyTorch) ------------------------------------------
    def __copy__(self) -> "Tensor":
        """A new tensor object over the same bytes, with ``requires_grad`` (no ``.grad``)."""
        return _init(object.__new__(type(self)), self._data, self._storage, None, self.requires_grad, None)

    def __deepcopy__(self, memo) -> "Tensor":
        """New bytes holding the same values (and a copy of ``.grad``); graph leaves only."""
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                               "the deepcopy protocol at the moment; deepcopy x.detach() instead")
        t = Tensor._wrap(np.array(self._data), tag="tensor")
        out = _init(object.__new__(type(self)), t._data, t._storage, None, self.requires_grad, None)
        memo[id(self)] = out
        if self._grad is not None:
            out._grad = self._grad.__deepcopy__(memo)
        return out

    # -- repr --------------------------------------------------------------------------------
    def __repr__(self) -> str:
        if self._storage.stale:
            return f"tensor(<stale: {self._storage.stale}>)"
        if self._storage.freed:
            return "tensor(<freed storage>)"
        body = np.array2string(self._data, separator=", ", prefix="tensor(", precision=4,
                               floatmode="maxprec_equal", threshold=1000, edgeitems=3)
        extras = []
        if self.dtype not in (dtypes.float32, dtypes.int64, dtypes.bool_) or self.numel() == 0:
            extras.append(f"dtype={dtypes.name(self.dtype)}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"



# -- ops as methods and operators (each forwards to microtorch.functions) -----------------------
def _methods():
    from . import functions as F
    from .comparison import bitwise_and, bitwise_not, bitwise_or, compare, logical_not

    def reflected(fn):
        return lambda self, other: fn(other, self)

    ops = {
        "__add__": (F.add), "__radd__": reflected(F.add),
        "__sub__": (F.sub), "__rsub__": reflected(F.sub),
        "__mul__": (F.mul), "__rmul__": reflected(F.mul),
        "__truediv__": (F.div), "__rtruediv__": reflected(F.div),
        "__matmul__": (F.matmul), "__rmatmul__": reflected(F.matmul),
        "__pow__": (F.pow), "__rpow__": reflected(F.pow),
        "__floordiv__": F.floor_divide, "__rfloordiv__": reflected(F.floor_divide),
        "__mod__": F.remainder, "__rmod__": reflected(F.remainder),
        "floor_divide": F.floor_divide, "remainder": F.remainder,
        "__neg__": F.neg, "__pos__": lambda self: self, "__abs__": F.abs,
        "__getitem__": F.index,
        "add": (F.add), "sub": (F.sub), "mul": (F.mul), "div": (F.div),
        "matmul": (F.matmul), "pow": (F.pow), "neg": F.neg,
        "exp": F.exp, "log": F.log, "sqrt": F.sqrt, "tanh": F.tanh, "sigmoid": F.sigmoid,
        "relu": F.relu, "abs": F.abs, "clamp": F.clamp, "maximum": F.maximum, "minimum": F.minimum,
        "sum": F.sum, "mean": F.mean, "max": F.max, "min": F.min, "amax": F.amax, "amin": F.amin,
        "var": F.var, "softmax": F.softmax, "log_softmax": F.log_softmax,
        "reshape": F.reshape, "view": F.view, "flatten": F.flatten, "permute": F.permute,
        "transpose": F.transpose, "unsqueeze": F.unsqueeze, "squeeze": F.squeeze,
        "expand": F.expand, "broadcast_to": F.broadcast_to, "clone": F.clone,
        "logical_not": logical_not, "__invert__": bitwise_not,
        "__and__": bitwise_and, "__or__": bitwise_or,
        "__rand__": reflected(bitwise_and), "__ror__": reflected(bitwise_or),
    }
    for op in ("lt", "le", "gt", "ge", "eq", "ne"):
        ops[op] = ops[f"__{op}__"] = (lambda op: lambda self, other: compare(op, self, other))(op)
    for name, fn in ops.items():
        setattr(Tensor, name, fn)


def _to(self, dtype) -> Tensor:
    """The same values as ``dtype`` (no copy when the dtype already matches)."""
    from .functions.elementwise import Cast

    dtype = dtypes.as_dtype(dtype)
    return self if dtype == self.dtype else Cast.apply(self, dtype)


def _contiguous(self) -> Tensor:
    """``self`` if its elements are already laid out row-major, else a contiguous copy."""
    return self if self.is_contiguous() else self.clone()


def _no_bool(self, op: str) -> None:
    if self._data.dtype == np.bool_:
        raise RuntimeError(f"{op}(): does not support bool input (as in PyTorch); use .long() first")


def _argmax(self, dim=None, keepdim=False) -> Tensor:
    _no_bool(self, "argmax")
    return self.max(dim, keepdim).indices if dim is not None else Tensor._wrap(np.array(np.argmax(self._data)))


def _argmin(self, dim=None, keepdim=False) -> Tensor:
    _no_bool(self, "argmin")
    return self.min(dim, keepdim).indices if dim is not None else Tensor._wrap(np.array(np.argmin(self._data)))


Tensor.to = _to
Tensor.type = _to
Tensor.float = lambda self: _to(self, dtypes.float32)
Tensor.double = lambda self: _to(self, dtypes.float64)
Tensor.long = lambda self: _to(self, dtypes.int64)
Tensor.int = lambda self: _to(self, dtypes.int32)
Tensor.bool = lambda self: _to(self, dtypes.bool_)
Tensor.contiguous = _contiguous
Tensor.argmax = _argmax
Tensor.argmin = _argmin
Tensor.any = lambda self: Tensor._wrap(np.array(self._data.any()))
Tensor.all = lambda self: Tensor._wrap(np.array(self._data.all()))


_grad_slot = Tensor._grad
# .grad reads the slot through its C-level getter (no Python frame); assignments are checked
Tensor.grad = property(_grad_slot.__get__, Tensor._set_grad,
                       doc="d(loss)/d(self) after backward (None before); assignments are checked")


class _Export:
    """The ``.base`` of an array handed out by ``numpy()``: one storage reference that lives
    exactly as long as the array (numpy keeps an array's base alive)."""

    __slots__ = ("storage", "__array_interface__")

    def __init__(self, t: Tensor):
        self.storage = t._storage
        self.__array_interface__ = t._data.__array_interface__
        self.storage.incref(self)

    def __del__(self):
        if not self.storage.freed:
            self.storage.decref(self)

    def __repr__(self) -> str:
        return "a numpy array from .numpy()"


def _init(t: Tensor, array, storage: Storage, base, requires_grad, grad_fn) -> Tensor:
    t._data = array
    t._storage = storage
    t._base = base
    t.requires_grad = requires_grad
    t._grad = None
    t.grad_fn = grad_fn
    t._retains_grad = False
    t.name = None
    t._tid = None
    storage.incref(t)
    return t


def repoint(t: Tensor, array: np.ndarray, storage: Storage) -> None:
    """Make ``t`` read ``array``, a numpy view into ``storage``, instead of its old bytes.

    Used to move parameters into one flat buffer (:mod:`microtorch.nn.flat`): the tensor
    object stays the same (modules and optimizers keep referring to it), only the bytes
    behind it change. Refcounts stay exact: +1 on the new storage, then −1 on the old one
    (which frees its block if ``t`` was its last holder). Views taken of ``t`` before the
    move keep reading the old bytes.
    """
    old = t._storage
    storage.incref(t)
    t._data, t._storage, t._base = array, storage, None
    if old.views is not None:  # an arena storage must not poison t when it is reset later
        old.views[:] = [ref for ref in old.views if ref() is not t]
    if not old.freed:
        old.decref(t)


def _sizes(op: str, sizes, infer: bool = False) -> tuple[int, ...]:
    """PyTorch's size arguments, ``f(2, 3)`` or ``f((2, 3))``: ints (or 0-d integer tensors),
    nothing else — ``ones((2, 3.5))`` is a TypeError, not shape (2, 3). Sizes are >= 0; with
    ``infer`` (view, reshape, expand) one may also be -1."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    out = []
    for i, n in enumerate(sizes):
        if type(n) is not int:
            if isinstance(n, Tensor) and n.ndim == 0 and n.dtype.kind in "iu":
                n = n.item()
            elif isinstance(n, (numbers.Integral, np.integer)):
                n = int(n)
            else:
                raise TypeError(f"{op}(): argument 'size' must be tuple of ints, but found element of "
                                f"type {type(n).__name__} at pos {i} ({n!r}); sizes are whole numbers")
        if n < 0 and not (infer and n == -1):
            if infer:
                raise RuntimeError(f"invalid shape dimension {n} at index {i} of shape {list(sizes)} "
                                   "(sizes are >= 0, or -1 for the one size to infer)")
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(sizes)}")
        out.append(n)
    return tuple(out)


def _dim(dim: int, ndim: int, op: str) -> int:
    """Normalise a possibly negative ``dim``; a clear IndexError when it is out of range."""
    if type(dim) is not int and not isinstance(dim, np.integer):
        raise TypeError(f"{op}(): argument 'dim' must be an int, got {type(dim).__name__} ({dim!r})")
    n = max(ndim, 1)  # a 0-d tensor accepts dim 0 and -1, as in PyTorch
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor with {ndim} "
                         f"dimension(s) (valid: {-n} .. {n - 1})")
    return dim % n


_methods()
# last: autograd builds on Tensor; imported here once, not inside backward() (~1 µs a call)
from . import autograd as _autograd  # noqa: E402
