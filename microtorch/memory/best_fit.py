"""BestFit: an allocator for shapes that keep changing — split big free blocks, merge neighbours.

A size-class pool reuses a freed block only for a request of the *same class*. When the
shapes change from step to step (a batch of sequences of random lengths), every step asks
for slightly different sizes, and the blocks freed by the last step sit on free lists no
request of this step maps to: the pool carves new slabs instead. A *best-fit* allocator
keeps one address space per heap instead:

* free blocks are kept ordered by size (the article suggests a red-black tree; a sorted list
  with binary search is the same idea in Python), and a request of n bytes (rounded up to
  ``round_to``) takes the *smallest free block that fits*, splitting off the rest as a new
  free block when at least ``round_to`` bytes remain;
* a freed block is *coalesced* with the free blocks right before and after it, so free space
  freed by one step serves the next step's differently sized requests.

This is, in outline, PyTorch's CUDA caching allocator: requests rounded to 512 B, best fit
among cached blocks, split, coalesce on free; small (≤ 1 MiB) and large requests in separate
pools. Heaps are ``heap_bytes`` (a request larger than that gets a heap of its own size).
"""
from __future__ import annotations

import bisect

from .. import recording as _trace
from .block import AllocatorError, Block, align_up, aligned_buffer, check_return


class BestFit:
    """Best-fit allocation with splitting and coalescing over heaps of backing memory."""

    resets_under_users = False

    def __init__(self, heap_bytes: int = 1 << 20, round_to: int = 512, alignment: int = 64,
                 name: str = "best fit"):
        if round_to <= 0 or round_to & (round_to - 1):
            raise ValueError(f"BestFit round_to must be a power of two, got {round_to}")
        if heap_bytes < round_to:
            raise ValueError(f"heap_bytes ({heap_bytes}) must be at least round_to ({round_to})")
        self.name, self.heap_bytes, self.round_to, self.alignment = name, heap_bytes, round_to, alignment
        self.heaps: list = []
        self._by_size: list[tuple[int, int, int]] = []  # free blocks as (size, heap, offset), sorted
        self._starts: dict[tuple[int, int], int] = {}  # (heap, offset) -> size of a free block there
        self._ends: dict[tuple[int, int], int] = {}  # (heap, end offset) -> start of that free block
        self.live: dict[int, Block] = {}
        self.reserved = self.peak = 0
        self.allocations = self.splits = self.merges = self.reuse_hits = 0

    # -- the free-block index ----------------------------------------------------------------
    def _add_free(self, heap: int, offset: int, size: int) -> None:
        bisect.insort(self._by_size, (size, heap, offset))
        self._starts[heap, offset] = size
        self._ends[heap, offset + size] = offset

    def _remove_free(self, heap: int, offset: int, size: int) -> None:
        del self._by_size[bisect.bisect_left(self._by_size, (size, heap, offset))]
        del self._starts[heap, offset]
        del self._ends[heap, offset + size]

    # -- allocating -------------------------------------------------------------------------
    def alloc(self, nbytes: int, tag: str = "") -> Block:
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        size = align_up(max(nbytes, 1), self.round_to)
        i = bisect.bisect_left(self._by_size, (size, -1, -1))  # the smallest free block ≥ size
        if i < len(self._by_size):
            free_size, heap, offset = self._by_size[i]
            self._remove_free(heap, offset, free_size)
            self.reuse_hits += 1
        else:
            heap, offset, free_size = len(self.heaps), 0, max(self.heap_bytes, size)
            self.heaps.append(aligned_buffer(free_size, self.alignment))
        if free_size - size >= self.round_to:  # split: the rest stays free
            self._add_free(heap, offset + size, free_size - size)
            self.splits += 1
        else:
            size = free_size
        block = Block(self, heap, offset, nbytes, size, 0, tag, self.heaps[heap][offset: offset + size])
        self.live[block.id] = block
        self.reserved += size
        self.peak = max(self.peak, self.reserved)
        self.allocations += 1
        _trace.emit("fit_alloc", allocator=self.name, block=block.id, heap=heap, offset=offset,
                    nbytes=nbytes, size=size, tag=tag)
        return block

    def free(self, block: Block) -> None:
        """Give ``block`` back and merge it with free neighbours on either side."""
        check_return(self, block, "best-fit allocator")
        block.live = False
        del self.live[block.id]
        self.reserved -= block.size
        heap, offset, size = block.chunk, block.offset, block.size
        before = self._ends.get((heap, offset))
        if before is not None:  # a free block ends where this one starts
            self._remove_free(heap, before, offset - before)
            size, offset = size + offset - before, before
            self.merges += 1
        after = self._starts.get((heap, offset + size))
        if after is not None:  # a free block starts where this one ends
            self._remove_free(heap, offset + size, after)
            size += after
            self.merges += 1
        self._add_free(heap, offset, size)
        _trace.emit("fit_free", allocator=self.name, block=block.id, heap=heap, offset=offset, size=size)

    def check(self, block: Block) -> None:
        if not block.live:
            raise AllocatorError(f"use after free: {block!r} was returned to {self.name}")

    # -- numbers ----------------------------------------------------------------------------
    @property
    def requested(self) -> int:
        return sum(b.nbytes for b in self.live.values())

    def free_blocks(self) -> list[tuple[int, int, int]]:
        """Every free block as (heap, offset, size), in address order."""
        return sorted((h, o, s) for (h, o), s in self._starts.items())

    def stats(self) -> dict:
        free = [s for s, _, _ in self._by_size]
        requested, heap_bytes = self.requested, sum(h.nbytes for h in self.heaps)
        return {"name": self.name, "requested": requested, "reserved": self.reserved, "peak": self.peak,
                "heap_bytes": heap_bytes, "backing_bytes": heap_bytes, "free_bytes": sum(free), "largest_free": max(free, default=0),
                "internal_fragmentation": 1 - requested / self.reserved if self.reserved else 0.0,
                "external_fragmentation": 1 - max(free, default=0) / sum(free) if free else 0.0,
                "allocations": self.allocations, "reuse_hits": self.reuse_hits, "splits": self.splits,
                "merges": self.merges, "live_blocks": len(self.live)}
