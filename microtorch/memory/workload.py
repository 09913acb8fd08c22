"""Workload: the allocations of a recorded program, replayed into any allocator.

A trace's ``alloc`` and ``free`` events are the program's requests to memory: "n bytes for
storage s", "storage s is gone". :func:`requests` reads them off as a list of
``("alloc", key, nbytes, tag)`` / ``("free", key)`` steps; :func:`replay_into` sends the same
steps to a fresh allocator (a :class:`~microtorch.memory.pool.Pool`, a
:class:`~microtorch.memory.buddy.Buddy`, a :class:`~microtorch.memory.arena.Arena` never
freed, ...) and measures what it did. So two allocators are compared on exactly the same
requests — real allocators doing real allocations, only the program around them is replayed.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def storage_sizes(trace) -> dict[int, int]:
    """Bytes of every storage the trace knows: allocated in it, or live when it started."""
    sizes = {}
    for e in trace.events:
        if e["kind"] == "baseline":
            sizes.update((s["storage"], s["nbytes"]) for s in e["storages"])
        elif e["kind"] == "alloc":
            sizes[e["storage"]] = e["nbytes"]
    return sizes


def requests(trace) -> list[tuple]:
    """The trace's allocation requests in order: ``("alloc", storage, nbytes, tag)`` and
    ``("free", storage)``. Storages alive at the end simply have no ``free``."""
    out, live = [], set()
    for e in trace.events:
        if e["kind"] == "alloc":
            out.append(("alloc", e["storage"], e["nbytes"], e["tag"]))
            live.add(e["storage"])
        elif e["kind"] == "free" and e["storage"] in live:
            out.append(("free", e["storage"]))
            live.discard(e["storage"])
    return out


@dataclass
class WorkloadResult:
    """What one allocator did with a workload: its numbers after each request, and at the peak."""

    name: str
    requested: list[int] = field(default_factory=list)  # bytes asked for by live blocks
    reserved: list[int] = field(default_factory=list)  # bytes those blocks occupy
    backing: list[int] = field(default_factory=list)  # bytes of backing memory the allocator holds

    @property
    def peak_reserved(self) -> int:
        return max(self.reserved, default=0)

    @property
    def peak_backing(self) -> int:
        return max(self.backing, default=0)

    @property
    def internal_fragmentation(self) -> float:
        """1 − requested/reserved at the reserved peak: bytes lost to rounding."""
        if not self.reserved:
            return 0.0
        i = self.reserved.index(self.peak_reserved)
        return 1 - self.requested[i] / self.reserved[i] if self.reserved[i] else 0.0

    @property
    def overhead(self) -> float:
        """Peak backing memory over peak requested bytes (1.0 = no byte wasted)."""
        peak = max(self.requested, default=0)
        return self.peak_backing / peak if peak else 1.0


def backing_bytes(allocator) -> int:
    """Bytes of backing memory an allocator holds right now (slabs, heaps, chunks, direct blocks)."""
    s = allocator.stats()
    if "backing_bytes" in s:  # buddy, best fit: they count their own
        return s["backing_bytes"]
    if "slab_bytes" in s:  # pool: slabs, plus its direct blocks
        return s["slab_bytes"] + s["direct_bytes"]
    return s["capacity"]  # arena


def replay_into(allocator, steps: list[tuple], name: str | None = None) -> WorkloadResult:
    """Send ``steps`` (from :func:`requests`) to ``allocator``; free what is left at the end."""
    result = WorkloadResult(name or allocator.name)
    blocks = {}
    for step in steps:
        if step[0] == "alloc":
            _, key, nbytes, tag = step
            blocks[key] = allocator.alloc(nbytes, tag)
        else:
            allocator.free(blocks.pop(step[1]))
        s = allocator.stats()
        result.requested.append(s["requested"])
        result.reserved.append(s.get("reserved", s.get("used", 0)))
        result.backing.append(backing_bytes(allocator))
    for block in blocks.values():
        allocator.free(block)
    return result
