"""Planned execution: run the step again with every buffer at its planned offset, for real.

``with mt.memory.planned(plan) as run: step()`` serves the step's activations from a
:class:`PlannedArena` — one block of ``plan.arena_bytes`` bytes — instead of the step
arena (it *is* the step arena inside the block, so placement's ``allocator_for`` hands it
every activation). The k-th allocation of the step is the k-th planned buffer of the
program and goes exactly to ``plan.offsets[buffer]``; nothing is bump-allocated.

What keeps it honest:

* **The step must match the plan.** The arena follows the trace being recorded (the
  caller's, or one of its own: ``run.trace``): every op, backward node, gradient
  accumulation and optimizer step must be the one the program has next, and each
  allocation must come at the point the program's instruction makes it, with the
  planned size and tag. Otherwise :class:`PlanMismatchError` names the first instruction
  that differs — before a byte is written, so nothing lands out of bounds.
* **Bytes reused under a live tensor are poisoned.** When a planned offset reuses bytes of
  a storage the engine still holds (its last use is over, the program says; Python just
  has not let go of it yet), that storage is invalidated like one reclaimed by an arena
  reset: touching it raises :class:`~microtorch.memory.StaleTensorError` instead of
  reading someone else's numbers.

``run.arena.high_water`` is the highest slot end reached; for a matching step it equals
``plan.arena_bytes``.
"""
from __future__ import annotations

import bisect
import contextlib
import time
from dataclasses import dataclass

from .. import recording as _trace
from ..trace.recorder import Trace
from ..memory.arena import Arena
from ..memory.block import Block
from ..memory.placement import step_arena
from .from_trace import BOUNDARIES, signature


class PlanMismatchError(RuntimeError):
    """The step run under ``planned(plan)`` is not the step the plan was made for."""


class PlannedArena(Arena):
    """An arena whose blocks go where a :class:`~microtorch.planning.plan.Plan` says."""

    def __init__(self, plan, name: str = "planned arena"):
        prog = plan.program
        super().__init__(capacity=max(plan.arena_bytes, prog.alignment), alignment=prog.alignment, name=name)
        self.plan, self.program = plan, prog
        self.expected = [prog.buffers[n] for n in prog.planned]  # allocation order
        self.closing = [ins for ins in sorted(prog.instructions, key=lambda i: i.event if i.event is not None else -1)
                        if ins.signature]  # instructions in the order their events come
        self._steps = [ins.event for ins in self.closing]
        self.k = 0  # allocations served
        self.seen = 0  # closing events matched
        self._trace = None
        self._cursor = 0

    def follow(self, trace) -> None:
        """Check the step's events as ``trace`` records them (from now on)."""
        self._trace, self._cursor = trace, len(trace.events)

    def _sync(self) -> None:
        """Match the closing events recorded since the last look against the program."""
        tr = self._trace
        if tr is None or _trace.active is not tr:
            return  # another recorder took the events: only sizes can be checked
        events = tr.events
        while self._cursor < len(events):
            e = events[self._cursor]
            self._cursor += 1
            if e["kind"] not in BOUNDARIES:
                continue
            got = signature(e)
            if self.seen >= len(self.closing):
                raise PlanMismatchError(
                    f"the step goes on after the plan's last instruction: it ran {_say(got)}, which the "
                    "plan does not have. Make the plan from a trace of this step.")
            ins = self.closing[self.seen]
            if got != ins.signature:
                raise PlanMismatchError(
                    f"the step differs from the plan at instruction {ins.index} ({ins.text}): the plan "
                    f"expects {_say(ins.signature)}, the step ran {_say(got)}. A plan fits one step "
                    "(the same ops in the same order on the same shapes); make a new plan for this one.")
            self.seen += 1

    def alloc(self, nbytes: int, tag: str = "") -> Block:
        t0 = time.perf_counter_ns()
        self._sync()
        if self.k >= len(self.expected):
            raise PlanMismatchError(
                f"the step allocates more than the plan: allocation {self.k + 1} ({nbytes} B, {tag or 'untagged'}) "
                f"comes after all {len(self.expected)} planned buffers, after instruction "
                f"{self._here()}. Make the plan from a trace of this step.")
        b = self.expected[self.k]
        ins = self.program.instructions[b.producer] if b.producer is not None else None
        where = f"instruction {ins.index} ({ins.text})" if ins is not None else "the start"
        if self._trace is not None and _trace.active is self._trace and b.event is not None:
            due = bisect.bisect_left(self._steps, b.event)  # closing events before it was allocated
            if due != self.seen:
                raise PlanMismatchError(
                    f"the step differs from the plan at {where}: the plan allocates buffer {b.label} "
                    f"there, but the step asks for {nbytes} B at a different point ({self.seen} of the "
                    f"plan's instructions done instead of {due}).")
        if nbytes != b.nbytes or (b.tag is not None and tag != b.tag):
            raise PlanMismatchError(
                f"the step differs from the plan at {where}: the plan has buffer {b.label} of {b.nbytes} B "
                f"({b.tag}) there, the step asks for {nbytes} B ({tag or 'untagged'}). Another shape or another "
                "op order needs another plan (nothing was written).")
        offset = self.plan.offsets[b.name]
        self._reclaim(offset, offset + b.size, b)
        chunk = self.chunks[0]
        block = Block(self, 0, offset, nbytes, nbytes, 0, tag, chunk[offset: offset + nbytes], self.generation)
        self.k += 1
        self.requested += nbytes
        self.live_blocks[block.id] = block
        self._top = max(self._top, offset + b.size)
        self.high_water = max(self.high_water, offset + b.size)
        self.allocations += 1
        self.alloc_ns += time.perf_counter_ns() - t0
        rec = _trace.active
        if rec is not None:
            rec.emit("alloc_block", allocator=self.name, block=block.id, chunk=0, offset=offset, nbytes=nbytes,
                     size=block.size, padding=0, tag=tag, planned=b.name)
        return block

    def _reclaim(self, lo: int, hi: int, b) -> None:
        """Poison the live blocks in ``[lo, hi)``: the plan says their last use is over."""
        for other in [x for x in self.live_blocks.values() if x.offset < hi and lo < x.offset + x.nbytes]:
            del self.live_blocks[other.id]
            self.requested -= other.nbytes
            other.live, other.generation = False, -1  # a later free() of it returns quietly
            storage = other.user() if other.user is not None else None
            if storage is not None and not storage.freed:
                storage.invalidate(f"the plan reused its bytes for buffer {b.label} after its last use")

    def finish(self) -> None:
        """At the end of the step: every planned instruction ran and every buffer was allocated."""
        self._sync()
        following = self._trace is not None and _trace.active is self._trace
        if following and self.seen < len(self.closing):
            ins = self.closing[self.seen]
            raise PlanMismatchError(f"the step ended before the plan did: instruction {ins.index} ({ins.text}) "
                                    "never ran. Make the plan from a trace of this step.")
        if self.k < len(self.expected):
            b = self.expected[self.k]
            raise PlanMismatchError(f"the step ended before the plan did: buffer {b.label} was never "
                                    "allocated. Make the plan from a trace of this step.")

    def _here(self) -> str:
        if self.seen == 0:
            return "the start"
        ins = self.closing[self.seen - 1]
        return f"{ins.index} ({ins.text})"


def _say(sig: tuple) -> str:
    kind = sig[0]
    if kind == "op":
        return f"{sig[2]} op {sig[1]} → shape {list(sig[3])}"
    if kind == "node_run":
        return f"backward node {sig[1]} (gradient of shape {list(sig[2])})"
    if kind == "grad":
        return f"a gradient accumulation of shape {list(sig[1])}"
    return f"{sig[1]}.step()"


@dataclass
class PlannedRun:
    """What ``with planned(plan) as run:`` gives: the plan, its arena, the trace it followed."""
    plan: object
    arena: PlannedArena
    trace: object

    @property
    def high_water(self) -> int:
        return self.arena.high_water


@contextlib.contextmanager
def planned(plan):
    """Run the block's step with every activation at its planned offset (see the module docstring)."""
    if not hasattr(plan, "offsets") or not hasattr(plan, "program"):
        raise TypeError(f"planned() needs a plan from mt.memory.plan(program, ...), got {type(plan).__name__}")
    if not any(ins.signature for ins in plan.program.instructions):
        raise ValueError("planned() runs a step recorded in a trace: make the plan from "
                         "Program.from_trace(tr); a hand-written or random program has no step to run")
    own = None
    if _trace.active is None:
        own = Trace()
        own.__enter__()
    try:
        arena = PlannedArena(plan)
        arena.follow(_trace.active)
        run = PlannedRun(plan, arena, _trace.active)
        with step_arena(arena):
            yield run
            arena.finish()
    finally:
        if own is not None:
            own.__exit__(None, None, None)
