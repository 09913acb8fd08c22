"""Exercises of notebook 10 (recomputation): write the √n segmentation, and the exact
dynamic program for a chain under a memory budget.

Each checker runs only the learner's function (:func:`~.checker.checker`): while it runs,
the engine's own answers (``sqrt_segments``, ``sqrt_n``, ``optimal``, ``brute_force``,
``schedule``, ``frontier``, ``min_peak``) say "write this yourself". The references here
are independent: a direct construction for the segments, and an exhaustive search (over
every cut and every labelling) with its own copy of the cost model for the chains — on
stored cases and on random ones (another seed, and more of them, with ``hidden=True``).
"""
from __future__ import annotations

import itertools
import math
import random
import time

from ..utils import checkpoint_cost as _cost, checkpoint_schedule as _impl
from .checker import checker
from .checking import _call, _fail, _passed, hidden

def _schedule_blocks():
    """The engine's schedules: switched off while the learner's code runs."""
    return [_impl.sqrt_segments, _impl.sqrt_n, _impl.optimal, _impl.brute_force, _impl.schedule,
            _impl.frontier, _impl.min_peak]


# --------------------------------------------------------------------------------------------
# exercise 1: √n segments
# --------------------------------------------------------------------------------------------
def reference_segments(n: int) -> list[tuple[int, int]]:
    """k = max(1, round(√n)) half-open ranges, the first n mod k one layer longer."""
    k = max(1, round(math.sqrt(n)))
    out, at = [], 0
    for i in range(k):
        size = n // k + (1 if i < n % k else 0)
        out.append((at, at + size))
        at += size
    return out


SEGMENT_CASES = [1, 2, 3, 4, 7, 10, 15, 16, 17, 64]


def check_sqrt_segments(fn) -> None:
    """``fn(n)`` must return ``k = max(1, round(√n))`` consecutive half-open ranges
    ``(start, stop)`` covering layers ``0..n-1``, lengths differing by at most one, the
    longer ones first."""
    rng = random.Random(918 if hidden() else 10)
    cases = ([] if hidden() else SEGMENT_CASES) + [rng.randint(2, 400) for _ in range(40 if hidden() else 12)]
    for n in cases:
        _check_segments_answer(n, _call(fn, f"For n = {n} layers,", n))
    _passed("check_sqrt_segments", len(cases))


check_sqrt_segments = checker("the √n segments", blocks=_schedule_blocks)(check_sqrt_segments)


def _check_segments_answer(n: int, got) -> None:
    want = reference_segments(n)
    k = len(want)
    try:
        segs = [(int(a), int(b)) for a, b in got]
    except (TypeError, ValueError):
        _fail(f"For n = {n}: return a list of (start, stop) pairs, got {got!r}.")
    if len(segs) != k:
        _fail(f"For n = {n}: expected k = max(1, round(√{n})) = {k} segments, got {len(segs)}: {segs}. "
              f"(math.isqrt rounds down; round(math.sqrt(n)) is asked for.)")
    if segs[0][0] != 0:
        _fail(f"For n = {n}: the first segment must start at layer 0, got {segs[0]}.")
    for (a, b), (c, d) in zip(segs, segs[1:]):
        if b != c:
            what = "overlap" if c < b else "leave layers out"
            _fail(f"For n = {n}: segment {(a, b)} stops at {b} but the next, {(c, d)}, starts at {c}: they "
                  f"{what}. Ranges are half-open (stop is one past the last layer), so each starts where "
                  f"the one before stops. Got {segs}.")
    if any(b <= a for a, b in segs):
        _fail(f"For n = {n}: every segment needs at least one layer (start < stop; ranges are half-open, "
              f"so (0, 1) is layer 0 alone), got {segs}.")
    if segs[-1][1] != n:
        lost = n - segs[-1][1]
        _fail(f"For n = {n}: the last segment stops at {segs[-1][1]}, so {abs(lost)} layer(s) "
              f"{'are left out' if lost > 0 else 'do not exist'}: the last stop must be n = {n} "
              f"(the remainder n mod k = {n % k} must go somewhere). Got {segs}.")
    lengths = [b - a for a, b in segs]
    if max(lengths) - min(lengths) > 1:
        _fail(f"For n = {n}: segment lengths {lengths} differ by more than one: spread the remainder "
              f"(n mod k = {n % k}) one layer each over the first segments instead of giving it all to one.")
    if lengths != sorted(lengths, reverse=True):
        _fail(f"For n = {n}: lengths {lengths}: put the longer segments first (expected {want}).")


# --------------------------------------------------------------------------------------------
# exercise 2: the chain dynamic program
# --------------------------------------------------------------------------------------------
def reference_peak_time(layers, segments) -> tuple[int, float]:
    """The cost model, written again: (peak, recompute time) of a schedule; layers are
    ``(forward, saved, output, workspace)`` tuples."""
    kept, peak, recompute = 0, 0, 0.0
    for a, b, ckpt in segments:
        inside = layers[a:b]
        saved = sum(l[1] for l in inside)
        kept += inside[-1][2] if ckpt else saved
        again = saved - min(inside[-1][1], inside[-1][2])  # its output is kept: not made again
        peak = max(peak, kept + (again if ckpt else 0) + max(l[3] for l in inside))
        if ckpt:
            recompute += sum(l[0] for l in inside)
    return peak, recompute


def reference_optimum(layers, budget):
    """Exhaustive search: the least recompute time of any schedule with peak ≤ budget, and one such schedule."""
    n, best = len(layers), None
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        pieces = list(zip(bounds, bounds[1:]))
        for labels in itertools.product((False, True), repeat=len(pieces)):
            segs = [(a, b, c) for (a, b), c in zip(pieces, labels)]
            peak, t = reference_peak_time(layers, segs)
            if peak <= budget and (best is None or t < best[0]):
                best = (t, segs)
    return best


def _chain(layers):
    Chain, Layer = _cost.Chain, _cost.Layer
    return Chain([Layer(float(f), s, o, w, 0.0, f"layer {i}") for i, (f, s, o, w) in enumerate(layers)], "units")


CHAIN_CASES = [  # (layers, budget): shown in the notebook
    ([(1, 4, 4, 0)] * 4, 16),                                  # fits with no checkpoint
    ([(1, 4, 4, 0)] * 4, 12),
    ([(1, 4, 4, 0)] * 6, 14),
    ([(3, 10, 2, 1), (1, 10, 2, 1), (2, 1, 1, 1), (5, 8, 8, 0)], 22),
    ([(1, 5, 5, 3), (9, 5, 1, 3), (1, 5, 5, 3)], 14),
    ([(1, 4, 4, 0)] * 4, 3),                                   # nothing fits: None
    ([(2, 5, 4, 0), (3, 2, 5, 1), (1, 0, 2, 0), (3, 5, 4, 0)], 10),  # layer 1 outputs more than it saved
]


#: The 40-layer case's optimum (recompute time, one optimal schedule), stored: found once by
#: the engine's dynamic program and checked by the tests against the model.
LONG_OPTIMUM = (58.0, ((0, 2, True), (2, 4, False), (4, 14, True), (14, 16, False), (16, 19, True),
                       (19, 20, False), (20, 26, True), (26, 28, False), (28, 30, True), (30, 32, False),
                       (32, 34, True), (34, 35, False), (35, 37, True), (37, 38, True), (38, 40, False)))


def _random_case(rng: random.Random):
    n = rng.randint(1, 7)
    layers = [(rng.randint(1, 9), rng.randint(0, 20), rng.randint(1, 12), rng.randint(0, 8)) for _ in range(n)]
    plain = reference_peak_time(layers, [(0, n, False)])[0]
    return layers, rng.randint(max(1, plain // 3), plain + 2)


def check_optimal_chain(fn, time_limit: float = 10.0) -> None:
    """``fn(chain, budget)`` must return the segments ``[(start, stop, checkpointed), ...]``
    of a schedule with the least recompute time whose predicted peak is ≤ budget, or None
    if none fits; checked against an exhaustive search, and on one 40-layer chain (which
    an exhaustive search cannot do in time; not with ``hidden=True``, which runs random
    chains only)."""
    rng = random.Random(918 if hidden() else 17)
    stored = [] if hidden() else CHAIN_CASES
    cases = stored + [_random_case(rng) for _ in range(60 if hidden() else 30)]
    for i, (layers, budget) in enumerate(cases):
        where = (f"{'Random case' if i >= len(stored) else 'Case'} {i} (layers (forward, saved, output, "
                 f"workspace) = {layers}, budget {budget}):")
        _check_chain_answer(where, layers, budget, _call(fn, where, _chain(layers), budget))
    if hidden():
        _passed("check_optimal_chain", len(cases))
        return
    # a long chain: a polynomial dynamic program, not a search over 2·3^(n-1) schedules
    layers = [(1 + i % 4, 8 + (i * 7) % 13, 4 + i % 3, 2) for i in range(40)]
    plain = reference_peak_time(layers, [(0, 40, False)])[0]
    budget = plain // 3
    long_chain = _chain(layers)
    start = time.perf_counter()
    got = _call(fn, "For a 40-layer chain,", long_chain, budget)
    took = time.perf_counter() - start
    if took > time_limit:
        _fail(f"For a 40-layer chain your function took {took:.1f} s: trying every schedule is 2·3^39 of them. "
              "Build the answer segment by segment: the best schedule of layers 0..j-1 for each amount of "
              "bytes kept so far, extended by one more segment (plain or checkpointed).")
    _check_chain_answer("For a 40-layer chain,", layers, budget, got, *LONG_OPTIMUM)
    print(f"(the 40-layer chain took your function {took:.2f} s)")
    _passed("check_optimal_chain", len(cases) + 1)


check_optimal_chain = checker("the chain's dynamic program", blocks=_schedule_blocks)(check_optimal_chain)


def _check_chain_answer(where, layers, budget, got, best_time=None, best_segs=None) -> None:
    n = len(layers)
    if best_time is None:
        ref = reference_optimum(layers, budget)
        best_time, best_segs = (None, None) if ref is None else ref
    if best_segs is None:
        if got is not None:
            floor = min(reference_peak_time(layers, s)[0] for s in _all_schedules(n)) if n <= 7 else None
            _fail(f"{where} no schedule fits this budget (the smallest possible peak is {floor}), so the "
                  f"answer is None; you returned {got!r}.")
        return
    if got is None:
        _fail(f"{where} you returned None, but a schedule fits: {list(best_segs)} (peak "
              f"{reference_peak_time(layers, best_segs)[0]} ≤ {budget}). A peak equal to the budget fits (≤).")
    try:
        segs = [(int(a), int(b), bool(c)) for a, b, c in got]
    except (TypeError, ValueError):
        _fail(f"{where} return a list of (start, stop, checkpointed) triples, got {got!r}.")
    at = 0
    for a, b, _ in segs:
        if a != at or b <= a:
            _fail(f"{where} your segments {segs} do not cover layers 0..{n - 1} in order (each starts where "
                  "the one before stops, none is empty).")
        at = b
    if at != n:
        _fail(f"{where} your segments {segs} stop at {at}, not at {n}: every layer belongs to one segment.")
    peak, t = reference_peak_time(layers, segs)
    if peak > budget:
        _fail(f"{where} your schedule {segs} peaks at {peak} > budget {budget}. Remember the peak of a "
              "checkpointed segment: the bytes kept so far (its own output included) plus everything it "
              "recomputes (its layers' saved bytes, less min(saved, output) of its last layer: its output "
              "is kept) plus its workspace — not only what the forward keeps.")
    if t > best_time + 1e-9:
        best_peak = reference_peak_time(layers, best_segs)[0]
        exact = (" It peaks exactly at the budget: a peak equal to the budget fits (≤)."
                 if best_peak == budget else "")
        _fail(f"{where} your schedule {segs} fits (peak {peak}) but recomputes {t:g}; {list(best_segs)} recomputes "
              f"only {best_time:g} (peak {best_peak}). Minimise the recompute time under the budget, not the "
              f"bytes; plain segments cost no recompute at all.{exact}")


def _all_schedules(n):
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        pieces = list(zip(bounds, bounds[1:]))
        for labels in itertools.product((False, True), repeat=len(pieces)):
            yield [(a, b, c) for (a, b), c in zip(pieces, labels)]
