"""Exercises of notebook 06 (views and aliasing): a view's extent, whether two views share an
element, and sliding windows as strides.

A view is described to the learner as three numbers of the engine's own layout —
``offset`` (elements), ``shape`` and ``strides`` (elements, possibly 0 or negative) — read
from real microtorch views. Every storage here holds 0, 1, 2, …, so the values a view reads
*are* the storage positions it reads: the references are those values (their min and max,
their common elements) and windows counted one by one. While the learner's function runs,
the engine's extents, ``mt.memory.alias``, ``np.shares_memory`` and ``unfold`` are switched
off (tests/test_exercise_checkers.py checks the references against the engine).

The notebook's exercise 4, the strides of a view of a new shape, is in :mod:`.view_strides`
(it builds its views on ``_x`` and ``_big`` from here).
"""
from __future__ import annotations

import numpy as np

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng


def _view_blocks():
    from ..functions.strided import unfold
    from ..memory import aliasing
    from ..tensor import Tensor
    from . import fallbacks

    return [aliasing.byte_extent, aliasing.byte_ranges, aliasing.alias, aliasing.overlaps_itself,
            (aliasing.Layout, "extent"), (aliasing.Layout, "byte_extent"), (aliasing.Layout, "addresses"),
            np.shares_memory, np.may_share_memory, unfold, (Tensor, "unfold"),
            fallbacks.extent, fallbacks.shares_element, fallbacks.windows]


def _random_views(s, n: int) -> list:
    """``(name, view)``: random ``as_strided`` views (up to 3-D, strides -7..7) inside ``s``."""
    r, out = rng(), []
    while len(out) < n:
        ndim = int(r.integers(1, 4))
        shape = tuple(int(k) for k in r.integers(1, 5, ndim))
        strides = tuple(int(k) for k in r.integers(-7, 8, ndim))
        lo = sum((k - 1) * st for k, st in zip(shape, strides) if st < 0)
        hi = sum((k - 1) * st for k, st in zip(shape, strides) if st > 0)
        if hi - lo >= s.shape[0]:
            continue
        off = int(r.integers(-lo, s.shape[0] - hi))
        out.append((f"s.as_strided({shape}, {strides}, {off})", s.as_strided(shape, strides, off)))
    return out


def _x():
    """The 4 × 6 matrix every case views: its storage holds 0, 1, ..., 23 (float32)."""
    from ..creation import arange

    return arange(24.0).reshape(4, 6)


def _s():
    """A 1-D signal of 30 elements: storage positions 0..29."""
    from ..creation import arange

    return arange(30.0)


def _triple(v):
    return v.storage_offset(), tuple(v.shape), tuple(v.stride())


def _describe(name, v) -> str:
    off, shape, strides = _triple(v)
    return f"{name} (offset {off}, shape {shape}, strides {strides})"


def _positions(v) -> np.ndarray:
    """The storage position of every element of ``v``: its values (the storage holds 0, 1, …)."""
    return np.asarray(v.numpy()).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Exercise 1: a view's extent
# ----------------------------------------------------------------------------------------------
def _extent_cases():
    x, s = _x(), _s()
    return [
        ("x", x),
        ("x[1:3, 2:5]", x[1:3, 2:5]),
        ("x[:, ::2]", x[:, ::2]),
        ("x.T", x.T),
        ("x[::-1]", x[::-1]),
        ("x[2:, ::-1]", x[2:, ::-1]),
        ("x[::-1, ::-2]", x[::-1, ::-2]),
        ("x[:, 3:4].expand(4, 5)", x[:, 3:4].expand(4, 5)),
        ("x.diagonal(1)", x.diagonal(1)),
        ("s.unfold(0, 4, 3)", s.unfold(0, 4, 3)),
        ("s.as_strided((3,), (-4,), 11)", s.as_strided((3,), (-4,), 11)),
        ("x[2, 4]", x[2, 4]),
    ] + _random_views(_big(), 40 if hidden() else 10)


def _big():
    """A 1-D storage of 64 elements for random views: positions 0..63."""
    from ..creation import arange

    return arange(64.0)


def check_extent(fn) -> None:
    """``fn(offset, shape, strides) -> (lo, hi)``: the lowest and the highest storage position
    (elements, both inclusive) a view reads. Checked on
    views of ``x = mt.arange(24.).reshape(4, 6)`` and ``s = mt.arange(30.)``: slices, steps,
    negative steps, a transpose, an expand (stride 0), a diagonal, windows, an ``as_strided``
    with a negative stride, a single element, random views. The reference: the smallest and
    the largest value the view reads (each storage holds 0, 1, 2, …).
    """
    cases = _extent_cases()
    for name, v in cases:
        off, shape, strides = _triple(v)
        item = v.dtype.itemsize
        p = _positions(v)
        want = (int(p.min()), int(p.max()))
        start, stop = want[0] * item, (want[1] + 1) * item
        where = f"for the view {_describe(name, v)}"
        got = _call(fn, where, off, shape, strides)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        try:
            lo, hi = (int(g) for g in got)
        except (TypeError, ValueError):
            _fail(f"{where} you returned {got!r}; return two ints (lowest, highest).")
        if (lo, hi) == want:
            continue
        msg = (f"{where} you returned ({lo}, {hi}), but the view reads storage positions {want[0]} "
               f"to {want[1]} (bytes [{start}, {stop}) in {item}-byte elements).")
        naive_hi = off + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        naive_lo = off + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        if (lo, hi) == (want[1], want[0]):
            hint = "You swapped them: return (lowest, highest)."
        elif (lo, hi) == (want[0] * item, (want[1] + 1) * item):
            hint = f"Those are bytes ([start, stop)); count storage positions (elements): divide by {item}."
        elif (lo, hi) == (want[0], want[1] + 1):
            hint = "Both ends are inclusive: hi is the position of the last element read, not one past it."
        elif any(s < 0 for s in strides) and lo == off and hi in (
                off + sum((n - 1) * s for n, s in zip(shape, strides)),
                off + sum((n - 1) * abs(s) for n, s in zip(shape, strides)), naive_hi):
            dims = [d for d, s in enumerate(strides) if s < 0]
            how = ("took |stride|" if hi == off + sum((n - 1) * abs(s) for n, s in zip(shape, strides))
                   else "ignored negative strides")
            hint = (f"You {how} (dimension(s) {dims} have negative strides): moving along such a dimension "
                    "walks DOWN from the offset, so the view's lowest element is at offset + (n − 1)·stride "
                    "for every dimension with a negative stride, and the highest adds (n − 1)·stride only "
                    f"for the positive ones. Here: lowest {naive_lo}, highest {naive_hi}.")
        elif (lo, hi) == (off + sum(n * s for n, s in zip(shape, strides) if s < 0),
                          off + sum(n * s for n, s in zip(shape, strides) if s > 0)):
            hint = ("Off by one: the last index along a dimension of size n is n − 1, so it adds "
                    "(n − 1)·stride.")
        elif (lo, hi) == (want[0] - off, want[1] - off):
            hint = f"You left out the offset: the view's element [0, ...] is at position {off}, not 0."
        else:
            hint = ("Start from the offset (element [0, ..., 0]); each dimension of size n can move you "
                    "(n − 1)·stride: up if the stride is positive, down if it is negative, nowhere if it "
                    "is 0.")
        _fail(msg + "\n" + hint)
    _passed("check_extent", len(cases))


check_extent = checker("extent", blocks=_view_blocks, suite="extent")(check_extent)


# ----------------------------------------------------------------------------------------------
# Exercise 3: do two views share an element?
# ----------------------------------------------------------------------------------------------
def _alias_cases():
    x, s = _x(), _s()
    return [
        ("x[:, ::2]", x[:, ::2], "x[:, 1::2]", x[:, 1::2]),  # even vs odd columns: extents overlap, no
        ("x.T", x.T, "x[2]", x[2]),  # a transposed view vs a row: yes
        ("x[:2]", x[:2], "x[2:]", x[2:]),  # disjoint halves
        ("x[::-1]", x[::-1], "x[3, 1:4]", x[3, 1:4]),  # negative stride: x[::-1][0] is x[3]
        ("s[:20:6]", s[:20:6], "s[4::10]", s[4::10]),  # gcd test passes, still no
        ("s[::4]", s[::4], "s[2::6]", s[2::6]),  # interleaved, they meet at 8
        ("s[::3]", s[::3], "s[1::3]", s[1::3]),  # interleaved, never meet
        ("x[:, 0:1].expand(4, 3)", x[:, 0:1].expand(4, 3), "x[:, 1:2].expand(4, 3)",
         x[:, 1:2].expand(4, 3)),  # stride 0, no
        ("x[:, 2:3].expand(4, 5)", x[:, 2:3].expand(4, 5), "x.diagonal()", x.diagonal()),  # stride 0, yes at 14
        ("s.unfold(0, 2, 5)", s.unfold(0, 2, 5), "s[3::5]", s[3::5]),  # gaps between windows, no
        ("s.unfold(0, 2, 5)", s.unfold(0, 2, 5), "s[6::10]", s[6::10]),  # yes at 6
        ("x.diagonal()", x.diagonal(), "x[3]", x[3]),  # yes at 21
        ("x[1:3, 1:5]", x[1:3, 1:5], "x[:, 0]", x[:, 0]),  # the box misses column 0, no
    ] + [a + b for a, b in zip(*[iter(_random_views(_big(), 60 if hidden() else 16))] * 2)]


def check_alias_by_strides(fn) -> None:
    """``fn(a, b) -> bool``: do two views of one storage read at least one common storage
    position? Each of ``a`` and ``b`` is ``(offset, shape, strides)``. Checked against the
    positions the two views read (their values: each storage holds 0, 1, 2, …); the engine's
    ``mt.memory.alias`` and ``np.shares_memory`` are switched off meanwhile. The cases include
    interleaved views, stride-0 (expanded) views, windows with gaps, negative steps, pairs
    whose extents overlap though no element is shared, and random pairs.
    """
    cases = _alias_cases()
    for name_a, va, name_b, vb in cases:
        shared = np.intersect1d(_positions(va), _positions(vb))
        want = bool(shared.size)
        where = f"for a = {_describe(name_a, va)} and b = {_describe(name_b, vb)}"
        got = _call(fn, where, _triple(va), _triple(vb))
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        if not isinstance(got, (bool, np.bool_)):
            _fail(f"{where} you returned {got!r}; return True or False.")
        if bool(got) == want:
            continue
        pa, pb = _positions(va), _positions(vb)
        (alo, ahi), (blo, bhi) = (tuple(int(e) for e in (pa.min(), pa.max())),
                                  tuple(int(e) for e in (pb.min(), pb.max())))
        if want:
            pos = int(shared[0])
            ia, ib = (tuple(int(i) for i in np.argwhere(p == pos)[0]) for p in (pa, pb))
            msg = (f"{where} you said they share nothing, but they do: a{list(ia)} and b{list(ib)} both "
                   f"read storage position {pos}.")
            if any(s < 0 for s in _triple(va)[2] + _triple(vb)[2]):
                hint = ("One of them has a negative stride: position = offset + Σ index·stride still holds, "
                        "index by index; it just walks down from the offset.")
            elif any(s == 0 for s in _triple(va)[2] + _triple(vb)[2]):
                hint = ("A stride of 0 means every index along that dimension reads the same position; "
                        "it still reads it.")
            else:
                hint = ("List every position each view reads (offset + Σ index·stride) and intersect the "
                        "two sets.")
            _fail(msg + "\n" + hint)
        msg = f"{where} you said they share an element, but they do not."
        show = _some_positions
        if alo <= bhi and blo <= ahi:
            hint = (f"Their extents overlap (a spans {alo}..{ahi}, b spans {blo}..{bhi}), but overlapping "
                    "extents only mean they MAY share: a reads positions {" + show(pa) + "}, b reads {"
                    + show(pb) + "}, and no position is in both. Compare the positions, not the ranges.")
            g = np.gcd.reduce([abs(t) for t in _triple(va)[2] + _triple(vb)[2]] or [0])
            if g and (_triple(vb)[0] - _triple(va)[0]) % g == 0:
                hint += (" (A gcd test cannot rule this pair out either: the offsets differ by a multiple "
                         "of the gcd of the strides. Passing it still only means 'may'.)")
        else:
            hint = (f"They are not even close: a spans positions {alo}..{ahi}, b spans {blo}..{bhi}.")
        _fail(msg + "\n" + hint)
    _passed("check_alias_by_strides", len(cases))


check_alias_by_strides = checker("shares_element", blocks=_view_blocks)(check_alias_by_strides)


def _some_positions(p: np.ndarray, most: int = 12) -> str:
    """The distinct positions in ``p``, the first ``most`` of them, as words."""
    u = np.unique(p)
    return ", ".join(str(int(q)) for q in u[:most]) + (", …" if u.size > most else "")


# ----------------------------------------------------------------------------------------------
# Exercise 2: sliding windows are strides
# ----------------------------------------------------------------------------------------------
def _window_cases():
    s = _s()
    return [
        ("s[:10]", s[:10], 3, 1),
        ("s[:10]", s[:10], 4, 2),
        ("s[:12]", s[:12], 3, 3),  # windows side by side
        ("s[:11]", s[:11], 4, 3),  # the tail (positions 9, 10) fits no whole window
        ("s[:8]", s[:8], 8, 1),  # one window: the whole signal
        ("s[::2]", s[::2], 3, 1),  # a signal whose elements are 2 apart
        ("s[1:22:3]", s[1:22:3], 2, 2),
        ("s[9::-1]", s[9::-1], 3, 2),  # a reversed signal: stride -1
    ] + _random_signals(s, 30 if hidden() else 8)


def _random_signals(s, n: int) -> list:
    r, out = rng(), []
    while len(out) < n:
        stride = int(r.choice([1, 1, 2, 3, -1, -2]))
        length = int(r.integers(1, 30 // abs(stride) + 1))
        size, step = int(r.integers(1, length + 1)), int(r.integers(1, 5))
        start = 0 if stride > 0 else (length - 1) * -stride
        sig = s.as_strided((length,), (stride,), start)
        out.append((f"s.as_strided(({length},), ({stride},), {start})", sig, size, step))
    return out


def _reference_windows(length: int, stride: int, size: int, step: int):
    """Count the windows one by one: window w fits if its last element w·step + size − 1 does."""
    count = 0
    while count * step + size - 1 <= length - 1:
        count += 1
    return (count, size), (step * stride, stride)


def check_windows(fn) -> None:
    """``fn(length, stride, size, step) -> (shape, strides)``: the layout of the sliding
    windows of a 1-D signal of ``length`` elements that sit ``stride`` storage positions apart:
    windows of ``size`` elements, a new window every ``step`` elements, the window index first
    (so element ``[w, k]`` is signal element ``w·step + k``). Windows that would run past the end
    are left out. Checked against windows counted one by one, and by reading the values
    through ``signal.as_strided(shape, strides)`` (``unfold`` is switched off meanwhile).
    """
    cases = _window_cases()
    for name, sig, size, step in cases:
        length, stride = sig.shape[0], sig.stride(0)
        want = _reference_windows(length, stride, size, step)
        values = sig.numpy()
        expected = np.array([[values[w * step + k] for k in range(size)] for w in range(want[0][0])])
        where = (f"for windows of size {size}, step {step} over the signal {name} "
                 f"(length {length}, stride {stride})")
        got = _call(fn, where, length, stride, size, step)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        try:
            shape, strides = got
            shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
        except (TypeError, ValueError):
            _fail(f"{where} you returned {got!r}; return (shape, strides), two tuples of two ints.")
        if (shape, strides) == want:
            mine = sig.as_strided(shape, strides).numpy().reshape(expected.shape)
            if not np.array_equal(mine, expected):  # cannot happen: same layout, same bytes
                _fail(f"{where} your layout reads other values than signal[w·step + k].")
            continue
        count = want[0][0]
        msg = (f"{where} you returned shape {shape}, strides {strides}; the windows have "
               f"shape {want[0]}, strides {want[1]}.")
        if len(shape) != 2 or len(strides) != 2:
            hint = "Two dimensions: which window (first), and where inside the window (second)."
        elif shape == want[0] and strides == (stride, step * stride):
            hint = ("The strides are swapped: moving to the next window skips step elements "
                    "(step·stride); moving inside a window skips one element (stride).")
        elif shape == (size, count) and shape != want[0]:
            hint = ("Window index first: element [w, k] is the k-th element of window w, so the shape "
                    "is (number of windows, size).")
        elif shape[1] != size:
            hint = f"Each window holds size = {size} elements: the second dimension has size {size}."
        elif shape[0] != count:
            if shape[0] == count - 1:
                hint = ("One window short: window w starts at w·step and ends at w·step + size − 1, "
                        "which must be ≤ length − 1, so there are (length − size) // step + 1 windows.")
            elif shape[0] > count:
                hint = (f"Too many windows: one that starts too late would run past the end of the signal "
                        f"(its last element must be ≤ {length - 1}). Count = (length − size) // step + 1.")
            else:
                hint = "Count the windows: (length − size) // step + 1."
        elif strides == (step, 1) and stride != 1:
            hint = (f"You assumed the signal is contiguous. Its elements are {stride} storage positions "
                    f"apart, so one step inside a window moves {stride}, and the next window starts "
                    f"step·stride = {step * stride} positions later.")
        elif strides[1] != stride:
            hint = (f"Inside a window you move one signal element at a time: {stride} storage "
                    "positions (the signal's stride).")
        else:
            hint = (f"The next window starts step = {step} signal elements later: step·stride = "
                    f"{step * stride} storage positions.")
        _fail(msg + "\n" + hint)
    _passed("check_windows", len(cases))


check_windows = checker("windows", blocks=_view_blocks)(check_windows)
