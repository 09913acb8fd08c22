"""The checks an in-place op runs before it writes a byte: PyTorch's refusals.

The methods and the driver in :mod:`microtorch.functions.inplace` call them first, so a refused
op leaves the tensor unchanged. **Refused, as in PyTorch:**

* a leaf that requires grad, or a view of one, with grad mode on ("a leaf Variable that
  requires grad is being used in an in-place operation."). Under ``mt.no_grad()`` it is
  allowed — that is how optimizers update parameters;
* a result type the tensor cannot hold: a float result into an integer tensor, anything
  but bool into a bool tensor ("result type Float can't be cast to the desired output type
  Long"). ``copy_`` and ``fill_`` convert, as in PyTorch;
* a written-to tensor in which several elements share bytes (an ``expand``, overlapping
  ``unfold`` windows): "unsupported operation: more than one element of the written-to
  tensor refers to a single memory location". microtorch decides this exactly
  (:func:`~microtorch.memory.aliasing.overlaps_itself`), so unlike PyTorch it also refuses
  overlapping ``as_strided``/``unfold`` views PyTorch cannot classify;
* an input that shares some, but not all, bytes with the written-to tensor
  (``x[1:].add_(x[:-1])``): the result would depend on the order elements are visited.
  Again decided exactly, with :func:`~microtorch.memory.aliasing.alias`. The same view on
  both sides (``x.add_(x)``) is fine.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..grad_mode import is_grad_enabled
from ..memory import views as _views
from ..memory.aliasing import alias, layout, overlaps_itself
from ..tensor_base import TensorBase as Tensor

# PyTorch's names for dtypes in its casting error
_TORCH_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int32": "Int",
                "int64": "Long", "bool": "Bool"}
_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}


# ----------------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------------
def _scalar_dtype(value, like: np.dtype) -> np.dtype:
    """The dtype a Python scalar takes next to a tensor of dtype ``like`` (PyTorch: weak)."""
    if isinstance(value, (bool, np.bool_)):
        return dtypes.bool_
    if isinstance(value, (numbers.Integral, np.integer)):
        return like if like.kind in "iuf" else dtypes.int64
    if isinstance(value, (numbers.Real, np.floating)):
        return like if like.kind == "f" else dtypes.default_float
    raise TypeError(f"in-place ops take tensors or real numbers, got {type(value).__name__}")


def _check_result_type(t: Tensor, *others, result: np.dtype | None = None) -> None:
    """Raise if the op's result type cannot be stored in ``t`` (float into int, ...)."""
    target = t.dtype
    for o in others:
        if o is None:
            continue
        d = o.dtype if isinstance(o, Tensor) else _scalar_dtype(o, target)
        if result is None or _CATEGORY[d.kind] >= _CATEGORY[result.kind]:  # int.div_(double) is Double
            result = d
    if result is not None and _CATEGORY[result.kind] > _CATEGORY[target.kind]:
        raise RuntimeError(f"result type {_TORCH_NAMES.get(result.name, result.name)} can't be cast to "
                           f"the desired output type {_TORCH_NAMES.get(target.name, target.name)}")


def _check_autograd(t: Tensor, op: str):
    """PyTorch's refusals for in-place ops under grad mode. Returns t's base if t is a
    differentiable view (its writes must rebase the base's history), else None."""
    made_in_grad_mode = _views.made_in_grad_mode(t)
    base = t._base if made_in_grad_mode is not None else None
    if is_grad_enabled():
        if t.requires_grad and t.grad_fn is None:
            raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place "
                               f"operation. ({op} on a tensor created with requires_grad=True; to "
                               f"update it in place, e.g. as an optimizer does, wrap the update in "
                               f"`with mt.no_grad():`)")
        if base is not None and base.requires_grad:
            if base.grad_fn is None:
                raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                                   f"in-place operation. ({op} on a view of a tensor created with "
                                   "requires_grad=True; use `with mt.no_grad():` or write into a clone())")
            if not made_in_grad_mode:
                raise RuntimeError(
                    "A view was created in no_grad mode and is being modified inplace with grad mode "
                    "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. "
                    "You can clarify your code by moving both the view and the inplace either both "
                    "inside the no_grad block (if you don't want the inplace to be tracked) or both "
                    "outside (if you want the inplace to be tracked).")
    return base


def _check_written(t: Tensor) -> None:
    # t._data alone is not enough: numpy marks every broadcast (expand) read-only
    if not t._data.flags.writeable and not t._storage.data.flags.writeable:
        _refuse_read_only(t)
    if t._data.flags.c_contiguous:  # contiguous elements never share bytes
        return
    if overlaps_itself(t):
        where = ", ".join(f"dimension {d} has stride 0" for d, (n, s) in enumerate(zip(t.shape, t.stride()))
                          if s == 0 and n > 1) or "its elements overlap"
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation. "
            f"(shape {list(t.shape)}, strides {list(t.stride())}: {where})")


def _refuse_read_only(t: Tensor) -> None:
    owner = getattr(t._storage.block, "owner", None)
    if hasattr(owner, "read_only_message"):  # a read-only file mapping
        raise RuntimeError(owner.read_only_message())
    raise RuntimeError("cannot write into a tensor whose bytes are a read-only numpy array "
                       "(mt.from_numpy of an array whose flags.writeable is False, e.g. from "
                       "np.frombuffer); write into a .clone(), or give from_numpy a writeable copy "
                       "(np.array(a))")


def _check_inputs(t: Tensor, *others) -> None:
    for o in others:
        if not isinstance(o, Tensor) or o._storage is not t._storage:
            continue
        if layout(o) == layout(t):
            continue  # the very same elements (x.add_(x)): each one reads itself, fine
        report = alias(t, o)
        if report.answer == "must":
            ia, ib = report.witness
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor "
                "refer to a single memory location. Please clone() the tensor before performing the "
                f"operation. (element {list(ia)} of the written-to tensor and element {list(ib)} of "
                f"the input share byte {report.shared_byte} of storage #{t._storage.id})")


def _check_broadcast(t: Tensor, other, op: str) -> None:
    if isinstance(other, Tensor) and other.shape != t.shape and other.ndim:
        try:
            shape = np.broadcast_shapes(t.shape, other.shape)
        except ValueError:
            shape = None
        if shape != t.shape:
            raise RuntimeError(f"{op}: output with shape {list(t.shape)} doesn't match the broadcast "
                               f"shape {list(shape) if shape is not None else '(none)'} (the other "
                               f"operand has shape {list(other.shape)}; it must broadcast to the "
                               "written-to tensor's shape)")
