"""``mt.save`` / ``mt.load``: state dicts as ``.npz`` files — arrays only, never pickles.

A state dict is a flat mapping ``{name: tensor}`` (``model.state_dict()``). ``mt.save``
writes one ``.npy`` entry per name into a zip (numpy's ``.npz`` format, readable with
plain ``np.load``); ``mt.load`` reads it back with ``allow_pickle=False``, so loading a
file can never run code — unlike ``torch.load`` of a pickle. The order of the keys and
every dtype are kept.
"""
from __future__ import annotations

import os

import numpy as np

from .tensor import Tensor


def save(obj, f) -> None:
    """Write ``obj`` (a mapping ``{str: Tensor | ndarray | number}``) to ``f`` (a path or a
    binary file) in ``.npz`` format. The file is written at exactly ``f`` (no suffix added)."""
    if not hasattr(obj, "items"):
        raise TypeError(f"mt.save expects a state dict ({{name: tensor}}, e.g. model.state_dict()), "
                        f"got {type(obj).__name__}; microtorch saves arrays only, not pickled objects")
    arrays = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"mt.save: keys must be strings, got {key!r}")
        if isinstance(value, Tensor):
            value = value.detach()._data
        elif not isinstance(value, (np.ndarray, int, float, bool, np.number)):
            raise TypeError(f"mt.save: the value of {key!r} is a {type(value).__name__}; only tensors, "
                            "numpy arrays and numbers can be saved (no pickles)")
        arrays[key] = np.asarray(value)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def load(f, mmap: bool | str = False) -> dict[str, Tensor]:
    """Read a file written by :func:`save` into ``{name: tensor}`` (same order, same dtypes).

    ``mmap=True`` maps the file instead of reading it: the tensors' storages are the file's
    pages (zero-copy, read from disk on first touch), read-only; ``mmap="c"`` copy-on-write
    (writes stay private to this process). See :mod:`microtorch.memory.mapped`."""
    from .creation import tensor

    if mmap:
        from .memory.mapped import MODES, load_mapped

        if mmap not in MODES:
            raise ValueError(f"mt.load: mmap must be False, True (read-only) or 'c' (copy-on-write), "
                             f"got {mmap!r}")
        return load_mapped(f, MODES[mmap])

    with np.load(f, allow_pickle=False) as npz:
        return {key: tensor(npz[key]) for key in npz.files}
