"""Matrix multiplication: 1-D (dot), 2-D, and batched with broadcast batch dimensions; and
the linear layer's y = x Wᵀ + b as one op."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..node import Function
from ..tensor_base import TensorBase as Tensor
from .broadcast import operands, unbroadcast


def _shape_error(a, b) -> RuntimeError:
    if a.ndim == 0 or b.ndim == 0:
        return RuntimeError(f"matmul: both arguments need at least 1 dimension, but they have "
                            f"{a.ndim} and {b.ndim} (shapes {list(a.shape)} and {list(b.shape)}); "
                            "use * for scaling by a scalar")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        return RuntimeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied "
                            f"(inner dimensions {k_a} != {k_b})")
    return RuntimeError(f"matmul: batch dimensions of {list(a.shape)} and {list(b.shape)} do not broadcast")


def _transposed(t) -> bool:
    """A 2-D view whose transpose is contiguous (e.g. ``W.T``): column-major bytes."""
    return not t._data.flags.c_contiguous and t._data.T.flags.c_contiguous


class Matmul(Function):
    """C = A @ B;  dL/dA = G @ Bᵀ, dL/dB = Aᵀ @ G (batch dims summed where they broadcast).

    A 1-D operand is treated as a row (left) or column (right) vector and the added
    dimension removed again, as in numpy and PyTorch.
    """

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad or (False, False)
        ctx.save_for_backward(a if need_b else None, b if need_a else None)  # each grad needs the other
        ctx.shapes = a.shape, b.shape
        ctx.b_transposed = b.ndim == 2 and _transposed(b)
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]:  # the common case, straight into its storage
            return np.matmul(a._data, b._data, out=ctx.empty((a.shape[0], b.shape[1]), a.dtype))
        try:
            return np.matmul(a._data, b._data)
        except ValueError:
            raise _shape_error(a, b) from None

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        (sa, sb), (need_a, need_b) = ctx.shapes, ctx.needs_input_grad
        if len(sa) == 2 and len(sb) == 2:  # the common case, without the general bookkeeping
            gb = None
            if need_b:  # b = W.T (x @ W.T written out): (gᵀa)ᵀ, so W's gradient comes back contiguous
                gb = (g.mT @ a).mT if ctx.b_transposed else a.mT @ g
            return (g @ b.mT if need_a else None, gb)
        g2 = g.unsqueeze(-1) if len(sb) == 1 else g  # first: for 1-D @ 1-D, g is 0-d
        g2 = g2.unsqueeze(-2) if len(sa) == 1 else g2
        ga = gb = None
        if need_a:
            b2 = b.unsqueeze(-1) if len(sb) == 1 else b
            ga = unbroadcast(g2 @ b2.mT, (1,) + sa if len(sa) == 1 else sa)
            ga = ga if ga.shape == sa else ga.reshape(sa)
        if need_b:
            a2 = a.unsqueeze(0) if len(sa) == 1 else a
            gb = unbroadcast(a2.mT @ g2, sb + (1,) if len(sb) == 1 else sb)
            gb = gb if gb.shape == sb else gb.reshape(sb)
        return ga, gb


_TORCH_C_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double", "int32": "int",
                  "int64": "long int", "bool": "bool"}


def matmul(a, b):
    """A @ B. Two tensors must share a dtype, as in PyTorch (no promotion: convert one,
    e.g. ``a.double() @ b``); a list or number operand is made a tensor of the other's dtype."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a._data.dtype != b._data.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                               f"{_TORCH_C_NAMES[a.dtype.name]} != {_TORCH_C_NAMES[b.dtype.name]} "
                               f"(matmul does not promote: convert one operand, e.g. a.to(b.dtype))")
        if a._data.dtype == np.bool_ and a._data.ndim and b._data.ndim:  # (0-d: the shape error first)
            raise NotImplementedError("matmul is not implemented for 'Bool' tensors; convert them "
                                      "first, e.g. a.long() @ b.long()")
        return Matmul.apply(a, b)
    return Matmul.apply(*operands(a, b))


class Linear(Function):
    """y = x Wᵀ + b for x of shape (…, in), W (out, in), b broadcasting to (…, out) or None;

        dL/dx = G W,   dL/dW = Gᵀ x,   dL/db = G summed down to b's shape,

    with G = dL/dy, and in Gᵀ x every leading dimension of G and x flattened into rows.

    One node instead of three (``W.T``, ``@``, ``+ b``): the product goes straight into the
    result's storage and the bias is added there in place; backward computes ``dL/dW`` as
    ``Gᵀ x``, which comes out contiguous in W's own layout. Each gradient is computed only
    if its input needs it, and forward saves only what those gradients read (x for dL/dW,
    W for dL/dx; dL/db needs neither). Backward is written in microtorch ops, so it is
    differentiable again (``create_graph=True``).

    PyTorch records the same computation as ``AddmmBackward0`` (2-D x with a bias: its
    matrix kernel ``addmm`` computes b + x Wᵀ), ``MmBackward0`` (no bias) or a view node
    over them (other x); here it is one ``LinearBackward`` node per layer, whatever x is.

    **Two paths, one formula.** When backward itself needs no graph (no ``create_graph``),
    the engine runs :meth:`numpy_backward`, which computes the same three products with numpy,
    written straight into fresh storages or into the destinations the engine hands it (W's and
    b's slices of a flat gradient buffer, ``fills_destinations``) — up to five op applications
    and a weight-sized copy less per layer; a trace then shows the node's run and its
    allocations, no inner ops. With ``create_graph=True``
    backward runs
    the microtorch ops below, which record a differentiable graph.
    """

    fills_destinations = True

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        need_x, need_w = (ctx.needs_input_grad or (False, False))[:2]
        ctx.save_for_backward(x if need_w else None, weight if need_x else None)
        xd, wd = x._data, weight._data
        ctx.bias_shape = None if bias is None else bias._data.shape
        out_features = wd.shape[0]
        y = ctx.empty(xd.shape[:-1] + (out_features,), xd.dtype)
        if xd.ndim > 2:  # one 2-D product over the flattened rows (y's reshape is a view: y is contiguous)
            np.matmul(xd.reshape(-1, xd.shape[-1]), wd.T, out=y.reshape(-1, out_features))
        else:
            np.matmul(xd, wd.T, out=y)
        if bias is not None:
            y += bias._data
        return y

    @staticmethod
    def backward(ctx, g):
        need_x, need_w = ctx.needs_input_grad[:2]
        x, weight = ctx.saved_tensors
        gx = g @ weight if need_x else None
        gw = gb = None
        if need_w:
            if x.ndim == 1:  # an outer product
                gw = g.unsqueeze(1) @ x.unsqueeze(0)
            elif x.ndim == 2:
                gw = g.mT @ x
            else:
                gw = g.reshape(-1, g.shape[-1]).mT @ x.reshape(-1, x.shape[-1])
        if ctx.bias_shape is not None and ctx.needs_input_grad[2]:
            if ctx.bias_shape == g.shape[-1:]:  # the usual bias (out,): sum over the rows
                gb = g.sum(dim=tuple(range(g.ndim - 1))) if g.ndim > 1 else g
            else:
                gb = unbroadcast(g, ctx.bias_shape)
        return (gx, gw) if ctx.bias_shape is None else (gx, gw, gb)

    @staticmethod
    def numpy_backward(ctx, g, out=None):
        """``backward``'s products in numpy, on the saved arrays x and W (no graph, no
        recorder): see the class docstring. ``out[i]``, when the engine gives one, is where
        input i's gradient goes (W's or b's slice of a flat gradient buffer): computed there."""
        need_x, need_w = ctx.needs_input_grad[:2]
        x, weight = ctx.saved_arrays()
        gd = g._data
        gx = gw = gb = None
        if need_x:
            gx = Tensor._empty(gd.shape[:-1] + weight.shape[1:], gd.dtype)
            np.matmul(gd, weight, out=gx._data)
        if need_w:
            gw = _destination(out, 1, ctx.input_shapes[1], gd.dtype)
            if x.ndim == 1:
                np.multiply(gd[:, None], x, out=gw._data)
            else:
                np.matmul(gd.reshape(-1, gd.shape[-1]).T, x.reshape(-1, x.shape[-1]), out=gw._data)
        if ctx.bias_shape is not None and ctx.needs_input_grad[2]:
            if ctx.bias_shape == gd.shape[-1:] and gd.ndim > 1:
                gb = _destination(out, 2, ctx.bias_shape, gd.dtype)
                np.add.reduce(gd.reshape(-1, gd.shape[-1]), axis=0, out=gb._data)
            else:
                gb = unbroadcast(g, ctx.bias_shape)
        return (gx, gw) if ctx.bias_shape is None else (gx, gw, gb)


def _destination(out, i, shape, dtype) -> Tensor:
    """The tensor to write input ``i``'s gradient into: the engine's ``out[i]`` if it gave
    one of that shape and dtype, else a fresh one."""
    d = None if out is None else out[i]
    return d if d is not None and d._data.shape == shape and d._data.dtype == dtype else Tensor._empty(shape, dtype)


def _broadcasts_to(shape, target) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def linear(x, weight, bias=None):
    """y = x Wᵀ + b (PyTorch's ``F.linear``): x (…, in) or (in,), W (out, in), b (out,) or None.

    A 1-D W gives y = x · W (+ b), as in PyTorch. x, W and b must share one dtype (as in
    PyTorch: convert the input, x.float(), or the model, model.double()).
    """
    # the case every layer calls with, read off the numpy arrays in one test (each Tensor
    # property would be a call); anything else gets the full checks, which name what is wrong
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor)
            and x._data.ndim and weight._data.ndim == 2 and x._data.shape[-1] == weight._data.shape[1]
            and x._data.dtype == weight._data.dtype
            and (bias is None or (isinstance(bias, Tensor) and bias._data.dtype == x._data.dtype
                                  and bias._data.shape == weight._data.shape[:1]))):
        _check_linear(x, weight, bias)
        if weight.ndim == 1:
            y = x @ weight
            return y if bias is None else y + bias
    return Linear.apply(x, weight) if bias is None else Linear.apply(x, weight, bias)


def _check_linear(x, weight, bias) -> None:
    """``linear``'s argument checks: raise the error that says what is wrong (and return for
    the valid unusual cases: a 1-D W, a b that broadcasts to the output)."""
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor)
            and (bias is None or isinstance(bias, Tensor))):
        raise TypeError(f"linear: input, weight and bias must be Tensors (bias may be None), got "
                        f"{type(x).__name__}, {type(weight).__name__} and {type(bias).__name__}")
    if x.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(f"linear: both input and weight need at least 1 dimension, but they have "
                           f"{x.ndim} and {weight.ndim} (shapes {list(x.shape)} and {list(weight.shape)})")
    if weight.ndim > 2:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{list(weight.shape)}")
    if x.dtype != weight.dtype or (bias is not None and bias.dtype != x.dtype):
        names = ", ".join(f"{what} {dtypes.name(t.dtype)}" for what, t in
                          (("input", x), ("weight", weight), ("bias", bias)) if t is not None)
        raise RuntimeError(f"linear: input, weight and bias must have the same dtype, got {names}; "
                           "convert the input (x.float()) or the model (model.double())")
    if x.shape[-1] != weight.shape[-1]:
        raise RuntimeError(f"linear: input of shape {list(x.shape)} and weight of shape "
                           f"{list(weight.shape)} cannot be multiplied (in_features: the input's "
                           f"last dimension is {x.shape[-1]}, the weight's is {weight.shape[-1]})")
    out_shape = x.shape[:-1] + weight.shape[:1]
    if (weight.ndim == 2 and bias is not None and bias.shape != weight.shape[:1]
            and not _broadcasts_to(bias.shape, out_shape)):
        raise RuntimeError(f"linear: bias of shape {list(bias.shape)} does not broadcast to the "
                           f"output shape {list(out_shape)} (it should be [{weight.shape[0]}], "
                           "one value per output feature)")
