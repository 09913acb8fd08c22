"""Tests that kill mutants mutmut left alive in microtorch/memory/ in the third run (issue #21).

Each test pins a behaviour some surviving mutant changed, with the expected values worked
out by hand from the allocator's rules (its docstring), not read back from the code under
test. tests/README.md ("Mutation testing") says how survivors are triaged; the first run's
tests are in tests/test_mutants_memory.py. Allocators that register (Pool, Arena) are compared
through ``.name``: a live allocator of the same name numbers a new one ("pool #2"), as happens
under mutmut, which runs with automatic garbage collection off.
"""
import dataclasses
import importlib
import os

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import mapped, numa, unified, workload
from microtorch.memory.node_arena import NodeArena


# -- Storage.__repr__ ---------------------------------------------------------------------------
def test_storage_repr_says_where_the_bytes_live_and_whether_they_are_live_freed_or_stale():
    pool = mt.memory.Pool(name="repr pool")  # registered: numbered if another "repr pool" is alive
    assert pool.name.startswith("repr pool")
    with mt.memory.use_pool(pool):
        t = mt.zeros(3)                                   # 3 float32: 12 bytes in the pool
        s = t.storage
        assert repr(s) == f"<Storage #{s.id} 12 bytes in {pool.name}, refcount=1, version=0>"
        t.add_(1.0)                                       # one in-place write
        assert repr(s) == f"<Storage #{s.id} 12 bytes in {pool.name}, refcount=1, version=1>"
        del t                                             # the last holder goes: freed
        assert repr(s) == f"<Storage #{s.id} 12 bytes in {pool.name}, freed, version=1>"
    with mt.memory.use_heap():
        h = mt.zeros(2, dtype=mt.float64)                 # plain numpy: no allocator named
        assert repr(h.storage) == f"<Storage #{h.storage.id} 16 bytes, refcount=1, version=0>"


def test_storage_repr_of_an_arena_tensor_kept_past_its_step_says_stale_and_why():
    x = mt.ones(4)
    with mt.memory.step_arena(capacity=1024) as arena:
        y = x * 2                                         # an activation: in the step arena
    s = y.storage
    why = f"its bytes lived in {arena.name}, which was reset"
    assert repr(s) == f"<Storage #{s.id} 16 bytes in {arena.name}, stale: {why}, version=0>"
    del y                                                 # released after the reset: still "stale"
    assert repr(s) == f"<Storage #{s.id} 16 bytes in {arena.name}, stale: {why}, version=0>"


# -- Buddy.__repr__ ------------------------------------------------------------------------------
def test_buddy_repr_counts_live_blocks_bytes_heaps_splits_and_merges():
    b = mt.memory.Buddy(heap_bytes=1024, min_block=64, name="tiny buddy")
    first = b.alloc(100)   # order 7 (128 B): 1024 → 512 → 256 → 128, three splits
    second = b.alloc(64)   # order 6: the free 128 at offset 128 splits once more
    b.free(second)         # merges with its free buddy at 192 into 128 B; that block's buddy (0) is live
    assert first.size == 128
    assert repr(b) == ("Buddy('tiny buddy': 1 live blocks, 128 B reserved for 100 B requested, "
                       "1 heap(s) of 1024 B, 4 splits, 1 merges)")


# -- NodeArena.stats / table ---------------------------------------------------------------------
class _Op:
    """A stand-in graph node: no inputs, nothing saved (all a record needs)."""
    next = ()
    saved = ()


def test_node_arena_stats_and_table_after_a_growth_and_two_frees():
    arena = NodeArena(capacity=2, growth=1.5, name="small node arena")
    ops = [_Op() for _ in range(3)]
    slots = [arena.new(op)[1] for op in ops]   # the third chains a chunk of max(1, 2 × 0.5) = 1 record
    arena.free(ops[0])
    arena.free(ops[1])                         # one record still live: no reset yet
    assert slots == [0, 1, 2]
    assert arena.stats() == {"name": "small node arena", "capacity_records": 3, "bytes": 3 * 64,
                             "live_records": 1, "top": 3, "high_water": 3, "utilization": 1 / 3,
                             "growths": 1, "resets": 0, "allocations": 3}
    table = arena.table()
    assert table["slot"].tolist() == [0, 1, 2] and table["n_inputs"].tolist() == [0, 0, 0]
    assert table["inputs"].tolist() == [[-2] * 4] * 3          # NO_GRAD where there is no input
    arena.free(ops[2])                                          # the last one: the arena resets
    s = arena.stats()
    assert (s["live_records"], s["top"], s["resets"], s["high_water"]) == (0, 0, 1, 3)
    assert arena.table().size == 0


# -- MappedFile.stats / check / record_pages -----------------------------------------------------
def test_mapped_file_stats_while_mapped_and_after_the_last_tensor_goes(tmp_path):
    path = tmp_path / "weights.npz"
    mt.save({"w": np.arange(6, dtype=np.float32), "b": np.zeros(2, np.float64)}, path)
    loaded = mt.load(path, mmap=True)
    owner = loaded["w"].storage.block.owner
    assert owner.stats() == {"name": "mmap weights.npz", "path": os.fspath(path), "mode": "r",
                             "live_blocks": 2, "requested": 6 * 4 + 2 * 8,
                             "file_bytes": os.path.getsize(path)}
    del loaded["b"]
    assert owner.stats()["live_blocks"] == 1 and owner.stats()["requested"] == 24
    del loaded["w"]                                     # the last tensor: the mapping is let go
    assert owner.stats() == {"name": "mmap weights.npz", "path": os.fspath(path), "mode": "r",
                             "live_blocks": 0, "requested": 0, "file_bytes": 0}


def test_mapped_file_check_passes_a_live_block_and_refuses_a_released_one(tmp_path):
    path = tmp_path / "two.npz"
    mt.save({"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)}, path)
    loaded = mt.load(path, mmap=True)
    block_a, block_b = loaded["a"].storage.block, loaded["b"].storage.block
    owner = block_a.owner
    owner.check(block_a)                                # live: no error
    del loaded["b"]
    with pytest.raises(mt.memory.AllocatorError, match="use after release"):
        owner.check(block_b)


def test_record_pages_writes_the_resident_pages_as_runs_starting_with_page_zero(tmp_path, monkeypatch):
    path = tmp_path / "pages.npz"
    mt.save({"x": np.ones(10, np.float32)}, path)
    x = mt.load(path, mmap=True)["x"]
    owner = x.storage.block.owner
    pattern = np.array([True, False, False, True, True, False])  # runs 1, 2, 2, 1
    monkeypatch.setattr(owner, "resident", lambda: pattern)
    with mt.trace() as tr:
        owner.record_pages()
        owner.record_pages("labelled")
    first, second = tr.filter("mmap_pages")
    assert (first.allocator, first.pages, first.label, first.resident, first.first, first.runs) == \
        ("mmap pages.npz", 6, "", 3, True, [1, 2, 2, 1])
    assert second.label == "labelled"
    pattern[:] = [False, False, True, False, True, True]        # runs 2, 1, 1, 2 from a missing page 0
    with mt.trace() as tr:
        owner.record_pages()
    (e,) = tr.filter("mmap_pages")
    assert (e.resident, e.first, e.runs) == (3, False, [2, 1, 1, 2])


# -- mt.memory.stats() with nothing allocated yet ---------------------------------------------
def test_stats_before_any_allocation_in_this_process_say_zero_time_per_allocation(monkeypatch):
    # in-process (the subprocess test of the first run is not one mutmut can attribute):
    # a fresh pool, a fresh node arena, no step arena: no allocation anywhere yet
    stats_module = importlib.import_module("microtorch.memory.stats")  # the package's `stats` is the function
    monkeypatch.setattr(stats_module, "nodes", NodeArena())
    with mt.memory.use_pool(mt.memory.Pool(name="untouched pool")):
        s = mt.memory.stats()
    assert s["allocations"] == 0 and s["mean_alloc_us"] == 0.0


# -- BestFit ---------------------------------------------------------------------------------
def _fields(event):
    d = event.to_dict()
    del d["step"]
    return d


def test_best_fit_splits_reuses_coalesces_and_counts_it_all():
    bf = mt.memory.BestFit(heap_bytes=4096, round_to=512, name="bf")
    assert bf.stats() == {"name": "bf", "requested": 0, "reserved": 0, "peak": 0, "heap_bytes": 0,
                          "backing_bytes": 0, "free_bytes": 0, "largest_free": 0,
                          "internal_fragmentation": 0.0, "external_fragmentation": 0.0,
                          "allocations": 0, "reuse_hits": 0, "splits": 0, "merges": 0, "live_blocks": 0}
    with mt.trace() as tr:
        a = bf.alloc(1000, "a")   # 1024 B at 0 of a new 4096 B heap; 3072 B stay free at 1024
        b = bf.alloc(600, "b")    # the 3072 B free block: 1024 B at 1024, 2048 B stay free at 2048
        c = bf.alloc(1500, "c")   # 1536 B at 2048; 512 B (= round_to) stay free at 3584
        d = bf.alloc(100)         # 512 B: the last free block exactly, no split
    assert [(x.chunk, x.offset, x.size, x.nbytes, x.padding, x.tag) for x in (a, b, c, d)] == [
        (0, 0, 1024, 1000, 0, "a"), (0, 1024, 1024, 600, 0, "b"), (0, 2048, 1536, 1500, 0, "c"),
        (0, 3584, 512, 100, 0, "")]
    assert [_fields(e) for e in tr.filter("fit_alloc")] == [
        {"kind": "fit_alloc", "allocator": "bf", "block": x.id, "heap": 0, "offset": x.offset,
         "nbytes": x.nbytes, "size": x.size, "tag": x.tag} for x in (a, b, c, d)]
    base = bf.heaps[0].ctypes.data
    for x in (a, b, c, d):  # each block's bytes are its own slice of the heap
        assert x.memory.size == x.size and x.memory.ctypes.data == base + x.offset
        x.array(np.uint8)[:] = 7
    assert bf.stats() == {"name": "bf", "requested": 3200, "reserved": 4096, "peak": 4096, "heap_bytes": 4096,
                          "backing_bytes": 4096, "free_bytes": 0, "largest_free": 0,
                          "internal_fragmentation": pytest.approx(1 - 3200 / 4096),
                          "external_fragmentation": 0.0, "allocations": 4, "reuse_hits": 3, "splits": 3,
                          "merges": 0, "live_blocks": 4}
    with mt.trace() as tr:
        bf.free(b)                # free at 1024 (1024 B): neighbours a and c are live, no merge
        bf.free(d)                # free at 3584 (512 B)
        s = bf.stats()
        bf.free(a)                # merges with b's free block after it: 2048 B at 0
        bf.free(c)                # merges with the block before (0..2048) and after (3584..4096): 4096 B
    assert b.live is False and d.live is False
    assert s == {"name": "bf", "requested": 2500, "reserved": 2560, "peak": 4096, "heap_bytes": 4096,
                 "backing_bytes": 4096, "free_bytes": 1536, "largest_free": 1024,
                 "internal_fragmentation": pytest.approx(1 - 2500 / 2560),
                 "external_fragmentation": pytest.approx(1 - 1024 / 1536), "allocations": 4,
                 "reuse_hits": 3, "splits": 3, "merges": 0, "live_blocks": 2}
    assert [_fields(e) for e in tr.filter("fit_free")] == [
        {"kind": "fit_free", "allocator": "bf", "block": x.id, "heap": 0, "offset": off, "size": size}
        for x, off, size in ((b, 1024, 1024), (d, 3584, 512), (a, 0, 2048), (c, 0, 4096))]
    assert bf.free_blocks() == [(0, 0, 4096)] and bf.stats()["merges"] == 3
    e = bf.alloc(5000)            # 5120 B: larger than the heap, a heap of its own, nothing split off
    assert (e.chunk, e.offset, e.size) == (1, 0, 5120)
    assert bf.stats() == {"name": "bf", "requested": 5000, "reserved": 5120, "peak": 5120,
                          "heap_bytes": 4096 + 5120, "backing_bytes": 4096 + 5120, "free_bytes": 4096,
                          "largest_free": 4096, "internal_fragmentation": pytest.approx(1 - 5000 / 5120),
                          "external_fragmentation": 0.0, "allocations": 5, "reuse_hits": 3, "splits": 3,
                          "merges": 3, "live_blocks": 1}


def test_best_fit_defaults_limits_and_refusals():
    default = mt.memory.BestFit()
    assert default.name == "best fit" and default.alignment == 64
    heaps = [default.alloc(2 << 20) for _ in range(6)]  # each a heap of its own
    assert all(h.memory.ctypes.data % 64 == 0 for h in heaps)
    with pytest.raises(ValueError, match="power of two"):
        mt.memory.BestFit(round_to=0)
    one = mt.memory.BestFit(heap_bytes=8, round_to=1)   # 1 = 2⁰ is a power of two
    empty = one.alloc(0)                                # a zero-byte request still gets one byte
    assert (empty.size, empty.nbytes, empty.tag) == (1, 0, "")
    exact = mt.memory.BestFit(heap_bytes=512, round_to=512)  # a heap of exactly one unit is fine
    assert exact.alloc(0).size == 512 and exact.stats()["free_bytes"] == 0
    other = mt.memory.BestFit(name="other fit")
    with pytest.raises(mt.memory.AllocatorError, match="not allocated by this best-fit allocator"):
        other.free(exact.alloc(1))


# -- Buddy.stats --------------------------------------------------------------------------------
def test_buddy_stats_count_heaps_direct_blocks_and_both_fragmentations():
    bud = mt.memory.Buddy(heap_bytes=1024, min_block=64, name="bud")
    assert bud.stats() == {"name": "bud", "requested": 0, "reserved": 0, "peak": 0, "heap_bytes": 0,
                           "free_bytes": 0, "backing_bytes": 0, "largest_free": 0,
                           "internal_fragmentation": 0.0, "external_fragmentation": 0.0,
                           "allocations": 0, "splits": 0, "merges": 0, "direct_allocations": 0,
                           "live_blocks": 0}
    a = bud.alloc(1024)           # the whole heap: order 10, nothing free
    d = bud.alloc(3000)           # above heap_bytes: a direct buffer of its own
    assert bud.stats() == {"name": "bud", "requested": 4024, "reserved": 4024, "peak": 4024,
                           "heap_bytes": 1024, "free_bytes": 0, "backing_bytes": 1024 + 3000,
                           "largest_free": 0, "internal_fragmentation": 0.0, "external_fragmentation": 0.0,
                           "allocations": 2, "splits": 0, "merges": 0, "direct_allocations": 1,
                           "live_blocks": 2}
    bud.free(a)
    b = bud.alloc(100)            # order 7: 1024 → 512 → 256 → 128 (free: 512@512, 256@256, 128@128)
    c = bud.alloc(64)             # order 6: 128@128 → 64 (free: 64@192)
    assert bud.stats() == {"name": "bud", "requested": 3164, "reserved": 128 + 64 + 3000, "peak": 4024,
                           "heap_bytes": 1024, "free_bytes": 512 + 256 + 64, "backing_bytes": 4024,
                           "largest_free": 512, "internal_fragmentation": pytest.approx(1 - 3164 / 3192),
                           "external_fragmentation": pytest.approx(1 - 512 / 832), "allocations": 4,
                           "splits": 4, "merges": 0, "direct_allocations": 1, "live_blocks": 3}
    bud.free(c)                   # 64@128 + 64@192 → 128@128 (its buddy 0 is live): 1 merge
    bud.free(b)                   # 128@0 + 128@128 → 256, + 256@256 → 512, + 512@512 → 1024: 3 merges
    bud.free(d)
    assert bud.stats() == {"name": "bud", "requested": 0, "reserved": 0, "peak": 4024, "heap_bytes": 1024,
                           "free_bytes": 1024, "backing_bytes": 1024, "largest_free": 1024,
                           "internal_fragmentation": 0.0, "external_fragmentation": 0.0, "allocations": 4,
                           "splits": 4, "merges": 4, "direct_allocations": 1, "live_blocks": 0}


# -- Storage.invalidate ---------------------------------------------------------------------------
def test_a_tensor_used_after_its_arena_was_reset_raises_the_whole_explanation():
    import re

    x = mt.ones(4)
    with mt.memory.step_arena(capacity=1024) as arena:
        y = x * 2
    s = y.storage
    expected = (f"use after reset: storage #{s.id} (16 bytes, activation) — its bytes lived in "
                f"{arena.name}, which was reset, so its bytes now belong to something else. Copy out "
                "what you need before the step ends: loss.item(), t.tolist(), or t.numpy() "
                "(a copy for arena tensors).")
    with pytest.raises(mt.memory.StaleTensorError, match=f"^{re.escape(expected)}$"):
        y.numpy()
    assert s.data is None         # the storage keeps nothing of the reclaimed bytes


# -- ThreadCaches.flush_all -----------------------------------------------------------------------
def test_flush_all_returns_every_cached_block_and_counts_one_lock():
    pool = mt.memory.Pool(name="flush pool", thread_cache=4)   # batch 2: a miss takes 1 + 2 blocks
    small = pool.alloc(100)       # class 104: lock for the new cache, lock for the refill; 2 cached
    large = pool.alloc(200)       # class 208: one more lock; 2 cached
    assert pool.threads.lock_acquisitions == 3 and pool.threads.cached_bytes() == 2 * 104 + 2 * 208
    assert pool.threads.flush_all() == 4
    assert pool.threads.lock_acquisitions == 4 and pool.threads.cached_bytes() == 0
    assert pool.reserved == 104 + 208 and pool.stats()["cached_blocks"] == 0
    assert pool.threads.flush_all() == 0 and pool.threads.lock_acquisitions == 5
    pool.free(small)
    pool.free(large)


# -- numa: simulate / charge / policies / affinity, on a trace written by hand ------------------
_T2 = numa.Topology(nodes=2, memory_bytes=1 << 20, local_latency_ns=100, remote_latency_ns=200,
                    local_gbps=2, remote_gbps=1)
_ON = {"a": 0, "b": 1, "c": 0}  # which socket runs each op


def _by_op(i, e):
    return _ON[e["op"]]


def _numa_trace(threads=(None, None, None)):
    """Storage 1: 8192 B (2 pages), 2: 100 B (1 page), 3: 12288 B (3 pages), 9: no alloc event
    (0 B as far as the trace knows). Op a reads 1, writes 2; b reads 2 and 1, writes 3; c reads 9."""
    ops = [{"op": "a", "inputs": [1, 2], "output": 3, "input_storages": [1, None], "output_storage": 2},
           {"op": "b", "inputs": [3, 1], "output": 4, "input_storages": [2, 1], "output_storage": 3},
           {"op": "c", "inputs": [5], "output": 6, "input_storages": [9]}]
    for op, thread in zip(ops, threads):
        if thread is not None:
            op["thread"] = thread
    events = [{"kind": "alloc", "storage": s, "nbytes": n} for s, n in ((1, 8192), (2, 100), (3, 12288))]
    events += [{"kind": "op", **op} for op in ops]
    return mt.memory.Trace([{**e, "step": i} for i, e in enumerate(events)])


def test_numa_first_touch_charges_latency_per_page_and_bytes_over_bandwidth():
    r = numa.simulate(_numa_trace(), affinity=_by_op, policy="first_touch", topology=_T2)
    # a on 0: storage 1 (2 pages, local) 2·100 + 8192/2, storage 2 (local) 100 + 100/2
    # b on 1: storage 2 remote 200 + 100/1, storage 1 remote 2·200 + 8192/1, storage 3 local 3·100 + 12288/2
    # c on 0: storage 9, 0 bytes: one access, 100
    assert r.policy == "first_touch"
    assert r.op_ns == [(3, "a", 0, pytest.approx(4296 + 150)), (4, "b", 1, pytest.approx(300 + 8592 + 6444)),
                       (5, "c", 0, pytest.approx(100))]
    assert (r.local_bytes, r.remote_bytes) == (8192 + 100 + 12288, 100 + 8192)
    assert r.placement == {1: {0: 1.0}, 2: {0: 1.0}, 3: {1: 1.0}, 9: {0: 1.0}}


def test_numa_interleave_puts_half_of_every_storage_on_each_node():
    r = numa.simulate(_numa_trace(), affinity=_by_op, policy="interleave", topology=_T2)
    # storage 1: 4096 B per node, round(2 · 0.5) = 1 access each: 100 + 2048 local, 200 + 4096 remote
    # storage 2: 50 B per node, max(1, round(0.5)) = 1 access: 100 + 25, 200 + 50
    # storage 3: 6144 B per node, round(1.5) = 2 accesses: 200 + 3072, 400 + 6144; storage 9: 100 + 200
    s1, s2, s3, s9 = 2148 + 4296, 125 + 250, 3272 + 6544, 300
    assert r.policy == "interleave"
    assert r.op_ns == [(3, "a", 0, pytest.approx(s1 + s2)), (4, "b", 1, pytest.approx(s2 + s1 + s3)),
                       (5, "c", 0, pytest.approx(s9))]
    assert r.local_bytes == r.remote_bytes == (4096 + 50) + (50 + 4096 + 6144)
    assert r.placement == {s: {0: 0.5, 1: 0.5} for s in (1, 2, 3, 9)}


def test_numa_bind_puts_every_page_on_one_node_and_names_the_policy():
    r = numa.simulate(_numa_trace(), affinity=_by_op, policy=numa.bind(1), topology=_T2)
    # a on 0 reads everything remotely: 2·200 + 8192 and 200 + 100; b on 1 locally:
    # 100 + 50, 2·100 + 4096, 3·100 + 6144; c on 0: 200
    assert r.policy == "bind(1)"
    assert r.op_ns == [(3, "a", 0, pytest.approx(8592 + 300)), (4, "b", 1, pytest.approx(150 + 4296 + 6444)),
                       (5, "c", 0, pytest.approx(200))]
    assert (r.local_bytes, r.remote_bytes) == (100 + 8192 + 12288, 8192 + 100)


@dataclasses.dataclass
class _ByParity:
    """A policy object (not a function; a dataclass, so unhashable): odd storages on node 1."""

    def __call__(self, storage, writer_node, topology):
        return {storage % 2: 1.0}


def test_numa_a_policy_object_gets_the_storage_and_initial_placements_come_first():
    r = numa.simulate(_numa_trace(), affinity=_by_op, policy=_ByParity(), topology=_T2,
                      initial={2: {1: 1.0}})
    assert r.policy == "_ByParity()"  # no __name__: the policy as text
    assert r.placement == {2: {1: 1.0}, 1: {1: 1.0}, 3: {1: 1.0}, 9: {1: 1.0}}
    # every storage on node 1: the same charges as bind(1)
    assert [ns for *_, ns in r.op_ns] == [pytest.approx(8892), pytest.approx(10890), pytest.approx(200)]


def test_numa_an_affinity_outside_the_topology_names_the_op():
    with pytest.raises(ValueError, match=r"op 2 \(c\) on node 5"):
        numa.simulate(_numa_trace(), affinity=lambda i, e: 5 if e["op"] == "c" else 0, topology=_T2)


def test_numa_by_thread_puts_each_recorded_thread_on_the_next_node_of_the_given_topology():
    tr = _numa_trace(threads=(None, 111, 222))
    three = numa.Topology(nodes=3, local_latency_ns=100, remote_latency_ns=200, local_gbps=2, remote_gbps=1)
    ops = tr.filter("op")
    assert [numa.by_thread(tr)(i, e) for i, e in enumerate(ops)] == [0, 1, 0]       # 2 nodes by default
    assert [numa.by_thread(tr, three)(i, e) for i, e in enumerate(ops)] == [0, 1, 2]
    r = numa.simulate(tr, topology=three)                                             # affinity "thread"
    assert [node for _, _, node, _ in r.op_ns] == [0, 1, 2]


def test_affinity_score_sums_each_ops_frequency_on_the_node():
    tr = _numa_trace()
    weight = {"a": 1, "b": 10, "c": 100}

    def freq(i, e):
        return (i + 1) * weight[e["op"]]

    def all_on_0(i, e):
        return 0 if e["op"] else 1

    assert numa.affinity_score(tr, _by_op, 1, 1, freq) == 20       # op b (i = 1): 2 · 10
    assert numa.affinity_score(tr, _by_op, 1, 0, freq) == 1        # op a (i = 0): 1 · 1
    assert numa.affinity_score(tr, _by_op, 9, 0, freq) == 300      # op c (i = 2): 3 · 100
    assert numa.affinity_score(tr, all_on_0, 1, 0, freq) == 21     # a and b both
    assert numa.affinity_score(tr, all_on_0, 1, 0) == 2.0          # one per op by default
    assert numa.affinity_score(tr, all_on_0, 1, 1) == 0.0


def test_place_by_affinity_places_storages_used_only_as_inputs_and_breaks_ties_low():
    # 1: a on 0 and b on 1 (a tie: node 0); 2: written on 0, read on 1 (tie: 0); 3: b on 1; 9: c on 0
    assert numa.place_by_affinity(_numa_trace(), _by_op, _T2) == {1: {0: 1.0}, 2: {0: 1.0}, 3: {1: 1.0},
                                                                  9: {0: 1.0}}


# -- unified memory: the page state machine and simulate(), on the hand-written trace -------------
_LINK = unified.Link(page_bytes=4096, fault_us=10.0, gbps=1.0)   # a page: 10 µs fault + 4.096 µs transfer
_DEVICE = {"a": "cpu", "b": "gpu", "c": "gpu"}


def _device(i, e):
    return _DEVICE[e["op"]]


def test_unified_simulate_faults_in_each_page_touched_from_the_other_device():
    um = unified.simulate(_numa_trace(), _device, link=_LINK)
    # a on the CPU first-touches 1 (2 pages) and 2 (1 page); b on the GPU reads both: 1 + 2 faults;
    # 3 (3 pages) and 9 (0 B: 1 page) are first touched on the GPU, at no cost
    assert (um.faults, um.migrations, um.prefetched) == (3, 3, 0)
    assert um.us == pytest.approx(3 * 14.096)
    assert um.log == [("fault", 2, 1, "gpu", pytest.approx(14.096)), ("fault", 1, 2, "gpu", pytest.approx(28.192))]
    assert um.where == {(1, 0): "gpu", (1, 1): "gpu", (2, 0): "gpu", (3, 0): "gpu", (3, 1): "gpu",
                        (3, 2): "gpu", (9, 0): "gpu"}   # nothing for c's missing output


def test_unified_simulate_with_prefetch_moves_the_inputs_ahead_without_faults():
    um = unified.simulate(_numa_trace(), _device, prefetch=True, link=_LINK)
    # a's inputs were never touched: nothing to move; b prefetches 2 (1 page) and 1 (2 pages)
    assert (um.faults, um.migrations, um.prefetched) == (0, 3, 3)
    assert um.us == pytest.approx(3 * 4.096)
    assert um.log == [("prefetch", 2, 1, "gpu", pytest.approx(4.096)), ("prefetch", 1, 2, "gpu", pytest.approx(8.192))]


def test_unified_prefetch_leaves_the_pages_on_the_device_so_the_other_one_faults():
    um = unified.UnifiedMemory(_LINK)
    assert um.prefetch("x", 5000, "gpu") == 0.0          # never touched: placed, nothing moved
    assert um.where == {("x", 0): "gpu", ("x", 1): "gpu"}
    assert um.touch("x", 5000, "cpu") == pytest.approx(2 * 14.096)
    assert (um.faults, um.log) == (2, [("fault", "x", 2, "cpu", pytest.approx(2 * 14.096))])
    assert um.pages(1) == 1 and um.pages(4096) == 1 and um.pages(4097) == 2


# -- workload: requests, backing bytes, replay_into -------------------------------------------------
def test_requests_keeps_the_frees_of_storages_allocated_in_the_trace_only():
    tr = mt.memory.Trace([{"kind": "alloc", "storage": 1, "nbytes": 100, "tag": "activation"},
                          {"kind": "alloc", "storage": 2, "nbytes": 64, "tag": "tensor"},
                          {"kind": "free", "storage": 1, "nbytes": 100},
                          {"kind": "free", "storage": 7, "nbytes": 8},     # allocated before the trace
                          {"kind": "alloc", "storage": 3, "nbytes": 32, "tag": "gradient"}])
    assert workload.requests(tr) == [("alloc", 1, 100, "activation"), ("alloc", 2, 64, "tensor"), ("free", 1),
                                     ("alloc", 3, 32, "gradient")]


def test_backing_bytes_of_a_pool_and_an_arena():
    pool = mt.memory.Pool(name="backing pool")
    big = pool.alloc(2 << 20)                              # above max_block: a direct block, no slab
    assert workload.backing_bytes(pool) == 2 << 20
    pool.free(big)
    assert workload.backing_bytes(mt.memory.Arena(capacity=4096, name="backing arena")) == 4096


def test_replay_into_an_arena_records_its_used_bytes_and_passes_the_tags():
    steps = [("alloc", 1, 100, "activation"), ("alloc", 2, 64, "tensor")]
    arena = mt.memory.Arena(capacity=4096, name="replay arena")
    r = workload.replay_into(arena, steps)
    assert r.name == arena.name and arena.name.startswith("replay arena")
    assert r.requested == [100, 164] and r.reserved == [100, 128 + 64] and r.backing == [4096, 4096]
    assert workload.replay_into(mt.memory.Arena(capacity=4096), steps, name="named").name == "named"
    with mt.trace() as tr:
        workload.replay_into(mt.memory.BestFit(name="replay fit"), steps)
    assert [e["tag"] for e in tr.filter("fit_alloc")] == ["activation", "tensor"]


# -- Arena: growth up to max_capacity, its events and stats ---------------------------------------
def test_arena_grows_by_half_then_shrinks_the_last_chunk_to_fit_max_capacity():
    with mt.trace() as tr:
        arena = mt.memory.Arena(capacity=256, alignment=64, growth=1.5, max_capacity=512, name="grow arena")
        blocks = [arena.alloc(50), arena.alloc(100)]   # chunk 0: [0, 50) and [64, 164): 14 B of padding
        blocks.append(arena.alloc(100))    # 192 + 100 > 256: a chunk of max(128, 0.5 · 256) = 128 B
        blocks.append(arena.alloc(100))    # a chunk of 0.5 · 384 = 192 B would pass 512: the 128 B left
        with pytest.raises(mt.memory.OutOfMemoryError):
            arena.alloc(10)                # no room at all is left
    assert [(b.chunk, b.offset, b.padding) for b in blocks] == [(0, 0, 0), (0, 64, 14), (1, 0, 0), (2, 0, 0)]
    assert [_fields(e) for e in tr.filter("arena_chunk")] == [
        {"kind": "arena_chunk", "arena": arena.name, "chunk": i, "nbytes": n, "growth": i > 0}
        for i, n in ((0, 256), (1, 128), (2, 128))]
    s = arena.stats()
    assert s["name"] == arena.name and s["capacity"] == 512 and s["used"] == 256 + 128 + 100
    assert (s["requested"], s["high_water"], s["padding"], s["growths"], s["chunks"], s["allocations"],
            s["resets"], s["live_blocks"]) == (350, 484, 14, 2, 3, 4, 0, 4)
    arena.reset()
    s = arena.stats()
    assert (s["requested"], s["padding"], s["resets"], s["live_blocks"], s["used"]) == (0, 0, 1, 0, 0)


# -- Pool: direct blocks and deferred release ------------------------------------------------------
def test_pool_direct_blocks_are_whole_buffers_counted_one_by_one():
    pool = mt.memory.Pool(name="direct pool")
    big = [pool.alloc(2 << 20, "tensor"), pool.alloc(3 << 20)]   # above max_block (1 MiB)
    assert [(b.chunk, b.offset, b.padding, b.size, b.tag) for b in big] == [
        (-1, 0, 0, 2 << 20, "tensor"), (-1, 0, 0, 3 << 20, "")]
    assert pool.stats()["direct_allocations"] == 2
    for b in big:
        pool.free(b)


def test_pool_epochs_release_held_blocks_after_defer_epochs_and_say_so():
    pool = mt.memory.Pool(name="epoch pool", defer_epochs=2)
    a, b = pool.alloc(100), pool.alloc(100)
    with mt.trace() as tr:
        pool.free(a)                  # held since epoch 0
        assert pool.advance_epoch() == 1   # 1 epoch later: still held
        pool.free(b)                  # held since epoch 1
        assert pool.advance_epoch() == 2   # a's 2 epochs are up
        assert pool.advance_epoch() == 3   # and b's
    assert [_fields(e) for e in tr.filter("pool_epoch")] == [
        {"kind": "pool_epoch", "allocator": pool.name, "epoch": 1, "held": 1, "released": []},
        {"kind": "pool_epoch", "allocator": pool.name, "epoch": 2, "held": 1, "released": [a.id]},
        {"kind": "pool_epoch", "allocator": pool.name, "epoch": 3, "held": 0, "released": [b.id]}]


# -- the pool's thread caches, on one thread -------------------------------------------------------
def test_thread_cache_refills_hits_and_direct_blocks_counted_on_one_thread():
    import threading

    pool = mt.memory.Pool(name="cached pool", thread_cache=4)    # batch 2
    c104 = pool.size_class(100)
    with mt.trace() as tr:
        a = pool.alloc(100, "t1")      # miss: a lock for the new cache, one for the refill: 3 blocks of 104
        b = pool.alloc(100, "t2")      # a hit in the cache
        d = pool.alloc(2 << 20, "big")  # above max_block: a direct block, under the lock
        z = pool.alloc(0, "zero")      # a 0-byte request is fine (class 64: another refill)
    me = threading.get_ident()
    assert [(x.padding, x.tag, x.generation, x.thread, x.live) for x in (a, b, d, z)] == [
        (0, "t1", 0, me, True), (0, "t2", 0, me, True), (0, "big", 0, me, True), (0, "zero", 0, me, True)]
    assert (a.size_class, a.size, d.size, d.nbytes) == (c104, 104, 2 << 20, 2 << 20)
    assert [e["reused"] for e in tr.filter("alloc_block")] == [False, True, False, False]
    assert [(e["action"], e["size_class"], e["blocks"], e["cached"], e["lock_acquisitions"])
            for e in tr.filter("thread_cache")] == [("refill", c104, 2, 208, 2), ("refill", 0, 2, 104 + 2 * 64, 4)]  # b took one of the 104s
    assert pool.reserved == 3 * 104 + (2 << 20) + 3 * 64 and pool.peak == pool.reserved
    assert pool.threads.stats() == {"threads": 1, "lock_acquisitions": 4, "cache_hits": 1, "reused": 1,
                                    "thread_allocations": 4, "cross_thread_frees": 0, "cached_blocks": 3,
                                    "cached_bytes": 104 + 2 * 64}
    for x in (a, b, d, z):
        pool.free(x)
    assert a.live is False and pool.threads.caches[0].frees == 4
    assert pool.threads.lock_acquisitions == 5                 # only the direct block took the lock
    assert pool.threads.flush_all() == 6                       # 3 of 104 (a, b, one spare), 3 of 64
    with mt.trace() as tr:
        again = pool.alloc(100)        # refilled from the central free list: reused bytes
    assert [e["reused"] for e in tr.filter("alloc_block")] == [True]
    pool.free(again)
    other = mt.memory.Pool(name="other cached pool", thread_cache=4)
    with pytest.raises(mt.memory.AllocatorError, match="not allocated by this pool"):
        other.free(pool.alloc(100))


def test_thread_cache_batches_and_deferred_release():
    from microtorch.memory.thread_cache import ThreadCaches

    pool = mt.memory.Pool(name="batch pool", thread_cache=1)   # batch max(1, 1 // 2) = 1
    assert pool.threads.batch == 1 and ThreadCaches(pool, 4, batch=3).batch == 3
    pool.alloc(100)                    # 1 + 1 blocks: one cached
    assert pool.threads.stats()["cached_blocks"] == 1 and pool.threads.lock_acquisitions == 2
    deferred = mt.memory.Pool(name="deferred cached pool", thread_cache=4, defer_epochs=1)
    x = deferred.alloc(100)
    deferred.free(x)                   # deferred release bypasses the cache: held centrally
    assert len(deferred.held) == 1 and deferred.threads.stats()["cached_blocks"] == 2


def test_a_full_thread_cache_flushes_its_oldest_block_under_one_lock():
    pool = mt.memory.Pool(name="flushing pool", thread_cache=1)   # capacity 1, batch 1
    c = pool.size_class(100)
    x1 = pool.alloc(100)               # miss: one block for x1, one (k) into the cache
    x2 = pool.alloc(100)               # a hit: k
    x3 = pool.alloc(100)               # miss again: one for x3, one (l) into the cache
    before = pool.threads.lock_acquisitions
    with mt.trace() as tr:
        pool.free(x1)                  # the cache holds [l, x1]: 2 > 1, so l (the oldest) goes central
    assert pool.threads.lock_acquisitions == before + 1
    assert [(e["action"], e["size_class"], e["blocks"], e["cached"], e["lock_acquisitions"])
            for e in tr.filter("thread_cache")] == [("flush", c, 1, 104, before + 1)]
    y = pool.alloc(100)                # a hit: the block left in the cache is x1's
    assert (y.chunk, y.offset) == (x1.chunk, x1.offset)
    for b in (x2, x3, y):
        pool.free(b)


# -- Buddy: limits, orders, direct blocks, events ----------------------------------------------------
def test_buddy_refuses_what_is_not_a_power_of_two_and_accepts_the_smallest_ones():
    for what, kwargs in (("heap_bytes", {"heap_bytes": 1000}), ("min_block", {"min_block": 48}),
                         ("alignment", {"alignment": 0})):
        with pytest.raises(ValueError, match=f"Buddy {what} must be a power of two"):
            mt.memory.Buddy(**kwargs)
    tiny = mt.memory.Buddy(heap_bytes=4, min_block=1, alignment=1)   # 1 = 2⁰ is a power of two
    assert (tiny.order_for(0), tiny.order_for(1), tiny.order_for(2), tiny.order_for(3)) == (0, 0, 1, 2)
    assert mt.memory.Buddy(heap_bytes=64, min_block=64).alloc(1).size == 64   # min_block == heap_bytes is fine
    assert mt.memory.Buddy().name == "buddy"


def test_buddy_blocks_in_heaps_and_direct_blocks_and_their_events():
    bud = mt.memory.Buddy(heap_bytes=1024, min_block=64, name="event buddy")
    assert bud.order_for(1024) == 10 and bud.order_for(1025) is None
    with mt.trace() as tr:
        small = bud.alloc(0, "zero")      # min_block: order 6
        whole = bud.alloc(1024, "heap")   # exactly a heap: a second heap, not a direct block
        big = [bud.alloc(3000, "big"), bud.alloc(2000)]
    assert [(b.chunk, b.offset, b.nbytes, b.size, b.padding, b.tag, b.size_class) for b in (small, whole, *big)] == [
        (0, 0, 0, 64, 0, "zero", 6), (1, 0, 1024, 1024, 0, "heap", 10), (-1, 0, 3000, 3000, 0, "big", None),
        (-1, 0, 2000, 2000, 0, "", None)]
    big[0].array(np.uint8)[:] = 1     # a direct block's bytes are real
    assert [(e["block"], e["order"], e["nbytes"], e["size"], e["min_order"], e["heaps"]) for e in tr.filter("buddy_alloc")] == [
        (small.id, 6, 0, 64, 6, 1), (whole.id, 10, 1024, 1024, 6, 2), (big[0].id, None, 3000, 3000, 6, 2),
        (big[1].id, None, 2000, 2000, 6, 2)]
    s = bud.stats()
    assert (s["allocations"], s["direct_allocations"], s["peak"]) == (4, 2, 64 + 1024 + 5000)
    bud.free(big[0])
    assert big[0].live is False


# -- Block.__repr__, Pool.stats with thread caches ----------------------------------------------------
def test_block_repr_names_tag_place_size_and_whether_it_is_live():
    bf = mt.memory.BestFit(heap_bytes=1024, round_to=64, name="repr fit")
    a, b = bf.alloc(100, "act"), bf.alloc(10)
    assert repr(a) == f"<Block #{a.id} act: 100 B at chunk 0 +0 (occupies 128 B), live>"
    assert repr(b) == f"<Block #{b.id} untagged: 10 B at chunk 0 +128 (occupies 64 B), live>"
    bf.free(a)
    assert repr(a) == f"<Block #{a.id} act: 100 B at chunk 0 +0 (occupies 128 B), dead>"


def test_pool_stats_with_thread_caches_count_the_threads_allocations_and_reuse():
    pool = mt.memory.Pool(name="stats cached pool", thread_cache=4)
    blocks = [pool.alloc(100), pool.alloc(100), pool.alloc(100)]   # a refill, then two cache hits
    s = pool.stats()
    assert (s["name"], s["allocations"], s["reuse_hits"], s["cache_hits"]) == (pool.name, 3, 2, 2)
    for b in blocks:
        pool.free(b)


def test_arena_describes_itself_as_plain_data_for_a_trace_baseline():
    arena = mt.memory.Arena(capacity=256, alignment=64, name="described arena")
    arena.alloc(50)
    arena.alloc(100)                   # at 64: 14 B of padding, 164 B used
    assert arena.describe() == {"name": arena.name, "kind": "arena", "chunks": [256], "generation": 0,
                                "resets": 0, "used": 164, "padding": 14}
    arena.reset()
    assert arena.describe() == {"name": arena.name, "kind": "arena", "chunks": [256], "generation": 1,
                                "resets": 1, "used": 0, "padding": 0}


def test_node_arena_defaults_1024_records_growing_by_half():
    arena = NodeArena()
    assert (arena.name, arena.capacity, arena.high_water, arena.top, arena.live) == ("node arena", 1024, 0, 0, 0)
    ops = [_Op() for _ in range(1025)]
    for op in ops:
        arena.new(op)
    assert arena.capacity == 1024 + 512 and arena.growths == 1 and arena.high_water == 1025
