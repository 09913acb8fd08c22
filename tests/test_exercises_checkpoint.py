"""Notebook 10's checkers: the reference answers pass, and typical wrong answers are each
caught with a message that points at the mistake; an unfinished exercise shows its stub, and
the hidden cases run."""
import itertools
import math

import pytest

import microtorch as mt
from microtorch.exercises import check_optimal_chain, check_sqrt_segments
from microtorch.exercises import checkpoint as ex


# -- the √n segmentation ------------------------------------------------------------------------
def good_segments(n):
    k = max(1, round(math.sqrt(n)))
    size, extra = divmod(n, k)
    out, at = [], 0
    for i in range(k):
        stop = at + size + (i < extra)
        out.append((at, stop))
        at = stop
    return out


def shorter_first(n):
    segs = good_segments(n)
    lengths = sorted((b - a for a, b in segs))
    out, at = [], 0
    for L in lengths:
        out.append((at, at + L))
        at += L
    return out


def test_sqrt_segments_reference_passes(capsys):
    check_sqrt_segments(good_segments)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [  # more in test_mutants_checkpoint_run6.py's SEGMENT_MISTAKES
    (shorter_first, "longer segments first"),
    (lambda n: None, r"list of \(start, stop\) pairs"),
])
def test_sqrt_segments_wrong_answers_are_caught(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_sqrt_segments(wrong)


# -- the chain dynamic program ---------------------------------------------------------------
def _costs(chain):
    return [(l.forward, l.saved, l.output, l.workspace) for l in chain.layers]


def good_dp(chain, budget, count_recompute=True, count_work=True, allow_plain=True, strict=False):
    L = _costs(chain)
    n = len(L)
    best = [dict() for _ in range(n + 1)]  # j -> {kept: (time, segments)}
    best[0][0] = (0.0, [])
    for j in range(n):
        for i in range(j + 1, n + 1):
            inside = L[j:i]
            saved = sum(l[1] for l in inside)
            work = max(l[3] for l in inside) if count_work else 0
            for kept, (t, segs) in list(best[j].items()):
                for ckpt in ((False, True) if allow_plain else (True,)):
                    k2 = kept + (inside[-1][2] if ckpt else saved)
                    again = saved - min(inside[-1][1], inside[-1][2])
                    peak = k2 + (again if ckpt and count_recompute else 0) + work
                    if peak > budget or (strict and peak == budget):
                        continue
                    t2 = t + (sum(l[0] for l in inside) if ckpt else 0)
                    if k2 not in best[i] or t2 < best[i][k2][0]:
                        best[i][k2] = (t2, segs + [(j, i, ckpt)])
    if not best[n]:
        return None
    return min(best[n].values(), key=lambda v: v[0])[1]


def greedy(chain, budget):
    """Checkpoint one layer at a time, the biggest saver first, until the peak fits."""
    L = _costs(chain)
    n = len(L)
    ckpt = [False] * n
    order = sorted(range(n), key=lambda i: -L[i][1])
    for i in [None] + order:
        if i is not None:
            ckpt[i] = True
        segs = [(k, k + 1, ckpt[k]) for k in range(n)]
        if ex.reference_peak_time(L, segs)[0] <= budget:
            return segs
    return None


def always_sqrt(chain, budget):
    n = len(chain)
    segs = good_segments(n)
    return [(a, b, i < len(segs) - 1) for i, (a, b) in enumerate(segs)]


def brute(chain, budget):
    L = _costs(chain)
    best = ex.reference_optimum(L, budget) if len(L) <= 9 else None
    if len(L) > 9:  # what a learner's exhaustive search would do: try everything
        for _ in itertools.islice(ex._all_schedules(len(L)), 3 ** 12):
            pass
    return None if best is None else best[1]


def least_bytes(chain, budget):
    """Minimises the peak instead of the time."""
    L = _costs(chain)
    best = None
    for segs in ex._all_schedules(len(L)) if len(L) <= 9 else []:
        peak, t = ex.reference_peak_time(L, segs)
        if peak <= budget and (best is None or peak < best[0]):
            best = (peak, segs)
    return None if best is None else best[1]


def test_chain_dp_reference_passes(capsys):
    check_optimal_chain(good_dp)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (lambda c, b: good_dp(c, b, count_recompute=False), "plus everything it recomputes"),
    (lambda c, b: good_dp(c, b, count_work=False), "peaks at"),
    (lambda c, b: good_dp(c, b, allow_plain=False), "plain segments cost no recompute"),
    (lambda c, b: good_dp(c, b, strict=True), "equal to the budget fits"),
    (greedy, "returned None, but a schedule fits|recomputes"),
    (always_sqrt, "peaks at|recomputes|no schedule fits"),
    (least_bytes, "Minimise the recompute time"),
    (lambda c, b: mt.utils.checkpoint.optimal(c, b).segments, "write the chain's dynamic program yourself"),
])
def test_chain_dp_wrong_answers_are_caught(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_optimal_chain(wrong)


def test_exhaustive_search_is_too_slow_for_the_long_chain():
    with pytest.raises(AssertionError, match="2·3\\^39"):
        check_optimal_chain(brute, time_limit=0.1)  # brute spends ~0.3 s on the long chain


def test_stored_long_optimum_is_the_models():
    from microtorch.utils.checkpoint import optimal, predict

    layers = [(1 + i % 4, 8 + (i * 7) % 13, 4 + i % 3, 2) for i in range(40)]
    chain = ex._chain(layers)
    budget = ex.reference_peak_time(layers, [(0, 40, False)])[0] // 3
    t, segs = ex.LONG_OPTIMUM
    assert optimal(chain, budget).recompute == t
    assert predict(chain, segs).recompute == t and predict(chain, segs).peak <= budget
    assert ex.reference_peak_time(layers, segs) == (predict(chain, segs).peak, t)


def test_engine_is_restored_after_a_check():
    check_sqrt_segments(good_segments)
    assert mt.utils.checkpoint.sqrt_segments(4) == [(0, 2), (2, 4)]


def test_an_unfinished_function_shows_its_stub_and_hidden_cases_run(capsys):
    def unfinished(*args):
        raise NotImplementedError("write it")
    for check in (check_sqrt_segments, check_optimal_chain):
        with pytest.raises(NotImplementedError, match="write it"):
            check(unfinished)
    check_sqrt_segments(good_segments, hidden=True)
    check_optimal_chain(good_dp, hidden=True)
    assert capsys.readouterr().out.count("(the hidden ones)") == 2
