"""Planners: give every planned buffer an offset so that buffers live at once never share bytes.

Each heuristic is an *order* plus a *rule*: take the buffers in the order, and put each one
into a gap among the already-placed buffers whose live intervals overlap its own (the
others are dead while it lives, so their bytes are free to reuse):

=================  ===========================  ==========================================
strategy           order                        rule
=================  ===========================  ==========================================
``naive``          program order                no reuse: each after the previous one
``first_fit``      by first definition          the lowest gap that fits (an allocator
                                                with a free list, run ahead of time)
``best_fit``       by first definition          the tightest gap that fits (lowest on ties)
``greedy_by_size`` largest first                the lowest gap that fits — TFLite's offset
                                                planner (its ``SimpleMemoryArena`` takes the
                                                tightest gap instead)
``coloring``       largest first                colour the conflict graph: buffers of one
                                                colour share one slot (as registers do); the
                                                slots sit one after another
``optimal``        —                            CP-SAT finds the least arena (small programs)
=================  ===========================  ==========================================

"A gap that fits": with the overlapping placed buffers sorted by offset, a candidate
start is the end of everything below it, rounded up to the alignment, and the gap runs to
the next buffer's offset; above the highest one there is always room.
"""
from __future__ import annotations

import numpy as np

from .optimal import optimal
from .plan import Plan

STRATEGIES = ("naive", "first_fit", "best_fit", "greedy_by_size", "coloring", "optimal")


def plan(program, strategy: str = "greedy_by_size", **options) -> Plan:
    """Plan ``program``'s buffers with ``strategy`` (one of :data:`STRATEGIES`); the plan is
    checked before it is returned. ``optimal`` takes ``time_limit`` (seconds, default 10)
    and ``max_buffers`` (default 40)."""
    if not hasattr(program, "planned"):
        raise TypeError(f"plan() needs a mt.memory.Program (e.g. Program.from_trace(tr)), got "
                        f"{type(program).__name__}")
    if strategy == "naive":
        p = naive(program)
    elif strategy == "first_fit":
        p = place(program, by_first_definition(program), "lowest", "first_fit")
    elif strategy == "best_fit":
        p = place(program, by_first_definition(program), "tightest", "best_fit")
    elif strategy == "greedy_by_size":
        p = place(program, by_size(program), "lowest", "greedy_by_size")
    elif strategy == "coloring":
        p = coloring(program)
    elif strategy == "optimal":
        heuristics = [place(program, by_first_definition(program), "lowest", "first_fit"),
                      place(program, by_first_definition(program), "tightest", "best_fit"),
                      place(program, by_size(program), "lowest", "greedy_by_size"), coloring(program)]
        p = optimal(program, min(heuristics, key=lambda h: h.arena_bytes), **options)
    else:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if options and strategy != "optimal":
        raise TypeError(f"strategy {strategy!r} takes no options (got {', '.join(options)})")
    return p.check()


# -- orders -------------------------------------------------------------------------------------
def by_first_definition(program) -> list[str]:
    iv = program.intervals()
    planned = program.planned
    return sorted(planned, key=lambda n, r={n: k for k, n in enumerate(planned)}: (iv[n].first, r[n]))


def by_size(program) -> list[str]:
    iv = program.intervals()
    planned = program.planned
    rank = {n: k for k, n in enumerate(planned)}
    size = program.buffers
    return sorted(planned, key=lambda n: (-size[n].size, iv[n].first, rank[n]))


# -- placing --------------------------------------------------------------------------------------
def naive(program) -> Plan:
    """No reuse: every buffer gets its own bytes, one after another."""
    offsets, top = {}, 0
    for n in program.planned:
        offsets[n] = top
        top += program.buffers[n].size
    return Plan(program, "naive", offsets, list(program.planned))


def place(program, order: list[str], rule: str, name: str) -> Plan:
    """Place buffers in ``order``, each into the ``"lowest"`` or the ``"tightest"`` gap that
    fits among the placed buffers whose intervals overlap its own (around a loop an
    interval is the hull of the buffer's live ranges: a little more than it needs)."""
    iv, buffers, a = program.intervals(), program.buffers, program.alignment
    n = len(order)
    first, last, offs, ends = (np.zeros(n, np.int64) for _ in range(4))
    offsets = {}
    for k, x in enumerate(order):
        s, e = iv[x]
        size = buffers[x].size
        live = np.flatnonzero((first[:k] <= e) & (last[:k] >= s))  # placed buffers live with x
        at = gap(offs[live], ends[live], size, a, rule)
        first[k], last[k], offs[k], ends[k] = s, e, at, at + size
        offsets[x] = at
    return Plan(program, name, offsets, list(order))


def gap(offs: np.ndarray, ends: np.ndarray, size: int, a: int, rule: str = "lowest") -> int:
    """The start of the gap chosen by ``rule`` among blocks ``[offs, ends)``: by offset, the
    room before block j runs from the end of everything below it (rounded up to the
    alignment ``a``) to its offset; above them all there is always room."""
    if offs.size == 0:
        return 0
    idx = np.argsort(offs, kind="stable")
    offs = offs[idx]
    top = np.maximum.accumulate(ends[idx])  # the end of blocks 0..j
    start = np.empty_like(top)  # where a gap before block j starts: above blocks 0..j-1
    start[0] = 0
    start[1:] = (top[:-1] + a - 1) // a * a
    room = offs - start
    fits = np.flatnonzero(room >= size)
    if fits.size == 0:
        return int((top[-1] + a - 1) // a * a)
    if rule == "lowest":
        return int(start[fits[0]])
    return int(start[fits[np.argmin(room[fits])]])  # tightest; argmin: the lowest among equals


def coloring(program) -> Plan:
    """Greedy colouring of the conflict graph, largest buffers first: each buffer takes the
    first slot none of its neighbours holds (a new slot if all are taken); a slot is as big
    as its first (largest) buffer, and slots are laid out one after another."""
    g = program.conflict_graph()
    order = by_size(program)
    slot_of: dict = {}
    slot_size: list[int] = []
    for x in order:
        taken = {slot_of[y] for y in g.adjacency[x] if y in slot_of}
        c = next((c for c in range(len(slot_size)) if c not in taken), len(slot_size))
        if c == len(slot_size):
            slot_size.append(g.sizes[x])
        slot_of[x] = c
    starts = np.concatenate(([0], np.cumsum(slot_size, dtype=np.int64)))
    offsets = {x: int(starts[slot_of[x]]) for x in program.planned}
    return Plan(program, "coloring", offsets, order, slots=slot_of)
