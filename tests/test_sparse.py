"""microtorch.sparse without PyTorch: COO/CSR against dense numpy, gradients against finite
differences, bad input, the storages behind sparse tensors, and sparse gradients
(merge, coalesce, threshold, pool reuse, optimizers)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt


def random_coo(rng, m, k, nnz, dup=True):
    rows, cols = rng.integers(0, m, nnz), rng.integers(0, k, nnz)
    return np.stack([rows, cols]), rng.standard_normal(nnz)


def dense_of(idx, vals, shape):
    out = np.zeros(shape)
    np.add.at(out, tuple(idx), vals)
    return out


@st.composite
def coo_cases(draw):
    m, k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    nnz = draw(st.integers(0, 12))
    seed = draw(st.integers(0, 2 ** 31))
    rng = np.random.default_rng(seed)
    idx, vals = random_coo(rng, m, k, nnz)
    return idx, vals, (m, k), rng


# -- COO and CSR against dense ----------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(coo_cases())
def test_coo_coalesce_to_dense_and_csr_agree_with_dense(case):
    idx, vals, shape, _ = case
    S = mt.sparse_coo_tensor(idx, vals, shape, dtype=mt.float64)
    want = dense_of(idx, vals, shape)
    np.testing.assert_allclose(S.to_dense().numpy(), want)
    c = S.coalesce()
    assert c.is_coalesced() and not S.is_coalesced()
    lin = np.ravel_multi_index(tuple(c.indices().numpy()), shape)
    assert (np.diff(lin) > 0).all(), "coalesced indices are sorted and distinct"
    np.testing.assert_allclose(c.to_dense().numpy(), want)
    C = S.to_sparse_csr()
    crow = C.crow_indices().numpy()
    assert crow[0] == 0 and crow[-1] == C._nnz() and len(crow) == shape[0] + 1
    np.testing.assert_allclose(C.to_dense().numpy(), want)
    back = C.to_sparse()
    np.testing.assert_array_equal(back.indices().numpy(), c.indices().numpy())
    np.testing.assert_allclose(back.values().numpy(), c.values().numpy())


@settings(max_examples=60, deadline=None)
@given(coo_cases(), st.integers(1, 5))
def test_mm_coo_and_csr_agree_with_dense(case, n):
    idx, vals, (m, k), rng = case
    D = rng.standard_normal((k, n))
    S = mt.sparse_coo_tensor(idx, vals, (m, k), dtype=mt.float64)
    want = dense_of(idx, vals, (m, k)) @ D
    np.testing.assert_allclose(mt.sparse.mm(S, mt.tensor(D)).numpy(), want, atol=1e-12)
    np.testing.assert_allclose((S.to_sparse_csr() @ mt.tensor(D)).numpy(), want, atol=1e-12)


def test_each_layout_is_registered_and_converts_both_ways_by_the_same_names_as_pytorch():
    """COO reaches CSR through the layout registry (csr.py imports coo.py, not the other way)."""
    from microtorch.sparse import base, coo, csr

    assert base.SparseTensor._layouts == {"sparse_coo": coo.SparseCOOTensor,
                                          "sparse_csr": csr.SparseCSRTensor}
    S = mt.sparse_coo_tensor([[1, 0, 1], [2, 2, 0]], [5.0, 3.0, 4.0], (2, 3))  # uncoalesced order
    D = S.to_dense()
    for C in (S.to_sparse_csr(), csr.to_sparse_csr(S), csr.to_sparse_csr(D), D.to_sparse_csr()):
        assert type(C) is csr.SparseCSRTensor and C.to_sparse_csr() is C
        assert C.crow_indices().tolist() == [0, 1, 3] and C.col_indices().tolist() == [2, 0, 2]
        assert C.values().tolist() == [3.0, 4.0, 5.0]
        back = C.to_sparse()
        assert type(back) is coo.SparseCOOTensor and back.is_coalesced()
        assert back.to_dense().tolist() == [[0.0, 0.0, 3.0], [4.0, 0.0, 5.0]]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2 ** 31))
def test_dense_to_sparse_round_trips(m, k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)) * (rng.random((m, k)) < 0.4)
    S = mt.tensor(x).to_sparse()
    assert S.is_coalesced() and S._nnz() == np.count_nonzero(x)
    np.testing.assert_array_equal(S.to_dense().numpy(), x)
    np.testing.assert_array_equal(mt.tensor(x).to_sparse_csr().to_dense().numpy(), x)
    rows = mt.tensor(x).to_sparse(1)
    assert rows.sparse_dim() == 1 and rows._nnz() == int((x != 0).any(1).sum())
    np.testing.assert_array_equal(rows.to_dense().numpy(), x)


def test_sparse_plus_sparse_scalar_mul_and_sum():
    rng = np.random.default_rng(0)
    i1, v1 = random_coo(rng, 4, 5, 6)
    i2, v2 = random_coo(rng, 4, 5, 3)
    a = mt.sparse_coo_tensor(i1, v1, (4, 5), dtype=mt.float64)
    b = mt.sparse_coo_tensor(i2, v2, (4, 5), dtype=mt.float64)
    want = dense_of(i1, v1, (4, 5)) + dense_of(i2, v2, (4, 5))
    np.testing.assert_allclose((a + b).to_dense().numpy(), want)
    np.testing.assert_allclose((a - b).to_dense().numpy(), dense_of(i1, v1, (4, 5)) - dense_of(i2, v2, (4, 5)))
    assert (a.coalesce() + b.coalesce()).is_coalesced()
    np.testing.assert_allclose((2.5 * a).to_dense().numpy(), 2.5 * dense_of(i1, v1, (4, 5)))
    np.testing.assert_allclose((a / 4).to_dense().numpy(), dense_of(i1, v1, (4, 5)) / 4)
    assert (a * 3).is_sparse
    assert a.sum().item() == pytest.approx(v1.sum())


# -- gradients ------------------------------------------------------------------------------------
def test_gradcheck_mm_in_values_and_dense():
    rng = np.random.default_rng(1)
    idx, vals = random_coo(rng, 4, 3, 7)
    v = mt.tensor(vals, dtype=mt.float64, requires_grad=True)
    D = mt.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    assert mt.gradcheck(lambda v, D: mt.sparse.mm(mt.sparse_coo_tensor(idx, v, (4, 3)), D), (v, D))
    assert mt.gradcheck(lambda v, D: mt.sparse_coo_tensor(idx, v, (4, 3)).to_sparse_csr() @ D, (v, D))
    assert mt.gradcheck(lambda v: mt.sparse_coo_tensor(idx, v, (4, 3)).coalesce().values() * 1.0, (v,))
    assert mt.gradcheck(lambda v: mt.sparse_coo_tensor(idx, v, (4, 3)).to_dense(), (v,))


def test_second_order_gradients_of_mm():
    """L = Σ C ⊙ dD with dD = d(Σ out²)/dD = 2 SᵀS D: its gradients in D and in S's values,
    through the backward of the backward, against the closed form and finite differences."""
    rng = np.random.default_rng(2)
    idx, vals = random_coo(rng, 3, 4, 6)
    Dn, Cn = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))

    def second(vals_np):
        v = mt.tensor(vals_np, requires_grad=True)
        D = mt.tensor(Dn, requires_grad=True)
        out = mt.sparse.mm(mt.sparse_coo_tensor(idx, v, (3, 4)), D)
        (gD,) = mt.grad((out * out).sum(), [D], create_graph=True)
        L = (gD * mt.tensor(Cn)).sum()
        L.backward()
        return L.item(), v.grad.numpy(), D.grad.numpy()

    A = dense_of(idx, vals, (3, 4))
    L, gv, gD = second(vals)
    assert L == pytest.approx((2 * A.T @ A @ Dn * Cn).sum())
    np.testing.assert_allclose(gD, 2 * A.T @ A @ Cn, atol=1e-10)
    eps, numeric = 1e-6, np.zeros_like(vals)
    for k in range(vals.size):
        e = np.zeros_like(vals)
        e[k] = eps
        numeric[k] = (second(vals + e)[0] - second(vals - e)[0]) / (2 * eps)
    np.testing.assert_allclose(gv, numeric, atol=1e-6)


def test_sparse_leaf_grad_is_sparse_on_its_pattern():
    rng = np.random.default_rng(3)
    idx, vals = random_coo(rng, 3, 4, 5)
    S = mt.sparse_coo_tensor(idx, vals, (3, 4), dtype=mt.float64, requires_grad=True)
    D = rng.standard_normal((4, 2))
    G = rng.standard_normal((3, 2))
    (S @ mt.tensor(D)).backward(mt.tensor(G))
    assert S.grad.is_sparse and S.grad._indices() is S._indices()
    np.testing.assert_allclose(S.grad._values().numpy(), (G @ D.T)[idx[0], idx[1]])
    C = mt.tensor(dense_of(idx, vals, (3, 4))).to_sparse_csr().requires_grad_()
    Dt = mt.tensor(D, requires_grad=True)
    (C @ Dt).backward(mt.tensor(G))
    assert C.grad.is_sparse_csr
    rows, cols = C.to_sparse().indices().numpy()
    np.testing.assert_allclose(C.grad.values().numpy(), (G @ D.T)[rows, cols])
    np.testing.assert_allclose(Dt.grad.numpy(), dense_of(idx, vals, (3, 4)).T @ G)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, words", [
    (lambda: mt.sparse_coo_tensor([[0, 5]], [1., 2.], (3,)), "for dim 0, size is 3 but found index 5"),
    (lambda: mt.sparse_coo_tensor([[0, -1]], [1., 2.], (3,)), "negative index -1"),
    (lambda: mt.sparse_coo_tensor([[0, 1]], [1., 2., 3.], (3,)), "same number of elements"),
    (lambda: mt.sparse_coo_tensor([0, 1], [1., 2.], (3,)), "shape (sparse_dim, nnz)"),
    (lambda: mt.sparse_coo_tensor([[0.5, 1]], [1., 2.], (3,)), "must be integers"),
    (lambda: mt.sparse_coo_tensor([[2, 1]], [1., 2.], (3,), is_coalesced=True), "not sorted"),
    (lambda: mt.sparse_coo_tensor([[1, 1]], [1., 2.], (3,), is_coalesced=True), "repeats"),
    (lambda: mt.sparse_coo_tensor([[0, 1]], [1., 2.], (3, 4)), "dense_dim"),
    (lambda: mt.sparse_csr_tensor([0, 2, 1], [1, 0], [1., 2.], (2, 2)), "non-decreasing"),
    (lambda: mt.sparse_csr_tensor([1, 2, 2], [1, 0], [1., 2.], (2, 2)), "crow_indices[0] must be 0"),
    (lambda: mt.sparse_csr_tensor([0, 1, 3], [1, 0], [1., 2.], (2, 2)), "must equal nnz"),
    (lambda: mt.sparse_csr_tensor([0, 2, 2], [1, 0], [1., 2.], (2, 2)), "sorted and distinct"),
    (lambda: mt.sparse_csr_tensor([0, 1, 2], [1, 7], [1., 2.], (2, 2)), "out of range"),
])
def test_bad_sparse_input_is_explained(make, words):
    with pytest.raises((RuntimeError, TypeError)) as e:
        make()
    assert words in str(e.value)


def test_mismatched_sizes_and_densifying_ops_are_refused():
    S = mt.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 3))
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(2x3 and 4x2\)"):
        mt.sparse.mm(S, mt.ones(4, 2))
    with pytest.raises(TypeError, match="same dtype"):
        mt.sparse.mm(S, mt.ones(3, 2, dtype=mt.float64))
    with pytest.raises(RuntimeError, match="sizes do not match"):
        S + mt.sparse_coo_tensor([[0], [0]], [1.], (3, 3))
    for op in (lambda: S + mt.ones(2, 3), lambda: mt.ones(2, 3) + S, lambda: mt.exp(S),
               lambda: S * mt.ones(2, 3), lambda: np.asarray(S), lambda: S[0], lambda: S.exp(),
               lambda: mt.ones(3, 2) @ S, lambda: S.numpy()):
        with pytest.raises(TypeError, match="to_dense|dense @ sparse"):
            op()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        S.values()


# -- storages: real allocators, refcounts --------------------------------------------------------
def test_sparse_arrays_live_in_pool_storages_with_refcounts():
    S = mt.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 3))
    idx_storage, val_storage = S.storages()
    assert idx_storage.block is not None and idx_storage.block.owner is mt.memory.pool()
    assert idx_storage.refcount == 1 and val_storage.refcount == 1
    detached = S.detach()  # the same indices tensor, a new view of the values
    assert idx_storage.refcount == 1 and val_storage.refcount == 2
    del detached
    assert val_storage.refcount == 1
    with mt.trace() as tr:
        C = S.to_sparse_csr()
        del C
    allocs = tr.filter("alloc")
    assert len(allocs) >= 3  # coalesced indices, crow, col at least
    freed = {e["storage"] for e in tr.filter("free")}
    assert {a["storage"] for a in allocs} <= freed  # every buffer went back when C did


# -- sparse gradients -----------------------------------------------------------------------------
def test_embedding_grad_is_uncoalesced_sparse_and_matches_dense():
    rng = np.random.default_rng(4)
    emb = mt.nn.Embedding(20, 3, sparse=True, dtype=mt.float64)
    dense = mt.nn.Embedding(20, 3, dtype=mt.float64)
    dense.weight.data.copy_(emb.weight.detach())
    ids = rng.integers(0, 20, (4, 5))
    G = rng.standard_normal((4, 5, 3))
    emb(mt.tensor(ids)).backward(mt.tensor(G))
    dense(mt.tensor(ids)).backward(mt.tensor(G))
    g = emb.weight.grad
    assert g.is_sparse and not g.is_coalesced() and g._nnz() == ids.size
    np.testing.assert_array_equal(g._indices().numpy()[0], ids.reshape(-1))
    np.testing.assert_allclose(g.to_dense().numpy(), dense.weight.grad.numpy())
    assert g.storages()[1].block.owner is mt.sparse.gradient_pool()


def test_accumulation_merges_then_coalesces_past_the_limit_and_densifies_past_the_threshold():
    emb = mt.nn.Embedding(100, 2, sparse=True, dtype=mt.float64)
    mt.sparse.reset_stats()
    with mt.sparse.gradient_options(coalesce_limit=6, densify_threshold=0.3), mt.sparse.record() as log:
        emb(mt.tensor([1, 2, 1])).sum().backward()
        emb(mt.tensor([3, 3])).sum().backward()
        assert emb.weight.grad._nnz() == 5 and not emb.weight.grad.is_coalesced()
        emb(mt.tensor([1, 4])).sum().backward()  # 7 entries > 6: coalesced to rows 1, 2, 3, 4
        g = emb.weight.grad
        assert g.is_coalesced() and g.indices().numpy().tolist() == [[1, 2, 3, 4]]
        np.testing.assert_allclose(g.values().numpy()[:, 0], [3, 1, 2, 1])
        emb(mt.tensor(list(range(10, 40)))).sum().backward()  # 34 rows of 100 > 0.3: dense
    assert not emb.weight.grad.is_sparse
    want = np.zeros((100, 2))
    for r in [1, 2, 1, 3, 3, 1, 4, *range(10, 40)]:
        want[r] += 1
    np.testing.assert_allclose(emb.weight.grad.numpy(), want)
    s = mt.sparse.stats()
    assert (s["sparse_grads"], s["merges"], s["densifications"]) == (4, 3, 1)
    assert [e["action"] for e in log.entries] == ["new", "merge", "coalesce", "densify"]
    assert log.entries[-1]["density"] == pytest.approx(0.34)
    emb(mt.tensor([0])).sum().backward()  # a sparse gradient into the dense one
    assert emb.weight.grad.numpy()[0, 0] == 1 and mt.sparse.stats()["dense_adds"] == 1


def test_sparse_grad_is_not_forced_into_the_flat_buffer_and_densifies_into_its_slice():
    emb = mt.nn.Embedding(10, 2, sparse=True, dtype=mt.float64)
    opt = mt.optim.SGD(emb.parameters(), lr=0.1)
    flat = opt.flat_buffers[0]
    emb(mt.tensor([1, 2])).sum().backward()
    assert emb.weight.grad.is_sparse and not flat.grad.numpy().any()
    with mt.sparse.gradient_options(densify_threshold=0.1):
        emb(mt.tensor([5])).sum().backward()
    assert emb.weight.grad is flat.homes[0], "densified into the parameter's slice of the buffer"


def test_sparse_gradient_buffers_reuse_pool_blocks_across_steps():
    emb = mt.nn.Embedding(1000, 8, sparse=True)
    opt = mt.optim.SGD(emb.parameters(), lr=0.1)
    pool = mt.sparse.gradient_pool()
    ids = mt.tensor(np.arange(64) * 7 % 1000)
    for _ in range(2):
        opt.zero_grad()
        emb(ids).sum().backward()
        opt.step()
    before = pool.stats()
    with mt.trace() as tr:
        for _ in range(3):
            opt.zero_grad()
            emb(ids).sum().backward()
            opt.step()
    after = pool.stats()
    assert after["reserved"] <= before["reserved"] + 4096 and after["peak"] == before["peak"]
    blocks = [e for e in tr.filter("alloc_block") if e["allocator"] == pool.name]
    assert blocks and all(e["reused"] for e in blocks), "every sparse-gradient block is a reuse"


def test_lazy_sgd_changes_only_touched_rows_and_matches_dense_sgd():
    rng = np.random.default_rng(5)
    sparse = mt.nn.Embedding(30, 4, sparse=True, dtype=mt.float64)
    dense = mt.nn.Embedding(30, 4, dtype=mt.float64)
    dense.weight.data.copy_(sparse.weight.detach())
    opts = [mt.optim.SGD(m.parameters(), lr=0.05) for m in (sparse, dense)]
    for _ in range(5):
        ids = mt.tensor(rng.integers(0, 30, 12))
        G = mt.tensor(rng.standard_normal((12, 4)))
        before = sparse.weight.detach().numpy().copy()
        for m, o in zip((sparse, dense), opts):
            o.zero_grad()
            m(ids).backward(G)
            o.step()
        changed = np.flatnonzero((sparse.weight.detach().numpy() != before).any(1))
        assert set(changed) <= set(ids.numpy().tolist())
        np.testing.assert_allclose(sparse.weight.detach().numpy(), dense.weight.detach().numpy(), atol=1e-12)


def test_optimizers_refuse_what_they_cannot_do():
    emb = mt.nn.Embedding(5, 2, sparse=True)
    emb(mt.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="Adam does not support sparse gradients, please consider SparseAdam instead"):
        mt.optim.Adam(emb.parameters()).step()
    with pytest.raises(RuntimeError, match="momentum"):
        mt.optim.SGD(emb.parameters(), lr=0.1, momentum=0.9).step()
    lin = mt.nn.Linear(2, 2)
    lin(mt.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, please consider Adam instead"):
        mt.optim.SparseAdam(lin.parameters()).step()


def test_stats_report_nnz_density_and_bytes():
    emb = mt.nn.Embedding(1000, 16, sparse=True)
    emb(mt.tensor([3, 3, 7, 9])).sum().backward()
    s = mt.sparse.stats(emb.weight)
    assert (s["nnz"], s["density"]) == (4, pytest.approx(3 / 1000))
    assert s["sparse_bytes"] == 4 * 8 + 4 * 16 * 4 and s["dense_bytes"] == 1000 * 16 * 4
    with pytest.raises(TypeError, match="sparse"):
        mt.sparse.stats(mt.ones(2))


def test_module_zero_grad_to_and_clipping_with_a_sparse_gradient():
    emb = mt.nn.Embedding(6, 2, sparse=True)
    emb(mt.tensor([1, 1])).sum().backward()
    emb.zero_grad(set_to_none=False)
    assert emb.weight.grad.is_sparse and emb.weight.grad._nnz() == 0
    emb(mt.tensor([2])).sum().backward()
    assert emb.weight.grad._indices().tolist() == [[2]]
    emb.double()
    assert emb.weight.grad.is_sparse and emb.weight.grad.dtype == np.float64
    with pytest.raises(RuntimeError, match="sparse gradient"):
        mt.nn.utils.clip_grad_norm_(emb.parameters(), 1.0)
    with pytest.raises(RuntimeError, match="Adam does not support sparse gradients"):
        mt.optim.AdamW(emb.parameters()).step()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 29), min_size=0, max_size=12), min_size=1, max_size=6),
       st.sampled_from([None, 0.1, 0.3, 0.9]), st.integers(1, 40), st.integers(0, 2 ** 31))
def test_any_sequence_of_accumulations_equals_the_dense_sum(batches, threshold, limit, seed):
    """Whatever merging, coalescing and densifying did, .grad holds the sum of the gradients."""
    rng = np.random.default_rng(seed)
    emb = mt.nn.Embedding(30, 3, sparse=True, dtype=mt.float64)
    want = np.zeros((30, 3))
    with mt.sparse.gradient_options(densify_threshold=threshold, coalesce_limit=limit):
        for ids in batches:
            G = rng.standard_normal((len(ids), 3))
            emb(mt.tensor(np.array(ids, dtype=np.int64))).backward(mt.tensor(G))
            np.add.at(want, np.array(ids, dtype=np.int64), G)
    g = emb.weight.grad
    got = g.to_dense().numpy() if g.is_sparse else g.numpy()
    np.testing.assert_allclose(got, want, atol=1e-12)
    if threshold is None:
        assert g.is_sparse
    elif g.is_sparse and g.is_coalesced():
        assert g._nnz() <= threshold * 30 or len(batches) == 1


@pytest.mark.parametrize("sparse_first", [True, False])
def test_a_tied_weight_with_a_sparse_and_a_dense_gradient_sums_both(sparse_first):
    """The table is looked up (sparse gradient) and used densely (x @ Wᵀ), in either order."""
    rng = np.random.default_rng(6)
    W0 = rng.standard_normal((8, 3))
    x = mt.tensor(rng.standard_normal((2, 3)))
    ids = mt.tensor([1, 5, 5])
    results = []
    for sparse in (True, False):
        emb = mt.nn.Embedding(8, 3, sparse=sparse, dtype=mt.float64)
        emb.weight.data.copy_(mt.tensor(W0))
        mt.optim.SGD(emb.parameters(), lr=0.1)  # the weight now lives in a flat buffer (a grad home)
        looked_up = emb(ids).sum()
        dense_use = (x @ emb.weight.T).sum()
        loss = looked_up * 2 + dense_use if sparse_first else dense_use + looked_up * 2
        mt.sparse.reset_stats()
        loss.backward()
        g = emb.weight.grad
        assert not g.is_sparse  # a dense gradient met a sparse one: densified
        if sparse:  # each order takes its own path: sparse into dense, or dense into sparse
            s = mt.sparse.stats()
            assert (s["dense_adds"], s["densifications"]) == ((1, 0) if sparse_first else (0, 1))
        results.append(g.numpy().copy())
    np.testing.assert_allclose(results[0], results[1], atol=1e-12)
