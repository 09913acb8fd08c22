"""microtorch.sparse against torch.sparse, torch.nn.Embedding(sparse=True) and
torch.optim.SparseAdam on random cases (float64). Each test skips on its own when PyTorch
is not installed."""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore:Sparse:UserWarning")]


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")


def random_coo(rng, m, k, nnz):
    return np.stack([rng.integers(0, m, nnz), rng.integers(0, k, nnz)]), rng.standard_normal(nnz)


@pytest.mark.parametrize("seed", range(8))
def test_coalesce_and_csr_match_torch(torch, seed):
    rng = np.random.default_rng(seed)
    m, k = rng.integers(1, 8, 2)
    idx, vals = random_coo(rng, m, k, int(rng.integers(0, 20)))
    ours = mt.sparse_coo_tensor(idx, vals, (m, k), dtype=mt.float64)
    theirs = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), (int(m), int(k)))
    oc, tc = ours.coalesce(), theirs.coalesce()
    np.testing.assert_array_equal(oc.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(oc.values().numpy(), tc.values().numpy(), atol=1e-12)
    ocsr, tcsr = ours.to_sparse_csr(), theirs.to_sparse_csr()
    np.testing.assert_array_equal(ocsr.crow_indices().numpy(), tcsr.crow_indices().numpy())
    np.testing.assert_array_equal(ocsr.col_indices().numpy(), tcsr.col_indices().numpy())
    np.testing.assert_allclose(ocsr.values().numpy(), tcsr.values().numpy(), atol=1e-12)
    dense = rng.standard_normal((m, k)) * (rng.random((m, k)) < 0.3)
    np.testing.assert_array_equal(mt.tensor(dense).to_sparse().indices().numpy(),
                                  torch.tensor(dense).to_sparse().indices().numpy())


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_mm_forward_and_backward_match_torch(torch, seed, layout):
    rng = np.random.default_rng(100 + seed)
    m, k, n = rng.integers(1, 7, 3)
    idx, vals = random_coo(rng, m, k, int(rng.integers(1, 15)))
    D, G = rng.standard_normal((k, n)), rng.standard_normal((m, n))
    tS = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), (int(m), int(k))).coalesce()
    oS = mt.sparse_coo_tensor(idx, vals, (m, k), dtype=mt.float64).coalesce()
    if layout == "csr":
        oS = oS.to_sparse_csr()
    tS.requires_grad_(True)
    oS.requires_grad_(True)
    tD, oD = torch.tensor(D, requires_grad=True), mt.tensor(D, requires_grad=True)
    tout, oout = torch.sparse.mm(tS, tD), mt.sparse.mm(oS, oD)
    np.testing.assert_allclose(oout.detach().numpy(), tout.detach().numpy(), atol=1e-12)
    tout.backward(torch.tensor(G))
    oout.backward(mt.tensor(G))
    np.testing.assert_allclose(oD.grad.numpy(), tD.grad.numpy(), atol=1e-12)
    tg = tS.grad.coalesce()
    og = oS.grad.to_sparse() if layout == "csr" else oS.grad
    np.testing.assert_array_equal(og.indices().numpy(), tg.indices().numpy())
    np.testing.assert_allclose(og.values().numpy(), tg.values().numpy(), atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_sparse_add_scalar_mul_and_sum_match_torch(torch, seed):
    rng = np.random.default_rng(200 + seed)
    i1, v1 = random_coo(rng, 5, 4, 7)
    i2, v2 = random_coo(rng, 5, 4, 5)
    o = mt.sparse_coo_tensor(i1, v1, (5, 4), dtype=mt.float64) * 1.5 + mt.sparse_coo_tensor(i2, v2, (5, 4), dtype=mt.float64)
    t = torch.sparse_coo_tensor(torch.tensor(i1), torch.tensor(v1), (5, 4)) * 1.5 + \
        torch.sparse_coo_tensor(torch.tensor(i2), torch.tensor(v2), (5, 4))
    np.testing.assert_allclose(o.to_dense().numpy(), t.to_dense().numpy(), atol=1e-12)
    assert o.sum().item() == pytest.approx(t.coalesce().values().sum().item())


def _models(torch, rng, n, d):
    w = rng.standard_normal((n, d))
    ours = mt.nn.Embedding(n, d, sparse=True, dtype=mt.float64)
    ours.weight.data.copy_(mt.tensor(w))
    theirs = torch.nn.Embedding(n, d, sparse=True).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    return ours, theirs


def _loss(emb, ids, target):
    out = emb(ids)
    return ((out - target) ** 2).sum()


@pytest.mark.parametrize("seed", range(3))
def test_embedding_sparse_grad_matches_torch(torch, seed):
    rng = np.random.default_rng(300 + seed)
    ours, theirs = _models(torch, rng, 50, 6)
    ids = rng.integers(0, 50, (3, 7))
    target = rng.standard_normal((3, 7, 6))
    _loss(ours, mt.tensor(ids), mt.tensor(target)).backward()
    _loss(theirs, torch.tensor(ids), torch.tensor(target)).backward()
    og, tg = ours.weight.grad, theirs.weight.grad
    assert og.is_sparse and tg.is_sparse and not og.is_coalesced() and not tg.is_coalesced()
    np.testing.assert_array_equal(og._indices().numpy(), tg._indices().numpy())
    np.testing.assert_allclose(og._values().numpy(), tg._values().numpy(), atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["sgd", "sparse_adam"])
def test_twenty_steps_of_sparse_training_match_torch(torch, seed, kind):
    """Values, gradients and optimizer states within 1e-6 at every one of 20 steps."""
    rng = np.random.default_rng(400 + seed)
    n, d = 40, 5
    ours, theirs = _models(torch, rng, n, d)
    if kind == "sgd":
        oo, to = mt.optim.SGD(ours.parameters(), lr=0.05), torch.optim.SGD(theirs.parameters(), lr=0.05)
    else:
        oo = mt.optim.SparseAdam(ours.parameters(), lr=0.02, betas=(0.8, 0.95), eps=1e-7)
        to = torch.optim.SparseAdam(theirs.parameters(), lr=0.02, betas=(0.8, 0.95), eps=1e-7)
    for step in range(20):
        ids = rng.integers(0, n, int(rng.integers(1, 12)))
        target = rng.standard_normal((ids.size, d))
        oo.zero_grad()
        to.zero_grad()
        _loss(ours, mt.tensor(ids), mt.tensor(target)).backward()
        _loss(theirs, torch.tensor(ids), torch.tensor(target)).backward()
        np.testing.assert_allclose(ours.weight.grad.to_dense().numpy(), theirs.weight.grad.to_dense().numpy(),
                                   atol=1e-6, err_msg=f"gradient at step {step}")
        oo.step()
        to.step()
        np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                                   atol=1e-6, err_msg=f"weights after step {step}")
        if kind == "sparse_adam":
            os_, ts = oo.state[ours.weight], to.state[theirs.weight]
            assert int(os_["step"].item()) == ts["step"]
            for name in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(os_[name].numpy(), ts[name].numpy(), atol=1e-6,
                                           err_msg=f"{name} after step {step}")


def test_error_messages_match_torch(torch):
    ours, theirs = _models(torch, np.random.default_rng(0), 5, 2)
    ours(mt.tensor([1])).sum().backward()
    theirs(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError) as t_err:
        torch.optim.Adam(theirs.parameters()).step()
    with pytest.raises(RuntimeError) as o_err:
        mt.optim.Adam(ours.parameters()).step()
    assert str(o_err.value) == str(t_err.value)
    with pytest.raises(RuntimeError) as t_err:
        torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1., 2.])).values()
    with pytest.raises(RuntimeError) as o_err:
        mt.sparse_coo_tensor([[0, 1]], [1., 2.]).values()
    assert str(o_err.value) == str(t_err.value)
