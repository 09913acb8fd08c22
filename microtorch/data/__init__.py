"""Data (``mt.data``): datasets, batching, and small datasets that work offline.

* :class:`TensorDataset`, :class:`DataLoader` (``batch_size``, seeded ``shuffle``, ``drop_last``)
  — named and behaving like ``torch.utils.data``;
* :func:`make_moons`, :func:`make_spirals` — seeded 2-D toy problems;
* :func:`mapped_dataset` — a dataset memory-mapped from an ``.npz`` file (zero-copy batches
  with ``DataLoader(..., zero_copy=True)``);
* :func:`load_names`, :func:`char_windows` — the 1990 US Census first names (public domain,
  ``names.txt``) and next-character examples for a small language model;
* :func:`load_digits` — 1797 real 8×8 handwritten digits shipped with microtorch
  (``digits.npz``, 49 kB; UCI optdigits, CC BY 4.0 — see ``microtorch/data/README.md``).
"""
from .datasets import load_digits, make_moons, make_spirals, mapped_dataset
from .loader import DataLoader, Dataset, TensorDataset
from .names import char_windows, load_names

__all__ = ["DataLoader", "Dataset", "TensorDataset", "char_windows", "load_digits", "load_names", "make_moons",
           "make_spirals", "mapped_dataset"]
