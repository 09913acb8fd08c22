"""The records a program is made of: buffers, instructions, basic blocks.

* :class:`Buffer`: a name, its size in bytes (``nbytes``), the slot it takes once rounded
  up to the alignment (``size``), its kind (``parameter``, ``input``, ``activation``,
  ``gradient``, ``temporary``), the instruction that produced it, and whether the plan
  places it (``external`` buffers — parameters, inputs, ``.grad`` — live in the pool
  across steps; the plan places what one step allocates).
* :class:`Instruction`: ``defs`` and ``uses`` (buffer names), a text, its block.
* :class:`BasicBlock`: a run of instructions with no branch inside, and the blocks control
  may go to next (``successors``): a branch has two, a loop has an edge back.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")

#: the kinds of buffer a program distinguishes
BUFFER_KINDS = ("parameter", "input", "activation", "gradient", "temporary")


@dataclass
class Buffer:
    """One buffer of a program (for a trace: one storage; views share their base's buffer)."""
    name: str
    nbytes: int
    size: int  # nbytes rounded up to the program's alignment: the slot a plan gives it
    kind: str = "temporary"
    producer: int | None = None  # the instruction that first defines it (None: live on entry)
    external: bool = False  # True: lives outside the plan (the pool), not placed
    label: str = ""  # how pictures name it
    storage: int | None = None  # the storage id, for a program read from a trace
    tag: str | None = None  # the storage's allocation tag
    event: int | None = None  # the trace event that allocated it

    def __post_init__(self):
        self.label = self.label or self.name


@dataclass
class Instruction:
    """One instruction: what it reads (``uses``) and writes (``defs``)."""
    index: int
    text: str
    defs: tuple[str, ...]
    uses: tuple[str, ...]
    block: str = "entry"
    kind: str = "stmt"  # "forward", "backward", "grad", "optimizer" for a trace; "stmt" by hand
    op: str = ""  # the op (or node, or optimizer) name, for a trace
    event: int | None = None  # the trace event that closes it
    signature: tuple = ()  # what that event must look like when the step runs again

    def __str__(self) -> str:
        return f"[{self.index}] {self.text}"


@dataclass
class BasicBlock:
    """A straight run of instructions (indices into the program) and where control goes next."""
    name: str
    instructions: list[int]
    successors: list[str] = field(default_factory=list)


def align(n: int, alignment: int) -> int:
    """``n`` rounded up to a multiple of ``alignment`` (a power of two)."""
    return (n + alignment - 1) & ~(alignment - 1)


def split(statement) -> tuple[tuple[str, ...], str, str]:
    """``"a, b = f(x)"`` → ``(("a", "b"), "f(x)", text)``; no ``=`` → nothing defined."""
    if not isinstance(statement, str):
        raise TypeError(f"a statement is a string like 'c = a + b', got {statement!r}")
    text = statement.strip()
    m = re.match(r"^\s*([A-Za-z_][A-Za-z_0-9]*(?:\s*,\s*[A-Za-z_][A-Za-z_0-9]*)*)\s*=(?!=)(.*)$", text)
    if m is None:
        return (), text, text
    return tuple(n.strip() for n in m.group(1).split(",")), m.group(2), text


def text_of(defs, uses) -> str:
    """The text of an instruction given only its defs and uses."""
    left = ", ".join(defs)
    right = f"use({', '.join(uses)})" if uses else "new()"
    return f"{left} = {right}" if left else right
