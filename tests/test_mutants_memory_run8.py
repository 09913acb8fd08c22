"""Tests that kill mutants mutmut left alive in microtorch/memory/ in the eighth run (issue #21).

The eighth run reached the `memory/` functions the fourth run never ran (``Block.__init__``,
``check_return``, ``placement.allocator_for``/``track_alloc``/``track_free``, ``Pool.alloc``/
``free``/``_release``, ``Storage.__init__``/``incref``/``decref``/``release``, ``new_storage``,
``empty_storage``, ``views.register``/``_forget``). Each test pins a behaviour some surviving
mutant changed, with the expected values worked out by hand from the module's docstrings;
tests/mutation-run-8/memory.md lists the mutants and which test kills each. Allocators that
register are compared through ``.name`` (under mutmut, with garbage collection off, a live
allocator of the same name numbers a new one).
"""
import importlib

import numpy as np
import pytest

import microtorch as mt

# the module, not ``mt.memory.pool()`` (the function that returns the engine's pool)
pool_module = importlib.import_module("microtorch.memory.pool")


def test_pool_alloc_ns_adds_up_the_clock_time_of_every_allocation(monkeypatch):
    # each alloc reads the clock when it starts and when it is done: 7, 11 and 20 ns here
    ticks = iter([100, 107, 1_000, 1_011, 5_000, 5_020])
    monkeypatch.setattr(pool_module, "perf_counter_ns", lambda: next(ticks))
    pool = mt.memory.Pool(name="clocked pool")
    a = pool.alloc(100)
    pool.free(a)
    pool.alloc(100)                                   # reused
    pool.alloc(2 << 20)                               # direct
    assert pool.alloc_ns == 7 + 11 + 20
    assert pool.stats()["allocations"] == 3


def _fields(event):
    d = event.to_dict()
    del d["step"]
    return d


def _memory_events(tr):
    return [_fields(e) for e in tr.events if e.kind in ("alloc_block", "alloc", "refcount", "free_block", "free")]


# -- a storage's life in the trace: alloc, refcount +1 / -1, free, and its block's --------------------
def test_a_pool_tensors_storage_events_name_its_bytes_block_holder_and_counts():
    pool = mt.memory.Pool(name="events pool")
    with mt.memory.use_pool(pool), mt.trace() as tr:
        t = mt.tensor([1.0, 2.0, 3.0])                # 3 float32: 12 bytes, in the 64-byte class
        sid, bid, tid = t._storage.id, t._storage.block.id, tr.tensor(t)
        del t
    assert _memory_events(tr) == [
        {"kind": "alloc_block", "allocator": pool.name, "block": bid, "chunk": 0, "offset": 0, "nbytes": 12,
         "size": 64, "tag": "tensor", "size_class": 0, "reused": False, "slab_bytes": 65536},
        {"kind": "alloc", "storage": sid, "nbytes": 12, "dtype": "float32", "tag": "tensor",
         "allocator": pool.name, "block": bid},
        {"kind": "refcount", "storage": sid, "refcount": 1, "delta": 1, "holder": f"tensor {tid}"},
        {"kind": "refcount", "storage": sid, "refcount": 0, "delta": -1, "holder": f"tensor {tid}"},
        {"kind": "free_block", "allocator": pool.name, "block": bid, "held": False},
        {"kind": "free", "storage": sid, "nbytes": 12, "stale": False}]
    assert pool.stats()["live_blocks"] == 0 and pool.stats()["reuse_hits"] == 0


def test_a_heap_storage_says_heap_and_no_block_in_its_alloc_event():
    with mt.memory.use_heap(), mt.trace() as tr:
        t = mt.tensor([[1, 2], [3, 4]], dtype=mt.int64)   # 4 int64: 32 bytes, no allocator
        sid, tid = t._storage.id, tr.tensor(t)
        assert t._storage.block is None
        del t
    assert _memory_events(tr) == [
        {"kind": "alloc", "storage": sid, "nbytes": 32, "dtype": "int64", "tag": "tensor", "allocator": "heap",
         "block": None},
        {"kind": "refcount", "storage": sid, "refcount": 1, "delta": 1, "holder": f"tensor {tid}"},
        {"kind": "refcount", "storage": sid, "refcount": 0, "delta": -1, "holder": f"tensor {tid}"},
        {"kind": "free", "storage": sid, "nbytes": 32, "stale": False}]


# -- Pool.free: the free_block event says whether the block is held back, with or without threads --
@pytest.mark.parametrize("thread_cache", [None, 2])
@pytest.mark.parametrize("defer_epochs", [0, 1])
def test_free_block_events_say_held_only_for_a_class_block_of_a_deferring_pool(defer_epochs, thread_cache):
    import threading

    pool = mt.memory.Pool(name="freeing pool", defer_epochs=defer_epochs, thread_cache=thread_cache)
    small, big = pool.alloc(100, "x"), pool.alloc(2 << 20, "big")   # a 104-byte class block, a direct one
    with mt.trace() as tr:
        pool.free(small)
        pool.free(big)
    events = [_fields(e) for e in tr.filter("free_block")]
    held = bool(defer_epochs)                          # a direct block is never held: it goes back at once
    expected = [{"kind": "free_block", "allocator": pool.name, "block": small.id, "held": held},
                {"kind": "free_block", "allocator": pool.name, "block": big.id, "held": False}]
    if thread_cache is not None:
        # the freeing thread, and the bytes in its cache after the free: the refill cached one more
        # 104-byte block; a freed one joins it unless the pool defers (then it waits in ``held``)
        cached = 104 if defer_epochs else 208
        for e in expected:
            e.update(thread=threading.get_ident(), cached=cached)
    assert events == expected
    assert (small.live, big.live) == (False, False) and pool.stats()["live_blocks"] == 0
    assert len(pool.held) == (1 if defer_epochs else 0)
    assert pool.direct_bytes == 0 and big.memory is None


# -- check_return: the messages a foreign block and a double free get --------------------------------
@pytest.mark.parametrize("thread_cache", [None, 0])
def test_a_foreign_block_and_a_double_free_are_refused_in_so_many_words(thread_cache):
    from microtorch.memory.block import AllocatorError

    pool = mt.memory.Pool(name="strict pool", thread_cache=thread_cache)
    other = mt.memory.Pool(name="other pool")
    foreign = other.alloc(8)
    with pytest.raises(AllocatorError) as err:
        pool.free(foreign)
    assert str(err.value) == f"{pool.name}: {foreign!r} was not allocated by this pool (foreign block)"
    assert foreign.live is True
    other.free(foreign)
    assert foreign.live is False
    with pytest.raises(AllocatorError) as err:
        other.free(foreign)
    assert str(err.value) == f"{other.name}: double free of {foreign!r}"
    assert repr(foreign).endswith(", dead>")


# -- the default tag: "activation", which a step arena serves ---------------------------------------
def test_storages_made_without_a_tag_are_activations_and_go_to_the_step_arena():
    from microtorch.memory.storage import Storage

    assert Storage(np.zeros(3, np.float32)).tag == "activation"
    values = np.arange(6, dtype=np.float64).reshape(2, 3)
    with mt.memory.step_arena(capacity=4096) as arena:
        made = mt.memory.new_storage(values)
        empty = mt.memory.empty_storage(5, np.dtype(np.int32))
        kept = mt.memory.new_storage(values, "tensor")      # not an activation: the pool's
        assert (made.tag, empty.tag, kept.tag) == ("activation", "activation", "tensor")
        assert made.block.owner is arena and empty.block.owner is arena
        assert kept.block.owner is mt.memory.pool()
        assert made.data.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and empty.data.shape == (5,)
        assert (made.nbytes, empty.nbytes, kept.nbytes) == (48, 20, 48)
        kept.release()


# -- views: the registry forgets a view when it goes away ----------------------------------------
def test_a_dropped_view_leaves_nothing_behind_in_the_view_registry():
    from microtorch.memory import views

    base = mt.arange(6.0)
    sid = base._storage.id
    a, b = base[1:], base[::2]
    assert views.live_views(base._storage) == [a, b]
    assert views.made_in_grad_mode(a) is True and views.made_in_grad_mode(base) is None
    del a
    assert views.live_views(base._storage) == [b]
    assert sid in views._by_storage and len(views._by_storage[sid]) == 1   # only b's entry is left
    del b
    assert views.live_views(base._storage) == []
    assert sid not in views._by_storage               # the storage's group goes with its last view


# -- placement's engine-wide counters: live bytes and their peak ------------------------------------
def test_live_bytes_and_peak_bytes_follow_every_storage_made_and_freed():
    from microtorch.memory import placement

    with mt.memory.use_heap():
        mt.memory.reset_peak()
        start = placement.live_bytes
        assert placement.peak_bytes == start
        a = mt.tensor([1.0, 2.0, 3.0])                 # 12 bytes
        assert (placement.live_bytes, placement.peak_bytes) == (start + 12, start + 12)
        b = mt.tensor([1, 2], dtype=mt.int64)          # 16 bytes
        assert (placement.live_bytes, placement.peak_bytes) == (start + 28, start + 28)
        del a
        assert (placement.live_bytes, placement.peak_bytes) == (start + 16, start + 28)
        c = mt.tensor([5.0])                           # 4 bytes: below the peak
        assert (placement.live_bytes, placement.peak_bytes) == (start + 20, start + 28)
        del b, c
        assert (placement.live_bytes, placement.peak_bytes) == (start, start + 28)


# -- Pool.alloc / free / _release: what a block and the pool's counters say -----------------------
def test_pool_blocks_carry_their_tag_or_none_whichever_way_they_are_served():
    import threading

    plain = mt.memory.Pool(name="tag pool")
    threaded = mt.memory.Pool(name="tag pool threaded", thread_cache=2)
    for pool in (plain, threaded):
        untagged, small, big = pool.alloc(8), pool.alloc(100, "x"), pool.alloc(2 << 20, "big")
        assert (untagged.tag, small.tag, big.tag) == ("", "x", "big")
        # a pool has no resets: its blocks are all of generation 0; only a thread-caching pool
        # records the thread that allocated a block
        me = threading.get_ident() if pool is threaded else None
        assert [(b.generation, b.thread) for b in (untagged, small, big)] == [(0, me)] * 3
        assert repr(untagged).startswith(f"<Block #{untagged.id} untagged: 8 B at chunk 0 ")
        assert (small.size_class, big.size_class) == (pool.size_class(100), None)
        for b in (untagged, small, big):
            pool.free(b)


def test_a_request_above_4096_bytes_gets_its_size_class_not_a_direct_block():
    pool = mt.memory.Pool(name="mid pool")
    b = pool.alloc(5000)                               # [4096, 8192) in steps of 512: class 5120
    assert (b.size, b.size_class, b.nbytes) == (5120, pool.classes.index(5120), 5000)
    assert pool.stats()["direct_allocations"] == 0 and pool.reserved == 5120
    pool.free(b)


def test_a_reused_block_has_the_freed_blocks_place_and_class_and_its_own_request():
    pool = mt.memory.Pool(name="reuse pool")
    keep = pool.alloc(100, "keep")                     # class 104 at offset 0 of its slab
    first = pool.alloc(100, "first")                   # the same class, next to it: offset 104
    with mt.trace() as tr:
        pool.free(first)
        again = pool.alloc(97, "again")                # the same class: first's bytes, a new handle
        pool.free(again)
        third = pool.alloc(104, "third")
    assert [(b.chunk, b.offset, b.size, b.nbytes, b.padding, b.tag, b.size_class, b.generation, b.thread)
            for b in (keep, again, third)] == [(0, 0, 104, 100, 0, "keep", 5, 0, None),
                                               (0, 104, 104, 97, 0, "again", 5, 0, None),
                                               (0, 104, 104, 104, 0, "third", 5, 0, None)]
    assert first.live is False and again.live is False and third.live is True
    assert np_bytes_equal(third.array("uint8"), first.memory)   # the very same bytes
    assert [e["reused"] for e in tr.filter("alloc_block")] == [True, True]
    s = pool.stats()
    assert (s["allocations"], s["reuse_hits"], s["reserved"], s["requested"], s["live_blocks"]) == (
        4, 2, 208, 204, 2)
    assert pool.direct_bytes == 0 and pool.class_table()[0]["free"] == 0
    pool.free(third)                                   # back on its class's free list, not direct
    assert (pool.reserved, pool.direct_bytes, pool.class_table()[0]["free"]) == (104, 0, 1)
    assert third.memory is not None
    pool.free(keep)
    assert pool.reserved == 0


def np_bytes_equal(a, b):
    return a.ctypes.data == b.ctypes.data and a.nbytes == b.nbytes


def test_a_deferring_pool_holds_a_freed_block_until_its_epoch_then_reuses_it():
    pool = mt.memory.Pool(name="deferring pool", defer_epochs=1)
    a = pool.alloc(64, "a")
    pool.free(a)
    assert pool.reserved == 0 and pool.stats()["held_blocks"] == 1
    b = pool.alloc(64, "b")                            # a is held back: fresh bytes
    assert b.offset == 64 and pool.reserved == 64
    pool.advance_epoch()
    assert pool.stats()["held_blocks"] == 0 and pool.class_table()[0]["free"] == 1
    c = pool.alloc(64, "c")                            # now a's bytes come back
    assert (c.offset, pool.stats()["reuse_hits"], pool.reserved) == (0, 1, 128)
    pool.free(b)
    pool.free(c)
    assert pool.reserved == 0


# -- Storage: a new one's counters, its holders, what freeing it leaves ---------------------------
def test_a_new_storage_starts_unwritten_unfreed_and_its_block_leads_back_to_it():
    pool = mt.memory.Pool(name="storage pool")
    with mt.memory.use_pool(pool):
        a, b = mt.tensor([1.0, 2.0]), mt.tensor([3.0])
        sa, sb = a._storage, b._storage
        assert (sa.version, a._version, sa.freed, sa.stale, sa.refcount) == (0, 0, False, None, 1)
        assert isinstance(sa.id, int) and sb.id == sa.id + 1     # numbered in order of creation
        assert sa.block.user() is sa
        with mt.trace() as tr:
            pass
        baseline = tr.events[0].to_dict()
        mine = [s for s in baseline["storages"] if s["allocator"] == pool.name]
        assert mine == [
            {"storage": sa.id, "nbytes": 8, "dtype": "float32", "tag": "tensor", "allocator": pool.name,
             "block": sa.block.id, "refcount": 1, "stale": False},
            {"storage": sb.id, "nbytes": 4, "dtype": "float32", "tag": "tensor", "allocator": pool.name,
             "block": sb.block.id, "refcount": 1, "stale": False}]
        a.add_(1.0)
        assert (sa.version, a._version) == (1, 1)
        del a, b
    assert (sa.freed, sa.data, sa.refcount) == (True, None, 0) and sb.freed is True
    assert pool.stats()["live_blocks"] == 0 and "freed" in repr(sa)


def test_every_view_of_a_storage_holds_one_reference():
    x = mt.arange(6.0)
    s = x._storage
    assert s.refcount == 1
    v, w = x[1:], x.view(2, 3)
    assert s.refcount == 3
    del v
    assert s.refcount == 2
    del w
    assert s.refcount == 1


def test_a_step_tensor_kept_past_its_arena_reset_raises_use_after_reset():
    from microtorch.memory.storage import StaleTensorError

    w = mt.tensor([1.0, 2.0], requires_grad=True)
    with mt.memory.step_arena(capacity=4096) as arena:
        y = w * 3.0                                    # an activation: in the arena
        v = y[1:]                                      # a view of it: the same storage
        assert y._storage.block.owner is arena and y.tolist() == [3.0, 6.0]
        storage = y._storage
    assert storage.stale is not None and storage.data is None
    for t in (y, v):
        with pytest.raises(StaleTensorError, match=f"use after reset: storage #{storage.id}"):
            t.tolist()
    del t, y, v
    assert storage.freed is True


def test_a_stale_storage_freed_later_is_counted_out_of_live_bytes_once():
    from microtorch.memory import placement

    start = placement.live_bytes
    with mt.memory.step_arena(capacity=4096):
        y = mt.tensor([1.0, 2.0]) * 2.0               # 8 bytes in the arena
        assert placement.live_bytes >= start + 8
    after_reset = placement.live_bytes                 # the reset counted y's bytes out
    del y                                              # freeing the stale storage does not again
    assert placement.live_bytes == after_reset == start


# -- new_storage / empty_storage: the bytes, dtype, count and tag they are asked for -----------------
@pytest.mark.parametrize("where", ["heap", "pool"])
def test_empty_and_new_storages_hold_exactly_the_elements_asked_for(where):
    pool = mt.memory.Pool(name="exact pool")
    values = np.arange(6, dtype=np.int16).reshape(2, 3)
    with mt.memory.use_heap() if where == "heap" else mt.memory.use_pool(pool):
        e = mt.memory.empty_storage(5, np.dtype(np.int32), "tensor")
        n = mt.memory.new_storage(values, "gradient")
    for s, count, dtype, tag in ((e, 5, np.int32, "tensor"), (n, 6, np.int16, "gradient")):
        assert (s.data.shape, s.data.dtype, s.nbytes, s.tag) == ((count,), np.dtype(dtype),
                                                                 count * np.dtype(dtype).itemsize, tag)
        if where == "heap":
            assert s.block is None
        else:
            assert s.block.owner is pool and s.block.tag == tag and s.block.nbytes == s.nbytes
            assert s.block.size == 64                  # both fit the smallest class
    assert n.data.tolist() == [0, 1, 2, 3, 4, 5]
    e.release()
    n.release()
    assert pool.stats()["live_blocks"] == 0
