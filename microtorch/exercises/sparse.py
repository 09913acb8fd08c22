"""Exercises of notebook 11 (sparse gradients): COO → CSR, coalescing, and the backward of
sparse × dense — each written in numpy.

The references here are independent of :mod:`microtorch.sparse` (plain Python loops over
the elements, and dense numpy algebra), on fixed cases and random ones (another seed, and
more of them, with ``hidden=True``); while the learner's function runs, the engine's own
conversions (``to_sparse_csr``, ``coalesce``, ``mt.sparse.mm``) are switched off
(:func:`~.checker.checker`), so calling them is not an answer: write it yourself.
"""
from __future__ import annotations

import numpy as np

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng


def _sparse_blocks():
    """The engine's sparse conversions and products: switched off while the learner's code runs."""
    from ..sparse import base, coo, csr, spmm
    from ..tensor import Tensor

    return [(coo.SparseCOOTensor, "coalesce"), (coo.SparseCOOTensor, "to_sparse_csr"), csr.coo_to_csr,
            csr.to_sparse_csr, (Tensor, "to_sparse_csr"), spmm.mm, (spmm.SparseMM, "backward"),
            (base.SparseTensor, "__matmul__")]


def _arrays(got, n: int, where: str, names: str):
    if got is None:
        _fail(f"{where} your function returned None: did you forget `return`?")
    if not isinstance(got, (tuple, list)) or len(got) != n:
        _fail(f"{where} return a tuple of {n} arrays ({names}); got {type(got).__name__}"
              + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
    try:
        return [np.asarray(a._data if hasattr(a, "_data") else a) for a in got]
    except Exception:
        _fail(f"{where} could not read your answer as numpy arrays ({names})")


def _random_pattern(rng, m, k, nnz, unique: bool):
    if unique:
        nnz = min(nnz, m * k)
        flat = rng.choice(m * k, nnz, replace=False)
        rows, cols = np.divmod(flat, k)
    else:
        rows, cols = rng.integers(0, m, nnz), rng.integers(0, k, nnz)
    return rows.astype(np.int64), cols.astype(np.int64), np.round(rng.standard_normal(nnz), 3)


# ----------------------------------------------------------------------------------------------
# Exercise 1: COO → CSR
# ----------------------------------------------------------------------------------------------
def reference_csr(rows, cols, values, shape):
    """CSR by a loop over rows: each row's (column, value) pairs, sorted by column."""
    m = shape[0]
    per_row = [[] for _ in range(m)]
    for r, c, v in zip(rows.tolist(), cols.tolist(), values.tolist()):
        per_row[r].append((c, v))
    crow, out_cols, out_vals = [0], [], []
    for entries in per_row:
        for c, v in sorted(entries):
            out_cols.append(c)
            out_vals.append(v)
        crow.append(len(out_cols))
    return np.array(crow), np.array(out_cols, dtype=np.int64), np.array(out_vals)


CSR_CASES = [
    ("the 2×3 matrix of the notebook, elements in row order",
     np.array([0, 1, 1]), np.array([2, 0, 2]), np.array([3., 4., 5.]), (2, 3)),
    ("elements in no particular order", np.array([2, 0, 1, 0, 2]), np.array([1, 3, 0, 0, 3]),
     np.array([1., 2., 3., 4., 5.]), (3, 4)),
    ("empty rows in the middle and at the end", np.array([3, 0, 3]), np.array([1, 0, 0]),
     np.array([7., 8., 9.]), (6, 2)),
    ("a matrix with no elements", np.array([], np.int64), np.array([], np.int64), np.array([]), (3, 3)),
]


def _csr_cases():
    if not hidden():
        yield from CSR_CASES
    r = rng()
    for _ in range(20 if hidden() else 6):
        m, k = r.integers(1, 9, 2)
        yield (f"random case ({m}×{k})",) + _random_pattern(r, int(m), int(k), int(r.integers(0, 20)), True) + ((int(m), int(k)),)


def check_coo_to_csr(fn) -> None:
    """``fn(rows, cols, values, shape) -> (crow_indices, col_indices, values)``: convert a COO
    matrix whose positions are distinct but in any order into CSR — ``crow`` has
    ``rows + 1`` entries starting at 0, row i's elements are ``crow[i]:crow[i+1]``, columns
    sorted within each row, values moved with their columns."""
    n = 0
    for what, rows, cols, values, shape in _csr_cases():
        n += 1
        where = f"case '{what}' (rows={rows.tolist()}, cols={cols.tolist()}, shape={shape}):"
        crow, ocols, ovals = _arrays(_call(fn, where, rows.copy(), cols.copy(), values.copy(), shape),
                                     3, where, "crow_indices, col_indices, values")
        want = reference_csr(rows, cols, values, shape)
        _diagnose_csr(where, crow, ocols, ovals, want, rows, cols, values, shape)
    _passed("check_coo_to_csr", n)


check_coo_to_csr = checker("the COO → CSR conversion", blocks=_sparse_blocks)(check_coo_to_csr)


def _diagnose_csr(where, crow, cols, vals, want, rows, in_cols, in_vals, shape):
    wcrow, wcols, wvals = want
    m = shape[0]
    counts = np.bincount(rows, minlength=m) if rows.size else np.zeros(m, int)
    if crow.shape == (m,) and np.array_equal(crow, wcrow[1:]):
        _fail(f"{where} your crow_indices {crow.tolist()} are missing the leading 0: CSR keeps rows + 1 = "
              f"{m + 1} pointers, crow[0] = 0 and crow[i + 1] = where row i ends. Expected {wcrow.tolist()}.")
    if crow.shape == (m + 1,) and np.array_equal(crow[1:], counts) and not np.array_equal(crow, wcrow):
        _fail(f"{where} your crow_indices {crow.tolist()} hold each row's count; they must be the running "
              f"total (cumsum) of the counts, so that row i is elements crow[i]:crow[i+1]. Expected "
              f"{wcrow.tolist()}.")
    if crow.ndim != 1 or crow.shape[0] != m + 1:
        rows_seen = crow.shape[0] - 1 if crow.ndim == 1 else "?"
        hint = (" Empty rows at the end still need their pointers: count with np.bincount(rows, "
                "minlength=number_of_rows)." if crow.ndim == 1 and crow.shape[0] < m + 1 else "")
        _fail(f"{where} crow_indices must have rows + 1 = {m + 1} entries, yours has "
              f"{crow.shape[0] if crow.ndim == 1 else crow.shape} (it describes {rows_seen} rows).{hint} "
              f"Expected {wcrow.tolist()}.")
    if crow[0] != 0 or (np.diff(crow) < 0).any() or crow[-1] != len(wcols):
        _fail(f"{where} crow_indices {crow.tolist()} must start at 0, never decrease and end at nnz = "
              f"{len(wcols)}. Expected {wcrow.tolist()}.")
    if not np.array_equal(crow, wcrow):
        i = int(np.flatnonzero(crow != wcrow)[0])
        _fail(f"{where} crow_indices differ from position {i}: yours {crow.tolist()}, expected "
              f"{wcrow.tolist()} (row i holds the elements whose row index is i).")
    if cols.shape != wcols.shape or vals.shape != wvals.shape:
        _fail(f"{where} col_indices and values must have nnz = {len(wcols)} entries each; yours have "
              f"{cols.shape} and {vals.shape}.")
    for i in range(m):
        a, b = wcrow[i], wcrow[i + 1]
        mine = list(zip(cols[a:b].tolist(), vals[a:b].tolist()))
        theirs = list(zip(wcols[a:b].tolist(), wvals[a:b].tolist()))
        if mine == theirs:
            continue
        if sorted(mine) == theirs:
            _fail(f"{where} row {i} holds the right elements but its columns {cols[a:b].tolist()} are not "
                  f"sorted; CSR keeps the columns of each row in increasing order (expected "
                  f"{wcols[a:b].tolist()}). Sort the elements by (row, column), not by row alone.")
        if sorted(cols[a:b].tolist()) == wcols[a:b].tolist() and np.array_equal(cols[a:b], wcols[a:b]):
            _fail(f"{where} row {i}: the columns {cols[a:b].tolist()} are right but the values "
                  f"{vals[a:b].tolist()} are not theirs (expected {wvals[a:b].tolist()}): when you reorder "
                  "the columns, reorder the values with the same permutation.")
        transposed = reference_csr(in_cols, rows, in_vals, shape[::-1]) if shape[0] == shape[1] else None
        if transposed is not None and np.array_equal(cols, transposed[1]):
            _fail(f"{where} your arrays describe the transposed matrix: rows and columns are swapped.")
        _fail(f"{where} row {i} should hold (column, value) pairs {theirs}, yours holds {mine}.")


# ----------------------------------------------------------------------------------------------
# Exercise 2: coalesce
# ----------------------------------------------------------------------------------------------
def reference_coalesce(indices, values, shape):
    """Sum the values of each position in a dict, then list the positions in row-major order."""
    sums: dict = {}
    for r, c, v in zip(indices[0].tolist(), indices[1].tolist(), values.tolist()):
        sums[(r, c)] = sums.get((r, c), 0.0) + v
    keys = sorted(sums)
    idx = np.array(keys, dtype=np.int64).T.reshape(2, -1)
    return idx, np.array([sums[k] for k in keys])


COALESCE_CASES = [
    ("a repeated position", np.array([[0, 1, 0], [2, 0, 2]]), np.array([1., 2., 3.]), (2, 3)),
    ("out of order, no repeats", np.array([[2, 0, 1], [0, 1, 1]]), np.array([1., 2., 3.]), (3, 2)),
    ("repeats that cancel to 0 (coalesce keeps the entry)", np.array([[1, 1, 0], [1, 1, 0]]),
     np.array([2.5, -2.5, 1.]), (2, 2)),
    ("same row, columns out of order", np.array([[0, 0, 0, 0], [3, 1, 3, 0]]), np.array([1., 2., 4., 8.]), (1, 4)),
    ("nothing stored", np.zeros((2, 0), np.int64), np.array([]), (2, 2)),
]


def _coalesce_cases():
    if not hidden():
        yield from COALESCE_CASES
    r = rng()
    for _ in range(20 if hidden() else 6):
        m, k = (int(x) for x in r.integers(1, 6, 2))
        rows, cols, vals = _random_pattern(r, m, k, int(r.integers(1, 16)), False)
        yield (f"random case ({m}×{k}, {rows.size} elements)", np.stack([rows, cols]), vals, (m, k))


def check_coalesce(fn) -> None:
    """``fn(indices, values, shape) -> (indices, values)``: coalesce a COO matrix — positions
    sorted row-major (by row, then column), each once, holding the sum of its values
    (entries whose sum is 0 stay, as in PyTorch)."""
    n = 0
    for what, idx, vals, shape in _coalesce_cases():
        n += 1
        where = f"case '{what}' (indices={idx.tolist()}, values={vals.tolist()}):"
        oidx, ovals = _arrays(_call(fn, where, idx.copy(), vals.copy(), shape), 2, where, "indices, values")
        widx, wvals = reference_coalesce(idx, vals, shape)
        _diagnose_coalesce(where, oidx, ovals, widx, wvals, idx, vals)
    _passed("check_coalesce", n)


check_coalesce = checker("coalescing", blocks=_sparse_blocks)(check_coalesce)


def _diagnose_coalesce(where, idx, vals, widx, wvals, in_idx, in_vals):
    if idx.ndim != 2 or idx.shape[0] != 2:
        _fail(f"{where} indices must have shape (2, nnz) — a row of row indices over a row of column "
              f"indices — yours has shape {idx.shape}.")
    got = {(int(r), int(c)) for r, c in idx.T}
    want = {(int(r), int(c)) for r, c in widx.T}
    if idx.shape[1] > widx.shape[1] and got == want:
        _fail(f"{where} a position appears more than once in your answer ({idx.shape[1]} entries for "
              f"{widx.shape[1]} distinct positions): coalescing keeps each position once.")
    if got != want:
        if got < want:
            missing = sorted(want - got)
            sums = dict(zip(map(tuple, widx.T.tolist()), wvals.tolist()))
            if all(abs(sums[p]) < 1e-12 for p in missing):
                _fail(f"{where} you dropped position(s) {missing} whose values sum to 0; coalesce keeps "
                      "them (it merges duplicates, it does not remove zeros).")
        _fail(f"{where} your positions {sorted(got)} should be {sorted(want)}.")
    if vals.shape != wvals.shape:
        _fail(f"{where} values must have one entry per position ({wvals.shape[0]}), yours has shape {vals.shape}.")
    order = list(map(tuple, idx.T.tolist()))
    if order != list(map(tuple, widx.T.tolist())):
        if order == sorted(order, key=lambda p: (p[1], p[0])):
            _fail(f"{where} your positions are sorted by column first ({order}); coalesced means "
                  "row-major: by row, then by column within a row.")
        _fail(f"{where} your positions {order} are not sorted row-major (by row, then column): expected "
              f"{list(map(tuple, widx.T.tolist()))}.")
    if np.allclose(vals, wvals, atol=1e-9):
        return
    first, last = {}, {}
    for (r, c), v in zip(map(tuple, in_idx.T.tolist()), in_vals.tolist()):
        first.setdefault((r, c), v)
        last[(r, c)] = v
    keys = list(map(tuple, widx.T.tolist()))
    if np.allclose(vals, [first[k] for k in keys]) or np.allclose(vals, [last[k] for k in keys]):
        _fail(f"{where} your values {vals.tolist()} keep one of the repeated values; a repeated position "
              f"holds the sum of all its values: expected {wvals.tolist()}.")
    if sorted(vals.tolist()) == sorted(wvals.tolist()):
        _fail(f"{where} your values {vals.tolist()} are the right numbers in the wrong places: move each "
              f"value with its position when you sort. Expected {wvals.tolist()}.")
    k = int(np.flatnonzero(~np.isclose(vals, wvals, atol=1e-9))[0])  # the tolerance of the test above
    _fail(f"{where} the value at position {keys[k]} should be {wvals[k]:g} (the sum of its entries), yours "
          f"is {vals[k]:g}.")


# ----------------------------------------------------------------------------------------------
# Exercise 3: the backward of sparse × dense
# ----------------------------------------------------------------------------------------------
def reference_spmm_backward(rows, cols, values, D, G):
    """Dense algebra: A = the matrix (repeats added), dD = Aᵀ G, dv_e = (G Dᵀ)[r_e, c_e]."""
    A = np.zeros((G.shape[0], D.shape[0]))
    np.add.at(A, (rows, cols), values)
    return (G @ D.T)[rows, cols], A.T @ G


def _spmm_cases():
    fixed_rng = np.random.default_rng(11)
    fixed = [("a 3×3 matrix times 3×2", 3, 3, 2, 4, True),
             ("a repeated position (its two values each get the same gradient)", 3, 3, 2, 5, False),
             ("a wide output (4 columns)", 3, 2, 4, 4, True)]
    fixed = [] if hidden() else fixed
    for what, m, k, n, nnz, unique in fixed:
        rows, cols, values = _random_pattern(fixed_rng, m, k, nnz, unique)
        if not unique:  # the case promises a repeated position: the last element repeats the first
            rows[-1], cols[-1] = rows[0], cols[0]
        yield (what, rows, cols, values, np.round(fixed_rng.standard_normal((k, n)), 2),
               np.round(fixed_rng.standard_normal((m, n)), 2))
    r = rng()
    for _ in range(20 if hidden() else 6):
        m, k, n = (int(x) for x in r.integers(1, 7, 3))
        yield (f"random case ({m}×{k} @ {k}×{n})",) + _random_pattern(r, m, k, int(r.integers(1, 12)), False) + (
            r.standard_normal((k, n)), r.standard_normal((m, n)))


def check_spmm_backward(fn) -> None:
    """``fn(rows, cols, values, D, G) -> (grad_values, grad_D)``: for out = S @ D with S the
    m × k matrix stored as (rows, cols, values) (repeats add up) and G = dL/d(out), return
    dL/d(values) — one number per stored element — and dL/dD = Sᵀ G."""
    n = 0
    for what, rows, cols, values, D, G in _spmm_cases():
        n += 1
        where = f"case '{what}' (rows={rows.tolist()}, cols={cols.tolist()}):"
        gv, gD = _arrays(_call(fn, where, rows.copy(), cols.copy(), values.copy(), D.copy(), G.copy()), 2,
                         where, "grad_values, grad_D")
        wv, wD = reference_spmm_backward(rows, cols, values, D, G)
        _diagnose_spmm(where, gv, gD, wv, wD, rows, cols, values, D, G)
    _passed("check_spmm_backward", n)


check_spmm_backward = checker("the backward of sparse × dense", blocks=_sparse_blocks)(check_spmm_backward)


def _diagnose_spmm(where, gv, gD, wv, wD, rows, cols, values, D, G):
    m, k = G.shape[0], D.shape[0]
    if gv.shape == wD.shape and gD.shape == wv.shape and wv.shape != wD.shape:
        _fail(f"{where} you returned (grad_D, grad_values); return them in the order of the inputs: "
              "(grad_values, grad_D).")
    if gv.shape == (m, k):
        _fail(f"{where} your grad_values has shape {gv.shape}, a dense m × k gradient; the gradient of S "
              f"lives on its pattern: one number per stored element, shape ({len(rows)},) — "
              "dv_e = G[r_e] · D[c_e].")
    if gv.shape == (len(rows), G.shape[1]):
        _fail(f"{where} your grad_values has shape {gv.shape}: G[r_e] * D[c_e] without the sum; each "
              "element's gradient is the dot product Σ_j G[r_e, j] D[c_e, j].")
    if gv.shape != wv.shape:
        _fail(f"{where} grad_values must have one entry per stored element, shape {wv.shape}; yours is {gv.shape}.")
    if gD.shape != wD.shape:
        _fail(f"{where} grad_D must have D's shape {wD.shape}; yours is {gD.shape}. (dD = Sᵀ G: a "
              "k × m matrix times m × n.)")
    if not np.allclose(gv, wv, atol=1e-8):
        if rows.size and k == m and np.allclose(gv, np.einsum("ej,ej->e", G[cols], D[rows]), atol=1e-8):
            _fail(f"{where} grad_values uses G[c_e] · D[r_e]: rows and columns swapped. The element at "
                  "(r, c) multiplies row c of D into row r of the output, so dv_e = G[r_e] · D[c_e].")
        e = int(np.flatnonzero(~np.isclose(gv, wv, atol=1e-8))[0])
        _fail(f"{where} grad_values[{e}] (element at ({rows[e]}, {cols[e]})) should be "
              f"G[{rows[e]}] · D[{cols[e]}] = {wv[e]:.6g}, yours is {gv[e]:.6g}.")
    if np.allclose(gD, wD, atol=1e-8):
        return
    A = np.zeros((m, k))
    np.add.at(A, (rows, cols), values)
    last = np.zeros((m, k))
    last[rows, cols] = values
    if not np.array_equal(A, last) and np.allclose(gD, last.T @ G, atol=1e-8):
        _fail(f"{where} your grad_D is right except where a position is stored twice: its values add up "
              "(build Sᵀ G with an unbuffered add — np.add.at — not an assignment, which keeps only one).")
    if m == k and np.allclose(gD, A @ G, atol=1e-8):
        _fail(f"{where} your grad_D is S @ G; it must be Sᵀ @ G (the element at (r, c) sends "
              "v · G[r] to row c of dD).")
    _fail(f"{where} grad_D should be Sᵀ @ G =\n{np.round(wD, 5)}\nyours is\n{np.round(gD, 5)}.")
