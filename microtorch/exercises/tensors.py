"""Exercises of notebook 01 (tensors and graphs): strides, element offsets, unbroadcast.

While the learner's function runs, the engine's own answer is switched off (its strides
helper and ``Tensor.stride``; ``as_strided`` and element addresses; ``unbroadcast``). The
references are independent: numpy's strides, the values stored in the engine's bytes, and a
numpy sum.
"""
from __future__ import annotations

import numpy as np

from ..creation import arange, randn
from .checker import checker
from .checking import HIDDEN_SEED, WriteItYourself, _as_array, _call, _fail, _passed, hidden, learner, rng


STRIDE_CASES = [(5,), (2, 3), (3, 4, 5), (4, 1, 3), (2, 3, 4, 5), (7, 1), ()]


def _random_shapes(n: int) -> list[tuple[int, ...]]:
    r = rng()
    return [tuple(int(k) for k in r.integers(1, 8, int(r.integers(1, 6)))) for _ in range(n)]


def _strides_blocks():
    from ..functions.strided import _contiguous_strides
    from ..tensor import Tensor

    return [_contiguous_strides, (Tensor, "stride")]


def _numpy_strides(shape) -> tuple[int, ...]:
    """The reference: numpy's byte strides of a C-ordered array, in elements."""
    a = np.empty(shape, dtype=np.float64)
    return tuple(s // a.itemsize for s in a.strides)


def check_strides(fn) -> None:
    """``fn(shape) -> strides``: the strides (in elements) of a contiguous tensor of ``shape``.

    Checked against numpy's strides of a C-ordered array, on fixed and random shapes.
    """
    cases = STRIDE_CASES + _random_shapes(40 if hidden() else 10)
    for shape in cases:
        want = _numpy_strides(shape)
        got = _call(fn, f"for shape {shape}", shape)
        if got is None:
            _fail(f"for shape {shape} your function returned None: did you forget `return`?")
        try:
            got_t = tuple(int(s) for s in got)
        except (TypeError, ValueError):
            _fail(f"for shape {shape} your function returned {got!r}; return a tuple of ints, "
                  f"one stride per dimension (the engine says {want}).")
        if got_t == want:
            continue
        msg = f"for shape {shape} you returned {got_t}, but a contiguous tensor of that shape has strides {want}."
        if len(got_t) != len(want):
            hint = f"There is one stride per dimension: {len(want)} here, you gave {len(got_t)}."
        elif got_t == tuple(s * 4 for s in want) or got_t == tuple(s * 8 for s in want):
            hint = ("Those look like byte strides. microtorch (like PyTorch) counts strides in "
                    "elements; numpy's .strides are in bytes.")
        elif got_t == tuple(int(np.prod(shape[:d])) for d in range(len(shape))):
            hint = ("Those are column-major (Fortran-order) strides. In row-major (C) order the "
                    "LAST dimension moves fastest: its stride is 1, and each stride to the left "
                    "is the product of all sizes to its right.")
        elif want and got_t[-1] != 1:
            hint = "The last dimension's neighbouring elements sit next to each other: its stride is 1."
        else:
            hint = "Each stride is the product of all the sizes to its right (the last one is 1)."
        _fail(msg + "\n" + hint)
    _passed("check_strides", len(cases))


check_strides = checker("contiguous_strides", blocks=_strides_blocks)(check_strides)


# ---------------------------------------------------------------------------------------------
def _offset_cases():
    base = arange(60, dtype="float64").reshape(3, 4, 5)  # element k of the storage holds the value k
    cases = [
        ("x", base),
        ("x.transpose(0, 2)", base.transpose(0, 2)),
        ("x[1]", base[1]),
        ("x[:, 2:, 1:4]", base[:, 2:, 1:4]),
        ("x.permute(2, 0, 1)[3:]", base.permute(2, 0, 1)[3:]),
        ("x[2, 1:, ::2]", base[2, 1:, ::2]),
    ]
    r = rng()
    for _ in range(8 if hidden() else 3):  # random permutations and stepped slices
        perm = tuple(int(d) for d in r.permutation(3))
        view = base.permute(*perm)
        key = []
        for n in view.shape:
            start = int(r.integers(0, n))
            key.append(slice(start, None, int(r.integers(1, 3))))
        cases.append((f"x.permute{perm}[{', '.join(f'{k.start}::{k.step}' for k in key)}]", view[tuple(key)]))
    return cases


def _offset_blocks():
    from ..functions.strided import as_strided
    from ..memory.aliasing import Layout, _address
    from ..tensor import Tensor

    return [_address, (Layout, "addresses"), as_strided, (Tensor, "as_strided")]


def check_element_offset(fn) -> None:
    """``fn(index, strides, offset) -> position``: where element ``index`` of a view lives in
    its storage. Checked against the engine's bytes: views of ``x = mt.arange(60.).reshape(3,
    4, 5)``, whose storage holds 0, 1, 2, ... so an element's value *is* its position.
    """
    n = 0
    for name, view in _offset_cases():
        strides, offset = view.stride(), view.storage_offset()
        storage = view.storage.data
        for index in np.ndindex(*view.shape):
            value = view[index].item() if index else view.item()
            want = int(np.flatnonzero(storage == value)[0])  # where the engine's bytes hold it
            got = _call(fn, f"for view {name}, element {tuple(index)},", tuple(index), strides, offset)
            n += 1
            if got is None:
                _fail(f"for view {name}, element {tuple(index)}: your function returned None: "
                      "did you forget `return`?")
            if int(got) == want:
                continue
            msg = (f"view {name} (shape {view.shape}, strides {strides}, offset {offset}): element "
                   f"{tuple(index)} holds {value:g}, which lives at storage position {want}; you "
                   f"returned {got}.")
            if int(got) == want - offset:
                hint = "You left out the offset: a view can start part-way into its storage."
            elif int(got) == offset + sum(i * s for i, s in zip(index, reversed(strides))):
                hint = "The strides are paired with the wrong dimensions: index[d] goes with strides[d]."
            else:
                hint = "position = offset + sum over d of index[d] * strides[d]."
            _fail(msg + "\n" + hint)
    _passed("check_element_offset", n)


check_element_offset = checker("element_offset", blocks=_offset_blocks)(check_element_offset)


# ---------------------------------------------------------------------------------------------
UNBROADCAST_CASES = [((2, 3), (3,)), ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((4, 2, 3), (2, 1)),
                     ((4, 2, 3), (3,)), ((2, 3), ()), ((2, 3), (2, 3)), ((5, 1, 3), (1, 3))]


def _random_unbroadcast_cases(n: int) -> list:
    """An operand shape and the output shape broadcasting makes from it (more and wider dims)."""
    r, cases = rng(), []
    for _ in range(n):
        shape = tuple(int(k) for k in r.integers(1, 4, int(r.integers(0, 4))))
        out = tuple(int(r.integers(2, 4)) if (k == 1 and r.random() < 0.6) else k for k in shape)
        lead = tuple(int(k) for k in r.integers(1, 4, int(r.integers(0, 3))))
        cases.append((lead + out, shape))
    return cases


def _numpy_unbroadcast(g: np.ndarray, shape) -> np.ndarray:
    """The reference, in numpy: the operand's copies summed."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead)))
    for d, n in enumerate(shape):
        if n == 1:
            g = g.sum(axis=d, keepdims=True)
    return g.reshape(shape)


def _unbroadcast_blocks():
    from ..functions.broadcast import unbroadcast

    return [unbroadcast]


def check_unbroadcast(fn) -> None:
    """``fn(g, shape) -> gradient of shape``: sum the gradient ``g`` (shaped like the op's
    output) back to an operand's ``shape``. Checked against a numpy sum over the copies,
    on fixed and random shapes (``mt.unbroadcast`` is switched off meanwhile).
    """
    from ..creation import Generator

    gen = Generator().manual_seed(HIDDEN_SEED if hidden() else 0)
    cases = UNBROADCAST_CASES + _random_unbroadcast_cases(30 if hidden() else 8)
    for g_shape, shape in cases:
        g = randn(*g_shape, dtype="float64", generator=gen)
        before = np.array(g._data)
        want = _numpy_unbroadcast(np.array(g._data), shape)
        where = f"for a gradient g of shape {g_shape} going back to an operand of shape {shape}"
        got = _call(fn, where, g, shape)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        if not np.array_equal(g._data, before):
            _fail(f"{where} your function changed g in place; compute a new tensor instead "
                  "(g may be shared with other operands).")
        got_a = _as_array(got)
        if tuple(got_a.shape) != tuple(shape):
            lead = len(g_shape) - len(shape)
            stretched = [lead + i for i, n in enumerate(shape) if n == 1 and g_shape[lead + i] != 1]
            parts = []
            if lead:
                parts.append(f"the leading dimension(s) {tuple(range(lead))} that broadcasting added")
            if stretched:
                parts.append(f"dimension(s) {tuple(stretched)} of g, where the operand has size 1 "
                             "(keep them: keepdim=True, or reshape at the end)")
            how = " and ".join(parts) or "nothing: the shapes already match"
            _fail(f"{where} you returned shape {tuple(got_a.shape)}; the operand's gradient must "
                  f"have the operand's shape {tuple(shape)}.\nSum over {how}.")
        if np.allclose(got_a, want, rtol=1e-6, atol=1e-9):
            continue
        copies = int(np.prod(g_shape)) // max(1, int(np.prod(shape)))
        if copies > 1 and np.allclose(got_a * copies, want, rtol=1e-6, atol=1e-9):
            hint = ("Your values are the engine's divided by the number of copies: you averaged. "
                    "Each copy of the operand got its own gradient, and gradients of copies add up: sum.")
        else:
            hint = "Right shape, wrong numbers: sum (do not pick one slice) over the broadcast dimensions."
        _fail(f"{where} you returned\n{got_a}\nbut the engine's gradient is\n{want}\n{hint}")
    _passed("check_unbroadcast", len(cases))


check_unbroadcast = checker("unbroadcast", blocks=_unbroadcast_blocks, suite="unbroadcast")(check_unbroadcast)




# ---------------------------------------------------------------------------------------------
# Exercise 4: the layout of x[key] (basic indexing is a view)
# ---------------------------------------------------------------------------------------------
def _numpy_layout(shape, strides, offset, key):
    """The reference: numpy's view of the same layout, indexed with ``key``."""
    buf = np.arange(4096, dtype=np.float64)
    a = np.lib.stride_tricks.as_strided(buf[offset:], shape, tuple(s * 8 for s in strides))
    v = a[tuple(key) + (Ellipsis,)]  # "..." keeps x[0, 0, 0] a (0-d) view, not a scalar
    start = (v.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // 8
    return tuple(v.shape), tuple(s // 8 for s in v.strides), int(start)


def _slice_words(key) -> str:
    def one(k):
        if isinstance(k, slice):
            return ":".join("" if x is None else str(x) for x in (k.start, k.stop)) + (
                "" if k.step is None else f":{k.step}")
        return str(k)
    return "x[" + ", ".join(one(k) for k in key) + "]"


def _layout_cases():
    """``(shape, strides, offset, key)``: a contiguous (4, 5, 6) and a transposed layout, keys with
    ints, negative ints, slices with steps (also negative), and fewer keys than dimensions."""
    c = ((4, 5, 6), (30, 6, 1), 0)
    t = ((6, 5, 4), (1, 6, 30), 7)
    keys = [(1,), (slice(1, 3),), (-1,), (slice(None, None, 2), 3), (2, slice(1, None), slice(None, None, -1)),
            (slice(None, None, -2), -2, slice(4, 1, -1)), (slice(10, 20),), (0, 0, 0), (slice(None), slice(3, 3))]
    cases = [(*layout, key) for layout in (c, t) for key in keys]
    r = rng()
    for _ in range(60 if hidden() else 12):
        shape, strides, offset = (c, t)[int(r.integers(0, 2))]
        key = []
        for n in shape[:int(r.integers(1, 4))]:
            if r.random() < 0.3:
                key.append(int(r.integers(-n, n)))
            else:
                a, b = (int(v) if r.random() < 0.7 else None for v in r.integers(-n - 1, n + 2, 2))
                step = int(r.choice([1, 2, 3, -1, -2]))
                key.append(slice(a, b, step))
        cases.append((shape, strides, offset, tuple(key)))
    return cases


def _out_of_range_cases():
    """``(shape, strides, offset, key, d)``: keys whose int at dimension ``d`` is out of range
    (one past either end, also after a slice and in a transposed layout)."""
    c = ((4, 5, 6), (30, 6, 1), 0)
    t = ((6, 5, 4), (1, 6, 30), 7)
    return [(*c, (4,), 0), (*c, (-5,), 0), (*c, (slice(1, 3), 5), 1), (*t, (0, 0, -5), 2), (*t, (6, 1), 0)]


def _check_index_error(fn, shape, strides, offset, key, d) -> None:
    """An int out of range at dimension ``d`` of ``key`` must raise IndexError, as ``x[key]`` does."""
    where = f"for x of shape {shape} and {_slice_words(key)} (key = {key!r}):"
    why = (f"index {key[d]} is out of range for dimension {d} of size {shape[d]} (it takes "
           f"-{shape[d]} ≤ i < {shape[d]}): raise IndexError, as x[key] does.")
    try:
        with learner():
            got = fn(shape, strides, offset, key)
    except IndexError:
        return
    except (NotImplementedError, WriteItYourself):
        raise
    except Exception as exc:
        _fail(f"{where} your function raised {type(exc).__name__}: {exc}\n{why}")
    _fail(f"{where} you returned {got!r}; {why}")


def _layout_blocks():
    from ..functions import shape as shape_ops
    from ..functions.strided import as_strided
    from ..tensor import Tensor

    return [shape_ops.index, as_strided, (Tensor, "as_strided"), (Tensor, "__getitem__")]


def check_slice_layout(fn) -> None:
    """``fn(shape, strides, offset, key) -> (shape, strides, offset)``: the layout of the view
    ``x[key]`` of a tensor with that layout, ``key`` a tuple of ints and slices (basic
    indexing: always a view). Checked against numpy's view of the same layout, on fixed and
    random keys (the engine's indexing and ``as_strided`` are switched off meanwhile); an int
    out of range must raise ``IndexError``.
    """
    cases = _layout_cases()
    for shape, strides, offset, key in cases:
        want = _numpy_layout(shape, strides, offset, key)
        where = (f"for x of shape {shape}, strides {strides}, offset {offset}, and {_slice_words(key)} "
                 f"(key = {key!r}):")
        got = _call(fn, where, shape, strides, offset, key)
        try:
            g_shape, g_strides, g_off = got
            got = (tuple(int(n) for n in g_shape), tuple(int(s) for s in g_strides), int(g_off))
        except (TypeError, ValueError):
            _fail(f"{where}\nyou returned {got!r}; return (shape, strides, offset): two tuples and an int.")
        if got == want or (got[0] == want[0] and 0 in want[0]):  # an empty view reads nothing
            continue
        msg = f"{where}\nyou returned shape {got[0]}, strides {got[1]}, offset {got[2]}; the view has " \
              f"shape {want[0]}, strides {want[1]}, offset {want[2]}."
        ints = [k for k in key if not isinstance(k, slice)]
        slices = [k for k in key if isinstance(k, slice)]
        if len(got[0]) != len(want[0]):
            hint = ("An int index removes its dimension (x[1] of a 3-D x is 2-D); a slice keeps it; dimensions "
                    "the key does not reach are kept whole.")
        elif (any(isinstance(k, int) and k < 0 for k in key) and got[0] == want[0] and got[1] == want[1]
              and got[2] == want[2] - sum(n * s for k, n, s in zip(key, shape, strides) if isinstance(k, int) and k < 0)):
            hint = "A negative index counts from the end: i < 0 means n + i."  # the offset of i taken as is
        elif any(k.step is not None and k.step < 0 for k in slices) and got[0] == want[0] and got[1] != want[1]:
            hint = "A negative step walks backwards: the stride is step · stride (negative), start at the slice's first element."
        elif got[0] != want[0]:
            hint = ("A slice keeps len(range(*s.indices(n))) elements: slice.indices(n) clips start and stop to the "
                    "dimension and fills in the defaults, also for negative steps.")
        elif got[1] != want[1]:
            hint = "A slice with step k multiplies that dimension's stride by k."
        else:
            hint = ("The offset moves to the first element of the view: offset + Σ start·stride over the "
                    "dimensions (an int index counts as its start)" + (", even for a dimension an int removes." if ints else "."))
        _fail(msg + "\n" + hint)
    bad = _out_of_range_cases()
    for case in bad:
        _check_index_error(fn, *case)
    _passed("check_slice_layout", len(cases) + len(bad))


check_slice_layout = checker("slice_layout", blocks=_layout_blocks)(check_slice_layout)
