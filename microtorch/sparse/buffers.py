"""Where a sparse tensor's arrays live: refcounted storages from microtorch's allocators.

A sparse tensor is a few dense arrays — indices (int64) and values — and each is an
ordinary :class:`~microtorch.Tensor` over a refcounted storage, so it shows up in every
memory picture like any other tensor:

* sparse tensors you make (``mt.sparse_coo_tensor``, ``t.to_sparse()``, conversions) take
  blocks from the main pool (tag ``"tensor"``);
* sparse *gradients* (the indices and values backward makes for ``Embedding(sparse=True)``,
  and the buffers merging makes) take blocks from their own size-class pool,
  :func:`gradient_pool` (named ``"sparse grad pool"``, tag ``"gradient"``). A training step
  frees last step's gradient (``zero_grad()``) and backward asks for buffers of the same
  sizes again, so from the second step on every request is a reuse hit on that pool's free
  lists — no new memory (``gradient_pool().stats()["reuse_hits"]``; the pool picture shows it).

Inside ``mt.memory.use_heap()`` both are plain numpy arrays, as for every tensor.
"""
from __future__ import annotations

import math

import numpy as np

from ..memory import placement
from ..memory.pool import Pool
from ..memory.storage import Storage
from ..tensor_base import TensorBase as Tensor

_gradient_pool = Pool(name="sparse grad pool")


def gradient_pool() -> Pool:
    """The pool that serves sparse gradients' index and value buffers."""
    return _gradient_pool


def array_tensor(array: np.ndarray) -> Tensor:
    """A tensor over a copy of ``array`` in the main pool (a sparse tensor's own arrays)."""
    return Tensor._wrap(np.ascontiguousarray(array), tag="tensor")


def empty_gradient(shape: tuple[int, ...], dtype) -> Tensor:
    """An uninitialised tensor in the sparse gradient pool (filled with ``out=``)."""
    dtype = np.dtype(dtype)
    if placement.allocator_for("gradient") is None:
        return Tensor._empty(shape, dtype, "gradient")
    count = math.prod(shape)
    block = _gradient_pool.alloc(count * dtype.itemsize, "gradient")
    storage = Storage(np.frombuffer(block.memory, dtype, count), block, "gradient")
    return Tensor._over(storage.data.reshape(shape), storage)
