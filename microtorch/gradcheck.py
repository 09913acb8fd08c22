"""Numerical gradient checking: compare backward's gradients with central differences.

For each input element xᵢ, the numerical derivative of f's output (dotted with a fixed
random vector v, so one backward per check suffices) is

    (f(x + ε eᵢ) − f(x − ε eᵢ)) · v / 2ε,

which is accurate to O(ε²) — in float64 with ε = 1e-6 that is about 1e-10, far below
any real bug. Use float64 inputs: in float32 the rounding error of f swamps ε.
"""
from __future__ import annotations

import numpy as np

from .autograd import grad
from .grad_mode import no_grad
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree (the message shows the worst element)."""


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, seed: int = 0) -> bool:
    """Check ``fn``'s gradients w.r.t. every input that requires grad.

    Returns True if they match; otherwise raises :class:`GradcheckError` (or returns False
    with ``raise_exception=False``) describing the worst mismatch: which input, which
    element, the analytical and numerical values.
    """
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    wrt = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if not wrt:
        raise ValueError("gradcheck: no input requires grad; pass tensors created with requires_grad=True")
    for t in wrt:
        if t.dtype != np.float64:
            raise TypeError(f"gradcheck: inputs must be float64 for a meaningful check, got "
                            f"{t.dtype.name}; create them with dtype=mt.float64")
    out = fn(*inputs)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    v = np.random.default_rng(seed).standard_normal(out.shape)
    analytical = grad(out, wrt, grad_outputs=Tensor._wrap(v.astype(out.dtype)), allow_unused=True)

    worst = None
    for k, (t, a) in enumerate(zip(wrt, analytical)):
        a = np.zeros(t.shape) if a is None else a._data
        x = t._data
        numerical = np.zeros(t.shape)
        with no_grad():
            for i in np.ndindex(t.shape):
                orig = x[i]
                x[i] = orig + eps
                hi = np.sum(fn(*inputs).detach().numpy() * v)
                x[i] = orig - eps
                lo = np.sum(fn(*inputs).detach().numpy() * v)
                x[i] = orig
                numerical[i] = (hi - lo) / (2 * eps)
        err = np.abs(a - numerical) - (atol + rtol * np.abs(numerical))
        if err.size and err.max() > 0:
            i = np.unravel_index(np.argmax(err), err.shape)
            if worst is None or err[i] > worst[0]:
                worst = (err[i], k, i, a[i], numerical[i])
    if worst is None:
        return True
    _, k, i, a_i, n_i = worst
    msg = (f"Jacobian mismatch for input {k} (shape {list(wrt[k].shape)}) at element {[int(j) for j in i]}: "
           f"backward gives {a_i:.6g}, central differences give {n_i:.6g} "
           f"(|difference| {abs(a_i - n_i):.3g} > atol {atol} + rtol {rtol} · |numerical|)")
    if raise_exception:
        raise GradcheckError(msg)
    return False
