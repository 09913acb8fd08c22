"""Random straight-line programs (DAGs of ops), for tests, benchmarks and exercises.

Instruction ``i`` defines buffer ``b{i}`` and reads one to ``fan_in`` earlier buffers,
mostly recent ones (a reach of ``reach`` instructions back, like activations feeding the
next layers), sometimes one far back (a skip connection); sizes are drawn from a few
powers of two, as tensor sizes are. The same ``seed`` gives the same program.
"""
from __future__ import annotations

import random

from .instructions import BasicBlock, Buffer, Instruction, align
from .program import Program


def random_program(n: int, seed: int = 0, fan_in: int = 2, reach: int = 6, sizes=(64, 128, 256, 512, 1024, 4096),
                   skip: float = 0.1, alignment: int = 64) -> Program:
    if n < 1:
        raise ValueError(f"a random program needs at least one instruction, got n={n}")
    rng = random.Random(seed)
    buffers, instructions = [], []
    for i in range(n):
        uses = set()
        if i:
            for _ in range(rng.randint(1, fan_in)):
                uses.add(rng.randrange(max(0, i - reach), i))
            if rng.random() < skip:
                uses.add(rng.randrange(0, i))
        nbytes = rng.choice(sizes) * rng.choice((1, 1, 1, 2, 3))
        buffers.append(Buffer(f"b{i}", nbytes, align(nbytes, alignment), "activation", i))
        names = tuple(f"b{u}" for u in sorted(uses))
        instructions.append(Instruction(i, f"b{i} = op({', '.join(names)})", (f"b{i}",), names))
    outputs = [f"b{n - 1}"]
    return Program(buffers, instructions, [BasicBlock("entry", list(range(n)))], outputs, alignment,
                   source=f"random_program({n}, seed={seed})")
