"""Pool: a size-class allocator — round each request up to a class, reuse freed blocks.

Requests from ``min_block`` (64 B) to ``max_block`` (1 MiB) are rounded up to one of a
fixed set of *size classes*; each class keeps a free list of blocks of exactly its size,
carved from slabs of backing memory. A freed block goes back on its class's free list and
the next request of that class reuses it — no new memory, no page faults.

**Class spacing and the fragmentation bound.** Between 2ᵏ and 2ᵏ⁺¹ there are
``classes_per_doubling`` = m = 8 classes, spaced 2ᵏ/m apart (64, 72, 80, …, 120, 128, 144, …).
A request of n bytes lands in the smallest class c ≥ n; the class below is c − 2ᵏ/m < n,
so the waste c − n < 2ᵏ/m, and since c > 2ᵏ the wasted fraction is below 1/(m + 1):
*internal fragmentation < 1/9 ≈ 11.1 % ≤ 12.5 %* for every request from 64 B to 1 MiB
(the ≤ 12.5 % target, tcmalloc's figure). With jemalloc's m = 4 classes per doubling the same argument gives
1/5 = 20 %. Requests under 64 B get a 64-byte block (one cache line), so the bound is
stated from 64 B up. Slabs are 64-byte aligned; blocks inside them sit at multiples of
their class size, which is always a multiple of 8 — enough for any dtype.

Requests above ``max_block`` are served directly — one buffer each, returned on free.

**Not PyTorch's caching allocator.** PyTorch's CUDA caching allocator is a different design:
it rounds requests up to multiples of 512 B, caches freed blocks in a small-block pool
(≤ 1 MB) and a large-block pool, serves a request from the best-fitting cached block,
splits a block larger than needed and coalesces a freed block with its free neighbours.
This pool has fixed classes instead: no search, no splitting, no merging, and a bound on
the bytes rounding can waste.

**Epoch-based deferred release.** With ``defer_epochs=k`` a freed block is held back until
``advance_epoch()`` has been called k times, so code still reading it in the current
epoch (an in-flight step, another thread's reader) never sees it reused underneath.

**Threads.** A pool is single-threaded by default (no lock). ``Pool(thread_cache=k)`` makes it
safe to share between threads: its free lists are guarded by a lock, and each thread keeps
up to ``k`` free blocks per size class of its own, so most allocations take no lock
(:mod:`microtorch.memory.thread_cache`; ``thread_cache=0``: a lock on every call).
"""
from __future__ import annotations

import bisect
from time import perf_counter_ns

import numpy as np

from .. import recording as _trace
from .block import AllocatorError, Block, aligned_buffer, check_return, register
from .thread_cache import ThreadCaches

SLAB_BYTES = 64 * 1024  # each class carves blocks from slabs of at least this many bytes
_SMALL = 4096  # requests up to this size find their class in a lookup table


def size_classes(min_block: int = 64, max_block: int = 1 << 20, per_doubling: int = 8) -> list[int]:
    """The class sizes: ``per_doubling`` evenly spaced classes in each [2ᵏ, 2ᵏ⁺¹)."""
    if min_block & (min_block - 1) or max_block & (max_block - 1):
        raise ValueError("min_block and max_block must be powers of two")
    if per_doubling <= 0 or per_doubling & (per_doubling - 1) or per_doubling > min_block:
        raise ValueError("per_doubling must be a power of two no larger than min_block")
    classes, size = [], min_block
    while size < max_block:
        step = size // per_doubling
        classes.extend(size + i * step for i in range(per_doubling))
        size *= 2
    classes.append(max_block)
    return classes


class Pool:
    """A size-class pool with per-class free lists, direct large blocks, and deferred release."""

    resets_under_users = False  # a pool block is reclaimed only by free(), never under a user

    def __init__(self, min_block: int = 64, max_block: int = 1 << 20, classes_per_doubling: int = 8,
                 defer_epochs: int = 0, alignment: int = 64, name: str = "pool",
                 thread_cache: int | None = None):
        if defer_epochs < 0:
            raise ValueError(f"defer_epochs must be ≥ 0, got {defer_epochs}")
        self.name, self.alignment, self.defer_epochs = name, alignment, defer_epochs
        self.min_block, self.max_block = min_block, max_block
        self.classes = size_classes(min_block, max_block, classes_per_doubling)
        self.slabs: list[list[np.ndarray]] = [[] for _ in self.classes]
        self.free_lists: list[list[Block]] = [[] for _ in self.classes]
        self.held: list[tuple[int, Block]] = []  # (epoch freed, block) waiting for release
        self._carve: list[int] = [0] * len(self.classes)  # next unused offset in the class's last slab
        self.epoch = 0
        self.live: dict[int, Block] = {}  # (``requested`` and ``in_use`` are counted from it when asked)
        self.reserved = 0  # bytes live blocks occupy (class sizes, or exact for direct blocks)
        self.peak = 0
        self.allocations = self.reuse_hits = self.direct_allocations = 0
        self.direct_bytes = 0
        self.alloc_ns = 0
        # small requests are the most frequent: their class is one table lookup, not a search
        # (None past max_block: a pool with max_block < 4096 serves those requests directly)
        self._small = [bisect.bisect_left(self.classes, max(n, 1)) if n <= max_block else None
                       for n in range(_SMALL + 1)]
        self.threads = None if thread_cache is None else ThreadCaches(self, thread_cache)
        register(self)

    def size_class(self, nbytes: int) -> int | None:
        """Index of the class serving ``nbytes``, or None if it is served directly (too large)."""
        if nbytes <= _SMALL:
            return self._small[nbytes]
        if nbytes > self.max_block:
            return None
        return bisect.bisect_left(self.classes, nbytes)

    # -- allocating -------------------------------------------------------------------------
    def alloc(self, nbytes: int, tag: str = "") -> Block:
        if self.threads is not None:
            return self._alloc_threaded(nbytes, tag)
        t0 = perf_counter_ns()
        if 0 <= nbytes <= _SMALL:
            c = self._small[nbytes]
        elif nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        else:
            c = self.size_class(nbytes)
        reused = False
        if c is None:
            block = self._direct_block(nbytes, tag)
        elif free := self.free_lists[c]:
            old = free.pop()
            # Same bytes, new handle: the old Block stays dead, so whoever still holds it
            # gets "use after free" / "double free" instead of the new owner's bytes.
            block = Block(self, old.chunk, old.offset, nbytes, old.size, 0, tag, old.memory, 0, c)
            self.reuse_hits += 1
            reused = True
        else:
            block = self._carve_block(c, self.classes[c], nbytes, tag)
        self.live[block.id] = block
        self.reserved = reserved = self.reserved + block.size
        if reserved > self.peak:
            self.peak = reserved
        self.allocations += 1
        self.alloc_ns += perf_counter_ns() - t0
        if _trace.active is not None:
            self._emit_alloc(block, reused)
        return block

    def _emit_alloc(self, block: Block, reused: bool) -> None:
        c = block.size_class
        fields = {}
        if self.threads is not None:
            fields["thread"], fields["cached"] = self.threads.mine()
        _trace.active.emit("alloc_block", allocator=self.name, block=block.id, size_class=c,
                           chunk=block.chunk, offset=block.offset, nbytes=block.nbytes, size=block.size,
                           tag=block.tag, reused=reused,
                           slab_bytes=block.size if c is None else self.slabs[c][block.chunk].nbytes, **fields)

    def _alloc_threaded(self, nbytes: int, tag: str) -> Block:
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        block, reused = self.threads.alloc(nbytes, tag)
        if _trace.active is not None:
            self._emit_alloc(block, reused)
        return block

    def _direct_block(self, nbytes: int, tag: str) -> Block:
        """A block above ``max_block``: one buffer of its own, returned to the system on free."""
        self.direct_allocations += 1
        self.direct_bytes += nbytes
        return Block(self, -1, 0, nbytes, nbytes, 0, tag, aligned_buffer(nbytes, self.alignment))

    def _carve_block(self, c: int, size: int, nbytes: int, tag: str) -> Block:
        slabs = self.slabs[c]
        if not slabs or self._carve[c] + size > slabs[-1].nbytes:
            slabs.append(aligned_buffer(max(size, SLAB_BYTES // size * size), self.alignment))
            self._carve[c] = 0
        offset = self._carve[c]
        self._carve[c] += size
        slab = slabs[-1]
        return Block(self, len(slabs) - 1, offset, nbytes, size, 0, tag, slab[offset: offset + size],
                     size_class=c)

    def free(self, block: Block) -> None:
        """Give ``block`` back: onto its class's free list now, or after ``defer_epochs`` epochs."""
        if self.threads is not None:
            self.threads.free(block)
            if _trace.active is not None:
                thread, cached = self.threads.mine()
                _trace.active.emit("free_block", allocator=self.name, block=block.id,
                                   held=bool(self.defer_epochs) and block.size_class is not None,
                                   thread=thread, cached=cached)
            return
        check_return(self, block, "pool")
        block.live = False
        del self.live[block.id]
        self._release(block)
        rec = _trace.active
        if rec is not None:
            rec.emit("free_block", allocator=self.name, block=block.id,
                     held=bool(self.defer_epochs) and block.size_class is not None)

    def _release(self, block: Block) -> None:
        """A dead block's bytes back: to the system (direct), the held list, or its free list."""
        self.reserved -= block.size
        c = block.size_class
        if c is None:
            self.direct_bytes -= block.nbytes
            block.memory = None  # a direct block goes straight back to the system
        elif self.defer_epochs:
            self.held.append((self.epoch, block))
        else:
            self.free_lists[c].append(block)

    def advance_epoch(self) -> int:
        """Start a new epoch; blocks freed ``defer_epochs`` epochs ago become reusable."""
        self.epoch += 1
        keep, released = [], []
        for freed_at, block in self.held:
            if self.epoch - freed_at >= self.defer_epochs:
                self.free_lists[block.size_class].append(block)
                released.append(block.id)
            else:
                keep.append((freed_at, block))
        self.held = keep
        _trace.emit("pool_epoch", allocator=self.name, epoch=self.epoch, held=len(keep), released=released)
        return self.epoch

    def check(self, block: Block) -> None:
        if not block.live:
            raise AllocatorError(f"use after free: {block!r} was returned to {self.name}")

    # -- numbers ----------------------------------------------------------------------------
    @property
    def requested(self) -> int:
        """Bytes asked for by live blocks."""
        return sum(b.nbytes for b in self.live.values())

    @property
    def in_use(self) -> list[int]:
        """Live blocks per size class."""
        counts = [0] * len(self.classes)
        for b in self.live.values():
            if b.size_class is not None:
                counts[b.size_class] += 1
        return counts

    @property
    def in_use_reserved(self) -> int:
        """Bytes live blocks occupy (``reserved`` less the blocks waiting in thread caches)."""
        return self.reserved - (self.threads.cached_bytes() if self.threads is not None else 0)

    @property
    def fragmentation(self) -> float:
        """Internal fragmentation of live blocks: 1 − requested / reserved."""
        reserved = self.in_use_reserved
        return 1 - self.requested / reserved if reserved else 0.0

    def class_table(self) -> list[dict]:
        """Per size class: blocks in use, on the free list, held back, and bytes reserved in slabs."""
        held, in_use = [0] * len(self.classes), self.in_use
        for _, b in self.held:
            held[b.size_class] += 1
        return [{"size": size, "in_use": in_use[c], "free": len(self.free_lists[c]),
                 "held": held[c], "slab_bytes": sum(s.nbytes for s in self.slabs[c])}
                for c, size in enumerate(self.classes)
                if self.slabs[c]]

    def stats(self) -> dict:
        """The pool's numbers; with thread caches also theirs (``reserved`` then counts live
        blocks only, ``cached_bytes`` the blocks waiting in thread caches)."""
        out = {"name": self.name, "requested": self.requested, "reserved": self.in_use_reserved,
               "fragmentation": self.fragmentation, "peak": self.peak,
               "allocations": self.allocations, "reuse_hits": self.reuse_hits,
               "direct_allocations": self.direct_allocations, "direct_bytes": self.direct_bytes,
               "slab_bytes": sum(s.nbytes for slabs in self.slabs for s in slabs),
               "live_blocks": len(self.live), "held_blocks": len(self.held), "epoch": self.epoch}
        if self.threads is not None:
            t = self.threads.stats()
            out["allocations"] += t.pop("thread_allocations")
            out["reuse_hits"] += t.pop("reused")
            out.update(t)
        return out

    def describe(self) -> dict:
        """This pool as a trace's ``baseline`` records it: epoch, each size class in use (its
        slabs' bytes, free blocks) and the blocks held back (plain data, no references)."""
        return {"name": self.name, "kind": "pool", "epoch": self.epoch, "defer_epochs": self.defer_epochs,
                "classes": [{"size_class": c, "size": size, "slabs": [s.nbytes for s in self.slabs[c]],
                             "free": len(self.free_lists[c])}
                            for c, size in enumerate(self.classes) if self.slabs[c]],
                "held": [[b.id, b.size_class] for _, b in self.held]}

    def blocks_in_use(self) -> list[Block]:
        """The blocks handed out and not yet given back."""
        return list(self.live.values())

    def __repr__(self) -> str:
        s = self.stats()
        return (f"Pool({self.name!r}: {s['live_blocks']} live blocks, {s['reserved']} B reserved for "
                f"{s['requested']} B requested (fragmentation {s['fragmentation']:.1%}), "
                f"{s['reuse_hits']} reuses, {s['direct_allocations']} direct)")

