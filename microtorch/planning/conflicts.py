"""Live intervals, the lower bound on memory, and the conflict (interference) graph.

From the liveness solution, buffer ``x`` *occupies* instruction ``i`` when it is live into
``i`` or written by it::

    occupied[i] = live_in[i] ∪ def[i]

* ``segments(x)``: the runs of consecutive instructions ``x`` occupies — its *live
  ranges*. A buffer written again after a stretch where it is dead has two; in
  straight-line code a run goes from a definition to the last use before the next one.
  Read off the block equations without building every instruction's set: a run starts
  at a definition (or a block's start, for ``x ∈ live_in[b]``), grows with each use, and
  reaches the block's end when ``x ∈ live_out[b]``.
* ``interval(x) = [first i occupied by x, last i occupied by x]``, the hull of its runs:
  in straight-line code [first definition, last use] (or the end, for an output); around
  a loop it covers the whole loop body when ``x`` is live across the back edge.
* ``lower_bound = max over i of Σ size(x) for x in occupied[i]``: every buffer occupying
  one instruction needs its own bytes at the same time, so no plan fits in less.
* ``conflict graph``: an edge ``x — y`` when some instruction is occupied by both: the
  two may not share bytes. (Register allocators call it the interference graph.) Two
  buffers first meet where one of them enters, so the edges are
  ``∪ over i of entering[i] × occupied[i]`` — about n × (buffers live at once) pairs,
  not n².

Only planned buffers (not ``external``: parameters, inputs, ``.grad`` stay in the pool)
count for the bound and the graph; :func:`intervals` covers every buffer.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """Instructions ``first`` to ``last`` (inclusive) during which a buffer holds bytes."""
    first: int
    last: int

    def overlaps(self, other: "Interval") -> bool:
        return self.first <= other.last and other.first <= self.last

    def __iter__(self):
        return iter((self.first, self.last))


def occupied(program) -> list[frozenset]:
    """``occupied[i] = live_in[i] ∪ def[i]`` for every instruction (all buffers)."""
    lv = program.liveness()
    return [lv.live_in[i] | lv.defs[i] for i in range(len(program.instructions))]


def segments(program) -> dict:
    """``{buffer: [(first, last), ...]}``: the runs of instructions each buffer occupies."""
    lv = program.liveness()
    runs: dict = {}
    for b in program.blocks:
        if not b.instructions:
            continue
        open_: dict = {x: [b.instructions[0], b.instructions[0]] for x in lv.block_in[b.name]}
        for i in b.instructions:
            ins = program.instructions[i]
            for x in ins.uses:
                open_[x][1] = i  # a use: x was live into i
            for x in ins.defs:
                if x in ins.uses:
                    continue  # read and written here (x = x + 1): one run goes on
                if x in open_ and open_[x][1] == i - 1:
                    open_[x][1] = i  # written right after its last use: the runs touch
                else:  # a new value; the old one (if any) died at its last use
                    if x in open_:
                        runs.setdefault(x, []).append(tuple(open_[x]))
                    open_[x] = [i, i]
        end, out = b.instructions[-1], lv.block_out[b.name]
        for x, (first, last) in open_.items():
            runs.setdefault(x, []).append((first, end if x in out else last))
    return {x: _merged(runs[x]) for x in program.buffers if x in runs}


def _merged(runs: list) -> list:
    """Runs sorted, with runs that touch (one ends at i − 1, the next starts at i) joined."""
    out: list = []
    for first, last in sorted(runs):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def intervals(program) -> dict:
    """``{buffer: Interval}``: the hull of each buffer's runs (every buffer that occupies some instruction)."""
    return {x: Interval(r[0][0], max(last for _, last in r)) for x, r in program.segments().items()}


def live_bytes(program) -> list[int]:
    """Σ slot size of the planned buffers occupying each instruction (the lower bound's curve)."""
    delta = [0] * (len(program.instructions) + 1)
    runs = program.segments()
    for x in program.planned:
        size = program.buffers[x].size
        for first, last in runs[x]:
            delta[first] += size
            delta[last + 1] -= size
    out, running = [], 0
    for d in delta[:-1]:
        running += d
        out.append(running)
    return out


def lower_bound(program, where: bool = False):
    """The largest :func:`live_bytes` over the program (``where=True``: ``(bytes, instruction)``)."""
    curve = live_bytes(program)
    best = max(curve, default=0)
    return (best, curve.index(best) if curve else None) if where else best


@dataclass
class ConflictGraph:
    """Planned buffers (``nodes``) with an edge between every two live at one instruction."""
    nodes: list
    edges: list  # (x, y) pairs, x before y in program order
    adjacency: dict  # buffer -> set of buffers it conflicts with
    sizes: dict  # buffer -> slot size

    def conflicts(self, x: str, y: str) -> bool:
        return y in self.adjacency[x]

    def degree(self, x: str) -> int:
        return len(self.adjacency[x])

    def __repr__(self) -> str:
        return f"ConflictGraph({len(self.nodes)} buffers, {len(self.edges)} conflicts)"


def conflict_graph(program) -> ConflictGraph:
    """The conflict graph of the planned buffers (see the module docstring)."""
    planned = program.planned
    keep = set(planned)
    rank = {n: k for k, n in enumerate(planned)}
    adj: dict = {n: set() for n in planned}
    before: frozenset = frozenset()
    for occ in occupied(program):
        occ = occ & keep
        for x in occ - before:  # entering here: it meets everything occupying this instruction
            for y in occ:
                if y != x:
                    adj[x].add(y)
                    adj[y].add(x)
        before = occ
    edges = sorted({(x, y) if rank[x] < rank[y] else (y, x) for x in adj for y in adj[x]},
                   key=lambda e: (rank[e[0]], rank[e[1]]))
    return ConflictGraph(planned, edges, adj, {n: program.buffers[n].size for n in planned})
