"""Liveness: which buffers hold a value some later instruction still reads.

A buffer is *live* at a point if some path from that point reads it before writing it.
It is the backward dataflow problem every compiler solves, per basic block ``b``::

    use[b]      = buffers b reads before writing them
    def[b]      = buffers b writes
    live_out[b] = ∪ live_in[s]  over the successors s of b   (outputs, for an exit block)
    live_in[b]  = use[b] ∪ (live_out[b] − def[b])

The equations refer to each other around loops, so they are solved by iteration: start
from empty sets, apply them to every block (in reverse order: information flows
backwards), and repeat until a whole pass changes nothing — a *fixed point*. The sets
only grow and are bounded by the set of all buffers, so this always ends; the last pass
is the one that proves nothing changes. Inside a block the same equations run once,
backwards, per instruction: ``live_out[i] = live_in[i + 1]``,
``live_in[i] = use[i] ∪ (live_out[i] − def[i])``.

:func:`solve` returns a :class:`Liveness` with the sets per instruction and per block, the
number of passes, and every block update in order (``history``: what the fixed-point
player steps through).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Update:
    """One application of the block equations during the iteration."""
    iteration: int  # pass number, from 1
    block: str
    live_in: dict  # block -> frozenset, right after this update (every block)
    live_out: dict
    changed: bool  # did this update change the block's sets?


@dataclass
class Liveness:
    """The solution of the liveness equations of one program."""
    use: list  # per instruction: frozenset of buffers read
    defs: list  # per instruction: frozenset of buffers written
    live_in: list  # per instruction
    live_out: list  # per instruction
    block_use: dict  # per block
    block_def: dict
    block_in: dict
    block_out: dict
    iterations: int  # passes until nothing changed (the last pass changes nothing)
    history: list  # Update per block visit, in order

    def live_at(self, i: int) -> frozenset:
        """Buffers that occupy memory during instruction ``i``: live into it or written by it
        (a result needs room even if nothing reads it)."""
        return self.live_in[i] | self.defs[i]


def block_use_def(program, block) -> tuple[frozenset, frozenset]:
    """``use[b]``: read before written in the block; ``def[b]``: written in the block."""
    use, defined = set(), set()
    for i in block.instructions:
        ins = program.instructions[i]
        use.update(n for n in ins.uses if n not in defined)
        defined.update(ins.defs)
    return frozenset(use), frozenset(defined)


def solve(program) -> Liveness:
    """Iterate the block equations to their fixed point, then spread them over instructions."""
    blocks = program.blocks
    use, dfn = {}, {}
    for b in blocks:
        use[b.name], dfn[b.name] = block_use_def(program, b)
    live_in = {b.name: frozenset() for b in blocks}
    live_out = {b.name: frozenset() for b in blocks}
    history, iterations, changed = [], 0, True
    while changed:
        iterations += 1
        changed = False
        for b in reversed(blocks):
            out = (frozenset().union(*(live_in[s] for s in b.successors)) if b.successors
                   else program.outputs)
            new_in = use[b.name] | (out - dfn[b.name])
            moved = out != live_out[b.name] or new_in != live_in[b.name]
            live_in[b.name], live_out[b.name] = new_in, out
            changed |= moved
            history.append(Update(iterations, b.name, dict(live_in), dict(live_out), moved))
    n = len(program.instructions)
    ins_use = [frozenset(ins.uses) for ins in program.instructions]
    ins_def = [frozenset(ins.defs) for ins in program.instructions]
    ins_in: list = [frozenset()] * n
    ins_out: list = [frozenset()] * n
    for b in blocks:
        live = live_out[b.name]
        for i in reversed(b.instructions):
            ins_out[i] = live
            live = ins_use[i] | (live - ins_def[i])
            ins_in[i] = live
    return Liveness(ins_use, ins_def, ins_in, ins_out, use, dfn, dict(live_in), dict(live_out), iterations,
                    history)
