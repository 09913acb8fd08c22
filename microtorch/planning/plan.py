"""Plan: where each buffer goes in one arena, and the proof that it is safe.

A plan gives every planned buffer of a program a byte offset (a multiple of the program's
alignment). Its ``arena_bytes`` is the highest byte any slot reaches,
``max(offset[x] + size[x])``. It is *valid* when no two buffers that are live at the same
instruction share a byte::

    for every instruction i, for x ≠ y occupying i:
        [offset[x], offset[x] + size[x])  ∩  [offset[y], offset[y] + size[y])  = ∅

:meth:`Plan.check` proves exactly that, instruction by instruction (sort the buffers
occupying ``i`` by offset; each must end before the next begins), and raises
:class:`PlanError` naming the two buffers and the instruction otherwise.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field


class PlanError(ValueError):
    """A plan that puts two buffers live at the same time on the same bytes (or is malformed)."""


@dataclass
class Plan:
    """Offsets for the planned buffers of ``program``, made by ``strategy``."""
    program: object
    strategy: str
    offsets: dict  # buffer name -> byte offset
    order: list = field(default_factory=list)  # the order the planner placed buffers in
    slots: dict | None = None  # coloring: buffer -> slot number
    proven_optimal: bool | None = None  # optimal: did the solver prove it?

    @property
    def sizes(self) -> dict:
        return {n: self.program.buffers[n].size for n in self.offsets}

    @property
    def arena_bytes(self) -> int:
        """The bytes the arena needs: the highest end of any slot."""
        buffers = self.program.buffers
        return max((o + buffers[n].size for n, o in self.offsets.items()), default=0)

    @property
    def lower_bound(self) -> int:
        return self.program.lower_bound()

    @property
    def ratio(self) -> float:
        """``arena_bytes / lower_bound`` (1.0 is as good as any plan can be)."""
        lb = self.lower_bound
        return self.arena_bytes / lb if lb else 1.0

    def check(self) -> "Plan":
        """Raise :class:`PlanError` unless every planned buffer has an aligned offset and no two
        buffers live at one instruction overlap; returns the plan."""
        prog, offsets = self.program, self.offsets
        planned = prog.planned
        missing = [n for n in planned if n not in offsets]
        if missing:
            raise PlanError(f"{self.strategy}: no offset for {len(missing)} planned buffer(s): {missing[:5]}")
        extra = [n for n in offsets if n not in prog.buffers or prog.buffers[n].external]
        if extra:
            raise PlanError(f"{self.strategy}: offsets for buffers the program does not plan: {extra[:5]}")
        for n, o in offsets.items():
            if not isinstance(o, int) or o < 0 or o % prog.alignment:
                raise PlanError(f"{self.strategy}: buffer {n} has offset {o!r}; offsets are ints ≥ 0 and "
                                f"multiples of the alignment ({prog.alignment})")
        # sweep the instructions: runs that end before i leave, runs that start at i enter; the
        # buffers live at once are kept sorted by offset, and each one entering must end
        # before its upper neighbour begins and begin after its lower neighbour ends
        size = {n: prog.buffers[n].size for n in planned}
        runs = prog.segments()
        events = sorted((first, last, n) for n in planned if size[n] for first, last in runs[n])
        live: list = []  # (offset, name, last) sorted by offset
        leaving: list = []  # (last, offset, name) heap
        for first, last, x in events:
            while leaving and leaving[0][0] < first:
                _, o, y = heapq.heappop(leaving)
                live.pop(bisect.bisect_left(live, (o, y)))
            o = offsets[x]
            k = bisect.bisect_left(live, (o, x))
            for y_o, y in live[max(0, k - 1): k + 1]:
                if y_o < o + size[x] and o < y_o + size[y]:
                    self._overlap(x, y, first)
            live.insert(k, (o, x))
            heapq.heappush(leaving, (last, o, x))
        return self

    def _overlap(self, x: str, y: str, i: int) -> None:
        prog, o, size = self.program, self.offsets, self.sizes
        ins = prog.instructions[i]
        x, y = sorted((x, y), key=lambda n: (o[n], n))
        raise PlanError(
            f"{self.strategy}: buffers {x} ({size[x]} B at {o[x]}) and {y} ({size[y]} B at {o[y]}) are both "
            f"live at instruction {ins.index} ({ins.text}) but their bytes overlap "
            f"([{o[x]}, {o[x] + size[x]}) and [{o[y]}, {o[y] + size[y]})).")

    def __repr__(self) -> str:
        lb = self.lower_bound
        return (f"Plan({self.strategy}: {len(self.offsets)} buffers in {self.arena_bytes:,} B, lower bound "
                f"{lb:,} B, {self.ratio:.3f}×)")

    def table(self) -> str:
        """Each buffer's slot, interval and offset, in offset order."""
        iv = self.program.intervals()
        rows = sorted(self.offsets.items(), key=lambda kv: (kv[1], kv[0]))
        lines = [f"{'buffer':<28} {'bytes':>8} {'offset':>8}  live"]
        for n, o in rows:
            b = self.program.buffers[n]
            first, last = iv[n] if n in iv else (None, None)
            lines.append(f"{b.label[:28]:<28} {b.size:>8} {o:>8}  [{first}, {last}]")
        return "\n".join(lines)
