"""Mutation run 7, ``exercises/training.py`` (notebook 08's checkers): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake the notebook warns about or a
  learner is likely to make. SGD with momentum: the buffer dampened on step 1, dampening
  forgotten, an exponential average instead of PyTorch's buffer, weight decay left out, added
  after the momentum (decoupled), subtracted, the step uphill, the step taken with d instead
  of the buffer, momentum ignored, lr folded into the buffer, p or buf rebound instead of
  written. Clipping: the norm after clipping, one gradient's norm, the sum of the norms, the
  squared norm, the largest entry, per-gradient clipping, the inverse factor, only the first
  gradient scaled, always scaling, 0/0 on zero gradients, not in place, the list's entries
  replaced, None, a list or a string returned. Adam/AdamW: the two weight decays swapped,
  always L2, always decoupled, the decay without lr, after the step, no bias correction, eps
  under the root, the step counted from 0, amsgrad forgotten, the max over g² or over the
  bias-corrected v, vmax rebound, m with the betas swapped, m or v from the raw gradient, v of
  g instead of g², m rebound, p rebound. Each is rejected on a named case and step with the
  numbers and the hint for that mistake, visible and hidden; a function that raises is
  reported as such;
* the numbers in the messages against PyTorch (``torch.optim.SGD``, ``Adam``, ``AdamW``,
  ``torch.nn.utils.clip_grad_norm_``) on the very arrays the checker handed over;
* the references (``_numpy_sgd`` and its variants, ``numpy_adam``, ``_numpy_clip``) against
  PyTorch and against values worked by hand;
* the cases are the kinds promised: the fixed settings first (plain SGD, momentum, dampening,
  weight decay, everything at once; Adam, L2, AdamW, amsgrad where v falls, a large eps; one
  gradient at 5 × max_norm, a layer's three, below max_norm, all zero, big and tiny), then
  random ones, reproducible, other and more in the hidden run; step counted from 1, the state
  arrays starting at zero and handed over again on every step; the gradients views of one flat
  buffer; the pass message counts the cases.

Record: tests/mutation-run-7/exercises-training.md.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import checking
from microtorch.exercises import training as ex

from checker_probes import cases_counted, failure
from test_exercise_checkers import _solutions



def _torch():
    """PyTorch, imported on first use (the oracle; the file's other tests run without it)."""
    return pytest.importorskip("torch")

SOLUTION = _solutions("08_training")  # the notebook's reference answers
sgd_step = SOLUTION["sgd_momentum_step"]
clip_norm = SOLUTION["clip_grad_norm"]
adam_step = SOLUTION["adam_step"]

FLOAT = r"-?(?:\d+\.\d*|\d*\.\d+|\d+)(?:e[-+]?\d+)?|-?nan|-?inf"


def _numbers(text: str) -> np.ndarray:
    return np.array([float(x) for x in re.findall(FLOAT, text)])


def _block(msg: str, label: str, stop: str) -> np.ndarray:
    """The numbers printed between ``label`` and the next ``stop`` (or the end of the line)."""
    start = msg.index(label) + len(label)
    end = msg.index(stop, start) if stop else msg.index("\n", start)
    return _numbers(msg[start:end])


def _close_to_5_digits(shown, want) -> bool:
    """Values printed with 5 decimals: equal to ``want`` up to the rounding."""
    want = np.ravel(np.asarray(want, dtype=float))
    return shown.shape == want.shape and np.allclose(shown, want, rtol=0, atol=6e-6)


@pytest.fixture
def no_suite(monkeypatch):
    """The checker's own cases only: the engine's tests run after it with the function plugged in."""
    from microtorch.exercises import checker
    monkeypatch.setattr(checker, "run_suite", lambda name, fn: None)


class _Calls:
    """Wraps an answer; keeps a copy of every call's arguments as they were before it ran."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def __call__(self, *args):
        self.calls.append(tuple(a.copy() if isinstance(a, np.ndarray)
                                else [x.copy() for x in a] if isinstance(a, list) else a for a in args))
        self.args = args
        return self.answer(*args)

    def last_case(self, step_at=3):
        """The calls of the case the last call belongs to (from its step 1 on)."""
        first = max(i for i, c in enumerate(self.calls) if c[step_at] == 1)
        return self.calls[first:]


# ----------------------------------------------------------------------------------------------
# PyTorch, the independent oracle
# ----------------------------------------------------------------------------------------------
def torch_sgd(p0, grads, lr, momentum, dampening, weight_decay):
    """[(p, buf)] after every step of torch.optim.SGD (buf None without momentum)."""
    torch = _torch()
    p = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                          foreach=False)
    out = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        buf = opt.state[p].get("momentum_buffer")
        out.append((p.detach().numpy().copy(), None if buf is None else buf.numpy().copy()))
    return out


def torch_adam(p0, grads, lr, b1, b2, eps, wd, decoupled, amsgrad):
    """[(p, m, v, vmax)] after every step of torch.optim.Adam / AdamW."""
    torch = _torch()
    p = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    kind = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = kind([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, amsgrad=amsgrad, foreach=False)
    out = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        s = opt.state[p]
        vmax = s["max_exp_avg_sq"].numpy().copy() if amsgrad else None
        out.append((p.detach().numpy().copy(), s["exp_avg"].numpy().copy(), s["exp_avg_sq"].numpy().copy(), vmax))
    return out


def torch_clip(arrays, max_norm):
    """(total norm, the clipped gradients) of torch.nn.utils.clip_grad_norm_."""
    torch = _torch()
    params = [torch.zeros(a.shape, dtype=torch.float64, requires_grad=True) for a in arrays]
    for p, a in zip(params, arrays):
        p.grad = torch.tensor(a, dtype=torch.float64)
    total = float(torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=False))
    return total, [p.grad.numpy().copy() for p in params]


# ----------------------------------------------------------------------------------------------
# exercise 1: SGD with momentum
# ----------------------------------------------------------------------------------------------
def _sgd(*, first_dampened=False, no_dampening=False, ema=False, wd_sign=1.0, wd_used=True,
         wd_after=False, uphill=False, step_with_d=False, lr_in_buf=False, ignore_momentum=False):
    """The notebook's update with one rule swapped for a mistake."""
    def step(p, g, buf, k, lr, mu, damp, wd):
        d = g + wd_sign * wd * p if wd_used and not wd_after else g.copy()
        if mu and not ignore_momentum:
            scale = lr if lr_in_buf else 1.0
            if k == 1 and not first_dampened:
                buf[...] = scale * d
            else:
                buf *= mu
                buf += scale * ((1 - mu) if ema else 1.0 if no_dampening else (1 - damp)) * d
            if step_with_d:
                pass
            elif lr_in_buf:
                p -= buf
                return
            else:
                d = buf
        if wd_after:
            d = d + wd * p
        if uphill:
            p += lr * d
        else:
            p -= lr * d
    return step


def _rebinds_p(p, g, buf, k, lr, mu, damp, wd):
    p = p.copy()  # noqa: PLW0127 - the mistake: the caller's p never changes
    sgd_step(p, g, buf, k, lr, mu, damp, wd)


def _rebinds_buf(p, g, buf, k, lr, mu, damp, wd):
    d = g + wd * p
    if mu:
        buf = d if k == 1 else mu * buf + (1 - damp) * d
        d = buf
    p -= lr * d


def _float32(p, g, buf, k, lr, mu, damp, wd):
    sgd_step(p, g, buf, k, lr, mu, damp, wd)
    p[...] = p.astype(np.float32)  # rounding only: ~1e-8 relative


def _rounding(p, g, buf, k, lr, mu, damp, wd):
    sgd_step(p, g, buf, k, lr, mu, damp, wd)
    p *= 1 + 4e-10  # off by less than the hint's 1e-9, more than the check's 1e-10


def _no_wd_without_momentum(p, g, buf, k, lr, mu, damp, wd):
    sgd_step(p, g, buf, k, lr, mu, damp, wd if mu else 0.0)


def _sgd_raises(p, g, buf, k, lr, mu, damp, wd):
    raise ValueError("no momentum today")


M1 = "for momentum 0.9, three steps (lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0), "
M_DAMP = ("for momentum 0.9 with dampening 0.5 (the first step is special) (lr=0.1, momentum=0.9, "
          "dampening=0.5, weight_decay=0.0), ")
M_WD = "for momentum 0.9 with weight decay 0.1 (lr=0.05, momentum=0.9, dampening=0.0, weight_decay=0.1), "
H_FIRST = "On the first step PyTorch does not dampen"
H_NO_WD = "You left out weight decay"
H_DECOUPLED = "That is decoupled weight decay (AdamW's"
H_UPHILL = "You moved p uphill"
H_BUF = "The momentum buffer is off."
H_SGD = "See mt.show_source(mt.optim.SGD._update)."
H_P_SAME = "p holds the same numbers after your function returned."
H_BUF_SAME = "buf holds the same numbers after your function returned"

MOMENTUM_MISTAKES = [  # (id, wrong answer, the case and step named, p shown?, buf shown?, words of the hint)
    ("dampens_step_1", _sgd(first_dampened=True), M_DAMP + "at step 1:", True, True, H_FIRST),
    ("no_dampening", _sgd(no_dampening=True), M_DAMP + "at step 2:", True, True, H_BUF),
    ("ema_buffer", _sgd(ema=True), M1 + "at step 2:", True, True, H_BUF),
    ("no_weight_decay", _sgd(wd_used=False), M_WD + "at step 1:", True, True, H_NO_WD),
    ("wd_after_momentum", _sgd(wd_after=True), M_WD + "at step 1:", False, True, H_DECOUPLED),
    ("wd_subtracted", _sgd(wd_sign=-1.0), M_WD + "at step 1:", True, True, H_BUF),
    ("uphill", _sgd(uphill=True), M1 + "at step 1:", True, False, H_UPHILL),
    ("steps_with_d", _sgd(step_with_d=True), M1 + "at step 2:", True, False, H_SGD),
    ("lr_in_buffer", _sgd(lr_in_buf=True), M1 + "at step 1:", False, True, H_BUF),
    ("ignores_momentum", _sgd(ignore_momentum=True), M1 + "at step 1:", False, False, H_BUF_SAME),
    ("rebinds_p", _rebinds_p, M1 + "at step 1:", False, False, H_P_SAME),
    ("rebinds_buf", _rebinds_buf, M1 + "at step 1:", False, False, H_BUF_SAME),
    ("float32", _float32, M1 + "at step 1:", True, False, H_SGD),
    ("rounding", _rounding, M1 + "at step 1:", True, False, H_SGD),
    ("raises", _sgd_raises, M1 + "at step 1:", False, False,
     "your function raised ValueError: no momentum today"),
]


@pytest.mark.parametrize("wrong, where, shows_p, shows_buf, hint", [m[1:] for m in MOMENTUM_MISTAKES],
                         ids=[m[0] for m in MOMENTUM_MISTAKES])
def test_each_wrong_momentum_update_is_rejected_with_its_case_step_and_hint(wrong, where, shows_p, shows_buf, hint):
    """A catalogued mistake fails on its first wrong case and step, named with the settings, with its hint."""
    msg = failure(mt.exercises.check_momentum_update, wrong)
    assert msg.startswith(where)
    assert hint in msg
    assert ("\np is       [" in msg) == shows_p and ("\nbut SGD's  [" in msg) == (shows_p or shows_buf)
    assert ("\nbuf is     [" in msg) == shows_buf


@pytest.mark.parametrize("wrong, hint", [(m[1], m[5]) for m in MOMENTUM_MISTAKES], ids=[m[0] for m in MOMENTUM_MISTAKES])
def test_each_wrong_momentum_update_is_rejected_in_the_hidden_run_too(wrong, hint):
    msg = failure(mt.exercises.check_momentum_update, wrong, hidden=True)
    assert msg.startswith("for ") and hint in msg


def test_a_momentum_mistake_only_on_random_settings_is_told_the_random_case():
    """Weight decay forgotten without momentum: no fixed case has that, a random one does."""
    msg = failure(mt.exercises.check_momentum_update, _no_wd_without_momentum)
    assert re.match(r"for random settings #\d+ \(lr=[\d.]+, momentum=0\.0, dampening=[\d.]+, "
                    r"weight_decay=0\.(?!0,)\d+\), at step 1:\n", msg)
    assert H_NO_WD in msg
    assert H_NO_WD in failure(mt.exercises.check_momentum_update, _no_wd_without_momentum, hidden=True)


@pytest.mark.parametrize("wrong", [_sgd(uphill=True), _sgd(no_dampening=True), _sgd(wd_after=True),
                                   _sgd(first_dampened=True)], ids=["uphill", "no_dampening", "wd_after", "first"])
def test_the_momentum_message_shows_the_learners_numbers_and_pytorchs(wrong):
    """'p is' / 'buf is' hold what the function left; 'but SGD's' is torch.optim.SGD on the same arrays."""
    spy = _Calls(wrong)
    msg = failure(mt.exercises.check_momentum_update, spy)
    case = spy.last_case()
    p0, (lr, mu, damp, wd) = case[0][0], case[0][4:]
    k = case[-1][3]
    assert len(case) == k and [c[3] for c in case] == list(range(1, k + 1))
    want_p, want_buf = torch_sgd(p0, [c[1] for c in case], lr, mu, damp, wd)[k - 1]
    p, buf = spy.args[0], spy.args[2]
    if "\np is" in msg:
        assert _close_to_5_digits(_block(msg, "\np is", "\n"), p)
        assert _close_to_5_digits(_block(msg, "\nbut SGD's", "\n"), want_p)
    if "\nbuf is" in msg:
        assert _close_to_5_digits(_block(msg, "\nbuf is", "\n"), buf)
        assert _close_to_5_digits(_block(msg.split("\nbuf is")[1], "\nbut SGD's", "\n"), want_buf)


def _except_on_case(solution, case, step_at, change):
    """The notebook's answer, except on every step of the ``case``-th case tried (counted from 0):
    there ``change(args)`` runs after it."""
    seen = [-1]

    def answer(*args):
        if args[step_at] == 1:
            seen[0] += 1
        solution(*args)
        if seen[0] == case:
            change(args)
    return answer


def test_a_momentum_mistake_on_one_random_case_names_it_by_its_number():
    """'random settings #1' is the first random case, '#3' the third."""
    n = len(ex.MOMENTUM_CASES)
    for k in (0, 2):
        msg = failure(mt.exercises.check_momentum_update,
                      _except_on_case(sgd_step, n + k, 3, lambda a: a[0].__iadd__(0.5)))
        assert msg.startswith(f"for random settings #{k + 1} (lr=") and "at step 1:\np is " in msg


def test_buf_is_checked_as_closely_as_p():
    """A buffer 5e-9 off (p right) is rejected on that step, and the message shows buf."""
    msg = failure(mt.exercises.check_momentum_update, _except_on_case(sgd_step, 0, 3, lambda a: a[2].__iadd__(5e-9)))
    assert msg.startswith(M1 + "at step 1:\nbuf is     [") and "\np is" not in msg


def test_the_buffer_hint_needs_a_buffer_off_by_more_than_rounding_and_looks_at_this_step():
    """A buffer 1e-6 off is 'off'; a p wrong only at step 2, with the buffer right, gets the general hint
    (the buffer is compared with PyTorch's of the same step)."""
    msg = failure(mt.exercises.check_momentum_update,
                  _except_on_case(sgd_step, 0, 3, lambda a: a[2].__imul__(1 + 1e-6)))
    assert msg.startswith(M1 + "at step 1:\nbuf is     [") and msg.endswith(H_BUF + " PyTorch: buf = d on step 1, then "
                                                                          "buf = momentum * buf + (1 − dampening) * d; "
                                                                          "with momentum, the step uses buf: p -= lr * buf.")

    def p_off_at_step_2(p, g, buf, k, lr, mu, damp, wd):
        sgd_step(p, g, buf, k, lr, mu, damp, wd)
        if k == 2:
            p += 1e-3
    msg = failure(mt.exercises.check_momentum_update, p_off_at_step_2)
    assert msg.startswith(M1 + "at step 2:\np is       [") and msg.endswith(H_SGD)


def test_a_momentum_hint_names_a_mistake_only_when_the_answer_matches_it_closely():
    """Weight decay left out, but p 5e-9 or buf 1e-7 (relative) off that too: not 'You left out
    weight decay', which needs a match to 1e-9 (the buffer differs from PyTorch's: that hint)."""
    p_off = _sgd(wd_used=False)

    def p_near(p, g, buf, k, lr, mu, damp, wd):
        p_off(p, g, buf, k, lr, mu, damp, wd)
        p += 5e-9 if wd else 0.0

    def buf_near(p, g, buf, k, lr, mu, damp, wd):
        p_off(p, g, buf, k, lr, mu, damp, wd)
        buf *= 1 + (1e-7 if wd else 0.0)
    for answer in (p_near, buf_near):
        msg = failure(mt.exercises.check_momentum_update, answer)
        assert msg.startswith(M_WD + "at step 1:") and H_NO_WD not in msg and H_BUF in msg
    assert H_NO_WD in failure(mt.exercises.check_momentum_update, p_off)


def test_a_momentum_answer_may_change_g_it_is_a_copy():
    """g is the learner's to change (d = g; d += wd * p): the right update passes, and a wrong
    one still gets the hint computed from the real gradients."""
    def right_in_g(p, g, buf, k, lr, mu, damp, wd):
        g += wd * p
        sgd_step(p, g, buf, k, lr, mu, damp, 0.0)

    def decoupled_in_g(p, g, buf, k, lr, mu, damp, wd):
        g *= 1.0
        g += 0.0 * p
        _sgd(wd_after=True)(p, g, buf, k, lr, mu, damp, wd)
        g += 5.0
    mt.exercises.check_momentum_update(right_in_g)
    mt.exercises.check_momentum_update(right_in_g, hidden=True)
    spy = _Calls(decoupled_in_g)
    assert H_DECOUPLED in failure(mt.exercises.check_momentum_update, spy)
    assert all(not np.shares_memory(spy.calls[0][1], x) for x in spy.calls[0] if isinstance(x, np.ndarray)
               and x is not spy.calls[0][1])


def test_a_rebinding_answer_is_told_only_when_the_step_should_move_p():
    """'p holds the same numbers' needs the right step to move p; a zero gradient does not."""
    msg = failure(mt.exercises.check_momentum_update, _rebinds_p)
    assert msg.startswith(M1 + "at step 1:\n" + H_P_SAME) and "`p -= lr * d`" in msg
    msg = failure(mt.exercises.check_momentum_update, _rebinds_buf)
    assert msg.startswith(M1 + "at step 1:\n" + H_BUF_SAME)


def test_a_plain_sgd_answer_that_never_touches_buf_passes_without_momentum():
    """With momentum 0 there is no buffer: an answer that leaves buf alone then is not told about it."""
    def plain_only(p, g, buf, k, lr, mu, damp, wd):
        if mu:
            sgd_step(p, g, buf, k, lr, mu, damp, wd)
        else:
            buf[...] = 123.0  # an untouched/garbage buffer is not looked at without momentum
            p -= lr * (g + wd * p)
    mt.exercises.check_momentum_update(plain_only)
    mt.exercises.check_momentum_update(plain_only, hidden=True)


def test_the_momentum_pass_message_counts_the_cases(capsys, no_suite):
    for hidden in (False, True):
        spy = _Calls(sgd_step)
        mt.exercises.check_momentum_update(spy, hidden=hidden)
        out = capsys.readouterr().out
        assert cases_counted(out, "check_momentum_update") == sum(c[3] == 1 for c in spy.calls)
        assert ("(the hidden ones)" in out) == hidden


def _momentum_cases(hidden):
    spy = _Calls(sgd_step)
    mt.exercises.check_momentum_update(spy, hidden=hidden)
    cases = []
    for c in spy.calls:
        if c[3] == 1:
            cases.append([])
        cases[-1].append(c)
    return cases


def test_the_momentum_cases_are_the_fixed_settings_then_random_ones_and_more_when_hidden(no_suite):
    visible, again, hidden = _momentum_cases(False), _momentum_cases(False), _momentum_cases(True)
    n = len(ex.MOMENTUM_CASES)
    settings = [tuple(c[0][4:]) for c in visible]
    assert settings[:n] == [tuple(c[1:5]) for c in ex.MOMENTUM_CASES]
    assert [len(c) for c in visible[:n]] == [c[5] for c in ex.MOMENTUM_CASES]
    assert len(visible) > n and len(hidden) > len(visible)
    assert all(np.array_equal(a[0][0], b[0][0]) for a, b in zip(visible, again))
    assert [tuple(c[0][4:]) for c in hidden][:n] == settings[:n]
    assert not any(np.array_equal(a[0][0], b[0][0]) for a, b in zip(visible, hidden))
    assert settings[n:] != [tuple(c[0][4:]) for c in hidden][n:len(visible)]
    for cases in (visible, hidden):
        for case in cases:
            assert [c[3] for c in case] == list(range(1, len(case) + 1))  # step counts from 1
            assert not case[0][2].any()  # buf starts at zero
            assert all(c[0].shape == (6,) for c in case)
        rand = [tuple(c[0][4:]) for c in cases[n:]]
        # valid settings: a momentum below 1, a dampening in [0, 1], no negative decay or lr
        assert all(0 < lr and 0 <= mu < 1 and 0 <= damp <= 1 and wd >= 0 for lr, mu, damp, wd in rand)
        assert all(len(c) >= 1 for c in cases[n:])


def test_the_fixed_momentum_settings_have_every_kind_promised():
    """Plain SGD (momentum 0), momentum, dampening past step 1, weight decay with momentum, all at once."""
    kinds = ex.MOMENTUM_CASES
    assert any(mu == 0 and steps >= 2 for _, _, mu, _, _, steps in kinds)
    assert any(mu and damp and not wd and steps >= 2 for _, _, mu, damp, wd, steps in kinds)
    assert any(mu and wd and not damp for _, _, mu, damp, wd, _ in kinds)
    assert any(mu and damp and wd and steps >= 2 for _, _, mu, damp, wd, steps in kinds)


def test_the_momentum_state_is_handed_over_again_on_every_step():
    """p and buf are the same arrays from step to step (the update is in place), g a fresh copy."""
    seen = []

    def keeps(p, g, buf, k, lr, mu, damp, wd):
        seen.append((id(p), id(buf), k))
        sgd_step(p, g, buf, k, lr, mu, damp, wd)
    mt.exercises.check_momentum_update(keeps)
    case = [s for s in seen[:3]]
    assert case[0][:2] == case[1][:2] == case[2][:2] and [s[2] for s in case] == [1, 2, 3]


# -- the reference -----------------------------------------------------------------------------
def test_numpy_sgd_is_torchs_sgd_on_the_fixed_and_random_settings():
    r = np.random.default_rng(5)
    for what, lr, mu, damp, wd, steps in ex.MOMENTUM_CASES + ex._random_momentum_cases(12):
        p0, grads = r.standard_normal(6), [r.standard_normal(6) for _ in range(steps)]
        for (p, buf), (tp, tbuf) in zip(ex._numpy_sgd(p0, grads, lr, mu, damp, wd),
                                        torch_sgd(p0, grads, lr, mu, damp, wd)):
            assert np.allclose(p, tp, rtol=1e-12, atol=1e-14), what
            if mu:
                assert np.allclose(buf, tbuf, rtol=1e-12, atol=1e-14), what


def test_numpy_sgd_and_its_variants_by_hand():
    """p0 = 1, g = 1, lr 0.1: worked out on paper."""
    one, g2 = np.array([1.0]), [np.array([1.0]), np.array([1.0])]

    def four(out):  # p and buf after step 1, then after step 2
        return [float(x[0]) for x in (out[0][0], out[0][1], out[1][0], out[1][1])]
    # momentum 0.9, dampening 0.5: buf 1 then 0.9 + 0.5 = 1.4; p 0.9 then 0.76
    got = ex._numpy_sgd(one, g2, 0.1, 0.9, 0.5, 0.0)
    assert four(got) == pytest.approx([0.9, 1.0, 0.76, 1.4], abs=1e-15)
    # dampened from the first step: buf 0.5 then 0.45 + 0.5 = 0.95; p 0.95 then 0.855
    for flag in ("first_dampened", "zero_start"):
        got = ex._numpy_sgd(one, g2, 0.1, 0.9, 0.5, 0.0, **{flag: True})
        assert four(got) == pytest.approx([0.95, 0.5, 0.855, 0.95], abs=1e-15)
    # weight decay 0.5 with momentum 0.9: d 1.5, buf 1.5, p 0.85; d 1.425, buf 2.775, p 0.5725
    got = ex._numpy_sgd(one, g2, 0.1, 0.9, 0.0, 0.5)
    assert four(got) == pytest.approx([0.85, 1.5, 0.5725, 2.775], abs=1e-15)
    # decoupled: p 0.95, buf 1, p 0.85; p 0.8075, buf 1.9, p 0.6175
    got = ex._numpy_sgd(one, g2, 0.1, 0.9, 0.0, 0.5, decoupled=True)
    assert four(got) == pytest.approx([0.85, 1.0, 0.6175, 1.9], abs=1e-15)
    # no momentum: no buffer, p 1 - 0.1 * 1.5 = 0.85, buf stays 0
    got = ex._numpy_sgd(one, g2[:1], 0.1, 0.0, 0.3, 0.5)
    assert [float(got[0][0][0]), float(got[0][1][0])] == pytest.approx([0.85, 0.0], abs=1e-15)
    assert len(ex._numpy_sgd(one, g2, 0.1, 0.0, 0.0, 0.0)) == 2


def test_numpy_sgd_does_not_touch_its_inputs():
    p0, g = np.array([1.0, 2.0]), [np.array([0.5, -0.5])]
    ex._numpy_sgd(p0, g, 0.1, 0.9, 0.0, 0.1)
    ex._numpy_sgd(p0, g, 0.1, 0.9, 0.0, 0.1, decoupled=True)
    assert p0.tolist() == [1.0, 2.0] and g[0].tolist() == [0.5, -0.5]
    out = ex._numpy_sgd(p0, g + [g[0]], 0.1, 0.9, 0.0, 0.0)
    assert out[0][0] is not out[1][0] and not np.shares_memory(out[0][1], out[1][1])
    assert not np.array_equal(out[0][0], out[1][0])


# -- the hint, branch by branch ----------------------------------------------------------------
def _hint_for(answer, p0, grads, lr, mu, damp, wd):
    """Run ``answer`` over the steps; the momentum hint at the first step it differs (or None)."""
    want = ex._numpy_sgd(p0, grads, lr, mu, damp, wd)
    p, buf = p0.copy(), np.zeros_like(p0)
    for k, g in enumerate(grads, start=1):
        before = p.copy()
        answer(p, g.copy(), buf, k, lr, mu, damp, wd)
        if not (np.allclose(p, want[k - 1][0], rtol=1e-10, atol=1e-12)
                and (not mu or np.allclose(buf, want[k - 1][1], rtol=1e-10, atol=1e-12))):
            return k, ex._momentum_hint(p0, grads, k, p, buf, lr, mu, damp, wd, before)
    return None


P0 = np.array([0.5, -1.0, 2.0, 0.25])
GRADS = [np.array([1.0, 0.5, -0.5, 2.0]), np.array([-0.5, 1.5, 1.0, 0.5]), np.array([0.25, -1.0, 0.5, 1.0])]


@pytest.mark.parametrize("answer, settings, step, words", [
    (_sgd(first_dampened=True), (0.1, 0.9, 0.5, 0.0), 1, H_FIRST),
    (_sgd(first_dampened=True), (0.1, 0.9, 0.5, 0.2), 1, H_FIRST),
    (_sgd(first_dampened=True, wd_used=False), (0.1, 0.9, 0.5, 0.2), 1, H_BUF),  # two mistakes: neither named
    (_sgd(wd_used=False), (0.1, 0.9, 0.5, 0.2), 1, H_NO_WD),
    (_sgd(wd_used=False), (0.1, 0.0, 0.0, 0.2), 1, H_NO_WD),
    (_sgd(wd_after=True), (0.1, 0.9, 0.5, 0.2), 1, H_DECOUPLED),
    (_sgd(wd_after=True), (0.1, 0.5, 0.0, 0.2), 1, H_DECOUPLED),
    (_sgd(uphill=True), (0.1, 0.0, 0.0, 0.0), 1, H_UPHILL),
    (_sgd(uphill=True), (0.1, 0.9, 0.5, 0.2), 1, H_UPHILL),
    (_sgd(no_dampening=True), (0.1, 0.9, 0.5, 0.0), 2, H_BUF),
    (_sgd(ema=True), (0.1, 0.5, 0.0, 0.0), 2, H_BUF),
    (_sgd(step_with_d=True), (0.1, 0.9, 0.0, 0.0), 2, H_SGD),
    (_sgd(step_with_d=True), (0.1, 0.9, 0.5, 0.2), 2, H_SGD),
    (_rounding, (0.1, 0.9, 0.5, 0.2), 1, H_SGD),
    (_rounding, (0.1, 0.0, 0.0, 0.0), 1, H_SGD),
    (_float32, (0.1, 0.9, 0.0, 0.2), 1, H_SGD),
])
def test_the_momentum_hint_names_the_mistake(answer, settings, step, words):
    k, hint = _hint_for(answer, P0, GRADS, *settings)
    assert k == step and words in hint


def test_the_momentum_hints_whole_words():
    """Each hint's text as the learner reads it (the formulas in it are PyTorch's)."""
    k, hint = _hint_for(_sgd(first_dampened=True), P0, GRADS, 0.1, 0.9, 0.5, 0.0)
    assert hint == ("On the first step PyTorch does not dampen: the buffer does not exist yet, and it "
                    "is created as a copy of d (`buf[...] = d`). Dampening applies from step 2 on.")
    assert _hint_for(_sgd(wd_used=False), P0, GRADS, 0.1, 0.9, 0.5, 0.2)[1] == (
        "You left out weight decay: SGD adds weight_decay · p to the gradient first, "
        "d = g + weight_decay * p, and everything after uses d.")
    assert _hint_for(_sgd(wd_after=True), P0, GRADS, 0.1, 0.9, 0.5, 0.2)[1] == (
        "That is decoupled weight decay (AdamW's: shrink p by 1 − lr·wd, then step). "
        "SGD's weight_decay adds weight_decay · p to the gradient: d = g + weight_decay * p.")
    assert _hint_for(_sgd(uphill=True), P0, GRADS, 0.1, 0.9, 0.0, 0.0)[1] == (
        "You moved p uphill: the update is p -= lr * d (minus: against the gradient).")
    assert _hint_for(_sgd(no_dampening=True), P0, GRADS, 0.1, 0.9, 0.5, 0.0)[1] == (
        "The momentum buffer is off. PyTorch: buf = d on step 1, then "
        "buf = momentum * buf + (1 − dampening) * d; with momentum, the step uses buf: p -= lr * buf.")
    assert _hint_for(_sgd(step_with_d=True), P0, GRADS, 0.1, 0.9, 0.0, 0.0)[1] == (
        "With d = g + weight_decay * p: on step 1 buf = d, later buf = momentum * buf + "
        "(1 − dampening) * d; then p -= lr * buf (or p -= lr * d when momentum is 0). "
        "See mt.show_source(mt.optim.SGD._update).")


def test_the_momentum_hint_looks_at_buf_only_with_momentum():
    """Without momentum a buffer the answer filled with anything does not make the hint blame it."""
    p = P0.copy()
    p -= 0.1 * GRADS[0] * 1.5  # a wrong step, buf full of garbage
    hint = ex._momentum_hint(P0, GRADS, 1, p, np.full(4, 7.0), 0.1, 0.0, 0.0, 0.0, P0.copy())
    assert H_SGD in hint
    # without weight decay, an answer that matches the no-decay variant is not told it left it out
    p = ex._numpy_sgd(P0, GRADS, 0.1, 0.0, 0.0, 0.0)[0][0] * (1 + 4e-10)
    assert H_SGD in ex._momentum_hint(P0, GRADS, 1, p, np.zeros(4), 0.1, 0.0, 0.0, 0.0, P0.copy())


def test_the_uphill_hint_needs_exactly_the_reversed_step():
    """Twice the step backwards is not 'uphill'; the same step backwards is, from p before this step."""
    want = ex._numpy_sgd(P0, GRADS, 0.1, 0.9, 0.0, 0.0)
    before = want[0][0]
    right = want[1][0]
    back = before - (right - before)
    assert H_UPHILL in ex._momentum_hint(P0, GRADS, 2, back, want[1][1], 0.1, 0.9, 0.0, 0.0, before)
    near = before - (1 + 1e-6) * (right - before)  # backwards, but not exactly the step
    assert H_UPHILL not in ex._momentum_hint(P0, GRADS, 2, near, want[1][1], 0.1, 0.9, 0.0, 0.0, before)
    assert H_UPHILL not in ex._momentum_hint(P0, GRADS, 2, back + 5e-9, want[1][1], 0.1, 0.9, 0.0, 0.0, before)
    twice = before - 2 * (right - before)
    assert H_UPHILL not in ex._momentum_hint(P0, GRADS, 2, twice, want[1][1], 0.1, 0.9, 0.0, 0.0, before)
    # measured from the p before this step, not from p0
    assert H_UPHILL not in ex._momentum_hint(P0, GRADS, 2, P0 - (right - P0), want[1][1], 0.1, 0.9, 0.0, 0.0, before)


def test_the_first_step_hint_only_on_step_1_with_momentum_and_dampening():
    """A buffer dampened on step 1 is told so; the same numbers at step 2, or without dampening, are not."""
    fd = ex._numpy_sgd(P0, GRADS, 0.1, 0.9, 0.5, 0.0, first_dampened=True)
    assert H_FIRST in ex._momentum_hint(P0, GRADS, 1, fd[0][0], fd[0][1], 0.1, 0.9, 0.5, 0.0, P0.copy())
    assert H_FIRST not in ex._momentum_hint(P0, GRADS, 2, fd[1][0], fd[1][1], 0.1, 0.9, 0.5, 0.0, fd[0][0])
    # with the first-dampened p but the right buffer: not that mistake
    right = ex._numpy_sgd(P0, GRADS, 0.1, 0.9, 0.5, 0.0)
    assert H_FIRST not in ex._momentum_hint(P0, GRADS, 1, fd[0][0], right[0][1], 0.1, 0.9, 0.5, 0.0, P0.copy())
    assert H_FIRST not in ex._momentum_hint(P0, GRADS, 1, right[0][0], fd[0][1], 0.1, 0.9, 0.5, 0.0, P0.copy())


# ----------------------------------------------------------------------------------------------
# exercise 2: clipping the global norm
# ----------------------------------------------------------------------------------------------
def _total(grads) -> float:
    return float(np.sqrt(sum(float((g * g).sum()) for g in grads)))


def _returns_after(grads, mx):
    clip_norm(grads, mx)
    return _total(grads)


def _last_norm(grads, mx):
    coef = mx / (_total(grads) + 1e-6)
    for g in grads:
        n = float(np.sqrt((g * g).sum()))
        if coef < 1:
            g *= coef
    return n


def _sum_of_norms(grads, mx):
    total = sum(float(np.sqrt((g * g).sum())) for g in grads)
    clip_norm(grads, mx)
    return total


def _squared(grads, mx):
    total = _total(grads)
    clip_norm(grads, mx)
    return total * total


def _max_entry(grads, mx):
    top = max(float(abs(g).max()) for g in grads)
    clip_norm(grads, mx)
    return top


def _per_gradient(grads, mx):
    total = _total(grads)
    for g in grads:
        n = np.sqrt((g * g).sum())
        if n > mx:
            g *= mx / n
    return total


def _inverted(grads, mx):
    total = _total(grads)
    if total > mx:
        for g in grads:
            g *= total / mx
    return total


def _first_only(grads, mx):
    total = _total(grads)
    if total > mx:
        grads[0] *= mx / (total + 1e-6)
    return total


def _always_scales(grads, mx):
    total = _total(grads)
    for g in grads:
        g *= mx / (total + 1e-6)
    return total


def _zero_over_zero(grads, mx):
    total = _total(grads)
    with np.errstate(invalid="ignore"):
        for g in grads:
            g[...] = g / total * min(total, mx)
    return total


def _not_in_place(grads, mx):
    total = _total(grads)
    for g in grads:
        g = g * min(1.0, mx / total)  # noqa: F841, PLW2901 - the mistake
    return total


def _replaces_entries(grads, mx):
    total = _total(grads)
    for i in range(len(grads)):
        grads[i] = grads[i] * min(1.0, mx / total)
    return total


def _threshold_one(grads, mx):
    """Clips when the norm is above 1 instead of above max_norm."""
    total = _total(grads)
    if total > 1.0:
        for g in grads:
            g *= mx / (total + 1e-6)
    return total


def _returns_nan(grads, mx):
    clip_norm(grads, mx)
    return float("nan")


def _clip_raises(grads, mx):
    return grads[7]


C1 = "for one gradient whose norm is 5 times max_norm (shapes [(8,)], max_norm=1.0):\n"
C2 = ("for a layer's three gradients (a weight, a bias, another weight), together too large "
      "(shapes [(4, 3), (3,), (3, 2)], max_norm=2.0):\n")
C3 = "for gradients whose norm is already below max_norm (shapes [(5,), (2, 2)], max_norm=1.0):\n"
C4 = "for gradients that are all zero (shapes [(3,), (2,)], max_norm=1.0):\n"
H_AFTER = "That is the norm AFTER clipping (max_norm, by construction)."
H_ONE = "That is the norm of one gradient only."
H_SUM = "You added up the norms of the gradients."
H_SQUARED = "That is the squared norm: take the square root."
H_NORM = "The total norm is sqrt(sum over all gradients of (g * g).sum())."
H_PER = "You clipped each gradient by its own norm."
H_FACTOR = "Scale every gradient by the same factor, max_norm / (total_norm + 1e-6), when the total norm exceeds max_norm."
H_SHRINK = "leave the gradients as they are. The factor is min(1, max_norm / norm): clipping only ever shrinks."
H_NAN = "nan: with all-zero gradients the norm is 0, and max_norm / 0 is not a number."
H_NEW = "The gradients did not change, but their total norm "
H_ENTRIES = "You replaced the entries of the list (grads[i] = ...)"
NORM_LINE = "you returned the norm "
GRAD_LINES = "after your function the gradients are\n"

CLIP_MISTAKES = [  # (id, wrong answer, the case named, what follows it, words of the hint)
    ("norm_after", _returns_after, C1, NORM_LINE + "1, but clip_grad_norm_ returns 5.\n", H_AFTER),
    ("one_gradient", _last_norm, C2, NORM_LINE, H_ONE),
    ("sum_of_norms", _sum_of_norms, C2, NORM_LINE, H_SUM),
    ("squared", _squared, C1, NORM_LINE + "25, but clip_grad_norm_ returns 5.\n", H_SQUARED),
    ("max_entry", _max_entry, C1, NORM_LINE, H_NORM),
    ("per_gradient", _per_gradient, C2, GRAD_LINES, H_PER),
    ("inverted", _inverted, C1, GRAD_LINES, H_FACTOR),
    ("first_only", _first_only, C2, GRAD_LINES, H_FACTOR),
    ("always_scales", _always_scales, C3, GRAD_LINES, H_SHRINK),
    ("zero_over_zero", _zero_over_zero, C4, "nan: ", H_NAN),
    ("returns_nan", _returns_nan, C1, "nan: ", H_NAN),
    ("not_in_place", _not_in_place, C1, GRAD_LINES, H_NEW),
    ("threshold_one", _threshold_one, "for random gradients #", "", "max_norm = "),
    ("replaces_entries", _replaces_entries, C1, GRAD_LINES, H_ENTRIES),
    ("returns_none", lambda grads, mx: None, C1, "your function returned None: return the total norm", "BEFORE"),
    ("returns_list", lambda grads, mx: [1.0, 2.0], C1, "your function returned [1.0, 2.0]; ",
     "return the total norm as a number."),
    ("returns_text", lambda grads, mx: "big", C1, "your function returned 'big'; ", "return the total norm as a number."),
    ("raises", _clip_raises, C1[:-1] + " your function raised IndexError: list index out of range", "",
     "It should return an answer for this case."),
]


@pytest.mark.parametrize("wrong, where, then, hint", [m[1:] for m in CLIP_MISTAKES], ids=[m[0] for m in CLIP_MISTAKES])
def test_each_wrong_clipping_is_rejected_with_its_case_and_hint(wrong, where, then, hint):
    msg = failure(mt.exercises.check_clip_grad_norm, wrong)
    assert msg.startswith(where + then)
    assert hint in msg


@pytest.mark.parametrize("wrong, hint", [(m[1], m[4]) for m in CLIP_MISTAKES], ids=[m[0] for m in CLIP_MISTAKES])
def test_each_wrong_clipping_is_rejected_in_the_hidden_run_too(wrong, hint):
    msg = failure(mt.exercises.check_clip_grad_norm, wrong, hidden=True)
    assert msg.startswith("for ") and hint in msg


def test_gradients_left_alone_above_max_norm_are_told_to_be_scaled_not_only_in_place():
    """Clipping above 1 instead of above max_norm leaves a norm of 0.39 > 0.1 alone: the hint says the
    norm is above max_norm and the gradients must be scaled (it used to say only that `g = g * coef`
    makes a new array, which this answer never wrote)."""
    msg = failure(mt.exercises.check_clip_grad_norm, _threshold_one)
    m = re.match(r"for random gradients #\d+ \(shapes .*, max_norm=0\.1\):\n", msg)
    assert m and re.search(r"\nThe gradients did not change, but their total norm [\d.]+ is above max_norm = 0\.1: "
                           r"scale every one by max_norm / \(norm \+ 1e-6\)\.", msg)


def test_the_whole_clipping_hints():
    assert failure(mt.exercises.check_clip_grad_norm, _returns_after).endswith(
        "\nThat is the norm AFTER clipping (max_norm, by construction). Return the norm "
        "before: it tells you how large the gradients really were.")
    assert failure(mt.exercises.check_clip_grad_norm, _last_norm).endswith(
        "\nThat is the norm of one gradient only. The total norm treats all gradients "
        "as one long vector: sqrt(sum of every element squared, over all of them).")
    assert failure(mt.exercises.check_clip_grad_norm, _sum_of_norms).endswith(
        "\nYou added up the norms of the gradients. The total norm is "
        "sqrt(sum over ALL elements of g²), not the sum of norms.")
    assert failure(mt.exercises.check_clip_grad_norm, _per_gradient).endswith(
        "\nYou clipped each gradient by its own norm. Clipping uses ONE factor for all of "
        "them, from the total norm, so the direction of the whole update is kept.")
    assert failure(mt.exercises.check_clip_grad_norm, _replaces_entries).endswith(
        "\nYou replaced the entries of the list (grads[i] = ...): the list is yours, "
        "but the gradients are the arrays in it, views of the flat gradient buffer. "
        "Scale them in place: `g *= coef` for each g.")
    assert failure(mt.exercises.check_clip_grad_norm, _not_in_place).endswith(
        "\nThe gradients did not change, but their total norm 5 is above max_norm = 1.0: scale every one by "
        "max_norm / (norm + 1e-6). (If you did: `g = g * coef` makes a new array; scale the arrays themselves, "
        "in place: `g *= coef`.)")
    msg = failure(mt.exercises.check_clip_grad_norm, _always_scales)
    total = float(re.search(r"The total norm (\S+) is already", msg).group(1))
    assert msg.endswith(f"\nThe total norm {total} is already at most max_norm = 1.0: leave the gradients as they "
                        "are. The factor is min(1, max_norm / norm): clipping only ever shrinks.")
    assert failure(mt.exercises.check_clip_grad_norm, _zero_over_zero).endswith(
        "\nnan: with all-zero gradients the norm is 0, and max_norm / 0 is not a "
        "number. Scale only when the norm exceeds max_norm (or add the 1e-6 PyTorch adds: "
        "max_norm / (norm + 1e-6)).")
    assert failure(mt.exercises.check_clip_grad_norm, lambda grads, mx: None).endswith(
        "\nyour function returned None: return the total norm (the norm BEFORE "
        "clipping, what you would log to watch training).")


@pytest.mark.parametrize("wrong", [_last_norm, _sum_of_norms, _max_entry, _squared, _returns_after],
                         ids=["one", "sum", "max", "squared", "after"])
def test_the_clipping_norm_message_gives_the_answer_and_pytorchs_norm(wrong):
    spy = _Calls(wrong)
    msg = failure(mt.exercises.check_clip_grad_norm, spy)
    grads, mx = spy.calls[-1]
    got = wrong([g.copy() for g in grads], mx)
    want, _ = torch_clip(grads, mx)
    m = re.search(r"\nyou returned the norm (\S+), but clip_grad_norm_ returns (\S+)\.\n", msg)
    assert m and float(m.group(1)) == pytest.approx(got, rel=1e-5) and float(m.group(2)) == pytest.approx(want, rel=1e-5)
    assert m.group(1) == f"{got:.6g}" and m.group(2) == f"{want:.6g}"


@pytest.mark.parametrize("wrong", [_per_gradient, _first_only, _inverted, _always_scales],
                         ids=["per", "first", "inverted", "always"])
def test_the_clipping_gradients_message_shows_the_answers_and_pytorchs(wrong):
    spy = _Calls(wrong)
    msg = failure(mt.exercises.check_clip_grad_norm, spy)
    grads, mx = spy.calls[-1]
    theirs = [g.copy() for g in grads]
    wrong(theirs, mx)
    _, want = torch_clip(grads, mx)
    after, leaves = msg.split(GRAD_LINES)[1].split("\nbut clip_grad_norm_ leaves\n")
    assert _close_to_5_digits(_numbers(after), np.concatenate([t.ravel() for t in theirs]))
    leaves = leaves.rsplit("\n", 1)[0]
    assert _close_to_5_digits(_numbers(leaves), np.concatenate([w.ravel() for w in want]))
    # one line per row: a 1-D gradient (up to 8 values) on one line, a matrix one line per row
    rows = sum(g.shape[0] if g.ndim == 2 else 1 for g in grads)
    assert after.count("\n") + 1 == rows == leaves.count("\n") + 1
    assert leaves.count("[[") == sum(g.ndim == 2 for g in grads)


def test_a_right_clipping_may_return_a_numpy_or_engine_scalar():
    """The total norm may come back as a float, a numpy scalar, a 0-d array or a tensor (.item())."""
    mt.exercises.check_clip_grad_norm(lambda grads, mx: np.float64(clip_norm(grads, mx)))
    mt.exercises.check_clip_grad_norm(lambda grads, mx: np.array(clip_norm(grads, mx)))
    mt.exercises.check_clip_grad_norm(lambda grads, mx: mt.tensor(clip_norm(grads, mx), dtype="float64"))
    torch = _torch()
    mt.exercises.check_clip_grad_norm(lambda grads, mx: torch.tensor(clip_norm(grads, mx), dtype=torch.float64),
                                      hidden=True)


def test_a_right_clipping_may_return_a_tensor_numpy_cannot_convert():
    """A PyTorch tensor that requires grad has .item() but no numpy conversion: the norm is read with .item()."""
    torch = _torch()
    mt.exercises.check_clip_grad_norm(
        lambda grads, mx: torch.tensor(clip_norm(grads, mx), dtype=torch.float64, requires_grad=True))


def test_a_right_clipping_returning_a_float32_norm_passes():
    """A norm rounded to float32 (``mt.tensor(total)``, float32 by default, like the engine's own
    return value for float32 parameters) is the right norm: it used to be refused with
    'you returned the norm 0.151623, but clip_grad_norm_ returns 0.151623'."""
    mt.exercises.check_clip_grad_norm(lambda grads, mx: mt.tensor(clip_norm(grads, mx)))
    mt.exercises.check_clip_grad_norm(lambda grads, mx: np.float32(clip_norm(grads, mx)), hidden=True)
    # but 1e-6 off the norm is still wrong (0 for all-zero gradients)
    msg = failure(mt.exercises.check_clip_grad_norm, lambda grads, mx: clip_norm(grads, mx) * (1 + 4e-6))
    assert msg.startswith(C1 + NORM_LINE + "5.00002, but clip_grad_norm_ returns 5.\n") and H_NORM in msg


def test_clipping_without_pytorchs_eps_passes_and_with_an_extra_eps_in_the_norm_does_not():
    def no_eps(grads, mx):
        total = _total(grads)
        if total > mx:
            for g in grads:
                g *= mx / total
        return total
    mt.exercises.check_clip_grad_norm(no_eps)
    mt.exercises.check_clip_grad_norm(no_eps, hidden=True)
    msg = failure(mt.exercises.check_clip_grad_norm, lambda grads, mx: clip_norm(grads, mx) + 1e-6)
    assert msg.startswith(C3 + NORM_LINE) and H_NORM in msg  # 1e-6 on a norm of 0.15: not rounding


def test_a_clipping_that_scales_but_not_enough_is_told_the_common_factor():
    """Shrinking to 2 × max_norm: neither per-gradient nor one gradient; the general hint."""
    def half_way(grads, mx):
        total = _total(grads)
        if total > mx:
            for g in grads:
                g *= 2 * mx / total
        return total
    msg = failure(mt.exercises.check_clip_grad_norm, half_way)
    assert msg.startswith(C1 + GRAD_LINES) and msg.endswith("\n" + H_FACTOR)


def test_per_gradient_clipping_is_named_only_when_every_gradient_is_within_max_norm():
    """Clipped all to max_norm each, but their total happens to be max_norm: that is not per-gradient."""
    def all_to_one(grads, mx):  # one gradient: per-gradient clipping is the global one, but scaled to 0.5 mx
        total = _total(grads)
        if total > mx:
            for g in grads:
                g *= 0.5 * mx / total
        return total
    msg = failure(mt.exercises.check_clip_grad_norm, all_to_one)
    assert msg.startswith(C1) and H_PER in msg  # within max_norm, total not max_norm: per-gradient's signature


def test_a_clipping_wrong_on_one_random_case_names_it_by_its_number():
    """'random gradients #1' is the first random case, '#3' the third."""
    n = len(ex.CLIP_CASES)
    for k in (0, 2):
        seen = [-1]

        def answer(grads, mx, k=k):
            seen[0] += 1
            total = clip_norm(grads, mx)
            return total * 2 if seen[0] == n + k else total
        msg = failure(mt.exercises.check_clip_grad_norm, answer)
        assert msg.startswith(f"for random gradients #{k + 1} (shapes [(") and NORM_LINE in msg


def test_the_clipping_pass_message_counts_the_cases(capsys, no_suite):
    for hidden in (False, True):
        spy = _Calls(clip_norm)
        mt.exercises.check_clip_grad_norm(spy, hidden=hidden)
        out = capsys.readouterr().out
        assert cases_counted(out, "check_clip_grad_norm") == len(spy.calls)
        assert ("(the hidden ones)" in out) == hidden


def _clip_calls(hidden):
    seen = []

    def look(grads, mx):
        seen.append(([g.copy() for g in grads], list(grads), mx))
        return clip_norm(grads, mx)
    mt.exercises.check_clip_grad_norm(look, hidden=hidden)
    return seen


def test_the_clipping_cases_are_the_fixed_ones_then_random_and_more_when_hidden(no_suite):
    visible, again, hidden = _clip_calls(False), _clip_calls(False), _clip_calls(True)
    n = len(ex.CLIP_CASES)
    assert len(visible) > n and len(hidden) > len(visible)
    for (what, shapes, scale, mx), (grads, _, got_mx) in zip(ex.CLIP_CASES, visible):
        assert [g.shape for g in grads] == [tuple(s) for s in shapes] and got_mx == mx
    assert all(all(np.array_equal(a, b) for a, b in zip(x[0], y[0])) for x, y in zip(visible, again))
    assert not all(np.array_equal(x[0][0], y[0][0]) for x, y in zip(visible[:n], hidden[:n]))
    assert [[g.shape for g in c[0]] for c in visible[n:]] != [[g.shape for g in c[0]] for c in hidden[n:len(visible)]]
    for calls in (visible, hidden):
        kinds = [(_total(g), mx) for g, _, mx in calls]
        assert kinds[0][0] == pytest.approx(5 * kinds[0][1], rel=1e-12)  # exactly 5 × max_norm
        assert kinds[1][0] > kinds[1][1] and len(calls[1][0]) == 3  # a layer's three, too large together
        assert 0 < kinds[2][0] < kinds[2][1]  # already below
        assert kinds[3][0] == 0.0  # all zero
        big, tiny = (float(np.sqrt((g * g).sum())) for g in calls[4][0])
        assert big > 100 * tiny > 0 and kinds[4][0] > kinds[4][1]
        for grads, views, mx in calls[n:]:
            assert len(grads) >= 1 and all(g.ndim >= 1 and g.size >= 1 for g in grads)  # weights and biases
            assert mx > 0
        assert any(t > mx for t, mx in kinds[n:]) and any(t <= mx for t, mx in kinds[n:])


def test_the_gradients_handed_over_are_views_of_one_flat_buffer(no_suite):
    """The list holds numpy views, back to back in one flat array, in the order of the list."""
    for _, views, _ in _clip_calls(False):
        base = views[0].base
        assert base is not None and base.ndim == 1 and all(v.base is base for v in views)
        assert base.size == sum(v.size for v in views)
        start = 0
        for v in views:
            assert np.shares_memory(v, base[start:start + v.size]) and v.flags.c_contiguous
            assert np.array_equal(v.ravel(), base[start:start + v.size])
            start += v.size


def test_clip_case_makes_the_kinds_promised():
    r = np.random.default_rng(3)
    five = ex._clip_case([(4,), (2, 3)], None, r)
    assert _total(five) == pytest.approx(5.0, rel=1e-12) and [a.shape for a in five] == [(4,), (2, 3)]
    r1, r2 = np.random.default_rng(3), np.random.default_rng(3)
    five = ex._clip_case([(4,), (2, 3)], None, r1)
    draws = [r2.standard_normal(4), r2.standard_normal((2, 3))]
    factor = five[0] / draws[0]
    assert np.allclose(factor, factor[0]) and np.allclose(five[1], draws[1] * factor[0], rtol=1e-12)  # scaled draws
    big, tiny = ex._clip_case([(6,), (6,)], "mixed", np.random.default_rng(4))
    assert _total([big]) > 10 * _total([tiny]) > 0 and big.shape == tiny.shape == (6,)
    zero = ex._clip_case([(3,), (2,)], 0.0, r)
    assert all(not z.any() for z in zero) and [z.shape for z in zero] == [(3,), (2,)]
    r1, r2 = np.random.default_rng(6), np.random.default_rng(6)
    scaled = ex._clip_case([(2, 2)], 0.3, r1)
    assert np.allclose(scaled[0], r2.standard_normal((2, 2)) * 0.3, rtol=1e-15)


# -- the reference -----------------------------------------------------------------------------
def test_numpy_clip_is_torchs_clip_grad_norm():
    r = np.random.default_rng(7)
    cases = ex.CLIP_CASES + ex._random_clip_cases(12)
    for what, shapes, scale, mx in cases:
        arrays = ex._clip_case(shapes, scale, r)
        total, clipped = ex._numpy_clip(arrays, mx)
        t_total, t_clipped = torch_clip(arrays, mx)
        assert total == pytest.approx(t_total, rel=1e-12, abs=1e-15), what
        assert all(np.allclose(a, b, rtol=1e-12, atol=1e-15) for a, b in zip(clipped, t_clipped)), what
        assert all(c is not a for c, a in zip(clipped, arrays))


def test_numpy_clip_by_hand():
    total, (a, b) = ex._numpy_clip([np.array([3.0]), np.array([0.0, 4.0])], 1.0)
    assert total == 5.0 and a.tolist() == pytest.approx([3 / (5 + 1e-6)], rel=1e-15)
    assert b.tolist() == pytest.approx([0.0, 4 / (5 + 1e-6)], rel=1e-15)
    total, (a,) = ex._numpy_clip([np.array([3.0, 4.0])], 5.0)  # at max_norm: 5 / (5 + 1e-6), just below 1
    assert total == 5.0 and a.tolist() == pytest.approx([3 * 5 / 5.000001, 4 * 5 / 5.000001], rel=1e-15)
    total, (a,) = ex._numpy_clip([np.array([3.0, 4.0])], 5.000001)  # the factor is 1: left alone
    assert a.tolist() == [3.0, 4.0]
    total, (a,) = ex._numpy_clip([np.array([3.0, 4.0])], 4.999999)  # factor 4.999999/5.000001 < 1
    assert a.tolist() == pytest.approx([3 * 4.999999 / 5.000001, 4 * 4.999999 / 5.000001], rel=1e-15)
    total, (z,) = ex._numpy_clip([np.zeros(3)], 1.0)
    assert total == 0.0 and z.tolist() == [0.0, 0.0, 0.0]
    src = np.array([1.0, 1.0])
    _, (c,) = ex._numpy_clip([src], 10.0)
    c += 1
    assert src.tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------------------------
# exercise 3: Adam / AdamW
# ----------------------------------------------------------------------------------------------
def _adam(**mistake):
    """The notebook's step with one rule swapped for a mistake."""
    def step(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams):
        if mistake.get("swap_decay"):
            dec = not dec
        if mistake.get("always_l2"):
            dec = False
        if mistake.get("always_decoupled"):
            dec = True
        g_raw = g
        if wd and dec and not mistake.get("decay_after"):
            p *= 1 - (1.0 if mistake.get("decay_without_lr") else lr) * wd
        elif wd and not dec:
            g = g + wd * p
        if mistake.get("beta_swapped"):
            m *= 1 - b1
            m += b1 * g
        elif mistake.get("m_rebound"):
            m = b1 * m + (1 - b1) * g
        else:
            m *= b1
            m += (1 - b1) * (g_raw if mistake.get("m_raw") else g)
        gv = g_raw if mistake.get("v_raw") else g
        v *= b2
        v += (1 - b2) * (gv if mistake.get("v_of_g") else gv * gv)
        if ams and not mistake.get("no_amsgrad"):
            if mistake.get("max_of_g2"):
                np.maximum(vmax, g * g, out=vmax)
            elif mistake.get("max_of_vhat"):
                np.maximum(vmax, v / (1 - b2 ** t), out=vmax)
            elif mistake.get("vmax_rebound"):
                vmax = np.maximum(vmax, v)
            else:
                np.maximum(vmax, v, out=vmax)
        second = vmax if ams and not mistake.get("no_amsgrad") else v
        c1, c2 = (1 - b1 ** (t + 1), 1 - b2 ** (t + 1)) if mistake.get("step0") else (1 - b1 ** t, 1 - b2 ** t)
        if mistake.get("no_bias"):
            c1 = c2 = 1.0
        if mistake.get("max_of_vhat") and ams:
            c2 = 1.0
        with np.errstate(invalid="ignore"):
            if mistake.get("eps_inside"):
                update = lr / c1 * m / np.sqrt(second / c2 + eps)
            else:
                update = lr / c1 * m / (np.sqrt(second) / np.sqrt(c2) + eps)
        if mistake.get("p_rebound"):
            p = p - update  # noqa: F841 - the mistake
        else:
            p -= update
        if mistake.get("decay_after") and wd and dec:
            p *= 1 - lr * wd
    return step


def _adamw_forgets_amsgrad(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams):
    """amsgrad written into the Adam branch only: AdamW runs without it."""
    adam_step(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams and not dec)


def _adam_raises(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams):
    raise RuntimeError("no Adam today")


A1 = ("for Adam, default betas, three steps (lr=0.01, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0, "
      "decoupled=False, amsgrad=False), ")
A_L2 = ("for Adam with weight decay 0.1 (added to the gradient) (lr=0.01, betas=(0.9, 0.999), eps=1e-08, "
        "weight_decay=0.1, decoupled=False, amsgrad=False), ")
A_W = ("for AdamW: weight decay 0.1 applied to the weights directly (lr=0.01, betas=(0.9, 0.999), eps=1e-08, "
       "weight_decay=0.1, decoupled=True, amsgrad=False), ")
A_AMS = ("for Adam with amsgrad (the running max of v) (lr=0.05, betas=(0.8, 0.9), eps=1e-08, weight_decay=0.0, "
         "decoupled=False, amsgrad=True), ")
A_W_AMS = ("for AdamW with amsgrad (weight decay 0.1 on the weights, the running max of v) (lr=0.05, "
           "betas=(0.8, 0.9), eps=1e-08, weight_decay=0.1, decoupled=True, amsgrad=True), ")
A_EPS = ("for a large eps, 0.1 (it is added after the square root) (lr=0.1, betas=(0.5, 0.6), eps=0.1, "
         "weight_decay=0.0, decoupled=False, amsgrad=False), ")
H_OTHER = "You did the other one."
H_AMS = "With amsgrad, keep vmax = max(vmax, v) (in place) and divide by √vmax instead of √v."
H_M = "m is off: m = beta1 · m + (1 − beta1) · g (the gradient after weight decay, for Adam)"
H_V = "v is off: v = beta2 · v + (1 − beta2) · g², updated in place."
H_STEP = ("The step is p −= lr / (1 − beta1ᵗ) · m / (√v / √(1 − beta2ᵗ) + eps): both bias corrections use "
          "the step t counted from 1, and eps is added after the square root.")
H_P_DID_NOT = "p did not change. Write the update INTO p"

ADAM_MISTAKES = [  # (id, wrong answer, the case and step named, words of the hint)
    ("decays_swapped", _adam(swap_decay=True), A_L2 + "step 1:", H_OTHER),
    ("always_l2", _adam(always_l2=True), A_W + "step 1:", H_OTHER),
    ("always_decoupled", _adam(always_decoupled=True), A_L2 + "step 1:", H_OTHER),
    ("decay_without_lr", _adam(decay_without_lr=True), A_W + "step 1:", H_STEP),
    ("decay_after_step", _adam(decay_after=True), A_W + "step 1:", H_STEP),
    ("no_bias_correction", _adam(no_bias=True), A1 + "step 1:", H_STEP),
    ("eps_under_the_root", _adam(eps_inside=True), A1 + "step 1:", H_STEP),
    ("step_from_0", _adam(step0=True), A1 + "step 1:", H_STEP),
    ("no_amsgrad", _adam(no_amsgrad=True), A_AMS, H_AMS),
    ("vmax_rebound", _adam(vmax_rebound=True), A_AMS, H_AMS),
    ("adamw_forgets_amsgrad", _adamw_forgets_amsgrad, A_W_AMS + "step 2:", H_AMS),
    ("max_of_g2", _adam(max_of_g2=True), A_AMS + "step 1:", H_STEP),
    ("max_of_vhat", _adam(max_of_vhat=True), A_AMS + "step 2:", H_STEP),
    ("betas_swapped_in_m", _adam(beta_swapped=True), A1 + "step 1:", H_M),
    ("m_rebound", _adam(m_rebound=True), A1 + "step 1:", H_M),
    ("m_of_raw_g", _adam(m_raw=True), A_L2 + "step 1:", H_M),
    ("v_of_raw_g", _adam(v_raw=True), A_L2 + "step 1:", H_V),
    ("v_of_g", _adam(v_of_g=True), A1 + "step 1:", H_V),
    ("p_rebound", _adam(p_rebound=True), A1 + "step 1:", H_P_DID_NOT),
    ("raises", _adam_raises, A1 + "step 1: your function raised RuntimeError: no Adam today", "(called as fn("),
]


@pytest.mark.parametrize("wrong, where, hint", [m[1:] for m in ADAM_MISTAKES], ids=[m[0] for m in ADAM_MISTAKES])
def test_each_wrong_adam_step_is_rejected_with_its_case_step_and_hint(wrong, where, hint):
    msg = failure(mt.exercises.check_adam_step, wrong)
    assert msg.startswith(where)
    assert hint in msg


@pytest.mark.parametrize("wrong, hint", [(m[1], m[3]) for m in ADAM_MISTAKES], ids=[m[0] for m in ADAM_MISTAKES])
def test_each_wrong_adam_step_is_rejected_in_the_hidden_run_too(wrong, hint):
    msg = failure(mt.exercises.check_adam_step, wrong, hidden=True)
    assert msg.startswith("for ") and hint in msg


def test_the_whole_adam_hints():
    assert failure(mt.exercises.check_adam_step, _adam(swap_decay=True)).endswith(
        "\nAdam adds weight_decay · p to the gradient; AdamW (decoupled=True) instead shrinks the "
        "weights first, p *= 1 − lr · weight_decay, and leaves the gradient alone. You did the other one.")
    assert failure(mt.exercises.check_adam_step, _adam(no_amsgrad=True)).endswith("\n" + H_AMS)
    assert failure(mt.exercises.check_adam_step, _adam(beta_swapped=True)).endswith(
        "\nm is off: m = beta1 · m + (1 − beta1) · g (the gradient after weight decay, for Adam), "
        "updated in place (m *= beta1; m += ...).")
    assert failure(mt.exercises.check_adam_step, _adam(v_of_g=True)).endswith("\n" + H_V)
    assert failure(mt.exercises.check_adam_step, _adam(no_bias=True)).endswith("\n" + H_STEP)
    assert failure(mt.exercises.check_adam_step, _adam(p_rebound=True)).endswith(
        "\np did not change. Write the update INTO p (p -= ..., or p[...] = ...): "
        "`p = p - ...` makes a new array, and the engine's parameters are views of the old one.")


def test_amsgrad_forgotten_is_caught_on_the_first_step_where_v_falls():
    """vmax = v until v falls somewhere: the message names that step, and the fixed case has one."""
    spy = _Calls(_adam(no_amsgrad=True))
    msg = failure(mt.exercises.check_adam_step, spy)
    case = spy.last_case(step_at=5)
    k = case[-1][5]
    v_prev = [c[3] for c in case]  # v before each step
    v_after = torch_adam(case[0][0], [c[1] for c in case], *case[0][6:])
    falls = [t for t in range(1, len(v_after)) if (v_after[t][2] < np.maximum.reduce([x[2] for x in v_after[:t]])).any()]
    assert msg.startswith(A_AMS + f"step {k}:") and k == falls[0] + 1 >= 2
    assert len(v_prev) == k


@pytest.mark.parametrize("wrong", [_adam(swap_decay=True), _adam(no_amsgrad=True), _adam(eps_inside=True),
                                   _adam(beta_swapped=True)], ids=["swap", "ams", "eps", "beta"])
def test_the_adam_message_shows_the_answers_p_and_pytorchs(wrong):
    spy = _Calls(wrong)
    msg = failure(mt.exercises.check_adam_step, spy)
    case = spy.last_case(step_at=5)
    k = case[-1][5]
    want = torch_adam(case[0][0], [c[1] for c in case], *case[0][6:])[k - 1][0]
    assert _close_to_5_digits(_block(msg, "\np is    ", "\n"), spy.args[0])
    assert _close_to_5_digits(_block(msg, "\nbut it should be ", "\n"), want)


def test_an_adam_wrong_on_one_random_case_names_it_by_its_number():
    """'random settings #1' is the first random case, '#3' the third."""
    n = len(ex.ADAM_CASES)
    for k in (0, 2):
        msg = failure(mt.exercises.check_adam_step, _except_on_case(adam_step, n + k, 5, lambda a: a[0].__iadd__(0.5)))
        assert msg.startswith(f"for random settings #{k + 1} (lr=") and "step 1:\np is " in msg


def test_the_adam_pass_message_counts_the_cases(capsys, no_suite):
    for hidden in (False, True):
        spy = _Calls(adam_step)
        mt.exercises.check_adam_step(spy, hidden=hidden)
        out = capsys.readouterr().out
        assert cases_counted(out, "check_adam_step") == sum(c[5] == 1 for c in spy.calls)
        assert ("(the hidden ones)" in out) == hidden


def _adam_cases(hidden):
    spy = _Calls(adam_step)
    mt.exercises.check_adam_step(spy, hidden=hidden)
    cases = []
    for c in spy.calls:
        if c[5] == 1:
            cases.append([])
        cases[-1].append(c)
    return cases


def test_the_adam_cases_are_the_fixed_settings_then_random_ones_and_more_when_hidden(no_suite):
    visible, again, hidden = _adam_cases(False), _adam_cases(False), _adam_cases(True)
    n = len(ex.ADAM_CASES)
    settings = [tuple(c[0][6:]) for c in visible]
    assert settings[:n] == [tuple(c[1:8]) for c in ex.ADAM_CASES]
    assert [len(c) for c in visible[:n]] == [c[8] for c in ex.ADAM_CASES]
    assert len(visible) > n and len(hidden) > len(visible)
    assert all(np.array_equal(a[0][0], b[0][0]) for a, b in zip(visible, again))
    assert not any(np.array_equal(a[0][0], b[0][0]) for a, b in zip(visible, hidden))
    assert settings[n:] != [tuple(c[0][6:]) for c in hidden][n:len(visible)]
    for cases in (visible, hidden):
        for case in cases:
            assert [c[5] for c in case] == list(range(1, len(case) + 1))
            assert not case[0][2].any() and not case[0][3].any() and not case[0][4].any()
            assert all(c[0].shape == (6,) for c in case)
        for (lr, b1, b2, eps, wd, dec, ams) in [tuple(c[0][6:]) for c in cases[n:]]:
            # valid settings (PyTorch refuses betas outside [0, 1))
            assert lr > 0 and 0 <= b1 < 1 and 0 <= b2 < 1 and eps > 0 and wd >= 0
            assert type(dec) is bool and type(ams) is bool
        assert all(len(c) >= 1 for c in cases[n:])
    rand = [tuple(c[0][6:]) for c in visible[n:] + hidden[n:]]
    assert any(s[5] for s in rand) and any(not s[5] for s in rand) and any(s[6] for s in rand)


def test_the_fixed_adam_settings_have_every_kind_promised():
    kinds = [c[1:] for c in ex.ADAM_CASES]
    assert any(not wd and not ams for lr, b1, b2, eps, wd, dec, ams, steps in kinds)
    assert any(wd and not dec for lr, b1, b2, eps, wd, dec, ams, steps in kinds)
    assert any(wd and dec for lr, b1, b2, eps, wd, dec, ams, steps in kinds)
    assert any(ams and steps >= 2 for lr, b1, b2, eps, wd, dec, ams, steps in kinds)
    assert any(ams and wd and dec and steps >= 2 for lr, b1, b2, eps, wd, dec, ams, steps in kinds)
    assert any(eps >= 0.1 for lr, b1, b2, eps, wd, dec, ams, steps in kinds)


def test_the_adam_state_is_handed_over_again_on_every_step():
    seen = []

    def keeps(p, g, m, v, vmax, t, *rest):
        seen.append((id(p), id(m), id(v), id(vmax), t))
        adam_step(p, g, m, v, vmax, t, *rest)
    mt.exercises.check_adam_step(keeps)
    assert seen[0][:4] == seen[1][:4] == seen[2][:4] and [s[4] for s in seen[:3]] == [1, 2, 3]


def test_an_adam_that_changes_g_in_place_passes_g_is_a_copy():
    def in_g(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams):
        if wd and not dec:
            g += wd * p
            wd = 0.0
        adam_step(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams)
    mt.exercises.check_adam_step(in_g)
    mt.exercises.check_adam_step(in_g, hidden=True)

    def swapped_in_g(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams):
        _adam(swap_decay=True)(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams)
        g += 3.0
    assert H_OTHER in failure(mt.exercises.check_adam_step, swapped_in_g)


def test_an_adam_off_only_in_m_or_v_is_rejected_though_p_is_right():
    """m and v are checked too: p right, m or v not updated in place."""
    def m_stale(p, g, m, v, vmax, t, *rest):
        adam_step(p, g, m.copy(), v, vmax, t, *rest) if False else None
        mm = m.copy()
        adam_step(p, g, mm, v, vmax, t, *rest)
    msg = failure(mt.exercises.check_adam_step, m_stale)
    assert msg.startswith(A1 + "step 1:") and H_M in msg

    def v_stale(p, g, m, v, vmax, t, *rest):
        adam_step(p, g, m, v.copy(), vmax, t, *rest)
    msg = failure(mt.exercises.check_adam_step, v_stale)
    assert msg.startswith(A1 + "step 1:") and H_V in msg


# -- the reference -----------------------------------------------------------------------------
def test_numpy_adam_is_torchs_adam_and_adamw():
    r = np.random.default_rng(11)
    for what, lr, b1, b2, eps, wd, dec, ams, steps in ex.ADAM_CASES + ex._random_adam_cases(16):
        p0, grads = r.standard_normal(6), [r.standard_normal(6) for _ in range(steps)]
        ours = ex.numpy_adam(p0, grads, lr, b1, b2, eps, wd, dec, ams)
        assert len(ours) == steps
        for (p, m, v), (tp, tm, tv, _) in zip(ours, torch_adam(p0, grads, lr, b1, b2, eps, wd, dec, ams)):
            assert np.allclose(p, tp, rtol=1e-12, atol=1e-14), what
            assert np.allclose(m, tm, rtol=1e-12, atol=1e-14) and np.allclose(v, tv, rtol=1e-12, atol=1e-14), what


def test_numpy_adam_on_more_settings_than_the_checker_uses():
    """L2 and decoupled decay, amsgrad with falling v, beta1 0, big eps: all against PyTorch."""
    r = np.random.default_rng(2)
    p0 = r.standard_normal(5)
    grads = [r.standard_normal(5) * s for s in (3.0, 0.1, 2.0, 0.01, 1.0, 0.5)]
    for settings in [(0.05, 0.8, 0.9, 1e-8, 0.3, False, True), (0.05, 0.8, 0.9, 1e-8, 0.3, True, True),
                     (0.1, 0.0, 0.5, 0.5, 0.0, False, False), (0.02, 0.95, 0.9999, 1e-3, 0.2, True, False)]:
        for (p, m, v), (tp, tm, tv, _) in zip(ex.numpy_adam(p0, grads, *settings), torch_adam(p0, grads, *settings)):
            assert np.allclose(p, tp, rtol=1e-12, atol=1e-14) and np.allclose(v, tv, rtol=1e-12), settings
            assert np.allclose(m, tm, rtol=1e-12, atol=1e-14), settings


def test_numpy_adam_by_hand():
    """p0 = 1, g = 2, lr 0.1, betas (0.5, 0.75), eps 0: m 1, v 1, step lr·(m/0.5)/(√v/√0.25) = 0.1."""
    (p, m, v), = ex.numpy_adam(np.array([1.0]), [np.array([2.0])], 0.1, 0.5, 0.75, 0.0, 0.0, False, False)
    assert (p[0], m[0], v[0]) == pytest.approx((0.9, 1.0, 1.0), rel=1e-14)
    # L2 weight decay 0.5: g = 2.5, m 1.25, v 1.5625, the step is still lr (Adam's first step is ±lr)
    (p, m, v), = ex.numpy_adam(np.array([1.0]), [np.array([2.0])], 0.1, 0.5, 0.75, 0.0, 0.5, False, False)
    assert (p[0], m[0], v[0]) == pytest.approx((0.9, 1.25, 1.5625), rel=1e-14)
    # decoupled 0.5: p = 1 · (1 − 0.05) = 0.95, then − 0.1; m, v from g = 2
    (p, m, v), = ex.numpy_adam(np.array([1.0]), [np.array([2.0])], 0.1, 0.5, 0.75, 0.0, 0.5, True, False)
    assert (p[0], m[0], v[0]) == pytest.approx((0.85, 1.0, 1.0), rel=1e-14)
    # eps 1 after the root: step 0.1 · 2 / (2 + 1)
    (p, _, _), = ex.numpy_adam(np.array([1.0]), [np.array([2.0])], 0.1, 0.5, 0.75, 1.0, 0.0, False, False)
    assert p[0] == pytest.approx(1 - 0.2 / 3, rel=1e-14)
    # amsgrad, g = 2 then 0: v 1 then 0.75, vmax stays 1; step 2: m 0.5, m̂ 0.5/0.75, denom √1/√(1-0.5625)
    out = ex.numpy_adam(np.array([1.0]), [np.array([2.0]), np.array([0.0])], 0.1, 0.5, 0.75, 0.0, 0.0, False, True)
    want2 = 0.9 - 0.1 * (0.5 / 0.75) / (1 / np.sqrt(0.4375))
    assert out[1][0][0] == pytest.approx(want2, rel=1e-14) and out[1][2][0] == pytest.approx(0.75, rel=1e-14)
    no_ams = ex.numpy_adam(np.array([1.0]), [np.array([2.0]), np.array([0.0])], 0.1, 0.5, 0.75, 0.0, 0.0, False, False)
    assert no_ams[1][0][0] == pytest.approx(0.9 - 0.1 * (0.5 / 0.75) / (np.sqrt(0.75) / np.sqrt(0.4375)), rel=1e-14)


def test_numpy_adam_does_not_touch_its_inputs_and_returns_copies():
    p0, grads = np.array([1.0, -1.0]), [np.array([0.5, 0.25]), np.array([0.5, 0.25])]
    out = ex.numpy_adam(p0, grads, 0.1, 0.9, 0.99, 1e-8, 0.1, False, True)
    ex.numpy_adam(p0, grads, 0.1, 0.9, 0.99, 1e-8, 0.1, True, True)
    assert p0.tolist() == [1.0, -1.0] and grads[0].tolist() == [0.5, 0.25]
    assert not np.shares_memory(out[0][0], out[1][0]) and not np.array_equal(out[0][1], out[1][1])


# -- the hint, branch by branch ----------------------------------------------------------------
def _adam_hint_for(answer, settings, steps=4, seed=1):
    r = np.random.default_rng(seed)
    p0 = r.standard_normal(5)
    grads = [r.standard_normal(5) * s for s in (2.0, 0.1, 1.0, 0.05, 1.5)][:steps]
    want = ex.numpy_adam(p0, grads, *settings)
    p, m, v, vmax = p0.copy(), np.zeros(5), np.zeros(5), np.zeros(5)
    for k, g in enumerate(grads, start=1):
        answer(p, g.copy(), m, v, vmax, k, *settings)
        wp, wm, wv = want[k - 1]
        if not (np.allclose(p, wp, rtol=1e-9, atol=1e-12) and np.allclose(m, wm, rtol=1e-9, atol=1e-12)
                and np.allclose(v, wv, rtol=1e-9, atol=1e-12)):
            return k, ex._adam_hint(p0, grads, k, p, m, v, wm, wv, *settings)
    return None


L2 = (0.05, 0.8, 0.9, 1e-8, 0.2, False, False)
W = (0.05, 0.8, 0.9, 1e-8, 0.2, True, False)
AMS = (0.05, 0.8, 0.9, 1e-8, 0.0, False, True)
AMS_L2 = (0.05, 0.8, 0.9, 1e-8, 0.2, False, True)
AMS_W = (0.05, 0.8, 0.9, 1e-8, 0.2, True, True)
PLAIN = (0.05, 0.8, 0.9, 1e-8, 0.0, False, False)


@pytest.mark.parametrize("answer, settings, step, words", [
    (_adam(swap_decay=True), L2, 1, H_OTHER),
    (_adam(swap_decay=True), W, 1, H_OTHER),
    (_adam(swap_decay=True), AMS_W, 1, H_OTHER),
    (_adam(swap_decay=True, no_amsgrad=True), AMS_L2, 1, H_OTHER),  # vmax = v on step 1
    (_adam(no_amsgrad=True), AMS, 2, H_AMS),
    (_adam(no_amsgrad=True), AMS_W, 2, H_AMS),
    (_adam(vmax_rebound=True), AMS_L2, 2, H_AMS),
    (_adam(beta_swapped=True), PLAIN, 1, H_M),
    (_adam(beta_swapped=True), AMS_L2, 1, H_M),
    (_adam(m_raw=True), L2, 1, H_M),
    (_adam(v_raw=True), L2, 1, H_V),
    (_adam(v_raw=True), AMS_L2, 1, H_V),
    (_adam(v_of_g=True), PLAIN, 1, H_V),
    (_adam(no_bias=True), PLAIN, 1, H_STEP),
    (_adam(no_bias=True), AMS_W, 1, H_STEP),
    (_adam(decay_without_lr=True), W, 1, H_STEP),
    (_adam(max_of_g2=True), AMS, 1, H_STEP),
])
def test_the_adam_hint_names_the_mistake(answer, settings, step, words):
    k, hint = _adam_hint_for(answer, settings)
    assert k == step and words in hint


def test_the_adam_hint_compares_p_to_one_change_at_a_time():
    """A p that only a change of both decay and amsgrad explains gets neither named hint."""
    p0 = np.array([0.5, -1.0, 2.0])
    grads = [np.array([1.0, 0.5, -0.5]), np.array([0.01, 0.02, 0.01])]
    right = ex.numpy_adam(p0, grads, *AMS_W)
    both = ex.numpy_adam(p0, grads, 0.05, 0.8, 0.9, 1e-8, 0.2, False, False)
    m, v = right[1][1], right[1][2]
    hint = ex._adam_hint(p0, grads, 2, both[1][0], m, v, m, v, *AMS_W)
    assert hint == H_STEP
    only_decay = ex.numpy_adam(p0, grads, 0.05, 0.8, 0.9, 1e-8, 0.2, False, True)
    assert H_OTHER in ex._adam_hint(p0, grads, 2, only_decay[1][0], m, v, m, v, *AMS_W)
    only_ams = ex.numpy_adam(p0, grads, 0.05, 0.8, 0.9, 1e-8, 0.2, True, False)
    assert ex._adam_hint(p0, grads, 2, only_ams[1][0], m, v, m, v, *AMS_W) == H_AMS
    # without weight decay the decay hint is never given, without amsgrad the amsgrad one never
    plain = ex.numpy_adam(p0, grads, *PLAIN)
    assert ex._adam_hint(p0, grads, 2, plain[1][0] + 1e-3, plain[1][1], plain[1][2], plain[1][1], plain[1][2],
                         *PLAIN) == H_STEP


def test_the_adam_hint_looks_at_m_before_v():
    p0, grads = np.array([1.0, 2.0]), [np.array([0.5, -0.5])]
    (wp, wm, wv), = ex.numpy_adam(p0, grads, *PLAIN)
    assert H_M in ex._adam_hint(p0, grads, 1, wp + 0.1, wm * 2, wv * 2, wm, wv, *PLAIN)
    assert ex._adam_hint(p0, grads, 1, wp + 0.1, wm, wv * 2, wm, wv, *PLAIN) == H_V
    assert ex._adam_hint(p0, grads, 1, wp + 0.1, wm * (1 + 1e-11), wv * (1 + 1e-11), wm, wv, *PLAIN) == H_STEP
    assert H_M in ex._adam_hint(p0, grads, 1, wp + 0.1, wm * (1 + 1e-8), wv, wm, wv, *PLAIN)


# ----------------------------------------------------------------------------------------------
# the engine code each exercise switches off
# ----------------------------------------------------------------------------------------------
def _sgd_by_engine(p, g, buf, k, lr, mu, damp, wd):
    t = mt.tensor(p, dtype="float64", requires_grad=True)
    opt = mt.optim.SGD([t], lr=lr, momentum=mu, dampening=damp, weight_decay=wd)
    t.grad = mt.tensor(g, dtype="float64")
    opt.step()
    p[...] = t.detach().numpy()


def _sgd_update_by_engine(p, g, buf, k, lr, mu, damp, wd):
    opt = mt.optim.SGD.__new__(mt.optim.SGD)
    mt.optim.SGD._update(opt, {"lr": lr, "momentum": mu, "dampening": damp, "weight_decay": wd,
                               "nesterov": False, "maximize": False}, {}, p, g, k)


def _adamw_by_engine(p, g, m, v, vmax, k, lr, b1, b2, eps, wd, dec, ams):
    t = mt.tensor(p, dtype="float64", requires_grad=True)
    opt = mt.optim.AdamW([t], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, amsgrad=ams)
    t.grad = mt.tensor(g, dtype="float64")
    opt.step()
    p[...] = t.detach().numpy()


def _adam_update_by_engine(p, g, m, v, vmax, k, lr, b1, b2, eps, wd, dec, ams):
    mt.optim.Adam._update(None, {}, {}, p, g, k)


def _optimizer_step_by_engine(p, g, m, v, vmax, k, lr, b1, b2, eps, wd, dec, ams):
    mt.optim.Optimizer.step(None)


def _clip_by_engine(grads, mx):
    params = [mt.zeros(*g.shape, dtype="float64", requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = mt.tensor(g, dtype="float64")
    return float(mt.nn.utils.clip_grad_norm_(params, mx).item())


@pytest.mark.parametrize("check, answer, what", [
    ("check_momentum_update", _sgd_by_engine, "sgd_momentum_step"),
    ("check_momentum_update", _sgd_update_by_engine, "sgd_momentum_step"),
    ("check_adam_step", _adamw_by_engine, "adam_step"),
    ("check_adam_step", _adam_update_by_engine, "adam_step"),
    ("check_adam_step", _optimizer_step_by_engine, "adam_step"),
    ("check_clip_grad_norm", _clip_by_engine, "clip_grad_norm"),
], ids=["sgd", "sgd_update", "adamw", "adam_update", "optimizer_step", "clip"])
def test_an_answer_calling_the_engine_is_refused(check, answer, what):
    with pytest.raises(checking.WriteItYourself, match=f"asks you to write {what} yourself"):
        getattr(mt.exercises, check)(answer)


def test_the_engine_is_switched_back_on_after_the_checkers():
    for check, sol in (("check_momentum_update", sgd_step), ("check_adam_step", adam_step),
                       ("check_clip_grad_norm", clip_norm)):
        getattr(mt.exercises, check)(sol, hidden=True)
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with checking.learner():
        mt.optim.SGD([w], lr=0.1, momentum=0.9).step()
        mt.optim.AdamW([w], lr=0.1).step()
        mt.nn.utils.clip_grad_norm_([w], 1.0)
    assert w.detach().numpy().tolist() != [1.0, 2.0]


def test_fmt_prints_five_decimals_and_small_values_as_zero():
    assert ex._fmt([1.0, -0.123456789, 2.5]) == "[ 1.      -0.12346  2.5    ]"
    assert ex._fmt([1.0, 1e-9]) == "[1. 0.]"
    assert ex._fmt(np.arange(3)) == "[0. 1. 2.]"
    long = ex._fmt(np.linspace(-1, 1, 30))
    assert max(len(line) for line in long.splitlines()) <= 100 and long.count("\n") >= 2
