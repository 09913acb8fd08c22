"""What COO and CSR tensors share: shape, dtype, autograd through the values, and refusing
dense ops.

A sparse tensor is not a :class:`~microtorch.Tensor` (whose bytes are one strided view);
it holds index arrays and a ``values`` tensor, each over its own refcounted storage.
Autograd runs through ``values``: an op on a sparse tensor is an op on its values with the
pattern held fixed, so ``S.requires_grad`` is ``S.values().requires_grad`` and a sparse
leaf's ``.grad`` is a sparse tensor on the same pattern (indices shared), with the values'
gradient as its values — as in PyTorch, where the gradient of a sparse input is sparse.

**Dense ops refuse.** ``S + dense``, ``mt.exp(S)``, ``S[0]``, ``np.asarray(S)`` … would
quietly build the dense matrix (for an embedding table, ``rows × dim`` numbers to touch a
few rows). Each raises a ``TypeError`` that says so and how to ask for it explicitly:
``S.to_dense()``. What stays sparse: ``S * scalar``, ``S / scalar``, ``-S``, ``S + S2``
(both sparse), ``S.sum()``, ``S @ dense`` (:func:`microtorch.sparse.mm`).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes
from ..tensor_base import TensorBase as Tensor


def densify_error(what: str, shape) -> TypeError:
    dense = "×".join(map(str, shape))
    return TypeError(
        f"{what}: this would silently turn a sparse tensor of size ({dense}) into a dense one. "
        "microtorch does this only when asked: call .to_dense() first if you want the dense "
        "tensor, or use an op that keeps sparsity (S * scalar, S + sparse, S.sum(), "
        "mt.sparse.mm(S, dense) / S @ dense).")


class SparseTensor:
    """Base class of :class:`~microtorch.sparse.coo.SparseCOOTensor` and
    :class:`~microtorch.sparse.csr.SparseCSRTensor`."""

    is_sparse = False  # PyTorch: True for COO only
    is_sparse_csr = False
    layout = "?"
    __array_ufunc__ = None  # numpy defers to our operators (and they refuse dense mixing)
    __hash__ = object.__hash__

    _values_t: Tensor
    _shape: tuple[int, ...]

    #: Each layout's class by its ``layout`` name, entered as it is defined. CSR is built on
    #: COO (csr.py imports coo.py), so a COO tensor finds its CSR form's class here
    #: (``S.to_sparse_csr()``) rather than by importing csr.py — as the ops make Tensors
    #: through ``TensorBase._tensor_class``.
    _layouts: dict[str, type] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        SparseTensor._layouts[cls.layout] = cls

    # -- what it is ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def size(self, dim: int | None = None):
        return self._shape if dim is None else self._shape[dim]

    def dim(self) -> int:
        return len(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype:
        return self._values_t.dtype

    def numel(self) -> int:
        """Elements of the dense tensor it stands for (as in PyTorch), not the stored ones."""
        return math.prod(self._shape)

    def _index_tensors(self) -> tuple[Tensor, ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Bytes the sparse tensor stores: its index arrays plus its values."""
        return sum(t._data.nbytes for t in self._index_tensors()) + self._values_t._data.nbytes

    @property
    def dense_nbytes(self) -> int:
        """Bytes the same tensor takes dense."""
        return self.numel() * self.dtype.itemsize

    def storages(self) -> list:
        """The refcounted storages behind it: index arrays first, values last."""
        return [t._storage for t in self._index_tensors()] + [self._values_t._storage]

    # -- autograd: through the values ----------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._values_t.requires_grad

    def requires_grad_(self, requires_grad: bool = True):
        self._values_t.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._values_t.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._values_t.grad_fn is None

    @property
    def grad(self):
        """The gradient of a sparse leaf: sparse, on this tensor's pattern (None before backward)."""
        g = self._values_t.grad
        return None if g is None else self._with_values(g)

    @grad.setter
    def grad(self, value) -> None:
        if value is None:
            self._values_t.grad = None
            return
        raise RuntimeError("assign None to a sparse tensor's .grad (to drop it); other gradients "
                           "are made by backward")

    def detach(self):
        """The same pattern and values, cut from the graph (no copy)."""
        return self._with_values(self._values_t.detach())

    def _with_values(self, values: Tensor):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- ops that keep sparsity ----------------------------------------------------------
    def __mul__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self._with_values(self._values_t * other)
        if isinstance(other, SparseTensor):
            raise TypeError("sparse * sparse (elementwise) is not supported in microtorch; multiply "
                            "a sparse tensor by a number, or use mt.sparse.mm for a matrix product")
        raise densify_error(f"sparse * {type(other).__name__}", self._shape)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self._with_values(self._values_t / other)
        raise densify_error(f"sparse / {type(other).__name__}", self._shape)

    def __neg__(self):
        return self._with_values(-self._values_t)

    def sum(self, dim=None):
        """The sum of all elements, a 0-d dense tensor (differentiable in the values)."""
        if dim is not None:
            raise NotImplementedError("sparse sum over a dim is not supported in microtorch; "
                                      "S.sum() sums everything, mt.sparse.mm(S, ones) sums rows")
        return self._values_t.sum()

    # -- dense ops refuse (see the module docstring) ----------------------------------------
    @property
    def _data(self):
        """A dense tensor's numbers; a dense op reading them from a sparse tensor gets this error."""
        raise densify_error("a dense op given a sparse tensor", self._shape)

    def __array__(self, dtype=None, copy=None):
        raise densify_error("np.asarray(sparse) / a dense op given a sparse tensor", self._shape)

    def numpy(self):
        raise densify_error("numpy()", self._shape)

    def __add__(self, other):
        if isinstance(other, SparseTensor):
            return self._add_sparse(other)
        raise densify_error(f"sparse + {type(other).__name__}", self._shape)

    def __radd__(self, other):
        raise densify_error(f"{type(other).__name__} + sparse", self._shape)

    def __sub__(self, other):
        if isinstance(other, SparseTensor):
            return self._add_sparse(-other)
        raise densify_error(f"sparse - {type(other).__name__}", self._shape)

    def __rsub__(self, other):
        raise densify_error(f"{type(other).__name__} - sparse", self._shape)

    def __rmatmul__(self, other):
        raise TypeError("dense @ sparse is not supported in microtorch; compute (Sᵀ @ Dᵀ)ᵀ with "
                        "mt.sparse.mm, or call .to_dense() on the sparse operand")

    def __getitem__(self, key):
        raise densify_error("indexing", self._shape)

    def __iter__(self):
        raise densify_error("iterating", self._shape)

    def __len__(self) -> int:
        return self._shape[0]

    def __bool__(self):
        raise RuntimeError("Boolean value of a sparse tensor is ambiguous")

    def _add_sparse(self, other):  # pragma: no cover - abstract
        raise NotImplementedError

    def _repr_tail(self) -> str:
        extras = [f"size={self._shape}", f"nnz={self._nnz()}",
                  f"layout={self.layout}"]
        if self.dtype != dtypes.float32:
            extras.append(f"dtype={dtypes.name(self.dtype)}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return ",\n       ".join(extras) + ")"

    def _nnz(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


_DENSE_OPS = ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "clamp", "mean", "max", "min",
              "softmax", "log_softmax", "reshape", "view", "flatten", "permute", "transpose",
              "unsqueeze", "squeeze", "expand", "pow", "__pow__", "item", "tolist", "contiguous",
              "add_", "mul_", "copy_")


def _refuser(name):
    def refuse(self, *args, **kwargs):
        raise densify_error(f"{name}()", self._shape)
    refuse.__name__ = name
    return refuse


for _name in _DENSE_OPS:
    setattr(SparseTensor, _name, _refuser(_name))


def as_index_array(x, what: str) -> np.ndarray:
    """Indices given as a tensor, array or nested list, as a fresh int64 numpy array."""
    if isinstance(x, SparseTensor):
        raise TypeError(f"{what}: expected an integer tensor, got a sparse tensor")
    a = np.array(x._data if isinstance(x, Tensor) else x)
    if a.size == 0:
        return a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integers (int64), got {a.dtype.name}; convert them with .long()")
    return a.astype(np.int64)


def as_values(values, dtype, requires_grad: bool) -> Tensor:
    """The values tensor of a new sparse tensor: a copy in the pool — or, when ``values`` is
    part of a graph (it requires grad), a differentiable copy (``clone``), so gradients flow
    back into it."""
    from .buffers import array_tensor

    if isinstance(values, Tensor) and values.requires_grad:
        if dtype is not None and dtypes.as_dtype(dtype) != values.dtype:
            values = values.to(dtype)
        if requires_grad:
            raise RuntimeError("values already require grad (they are part of a graph); leave "
                               "requires_grad=False and the gradient flows into them")
        return values.clone()
    a = np.array(values._data if isinstance(values, Tensor) else values)
    if dtype is not None:
        a = a.astype(dtypes.as_dtype(dtype))
    elif a.dtype == np.float64 and not isinstance(values, (Tensor, np.ndarray)):
        a = a.astype(np.float32)  # Python floats: float32, as mt.tensor does
    t = array_tensor(a)
    if requires_grad:
        t.requires_grad_(True)
    return t
