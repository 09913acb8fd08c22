"""Adam and AdamW (``mt.optim.Adam``, ``mt.optim.AdamW``), as ``torch/optim/adam.py`` and
``adamw.py``: m and v are running averages of g and g², and
p ← p − lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε). AdamW decays the weights directly,
p ← p (1 − lr λ), before the same step: it is Adam with one flag (``decoupled``), so the two
live in one module.
"""
from __future__ import annotations

import math

import numpy as np

from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction; ``amsgrad`` keeps the running max of v.

    With gradient g (plus λp when ``weight_decay`` λ > 0), step t::

        m ← β₁ m + (1 − β₁) g          v ← β₂ v + (1 − β₂) g²
        p ← p − lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)

    :class:`AdamW` instead decays the weights directly: p ← p (1 − lr λ) before the step.
    """

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())

    def _check(self, group):
        super()._check(group)
        if not 0.0 <= group["eps"]:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        for i, b in enumerate(group["betas"]):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b} (it must be in [0, 1))")

    def _sparse_update(self, group, state, p, g, step):
        raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")

    def _update(self, group, state, p, g, step):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if group["maximize"]:
            g = -g
        if wd != 0:
            if self.decoupled:
                p *= 1 - lr * wd
            else:
                g = g + wd * p
        m, v = state["exp_avg"], state["exp_avg_sq"]
        t = self._room(p)  # every temporary below goes into this one scratch array
        m += np.multiply(np.subtract(g, m, out=t), 1 - beta1, out=t)  # m ← β₁ m + (1 − β₁) g
        v *= beta2
        v += np.multiply(np.multiply(g, 1 - beta2, out=t), g, out=t)  # v ← β₂ v + (1 − β₂) g²
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            np.maximum(vmax, v, out=vmax)
            v = vmax
        bias1 = 1 - beta1 ** step
        bias2_sqrt = math.sqrt(1 - beta2 ** step)
        denom = np.sqrt(v, out=t)
        denom /= bias2_sqrt
        denom += eps  # √v / √(1 − β₂ᵗ) + ε
        p -= np.multiply(np.divide(m, denom, out=t), lr / bias1, out=t)  # p ← p − lr / (1 − β₁ᵗ) · m / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p ← p (1 − lr λ), then Adam's step.
    ``weight_decay`` defaults to 0.01, as in PyTorch."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
