"""Small datasets: two generated in a blink (moons, spirals) and one real one shipped with
microtorch (8×8 handwritten digits). All offline; the generated ones are seeded."""
from __future__ import annotations

import math
import numpy as np

from .. import dtypes
from ..creation import default_generator, tensor
from ..tensor import Tensor

#: The digits' fixed split: indices stored in the file (a seeded 80/20 permutation).
DIGITS_SPLITS = ("train", "test", "all")


def _rng(generator):
    return (generator or default_generator).rng


def make_moons(n_samples: int = 100, noise: float = 0.0, generator=None) -> tuple[Tensor, Tensor]:
    """Two interleaving half circles in 2-D (scikit-learn's ``make_moons``).

    Returns ``(X, y)``: ``X`` float32 of shape (n_samples, 2), ``y`` int64 labels 0 (upper
    moon) / 1 (lower moon), in a shuffled order. ``noise`` is the standard deviation of
    Gaussian noise added to each coordinate. Seeded by ``generator``.
    """
    if n_samples < 2:
        raise ValueError(f"make_moons: n_samples must be ≥ 2, got {n_samples}")
    rng = _rng(generator)
    n_out = n_samples // 2
    n_in = n_samples - n_out
    t_out, t_in = np.linspace(0, math.pi, n_out), np.linspace(0, math.pi, n_in)
    x = np.concatenate([np.stack([np.cos(t_out), np.sin(t_out)], 1),
                        np.stack([1 - np.cos(t_in), 0.5 - np.sin(t_in)], 1)])
    y = np.concatenate([np.zeros(n_out, np.int64), np.ones(n_in, np.int64)])
    if noise:
        x = x + rng.normal(0.0, noise, x.shape)
    order = rng.permutation(n_samples)
    return tensor(x[order], dtype=dtypes.float32), tensor(y[order])


def make_spirals(n_samples: int = 300, n_classes: int = 3, noise: float = 0.2, turns: float = 0.75,
                 generator=None) -> tuple[Tensor, Tensor]:
    """``n_classes`` interleaved spiral arms in 2-D (the CS231n toy problem).

    Arm k has ``n_samples // n_classes`` points at radii r evenly spaced in [0, 1], at angle
    θ = 2π (turns · r + k / n_classes) + noise · N(0, 1) (so ``noise`` is in radians and
    each arm winds ``turns`` times around the centre). Returns ``(X, y)``: float32 (N, 2)
    and int64 labels, shuffled. Seeded by ``generator``.
    """
    if n_classes < 2:
        raise ValueError(f"make_spirals: n_classes must be ≥ 2, got {n_classes}")
    per = n_samples // n_classes
    if per < 1:
        raise ValueError(f"make_spirals: n_samples ({n_samples}) must be ≥ n_classes ({n_classes})")
    rng = _rng(generator)
    xs, ys = [], []
    for k in range(n_classes):
        r = np.linspace(0.0, 1.0, per)
        theta = 2 * math.pi * (turns * r + k / n_classes) + noise * rng.standard_normal(per)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], 1))
        ys.append(np.full(per, k, np.int64))
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = rng.permutation(len(y))
    return tensor(x[order], dtype=dtypes.float32), tensor(y[order])


_digits_cache: dict | None = None


def _digits_file() -> dict:
    global _digits_cache
    if _digits_cache is None:
        from importlib import resources  # here, not at import: it costs a few ms

        with resources.files(__package__).joinpath("digits.npz").open("rb") as f:
            with np.load(f, allow_pickle=False) as npz:
                _digits_cache = {k: npz[k] for k in npz.files}
    return _digits_cache


def load_digits(split: str = "train", flatten: bool = True) -> tuple[Tensor, Tensor]:
    """The 8×8 handwritten digits (UCI optdigits, as shipped by scikit-learn; CC BY 4.0).

    1797 grey-level images of the digits 0–9, each pixel a count 0..16 of ink in a 4×4
    block of a 32×32 bitmap. Returns ``(images, labels)``: images float32 scaled to [0, 1]
    — shape (N, 64), or (N, 8, 8) with ``flatten=False`` — and int64 labels.

    ``split``: ``"train"`` (1438 images), ``"test"`` (359) or ``"all"`` (1797). The split
    is fixed: the indices are stored in the file (a permutation drawn once with
    ``np.random.default_rng(0)``; the first 359 of it are the test set, ~20 %).
    """
    if split not in DIGITS_SPLITS:
        raise ValueError(f"load_digits: split must be one of {DIGITS_SPLITS}, got {split!r}")
    d = _digits_file()
    images, labels = d["images"], d["labels"]
    if split != "all":
        idx = d[f"{split}_index"]
        images, labels = images[idx], labels[idx]
    x = images.astype(np.float32) / np.float32(16.0)
    if flatten:
        x = x.reshape(len(x), 64)
    return tensor(x), tensor(labels.astype(np.int64))


def mapped_dataset(path, *names: str, mmap: bool | str = True):
    """A :class:`~microtorch.data.TensorDataset` of arrays ``names`` (default: all) of an
    uncompressed ``.npz`` (as ``mt.save`` writes), memory-mapped: no byte is read until a batch
    touches it (see :mod:`microtorch.memory.mapped`; ``mmap="c"`` for copy-on-write)."""
    from ..serialization import load
    from .loader import TensorDataset

    tensors = load(path, mmap=mmap)
    missing = [n for n in names if n not in tensors]
    if missing:
        raise KeyError(f"{path!r} has no array named {', '.join(map(repr, missing))}; it holds "
                       f"{', '.join(map(repr, tensors))}")
    return TensorDataset(*(tensors[n] for n in (names or tensors)))
