"""Placement: which allocator serves which allocation, plus the engine-wide byte counters.

Every storage is tagged with what it holds, and the tag decides where its bytes go:

==============  ==============================================================
``activation``  op results (forward and backward): the step arena inside
                ``with mt.memory.step_arena():``, else the pool
``gradient``    leaves' ``.grad``: the pool (they outlive a step)
``tensor``      tensors you create (``mt.tensor``, ``mt.randn``, ...): the pool
==============  ==============================================================

``use_heap()`` turns the allocators off (plain numpy arrays, freed by numpy) — the
baseline that benchmarks and notebooks compare against.
"""
from __future__ import annotations

import contextlib

from .arena import Arena
from .pool import Pool

_pool = Pool(name="pool")
_step: Arena | None = None
_heap = False

# engine-wide counters: bytes held by live storages, and the highest that ever was
live_bytes = 0
peak_bytes = 0


def allocator_for(tag: str):
    """The allocator serving a storage tagged ``tag`` right now (None: plain numpy)."""
    if _heap:
        return None
    if _step is not None and tag == "activation":
        return _step
    return _pool


def pool() -> Pool:
    """The pool serving tensors outside step arenas."""
    return _pool


def step() -> Arena | None:
    """The step arena in use, if a ``step_arena()`` block is active."""
    return _step


def track_alloc(nbytes: int) -> None:
    global live_bytes, peak_bytes
    live_bytes += nbytes
    if live_bytes > peak_bytes:
        peak_bytes = live_bytes


def track_free(nbytes: int) -> None:
    global live_bytes
    live_bytes -= nbytes


def reset_peak() -> None:
    """Start measuring the peak again from the bytes live now (like ``torch.cuda.reset_peak_memory_stats``)."""
    global peak_bytes
    peak_bytes = live_bytes


@contextlib.contextmanager
def step_arena(arena: Arena | None = None, capacity: int = 1 << 20, **arena_options):
    """Put every activation made inside the block into an arena that is reset when it ends.

    ``with mt.memory.step_arena() as arena: loss = model(x); loss.backward(); ...`` —
    activations and backward temporaries are bump-allocated; at the end of the block the
    arena is reset in one step. A tensor from the step still referenced afterwards raises
    a use-after-reset error when touched. Pass the same ``arena`` every step to reuse its
    memory (it keeps its grown capacity); parameters and ``.grad`` stay in the pool.
    """
    global _step
    if arena is None:
        arena = Arena(capacity=capacity, name="step arena", **arena_options)
    previous, _step = _step, arena
    try:
        yield arena
    finally:
        _step = previous
        arena.reset()


@contextlib.contextmanager
def use_pool(new_pool: Pool):
    """Serve allocations outside step arenas from ``new_pool`` inside the block."""
    global _pool
    previous, _pool = _pool, new_pool
    try:
        yield new_pool
    finally:
        _pool = previous


@contextlib.contextmanager
def use_heap():
    """No allocators inside the block: tensors own plain numpy arrays (the baseline)."""
    global _heap
    previous, _heap = _heap, True
    try:
        yield
    finally:
        _heap = previous
