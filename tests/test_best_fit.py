"""The best-fit allocator: split, coalesce, and reuse across changing shapes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from microtorch.memory.best_fit import BestFit
from microtorch.memory.block import AllocatorError


def test_best_fit_takes_the_smallest_block_that_fits_and_splits_the_rest():
    a = BestFit(heap_bytes=8192, round_to=512)
    x, y, z = a.alloc(1000), a.alloc(3000), a.alloc(500)
    assert [(b.offset, b.size) for b in (x, y, z)] == [(0, 1024), (1024, 3072), (4096, 512)]
    a.free(x)  # free: [0, 1024) and [4608, 8192)
    w = a.alloc(600)  # best fit is the 1024-byte hole, not the 3584-byte tail
    assert (w.offset, w.size) == (0, 1024)  # 600 rounds up to 1024: the hole fits exactly
    a.free(w)
    v = a.alloc(400)
    assert (v.offset, v.size) == (0, 512) and (0, 512, 512) in a.free_blocks()


def test_freeing_coalesces_with_both_neighbours():
    a = BestFit(heap_bytes=4096, round_to=512)
    blocks = [a.alloc(512) for _ in range(8)]
    for b in blocks[::2]:
        a.free(b)
    assert a.merges == 0 and len(a.free_blocks()) == 4
    a.free(blocks[1])  # joins [0,512) and [1024,1536)
    assert a.merges == 2 and (0, 0, 1536) in a.free_blocks()
    for b in blocks[3::2]:
        a.free(b)
    assert a.free_blocks() == [(0, 0, 4096)] and a.stats()["external_fragmentation"] == 0


def test_misuse_is_refused_and_large_requests_get_their_own_heap():
    a = BestFit(heap_bytes=4096)
    big = a.alloc(10_000)
    assert big.size == 10_240 and len(a.heaps) == 1 and a.heaps[0].nbytes == 10_240
    a.free(big)
    with pytest.raises(AllocatorError, match="double free"):
        a.free(big)
    with pytest.raises(AllocatorError, match="use after free"):
        big.array(np.uint8)
    with pytest.raises(ValueError, match="power of two"):
        BestFit(round_to=500)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 6000)), min_size=1, max_size=80))
def test_random_sequences_keep_blocks_apart_and_account_for_every_byte(ops):
    a = BestFit(heap_bytes=8192, round_to=256)
    live = []
    for is_free, n in ops:
        if is_free and live:
            a.free(live.pop(n % len(live)))
        else:
            live.append(a.alloc(n))
        spans = sorted((b.chunk, b.offset, b.offset + b.size) for b in live)
        assert all(p[0] != q[0] or p[2] <= q[1] for p, q in zip(spans, spans[1:]))
        free = a.free_blocks()
        # no two free blocks touch (they would have been merged)
        assert all(p[0] != q[0] or p[1] + p[2] < q[1] for p, q in zip(free, free[1:]))
        s = a.stats()
        assert s["reserved"] + s["free_bytes"] == s["heap_bytes"]
    for b in live:
        a.free(b)
    assert a.free_blocks() == [(h, 0, heap.nbytes) for h, heap in enumerate(a.heaps)]
