"""SparseAdam (``mt.optim.SparseAdam``), as ``torch/optim/sparse_adam.py``: Adam's step on
the rows R that a sparse gradient touches only; m[R], v[R] and p[R] move, the other rows do
not (an approximation of Adam; the rule is written out on :class:`SparseAdam`).
"""
from __future__ import annotations

import math

import numpy as np

from .optimizer import Optimizer, _coalesced_rows


class SparseAdam(Optimizer):
    """Adam masked to the rows a sparse gradient touches (``torch.optim.SparseAdam``).

    For the coalesced gradient's rows R only (the other rows of p, m and v do not move)::

        m[R] ← β₁ m[R] + (1 − β₁) g        v[R] ← β₂ v[R] + (1 − β₂) g²
        p[R] ← p[R] − lr √(1 − β₂ᵗ) / (1 − β₁ᵗ) · m[R] / (√v[R] + ε)

    with t the parameter's step count (every step it had a gradient). It is an
    approximation of Adam: dense Adam would also decay m and v of the untouched rows
    (their gradient is 0) and still move those rows by their momentum. Dense gradients
    are refused, as in PyTorch — including one that microtorch's density threshold made
    dense while accumulating many backward calls (see :mod:`microtorch.sparse.gradient`;
    ``mt.sparse.options.densify_threshold = None`` keeps gradients sparse, as PyTorch does).
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize))

    def _check(self, group):
        super()._check(group)
        if not 0.0 < group["eps"]:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        for i, b in enumerate(group["betas"]):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")

    def _update(self, group, state, p, g, step):
        raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")

    def _sparse_update(self, group, state, p, g, step):
        (beta1, beta2), eps, lr = group["betas"], group["eps"], group["lr"]
        rows, grad = _coalesced_rows(g)
        if group["maximize"]:
            grad = -grad
        if grad.shape[0] == 0:
            return
        m, v = state["exp_avg"], state["exp_avg_sq"]
        old_m, old_v = m[rows], v[rows]  # the same operations in PyTorch's order
        m_update = (grad - old_m) * (1 - beta1)
        m[rows] += m_update
        v_update = (grad ** 2 - old_v) * (1 - beta2)
        v[rows] += v_update
        numer = m_update + old_m
        denom = np.sqrt(v_update + old_v) + eps
        step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        p[rows] += -step_size * (numer / denom)
