"""Arena (bump allocator): unit tests plus a hypothesis state machine over alloc/free/reset.

The state machine keeps its own model of the bump pointer (chunk sizes, current chunk, top)
and predicts where every block must land, when the arena must grow and by how much, and
when it must run out of memory. After every step it checks the invariants a student relies
on: live blocks never overlap, offsets and addresses are aligned, chunks never move (bytes
written into a block before a growth read back the same after it), ``used ≤ capacity``,
``high_water ≥ used``, and blocks from before a ``reset()`` refuse to be touched.
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from microtorch.memory.arena import Arena
from microtorch.memory.block import AllocatorError, OutOfMemoryError, align_up
from microtorch.memory.pool import Pool


def pattern(block_id: int, n: int) -> np.ndarray:
    """Bytes unique to a block (so two overlapping blocks cannot both keep their pattern)."""
    return ((np.arange(n, dtype=np.uint32) * 131 + block_id * 7919) % 251).astype(np.uint8)


def address(block) -> int:
    return block.memory.ctypes.data


# -- construction ---------------------------------------------------------------------------
@pytest.mark.parametrize("alignment", [0, -4, 3, 6, 48, 100])
def test_non_power_of_two_alignment_is_rejected_naming_the_value(alignment):
    with pytest.raises(ValueError, match=rf"power of two.*got {alignment}\b"):
        Arena(capacity=256, alignment=alignment)


@pytest.mark.parametrize("alignment", [1, 2, 4, 8, 16, 64, 128, 4096])
def test_power_of_two_alignments_are_accepted_and_honoured(alignment):
    arena = Arena(capacity=8192, alignment=alignment)
    blocks = [arena.alloc(n) for n in (1, 3, 7, 10, 33)]
    for b in blocks:
        assert b.offset % alignment == 0
        assert address(b) % alignment == 0
        assert address(b) == arena.chunks[b.chunk].ctypes.data + b.offset


@pytest.mark.parametrize("kwargs, match", [
    ({"capacity": 0}, "capacity must be positive"),
    ({"capacity": -5}, "capacity must be positive"),
    ({"growth": 1.0}, "growth factor must be > 1"),
    ({"growth": 0.5}, "growth factor must be > 1"),
    ({"capacity": 1024, "max_capacity": 512}, "max_capacity"),
    # 1000 B rounds up to a 1024-byte chunk, which already passes max_capacity=1000
    ({"capacity": 1000, "max_capacity": 1000, "alignment": 64}, "1024"),
])
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Arena(**kwargs)


def test_negative_request_is_rejected():
    with pytest.raises(ValueError, match="negative"):
        Arena(capacity=256).alloc(-1)


# -- bump allocation ------------------------------------------------------------------------
def test_blocks_follow_each_other_with_alignment_padding():
    arena = Arena(capacity=1024, alignment=64)
    a, b, c = arena.alloc(10, "activation"), arena.alloc(100, "gradient"), arena.alloc(0, "node")
    assert (a.chunk, a.offset, a.padding, a.size) == (0, 0, 0, 10)
    assert (b.chunk, b.offset, b.padding, b.size) == (0, 64, 54, 154)
    assert (c.chunk, c.offset, c.padding, c.size) == (0, 192, 28, 28)
    assert (a.tag, b.tag, c.tag) == ("activation", "gradient", "node")
    assert arena.used == 192 and arena.requested == 110 and arena.padding == 82
    assert arena.utilization == pytest.approx(110 / 1024)
    assert c.array(np.uint8).size == 0
    s = arena.stats()
    assert (s["live_blocks"], s["allocations"], s["chunks"], s["growths"]) == (3, 3, 1, 0)


def test_block_array_is_a_typed_view_of_the_blocks_bytes():
    arena = Arena(capacity=1024, alignment=64)
    b = arena.alloc(8 * 5)
    x = b.array(np.float64)
    assert x.shape == (5,)
    x[:] = [1, 2, 3, 4, 5]
    assert np.shares_memory(x, arena.chunks[0])
    assert b.array(np.float64, 3).tolist() == [1.0, 2.0, 3.0]
    assert arena.chunks[0][: 8 * 5].view(np.float64).tolist() == [1, 2, 3, 4, 5]


def test_block_array_refuses_more_elements_than_the_block_holds():
    arena = Arena(capacity=1024)
    b = arena.alloc(40)
    with pytest.raises(ValueError, match="holds 40"):
        b.array(np.float64, 6)
    with pytest.raises(ValueError):
        b.array(np.float64, -1)


# -- growth ---------------------------------------------------------------------------------
@pytest.mark.parametrize("growth", [1.25, 1.5, 2.0, 3.0])
def test_growth_adds_growth_minus_one_times_the_capacity(growth):
    arena = Arena(capacity=1024, alignment=64, growth=growth)
    arena.alloc(1000)
    arena.alloc(100)  # does not fit in chunk 0's tail: chain chunk 1
    assert arena.growths == 1
    assert arena.chunks[1].nbytes == align_up(int(1024 * (growth - 1)), 64)
    assert arena.capacity == 1024 + arena.chunks[1].nbytes
    cap = arena.capacity
    arena.alloc(arena.chunks[1].nbytes)  # cannot fit behind the 100 bytes: chunk 2
    assert arena.chunks[2].nbytes == max(align_up(arena.chunks[1].nbytes, 64), align_up(int(cap * (growth - 1)), 64))


def test_a_large_request_gets_a_chunk_at_least_its_size():
    arena = Arena(capacity=256, alignment=64, growth=1.5)
    b = arena.alloc(5000)
    assert (b.chunk, b.offset) == (1, 0)
    assert arena.chunks[1].nbytes == align_up(5000, 64)
    assert arena.used == 256 + 5000  # the skipped tail of chunk 0 counts as used until reset


def test_growth_never_moves_existing_chunks_or_blocks():
    arena = Arena(capacity=256, alignment=16, growth=1.5)
    first = arena.chunks[0]
    first_address = first.ctypes.data
    blocks = [arena.alloc(40 + i) for i in range(60)]  # grows many times
    assert arena.growths >= 4
    for b in blocks:
        b.array(np.uint8)[:] = pattern(b.id, b.nbytes)
    blocks += [arena.alloc(3000) for _ in range(3)]  # grow again after writing
    assert arena.chunks[0] is first and first.ctypes.data == first_address
    for b in blocks[:60]:
        assert np.array_equal(b.array(np.uint8), pattern(b.id, b.nbytes))
        assert address(b) == arena.chunks[b.chunk].ctypes.data + b.offset


# -- max_capacity / out of memory -------------------------------------------------------------
def test_out_of_memory_message_names_requested_used_and_capacity():
    arena = Arena(capacity=256, alignment=64, growth=1.5, max_capacity=512, name="step")
    arena.alloc(200)
    arena.alloc(200)  # chunk 1 (256 B, the rest of max_capacity)
    assert arena.capacity == 512
    before = arena.stats()
    with pytest.raises(OutOfMemoryError) as info:
        arena.alloc(100)
    msg = str(info.value)
    assert isinstance(info.value, AllocatorError)
    assert "requested 100 bytes" in msg
    assert f"used {arena.used}" in msg and f"capacity {arena.capacity}" in msg
    assert "max_capacity=512" in msg and msg.startswith(f"{arena.name}:")  # "step", or "step #2" if another is alive
    assert arena.stats() == before  # a failed request changes nothing


def test_max_capacity_is_usable_up_to_the_limit():
    # chunks 1024 + 512, then the next 1.5x step (768) would pass 2000: the arena chains
    # the 448 aligned bytes that are left instead of refusing while below its limit.
    arena = Arena(capacity=1000, alignment=64, growth=1.5, max_capacity=2000)
    n = 0
    with pytest.raises(OutOfMemoryError):
        while True:
            arena.alloc(64)
            n += 1
    assert [c.nbytes for c in arena.chunks] == [1024, 512, 448]
    assert arena.capacity == 1984 <= 2000
    assert n == 1984 // 64


def test_failed_request_leaves_the_arena_unchanged():
    arena = Arena(capacity=1024, alignment=64, growth=1.5, max_capacity=1536)
    arena.alloc(1000)
    arena.alloc(500)  # chunk 1 (512)
    arena.reset()
    arena.alloc(600)  # chunk 0, 424 bytes of its tail left
    used = arena.used
    with pytest.raises(OutOfMemoryError):
        arena.alloc(600)  # fits neither chunk 0's tail nor chunk 1, cannot grow
    assert arena.used == used
    b = arena.alloc(300)  # still goes into chunk 0's tail, which the failed request did not skip
    assert (b.chunk, b.offset) == (0, 640)


# -- free / reset -----------------------------------------------------------------------------
def test_free_marks_dead_and_catches_misuse():
    arena, other = Arena(capacity=1024, name="a"), Arena(capacity=1024, name="b")
    b = arena.alloc(100)
    arena.free(b)
    assert not b.live and arena.requested == 0 and arena.used == 100  # bump arenas do not move the top back
    with pytest.raises(AllocatorError, match="use after free"):
        b.array(np.uint8)
    with pytest.raises(AllocatorError, match="double free"):
        arena.free(b)
    with pytest.raises(AllocatorError, match="foreign"):
        other.free(arena.alloc(8))
    with pytest.raises(AllocatorError, match="foreign"):
        arena.free(Pool().alloc(8))


def test_reset_keeps_capacity_and_invalidates_old_blocks():
    arena = Arena(capacity=256, alignment=64)
    old = [arena.alloc(100, "activation") for _ in range(5)]  # grows
    capacity, chunks, high = arena.capacity, list(arena.chunks), arena.high_water
    arena.free(old[0])
    arena.reset()
    assert arena.capacity == capacity and all(a is b for a, b in zip(arena.chunks, chunks))
    assert arena.used == 0 and arena.requested == 0 and arena.padding == 0
    assert arena.high_water == high and arena.resets == 1 and not arena.live_blocks
    for b in old:
        with pytest.raises(AllocatorError, match="use after reset"):
            b.array(np.uint8)
        arena.free(b)  # a stale block: freeing it is a no-op, even twice
        arena.free(b)
    new = arena.alloc(100)
    assert (new.chunk, new.offset) == (0, 0)
    assert address(new) == address(old[0])  # the same bytes really are handed out again
    assert arena.requested == 100  # the stale frees above did not touch the new books
    with pytest.raises(AllocatorError, match="foreign"):
        Arena(capacity=64).free(old[1])  # a stale block is still foreign elsewhere


def test_repr_and_stats_are_consistent():
    arena = Arena(capacity=512, name="step")
    arena.alloc(100)
    text = repr(arena)
    assert "step" in text and "1 live blocks" in text and "/512 B" in text


# -- the state machine ------------------------------------------------------------------------
TAGS = st.sampled_from(["activation", "gradient", "node", "saved", ""])


class ArenaMachine(RuleBasedStateMachine):
    """Random alloc/free/reset against a model that predicts every block's chunk and offset."""

    @initialize(capacity=st.integers(1, 512), alignment=st.sampled_from([1, 2, 4, 8, 16, 64, 128]),
                growth=st.sampled_from([1.25, 1.5, 2.0, 3.0]), limit=st.sampled_from([None, 1, 2, 3]),
                extra=st.integers(0, 400))
    def setup(self, capacity, alignment, growth, limit, extra):
        first = align_up(capacity, alignment)
        max_capacity = None if limit is None else first * limit + extra
        self.arena = Arena(capacity=capacity, alignment=alignment, growth=growth, max_capacity=max_capacity)
        self.other = Arena(capacity=128, name="other")
        self.a, self.g, self.max = alignment, growth, max_capacity
        # the model
        self.sizes = [first]
        self.cur = self.top = self.before = 0
        self.padding = 0
        self.high = 0
        self.generation = 0
        self.live: dict[int, tuple] = {}  # id -> (block, pattern)
        self.freed: list = []  # freed in the current generation
        self.stale: list = []  # from before a reset
        self.known_chunks = [(c, c.ctypes.data) for c in self.arena.chunks]

    # -- prediction -------------------------------------------------------------------------
    def predict(self, n: int):
        """(chunk, offset, new chunk sizes) for a request of n bytes, or None for out of memory."""
        sizes, i, top, before = list(self.sizes), self.cur, self.top, self.before
        while True:
            if i == len(sizes):
                cap, need = sum(sizes), align_up(n, self.a)
                new = max(need, align_up(int(cap * (self.g - 1)), self.a))
                if self.max is not None and cap + new > self.max:
                    new = (self.max - cap) // self.a * self.a
                    if new < need:
                        return None
                sizes.append(new)
            start = align_up(top, self.a)
            if start + n <= sizes[i]:
                return i, start, top, before, sizes
            before += sizes[i]
            i, top = i + 1, 0

    @rule(nbytes=st.one_of(st.integers(0, 64), st.integers(0, 900)), tag=TAGS)
    def alloc(self, nbytes, tag):
        arena = self.arena
        predicted = self.predict(nbytes)
        if predicted is None:
            before = arena.stats()
            with pytest.raises(OutOfMemoryError) as info:
                arena.alloc(nbytes, tag)
            msg = str(info.value)
            assert f"requested {nbytes} bytes" in msg
            assert f"used {arena.used} of capacity {arena.capacity} bytes" in msg
            assert f"max_capacity={self.max}" in msg
            assert arena.stats() == before, "a failed request must leave the arena unchanged"
            event("out of memory")
            return
        chunk, offset, top, before, sizes = predicted
        block = arena.alloc(nbytes, tag)
        assert (block.chunk, block.offset) == (chunk, offset)
        assert block.nbytes == nbytes and block.tag == tag and block.live
        assert block.padding == offset - top and block.size == nbytes + block.padding
        assert block.generation == self.generation
        assert [c.nbytes for c in arena.chunks] == sizes
        for c in arena.chunks[len(self.known_chunks):]:
            self.known_chunks.append((c, c.ctypes.data))
            event("grew")
        if block.chunk < len(self.sizes) - 1 or block.chunk < self.cur:
            event("allocated in an older chunk")
        self.sizes, self.cur, self.top, self.before = sizes, chunk, offset + nbytes, before
        self.padding += block.padding
        self.high = max(self.high, self.before + self.top)
        data = pattern(block.id, nbytes)
        block.array(np.uint8)[:] = data
        self.live[block.id] = (block, data)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data):
        key = data.draw(st.sampled_from(sorted(self.live)))
        block, _ = self.live.pop(key)
        used, requested = self.arena.used, self.arena.requested
        self.arena.free(block)
        assert not block.live
        assert self.arena.requested == requested - block.nbytes
        assert self.arena.used == used  # freeing one block never moves the top
        self.freed.append(block)
        with pytest.raises(AllocatorError, match="use after free"):
            block.array(np.uint8)

    @precondition(lambda self: self.freed)
    @rule(data=st.data())
    def double_free(self, data):
        block = data.draw(st.sampled_from(self.freed))
        before = self.arena.stats()
        with pytest.raises(AllocatorError, match="double free"):
            self.arena.free(block)
        assert self.arena.stats() == before

    @precondition(lambda self: self.stale)
    @rule(data=st.data())
    def touch_or_free_stale(self, data):
        block = data.draw(st.sampled_from(self.stale))
        event("touched a stale block")
        with pytest.raises(AllocatorError, match="use after reset"):
            block.array(np.uint8)
        before = self.arena.stats()
        self.arena.free(block)  # no-op
        assert self.arena.stats() == before and not block.live

    @rule(n=st.integers(0, 64))
    def free_foreign(self, n):
        foreign = self.other.alloc(n)
        before = self.arena.stats()
        with pytest.raises(AllocatorError, match="foreign"):
            self.arena.free(foreign)
        assert self.arena.stats() == before and foreign.live
        if self.live:
            mine = self.live[min(self.live)][0]
            with pytest.raises(AllocatorError, match="foreign"):
                self.other.free(mine)
            assert mine.live
        self.other.reset()

    @rule()
    def reset(self):
        arena = self.arena
        capacity, high = arena.capacity, arena.high_water
        arena.reset()
        self.generation += 1
        assert arena.generation == self.generation
        assert arena.capacity == capacity and arena.high_water == high
        assert arena.used == 0 and arena.requested == 0 and not arena.live_blocks
        self.stale += [b for b, _ in self.live.values()] + self.freed
        assert not any(b.live for b in self.stale)
        self.live.clear()
        self.freed = []
        self.cur = self.top = self.before = self.padding = 0

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def books_agree_with_the_model(self):
        arena = self.arena
        assert arena.capacity == sum(self.sizes)
        assert arena.used == self.before + self.top <= arena.capacity
        assert arena.high_water == self.high >= arena.used
        assert arena.requested == sum(b.nbytes for b, _ in self.live.values())
        assert arena.padding == self.padding
        assert set(arena.live_blocks) == set(self.live)
        if self.max is not None:
            assert arena.capacity <= self.max

    @invariant()
    def live_blocks_are_aligned_and_disjoint(self):
        ranges = []
        for block, _ in self.live.values():
            assert block.offset % self.a == 0
            assert block.offset + block.nbytes <= self.arena.chunks[block.chunk].nbytes
            if block.nbytes:  # numpy gives every empty slice its base's address, so skip 0-byte blocks
                assert address(block) % self.a == 0
                assert address(block) == self.arena.chunks[block.chunk].ctypes.data + block.offset
                ranges.append((block.chunk, block.offset, block.offset + block.nbytes))
        ranges.sort()
        for (c1, _, end1), (c2, start2, _) in zip(ranges, ranges[1:]):
            assert c1 != c2 or end1 <= start2, "two live blocks overlap"

    @invariant()
    def chunks_never_move(self):
        for i, (chunk, addr) in enumerate(self.known_chunks):
            assert self.arena.chunks[i] is chunk and chunk.ctypes.data == addr

    @invariant()
    def live_patterns_survive(self):
        for block, data in self.live.values():
            assert np.array_equal(block.array(np.uint8), data)


ArenaMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestArenaMachine = ArenaMachine.TestCase
