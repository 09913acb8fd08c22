"""mt.memory.alias compares bytes, not storage ids: two storages over one buffer
(``mt.from_numpy(x.numpy())``, a storage over a numpy slice or a reinterpreting view of
another's bytes) share bytes exactly when np.shares_memory says so."""
from __future__ import annotations

import numpy as np
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
