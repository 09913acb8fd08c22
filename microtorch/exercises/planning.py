"""Exercises of notebook 09 (liveness and memory planning): solve the liveness equations of
a small program with loops, write first-fit, and find programs where greedy-by-size beats
first-fit and where it loses.

The references here are independent of the engine's planner: liveness by searching paths
(a buffer is live into a block if some path from it reads the buffer before writing it —
no equations, no iteration), first-fit by trying every candidate offset, greedy-by-size
the same way. While the learner's function runs, the engine's own liveness solver and
planners are switched off (:func:`~.checker.checker`), so they cannot be the answer. Fixed
cases come first, then random ones (another seed, and more of them, with ``hidden=True``).
"""
from __future__ import annotations

import random

from .checker import checker
from .checking import _call, _fail, _passed, hidden


def _planning_blocks():
    """The engine's liveness solver and planners: switched off while the learner's code runs."""
    from ..planning import liveness, planners, program

    return [liveness.solve, (program.Program, "liveness"), planners.plan, planners.place]


# ----------------------------------------------------------------------------------------------
# Exercise 1: the liveness equations of a program with loops
# ----------------------------------------------------------------------------------------------
def reference_liveness(blocks: dict) -> tuple[dict, dict]:
    """By paths: x ∈ live_in[B] iff a path B → … → C reaches a block C that uses x, with
    no block before C on the path defining x. live_out[B] = ∪ live_in[S] over successors."""
    live_in = {}
    for b in blocks:
        live = set()
        for x in set().union(*(blk["use"] for blk in blocks.values())):
            stack, seen = [b], set()
            while stack:
                c = stack.pop()
                if c in seen:
                    continue
                seen.add(c)
                if x in blocks[c]["use"]:
                    live.add(x)
                    break
                if x not in blocks[c]["def"]:
                    stack.extend(blocks[c]["succ"])
        live_in[b] = live
    live_out = {b: set().union(*(live_in[s] for s in blk["succ"])) for b, blk in blocks.items()}
    return live_in, live_out


def _iterate(blocks, transfer, out_of, passes=None):
    """A (possibly wrong) iteration, to recognise typical mistakes."""
    live_in = {b: set() for b in blocks}
    live_out = {b: set() for b in blocks}
    k, changed = 0, True
    while changed and (passes is None or k < passes):
        changed, k = False, k + 1
        for b in reversed(list(blocks)):
            out = out_of(blocks, b, live_in)
            new = transfer(blocks[b], out)
            if new != live_in[b] or out != live_out[b]:
                changed = True
            live_in[b], live_out[b] = new, out
    return live_in, live_out


def _succ_union(blocks, b, live_in):
    return set().union(*(live_in[s] for s in blocks[b]["succ"]))


def _succ_inter(blocks, b, live_in):
    succ = blocks[b]["succ"]
    return set.intersection(*(set(live_in[s]) for s in succ)) if succ else set()


def _pred_union(blocks, b, live_in):
    return set().union(*(live_in[p] for p, blk in blocks.items() if b in blk["succ"]))


_RIGHT = lambda blk, out: blk["use"] | (out - blk["def"])  # noqa: E731
_MISTAKES = [
    (lambda bl: _iterate(bl, _RIGHT, _succ_union, passes=1),
     "This is what one pass over the blocks gives. Around a loop, a block's live_out depends on a "
     "block visited later (the back edge), so one pass is not enough: repeat the passes until a "
     "whole pass changes nothing (the fixed point)."),
    (lambda bl: _iterate(bl, lambda blk, out: blk["use"] | out, _succ_union),
     "You did not subtract def: live_in[b] = use[b] ∪ (live_out[b] − def[b]). A value the block writes "
     "before reading it is not needed on entry."),
    (lambda bl: _iterate(bl, lambda blk, out: (blk["use"] | out) - blk["def"], _succ_union),
     "You subtracted def from use too. A block that reads x before it writes it (i = i + 1) needs x on "
     "entry: live_in[b] = use[b] ∪ (live_out[b] − def[b]) — subtract def from live_out only."),
    (lambda bl: _iterate(bl, _RIGHT, _succ_inter),
     "live_out is the union over the successors, not the intersection: a value is live if SOME path "
     "still reads it."),
    (lambda bl: _iterate(bl, _RIGHT, _pred_union),
     "live_out[b] comes from b's successors (where control goes next), not its predecessors: liveness "
     "flows backwards, against the edges."),
]


def _loop_program():
    return {"entry": {"use": set(), "def": {"i", "s"}, "succ": ["loop"]},
            "loop": {"use": {"s", "i", "n"}, "def": {"t", "s", "i"}, "succ": ["loop", "exit"]},
            "exit": {"use": {"s"}, "def": set(), "succ": []}}


def _stored_cfgs():
    diamond = {"top": {"use": {"x"}, "def": {"c"}, "succ": ["then", "else"]},
               "then": {"use": {"c", "x"}, "def": {"y"}, "succ": ["join"]},
               "else": {"use": {"z"}, "def": {"y"}, "succ": ["join"]},
               "join": {"use": {"y"}, "def": set(), "succ": []}}
    nested = {"B0": {"use": set(), "def": {"i", "acc"}, "succ": ["outer"]},
              "outer": {"use": {"i", "n"}, "def": {"j"}, "succ": ["inner", "done"]},
              "inner": {"use": {"j", "acc", "w"}, "def": {"acc", "j", "tmp"}, "succ": ["inner", "step"]},
              "step": {"use": {"i"}, "def": {"i"}, "succ": ["outer"]},
              "done": {"use": {"acc"}, "def": set(), "succ": []}}
    return [_loop_program(), diamond, nested]


def _random_cfg(rng: random.Random):
    names = list("abcdefg")
    n = rng.randint(2, 6)
    labels = [f"B{k}" for k in range(n)]
    blocks = {}
    for k, b in enumerate(labels):
        succ = [labels[k + 1]] if k + 1 < n else []
        if rng.random() < 0.5:
            succ.append(rng.choice(labels))
        blocks[b] = {"use": set(rng.sample(names, rng.randint(0, 3))),
                     "def": set(rng.sample(names, rng.randint(0, 3))), "succ": list(dict.fromkeys(succ))}
    return blocks


def _copy(blocks):
    return {b: {"use": set(v["use"]), "def": set(v["def"]), "succ": list(v["succ"])} for b, v in blocks.items()}


def check_block_liveness(fn) -> None:
    """``fn(blocks) -> (live_in, live_out)``: ``blocks`` maps each block's name to
    ``{"use": set, "def": set, "succ": [successor names]}`` (in program order; a block with no
    successors ends the program, and nothing is live after it). Return two dicts mapping every
    block to its set of live buffers on entry and on exit — the solution of
    ``live_in[b] = use[b] ∪ (live_out[b] − def[b])``, ``live_out[b] = ∪ live_in[s]``.
    Checked against liveness found by searching paths, on stored programs with loops and
    branches and on random ones."""
    rng = random.Random(918 if hidden() else 9)
    stored = [] if hidden() else _stored_cfgs()
    cases = stored + [_random_cfg(rng) for _ in range(80 if hidden() else 40)]
    first_failure, candidates = None, list(range(len(_MISTAKES)))
    for k, blocks in enumerate(cases):
        where = ("for the loop program of the notebook:" if k == 0 and stored else
                 f"for {'random program' if k >= len(stored) else 'program'} {k + 1}:")
        want_in, want_out = reference_liveness(blocks)
        got = _call(fn, where, _copy(blocks))
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return live_in, live_out`?")
        if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(d, dict) for d in got)):
            _fail(f"{where} return a pair of dicts (live_in, live_out), each {{block: set}}; got {got!r}.")
        got_in, got_out = ({b: set(v) for b, v in d.items()} for d in got)
        missing = [b for b in blocks if b not in got_in or b not in got_out]
        if missing:
            _fail(f"{where} no answer for block(s) {missing}: give every block a set (empty if nothing is live).")
        got_out = {b: got_out[b] for b in blocks}
        # which typical mistakes give exactly this answer (decided over all cases, so that two
        # mistakes that agree on one program are told apart by the next)
        candidates = [m for m in candidates if _MISTAKES[m][0](blocks) == (got_in, got_out)]
        if first_failure is not None or (got_in == want_in and got_out == want_out):
            continue
        wrong = next((b for b in blocks if got_in[b] != want_in[b]), None)
        which, b = ("live_in", wrong) if wrong else ("live_out", next(b for b in blocks if got_out[b] != want_out[b]))
        got_set, want_set = (got_in, want_in) if which == "live_in" else (got_out, want_out)
        first_failure = (f"{where} {which}[{b!r}] should be {sorted(want_set[b])}, you have "
                         f"{sorted(got_set[b])}.\nThe program: {_show(blocks)}")
    if first_failure is not None:
        hint = (_MISTAKES[candidates[0]][1] if candidates else
                "Check both equations, and keep iterating over all blocks until nothing changes.")
        _fail(first_failure + "\n" + hint)
    _passed("check_block_liveness", len(cases))


check_block_liveness = checker("the liveness solver", blocks=_planning_blocks)(check_block_liveness)


def _show(blocks) -> str:
    return "; ".join(f"{b}: use {sorted(v['use'])} def {sorted(v['def'])} → {v['succ'] or 'end'}"
                     for b, v in blocks.items())


# ----------------------------------------------------------------------------------------------
# Exercise 2: first-fit
# ----------------------------------------------------------------------------------------------
def _overlap_in_time(a, b) -> bool:
    return a[1] <= b[2] and b[1] <= a[2]


def reference_fit(buffers, rule: str = "lowest") -> dict:
    """Place ``(name, first, last, size)`` in the given order: every candidate offset (0 and the
    end of each placed buffer live at the same time) is tried, and the lowest that fits wins
    (``rule="tightest"``: the one with the least room left above it before the next buffer)."""
    placed: list = []  # (name, first, last, size, offset)
    out = {}
    for name, first, last, size in buffers:
        live = [p for p in placed if _overlap_in_time(p, (name, first, last))]
        ok = []
        for cand in sorted({0, *(p[4] + p[3] for p in live)}):
            if all(cand + size <= p[4] or p[4] + p[3] <= cand for p in live):
                above = [p[4] - cand for p in live if p[4] >= cand + size]
                ok.append((min(above) - size if above else float("inf"), cand))
        offset = min(ok, key=lambda r: r[1])[1] if rule == "lowest" else min(ok)[1]
        placed.append((name, first, last, size, offset))
        out[name] = offset
    return out


def _arena(buffers, offsets) -> int:
    return max((offsets[n] + size for n, _, _, size in buffers), default=0)


def _first_fit_cases():
    """The stored cases (not with ``hidden=True``), then random ones."""
    stored = [] if hidden() else [
        [("a", 0, 2, 4), ("b", 1, 3, 2), ("c", 3, 5, 4), ("d", 4, 6, 2)],
        [("x", 0, 0, 8), ("y", 1, 1, 8), ("z", 2, 2, 8)],  # nothing overlaps: all at 0
        [("p", 0, 5, 2), ("q", 0, 1, 4), ("r", 2, 3, 3), ("s", 2, 5, 1), ("t", 4, 5, 2)],
        [("big", 0, 3, 10), ("small", 1, 1, 1), ("mid", 4, 6, 6), ("late", 5, 6, 5)],
    ]
    rng = random.Random(918 if hidden() else 16)
    randomized = []
    for k in range(120 if hidden() else 60):
        n = rng.randint(2, 12)
        bufs = []
        for i in range(n):
            first = rng.randint(0, 10)
            bufs.append((f"b{i}", first, first + rng.randint(0, 5), rng.choice([1, 2, 3, 4, 8])))
        randomized.append(sorted(bufs, key=lambda b: (b[1], b[0])))
    return stored + randomized


def check_first_fit(fn) -> None:
    """``fn(buffers) -> {name: offset}``: ``buffers`` is a list of ``(name, first, last, size)`` —
    live from instruction ``first`` to ``last`` inclusive, ``size`` bytes — in the order to place
    them (by first instruction). Put each at the lowest offset ≥ 0 where it overlaps no buffer
    already placed whose interval overlaps its own. Checked against a reference that tries every
    candidate offset, on stored and random cases."""
    cases = _first_fit_cases()
    first_failure, candidates = None, list(range(len(_FIT_MISTAKES)))
    for k, buffers in enumerate(cases):
        where = f"for buffers {buffers}:"
        got = _call(fn, where, list(buffers))
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return offsets`?")
        if not isinstance(got, dict):
            _fail(f"{where} return a dict {{name: offset}}, got {type(got).__name__}.")
        missing = [n for n, *_ in buffers if n not in got]
        if missing:
            _fail(f"{where} no offset for {missing}.")
        want = reference_fit(buffers)
        got = {n: int(got[n]) for n, *_ in buffers}
        if got == want:
            candidates = [m for m in candidates if _FIT_MISTAKES[m][0](buffers) == got]
            continue
        for i, a in enumerate(buffers):
            if got[a[0]] < 0:
                _fail(f"{where} {a[0]} got offset {got[a[0]]}; offsets start at 0.")
            for b in buffers[:i]:
                if _overlap_in_time(a, b) and got[a[0]] < got[b[0]] + b[3] and got[b[0]] < got[a[0]] + a[3]:
                    touch = " (intervals are inclusive: both are live at that instruction)" if a[1] == b[2] or b[1] == a[2] else ""
                    _fail(f"{where} {b[0]} (live [{b[1]}, {b[2]}], {b[3]} B at {got[b[0]]}) and {a[0]} (live "
                          f"[{a[1]}, {a[2]}], {a[3]} B at {got[a[0]]}) are live at the same time but share "
                          f"bytes{touch}. That plan would corrupt one of them.")
        candidates = [m for m in candidates if _FIT_MISTAKES[m][0](buffers) == got]
        if first_failure is None:
            first_failure = (f"{where} your plan is valid but is not first-fit: the reference gives {want} "
                             f"(arena {_arena(buffers, want)} B), you gave {got} (arena {_arena(buffers, got)} B).")
    if first_failure is not None:
        hint = (_FIT_MISTAKES[candidates[0]][1] if candidates else
                "Take the buffers in the given order; for each, try offset 0 and the end of every live placed "
                "buffer, lowest first, and keep the first that overlaps none of them.")
        _fail(first_failure + "\n" + hint)
    _passed("check_first_fit", len(cases))


check_first_fit = checker("first-fit", blocks=_planning_blocks)(check_first_fit)


def _naive(buffers):
    out, top = {}, 0
    for n, _, _, size in buffers:
        out[n], top = top, top + size
    return out


def _stacked(buffers):
    placed, out = [], {}
    for n, first, last, size in buffers:
        live = [p for p in placed if _overlap_in_time(p, (n, first, last))]
        out[n] = max((p[4] + p[3] for p in live), default=0)
        placed.append((n, first, last, size, out[n]))
    return out


_FIT_MISTAKES = [
    (_naive, "You never reuse bytes: a buffer only has to avoid the placed buffers whose intervals overlap "
             "its own; the others are dead by then."),
    (lambda b: reference_fit(b, "tightest"), "That is best-fit (the tightest gap). First-fit takes the LOWEST "
                                             "gap that fits."),
    (_stacked, "You put each buffer above all the live ones. Look for a gap below them first: between two "
               "live buffers, or under the lowest one, there may be room."),
]


# ----------------------------------------------------------------------------------------------
# Exercise 3: where greedy-by-size beats first-fit, and where it loses
# ----------------------------------------------------------------------------------------------
def reference_arenas(program: dict) -> tuple[int, int]:
    """``(first-fit arena, greedy-by-size arena)`` of ``{name: (first, last, size)}``."""
    bufs = [(n, int(f), int(l), int(s)) for n, (f, l, s) in program.items()]
    by_first = sorted(bufs, key=lambda b: (b[1], list(program).index(b[0])))
    by_size = sorted(bufs, key=lambda b: (-b[3], b[1], list(program).index(b[0])))
    return _arena(bufs, reference_fit(by_first)), _arena(bufs, reference_fit(by_size))


def _valid_program(where: str, p) -> None:
    if not isinstance(p, dict) or not p:
        _fail(f"{where} give a non-empty dict {{name: (first, last, size)}}, got {p!r}.")
    for n, spec in p.items():
        try:
            first, last, size = spec
            first, last, size = int(first), int(last), int(size)
        except (TypeError, ValueError):
            _fail(f"{where} buffer {n!r}: (first, last, size) expected, got {spec!r}.")
        if first < 0 or last < first:
            _fail(f"{where} buffer {n!r} is live [{first}, {last}]: it needs 0 ≤ first ≤ last.")
        if size <= 0:
            _fail(f"{where} buffer {n!r} has size {size}; sizes are positive.")


def check_greedy_vs_first_fit(fn) -> None:
    """``fn() -> (greedy_wins, greedy_loses)``: two programs, each ``{name: (first, last, size)}``.
    In the first, greedy-by-size (largest first, lowest gap) must need a strictly smaller arena
    than first-fit (by first instruction, lowest gap); in the second, strictly larger. Both are
    measured by the checker's own planners (the engine's are switched off while ``fn`` runs).
    There are no random cases to draw: ``hidden=True`` checks the same two programs."""
    where = "your answer:"
    got = _call(fn, where)
    if not (isinstance(got, tuple) and len(got) == 2):
        _fail(f"{where} return a pair (greedy_wins, greedy_loses) of programs, got {got!r}.")
    wins, loses = got
    for label, p in (("greedy_wins", wins), ("greedy_loses", loses)):
        _valid_program(f"{label}:", p)
    ff_w, g_w = reference_arenas(wins)
    ff_l, g_l = reference_arenas(loses)
    if g_w >= ff_w:
        hint = (" That is the program where greedy should LOSE: you swapped the two." if g_w > ff_w and g_l < ff_l
                else " Greedy wins when placing by time fragments the arena: a small early buffer taken low "
                     "leaves a hole too small for a big buffer later, which greedy would have placed first.")
        _fail(f"greedy_wins: first-fit needs {ff_w} B, greedy-by-size {g_w} B; greedy must need fewer.{hint}")
    if g_l <= ff_l:
        _fail(f"greedy_loses: first-fit needs {ff_l} B, greedy-by-size {g_l} B; greedy must need more. "
              "Greedy ignores time: a big buffer placed first can sit where, in time order, small ones would "
              "have packed below it — try buffers whose lifetimes chain so that first-fit reuses perfectly.")
    print(f"greedy-by-size wins {g_w} B vs first-fit's {ff_w} B, and loses {g_l} B vs {ff_l} B.")
    _passed("check_greedy_vs_first_fit", 2)


check_greedy_vs_first_fit = checker("the two programs", blocks=_planning_blocks)(check_greedy_vs_first_fit)
