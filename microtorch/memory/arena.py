"""Arena: a bump allocator — allocation is "round the top up to the alignment, move it".

Blocks are carved one after another from a chunk of backing memory. Nothing is freed
one by one; ``reset()`` frees everything at once by moving the top back to the start.
That makes allocation a few integer operations and freeing free — the trade-off is that
everything in an arena shares one lifetime (a training step, a graph).

When a request does not fit, the arena *chains a new chunk* (growing total capacity by
``growth``, 1.5× by default) instead of moving the live blocks, so pointers into old
chunks stay valid. ``max_capacity`` bounds the growth: past it, :class:`OutOfMemoryError`.

After a reset every old block is stale: its bytes will be handed out again. A block (and
so a tensor) used after the reset that killed it raises instead of reading stale bytes.
"""
from __future__ import annotations

import time

import numpy as np

from .. import recording as _trace
from .block import AllocatorError, Block, OutOfMemoryError, align_up, aligned_buffer, register


class Arena:
    """A chained-chunk bump allocator over numpy byte buffers."""

    resets_under_users = True  # reset() can reclaim blocks that storages still use

    def __init__(self, capacity: int = 1 << 20, alignment: int = 64, growth: float = 1.5,
                 max_capacity: int | None = None, name: str = "arena"):
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"Arena alignment must be a power of two (1, 2, 4, ..., 64, ...), got {alignment}")
        if capacity <= 0:
            raise ValueError(f"Arena capacity must be positive, got {capacity}")
        if growth <= 1:
            raise ValueError(f"Arena growth factor must be > 1 (1.5 adds half the capacity), got {growth}")
        if max_capacity is not None and max_capacity < align_up(capacity, alignment):
            raise ValueError(f"max_capacity ({max_capacity}) is smaller than the initial capacity "
                             f"({capacity}, {align_up(capacity, alignment)} once rounded up to the alignment)")
        self.name, self.alignment, self.growth, self.max_capacity = name, alignment, growth, max_capacity
        self.chunks: list[np.ndarray] = [aligned_buffer(align_up(capacity, alignment), alignment)]
        self.generation = 0  # bumped by reset(): blocks of older generations are stale
        self._chunk = 0  # chunk the top is in
        self._top = 0  # next free byte in that chunk
        self._used_before = 0  # bytes of chunks before self._chunk (fully passed)
        self.live_blocks: dict[int, Block] = {}
        self.requested = 0  # bytes asked for by live blocks
        self.padding = 0  # bytes lost to alignment since the last reset
        self.high_water = 0
        self.growths = 0
        self.allocations = 0
        self.alloc_ns = 0
        self.resets = 0
        register(self)  # (may number the name: a trace tells allocators apart by name)
        _trace.emit("arena_chunk", arena=self.name, chunk=0, nbytes=self.chunks[0].nbytes, growth=False)

    # -- numbers ----------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return sum(c.nbytes for c in self.chunks)

    @property
    def used(self) -> int:
        """Bytes below the top (blocks + padding + chunk tails skipped when moving on)."""
        return self._used_before + self._top

    @property
    def utilization(self) -> float:
        """Fraction of the capacity handed out to blocks (padding not counted)."""
        return self.requested / self.capacity

    def stats(self) -> dict:
        return {"name": self.name, "capacity": self.capacity, "used": self.used,
                "requested": self.requested, "high_water": self.high_water,
                "utilization": self.utilization, "padding": self.padding, "growths": self.growths,
                "chunks": len(self.chunks), "allocations": self.allocations, "resets": self.resets,
                "live_blocks": len(self.live_blocks)}

    # -- allocating -------------------------------------------------------------------------
    def alloc(self, nbytes: int, tag: str = "") -> Block:
        """A block of ``nbytes`` at the next aligned offset; chains a chunk if none has room."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        t0 = time.perf_counter_ns()
        # Walk forward on local copies, so a request that ends in OutOfMemoryError leaves the
        # arena exactly as it was (the tails it would have skipped stay usable).
        index, top, before = self._chunk, self._top, self._used_before
        while True:
            chunk = self.chunks[index]
            start = align_up(top, self.alignment)
            if start + nbytes <= chunk.nbytes:
                break
            before += chunk.nbytes  # skip this chunk's tail: move on to the next chunk
            index, top = index + 1, 0
            if index == len(self.chunks):  # no chunk further on (after a reset there may be)
                self._grow(nbytes)
        self._chunk, self._used_before = index, before
        pad = start - top
        block = Block(self, self._chunk, start, nbytes, nbytes + pad, pad, tag,
                      chunk[start: start + nbytes], self.generation)
        self._top = start + nbytes
        self.padding += pad
        self.requested += nbytes
        self.live_blocks[block.id] = block
        used = before + start + nbytes  # = self.used, without the property call
        if used > self.high_water:
            self.high_water = used
        self.allocations += 1
        self.alloc_ns += time.perf_counter_ns() - t0
        rec = _trace.active  # the check inlined: an event's fields cost more than the allocation
        if rec is not None:
            rec.emit("alloc_block", allocator=self.name, block=block.id, chunk=block.chunk,
                     offset=start, nbytes=nbytes, size=block.size, padding=pad, tag=tag)
        return block

    def _grow(self, nbytes: int) -> None:
        """Chain a new chunk of ``growth − 1`` times the capacity (at least the request) at the end.

        Near ``max_capacity`` the chunk shrinks to the room that is left, as long as the request fits.
        """
        capacity = self.capacity
        need = align_up(nbytes, self.alignment)
        new = max(need, align_up(int(capacity * (self.growth - 1)), self.alignment))
        if self.max_capacity is not None and capacity + new > self.max_capacity:
            room = (self.max_capacity - capacity) & ~(self.alignment - 1)
            if room < need:
                raise OutOfMemoryError(
                    f"{self.name}: out of memory: requested {nbytes} bytes, used {self.used} of capacity "
                    f"{capacity} bytes, and a chunk of {need} more bytes would pass "
                    f"max_capacity={self.max_capacity}. "
                    "Raise max_capacity, allocate less per step, or reset() the arena more often.")
            new = room
        self.chunks.append(aligned_buffer(new, self.alignment))
        self.growths += 1
        _trace.emit("arena_chunk", arena=self.name, chunk=len(self.chunks) - 1, nbytes=new, growth=True)

    def free(self, block: Block) -> None:
        """Arenas free all at once; freeing one block only marks it dead (and catches misuse)."""
        if block.owner is not self:
            raise AllocatorError(f"{self.name}: {block!r} was not allocated by this arena (foreign block)")
        if block.generation != self.generation:
            return  # already freed by a reset; the tensor that held it just went away later
        if not block.live:
            raise AllocatorError(f"{self.name}: double free of {block!r}")
        block.live = False
        self.requested -= block.nbytes
        del self.live_blocks[block.id]
        rec = _trace.active
        if rec is not None:
            rec.emit("free_block", allocator=self.name, block=block.id)

    def check(self, block: Block) -> None:
        """Raise if ``block`` is stale (its arena was reset since it was handed out)."""
        if block.generation != self.generation:
            raise AllocatorError(
                f"use after reset: {block!r} lived in {self.name}, which was reset after the block was "
                "allocated, so its bytes now belong to something else. Keep what you need beyond the "
                "step as a copy (t.clone() outside the step scope, or .item() for numbers).")
        if not block.live:
            raise AllocatorError(f"use after free: {block!r} was freed")

    def reset(self) -> None:
        """Free every block at once: the top goes back to the start of the first chunk.

        Storages still using a block are marked stale, so every tensor viewing them raises
        a use-after-reset error when touched instead of reading bytes that are reused.
        """
        rec = _trace.active
        blocks, stale = [], []  # what the reset reclaimed, for the trace
        for block in self.live_blocks.values():
            block.live = False
            storage = block.user() if block.user is not None else None
            if storage is not None:
                storage.invalidate(f"its bytes lived in {self.name}, which was reset")
            if rec is not None:
                blocks.append(block.id)
                if storage is not None:
                    stale.append(storage.id)
        self.live_blocks.clear()
        self.generation += 1
        self._chunk = self._top = self._used_before = 0
        self.requested = self.padding = 0
        self.resets += 1
        if rec is not None:
            rec.emit("arena_reset", arena=self.name, generation=self.generation, blocks=blocks, stale=stale)

    def describe(self) -> dict:
        """This arena as a trace's ``baseline`` records it: its chunks' bytes, generation,
        resets, bytes used and padding (plain data, no references)."""
        return {"name": self.name, "kind": "arena", "chunks": [c.nbytes for c in self.chunks],
                "generation": self.generation, "resets": self.resets, "used": self.used,
                "padding": self.padding}

    def blocks_in_use(self) -> list[Block]:
        """The blocks handed out since the last reset and not yet given back."""
        return list(self.live_blocks.values())

    def __repr__(self) -> str:
        s = self.stats()
        return (f"Arena({self.name!r}: {s['used']}/{s['capacity']} B used in {s['chunks']} chunk(s), "
                f"{s['live_blocks']} live blocks, utilization {s['utilization']:.1%}, "
                f"high water {s['high_water']} B, {s['growths']} growths)")

