"""What the sparse machinery did: counters (``mt.sparse.stats()``) and a step log
(``with mt.sparse.record() as log:``) for the pictures.

The counters are engine-wide and cheap (a few integer additions per backward); the log is
off unless a ``record()`` block is active, and holds one entry per sparse-gradient
accumulation: what happened (``new`` / ``merge`` / ``coalesce`` / ``densify`` / ``into
dense``), the rows the incoming gradient touched, the accumulated gradient's stored
entries, its density and bytes, and the threshold in force — the data
:mod:`microtorch.viz.sparse` draws.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .base import SparseTensor

COUNTERS = ("sparse_grads", "merges", "coalesces", "densifications", "dense_adds")
_counts = dict.fromkeys(COUNTERS, 0)
_log: "SparseLog | None" = None


def count(name: str) -> None:
    _counts[name] += 1


def reset_stats() -> None:
    """Set every counter back to 0."""
    for k in _counts:
        _counts[k] = 0


def rows_touched(t: SparseTensor) -> int:
    """Distinct positions in the sparse dims of ``t`` (rows, for an embedding gradient)."""
    if t.layout == "sparse_csr":
        return t._nnz()
    idx = t._indices_t._data
    if t.is_coalesced() or idx.shape[1] < 2:
        return idx.shape[1]
    return int(np.unique(idx[0] if idx.shape[0] == 1 else np.ravel_multi_index(
        tuple(idx), t.shape[:idx.shape[0]])).size)


def density(t: SparseTensor) -> float:
    """The fraction of the sparse dims' positions that hold a value (for an embedding
    gradient: the fraction of the table's rows it touches)."""
    sparse_dim = 2 if t.layout == "sparse_csr" else t.sparse_dim()
    positions = int(np.prod(t.shape[:sparse_dim]))
    return rows_touched(t) / positions if positions else 0.0


def describe(t) -> dict:
    """nnz, density and bytes (sparse vs dense) of one sparse tensor."""
    return {"layout": t.layout, "size": t.shape, "nnz": t._nnz(), "density": density(t),
            "sparse_bytes": t.nbytes, "dense_bytes": t.dense_nbytes,
            "bytes_ratio": t.nbytes / t.dense_nbytes if t.dense_nbytes else 0.0}


def stats(t=None) -> dict:
    """The counters (sparse gradients made, merges, coalesces, densifications, sparse
    gradients added into a dense one) and the sparse gradient pool's numbers; with ``t``
    (a sparse tensor, or a parameter whose ``.grad`` is one) also its nnz, density and
    bytes stored sparse vs dense."""
    from .buffers import gradient_pool

    out = dict(_counts)
    pool = gradient_pool().stats()
    out["pool"] = {k: pool[k] for k in ("allocations", "reuse_hits", "reserved", "peak", "live_blocks")}
    if t is not None:
        g = t if isinstance(t, SparseTensor) else t.grad
        if g is None or not isinstance(g, SparseTensor):
            raise TypeError("stats(t): t must be a sparse tensor or a tensor whose .grad is sparse "
                            f"(its .grad is {'None' if g is None else 'dense'})")
        out.update(describe(g))
    return out


class SparseLog:
    """One entry (a dict) per sparse-gradient accumulation while recording; see the module docstring."""

    def __init__(self):
        self.entries: list[dict] = []

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        actions = {}
        for e in self.entries:
            actions[e["action"]] = actions.get(e["action"], 0) + 1
        return f"SparseLog({len(self.entries)} accumulations: {actions})"


@contextlib.contextmanager
def record():
    """``with mt.sparse.record() as log:`` — log every sparse-gradient accumulation."""
    global _log
    previous, _log = _log, SparseLog()
    try:
        yield _log
    finally:
        _log = previous


def log_entry(action: str, param, incoming, grad, threshold, touched: float | None = None) -> None:
    """Append to the active log (nothing when not recording); ``touched``: the density, if known."""
    if _log is None:
        return
    rows = np.unique(incoming._indices_t._data[0]) if incoming is not None else np.zeros(0, np.int64)
    sparse = isinstance(grad, SparseTensor)
    if touched is None:  # a dense gradient: the rows holding a non-zero
        touched = density(grad) if sparse else float(
            grad._data.reshape(grad.shape[0], -1).any(axis=1).mean()) if grad.shape[0] else 0.0
    dense_bytes = grad.dense_nbytes if sparse else grad._data.nbytes
    _log.entries.append({
        "step": len(_log.entries), "action": action, "param": getattr(param, "name", None) or "×".join(map(str, param.shape)) + " parameter",
        "rows": rows.tolist(), "num_rows": int(param.shape[0]),
        "nnz": grad._nnz() if sparse else None,
        "density": touched,
        "sparse_bytes": grad.nbytes if sparse else None, "dense_bytes": dense_bytes,
        "threshold": threshold})
