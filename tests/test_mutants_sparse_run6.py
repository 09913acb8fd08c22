"""Mutation run 6, ``exercises/sparse.py`` (notebook 11's checkers): what a learner is shown.

* a catalogue of wrong answers per checker (COO → CSR, coalesce, the backward of sparse ×
  dense), each a mistake a learner makes (crow_indices without the leading 0 or not a running
  total, columns not sorted within a row, duplicates kept or not summed, the dense G Dᵀ
  instead of its entries on the pattern, dD not transposed, ...): each is rejected on a named
  case with the hint for that mistake, and the numbers in the hint are the case's own;
* the references agree with independent computations (dense numpy, the engine outside the
  checkers, finite differences of the loss);
* the cases the checkers generate are the kinds they promise (fixed ones, then random valid
  ones, more and different ones in the hidden run; labels that describe their case), the
  engine's sparse functions are switched off while the learner's function runs, and the pass
  message counts the cases the learner's function was called on.

Record: tests/mutation-run-6/exercises-sparse.md.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import checking, sparse
from microtorch.sparse import spmm as engine_spmm

from checker_probes import Recorder as _Recorder, failure as _message, cases_counted as _cases_counted
from test_exercise_checkers import _solutions

SOLUTION = _solutions("11_sparse_gradients")  # the notebook's reference answers
coo_to_csr = SOLUTION["coo_to_csr"]
coalesce = SOLUTION["coalesce"]
spmm_backward = SOLUTION["spmm_backward"]


def _generated(cases, hidden: bool = False) -> list:
    """The cases a generator yields, in the visible or the hidden run."""
    before, checking._HIDDEN[0] = checking._HIDDEN[0], hidden
    try:
        return list(cases())
    finally:
        checking._HIDDEN[0] = before


def _dense(rows, cols, values, shape) -> np.ndarray:
    A = np.zeros(shape)
    for r, c, v in zip(rows.tolist(), cols.tolist(), values.tolist()):
        A[r, c] += v
    return A


def _matrix(rows, cols, values, shape) -> np.ndarray:
    """The m × k matrix of a pattern, repeats added (np.add.at)."""
    A = np.zeros(shape)
    np.add.at(A, (rows, cols), values)
    return A


def _csr_dense(crow, cols, values, shape) -> np.ndarray:
    A = np.zeros(shape)
    for i in range(shape[0]):
        for j in range(crow[i], crow[i + 1]):
            A[i, cols[j]] += values[j]
    return A


# ----------------------------------------------------------------------------------------------
# exercise: COO → CSR
# ----------------------------------------------------------------------------------------------
def _counts(rows, shape):
    return np.bincount(rows, minlength=shape[0])


def _csr_without_leading_zero(rows, cols, values, shape):
    return (np.cumsum(_counts(rows, shape)),) + coo_to_csr(rows, cols, values, shape)[1:]


def _csr_counts_not_running_total(rows, cols, values, shape):
    return (np.r_[0, _counts(rows, shape)],) + coo_to_csr(rows, cols, values, shape)[1:]


def _csr_without_minlength(rows, cols, values, shape):
    crow = np.r_[0, np.cumsum(np.bincount(rows))] if rows.size else np.zeros(1, np.int64)
    return (crow,) + coo_to_csr(rows, cols, values, shape)[1:]


def _csr_without_trailing_nnz(rows, cols, values, shape):
    crow, c, v = coo_to_csr(rows, cols, values, shape)
    return crow[:-1], c, v


def _csr_crow_off_by_one(rows, cols, values, shape):
    crow, c, v = coo_to_csr(rows, cols, values, shape)
    return crow + 1, c, v


def _csr_unique_counts_skip_empty_rows(rows, cols, values, shape):
    """np.unique(rows, return_counts=True): the counts of the non-empty rows only, padded at the end."""
    _, counts = np.unique(rows, return_counts=True)
    crow = np.full(shape[0] + 1, rows.size, np.int64)
    crow[0] = 0
    crow[1:counts.size + 1] = np.cumsum(counts)
    return (crow,) + coo_to_csr(rows, cols, values, shape)[1:]


def _csr_sorted_by_row_only(rows, cols, values, shape):
    order = np.argsort(rows, kind="stable")
    return coo_to_csr(rows, cols, values, shape)[0], cols[order], values[order]


def _csr_lexsort_keys_swapped(rows, cols, values, shape):
    order = np.lexsort((rows, cols))  # by column, then row
    return coo_to_csr(rows, cols, values, shape)[0], cols[order], values[order]


def _csr_values_not_moved(rows, cols, values, shape):
    return coo_to_csr(rows, cols, values, shape)[:2] + (values,)


def _csr_nothing_sorted(rows, cols, values, shape):
    return coo_to_csr(rows, cols, values, shape)[0], cols, values


def _csr_of_the_transpose(rows, cols, values, shape):
    return coo_to_csr(cols, rows, values, shape[::-1])


def _csr_pointers_shifted_one_row(rows, cols, values, shape):
    """crow[i + 1] = where row i - 1 ends: the running total one row late."""
    return (np.r_[0, 0, np.cumsum(_counts(rows, shape))[:-1]],) + coo_to_csr(rows, cols, values, shape)[1:]


def _csr_searchsorted_unsorted_rows(rows, cols, values, shape):
    """np.searchsorted(rows, ...) on the rows as given, not sorted first."""
    return (np.searchsorted(rows, np.arange(shape[0] + 1)),) + coo_to_csr(rows, cols, values, shape)[1:]


def _csr_columns_decreasing(rows, cols, values, shape):
    order = np.lexsort((-cols, rows))
    return coo_to_csr(rows, cols, values, shape)[0], cols[order], values[order]


def _csr_by_row_only_values_unmoved(rows, cols, values, shape):
    return coo_to_csr(rows, cols, values, shape)[0], cols[np.argsort(rows, kind="stable")], values


def _csr_rows_in_column_order(rows, cols, values, shape):
    """The right pointers, then the row indices (not the columns) in column order."""
    order = np.lexsort((rows, cols))
    return coo_to_csr(rows, cols, values, shape)[0], rows[order], values[order]


def _csr_crow_two_dimensional(rows, cols, values, shape):
    crow, c, v = coo_to_csr(rows, cols, values, shape)
    return crow[None, :], c, v


def _csr_drops_last_column_index(rows, cols, values, shape):
    crow, c, v = coo_to_csr(rows, cols, values, shape)
    return crow, c[:-1], v


NOTEBOOK = "case 'the 2×3 matrix of the notebook, elements in row order' (rows=[0, 1, 1], cols=[2, 0, 2], shape=(2, 3)):"
NO_ORDER = "case 'elements in no particular order' (rows=[2, 0, 1, 0, 2], cols=[1, 3, 0, 0, 3], shape=(3, 4)):"
EMPTY_ROWS = "case 'empty rows in the middle and at the end' (rows=[3, 0, 3], cols=[1, 0, 0], shape=(6, 2)):"

CSR_MISTAKES = [  # (wrong answer, the case the message names, the hint with the case's numbers)
    (_csr_without_leading_zero, NOTEBOOK, "your crow_indices [1, 3] are missing the leading 0: CSR keeps rows + 1 = "
     "3 pointers, crow[0] = 0 and crow[i + 1] = where row i ends. Expected [0, 1, 3]."),
    (_csr_counts_not_running_total, NOTEBOOK, "your crow_indices [0, 1, 2] hold each row's count; they must be the "
     "running total (cumsum) of the counts"),
    (_csr_without_minlength, EMPTY_ROWS, "crow_indices must have rows + 1 = 7 entries, yours has 5 (it describes 4 "
     "rows). Empty rows at the end still need their pointers: count with np.bincount(rows, "
     "minlength=number_of_rows). Expected [0, 1, 1, 1, 3, 3, 3]."),
    (_csr_without_trailing_nnz, NOTEBOOK, "crow_indices must have rows + 1 = 3 entries, yours has 2 (it describes 1 "
     "rows)."),
    (_csr_crow_off_by_one, NOTEBOOK, "crow_indices [1, 2, 4] must start at 0, never decrease and end at nnz = 3. "
     "Expected [0, 1, 3]."),
    (_csr_unique_counts_skip_empty_rows, EMPTY_ROWS, "crow_indices differ from position 2: yours [0, 1, 3, 3, 3, 3, 3], "
     "expected [0, 1, 1, 1, 3, 3, 3] (row i holds the elements whose row index is i)."),
    (_csr_sorted_by_row_only, NO_ORDER, "row 0 holds the right elements but its columns [3, 0] are not sorted; CSR "
     "keeps the columns of each row in increasing order (expected [0, 3]). Sort the elements by (row, column)"),
    (_csr_lexsort_keys_swapped, NOTEBOOK, "row 0 should hold (column, value) pairs [(2, 3.0)], yours holds [(0, 4.0)]."),
    (_csr_values_not_moved, NO_ORDER, "row 0: the columns [0, 3] are right but the values [1.0, 2.0] are not theirs "
     "(expected [4.0, 2.0]): when you reorder the columns, reorder the values with the same permutation."),
    (_csr_nothing_sorted, NO_ORDER, "row 0 should hold (column, value) pairs [(0, 4.0), (3, 2.0)], yours holds "
     "[(1, 1.0), (3, 2.0)]."),
    (_csr_of_the_transpose, NOTEBOOK, "crow_indices must have rows + 1 = 3 entries, yours has 4 (it describes 3 rows). "
     "Expected [0, 1, 3]."),
    (_csr_pointers_shifted_one_row, NOTEBOOK, "crow_indices [0, 0, 1] must start at 0, never decrease and end at nnz "
     "= 3. Expected [0, 1, 3]."),
    (_csr_searchsorted_unsorted_rows, NO_ORDER, "crow_indices differ from position 2: yours [0, 2, 4, 5], expected "
     "[0, 2, 3, 5] (row i holds the elements whose row index is i)."),
    (_csr_columns_decreasing, NOTEBOOK, "row 1 holds the right elements but its columns [2, 0] are not sorted; CSR "
     "keeps the columns of each row in increasing order (expected [0, 2])."),
    (_csr_by_row_only_values_unmoved, NO_ORDER, "row 0 should hold (column, value) pairs [(0, 4.0), (3, 2.0)], yours "
     "holds [(3, 1.0), (0, 2.0)]."),
    (_csr_rows_in_column_order, NOTEBOOK, "row 0 should hold (column, value) pairs [(2, 3.0)], yours holds [(1, 4.0)]."),
    (_csr_crow_two_dimensional, NOTEBOOK, "crow_indices must have rows + 1 = 3 entries, yours has (1, 3) (it describes "
     "? rows). Expected [0, 1, 3]."),
    (_csr_drops_last_column_index, NOTEBOOK, "col_indices and values must have nnz = 3 entries each; yours have (2,) "
     "and (3,)."),
    (lambda rows, cols, values, shape: None, NOTEBOOK, "your function returned None: did you forget `return`?"),
    (lambda rows, cols, values, shape: coo_to_csr(rows, cols, values, shape)[:2], NOTEBOOK,
     "return a tuple of 3 arrays (crow_indices, col_indices, values); got tuple of length 2"),
    (lambda rows, cols, values, shape: np.zeros(3), NOTEBOOK,
     "return a tuple of 3 arrays (crow_indices, col_indices, values); got ndarray"),
    (lambda rows, cols, values, shape: ([1, [2]], [0], [0.]), NOTEBOOK,
     "could not read your answer as numpy arrays (crow_indices, col_indices, values)"),
    (lambda rows, cols, values, shape: 1 // 0, NOTEBOOK, "your function raised ZeroDivisionError"),
]


@pytest.mark.parametrize("wrong, where, hint", CSR_MISTAKES, ids=[
    "no-leading-0", "counts-not-running-total", "no-minlength", "no-trailing-nnz", "crow-off-by-one",
    "unique-counts-skip-empty-rows", "sorted-by-row-only", "lexsort-keys-swapped", "values-not-moved",
    "nothing-sorted", "csr-of-the-transpose", "pointers-shifted-one-row", "searchsorted-unsorted-rows",
    "columns-decreasing", "by-row-only-values-unmoved", "rows-in-column-order", "crow-2d", "drops-a-column-index", "returns-None",
    "two-arrays", "not-a-tuple", "ragged", "raises"])
def test_each_wrong_coo_to_csr_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued COO → CSR mistake fails on its first wrong case, named, with its hint and numbers."""
    msg = _message(mt.exercises.check_coo_to_csr, wrong)
    assert msg.startswith(where) and hint in msg


def _except_on(case, change):
    """The notebook's coo_to_csr, except on the case with these rows: there ``change(rows, cols, values, shape)``."""
    def answer(rows, cols, values, shape):
        if rows.tolist() == case[0].tolist() and cols.tolist() == case[1].tolist():
            return change(rows, cols, values, shape)
        return coo_to_csr(rows, cols, values, shape)
    return answer


def test_row_counts_as_pointers_are_recognised_also_with_empty_last_rows():
    """The counts hint also where the counts end in empty rows (bincount with minlength)."""
    case = sparse.CSR_CASES[2][1:]
    msg = _message(mt.exercises.check_coo_to_csr, _except_on(case, _csr_counts_not_running_total))
    assert msg.startswith(EMPTY_ROWS) and ("your crow_indices [0, 1, 0, 0, 2, 0, 0] hold each row's count; they must "
                                           "be the running total (cumsum) of the counts") in msg


def test_pointers_that_go_down_are_told_the_three_rules():
    """A crow that starts at 0 and ends at nnz but decreases somewhere: start at 0, never decrease, end at nnz."""
    case = sparse.CSR_CASES[1][1:]
    msg = _message(mt.exercises.check_coo_to_csr, _except_on(
        case, lambda r, c, v, s: (np.r_[0, _counts(r, s)[:-1], r.size],) + coo_to_csr(r, c, v, s)[1:]))
    assert msg.startswith(NO_ORDER) and ("crow_indices [0, 2, 1, 5] must start at 0, never decrease and end at nnz = "
                                         "5. Expected [0, 2, 3, 5].") in msg


def test_a_square_csr_of_the_transpose_gets_the_transposed_hint():
    """Row and column swapped on a matrix whose row and column counts agree: told it is the transpose."""
    rows, cols, values, shape = np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([1., 2., 3.]), (3, 3)
    crow, c, v = (np.asarray(a) for a in _csr_of_the_transpose(rows, cols, values, shape))
    want = sparse.reference_csr(rows, cols, values, shape)
    with pytest.raises(AssertionError) as info:
        sparse._diagnose_csr("case 'x':", crow, c, v, want, rows, cols, values, shape)
    assert str(info.value) == "case 'x': your arrays describe the transposed matrix: rows and columns are swapped."


def test_a_csr_answer_as_engine_tensors_or_lists_is_read():
    """The checker reads tensors (their data, also of tensors that require grad) and lists as the arrays."""
    mt.exercises.check_coo_to_csr(lambda *a: tuple(mt.tensor(x) for x in coo_to_csr(*a)))
    mt.exercises.check_coo_to_csr(lambda *a: coo_to_csr(*a)[:2] + (mt.tensor(coo_to_csr(*a)[2], requires_grad=True),))
    mt.exercises.check_coo_to_csr(lambda *a: [x.tolist() for x in coo_to_csr(*a)])


def test_reference_csr_agrees_with_the_dense_matrix_and_the_engine():
    """reference_csr: integer pointers [0, running total of the row counts], columns sorted per row, same matrix."""
    for _, rows, cols, values, shape in _generated(sparse._csr_cases) + _generated(sparse._csr_cases, True):
        crow, c, v = sparse.reference_csr(rows, cols, values, shape)
        assert crow.dtype.kind == "i" and c.dtype == np.int64 and v.dtype == np.float64
        assert crow.tolist() == [0] + np.cumsum(np.bincount(rows, minlength=shape[0])).tolist()
        assert all((np.diff(c[crow[i]:crow[i + 1]]) > 0).all() for i in range(shape[0]))
        np.testing.assert_array_equal(_csr_dense(crow, c, v, shape), _dense(rows, cols, values, shape))
        if rows.size:
            engine = mt.sparse_coo_tensor(np.stack([rows, cols]), values, shape).to_sparse_csr()
            assert crow.tolist() == engine.crow_indices().tolist()
            assert c.tolist() == engine.col_indices().tolist() and v.tolist() == engine.values().tolist()


def test_reference_csr_of_an_empty_matrix_has_integer_empty_indices():
    """No elements: crow all zeros (rows + 1 of them), empty int64 columns and empty values."""
    crow, c, v = sparse.reference_csr(np.array([], np.int64), np.array([], np.int64), np.array([]), (3, 5))
    assert crow.tolist() == [0, 0, 0, 0] and c.shape == (0,) and c.dtype == np.int64 and v.shape == (0,)


def test_coo_to_csr_tries_the_fixed_cases_then_valid_random_ones_more_when_hidden(capsys):
    """Fixed cases, then random distinct positions in their shape; the hidden run has more, other ones."""
    spy = _Recorder(coo_to_csr)
    mt.exercises.check_coo_to_csr(spy)
    assert _cases_counted(capsys.readouterr().out, "check_coo_to_csr") == len(spy.calls)
    fixed = [(r.tolist(), c.tolist(), v.tolist(), s) for _, r, c, v, s in sparse.CSR_CASES]
    assert [(r.tolist(), c.tolist(), v.tolist(), s) for r, c, v, s in spy.calls[:len(fixed)]] == fixed
    randoms = spy.calls[len(fixed):]
    hidden = _Recorder(coo_to_csr)
    mt.exercises.check_coo_to_csr(hidden, hidden=True)
    assert _cases_counted(capsys.readouterr().out, "check_coo_to_csr") == len(hidden.calls)
    assert len(hidden.calls) > len(randoms) >= 5
    assert [r.tolist() for r, *_ in hidden.calls[:3]] != [r.tolist() for r, *_ in randoms[:3]]
    for cases in (randoms, hidden.calls):
        for rows, cols, values, shape in cases:
            assert rows.dtype == cols.dtype == np.int64 and values.shape == rows.shape == cols.shape
            assert ((0 <= rows) & (rows < shape[0])).all() and ((0 <= cols) & (cols < shape[1])).all()
            assert len(set(zip(rows.tolist(), cols.tolist()))) == rows.size  # distinct positions
        assert len({s for *_, s in cases}) > len(cases) // 2  # varied shapes
        assert any(sorted(zip(r.tolist(), c.tolist())) != list(zip(r.tolist(), c.tolist())) for r, c, _, _ in cases)
        assert any(np.bincount(r, minlength=s[0]).min() == 0 for r, _, _, s in cases)  # some empty rows
        assert sum(r.size for r, *_ in cases) > 2 * len(cases)  # and not all empty


def test_csr_case_labels_describe_their_cases():
    """Fixed labels say what the case shows; a random label gives its shape."""
    for what, rows, cols, values, shape in sparse.CSR_CASES:
        positions = list(zip(rows.tolist(), cols.tolist()))
        if "row order" in what:
            assert positions == sorted(positions) and shape == (2, 3)
        if "no particular order" in what:
            assert positions != sorted(positions) and sorted(rows.tolist()) != rows.tolist()
        if "empty rows in the middle and at the end" in what:
            counts = np.bincount(rows, minlength=shape[0])
            assert counts[-1] == 0 and (counts[1:-1] == 0).any() and counts.any()
        if "no elements" in what:
            assert rows.size == cols.size == values.size == 0
    for what, rows, cols, values, shape in _generated(sparse._csr_cases)[len(sparse.CSR_CASES):]:
        assert what == f"random case ({shape[0]}×{shape[1]})"


# ----------------------------------------------------------------------------------------------
# exercise: coalesce
# ----------------------------------------------------------------------------------------------
def _coalesce_keep(which):
    def answer(indices, values, shape):
        kept = {}
        for k, (r, c) in enumerate(indices.T.tolist()):
            if which == "last" or (r, c) not in kept:
                kept[(r, c)] = values[k]
        keys = sorted(kept)
        return np.array(keys, dtype=np.int64).T.reshape(2, -1), np.array([kept[p] for p in keys])
    return answer


def _coalesce_buffered_add(indices, values, shape):
    linear = indices[0] * shape[1] + indices[1]
    unique, inverse = np.unique(linear, return_inverse=True)
    sums = np.zeros(unique.size)
    sums[inverse] += values  # buffered: a repeat overwrites instead of adding
    return np.stack(np.divmod(unique, shape[1])), sums


def _coalesce_column_major(indices, values, shape):
    idx, vals = coalesce(indices, values, shape)
    order = np.lexsort((idx[0], idx[1]))
    return idx[:, order], vals[order]


def _coalesce_sorted_by_row_only(indices, values, shape):
    idx, vals = coalesce(indices, values, shape)
    order = np.argsort(idx[0], kind="stable")[::-1]
    order = order[np.argsort(idx[0][order], kind="stable")]
    return idx[:, order], vals[order]


def _coalesce_drops_zeros(indices, values, shape):
    idx, vals = coalesce(indices, values, shape)
    return idx[:, vals != 0], vals[vals != 0]


def _coalesce_values_not_moved(indices, values, shape):
    idx, vals = coalesce(indices, values, shape)
    return idx, vals[::-1].copy()


def _coalesce_no_dedup(indices, values, shape):
    order = np.lexsort((indices[1], indices[0]))
    return indices[:, order], values[order]


def _coalesce_mean(indices, values, shape):
    idx, sums = coalesce(indices, values, shape)
    _, counts = np.unique(indices[0] * shape[1] + indices[1], return_counts=True)
    return idx, sums / counts


def _coalesce_divmod_by_rows(indices, values, shape):
    linear = indices[0] * shape[0] + indices[1]  # the number of rows where the number of columns belongs
    unique, inverse = np.unique(linear, return_inverse=True)
    sums = np.zeros(unique.size)
    np.add.at(sums, inverse, values)
    return np.stack(np.divmod(unique, shape[0])), sums


REPEATED = "case 'a repeated position' (indices=[[0, 1, 0], [2, 0, 2]], values=[1.0, 2.0, 3.0]):"
CANCEL = "case 'repeats that cancel to 0 (coalesce keeps the entry)' (indices=[[1, 1, 0], [1, 1, 0]], values=[2.5, -2.5, 1.0]):"
SAME_ROW = "case 'same row, columns out of order' (indices=[[0, 0, 0, 0], [3, 1, 3, 0]], values=[1.0, 2.0, 4.0, 8.0]):"

COALESCE_MISTAKES = [
    (_coalesce_keep("first"), REPEATED, "your values [1.0, 2.0] keep one of the repeated values; a repeated position "
     "holds the sum of all its values: expected [4.0, 2.0]."),
    (_coalesce_keep("last"), REPEATED, "your values [3.0, 2.0] keep one of the repeated values"),
    (_coalesce_buffered_add, REPEATED, "your values [3.0, 2.0] keep one of the repeated values"),
    (_coalesce_column_major, REPEATED, "your positions are sorted by column first ([(1, 0), (0, 2)]); coalesced means "
     "row-major: by row, then by column within a row."),
    (_coalesce_sorted_by_row_only, SAME_ROW, "your positions [(0, 3), (0, 1), (0, 0)] are not sorted row-major (by row, "
     "then column): expected [(0, 0), (0, 1), (0, 3)]."),
    (_coalesce_drops_zeros, CANCEL, "you dropped position(s) [(1, 1)] whose values sum to 0; coalesce keeps them"),
    (_coalesce_values_not_moved, REPEATED, "your values [2.0, 4.0] are the right numbers in the wrong places: move each "
     "value with its position when you sort. Expected [4.0, 2.0]."),
    (_coalesce_no_dedup, REPEATED, "a position appears more than once in your answer (3 entries for 2 distinct "
     "positions): coalescing keeps each position once."),
    (_coalesce_mean, REPEATED, "the value at position (0, 2) should be 4 (the sum of its entries), yours is 2."),
    (_coalesce_divmod_by_rows, REPEATED, "your positions [(1, 0)] should be [(0, 2), (1, 0)]."),
    (lambda indices, values, shape: (indices.T, values), REPEATED, "indices must have shape (2, nnz) — a row of row "
     "indices over a row of column indices — yours has shape (3, 2)."),
    (lambda indices, values, shape: (coalesce(indices, values, shape)[0], coalesce(indices, values, shape)[1][:, None]),
     REPEATED, "values must have one entry per position (2), yours has shape (2, 1)."),
    (lambda indices, values, shape: None, REPEATED, "your function returned None: did you forget `return`?"),
    (lambda indices, values, shape: coalesce(indices, values, shape) + (shape,), REPEATED,
     "return a tuple of 2 arrays (indices, values); got tuple of length 3"),
    (lambda indices, values, shape: 1 // 0, REPEATED, "your function raised ZeroDivisionError"),
]


@pytest.mark.parametrize("wrong, where, hint", COALESCE_MISTAKES, ids=[
    "keeps-first", "keeps-last", "buffered-add", "column-major", "sorted-by-row-only", "drops-zeros",
    "values-not-moved", "no-dedup", "mean", "divmod-by-rows", "indices-transposed", "values-2d",
    "returns-None", "three-things", "raises"])
def test_each_wrong_coalesce_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued coalesce mistake fails on its first wrong case, named, with its hint and numbers."""
    msg = _message(mt.exercises.check_coalesce, wrong)
    assert msg.startswith(where) and hint in msg


def test_dropping_a_zero_sum_next_to_a_missing_nonzero_gets_the_general_message():
    """The 'sum to 0' hint only when every missing position sums to 0; else the positions are listed."""
    idx, vals = np.array([[0, 0, 1], [0, 0, 1]]), np.array([1., -1., 2.])
    widx, wvals = sparse.reference_coalesce(idx, vals, (2, 2))
    with pytest.raises(AssertionError) as info:
        sparse._diagnose_coalesce("w:", np.zeros((2, 0), np.int64), np.array([]), widx, wvals, idx, vals)
    assert str(info.value) == "w: your positions [] should be [(0, 0), (1, 1)]."
    with pytest.raises(AssertionError) as info:
        sparse._diagnose_coalesce("w:", np.array([[1], [1]]), np.array([2.]), widx, wvals, idx, vals)
    assert "w: you dropped position(s) [(0, 0)] whose values sum to 0" in str(info.value)


def test_a_wrong_sum_is_named_at_the_first_wrong_position():
    """Values off at one position (not a kept duplicate, not a permutation): that position and both numbers."""
    idx, vals = np.array([[0, 0, 1, 1], [0, 1, 1, 1]]), np.array([1., 2., 3., 4.])
    widx, wvals = sparse.reference_coalesce(idx, vals, (2, 2))
    with pytest.raises(AssertionError) as info:
        sparse._diagnose_coalesce("w:", widx, np.array([1., 2., 7.5]), widx, wvals, idx, vals)
    assert str(info.value) == "w: the value at position (1, 1) should be 7 (the sum of its entries), yours is 7.5."


def test_reference_coalesce_agrees_with_the_dense_sum():
    """reference_coalesce: each stored position once, row-major, int64 (2, nnz) indices, the dense matrix's sums."""
    cases = _generated(sparse._coalesce_cases) + _generated(sparse._coalesce_cases, True)
    for _, idx, vals, shape in cases:
        widx, wvals = sparse.reference_coalesce(idx, vals, shape)
        positions = sorted(set(zip(idx[0].tolist(), idx[1].tolist())))
        assert widx.dtype == np.int64 and widx.shape == (2, len(positions)) and wvals.shape == (len(positions),)
        assert list(zip(*widx.tolist())) == positions
        np.testing.assert_allclose(_dense(widx[0], widx[1], wvals, shape), _matrix(idx[0], idx[1], vals, shape),
                                   atol=1e-12)
        if idx.shape[1]:
            engine = mt.sparse_coo_tensor(idx, vals, shape).coalesce()
            assert widx.tolist() == engine.indices().tolist()
            np.testing.assert_allclose(wvals, engine.values().numpy(), atol=1e-12)


def test_reference_coalesce_keeps_a_zero_sum_and_an_empty_matrix():
    """Repeats summing to 0 keep their entry; nothing stored gives (2, 0) int64 indices and no values."""
    idx, vals = sparse.reference_coalesce(np.array([[1, 0, 1], [1, 0, 1]]), np.array([2.5, 1., -2.5]), (2, 2))
    assert idx.tolist() == [[0, 1], [0, 1]] and vals.tolist() == [1.0, 0.0]
    idx, vals = sparse.reference_coalesce(np.zeros((2, 0), np.int64), np.array([]), (2, 2))
    assert idx.shape == (2, 0) and idx.dtype == np.int64 and vals.shape == (0,)


def test_coalesce_tries_the_fixed_cases_then_valid_random_ones_more_when_hidden(capsys):
    """Fixed cases, then random (2, nnz) patterns in their shape with repeats; more, other ones hidden."""
    spy = _Recorder(coalesce)
    mt.exercises.check_coalesce(spy)
    assert _cases_counted(capsys.readouterr().out, "check_coalesce") == len(spy.calls)
    fixed = [(i.tolist(), v.tolist(), s) for _, i, v, s in sparse.COALESCE_CASES]
    assert [(i.tolist(), v.tolist(), s) for i, v, s in spy.calls[:len(fixed)]] == fixed
    randoms = spy.calls[len(fixed):]
    hidden = _Recorder(coalesce)
    mt.exercises.check_coalesce(hidden, hidden=True)
    assert _cases_counted(capsys.readouterr().out, "check_coalesce") == len(hidden.calls)
    assert len(hidden.calls) > len(randoms) >= 5
    assert [i.tolist() for i, *_ in hidden.calls[:3]] != [i.tolist() for i, *_ in randoms[:3]]
    for cases in (randoms, hidden.calls):
        for idx, vals, shape in cases:
            assert idx.dtype == np.int64 and idx.shape == (2, vals.size) and vals.size >= 1
            assert ((0 <= idx[0]) & (idx[0] < shape[0])).all() and ((0 <= idx[1]) & (idx[1] < shape[1])).all()
        repeats = [len(set(zip(*i.tolist()))) < i.shape[1] for i, _, _ in cases]
        assert sum(repeats) > len(cases) // 2  # mostly with repeated positions
        assert len({s for *_, s in cases}) > 1 and len({i.shape[1] for i, _, _ in cases}) > 2


def test_coalesce_case_labels_describe_their_cases():
    """Fixed labels say what the case shows; a random label gives its shape and number of elements."""
    for what, idx, vals, shape in sparse.COALESCE_CASES:
        positions = list(zip(*idx.tolist()))
        if what.startswith("a repeated position") or what.startswith("repeats"):
            assert len(set(positions)) < len(positions)
        if "no repeats" in what:
            assert len(set(positions)) == len(positions) and positions != sorted(positions)
        if "cancel to 0" in what:
            sums = sparse.reference_coalesce(idx, vals, shape)[1]
            assert (sums == 0).any()
        if "same row, columns out of order" in what:
            assert len(set(idx[0].tolist())) == 1 and idx[1].tolist() != sorted(idx[1].tolist())
        if "nothing stored" in what:
            assert idx.shape == (2, 0) and vals.size == 0
    for what, idx, vals, shape in _generated(sparse._coalesce_cases)[len(sparse.COALESCE_CASES):]:
        assert what == f"random case ({shape[0]}×{shape[1]}, {idx.shape[1]} elements)"


# ----------------------------------------------------------------------------------------------
# exercise: the backward of sparse × dense
# ----------------------------------------------------------------------------------------------
def _grad_values(rows, cols, D, G):
    return np.array([G[r] @ D[c] for r, c in zip(rows.tolist(), cols.tolist())])


def _spmm_values_times_value(rows, cols, values, D, G):
    gv, gD = spmm_backward(rows, cols, values, D, G)
    return values * gv, gD


def _spmm_grad_d_as_g_t_s(rows, cols, values, D, G):
    return spmm_backward(rows, cols, values, D, G)[0], G.T @ _matrix(rows, cols, values, (G.shape[0], D.shape[0]))


def _spmm_grad_d_not_transposed(rows, cols, values, D, G):
    return spmm_backward(rows, cols, values, D, G)[0], _matrix(rows, cols, values, (G.shape[0], D.shape[0])) @ G


def _spmm_assign_not_add(rows, cols, values, D, G):
    S = np.zeros((G.shape[0], D.shape[0]))
    S[rows, cols] = values
    return spmm_backward(rows, cols, values, D, G)[0], S.T @ G


def _spmm_grad_d_without_values(rows, cols, values, D, G):
    return spmm_backward(rows, cols, values, D, G)[0], spmm_backward(rows, cols, np.ones_like(values), D, G)[1]


def _spmm_buffered_scatter(rows, cols, values, D, G):
    gD = np.zeros_like(D)
    gD[cols] += values[:, None] * G[rows]  # buffered: a repeated column keeps one element's share
    return spmm_backward(rows, cols, values, D, G)[0], gD


def _spmm_rows_and_cols_swapped(rows, cols, values, D, G):
    return np.einsum("ej,ej->e", G[cols], D[rows]), spmm_backward(rows, cols, values, D, G)[1]


SPMM_MISTAKES = [  # (wrong answer, words of the hint)
    (lambda rows, cols, values, D, G: (G @ D.T, spmm_backward(rows, cols, values, D, G)[1]),
     "your grad_values has shape (3, 3), a dense m × k gradient; the gradient of S lives on its pattern: one number "
     "per stored element, shape (4,) — dv_e = G[r_e] · D[c_e]."),
    (lambda rows, cols, values, D, G: (G[rows] * D[cols], spmm_backward(rows, cols, values, D, G)[1]),
     "your grad_values has shape (4, 2): G[r_e] * D[c_e] without the sum; each element's gradient is the dot "
     "product Σ_j G[r_e, j] D[c_e, j]."),
    (lambda rows, cols, values, D, G: spmm_backward(rows, cols, values, D, G)[::-1],
     "you returned (grad_D, grad_values); return them in the order of the inputs: (grad_values, grad_D)."),
    (lambda rows, cols, values, D, G: (spmm_backward(rows, cols, values, D, G)[0][:, None],
                                       spmm_backward(rows, cols, values, D, G)[1]),
     "grad_values must have one entry per stored element, shape (4,); yours is (4, 1)."),
    (_spmm_grad_d_as_g_t_s, "grad_D must have D's shape (3, 2); yours is (2, 3). (dD = Sᵀ G: a k × m matrix times "
     "m × n.)"),
    (_spmm_grad_d_not_transposed, "your grad_D is S @ G; it must be Sᵀ @ G (the element at (r, c) sends v · G[r] to "
     "row c of dD)."),
    (_spmm_rows_and_cols_swapped, "grad_values uses G[c_e] · D[r_e]: rows and columns swapped. The element at (r, c) "
     "multiplies row c of D into row r of the output, so dv_e = G[r_e] · D[c_e]."),
    (lambda rows, cols, values, D, G: None, "your function returned None: did you forget `return`?"),
    (lambda rows, cols, values, D, G: spmm_backward(rows, cols, values, D, G)[:1],
     "return a tuple of 2 arrays (grad_values, grad_D); got tuple of length 1"),
    (lambda rows, cols, values, D, G: 1 // 0, "your function raised ZeroDivisionError"),
]

FIRST_SPMM = "case 'a 3×3 matrix times 3×2' (rows=[0, 1, 2, 2], cols=[0, 1, 0, 1]):"


@pytest.mark.parametrize("wrong, hint", SPMM_MISTAKES, ids=[
    "dense-grad-values", "no-sum", "order-swapped", "grad-values-2d", "grad-d-g-t-s", "grad-d-not-transposed",
    "rows-and-cols-swapped", "returns-None", "one-array", "raises"])
def test_each_wrong_spmm_backward_is_rejected_on_the_first_case_with_its_hint(wrong, hint):
    """A catalogued backward mistake fails on the first case (3×3 times 3×2), named, with its hint."""
    msg = _message(mt.exercises.check_spmm_backward, wrong)
    assert msg.startswith(FIRST_SPMM) and hint in msg


def _failing_call(wrong, **kwargs):
    """The message of a wrong answer and the arguments of the call it failed on."""
    spy = _Recorder(wrong)
    return _message(mt.exercises.check_spmm_backward, spy, **kwargs), spy.calls[-1]


def test_a_wrong_grad_value_is_named_with_its_element_and_both_numbers():
    """grad_values scaled by the values: the first wrong element, G[r] · D[c] and the learner's number."""
    msg, (rows, cols, values, D, G) = _failing_call(_spmm_values_times_value)
    want, got = _grad_values(rows, cols, D, G), values * _grad_values(rows, cols, D, G)
    e = int(np.flatnonzero(~np.isclose(got, want, atol=1e-8))[0])
    assert msg.startswith(FIRST_SPMM)
    assert (f"grad_values[{e}] (element at ({rows[e]}, {cols[e]})) should be G[{rows[e]}] · D[{cols[e]}] = "
            f"{want[e]:.6g}, yours is {got[e]:.6g}.") in msg


def test_a_wrong_grad_d_shows_both_matrices():
    """dD without the values (or scattered with a buffered add): Sᵀ G and the learner's matrix, rounded."""
    for wrong in (_spmm_grad_d_without_values, _spmm_buffered_scatter):
        msg, (rows, cols, values, D, G) = _failing_call(wrong)
        want = _matrix(rows, cols, values, (G.shape[0], D.shape[0])).T @ G
        got = wrong(rows, cols, values, D, G)[1]
        assert msg.startswith(FIRST_SPMM)
        assert msg.endswith(f"grad_D should be Sᵀ @ G =\n{np.round(want, 5)}\nyours is\n{np.round(got, 5)}.")


def test_the_repeated_position_case_has_a_repeat_and_catches_the_repeat_mistakes():
    """The fixed case named 'a repeated position' stores a position twice; its mistakes fail there."""
    case = [c for c in _generated(sparse._spmm_cases) if c[0].startswith("a repeated position")]
    assert len(case) == 1
    _, rows, cols, *_ = case[0]
    assert len(set(zip(rows.tolist(), cols.tolist()))) < rows.size
    where = f"case '{case[0][0]}' (rows={rows.tolist()}, cols={cols.tolist()}):"

    def first_repeat_only(rows, cols, values, D, G):
        gv, gD = spmm_backward(rows, cols, values, D, G)
        first = [list(zip(rows.tolist(), cols.tolist())).index(p) == e for e, p in enumerate(zip(rows, cols))]
        return gv * np.array(first), gD

    msg = _message(mt.exercises.check_spmm_backward, first_repeat_only)
    assert msg.startswith(where) and "yours is 0." in msg
    msg = _message(mt.exercises.check_spmm_backward, _spmm_assign_not_add)
    assert msg.startswith(where) and ("your grad_D is right except where a position is stored twice: its values add "
                                      "up (build Sᵀ G with an unbuffered add — np.add.at — not an assignment") in msg


def test_reference_spmm_backward_agrees_with_the_loss_and_the_engine():
    """reference_spmm_backward: the exact derivatives of L = Σ G ⊙ (S D) (linear: a unit step), and the engine's."""
    cases = _generated(sparse._spmm_cases) + _generated(sparse._spmm_cases, True)
    for _, rows, cols, values, D, G in cases:
        m, k = G.shape[0], D.shape[0]

        def loss(v, d):
            return float((G * (_dense(rows, cols, v, (m, k)) @ d)).sum())

        gv, gD = sparse.reference_spmm_backward(rows, cols, values, D, G)
        assert gv.shape == values.shape and gD.shape == D.shape
        unit = np.eye(values.size)
        np.testing.assert_allclose(gv, [loss(values + unit[e], D) - loss(values, D) for e in range(values.size)],
                                   atol=1e-9)
        np.testing.assert_allclose(gv, _grad_values(rows, cols, D, G), atol=1e-12)
        steps = np.eye(D.size).reshape(D.size, *D.shape)
        np.testing.assert_allclose(gD.ravel(), [loss(values, D + s) - loss(values, D) for s in steps], atol=1e-9)
        v, d = mt.tensor(values, requires_grad=True), mt.tensor(D, requires_grad=True)
        (mt.sparse_coo_tensor(np.stack([rows, cols]), v, (m, k)) @ d).backward(mt.tensor(G))
        np.testing.assert_allclose(gv, v.grad.numpy(), atol=1e-12)
        np.testing.assert_allclose(gD, d.grad.numpy(), atol=1e-12)


def test_spmm_backward_tries_the_fixed_cases_then_valid_random_ones_more_when_hidden(capsys):
    """Fixed cases, then random patterns with D (k × n) and G (m × n) to match; more, other ones hidden."""
    spy = _Recorder(spmm_backward)
    mt.exercises.check_spmm_backward(spy)
    assert _cases_counted(capsys.readouterr().out, "check_spmm_backward") == len(spy.calls)
    fixed = [c for c in _generated(sparse._spmm_cases) if not c[0].startswith("random")]
    assert len(fixed) == 3
    for (_, rows, cols, values, D, G), call in zip(fixed, spy.calls):
        for want, got in zip((rows, cols, values, D, G), call):
            np.testing.assert_array_equal(got, want)
    randoms = spy.calls[len(fixed):]
    hidden = _Recorder(spmm_backward)
    mt.exercises.check_spmm_backward(hidden, hidden=True)
    assert _cases_counted(capsys.readouterr().out, "check_spmm_backward") == len(hidden.calls)
    assert len(hidden.calls) > len(randoms) >= 5
    assert [r.tolist() for r, *_ in hidden.calls[:3]] != [r.tolist() for r, *_ in randoms[:3]]
    for cases in (spy.calls, hidden.calls):
        for rows, cols, values, D, G in cases:
            (m, n), (k, n2) = G.shape, D.shape
            assert n == n2 and rows.dtype == cols.dtype == np.int64 and values.shape == rows.shape == cols.shape
            assert rows.size >= 1 and D.dtype == G.dtype == values.dtype == np.float64
            assert ((0 <= rows) & (rows < m)).all() and ((0 <= cols) & (cols < k)).all()
        assert len({(G.shape, D.shape) for *_, D, G in cases}) > len(cases) // 2  # varied shapes
        assert any(len(set(zip(r.tolist(), c.tolist()))) < r.size for r, c, *_ in cases)  # repeats
        assert any(G.shape[0] != D.shape[0] for *_, D, G in cases)  # not only square S


def test_spmm_case_labels_describe_their_cases():
    """'3×3 times 3×2', 'a wide output (4 columns)', and each random label's shapes."""
    for what, rows, cols, values, D, G in _generated(sparse._spmm_cases):
        (m, n), k = G.shape, D.shape[0]
        if what == "a 3×3 matrix times 3×2":
            assert (m, k, n) == (3, 3, 2)
        elif what == "a wide output (4 columns)":
            assert n == 4 and n > max(m, k)
        elif what.startswith("random"):
            assert what == f"random case ({m}×{k} @ {k}×{n})"
        else:
            assert what.startswith("a repeated position")
    for what, *_ in _generated(sparse._spmm_cases, True):
        assert what.startswith("random case (")


def test_a_failure_message_names_its_case_with_its_pattern():
    """Each checker's message starts with the case label and the arrays that make it, as Python lists."""
    msg, (rows, cols, values, D, G) = _failing_call(_spmm_values_times_value, hidden=True)
    m, k, n = G.shape[0], D.shape[0], D.shape[1]
    assert msg.startswith(f"case 'random case ({m}×{k} @ {k}×{n})' (rows={rows.tolist()}, cols={cols.tolist()}):")


# ----------------------------------------------------------------------------------------------
# the engine's sparse code is switched off while the learner's function runs
# ----------------------------------------------------------------------------------------------
def _coo():
    return mt.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2))


def _sparse_mm_backward():
    v, D = mt.tensor(np.array([1., 2.]), requires_grad=True), mt.tensor(np.ones((2, 2)), requires_grad=True)
    engine_spmm.SparseMM.apply(v, D, np.array([0, 1]), np.array([1, 0]), 2).sum().backward()


ENGINE_CALLS = [  # (what the learner calls, the engine function named in the refusal)
    (lambda: _coo().coalesce(), "microtorch.sparse.coo.SparseCOOTensor.coalesce"),
    (lambda: _coo().to_sparse_csr(), "microtorch.sparse.coo.SparseCOOTensor.to_sparse_csr"),
    (lambda: mt.sparse.csr.coo_to_csr(_coo()), "microtorch.sparse.csr.coo_to_csr"),
    (lambda: mt.sparse.csr.to_sparse_csr(_coo()), "microtorch.sparse.csr.to_sparse_csr"),
    (lambda: mt.ones(2, 2).to_sparse_csr(), "microtorch.tensor.Tensor.to_sparse_csr"),
    (lambda: mt.sparse.mm(_coo(), mt.ones(2, 2)), "microtorch.sparse.spmm.mm"),
    (lambda: _coo() @ mt.ones(2, 2), "microtorch.sparse.base.SparseTensor.__matmul__"),
    (_sparse_mm_backward, "microtorch.sparse.spmm.SparseMM.backward"),
]


@pytest.mark.parametrize("call, name", ENGINE_CALLS, ids=[n.rsplit(".", 2)[-2] + "." + n.rsplit(".", 1)[-1]
                                                         for _, n in ENGINE_CALLS])
@pytest.mark.parametrize("check, exercise", [
    (mt.exercises.check_coo_to_csr, "the COO → CSR conversion"), (mt.exercises.check_coalesce, "coalescing"),
    (mt.exercises.check_spmm_backward, "the backward of sparse × dense")], ids=["csr", "coalesce", "spmm"])
def test_each_engine_sparse_function_is_switched_off_while_checking(call, name, check, exercise):
    """The learner's function cannot call the engine's conversions or products; they work again afterwards."""
    def answer(*args):
        call()

    msg = _message(check, answer)
    assert f"this exercise asks you to write {exercise} yourself: the engine's {name} is switched off" in msg
    call()


# -- the hint builders on hand-made answers: which hint, and the tolerances ------------------
def _diagnosed(diagnose, *args) -> str:
    with pytest.raises(AssertionError) as info:
        diagnose("w:", *args)
    return str(info.value)


def test_a_mistake_only_on_square_matrices_is_rejected_there():
    """Keys swapped only when rows == columns: the first square random case, the general row message."""
    def answer(rows, cols, values, shape):
        return (_csr_lexsort_keys_swapped if shape[0] == shape[1] else coo_to_csr)(rows, cols, values, shape)

    msg = _message(mt.exercises.check_coo_to_csr, answer)
    assert re.match(r"case 'random case \((\d)×\1\)' \(rows=", msg) and "should hold (column, value) pairs" in msg


def test_coalesce_hints_on_hand_made_answers():
    """A dropped position of sum 0.5 is not 'a zero'; rows out of order within a column are not column-major."""
    idx, vals = np.array([[0, 1], [0, 1]]), np.array([0.5, 2.])
    widx, wvals = sparse.reference_coalesce(idx, vals, (2, 2))
    assert _diagnosed(sparse._diagnose_coalesce, np.array([[1], [1]]), np.array([2.]), widx, wvals, idx, vals) == \
        "w: your positions [(1, 1)] should be [(0, 0), (1, 1)]."
    idx, vals = np.array([[0, 1, 0], [0, 0, 1]]), np.array([1., 2., 3.])
    widx, wvals = sparse.reference_coalesce(idx, vals, (2, 2))
    msg = _diagnosed(sparse._diagnose_coalesce, np.array([[1, 0, 0], [0, 0, 1]]), np.array([2., 1., 3.]), widx,
                     wvals, idx, vals)
    assert msg == ("w: your positions [(1, 0), (0, 0), (0, 1)] are not sorted row-major (by row, then column): "
                   "expected [(0, 0), (0, 1), (1, 0)].")


def test_a_value_5e_9_off_a_zero_sum_is_named_fixed():
    """A zero sum must be 0 within 1e-9: the value is named (it raised IndexError before the fix)."""
    idx, vals = np.array([[0, 0], [1, 1]]), np.array([2.5, -2.5])
    widx, wvals = sparse.reference_coalesce(idx, vals, (1, 2))
    msg = _diagnosed(sparse._diagnose_coalesce, widx, np.array([5e-9]), widx, wvals, idx, vals)
    assert msg == "w: the value at position (0, 1) should be 0 (the sum of its entries), yours is 5e-09."


SQUARE = (np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([1., 2., 5.]),
          np.array([[0.5, -1., 2.], [1.5, 0.25, -0.75]]), np.array([[1., 2., -1.], [0.5, -2., 3.]]))


def _spmm_diagnosed(gv, gD, case=SQUARE) -> str:
    rows, cols, values, D, G = case
    wv, wD = sparse.reference_spmm_backward(rows, cols, values, D, G)
    return _diagnosed(sparse._diagnose_spmm, np.asarray(gv, float), np.asarray(gD, float), wv, wD, rows, cols,
                      values, D, G)


def test_spmm_hints_on_hand_made_answers_with_a_repeated_position():
    """Each dD mistake on a 2×2 S storing (0, 1) twice gets its own hint, and only that one."""
    rows, cols, values, D, G = SQUARE
    wv, wD = sparse.reference_spmm_backward(rows, cols, values, D, G)
    A, last = _matrix(rows, cols, values, (2, 2)), np.zeros((2, 2))
    last[rows, cols] = values
    assert "your grad_D is right except where a position is stored twice" in _spmm_diagnosed(wv, last.T @ G)
    assert _spmm_diagnosed(wv, last.T @ G + 0.5).startswith("w: grad_D should be Sᵀ @ G =")
    assert _spmm_diagnosed(wv, np.zeros_like(D)).startswith("w: grad_D should be Sᵀ @ G =")
    assert _spmm_diagnosed(wv, A @ G).startswith("w: your grad_D is S @ G")
    assert _spmm_diagnosed(wv, A @ G + 0.5).startswith("w: grad_D should be Sᵀ @ G =")
    assert _spmm_diagnosed(wv, wD + 0.5).startswith("w: grad_D should be Sᵀ @ G =")


def test_spmm_grad_values_within_1e_8_only_and_a_swap_only_when_exact():
    """grad_values off by 0.5 at one element is named there; a swap plus 0.5 is not called a swap."""
    rows, cols, values, D, G = SQUARE
    wv, wD = sparse.reference_spmm_backward(rows, cols, values, D, G)
    off = wv + np.array([0., 0.5, 0.])
    assert _spmm_diagnosed(off, wD) == (f"w: grad_values[1] (element at (0, 1)) should be G[0] · D[1] = {wv[1]:.6g}, "
                                        f"yours is {off[1]:.6g}.")
    swapped = np.einsum("ej,ej->e", G[cols], D[rows])
    assert "rows and columns swapped" in _spmm_diagnosed(swapped, wD)
    assert _spmm_diagnosed(swapped + 0.5, wD).startswith("w: grad_values[0] (element at (0, 1)) should be")


def test_a_grad_values_of_grad_d_shape_is_not_called_swapped_outputs():
    """grad_values shaped like D while grad_D is right: told the shape of grad_values, not 'returned in the wrong order'."""
    rows, cols, values, D, G = SQUARE
    wv, wD = sparse.reference_spmm_backward(rows, cols, values, D, G)
    assert _spmm_diagnosed(np.zeros_like(D), wD) == ("w: grad_values must have one entry per stored element, shape "
                                                     "(3,); yours is (2, 3).")
