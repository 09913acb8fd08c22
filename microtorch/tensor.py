"""Tensor: an n-dimensional array that can record the operations applied to it.

The numbers live in a :class:`~microtorch.memory.storage.Storage`; a tensor only says how
to read them (:class:`~microtorch.tensor_base.TensorBase`: shape, strides, offset, dtype).
Zero-copy views (``x.T``, ``x[1:]``, ``x.reshape(...)`` of contiguous data,
``x.expand(...)``) are new tensors over the same storage, so ``x.T.storage is x.storage``.

Autograd fields follow PyTorch: ``requires_grad``, ``grad``, ``grad_fn`` (the node that
made this tensor, ``None`` for leaves), ``is_leaf``, ``retain_grad()``, ``backward()``.

Every op is a method too, written in the class body: ``add = F.add`` (the op's function
from :mod:`microtorch.functions`, with the tensor as its first argument), or a one-liner
that calls it (``__radd__``, comparisons, conversions).
This module is the top of the core's layers (see :mod:`microtorch.tensor_base`): it imports
the ops, and they never import it.
"""
from __future__ import annotations

import numpy as np

from . import autograd as _autograd, comparison as C, dtypes, functions as F, sparse as _sparse
from .creation import tensor as _new_tensor
from .functions import inplace as I
from .functions.elementwise import Cast
from . import recording as _trace
from .memory.aliasing import byte_ranges as _byte_ranges
from .memory.storage import Storage
from .tensor_base import TensorBase, _dim, _init, _sizes, repoint  # noqa: F401 — _sizes, repoint: re-exported


class Tensor(TensorBase):
    """An n-dimensional array that can record the operations applied to it."""

    __slots__ = ()
    __array_ufunc__ = None  # numpy defers to our reflected operators: np.float64(2) * t is a Tensor
    __hash__ = object.__hash__  # == is elementwise (as in PyTorch), identity is the hash
    is_sparse = False  # a dense (strided) tensor; microtorch.sparse's COO tensors say True

    def __new__(cls, data, dtype=None, requires_grad: bool = False):
        # built in __new__: bad data raises before any object exists (__del__ never meets a half-built one)
        t = _new_tensor(data, dtype=dtype, requires_grad=requires_grad)  # the same rules as mt.tensor(...)
        return _init(object.__new__(cls), t._data, t._storage, None, requires_grad, None)

    def __init__(self, data, dtype=None, requires_grad: bool = False):
        pass  # everything happened in __new__

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
        from .nn.flat import assign_data  # (nn is above the core: looked up when assigned)

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
        TensorBase._grad.__set__(self, value)

    # .grad reads the slot through its C-level getter (no Python frame); assignments are checked
    grad = property(TensorBase._grad.__get__, _set_grad,
                    doc="d(loss)/d(self) after backward (None before); assignments are checked")

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

    # -- ops as methods and operators: the op's function itself (self is its first argument) --
    add = F.add
    sub = F.sub
    mul = F.mul
    div = F.div
    matmul = F.matmul
    pow = F.pow
    floor_divide = F.floor_divide
    remainder = F.remainder
    neg = F.neg
    abs = F.abs

    __add__, __sub__, __mul__, __truediv__, __matmul__, __pow__ = add, sub, mul, div, matmul, pow
    __floordiv__, __mod__, __neg__, __abs__ = floor_divide, remainder, neg, abs
    def __radd__(self, other): return F.add(other, self)
    def __rsub__(self, other): return F.sub(other, self)
    def __rmul__(self, other): return F.mul(other, self)
    def __rtruediv__(self, other): return F.div(other, self)
    def __rmatmul__(self, other): return F.matmul(other, self)
    def __rpow__(self, other): return F.pow(other, self)
    def __rfloordiv__(self, other): return F.floor_divide(other, self)
    def __rmod__(self, other): return F.remainder(other, self)
    def __pos__(self): return self

    exp = F.exp
    log = F.log
    sqrt = F.sqrt
    tanh = F.tanh
    sigmoid = F.sigmoid
    relu = F.relu
    clamp = F.clamp
    maximum = F.maximum
    minimum = F.minimum

    sum = F.sum
    mean = F.mean
    max = F.max
    min = F.min
    amax = F.amax
    amin = F.amin
    var = F.var
    softmax = F.softmax
    log_softmax = F.log_softmax

    def argmax(self, dim=None, keepdim=False):
        _no_bool(self, "argmax")
        return self.max(dim, keepdim).indices if dim is not None else Tensor._wrap(np.array(np.argmax(self._data)))

    def argmin(self, dim=None, keepdim=False):
        _no_bool(self, "argmin")
        return self.min(dim, keepdim).indices if dim is not None else Tensor._wrap(np.array(np.argmin(self._data)))

    def any(self): return Tensor._wrap(np.array(self._data.any()))
    def all(self): return Tensor._wrap(np.array(self._data.all()))

    # views and copies
    reshape = F.reshape
    view = F.view
    flatten = F.flatten
    permute = F.permute
    transpose = F.transpose
    unsqueeze = F.unsqueeze
    squeeze = F.squeeze
    expand = F.expand
    broadcast_to = F.broadcast_to
    diagonal = F.diagonal
    unfold = F.unfold
    as_strided = F.as_strided
    __getitem__ = F.index
    clone = F.clone

    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        """The last two dimensions swapped (a batch of matrices, each transposed), as a view."""
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def t(self) -> "Tensor":
        """The transpose of a matrix, as a view (PyTorch's ``t()``); a 0-d or 1-d tensor comes
        back as a view of itself. More dimensions are refused, as in PyTorch."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D "
                               "(for the last two dimensions use x.mT or x.transpose(-2, -1))")
        return self.transpose(0, 1) if self.ndim == 2 else self[...]

    def contiguous(self) -> "Tensor":
        """``self`` if its elements are already laid out row-major, else a contiguous copy."""
        return self if self.is_contiguous() else self.clone()

    def byte_ranges(self) -> list[tuple[int, int]]:
        """The exact bytes this tensor reads in its storage: sorted, merged half-open intervals
        ``[(start, stop), ...]`` in bytes from the storage's start (see
        :func:`microtorch.memory.aliasing.byte_ranges`)."""
        return _byte_ranges(self)

    to_sparse = _sparse.to_sparse
    to_sparse_coo = to_sparse
    to_sparse_csr = _sparse.to_sparse_csr

    # dtype conversions
    def to(self, dtype) -> "Tensor":
        """The same values as ``dtype`` (no copy when the dtype already matches)."""
        dtype = dtypes.as_dtype(dtype)
        return self if dtype == self.dtype else Cast.apply(self, dtype)

    type = to
    def float(self): return self.to(dtypes.float32)
    def double(self): return self.to(dtypes.float64)
    def long(self): return self.to(dtypes.int64)
    def int(self): return self.to(dtypes.int32)
    def bool(self): return self.to(dtypes.bool_)

    # comparisons and logic (no gradient)
    def lt(self, other): return C.compare("lt", self, other)
    def le(self, other): return C.compare("le", self, other)
    def gt(self, other): return C.compare("gt", self, other)
    def ge(self, other): return C.compare("ge", self, other)
    def eq(self, other): return C.compare("eq", self, other)
    def ne(self, other): return C.compare("ne", self, other)
    __lt__, __le__, __gt__, __ge__, __eq__, __ne__ = lt, le, gt, ge, eq, ne
    logical_not = C.logical_not
    __invert__ = C.bitwise_not
    __and__ = C.bitwise_and
    __or__ = C.bitwise_or
    def __rand__(self, other): return C.bitwise_and(other, self)
    def __ror__(self, other): return C.bitwise_or(other, self)

    # -- in place (microtorch.functions.inplace: PyTorch's checks, the version bump) ----------
    add_ = I.add_
    sub_ = I.sub_
    mul_ = I.mul_
    div_ = I.div_
    clamp_ = I.clamp_
    relu_ = I.relu_
    exp_ = I.exp_
    sigmoid_ = I.sigmoid_
    tanh_ = I.tanh_
    sqrt_ = I.sqrt_
    neg_ = I.neg_
    copy_ = I.copy_
    fill_ = I.fill_
    zero_ = I.zero_
    __setitem__ = I.setitem
    # x += y is in place, as in PyTorch (the same checks and version bump as add_)
    __iadd__, __isub__, __imul__, __itruediv__ = add_, sub_, mul_, div_


TensorBase._tensor_class = Tensor  # every op's result is a Tensor (see microtorch.tensor_base)


def _no_bool(t: Tensor, op: str) -> None:
    if t._data.dtype == np.bool_:
        raise RuntimeError(f"{op}(): does not support bool input (as in PyTorch); use .long() first")


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
