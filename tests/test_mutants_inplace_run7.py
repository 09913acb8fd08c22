"""Mutation run 7, ``exercises/inplace.py`` (notebook 07's checkers; since split into
``inplace_derivatives.py`` and ``inplace_safety.py``), first half: exercise 1's checker
``check_derivative_from_output`` (with ``_sig``, ``_slope``, ``_inputs``) and the facts
``candidates(trace)`` (``_names``, ``_cases``) hands to exercise 2. What a learner is shown:

* a catalogue of wrong derivatives (the slope of the op at x = z, a forgotten factor, a mask that
  lets z = 0 through, numbers where the output has lost the sign of x, None where the output is
  enough, a wrong shape, a function that raises, an answer just outside the tolerance): each is
  rejected on a named op with the z it was given, the right derivative and the hint for that
  mistake, visible and hidden;
* the references against torch's autograd, and the numbers a message shows against the z the
  learner was given (the derivative written in z by hand, the two x with one z);
* the inputs the checker promises: every op once, fixed inputs first, then random ones in the op's
  domain (positive for sqrt and log, both signs otherwise), other and more of them when hidden;
  the pass message counts the ops asked;
* the candidates of a recorded program against hand-worked facts (the notebook's program in
  training and inference, a program with a view and an unnamed transpose, names given after the
  op, unnamed 0-d constants), and on every program the checker records (visible and hidden)
  against the engine: the plan's own reason for each refusal names the first fact that fails,
  the accepted ones have every fact clear, the storage lifetimes of the trace say which are alive.

Record: tests/mutation-run-7/exercises-inplace.md (the rest of the module:
exercises-inplace-programs.md).
"""
from __future__ import annotations

import functools
import re
from contextlib import contextmanager

import numpy as np
import pytest

import microtorch as mt
from microtorch import recording
from microtorch.exercises import checking
from microtorch.exercises import inplace_derivatives as derivatives
from microtorch.exercises import inplace_safety as ex
from microtorch.exercises.inplace_safety import candidates
from microtorch.memory.inplace_analysis import VARIANTS

from checker_probes import Recorder, cases_counted, failure
from test_exercise_checkers import _solutions
from test_mutants_memory_run4 import _Program

SOLUTION = _solutions("07_inplace_and_versions")  # the notebook's reference answers
derivative_from_output = SOLUTION["derivative_from_output"]
can_run_in_place = SOLUTION["can_run_in_place"]

OPS = ["relu", "exp", "sigmoid", "tanh", "sqrt", "log", "neg", "square", "abs"]  # the docstring's list
WORDS = {"relu": "relu(x) = max(x, 0)", "exp": "exp(x)", "sigmoid": "sigmoid(x) = 1 / (1 + e⁻ˣ)",
         "tanh": "tanh(x)", "sqrt": "sqrt(x)", "log": "log(x)", "neg": "neg(x) = −x",
         "square": "square(x) = x²", "abs": "abs(x) = |x|"}
AS_IF = "you used z as if it were the input"


def _torch_slope(op, x):
    """(z, dz/dx) at x by torch's autograd (imported here: most tests of the file do not need it)."""
    torch = pytest.importorskip("torch")
    t = torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
    z = {"neg": torch.neg, "square": torch.square}.get(op) or getattr(torch, op)
    z = z(t)
    z.sum().backward()
    return z.detach().numpy(), t.grad.numpy()


class _CheckerSpy(Recorder):
    """The notebook's answer, recording the checker's own calls (not the engine tests run after a pass,
    which plug the function into the engine's backward)."""

    def __call__(self, *args):
        if not checking._LEARNER[0]:
            return self.solution(*args)
        return super().__call__(*args)


def _asked(hidden: bool) -> list:
    """[(op, z)] in the order the checker asked, with the notebook's answer."""
    spy = _CheckerSpy(derivative_from_output)
    mt.exercises.check_derivative_from_output(spy, hidden=hidden)
    return [(op, np.array(z)) for op, z in spy.calls]


def _z_of(op, hidden=False):
    return dict(_asked(hidden))[op]


def _wrong_on(op, wrong):
    """The notebook's answer, except for ``op``: there ``wrong(z)``."""
    return lambda o, z: wrong(z) if o == op else derivative_from_output(o, z)


def _where(op):
    return f"for {op} ({WORDS[op]}), at z = ["


def _lists(msg):
    """The number lists of a 'you returned [..], but the derivative is [..]' message."""
    got = re.search(r"\nyou returned (\[[^\]]*\]),\nbut the derivative is (\[[^\]]*\])\.\n", msg)
    numbers = {"inf": np.inf, "nan": np.nan}
    return np.array(eval(got.group(1), numbers)), np.array(eval(got.group(2), numbers))


def _shown_z(msg):
    return np.array(eval(msg[msg.index("at z = ") + len("at z = "):msg.index("]:") + 1]))


# ----------------------------------------------------------------------------------------------
# exercise 1: the derivative from the output
# ----------------------------------------------------------------------------------------------
def test_the_reference_slopes_are_torchs():
    """_slope (the numpy forward and derivative) agrees with torch's autograd on each op's domain."""
    both = np.round(np.linspace(-3, 3, 25), 3) + 0.01
    positive = np.linspace(0.1, 4.0, 25)
    for op in OPS:
        x = positive if op in ("sqrt", "log") else both
        z, slope = derivatives._slope(op, x)
        tz, tslope = _torch_slope(op, x)
        assert np.allclose(z, tz, rtol=1e-12, atol=1e-15) and np.allclose(slope, tslope, rtol=1e-12, atol=1e-15), op
    assert np.allclose(derivatives._sig(np.array([-2.0, 0.0, 3.0])), 1 / (1 + np.exp([2.0, 0.0, -3.0])))


def test_every_op_is_asked_once_with_a_float64_z():
    """The nine ops of the docstring, each once, each with a float64 array z."""
    for hidden in (False, True):
        asked = _asked(hidden)
        assert sorted(op for op, _ in asked) == sorted(OPS)
        assert all(z.dtype == np.float64 and z.ndim == 1 for _, z in asked)


def test_the_inputs_are_fixed_then_random_and_more_of_them_when_hidden():
    """Per op: the same fixed inputs start both runs; then random ones, others and more in the hidden run."""
    visible, hidden = dict(_asked(False)), dict(_asked(True))
    assert dict(_asked(False)).keys() == visible.keys()
    for op in OPS:
        v, h = visible[op], hidden[op]
        assert np.array_equal(v, dict(_asked(False))[op])  # reproducible
        k = next(i for i in range(min(len(v), len(h)) + 1) if i == min(len(v), len(h)) or v[i] != h[i])
        assert k >= 3, op  # fixed inputs first, the same in both runs
        assert len(v) > k and len(h) - k > len(v) - k, op  # then random ones, more when hidden
        if op != "relu":  # (relu maps every negative x to 0)
            assert not set(v[k:]) & set(h[k:]), op


def test_the_inputs_are_in_each_ops_domain_and_have_both_signs_elsewhere():
    """sqrt and log get positive x (finite z); the others get negative and positive x, fixed and random;
    relu is asked at z = 0 too (x ≤ 0), where the mask hint applies."""
    for hidden in (False, True):
        asked = dict(_asked(hidden))
        assert np.all(asked["sqrt"] > 0) and np.all(np.isfinite(asked["sqrt"]))
        assert np.all(np.isfinite(asked["log"])) and np.any(asked["log"] < 0) and np.any(asked["log"] > 0)
        x = -asked["neg"]
        fixed = 5  # at least as many fixed inputs as the test above finds
        assert np.any(x[:fixed] < 0) and np.any(x[:fixed] > 0), "fixed inputs of both signs"
        assert np.any(x[fixed:] < 0) and np.any(x[fixed:] > 0), "random inputs of both signs"
        assert np.any(asked["tanh"][fixed:] < 0) and np.any(asked["tanh"][fixed:] > 0)
        relu = asked["relu"]
        assert np.any(relu == 0) and np.any(relu > 0)


def test_the_right_answers_pass_and_the_message_counts_the_ops(capsys):
    """'all 9 cases right': one case per op asked, in both runs; the hidden one says so."""
    for hidden in (False, True):
        spy = _CheckerSpy(derivative_from_output)
        mt.exercises.check_derivative_from_output(spy, hidden=hidden)
        out = capsys.readouterr().out
        assert cases_counted(out, "check_derivative_from_output") == len(spy.calls) == len(OPS)
        assert ("(the hidden ones)" in out) == hidden


def test_right_answers_in_other_forms_pass():
    """A bool mask, a list, one number where the slope is constant, a Tensor, and float rounding: all right."""
    def answer(op, z):
        if op == "relu":
            return z > 0
        if op == "neg":
            return -1
        if op == "exp":
            return list(z)
        if op == "tanh":
            return mt.tensor(1 - z * z, dtype="float64")
        if op == "sigmoid":
            return z * (1 - z) * (1 + 1e-10)
        return derivative_from_output(op, z)
    mt.exercises.check_derivative_from_output(answer)
    mt.exercises.check_derivative_from_output(answer, hidden=True)


def _tanh_as_if(z):
    return 1 - np.tanh(z) ** 2


def _one_over(z):  # log's slope at x = z: z is 0 at x = 1
    with np.errstate(divide="ignore"):
        return 1 / z


MISTAKES = [  # (op, wrong derivative of z, words of the hint)
    ("tanh", lambda z: 1 - z, "Hint: tanh'(x) = 1 − tanh²(x) = 1 − z²: tanh_ keeps its output for backward."),
    ("tanh", _tanh_as_if, "Those are the slopes of tanh at x = z: " + AS_IF + ". z is already tanh(x)"),
    ("sqrt", lambda z: 0.5 / np.sqrt(z), "Those are the slopes of sqrt at x = z: " + AS_IF),
    ("exp", np.exp, "Those are the slopes of exp at x = z: " + AS_IF),
    ("sigmoid", lambda z: z, "Hint: σ'(x) = σ(x) (1 − σ(x)) = z (1 − z)"),
    ("sigmoid", lambda z: derivatives._sig(z) * (1 - derivatives._sig(z)), "Those are the slopes of sigmoid at x = z: " + AS_IF),
    ("log", _one_over, "Hint: d log x / dx = 1/x, and x = eᶻ, so it is e⁻ᶻ: the output is enough."),
    ("log", lambda z: np.exp(z), "Hint: d log x / dx = 1/x"),
    ("relu", lambda z: (z >= 0).astype(float), "z = 0 happens for every x ≤ 0, where the slope is 0"),
    ("relu", lambda z: np.ones_like(z), "z = 0 happens for every x ≤ 0"),  # z ≥ 0 everywhere
    ("exp", lambda z: np.ones_like(z), "Hint: the derivative of eˣ is eˣ, which is z itself"),
    ("sqrt", lambda z: 2 * z, "Hint: d√x/dx = 1 / (2√x) = 1 / (2z)"),
    ("neg", lambda z: np.ones_like(z), "Hint: the derivative of −x is −1 everywhere"),
    ("tanh", lambda z: (1 - z * z) * (1 + 1e-6), "Hint: tanh'(x) = 1 − tanh²(x)"),
    ("relu", lambda z: (z > 0) + 5e-9, "Hint: relu(x) > 0 exactly where x > 0"),
]
IDS = [f"{op}-{k}" for k, (op, _, _) in enumerate(MISTAKES)]


@pytest.mark.parametrize("op, wrong, hint", MISTAKES, ids=IDS)
def test_each_wrong_derivative_is_rejected_with_its_op_numbers_and_hint(op, wrong, hint):
    """A catalogued mistake fails on its op, shows the z it was given, what it returned, the true
    derivative (computed here by torch at the x behind each z) and the hint for that mistake."""
    z = _z_of(op)
    msg = failure(mt.exercises.check_derivative_from_output, _wrong_on(op, wrong))
    assert msg.startswith(_where(op)) and hint in msg
    shown = _shown_z(msg)
    assert np.allclose(shown, z, atol=5e-5)
    text = msg[msg.index("at z = ["):msg.index("]:")]
    assert all(len(v.split(".")[-1]) <= 4 for v in re.findall(r"-?\d+\.\d+", text))  # 4 decimals at most
    got, want = _lists(msg)
    assert np.allclose(got, np.round(np.asarray(wrong(z), dtype=float), 4), atol=1e-12)
    x = {"tanh": np.arctanh, "sqrt": np.square, "exp": np.log, "sigmoid": lambda s: np.log(s / (1 - s)),
         "log": np.exp, "neg": np.negative}.get(op, lambda z: z)(z)  # relu: x = z where z > 0
    tz, slope = _torch_slope(op, x)
    if op != "relu":
        assert np.allclose(tz, z, rtol=1e-9, atol=1e-12)
    else:
        slope = (z > 0).astype(float)
    assert np.allclose(want, np.round(slope, 4), atol=1e-9)
    if AS_IF not in hint:
        assert AS_IF not in msg


@pytest.mark.parametrize("op, wrong, hint", MISTAKES, ids=IDS)
def test_each_wrong_derivative_is_rejected_in_the_hidden_run_too(op, wrong, hint):
    """The hidden run (other, more inputs) catches each mistake with the same hint."""
    msg = failure(mt.exercises.check_derivative_from_output, _wrong_on(op, wrong), hidden=True)
    assert msg.startswith(_where(op)) and hint in msg
    assert np.allclose(_shown_z(msg), _z_of(op, hidden=True), atol=5e-5)


def _pair(msg):
    m = re.search(r"x = (\S+) and x = (\S+) both give z = (\S+), with slopes (\S+) and (\S+)\. ", msg)
    return [float(v) for v in m.groups()]


@pytest.mark.parametrize("hidden", [False, True])
def test_numbers_for_square_show_two_x_with_one_z_and_the_largest_slope_gap(hidden):
    """Returning numbers for square is refused with x and −x that give one z, their two slopes (2x, −2x),
    picked where the slopes differ most (the largest |x| tried); then 'Return None.'"""
    z = _z_of("square", hidden)
    msg = failure(mt.exercises.check_derivative_from_output, _wrong_on("square", lambda z: 2 * np.sqrt(z)),
                  hidden=hidden)
    assert msg.startswith(_where("square"))
    assert "you returned numbers, but no function of z can be right here: " in msg
    assert msg.endswith("The output has lost the sign of x. A backward for square needs the old x, which an "
                        "in-place square_ would have overwritten (it would have to keep a copy, and then nothing "
                        "is saved). Return None.")
    x1, x2, zz, s1, s2 = _pair(msg)
    assert x2 == -x1 and abs(zz - x1 * x1) < 1e-3 * zz
    assert abs(s1 - 2 * x1) < 1e-4 and abs(s2 + 2 * x1) < 1e-4
    assert abs(abs(x1) - np.sqrt(z.max())) < 1e-3  # the x tried farthest from 0


@pytest.mark.parametrize("hidden", [False, True])
def test_numbers_for_abs_show_slopes_one_and_minus_one(hidden):
    """abs answered with sign-like numbers: x and −x, z = |x|, slopes ±1, the largest gap (2) is any pair."""
    msg = failure(mt.exercises.check_derivative_from_output, _wrong_on("abs", np.sign), hidden=hidden)
    assert msg.startswith(_where("abs")) and "The output has lost the sign of x. A backward for abs" in msg
    x1, x2, zz, s1, s2 = _pair(msg)
    assert x2 == -x1 and zz == abs(x1) and {s1, s2} == {1.0, -1.0} and s1 == np.sign(x1)


NONE_WHERE_POSSIBLE = [
    ("relu", "relu(x) > 0 exactly where x > 0, so the output tells you where the slope is 1"),
    ("exp", "the derivative of eˣ is eˣ, which is z itself"),
    ("sigmoid", "σ'(x) = σ(x) (1 − σ(x)) = z (1 − z)"),
    ("tanh", "tanh'(x) = 1 − tanh²(x) = 1 − z²"),
    ("sqrt", "d√x/dx = 1 / (2√x) = 1 / (2z)"),
    ("log", "d log x / dx = 1/x, and x = eᶻ, so it is e⁻ᶻ"),
    ("neg", "the derivative of −x is −1 everywhere"),
]


@pytest.mark.parametrize("op, why", NONE_WHERE_POSSIBLE, ids=[n[0] for n in NONE_WHERE_POSSIBLE])
def test_none_where_the_output_is_enough_is_told_how(op, why):
    """None ('not possible') for an op whose derivative is a function of z: told it is, and how."""
    for hidden in (False, True):
        msg = failure(mt.exercises.check_derivative_from_output, _wrong_on(op, lambda z: None), hidden=hidden)
        assert msg.startswith(_where(op))
        assert f"\nyou returned None (\"not possible\"), but it is: {why}" in msg


def test_a_wrong_shape_and_a_raise_are_named_with_the_op_and_z():
    """[1.0, 2.0] for exp: told to return z's shape; a raise: the op, z and the error."""
    for hidden in (False, True):
        z = _z_of("exp", hidden)
        msg = failure(mt.exercises.check_derivative_from_output, _wrong_on("exp", lambda z: [1.0, 2.0]), hidden=hidden)
        assert msg.startswith(_where("exp"))
        assert f"\nyou returned [1.0, 2.0]; return an array of z's shape {z.shape} (or one number" in msg
        msg = failure(mt.exercises.check_derivative_from_output, _wrong_on("tanh", lambda z: z["no"]), hidden=hidden)
        assert msg.startswith(_where("tanh")) and "]: your function raised IndexError" in msg
        assert np.allclose(_shown_z(msg), _z_of("tanh", hidden), atol=5e-5)
        msg = failure(mt.exercises.check_derivative_from_output, lambda op, z: 1 / 0, hidden=hidden)
        assert msg.startswith(_where(_asked(hidden)[0][0])) and "your function raised ZeroDivisionError" in msg


def test_every_op_is_checked_even_after_a_none():
    """A right None for square or abs does not end the checking: a wrong op after it is still caught."""
    order = [op for op, _ in _asked(False)]
    last = order[-1]
    wrong = _wrong_on(last, lambda z: np.full_like(z, 7.0))
    msg = failure(mt.exercises.check_derivative_from_output, wrong)
    assert msg.startswith(_where(last))
    assert order.index("square") < order.index(last) and order.index("abs") < order.index(last)


def test_the_tolerance_is_float64_tight():
    """A relative error of 1e-6 or an absolute 5e-9 on a zero slope is wrong; 1e-10 relative is right."""
    msg = failure(mt.exercises.check_derivative_from_output,
                  _wrong_on("exp", lambda z: z * (1 + 1e-6)))
    assert msg.startswith(_where("exp"))
    msg = failure(mt.exercises.check_derivative_from_output,
                  _wrong_on("relu", lambda z: (z > 0) + 5e-9 * (z == 0)))
    assert msg.startswith(_where("relu"))
    # near the slopes at x = z, but outside the tolerance: not told it used z as the input
    msg = failure(mt.exercises.check_derivative_from_output,
                  _wrong_on("exp", lambda z: np.exp(z) * (1 + 1e-6)))
    assert AS_IF not in msg and "Hint: the derivative of eˣ is eˣ" in msg
    msg = failure(mt.exercises.check_derivative_from_output,
                  _wrong_on("exp", lambda z: np.exp(z) * (1 + 1e-11)))
    assert AS_IF in msg


def test_the_as_if_hint_needs_the_slopes_at_x_equal_z_to_the_same_tolerance():
    """Told 'you used z as if it were the input' only within 1e-7 relative + 1e-9 of those slopes, the
    tolerance an answer gets: 6e-9 beyond it, the generic hint."""
    def near(z, extra):
        b = np.exp(z)
        return b + 1e-9 + 1e-7 * b + extra
    assert AS_IF not in failure(mt.exercises.check_derivative_from_output, _wrong_on("exp", lambda z: near(z, 6e-9)))
    assert AS_IF in failure(mt.exercises.check_derivative_from_output, _wrong_on("exp", lambda z: near(z, -2e-9)))


# ----------------------------------------------------------------------------------------------
# exercise 2's facts: candidates(trace)
# ----------------------------------------------------------------------------------------------
def _facts(c):
    return (c.fits, c.made_by_op, c.other, c.other_needs_grad, c.saved_by_itself, c.saved_by,
            c.later_reads, c.alive_at_end)


def _named(t, name):
    t.name = name
    return t


def _notebook_program(training: bool):
    """The notebook's program: B = A + 1; C = relu(B); D = B * C; E = softmax(D); F = D + E; out = sum(F)."""
    A = _named(mt.randn(4, 5, dtype="float64", requires_grad=training), "A")

    def body():
        B = _named(A + 1.0, "B")
        C = _named(B.relu(), "C")
        D = _named(B * C, "D")
        E = _named(D.softmax(1), "E")
        return _named(_named(D + E, "F").sum(), "out")
    with mt.trace() as tr:
        if training:
            body().backward()
        else:
            with mt.no_grad():
                body()
    return tr


T, F = True, False
NOTEBOOK_TRAINING = [  # (line, overwrites, method, facts), worked by hand from the notebook's section 5
    ("B = add(A, a number)", "A", "add_", (T, F, "a number", F, F, (), (), T)),  # the caller's leaf
    ("B = add(A, a number)", "a number", "add_", (F, F, "A", T, F, (), (), F)),  # 0-d: does not fit
    ("C = relu(B)", "B", "relu_", (T, T, None, F, F, ("Mul",), ("Mul", "Mul (during backward)"), F)),
    ("D = mul(B, C)", "B", "mul_", (T, T, "C", T, T, (), (), F)),  # each factor saved for the other's gradient
    ("D = mul(B, C)", "C", "mul_", (T, T, "B", T, T, ("Relu",), ("Mul (during backward)",), F)),
    ("F = add(D, E)", "D", "add_", (T, T, "E", T, F, (), (), F)),  # in place; E is not asked then
]
NOTEBOOK_INFERENCE = [  # no graph: nothing saved, no gradients; only the later read and the caller's A
    ("B = add(A, a number)", "A", "add_", (T, F, "a number", F, F, (), (), T)),
    ("B = add(A, a number)", "a number", "add_", (F, F, "A", F, F, (), (), F)),
    ("C = relu(B)", "B", "relu_", (T, T, None, F, F, (), ("Mul",), F)),
    ("D = mul(B, C)", "B", "mul_", (T, T, "C", F, F, (), (), F)),  # in place: C is not asked
    ("F = add(D, E)", "D", "add_", (T, T, "E", F, F, (), (), F)),
]


@pytest.mark.parametrize("training, want", [(True, NOTEBOOK_TRAINING), (False, NOTEBOOK_INFERENCE)],
                         ids=["training", "inference"])
def test_the_notebooks_program_has_the_hand_worked_candidates(training, want):
    """Every (op, input) of the notebook's program, in program order, with the facts worked by hand; the
    plan's verdicts are the notebook's (training: only F = D + E in place; inference: D and F)."""
    tr = _notebook_program(training)
    got = candidates(tr)
    assert [(c.line, c.overwrites, c.method, _facts(c)) for c in got] == want
    assert all(c.op == line.split(" = ")[1].split("(")[0].capitalize() for c, (line, *_) in zip(got, want))
    verdicts = [(c.line, says) for c, says, _ in ex._cases(tr) if says]
    assert verdicts == ([("F = add(D, E)", True)] if training else [("D = mul(B, C)", True), ("F = add(D, E)", True)])
    assert [can_run_in_place(c) for c in got] == [says for _, says, _ in ex._cases(tr)]


def test_the_candidates_print_as_the_notebook_shows_them():
    """str(c) lists the facts; 'needs a gradient' for a Mul factor; 'none' for empty lists."""
    c = candidates(_notebook_program(True))[4]
    assert str(c) == ("D = mul(B, C)  ->  mul_ into C?\n"
                      "  fits (same shape and dtype)  : True\n"
                      "  made by an op of the program : True\n"
                      "  other operand                : B (needs gradient)\n"
                      "  saved by this op itself      : True\n"
                      "  saved by other ops           : Relu\n"
                      "  read later by                : Mul (during backward)\n"
                      "  alive when the program ends  : False")


def test_candidates_take_a_trace_or_its_events():
    """candidates(trace) and candidates(trace.events) (a plain list) give the same facts."""
    tr = _notebook_program(True)
    assert candidates(list(tr.events)) == candidates(tr) == [c for c, _, _ in ex._cases(tr)]
    assert candidates([dict(e.to_dict()) for e in tr.events]) == candidates(tr)


def _view_program():
    """A view read later, an unnamed transpose, Exp's saved output, a Mul factor that needs its gradient."""
    A = _named(mt.randn(4, 5, dtype="float64", requires_grad=True), "A")
    ids = []

    def body():
        B = _named(A * 2.0, "B")
        U = _named(B.t(), "U")
        C = _named(B.exp(), "C")
        Ct = C.t()  # unnamed: "t<id>"
        ids.append(recording.tensor_id(Ct))
        return _named(_named(U * Ct, "D").sum(), "loss")
    with mt.trace() as tr:
        body().backward()
    return tr, ids[0]


def test_a_view_program_has_the_hand_worked_candidates():
    """B read later through its view U ('Mul through U'), by backward too (Mul saved U); the unnamed transpose
    of C is 't<its trace id>'; the number in A * 2 is 'a number', saved by Mul for A's gradient."""
    tr, ct = _view_program()
    want = [
        ("B = mul(A, a number)", "A", (T, F, "a number", F, F, (), (), T)),
        ("B = mul(A, a number)", "a number", (F, F, "A", T, T, (), (), F)),
        ("C = exp(B)", "B", (T, T, None, F, F, ("Mul",), ("Mul through U", "Mul (during backward)"), F)),
        (f"D = mul(U, t{ct})", "U", (T, T, f"t{ct}", T, T, (), (), F)),
        (f"D = mul(U, t{ct})", f"t{ct}", (T, T, "U", T, T, ("Exp",), ("Mul (during backward)",) * 2, F)),
    ]
    assert [(c.line, c.overwrites, _facts(c)) for c in candidates(tr)] == want
    assert not any(says for _, says, _ in ex._cases(tr))


def test_a_later_read_through_a_view_in_inference_and_a_kept_intermediate():
    """No graph: relu into B is refused for the read through U; exp into C for the caller keeping C; the
    sum of two sums (unnamed, 0-d, no gradient) is 'a number'."""
    A = _named(mt.randn(4, 5, dtype="float64"), "A")
    kept = []

    def body():
        B = _named(A + 1.0, "B")
        U = _named(B.t(), "U")
        C = _named(B.relu(), "C")
        kept.append(C)
        D = _named(U * 2.0, "D")
        G = _named(C.exp(), "G")
        return D.sum() + G.sum()
    with mt.trace() as tr:
        with mt.no_grad():
            body()
    got = {(c.line, c.overwrites): _facts(c) for c in candidates(tr)}
    assert got[("C = relu(B)", "B")] == (T, T, None, F, F, (), ("Mul through U",), F)
    assert got[("D = mul(U, a number)", "U")] == (T, T, "a number", F, F, (), (), F)
    assert got[("G = exp(C)", "C")] == (T, T, None, F, F, (), (), T)
    assert ("a number = add(a number, a number)", "a number") in got


def test_names_given_after_the_op_and_unnamed_tensors():
    """A name set right after the op is used; an unnamed tensor is 't<trace id>'; an unnamed 0-d tensor that
    needs a gradient is not 'a number'; one that stopped needing it is (the latest tensor event counts)."""
    X = _named(mt.randn(3, dtype="float64", requires_grad=True), "X")
    s = mt.tensor(2.0, dtype="float64", requires_grad=True)
    k = mt.tensor(3.0, dtype="float64", requires_grad=True)
    ids = {}
    with mt.trace() as tr:
        H = X + 1.0
        H.name = "H"  # after the op
        Y = H * s
        ids["Y"], ids["s"] = recording.tensor_id(Y), recording.tensor_id(s)
        P = Y * k
        k.requires_grad_(False)
        Q = _named(P * k, "Q")
        Q.sum().backward()
    lines = [(c.line, c.overwrites) for c in candidates(tr)]
    y, sn = f"t{ids['Y']}", f"t{ids['s']}"
    assert ("t%d = add(X, a number)" % recording.tensor_id(H), "X") not in lines  # H has its name
    assert ("H = add(X, a number)", "X") in lines
    assert (f"{y} = mul(H, {sn})", "H") in lines and (f"{y} = mul(H, {sn})", sn) in lines
    assert any(line.endswith(f"mul({y}, a number)") for line, _ in lines)
    assert ("Q = mul(t%d, a number)" % recording.tensor_id(P), "a number") in lines
    assert not any(sn == "a number" or "None" in line for line, _ in lines)


def test_names_of_hand_written_events():
    """_names: the tensor's own name; 'a number' for an unnamed 0-d tensor without gradient; 't<id>' else;
    a later unnamed event does not undo a name, and decides between 'a number' and 't<id>'."""
    def tensor(tid, name=None, shape=(), grad=False):
        return {"kind": "tensor", "tensor": tid, "name": name, "shape": list(shape), "dtype": "float64",
                "requires_grad": grad, "is_leaf": True, "storage": tid}
    events = [{"kind": "baseline"}, tensor(1, "w", (3,)), tensor(2), tensor(3, shape=(2,)), tensor(4, grad=True),
              tensor(5, grad=True), tensor(5), tensor(6), tensor(6, grad=True), tensor(7, shape=(2,)),
              tensor(7, "late", (2,)), tensor(8, "kept"), tensor(8), tensor(9, "t9x"), {"kind": "free", "storage": 1},
              tensor(10)]
    assert ex._names(events) == {1: "w", 2: "a number", 3: "t3", 4: "t4", 5: "a number", 6: "a number",
                                 7: "late", 8: "kept", 9: "t9x", 10: "a number"}


def _rewrite_program(op="Relu"):
    """The engine test's hand-written trace: ``op`` (relu_ and the other variants that keep their output)
    runs in place into t2, and then saves its result t3, which a later neg would overwrite; Mul saves t5
    (its own input) and the caller's t1."""
    p = _Program()
    p.tensor(1)
    p.made("Neg", [1], 2)
    p.made(op, [2], 3, node=4, saved=[2])  # recorded saving its input; the variant saves its output instead
    p.free(2)
    p.made("Neg", [3], 5, node=6, next=[4])
    p.made("Exp", [5], 7, node=8, saved=[7], next=[6])
    p.made("Mul", [5, 1], 9, node=10, saved=[5, 1], next=[8, None])
    for sid in (3, 5, 7, 9):
        p.free(sid)
    return p.events


@pytest.mark.parametrize("op", ["Relu", "Exp", "Sigmoid", "Tanh", "Sqrt"])
def test_facts_are_as_the_plan_sees_them_after_an_earlier_rewrite(op):
    """Once the op runs as its variant (relu_, exp_, ...), it no longer keeps its input t2 (its own save: fine)
    but keeps its output t3: the neg that would overwrite t3 sees '<variant> (rewritten in place)', as the
    plan's reason says. Hand-worked facts."""
    events = _rewrite_program(op)
    method = VARIANTS[op][0]
    want = [
        ("t2 = neg(t1)", "t1", (T, F, None, F, F, ("Mul",), ("Mul",), T)),
        (f"t3 = {op.lower()}(t2)", "t2", (T, T, None, F, T, (), (), F)),
        ("t5 = neg(t3)", "t3", (T, T, None, F, F, (f"{method} (rewritten in place)",), (), F)),
        ("t7 = exp(t5)", "t5", (T, T, None, F, F, ("Mul",), ("Mul",), F)),
        ("t9 = mul(t5, t1)", "t5", (T, T, "t1", F, T, (), (), F)),
    ]
    assert [(c.line, c.overwrites, _facts(c)) for c in candidates(events)] == want
    cases = ex._cases(events)
    assert [says for _, says, _ in cases] == [F, T, F, F, T]
    assert cases[2][2].reason.startswith(f"t3 is the result of {method} (step ")
    assert f"  saved by other ops           : {method} (rewritten in place)\n" in str(cases[2][0])


def test_a_one_input_product_is_asked_about_its_one_input():
    """The engine test's hand-written trace: t3 * 2 recorded with one input (the number folded in): the
    candidates ask about that input only, as the plan does."""
    p = _Program()
    p.tensor(1)
    p.made("Neg", [1], 2)
    p.made("Add", [2, 2], 3, node=5, next=[6, 6])
    p.made("Mul", [3], 4, node=7, next=[5])
    p.made("Add", [4], 8, node=9, next=[7])
    p.made("Mul", [1], 10)  # t1 * 2 with t1 the caller's: kept, and still asked about its one input only
    for sid in (2, 3, 4, 8, 10):
        p.free(sid)
    got = [(c.line, c.overwrites, says) for c, says, _ in ex._cases(p.events)]
    assert got == [("t2 = neg(t1)", "t1", F), ("t3 = add(t2, t2)", "t2", T), ("t4 = mul(t3)", "t3", T),
                   ("t8 = add(t4)", "t4", T), ("t10 = mul(t1)", "t1", F)]


def test_two_nodes_that_save_the_same_bytes_are_listed_once_each():
    """B saved by D = B * B (one node, both factors) and by E = B * A: relu(B) lists Mul twice (two nodes)."""
    A = _named(mt.randn(4, dtype="float64", requires_grad=True), "A")

    def body():
        B = _named(A + 1.0, "B")
        C = _named(B.relu(), "C")
        D = _named(B * B, "D")
        E = _named(B * A, "E")
        return _named(_named(C + D, "G") + E, "H").sum()
    with mt.trace() as tr:
        body().backward()
    got = {(c.line, c.overwrites): c for c in candidates(tr)}
    relu = got[("C = relu(B)", "B")]
    assert relu.saved_by == ("Mul", "Mul") and relu.later_reads[:2] == ("Mul", "Mul")
    dd = [c for c in candidates(tr) if c.line == "D = mul(B, B)"]
    assert len(dd) == 2 and all(c.saved_by == ("Mul",) and c.saved_by_itself and c.other_needs_grad for c in dd)


def test_an_op_run_in_place_into_its_second_input_and_a_program_input_dropped_inside():
    """S = A + E: A is the caller's, so the plan writes into E (input 1), and the candidate list stops there;
    a tensor made before the program and dropped inside it is not alive at its end (nor made by an op)."""
    A = _named(mt.randn(4, dtype="float64"), "A")
    X = _named(mt.randn(4, dtype="float64"), "X")
    box = [X]
    del X
    with mt.trace() as tr:
        with mt.no_grad():
            E = _named(A * 3.0, "E")
            S = _named(A + E, "S")
            del E
            Y = _named(box.pop() * 2.0, "Y")  # the last reference to X goes with this statement
            out = (S + Y).sum()
            del S, Y
    cases = [(c.line, c.overwrites, says, c.alive_at_end, c.made_by_op) for c, says, _ in ex._cases(tr)]
    assert ("S = add(A, E)", "A", F, T, F) in cases and ("S = add(A, E)", "E", T, F, T) in cases
    assert ("Y = mul(X, a number)", "X", F, F, F) in cases
    assert out is not None


def test_after_a_parameter_moves_each_op_is_judged_on_the_bytes_it_read():
    """Module.to() inside the program gives W new bytes: Y = W * 2 read the old ones (freed by the move:
    not alive at the end), Z = W * 3 the new ones, which the caller still holds (the trace's lifetimes)."""
    lin = mt.nn.Linear(4, 3)
    W = _named(lin.weight, "W")
    with mt.trace() as tr:
        with mt.no_grad():
            Y = _named(W * 2.0, "Y")
            lin.to("float64")
            Z = _named(W * 3.0, "Z")
            del Y, Z
    alive = {lt.storage: lt.death is None for lt in tr.lifetimes()}
    reads = [e["input_storages"][0] for e in tr.events if e["kind"] == "op"]
    got = [(c.line, c.alive_at_end) for c in candidates(tr) if c.overwrites == "W"]
    assert got == [("Y = mul(W, a number)", alive[reads[0]]), ("Z = mul(W, a number)", alive[reads[1]])]
    assert got == [("Y = mul(W, a number)", F), ("Z = mul(W, a number)", T)]


# ----------------------------------------------------------------------------------------------
# every program the checker records: the facts against the engine
# ----------------------------------------------------------------------------------------------
@contextmanager
def _hidden_run():
    before = checking._HIDDEN[0]
    checking._HIDDEN[0] = True
    try:
        yield
    finally:
        checking._HIDDEN[0] = before


@pytest.fixture(autouse=True, scope="module")
def _let_the_cached_graphs_go():
    """The cache lives as long as this file's tests: the suite's later tests (the pictures count live
    storages) must not see its tensors."""
    yield
    _all_programs.cache_clear()
    import gc
    gc.collect()


@functools.lru_cache(maxsize=None)
def _all_programs():
    """(title, trace) of the hand-worked programs and of every program the checker records, visible and hidden."""
    out = [("notebook training", _notebook_program(True)), ("notebook inference", _notebook_program(False)),
           ("view", _view_program()[0])]
    out += [(title, run()) for title, run in ex._inplace_programs()]
    with _hidden_run():
        out += [(title, run()) for title, run in ex._inplace_programs()]
    return tuple(out)


INPUTS = {"x", "W", "b", "A", "V", "c", "a number"}  # the programs' inputs: data, parameters, constants


def _reasons(d, positions):
    """{position: the plan's reason for refusing it} from a Decision that kept the op."""
    if len(positions) == 1:
        return {positions[0]: d.reason}
    parts = re.split(r"(?:^|; )input (\d+) \(t\d+\): ", d.reason)[1:]
    return {int(p): why for p, why in zip(parts[::2], parts[1::2])}


def _tensor_events(tr):
    last = {}
    for e in tr.events:
        if e["kind"] == "tensor":
            last[e["tensor"]] = e
    return last


@pytest.mark.parametrize("part", [0, 1])
def test_the_candidates_are_the_plans_ops_and_inputs_in_program_order(part):
    """One candidate per op with an in-place variant and input it may overwrite, in program order, up to the
    input the plan chose; named by the tensors' names; the verdicts are the plan's."""
    programs = _all_programs()
    for title, tr in programs[:3] if part == 0 else programs[3:]:
        plan = mt.memory.inplace_plan(tr)
        tensors = _tensor_events(tr)
        forward = [e for e in tr.events if e["kind"] == "op" and e["phase"] == "forward"]
        assert len(forward) == len(plan.decisions)
        want = []
        for e, d in zip(forward, plan.decisions):
            if e["op"] not in VARIANTS or d.reason in ("already an in-place op",) or d.reason.startswith("a view op"):
                continue
            method, positions = VARIANTS[e["op"]]
            for p in positions:
                if p < len(e["inputs"]) and not (d.inplace and p > d.position):
                    want.append((e["op"], method, e["inputs"][p], e["output"], d.inplace and p == d.position))
        cases = ex._cases(tr)
        assert len(cases) == len(want) > 0
        for (c, says, d), (op, method, tid, out, accepted) in zip(cases, want):
            assert (c.op, c.method, says) == (op, method, accepted), title
            name = tensors[tid].get("name")
            assert c.overwrites == name if name else re.fullmatch(r"a number|t%d" % tid, c.overwrites)
            out_name = tensors[out].get("name") or f"t{out}"
            assert c.line.startswith(f"{out_name} = {op.lower()}(") or c.line.startswith(f"a number = {op.lower()}(")
            assert c.line.endswith(")") and c.line.count(", ") == len(next(ev for ev in forward if ev["output"] == out)["inputs"]) - 1
            assert can_run_in_place(c) == says == ex.reference_verdict(c)


@pytest.mark.parametrize("part", [0, 1])
def test_each_refusal_of_the_plan_is_the_first_fact_that_fails(part):
    """Where the plan keeps an op, its reason for each input names the first failing fact of that candidate
    (the facts before it hold); where it runs the op in place, every fact is clear."""
    programs = _all_programs()
    for title, tr in programs[:3] if part == 0 else programs[3:]:
        by_op: dict = {}
        for c, says, d in ex._cases(tr):
            by_op.setdefault(d.step, (d, []))[1].append(c)
        for d, cs in by_op.values():
            if d.inplace:
                c = cs[-1]
                assert c.fits and c.made_by_op and not (c.saved_by or c.later_reads or c.alive_at_end), (title, c.line)
                assert not (c.op in ("Mul", "Div") and c.other_needs_grad)
                continue
            positions = VARIANTS[d.op][1]
            reasons = _reasons(d, [p for p in positions])
            for c, p in zip(cs, [p for p in positions if p in reasons]):
                why = reasons[p]
                if "does not fit" in why:
                    assert not c.fits, (title, c.line, why)
                    continue
                assert c.fits, (title, c.line, why)
                if "was not made by a recorded op" in why:
                    assert not c.made_by_op, (title, c.line, why)
                    continue
                assert c.made_by_op, (title, c.line, why)
                if "would need the old values" in why:
                    assert c.op in ("Mul", "Div") and c.other_needs_grad and c.saved_by_itself, (title, c.line)
                    continue
                assert not (c.op in ("Mul", "Div") and c.other_needs_grad), (title, c.line, why)
                if "reads the same bytes" in why:
                    continue
                saver = re.match(r"(\w+) \(node \d+, op event at step \d+\) saves storage", why)
                rewritten = re.match(r"t\d+ is the result of (\w+) \(step \d+, rewritten in place", why)
                if saver or rewritten:
                    label = saver.group(1) if saver else f"{rewritten.group(1)} (rewritten in place)"
                    assert c.saved_by and c.saved_by[0] == label, (title, c.line, why, c.saved_by)
                    continue
                assert not c.saved_by, (title, c.line, why)
                read = re.match(r"t\d+ is read again(?: through t\d+, another view of storage #\d+,)? by (\S+) at step", why)
                if read:
                    assert c.later_reads and c.later_reads[0].split(" ")[0] == read.group(1), (title, c.line, why)
                    assert (" through " in c.later_reads[0]) == (" through t" in why)
                    continue
                assert not c.later_reads, (title, c.line, why)
                assert "still alive when the trace ends" in why and c.alive_at_end, (title, c.line, why)


@pytest.mark.parametrize("part", [0, 1])
def test_the_facts_agree_with_the_trace(part):
    """alive_at_end: the trace's storage lifetimes; fits: the shapes; made_by_op: not one of the programs'
    inputs; other_needs_grad: the other operand requires grad; saved_by_itself: only a Mul or Div factor whose
    other factor needs a gradient, or a Clamp of an input that needs one (its mask); Relu, Exp, ... save their
    output, Add and Sub nothing."""
    programs = _all_programs()
    for title, tr in programs[:3] if part == 0 else programs[3:]:
        tensors = _tensor_events(tr)
        by_name = {e["name"]: e for e in tensors.values() if e.get("name")}
        alive = {lt.storage: lt.death is None for lt in tr.lifetimes()}
        for c in candidates(tr):
            if c.overwrites in by_name:
                t = by_name[c.overwrites]
                assert c.alive_at_end == alive[t["storage"]], (title, c.line, c.overwrites)
                out = by_name.get(c.line.split(" = ")[0])
                if out is not None:
                    assert c.fits == (t["shape"] == out["shape"] and t["dtype"] == out["dtype"]), (title, c.line)
            if c.overwrites == "a number":
                assert not c.fits and not c.made_by_op and not c.alive_at_end
            if not c.overwrites.startswith("t"):
                assert c.made_by_op == (c.overwrites not in INPUTS), (title, c.line, c.overwrites)
            if c.other is None:
                assert c.op not in ("Mul", "Div", "Add", "Sub") and not c.other_needs_grad
            elif c.other in by_name:
                assert c.other_needs_grad == bool(by_name[c.other]["requires_grad"]), (title, c.line)
            elif c.other == "a number":
                assert not c.other_needs_grad
            clamped = c.op == "Clamp" and bool(by_name.get(c.overwrites, {}).get("requires_grad"))
            assert c.saved_by_itself == (c.op in ("Mul", "Div") and c.other_needs_grad or clamped), (title, c.line)
            assert all(re.fullmatch(r"[A-Z]\w*( \(rewritten in place\))?", s) for s in c.saved_by)
            assert all(re.fullmatch(r"[A-Z]\w*( \(during backward\)| through \S+)?", r) for r in c.later_reads)
