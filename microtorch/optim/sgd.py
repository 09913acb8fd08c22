"""SGD (``mt.optim.SGD``), as ``torch/optim/sgd.py``: p ← p − lr · d, with d the gradient plus
weight decay, through momentum (with dampening, or Nesterov); the rule is written out on
:class:`SGD`. A sparse gradient takes the lazy step p[r] ← p[r] − lr · g[r] on the rows it
touches only (:func:`_add_rows`).
"""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _coalesced_rows


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

    With d = g + λp (weight decay λ) and momentum μ, dampening τ::

        b ← d (first step),  b ← μ b + (1 − τ) d (later steps)
        d ← d + μ b (Nesterov)  or  d ← b
        p ← p − lr · d
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False):
        self._row_marks: dict[int, np.ndarray] = {}  # scratch of the sparse (lazy) step
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

    _counts_steps = False  # PyTorch's SGD state is the momentum buffer alone

    def _state_names(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _check(self, group):
        super()._check(group)
        if group["momentum"] < 0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _update(self, group, state, p, g, step):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        d = -g if group["maximize"] else g
        if wd != 0:
            d = d + wd * p
        if mu != 0:
            buf = state["momentum_buffer"]
            if step == 1:
                np.copyto(buf, d)
            else:
                buf *= mu
                if group["dampening"]:
                    buf += (1 - group["dampening"]) * d
                else:
                    buf += d  # no temporary for the common case
            d = d + mu * buf if group["nesterov"] else buf
        p -= np.multiply(d, lr, out=self._room(p))  # = p − lr·d, with no temporary as large as p

    def _sparse_update(self, group, state, p, g, step):
        """Lazy SGD: only the rows the gradient touches change, p[r] ← p[r] − lr · g[r]
        (duplicates summed first). Momentum and weight decay would touch every row."""
        if group["momentum"] != 0 or group["weight_decay"] != 0:
            raise RuntimeError("SGD with a sparse gradient supports neither momentum nor weight_decay "
                               "in microtorch (they would update every row, not only the touched ones); "
                               "use momentum=0, weight_decay=0, or mt.optim.SparseAdam")
        scale = group["lr"] if group["maximize"] else -group["lr"]
        if g.sparse_dim() != 1:
            rows, values = _coalesced_rows(g)
            p[rows] += values * scale
            return
        _add_rows(p, g._indices()._data[0], g._values()._data, scale, self._marks(p.shape[0]))

    def _marks(self, n: int) -> np.ndarray:
        """Scratch space for :func:`_add_rows`: one int per row, the same array every step."""
        if n not in self._row_marks:
            self._row_marks[n] = np.empty(n, np.int64)
        return self._row_marks[n]


def _add_rows(p: np.ndarray, rows: np.ndarray, values: np.ndarray, scale: float,
              marks: np.ndarray) -> None:
    """p[rows[k]] += scale · values[k] for every k, repeated rows adding up — without sorting.

    ``marks[rows] = k`` keeps, for each distinct row, the last k that wrote it. The few
    repeats are first added (``np.add.at``) into that last entry's scaled values; then one
    fancy-indexed ``+=`` over all the rows adds them, the last write of a repeated row
    carrying the row's whole sum. Equal to adding the coalesced gradient, up to the order
    of the sums."""
    k = np.arange(rows.size)
    marks[rows] = k
    owner = marks[rows]
    scaled = np.multiply(values, scale, dtype=p.dtype)
    repeats = owner != k
    if repeats.any():  # (none, the usual case for a large table)
        np.add.at(scaled, owner[repeats], scaled[repeats])
    p[rows] += scaled
