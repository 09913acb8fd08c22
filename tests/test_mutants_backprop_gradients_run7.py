"""Mutation run 7, the gradient half of ``exercises/backprop.py`` (since split:
``backprop_gradients.py``; notebook 02's exercises 3 and 4): what a learner is shown.

* ``check_numerical_grad``: a catalogue of wrong numerical gradients (one-sided differences either
  way, dividing by eps or by 4·eps, x not put back, perturbing a copy, only the first element
  perturbed, all elements at once, the sign swapped, a gradient of the wrong shape, an eps of its
  own, ``None``, a function that raises), each rejected on a named case with its numbers and
  its hint, visible and hidden; the right answer in other forms (a Tensor, a list) passes; the
  checker's ``eps`` reaches the learner's function;
* ``check_logsumexp``: a catalogue of wrong LogSumExp classes (the naive forward that overflows,
  a shift that only guards against overflow, the mean, the max alone, the wrong axis, keepdims,
  a float32 forward, backward without g, without unsqueeze, exp(x) without the division, a
  naive softmax, nothing saved for backward, no gradient, not a one-node op, the engine's
  log_softmax), each rejected with its case and hint, visible and hidden;
* the references (the hand-written gradients of the numerical-gradient cases, ``_sigmoid``,
  ``_one_sided``, ``_numpy_logsumexp``, ``_numpy_softmax``) against hand-worked values, the
  engine's backward and torch;
* the cases are the kinds promised (a vector, a 0-d x, a matrix through W, softmax-like and
  sigmoid cases; huge and very negative LogSumExp inputs, a matrix, a 3-d tensor; random
  ones reproducible, other and more in the hidden run), and the pass messages count them.

Record: tests/mutation-run-7/exercises-backprop-gradients.md.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import backprop_gradients as ex
from microtorch.exercises import checking

from checker_probes import Recorder, cases_counted, failure
from test_exercise_checkers import _softmax_of, _solutions  # softmax from what forward saved
from test_exercises import _one_sided as _forward_one_sided  # (f(x + eps) - f(x)) / eps



def _torch():
    """PyTorch, the oracle; a test that needs it skips alone without it (the `oracle` extra)."""
    return pytest.importorskip("torch")

SOLUTION = _solutions("02_backpropagation")  # the notebook's reference answers
numerical_grad = SOLUTION["numerical_grad"]
LogSumExp = SOLUTION["LogSumExp"]

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:divide by zero",
                                        "ignore:invalid value encountered")


def _hidden_too(make):
    """``make()`` in the visible run, then in the hidden one."""
    before = checking._HIDDEN[0]
    try:
        checking._HIDDEN[0] = False
        visible = make()
        checking._HIDDEN[0] = True
        return visible, make()
    finally:
        checking._HIDDEN[0] = before


def _where(msg: str) -> tuple[str, tuple]:
    """The case label and the shape of x that a numerical-gradient failure names."""
    m = re.match(r"for (.*), at x of shape (\(.*?\)):\n", msg)
    assert m, msg
    return m.group(1), eval(m.group(2))


# ----------------------------------------------------------------------------------------------
# exercise 3: numerical gradients
# ----------------------------------------------------------------------------------------------
def _central(f, x, eps, data=None, scale=2.0, indices=None):
    """Central differences, optionally perturbing a copy, dividing by ``scale``·eps, or only some indices."""
    grad = np.zeros(x.shape)
    data = x.numpy() if data is None else data
    for i in (indices(x) if indices else np.ndindex(x.shape)):
        old = data[i]
        data[i] = old + eps
        hi = f(x).item()
        data[i] = old - eps
        lo = f(x).item()
        data[i] = old
        grad[i] = (hi - lo) / (scale * eps)
    return grad


def _backward_one_sided(f, x, eps):
    grad, data = np.zeros(x.shape), x.numpy()
    base = f(x).item()
    for i in np.ndindex(x.shape):
        old = data[i]
        data[i] = old - eps
        grad[i] = (base - f(x).item()) / eps
        data[i] = old
    return grad


def _divides_by_eps(f, x, eps):
    return _central(f, x, eps, scale=1.0)


def _divides_by_4_eps(f, x, eps):
    return _central(f, x, eps, scale=4.0)


def _not_restored(f, x, eps):
    grad, data = np.zeros(x.shape), x.numpy()
    for i in np.ndindex(x.shape):
        old = data[i]
        data[i] = old + eps
        hi = f(x).item()
        data[i] = old - eps
        lo = f(x).item()
        grad[i] = (hi - lo) / (2 * eps)  # x[i] left at old - eps
    return grad


def _restored_to_zero(f, x, eps):
    grad = numerical_grad(f, x, eps)
    x.numpy()[...] = 0.0
    return grad


def _perturbs_a_copy(f, x, eps):
    return _central(f, x, eps, data=x.numpy().copy())  # f never sees the changes


def _first_element_only(f, x, eps):
    return _central(f, x, eps, indices=lambda x: [next(np.ndindex(x.shape))])


def _all_but_last(f, x, eps):
    return _central(f, x, eps, indices=lambda x: list(np.ndindex(x.shape))[:-1])


def _all_at_once(f, x, eps):
    data = x.numpy()
    old = data.copy()
    data[...] = old + eps
    hi = f(x).item()
    data[...] = old - eps
    lo = f(x).item()
    data[...] = old
    return np.full(x.shape, (hi - lo) / (2 * eps))


def _sign_swapped(f, x, eps):
    return -numerical_grad(f, x, eps)


def _flattened(f, x, eps):
    return numerical_grad(f, x, eps).reshape(-1)


def _transposed(f, x, eps):
    return numerical_grad(f, x, eps).T


def _own_big_eps(f, x, eps):
    return numerical_grad(f, x, 1e-2)


def _returns_none(f, x, eps):
    numerical_grad(f, x, eps)


def _raises(f, x, eps):
    raise ValueError("no gradient today")


def _nudged(f, x, eps):
    return numerical_grad(f, x, eps) + 1e-3


FIRST = "for f(x) = sum(x ** 3), at x of shape (3,):\n"
ZERO_D = "for f(x) = tanh(x * x), x a 0-d tensor, at x of shape ():\n"
MATRIX = "f(x) = sum(tanh(x @ W))"
ONE_SIDED = "These are one-sided differences, (f(x + eps) − f(x)) / eps"
GENERIC = "Perturb one element at a time (all others unchanged), by +eps and by −eps"

GRAD_MISTAKES = [  # (wrong answer, how the message starts, words of its numbers or reason, words of its hint)
    (_forward_one_sided, FIRST, "you returned\n", ONE_SIDED),
    (_backward_one_sided, FIRST, "you returned\n", ONE_SIDED),
    (_divides_by_eps, FIRST, "but the true gradient is\n[ 0.75  3.   12.  ]", "Twice the right answer"),
    (_divides_by_4_eps, FIRST, "but the true gradient is\n", "Half the right answer: divide the difference by 2 * eps"),
    (_not_restored, FIRST, "x holds different numbers after your function returned",
     "Put each element back after perturbing it"),
    (_restored_to_zero, FIRST, "x holds different numbers after your function returned", "expect the original x"),
    (_perturbs_a_copy, FIRST, "you returned\n[0. 0. 0.]\n", "All zeros: f never saw your perturbation"),
    (_first_element_only, FIRST, " 0.         0.        ]\nbut", GENERIC),
    (_all_but_last, FIRST, "you returned\n[0.75", GENERIC),
    (_all_at_once, FIRST, "but the true gradient is\n[ 0.75  3.   12.  ]", GENERIC),
    (_sign_swapped, FIRST, "you returned\n[ -0.75000001  -3.00000001 -12.00000001]", GENERIC),
    (_nudged, FIRST, "you returned\n", GENERIC),
    (_own_big_eps, FIRST, "you returned\n", GENERIC),
    (_flattened, ZERO_D, "you returned shape (1,); the gradient has x's shape ()",
     "one derivative per element of x"),
    (_transposed, "for " + MATRIX, "you returned shape (3, 2); the gradient has x's shape (2, 3)",
     "one derivative per element of x"),
    (_returns_none, FIRST, "your function returned None", "did you forget `return`?"),
    (_raises, "for f(x) = sum(x ** 3), at x of shape (3,), your function raised ValueError: no gradient today",
     "(called as fn(", "It should return an answer for this case."),
]
GRAD_IDS = [m[0].__name__ for m in GRAD_MISTAKES]


@pytest.mark.parametrize("wrong, start, what, hint", GRAD_MISTAKES, ids=GRAD_IDS)
def test_each_wrong_numerical_grad_is_rejected_with_its_case_and_hint(wrong, start, what, hint):
    """A catalogued mistake fails on its first wrong case, named with x's shape, with the numbers and the hint."""
    msg = failure(mt.exercises.check_numerical_grad, wrong)
    assert msg.startswith(start), msg
    assert what in msg and hint in msg, msg


@pytest.mark.parametrize("wrong", [m[0] for m in GRAD_MISTAKES], ids=GRAD_IDS)
def test_each_wrong_numerical_grad_is_rejected_in_the_hidden_run_too(wrong):
    msg = failure(mt.exercises.check_numerical_grad, wrong, hidden=True)
    assert msg.startswith("for f(x) = "), msg


def test_a_failure_shows_the_answer_and_the_true_gradient_at_the_case():
    """The numbers shown are the learner's answer and the hand-worked gradient 3x² at (0.5, −1, 2)."""
    msg = failure(mt.exercises.check_numerical_grad, _sign_swapped)
    got = msg.split("you returned\n")[1].split("\nbut")[0]
    want = msg.split("but the true gradient is\n")[1].split("\n")[0]
    assert np.allclose(np.array(got.strip("[]").split(), float), [-0.75, -3.0, -12.0], rtol=1e-6)
    assert np.allclose(np.array(want.strip("[]").split(), float), [0.75, 3.0, 12.0])


def _wrong_on(case_index, change):
    """The notebook's answer, except on the ``case_index``-th call: ``change(f, x, eps, right)`` there."""
    seen = [0]

    def answer(f, x, eps):
        k, seen[0] = seen[0], seen[0] + 1
        right = numerical_grad(f, x, eps)
        return change(f, x, eps, right) if k == case_index else right
    return answer


@pytest.mark.parametrize("hidden", [False, True])
def test_each_case_is_checked_and_named_with_the_shape_of_its_x(hidden):
    """A mistake on any one case is caught there, and the message names that case and x's shape."""
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy, hidden=hidden)
    for k, (f, x, eps) in enumerate(spy.calls):
        msg = failure(mt.exercises.check_numerical_grad, _wrong_on(k, lambda f, x, eps, g: g * 1.5), hidden=hidden)
        what, shape = _where(msg)
        assert shape == tuple(x.shape)
        assert "Perturb one element at a time" in msg
        assert what.startswith("f(x) = ")


@pytest.mark.parametrize("hidden", [False, True])
def test_one_sided_differences_are_recognised_on_every_case(hidden):
    """One-sided differences (forward or backward) on any one case are rejected with the one-sided hint,
    unless f is so nearly linear there that their error is within the tolerance; most cases catch them."""
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy, hidden=hidden)
    caught = 0
    for k in range(len(spy.calls)):
        for one_sided in (_forward_one_sided, _backward_one_sided):
            try:
                mt.exercises.check_numerical_grad(_wrong_on(k, lambda f, x, eps, g: one_sided(f, x, eps)), hidden=hidden)
            except AssertionError as e:
                assert ONE_SIDED in str(e), (k, str(e))
                caught += 1
    assert caught >= len(spy.calls)  # at least half of the 2 × cases


@pytest.mark.parametrize("hidden", [False, True])
def test_twice_half_and_zeros_are_recognised_on_every_case(hidden):
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy, hidden=hidden)
    for k in range(len(spy.calls)):
        for change, words in [(lambda f, x, eps, g: 2 * g, "Twice the right answer"),
                              (lambda f, x, eps, g: g / 2, "Half the right answer"),
                              (lambda f, x, eps, g: np.zeros_like(g), "All zeros")]:
            msg = failure(mt.exercises.check_numerical_grad, _wrong_on(k, change), hidden=hidden)
            assert words in msg, (k, msg)


def test_the_right_answer_passes_in_other_forms_and_counts_its_cases(capsys):
    """A Tensor, a list or a float32 array of the right numbers pass; the pass message counts the calls."""
    for form in (lambda g: g, lambda g: mt.tensor(g, dtype="float64"), lambda g: g.tolist()):
        spy = Recorder(lambda f, x, eps: form(numerical_grad(f, x, eps)))
        mt.exercises.check_numerical_grad(spy)
        assert cases_counted(capsys.readouterr().out, "check_numerical_grad") == len(spy.calls) >= 5
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy, hidden=True)
    out = capsys.readouterr().out
    assert cases_counted(out, "check_numerical_grad") == len(spy.calls) and "(the hidden ones)" in out


def test_the_hidden_run_has_more_cases():
    visible, hidden = Recorder(numerical_grad), Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(visible)
    mt.exercises.check_numerical_grad(hidden, hidden=True)
    assert len(hidden.calls) > len(visible.calls) >= 6


def test_the_checkers_eps_reaches_the_learners_function():
    """eps is 1e-4 unless given; a given eps is passed on, and central differences with it pass."""
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy)
    assert {args[2] for args in spy.calls} == {1e-4}
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy, eps=1e-5)
    assert {args[2] for args in spy.calls} == {1e-5}


def test_the_one_sided_hint_is_judged_with_the_checkers_eps():
    """With eps = 1e-3 the one-sided differences of that eps get the one-sided hint."""
    msg = failure(mt.exercises.check_numerical_grad, _forward_one_sided, eps=1e-3)
    assert ONE_SIDED in msg


def test_the_learner_gets_float64_tensors_and_f_gives_0d_results():
    spy = Recorder(numerical_grad)
    mt.exercises.check_numerical_grad(spy)
    for f, x, eps in spy.calls:
        assert isinstance(x, mt.Tensor) and x.dtype == mt.float64
        assert f(x).shape == ()


def test_the_tolerance_accepts_rounding_and_refuses_a_small_error():
    """Central differences with a tiny eps (rounding ~1e-9) pass; a relative error of 1e-4 does not."""
    mt.exercises.check_numerical_grad(lambda f, x, eps: numerical_grad(f, x, 1e-6))
    mt.exercises.check_numerical_grad(lambda f, x, eps: numerical_grad(f, x, eps) + 5e-7)
    msg = failure(mt.exercises.check_numerical_grad, lambda f, x, eps: numerical_grad(f, x, eps) * (1 + 1e-4))
    assert msg.startswith(FIRST) and GENERIC in msg
    msg = failure(mt.exercises.check_numerical_grad, lambda f, x, eps: numerical_grad(f, x, eps) + 3e-6)
    assert GENERIC in msg


def test_a_learner_using_backward_grad_or_gradcheck_is_told_to_write_it_themselves():
    def by_autograd_grad(f, x, eps):
        x = x.detach().requires_grad_(True)
        return mt.autograd.grad(f(x), [x])[0].numpy()

    def by_autograd_backward(f, x, eps):
        x = x.detach().requires_grad_(True)
        mt.autograd.backward(f(x))
        return x.grad.numpy()

    def by_gradcheck(f, x, eps):
        from microtorch.gradcheck import gradcheck
        gradcheck(f, (x.detach().requires_grad_(True),))
        return numerical_grad(f, x, eps)

    for answer in (by_autograd_grad, by_autograd_backward, by_gradcheck):
        msg = failure(mt.exercises.check_numerical_grad, answer)
        assert "this exercise asks you to write numerical_grad yourself" in msg, msg


# -- the cases and their hand-written gradients --------------------------------------------------
def _cases_both():
    return _hidden_too(ex._numerical_grad_cases)


def _engine_grad(f, x0):
    x = mt.tensor(x0, dtype="float64", requires_grad=True)
    f(x).backward()
    return x.grad.numpy()


def _torch_f(what, f):
    """The case's function in torch, from its label (W taken from the microtorch f)."""
    torch = _torch()
    W = None
    for cell in f.__closure__ or ():
        if isinstance(cell.cell_contents, mt.Tensor):
            W = torch.tensor(cell.cell_contents.numpy())
    table = {
        "f(x) = sum(x ** 3)": lambda x: (x ** 3).sum(),
        "f(x) = tanh(x * x)": lambda x: torch.tanh(x * x),
        "f(x) = sum(tanh(x @ W))": lambda x: torch.tanh(x @ W).sum(),
        "f(x) = log(sum(exp(x)))": lambda x: torch.log(torch.exp(x).sum()),
        "f(x) = mean(x * x.sigmoid())": lambda x: (x * torch.sigmoid(x)).mean(),
    }
    formula = what.split(",")[0].split(" for ")[0]
    return table[formula]


def test_the_hand_written_gradients_match_the_engine_and_torch_on_every_case():
    torch = _torch()
    for cases in _cases_both():
        for what, f, x, grad in cases:
            x0 = np.array(x.numpy())
            want = grad(x0.copy())
            assert np.asarray(want).shape == x0.shape, what
            assert np.allclose(want, _engine_grad(f, x0), rtol=1e-10, atol=1e-12), what
            xt = torch.tensor(x0, requires_grad=True)
            tf = _torch_f(what, f)
            assert np.isclose(tf(xt).item(), f(mt.tensor(x0)).item(), rtol=1e-12), what
            tf(xt).backward()
            assert np.allclose(want, xt.grad.numpy(), rtol=1e-10, atol=1e-12), what


def test_the_first_cases_hand_worked_values():
    """sum(x³) at (0.5, −1, 2): 3x² = (0.75, 3, 12); tanh(x²) at 0.7: (1 − tanh(0.49)²)·1.4."""
    cases, _ = _cases_both()
    what, f, x, grad = cases[0]
    assert np.allclose(x.numpy(), [0.5, -1.0, 2.0]) and np.allclose(grad(x.numpy().copy()), [0.75, 3.0, 12.0])
    assert f(mt.tensor([0.5, -1.0, 2.0], dtype="float64")).item() == pytest.approx(0.125 - 1 + 8)
    what, f, x, grad = cases[1]
    assert x.shape == () and x.item() == pytest.approx(0.7)
    assert grad(np.array(0.7)) == pytest.approx((1 - np.tanh(0.49) ** 2) * 1.4)
    assert f(mt.tensor(0.7, dtype="float64")).item() == pytest.approx(np.tanh(0.49))


def test_the_sigmoid_reference():
    torch = _torch()
    assert ex._sigmoid(0.0) == 0.5
    assert ex._sigmoid(np.log(3.0)) == pytest.approx(0.75)
    assert ex._sigmoid(-np.log(3.0)) == pytest.approx(0.25)
    x = np.linspace(-4, 4, 9)
    assert np.allclose(ex._sigmoid(x), torch.sigmoid(torch.tensor(x)).numpy())


def test_the_cases_are_the_kinds_promised():
    """A vector, a 0-d x, a (2, 3) x through a (3, 2) W, log-sum-exp and x·sigmoid(x), all float64;
    then random points of the same functions, at other shapes; reproducible; more when hidden."""
    visible, hidden = _cases_both()
    for cases in (visible, hidden):
        shapes = [tuple(x.shape) for _, _, x, _ in cases]
        assert shapes[0] == (3,) and shapes[1] == () and shapes[2] == (2, 3)
        assert len(shapes[3]) == 2 and len(shapes[4]) == 1 and shapes[4][0] >= 2
        kinds = {what.split(",")[0].split(" for ")[0] for what, *_ in cases}
        assert len(kinds) == 5
        for what, f, x, grad in cases:
            assert x.dtype == mt.float64 and not x.requires_grad
            y = f(x)
            assert y.shape == () and np.isfinite(y.item())
            if "0-d" in what:
                assert x.shape == () and -1.5 <= x.item() <= 1.5
            if "@ W" in what:
                assert x.ndim == 2 and x.shape[1] == 3
            assert x.numel() >= 1
    assert len(hidden) > len(visible) >= 6
    assert [w for w, *_ in visible[:5]] == [w for w, *_ in hidden[:5]]
    # random cases: the same functions at random points
    randoms = visible[5:] + hidden[5:]
    assert {w for w, *_ in randoms} <= {w for w, *_ in visible[:5]}
    again, _ = _cases_both()
    for (w1, _, x1, _), (w2, _, x2, _) in zip(visible, again):
        assert w1 == w2 and np.array_equal(x1.numpy(), x2.numpy())
    # the hidden run has other W and other points
    assert not np.array_equal(visible[2][2].numpy(), hidden[2][2].numpy())
    assert not np.isclose(visible[2][1](visible[2][2]).item(), hidden[2][1](visible[2][2]).item())


def test_the_random_cases_vary_their_shapes_and_points():
    """Over the hidden run's random cases the shapes differ from the fixed ones' and from each other."""
    visible, hidden = _cases_both()
    fixed = {tuple(x.shape) for _, _, x, _ in visible[:5]}
    rand_shapes = [tuple(x.shape) for _, _, x, _ in hidden[5:]]
    assert len(set(rand_shapes)) >= 2
    for what, f, x, grad in visible[5:] + hidden[5:]:
        fixed_x = next(x0 for w, _, x0, _ in visible[:5] if w == what)
        assert tuple(x.shape) != tuple(fixed_x.shape) or not np.allclose(x.numpy(), fixed_x.numpy())
        assert all(1 <= n <= 3 for n in x.shape) and x.ndim <= 2


# -- _one_sided: the checker's model of one-sided differences ------------------------------------
def test_one_sided_gives_forward_and_backward_differences_without_touching_x0():
    x0 = np.array([0.5, -1.0, 2.0])
    keep = x0.copy()
    eps = 1e-3
    fwd, bwd = ex._one_sided(lambda x: (x ** 3).sum(), x0, eps)
    assert np.array_equal(x0, keep)
    # ((x + e)³ − x³) / e = 3x² + 3x·e + e²;  (x³ − (x − e)³) / e = 3x² − 3x·e + e²
    assert np.allclose(fwd, 3 * x0 ** 2 + 3 * x0 * eps + eps ** 2, rtol=1e-9)
    assert np.allclose(bwd, 3 * x0 ** 2 - 3 * x0 * eps + eps ** 2, rtol=1e-9)
    fwd, bwd = ex._one_sided(lambda x: (x * x).tanh(), np.array(0.7), eps)
    assert fwd.shape == bwd.shape == ()
    assert fwd == pytest.approx((np.tanh(0.701 ** 2) - np.tanh(0.49)) / eps, rel=1e-9)
    assert bwd == pytest.approx((np.tanh(0.49) - np.tanh(0.699 ** 2)) / eps, rel=1e-9)
    x0 = np.arange(6.0).reshape(2, 3) / 5
    fwd, bwd = ex._one_sided(lambda x: (x * x).sum() + x[0, 1] * x[1, 2], x0, eps)
    grad = 2 * x0
    grad[0, 1] += x0[1, 2]
    grad[1, 2] += x0[0, 1]
    assert np.allclose(fwd, grad + eps, rtol=1e-8) and np.allclose(bwd, grad - eps, rtol=1e-8)


# ----------------------------------------------------------------------------------------------
# exercise 4: LogSumExp as a Function
# ----------------------------------------------------------------------------------------------
def _lse(forward=None, backward=None):
    """The notebook's LogSumExp with forward or backward replaced."""
    body = {"forward": staticmethod(forward or LogSumExp.forward),
            "backward": staticmethod(backward or LogSumExp.backward)}
    return type("LogSumExp", (mt.Function,), body)


def _fwd(f, save=True):
    def forward(ctx, x):
        if save:
            ctx.save_for_backward(x)
            ctx.save_output()
        return f(x.detach().numpy())
    return forward




def _shift_if_positive(d):
    m = np.maximum(d.max(-1, keepdims=True), 0.0)
    return (m + np.log(np.exp(d - m).sum(-1, keepdims=True)))[..., 0]


def _stable(d, axis=-1, keepdims=False):
    m = d.max(axis, keepdims=True)
    y = m + np.log(np.exp(d - m).sum(axis, keepdims=True))
    return y if keepdims else np.squeeze(y, axis)


def _naive_softmax_backward(ctx, g):
    x, y = ctx.saved_tensors
    e = x.exp()
    return g.unsqueeze(-1) * e / e.sum(-1, keepdim=True)


def _exp_minus_max(ctx, g):
    x, y = ctx.saved_tensors
    m = mt.tensor(x.detach().numpy().max(-1, keepdims=True), dtype="float64")
    return g.unsqueeze(-1) * (x - m).exp()  # the shifted numerator, not yet divided


def _forgets_to_save(ctx, x):
    d = x.detach().numpy()
    return _stable(d)


class _SeveralNodes(mt.Function):
    """apply made of the engine's own ops: the graph records Exp, Sum, Log, ..., not this class."""

    @staticmethod
    def apply(x):
        return mt.exercises.fallbacks.LogSumExp.apply(x)


class _ByLogSoftmax(mt.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_output()
        return (x[..., :1] - mt.log_softmax(x, -1)[..., :1]).detach().numpy()[..., 0]

    backward = LogSumExp.backward


VECTOR = "for a vector, x = [0.5, -1.0, 2.0]:\n"
MATRIX_LSE = "for a (2, 3) matrix: one logsumexp per row, x = [[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]]:\n"
HUGE = "for huge values, [1000, 1001, 999] (exp overflows without the max shift), x = [1000.0, 1001.0, 999.0]:\n"
TENSOR3 = "for a (2, 2, 4) tensor: over the last dimension only, x = "
NEGATIVE = "for very negative values, [-1000, -1002] (exp underflows to 0 without the shift), x = [-1000.0, -1002.0]:\n"
OVERFLOW = "inf or nan: exp(1000) overflows float64. Subtract the row's max m first"
GENERIC_FWD = "log Σⱼ exp(xⱼ) = m + log Σⱼ exp(xⱼ − m), with m the max over the last dimension."
GENERIC_BWD = "∂y/∂xⱼ = exp(xⱼ − y) = softmax(x)ⱼ; the gradient for x is g[..., None] · softmax(x)."
NO_G = "You left out the upstream gradient g: the chain rule multiplies by it"

LSE_MISTAKES = [  # (wrong class, how the message starts, words of its numbers or reason, words of its hint)
    (_lse(forward=_fwd(lambda d: np.log(np.exp(d).sum(-1)))), HUGE, "your forward gives inf, but logsumexp is 1001.407606.\n",
     OVERFLOW),
    (_lse(forward=_fwd(_shift_if_positive)), NEGATIVE, "your forward gives -inf, but logsumexp is -999.873072.\n", OVERFLOW),
    (_lse(forward=_fwd(lambda d: np.log(np.exp(d).mean(-1)))), VECTOR, "your forward gives", "the log of the MEAN of exp(x)"),
    (_lse(forward=_fwd(lambda d: d.max(-1))), VECTOR, "your forward gives 2.0, but logsumexp is 2.241311.\n",
     "That is only the max m: add log Σ exp(x − m) to it."),
    (_lse(forward=_fwd(lambda d: _stable(d) + 1e-6)), VECTOR, "your forward gives", GENERIC_FWD),
    (_lse(forward=_fwd(lambda d: _stable(d).astype(np.float32))), VECTOR, "your forward gives", GENERIC_FWD),
    (_lse(forward=_fwd(lambda d: d.max(-1) + np.log(np.exp(d).sum(-1)))), VECTOR, "your forward gives", GENERIC_FWD),
    (_lse(forward=_fwd(lambda d: _stable(d, axis=0))), MATRIX_LSE,
     "your forward returned shape (3,); the result has x.shape[:-1] = (2,).", "sum over the LAST one (axis=-1)"),
    (_lse(forward=_fwd(lambda d: _stable(d, axis=1 if d.ndim > 1 else -1))), TENSOR3,
     "your forward returned shape (2, 4); the result has x.shape[:-1] = (2, 2).", "sum over the LAST one (axis=-1)"),
    (_lse(forward=_fwd(lambda d: _stable(d, keepdims=True))), VECTOR,
     "your forward returned shape (1,); the result has x.shape[:-1] = ().", "keepdims=False"),
    (_lse(forward=_fwd(lambda d: _stable(d.reshape(-1)))), MATRIX_LSE,
     "your forward returned shape (); the result has x.shape[:-1] = (2,).", "keepdims=False"),
    (_lse(backward=lambda ctx, g: _softmax_of(ctx)), VECTOR, "for the upstream gradient g = ", NO_G),
    (_lse(backward=lambda ctx, g: g * _softmax_of(ctx)), MATRIX_LSE, "your backward raised",
     "give it back its last dimension (g.unsqueeze(-1)"),
    (_lse(backward=lambda ctx, g: g.unsqueeze(-1) * ctx.saved_tensors[0].exp()), VECTOR, "x.grad is",
     "exp(x) is not yet the derivative: divide by Σ exp(x)"),
    (_lse(backward=lambda ctx, g: -g.unsqueeze(-1) * _softmax_of(ctx)), VECTOR, "but it should be", GENERIC_BWD),
    (_lse(backward=lambda ctx, g: g.unsqueeze(-1) * (1 - _softmax_of(ctx))), VECTOR, "but it should be", GENERIC_BWD),
    (_lse(backward=_naive_softmax_backward), HUGE, "but it should be", GENERIC_BWD),
    (_lse(backward=_exp_minus_max), VECTOR, "x.grad is", GENERIC_BWD),
    (_lse(forward=_forgets_to_save), VECTOR, "your backward raised", ""),
    (_lse(backward=lambda ctx, g: None), VECTOR, "x got no gradient: backward must return the gradient for x.", ""),
    (_lse(backward=lambda ctx, g: 1 / 0), VECTOR, "your backward raised ZeroDivisionError", ""),
    (_lse(forward=lambda ctx, x: 1 / 0), VECTOR.rstrip("\n") + "\nforward: your function raised ZeroDivisionError",
     "It should return an answer", ""),
    (_SeveralNodes, VECTOR, "the result's grad_fn is", "not a _SeveralNodes node: call your op as LogSumExp.apply(x)"),
    (_ByLogSoftmax, "this exercise asks you to write LogSumExp yourself: the engine's microtorch.functions.loss.log_softmax is "
     "switched off", "", ""),
]
LSE_IDS = ["naive", "shift_if_positive", "mean", "max", "off", "float32", "max_plus_naive", "axis0", "keepdims",
           "flattened", "axis1_3d", "no_g", "no_unsqueeze", "exp_only", "sign", "one_minus", "naive_softmax", "exp_minus_max", "not_saved",
           "none", "backward_raises", "forward_raises", "several_nodes", "log_softmax"]


@pytest.mark.parametrize("wrong, start, what, hint", LSE_MISTAKES, ids=LSE_IDS)
def test_each_wrong_logsumexp_is_rejected_with_its_case_and_hint(wrong, start, what, hint):
    msg = failure(mt.exercises.check_logsumexp, wrong)
    assert msg.startswith(start), msg
    assert what in msg and hint in msg, msg


@pytest.mark.parametrize("wrong", [m[0] for m in LSE_MISTAKES], ids=LSE_IDS)
def test_each_wrong_logsumexp_is_rejected_in_the_hidden_run_too(wrong):
    msg = failure(mt.exercises.check_logsumexp, wrong, hidden=True)
    assert msg.startswith("for ") or msg.startswith("this exercise asks you to write LogSumExp yourself"), msg


def test_not_a_function_class_is_refused():
    for wrong in (lambda x: x, int, mt.exp):
        msg = failure(mt.exercises.check_logsumexp, wrong)
        assert msg.startswith("check_logsumexp needs your class (class LogSumExp(mt.Function): ...), got ")
        assert msg.endswith(f"got {wrong!r}.")


def test_a_backward_failure_shows_g_the_gradient_and_the_right_one():
    """The numbers: g, the learner's x.grad, and g · softmax(x) — for the vector case, by hand."""
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=lambda ctx, g: _softmax_of(ctx)))
    g = float(re.search(r"for the upstream gradient g = (\S+), x.grad is", msg).group(1))
    soft = np.exp([0.5, -1.0, 2.0]) / np.exp([0.5, -1.0, 2.0]).sum()
    got = eval(msg.split("x.grad is\n")[1].split("\n")[0])
    want = eval(msg.split("but it should be\n")[1].split("\n")[0])
    assert np.allclose(got, soft, atol=1e-5)
    assert np.allclose(want, g * soft, atol=2e-3)


def test_backward_without_g_on_a_matrix_is_recognised():
    """The no-g hint also for a batch (a matrix case failing first: the visible vector's g made 1)."""
    def softmax_only(ctx, g):
        return _softmax_of(ctx)
    seen = [0]

    def backward(ctx, g):
        seen[0] += 1
        return g.unsqueeze(-1) * _softmax_of(ctx) if seen[0] == 1 else softmax_only(ctx, g)
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=backward))
    assert msg.startswith(MATRIX_LSE) and NO_G in msg


def _right_first(wrong_backward):
    seen = [0]

    def backward(ctx, g):
        seen[0] += 1
        return LogSumExp.backward(ctx, g) if seen[0] == 1 else wrong_backward(ctx, g)
    return backward


def _ones(ctx, g):
    return mt.ones(ctx.saved_tensors[0].shape, dtype="float64")


def test_backward_returning_ones_on_a_matrix_gets_the_no_g_hint():
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=_right_first(_ones)))
    assert msg.startswith(MATRIX_LSE) and NO_G in msg


def _mean_on_batches(d):
    return np.log(np.exp(d).mean(-1)) if d.ndim > 1 else _stable(d)


def _max_on_batches(d):
    return d.max(-1) if d.ndim > 1 else _stable(d)


def test_forward_hints_hold_for_a_batch_too():
    """The mean and the max alone are recognised row by row on the matrix case (right on vectors)."""
    msg = failure(mt.exercises.check_logsumexp, _lse(forward=_fwd(_mean_on_batches)))
    assert msg.startswith(MATRIX_LSE) and "the log of the MEAN of exp(x)" in msg
    msg = failure(mt.exercises.check_logsumexp, _lse(forward=_fwd(_max_on_batches)))
    assert msg.startswith(MATRIX_LSE) and "That is only the max m" in msg


def test_an_unrelated_backward_error_gets_no_shape_hint():
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=lambda ctx, g: 1 / 0))
    assert "your backward raised ZeroDivisionError: division by zero" in msg
    assert "x's shape" not in msg and "unsqueeze" not in msg


def test_backward_returning_ones_gets_the_no_g_hint():
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=lambda ctx, g: mt.ones(ctx.saved_tensors[0].shape,
                                                                                         dtype="float64")))
    assert msg.startswith(VECTOR) and NO_G in msg


def test_the_right_class_passes_and_counts_its_cases(capsys):
    calls = []

    class Counted(mt.Function):
        @staticmethod
        def forward(ctx, x):
            calls.append(x.shape)
            return LogSumExp.forward(ctx, x)

        backward = LogSumExp.backward

    mt.exercises.check_logsumexp(Counted)
    n_visible = cases_counted(capsys.readouterr().out, "check_logsumexp")
    assert n_visible == len(calls) >= 5
    calls.clear()
    mt.exercises.check_logsumexp(Counted, hidden=True)
    out = capsys.readouterr().out
    assert cases_counted(out, "check_logsumexp") == len(calls) > n_visible and "(the hidden ones)" in out


def test_the_notebooks_class_passes_visible_and_hidden():
    mt.exercises.check_logsumexp(LogSumExp)
    mt.exercises.check_logsumexp(LogSumExp, hidden=True)


def test_the_gradient_is_checked_for_a_random_upstream_gradient_every_case():
    """The checker's g differs between cases and is not all ones: a backward ignoring g is caught on any case."""
    gs = []

    def backward(ctx, g):
        gs.append(g.numpy().copy())
        return LogSumExp.backward(ctx, g)
    mt.exercises.check_logsumexp(_lse(backward=backward))
    assert len(gs) >= 9
    flat = np.concatenate([g.reshape(-1) for g in gs])
    assert len(set(np.round(flat, 12))) == flat.size and not np.allclose(flat, 1)
    again = []
    mt.exercises.check_logsumexp(_lse(backward=lambda ctx, g: again.append(g.numpy().copy()) or LogSumExp.backward(ctx, g)))
    assert all(np.array_equal(a, b) for a, b in zip(gs, again))
    hidden = []
    mt.exercises.check_logsumexp(_lse(backward=lambda ctx, g: hidden.append(g.numpy().copy()) or LogSumExp.backward(ctx, g)),
                                 hidden=True)
    assert not np.array_equal(hidden[0], gs[0]) and len(hidden) > len(gs)


def test_the_tolerances_accept_rounding_and_refuse_small_errors():
    """A forward off by 1e-13 (relative) passes, off by 1e-8 or 5e-9 does not; a gradient off by 1e-12 passes,
    1e-6 (relative) or 5e-9 not: float64 rounding is accepted, a float32 computation is not."""
    mt.exercises.check_logsumexp(_lse(forward=_fwd(lambda d: _stable(d) * (1 + 1e-13))))
    msg = failure(mt.exercises.check_logsumexp, _lse(forward=_fwd(lambda d: _stable(d) * (1 + 1e-8))))
    assert GENERIC_FWD in msg
    msg = failure(mt.exercises.check_logsumexp, _lse(forward=_fwd(lambda d: _stable(d) + 5e-9)))
    assert GENERIC_FWD in msg
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=lambda ctx, g: LogSumExp.backward(ctx, g) + 5e-9))
    assert GENERIC_BWD in msg
    mt.exercises.check_logsumexp(_lse(backward=lambda ctx, g: LogSumExp.backward(ctx, g) * (1 + 1e-12)))
    msg = failure(mt.exercises.check_logsumexp, _lse(backward=lambda ctx, g: LogSumExp.backward(ctx, g) * (1 + 1e-6)))
    assert GENERIC_BWD in msg


# -- the LogSumExp references and cases ------------------------------------------------------------
def test_numpy_logsumexp_by_hand_and_against_torch():
    torch = _torch()
    assert ex._numpy_logsumexp(np.array([0.5, -1.0, 2.0])) == pytest.approx(np.log(np.exp(0.5) + np.exp(-1) + np.exp(2)))
    assert ex._numpy_logsumexp(np.array([1000.0, 1001.0, 999.0])) == pytest.approx(1001 + np.log(1 + np.exp(-1) + np.exp(-2)),
                                                                                  rel=1e-15)
    assert ex._numpy_logsumexp(np.array([-1000.0, -1002.0])) == pytest.approx(-1000 + np.log(1 + np.exp(-2)), rel=1e-15)
    assert ex._numpy_logsumexp(np.array([3.0])) == 3.0
    for what, x0 in [c for cases in _hidden_too(ex._lse_cases) for c in cases]:
        want = torch.logsumexp(torch.tensor(x0), dim=-1).numpy()
        got = ex._numpy_logsumexp(x0)
        assert got.shape == x0.shape[:-1] and np.allclose(got, want, rtol=1e-13, atol=1e-13), what


def test_numpy_softmax_by_hand_and_against_torch():
    torch = _torch()
    assert np.allclose(ex._numpy_softmax(np.array([0.0, np.log(3.0)])), [0.25, 0.75])
    assert np.allclose(ex._numpy_softmax(np.array([1000.0, 1000.0 + np.log(3.0)])), [0.25, 0.75])
    assert np.allclose(ex._numpy_softmax(np.array([[0.0, 0.0], [-1000.0, -1000.0 + np.log(3.0)]])),
                       [[0.5, 0.5], [0.25, 0.75]])
    for what, x0 in [c for cases in _hidden_too(ex._lse_cases) for c in cases]:
        want = torch.softmax(torch.tensor(x0), dim=-1).numpy()
        assert np.allclose(ex._numpy_softmax(x0), want, rtol=1e-12, atol=1e-15), what


def test_the_logsumexp_gradient_the_checker_wants_is_torchs():
    """g[..., None] · softmax(x) is what torch's backward of logsumexp gives, on every case."""
    torch = _torch()
    r = np.random.default_rng(5)
    for what, x0 in [c for cases in _hidden_too(ex._lse_cases) for c in cases]:
        xt = torch.tensor(x0, requires_grad=True)
        g = r.standard_normal(x0.shape[:-1])
        (torch.logsumexp(xt, -1) * torch.tensor(g)).sum().backward()
        assert np.allclose(g[..., None] * ex._numpy_softmax(x0), xt.grad.numpy(), rtol=1e-12, atol=1e-14), what


def test_the_logsumexp_cases_are_the_kinds_promised():
    """A vector, a matrix, huge values that overflow exp, very negative ones that underflow it, a 3-d
    tensor; then random float64 inputs of 1–3 dimensions; reproducible; other and more when hidden."""
    visible, hidden = _hidden_too(ex._lse_cases)
    again, _ = _hidden_too(ex._lse_cases)
    for cases in (visible, hidden):
        xs = [x for _, x in cases]
        assert all(x.dtype == np.float64 for x in xs)
        assert xs[0].ndim == 1 and xs[1].ndim == 2 and xs[4].ndim == 3
        with np.errstate(over="ignore", under="ignore"):
            assert np.isinf(np.exp(xs[2]).sum()) and np.all(np.exp(xs[3]) == 0)
        assert all(np.isfinite(ex._numpy_logsumexp(x)).all() for x in xs)
        assert [w for w, _ in cases[:5]] == [w for w, _ in visible[:5]]
        randoms = xs[5:]
        assert randoms and all(1 <= x.ndim <= 3 and all(1 <= n <= 4 for n in x.shape) for x in randoms)
        for k, (what, x) in enumerate(cases[5:]):
            assert what == f"random input #{k + 1} of shape {x.shape}"
        assert max(np.abs(x).max() for x in randoms) > 3  # spread beyond a standard normal
    assert len(hidden) > len(visible) >= 6
    assert len({x.ndim for _, x in hidden[5:]}) == 3
    assert all(w1 == w2 and np.array_equal(x1, x2) for (w1, x1), (w2, x2) in zip(visible, again))
    assert not any(x1.shape == x2.shape and np.allclose(x1, x2) for (_, x1), (_, x2) in zip(visible[5:], hidden[5:]))


def test_the_logsumexp_labels_show_the_input():
    """A failure names the case and shows x rounded to 3 decimals."""
    wrong = _lse(forward=_fwd(lambda d: _stable(d) + 1e-3))
    msg = failure(mt.exercises.check_logsumexp, wrong)
    assert msg.startswith(VECTOR)
    seen = [0]

    def forward(ctx, x):
        seen[0] += 1
        d = _stable(x.detach().numpy())
        ctx.save_for_backward(x)
        ctx.save_output()
        return d + (1e-3 if seen[0] == 6 else 0)
    msg = failure(mt.exercises.check_logsumexp, _lse(forward=forward))
    x0 = ex._lse_cases()[5][1]
    assert msg.startswith(f"for random input #1 of shape {x0.shape}, x = {np.round(x0, 3).tolist()}:\n")


def test_the_engines_log_softmax_is_switched_off_for_the_learner():
    blocks = ex._lse_blocks()
    assert mt.functions.loss.log_softmax in blocks
    assert (mt.Tensor, "log_softmax") in blocks

    class ByMethod(mt.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_output()
            return (x[..., 0] - x.log_softmax(-1)[..., 0]).detach().numpy()

        backward = LogSumExp.backward
    msg = failure(mt.exercises.check_logsumexp, ByMethod)
    assert "asks you to write LogSumExp yourself" in msg
