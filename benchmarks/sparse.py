"""Sparse gradients: an embedding step with a sparse vs a dense gradient, against PyTorch's
sparse embedding step, the gradient's bytes, and CSR × dense against scipy.sparse.

* **embedding step** — ``nn.Embedding(100_000, 64)``, a batch of 1,024 random ids,
  loss ``(emb(ids) ** 2).mean()``, one iteration = ``zero_grad``, forward, backward,
  ``SGD(lr=0.1).step()``. microtorch with ``sparse=True`` (a sparse COO gradient, lazy SGD
  on the touched rows) against microtorch with the dense gradient (a 100,000 × 64 scatter,
  then SGD over the whole table) — target ≥ 15× faster — and against
  ``torch.nn.Embedding(sparse=True)`` + ``torch.optim.SGD`` — target ≤ 1.5× its time.
  Before timing, 3 steps from the same weights must agree across the three.
* **gradient bytes** — the sparse gradient's index and value arrays vs the dense gradient.
* **CSR × dense** — a 4,096 × 4,096 CSR matrix with 0.5 % non-zeros times a 4,096 × 64
  dense matrix (forward only), against ``scipy.sparse.csr_matrix @ ndarray``.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Row, measure_many
from benchmarks.peers import torch_or_skip

GROUP = "sparse"
ROWS, DIM, BATCH, LR = 100_000, 64, 1024, 0.1
SKIP_SCIPY = "skipped: scipy not installed (pip install -e '.[bench]')"


def _ids(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, ROWS, BATCH)


def _weights(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((ROWS, DIM)).astype(np.float32)


def microtorch_step(sparse: bool, ids: np.ndarray, w: np.ndarray):
    import microtorch as mt

    emb = mt.nn.Embedding(ROWS, DIM, sparse=sparse)
    emb.weight.data.copy_(mt.tensor(w))
    opt = mt.optim.SGD(emb.parameters(), lr=LR)
    idx = mt.tensor(ids)

    def step():
        opt.zero_grad()
        (emb(idx) ** 2).mean().backward()
        opt.step()

    return step, emb, opt, lambda: emb.weight.detach().numpy()


def torch_step(torch, ids: np.ndarray, w: np.ndarray):
    emb = torch.nn.Embedding(ROWS, DIM, sparse=True)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(w))
    opt = torch.optim.SGD(emb.parameters(), lr=LR)
    idx = torch.from_numpy(ids)

    def step():
        opt.zero_grad()
        (emb(idx) ** 2).mean().backward()
        opt.step()

    return step, opt, lambda: emb.weight.detach().numpy()


def _embedding_rows(quick: bool, torch, torch_skip) -> list[Row]:
    ids, w = _ids(), _weights()
    built, values, errors = {}, {}, {}
    for name, build in (("sparse", lambda: microtorch_step(True, ids, w)),
                        ("dense", lambda: microtorch_step(False, ids, w))):
        try:
            step, emb, opt, read = build()
            built[name], values[name] = step, read
            if name == "sparse":
                sparse_emb, sparse_opt = emb, opt
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"
    if torch is not None:
        step, torch_opt, read = torch_step(torch, ids, w)
        built["torch"], values["torch"] = step, read
    finals = {}
    for name, step in built.items():
        for _ in range(3):
            step()
        finals[name] = values[name]().copy()
    checks = {}
    for peer in ("dense", "torch"):
        if "sparse" in finals and peer in finals:
            diff = float(np.max(np.abs(finals["sparse"] - finals[peer])))
            checks[peer] = (f"results agree with the {peer} step: weights after 3 steps within 1e-5"
                            if diff <= 1e-5 else f"CHECK FAILED vs the {peer} step: max abs diff {diff:.3g}")
    stats = measure_many(built, quick, budget_s=(1.0 if quick else 4.0))
    bench = f"embedding {ROWS:,}x{DIM}, {BATCH:,} ids, SGD step"
    rows = []
    ratio_target = 1 / 15
    r = Row(GROUP, bench, stats=stats.get("sparse"), peer="microtorch dense grad",
            peer_stats=stats.get("dense"), target="sparse ≥ 15× faster (ratio ≤ 0.067)",
            error=errors.get("sparse") or errors.get("dense"))
    if r.ratio is not None:
        r.met = r.ratio <= ratio_target
    r.notes.append("one iteration = zero_grad, forward, backward of (emb(ids) ** 2).mean(), "
                   f"SGD(lr={LR}).step(); sparse: Embedding(sparse=True) (a COO gradient of the "
                   "1,024 looked-up rows, SGD updates only them); dense: the gradient is a "
                   f"{ROWS:,}x{DIM} scatter and SGD updates every row")
    if "dense" in checks:
        r.notes.append(checks["dense"])
    rows.append(r)
    r = Row(GROUP, bench, stats=stats.get("sparse"), peer="torch sparse embedding",
            peer_stats=stats.get("torch"), skipped=torch_skip, target="≤ 1.5× torch",
            error=errors.get("sparse"))
    if r.ratio is not None:
        r.met = r.ratio <= 1.5
    if "torch" in checks:
        r.notes.append(checks["torch"])
    rows.append(r)
    if "sparse" in built and torch is not None:  # where the time goes: the optimizer step alone
        opt_steps = {"microtorch": sparse_opt.step, "torch": torch_opt.step}
        opt_stats = measure_many(opt_steps, quick)
        r = Row(GROUP, "  of which: SGD step on the sparse gradient", stats=opt_stats["microtorch"],
                peer="torch.optim.SGD", peer_stats=opt_stats["torch"])
        r.notes.append("opt.step() alone on one fixed sparse gradient of 1,024 rows (microtorch: lazy "
                       "SGD, repeats found without sorting; torch: param.add_(sparse grad)); the rest "
                       "of the step is forward and backward")
        rows.append(r)
    if "sparse" in built:
        built["sparse"]()  # a fresh gradient to measure
        g = sparse_emb.weight.grad
        sparse_bytes, dense_bytes = g.nbytes, g.dense_nbytes
        r = Row(GROUP, "embedding gradient bytes", value=f"{sparse_bytes:,} B",
                peer="dense gradient", peer_value=f"{dense_bytes:,} B",
                value_ratio=sparse_bytes / dense_bytes)
        r.notes.append(f"sparse: int64 indices (1 x {BATCH:,}) + float32 values ({BATCH:,} x {DIM}); "
                       f"dense: {ROWS:,} x {DIM} float32")
        rows.append(r)
    return rows


def _csr_rows(quick: bool) -> list[Row]:
    import microtorch as mt

    bench = "CSR 4,096x4,096 (0.5% nnz) @ dense 4,096x64"
    try:
        import scipy.sparse as sp
    except ImportError:
        return [Row(GROUP, bench, peer="scipy.sparse", skipped=SKIP_SCIPY)]
    rng = np.random.default_rng(3)
    n, k = 4096, 64
    a = sp.random(n, n, density=0.005, format="csr", random_state=rng, dtype=np.float32)
    a.sort_indices()
    d = rng.standard_normal((n, k)).astype(np.float32)
    C = mt.sparse_csr_tensor(a.indptr.astype(np.int64), a.indices.astype(np.int64), a.data, (n, n))
    D = mt.tensor(d)
    note = ("results agree with scipy within 1e-4" if np.allclose((C @ D).numpy(), a @ d, atol=1e-4)
            else "CHECK FAILED vs scipy: the products differ")
    stats = measure_many({"microtorch": lambda: C @ D, "scipy": lambda: a @ d}, quick)
    r = Row(GROUP, bench, stats=stats["microtorch"], peer="scipy.sparse", peer_stats=stats["scipy"])
    r.notes.append(f"forward only; {a.nnz:,} non-zeros; microtorch groups the rows by how many "
                   "elements they hold and does one batched matmul per group (it gathers the rows of "
                   "D each element needs: nnz x 64 numbers); scipy runs one C loop over the elements")
    r.notes.append(note)
    return [r]


def run(quick: bool) -> list[Row]:
    torch, torch_skip = torch_or_skip()
    return _embedding_rows(quick, torch, torch_skip) + _csr_rows(quick)
