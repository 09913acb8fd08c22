"""The notebook exercise checkers accept correct answers and explain wrong ones."""
import numpy as np
import pytest

import microtorch as mt


# -- reference solutions (the same as in notebooks/01_tensors_and_graphs.ipynb) ---------------
def contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def element_offset(index, strides, offset):
    return offset + sum(i * s for i, s in zip(index, strides))


def my_unbroadcast(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    if dims:
        g = g.sum(dim=dims, keepdim=True)
    return g.reshape(shape)


def test_mt_exercises_is_reachable_from_the_package():
    assert mt.exercises.check_strides is not None


@pytest.mark.parametrize("check, solution", [
    ("check_strides", contiguous_strides),
    ("check_element_offset", element_offset),
    ("check_unbroadcast", my_unbroadcast),
])
def test_reference_solutions_pass(check, solution, capsys):
    getattr(mt.exercises, check)(solution)
    assert "✓" in capsys.readouterr().out


def test_numpy_answers_are_accepted_too():
    mt.exercises.check_strides(lambda shape: np.array(contiguous_strides(shape)))
    mt.exercises.check_unbroadcast(lambda g, shape: np.asarray(my_unbroadcast(g, shape)))


@pytest.mark.parametrize("wrong, words", [
    (lambda shape: None, "did you forget `return`"),
    (lambda shape: tuple(4 * s for s in contiguous_strides(shape)), "byte strides"),
    (lambda shape: tuple(int(np.prod(shape[:d])) for d in range(len(shape))), "column-major"),
    (lambda shape: contiguous_strides(shape)[1:], "one stride per dimension"),
    (lambda shape: tuple(1 for _ in shape), "product of all the sizes to its right"),
    (lambda shape: tuple(n for n in shape), "its stride is 1"),
    (lambda shape: 1 / 0, "ZeroDivisionError"),
    (lambda shape: "abc", "return a tuple of ints"),
])
def test_wrong_strides_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for shape") as info:
        mt.exercises.check_strides(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("wrong, words", [
    (lambda idx, st, off: sum(i * s for i, s in zip(idx, st)), "left out the offset"),
    (lambda idx, st, off: off + sum(i * s for i, s in zip(idx, reversed(st))), "wrong dimensions"),
    (lambda idx, st, off: off + sum(idx), "position = offset + sum"),
])
def test_wrong_element_offsets_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_element_offset(wrong)
    assert words in str(info.value) and "lives at storage position" in str(info.value)


def _mean_instead_of_sum(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    return (g.mean(dim=dims, keepdim=True) if dims else g).reshape(shape)


def _in_place(g, shape):
    g._data *= 1.5
    return my_unbroadcast(g, shape)


@pytest.mark.parametrize("wrong, words", [
    (lambda g, shape: g, "must have the operand's shape"),
    (lambda g, shape: g.sum(dim=0) if g.ndim > len(shape) else g, "keepdim=True"),
    (_mean_instead_of_sum, "you averaged"),
    (lambda g, shape: my_unbroadcast(g, shape) * 0, "wrong numbers"),
    (_in_place, "changed g in place"),
    (lambda g, shape: None, "did you forget `return`"),
    (lambda g, shape: g.sum(dim=5), "your function raised IndexError"),
])
def test_wrong_unbroadcasts_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for a gradient g of shape") as info:
        mt.exercises.check_unbroadcast(wrong)
    assert words in str(info.value)
