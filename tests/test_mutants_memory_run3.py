"""Tests that kill mutants mutmut left alive in microtorch/memory/ in the third run (issue #21).

Each test pins a behaviour some surviving mutant changed, with the expected values worked
out by hand from the allocator's rules (its docstring), not read back from the code under
test. The triage (which mutant, what it changed, which test kills it or why it is
equivalent) is summarised in tests/README.md. The first run's tests are in
tests/test_mutants_memory.py.
"""
import os

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import mapped
from microtorch.memory.node_arena import NodeArena


# -- Storage.__repr__ ---------------------------------------------------------------------------
def test_storage_repr_says_where_the_bytes_live_and_whether_they_are_live_freed_or_stale():
    pool = mt.memory.Pool(name="repr pool")
    with mt.memory.use_pool(pool):
        t = mt.zeros(3)                                   # 3 float32: 12 bytes in the pool
        s = t.storage
        assert repr(s) == f"<Storage #{s.id} 12 bytes in repr pool, refcount=1, version=0>"
        t.add_(1.0)                                       # one in-place write
        assert repr(s) == f"<Storage #{s.id} 12 bytes in repr pool, refcount=1, version=1>"
        del t                                             # the last holder goes: freed
        assert repr(s) == f"<Storage #{s.id} 12 bytes in repr pool, freed, version=1>"
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
