"""Mutation run 8, ``exercises/training.py``: what the seventh run left open.

Near-right answers, each off by a little more than the checker allows and less than a looser
tolerance would: an Adam step whose p, m or v is 1e-7 (relative) or 5e-9 (absolute) off, the rest
right, is rejected on its first step and told which array is off; an Adam answer that far from the
other weight decay or from amsgrad forgotten is not told it made that mistake. For clipping: a norm
3e-6 (relative) off one gradient's norm or off the squared norm gets the general hint, not the hint
for that mistake; one gradient's norm returned on a case of two gradients is named; all-zero
gradients nudged to 5e-9 are rejected; a clipping 5e-5 short of max_norm is told to use the common
factor, not that it clipped each gradient by its own norm.

Record: tests/mutation-run-8/exercises-training.md.
"""
from __future__ import annotations

import numpy as np

import microtorch as mt
from microtorch.exercises import training as ex

from checker_probes import failure
from test_mutants_training_run7 import (A1, A_AMS, A_L2, C1, C2, C3, C4, GRAD_LINES, H_AMS, H_FACTOR, H_M,
                                        H_NORM, H_ONE, H_OTHER, H_PER, H_SHRINK, H_SQUARED, H_STEP, H_V,
                                        NORM_LINE, _adam, _except_on_case, _last_norm, _squared, _total,
                                        adam_step, clip_norm)


# ----------------------------------------------------------------------------------------------
# Adam: p, m and v compared to 1e-9 (relative) and 1e-12 (absolute)
# ----------------------------------------------------------------------------------------------
def _adam_then(change):
    """The notebook's step, then ``change(p, m, v)`` on every step of the first case."""
    return _except_on_case(adam_step, 0, 5, lambda a: change(a[0], a[2], a[3]))


def test_an_adam_step_5e_9_off_in_p_is_rejected_on_its_first_step():
    """p 5e-9 above PyTorch's (m and v right): more than 1e-9 · |p| + 1e-12, so wrong; the general hint."""
    first = []
    spy = _adam_then(lambda p, m, v: first.append(p.copy()) or p.__iadd__(5e-9))
    msg = failure(mt.exercises.check_adam_step, spy)
    assert np.abs(first[0]).max() < 4  # 5e-9 is more than the relative tolerance allows anywhere in p
    assert msg.startswith(A1 + "step 1:\np is    [") and msg.endswith("\n" + H_STEP)


def test_an_adam_step_off_only_in_m_by_1e_7_or_5e_9_is_told_m_is_off():
    for change in (lambda p, m, v: m.__imul__(1 + 1e-7), lambda p, m, v: m.__iadd__(5e-9)):
        msg = failure(mt.exercises.check_adam_step, _adam_then(change))
        assert msg.startswith(A1 + "step 1:\np is    [") and H_M in msg


def test_an_adam_step_off_only_in_v_by_1e_7_or_5e_9_is_told_v_is_off():
    """v is about 1e-3 · g² on step 1: 1e-7 of it, or 5e-9, is beyond 1e-9 · |v| + 1e-12; m is right,
    so the hint names v, not the step formula."""
    for change in (lambda p, m, v: v.__imul__(1 + 1e-7), lambda p, m, v: v.__iadd__(5e-9)):
        msg = failure(mt.exercises.check_adam_step, _adam_then(change))
        assert msg.startswith(A1 + "step 1:\np is    [") and msg.endswith("\n" + H_V)


def test_an_adam_near_a_named_mistake_is_not_told_that_mistake():
    """Weight decays swapped, or amsgrad forgotten, and p 1e-7 (relative) or 5e-9 off that too: the hint
    names a mistake only when p matches it to 1e-9, so these get the hint for what is off (m, for the
    decays swapped; the step, for amsgrad on its step 1, where vmax is still v)."""
    def near(mistake, change):
        wrong = _adam(**{mistake: True})

        def answer(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams):
            wrong(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, dec, ams)
            if (wd if mistake == "swap_decay" else ams):  # where the mistake shows
                change(p)
        return answer
    for change in (lambda p: p.__imul__(1 + 1e-7), lambda p: p.__iadd__(5e-9)):
        msg = failure(mt.exercises.check_adam_step, near("swap_decay", change))
        assert msg.startswith(A_L2 + "step 1:") and H_OTHER not in msg and H_M in msg
        msg = failure(mt.exercises.check_adam_step, near("no_amsgrad", change))
        assert msg.startswith(A_AMS + "step 1:") and msg.endswith("\n" + H_STEP)
    assert H_OTHER in failure(mt.exercises.check_adam_step, _adam(swap_decay=True))
    assert failure(mt.exercises.check_adam_step, _adam(no_amsgrad=True)).endswith("\n" + H_AMS)


# ----------------------------------------------------------------------------------------------
# clipping: the hints' matches and the gradients' absolute tolerance
# ----------------------------------------------------------------------------------------------
def test_a_norm_near_one_gradients_or_the_squared_norm_gets_the_general_hint():
    """3e-6 (relative) off one gradient's norm, or off the squared norm: not that mistake (it needs a
    match to 1e-9), the general hint."""
    msg = failure(mt.exercises.check_clip_grad_norm,  # (with one gradient, its norm is the total: right)
                  lambda grads, mx: _last_norm(grads, mx) * (1 + 3e-6 * (len(grads) > 1)))
    assert msg.startswith(C2 + NORM_LINE) and H_ONE not in msg and msg.endswith("\n" + H_NORM)
    msg = failure(mt.exercises.check_clip_grad_norm, lambda grads, mx: _squared(grads, mx) * (1 + 3e-6))
    assert msg.startswith(C1 + NORM_LINE + "25.0001, but clip_grad_norm_ returns 5.\n")
    assert H_SQUARED not in msg and msg.endswith("\n" + H_NORM)
    assert H_ONE in failure(mt.exercises.check_clip_grad_norm, _last_norm)
    assert H_SQUARED in failure(mt.exercises.check_clip_grad_norm, _squared)


def _last_norm_when_nothing_is_clipped(grads, mx):
    """Returns the total from the clipping branch, but the loop's last norm when nothing is clipped."""
    total = _total(grads)
    if total > mx:
        for g in grads:
            g *= mx / (total + 1e-6)
        return total
    for g in grads:
        n = float(np.sqrt((g * g).sum()))
    return n


def test_one_gradients_norm_is_named_on_a_case_of_two_gradients():
    msg = failure(mt.exercises.check_clip_grad_norm, _last_norm_when_nothing_is_clipped)
    assert msg.startswith(C3 + NORM_LINE) and msg.endswith("\n" + H_ONE + " The total norm treats all "
                                                           "gradients as one long vector: sqrt(sum of every "
                                                           "element squared, over all of them).")


def test_all_zero_gradients_nudged_to_5e_9_are_rejected():
    """Zero gradients stay zero: 5e-9 written into them is wrong (compared absolutely to 1e-12)."""
    def nudges_zeros(grads, mx):
        total = clip_norm(grads, mx)
        if total == 0:
            for g in grads:
                g += 5e-9
        return total
    msg = failure(mt.exercises.check_clip_grad_norm, nudges_zeros)
    assert msg.startswith(C4 + GRAD_LINES) and H_SHRINK in msg


def test_a_norm_of_5e_9_for_all_zero_gradients_is_rejected():
    """All-zero gradients have total norm 0: 5e-9 returned for it is wrong (the norm is compared to
    1e-6 relative and 1e-12 absolute; at 0 only the absolute part counts), the gradients left right."""
    def nudges_the_zero_norm(grads, mx):
        total = clip_norm(grads, mx)
        return total + 5e-9 if total == 0 else total
    msg = failure(mt.exercises.check_clip_grad_norm, nudges_the_zero_norm)
    assert msg.startswith(C4 + NORM_LINE + "5e-09, but clip_grad_norm_ returns 0")


def test_a_clipping_5e_5_short_of_max_norm_is_told_the_common_factor_not_per_gradient():
    """Every gradient within max_norm and their total 5e-5 below it: a near-right global clipping (wrong
    beyond 1e-5), not per-gradient clipping, whose total is not max_norm (1e-4 apart at least)."""
    def short(grads, mx):
        total = _total(grads)
        if total > mx:
            for g in grads:
                g *= mx / (total + 1e-6) * (1 - 5e-5)
        return total
    msg = failure(mt.exercises.check_clip_grad_norm, short)
    assert msg.startswith(C1 + GRAD_LINES) and H_PER not in msg and msg.endswith("\n" + H_FACTOR)
