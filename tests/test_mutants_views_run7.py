"""Mutation run 7, ``exercises/views.py`` (notebook 06's checkers; since split: ``check_view_strides``
and its helpers are in ``view_strides.py``): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake the notebook warns about (negative
  strides ignored or taken as |stride|, an off-by-one, bytes instead of elements, the offset left
  out; extents or a gcd test taken for the exact answer, negative or stride-0 views forgotten;
  one window short or too many, a contiguous signal assumed, the strides or the shape swapped;
  contiguous strides for every view, never or always refusing, the old strides kept): each is
  rejected on a named case, with its numbers and its hint, visible and hidden;
* the references against hand-worked values of the notebook and against independent oracles:
  numpy's ``as_strided`` / ``sliding_window_view`` / ``shares_memory`` and torch's ``view``;
* the cases are the kinds the checkers promise (labels that build the view they name, negative
  and zero strides, a 0-d view, windows with a tail, reversed signals, layouts ``view`` refuses,
  random views up to 3-D with strides −7..7, other and more of them in the hidden run);
* the engine code each exercise asks for is switched off while the learner's function runs;
* the pass message counts the cases the learner's function was called on.

Record: tests/mutation-run-7/exercises-views.md.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import checking
from microtorch.exercises import view_strides as vs
from microtorch.exercises import views as ex

from checker_probes import cases_counted, failure

try:  # imported here, not inside a test: the first import of torch takes seconds
    import torch
except ImportError:  # the oracle tests skip
    torch = None
from test_exercise_checkers import _solutions
from test_exercises import (  # the wrong alias answers test_exercises already writes
    _by_extents, _gcd_test, _positive_strides_only, _without_stride_0)

SOLUTION = _solutions("06_views_and_aliasing")  # the notebook's reference answers
extent = SOLUTION["extent"]
windows = SOLUTION["windows"]
shares_element = SOLUTION["shares_element"]
view_strides = SOLUTION["view_strides"]


def _calls(check, solution, hidden=False) -> list:
    """The arguments of every call the checker itself made (not the engine's tests it runs afterwards)."""
    mine = []

    def spy(*args):
        if checking._LEARNER[0]:
            mine.append(args)
        return solution(*args)
    check(spy, hidden=hidden)
    return mine


def _with_hidden(make):
    """``make()`` as the hidden run sees it."""
    before, checking._HIDDEN[0] = checking._HIDDEN[0], True
    try:
        return make()
    finally:
        checking._HIDDEN[0] = before


def _np_view(shape, strides, offset=0, n=1024):
    """An int64 numpy view with this layout (strides in elements) over a buffer holding 0, 1, …"""
    buf = np.arange(n, dtype=np.int64)
    start = buf[offset:] if offset >= 0 else None
    return np.lib.stride_tricks.as_strided(start, tuple(shape), tuple(8 * s for s in strides))


def _positions_by_hand(offset, shape, strides) -> list:
    """Every storage position in C order: offset + Σ index·stride."""
    return [offset + sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*shape)]


def _builds(label, view) -> bool:
    """Does the case's label, evaluated, build this very view (same layout, same values)?"""
    for s in (mt.arange(30.), mt.arange(64.)):
        try:
            built = eval(label, {"x": mt.arange(24.).reshape(4, 6), "s": s})  # noqa: S307
        except Exception:
            continue
        if ex._triple(built) == ex._triple(view) and np.array_equal(built.numpy(), view.numpy()):
            return True
    return False


# ----------------------------------------------------------------------------------------------
# exercise 1: a view's extent
# ----------------------------------------------------------------------------------------------
def _ignores_negative(off, shape, strides):
    return off, off + sum((n - 1) * s for n, s in zip(shape, strides))


def _abs_strides(off, shape, strides):
    return off, off + sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def _lo_stays_at_offset(off, shape, strides):
    return off, extent(off, shape, strides)[1]


def _n_not_n_minus_1(off, shape, strides):
    return (off + sum(n * s for n, s in zip(shape, strides) if s < 0),
            off + sum(n * s for n, s in zip(shape, strides) if s > 0))


def _in_bytes(off, shape, strides):
    lo, hi = extent(off, shape, strides)
    return 4 * lo, 4 * (hi + 1)


def _hi_exclusive(off, shape, strides):
    lo, hi = extent(off, shape, strides)
    return lo, hi + 1


def _swapped_ends(off, shape, strides):
    return extent(off, shape, strides)[::-1]


def _no_offset(off, shape, strides):
    return tuple(e - off for e in extent(off, shape, strides))


def _only_the_first_dim(off, shape, strides):
    return off, off + (shape[0] - 1) * strides[0]


def _offset_twice(off, shape, strides):
    return tuple(e + off for e in extent(off, shape, strides))


def _stride_0_as_negative(off, shape, strides):
    lo = hi = off
    for n, s in zip(shape, strides):
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi


def _lo_from_zero(off, shape, strides):
    return 0, extent(off, shape, strides)[1]


def _hi_by_abs_strides(off, shape, strides):
    return extent(off, shape, strides)[0], _abs_strides(off, shape, strides)[1]


def _a_string(off, shape, strides):
    return f"{extent(off, shape, strides)}"


def _extent_raises(off, shape, strides):
    return shape[5]


GENERIC_EXTENT = "Start from the offset (element [0, ..., 0]); each dimension of size n can move you"
EXTENT_MISTAKES = [  # (wrong answer, the view it fails on, what it returned, words of the hint)
    (_ignores_negative, "x[::-1] (offset 18, shape (4, 6), strides (-6, 1))", "(18, 5)",
     "You ignored negative strides (dimension(s) [0] have negative strides)"),
    (_abs_strides, "x[::-1] (offset 18, shape (4, 6), strides (-6, 1))", "(18, 41)",
     "You took |stride| (dimension(s) [0] have negative strides)"),
    (_lo_stays_at_offset, "x[::-1] (offset 18, shape (4, 6), strides (-6, 1))", "(18, 23)",
     "You ignored negative strides (dimension(s) [0] have negative strides)"),
    (_n_not_n_minus_1, "x (offset 0, shape (4, 6), strides (6, 1))", "(0, 30)", "Off by one: the last index"),
    (_in_bytes, "x (offset 0, shape (4, 6), strides (6, 1))", "(0, 96)",
     "Those are bytes ([start, stop)); count storage positions (elements): divide by 4."),
    (_hi_exclusive, "x (offset 0, shape (4, 6), strides (6, 1))", "(0, 24)", "Both ends are inclusive"),
    (_swapped_ends, "x (offset 0, shape (4, 6), strides (6, 1))", "(23, 0)", "You swapped them"),
    (_no_offset, "x[1:3, 2:5] (offset 8, shape (2, 3), strides (6, 1))", "(0, 8)",
     "You left out the offset: the view's element [0, ...] is at position 8, not 0."),
    (_offset_twice, "x[1:3, 2:5] (offset 8, shape (2, 3), strides (6, 1))", "(16, 24)", GENERIC_EXTENT),
    (_only_the_first_dim, "x (offset 0, shape (4, 6), strides (6, 1))", "(0, 18)", GENERIC_EXTENT),
    (_lo_from_zero, "x[1:3, 2:5] (offset 8, shape (2, 3), strides (6, 1))", "(0, 16)", GENERIC_EXTENT),
    (_hi_by_abs_strides, "x[::-1] (offset 18, shape (4, 6), strides (-6, 1))", "(0, 41)", GENERIC_EXTENT),
]


@pytest.mark.parametrize("wrong, view, got, hint", EXTENT_MISTAKES, ids=[m[0].__name__ for m in EXTENT_MISTAKES])
def test_each_wrong_extent_is_rejected_with_its_view_and_hint(wrong, view, got, hint):
    msg = failure(mt.exercises.check_extent, wrong)
    assert msg.startswith(f"for the view {view} you returned {got}, but the view reads storage positions ")
    assert hint in msg


@pytest.mark.parametrize("wrong", [m[0] for m in EXTENT_MISTAKES], ids=[m[0].__name__ for m in EXTENT_MISTAKES])
def test_each_wrong_extent_is_rejected_in_the_hidden_run_too(wrong):
    assert failure(mt.exercises.check_extent, wrong, hidden=True).startswith("for the view ")


def test_the_extent_message_gives_the_positions_and_the_bytes():
    msg = failure(mt.exercises.check_extent, _ignores_negative)
    assert ("you returned (18, 5), but the view reads storage positions 0 to 23 (bytes [0, 96) in "
            "4-byte elements).\n") in msg
    assert msg.endswith("Here: lowest 0, highest 23.")
    msg = failure(mt.exercises.check_extent, _no_offset)
    assert "reads storage positions 8 to 16 (bytes [32, 68) in 4-byte elements)." in msg


def test_the_negative_stride_hint_names_the_negative_dimensions_and_the_right_ends():
    def wrong_on_two_negative_dims(off, shape, strides):  # right until x[::-1, ::-2]
        return _abs_strides(off, shape, strides) if sum(s < 0 for s in strides) == 2 else extent(off, shape, strides)
    msg = failure(mt.exercises.check_extent, wrong_on_two_negative_dims)
    assert msg.startswith("for the view x[::-1, ::-2] (offset 23, shape (4, 3), strides (-6, -2)) you returned "
                          "(23, 45), but the view reads storage positions 1 to 23")
    assert "You took |stride| (dimension(s) [0, 1] have negative strides)" in msg
    assert msg.endswith("Here: lowest 1, highest 23.")

    def wrong_on_the_second_dim(off, shape, strides):  # x[2:, ::-1]: negative stride in dimension 1
        return _ignores_negative(off, shape, strides) if len(strides) == 2 and strides[1] < 0 else extent(
            off, shape, strides)
    msg = failure(mt.exercises.check_extent, wrong_on_the_second_dim)
    assert msg.startswith("for the view x[2:, ::-1] (offset 17, shape (2, 6), strides (6, -1)) you returned (17, 18)")
    assert "You ignored negative strides (dimension(s) [1] have negative strides)" in msg
    assert msg.endswith("Here: lowest 12, highest 23.")


def _only_on(view, wrong, right):
    """``right`` except on the layout ``view``: there ``wrong``."""
    return lambda *args: wrong(*args) if args == view else right(*args)


def test_every_negative_stride_view_gets_the_negative_stride_hints_with_its_numbers():
    """Each view with a negative stride (the visible ones, the first hidden ones), wrong only there in one of
    three ways (in turn): its numbers, the dimensions with a negative stride, the hint of that mistake."""
    mistakes = [(_ignores_negative, "You ignored negative strides"), (_abs_strides, "You took |stride|"),
                (_n_not_n_minus_1, "Off by one: the last index along a dimension of size n is n − 1")]
    for hidden in (False, True):
        cases = _with_hidden(ex._extent_cases) if hidden else ex._extent_cases()
        negative = [(name, ex._triple(v)) for name, v in cases if any(s < 0 for s in ex._triple(v)[2])]
        assert len(negative) >= 8
        tried = 0
        for name, (off, shape, strides) in negative[:6] if hidden else negative:
            p = _positions_by_hand(off, shape, strides)
            wrong, hint = mistakes[tried % 3]
            if min(p) == off or wrong(off, shape, strides) == (max(p), min(p)):
                continue  # the negative dimensions have size 1, or every stride is negative: reads as swapped
            tried += 1
            msg = failure(mt.exercises.check_extent, _only_on((off, shape, strides), wrong, extent), hidden=hidden)
            assert msg.startswith(f"for the view {name} (offset {off}, shape {shape}, strides {strides}) you returned "
                                  f"{wrong(off, shape, strides)}, but the view reads storage positions {min(p)} to "
                                  f"{max(p)} (bytes [{4 * min(p)}, {4 * max(p) + 4}) in 4-byte elements)."), (name, msg)
            assert hint in msg, (name, msg)
            if wrong is not _n_not_n_minus_1:
                assert f"(dimension(s) {[d for d, s in enumerate(strides) if s < 0]} have negative" in msg, name
                assert msg.endswith(f"Here: lowest {min(p)}, highest {max(p)}."), name
        assert tried >= 4


def test_an_extent_wrong_only_on_the_single_element_is_told_so():
    def no_zero_d(off, shape, strides):
        return None if not shape else extent(off, shape, strides)
    msg = failure(mt.exercises.check_extent, no_zero_d)
    assert msg.startswith("for the view x[2, 4] (offset 16, shape (), strides ()) your function returned None: "
                          "did you forget `return`?")


def test_an_extent_wrong_only_on_stride_0_fails_on_the_expand():
    def max_stride_0(off, shape, strides):  # a stride of 0 read as "up to the last element"
        lo, hi = extent(off, shape, strides)
        return lo, hi + sum(n - 1 for n, s in zip(shape, strides) if s == 0)
    msg = failure(mt.exercises.check_extent, max_stride_0)
    assert msg.startswith("for the view x[:, 3:4].expand(4, 5) (offset 3, shape (4, 5), strides (6, 0)) you "
                          "returned (3, 25), but the view reads storage positions 3 to 21")
    assert GENERIC_EXTENT in msg


@pytest.mark.parametrize("wrong, words", [
    (lambda off, shape, strides: None, "your function returned None: did you forget `return`?"),
    (lambda off, shape, strides: off, "you returned 0; return two ints (lowest, highest)."),
    (lambda off, shape, strides: (off,), "you returned (0,); return two ints (lowest, highest)."),
    (_a_string, "you returned '(0, 23)'; return two ints (lowest, highest)."),
    (_extent_raises, "your function raised IndexError: tuple index out of range"),
])
def test_an_extent_of_the_wrong_kind_is_told_what_to_return(wrong, words):
    msg = failure(mt.exercises.check_extent, wrong)
    assert msg.startswith("for the view x (offset 0, shape (4, 6), strides (6, 1)) " + words)


def test_an_extent_as_numpy_ints_or_a_list_passes(capsys):
    mt.exercises.check_extent(lambda off, shape, strides: [np.int64(e) for e in extent(off, shape, strides)])
    assert "✓ check_extent" in capsys.readouterr().out


def test_the_extent_pass_message_counts_the_views_tried(capsys):
    visible = _calls(mt.exercises.check_extent, extent)
    hidden = _calls(mt.exercises.check_extent, extent, hidden=True)
    out = capsys.readouterr().out
    assert cases_counted(out.split("(the hidden ones)")[0], "check_extent") == len(visible)
    assert re.search(f"✓ check_extent: all {len(hidden)} cases right \\(the hidden ones\\)", out)
    assert len(hidden) > len(visible) and hidden[:12] == visible[:12]


def test_the_extent_checker_is_called_with_the_views_layout():
    for (name, v), args in zip(ex._extent_cases(), _calls(mt.exercises.check_extent, extent)):
        assert args == (v.storage_offset(), tuple(v.shape), tuple(v.stride())), name


def test_the_extent_views_are_the_promised_kinds():
    cases = ex._extent_cases()
    for name, v in cases:
        assert _builds(name, v), name
    triples = [ex._triple(v) for _, v in cases]
    assert triples[0] == (0, (4, 6), (6, 1))                            # x itself first
    assert any(any(s < 0 for s in st) for _, _, st in triples)         # negative steps
    assert any(sum(s < 0 for s in st) >= 2 for _, _, st in triples)    # two of them at once
    assert any(0 in st for _, _, st in triples)                        # an expand
    assert any(sh == () for _, sh, _ in triples)                       # a single element
    assert any(len(sh) == 1 and st[0] > sh[0] for _, sh, st in triples if sh)  # a diagonal
    assert "x.T" in [n for n, _ in cases] and any("unfold" in n for n, _ in cases)
    assert any(n.startswith("s.as_strided(") and ex._triple(v)[2][0] < 0 for n, v in cases[:12])
    random = [n for n, v in cases if v.storage.nbytes == 64 * 4]  # _random_views over a 64-element storage
    assert len(random) >= 10 and all(n.startswith("s.as_strided(") for n in random)


def _random_views(n, hidden=False):
    return _with_hidden(lambda: ex._random_views(ex._big(), n)) if hidden else ex._random_views(ex._big(), n)


def test_the_random_views_are_up_to_3d_with_strides_minus_7_to_7_inside_the_storage():
    both = _random_views(40) + _random_views(60, hidden=True)
    ndims, sizes, strides, lows, highs = set(), set(), set(), [], []
    for name, v in both:
        off, shape, st = ex._triple(v)
        assert _builds(name, v), name
        assert v.storage is not None and v.storage.nbytes == 64 * 4
        ndims.add(len(shape))
        sizes |= set(shape)
        strides |= set(st)
        p = _positions_by_hand(off, shape, st)
        lows.append(min(p))
        highs.append(max(p))
    assert ndims == {1, 2, 3}
    assert sizes == {1, 2, 3, 4}
    assert strides == set(range(-7, 8))
    assert min(lows) == 0 and max(highs) == 63  # anywhere they fit, from the first to the last element
    assert min(lows) >= 0 and max(highs) <= 63


def test_the_random_views_are_reproducible_and_other_in_the_hidden_run():
    a, b = _random_views(10), _random_views(10)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert len(a) == 10 and len(_random_views(3)) == 3
    hidden = _random_views(10, hidden=True)
    assert [n for n, _ in hidden] != [n for n, _ in a]


def test_the_extent_reference_is_the_notebooks_hand_worked_values():
    x, s = mt.arange(24.).reshape(4, 6), mt.arange(30.)
    assert ex._positions(x).min() == 0 and ex._positions(x).max() == 23
    assert (ex._positions(x[1:3, 2:5]).min(), ex._positions(x[1:3, 2:5]).max()) == (8, 16)
    assert ex._positions(x[::-1, ::-2])[0, 0] == 23
    assert ex._positions(x.diagonal()).tolist() == [0, 7, 14, 21]
    assert ex._positions(mt.arange(10.).as_strided((3,), (-4,), 9)).tolist() == [9, 5, 1]
    assert ex._positions(x[:, 3:4].expand(4, 5)).tolist() == [[3] * 5, [9] * 5, [15] * 5, [21] * 5]
    p = ex._positions(s[::3])
    assert p.dtype == np.int64 and p.tolist() == list(range(0, 30, 3))


def test_the_positions_reference_agrees_with_numpy_as_strided_on_every_view():
    for name, v in ex._extent_cases() + _with_hidden(ex._extent_cases):
        off, shape, strides = ex._triple(v)
        assert np.array_equal(ex._positions(v), _np_view(shape, strides, off)), name


def test_the_view_description_gives_offset_shape_and_strides():
    assert ex._describe("x.T", mt.arange(24.).reshape(4, 6).T) == "x.T (offset 0, shape (6, 4), strides (1, 6))"


# ----------------------------------------------------------------------------------------------
# exercise 3 of the notebook: do two views share an element?
# ----------------------------------------------------------------------------------------------
def _not_close_means_shared(a, b):
    return shares_element(a, b) or not _by_extents(a, b)


def _never(a, b):
    return False


def _always(a, b):
    return True


def _same_offset(a, b):
    return a[0] == b[0]


def _alias_raises(a, b):
    return a[5]


EVEN_ODD = ("for a = x[:, ::2] (offset 0, shape (4, 3), strides (6, 2)) and b = x[:, 1::2] (offset 1, shape (4, 3), "
            "strides (6, 2))")
T_ROW = "for a = x.T (offset 0, shape (6, 4), strides (1, 6)) and b = x[2] (offset 12, shape (6,), strides (1,))"
HALVES = ("for a = x[:2] (offset 0, shape (2, 6), strides (6, 1)) and b = x[2:] (offset 12, shape (2, 6), "
          "strides (6, 1))")
REVERSED = ("for a = x[::-1] (offset 18, shape (4, 6), strides (-6, 1)) and b = x[3, 1:4] (offset 19, shape (3,), "
            "strides (1,))")
GCD_PAIR = ("for a = s[:20:6] (offset 0, shape (4,), strides (6,)) and b = s[4::10] (offset 4, shape (3,), "
            "strides (10,))")
EXPANDED = ("for a = x[:, 2:3].expand(4, 5) (offset 2, shape (4, 5), strides (6, 0)) and b = x.diagonal() "
            "(offset 0, shape (4,), strides (7,))")
LIST_THEM = "List every position each view reads (offset + Σ index·stride) and intersect the two sets."
MAY = "overlapping extents only mean they MAY share"
GCD = "(A gcd test cannot rule this pair out either"
ALIAS_MISTAKES = [  # (wrong answer, the pair it fails on, what the message says, words of the hint)
    (_never, T_ROW, "you said they share nothing, but they do: a[0, 2] and b[0] both read storage position 12.",
     LIST_THEM),
    (_always, EVEN_ODD, "you said they share an element, but they do not.", MAY),
    (_by_extents, EVEN_ODD, "you said they share an element, but they do not.", MAY),
    (_same_offset, T_ROW, "you said they share nothing, but they do", LIST_THEM),
    (_gcd_test, GCD_PAIR, "you said they share an element, but they do not.", GCD),
    (_not_close_means_shared, HALVES, "you said they share an element, but they do not.",
     "They are not even close: a spans positions 0..11, b spans 12..23."),
    (_positive_strides_only, REVERSED,
     "you said they share nothing, but they do: a[0, 1] and b[0] both read storage position 19.",
     "One of them has a negative stride"),
    (_without_stride_0, EXPANDED,
     "you said they share nothing, but they do: a[2, 0] and b[2] both read storage position 14.",
     "A stride of 0 means every index along that dimension reads the same position; it still reads it."),
]


@pytest.mark.parametrize("wrong, pair, what, hint", ALIAS_MISTAKES, ids=[m[0].__name__ for m in ALIAS_MISTAKES])
def test_each_wrong_alias_answer_is_rejected_with_its_pair_and_hint(wrong, pair, what, hint):
    msg = failure(mt.exercises.check_alias_by_strides, wrong)
    assert msg.startswith(f"{pair} {what}")
    assert hint in msg


@pytest.mark.parametrize("wrong", [m[0] for m in ALIAS_MISTAKES], ids=[m[0].__name__ for m in ALIAS_MISTAKES])
def test_each_wrong_alias_answer_is_rejected_in_the_hidden_run_too(wrong):
    assert failure(mt.exercises.check_alias_by_strides, wrong, hidden=True).startswith("for a = ")


def test_an_extents_only_answer_is_shown_both_position_sets():
    msg = failure(mt.exercises.check_alias_by_strides, _by_extents)
    assert msg == (EVEN_ODD + " you said they share an element, but they do not.\nTheir extents overlap (a spans 0..22, "
                   "b spans 1..23), but overlapping extents only mean they MAY share: a reads positions {0, 2, 4, 6, "
                   "8, 10, 12, 14, 16, 18, 20, 22}, b reads {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}, and no "
                   "position is in both. Compare the positions, not the ranges.")


def test_the_gcd_remark_comes_only_when_the_offsets_pass_the_gcd_test():
    msg = failure(mt.exercises.check_alias_by_strides, _gcd_test)
    assert msg.startswith(GCD_PAIR)
    assert ("a reads positions {0, 6, 12, 18}, b reads {4, 14, 24}, and no position is in both. Compare the "
            "positions, not the ranges. (A gcd test cannot rule this pair out either: the offsets differ by a "
            "multiple of the gcd of the strides. Passing it still only means 'may'.)") in msg

    def wrong_on_the_interleaved_thirds(a, b):  # s[::3] vs s[1::3]: gcd 3, offsets 1 apart
        return True if (a[2], b[2]) == ((3,), (3,)) else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_interleaved_thirds)
    assert msg.startswith("for a = s[::3] (offset 0, shape (10,), strides (3,)) and b = s[1::3] (offset 1, shape (10,), "
                          "strides (3,)) you said they share an element, but they do not.")
    assert "a spans 0..27, b spans 1..28" in msg and GCD not in msg

    def wrong_on_the_windows(a, b):  # s.unfold(0, 2, 5) vs s[3::5]: gcd 1 divides everything
        return True if a[2] == (5, 1) and b[0] == 3 else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_windows)
    assert msg.startswith("for a = s.unfold(0, 2, 5) (offset 0, shape (6, 2), strides (5, 1)) and b = s[3::5]")
    assert GCD in msg

    def wrong_on_the_expands(a, b):  # stride 0 in both: gcd(6, 0, 6, 0) = 6, offsets 1 apart
        return True if 0 in a[2] and 0 in b[2] else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_expands)
    assert msg.startswith("for a = x[:, 0:1].expand(4, 3) (offset 0, shape (4, 3), strides (6, 0)) and b = "
                          "x[:, 1:2].expand(4, 3) (offset 1, shape (4, 3), strides (6, 0)) you said they share an "
                          "element, but they do not.")
    assert "a reads positions {0, 6, 12, 18}, b reads {1, 7, 13, 19}" in msg and GCD not in msg


def test_the_position_list_stops_after_twelve():
    assert ex._some_positions(np.arange(20)[::-1]) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, …"
    assert ex._some_positions(np.array([5, 5, 3])) == "3, 5"
    assert ex._some_positions(np.arange(12)) == ", ".join(str(k) for k in range(12))
    assert ex._some_positions(np.arange(13), most=3) == "0, 1, 2, …"


def test_a_shared_element_is_named_by_its_index_in_each_view():
    def wrong_on_the_windows(a, b):  # s.unfold(0, 2, 5) vs s[6::10] share 6: window 1, element 1
        return False if a[2] == (5, 1) and b[0] == 6 else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_windows)
    assert msg.startswith("for a = s.unfold(0, 2, 5) (offset 0, shape (6, 2), strides (5, 1)) and b = s[6::10] "
                          "(offset 6, shape (3,), strides (10,)) you said they share nothing, but they do: a[1, 1] "
                          "and b[0] both read storage position 6.\n" + LIST_THEM)

    def wrong_on_the_diagonal(a, b):
        return False if a[2] == (7,) and b[0] == 18 else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_diagonal)
    assert "a[3] and b[3] both read storage position 21." in msg

    def wrong_on_the_fourths(a, b):
        return False if a[2] == (4,) and b[2] == (6,) else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_fourths)
    assert msg.startswith("for a = s[::4] (offset 0, shape (8,), strides (4,)) and b = s[2::6] (offset 2, shape (5,), "
                          "strides (6,)) you said they share nothing, but they do: a[2] and b[1] both read storage "
                          "position 8.")


def test_the_box_missing_column_0_is_told_its_extents_overlap():
    def wrong_on_the_box(a, b):
        return True if a[1] == (2, 4) else shares_element(a, b)
    msg = failure(mt.exercises.check_alias_by_strides, wrong_on_the_box)
    assert msg.startswith("for a = x[1:3, 1:5] (offset 7, shape (2, 4), strides (6, 1)) and b = x[:, 0] (offset 0, "
                          "shape (4,), strides (6,)) you said they share an element, but they do not.\nTheir extents "
                          "overlap (a spans 7..16, b spans 0..18)")
    assert "a reads positions {7, 8, 9, 10, 13, 14, 15, 16}, b reads {0, 6, 12, 18}" in msg and GCD in msg


@pytest.mark.parametrize("wrong, words", [
    (lambda a, b: None, "your function returned None: did you forget `return`?"),
    (lambda a, b: 1, "you returned 1; return True or False."),
    (lambda a, b: 0, "you returned 0; return True or False."),
    (lambda a, b: "no", "you returned 'no'; return True or False."),
    (_alias_raises, "your function raised IndexError: tuple index out of range"),
])
def test_an_alias_answer_of_the_wrong_kind_is_told_what_to_return(wrong, words):
    assert failure(mt.exercises.check_alias_by_strides, wrong).startswith(EVEN_ODD + " " + words)


def test_an_alias_answer_as_a_numpy_bool_passes(capsys):
    mt.exercises.check_alias_by_strides(lambda a, b: np.bool_(shares_element(a, b)))
    assert "✓ check_alias_by_strides" in capsys.readouterr().out


def test_the_alias_pass_message_counts_the_pairs_tried(capsys):
    visible = _calls(mt.exercises.check_alias_by_strides, shares_element)
    hidden = _calls(mt.exercises.check_alias_by_strides, shares_element, hidden=True)
    out = capsys.readouterr().out
    assert cases_counted(out.split("(the hidden ones)")[0], "check_alias_by_strides") == len(visible)
    assert re.search(f"✓ check_alias_by_strides: all {len(hidden)} cases right \\(the hidden ones\\)", out)
    assert len(hidden) > len(visible)


def test_the_alias_checker_is_called_with_both_layouts():
    for (na, va, nb, vb), args in zip(ex._alias_cases(), _calls(mt.exercises.check_alias_by_strides, shares_element)):
        assert args == (ex._triple(va), ex._triple(vb)), (na, nb)


def _np_shares(va, vb) -> bool:
    (oa, sha, sta), (ob, shb, stb) = ex._triple(va), ex._triple(vb)
    buf = np.arange(64, dtype=np.int64)
    a = np.lib.stride_tricks.as_strided(buf[oa:], sha, tuple(8 * s for s in sta))
    b = np.lib.stride_tricks.as_strided(buf[ob:], shb, tuple(8 * s for s in stb))
    return bool(np.shares_memory(a, b, max_work=None))


def test_the_alias_pairs_are_the_promised_kinds_and_numpy_agrees_with_the_reference():
    for hidden in (False, True):
        cases = _with_hidden(ex._alias_cases) if hidden else ex._alias_cases()
        kinds = {"yes": 0, "no": 0, "no, extents overlap": 0, "gcd passes, still no": 0,
                 "negative, yes": 0, "stride 0, yes": 0, "stride 0, no": 0, "windows": 0}
        for na, va, nb, vb in cases:
            assert _builds(na, va) and _builds(nb, vb), (na, nb)
            assert va.storage is not None and va.storage is vb.storage or va.storage.nbytes == vb.storage.nbytes
            want = bool(np.intersect1d(ex._positions(va), ex._positions(vb)).size)
            assert want == _np_shares(va, vb), (na, nb)
            (oa, _, sta), (ob, _, stb) = ex._triple(va), ex._triple(vb)
            (alo, ahi), (blo, bhi) = extent(*ex._triple(va)), extent(*ex._triple(vb))
            kinds["yes" if want else "no"] += 1
            if not want and alo <= bhi and blo <= ahi:
                kinds["no, extents overlap"] += 1
                g = np.gcd.reduce([abs(t) for t in sta + stb])
                kinds["gcd passes, still no"] += (ob - oa) % g == 0
            kinds["negative, yes"] += want and min(sta + stb) < 0
            kinds["stride 0, yes"] += want and 0 in sta + stb and min(sta + stb) >= 0
            kinds["stride 0, no"] += not want and 0 in sta + stb
            kinds["windows"] += "unfold" in na + nb
        assert all(kinds.values()), (hidden, kinds)
        random = [c for c in cases if c[0].startswith("s.as_strided(")]
        assert len(random) >= (30 if hidden else 8)
        assert {bool(np.intersect1d(ex._positions(c[1]), ex._positions(c[3])).size) for c in random} == {True, False}


def test_the_hidden_alias_pairs_keep_the_fixed_ones_and_add_other_random_ones():
    visible, hidden = ex._alias_cases(), _with_hidden(ex._alias_cases)
    names = lambda cases: [(c[0], c[2]) for c in cases]  # noqa: E731
    fixed = [c for c in names(visible) if not c[0].startswith("s.as_strided(")]
    assert len(fixed) == 13 and names(hidden)[:13] == fixed
    assert set(names(hidden)[13:]).isdisjoint(names(visible)[13:])


# ----------------------------------------------------------------------------------------------
# exercise 2 of the notebook: sliding windows as strides
# ----------------------------------------------------------------------------------------------
def _one_short(n, st, size, step):
    return ((n - size) // step, size), (step * st, st)


def _too_many(n, st, size, step):
    return (-(-n // step), size), (step * st, st)


def _far_too_few(n, st, size, step):
    return (n // size, size), (step * st, st)


def _contiguous(n, st, size, step):
    return ((n - size) // step + 1, size), (step, 1)


def _strides_swapped(n, st, size, step):
    return ((n - size) // step + 1, size), (st, step * st)


def _shape_swapped(n, st, size, step):
    return (size, (n - size) // step + 1), (step * st, st)


def _inner_stride_1(n, st, size, step):
    return ((n - size) // step + 1, size), (step * st, 1)


def _size_for_step(n, st, size, step):
    return ((n - size) // step + 1, size), (size * st, st)


def _three_dims(n, st, size, step):
    return ((n - size) // step + 1, size, 1), (step * st, st, 1)


def _wrong_window_size(n, st, size, step):
    return ((n - size) // step + 1, step), (step * st, st)


def _abs_stride(n, st, size, step):
    return windows(n, abs(st), size, step)


def _windows_raises(n, st, size, step):
    return (n - size) // (step - step)


FIRST = "for windows of size 3, step 1 over the signal s[:10] (length 10, stride 1)"
SECOND = "for windows of size 4, step 2 over the signal s[:10] (length 10, stride 1)"
EVERY_OTHER = "for windows of size 3, step 1 over the signal s[::2] (length 15, stride 2)"
REVERSED_SIGNAL = "for windows of size 3, step 2 over the signal s[9::-1] (length 10, stride -1)"
WINDOW_MISTAKES = [  # (wrong answer, the case it fails on, what it returned, what is right, words of the hint)
    (_one_short, FIRST, "shape (7, 3), strides (1, 1)", "shape (8, 3), strides (1, 1)",
     "One window short: window w starts at w·step and ends at w·step + size − 1, which must be ≤ length − 1"),
    (_too_many, FIRST, "shape (10, 3), strides (1, 1)", "shape (8, 3), strides (1, 1)",
     "Too many windows: one that starts too late would run past the end of the signal (its last element must be "
     "≤ 9). Count = (length − size) // step + 1."),
    (_far_too_few, FIRST, "shape (3, 3), strides (1, 1)", "shape (8, 3), strides (1, 1)",
     "Count the windows: (length − size) // step + 1."),
    (_contiguous, EVERY_OTHER, "shape (13, 3), strides (1, 1)", "shape (13, 3), strides (2, 2)",
     "You assumed the signal is contiguous. Its elements are 2 storage positions apart, so one step inside a window "
     "moves 2, and the next window starts step·stride = 2 positions later."),
    (_strides_swapped, SECOND, "shape (4, 4), strides (1, 2)", "shape (4, 4), strides (2, 1)",
     "The strides are swapped"),
    (_shape_swapped, FIRST, "shape (3, 8), strides (1, 1)", "shape (8, 3), strides (1, 1)", "Window index first"),
    (_inner_stride_1, EVERY_OTHER, "shape (13, 3), strides (2, 1)", "shape (13, 3), strides (2, 2)",
     "Inside a window you move one signal element at a time: 2 storage positions (the signal's stride)."),
    (_size_for_step, FIRST, "shape (8, 3), strides (3, 1)", "shape (8, 3), strides (1, 1)",
     "The next window starts step = 1 signal elements later: step·stride = 1 storage positions."),
    (_three_dims, FIRST, "shape (8, 3, 1), strides (1, 1, 1)", "shape (8, 3), strides (1, 1)",
     "Two dimensions: which window (first), and where inside the window (second)."),
    (_wrong_window_size, FIRST, "shape (8, 1), strides (1, 1)", "shape (8, 3), strides (1, 1)",
     "Each window holds size = 3 elements: the second dimension has size 3."),
    (_abs_stride, REVERSED_SIGNAL, "shape (4, 3), strides (2, 1)", "shape (4, 3), strides (-2, -1)",
     "You assumed the signal is contiguous. Its elements are -1 storage positions apart"),
]


@pytest.mark.parametrize("wrong, case, got, want, hint", WINDOW_MISTAKES, ids=[m[0].__name__ for m in WINDOW_MISTAKES])
def test_each_wrong_window_layout_is_rejected_with_its_case_and_hint(wrong, case, got, want, hint):
    msg = failure(mt.exercises.check_windows, wrong)
    assert msg.startswith(f"{case} you returned {got}; the windows have {want}.\n")
    assert hint in msg


@pytest.mark.parametrize("wrong", [m[0] for m in WINDOW_MISTAKES], ids=[m[0].__name__ for m in WINDOW_MISTAKES])
def test_each_wrong_window_layout_is_rejected_in_the_hidden_run_too(wrong):
    assert failure(mt.exercises.check_windows, wrong, hidden=True).startswith("for windows of size ")


def test_windows_wrong_only_with_a_tail_fail_on_the_tail_case():
    def tail_counted(n, st, size, step):  # a last, shorter window for the tail
        return (-(-(n - size) // step) + 1, size), (step * st, st)
    msg = failure(mt.exercises.check_windows, tail_counted)
    assert msg.startswith("for windows of size 4, step 3 over the signal s[:11] (length 11, stride 1) you returned "
                          "shape (4, 4), strides (3, 1); the windows have shape (3, 4), strides (3, 1).\nToo many "
                          "windows: one that starts too late would run past the end of the signal (its last element "
                          "must be ≤ 10).")


def test_windows_wrong_only_on_a_single_window_fail_on_it():
    def never_one(n, st, size, step):
        (count, k), strides = windows(n, st, size, step)
        return (max(count, 2), k), strides
    msg = failure(mt.exercises.check_windows, never_one)
    assert msg.startswith("for windows of size 8, step 1 over the signal s[:8] (length 8, stride 1) you returned "
                          "shape (2, 8), strides (1, 1); the windows have shape (1, 8), strides (1, 1).")


def test_windows_wrong_only_on_a_larger_stride_fail_on_the_thirds():
    def stride_2_at_most(n, st, size, step):
        return windows(n, min(st, 2), size, step)
    msg = failure(mt.exercises.check_windows, stride_2_at_most)
    assert msg.startswith("for windows of size 2, step 2 over the signal s[1:22:3] (length 7, stride 3) you returned "
                          "shape (3, 2), strides (4, 2); the windows have shape (3, 2), strides (6, 3).\nInside a window "
                          "you move one signal element at a time: 3 storage positions")


def test_windows_wrong_only_on_random_signals_are_told_the_signal():
    fixed = [args for args in _calls(mt.exercises.check_windows, windows)][:8]

    def wrong_off_the_fixed_cases(n, st, size, step):
        return windows(n, st, size, step) if (n, st, size, step) in fixed else _one_short(n, st, size, step)
    msg = failure(mt.exercises.check_windows, wrong_off_the_fixed_cases)
    m = re.match(r"for windows of size (\d+), step (\d+) over the signal (s\.as_strided\(\((\d+),\), \((-?\d+),\), "
                 r"(\d+)\)) \(length (\d+), stride (-?\d+)\)", msg)
    assert m, msg
    assert m.group(4) == m.group(7) and m.group(5) == m.group(8)
    sig = eval(m.group(3), {"s": mt.arange(30.)})  # noqa: S307
    assert sig.shape == (int(m.group(7)),) and sig.stride() == (int(m.group(8)),)


@pytest.mark.parametrize("wrong, words", [
    (lambda n, st, size, step: None, "your function returned None: did you forget `return`?"),
    (lambda n, st, size, step: (n, size), "you returned (10, 3); return (shape, strides), two tuples of two ints."),
    (lambda n, st, size, step: ((n, size), (st, step), (1,)),
     "you returned ((10, 3), (1, 1), (1,)); return (shape, strides), two tuples of two ints."),
    (lambda n, st, size, step: (("a", size), (st, st)),
     "you returned (('a', 3), (1, 1)); return (shape, strides), two tuples of two ints."),
    (_windows_raises, "your function raised ZeroDivisionError: integer division or modulo by zero"),
])
def test_a_window_layout_of_the_wrong_kind_is_told_what_to_return(wrong, words):
    assert failure(mt.exercises.check_windows, wrong).startswith(FIRST + " " + words)


def test_windows_as_lists_of_numpy_ints_pass(capsys):
    def as_lists(n, st, size, step):
        shape, strides = windows(n, st, size, step)
        return [np.int64(k) for k in shape], [np.int64(k) for k in strides]
    mt.exercises.check_windows(as_lists)
    assert "✓ check_windows" in capsys.readouterr().out


def test_the_windows_pass_message_counts_the_signals_tried(capsys):
    visible = _calls(mt.exercises.check_windows, windows)
    hidden = _calls(mt.exercises.check_windows, windows, hidden=True)
    out = capsys.readouterr().out
    assert cases_counted(out.split("(the hidden ones)")[0], "check_windows") == len(visible)
    assert re.search(f"✓ check_windows: all {len(hidden)} cases right \\(the hidden ones\\)", out)
    assert len(hidden) > len(visible) and hidden[:8] == visible[:8]


def test_the_windows_checker_is_called_with_the_signals_length_and_stride():
    for (name, sig, size, step), args in zip(ex._window_cases(), _calls(mt.exercises.check_windows, windows)):
        assert args == (sig.shape[0], sig.stride(0), size, step), name


def _sliding(length, stride, size, step, offset):
    a = np.lib.stride_tricks.as_strided(np.arange(64, dtype=np.int64)[offset:], (length,), (8 * stride,))
    w = np.lib.stride_tricks.sliding_window_view(a, size)[::step]
    return (w.shape, tuple(s // 8 for s in w.strides)), w


def test_the_window_reference_is_numpys_sliding_window_view_and_the_notebooks_values():
    assert ex._reference_windows(10, 1, 3, 1) == ((8, 3), (1, 1))
    assert ex._reference_windows(11, 1, 4, 3) == ((3, 4), (3, 1))
    assert ex._reference_windows(10, -1, 3, 2) == ((4, 3), (-2, -1))
    assert ex._reference_windows(15, 2, 3, 1) == ((13, 3), (2, 2))
    assert ex._reference_windows(10_000, 1, 32, 1) == ((9969, 32), (1, 1))
    for length in range(1, 13):
        for stride in (1, 2, -1, -3):
            for size in range(1, length + 1):
                for step in range(1, 6):
                    off = (length - 1) * -stride if stride < 0 else 0
                    want, _ = _sliding(length, stride, size, step, off)
                    assert ex._reference_windows(length, stride, size, step) == want, (length, stride, size, step)


def test_the_window_cases_are_the_promised_kinds():
    for hidden in (False, True):
        cases = _with_hidden(ex._window_cases) if hidden else ex._window_cases()
        assert len(cases) >= (38 if hidden else 16)
        seen = {"tail": 0, "side by side": 0, "overlap": 0, "one window": 0, "stride > 1": 0,
                "negative": 0, "random": 0}
        for name, sig, size, step in cases:
            assert _builds(name, sig), name
            length, stride = sig.shape[0], sig.stride(0)
            assert 1 <= size <= length and step >= 1
            (count, _), _ = ex._reference_windows(length, stride, size, step)
            (shape, strides), w = _sliding(length, stride, size, step, sig.storage_offset())
            assert np.array_equal(w, sig.as_strided((count, size), (step * stride, stride)).numpy()), name
            seen["tail"] += (length - size) % step != 0
            seen["side by side"] += step == size and count > 1
            seen["overlap"] += step < size and count > 1
            seen["one window"] += count == 1
            seen["stride > 1"] += stride > 1
            seen["negative"] += stride < 0
            seen["random"] += name.startswith("s.as_strided(")
        assert all(seen.values()), (hidden, seen)


def test_the_random_signals_are_reproducible_and_other_in_the_hidden_run():
    s = mt.arange(30.)
    a, b = ex._random_signals(s, 30), ex._random_signals(s, 30)
    hidden = _with_hidden(lambda: ex._random_signals(s, 30))
    key = lambda cases: [(n, size, step) for n, _, size, step in cases]  # noqa: E731
    assert key(a) == key(b) and key(a) != key(hidden)
    assert len(ex._random_signals(s, 5)) == 5
    strides = {sig.stride(0) for _, sig, _, _ in a + hidden}
    assert strides == {1, 2, 3, -1, -2}
    steps = {step for _, _, _, step in a + hidden}
    assert steps == {1, 2, 3, 4}
    sizes_at_full_length = [size == sig.shape[0] for _, sig, size, _ in a + hidden]
    assert any(sizes_at_full_length) and not all(sizes_at_full_length)
    for name, sig, size, step in a + hidden:
        assert sig.storage is s.storage and 1 <= sig.shape[0] and size <= sig.shape[0]
        p = ex._positions(sig)
        assert p.min() == 0 and p.max() <= 29, name  # the signal starts at position 0 (its first or last element)
    assert max(sig.shape[0] * abs(sig.stride(0)) for _, sig, _, _ in a + hidden) >= 28


# ----------------------------------------------------------------------------------------------
# exercise 4 of the notebook: the strides of a view, or None
# ----------------------------------------------------------------------------------------------
def _contiguous_always(shape, strides, new_shape):
    out, acc = [], 1
    for n in reversed(new_shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _never_none(shape, strides, new_shape):
    got = view_strides(shape, strides, new_shape)
    return got if got is not None else _contiguous_always(shape, strides, new_shape)


def _always_none(shape, strides, new_shape):
    return None


def _old_strides(shape, strides, new_shape):
    return tuple(strides)


def _last_stride_1(shape, strides, new_shape):
    return view_strides(shape, tuple(strides[:-1]) + (1,), new_shape)


def _none_when_not_contiguous(shape, strides, new_shape):
    return _contiguous_always(shape, strides, new_shape) if tuple(strides) == _contiguous_always(
        shape, strides, shape) else None


def _view_raises(shape, strides, new_shape):
    return strides[7]


FIRST_VIEW = "for x[:, 1:5]: shape (4, 4), strides (6, 1), viewed as (4, 2, 2):"
MUST_COPY = "for x[:, 1:5]: shape (4, 4), strides (6, 1), viewed as (16,):"
VIEW_MISTAKES = [  # (wrong answer, the case it fails on, the message after it, words of the hint)
    (_contiguous_always, FIRST_VIEW,
     "your strides (4, 2, 1) read the storage positions [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]…, but the view's "
     "elements are at [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15]… (numpy gives strides (6, 2, 1)).",
     "Those are the strides of a contiguous tensor of the new shape: right only if the old view was contiguous."),
    (_always_none, FIRST_VIEW, "you returned None, but a view exists: strides (6, 2, 1).", "one contiguous run"),
    (_none_when_not_contiguous, FIRST_VIEW, "you returned None, but a view exists: strides (6, 2, 1).",
     "or they are of size 1 (any stride)."),
    (_never_none, MUST_COPY, "you returned strides (1,), but no view can do it", "Group the old dimensions into runs"),
    (_old_strides, FIRST_VIEW, "you returned 2 strides for 3 dimensions.", ""),
    (_last_stride_1, "for x.T: shape (6, 4), strides (1, 6), viewed as (3, 2, 4):",
     "your strides (2, 1, 1) read the storage positions [0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5]…, but the view's "
     "elements are at [0, 6, 12, 18, 1, 7, 13, 19, 2, 8, 14, 20]… (numpy gives strides (2, 1, 6)).",
     "Within a run, the new strides are the run's last stride times the product of the new sizes"),
    (_view_raises, FIRST_VIEW, "your function raised IndexError: tuple index out of range", ""),
    (lambda shape, strides, new_shape: "6, 2, 1", FIRST_VIEW,
     "you returned '6, 2, 1'; return a tuple of ints (one stride per new dimension) or None.", ""),
]


@pytest.mark.parametrize("wrong, case, what, hint", VIEW_MISTAKES, ids=[
    getattr(m[0], "__name__", "string").replace("<lambda>", "a_string") for m in VIEW_MISTAKES])
def test_each_wrong_view_strides_is_rejected_with_its_case_and_hint(wrong, case, what, hint):
    msg = failure(mt.exercises.check_view_strides, wrong)
    assert msg.startswith(f"{case} your function raised" if wrong is _view_raises else f"{case}\n")
    assert what in msg and hint in msg


@pytest.mark.parametrize("wrong", [m[0] for m in VIEW_MISTAKES], ids=[
    getattr(m[0], "__name__", "string").replace("<lambda>", "a_string") for m in VIEW_MISTAKES])
def test_each_wrong_view_strides_is_rejected_in_the_hidden_run_too(wrong):
    assert failure(mt.exercises.check_view_strides, wrong, hidden=True).startswith("for ")


def test_the_last_stride_1_mistake_is_shown_where_the_positions_part():
    msg = failure(mt.exercises.check_view_strides, _last_stride_1)
    lines = msg.split("\n")
    assert lines[0] == "for x.T: shape (6, 4), strides (1, 6), viewed as (3, 2, 4):"
    got = re.search(r"read the storage positions (\[.*?\])…, but the view's elements are at (\[.*?\])…", lines[1])
    want = _positions_by_hand(0, (6, 4), (1, 6))
    assert got and got.group(2) == str(want[:12])
    assert got.group(1) == str(_positions_by_hand(0, (3, 2, 4), (2, 1, 1))[:12])
    assert lines[1].endswith("(numpy gives strides (2, 1, 6)).")


def test_view_strides_that_break_only_the_random_views_are_told_the_random_view():
    fixed = _calls(mt.exercises.check_view_strides, view_strides)[:30]

    def only_fixed(shape, strides, new_shape):
        return view_strides(shape, strides, new_shape) if (shape, strides, new_shape) in fixed else _never_none(
            shape, strides, new_shape)
    msg = failure(mt.exercises.check_view_strides, only_fixed)
    m = re.match(r"for a random view of shape (\(\d+, \d+, \d+\)): shape (\(\d+, \d+, \d+\)), strides", msg)
    assert m and m.group(1) == m.group(2), msg


def test_strides_of_size_1_dimensions_are_free(capsys):
    def odd_size_1_strides(shape, strides, new_shape):
        got = view_strides(shape, strides, new_shape)
        return got if got is None else tuple(999 if n == 1 else s for n, s in zip(new_shape, got))
    mt.exercises.check_view_strides(odd_size_1_strides)
    mt.exercises.check_view_strides(odd_size_1_strides, hidden=True)
    assert capsys.readouterr().out.count("✓ check_view_strides") == 2


def _torch_view_strides(shape, strides, new_shape):
    t = torch.zeros(1024, dtype=torch.float64).as_strided(shape, strides)
    try:
        return tuple(t.view(new_shape).stride())
    except RuntimeError:
        return None


def test_torchs_view_passes_the_checker_visible_and_hidden(capsys):
    if torch is None:
        pytest.skip("torch is not installed")
    mt.exercises.check_view_strides(_torch_view_strides)
    mt.exercises.check_view_strides(_torch_view_strides, hidden=True)
    assert capsys.readouterr().out.count("✓ check_view_strides") == 2


def test_the_view_reference_agrees_with_torch_on_every_case():
    if torch is None:
        pytest.skip("torch is not installed")
    cases = vs._view_cases() + _with_hidden(vs._view_cases)
    for what, shape, strides, new_shape in cases:
        want, torch_says = vs._numpy_view_strides(shape, strides, new_shape), _torch_view_strides(shape, strides,
                                                                                                  new_shape)
        assert (want is None) == (torch_says is None), (what, shape, strides, new_shape)
        if want is not None:
            assert all(type(s) is int for s in want) and len(want) == len(new_shape)
            assert vs._positions_of(new_shape, want).tolist() == _positions_by_hand(0, shape, strides)
            assert all(a == b for n, a, b in zip(new_shape, want, torch_says) if n != 1), what


def test_the_view_reference_by_hand():
    assert vs._numpy_view_strides((4, 6), (6, 1), (24,)) == (1,)
    assert vs._numpy_view_strides((6, 4), (1, 6), (24,)) is None          # x.T.view(-1) refuses
    assert vs._numpy_view_strides((4, 3), (6, 2), (4, 3, 1))[:2] == (6, 2)  # x[:, ::2] as (4, 3, 1)
    assert vs._numpy_view_strides((3, 6), (6, 1), (3, 2, 3)) == (6, 3, 1)   # x[1:].view(3, 2, 3)
    assert vs._numpy_view_strides((4, 4), (6, 1), (16,)) is None
    assert vs._numpy_view_strides((4, 5), (6, 0), (2, 2, 5)) == (12, 6, 0)
    assert vs._numpy_view_strides((2, 3), (3, 1), (7,)) is None             # another number of elements


def test_positions_of_is_offset_plus_index_times_strides_in_c_order():
    for shape, strides in [((4, 6), (6, 1)), ((6, 4), (1, 6)), ((2, 3, 4), (1, 8, 2)), ((3,), (-2,)),
                           ((4, 5), (6, 0)), ((1, 1, 6), (6, 6, 1)), ((), ())]:
        got = vs._positions_of(shape, strides)
        assert got.tolist() == _positions_by_hand(0, shape, strides), shape
        assert got.dtype == np.int64


def test_the_view_strides_pass_message_counts_the_cases_tried(capsys):
    visible = _calls(mt.exercises.check_view_strides, view_strides)
    hidden = _calls(mt.exercises.check_view_strides, view_strides, hidden=True)
    out = capsys.readouterr().out
    assert cases_counted(out.split("(the hidden ones)")[0], "check_view_strides") == len(visible)
    assert re.search(f"✓ check_view_strides: all {len(hidden)} cases right \\(the hidden ones\\)", out)
    assert len(hidden) > len(visible)


def test_the_view_strides_checker_is_called_with_each_cases_layout():
    for (what, shape, strides, new_shape), args in zip(vs._view_cases(),
                                                       _calls(mt.exercises.check_view_strides, view_strides)):
        assert args == (shape, strides, new_shape), what


def test_the_view_cases_are_the_promised_kinds():
    for hidden in (False, True):
        cases = _with_hidden(vs._view_cases) if hidden else vs._view_cases()
        kinds = {"refuses": 0, "a view": 0, "transpose": 0, "steps": 0, "expand": 0, "permutation": 0,
                 "size-1 dims": 0, "random refuses": 0, "random view": 0, "random stepped": 0, "random whole": 0}
        for what, shape, strides, new_shape in cases:
            assert math.prod(new_shape) == math.prod(shape), (what, new_shape)
            m = re.fullmatch(r"a random view of shape (\(.*\))", what)
            if m:
                assert eval(m.group(1)) == shape  # noqa: S307
                assert len(new_shape) == 3
                refuses = vs._numpy_view_strides(shape, strides, new_shape) is None
                kinds["random refuses" if refuses else "random view"] += 1
                kinds["random stepped" if math.prod(shape) < 24 else "random whole"] += 1
                assert sorted(strides) in ([1, 4, 12], [2, 4, 12], [1, 8, 12], [1, 4, 24]), strides
                continue
            v = eval(what.replace(" (4, 6), contiguous", ""), {"x": mt.arange(24.).reshape(4, 6)})  # noqa: S307
            assert (tuple(v.shape), tuple(v.stride())) == (shape, strides), what
            if what.startswith("x (4, 6)"):
                assert (shape, strides) == ((4, 6), (6, 1))
            refuses = vs._numpy_view_strides(shape, strides, new_shape) is None
            kinds["refuses" if refuses else "a view"] += 1
            kinds["transpose"] += what == "x.T"
            kinds["steps"] += "::" in what
            kinds["expand"] += 0 in strides
            kinds["permutation"] += "permute" in what
            kinds["size-1 dims"] += 1 in new_shape
        assert all(kinds.values()), (hidden, kinds)
        assert len([c for c in cases if c[0].startswith("a random view")]) >= (40 if hidden else 10)


def test_the_hidden_view_cases_keep_the_real_views_and_draw_other_random_ones():
    visible, hidden = vs._view_cases(), _with_hidden(vs._view_cases)
    fixed = [c for c in visible if not c[0].startswith("a random view")]
    assert hidden[:len(fixed)] == fixed
    assert hidden[len(fixed):len(visible)] != visible[len(fixed):]


# ----------------------------------------------------------------------------------------------
# the engine's answers are switched off while the learner's function runs
# ----------------------------------------------------------------------------------------------
def _layout(off, shape, strides):
    return mt.memory.aliasing.Layout(0, int(off), tuple(shape), tuple(strides), 1, 0)


REFUSED = [
    ("check_extent", "extent", lambda off, shape, strides: _layout(off, shape, strides).extent(),
     "microtorch.memory.aliasing.Layout.extent"),
    ("check_extent", "extent", lambda off, shape, strides: _layout(off, shape, strides).byte_extent(),
     "microtorch.memory.aliasing.Layout.byte_extent"),
    ("check_extent", "extent", lambda off, shape, strides: _layout(off, shape, strides).addresses(),
     "microtorch.memory.aliasing.Layout.addresses"),
    ("check_extent", "extent", lambda off, shape, strides: mt.memory.byte_extent(mt.zeros(64)),
     "microtorch.memory.aliasing.byte_extent"),
    ("check_extent", "extent", lambda off, shape, strides: mt.memory.aliasing.byte_ranges(mt.zeros(4)),
     "microtorch.memory.aliasing.byte_ranges"),
    ("check_extent", "extent", lambda off, shape, strides: mt.exercises.fallbacks.extent(off, shape, strides),
     "microtorch.exercises.fallbacks.extent"),
    ("check_alias_by_strides", "shares_element", lambda a, b: mt.memory.alias(_layout(*a), _layout(*b)),
     "microtorch.memory.aliasing.alias"),
    ("check_alias_by_strides", "shares_element", lambda a, b: mt.memory.overlaps_itself(mt.zeros(3)),
     "microtorch.memory.aliasing.overlaps_itself"),
    ("check_alias_by_strides", "shares_element", lambda a, b: bool(np.shares_memory(np.zeros(3), np.zeros(3))),
     "numpy.shares_memory"),
    ("check_alias_by_strides", "shares_element", lambda a, b: bool(np.may_share_memory(np.zeros(3), np.zeros(3))),
     "numpy.may_share_memory"),
    ("check_alias_by_strides", "shares_element", lambda a, b: mt.exercises.fallbacks.shares_element(a, b),
     "microtorch.exercises.fallbacks.shares_element"),
    ("check_windows", "windows", lambda n, st, size, step: mt.zeros(n).unfold(0, size, step),
     "microtorch.tensor.Tensor.unfold"),
    ("check_windows", "windows", lambda n, st, size, step: mt.functions.strided.unfold(mt.zeros(n), 0, size, step),
     "microtorch.functions.strided.unfold"),
    ("check_windows", "windows", lambda n, st, size, step: mt.exercises.fallbacks.windows(n, st, size, step),
     "microtorch.exercises.fallbacks.windows"),
    ("check_view_strides", "view_strides", lambda shape, strides, new: mt.zeros(24).view(*new).stride(),
     "microtorch.tensor.Tensor.view"),
    ("check_view_strides", "view_strides", lambda shape, strides, new: mt.zeros(24).reshape(*new).stride(),
     "microtorch.tensor.Tensor.reshape"),
    ("check_view_strides", "view_strides", lambda shape, strides, new: mt.functions.shape.view(mt.zeros(24), new),
     "microtorch.functions.shape.view"),
    ("check_view_strides", "view_strides", lambda shape, strides, new: mt.functions.shape.reshape(mt.zeros(24), new),
     "microtorch.functions.shape.reshape"),
    ("check_view_strides", "view_strides", lambda shape, strides, new: mt.zeros(99).as_strided(shape, strides),
     "microtorch.tensor.Tensor.as_strided"),
    ("check_view_strides", "view_strides",
     lambda shape, strides, new: mt.functions.strided.as_strided(mt.zeros(99), shape, strides),
     "microtorch.functions.strided.as_strided"),
]


@pytest.mark.parametrize("check, exercise, engine, label", REFUSED, ids=[r[3] for r in REFUSED])
def test_the_engines_own_answer_is_switched_off(check, exercise, engine, label):
    msg = failure(getattr(mt.exercises, check), engine)
    assert (f"this exercise asks you to write {exercise} yourself: the engine's {label} is switched off") in msg


def test_the_engine_is_back_after_the_checkers():
    mt.exercises.check_view_strides(view_strides)
    mt.exercises.check_windows(windows)
    t = mt.arange(24.)
    assert t.view(4, 6).stride() == (6, 1) and t.reshape(2, 12).shape == (2, 12)
    assert t.unfold(0, 4, 4).shape == (6, 4) and t.as_strided((2,), (3,)).numpy().tolist() == [0.0, 3.0]
    assert np.shares_memory(t.numpy(), t.numpy())


def test_the_gcd_remark_is_right_on_every_random_pair_whose_extents_overlap_with_nothing_shared():
    tried = 0
    for hidden in (False, True):
        cases = _with_hidden(ex._alias_cases) if hidden else ex._alias_cases()
        for na, va, nb, vb in cases[13:]:
            a, b = ex._triple(va), ex._triple(vb)
            (alo, ahi), (blo, bhi) = extent(*a), extent(*b)
            if shares_element(a, b) or not (alo <= bhi and blo <= ahi):
                continue
            tried += 1
            msg = failure(mt.exercises.check_alias_by_strides, _only_on((a, b), _always, shares_element), hidden=hidden)
            assert msg.startswith(f"for a = {na} (offset {a[0]}, shape {a[1]}, strides {a[2]}) and b = {nb}"), msg
            assert f"(a spans {alo}..{ahi}, b spans {blo}..{bhi})" in msg
            g = math.gcd(*(abs(s) for s in a[2] + b[2]))
            assert (GCD in msg) == ((b[0] - a[0]) % g == 0), (na, nb, g)
    assert tried >= 1


def test_bytes_for_elements_are_told_so_on_a_view_not_starting_at_0():
    box = (8, (2, 3), (6, 1))  # x[1:3, 2:5]: positions 8..16, bytes [32, 68)
    msg = failure(mt.exercises.check_extent, _only_on(box, _in_bytes, extent))
    assert msg.startswith("for the view x[1:3, 2:5] (offset 8, shape (2, 3), strides (6, 1)) you returned (32, 68)")
    assert "Those are bytes ([start, stop)); count storage positions (elements): divide by 4." in msg


def test_three_window_dimensions_with_two_strides_are_told_two_dimensions():
    def three_dims_two_strides(n, st, size, step):
        (count, k), strides = windows(n, st, size, step)
        return (count, k, 1), strides
    msg = failure(mt.exercises.check_windows, three_dims_two_strides)
    assert msg.startswith(FIRST + " you returned shape (8, 3, 1), strides (1, 1); the windows have shape (8, 3)")
    assert "Two dimensions: which window (first), and where inside the window (second)." in msg


def test_swapped_strides_are_told_so_on_a_signal_with_stride_3():
    thirds = (7, 3, 2, 2)  # s[1:22:3], windows of 2 every 2
    msg = failure(mt.exercises.check_windows, _only_on(thirds, _strides_swapped, windows))
    assert msg.startswith("for windows of size 2, step 2 over the signal s[1:22:3] (length 7, stride 3) you returned "
                          "shape (3, 2), strides (3, 6); the windows have shape (3, 2), strides (6, 3).")
    assert "The strides are swapped" in msg


def test_a_wrong_step_stride_with_as_many_windows_as_their_size_is_told_the_step():
    square = (10, 1, 4, 2)  # s[:10], windows of 4 every 2: 4 windows of 4
    msg = failure(mt.exercises.check_windows, _only_on(square, _size_for_step, windows))
    assert msg.startswith(SECOND + " you returned shape (4, 4), strides (4, 1); the windows have shape (4, 4), "
                          "strides (2, 1).\nThe next window starts step = 2 signal elements later: step·stride = 2 "
                          "storage positions.")
