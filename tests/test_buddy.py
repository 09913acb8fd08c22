"""The buddy allocator: split and merge for real, and compared with the pool on one workload."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import microtorch as mt
from microtorch.memory.block import AllocatorError
from microtorch.memory.buddy import Buddy
from microtorch.memory.pool import Pool
from microtorch.memory.workload import replay_into, requests


def _ranges_disjoint(blocks):
    spans = sorted((b.chunk, b.offset, b.offset + b.size) for b in blocks if b.size_class is not None)
    return all(a[0] != b[0] or a[2] <= b[1] for a, b in zip(spans, spans[1:]))


def test_split_down_to_the_order_then_merge_back_to_one_heap():
    b = Buddy(heap_bytes=1024, min_block=64)
    x = b.alloc(100)  # 128 B: splits 1024 → 512 → 256 → 128
    assert (x.size, x.offset, x.size_class) == (128, 0, 7)
    assert b.splits == 3
    assert b.free_blocks() == [(0, 128, 7), (0, 256, 8), (0, 512, 9)]
    y = b.alloc(128)  # the buddy of x, no split
    assert (y.offset, b.splits) == (128, 3)
    b.free(x)
    assert b.merges == 0  # y is x's buddy and still live
    b.free(y)
    assert b.merges == 3 and b.free_blocks() == [(0, 0, 10)]


def test_buddy_address_is_offset_xor_size():
    b = Buddy(heap_bytes=4096, min_block=64)
    blocks = [b.alloc(64) for _ in range(64)]
    assert sorted(x.offset for x in blocks) == list(range(0, 4096, 64))
    for x in blocks[1::2]:
        b.free(x)
    assert b.merges == 0  # every other block is gone: no two free blocks are buddies
    assert b.stats()["external_fragmentation"] == pytest.approx(1 - 64 / 2048)
    for x in blocks[::2]:
        b.free(x)
    assert b.free_blocks() == [(0, 0, 12)] and b.stats()["external_fragmentation"] == 0


def test_internal_fragmentation_is_below_one_half_and_requests_past_the_heap_go_direct():
    b = Buddy(heap_bytes=1 << 16, min_block=64)
    for n in (65, 129, 1000, 4097, 40000):
        x = b.alloc(n)
        assert x.size == 1 << (n - 1).bit_length() and (x.size - n) / x.size < 0.5
    big = b.alloc(1 << 17)
    assert big.size_class is None and b.direct_allocations == 1
    b.free(big)
    assert big.memory is None


def test_bytes_are_real_and_misuse_is_refused():
    b = Buddy(heap_bytes=1024)
    x, y = b.alloc(256), b.alloc(256)
    x.array(np.float32)[:] = 1.0
    y.array(np.float32)[:] = 2.0
    assert x.array(np.float32).sum() == 64 and y.array(np.float32).sum() == 128
    assert not np.shares_memory(x.memory, y.memory)
    b.free(x)
    with pytest.raises(AllocatorError, match="double free"):
        b.free(x)
    with pytest.raises(AllocatorError, match="use after free"):
        x.array(np.float32)
    with pytest.raises(AllocatorError, match="not allocated by this buddy"):
        Buddy(heap_bytes=1024).free(y)
    with pytest.raises(ValueError, match="power of two"):
        Buddy(heap_bytes=1000)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 5000)), min_size=1, max_size=80))
def test_random_alloc_free_sequences_keep_blocks_apart_and_coalesce_fully(ops):
    b = Buddy(heap_bytes=8192, min_block=64)
    live = []
    for is_free, n in ops:
        if is_free and live:
            b.free(live.pop(n % len(live)))
        else:
            x = b.alloc(n)
            assert x.size >= n and x.offset % x.size == 0  # a block sits at a multiple of its size
            live.append(x)
        assert _ranges_disjoint(live)
        s = b.stats()
        assert s["reserved"] + s["free_bytes"] == s["heap_bytes"]  # every heap byte is in one place
    for x in live:
        b.free(x)
    assert b.free_blocks() == [(h, 0, b.max_order) for h in range(len(b.heaps))]


def _recorded_step():
    mt.manual_seed(0)
    model = mt.nn.MLP(64, [128, 96], 10)
    x, y = mt.randn(32, 64), mt.randint(0, 10, (32,))
    with mt.trace() as tr:
        mt.nn.functional.cross_entropy(model(x), y).backward()
    return tr


def test_pool_and_buddy_on_the_same_recorded_workload():
    steps = requests(_recorded_step())
    assert sum(s[0] == "alloc" for s in steps) > 10
    pool = replay_into(Pool(name="workload pool"), steps)
    buddy = replay_into(Buddy(heap_bytes=1 << 20), steps)
    # both saw the same requests, so the same requested bytes after every step
    assert pool.requested == buddy.requested
    # rounding: the pool's classes lose < 1/9, a power of two loses < 1/2, and here more than the pool
    assert pool.internal_fragmentation < 1 / 9
    assert pool.internal_fragmentation < buddy.internal_fragmentation < 0.5
    # every reserved byte lies in backing memory
    assert all(r <= k for r, k in zip(buddy.reserved, buddy.backing))
    assert all(r <= k for r, k in zip(pool.reserved, pool.backing))


def _recorded_buddy_run():
    b = Buddy(heap_bytes=1024, min_block=64, name="demo buddy")
    with mt.trace() as tr:
        x = b.alloc(100, "activation")
        y = b.alloc(300, "gradient")
        b.free(x)
        z = b.alloc(1500, "tensor")  # past the heap: direct
        b.free(y)
        b.free(z)
    return b, tr


def test_buddy_tree_replayed_from_the_trace_matches_the_allocator():
    from microtorch.viz import buddy as vb

    b, tr = _recorded_buddy_run()
    steps = [i for i, e in enumerate(tr.events) if e["kind"].startswith("buddy_")]
    after_y = vb.buddy_facts(tr, steps[1])  # x (order 7 at 0) and y (order 9 at 512) in use
    assert [(n.offset, n.order, n.state) for n in after_y.nodes] == [
        (0, 10, "split"), (0, 9, "split"), (0, 8, "split"), (0, 7, "in use"), (128, 7, "free"),
        (256, 8, "free"), (512, 9, "in use")]
    assert (after_y.requested, after_y.reserved) == (400, 640)
    after_free_x = vb.buddy_facts(tr, steps[2])  # x merged back up to the 512-byte half
    assert [(n.offset, n.order, n.state) for n in after_free_x.nodes] == [
        (0, 10, "split"), (0, 9, "free"), (512, 9, "in use")]
    assert vb.buddy_facts(tr, steps[3]).direct == [1500]
    end = vb.buddy_facts(tr)
    assert [(n.offset, n.order, n.state) for n in end.nodes] == [(0, 10, "free")]
    assert b.free_blocks() == [(0, 0, 10)]
    assert "order 9 (512 B) in use, 300 B asked (gradient)" in vb.describe(tr, steps[1])


def test_buddy_picture_draws_one_bar_per_tree_node():
    from matplotlib.patches import Rectangle

    from microtorch.viz import buddy as vb

    _, tr = _recorded_buddy_run()
    steps = [i for i, e in enumerate(tr.events) if e["kind"].startswith("buddy_")]
    fig = vb.render(tr, steps[1])
    bars = [p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle)]
    # 7 tree nodes; the two in use also draw their asked-for bytes
    assert len(bars) == 9
    widths = sorted(p.get_width() for p in bars)
    assert widths == sorted([1024, 512, 256, 128, 128, 256, 512, 100, 300])
    assert "2 in use" in fig._suptitle.get_text() and fig.description.startswith("Buddy tree")
