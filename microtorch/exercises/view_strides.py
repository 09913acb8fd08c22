"""Exercise 4 of notebook 06 (views and aliasing): when can a view be reshaped without
copying? The strides of a view of a new shape over the same elements, or ``None`` when no
strides can do it (``view`` refuses; ``reshape`` copies).

The layouts are read from real microtorch views (of the 4 × 6 matrix and the 64-element
storage that :mod:`.views` builds its cases on). While the learner's function runs, the
engine's ``view``, ``reshape`` and ``as_strided`` are switched off. The reference is numpy's
no-copy reshape of an array with the same layout; strides pass when they reach the same
storage positions in the same order.
"""
from __future__ import annotations

import numpy as np

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng
from .views import _big, _x


# ----------------------------------------------------------------------------------------------
# Exercise 4: when can a view be reshaped without copying? (the strides of the new view)
# ----------------------------------------------------------------------------------------------
def _view_cases():
    """``(what, shape, strides, new_shape)``: layouts of real views, and shapes to view them as."""
    x = _x()
    views_ = [("x[:, 1:5]", x[:, 1:5]), ("x (4, 6), contiguous", x), ("x.T", x.T), ("x[:, ::2]", x[:, ::2]),
              ("x[1:3]", x[1:3]), ("x[:, 2:3].expand(4, 5)", x[:, 2:3].expand(4, 5)),
              ("x.reshape(2, 2, 6).permute(1, 0, 2)", x.reshape(2, 2, 6).permute(1, 0, 2)),
              ("x[::2, ::3]", x[::2, ::3]), ("x[1:2]", x[1:2])]
    targets = {"x (4, 6), contiguous": [(24,), (2, 12), (4, 3, 2), (1, 24, 1), (8, 3)],
               "x.T": [(24,), (3, 2, 4), (6, 2, 2), (6, 4, 1)], "x[:, ::2]": [(12,), (4, 3, 1), (2, 2, 3)],
               "x[1:3]": [(12,), (2, 2, 3), (3, 4)], "x[:, 1:5]": [(4, 2, 2), (16,), (2, 8)],
               "x[:, 2:3].expand(4, 5)": [(20,), (4, 5, 1), (2, 2, 5)],
               "x.reshape(2, 2, 6).permute(1, 0, 2)": [(2, 12), (4, 6), (2, 2, 3, 2)],
               "x[::2, ::3]": [(4,), (2, 2, 1), (1, 4)], "x[1:2]": [(6,), (2, 3), (1, 1, 6)]}
    cases = [(name, tuple(v.shape), tuple(v.stride()), t) for name, v in views_ for t in targets[name]]
    r = rng()
    for _ in range(40 if hidden() else 10):  # random permutations / steps of a (2, 3, 4) block, random splits
        base = _big()[:24].reshape(2, 3, 4).permute(*(int(d) for d in r.permutation(3)))
        if r.random() < 0.4:
            base = base[:, ::2]
        n = base.numel()
        splits = [d for d in range(1, n + 1) if n % d == 0]
        a = int(r.choice(splits))
        b = int(r.choice([d for d in splits if (n // a) % d == 0]))
        cases.append((f"a random view of shape {tuple(base.shape)}", tuple(base.shape), tuple(base.stride()),
                      (a, b, n // a // b)))
    return cases


def _numpy_view_strides(shape, strides, new_shape):
    """The reference: numpy's no-copy reshape of an array with this layout (None if it must copy)."""
    buf = np.arange(1024, dtype=np.float64)
    a = np.lib.stride_tricks.as_strided(buf, shape, tuple(s * 8 for s in strides))
    try:
        b = a.reshape(new_shape, copy=False)
    except ValueError:
        return None
    return tuple(s // 8 for s in b.strides)


def _positions_of(shape, strides) -> np.ndarray:
    """Storage positions (offset 0) of every element, in C order."""
    idx = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=int)
    return (np.asarray(strides, dtype=np.int64)[:, None] * idx).sum(axis=0) if shape else np.zeros(1, dtype=np.int64)


def _view_strides_blocks():
    from ..functions import shape as shape_ops
    from ..functions.strided import as_strided
    from ..tensor import Tensor

    blocks = [shape_ops.view, shape_ops.reshape, as_strided, (Tensor, "as_strided")]
    blocks += [(Tensor, m) for m in ("view", "reshape") if m in Tensor.__dict__]
    return blocks


def check_view_strides(fn) -> None:
    """``fn(shape, strides, new_shape) -> strides or None``: the strides of a view of
    ``new_shape`` over the same elements (in the same row-major order) as the view
    ``(shape, strides)``, or ``None`` if no strides can do it (``view`` refuses; ``reshape``
    copies). Checked on real views (transposes, steps, an expand, a permutation) and random
    ones: None exactly when numpy's no-copy reshape refuses, and otherwise strides that reach
    the same storage positions in the same order (strides of size-1 dimensions are free).
    """
    cases = _view_cases()
    for what, shape, strides, new_shape in cases:
        where = f"for {what}: shape {shape}, strides {strides}, viewed as {new_shape}:"
        want = _numpy_view_strides(shape, strides, new_shape)
        got = _call(fn, where, shape, strides, new_shape)
        if want is None:
            if got is None:
                continue
            _fail(f"{where}\nyou returned strides {got!r}, but no view can do it: the elements are not "
                  "evenly spaced across the dimensions you merged. E.g. after a transpose, the rows of the "
                  "new shape would have to jump back and forth in the storage: view refuses (reshape copies).\n"
                  "Group the old dimensions into runs where strides[d] == strides[d + 1] · shape[d + 1]; a new "
                  "dimension may only merge or split dimensions inside one run.")
        if got is None:
            _fail(f"{where}\nyou returned None, but a view exists: strides {want}. The dimensions you merge "
                  "or split lie in one contiguous run (strides[d] == strides[d + 1] · shape[d + 1]), or "
                  "they are of size 1 (any stride).")
        try:
            got = tuple(int(s) for s in got)
        except (TypeError, ValueError):
            _fail(f"{where}\nyou returned {got!r}; return a tuple of ints (one stride per new dimension) or None.")
        if len(got) != len(new_shape):
            _fail(f"{where}\nyou returned {len(got)} strides for {len(new_shape)} dimensions.")
        if np.array_equal(_positions_of(new_shape, got), _positions_of(shape, strides)):
            continue
        contiguous = []
        acc = 1
        for n in reversed(new_shape):
            contiguous.append(acc)
            acc *= n
        hint = ("Those are the strides of a contiguous tensor of the new shape: right only if the old view was "
                "contiguous. Start each run from the stride of its LAST old dimension."
                if got == tuple(reversed(contiguous)) else
                "Within a run, the new strides are the run's last stride times the product of the new sizes to "
                "the right (inside that run).")
        _fail(f"{where}\nyour strides {got} read the storage positions "
              f"{_positions_of(new_shape, got)[:12].tolist()}…, but the view's elements are at "
              f"{_positions_of(shape, strides)[:12].tolist()}… (numpy gives strides {want}).\n{hint}")
    _passed("check_view_strides", len(cases))


check_view_strides = checker("view_strides", blocks=_view_strides_blocks)(check_view_strides)
