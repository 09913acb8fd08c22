"""Indexing with integers beside index arrays follows PyTorch's order, and ``x[[]]`` selects nothing.

PyTorch applies a key's integers first (each selects, dropping its dimension) and then the rest;
numpy counts such an integer as one more index array, and when the arrays are not side by side
puts their dimension first. So for a (2, 3, 4) tensor ``x[0, :, [1, 2]]`` is (3, 2) in PyTorch
and (2, 3) in numpy — and ``x[0, :, [0, 1, 2]] = v`` of a (3, 3, 3) tensor wrote ``v`` transposed
before this was fixed. Expected values here are the numpy array indexed in PyTorch's two steps.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import microtorch as mt

X = np.arange(24.0).reshape(2, 3, 4)

# key, the same key as PyTorch reads it: (the integers), then (the rest)
MIXED = [
    ((0, slice(None), [1, 2]), (0,), (slice(None), [1, 2])),
    ((1, slice(None), [3, 0, 0]), (1,), (slice(None), [3, 0, 0])),
    ((Ellipsis, 2, [1, 0]), (Ellipsis, 2, slice(None)), (Ellipsis, [1, 0])),
    ((None, 1, [True, False, True], 2), (1, slice(None), 2), (None, [True, False, True])),
    (([1, 0], slice(1, 3), 3), (slice(None), slice(None), 3), ([1, 0], slice(1, 3))),
]


@pytest.mark.parametrize("key, ints, rest", MIXED)
def test_integers_select_first_then_the_rest_of_the_key_indexes(key, ints, rest):
    want = X[ints][rest]
    got = mt.tensor(X)[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_the_two_orders_differ_where_a_slice_separates_the_integer_from_the_array():
    # the case that tells them apart: numpy would give (2, 3) here, with the values transposed
    assert X[0, :, [1, 2]].shape == (2, 3)
    assert mt.tensor(X)[0, :, [1, 2]].shape == (3, 2)


@pytest.mark.parametrize("key, ints, rest", MIXED)
def test_the_gradient_goes_to_the_selected_elements(key, ints, rest):
    x = mt.tensor(X, requires_grad=True)
    y = x[key]
    w = np.random.default_rng(0).standard_normal(y.shape)
    (y * mt.tensor(w)).sum().backward()
    want = np.zeros_like(X)
    np.add.at(want[ints], rest, w)  # want[ints] is a view: the scatter lands in want
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_assigning_through_a_mixed_key_writes_the_value_in_pytorchs_layout():
    x = np.arange(27.0).reshape(3, 3, 3)
    v = np.arange(9.0).reshape(3, 3) * 10
    t = mt.tensor(x)
    t[0, :, [0, 1, 2]] = mt.tensor(v)
    want = x.copy()
    want[0][:, [0, 1, 2]] = v  # row i of v goes to x[0, i, :]
    np.testing.assert_array_equal(t.numpy(), want)


def test_assigning_through_a_mixed_key_keeps_the_graph():
    x = mt.tensor(X, requires_grad=True)
    v = mt.tensor(np.ones((3, 2)), requires_grad=True)
    y = x * 1
    y[1, :, [0, 2]] = v * 2
    (y * y).sum().backward()
    gx = 2 * X
    gx[1][:, [0, 2]] = 0  # overwritten: no gradient back to x there
    np.testing.assert_array_equal(x.grad.numpy(), gx)
    np.testing.assert_array_equal(v.grad.numpy(), np.full((3, 2), 8.0))  # d/dv (2v)² = 8v


@pytest.mark.parametrize("key, shape", [([], (0, 3, 4)), ((slice(None), []), (2, 0, 4)), ((1, []), (0, 4)),
                                        ((Ellipsis, []), (2, 3, 0))])
def test_an_empty_list_selects_nothing(key, shape):
    x = mt.tensor(X, requires_grad=True)
    y = x[key]
    assert y.shape == shape and y.dtype == x.dtype
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(X))


@pytest.mark.oracle
def test_getitem_and_setitem_agree_with_pytorch_on_random_keys():
    torch = pytest.importorskip("torch")
    rng = random.Random(0)

    def entry(n):
        kind = rng.choice(["int", "slice", "none", "list", "tensor", "mask"])
        if kind == "int":
            return rng.randint(-n, n - 1), 1
        if kind == "slice":
            return slice(rng.choice([None, rng.randint(-n, n)]), rng.choice([None, rng.randint(-n, n)]),
                         rng.choice([None, 1, 2])), 1
        if kind == "none":
            return None, 0
        if kind == "list":
            return [rng.randint(-n, n - 1) for _ in range(rng.randint(0, 3))], 1
        if kind == "tensor":
            return ("long", [rng.randint(-n, n - 1) for _ in range(rng.randint(1, 3))]), 1
        return ("mask", [rng.random() < 0.5 for _ in range(n)]), 1

    def build(raw, lib):
        return tuple(lib.tensor(k[1]) if isinstance(k, tuple) else k for k in raw)

    checked = 0
    for case in range(300):
        shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3)))
        x = np.arange(float(np.prod(shape))).reshape(shape)
        raw, used = [], 0
        while used < len(shape) and rng.random() < 0.8:
            k, took = entry(shape[used])
            raw.append(k)
            used += took
        try:
            want = torch.tensor(x)[build(raw, torch)]
        except (IndexError, RuntimeError, ValueError):
            with pytest.raises((IndexError, RuntimeError, ValueError)):
                mt.tensor(x)[build(raw, mt)]
            continue
        got = mt.tensor(x)[build(raw, mt)]
        assert tuple(got.shape) == tuple(want.shape), raw
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        v = np.random.default_rng(case).standard_normal(tuple(want.shape))
        a, b = mt.tensor(x), torch.tensor(x)
        a[build(raw, mt)] = mt.tensor(v)
        b[build(raw, torch)] = torch.tensor(v)
        written = torch.arange(x.size).reshape(shape)[build(raw, torch)].flatten().tolist()
        if len(written) == len(set(written)):  # (which of two writes to one element wins is unspecified)
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        checked += 1
    assert checked > 150


def test_a_values_leading_size_one_dims_are_dropped_before_it_is_written():
    # PyTorch's rule for t[key] = v: v of shape (1, 2) fills a (2,) slot, (1, 1, 2, 4) two (4,) rows
    t = mt.zeros(2)
    t[...] = mt.tensor([[1.0, 2.0]])
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    x = mt.zeros(3, 4, requires_grad=True)
    v = mt.tensor(np.arange(8.0).reshape(1, 1, 2, 4), requires_grad=True)
    y = x * 1
    y[[0, 2]] = v
    np.testing.assert_array_equal(y.detach().numpy()[[0, 2]], np.arange(8.0).reshape(2, 4))
    y.sum().backward()
    assert v.grad.shape == (1, 1, 2, 4)
    np.testing.assert_array_equal(v.grad.numpy(), np.ones((1, 1, 2, 4)))
    with pytest.raises(RuntimeError, match="copy_"):  # only leading ones go: (2, 1) is not (2,)
        mt.zeros(2)[...] = mt.zeros(2, 1)
