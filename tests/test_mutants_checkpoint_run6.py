"""Mutation run 6, ``exercises/checkpoint.py`` (notebook 10's checkers): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake a learner makes (rounding √n down,
  dropping the remainder, ranges past the end, the remainder all in one segment, counting the
  kept output twice, subtracting the whole output, forgetting the bytes kept before, one DP
  state per layer, ignoring the budget, a greedy or √n schedule, segments in backward order,
  ...): each is rejected, and the message names the case and the hint for that mistake;
* the references against independent computations: the engine's ``predict``, ``brute_force``,
  ``sqrt_segments`` and ``chain_of``, an enumeration of the schedules written again here, and
  hand-worked chains;
* the cases the checkers generate are the kinds they promise: fixed then random ones, the same
  every run, other and more of them in the hidden run (random chains only there), chains that
  fit without checkpoints, need them, or cannot fit at all; the pass message counts the calls;
* the 40-layer chain: its budget, its stored optimum, its time limit (a fake clock).

Record: tests/mutation-run-6/exercises-checkpoint.md.
"""
from __future__ import annotations

import math
import random
import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import check_optimal_chain, check_sqrt_segments
from microtorch.exercises import checkpoint as ex
from microtorch.utils import checkpoint as C

from checker_probes import Recorder, failure, cases_counted as _cases_counted
from test_exercise_checkers import _solutions

SOLUTION = _solutions("10_recomputation")  # the notebook's reference answers
SOLUTION["math"] = math                   # (imported by the notebook's first cell)
sqrt_segments = SOLUTION["sqrt_segments"]
optimal_chain = SOLUTION["optimal_chain"]


def _only_on_call(number, solution, wrong):
    """The notebook's solution, except on its ``number``-th call (from 1): there ``wrong``."""
    calls = [0]

    def answer(*args):
        calls[0] += 1
        return wrong(*args) if calls[0] == number else solution(*args)
    return answer


# ----------------------------------------------------------------------------------------------
# exercise 1: the √n segments
# ----------------------------------------------------------------------------------------------
def _k(n):
    return max(1, round(math.sqrt(n)))


def _balanced(n, k):
    size, extra = divmod(n, k)
    out, at = [], 0
    for i in range(k):
        out.append((at, at + size + (i < extra)))
        at = out[-1][1]
    return out


def _drops_remainder(n):
    return [(i * (n // _k(n)), (i + 1) * (n // _k(n))) for i in range(_k(n))]


def _past_the_end(n):  # every segment ceil(n / k) long, the last one not cut at n
    size = -(-n // _k(n))
    return [(i * size, (i + 1) * size) for i in range(_k(n))]


def _like_torch_chunk(n):  # ceil(n / k) long, the last one what is left
    size = -(-n // _k(n))
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def _first_takes_rest(n):
    k, s = _k(n), n // _k(n)
    first = n - (k - 1) * s
    return [(0, first)] + [(first + i * s, first + (i + 1) * s) for i in range(k - 1)]


def _last_takes_rest(n):  # checkpoint_sequential's split
    k, s = _k(n), n // _k(n)
    return [(i * s, (i + 1) * s) for i in range(k - 1)] + [((k - 1) * s, n)]


SEGMENT_MISTAKES = [  # (wrong answer, the case and numbers the message names, words of its hint)
    (_drops_remainder, "For n = 3: the last segment stops at 2, so 1 layer(s) are left out",
     "the last stop must be n = 3 (the remainder n mod k = 1 must go somewhere)"),
    (_past_the_end, "For n = 3: the last segment stops at 4, so 1 layer(s) do not exist",
     "Got [(0, 2), (2, 4)]."),
    (lambda n: _balanced(n, max(1, math.isqrt(n))),
     "For n = 3: expected k = max(1, round(√3)) = 2 segments, got 1: [(0, 3)].", "math.isqrt rounds down"),
    (lambda n: _balanced(n, math.ceil(math.sqrt(n))),
     "For n = 2: expected k = max(1, round(√2)) = 1 segments, got 2: [(0, 1), (1, 2)].", "round(math.sqrt(n))"),
    (lambda n: [(0, n)], "For n = 3: expected k = max(1, round(√3)) = 2 segments, got 1", "round(math.sqrt(n))"),
    (_like_torch_chunk, "For n = 7: segment lengths [3, 3, 1] differ by more than one",
     "spread the remainder (n mod k = 1) one layer each over the first segments"),
    (_first_takes_rest, "For n = 15: segment lengths [6, 3, 3, 3] differ by more than one",
     "spread the remainder (n mod k = 3)"),
    (_last_takes_rest, "For n = 3: lengths [1, 2]: put the longer segments first",
     "(expected [(0, 2), (2, 3)])"),
    (lambda n: [(max(0, a - 1) if i else a, b) for i, (a, b) in enumerate(_balanced(n, _k(n)))],
     "For n = 3: segment (0, 2) stops at 2 but the next, (1, 3), starts at 1: they overlap.",
     "so each starts where the one before stops. Got [(0, 2), (1, 3)]."),
    (lambda n: [(a + 1 if i else a, b) for i, (a, b) in enumerate(_balanced(n, _k(n)))],
     "For n = 3: segment (0, 2) stops at 2 but the next, (3, 3), starts at 3: they leave layers out.",
     "Ranges are half-open"),
    (lambda n: [(a, b - 1) for a, b in _balanced(n, _k(n))],  # inclusive stops
     "For n = 1: every segment needs at least one layer (start < stop; ranges are half-open, so (0, 1) "
     "is layer 0 alone), got [(0, 0)].", "got [(0, 0)]"),
    (lambda n: [(a + 1, b + 1) for a, b in _balanced(n, _k(n))],  # layers counted from 1
     "For n = 1: the first segment must start at layer 0, got (1, 2).", "start at layer 0"),
    (lambda n: [b - a for a, b in _balanced(n, _k(n))], "For n = 1: return a list of (start, stop) pairs, got [1].",
     "(start, stop) pairs"),
    (lambda n: [range(a, b) for a, b in _balanced(n, _k(n))],
     "For n = 1: return a list of (start, stop) pairs, got [range(0, 1)].", "pairs"),
    (lambda n: n // 0, "For n = 1 layers, your function raised ZeroDivisionError", "(called as fn(1))"),
    (lambda n: mt.utils.checkpoint.sqrt_segments(n), "this exercise asks you to write the √n segments yourself",
     "switched off"),
]

SEGMENT_IDS = [
    "drops-the-remainder", "past-the-end", "floor-sqrt", "ceil-sqrt", "one-segment", "like-torch-chunk",
    "first-takes-the-rest", "last-takes-the-rest", "overlapping", "skips-a-layer",
    "inclusive-stops", "one-based", "lengths-only", "range-objects", "raises", "uses-the-engine",
]


@pytest.mark.parametrize("wrong, where, hint", SEGMENT_MISTAKES, ids=SEGMENT_IDS)
def test_each_wrong_sqrt_segments_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued √n-segments mistake fails on its first wrong case, named, with its hint."""
    msg = failure(check_sqrt_segments, wrong)
    assert where in msg and hint in msg


@pytest.mark.parametrize("n, stop, words", [(10, 9, "1 layer(s) are left out"), (17, 16, "1 layer(s) are left out"),
                                            (64, 66, "2 layer(s) do not exist")])
def test_the_layers_missing_or_extra_are_counted_from_the_last_stop(n, stop, words):
    """With three or more segments, the message counts n minus the last segment's stop."""
    def wrong(m):
        segs = sqrt_segments(m)
        return segs[:-1] + [(segs[-1][0], stop)] if m == n else segs
    msg = failure(check_sqrt_segments, wrong)
    assert msg.startswith(f"For n = {n}: the last segment stops at {stop}, so {words}: the last stop must be n = {n}")


def test_reference_segments_are_the_engines_and_the_notebooks():
    """reference_segments(n) is the engine's and the notebook's √n split, and the worked example."""
    assert ex.reference_segments(10) == [(0, 4), (4, 7), (7, 10)]  # the notebook's example
    assert ex.reference_segments(1) == [(0, 1)] and ex.reference_segments(3) == [(0, 2), (2, 3)]
    for n in range(1, 401):
        want = C.sqrt_segments(n)
        assert ex.reference_segments(n) == want == sqrt_segments(n)
        assert all(type(a) is int and type(b) is int for a, b in ex.reference_segments(n))


def test_right_segments_in_other_containers_are_accepted(capsys):
    """A numpy array, lists of lists, or a tuple of tuples with the right ranges all pass."""
    check_sqrt_segments(lambda n: np.array(sqrt_segments(n)))
    check_sqrt_segments(lambda n: [list(s) for s in sqrt_segments(n)])
    check_sqrt_segments(lambda n: tuple(sqrt_segments(n)))
    assert capsys.readouterr().out.count("✓ check_sqrt_segments") == 3


def test_sqrt_segments_tries_fixed_then_random_cases_more_when_hidden_and_counts_them(capsys):
    """Fixed cases then random ones; hidden: only other random ones, more; the pass message counts the calls."""
    spy = Recorder(sqrt_segments)
    check_sqrt_segments(spy)
    assert capsys.readouterr().out.strip() == f"✓ check_sqrt_segments: all {len(spy.calls)} cases right."
    visible = [n for (n,) in spy.calls]
    fixed = len(ex.SEGMENT_CASES)
    assert visible[:fixed] == ex.SEGMENT_CASES
    randoms = visible[fixed:]
    spy = Recorder(sqrt_segments)
    check_sqrt_segments(spy, hidden=True)
    assert capsys.readouterr().out.strip() == (f"✓ check_sqrt_segments: all {len(spy.calls)} cases right "
                                               "(the hidden ones).")
    hidden = [n for (n,) in spy.calls]
    assert len(hidden) > len(randoms) > 0 and hidden[:fixed] != ex.SEGMENT_CASES
    assert hidden[:len(randoms)] != randoms
    for cases in (randoms, hidden):  # varied sizes, beyond the fixed ones, most not a square
        assert all(type(n) is int and n >= 2 for n in cases)
        assert len(set(cases)) > len(cases) // 2 and max(cases) > max(ex.SEGMENT_CASES)
        assert sum(n % _k(n) != 0 for n in cases) > len(cases) // 2


def test_sqrt_segments_cases_are_the_same_every_run():
    """Re-running the checker tries the same cases (a failing case can be looked at again)."""
    for hidden in (False, True):
        runs = []
        for _ in range(2):
            spy = Recorder(sqrt_segments)
            check_sqrt_segments(spy, hidden=hidden)
            runs.append(spy.calls)
        assert runs[0] == runs[1]


# ----------------------------------------------------------------------------------------------
# exercise 2: the chain dynamic program
# ----------------------------------------------------------------------------------------------
def _costs(chain):
    return [(int(l.forward), l.saved, l.output, l.workspace) for l in chain.layers]


def _where(i):
    layers, budget = ex.CHAIN_CASES[i]
    return f"Case {i} (layers (forward, saved, output, workspace) = {layers}, budget {budget}):"


def _schedules(n, start=0):
    """Every schedule of layers start..n-1, written again: a first segment, then the rest."""
    if start == n:
        yield []
        return
    for stop in range(start + 1, n + 1):
        for ckpt in (False, True):
            for rest in _schedules(n, stop):
                yield [(start, stop, ckpt)] + rest


def _least_recompute(layers, budget):
    """(time, schedules) of the least recompute time with peak ≤ budget (by C.predict); None if none fits."""
    chain = C.chain_of(layers)
    fits = [(C.predict(chain, s).recompute, s) for s in _schedules(len(layers)) if C.predict(chain, s).peak <= budget]
    if not fits:
        return None
    t = min(f[0] for f in fits)
    return t, [s for r, s in fits if r == t]


def _smallest_peak(layers):
    chain = C.chain_of(layers)
    return min(C.predict(chain, s).peak for s in _schedules(len(layers)))


def _dp(chain, budget, again="min", before=True, states="kept", workspace="segment", rerun="all",
        allow_plain=True, strict=False, longest=None, pick="time"):
    """The notebook's dynamic program, with one rule changed to a learner's mistake."""
    L = chain.layers
    n = len(L)
    best = [dict() for _ in range(n + 1)]  # best[j][kept] = (time, segments)
    best[0][0] = (0.0, [])
    for j in range(n):
        if best[j] and states != "kept":  # one state per layer: the fastest, or the fewest bytes
            k = min(best[j], key=(lambda k: (best[j][k][0], k)) if states == "fastest" else None)
            best[j] = {k: best[j][k]}
        for i in range(j + 1, n + 1 if longest is None else min(n, j + longest) + 1):
            inside = L[j:i]
            saved = sum(l.saved for l in inside)
            work = {"segment": max(l.workspace for l in inside), "none": 0, "chain": max(l.workspace for l in L),
                    "sum": sum(l.workspace for l in inside)}[workspace]
            made = {"min": saved - min(inside[-1].saved, inside[-1].output), "all": saved,
                    "output": saved - inside[-1].output, "none": 0}[again]
            for kept, (t, segs) in list(best[j].items()):
                for ckpt in ((False, True) if allow_plain else (True,)):
                    own = inside[-1].output if ckpt else saved
                    peak = (kept + own if before else own) + (made if ckpt else 0) + work
                    if peak > budget or (strict and peak == budget):
                        continue
                    fwd = sum(l.forward for l in inside)
                    if rerun == "but-last" and i - j > 1:
                        fwd -= inside[-1].forward
                    t2 = t + (fwd if ckpt else 0.0)
                    if kept + own not in best[i] or t2 < best[i][kept + own][0]:
                        best[i][kept + own] = (t2, segs + [(j, i, ckpt)])
    if not best[n]:
        return None
    if pick == "bytes":
        return best[n][min(best[n])][1]
    return min(best[n].values(), key=lambda v: v[0])[1]


def _greedy(chain, budget):
    """Checkpoint one layer at a time, the biggest saver first, until the peak fits."""
    L = _costs(chain)
    ckpt = [False] * len(L)
    for i in [None] + sorted(range(len(L)), key=lambda i: -L[i][1]):
        if i is not None:
            ckpt[i] = True
        segs = [(k, k + 1, ckpt[k]) for k in range(len(L))]
        if C.predict(chain, segs).peak <= budget:
            return segs
    return None


def _least_bytes(chain, budget):
    """The schedule with the smallest peak, not the least recompute time (small chains only)."""
    if len(chain) > 9:
        return None
    fits = [(C.predict(chain, s).peak, s) for s in _schedules(len(chain)) if C.predict(chain, s).peak <= budget]
    return min(fits, key=lambda f: f[0])[1] if fits else None


def _always_sqrt(chain, budget):
    """√n's schedule whatever the budget: every segment but the last checkpointed."""
    ranges = _balanced(len(chain), _k(len(chain)))
    return [(a, b, i < len(ranges) - 1) for i, (a, b) in enumerate(ranges)]


def _right(chain, budget):
    return optimal_chain(chain, budget)


def _then(change):
    """The right answer, changed (None stays None)."""
    def answer(chain, budget):
        got = _right(chain, budget)
        return None if got is None else change(got, chain)
    return answer


CHAIN_MISTAKES = [  # (wrong answer, the case the message names, what it says, words of its hint)
    (lambda c, b: _dp(c, b, again="none"), 1, "your schedule [(0, 2, False), (2, 4, True)] peaks at 16 > budget 12.",
     "plus everything it recomputes"),
    (lambda c, b: _dp(c, b, again="all"), 2,  # the kept output counted twice
     "you returned None, but a schedule fits: [(0, 3, True), (3, 5, True), (5, 6, False)] (peak 12 ≤ 14).",
     "A peak equal to the budget fits (≤)."),
    (lambda c, b: _dp(c, b, again="output"), 6,  # the whole output taken off, not what the last layer saved of it
     "your schedule [(0, 2, True), (2, 4, False)] peaks at 11 > budget 10.",
     "less min(saved, output) of its last layer: its output is kept"),
    (lambda c, b: _dp(c, b, before=False), 1, "your schedule [(0, 1, False), (1, 4, False)] peaks at 16 > budget 12.",
     "the bytes kept so far (its own output included)"),
    (lambda c, b: _dp(c, b, workspace="none"), 6,
     "your schedule [(0, 2, True), (2, 4, False)] peaks at 11 > budget 10.",
     "plus its workspace"),
    (lambda c, b: _dp(c, b, states="fastest"), 1,  # one state per prefix, not one per bytes kept
     "you returned None, but a schedule fits: [(0, 2, True), (2, 4, False)] (peak 12 ≤ 12).",
     "A peak equal to the budget fits (≤)."),
    (lambda c, b: _dp(c, b, states="fewest bytes"), 3,
     "your schedule [(0, 1, True), (1, 4, False)] fits (peak 22) but recomputes 3; [(0, 1, False), (1, 2, True), "
     "(2, 4, False)] recomputes only 1 (peak 22).", "Minimise the recompute time under the budget, not the bytes"),
    (lambda c, b: _dp(c, b, pick="bytes"), 0,
     "your schedule [(0, 4, True)] fits (peak 16) but recomputes 4; [(0, 4, False)] recomputes only 0 (peak 16).",
     "plain segments cost no recompute at all."),
    (lambda c, b: _dp(c, b, allow_plain=False), 0, "your schedule [(0, 4, True)] fits (peak 16) but recomputes 4",
     "plain segments cost no recompute at all."),
    (lambda c, b: _dp(c, b, rerun="but-last"), 4,
     "your schedule [(0, 2, True), (2, 3, False)] fits (peak 13) but recomputes 10; [(0, 1, False), (1, 2, True), "
     "(2, 3, False)] recomputes only 9 (peak 14).",
     "plain segments cost no recompute at all. It peaks exactly at the budget: a peak equal to the budget fits (≤)."),
    (lambda c, b: _dp(c, b, strict=True), 0,
     "your schedule [(0, 2, True), (2, 4, False)] fits (peak 12) but recomputes 2; "
     "[(0, 4, False)] recomputes only 0 (peak 16).",
     "plain segments cost no recompute at all. It peaks exactly at the budget: a peak equal to the budget fits (≤)."),
    (lambda c, b: [(0, len(c), False)], 1, "your schedule [(0, 4, False)] peaks at 16 > budget 12.",
     "Remember the peak"),
    (lambda c, b: _right(c, b) or [(0, len(c), False)], 5,
     "no schedule fits this budget (the smallest possible peak is 12), so the answer is None; you returned "
     "[(0, 4, False)].", "the answer is None"),
    (_greedy, 1, "you returned None, but a schedule fits: [(0, 2, True), (2, 4, False)] (peak 12 ≤ 12).",
     "A peak equal to the budget fits (≤)."),
    (_always_sqrt, 0, "your schedule [(0, 2, True), (2, 4, False)] fits (peak 12) but recomputes 2; [(0, 4, False)] "
     "recomputes only 0 (peak 16).", "Minimise the recompute time"),
    (_least_bytes, 0, "your schedule [(0, 1, False), (1, 3, True), (3, 4, False)] fits (peak 12) but recomputes 2",
     "Minimise the recompute time under the budget, not the bytes"),
    (_then(lambda s, c: [(a, b - 1, k) for a, b, k in s]), 0,  # inclusive stops
     "your segments [(0, 3, False)] stop at 3, not at 4: every layer belongs to one segment.", "one segment"),
    (_then(lambda s, c: s[::-1]), 1,  # backward's order
     "your segments [(2, 4, False), (0, 2, True)] do not cover layers 0..3 in order",
     "each starts where the one before stops"),
    (_then(lambda s, c: s + [(len(c), len(c), False)]), 0,
     "your segments [(0, 4, False), (4, 4, False)] do not cover layers 0..3 in order", "none is empty"),
    (_then(lambda s, c: [(a + 1, b + 1, k) for a, b, k in s]), 0,  # layers counted from 1
     "your segments [(1, 5, False)] do not cover layers 0..3 in order", "each starts where"),
    (_then(lambda s, c: [(a, b) for a, b, k in s]), 0,
     "return a list of (start, stop, checkpointed) triples, got [(0, 4)].", "triples"),
    (_then(lambda s, c: C.predict(c, s).recompute), 0,
     "return a list of (start, stop, checkpointed) triples, got 0.0.", "triples"),
    (lambda c, b: [(0, 1, False)] if len(c) == 1 else _right(c, b), len(ex.CHAIN_CASES) + 3,  # one layer: never checks
     "no schedule fits this budget (the smallest possible peak is 18), so the answer is None; you returned "
     "[(0, 1, False)].", "so the answer is None"),
    (lambda c, b: 1 // 0, 0, "your function raised ZeroDivisionError: integer division or modulo by zero",
     "It should return an answer for this case."),
    (lambda c, b: mt.utils.checkpoint.optimal(c, b).segments, None, "this exercise asks you to write the chain's "
     "dynamic program yourself", "switched off"),
]

CHAIN_IDS = [
    "recomputes-nothing", "output-counted-twice", "whole-output-taken-off", "forgets-bytes-kept-before",
    "forgets-workspace", "one-state-per-prefix-fastest", "one-state-per-prefix-fewest-bytes", "picks-fewest-bytes",
    "never-plain", "rerun-stops-before-last", "budget-exclusive", "ignores-budget", "never-none", "greedy",
    "always-sqrt", "least-peak", "inclusive-stops", "backward-order", "empty-segment", "one-based", "pairs",
    "returns-the-time", "one-layer-never-checked", "raises", "uses-the-engine",
]


@pytest.mark.parametrize("wrong, case, says, hint", CHAIN_MISTAKES, ids=CHAIN_IDS)
def test_each_wrong_chain_schedule_is_rejected_with_its_case_and_hint(wrong, case, says, hint):
    """A catalogued chain mistake fails on its first wrong case, labelled with that case, with its hint."""
    spy = Recorder(wrong)
    msg = failure(check_optimal_chain, spy)
    assert says in msg and hint in msg
    if case is None:  # refused before any case is checked
        return
    chain, budget = spy.calls[case]
    assert len(spy.calls) == case + 1
    kind = "Random case" if case >= len(ex.CHAIN_CASES) else "Case"
    assert msg.startswith(f"{kind} {case} (layers (forward, saved, output, workspace) = {_costs(chain)}, "
                          f"budget {budget}):")
    if kind == "Case":
        assert msg.startswith(_where(case))


def test_a_suboptimal_schedule_below_the_budget_gets_no_exact_budget_hint():
    """When the best schedule peaks below the budget, the message ends with the recompute hint alone."""
    spy = Recorder(lambda c, b: _dp(c, b, workspace="chain"))
    msg = failure(check_optimal_chain, spy)
    chain, budget = spy.calls[-1]
    best_time = _least_recompute(_costs(chain), budget)[0]
    assert msg.startswith(f"Random case {len(spy.calls) - 1} (layers")
    assert f"recomputes only {best_time:g} (peak " in msg
    peak = int(re.search(r"recomputes only \S+ \(peak (\d+)\)", msg).group(1))
    assert peak < budget
    assert msg.endswith("Minimise the recompute time under the budget, not the bytes; plain segments cost no "
                        "recompute at all.")


def test_the_first_random_chain_is_labelled_random():
    """The first case after the stored ones is called 'Random case', numbered after them."""
    n = len(ex.CHAIN_CASES)
    spy = Recorder(_only_on_call(n + 1, optimal_chain, lambda c, b: "not a schedule"))
    msg = failure(check_optimal_chain, spy)
    chain, budget = spy.calls[n]
    assert msg.startswith(f"Random case {n} (layers (forward, saved, output, workspace) = {_costs(chain)}, "
                          f"budget {budget}): ")


def test_the_smallest_peak_is_shown_when_nothing_fits_for_every_chain_length():
    """'No schedule fits' names the smallest possible peak, for each length of chain that cannot fit."""
    cases = []
    for hidden in (False, True):
        spy = Recorder(optimal_chain)
        check_optimal_chain(spy, hidden=hidden)
        cases += [(hidden, _costs(c), b) for c, b in spy.calls if len(c) < 40]
    lengths = {}
    for hidden, layers, budget in cases:
        if _smallest_peak(layers) > budget:
            lengths.setdefault(len(layers), (hidden, layers, budget))
    assert len(lengths) >= 5  # chains of 1 to 7 layers that cannot fit
    for n, (hidden, layers, budget) in lengths.items():
        def wrong(chain, b, n=n):
            return _right(chain, b) or ([(0, len(chain), False)] if len(chain) == n else None)
        msg = failure(check_optimal_chain, wrong, hidden=hidden)
        assert f"(layers (forward, saved, output, workspace) = {layers}, budget {budget}): no schedule fits" in msg
        assert f"(the smallest possible peak is {_smallest_peak(layers)}), so the answer is None" in msg


def test_a_raising_function_is_named_with_its_case():
    """A function that raises is reported with the case it was called on, the long chain too."""
    msg = failure(check_optimal_chain, lambda c, b: [][0])
    assert msg.startswith(_where(0) + " your function raised IndexError")
    msg = failure(check_optimal_chain, lambda c, b: [][0] if len(c) == 40 else _right(c, b))
    assert msg.startswith("For a 40-layer chain, your function raised IndexError")


def test_a_schedule_right_on_small_chains_but_not_the_long_one_is_rejected_there():
    """Segments of at most 7 layers: exact on every small chain, one unit too slow on the 40-layer one."""
    msg = failure(check_optimal_chain, lambda c, b: _dp(c, b, longest=7))
    t, segs = ex.LONG_OPTIMUM
    assert msg.startswith("For a 40-layer chain, your schedule [(0, 2, True), (2, 4, False), (4, 7, True)")
    assert f"fits (peak 185) but recomputes 59; {list(segs)} recomputes only {t:g} (peak " in msg


def test_the_long_chain_is_the_stored_optimums_chain_at_a_third_of_its_plain_peak(capsys):
    """The 40-layer call: its chain and integer budget are those the stored optimum was found for."""
    spy = Recorder(optimal_chain)
    check_optimal_chain(spy)
    out = capsys.readouterr().out
    chain, budget = spy.calls[-1]
    assert len(chain) == 40 and all(len(c) <= 7 for c, _ in spy.calls[:-1])
    plain = C.predict(chain, [(0, 40, False)]).peak
    assert type(budget) is int and budget == plain // 3
    t, segs = ex.LONG_OPTIMUM
    assert C.optimal(chain, budget).recompute == t
    assert C.predict(chain, segs).peak <= budget and C.predict(chain, segs).recompute == t
    assert chain == C.chain_of([(1 + i % 4, 8 + (i * 7) % 13, 4 + i % 3, 2) for i in range(40)])
    assert re.search(r"\(the 40-layer chain took your function \d+\.\d\d s\)\n", out)


class _Clock:
    """A perf_counter the learner's function moves on."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


@pytest.mark.parametrize("seconds, passes", [(10.5, False), (10.0, True), (9.5, True)])
def test_the_long_chain_has_ten_seconds(monkeypatch, capsys, seconds, passes):
    """Over 10 s on the 40-layer chain is rejected with the hint; 10 s or less passes and is printed."""
    clock = _Clock()
    monkeypatch.setattr(ex, "time", clock)

    def slow(chain, budget):
        if len(chain) == 40:
            clock.now += seconds
        return _right(chain, budget)
    if passes:
        check_optimal_chain(slow)
        assert f"(the 40-layer chain took your function {seconds:.2f} s)" in capsys.readouterr().out
    else:
        msg = failure(check_optimal_chain, slow)
        assert msg.startswith(f"For a 40-layer chain your function took {seconds:.1f} s: trying every schedule "
                              "is 2·3^39 of them.")


def test_chain_checker_tries_stored_random_then_long_more_random_when_hidden_and_counts_them(capsys):
    """Stored cases, random chains, the 40-layer one; hidden: other random chains only, more; counted."""
    spy = Recorder(optimal_chain)
    check_optimal_chain(spy)
    out = capsys.readouterr().out
    assert out.endswith(f"✓ check_optimal_chain: all {len(spy.calls)} cases right.\n")
    stored = len(ex.CHAIN_CASES)
    assert [(_costs(c), b) for c, b in spy.calls[:stored]] == [(list(l), b) for l, b in ex.CHAIN_CASES]
    randoms = [(_costs(c), b) for c, b in spy.calls[stored:-1]]
    spy = Recorder(optimal_chain)
    check_optimal_chain(spy, hidden=True)
    assert capsys.readouterr().out == f"✓ check_optimal_chain: all {len(spy.calls)} cases right (the hidden ones).\n"
    hidden = [(_costs(c), b) for c, b in spy.calls]
    assert len(hidden) > len(randoms) > 0
    assert hidden[:len(randoms)] != randoms
    assert not any(case in hidden for case in [(list(l), b) for l, b in ex.CHAIN_CASES])
    assert all(len(layers) <= 7 for layers, _ in hidden)  # random chains only: no 40-layer one


def test_chain_cases_are_the_same_every_run():
    """Re-running the checker tries the same chains and budgets."""
    for hidden in (False, True):
        runs = []
        for _ in range(2):
            spy = Recorder(optimal_chain)
            check_optimal_chain(spy, hidden=hidden)
            runs.append([(_costs(c), b) for c, b in spy.calls])
        assert runs[0] == runs[1]


def test_random_chains_are_the_kinds_the_checker_needs():
    """Random chains of one and of several layers; budgets that fit plain, need checkpoints, or fit nothing."""
    for hidden in (False, True):
        spy = Recorder(optimal_chain)
        check_optimal_chain(spy, hidden=hidden)
        cases = [(_costs(c), b) for c, b in spy.calls if len(c) < 40][0 if hidden else len(ex.CHAIN_CASES):]
        assert {1, 2, 7} <= {len(layers) for layers, _ in cases}
        best = [_least_recompute(layers, b) for layers, b in cases]
        assert sum(r is None for r in best) >= 3                 # nothing fits: the answer is None
        assert sum(r is not None and r[0] == 0 for r in best) >= 2  # fits with no checkpoint
        assert sum(r is not None and r[0] > 0 for r in best) >= len(cases) // 3  # needs checkpoints
        layers = [l for ls, _ in cases for l in ls]
        assert all(f >= 1 and s >= 0 and o >= 1 and w >= 0 for f, s, o, w in layers)
        assert any(s > o for _, s, o, _ in layers) and any(s < o for _, s, o, _ in layers)
        assert any(w == 0 for *_, w in layers) and any(w > 0 for *_, w in layers)
        assert any(s == 0 for _, s, _, _ in layers)


def test_right_schedules_in_other_containers_are_accepted(capsys):
    """A numpy array, lists, or numpy integers and booleans with the right segments all pass."""
    check_optimal_chain(_then(lambda s, c: [list(t) for t in s]))
    check_optimal_chain(_then(lambda s, c: [(np.int64(a), np.int64(b), np.bool_(k)) for a, b, k in s]))
    check_optimal_chain(_then(lambda s, c: tuple(s)))
    assert capsys.readouterr().out.count("✓ check_optimal_chain") == 3


# -- the references ------------------------------------------------------------------------------
def _random_layers(rng, n, zeros=False):
    lo = 0 if zeros else 1
    return [(rng.randint(lo, 5), rng.randint(0, 9), rng.randint(lo, 9), rng.randint(0, 4)) for _ in range(n)]


def test_reference_peak_time_is_the_engines_predict():
    """(peak, recompute) of every schedule of random chains (zero costs too) is what C.predict says."""
    rng = random.Random(6)
    chains = [_random_layers(rng, rng.randint(1, 5), zeros=bool(i % 2)) for i in range(24)]
    chains += [[(0, 0, 0, 0)] * 3, [(2, 0, 7, 0)]]
    for layers in chains:
        chain = C.chain_of(layers)
        for s in _schedules(len(layers)):
            p = C.predict(chain, s)
            assert ex.reference_peak_time(layers, s) == (p.peak, p.recompute)
            assert type(ex.reference_peak_time(layers, s)[1]) is float


def test_reference_peak_time_on_hand_worked_chains():
    """The notebook's model by hand: kept so far + what a checkpointed segment remakes + its workspace."""
    four = [(1, 4, 4, 0)] * 4
    assert ex.reference_peak_time(four, [(0, 4, False)]) == (16, 0.0)
    assert ex.reference_peak_time(four, [(0, 2, True), (2, 4, False)]) == (12, 2.0)  # max(4 + 4, 4 + 8)
    assert ex.reference_peak_time(four, [(0, 4, True)]) == (16, 4.0)                # 4 + (16 - 4)
    odd = [(2, 5, 4, 0), (3, 2, 5, 1), (1, 0, 2, 0), (3, 5, 4, 0)]
    assert ex.reference_peak_time(odd, [(0, 2, True), (2, 4, False)]) == (11, 5.0)  # 5 + (7 - min(2, 5)) + 1
    assert ex.reference_peak_time(odd, [(0, 3, True), (3, 4, False)]) == (10, 6.0)  # 2 + (7 - 0) + 1
    work = [(1, 3, 2, 6), (1, 3, 2, 1)]
    assert ex.reference_peak_time(work, [(0, 1, True), (1, 2, True)]) == (9, 2.0)  # 2 + 1 + 6, 4 + 1 + 1


def test_reference_optimum_is_the_least_recompute_of_every_schedule():
    """reference_optimum: the least recompute time of a fitting schedule (one of them), None if none fits."""
    rng = random.Random(60)
    cases = [([(1, 4, 4, 0)] * 4, b) for b in (3, 11, 12, 15, 16, 20)]
    for _ in range(40):
        layers = _random_layers(rng, rng.randint(1, 5))
        plain = C.predict(C.chain_of(layers), [(0, len(layers), False)]).peak
        cases.append((layers, rng.randint(max(1, plain // 3), plain + 2)))
    for layers, budget in cases:
        got, want = ex.reference_optimum(layers, budget), _least_recompute(layers, budget)
        engine = C.brute_force(C.chain_of(layers), budget)
        if want is None:
            assert got is None and engine is None
            continue
        t, segs = got
        assert t == want[0] == engine.recompute and segs in want[1]
        assert C.predict(C.chain_of(layers), segs).peak <= budget
    assert ex.reference_optimum([(1, 4, 4, 0)] * 4, 12)[0] == 2.0
    assert ex.reference_optimum([(1, 4, 4, 0)] * 4, 16) == (0.0, [(0, 4, False)])


def test_all_schedules_are_every_cut_and_labelling_once():
    """_all_schedules(n): 2·3^(n-1) schedules, each once, the same set as an enumeration written again."""
    for n in range(1, 7):
        got = [tuple(s) for s in ex._all_schedules(n)]
        assert len(got) == len(set(got)) == 2 * 3 ** (n - 1)
        assert set(got) == {tuple(s) for s in _schedules(n)}


def test_the_learners_chain_is_the_engines_chain_of_its_costs():
    """_chain(layers) is C.chain_of(layers): the costs, in order, names 'layer i', times in 'units'."""
    rng = random.Random(3)
    for layers in [l for l, _ in ex.CHAIN_CASES] + [_random_layers(rng, 5) for _ in range(5)]:
        chain = ex._chain(layers)
        assert chain == C.chain_of(layers) and chain.unit == "units"
        assert [l.name for l in chain.layers] == [f"layer {i}" for i in range(len(layers))]
        assert all(l.backward == 0.0 and l.rerun_free is False for l in chain.layers)
