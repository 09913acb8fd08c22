"""Pool thread caches: real threads, no block handed out twice, nothing lost, fewer locks."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import microtorch as mt
from microtorch.memory.block import AllocatorError
from microtorch.memory.pool import Pool


def _central_blocks(pool):
    return [(c, b.chunk, b.offset) for c, blocks in enumerate(pool.free_lists) for b in blocks]


def _carved(pool):
    """Every block ever carved from a slab, as (class, slab, offset)."""
    return sorted((c, i, off) for c, slabs in enumerate(pool.slabs) for i, s in enumerate(slabs[:-1])
                  for off in range(0, s.nbytes - pool.classes[c] + 1, pool.classes[c])) + sorted(
        (c, len(slabs) - 1, off) for c, slabs in enumerate(pool.slabs) if slabs
        for off in range(0, pool._carve[c], pool.classes[c]))


def _run_threads(pool, n_threads, plan, work=True):
    """Each thread follows its plan of (alloc size | free index); a shared ledger checks that
    no (class, slab, offset) is live in two places at once."""
    ledger, ledger_lock, errors = {}, threading.Lock(), []
    barrier = threading.Barrier(n_threads)

    def worker(k):
        live = []
        barrier.wait()
        try:
            for is_free, n in plan[k]:
                if is_free and live:
                    b = live.pop(n % len(live))
                    with ledger_lock:
                        del ledger[b.size_class, b.chunk, b.offset]
                    pool.free(b)
                else:
                    b = pool.alloc(n)
                    if b.size_class is not None:
                        with ledger_lock:
                            key = (b.size_class, b.chunk, b.offset)
                            assert key not in ledger, f"block {key} handed to two threads"
                            ledger[key] = k
                    a = b.array(np.uint8)
                    a[:] = k
                    if work:
                        np.dot(np.ones(64), np.ones(64))  # numpy work: the GIL is let go
                    assert (a == k).all(), "another thread wrote into this thread's block"
                    live.append(b)
            for b in live:
                with ledger_lock:
                    ledger.pop((b.size_class, b.chunk, b.offset), None)
                pool.free(b)
        except BaseException as e:  # reported to the test thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.integers(0, 8),
       st.lists(st.lists(st.tuples(st.booleans(), st.integers(1, 3000)), max_size=60), min_size=4, max_size=4))
def test_threads_never_share_a_block_and_every_block_comes_back(n_threads, cache, plan):
    pool = Pool(name="threads", thread_cache=cache)
    _run_threads(pool, n_threads, plan)
    assert pool.live == {} and pool.requested == 0
    pool.threads.flush_all()
    assert pool.reserved == 0 and pool.stats()["cached_blocks"] == 0  # baseline restored
    central = _central_blocks(pool)
    assert len(central) == len(set(central))  # nothing on a free list twice
    assert sorted(central) == _carved(pool)  # nothing lost: every carved block is back


def test_a_block_freed_by_another_thread_goes_back_correctly():
    pool = Pool(name="cross", thread_cache=4)
    handed = []
    t = threading.Thread(target=lambda: handed.extend(pool.alloc(100) for _ in range(3)))
    t.start(), t.join()
    for b in handed:  # freed here, by the main thread
        pool.free(b)
    s = pool.stats()
    assert s["cross_thread_frees"] == 3 and s["live_blocks"] == 0
    again = [pool.alloc(100) for _ in range(3)]  # the main thread's cache serves them, no lock
    assert {(b.chunk, b.offset) for b in again} == {(b.chunk, b.offset) for b in handed}
    with pytest.raises(AllocatorError, match="double free"):
        pool.free(handed[0])


def test_caches_cut_lock_acquisitions_per_thousand_allocations():
    counts = {}
    for cache in (0, 16):
        pool = Pool(name=f"locks {cache}", thread_cache=cache)
        plan = [[(False, 256), (True, 0)] * 500 for _ in range(2)]
        _run_threads(pool, 2, plan, work=False)
        s = pool.stats()
        counts[cache] = s["lock_acquisitions"] / s["allocations"] * 1000
    assert counts[0] >= 2000  # a lock on every alloc and every free
    assert counts[16] < 20  # a refill of 8 blocks once, then the cache serves alloc and free


def test_thread_cache_events_and_counters_in_the_trace():
    pool = Pool(name="traced", thread_cache=2)
    with mt.trace() as tr:
        blocks = [pool.alloc(64) for _ in range(4)]
        for b in blocks:
            pool.free(b)
    kinds = [e for e in tr.events if e["kind"] == "thread_cache"]
    assert [e["action"] for e in kinds] == ["refill", "refill", "flush", "flush"]
    assert all(e["thread"] == threading.get_ident() for e in kinds)
    assert all(e.get("thread") == threading.get_ident() for e in tr.events if e["kind"] == "alloc_block")
    s = pool.stats()
    assert s["cache_hits"] == 2 and s["cached_blocks"] == 2 and s["reserved"] == 0


def test_thread_cache_must_not_be_negative():
    with pytest.raises(ValueError, match="thread_cache must be ≥ 0"):
        Pool(name="bad", thread_cache=-1)


def test_a_threaded_data_loader_gives_the_same_batches_and_reuses_its_blocks():
    x = mt.randn(1000, 32)
    y = mt.arange(1000)
    ds = mt.data.TensorDataset(x, y)
    plain = mt.data.DataLoader(ds, batch_size=64, shuffle=True, generator=mt.Generator().manual_seed(3))
    threaded = mt.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=2,
                                  generator=mt.Generator().manual_seed(3))
    for epoch in range(3):
        for (xa, ya), (xb, yb) in zip(plain, threaded, strict=True):
            assert np.array_equal(xa.numpy(), xb.numpy()) and np.array_equal(ya.numpy(), yb.numpy())
            assert xb._storage.block.owner is threaded.workers.pool
        del xa, ya, xb, yb
    s = threaded.workers.pool.stats()
    assert s["threads"] >= 2 and s["live_blocks"] == 0
    assert s["cross_thread_frees"] > 0  # gathered by a worker, freed by the training loop
    assert s["lock_acquisitions"] / s["allocations"] < 0.5  # most allocations took no lock
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        mt.data.DataLoader(ds, num_workers=-1)


def test_thread_picture_replays_cache_bytes_and_locks():
    from microtorch.viz import threads as vt

    pool = Pool(name="pictured", thread_cache=4)  # batch 2: a refill takes 3 blocks
    with mt.trace() as tr:
        blocks = [pool.alloc(100) for _ in range(6)]  # class 104 B... rounded by the pool
        for b in blocks:
            pool.free(b)
    size = blocks[0].size
    f = vt.thread_facts(tr)
    me = threading.get_ident()
    assert f.threads == [me]
    # 6 allocations: refill (2 cached), hit, hit, refill (2 cached), hit, hit → 0 cached
    # 6 frees: cache 1, 2, 3, 4, 5 → flush 2 → 3, 4
    cached = [b // size for _, b in f.cached[me]]
    assert cached == [2, 2, 1, 0, 2, 2, 1, 0, 1, 2, 3, 4, 3, 3, 4]
    assert f.count_at(f.locks) == pool.stats()["lock_acquisitions"]
    assert f.count_at(f.allocations[me]) == 6 and f.cross_frees == 0
    fig = vt.render(tr)
    top_line = fig.axes[0].get_lines()[0]
    assert max(top_line.get_ydata()) == 4 * size
    assert "lock acquisition" in fig.description
