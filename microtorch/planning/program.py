"""Program: instructions that define and use buffers, grouped into basic blocks.

A memory planner does not look at tensors or numpy arrays: it looks at a *program* — an
ordered list of instructions, each defining some buffers (writing them) and using some
(reading them), and each buffer's size. That is all liveness analysis needs.

* buffers (:class:`~microtorch.planning.instructions.Buffer`: size, kind, producer, whether
  the plan places it), instructions (``defs`` and ``uses``) and basic blocks (a straight
  run of instructions and the blocks control may go to next: a branch has two, a loop an
  edge back) — the records of :mod:`microtorch.planning.instructions`.

Programs come from a recorded training step (:meth:`Program.from_trace`, see
:mod:`microtorch.planning.from_trace`) or are written by hand::

    prog = Program.from_blocks({
        "entry": (["i = 0", "s = 0"], ["loop"]),
        "loop":  (["t = s + i", "s = t", "i = i + 1", "branch i < n"], ["loop", "exit"]),
        "exit":  (["return s"], []),
    }, sizes={"n": 4}, default_size=4)

A statement ``a, b = f(x, y)`` defines the names left of ``=`` and uses the buffer names
right of it (other words — ``f``, ``branch``, ``return`` — are not buffers). A buffer is any
name assigned somewhere or given a size; one used before any definition is an input
(live on entry).
"""
from __future__ import annotations

from .conflicts import conflict_graph, intervals, lower_bound, segments
from .from_trace import program_from_trace
from .instructions import NAME, BasicBlock, Buffer, Instruction, align, split, text_of
from .liveness import solve


class Program:
    """Buffers, instructions and basic blocks; see the module docstring.

    ``outputs``: buffers live when the program ends (a trace's loss; every external
    buffer). The analyses are computed once and kept: :meth:`liveness`,
    :meth:`intervals`, :meth:`lower_bound`, :meth:`conflict_graph`.
    """

    def __init__(self, buffers: list[Buffer], instructions: list[Instruction], blocks: list[BasicBlock],
                 outputs=(), alignment: int = 1, source: str = "by hand"):
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        self.buffers = {b.name: b for b in buffers}
        self.instructions, self.blocks, self.alignment, self.source = instructions, blocks, alignment, source
        self.block_of = {b.name: b for b in blocks}
        for b in blocks:
            for s in b.successors:
                if s not in self.block_of:
                    raise ValueError(f"block {b.name!r} has successor {s!r}, which is not a block of the "
                                     f"program (blocks: {', '.join(self.block_of)})")
        for ins in instructions:
            for n in ins.defs + ins.uses:
                if n not in self.buffers:
                    raise ValueError(f"instruction {ins} names {n!r}, which is not a buffer of the program")
        unknown = [n for n in outputs if n not in self.buffers]
        if unknown:
            raise ValueError(f"outputs {unknown} are not buffers of the program")
        self.outputs = frozenset(outputs)
        self._liveness = None
        self._intervals = None
        self._planned = None
        self._segments = None

    # -- making programs ------------------------------------------------------------------------
    @classmethod
    def from_blocks(cls, blocks: dict, sizes: dict | None = None, outputs=(), default_size: int = 1,
                    alignment: int = 1) -> "Program":
        """A program written by hand: ``{block name: (statements, successor names)}``, in
        program order (the first block is the entry). ``sizes``: bytes per buffer
        (``default_size`` for the others). See the module docstring for statements."""
        if not isinstance(blocks, dict) or not blocks:
            raise TypeError("blocks must be a non-empty dict {name: (statements, successors)}")
        sizes = dict(sizes or {})
        parsed = []
        for name, body in blocks.items():
            try:
                statements, successors = body
            except (TypeError, ValueError):
                raise TypeError(f"block {name!r} must be (statements, successors), got {body!r}") from None
            if isinstance(statements, str):
                raise TypeError(f"block {name!r}: statements must be a list of strings, got one string")
            parsed.append((name, [split(s) for s in statements], list(successors)))
        names = set(sizes)
        for _, stmts, _ in parsed:
            for lhs, _, _ in stmts:
                names.update(lhs)
        order: list[str] = []
        instructions, bblocks = [], []
        for bname, stmts, succ in parsed:
            idx = []
            for lhs, rhs, text in stmts:
                uses = tuple(dict.fromkeys(n for n in NAME.findall(rhs) if n in names))
                for n in uses + lhs:
                    if n not in order:
                        order.append(n)
                idx.append(len(instructions))
                instructions.append(Instruction(len(instructions), text, lhs, uses, bname))
            bblocks.append(BasicBlock(bname, idx, succ))
        order += [n for n in sizes if n not in order]
        producer: dict[str, int] = {}
        for ins in instructions:
            for n in ins.defs:
                producer.setdefault(n, ins.index)
        buffers = []
        for n in order:
            nbytes = int(sizes.get(n, default_size))
            if nbytes < 0:
                raise ValueError(f"buffer {n!r} has a negative size ({nbytes})")
            buffers.append(Buffer(n, nbytes, align(nbytes, alignment),
                                  "temporary" if n in producer else "input", producer.get(n)))
        return cls(buffers, instructions, bblocks, outputs, alignment)

    @classmethod
    def from_statements(cls, statements: list[str], sizes: dict | None = None, outputs=(),
                        default_size: int = 1, alignment: int = 1) -> "Program":
        """A straight-line program: one basic block."""
        return cls.from_blocks({"entry": (statements, [])}, sizes, outputs, default_size, alignment)

    @classmethod
    def from_intervals(cls, intervals: dict, alignment: int = 1) -> "Program":
        """A straight-line program whose buffer ``name`` is defined at instruction ``first`` and
        last used at ``last``: ``{name: (first, last, nbytes)}`` — the shape planners see."""
        n = 0
        for name, spec in intervals.items():
            try:
                first, last, nbytes = (int(v) for v in spec)
            except (TypeError, ValueError):
                raise TypeError(f"interval of {name!r} must be (first, last, nbytes), got {spec!r}") from None
            if first < 0 or last < first:
                raise ValueError(f"interval of {name!r} is [{first}, {last}]: it needs 0 ≤ first ≤ last")
            if nbytes < 0:
                raise ValueError(f"buffer {name!r} has a negative size ({nbytes})")
            n = max(n, last + 1)
        defs = [[] for _ in range(n)]
        uses = [[] for _ in range(n)]
        for name, (first, last, _) in intervals.items():
            defs[int(first)].append(name)
            if int(last) > int(first):  # (read where it is written, it would be live before it)
                uses[int(last)].append(name)
        instructions = [Instruction(i, text_of(defs[i], uses[i]), tuple(defs[i]), tuple(uses[i])) for i in range(n)]
        buffers = [Buffer(name, int(nb), align(int(nb), alignment), "temporary", int(first))
                   for name, (first, _, nb) in intervals.items()]
        return cls(buffers, instructions, [BasicBlock("entry", list(range(n)))], (), alignment)

    @classmethod
    def from_trace(cls, trace, alignment: int = 64) -> "Program":
        """The straight-line program of one recorded step; see :mod:`microtorch.planning.from_trace`."""
        return program_from_trace(trace, alignment, cls)

    # -- reading -----------------------------------------------------------------------------------
    @property
    def planned(self) -> list[str]:
        """The buffers a plan places: not external, and live at some instruction (a buffer no
        instruction touches needs no bytes), in program order."""
        if self._planned is None:
            iv = self.intervals()
            self._planned = [n for n, b in self.buffers.items() if not b.external and n in iv]
        return self._planned

    @property
    def straight_line(self) -> bool:
        return len(self.blocks) == 1 and not self.blocks[0].successors

    def __len__(self) -> int:
        return len(self.instructions)

    def __repr__(self) -> str:
        planned = self.planned
        return (f"Program({len(self.instructions)} instructions in {len(self.blocks)} block(s), "
                f"{len(self.buffers)} buffers ({len(planned)} planned, "
                f"{sum(self.buffers[n].nbytes for n in planned):,} bytes), {self.source})")

    def listing(self) -> str:
        """The program as text: blocks, instructions with their defs and uses."""
        lines = []
        for b in self.blocks:
            succ = f" → {', '.join(b.successors)}" if b.successors else ""
            lines.append(f"{b.name}:{succ}")
            for i in b.instructions:
                ins = self.instructions[i]
                lines.append(f"  {ins.index:>3}  {ins.text:<40} def {{{', '.join(ins.defs)}}}  "
                             f"use {{{', '.join(ins.uses)}}}")
        return "\n".join(lines)

    # -- the analyses (each in its own module) ---------------------------------------------------
    def liveness(self):
        """Use/def and live-in/live-out per instruction and per block, solved to a fixed point:
        a :class:`~microtorch.planning.liveness.Liveness`."""
        if self._liveness is None:
            self._liveness = solve(self)
        return self._liveness

    def intervals(self) -> dict:
        """``{buffer: Interval(first, last)}``: from its first definition to its last use
        (instruction indices), for every buffer; see :mod:`microtorch.planning.conflicts`."""
        if self._intervals is None:
            self._intervals = intervals(self)
        return self._intervals

    def segments(self) -> dict:
        """``{buffer: [(first, last), ...]}``: the runs of instructions each buffer occupies
        (its live ranges; one run in straight-line code unless it is written again after dying)."""
        if self._segments is None:
            self._segments = segments(self)
        return self._segments

    def lower_bound(self, where: bool = False):
        """The largest sum of slot sizes of planned buffers live at one instruction: no plan
        can use fewer bytes (``where=True``: ``(bytes, the instruction where it is reached)``)."""
        return lower_bound(self, where)

    def conflict_graph(self):
        """An edge between every two planned buffers live at the same instruction:
        a :class:`~microtorch.planning.conflicts.ConflictGraph`."""
        return conflict_graph(self)


