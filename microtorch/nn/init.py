"""Initialisation (``mt.nn.init``): fill a tensor's bytes in place with seeded random values.

Every function takes ``generator=`` (an ``mt.Generator``); without it the default generator
is used, so ``mt.manual_seed(0)`` makes model construction reproducible. The values are
written straight into the tensor's bytes (no graph is recorded) and its version is bumped.
"""
from __future__ import annotations

import math

import numpy as np

from ..creation import default_generator
from ..tensor import Tensor


def _fill(t: Tensor, values) -> Tensor:
    np.copyto(t._data, values, casting="unsafe")
    t._storage.version += 1
    return t


def _rng(generator):
    return (generator or default_generator).rng


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Samples of U(a, b)."""
    return _fill(t, _rng(generator).uniform(a, b, t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Samples of N(mean, std²)."""
    return _fill(t, _rng(generator).normal(mean, std, t.shape))


def constant_(t: Tensor, val: float) -> Tensor:
    return _fill(t, val)


def zeros_(t: Tensor) -> Tensor:
    return _fill(t, 0)


def ones_(t: Tensor) -> Tensor:
    return _fill(t, 1)


def calculate_fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    """fan_in = inputs per output unit (``shape[1]`` × receptive field), fan_out = ``shape[0]`` × it."""
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The gain that keeps activations' variance steady through ``nonlinearity`` (PyTorch's table)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """U(−bound, bound) with bound = gain · √(3 / fan), gain = √(2 / (1 + a²)) for leaky_relu.

    With ``a = √5`` (what ``Linear`` uses, as PyTorch does) the bound is 1/√fan_in.
    """
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(t, -bound, bound, generator)


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(−a, a) with a = gain · √(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a, generator)
