"""Buddy: a power-of-two allocator that splits blocks in halves and merges freed halves back.

The backing memory comes in *heaps* of ``heap_bytes`` = 2ᴷ bytes. A request of n bytes gets
a block of order k, 2ᵏ bytes, the smallest power of two ≥ max(n, ``min_block``):

* **alloc** — take a free block of order k; if there is none, take the smallest free block of
  a higher order j and *split* it: each split halves a block of order j into two *buddies* of
  order j − 1, keeps one, puts the other on the free list of order j − 1, until order k.
* **free** — a block of order k at offset o has its buddy at ``o XOR 2ᵏ`` (the other half of
  the block it was split from). If that buddy is free too, the two *merge* back into the
  block of order k + 1 at ``min(o, buddy)``; repeat upward. So free space never stays
  chopped into pieces that could be one block again.

The numbers to watch: *internal fragmentation* is below 50 % (a request just above 2ᵏ⁻¹
gets 2ᵏ), far worse than the size-class pool's < 1/9; in exchange *external fragmentation*
(free bytes that no single large request can use) is undone by merging, which a pool's
per-class free lists never do. ``stats()`` reports both: internal = 1 − requested/reserved,
external = 1 − (largest free block)/(free bytes).

Requests above ``heap_bytes`` are served directly, one buffer each (as the pool does above
its ``max_block``). A Buddy is not one of the engine's placements: use it directly, or feed it
the allocations of a recorded step with :func:`microtorch.memory.workload.replay_into` to
compare it with the pool on the same requests. With a recorder active, ``buddy_alloc`` / ``buddy_free`` events carry the
splits and merges, so ``mt.viz.buddy`` can draw the tree at any step.
"""
from __future__ import annotations

from .. import recording as _trace
from .block import AllocatorError, Block, aligned_buffer, check_return


class Buddy:
    """A binary buddy allocator over heaps of ``heap_bytes`` (a power of two) bytes each."""

    resets_under_users = False  # blocks are reclaimed only by free()

    def __init__(self, heap_bytes: int = 1 << 20, min_block: int = 64, alignment: int = 64,
                 name: str = "buddy"):
        for what, v in (("heap_bytes", heap_bytes), ("min_block", min_block), ("alignment", alignment)):
            if v <= 0 or v & (v - 1):
                raise ValueError(f"Buddy {what} must be a power of two, got {v}")
        if min_block > heap_bytes:
            raise ValueError(f"min_block ({min_block}) is larger than heap_bytes ({heap_bytes})")
        self.name, self.alignment = name, alignment
        self.heap_bytes, self.min_block = heap_bytes, min_block
        self.min_order, self.max_order = min_block.bit_length() - 1, heap_bytes.bit_length() - 1
        self.heaps: list = []
        # free[k] = set of (heap, offset) of free blocks of order k
        self.free_sets: dict[int, set[tuple[int, int]]] = {k: set() for k in self.orders}
        self.live: dict[int, Block] = {}
        self.reserved = self.peak = 0
        self.allocations = self.splits = self.merges = self.direct_allocations = 0

    @property
    def orders(self) -> range:
        return range(self.min_order, self.max_order + 1)

    def order_for(self, nbytes: int) -> int | None:
        """The order k of the block serving ``nbytes`` (2ᵏ ≥ nbytes), or None if served directly."""
        if nbytes > self.heap_bytes:
            return None
        return max(self.min_order, (max(nbytes, 1) - 1).bit_length())

    # -- allocating -------------------------------------------------------------------------
    def alloc(self, nbytes: int, tag: str = "") -> Block:
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        k = self.order_for(nbytes)
        splits: list[list[int]] = []
        if k is None:
            block = Block(self, -1, 0, nbytes, nbytes, 0, tag, aligned_buffer(nbytes, self.alignment))
            self.direct_allocations += 1
        else:
            j = next((j for j in range(k, self.max_order + 1) if self.free_sets[j]), None)
            if j is None:  # no free block big enough anywhere: a new heap, free at the top order
                self.heaps.append(aligned_buffer(self.heap_bytes, self.alignment))
                j = self.max_order
                self.free_sets[j].add((len(self.heaps) - 1, 0))
            heap, offset = min(self.free_sets[j])  # lowest address first: keeps the picture tidy
            self.free_sets[j].remove((heap, offset))
            while j > k:  # split: keep the lower half, free the upper half (its buddy)
                j -= 1
                self.free_sets[j].add((heap, offset + (1 << j)))
                splits.append([offset, j + 1])
            self.splits += len(splits)
            size = 1 << k
            block = Block(self, heap, offset, nbytes, size, 0, tag,
                          self.heaps[heap][offset: offset + size], size_class=k)
        self.live[block.id] = block
        self.reserved += block.size
        self.peak = max(self.peak, self.reserved)
        self.allocations += 1
        if _trace.active is not None:
            _trace.active.emit("buddy_alloc", allocator=self.name, block=block.id, heap=block.chunk,
                               offset=block.offset, order=k, nbytes=nbytes, size=block.size, tag=tag,
                               splits=splits, heaps=len(self.heaps), heap_bytes=self.heap_bytes,
                               min_order=self.min_order)
        return block

    def free(self, block: Block) -> None:
        """Give ``block`` back, merging it with its free buddy as far up as it goes."""
        check_return(self, block, "buddy allocator")
        block.live = False
        del self.live[block.id]
        self.reserved -= block.size
        merges: list[list[int]] = []
        k = block.size_class
        if k is None:
            block.memory = None
        else:
            heap, offset = block.chunk, block.offset
            while k < self.max_order and (heap, offset ^ (1 << k)) in self.free_sets[k]:
                self.free_sets[k].remove((heap, offset ^ (1 << k)))
                offset &= ~(1 << k)  # the merged block starts at the lower buddy
                k += 1
                merges.append([offset, k])
            self.free_sets[k].add((heap, offset))
            self.merges += len(merges)
        if _trace.active is not None:
            _trace.active.emit("buddy_free", allocator=self.name, block=block.id, merges=merges)

    def check(self, block: Block) -> None:
        if not block.live:
            raise AllocatorError(f"use after free: {block!r} was returned to {self.name}")

    # -- numbers ----------------------------------------------------------------------------
    @property
    def requested(self) -> int:
        return sum(b.nbytes for b in self.live.values())

    def free_blocks(self) -> list[tuple[int, int, int]]:
        """Every free block as (heap, offset, order), in address order."""
        return sorted((h, o, k) for k, s in self.free_sets.items() for h, o in s)

    def stats(self) -> dict:
        free = [1 << k for _, _, k in self.free_blocks()]
        free_bytes = sum(free)
        requested = self.requested
        return {"name": self.name, "requested": requested, "reserved": self.reserved, "peak": self.peak,
                "heap_bytes": len(self.heaps) * self.heap_bytes, "free_bytes": free_bytes,
                "backing_bytes": len(self.heaps) * self.heap_bytes
                + sum(b.size for b in self.live.values() if b.size_class is None),
                "largest_free": max(free, default=0),
                "internal_fragmentation": 1 - requested / self.reserved if self.reserved else 0.0,
                "external_fragmentation": 1 - max(free, default=0) / free_bytes if free_bytes else 0.0,
                "allocations": self.allocations, "splits": self.splits, "merges": self.merges,
                "direct_allocations": self.direct_allocations, "live_blocks": len(self.live)}

    def __repr__(self) -> str:
        s = self.stats()
        return (f"Buddy({self.name!r}: {s['live_blocks']} live blocks, {s['reserved']} B reserved for "
                f"{s['requested']} B requested, {len(self.heaps)} heap(s) of {self.heap_bytes} B, "
                f"{s['splits']} splits, {s['merges']} merges)")
