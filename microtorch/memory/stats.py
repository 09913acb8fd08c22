"""``mt.memory.stats()``: one dictionary of what the engine's memory machinery did."""
from __future__ import annotations

from . import placement
from .node_arena import nodes


def stats() -> dict:
    """Bytes in use now and at the peak (live storages), the pool's internal fragmentation
    and reuse, the step and node arenas' utilization and growths, how many allocations
    were made and how long one took on average.

    ``current_bytes``/``peak_bytes`` count the bytes of live storages (what tensors asked
    for); ``pool_reserved``/``arena_capacity`` what the allocators hold to serve them.
    ``mt.memory.reset_peak()`` restarts the peak from now.
    """
    pool = placement.pool()
    arenas = [a for a in (placement.step(),) if a is not None]
    allocations = pool.allocations + nodes.allocations + sum(a.allocations for a in arenas)
    alloc_ns = pool.alloc_ns + sum(a.alloc_ns for a in arenas)
    p = pool.stats()
    out = {
        "current_bytes": placement.live_bytes,
        "peak_bytes": placement.peak_bytes,
        "pool_requested": p["requested"],
        "pool_reserved": p["reserved"],
        "pool_fragmentation": p["fragmentation"],
        "pool_peak_reserved": p["peak"],
        "pool_reuse_hits": p["reuse_hits"],
        "pool_direct_allocations": p["direct_allocations"],
        "pool_slab_bytes": p["slab_bytes"],
        "allocations": allocations,
        "mean_alloc_us": alloc_ns / allocations / 1000 if allocations else 0.0,
        "growths": nodes.growths + sum(a.growths for a in arenas),
        "node_arena_records": nodes.capacity,
        "node_arena_utilization": nodes.live / nodes.capacity,
        "node_arena_high_water": nodes.high_water,
    }
    for a in arenas:
        out["step_arena_capacity"] = a.capacity
        out["step_arena_utilization"] = a.utilization
        out["step_arena_high_water"] = a.high_water
    return out
