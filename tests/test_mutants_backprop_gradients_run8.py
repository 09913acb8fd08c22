"""Mutation run 8, the gradient half of ``exercises/backprop.py`` (since split: ``backprop_gradients.py``;
notebook 02's exercises 3 and 4): the survivors run 7 left untriaged. What a learner is shown:

* ``check_numerical_grad``'s hints and their tolerances: twice or half the answer is recognised within
  1e-6 + 1e-4·|it|, one-sided differences within 1e-9 + 1e-6·|them|, not beyond (answers moved by just
  less and just more than that, element by element, on the first case);
* ``check_logsumexp``'s backward hints and their tolerances: softmax without g within 1e-10 + 1e-8·softmax,
  g·exp(x) undivided within 1e-8 + 1e-6·|g·exp(x)|, not beyond (on the vector case);
* the numerical-gradient cases: the visible run is the same every time (the same numbers in its messages,
  the same W), no two random cases are the same point, and a random point of a function whose fixed x
  has dimensions has dimensions too (a vector function is not tried on a number).

Record: tests/mutation-run-8/exercises-backprop-gradients.md.
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import backprop_gradients as ex

from checker_probes import Recorder, failure
from test_exercise_checkers import _softmax_of  # softmax from what forward saved
from test_exercises import _one_sided as _forward_one_sided  # (f(x + eps) - f(x)) / eps
from test_mutants_backprop_gradients_run7 import (FIRST, GENERIC, GENERIC_BWD, NO_G, ONE_SIDED, VECTOR,
                                                   _cases_both, _lse, _wrong_on, numerical_grad)

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:divide by zero",
                                        "ignore:invalid value encountered")

TWICE = "Twice the right answer: you divided by eps"
HALF = "Half the right answer: divide the difference by 2 * eps"
EXP_ONLY = "exp(x) is not yet the derivative: divide by Σ exp(x)"


def _checked(hidden=False):
    """The checker's calls ``(f, x, eps)`` and the true gradient of each (the hand-written one)."""
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy, hidden=hidden)
    cases = _cases_both()[1 if hidden else 0]
    assert len(cases) == len(spy.calls)
    return [(f, x, eps, grad(np.array(x.numpy()))) for (f, x, eps), (_, _, _, grad) in zip(spy.calls, cases)]


def _beyond(b, atol, rtol, delta):
    """b moved away from itself by the tolerance atol + rtol·|b| of ``np.allclose(·, b)``, plus delta."""
    b = np.asarray(b)
    return b + np.where(b < 0, -1.0, 1.0) * (atol + rtol * np.abs(b) + delta)


# ----------------------------------------------------------------------------------------------
# check_numerical_grad: which hint, within which tolerance
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale, words", [(2.0, TWICE), (0.5, HALF)], ids=["twice", "half"])
def test_twice_and_half_are_recognised_within_1e_6_plus_1e_4_relative(scale, words):
    """Twice (half) the answer gets its hint while each element is within 1e-6 + 1e-4·|2·grad| (|grad / 2|)
    of it: just inside (1e-7 less) it does, just outside (1e-7 more) the general hint."""
    def off_by(delta):
        return lambda f, x, eps: _beyond(scale * numerical_grad(f, x, eps), 1e-6, 1e-4, delta)
    msg = failure(mt.exercises.check_numerical_grad, off_by(-1e-7))
    assert msg.startswith(FIRST) and words in msg, msg
    msg = failure(mt.exercises.check_numerical_grad, off_by(+1e-7))
    assert msg.startswith(FIRST) and GENERIC in msg and words not in msg, msg


def test_one_sided_differences_are_recognised_within_1e_9_plus_1e_6_relative():
    """Forward differences o off by less than 1e-9 + 1e-6·|o| (rounding of another order of operations) get
    the one-sided hint (5e-10 less than that); 4.5e-9 more than that they are not the checker's one-sided differences:
    the general hint."""
    def off_by(delta):
        return lambda f, x, eps: _beyond(_forward_one_sided(f, x, eps), 1e-9, 1e-6, delta)
    msg = failure(mt.exercises.check_numerical_grad, off_by(-5e-10))
    assert msg.startswith(FIRST) and ONE_SIDED in msg, msg
    msg = failure(mt.exercises.check_numerical_grad, off_by(4.5e-9))
    assert msg.startswith(FIRST) and GENERIC in msg and ONE_SIDED not in msg, msg


# ----------------------------------------------------------------------------------------------
# check_logsumexp: the backward hints' tolerances
# ----------------------------------------------------------------------------------------------
def test_softmax_without_g_is_recognised_within_1e_10_plus_1e_8_relative():
    """A backward giving softmax(x) itself, to within 1e-10 + 1e-8·softmax, is told it left out g; 2e-9
    beyond that it is some other mistake: the general hint."""
    def softmax_off_by(delta):
        return _lse(backward=lambda ctx, g: mt.tensor(_beyond(_softmax_of(ctx).numpy(), 1e-10, 1e-8, delta)))
    msg = failure(mt.exercises.check_logsumexp, softmax_off_by(-5e-11))
    assert msg.startswith(VECTOR) and NO_G in msg, msg
    msg = failure(mt.exercises.check_logsumexp, softmax_off_by(2e-9))
    assert msg.startswith(VECTOR) and GENERIC_BWD in msg and NO_G not in msg, msg


def test_exp_x_undivided_is_recognised_within_1e_8_plus_1e_6_relative():
    """g · exp(x), to within 1e-8 + 1e-6·|g · exp(x)|, gets the "divide by Σ exp(x)" hint; 1e-9 beyond
    that the general one."""
    def exp_off_by(delta):
        return _lse(backward=lambda ctx, g: mt.tensor(_beyond((g.unsqueeze(-1) * ctx.saved_tensors[0].exp()).numpy(),
                                                              1e-8, 1e-6, delta)))
    msg = failure(mt.exercises.check_logsumexp, exp_off_by(-1e-9))
    assert msg.startswith(VECTOR) and EXP_ONLY in msg, msg
    msg = failure(mt.exercises.check_logsumexp, exp_off_by(1e-9))
    assert msg.startswith(VECTOR) and GENERIC_BWD in msg and EXP_ONLY not in msg, msg


# ----------------------------------------------------------------------------------------------
# the numerical-gradient cases
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", [False, True])
def test_a_run_shows_the_same_numbers_every_time(hidden):
    """Run twice, a mistake on any one case gets the same message (x, the answer, the true gradient):
    W and every point come from the checker's seeds, not from the global random state."""
    n = len(_checked(hidden))
    for k in range(n):
        wrong = lambda f, x, eps, g: g * 1.5  # noqa: E731
        first = failure(mt.exercises.check_numerical_grad, _wrong_on(k, wrong), hidden=hidden)
        mt.randn(7)  # the global generator moves on meanwhile
        assert failure(mt.exercises.check_numerical_grad, _wrong_on(k, wrong), hidden=hidden) == first, k


def test_the_matrix_cases_w_is_the_same_every_time():
    """f(x) = sum(tanh(x @ W)) is one function in every visible run: the same value at the same point."""
    point = mt.tensor(np.arange(6.0).reshape(2, 3) / 7 - 0.3, dtype="float64")
    values = []
    for _ in range(2):
        what, f, x, grad = _cases_both()[0][2]
        assert "@ W" in what
        values.append(f(point).item())
        mt.randn(7)
    assert values[0] == values[1]


@pytest.mark.parametrize("hidden", [False, True])
def test_no_two_cases_are_the_same_point(hidden):
    """The random cases are the functions at new points: none repeats a case already tried."""
    seen = []
    for f, x, eps, want in _checked(hidden):
        for f2, x2 in seen:
            assert not (f is f2 and x.shape == x2.shape and np.array_equal(x.numpy(), x2.numpy()))
        seen.append((f, x))


def test_random_points_have_the_dimensions_of_their_function():
    """A random case of a function whose fixed x is a vector or a matrix is a vector or a matrix too (1 or
    2 dimensions, each of size 1–3), never a number: a 0-d x is the tanh(x²) case's kind."""
    for cases in _cases_both():
        fixed = {what: x for what, f, x, grad in cases[:5]}
        for what, f, x, grad in cases[5:]:
            if fixed[what].ndim == 0:
                assert x.ndim == 0
            else:
                assert 1 <= x.ndim <= 2 and all(1 <= n <= 3 for n in x.shape), (what, x.shape)
