"""mt.memory.alias compares bytes, not storage ids: two storages over one buffer
(``mt.from_numpy(x.numpy())``, a storage over a numpy slice or a reinterpreting view of
another's bytes) share bytes exactly when np.shares_memory says so; and expanded
(stride-0) views of big tensors are decided at once, with an honest "may" past the bounds."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt
from microtorch.memory.aliasing import alias


def _start(t: mt.Tensor) -> int:
    return t._data.__array_interface__["data"][0]


def _check(a: mt.Tensor, b: mt.Tensor):
    expected = bool(np.shares_memory(a._data, b._data, max_work=None))
    r = alias(a, b)
    assert (r.answer == "must") == expected, (r, a.shape, a.stride(), a.storage_offset(),
                                              b.shape, b.stride(), b.storage_offset())
    loose = alias(a, b, exact=False)
    assert loose.answer in ("may", "no") and (loose.answer == "may" or r.answer == "no")
    if expected:
        assert loose.answer == "may"
        ia, ib = r.witness  # the two elements named share a byte, and shared_byte is one of them
        pa = _start(a) + sum(i * s for i, s in zip(ia, a._data.strides))
        pb = _start(b) + sum(i * s for i, s in zip(ib, b._data.strides))
        byte = a.storage.data.__array_interface__["data"][0] + r.shared_byte
        assert pa <= byte < pa + a._data.itemsize and pb <= byte < pb + b._data.itemsize
    return r


def test_from_numpy_of_numpy_is_the_same_bytes():
    x = mt.arange(12, dtype=mt.float32).reshape(3, 4)
    y = mt.from_numpy(x.numpy())
    assert y.storage is not x.storage
    r = alias(x, y)
    assert r.answer == "must" and r.witness == ((0, 0), (0, 0)) and r.shared_byte == 0
    assert "share a buffer" in r.reason
    assert alias(x[0], y[1]).answer == "no" and alias(x[:, 1], y[2]).answer == "must"
    assert alias(x, y, exact=False).answer == "may"
    assert alias(x, mt.from_numpy(x.numpy().copy())).answer == "no"


def test_a_storage_over_a_slice_and_a_reinterpreting_view():
    x = mt.zeros(16, dtype=mt.float64)
    tail = mt.from_numpy(x.numpy()[10:])  # its element 0 is x's element 10
    r = _check(x[10], tail[0])
    assert r.answer == "must" and r.shared_byte == 80
    assert _check(x[:10], tail).answer == "no"
    halves = mt.from_numpy(x.numpy().view(np.float32))  # 32 float32 over 16 float64
    assert _check(x[3], halves[7]).answer == "must" and _check(x[3], halves[8]).answer == "no"
    assert _check(x[::2], halves[2::4]).answer == "no" and _check(x[::2], halves[1::4]).answer == "must"


def _view(data, t: mt.Tensor) -> mt.Tensor:
    size = t.numel()
    nd = data.draw(st.integers(0, 3))
    shape = tuple(data.draw(st.integers(1, 4)) for _ in range(nd))
    strides = tuple(data.draw(st.integers(-7, 7)) for _ in range(nd))
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    if hi - lo >= size:
        strides, lo, hi = (0,) * nd, 0, 0
    return t.as_strided(shape, strides, data.draw(st.integers(-lo, size - 1 - hi)))


def _storages(x: mt.Tensor, data):
    """x and other storages over (parts of) its buffer, reached by different routes."""
    arr = x.numpy()
    k = data.draw(st.integers(0, arr.size - 1))
    return [x, mt.from_numpy(arr), mt.from_numpy(arr[k:]), mt.from_numpy(arr.view(np.float32)),
            mt.from_numpy(arr[k:].view(np.int32)), mt.from_numpy(arr.copy())]


@settings(max_examples=250, deadline=None)
@given(st.data())
def test_views_through_distinct_storages_agree_with_numpy(data):
    x = mt.zeros(data.draw(st.integers(1, 24)), dtype=mt.float64)
    storages = _storages(x, data)
    for _ in range(5):
        a = _view(data, data.draw(st.sampled_from(storages)))
        b = _view(data, data.draw(st.sampled_from(storages)))
        _check(a, b)
        r = alias(a, b, max_work=0)  # the enumeration path in the byte frame
        assert (r.answer == "must") == bool(np.shares_memory(a._data, b._data, max_work=None))


def test_expanded_disjoint_halves_are_decided_at_once():
    x = mt.zeros(30, 30, 30, 60)
    a = x[..., :30].unsqueeze(0).expand(50, 30, 30, 30, 30)  # 40.5M elements, 810,000 bytes-worth
    b = x[..., 30:].unsqueeze(0).expand(50, 30, 30, 30, 30)
    t0 = time.perf_counter()
    r = alias(a, b)
    assert time.perf_counter() - t0 < 0.5  # it was 3 s and 2.9 GB (enumerating the stride-0 dim)
    assert r.answer == "no" and r.method == "solver" and r.work < 100
    assert not np.shares_memory(a._data, b._data, max_work=None)
    touching = x[..., 29:59].unsqueeze(0).expand(50, 30, 30, 30, 30)
    r = alias(a, touching)
    assert r.answer == "must" and r.work < 100
    (ia, ib) = r.witness
    assert len(ia) == 5 and ia[-1] - ib[-1] == 29 and ia[1:4] == ib[1:4]


def test_past_both_bounds_the_answer_is_an_honest_may():
    x = mt.zeros(30, 30, 30, 60)
    a, b = x[..., :30], x[..., 30:]
    r = alias(a, b, max_work=0, max_enumerate=1000)
    assert r.answer == "may" and r.method == "budget" and r
    assert "max_work=0" in r.reason and "max_enumerate=1000" in r.reason
    assert alias(a, b, max_work=0).answer == "no"  # within the enumeration bound: exact again
    expanded = a.unsqueeze(0).expand(50, 30, 30, 30, 30)
    assert alias(expanded, b, max_work=0).method == "enumeration"  # stride-0 dims not enumerated


@pytest.mark.parametrize("seed", range(5))
def test_random_expands_agree_with_numpy_on_every_path(seed):
    rng = np.random.default_rng(seed)
    x = mt.zeros(6, 7, 8, dtype=mt.float64)
    for _ in range(200):
        views = []
        for _ in range(2):
            v = x[tuple(slice(int(rng.integers(0, n)), None, int(rng.choice([1, 2, 3])))
                        for n in x.shape)]
            if rng.random() < 0.5:  # a stride-0 dimension somewhere
                p = int(rng.integers(0, v.ndim + 1))
                shape = list(v.shape)
                v = v.unsqueeze(p).expand(*shape[:p], int(rng.integers(1, 9)), *shape[p:])
            views.append(v)
        expected = bool(np.shares_memory(views[0]._data, views[1]._data, max_work=None))
        for work in (0, 20_000):
            assert (alias(*views, max_work=work).answer == "must") == expected
