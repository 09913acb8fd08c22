"""Exercises 3 and 4 of notebook 02 (backpropagation): numerical gradients by central
differences, and a new op (LogSumExp over the last dimension) with its forward and backward.

While the learner's function runs, the engine's backward and gradcheck (and, for the new op,
its ``log_softmax``) are switched off. The references are independent: gradients written out
by hand in numpy, and logsumexp and softmax written out in numpy.
"""
from __future__ import annotations

import numpy as np

from ..creation import randn
from .checker import checker
from .checking import HIDDEN_SEED, _as_array, _call, _fail, _passed, hidden, learner, rng


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numerical_grad_cases():
    """``(what, f, x, grad)``: ``grad(x)`` is the gradient written out by hand, in numpy."""
    from ..creation import Generator, tensor

    g = Generator().manual_seed(HIDDEN_SEED if hidden() else 3)
    W = randn(3, 2, dtype="float64", generator=g)
    Wn = W.numpy()
    cases = [
        ("f(x) = sum(x ** 3)", lambda x: (x ** 3).sum(), lambda x: 3 * x ** 2,
         tensor([0.5, -1.0, 2.0], dtype="float64")),
        ("f(x) = tanh(x * x), x a 0-d tensor", lambda x: (x * x).tanh(),
         lambda x: (1 - np.tanh(x * x) ** 2) * 2 * x, tensor(0.7, dtype="float64")),
        ("f(x) = sum(tanh(x @ W)) for a (2, 3) x", lambda x: (x @ W).tanh().sum(),
         lambda x: (1 - np.tanh(x @ Wn) ** 2) @ Wn.T, randn(2, 3, dtype="float64", generator=g)),
        ("f(x) = log(sum(exp(x)))", lambda x: x.exp().sum().log(),
         lambda x: np.exp(x) / np.exp(x).sum(), randn(2, 2, dtype="float64", generator=g)),
        ("f(x) = mean(x * x.sigmoid())", lambda x: (x * x.sigmoid()).mean(),
         lambda x: (_sigmoid(x) + x * _sigmoid(x) * (1 - _sigmoid(x))) / x.size,
         randn(5, dtype="float64", generator=g)),
    ]
    r = rng()
    for _ in range(6 if hidden() else 2):  # the same functions at random points and shapes
        what, f, grad, x = cases[int(r.integers(0, len(cases)))]
        if x.ndim == 0:
            x = tensor(float(r.uniform(-1.5, 1.5)), dtype="float64")
        elif "@ W" in what:
            x = tensor(r.standard_normal((int(r.integers(1, 4)), 3)), dtype="float64")
        else:
            x = tensor(r.standard_normal(tuple(int(k) for k in r.integers(1, 4, int(r.integers(1, 3))))),
                       dtype="float64")
        cases.append((what, f, grad, x))
    return [(what, f, x, grad) for what, f, grad, x in cases]


def _gradient_blocks():
    from .. import autograd
    from ..gradcheck import gradcheck
    from ..tensor import Tensor

    return [(Tensor, "backward"), autograd.backward, autograd.grad, gradcheck]


def check_numerical_grad(fn, eps: float = 1e-4) -> None:
    """``fn(f, x, eps) -> array shaped like x``: central differences
    ``(f(x + eps·eᵢ) − f(x − eps·eᵢ)) / 2eps`` for every element i of ``x``, where ``f``
    maps a float64 tensor to a 0-d tensor. ``x`` must hold its original numbers again when
    ``fn`` returns. Checked against gradients written out by hand (the engine's backward is
    switched off meanwhile: the exercise is to get them without it).
    """
    cases = _numerical_grad_cases()
    for what, f, x, grad in cases:
        where = f"for {what}, at x of shape {tuple(x.shape)}:\n"
        x0 = np.array(x._data)
        want = np.asarray(grad(x0.copy()), dtype=np.float64)
        got = _call(fn, where.rstrip(":\n") + ",", f, x, eps)
        if got is None:
            _fail(f"{where}your function returned None: did you forget `return`?")
        if not np.array_equal(x._data, x0):
            _fail(f"{where}x holds different numbers after your function returned. Put each "
                  "element back after perturbing it (keep the old value, restore it): other "
                  "code, and the next element's differences, expect the original x.")
        got_a = _as_array(got).astype(np.float64)
        if got_a.shape != tuple(x.shape):
            _fail(f"{where}you returned shape {got_a.shape}; the gradient has x's shape "
                  f"{tuple(x.shape)}: one derivative per element of x.")
        tol = 1e-6 + 1e-5 * np.abs(want)
        if np.all(np.abs(got_a - want) <= tol):
            continue
        one_sided = _one_sided(f, x0, eps)
        msg = f"{where}you returned\n{got_a}\nbut the true gradient is\n{want}\n"
        if np.allclose(got_a, 0):
            hint = ("All zeros: f never saw your perturbation. If you changed a copy (np.array(x), "
                    "x.numpy().copy()), f(x) still reads the old numbers. Either write into "
                    "x.numpy() (it shares x's bytes) and restore afterwards, or call f on a new "
                    "tensor built from the perturbed array.")
        elif np.allclose(got_a, 2 * want, rtol=1e-4, atol=1e-6):
            hint = ("Twice the right answer: you divided by eps, but x + eps and x − eps are "
                    "2·eps apart. Divide by 2 * eps.")
        elif np.allclose(got_a, want / 2, rtol=1e-4, atol=1e-6):
            hint = "Half the right answer: divide the difference by 2 * eps, not by 4 * eps."
        elif any(np.allclose(got_a, o, rtol=1e-6, atol=1e-9) for o in one_sided):
            hint = ("These are one-sided differences, (f(x + eps) − f(x)) / eps: their error "
                    "shrinks only like eps (here ~1e-4). Central differences, "
                    "(f(x + eps) − f(x − eps)) / (2 * eps), cancel the first error term: it "
                    "shrinks like eps², ~1e-8 here.")
        else:
            hint = ("Perturb one element at a time (all others unchanged), by +eps and by −eps, "
                    "and put that element's difference quotient at the same index of the result.")
        _fail(msg + hint)
    _passed("check_numerical_grad", len(cases))


check_numerical_grad = checker("numerical_grad", blocks=_gradient_blocks)(check_numerical_grad)


def _one_sided(f, x0: np.ndarray, eps: float) -> list[np.ndarray]:
    """Forward and backward one-sided differences of f at x0 (to recognise them)."""
    from ..creation import tensor

    base = float(f(tensor(x0)).item())
    fwd, bwd = np.zeros(x0.shape), np.zeros(x0.shape)
    for i in np.ndindex(x0.shape):
        xp = x0.copy()
        xp[i] += eps
        fwd[i] = (float(f(tensor(xp)).item()) - base) / eps
        xp[i] = x0[i] - eps
        bwd[i] = (base - float(f(tensor(xp)).item())) / eps
    return [fwd, bwd]


# ----------------------------------------------------------------------------------------------
# Exercise 4: a new op, forward and backward (LogSumExp over the last dimension)
# ----------------------------------------------------------------------------------------------
def _numpy_logsumexp(x: np.ndarray) -> np.ndarray:
    """The reference: log Σⱼ exp(xⱼ) over the last axis, shifted by the max (no overflow)."""
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


def _numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _lse_cases():
    """``(what, x)``: float64 inputs, fixed (incl. huge and very negative values) and random."""
    r = rng()
    cases = [("a vector", np.array([0.5, -1.0, 2.0])),
             ("a (2, 3) matrix: one logsumexp per row", np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])),
             ("huge values, [1000, 1001, 999] (exp overflows without the max shift)", np.array([1000.0, 1001.0, 999.0])),
             ("very negative values, [-1000, -1002] (exp underflows to 0 without the shift)", np.array([-1000.0, -1002.0])),
             ("a (2, 2, 4) tensor: over the last dimension only", np.arange(16.0).reshape(2, 2, 4) / 4)]
    for k in range(12 if hidden() else 4):
        shape = tuple(int(n) for n in r.integers(1, 5, int(r.integers(1, 4))))
        cases.append((f"random input #{k + 1} of shape {shape}", r.standard_normal(shape) * 3))
    return cases


def _lse_blocks():
    from ..functions import loss
    from ..tensor import Tensor

    blocks = [loss.log_softmax]
    if "log_softmax" in Tensor.__dict__:
        blocks.append((Tensor, "log_softmax"))
    return blocks


def check_logsumexp(cls) -> None:
    """``cls``: a subclass of ``mt.Function`` whose ``cls.apply(x)`` is log Σⱼ exp(x[..., j])
    over the last dimension (the result has shape ``x.shape[:-1]``), with a backward. Checked:
    its values against numpy (also for huge and very negative inputs), its gradient against
    g[..., None] · softmax(x) for a random upstream gradient g, and that the graph records
    your node (``y.grad_fn`` is a ``cls``, and a trace names its op). Fixed and random inputs.
    """
    from ..creation import tensor
    from ..trace.recorder import Trace
    from ..node import Function

    if not (isinstance(cls, type) and issubclass(cls, Function)):
        _fail(f"check_logsumexp needs your class (class LogSumExp(mt.Function): ...), got {cls!r}.")
    r = np.random.default_rng(HIDDEN_SEED if hidden() else 11)
    cases = _lse_cases()
    for what, x0 in cases:
        where = f"for {what}, x = {np.round(x0, 3).tolist()}:"
        want = _numpy_logsumexp(x0)
        x = tensor(x0, dtype="float64", requires_grad=True)
        tr = Trace()
        with tr:
            y = _call(cls.apply, f"{where}\nforward:", x)
        y_a = _as_array(y).astype(np.float64)
        if y_a.shape != want.shape:
            hint = ("You reduced over the wrong dimension: sum over the LAST one (axis=-1)."
                    if x0.ndim > 1 and y_a.shape == x0.shape[1:] else
                    "Reduce the last dimension away: keepdims=False (or take [..., 0] at the end).")
            _fail(f"{where}\nyour forward returned shape {y_a.shape}; the result has x.shape[:-1] = "
                  f"{want.shape}.\n{hint}")
        if not np.all(np.isfinite(y_a)) or not np.allclose(y_a, want, rtol=1e-10, atol=1e-10):
            naive = np.log(np.exp(x0).sum(axis=-1)) if np.all(np.abs(x0) < 700) else None
            if not np.all(np.isfinite(y_a)):
                hint = ("inf or nan: exp(1000) overflows float64. Subtract the row's max m first: "
                        "log Σ exp(x) = m + log Σ exp(x − m).")
            elif naive is not None and np.allclose(y_a, np.log(np.exp(x0).mean(axis=-1))):
                hint = "That is the log of the MEAN of exp(x): sum, do not average."
            elif np.allclose(y_a, x0.max(axis=-1)):
                hint = "That is only the max m: add log Σ exp(x − m) to it."
            else:
                hint = "log Σⱼ exp(xⱼ) = m + log Σⱼ exp(xⱼ − m), with m the max over the last dimension."
            _fail(f"{where}\nyour forward gives {np.round(y_a, 6).tolist()}, but logsumexp is "
                  f"{np.round(want, 6).tolist()}.\n{hint}")
        if not isinstance(getattr(y, "grad_fn", None), cls):
            _fail(f"{where}\nthe result's grad_fn is {getattr(y, 'grad_fn', None)!r}, not a {cls.__name__} "
                  "node: call your op as LogSumExp.apply(x), and let forward return a numpy array.")
        if not any(e["op"] == cls.__name__ for e in tr.filter("op")):
            _fail(f"{where}\nthe trace recorded no {cls.__name__} op.")
        g0 = r.standard_normal(want.shape)
        want_grad = g0[..., None] * _numpy_softmax(x0)
        try:
            with learner():
                (y * tensor(g0, dtype="float64")).sum().backward()
        except (NotImplementedError, AssertionError):
            raise
        except Exception as exc:
            hint = ""
            if "invalid gradient" in str(exc) or "shape" in str(exc):
                hint = ("\nThe gradient for x must have x's shape: g has the output's shape "
                        "x.shape[:-1], so give it back its last dimension (g.unsqueeze(-1), or "
                        "g.reshape(*g.shape, 1)) before multiplying by softmax(x).")
            _fail(f"{where}\nyour backward raised {type(exc).__name__}: {exc}{hint}")
        got = _as_array(x.grad).astype(np.float64) if x.grad is not None else None
        if got is None:
            _fail(f"{where}\nx got no gradient: backward must return the gradient for x.")
        if np.allclose(got, want_grad, rtol=1e-8, atol=1e-10):
            continue
        soft = _numpy_softmax(x0)
        if np.allclose(got, soft, rtol=1e-8, atol=1e-10) or np.allclose(got, np.broadcast_to(soft.sum(-1, keepdims=True), soft.shape)):
            hint = "You left out the upstream gradient g: the chain rule multiplies by it (g[..., None] · softmax)."
        elif np.allclose(got, g0[..., None] * np.exp(x0), rtol=1e-6):
            hint = "exp(x) is not yet the derivative: divide by Σ exp(x) — the derivative is softmax(x) = exp(x − y)."
        else:
            hint = "∂y/∂xⱼ = exp(xⱼ − y) = softmax(x)ⱼ; the gradient for x is g[..., None] · softmax(x)."
        _fail(f"{where}\nfor the upstream gradient g = {np.round(g0, 3).tolist()}, x.grad is\n"
              f"{np.round(got, 5).tolist()}\nbut it should be\n{np.round(want_grad, 5).tolist()}\n{hint}")
    _passed("check_logsumexp", len(cases))


check_logsumexp = checker("LogSumExp", blocks=_lse_blocks)(check_logsumexp)
