"""Block: one allocation handed out by an allocator — where its bytes are and how many.

Both allocators (:class:`~microtorch.memory.arena.Arena`, :class:`~microtorch.memory.pool.Pool`)
hand out blocks over real backing memory (numpy ``uint8`` buffers). A block knows its
owner, its chunk and byte offset there, the bytes asked for (``nbytes``), the bytes it
occupies (``size`` ≥ ``nbytes``: alignment padding or size-class rounding), and a tag
naming what it holds ("activation", "gradient", "node", ...). ``block.array(dtype, n)``
is a typed numpy view of its bytes — this is where tensors' numbers live.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

_block_ids = itertools.count(1)
_allocator_ids = itertools.count(1)

#: Every live allocator (pools and arenas), in creation order, held weakly: a trace's
#: ``baseline`` event describes their blocks when recording starts.
allocators: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()


def register(allocator) -> None:
    """Called by each allocator's ``__init__``: make it visible to trace baselines.

    A trace names allocators by ``name``, so a name already used by a live allocator gets
    a number: a second ``Pool()`` next to the engine's ``"pool"`` is ``"pool #2"``.
    """
    taken = {a.name for a in list(allocators.values())}
    if allocator.name in taken:
        n = 2
        while f"{allocator.name} #{n}" in taken:
            n += 1
        allocator.name = f"{allocator.name} #{n}"
    allocators[next(_allocator_ids)] = allocator


class AllocatorError(RuntimeError):
    """Misuse of an allocator: double free, a foreign block, use after reset, out of memory."""


class OutOfMemoryError(AllocatorError):
    """An allocator hit its configured maximum capacity."""


class Block:
    __slots__ = ("owner", "chunk", "offset", "nbytes", "size", "padding", "tag", "id", "generation",
                 "live", "memory", "size_class", "user", "thread")

    def __init__(self, owner, chunk: int, offset: int, nbytes: int, size: int, padding: int, tag: str,
                 memory: np.ndarray, generation: int = 0, size_class: int | None = None):
        self.owner, self.chunk, self.offset = owner, chunk, offset
        self.nbytes, self.size, self.padding, self.tag = nbytes, size, padding, tag
        self.memory, self.generation, self.size_class = memory, generation, size_class
        self.id = next(_block_ids)
        self.live = True
        self.user = None  # weakref to the Storage using these bytes, if any
        self.thread = None  # the thread that allocated it (pools with thread caches)

    def array(self, dtype, count: int | None = None) -> np.ndarray:
        """The block's bytes as a flat array of ``dtype`` (``count`` elements, default: all that fit)."""
        self.owner.check(self)
        dtype = np.dtype(dtype)
        n = self.nbytes // dtype.itemsize if count is None else count
        if n < 0 or n * dtype.itemsize > self.nbytes:
            raise ValueError(f"{n} elements of {dtype} need {n * dtype.itemsize} bytes; {self!r} holds "
                             f"{self.nbytes}")
        return self.memory[: n * dtype.itemsize].view(dtype)

    def __repr__(self) -> str:
        state = "live" if self.live else "dead"
        return (f"<Block #{self.id} {self.tag or 'untagged'}: {self.nbytes} B at chunk {self.chunk} "
                f"+{self.offset} (occupies {self.size} B), {state}>")


def check_return(allocator, block: "Block", what: str) -> None:
    """Refuse a block given back to ``allocator`` that it did not hand out, or that is already
    back (every allocator's ``free`` starts here; ``what`` names the kind of allocator)."""
    if block.owner is not allocator:
        raise AllocatorError(f"{allocator.name}: {block!r} was not allocated by this {what} (foreign block)")
    if not block.live:
        raise AllocatorError(f"{allocator.name}: double free of {block!r}")


def aligned_buffer(nbytes: int, alignment: int) -> np.ndarray:
    """A ``uint8`` buffer of ``nbytes`` whose first byte sits at a multiple of ``alignment``."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    shift = (-raw.ctypes.data) % alignment
    return raw[shift: shift + nbytes]


def align_up(n: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` (a power of two) that is ≥ n: (n + a − 1) & ~(a − 1)."""
    return (n + alignment - 1) & ~(alignment - 1)
