"""Alias analysis: mt.memory.alias agrees with numpy's exact answer, and reports evidence.

The exact answer must equal ``np.shares_memory(x, y, max_work=None)`` (numpy's exact
solver) on more than 10,000 random pairs of strided views of one storage — including
stride 0 (expand), negative strides, empty views and views of different storages —
without a single mismatch. Each "must" comes with a witness: one element position in each
tensor that really reads the same bytes.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt
from microtorch.memory.aliasing import Layout, alias, byte_ranges, overlaps_itself


# -- random strided views of one storage ------------------------------------------------------
def random_view(rng, base: mt.Tensor, max_ndim=3, max_size=4, max_stride=7):
    """A random as_strided view inside base's storage (stride 0 and negative strides
    included; now and then an empty view)."""
    size = base.numel()
    if rng.random() < 0.03:
        return base.as_strided((0,), (1,), int(rng.integers(0, size + 1)))
    while True:
        nd = int(rng.integers(0, max_ndim + 1))
        shape = tuple(int(n) for n in rng.integers(1, max_size + 1, nd))
        strides = tuple(int(s) for s in rng.integers(-max_stride, max_stride + 1, nd))
        lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        if hi - lo < size:
            return base.as_strided(shape, strides, int(rng.integers(-lo, size - hi)))


def check_pair(a: mt.Tensor, b: mt.Tensor) -> str:
    report = alias(a, b)
    expected = bool(np.shares_memory(a._data, b._data, max_work=None))
    assert (report.answer == "must") == expected, (
        f"alias says {report.answer} ({report.method}), numpy says {expected}\n"
        f"a: shape {a.shape} strides {a.stride()} offset {a.storage_offset()}\n"
        f"b: shape {b.shape} strides {b.stride()} offset {b.storage_offset()}")
    assert report.answer in ("must", "no")
    loose = alias(a, b, exact=False)
    assert loose.answer in ("may", "no")
    if report.answer == "must":  # an exact "must" is never a loose "no"
        assert loose.answer == "may"
        ia, ib = report.witness
        assert _address(a, ia) == _address(b, ib) == report.shared_byte
    return report.method


def _address(t: mt.Tensor, index) -> int:
    """The byte (from the storage start) where element ``index`` of t starts, from numpy."""
    assert all(0 <= i < n for i, n in zip(index, t.shape)) and len(index) == t.ndim
    a = t._data
    start = a.__array_interface__["data"][0] - t.storage.data.__array_interface__["data"][0]
    return start + sum(i * s for i, s in zip(index, a.strides))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40))
def test_exact_alias_agrees_with_numpy_on_10000_random_pairs(seed, storage_size):
    """100 examples × 110 pairs = 11,000 pairs of random strided views."""
    rng = np.random.default_rng(seed)
    base = mt.zeros(storage_size, dtype=mt.float64)
    other = mt.zeros(storage_size, dtype=mt.float64)
    for _ in range(100):
        check_pair(random_view(rng, base), random_view(rng, base))
    for _ in range(10):  # different storages: always "no"
        a, b = random_view(rng, base), random_view(rng, other)
        assert check_pair(a, b) == "storage"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_exact_alias_agrees_with_numpy_shrinkable(data):
    """The same property with hypothesis drawing every number (so failures shrink)."""
    size = data.draw(st.integers(1, 30))
    base = mt.arange(size, dtype=mt.float32)

    def view():
        nd = data.draw(st.integers(0, 3))
        shape = tuple(data.draw(st.integers(1, 4)) for _ in range(nd))
        strides = tuple(data.draw(st.integers(-6, 6)) for _ in range(nd))
        lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        if hi - lo >= size:
            strides = (0,) * nd
            lo = hi = 0
        return base.as_strided(shape, strides, data.draw(st.integers(-lo, size - 1 - hi)))

    check_pair(view(), view())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_solver_path_agrees_with_numpy(seed):
    """Force each path: the Diophantine solver (default), enumeration (no work budget), and
    bigger views with large strides where the closed-form two-term step matters."""
    rng = np.random.default_rng(seed)
    base = mt.zeros(400, dtype=mt.float64)
    for _ in range(40):
        a = random_view(rng, base, max_ndim=3, max_size=6, max_stride=60)
        b = random_view(rng, base, max_ndim=3, max_size=6, max_stride=60)
        expected = bool(np.shares_memory(a._data, b._data, max_work=None))
        for work in (0, 1, 20_000):
            r = alias(a, b, max_work=work)
            assert (r.answer == "must") == expected, (work, r)
            if r.answer == "must":
                assert _address(a, r.witness[0]) == _address(b, r.witness[1])


def test_views_from_ordinary_ops():
    x = mt.zeros(6, 8)
    views = [x, x.T, x[::2], x[1::2], x[:, ::2], x[:, 1::2], x[::-1], x[:, ::-3], x[2], x[:, 3],
             x.diagonal(), x.diagonal(1), x.unfold(1, 3, 2), x[:1].expand(4, 8), x.reshape(4, 12)[1:3],
             x[3:, 5:], x[:0]]
    for a in views:
        for b in views:
            check_pair(a, b)


# -- the answers, with their evidence -----------------------------------------------------------
def test_even_and_odd_columns_may_alias_by_extent_but_not_exactly():
    x = mt.zeros(4, 6)  # float32
    even, odd = x[:, ::2], x[:, 1::2]
    loose = alias(even, odd, exact=False)
    assert loose.answer == "may" and loose.extent_a == (0, 92) and loose.extent_b == (4, 96)
    exact = alias(even, odd)
    assert exact.answer == "no" and not exact and exact.method == "gcd"
    assert "gcd" in exact.reason and exact.witness is None
    assert not np.shares_memory(even._data, odd._data, max_work=None)


def test_row_and_column_must_alias_with_a_witness():
    x = mt.arange(24, dtype=mt.float32).reshape(4, 6)
    r = alias(x[2], x[:, 4])
    assert r.answer == "must" and r
    (i,), (j,) = r.witness
    assert (i, j) == (4, 2) and r.shared_byte == (2 * 6 + 4) * 4
    assert x[2][i].item() == x[:, 4][j].item() == 16
    text = str(r)
    assert "must" in text and "a[4] and b[2]" in text and "byte 64" in text


def test_answers_no_for_different_storages_empty_and_disjoint_extents():
    x, y = mt.zeros(10), mt.zeros(10)
    assert alias(x, y).answer == "no" and alias(x, y).method == "storage"
    assert alias(x, x[:0]).answer == "no" and alias(x, x[:0]).extent_b is None
    r = alias(x[:5], x[5:], exact=False)
    assert r.answer == "no" and r.method == "extent" and r.extent_a == (0, 20) and r.extent_b == (20, 40)
    assert alias(x, x.detach()).answer == "must"


def test_strided_windows_interleaved_need_the_solver():
    x = mt.zeros(100)
    a = x.as_strided((5, 5), (20, 3), 0)  # addresses 20i + 3j
    b = x.as_strided((5, 5), (20, 3), 1)
    r = alias(a, b)  # 20(i - k) + 3(j - l) = 1 with |i - k|, |j - l| < 5: e.g. i - k = -1, j - l = 7? no
    assert (r.answer == "must") == np.shares_memory(a._data, b._data, max_work=None)
    assert r.method in ("solver", "gcd") and r.work < 100


def test_the_solver_is_cheap_for_large_one_dimensional_views():
    x = mt.zeros(10**6, dtype=mt.float32)
    a, b = x[::999_983], x[7::1_000_003 - 999_983]  # big strides, few common points
    r = alias(a, b)
    assert (r.answer == "must") == np.shares_memory(a._data, b._data, max_work=None)
    assert r.work <= 1  # two terms: closed form (extended Euclid), no search


# -- byte ranges and self-overlap -----------------------------------------------------------------
def test_byte_ranges_examples():
    x = mt.zeros(4, 6)  # float32: 4 bytes each
    assert x.byte_ranges() == [(0, 96)]
    assert x.T.byte_ranges() == [(0, 96)]
    assert x[1:3].byte_ranges() == [(24, 72)]
    assert x[:, ::2].byte_ranges()[:3] == [(0, 4), (8, 12), (16, 20)] and len(x[:, ::2].byte_ranges()) == 12
    assert x[:, :2].byte_ranges() == [(0, 8), (24, 32), (48, 56), (72, 80)]
    assert x[:1].expand(3, 6).byte_ranges() == [(0, 24)]
    assert x[:0].byte_ranges() == []
    assert mt.memory.byte_extent(x[:, 1::2]) == (4, 96) and byte_ranges(x[2, 1:]) == [(52, 72)]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_overlaps_itself_is_exact(seed):
    rng = np.random.default_rng(seed)
    base = mt.zeros(40)
    for _ in range(20):
        v = random_view(rng, base)
        addr = Layout(0, v.storage_offset(), v.shape, v.stride(), 4, 40).addresses().ravel()
        assert overlaps_itself(v) == (np.unique(addr).size < addr.size)


def test_alias_on_layouts_without_tensors():
    a = Layout(1, 0, (4, 3), (6, 2), 4, 24)
    b = Layout(1, 1, (4, 3), (6, 2), 4, 24)
    assert alias(a, b).answer == "no" and alias(a, a).answer == "must"
    assert str(a) == "storage #1: offset 0, shape [4, 3], strides [6, 2] (elements of 4 bytes)"
