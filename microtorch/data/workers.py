"""Worker threads for the DataLoader: the next batches are gathered while this one trains.

``DataLoader(ds, batch_size, num_workers=k)`` hands the gathering of rows — numpy's
``take``, which lets go of the GIL while it copies — to ``k`` threads, ``prefetch_factor``
batches each ahead of the training loop. (PyTorch's workers are processes; threads suffice
here because the copying runs outside the GIL, and they share memory without pickling.)

Each worker writes its batch straight into a block of a pool shared by the workers, a
:class:`~microtorch.memory.pool.Pool` with thread caches (``thread_cache`` blocks per size
class and thread): a worker allocates from its own cache, and the training loop, which
frees the batch when it is done with it, returns the block to *its* cache — a cross-thread
free. The main thread wraps each gathered block in a storage (its refcount, its trace
events), so the engine's bookkeeping stays on one thread.
"""
from __future__ import annotations

import math
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..memory.pool import Pool
from ..memory.storage import Storage
from ..tensor import Tensor


class BatchWorkers:
    """Threads gathering batches of a TensorDataset's tensors into a thread-cached pool."""

    def __init__(self, tensors, num_workers: int, prefetch_factor: int = 2, thread_cache: int = 16):
        self.tensors = [t._data for t in tensors]
        self.num_workers, self.prefetch_factor = num_workers, prefetch_factor
        self.pool = Pool(name="loader pool", thread_cache=thread_cache)

    def gather(self, idx: np.ndarray) -> list:
        """In a worker thread: rows ``idx`` of every tensor, each copied into a pool block."""
        out = []
        for src in self.tensors:
            shape = (len(idx),) + src.shape[1:]
            count = math.prod(shape)
            block = self.pool.alloc(count * src.itemsize, "tensor")
            rows = np.frombuffer(block.memory, src.dtype, count).reshape(shape)
            np.take(src, idx, axis=0, out=rows)
            out.append((block, rows))
        return out

    @staticmethod
    def wrap(gathered: list) -> tuple:
        """In the training thread: each gathered block as a tensor over its own storage."""
        return tuple(Tensor._over(rows, Storage(rows.reshape(-1), block, "tensor")) for block, rows in gathered)

    def batches(self, index_batches):
        """The batches in order, each gathered ahead by a worker."""
        ahead = self.num_workers * self.prefetch_factor
        with ThreadPoolExecutor(self.num_workers, thread_name_prefix="microtorch-loader") as pool:
            pending, todo = deque(), iter(index_batches)
            for idx in todo:
                pending.append(pool.submit(self.gather, idx))
                if len(pending) >= ahead:
                    break
            while pending:
                gathered = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(self.gather, nxt))
                yield self.wrap(gathered)
