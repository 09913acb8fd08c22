"""Datasets and batching: ``TensorDataset`` and a seeded ``DataLoader``, as in ``torch.utils.data``."""
from __future__ import annotations

import numbers

import numpy as np

from ..creation import default_generator
from ..tensor import Tensor


class Dataset:
    """Anything with ``__len__`` and ``__getitem__(i)`` returning one example."""

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, i):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Examples are the i-th rows of the given tensors: ``ds[i] == (x[i], y[i])``."""

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset expects Tensors, got {type(t).__name__}")
            if t.ndim == 0:
                raise ValueError("TensorDataset: 0-d tensors have no rows to index")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(f"Size mismatch between tensors: TensorDataset needs the same first "
                             f"dimension in all of them, got {sizes}")
        self.tensors = tuple(tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, i):
        return tuple(t[i] for t in self.tensors)


class DataLoader:
    """Batches of a dataset: ``for x, y in DataLoader(ds, batch_size=32, shuffle=True): ...``

    ``shuffle=True`` draws a new order every epoch from ``generator`` (an ``mt.Generator``;
    default: the global one, so ``mt.manual_seed`` makes it reproducible). ``drop_last``
    drops a final batch smaller than ``batch_size``. A :class:`TensorDataset` is batched by
    one integer-array index per tensor; other datasets by stacking their examples.

    ``zero_copy=True`` (microtorch only; needs ``shuffle=False`` and a :class:`TensorDataset`):
    each batch is a *view* of rows ``[i, i + batch_size)`` of the dataset's tensors instead of
    a copy, so batches of a memory-mapped dataset are the file's pages. A write into such a
    batch writes into the dataset (their version counters are shared, as for any view).

    ``num_workers=k`` gathers batches of a :class:`TensorDataset` in ``k`` threads,
    ``prefetch_factor`` batches each ahead, into a pool with per-thread caches
    (:mod:`microtorch.data.workers`; PyTorch uses processes, see there why threads do here).
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 generator=None, zero_copy: bool = False, num_workers: int = 0, prefetch_factor: int = 2):
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if zero_copy and (shuffle or not isinstance(dataset, TensorDataset)):
            raise ValueError("zero_copy=True batches are views of consecutive rows: it needs shuffle=False "
                             "and a TensorDataset (shuffled rows must be gathered, which is a copy)")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last, self.generator = bool(shuffle), bool(drop_last), generator
        self.zero_copy = bool(zero_copy)
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError(f"num_workers option should be non-negative; use num_workers=0 to disable "
                             f"multiprocessing. (got {num_workers!r})")
        if num_workers and (zero_copy or not isinstance(dataset, TensorDataset)):
            raise ValueError("num_workers > 0 gathers batches of a TensorDataset in threads; it cannot be "
                             "combined with zero_copy=True (views need no gathering) or other datasets")
        self.num_workers, self.prefetch_factor = int(num_workers), int(prefetch_factor)
        self.workers = None

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = ((self.generator or default_generator).rng.permutation(n) if self.shuffle
                 else np.arange(n))
        batches = (order[start:start + self.batch_size] for start in range(0, len(self) * self.batch_size,
                                                                           self.batch_size))
        if self.num_workers:
            from .workers import BatchWorkers

            if self.workers is None:  # one pool for the loader's life: its blocks are reused
                self.workers = BatchWorkers(self.dataset.tensors, self.num_workers, self.prefetch_factor)
            yield from self.workers.batches(batches)
            return
        for idx in batches:
            yield self._batch(idx)

    def _batch(self, idx: np.ndarray):
        if self.zero_copy:
            return tuple(Tensor._view(t._data[idx[0]: idx[-1] + 1], t) for t in self.dataset.tensors)
        if isinstance(self.dataset, TensorDataset):
            return tuple(_rows(t, idx) for t in self.dataset.tensors)
        return _collate([self.dataset[int(i)] for i in idx])


def _rows(t: Tensor, idx: np.ndarray) -> Tensor:
    """``t[idx]`` as a new tensor that is not part of any graph (data, not a computation)."""
    return Tensor._wrap(t._data[idx], tag="tensor")


def _collate(examples: list):
    """Stack a list of examples (tensors, numbers, or tuples of them) into batch tensors."""
    from ..creation import tensor
    from ..functions import stack

    first = examples[0]
    if isinstance(first, (tuple, list)):
        return tuple(_collate([e[k] for e in examples]) for k in range(len(first)))
    if isinstance(first, Tensor):
        return stack(examples)
    return tensor(np.asarray(examples))
