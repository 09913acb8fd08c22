"""Exercises of notebook 04 (the arena allocator): ``align_up``, a bump allocator's
offsets and padding, and where chained growth puts each block.

The reference is the engine's own :class:`~microtorch.memory.Arena`: the checkers make
one, allocate the same sizes, and read back each block's chunk, offset and padding.
"""
from __future__ import annotations

from .checking import _call, _fail, _passed, checker


# ----------------------------------------------------------------------------------------------
# Exercise 1: align_up
# ----------------------------------------------------------------------------------------------
ALIGN_CASES = ([(n, 64) for n in (0, 1, 5, 63, 64, 65, 127, 128, 129, 1000, 4096)]
               + [(n, a) for a in (1, 2, 8, 16, 4096)
                  for n in (0, 1, a - 1 if a > 1 else 2, a, a + 1, 3 * a + 2)]
               + [(10 ** 9 + 7, 64), (2 ** 40 + 1, 4096)])


@checker
def check_align_up(fn) -> None:
    """``fn(n, alignment) -> int``: the smallest multiple of ``alignment`` (a power of two)
    that is ≥ ``n``. Checked against ``mt.memory.align_up`` and against where a real
    ``Arena`` with that alignment puts a block after ``n`` bytes.
    """
    from ..memory import Arena
    from ..memory.block import align_up

    for n, a in ALIGN_CASES:
        want = align_up(n, a)
        if n < 1 << 16:  # the engine's arena agrees: after n bytes, the next block starts at want
            arena = Arena(capacity=max(2 * n + 2 * a, 64), alignment=a, name="exercise arena")
            if n:
                arena.alloc(n)
            assert arena.alloc(1).offset == want
            _dispose(arena)
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
    _passed("check_align_up", len(ALIGN_CASES))


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


def _engine_bump(sizes, alignment):
    from ..memory import Arena

    arena = Arena(capacity=sum(sizes) + alignment * (len(sizes) + 1), alignment=alignment,
                  name="exercise arena")
    offsets = [arena.alloc(n).offset for n in sizes]
    assert arena.growths == 0
    out = offsets, arena.padding, arena.used
    _dispose(arena)
    return out


@checker
def check_bump_offsets(fn) -> None:
    """``fn(sizes, alignment) -> (offsets, padding)``: bump-allocate ``sizes`` (bytes, in
    order) from one chunk that starts at offset 0: each block starts at the top rounded up
    to ``alignment``. Return each block's offset and the total padding (bytes skipped
    *before* blocks to reach the alignment). Checked against ``mt.memory.Arena``.
    """
    for sizes, a in BUMP_CASES:
        offsets, padding, used = _engine_bump(sizes, a)
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
            msg = (f"{where} block {i} ({sizes[i]} bytes) starts at offset {w} in the engine's arena "
                   f"(the top was at {top}, rounded up to a multiple of {a}); you said {g}.")
            if i and g == top:
                hint = "You forgot the alignment: round the top up before placing the block."
            elif g % a:
                hint = f"{g} is not a multiple of {a}: every block must start aligned."
            elif i and g == offsets[i - 1] + -(-sizes[i - 1] // a) * a and g != w:
                hint = "Round the top (offset + size) up, not only the previous size."
            elif i and got_offsets[i - 1] == offsets[i - 1] and g > w:
                hint = (f"{g} is aligned but not the first aligned offset at or after the top "
                        f"({top}): that wastes {g - w} bytes.")
            else:
                hint = "offset = align_up(top, alignment); then the top moves to offset + size."
            _fail(msg + "\n" + hint)
        if got_padding != padding:
            msg = (f"{where} your offsets are right, but the engine's arena counts {padding} bytes of "
                   f"padding; you said {got_padding}.")
            if got_padding == padding + (-(used) % a):
                hint = ("You also counted the bytes after the LAST block up to the next multiple. "
                        "An arena pads before a block, when the next one arrives; until then the "
                        "bytes after the top are free, not padding.")
            elif got_padding == sum(-(-n // a) * a - n for n in sizes):
                hint = ("You rounded every size up to the alignment. Padding is what the arena "
                        "skips before a block: offsets[i] - (offsets[i-1] + sizes[i-1]).")
            else:
                hint = "padding = sum over blocks of (offset - top before the block)."
            _fail(msg + "\n" + hint)
    _passed("check_bump_offsets", len(BUMP_CASES))


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


def _engine_chunks(sizes, capacity, alignment, growth):
    from ..memory import Arena

    arena = Arena(capacity=capacity, alignment=alignment, growth=growth, name="exercise arena")
    placed = []
    for n in sizes:
        b = arena.alloc(n)
        placed.append((b.chunk, b.offset))
    out = placed, [c.nbytes for c in arena.chunks]
    _dispose(arena)
    return out


def _dispose(arena) -> None:
    """Reset a checker's arena: its blocks point back at it (a reference cycle), so without
    this it would linger — and show up in traces — until Python's cycle collector runs."""
    arena.reset()


@checker
def check_chunk_plan(fn) -> None:
    """``fn(sizes, capacity, alignment, growth) -> (placements, chunks)``: where an arena
    that starts with one chunk of ``capacity`` bytes (rounded up to ``alignment``) puts
    each block, ``(chunk index, offset in that chunk)``, and the sizes of all its chunks
    at the end. A block that does not fit in the current chunk goes to the start of a new
    chunk, chained at the end, of ``max(align_up(n), align_up(int(total * (growth - 1))))``
    bytes, where ``total`` is the capacity of all chunks so far; the old chunk's tail is
    skipped. Checked against ``mt.memory.Arena``.
    """
    for sizes, capacity, a, growth in CHUNK_CASES:
        placed, chunks = _engine_chunks(sizes, capacity, a, growth)
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
            msg = (f"{where} block {i} ({sizes[i]} bytes) goes to chunk {w[0]} at offset {w[1]} in the "
                   f"engine's arena; you said chunk {g[0]}, offset {g[1]}.")
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
            msg = (f"{where} your placements are right, but the engine's chunks are {chunks} bytes; "
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
    _passed("check_chunk_plan", len(CHUNK_CASES))
