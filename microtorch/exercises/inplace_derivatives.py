"""Exercise 1 of notebook 07 (in-place ops and versions): what a backward can take from its
output. An in-place op overwrites its input, so its backward has only the output: for which
unary ops does the output alone determine the derivative?

While the learner's function runs, the engine's backward is switched off. The reference is
independent: each derivative written out in numpy (``NUMPY_SLOPES``;
tests/test_exercise_checkers.py checks it against the engine).
"""
from __future__ import annotations

import numpy as np

from .checker import checker
from .checking import _as_array, _call, _fail, _passed, hidden, rng


def _sig(x):
    return 1 / (1 + np.exp(-x))


#: op -> (forward, derivative at x), in numpy: the reference for exercise 1
NUMPY_SLOPES = {
    "relu": (lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(np.float64)),
    "exp": (np.exp, np.exp),
    "sigmoid": (_sig, lambda x: _sig(x) * (1 - _sig(x))),
    "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "sqrt": (np.sqrt, lambda x: 0.5 / np.sqrt(x)),
    "log": (np.log, lambda x: 1 / x),
    "neg": (np.negative, lambda x: -np.ones_like(x)),
    "square": (np.square, lambda x: 2 * x),
    "abs": (np.abs, np.sign),
}


def _backward_blocks():
    from .. import autograd
    from ..tensor import Tensor

    return [(Tensor, "backward"), autograd.backward, autograd.grad]


# ----------------------------------------------------------------------------------------------
# Exercise 1: which derivatives can be computed from the output alone?
# ----------------------------------------------------------------------------------------------
#: op -> (the function, in words; how to make it from a float64 tensor; inputs to try;
#:        a hint for when the learner says it cannot be done)
_UNARY = {
    "relu": ("relu(x) = max(x, 0)", lambda x: x.relu(), [-1.5, -0.2, 0.0, 0.3, 2.0],
             "relu(x) > 0 exactly where x > 0, so the output tells you where the slope is 1: "
             "relu_ (in place) keeps only its output for backward"),
    "exp": ("exp(x)", lambda x: x.exp(), [-2.0, -0.5, 0.0, 0.7, 1.5],
            "the derivative of eˣ is eˣ, which is z itself: exp_ keeps its output for backward"),
    "sigmoid": ("sigmoid(x) = 1 / (1 + e⁻ˣ)", lambda x: x.sigmoid(), [-3.0, -0.5, 0.0, 0.8, 2.5],
                "σ'(x) = σ(x) (1 − σ(x)) = z (1 − z): sigmoid_ keeps its output for backward"),
    "tanh": ("tanh(x)", lambda x: x.tanh(), [-2.0, -0.4, 0.0, 0.6, 1.7],
             "tanh'(x) = 1 − tanh²(x) = 1 − z²: tanh_ keeps its output for backward"),
    "sqrt": ("sqrt(x)", lambda x: x.sqrt(), [0.25, 0.5, 1.0, 2.0, 4.0],
             "d√x/dx = 1 / (2√x) = 1 / (2z): sqrt_ keeps its output for backward"),
    "log": ("log(x)", lambda x: x.log(), [0.2, 0.5, 1.0, 2.0, 5.0],
            "d log x / dx = 1/x, and x = eᶻ, so it is e⁻ᶻ: the output is enough"),
    "neg": ("neg(x) = −x", lambda x: -x, [-1.0, 0.0, 0.5, 2.0, 3.0],
            "the derivative of −x is −1 everywhere: no values needed at all (neg_ keeps nothing)"),
    "square": ("square(x) = x²", lambda x: x * x, [-1.5, -0.5, 0.5, 1.0, 1.5], None),
    "abs": ("abs(x) = |x|", lambda x: x.abs(), [-2.0, -0.7, 0.4, 0.7, 1.2], None),
}

#: the order the checker asks in (a mix, so an if/elif chain is exercised throughout)
DERIVATIVE_OPS = ["relu", "exp", "square", "sigmoid", "tanh", "abs", "sqrt", "log", "neg"]


def _slope(op: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(z, dz/dx) at x, written out in numpy (float64)."""
    forward, slope = NUMPY_SLOPES[op]
    return forward(x), slope(x)


def _inputs(op: str, xs) -> np.ndarray:
    """The fixed inputs, and random ones in the op's domain (positive for sqrt and log)."""
    r = rng()
    extra = r.uniform(0.1, 4.0, 20 if hidden() else 5) if op in ("sqrt", "log") else \
        r.uniform(-3.0, 3.0, 20 if hidden() else 5) + 0.01
    return np.concatenate([np.array(xs, dtype=np.float64), np.round(extra, 3)])


def check_derivative_from_output(fn) -> None:
    """``fn(op, z) -> array or None``: the derivative dz/dx of the unary ``op`` (one of
    ``"relu", "exp", "sigmoid", "tanh", "sqrt", "log", "neg", "square", "abs"``) written
    as a function of its **output** ``z`` alone (a float64 numpy array), or ``None`` if the
    output does not determine it. An in-place op overwrites its input, so its backward can
    use only the output: this is which ones can. Checked against the derivatives written
    out in numpy, at fixed and random inputs (the engine's backward is switched off meanwhile).
    """
    for op in DERIVATIVE_OPS:
        words, _, xs, why = _UNARY[op]
        x = _inputs(op, xs)
        z, want = _slope(op, x)
        where = f"for {op} ({words}), at z = {np.round(z, 4).tolist()}:"
        got = _call(fn, where, op, z.copy())
        if why is None:  # the output does not determine the slope: find two x with one z
            if got is None:
                continue
            x2 = -x
            z2, slope2 = _slope(op, x2)
            i = int(np.argmax(np.abs(want - slope2) * (np.abs(z - z2) < 1e-12)))
            _fail(f"{where}\nyou returned numbers, but no function of z can be right here: "
                  f"x = {x[i]:g} and x = {x2[i]:g} both give z = {z[i]:g}, with slopes {want[i]:g} "
                  f"and {slope2[i]:g}. The output has lost the sign of x. A backward for {op} needs "
                  f"the old x, which an in-place {op}_ would have overwritten (it would have to keep "
                  "a copy, and then nothing is saved). Return None.")
        if got is None:
            _fail(f"{where}\nyou returned None (\"not possible\"), but it is: {why}.")
        try:
            got_a = np.broadcast_to(_as_array(got).astype(np.float64), z.shape)
        except (ValueError, TypeError):
            _fail(f"{where}\nyou returned {got!r}; return an array of z's shape {z.shape} "
                  "(or one number, if the slope is the same everywhere), or None.")
        if np.allclose(got_a, want, rtol=1e-7, atol=1e-9):
            continue
        msg = (f"{where}\nyou returned {np.round(got_a, 4).tolist()},\nbut the derivative "
               f"is {np.round(want, 4).tolist()}.\n")
        as_if_input = None
        if op not in ("sqrt", "log") or np.all(z > 0):
            _, as_if_input = _slope(op, z)
        if as_if_input is not None and np.allclose(got_a, as_if_input, rtol=1e-7, atol=1e-9):
            hint = (f"Those are the slopes of {op} at x = z: you used z as if it were the input. "
                    f"z is already {op}(x); write the derivative in terms of it.")
        elif op == "relu" and np.allclose(got_a, (z >= 0).astype(float)):
            hint = ("z = 0 happens for every x ≤ 0, where the slope is 0 (and at x = 0 the engine, "
                    "like PyTorch, picks 0): the slope is 1 only where z > 0.")
        else:
            hint = f"Hint: {why}."
        _fail(msg + hint)
    _passed("check_derivative_from_output", len(DERIVATIVE_OPS))


check_derivative_from_output = checker("derivative_from_output", blocks=_backward_blocks, suite="derivative_from_output")(check_derivative_from_output)
