"""Mutation run 5, ``exercises/arena.py`` (notebook 04's checkers): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake a learner makes (forgetting the
  alignment, rounding down, a new chunk not starting at 0, ...): each is rejected, and the
  message names the case, the block and the hint for that mistake;
* the cases the checkers generate are the kinds they promise: fixed and randomized ones, a
  larger randomized set for the hidden run, valid inputs (sizes of at least one byte, a
  power-of-two alignment, a growth factor above 1) that exercise padding, chained chunks
  and resets;
* the pass message counts the cases the learner's function was called on.

Record: tests/mutation-run-5/exercises-arena.md.
"""
from __future__ import annotations

import pytest

import microtorch as mt
from microtorch.exercises import arena

from checker_probes import Recorder as _Recorder, failure as _message, cases_counted as _cases_counted
from test_exercise_checkers import _solutions

SOLUTION = _solutions("04_arena_allocator")  # the notebook's reference answers
align_up = SOLUTION["align_up"]
bump_offsets = SOLUTION["bump_offsets"]
chunk_plan = SOLUTION["chunk_plan"]
BumpArena = SOLUTION["BumpArena"]


def _except_on(solution, case, change):
    """The notebook's solution, except on the case called with ``case``: there ``change(answer)``."""
    def answer(*args):
        right = solution(*args)
        return change(right) if args == tuple(case) else right
    return answer


def _is_power_of_two(a) -> bool:
    return isinstance(a, int) and a > 0 and a & (a - 1) == 0


# ----------------------------------------------------------------------------------------------
# exercise 1: align_up
# ----------------------------------------------------------------------------------------------
ALIGN_MISTAKES = [  # (wrong answer, the case and numbers the message names, words of its hint)
    (lambda n, a: (n // a + 1) * a, "for n = 0, alignment = 64: the next multiple of 64 at or above 0 is 0; "
     "you returned 64.", "0 is already a multiple of 64, so it stays 0: nothing to pad."),
    (lambda n, a: (n // a + 1) * a if n else 0, "for n = 64, alignment = 64: the next multiple of 64 at or above "
     "64 is 64; you returned 128.", "64 is already a multiple of 64, so it stays 64"),
    (lambda n, a: n // a * a, "for n = 1, alignment = 64: the next multiple of 64 at or above 1 is 64; "
     "you returned 0.", "You rounded down."),
    (lambda n, a: n + a - 1, "for n = 0, alignment = 64:", "63 is not a multiple of 64."),
    (lambda n, a: n // a * a - a, "for n = 0, alignment = 64:", "That is below n"),
    (lambda n, a: align_up(n, a) + a if n > 100 else align_up(n, a), "for n = 127, alignment = 64:",
     "192 is a multiple of 64 and ≥ 127, but not the smallest one"),
    (lambda n, a: n // a * a if (n, a) == (1000, 64) else align_up(n, a),
     "for n = 1000, alignment = 64: the next multiple of 64 at or above 1000 is 1024; you returned 960.",
     "You rounded down."),
    (lambda n, a: 1 // (n - n), "for n = 0, alignment = 64: your function raised ZeroDivisionError", "(called as fn(0, 64))"),
]


ALIGN_IDS = [
    "moves-up-from-0", "moves-up-from-a-multiple", "rounds-down", "adds-a-minus-1-only", "below-n",
    "not-the-smallest", "rounds-down-at-1000", "raises",
]


@pytest.mark.parametrize("wrong, where, hint", ALIGN_MISTAKES, ids=ALIGN_IDS)
def test_each_wrong_align_up_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued align_up mistake fails on its first wrong case, named, with its hint."""
    msg = _message(mt.exercises.check_align_up, wrong)
    assert msg.startswith(where.split(":")[0] + ":")
    assert where in msg and hint in msg


def test_align_up_has_more_random_cases_when_hidden_and_counts_them(capsys):
    """Fixed cases then random ones, more of them hidden; the pass message counts the calls."""
    spy = _Recorder(align_up)
    mt.exercises.check_align_up(spy)
    visible = _cases_counted(capsys.readouterr().out, "check_align_up")
    randoms = spy.calls[len(arena.ALIGN_CASES):visible]  # (then the engine's own tests call it too)
    spy = _Recorder(align_up)
    mt.exercises.check_align_up(spy, hidden=True)
    assert _cases_counted(capsys.readouterr().out, "check_align_up") == len(spy.calls)
    assert spy.calls[:len(arena.ALIGN_CASES)] == [tuple(c) for c in arena.ALIGN_CASES]
    hidden = spy.calls[len(arena.ALIGN_CASES):]
    assert len(hidden) > len(randoms) > 0 and hidden[:3] != randoms[:3]
    for n, a in randoms + hidden:
        assert isinstance(n, int) and n >= 0 and _is_power_of_two(a)
    for cases in (randoms, hidden):  # random, not one case over and over: varied n, alignments, remainders
        assert len({n for n, _ in cases}) > len(cases) // 2 and len({a for _, a in cases}) > 3
        assert any(n % a for n, a in cases)


# ----------------------------------------------------------------------------------------------
# exercise 2: bump_offsets
# ----------------------------------------------------------------------------------------------
def _bump_unaligned(sizes, alignment):
    return [sum(sizes[:i]) for i in range(len(sizes))], 0


def _bump_one_past(sizes, alignment):
    """Off by one: rounds top + 1 up, so even the first block moves off offset 0."""
    offsets, top = [], 0
    for n in sizes:
        offsets.append(align_up(top + 1, alignment))
        top = offsets[-1] + n
    return offsets, 0


def _bump_rounds_down(sizes, alignment):
    offsets, top = [], 0
    for n in sizes:
        offsets.append(top // alignment * alignment)
        top = offsets[-1] + n
    return offsets, 0


def _bump_always_moves_up(sizes, alignment):
    """Exercise 1's mistake inside exercise 2: (top // a + 1) * a, a whole step too far when aligned."""
    offsets, top = [], 0
    for n in sizes:
        offsets.append((top // alignment + 1) * alignment if top else 0)
        top = offsets[-1] + n
    return offsets, 0


def _bump_plus_one_after_the_first(sizes, alignment):
    offsets, top = [], 0
    for i, n in enumerate(sizes):
        offsets.append(align_up(top, alignment) + (1 if i else 0))
        top = offsets[-1] + n
    return offsets, 0


def _bump_padding_after_the_last(sizes, alignment):
    offsets, padding = bump_offsets(sizes, alignment)
    return offsets, padding + (-(offsets[-1] + sizes[-1]) % alignment)


def _bump_padding_rounds_every_size(sizes, alignment):
    return bump_offsets(sizes, alignment)[0], sum(align_up(n, alignment) - n for n in sizes)


def _bump_padding_sign(sizes, alignment):
    offsets, padding = bump_offsets(sizes, alignment)
    return offsets, -padding


BUMP_MISTAKES = [  # (wrong answer, the case, block or padding it fails on, words of its hint)
    (_bump_unaligned, "block 1 (20 bytes) starts at offset 128", "You forgot the alignment"),
    (_bump_one_past, "block 0 (100 bytes) starts at offset 0 in a real arena (the top was at 0, rounded up "
                     "to a multiple of 64); you said 64.", "offset = align_up(top, alignment)"),
    (_bump_rounds_down, "block 1 (20 bytes) starts at offset 128 in a real arena (the top was at 100, "
                        "rounded up to a multiple of 64); you said 64.", "offset = align_up(top, alignment)"),
    (_bump_always_moves_up, "block 3 (1 bytes) starts at offset 256",
     "320 is aligned but not the first aligned offset at or after the top (256): that wastes 64 bytes."),
    (_bump_plus_one_after_the_first, "you said 129.", "129 is not a multiple of 64"),
    (_bump_padding_after_the_last, "a real arena counts 135 bytes of padding; you said 191.", "LAST block"),
    (_bump_padding_rounds_every_size, "a real arena counts 135 bytes of padding; you said 191.", "LAST block"),
    (_bump_padding_sign, "you said -135.", "padding = sum over blocks of (offset - top before the block)"),
]


@pytest.mark.parametrize("wrong, where, hint", BUMP_MISTAKES, ids=[m[0].__name__ for m in BUMP_MISTAKES])
def test_each_wrong_bump_offsets_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued bump_offsets mistake fails on the first fixed case, named, with its hint."""
    msg = _message(mt.exercises.check_bump_offsets, wrong)
    assert msg.startswith("for sizes [100, 20, 64, 1, 200] with alignment 64:")
    assert where in msg and hint in msg


def test_rounding_each_previous_size_up_is_a_right_answer(capsys):
    """offset = previous offset + align_up(previous size) equals align_up(top): accepted, no hint needed."""
    def by_sizes(sizes, a):
        offsets = [0]
        for n in sizes[:-1]:
            offsets.append(offsets[-1] + align_up(n, a))
        return offsets, sum(align_up(n, a) - n for n in sizes[:-1])
    mt.exercises.check_bump_offsets(by_sizes)
    mt.exercises.check_bump_offsets(by_sizes, hidden=True)
    assert capsys.readouterr().out.count("✓ check_bump_offsets") == 2


def test_a_bump_offsets_that_raises_is_told_which_case():
    """The message for a function that raises starts with the case it was called on."""
    msg = _message(mt.exercises.check_bump_offsets, lambda sizes, a: sizes[99])
    assert msg.startswith("for sizes [100, 20, 64, 1, 200] with alignment 64: your function raised IndexError")


def test_the_bump_offsets_pass_message_counts_the_cases_tried(capsys):
    """'all N cases right': N is how often the learner's function was called."""
    for hidden in (False, True):
        spy = _Recorder(bump_offsets)
        mt.exercises.check_bump_offsets(spy, hidden=hidden)
        assert f"✓ check_bump_offsets: all {len(spy.calls)} cases right" in capsys.readouterr().out


def test_bump_offsets_is_tried_on_the_fixed_cases_and_valid_random_ones():
    """Fixed cases first, then random ones (more in the hidden run): sizes ≥ 1, alignment a power of two."""
    seen = {}
    for hidden in (False, True):
        spy = _Recorder(bump_offsets)
        mt.exercises.check_bump_offsets(spy, hidden=hidden)
        assert spy.calls[:len(arena.BUMP_CASES)] == [tuple(c) for c in arena.BUMP_CASES]
        seen[hidden] = spy.calls[len(arena.BUMP_CASES):]
    assert len(seen[True]) > len(seen[False]) > 0 and seen[True][:3] != seen[False][:3]
    randoms = seen[False] + seen[True]
    for sizes, a in randoms:
        assert sizes and all(isinstance(n, int) and n >= 1 for n in sizes) and _is_power_of_two(a)
    assert any(bump_offsets(sizes, a)[1] > 0 for sizes, a in seen[False])  # the padding is tried


# ----------------------------------------------------------------------------------------------
# exercise 3: chunk_plan
# ----------------------------------------------------------------------------------------------
CASE_1, CASE_2 = arena.CHUNK_CASES[0], arena.CHUNK_CASES[1]


def _plan(sizes, capacity, alignment, growth, *, fits=lambda end, chunk: end <= chunk,
          restart=True, aligned=True, request=True, grow=lambda chunks, growth: sum(chunks) * (growth - 1)):
    """chunk_plan with one of its rules swapped for a learner's mistake."""
    up = align_up if aligned else (lambda n, a: n)
    chunks, placed, top = [align_up(capacity, alignment)], [], 0
    for n in sizes:
        start = up(top, alignment)
        if not fits(start + n, chunks[-1]):
            step = align_up(int(grow(chunks, growth)), alignment)
            chunks.append(max(align_up(n, alignment), step) if request else step)
            start = 0 if restart else start
        placed.append((len(chunks) - 1, start))
        top = start + n
    return placed, chunks


def _never_grows(sizes, capacity, alignment, growth):
    return _plan(sizes, capacity, alignment, growth, fits=lambda end, chunk: True)


CHUNK_MISTAKES = [  # (wrong answer, what the message says, words of its hint)
    (_never_grows, "block 3 (300 bytes) goes to chunk 1 at offset 0 in a real arena; you said chunk 0, offset 960.",
     "It does not fit in chunk 0 (1024 bytes): offset 960 + 300 bytes would pass the chunk's end."),
    (lambda *c: _plan(*c, fits=lambda end, chunk: end < chunk),
     "for sizes [512, 512, 512, 512, 512, 512, 512, 512, 512], capacity 1024, alignment 64, growth 2.0: block 1 "
     "(512 bytes) goes to chunk 0 at offset 512", "It still fits in chunk 0 (of 1024 bytes)"),
    (lambda *c: _plan(*c, restart=False), "goes to chunk 1 at offset 0 in a real arena; you said chunk 1, offset 960.",
     "A new chunk starts empty"),
    (lambda *c: _plan(*c, aligned=False), "block 1 (300 bytes) goes to chunk 0 at offset 320",
     "offset = align_up(top, 64). The chunks so far are [1024] bytes."),
    (lambda *c: _plan(*c, request=False),
     "for sizes [600, 600, 600, 600, 600], capacity 1024, alignment 64, growth 1.5: block 4 (600 bytes) goes to "
     "chunk 3 at offset 640 in a real arena; you said chunk 4, offset 0.", "It still fits in chunk 3 (of 1280 bytes)"),
    (lambda *c: _plan(*c, grow=lambda chunks, growth: chunks[-1] * growth), "a real arena's chunks are [1024, 512]",
     "Chunk 1 is not 1.5 × the previous chunk"),
    (lambda *c: (chunk_plan(*c)[0], chunk_plan(*c)[1] + [64]), "you said [1024, 512, 64].",
     "Chain exactly one chunk per request that does not fit"),
    (lambda *c: (chunk_plan(*c)[0], chunk_plan(*c)[1][:-1]), "you said [1024].",
     "Chain exactly one chunk per request that does not fit"),
    (lambda *c: (chunk_plan(*c)[0], [c[1]] + chunk_plan(*c)[1][1:]),
     "for sizes [40, 40, 40, 40, 40, 40, 40, 40], capacity 100, alignment 16, growth 1.5: your placements are right, "
     "but a real arena's chunks are [112, 64, 96, 144] bytes; you said [100, 64, 96, 144].",
     "The first chunk is the capacity rounded up to the alignment: 112."),
]


CHUNK_IDS = [
    "never-grows", "moves-on-when-it-fits-exactly", "new-chunk-not-at-0", "unaligned-in-a-chunk",
    "no-max-with-the-request", "times-the-last-chunk", "one-chunk-too-many", "last-chunk-dropped",
    "first-chunk-not-rounded",
]


@pytest.mark.parametrize("wrong, where, hint", CHUNK_MISTAKES, ids=CHUNK_IDS)
def test_each_wrong_chunk_plan_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued chunk_plan mistake fails, naming the case and the block or chunk, with its hint."""
    msg = _message(mt.exercises.check_chunk_plan, wrong)
    assert msg.startswith("for sizes [")
    assert where in msg and hint in msg


def test_a_new_chunk_smaller_than_its_request_is_told_the_growth_step():
    """A chunk grown by the step alone, not max(request, step), is told the total and the step."""
    case = arena.CHUNK_CASES[2]  # [100, 5000, 100, 100]: the 5000 bytes are bigger than the step
    wrong = _except_on(chunk_plan, case, lambda plan: _plan(*case, request=False))
    msg = _message(mt.exercises.check_chunk_plan, wrong)
    assert "your placements are right, but a real arena's chunks are [1024, 5056, 3072] bytes; you said [1024, 512, 768]." in msg
    assert ("Chunk 1: the total so far is 1024 bytes, so growth adds align_up(int(1024 × 0.5), 64) = 512 bytes — "
            "unless the request that did not fit is bigger") in msg


def test_the_chunks_so_far_are_every_chunk_up_to_the_blocks_own():
    """The bump hint lists the chunks up to and including the one the block goes to."""
    wrong = _except_on(chunk_plan, CASE_2, lambda plan: (plan[0][:-1] + [(3, 600)], plan[1]))
    msg = _message(mt.exercises.check_chunk_plan, wrong)
    assert "block 4 (600 bytes) goes to chunk 3 at offset 640 in a real arena; you said chunk 3, offset 600." in msg
    assert "The chunks so far are [1024, 640, 832, 1280] bytes." in msg


def test_a_plan_two_chunks_back_gets_the_bump_hint():
    """A block put two chunks too early is not told "it does not fit in chunk k" of the wrong chunk."""
    wrong = _except_on(chunk_plan, CASE_2, lambda plan: (plan[0][:2] + [(0, 640)] + plan[0][3:], plan[1]))
    msg = _message(mt.exercises.check_chunk_plan, wrong)
    assert "block 2 (600 bytes) goes to chunk 2 at offset 0 in a real arena; you said chunk 0, offset 640." in msg
    assert "The chunks so far are [1024, 640, 832] bytes." in msg


def test_the_times_previous_hint_rounds_the_product_up():
    """Chunk = growth × previous is recognised when that product is not a multiple of the alignment."""
    case = ([40, 40, 40, 40, 40, 40, 40, 40], 100, 16, 1.5)  # 112 × 1.5 = 168, rounded up to 176

    def times_previous(plan):
        chunks = plan[1][:1]
        while len(chunks) < len(plan[1]):
            chunks.append(max(48, align_up(int(chunks[-1] * 1.5), 16)))
        return plan[0], chunks
    msg = _message(mt.exercises.check_chunk_plan, _except_on(chunk_plan, case, times_previous))
    assert "a real arena's chunks are [112, 64, 96, 144] bytes; you said [112, 176, 272, 416]." in msg
    assert "Chunk 1 is not 1.5 × the previous chunk" in msg


def test_a_chunk_plan_that_raises_is_told_which_case():
    """The message for a function that raises starts with the case it was called on."""
    msg = _message(mt.exercises.check_chunk_plan, lambda sizes, capacity, a, growth: sizes[99])
    assert msg.startswith("for sizes [300, 300, 300, 300], capacity 1024, alignment 64, growth 1.5: "
                          "your function raised IndexError")


def test_the_chunk_plan_pass_message_counts_the_cases_tried(capsys):
    """'all N cases right': N is how often the learner's function was called."""
    for hidden in (False, True):
        spy = _Recorder(chunk_plan)
        mt.exercises.check_chunk_plan(spy, hidden=hidden)
        assert f"✓ check_chunk_plan: all {len(spy.calls)} cases right" in capsys.readouterr().out


def test_chunk_plan_is_tried_on_the_fixed_cases_and_valid_random_ones():
    """Fixed cases, then random ones (more when hidden): valid arenas, some of which chain chunks."""
    seen = {}
    for hidden in (False, True):
        spy = _Recorder(chunk_plan)
        mt.exercises.check_chunk_plan(spy, hidden=hidden)
        assert spy.calls[:len(arena.CHUNK_CASES)] == [tuple(c) for c in arena.CHUNK_CASES]
        seen[hidden] = spy.calls[len(arena.CHUNK_CASES):]
    assert len(seen[True]) > len(seen[False]) > 0 and seen[True][:3] != seen[False][:3]
    for sizes, capacity, a, growth in seen[False] + seen[True]:
        assert sizes and all(isinstance(n, int) and n >= 1 for n in sizes)
        assert isinstance(capacity, int) and capacity >= 1 and _is_power_of_two(a) and growth > 1
    plans = [chunk_plan(*case) for case in seen[False]]
    assert any(len(chunks) > 1 for _, chunks in plans)  # growth is tried
    assert any(chunk == before[0] and offset > before[1] + n  # padding inside a chunk is tried
               for (sizes, *_), (placed, _) in zip(seen[False], plans)
               for (chunk, offset), before, n in zip(placed[1:], placed, sizes))


# ----------------------------------------------------------------------------------------------
# exercise 4: BumpArena
# ----------------------------------------------------------------------------------------------
class _RecordingArena(BumpArena):
    """The notebook's BumpArena, recording every arena made and every operation on it."""

    programs: list = []

    def __init__(self, capacity, alignment=64, growth=1.5):
        super().__init__(capacity, alignment, growth)
        self.ops = []
        _RecordingArena.programs.append(((capacity, alignment, growth), self.ops))

    def alloc(self, n):
        self.ops.append(n)
        return super().alloc(n)

    def reset(self):
        self.ops.append("reset")
        return super().reset()


def _programs_run(hidden: bool) -> list:
    _RecordingArena.programs = []
    mt.exercises.check_bump_arena(_RecordingArena, hidden=hidden)
    return _RecordingArena.programs


def test_bump_arena_is_run_on_the_fixed_programs_and_more_random_ones_when_hidden():
    """The fixed programs first, then random ones: more of them in the hidden run."""
    visible, hidden = _programs_run(False), _programs_run(True)
    fixed = [(args, ops) for _, args, ops in arena.BUMP_ARENA_PROGRAMS]
    assert visible[:len(fixed)] == fixed and hidden[:len(fixed)] == fixed
    assert len(hidden) > len(visible) > len(fixed)


def test_the_random_arena_programs_are_valid_and_mix_allocs_with_resets():
    """Random programs: valid arenas, allocations of at least one byte, resets among them, growth."""
    randoms = [p for hidden in (False, True) for p in _programs_run(hidden)[len(arena.BUMP_ARENA_PROGRAMS):]]
    for (capacity, a, growth), ops in randoms:
        assert isinstance(capacity, int) and capacity >= 1 and _is_power_of_two(a) and growth > 1
        allocs = [op for op in ops if op != "reset"]
        assert allocs and all(isinstance(n, int) and n >= 1 for n in allocs)
    assert any("reset" in ops for _, ops in randoms)
    grown = 0
    for args, ops in randoms:
        ref = BumpArena(*args)
        for op in ops:
            ref.reset() if op == "reset" else ref.alloc(op)
        grown += len(ref.chunks) > 1
    assert grown > 0


def test_random_arena_programs_are_numbered_from_one_in_their_labels():
    """The k-th random program is labelled 'random program #k', as the learner reads it."""
    assert [what for what, _, _ in arena._random_arena_programs(4)] == [f"random program #{k}" for k in (1, 2, 3, 4)]


class _NeverGrows(BumpArena):
    def alloc(self, n):
        start = align_up(self.top, self.alignment)
        self.padding += start - self.top
        self.top = start + n
        self.high_water = max(self.high_water, self.used)
        return 0, start


class _BackToTheChunkItWasIn(BumpArena):
    def reset(self):
        self.top = self.before = self.padding = 0


class _NoRestart(BumpArena):
    """Moves on to the next chunk but answers the offset the block had in the old one."""

    def alloc(self, n):
        chunk, old = self.chunk, align_up(self.top, self.alignment)
        got = super().alloc(n)
        return got if got[0] == chunk else (got[0], old)


class _RoundsDown(BumpArena):
    def alloc(self, n):
        start = self.top // self.alignment * self.alignment
        self.top = start + n
        self.high_water = max(self.high_water, self.used)
        return self.chunk, start


class _GrowsTheLastChunk(BumpArena):
    def alloc(self, n):
        start = align_up(self.top, self.alignment)
        while start + n > self.chunks[self.chunk]:
            self.before += self.chunks[self.chunk]
            self.chunk, self.top, start = self.chunk + 1, 0, 0
            if self.chunk == len(self.chunks):
                self.chunks.append(max(align_up(n, self.alignment), align_up(int(self.chunks[-1] * self.growth),
                                                                                 self.alignment)))
        self.padding += start - self.top
        self.top = start + n
        self.high_water = max(self.high_water, self.used)
        return self.chunk, start


class _ResetKeepsBefore(BumpArena):
    def reset(self):
        self.chunk = self.top = self.padding = 0


def _raises(self, *args):
    raise ValueError("not yet")


ARENA_MISTAKES = [  # (wrong class, the program and step the message names, words of its hint)
    (_NeverGrows, "for grows: a chunk chained when a block does not fit: BumpArena(capacity=1024, alignment=64, "
     "growth=1.5), then alloc(300); alloc(300); alloc(300); alloc(300):\nalloc returned (chunk, offset) = (0, 960), "
     "but a bump arena puts it at (1, 0).", "It does not fit in chunk 0 (1024 bytes)"),
    (_BackToTheChunkItWasIn, "then alloc(600); alloc(600); alloc(600); reset(); alloc(600):\nalloc returned "
     "(chunk, offset) = (2, 0), but a bump arena puts it at (0, 0).", "After a reset, start again at chunk 0"),
    (_NoRestart, "alloc(300); alloc(300); alloc(300); alloc(300):\nalloc returned (chunk, offset) = (1, 960)",
     "A block that moves to another chunk starts at offset 0 there."),
    (_RoundsDown, "for fits in the first chunk: BumpArena(capacity=1024, alignment=64, growth=1.5), then alloc(100); "
     "alloc(20):\nalloc returned (chunk, offset) = (0, 64), but a bump arena puts it at (0, 128).",
     "offset = align_up(top, 64); then the top moves to offset + 20."),
    (_GrowsTheLastChunk, "alloc(300); alloc(300); alloc(300); alloc(300):\nyour arena's chunks is [1024, 1536], but "
     "it should be [1024, 512].", "with total = 1024, the capacity of ALL chunks so far"),
    (_ResetKeepsBefore, "for reset, then the chunks are reused before any new one: BumpArena(capacity=1000, "
     "alignment=64, growth=1.5), then alloc(600); alloc(600); alloc(600); reset():\nyour arena's used is 1664, "
     "but it should be 0.", "0 after a reset"),
    (type("BumpArena", (BumpArena,), {"__init__": _raises}), "for fits in the first chunk: BumpArena(1024, 64, 1.5) "
     "your function raised ValueError: not yet", "(called as fn(1024, 64, 1.5))"),
    (type("BumpArena", (BumpArena,), {"alloc": _raises}), "for fits in the first chunk: BumpArena(capacity=1024, "
     "alignment=64, growth=1.5), then alloc(100): your function raised ValueError: not yet", "(called as fn(100))"),
    (type("BumpArena", (BumpArena,), {"reset": _raises}), "alloc(600); alloc(600); alloc(600); reset(): your "
     "function raised ValueError: not yet", "(called as fn())"),
]


ARENA_IDS = [
    "never-grows", "reset-keeps-the-chunk", "new-chunk-not-at-0", "rounds-down", "grows-the-last-chunk",
    "reset-keeps-before", "init-raises", "alloc-raises", "reset-raises",
]


@pytest.mark.parametrize("wrong, where, hint", ARENA_MISTAKES, ids=ARENA_IDS)
def test_each_wrong_bump_arena_is_rejected_with_its_program_and_hint(wrong, where, hint):
    """A catalogued BumpArena mistake fails at its first wrong step, named with the calls so far, with its hint."""
    msg = _message(mt.exercises.check_bump_arena, wrong)
    assert msg.startswith("for ")
    assert where in msg and hint in msg


def test_the_bump_arena_pass_message_counts_the_operations(capsys):
    """'all N cases right': N is the number of allocs and resets made on the learner's arenas."""
    for hidden in (False, True):
        programs = _programs_run(hidden)
        assert _cases_counted(capsys.readouterr().out, "check_bump_arena") == sum(len(ops) for _, ops in programs)
