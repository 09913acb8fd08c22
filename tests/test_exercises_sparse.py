"""The notebook 11 checkers accept correct answers, catch the typical wrong ones with a
pointed message, and refuse the engine's own functions as answers; an unfinished exercise
shows its stub, and the hidden cases run."""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt


# -- correct answers (the notebook's reference solutions, written differently) -----------------
def my_csr(rows, cols, values, shape):
    order = np.lexsort((cols, rows))
    crow = np.zeros(shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=crow[1:])
    return crow, cols[order], values[order]


def my_coalesce(indices, values, shape):
    lin = indices[0] * shape[1] + indices[1]
    unique, inverse = np.unique(lin, return_inverse=True)
    sums = np.zeros(unique.size)
    np.add.at(sums, inverse, values)
    return np.stack(np.divmod(unique, shape[1])), sums


def my_backward(rows, cols, values, D, G):
    grad_values = np.einsum("ej,ej->e", G[rows], D[cols])
    grad_D = np.zeros_like(D)
    np.add.at(grad_D, cols, values[:, None] * G[rows])
    return grad_values, grad_D


def test_correct_answers_pass(capsys):
    mt.exercises.check_coo_to_csr(my_csr)
    mt.exercises.check_coalesce(my_coalesce)
    mt.exercises.check_spmm_backward(my_backward)
    out = capsys.readouterr().out
    assert out.count("✓") == 3


def test_engine_functions_are_blocked_while_checking():
    def via_engine(rows, cols, values, shape):
        c = mt.sparse_coo_tensor(np.stack([rows, cols]), values, shape).to_sparse_csr()
        return c.crow_indices(), c.col_indices(), c.values()

    with pytest.raises(AssertionError, match="write the COO → CSR conversion yourself"):
        mt.exercises.check_coo_to_csr(via_engine)

    def via_autograd(rows, cols, values, D, G):
        v, d = mt.tensor(values, requires_grad=True), mt.tensor(D, requires_grad=True)
        (mt.sparse_coo_tensor(np.stack([rows, cols]), v, (G.shape[0], D.shape[0])) @ d).backward(mt.tensor(G))
        return v.grad.numpy(), d.grad.numpy()

    with pytest.raises(AssertionError, match="write the backward of sparse × dense yourself"):
        mt.exercises.check_spmm_backward(via_autograd)

    def via_coalesce(indices, values, shape):
        c = mt.sparse_coo_tensor(indices, values, shape).coalesce()
        return c.indices().numpy(), c.values().numpy()

    with pytest.raises(AssertionError, match="write coalescing yourself"):
        mt.exercises.check_coalesce(via_coalesce)
    # and the engine works again afterwards
    S = mt.sparse_coo_tensor([[0, 0], [1, 1]], [1., 2.], (1, 2))
    assert S.coalesce().values().tolist() == [3.0]


# -- typical wrong answers: each caught, with the words that point at the mistake --------------
@pytest.mark.parametrize("wrong, words", [
    (lambda r, c, v, s: (np.cumsum(np.bincount(r, minlength=s[0])), *my_csr(r, c, v, s)[1:]), "missing the leading 0"),
    (lambda r, c, v, s: (np.r_[0, np.bincount(r, minlength=s[0])], *my_csr(r, c, v, s)[1:]), "running total"),
    (lambda r, c, v, s: (np.r_[0, np.cumsum(np.bincount(r))] if r.size else np.zeros(1, int),
                         *my_csr(r, c, v, s)[1:]), "minlength"),
    (lambda r, c, v, s: (my_csr(r, c, v, s)[0], c[np.argsort(r, kind="stable")], v[np.argsort(r, kind="stable")]),
     "not sorted"),
    (lambda r, c, v, s: (*my_csr(r, c, v, s)[:2], v), "reorder the values with the same permutation"),
    (lambda r, c, v, s: None, "forget `return`"),
    (lambda r, c, v, s: my_csr(r, c, v, s)[:2], "tuple of 3 arrays"),
])
def test_wrong_csr_conversions_are_explained(wrong, words):
    with pytest.raises(AssertionError) as e:
        mt.exercises.check_coo_to_csr(wrong)
    assert words in str(e.value)


def _keep(which):
    def coalesce(indices, values, shape):
        seen = {}
        for k, (r, c) in enumerate(indices.T.tolist()):
            if which == "last" or (r, c) not in seen:
                seen[(r, c)] = values[k]
        keys = sorted(seen)
        return np.array(keys, dtype=np.int64).T.reshape(2, -1), np.array([seen[k] for k in keys])
    return coalesce


def _column_major(indices, values, shape):
    idx, vals = my_coalesce(indices, values, shape)
    order = np.lexsort((idx[0], idx[1]))
    return idx[:, order], vals[order]


def _drop_zeros(indices, values, shape):
    idx, vals = my_coalesce(indices, values, shape)
    keep = vals != 0
    return idx[:, keep], vals[keep]


def _values_not_moved(indices, values, shape):
    idx, vals = my_coalesce(indices, values, shape)
    return idx, vals[::-1].copy()


def _no_dedup(indices, values, shape):
    order = np.lexsort((indices[1], indices[0]))
    return indices[:, order], values[order]


@pytest.mark.parametrize("wrong, words", [
    (_keep("first"), "holds the sum of all its values"),
    (_keep("last"), "holds the sum of all its values"),
    (_column_major, "sorted by column first"),
    (_drop_zeros, "sum to 0"),
    (_values_not_moved, "wrong places"),
    (_no_dedup, "more than once"),
    (lambda i, v, s: (i.T, v), "shape (2, nnz)"),
])
def test_wrong_coalesces_are_explained(wrong, words):
    with pytest.raises(AssertionError) as e:
        mt.exercises.check_coalesce(wrong)
    assert words in str(e.value)


def _no_transpose(rows, cols, values, D, G):
    gv, _ = my_backward(rows, cols, values, D, G)
    A = np.zeros((G.shape[0], D.shape[0]))
    np.add.at(A, (rows, cols), values)
    return gv, A @ G


def _assign_not_add(rows, cols, values, D, G):
    gv, _ = my_backward(rows, cols, values, D, G)
    A = np.zeros((G.shape[0], D.shape[0]))
    A[rows, cols] = values
    return gv, A.T @ G


@pytest.mark.parametrize("wrong, words", [
    (lambda r, c, v, D, G: (G @ D.T, my_backward(r, c, v, D, G)[1]), "lives on its pattern"),
    (lambda r, c, v, D, G: (G[r] * D[c], my_backward(r, c, v, D, G)[1]), "without the sum"),
    (lambda r, c, v, D, G: my_backward(r, c, v, D, G)[::-1], "in the order of the inputs"),
    (_assign_not_add, "np.add.at"),
    (_no_transpose, "your grad_D is S @ G; it must be Sᵀ @ G"),
    (lambda r, c, v, D, G: (np.einsum("ej,ej->e", G[c], D[r]), my_backward(r, c, v, D, G)[1]),
     "rows and columns swapped"),
])
def test_wrong_spmm_backwards_are_explained(wrong, words):
    with pytest.raises(AssertionError) as e:
        mt.exercises.check_spmm_backward(wrong)
    assert words in str(e.value)


def test_an_unfinished_function_shows_its_stub_and_hidden_cases_run(capsys):
    def unfinished(*args):
        raise NotImplementedError("write it")
    for check in (mt.exercises.check_coo_to_csr, mt.exercises.check_coalesce, mt.exercises.check_spmm_backward):
        with pytest.raises(NotImplementedError, match="write it"):
            check(unfinished)
    mt.exercises.check_coo_to_csr(my_csr, hidden=True)
    mt.exercises.check_coalesce(my_coalesce, hidden=True)
    mt.exercises.check_spmm_backward(my_backward, hidden=True)
    assert capsys.readouterr().out.count("(the hidden ones)") == 3
