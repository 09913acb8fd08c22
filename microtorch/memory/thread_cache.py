"""Thread-local caches for the pool: most allocations take no lock.

With several threads allocating from one :class:`~microtorch.memory.pool.Pool`, its free
lists must be guarded by a lock — and a lock taken on every allocation is a point where
threads queue. The answer of tcmalloc and of the AI-compiler article: each thread keeps a
few free blocks of each size class for itself.

* **alloc** — take a block from this thread's cache of the class: no lock. If the cache is
  empty, take the lock once: one block for the caller and a batch of ``batch`` more into the
  cache (from the central free list, or carved from a slab).
* **free** — put the block in *this* thread's cache (whichever thread allocated it: a block
  freed by another thread is a *cross-thread free*, and simply joins the freeing thread's
  cache). If the cache holds more than ``capacity`` blocks of the class, take the lock once
  and *flush* ``batch`` of them back to the central free list.

So with caches of ``capacity`` blocks, at most one allocation in ``batch`` takes the lock in
a steady state; ``Pool(thread_cache=0)`` takes it on every allocation and free — the
baseline to compare with. Blocks in a thread's cache are reserved from the pool's point of
view but in use by nobody: ``stats()`` reports them as ``cached_blocks``/``cached_bytes``,
and :meth:`ThreadCaches.flush_all` returns every cache to the central lists (deferred
release, ``defer_epochs``, bypasses the caches and goes to the central held list).

Large (direct) blocks never enter a cache. Counters that every allocation touches are kept
per thread and summed when asked (``stats()``), so the fast path writes nothing shared but
the pool's ``live`` dictionary (one item assignment: atomic under CPython's GIL).
"""
from __future__ import annotations

import threading

from .. import recording as _trace
from .block import Block, check_return


class _Cache:
    """One thread's cache: free blocks per size class, and that thread's counters."""

    __slots__ = ("thread", "blocks", "bytes", "allocations", "hits", "reused", "frees", "cross_frees")

    def __init__(self, n_classes: int):
        self.thread = threading.get_ident()
        self.blocks: list[list[Block]] = [[] for _ in range(n_classes)]
        self.bytes = 0  # bytes of the blocks in this cache
        self.allocations = self.hits = self.reused = self.frees = self.cross_frees = 0


class ThreadCaches:
    """The per-thread caches of one pool, and the lock guarding its central free lists."""

    def __init__(self, pool, capacity: int, batch: int | None = None):
        if capacity < 0:
            raise ValueError(f"thread_cache must be ≥ 0 blocks per size class, got {capacity}")
        self.pool, self.capacity = pool, capacity
        self.batch = max(1, capacity // 2) if batch is None else batch
        self.lock = threading.Lock()
        self.lock_acquisitions = 0  # counted while holding the lock
        self.caches: list[_Cache] = []  # every thread's cache (appended under the lock)
        self._local = threading.local()

    def _mine(self) -> _Cache:
        cache = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = _Cache(len(self.pool.classes))
            with self.lock:
                self.lock_acquisitions += 1
                self.caches.append(cache)
        return cache

    # -- alloc and free ----------------------------------------------------------------------
    def alloc(self, nbytes: int, tag: str) -> tuple[Block, bool]:
        """A block for ``nbytes``; and whether it reused freed bytes."""
        pool, cache = self.pool, self._mine()
        c = pool.size_class(nbytes)
        cache.allocations += 1
        if c is not None and cache.blocks[c]:
            cache.hits += 1
            old, reused = cache.blocks[c].pop(), True
            cache.bytes -= old.size
        else:
            with self.lock:
                self.lock_acquisitions += 1
                old, reused = self._refill(c, cache, nbytes, tag)
        cache.reused += reused
        if c is None:
            block = old
        else:  # same bytes, new handle (as the pool does): a stale handle stays dead
            block = Block(pool, old.chunk, old.offset, nbytes, old.size, 0, tag, old.memory, 0, c)
        block.thread = cache.thread
        pool.live[block.id] = block
        return block, reused

    def _refill(self, c, cache: _Cache, nbytes: int, tag: str) -> tuple[Block, bool]:
        """Under the lock: one block for the caller, and ``batch`` more into the cache."""
        pool = self.pool
        if c is None:
            pool.reserved += nbytes
            pool.peak = max(pool.peak, pool.reserved)
            return pool._direct_block(nbytes, tag), False
        free, take = pool.free_lists[c], []
        size = pool.classes[c]
        for _ in range(1 + self.batch if self.capacity else 1):
            take.append((free.pop(), True) if free else (pool._carve_block(c, size, size, ""), False))
        pool.reserved += size * len(take)
        pool.peak = max(pool.peak, pool.reserved)
        first = take.pop()
        cache.blocks[c].extend(b for b, _ in take)
        cache.bytes += size * len(take)
        self._emit("refill", cache, c, len(take))
        return first

    def mine(self) -> tuple[int, int]:
        """(this thread's id, bytes in its cache): what the pool's trace events carry."""
        cache = self._mine()
        return cache.thread, cache.bytes

    def free(self, block: Block) -> None:
        pool, cache = self.pool, self._mine()
        check_return(pool, block, "pool")
        block.live = False
        del pool.live[block.id]
        cache.frees += 1
        if block.thread != cache.thread:
            cache.cross_frees += 1
        c = block.size_class
        if c is None or pool.defer_epochs or not self.capacity:
            with self.lock:
                self.lock_acquisitions += 1
                pool._release(block)
            return
        mine = cache.blocks[c]
        mine.append(block)
        cache.bytes += block.size
        if len(mine) > self.capacity:
            with self.lock:
                self.lock_acquisitions += 1
                for _ in range(self.batch):
                    self._to_central(mine.pop(0))
                cache.bytes -= self.batch * block.size
                self._emit("flush", cache, c, self.batch)

    def _emit(self, action: str, cache: _Cache, c: int, blocks: int) -> None:
        if _trace.active is not None:
            _trace.active.emit("thread_cache", allocator=self.pool.name, thread=cache.thread, action=action,
                               size_class=c, blocks=blocks, cached=cache.bytes,
                               lock_acquisitions=self.lock_acquisitions)

    def _to_central(self, block: Block) -> None:
        self.pool.reserved -= block.size
        self.pool.free_lists[block.size_class].append(block)

    def flush_all(self) -> int:
        """Return every thread's cached blocks to the central free lists; how many there were."""
        with self.lock:
            self.lock_acquisitions += 1
            n = 0
            for cache in self.caches:
                for blocks in cache.blocks:
                    n += len(blocks)
                    for b in blocks:
                        self._to_central(b)
                    blocks.clear()
                cache.bytes = 0
        return n

    # -- numbers -----------------------------------------------------------------------------
    def cached_bytes(self) -> int:
        return sum(cache.bytes for cache in list(self.caches))

    def stats(self) -> dict:
        caches = list(self.caches)
        cached = [b for cache in caches for blocks in cache.blocks for b in list(blocks)]
        return {"threads": len(caches), "lock_acquisitions": self.lock_acquisitions,
                "cache_hits": sum(c.hits for c in caches), "reused": sum(c.reused for c in caches),
                "thread_allocations": sum(c.allocations for c in caches),
                "cross_thread_frees": sum(c.cross_frees for c in caches),
                "cached_blocks": len(cached), "cached_bytes": sum(b.size for b in cached)}
