"""Unified memory — a page-migration cost model (a *simulation*: this machine has no GPU).

With CPU–GPU unified memory one pointer is valid on both devices; the driver moves each page
to the device that touches it. That looks like zero-copy, but every touch of a page that
lives on the other device is a *page fault* followed by a *migration*: fault latency plus
page size over the interconnect's bandwidth. The model is a state machine per page:

    page resident on D, accessed from D   → no cost beyond the access itself
    page resident on D, accessed from D'  → fault + migrate to D'  (the page now lives on D')
    prefetch(pages, D')                   → migrate ahead of time at bandwidth, no fault

Three access patterns tell the story (:func:`pattern_costs`):

* *streaming* — the GPU touches each page once after the CPU wrote it: one migration per page;
* *thrashing* — CPU and GPU alternate on the same pages: every access faults, pages
  ping-pong across the bus;
* *prefetched* — ``cudaMemPrefetchAsync`` moves the pages before the GPU needs them: the
  bytes still cross the bus, but in bulk and without faults.

:func:`simulate` runs a recorded trace through the model, with a device for each op (e.g.
the data loader's ops on the CPU, the model's on the GPU). Default costs: 4 KiB pages on the
CPU side grouped into 64 KiB migrations, 20 µs per fault, 12 GB/s over PCIe 4.0 ×16 — typical
published figures, stated so they can be changed; nothing here is measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .workload import storage_sizes


@dataclass(frozen=True)
class Link:
    """The costs of moving pages between the two devices."""
    page_bytes: int = 64 * 1024  # migration granularity
    fault_us: float = 20.0  # one fault: trap, driver, TLB shootdown
    gbps: float = 12.0  # interconnect bandwidth (1 GB/s = 1 KB/µs)

    def migrate_us(self, pages: int, fault: bool = True) -> float:
        return pages * ((self.fault_us if fault else 0.0) + self.page_bytes / (self.gbps * 1e3))


@dataclass
class UnifiedMemory:
    """Where each page of each buffer lives, and what moving them cost so far."""
    link: Link = field(default_factory=Link)
    where: dict = field(default_factory=dict)  # (buffer, page) -> "cpu" | "gpu"
    faults: int = 0
    migrations: int = 0
    prefetched: int = 0
    us: float = 0.0
    log: list = field(default_factory=list)  # (what, buffer, pages, device, µs)

    def pages(self, nbytes: int) -> int:
        return max(1, math.ceil(nbytes / self.link.page_bytes))

    def touch(self, buffer, nbytes: int, device: str) -> float:
        """``device`` reads or writes all of ``buffer``: fault in every page living elsewhere.
        A page never touched before is placed where it is first touched, at no cost."""
        moved = 0
        for p in range(self.pages(nbytes)):
            home = self.where.get((buffer, p))
            if home is not None and home != device:
                moved += 1
            self.where[buffer, p] = device
        us = self.link.migrate_us(moved)
        self.faults += moved
        self.migrations += moved
        self.us += us
        if moved:
            self.log.append(("fault", buffer, moved, device, us))
        return us

    def prefetch(self, buffer, nbytes: int, device: str) -> float:
        """Move every page of ``buffer`` to ``device`` ahead of use: bandwidth, no faults."""
        moved = sum(self.where.get((buffer, p), device) != device for p in range(self.pages(nbytes)))
        for p in range(self.pages(nbytes)):
            self.where[buffer, p] = device
        us = self.link.migrate_us(moved, fault=False)
        self.prefetched += moved
        self.migrations += moved
        self.us += us
        if moved:
            self.log.append(("prefetch", buffer, moved, device, us))
        return us


def pattern_costs(nbytes: int = 64 << 20, rounds: int = 4, link: Link | None = None) -> dict[str, dict]:
    """The three patterns on one buffer of ``nbytes``: streaming, thrashing, prefetched."""
    out = {}
    for name in ("streaming", "thrashing", "prefetched"):
        um = UnifiedMemory(link or Link())
        um.touch("x", nbytes, "cpu")  # the CPU writes the input
        for r in range(rounds):
            if name == "prefetched":
                um.prefetch("x", nbytes, "gpu")
            um.touch("x", nbytes, "gpu")
            if name == "thrashing":
                um.touch("x", nbytes, "cpu")  # the CPU reads each result back
        out[name] = {"us": um.us, "faults": um.faults, "migrations": um.migrations,
                     "prefetched": um.prefetched}
    return out


def simulate(trace, device, prefetch: bool = False, link: Link | None = None) -> UnifiedMemory:
    """Run ``trace``'s ops through the model: op i runs on ``device(i, event)`` ("cpu"/"gpu")
    and touches its input and output storages. With ``prefetch``, each op's inputs are
    prefetched to its device first (as a runtime that knows the schedule would)."""
    sizes = storage_sizes(trace)
    um = UnifiedMemory(link or Link())
    ops = [e for e in trace.events if e["kind"] == "op"]
    for i, e in enumerate(ops):
        d = device(i, e)
        if d not in ("cpu", "gpu"):
            raise ValueError(f"device(…) must say 'cpu' or 'gpu' for op {i} ({e['op']}), got {d!r}")
        inputs = [s for s in e.get("input_storages") or [] if s is not None]
        if prefetch:
            for s in inputs:
                um.prefetch(s, sizes.get(s, 0), d)
        for s in inputs + ([e["output_storage"]] if e.get("output_storage") is not None else []):
            um.touch(s, sizes.get(s, 0), d)
    return um
