"""Exercises of notebook 04 (the arena allocator): ``align_up``, a bump allocator's
offsets and padding, and where chained growth puts each block.

While the learner's function runs, the engine's ``align_up`` and ``Arena`` are switched
off. The references are independent: ceiling division, and a bump allocator and a chunk
chain written here (tests/test_exercise_checkers.py checks that they agree with the
engine's ``Arena`` on every case).
"""
from __future__ import annotations

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng


def _arena_blocks():
    from ..memory.arena import Arena
    from ..memory.block import align_up

    return [align_up, (Arena, "__init__"), (Arena, "alloc")]


def _ceil_to(n: int, a: int) -> int:
    """The reference for align_up: ceiling division, then back to bytes."""
    return -(-n // a) * a


# ----------------------------------------------------------------------------------------------
# Exercise 1: align_up
# ----------------------------------------------------------------------------------------------
ALIGN_CASES = ([(n, 64) for n in (0, 1, 5, 63, 64, 65, 127, 128, 129, 1000, 4096)]
               + [(n, a) for a in (1, 2, 8, 16, 4096)
                  for n in (0, 1, a - 1 if a > 1 else 2, a, a + 1, 3 * a + 2)]
               + [(10 ** 9 + 7, 64), (2 ** 40 + 1, 4096)])


def check_align_up(fn) -> None:
    """``fn(n, alignment) -> int``: the smallest multiple of ``alignment`` (a power of two)
    that is ≥ ``n``. Checked against ceiling division, on fixed and random cases (the
    engine's ``align_up`` and ``Arena`` are switched off meanwhile).
    """
    r = rng()
    cases = ALIGN_CASES + [(int(r.integers(0, 1 << int(r.integers(1, 41)))), 1 << int(r.integers(0, 13)))
                           for _ in range(200 if hidden() else 40)]
    for n, a in cases:
        want = _ceil_to(n, a)
        where = f"for n = {n}, alignment = {a}:"
        got = _call(fn, where, n, a)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        if isinstance(got, float):
            _fail(f"{where} your function returned the float {got!r}; return an int (use // or bit "
                  "operations, not /: floats lose exactness above 2**53 bytes and are not offsets).")
        try:
            got = int(got)
        except (TypeError, ValueError):
            _fail(f"{where} your function returned {got!r}; return an int.")
        if got == want:
            continue
        msg = f"{where} the next multiple of {a} at or above {n} is {want}; you returned {got}."
        if n % a == 0 and got == n + a:
            hint = (f"{n} is already a multiple of {a}, so it stays {n}: nothing to pad. "
                    "(n // a + 1) * a always moves up; (n + a - 1) // a * a does not.")
        elif got == n // a * a:
            hint = "You rounded down. The block must start at or AFTER the top, or it overlaps the block before it."
        elif got % a:
            hint = f"{got} is not a multiple of {a}."
        elif got < n:
            hint = "That is below n: it would overlap the bytes already handed out."
        else:
            hint = f"{got} is a multiple of {a} and ≥ {n}, but not the smallest one: that wastes bytes."
        _fail(msg + "\n" + hint)
    _passed("check_align_up", len(cases))


check_align_up = checker("align_up", blocks=_arena_blocks, suite="align_up")(check_align_up)


# ----------------------------------------------------------------------------------------------
# Exercise 2: bump allocation with alignment
# ----------------------------------------------------------------------------------------------
BUMP_CASES = [
    ([100, 20, 64, 1, 200], 64),
    ([8, 8, 8, 8], 64),
    ([3, 5, 7, 11, 13], 8),
    ([64, 64, 64], 64),
    ([1, 1, 1, 1, 1], 1),
    ([4000, 96, 4000], 4096),
    ([48, 16, 1000, 24, 4, 256], 16),
]


def _reference_bump(sizes, alignment):
    """``(offsets, padding, used)`` of bump-allocating ``sizes`` from offset 0."""
    offsets, padding, top = [], 0, 0
    for n in sizes:
        start = _ceil_to(top, alignment)
        padding += start - top
        offsets.append(start)
        top = start + n
    return offsets, padding, top


def _random_sizes(r, count: int, most: int) -> list[int]:
    return [int(n) for n in r.integers(1, most, count)]


def check_bump_offsets(fn) -> None:
    """``fn(sizes, alignment) -> (offsets, padding)``: bump-allocate ``sizes`` (bytes, in
    order) from one chunk that starts at offset 0: each block starts at the top rounded up
    to ``alignment``. Return each block's offset and the total padding (bytes skipped
    *before* blocks to reach the alignment). Checked against a bump allocator written here,
    on fixed and random cases (the engine's ``Arena`` and ``align_up`` are switched off
    meanwhile: use your own ``align_up``).
    """
    r = rng()
    cases = BUMP_CASES + [(_random_sizes(r, int(r.integers(1, 12)), 300), 1 << int(r.integers(0, 8)))
                          for _ in range(30 if hidden() else 8)]
    for sizes, a in cases:
        offsets, padding, used = _reference_bump(sizes, a)
        where = f"for sizes {sizes} with alignment {a}:"
        got = _call(fn, where, list(sizes), a)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        try:
            got_offsets, got_padding = got
            got_offsets = [int(x) for x in got_offsets]
            got_padding = int(got_padding)
        except (TypeError, ValueError):
            _fail(f"{where} your function returned {got!r}; return a pair (offsets, padding): "
                  "a list with one offset per size, and an int.")
        if len(got_offsets) != len(sizes):
            _fail(f"{where} you returned {len(got_offsets)} offsets for {len(sizes)} sizes; one per block.")
        for i, (g, w) in enumerate(zip(got_offsets, offsets)):
            if g == w:
                continue
            top = offsets[i - 1] + sizes[i - 1] if i else 0
            msg = (f"{where} block {i} ({sizes[i]} bytes) starts at offset {w} in a real arena "
                   f"(the top was at {top}, rounded up to a multiple of {a}); you said {g}.")
            if i and g == top:
                hint = "You forgot the alignment: round the top up before placing the block."
            elif g % a:
                hint = f"{g} is not a multiple of {a}: every block must start aligned."
            elif i and got_offsets[i - 1] == offsets[i - 1] and g > w:
                hint = (f"{g} is aligned but not the first aligned offset at or after the top "
                        f"({top}): that wastes {g - w} bytes.")
            else:
                hint = "offset = align_up(top, alignment); then the top moves to offset + size."
            _fail(msg + "\n" + hint)
        if got_padding != padding:
            msg = (f"{where} your offsets are right, but a real arena counts {padding} bytes of "
                   f"padding; you said {got_padding}.")
            if got_padding == padding + (-(used) % a):
                hint = ("You also counted the bytes after the LAST block up to the next multiple. "
                        "An arena pads before a block, when the next one arrives; until then the "
                        "bytes after the top are free, not padding.")
            else:
                hint = "padding = sum over blocks of (offset - top before the block)."
            _fail(msg + "\n" + hint)
    _passed("check_bump_offsets", len(cases))


check_bump_offsets = checker("bump_offsets", blocks=_arena_blocks)(check_bump_offsets)


# ----------------------------------------------------------------------------------------------
# Exercise 3: chained growth
# ----------------------------------------------------------------------------------------------
CHUNK_CASES = [
    ([300, 300, 300, 300], 1024, 64, 1.5),
    ([600, 600, 600, 600, 600], 1024, 64, 1.5),
    ([100, 5000, 100, 100], 1024, 64, 1.5),
    ([512] * 9, 1024, 64, 2.0),
    ([1000, 24, 1000, 24, 1000, 24, 1000], 2048, 64, 1.5),
    ([40, 40, 40, 40, 40, 40, 40, 40], 100, 16, 1.5),
]


def _reference_chunks(sizes, capacity, alignment, growth):
    """``(placements, chunks)`` of an arena that chains a new chunk when a block does not fit."""
    chunks, placed, top = [_ceil_to(capacity, alignment)], [], 0
    for n in sizes:
        start = _ceil_to(top, alignment)
        if start + n > chunks[-1]:
            chunks.append(max(_ceil_to(n, alignment), _ceil_to(int(sum(chunks) * (growth - 1)), alignment)))
            start = 0
        placed.append((len(chunks) - 1, start))
        top = start + n
    return placed, chunks


def check_chunk_plan(fn) -> None:
    """``fn(sizes, capacity, alignment, growth) -> (placements, chunks)``: where an arena
    that starts with one chunk of ``capacity`` bytes (rounded up to ``alignment``) puts
    each block, ``(chunk index, offset in that chunk)``, and the sizes of all its chunks
    at the end. A block that does not fit in the current chunk goes to the start of a new
    chunk, chained at the end, of ``max(align_up(n), align_up(int(total * (growth - 1))))``
    bytes, where ``total`` is the capacity of all chunks so far; the old chunk's tail is
    skipped. Checked against a chunk chain written here, on fixed and random cases (the
    engine's ``Arena`` is switched off meanwhile).
    """
    r = rng()
    cases = CHUNK_CASES + [(_random_sizes(r, int(r.integers(2, 14)), 900), int(r.integers(64, 2048)),
                            1 << int(r.integers(3, 7)), float(r.choice([1.25, 1.5, 2.0])))
                           for _ in range(30 if hidden() else 8)]
    for sizes, capacity, a, growth in cases:
        placed, chunks = _reference_chunks(sizes, capacity, a, growth)
        where = f"for sizes {sizes}, capacity {capacity}, alignment {a}, growth {growth}:"
        got = _call(fn, where, list(sizes), capacity, a, growth)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        try:
            got_placed, got_chunks = got
            got_placed = [(int(c), int(o)) for c, o in got_placed]
            got_chunks = [int(c) for c in got_chunks]
        except (TypeError, ValueError):
            _fail(f"{where} your function returned {got!r}; return (placements, chunks): a list of "
                  "(chunk, offset) pairs, one per size, and a list of chunk sizes in bytes.")
        if len(got_placed) != len(sizes):
            _fail(f"{where} you returned {len(got_placed)} placements for {len(sizes)} sizes.")
        for i, (g, w) in enumerate(zip(got_placed, placed)):
            if g == w:
                continue
            msg = (f"{where} block {i} ({sizes[i]} bytes) goes to chunk {w[0]} at offset {w[1]} in a real "
                   f"arena; you said chunk {g[0]}, offset {g[1]}.")
            before = chunks[: w[0] + 1]
            if g[0] == w[0] - 1:
                hint = (f"It does not fit in chunk {g[0]} ({chunks[g[0]]} bytes): offset {g[1]} + "
                        f"{sizes[i]} bytes would pass the chunk's end. Chain a new chunk.")
            elif g[0] > w[0]:
                hint = (f"It still fits in chunk {w[0]} (of {chunks[w[0]]} bytes): only move on when "
                        "align_up(top) + size passes the current chunk's end.")
            elif g[0] == w[0] and w[1] == 0:
                hint = "A new chunk starts empty: the block goes to offset 0 of it."
            else:
                hint = (f"Inside a chunk, blocks are bump-allocated as before: offset = align_up(top, "
                        f"{a}). The chunks so far are {before} bytes.")
            _fail(msg + "\n" + hint)
        if got_chunks != chunks:
            msg = (f"{where} your placements are right, but a real arena's chunks are {chunks} bytes; "
                   f"you said {got_chunks}.")
            k = next((i for i, (g, w) in enumerate(zip(got_chunks, chunks)) if g != w),
                     min(len(got_chunks), len(chunks)))
            if k == 0:
                hint = f"The first chunk is the capacity rounded up to the alignment: {chunks[0]}."
            elif k < len(got_chunks) and k < len(chunks):
                total = sum(chunks[:k])
                grow = -(-int(total * (growth - 1)) // a) * a
                if got_chunks[k] == -(-int(chunks[k - 1] * growth) // a) * a:
                    hint = (f"Chunk {k} is not {growth} × the previous chunk: the arena's TOTAL capacity "
                            f"grows by {growth}×, so the new chunk adds (growth - 1) × total = "
                            f"{growth - 1:g} × {total} → {grow} bytes (or the request, if bigger).")
                else:
                    hint = (f"Chunk {k}: the total so far is {total} bytes, so growth adds "
                            f"align_up(int({total} × {growth - 1:g}), {a}) = {grow} bytes — unless the "
                            f"request that did not fit is bigger (then align_up(request)).")
            else:
                hint = "Chain exactly one chunk per request that does not fit, no more."
            _fail(msg + "\n" + hint)
    _passed("check_chunk_plan", len(cases))


check_chunk_plan = checker("chunk_plan", blocks=_arena_blocks)(check_chunk_plan)


# ----------------------------------------------------------------------------------------------
# Exercise 4: a bump arena of your own (alignment, chained growth, reset, high water)
# ----------------------------------------------------------------------------------------------
class _ReferenceArena:
    """The reference bump arena, written here (tests check it against ``mt.memory.Arena``)."""

    def __init__(self, capacity, alignment, growth):
        self.alignment, self.growth = alignment, growth
        self.chunks = [_ceil_to(capacity, alignment)]
        self.chunk = self.top = self.before = self.padding = self.high_water = 0

    @property
    def used(self):
        return self.before + self.top

    def alloc(self, n):
        while _ceil_to(self.top, self.alignment) + n > self.chunks[self.chunk]:
            self.before += self.chunks[self.chunk]
            self.chunk, self.top = self.chunk + 1, 0
            if self.chunk == len(self.chunks):
                grow = _ceil_to(int(sum(self.chunks) * (self.growth - 1)), self.alignment)
                self.chunks.append(max(_ceil_to(n, self.alignment), grow))
        start = _ceil_to(self.top, self.alignment)
        self.padding += start - self.top
        self.top = start + n
        self.high_water = max(self.high_water, self.used)
        return self.chunk, start

    def reset(self):
        self.chunk = self.top = self.before = self.padding = 0


BUMP_ARENA_PROGRAMS = [
    ("fits in the first chunk", (1024, 64, 1.5), [100, 20, 64, 1, 200]),
    ("grows: a chunk chained when a block does not fit", (1024, 64, 1.5), [300, 300, 300, 300, 300]),
    ("a request bigger than the growth step", (1024, 64, 1.5), [100, 5000, 100]),
    ("reset, then the chunks are reused before any new one", (1000, 64, 1.5),
     [600, 600, 600, "reset", 600, 600, 600, 600]),
    ("alignment 16, growth 2", (100, 16, 2.0), [40, 40, 40, 40, "reset", 8, 90, 40]),
]


def _random_arena_programs(n: int) -> list:
    r, out = rng(), []
    for k in range(n):
        ops = ["reset" if r.random() < 0.12 else int(r.integers(1, 700)) for _ in range(int(r.integers(4, 16)))]
        out.append((f"random program #{k + 1}", (int(r.integers(64, 2048)), 1 << int(r.integers(0, 8)),
                                                  float(r.choice([1.25, 1.5, 2.0]))), ops))
    return out


def _bump_arena_blocks():
    from ..memory.arena import Arena

    return _arena_blocks() + [(Arena, "reset")]


def _facts(arena) -> dict:
    return {"chunks": [int(c) for c in arena.chunks], "padding": int(arena.padding),
            "used": int(arena.used), "high_water": int(arena.high_water)}


def check_bump_arena(cls) -> None:
    """``cls(capacity, alignment, growth)``: a bump arena over chained chunks, with
    ``alloc(n) -> (chunk, offset)``, ``reset()``, and the attributes ``chunks`` (chunk sizes
    in bytes), ``padding`` (bytes skipped for alignment since the last reset), ``used`` (bytes
    below the top, skipped chunk tails included) and ``high_water`` (the most ``used`` ever).
    Checked after every operation of fixed and random programs against a bump arena written
    here (the engine's ``Arena`` and ``align_up`` are switched off meanwhile).
    """
    if not isinstance(cls, type):
        _fail(f"check_bump_arena needs your class (class BumpArena: ...), got {cls!r}.")
    programs = BUMP_ARENA_PROGRAMS + _random_arena_programs(25 if hidden() else 6)
    steps = 0
    for what, (capacity, a, growth), ops in programs:
        mine = _call(cls, f"for {what}: BumpArena({capacity}, {a}, {growth})", capacity, a, growth)
        ref = _ReferenceArena(capacity, a, growth)
        done = []
        for op in ops:
            steps += 1
            call = "reset()" if op == "reset" else f"alloc({op})"
            where = (f"for {what}: BumpArena(capacity={capacity}, alignment={a}, growth={growth}), then "
                     + "; ".join(done + [call]) + ":")
            before = _facts(ref)
            if op == "reset":
                _call(mine.reset, where)
                ref.reset()
            else:
                top_before, chunk_before = ref.top, ref.chunk
                want = ref.alloc(op)
                got = _call(mine.alloc, where, op)
                try:
                    got = (int(got[0]), int(got[1]))
                except (TypeError, ValueError, IndexError):
                    _fail(f"{where}\nalloc returned {got!r}; return (chunk index, offset in that chunk).")
                if got != want:
                    if got == (want[0], top_before) and want[0] == chunk_before and top_before % a:
                        hint = f"You forgot the alignment: the block starts at the top rounded up to {a}."
                    elif got[0] < want[0]:
                        hint = (f"It does not fit in chunk {got[0]} ({ref.chunks[got[0]]} bytes): aligned start + "
                                f"{op} bytes would pass its end, so the arena moves on to the next chunk "
                                "(after a reset: the next existing chunk, before growing a new one).")
                    elif got[0] > want[0]:
                        hint = ("Move on only when the block does not fit. After a reset, start again at "
                                "chunk 0: the chunks stay, and are reused before any new one is made.")
                    elif want[1] == 0:
                        hint = "A block that moves to another chunk starts at offset 0 there."
                    else:
                        hint = f"offset = align_up(top, {a}); then the top moves to offset + {op}."
                    _fail(f"{where}\nalloc returned (chunk, offset) = {got}, but a bump arena puts it at {want}.\n{hint}")
            try:
                have = _facts(mine)
            except (AttributeError, TypeError, ValueError) as exc:
                _fail(f"{where}\nreading your arena's chunks, padding, used and high_water failed: "
                      f"{type(exc).__name__}: {exc}. Keep them as attributes (used may be a property).")
            want_facts = _facts(ref)
            for key in ("chunks", "padding", "used", "high_water"):
                if have[key] == want_facts[key]:
                    continue
                if key == "chunks":
                    total = sum(before["chunks"])
                    hint = (f"A new chunk holds max(align_up(n), align_up(int(total × (growth − 1)))) bytes, "
                            f"with total = {total}, the capacity of ALL chunks so far (not the last one's)."
                            if len(have["chunks"]) == len(want_facts["chunks"]) else
                            "Grow only when no existing chunk further on is left: after a reset the "
                            "arena walks its chunks again before making a new one." if op != "reset" and
                            len(have["chunks"]) > len(want_facts["chunks"]) else
                            f"The arena has {len(want_facts['chunks'])} chunks now.")
                elif key == "padding":
                    hint = ("reset() frees everything: padding starts again from 0." if op == "reset" else
                            "Padding is what the arena skips BEFORE a block to align it: start − top.")
                elif key == "used":
                    hint = ("used is every byte below the top: the chunks before the current one in full "
                            "(their skipped tails too) plus the top in this one; 0 after a reset.")
                else:
                    hint = ("high_water is the most `used` ever — a reset does not lower it (it is how "
                            "big the arena needs to be)." if op == "reset" else
                            "After each alloc, high_water = max(high_water, used).")
                _fail(f"{where}\nyour arena's {key} is {have[key]}, but it should be {want_facts[key]}.\n{hint}")
            done.append(call)
    _passed("check_bump_arena", steps)


check_bump_arena = checker("BumpArena", blocks=_bump_arena_blocks)(check_bump_arena)
