"""Mutation run 5, exercises/tensors.py: what the notebook-01 checkers show and which mistakes they catch.

For each checker: a catalogue of wrong answers (the mistakes the notebook and the checker's
hints warn about, each rejected on the visible and on the hidden cases, the right answer
accepted), the kinds of case the generators promise, case labels that describe their cases,
and the failure and pass messages a learner reads.
"""
import contextlib
import math
import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import checking, tensors

from checker_probes import failure
from test_exercise_checkers import _solutions


# -- helpers -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _hidden_mode():
    """The case generators as a hidden (autograded) run sees them."""
    before, checking._HIDDEN[0] = checking._HIDDEN[0], True
    try:
        yield
    finally:
        checking._HIDDEN[0] = before


def _both_case_sets(make):
    visible = make()
    with _hidden_mode():
        return visible, make()


def _recording(answer):
    """``answer`` wrapped so that every call's arguments are kept."""
    calls = []

    def fn(*args):
        calls.append(args)
        return answer(*args)
    return fn, calls


def _failure(check, fn, hidden=False):
    return failure(check, fn, hidden=hidden)


class _Keys:
    """``eval("x[...]", {"x": _Keys()})`` gives back the key the text spells."""

    def __getitem__(self, key):
        return key if isinstance(key, tuple) else (key,)


def _spelled_key(words):
    return eval(words, {"x": _Keys(), "__builtins__": {}})


def _layout_of(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


# -- right answers: notebook 01's solutions, and variants of them with one mistake each ---------
SOLUTION = _solutions("01_tensors_and_graphs")
contiguous_strides = SOLUTION["contiguous_strides"]
element_offset = SOLUTION["element_offset"]


def _in_range(k, n):
    return -n <= k < n


BOUNDS = {  # the bounds check of an int index, as the mistakes below write it
    "no_bounds_check": lambda k, n: True,
    "value_error_out_of_range": _in_range,  # raises ValueError where IndexError is due
    "allows_n": lambda k, n: -n <= k <= n,
    "allows_minus_n_minus_1": lambda k, n: -n - 1 <= k < n,
    "only_upper_bound": lambda k, n: k < n,
    "only_lower_bound": lambda k, n: k >= -n,
}


def slice_layout(shape, strides, offset, key, mistake=None):
    """The right layout of x[key]; ``mistake`` names one of the wrong variants below."""
    new_shape, new_strides = [], []
    if mistake == "ignores_input_offset":
        offset = 0
    for d, (n, s) in enumerate(zip(shape, strides)):
        k = key[d] if d < len(key) else slice(None)
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if mistake == "naive_slice":
                start, stop, step = k.start or 0, n if k.stop is None else k.stop, k.step or 1
            if mistake == "neg_step_starts_at_0" and k.start is None:
                first = 0
            elif mistake == "slice_start_unclipped" and k.start is not None:
                first = k.start
            else:
                first = start
            count = len(range(start, stop, step))
            if mistake == "floor_count":
                count = max(0, (stop - start) // step)
            if count and mistake != "slice_start_no_offset":
                offset += first * s
            new_shape.append(count)
            new_strides.append({"no_step": s, "abs_step": s * abs(step)}.get(mistake, s * step))
        else:
            if not BOUNDS.get(mistake, _in_range)(k, n):
                raise (ValueError if mistake == "value_error_out_of_range" else IndexError)(
                    f"index {k} is out of range for dimension {d} with size {n}")
            if mistake == "keep_int_dim":
                new_shape.append(1)
                new_strides.append(s)
            i = {"negative_as_is": k, "wraps_zero_too": k + n if k <= 0 else k}.get(mistake, k % n)
            if mistake != "int_no_offset":
                offset += i * s
    if mistake == "only_key_dims":
        return tuple(new_shape[:len(key)]), tuple(new_strides[:len(key)]), offset
    return tuple(new_shape), tuple(new_strides), offset


def unbroadcast(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return (g.sum(dim=dims, keepdim=True) if dims else g).reshape(shape)


# -- the pass message counts what was tried; hidden runs try more --------------------------------
RIGHT = [
    (mt.exercises.check_strides, contiguous_strides, "check_strides"),
    (mt.exercises.check_element_offset, element_offset, "check_element_offset"),
    (mt.exercises.check_slice_layout, slice_layout, "check_slice_layout"),
    (mt.exercises.check_unbroadcast, unbroadcast, "check_unbroadcast"),
]


@pytest.mark.parametrize("check, answer, name", RIGHT)
def test_the_pass_message_names_the_checker_and_counts_every_case_tried(check, answer, name, capsys):
    """The ✓ line names the checker and says how many cases the learner's function answered."""
    counts = []
    for hidden in (False, True):
        out, calls = [], []

        def fn(*args):
            out.append(capsys.readouterr().out)
            if "✓" not in "".join(out):  # not the engine's own tests run after the pass (unbroadcast)
                calls.append(args)
            return answer(*args)
        check(fn, hidden=hidden)
        first = ("".join(out) + capsys.readouterr().out).splitlines()[0]
        assert first == f"✓ {name}: all {len(calls)} cases right{' (the hidden ones)' if hidden else ''}."
        counts.append(len(calls))
    assert counts[1] > counts[0]  # the hidden run tries more cases than the visible one


# -- check_strides -------------------------------------------------------------------------------
STRIDE_MISTAKES = {
    "byte strides of float32": lambda shape: tuple(4 * s for s in contiguous_strides(shape)),
    "numpy's .strides (bytes of float64)": lambda shape: np.empty(shape).strides,
    "column-major": lambda shape: tuple(int(np.prod(shape[:d])) for d in range(len(shape))),
    "one stride missing": lambda shape: contiguous_strides(shape)[1:],
    "all ones": lambda shape: tuple(1 for _ in shape),
    "the shape itself": lambda shape: tuple(shape),
    "own size included": lambda shape: tuple(int(np.prod(shape[d:])) for d in range(len(shape))),
    "only the next size": lambda shape: tuple(shape[d + 1] if d + 1 < len(shape) else 1 for d in range(len(shape))),
    "stride 0 for a size-1 dim": lambda shape: tuple(0 if n == 1 else s for n, s in zip(shape, contiguous_strides(shape))),
    "reversed": lambda shape: contiguous_strides(shape)[::-1],
}


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("mistake", sorted(STRIDE_MISTAKES))
def test_check_strides_rejects_each_catalogued_mistake(mistake, hidden):
    """Every common strides mistake fails the checker, visible and hidden runs alike."""
    assert "for shape" in _failure(mt.exercises.check_strides, STRIDE_MISTAKES[mistake], hidden)


def test_numpys_own_byte_strides_get_the_byte_hint():
    """Returning numpy's .strides (bytes of float64) is told: strides count elements, not bytes."""
    assert "Those look like byte strides" in _failure(mt.exercises.check_strides, STRIDE_MISTAKES["numpy's .strides (bytes of float64)"])


def test_the_strides_reference_gives_ints_worked_out_by_hand():
    """The reference strides are Python ints equal to the product of the sizes to the right."""
    for shape in tensors.STRIDE_CASES + [(3, 1, 2, 7)]:
        want = tensors._numpy_strides(shape)
        assert want == contiguous_strides(shape) and all(type(s) is int for s in want), shape
    message = _failure(mt.exercises.check_strides, STRIDE_MISTAKES["all ones"])
    assert re.search(r"has strides \(\d+(, \d+)*,?\)\.", message), message  # printed as ints, not 3.0


# -- check_element_offset ------------------------------------------------------------------------
OFFSET_MISTAKES = {
    "offset left out": lambda idx, st, off: sum(i * s for i, s in zip(idx, st)),
    "strides reversed": lambda idx, st, off: off + sum(i * s for i, s in zip(idx, reversed(st))),
    "strides assumed in decreasing order": lambda idx, st, off: off + sum(
        i * s for i, s in zip(idx, sorted(st, reverse=True))),
    "index summed without strides": lambda idx, st, off: off + sum(idx),
    "off by one": lambda idx, st, off: off + sum(i * s for i, s in zip(idx, st)) + 1,
    "offset in bytes": lambda idx, st, off: 8 * off + sum(i * s for i, s in zip(idx, st)),
    "strides shifted by one": lambda idx, st, off: off + sum(i * s for i, s in zip(idx, tuple(st[1:]) + (1,))),
    "last index only": lambda idx, st, off: off + idx[-1] * st[-1],
}


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("mistake", sorted(OFFSET_MISTAKES))
def test_check_element_offset_rejects_each_catalogued_mistake(mistake, hidden):
    """Every common element-position mistake fails the checker, visible and hidden runs alike."""
    message = _failure(mt.exercises.check_element_offset, OFFSET_MISTAKES[mistake], hidden)
    assert "lives at storage position" in message


def test_element_offset_case_labels_build_the_views_they_name():
    """Each view's label, evaluated on x = arange(60.).reshape(3, 4, 5), is that very view."""
    x = mt.arange(60.).reshape(3, 4, 5)
    for cases in _both_case_sets(tensors._offset_cases):
        for label, view in cases:
            assert _layout_of(eval(label, {"x": x})) == _layout_of(view), label


def test_element_offset_random_views_permute_and_step():
    """The random views (the ones after the fixed list) include a real permutation and a step > 1."""
    base_strides = set(mt.arange(60.).reshape(3, 4, 5).stride())
    for cases in _both_case_sets(tensors._offset_cases):
        randoms = [view for label, view in cases if re.fullmatch(r"x\.permute\(\d, \d, \d\)\[.*\]", label)]
        assert randoms
        assert any(tuple(v.stride()) != tuple(sorted(v.stride(), reverse=True)) for v in randoms)
        assert any(set(v.stride()) - base_strides for v in randoms)


def test_element_offset_failure_names_the_view_and_element_it_was_called_for():
    """A function that raises is told which view and element it was asked about."""
    x = mt.arange(60.).reshape(3, 4, 5)
    fn, calls = _recording(lambda index, strides, offset: 1 / 0)
    message = _failure(mt.exercises.check_element_offset, fn)
    m = re.match(r"for view (.+), element (\(.*?\)), your function raised ZeroDivisionError", message)
    assert m, message
    index, strides, offset = calls[-1]
    assert eval(m.group(2)) == index and _layout_of(eval(m.group(1), {"x": x}))[1:] == (strides, offset)


def test_a_zero_d_element_view_reads_its_value_either_way():
    """view[()] of a 0-d view is the view itself, so reading it either way gives the same value."""
    v = mt.arange(60.).reshape(3, 4, 5)[1, 2, 3]
    assert v.shape == () and v[()].item() == v.item() == 33.0


# -- check_slice_layout --------------------------------------------------------------------------
LAYOUT_MISTAKES = ["keep_int_dim", "negative_as_is", "wraps_zero_too", "no_step", "abs_step", "naive_slice",
                   "floor_count", "slice_start_no_offset", "int_no_offset", "ignores_input_offset", "only_key_dims",
                   "neg_step_starts_at_0", "slice_start_unclipped"]


def _layout_mistake(mistake):
    return lambda shape, strides, offset, key: slice_layout(shape, strides, offset, key, mistake)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("mistake", LAYOUT_MISTAKES)
def test_check_slice_layout_rejects_each_catalogued_mistake(mistake, hidden):
    """Every common x[key]-layout mistake fails the checker, visible and hidden runs alike."""
    assert "the view has shape" in _failure(mt.exercises.check_slice_layout, _layout_mistake(mistake), hidden)


@pytest.mark.parametrize("mistake, hint", [
    ("int_no_offset", "(an int index counts as its start), even for a dimension an int removes."),
    ("wraps_zero_too", "The offset moves to the first element of the view"),
    ("abs_step", "A negative step walks backwards"),
    ("neg_step_starts_at_0", "The offset moves to the first element of the view"),
])
def test_slice_layout_mistakes_get_their_hint(mistake, hint):
    """Each mistake is told what it got wrong (an int's offset, a wrapped 0, a negative step's stride)."""
    assert hint in _failure(mt.exercises.check_slice_layout, _layout_mistake(mistake))


@pytest.mark.parametrize("hidden", [False, True])
def test_an_int_out_of_range_must_raise_index_error(hidden):
    """Notebook 01: an index out of range raises IndexError; a layout that wraps it around is rejected."""
    fn, calls = _recording(_layout_mistake("no_bounds_check"))
    message = _failure(mt.exercises.check_slice_layout, fn, hidden)
    shape, strides, offset, key = calls[-1]
    d = next(d for d, k in enumerate(key) if isinstance(k, int) and not -shape[d] <= k < shape[d])
    assert message.startswith(f"for x of shape {shape} and {tensors._slice_words(key)} (key = {key!r}): "
                              f"you returned {slice_layout(shape, strides, offset, key, 'no_bounds_check')!r}; ")
    assert (f"index {key[d]} is out of range for dimension {d} of size {shape[d]} (it takes -{shape[d]} ≤ i < "
            f"{shape[d]}): raise IndexError, as x[key] does.") in message


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("mistake", ["allows_n", "allows_minus_n_minus_1", "only_upper_bound", "only_lower_bound"])
def test_each_off_by_one_bounds_check_is_rejected(mistake, hidden):
    """k == n, k == -n - 1 and a check of one end only are caught, each told to raise IndexError."""
    message = _failure(mt.exercises.check_slice_layout, _layout_mistake(mistake), hidden)
    assert "is out of range for dimension" in message and "raise IndexError, as x[key] does." in message


def test_another_error_for_an_int_out_of_range_is_named():
    """A function that raises ValueError instead is told which error it raised and which one x[key] raises."""
    message = _failure(mt.exercises.check_slice_layout, _layout_mistake("value_error_out_of_range"))
    assert "your function raised ValueError: index" in message
    assert "raise IndexError, as x[key] does." in message


def test_out_of_range_cases_are_what_the_engine_refuses():
    """Each out-of-range case has exactly one int out of range, at the dimension it names, past either end and
    after a slice; the engine's own x[key] raises IndexError on it."""
    cases = tensors._out_of_range_cases()
    ends = set()
    for shape, strides, offset, key, d in cases:
        out = [i for i, k in enumerate(key) if isinstance(k, int) and not -shape[i] <= k < shape[i]]
        assert out == [d], key
        ends.add(key[d] < 0)
        with pytest.raises(IndexError):
            mt.arange(4096.).as_strided(shape, strides, offset)[key]
    assert ends == {True, False}
    assert any(isinstance(k, slice) for *_, key, d in cases for k in key[:d])
    assert {strides for _, strides, *_ in cases} == {(30, 6, 1), (1, 6, 30)}


def test_the_negative_index_hint_looks_at_the_negative_ints_only(monkeypatch):
    """On x[0, -2] an answer that takes -2 as is hears that a negative index counts from the end: the int 0
    beside it does not change the hint."""
    monkeypatch.setattr(tensors, "_layout_cases", lambda: [((4, 5, 6), (30, 6, 1), 0, (0, -2))])
    message = _failure(mt.exercises.check_slice_layout, _layout_mistake("negative_as_is"))
    assert "offset -12; the view has shape (6,), strides (1,), offset 18." in message
    assert "A negative index counts from the end: i < 0 means n + i." in message


def test_layout_cases_cover_the_promised_layouts_and_keys():
    """The docstring's cases: a fresh contiguous (4, 5, 6), a transposed offset layout, each with every key kind."""
    fresh = _layout_of(mt.zeros(4, 5, 6))
    for cases in _both_case_sets(tensors._layout_cases):
        layouts = {(shape, strides, offset) for shape, strides, offset, key in cases}
        assert fresh in layouts
        transposed = [(sh, st, off) for sh, st, off in layouts if off > 0 and st != contiguous_strides(sh)
                      and sorted(st, reverse=True) == list(contiguous_strides(tuple(
                          n for _, n in sorted(zip(st, sh), reverse=True))))]
        assert transposed
        for layout in (fresh, transposed[0]):
            keys = [key for *lay, key in cases if tuple(lay) == layout]
            parts = [k for key in keys for k in key]
            assert any(isinstance(k, int) and k >= 0 for k in parts)
            assert any(isinstance(k, int) and k < 0 for k in parts)
            assert any(isinstance(k, slice) and (k.step or 1) > 1 for k in parts)
            assert any(isinstance(k, slice) and (k.step or 1) < 0 for k in parts)
            assert any(len(key) < 3 for key in keys)


def test_the_slice_layout_reference_is_the_engines_view_in_ints():
    """The reference layout equals the engine's own x[key] and is printed as ints."""
    for cases in _both_case_sets(tensors._layout_cases):
        for shape, strides, offset, key in cases:
            want = tensors._numpy_layout(shape, strides, offset, key)
            assert all(type(v) is int for v in want[0] + want[1] + (want[2],)), key
            if 0 not in want[0]:
                assert _layout_of(mt.arange(4096.).as_strided(shape, strides, offset)[key]) == want, key


def test_slice_words_spell_each_key_as_python_reads_it():
    """The words x[...] of each case parse back to its key, written as typed (no None)."""
    extra = [(slice(None),), (slice(None, 3), slice(2, None, -1)), (slice(-3, -1, 2), -4)]
    for cases in _both_case_sets(tensors._layout_cases):
        for key in [key for *_, key in cases] + extra:
            words = tensors._slice_words(key)
            assert "None" not in words and _spelled_key(words) == key, (words, key)


LAYOUT_WHERE = re.compile(r"for x of shape (\(.*?\)), strides (\(.*?\)), offset (\d+), and (x\[.*?\]) \(key = (.*?)\):")


def test_slice_layout_failure_names_the_case_and_the_views_layout():
    """A wrong layout's message names the case it was called for and the right layout, in ints."""
    fn, calls = _recording(_layout_mistake("slice_start_no_offset"))
    message = _failure(mt.exercises.check_slice_layout, fn)
    shape, strides, offset, key = calls[-1]
    m = LAYOUT_WHERE.match(message)
    assert m, message
    assert (eval(m.group(1)), eval(m.group(2)), int(m.group(3))) == (shape, strides, offset)
    assert _spelled_key(m.group(4)) == key and eval(m.group(5)) == key
    want_shape, want_strides, want_offset = _layout_of(mt.arange(4096.).as_strided(shape, strides, offset)[key])
    assert f"the view has shape {want_shape}, strides {want_strides}, offset {want_offset}." in message


def test_slice_layout_tells_a_raising_function_which_case():
    """A function that raises is told the layout and key it was called with."""
    fn, calls = _recording(lambda shape, strides, offset, key: 1 / 0)
    message = _failure(mt.exercises.check_slice_layout, fn)
    m = LAYOUT_WHERE.match(message)
    assert m and " your function raised ZeroDivisionError" in message, message
    assert eval(m.group(5)) == calls[-1][3]


# -- check_unbroadcast -----------------------------------------------------------------------------
def _sum_leading_only(g, shape):
    lead = g.ndim - len(shape)
    return g.sum(dim=tuple(range(lead))) if lead else g


def _sum_without_keepdim(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(dim=dims) if dims else g


def _first_slice_instead_of_sum(g, shape):
    lead = g.ndim - len(shape)
    a = np.asarray(g._data)[(0,) * lead]
    for i, n in enumerate(shape):
        if n == 1:
            a = a[(slice(None),) * i + (slice(0, 1),)]
    return mt.tensor(a.copy()).reshape(shape)


def _mean_instead_of_sum(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return (g.mean(dim=dims, keepdim=True) if dims else g).reshape(shape)


def _size1_dims_not_shifted(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(dim=dims, keepdim=True) if dims else g


UNBROADCAST_MISTAKES = {
    "g unchanged": lambda g, shape: g,
    "leading dims only": _sum_leading_only,
    "no keepdim": _sum_without_keepdim,
    "first copy instead of the sum": _first_slice_instead_of_sum,
    "mean instead of sum": _mean_instead_of_sum,
    "size-1 dims not shifted by the leading ones": _size1_dims_not_shifted,
    "everything summed": lambda g, shape: np.full(shape, float(np.asarray(g._data).sum())),
    "rounded to 2 decimals": lambda g, shape: np.round(np.asarray(unbroadcast(g, shape)._data), 2),
}


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("mistake", sorted(UNBROADCAST_MISTAKES))
def test_check_unbroadcast_rejects_each_catalogued_mistake(mistake, hidden):
    """Every common unbroadcast mistake fails the checker, visible and hidden runs alike."""
    assert "for a gradient g of shape" in _failure(mt.exercises.check_unbroadcast, UNBROADCAST_MISTAKES[mistake], hidden)


def test_random_unbroadcast_cases_add_dims_and_widen_size_one_dims():
    """The random cases broadcast: some add leading dims, some widen a size-1 dim."""
    for cases in _both_case_sets(lambda: tensors._random_unbroadcast_cases(30)):
        for out, shape in cases:
            assert np.broadcast_shapes(out, shape) == out, (out, shape)
        assert any(len(out) > len(shape) for out, shape in cases)
        assert any(n == 1 and out[len(out) - len(shape) + i] > 1 for out, shape in cases for i, n in enumerate(shape))


def test_unbroadcast_gradients_are_float64_and_repeat_per_run_but_not_hidden():
    """The learner gets float64 g, the same values every run, other values in the hidden run."""
    seen = []
    for hidden in (False, False, True):
        fn, calls = _recording(unbroadcast)
        mt.exercises.check_unbroadcast(fn, hidden=hidden)
        assert all(g.dtype == mt.float64 for g, _ in calls[:len(tensors.UNBROADCAST_CASES)])  # not the suite's
        seen.append(np.asarray(calls[0][0]._data).copy())
    assert np.array_equal(seen[0], seen[1]) and seen[0].shape == seen[2].shape
    assert not np.array_equal(seen[0], seen[2])


def _wrong_on_one_case(target, wrong):
    return lambda g, shape: wrong(g, shape) if (tuple(g.shape), tuple(shape)) == target else unbroadcast(g, shape)


def _unbroadcast_shapes():
    """(g shape, operand shape, hidden) of every case of the visible and of the hidden run."""
    visible, hidden = _both_case_sets(lambda: tensors._random_unbroadcast_cases(30 if checking.hidden() else 8))
    return [(*case, False) for case in tensors.UNBROADCAST_CASES + visible] + [
        (*case, True) for case in tensors.UNBROADCAST_CASES + hidden]


def test_unbroadcast_shape_message_names_the_dims_to_sum_for_every_case():
    """Returning g unchanged is told exactly which dims to sum: the leading ones, and the stretched size-1 ones."""
    for g_shape, shape, hidden in _unbroadcast_shapes():
        if tuple(g_shape) == tuple(shape):
            continue
        message = _failure(mt.exercises.check_unbroadcast, _wrong_on_one_case((g_shape, shape), lambda g, s: g), hidden)
        lead = len(g_shape) - len(shape)
        stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g_shape[lead + i] != 1)
        parts = ([f"the leading dimension(s) {tuple(range(lead))} that broadcasting added"] if lead else []) + (
            [f"dimension(s) {stretched} of g, where the operand has size 1 (keep them: keepdim=True, or reshape "
             "at the end)"] if stretched else [])
        assert f"\nSum over {' and '.join(parts)}." in message, (g_shape, shape, message)


def test_a_wrong_shape_on_matching_shapes_is_told_nothing_needs_summing():
    """When g already has the operand's shape, a reshaped answer is told there is nothing to sum."""
    wrong = _wrong_on_one_case(((2, 3), (2, 3)), lambda g, shape: g.reshape(6))
    assert "Sum over nothing: the shapes already match." in _failure(mt.exercises.check_unbroadcast, wrong)


def test_averaging_is_recognised_on_every_case_with_copies():
    """A mean over the copies is told "you averaged" on each case where the operand was copied."""
    for g_shape, shape, hidden in _unbroadcast_shapes():
        if int(np.prod(g_shape)) == int(np.prod(shape)):
            continue
        message = _failure(mt.exercises.check_unbroadcast, _wrong_on_one_case((g_shape, shape), _mean_instead_of_sum), hidden)
        assert "you averaged" in message, (g_shape, shape)


def test_an_answer_a_few_parts_per_million_off_is_rejected_as_wrong_numbers():
    """The checker asks for 1e-6 relative agreement: 3 parts per million off is wrong numbers."""
    wrong = lambda g, shape: unbroadcast(g, shape) * (1 + 3e-6)  # noqa: E731
    assert "Right shape, wrong numbers" in _failure(mt.exercises.check_unbroadcast, wrong)
    rounded = _failure(mt.exercises.check_unbroadcast, UNBROADCAST_MISTAKES["rounded to 2 decimals"])
    assert "Right shape, wrong numbers" in rounded


def _past_the_tolerance(values):
    """``values`` moved just past the checker's tolerance, 1e-6·|v| + 1e-9: 4e-9 further out."""
    v = np.asarray(values._data, dtype=np.float64)
    return v + np.where(v < 0, -1.0, 1.0) * (1e-6 * np.abs(v) + 4e-9)


def test_an_answer_just_past_1e6_relative_plus_1e9_absolute_is_wrong_numbers():
    """The checker's tolerance is 1e-6·|value| + 1e-9: 4e-9 beyond it is wrong numbers, not a pass."""
    wrong = lambda g, shape: _past_the_tolerance(unbroadcast(g, shape))  # noqa: E731
    assert "Right shape, wrong numbers" in _failure(mt.exercises.check_unbroadcast, wrong)


def test_the_averaging_hint_needs_the_copies_times_the_answer_within_the_same_tolerance():
    """A mean that is also 3 ppm off, or 4e-9 past the tolerance, is not told "you averaged"."""
    ppm = lambda g, shape: _mean_instead_of_sum(g, shape) * (1 + 3e-6)  # noqa: E731
    past = lambda g, shape: _past_the_tolerance(unbroadcast(g, shape)) / (g.numel() // math.prod(shape))  # noqa: E731
    for wrong in (ppm, past):
        message = _failure(mt.exercises.check_unbroadcast, wrong)
        assert "Right shape, wrong numbers" in message and "you averaged" not in message


def test_a_negative_index_handled_right_is_not_blamed_for_another_dims_offset():
    """A right -2 next to a ::-2 started at 0 is told about the offset, not "a negative index counts from the end"."""
    def wrong(shape, strides, offset, key):
        negative_int = any(isinstance(k, int) and k < 0 for k in key)
        return slice_layout(shape, strides, offset, key, "neg_step_starts_at_0" if negative_int else None)
    fn, calls = _recording(wrong)
    message = _failure(mt.exercises.check_slice_layout, fn)
    assert any(isinstance(k, int) and k < 0 for k in calls[-1][3]), message  # the failing key has a negative int
    assert "The offset moves to the first element of the view" in message
    assert "A negative index counts from the end" not in message
