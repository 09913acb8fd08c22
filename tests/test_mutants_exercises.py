"""The references the exercise checkers judge a learner's answer by, pinned down against
independent computations (brute force, the engine's own classes): a wrong reference would let a
checker accept a wrong answer. Written against mutants of microtorch/exercises/ (tests/README.md)."""
import bisect

import pytest

import microtorch as mt
from microtorch.exercises import pool

HIGH = 1 << 20


# -- exercises/pool.py: the references check_size_classes / check_free_list_pool compare with ----
def _worst_by_brute_force(classes, low, high):
    """Round every request n in [low, high] up to its class; the largest wasted share (first n)."""
    worst = (0.0, low, classes[0])
    for n in range(low, high + 1):
        i = bisect.bisect_left(classes, n)
        if i == len(classes):
            break
        c = classes[i]
        if (c - n) / c > worst[0]:
            worst = ((c - n) / c, n, c)
    return worst


@pytest.mark.parametrize("classes, low, high", [
    ([64, 80, 96, 128, 160, 256, 512, 1024], 64, 1024),
    ([32, 48, 64, 100, 200, 1000, 2000], 64, 1024),   # classes below low and past high
    ([64, 72, 80, 88, 96, 104, 112, 120, 128], 64, 128),
    ([64, 65, 66, 200], 64, 150),
    ([64, 1024], 64, 1024),
    ([64, 65, 66], 64, 66),                           # no request wastes anything
    ([100, 104, 108], 64, 108),                       # the first class holds the worst request (64)
    ([64, 65, 127, 1000], 64, 128),                   # the worst request is the range's last byte
    ([75, 95], 60, 95),                               # a tie (20 % twice): the first request counts
])
def test_worst_waste_is_the_worst_request_over_every_size(classes, low, high):
    got = pool.worst_waste(classes, low, high)
    want = _worst_by_brute_force(classes, low, high)
    assert got[1:] == want[1:] and got[0] == pytest.approx(want[0])


def test_worst_waste_defaults_to_the_pools_range():
    classes = mt.memory.size_classes(per_doubling=4)
    assert pool.worst_waste(classes) == pool.worst_waste(classes, 64, HIGH)


@pytest.mark.parametrize("m", [1, 2, 4, 8, 16, 32])
def test_even_classes_are_the_engines_classes(m):
    assert pool.even_classes(m) == mt.memory.size_classes(per_doubling=m)
    assert all(type(c) is int for c in pool.even_classes(m))  # byte counts, printed in messages
    assert pool.even_classes(m, 128, 4096) == mt.memory.size_classes(128, 4096, per_doubling=m)


@pytest.mark.parametrize("bound, m", [(1 / 9, 8), (0.11, 16), (1 / 5, 4), (0.2001, 4), (1 / 3, 2), (0.5, 1),
                                      (0.6, 1), (1 / 17, 16), (0.05, 32)])
def test_engine_classes_for_picks_the_fewest_classes_per_doubling_meeting_the_bound(bound, m):
    got_m, classes = pool.engine_classes_for(bound)
    assert (got_m, classes) == (m, mt.memory.size_classes(per_doubling=m))


@pytest.mark.parametrize("bound", [0.5, 0.3, 0.2, 0.125, 0.1])
def test_greedy_classes_take_each_class_as_wide_as_the_bound_allows(bound):
    classes = pool.greedy_classes(bound)
    assert classes[0] == 64 and classes[-1] == HIGH
    assert all(c % 8 == 0 for c in classes) and all(a < b for a, b in zip(classes, classes[1:]))
    assert pool.worst_waste(classes)[0] <= bound
    for p, c in zip(classes, classes[1:-1]):
        n = p + 1  # the worst request of class c
        assert (c - n) / c <= bound
        assert (c + 8 - n) / (c + 8) > bound  # one step wider would break the bound
    assert pool.greedy_classes(bound, step=8) == classes
    assert all(c % 16 == 0 or c == 64 or c == HIGH for c in pool.greedy_classes(bound, step=16))
