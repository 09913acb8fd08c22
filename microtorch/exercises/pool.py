"""Exercises of notebook 05 (the memory pool): design size classes for a fragmentation
bound, and find the class that serves a request.

While the learner's function runs, the engine's ``size_classes`` and ``Pool`` (its
``size_class``) are switched off. The references are independent: the evenly spaced classes
and the greedy ones generated here, and a binary search over them (the tests check that
they are the engine's classes and the engine's ``Pool.size_class``).
"""
from __future__ import annotations

import bisect

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng

LOW, HIGH = 64, 1 << 20  # the pool's class range: 64 B .. 1 MiB


def worst_waste(classes, low: int = LOW, high: int = HIGH) -> tuple[float, int, int]:
    """``(fraction, n, class)``: the largest share of a block wasted by rounding a request
    ``n`` in ``[low, high]`` up to the smallest class ≥ n — over every such n. The worst
    request of each class is one byte above the class below it (or ``low``, for the first)."""
    worst = (0.0, low, classes[0])
    below = low - 1
    for c in classes:
        if c >= low and below + 1 <= high:
            n = below + 1
            waste = (c - n) / c
            if waste > worst[0]:
                worst = (waste, n, c)
        below = max(below, c)
        if c >= high:
            break
    return worst


def engine_classes_for(bound: float) -> tuple[int, list[int]]:
    """The engine's spacing that meets ``bound``: the fewest classes per doubling ``m`` (a
    power of two) with 1/(m + 1) ≤ bound, and its classes from 64 B to 1 MiB."""
    m = 1
    while 1 / (m + 1) > bound:
        m *= 2
    return m, even_classes(m)


def even_classes(m: int, low: int = LOW, high: int = HIGH) -> list[int]:
    """``m`` evenly spaced classes in each doubling [2ᵏ, 2ᵏ⁺¹) from ``low``, then ``high``."""
    return [size + i * (size // m) for k in range(low.bit_length() - 1, high.bit_length() - 1)
            for size in [1 << k] for i in range(m)] + [high]


def _pool_blocks():
    from ..memory.pool import Pool

    return [(Pool, "__init__"), (Pool, "size_class"), (Pool, "alloc")]


def _design_blocks():
    from ..memory.pool import size_classes

    return [size_classes] + _pool_blocks()


def greedy_classes(bound: float, step: int = 8) -> list[int]:
    """The fewest classes (multiples of ``step``) meeting ``bound``: each class as large as
    the bound allows for the request one byte above the class before it."""
    classes = [LOW]
    while classes[-1] < HIGH:
        n = classes[-1] + 1
        c = int(n / (1 - bound)) // step * step
        while c > n and (c - n) / c > bound:
            c -= step
        classes.append(min(max(c, classes[-1] + step), HIGH))
    return classes


SIZE_CLASS_BOUNDS = [0.25, 0.125, 0.2, 0.5, 0.3]


def check_size_classes(fn) -> None:
    """``fn(bound) -> list of class sizes``: size classes for a pool serving every request
    from 64 B to 1 MiB so that rounding a request up to the smallest class ≥ it never wastes
    more than ``bound`` of the block. Checked: sorted, distinct, multiples of 8 (so any
    dtype's elements stay aligned in a block), the first class ≥ 64 and the last ≥ 1 MiB
    (every request has a class), the worst-case waste ≤ ``bound`` (computed over every
    request), and no more classes than the engine's own spacing needs for that bound
    (``mt.memory.size_classes(per_doubling=m)`` with the smallest power of two m for which
    1/(m + 1) ≤ bound).
    """
    r = rng()
    bounds = SIZE_CLASS_BOUNDS + [round(float(r.uniform(0.06, 0.6)), 3) for _ in range(6 if hidden() else 2)]
    for bound in bounds:
        where = f"for bound = {bound} ({bound:.1%}):"
        m, engine = engine_classes_for(bound)
        got = _call(fn, where, bound)
        if got is None:
            _fail(f"{where} your function returned None: did you forget `return`?")
        try:
            got = [int(c) for c in got]
        except (TypeError, ValueError):
            _fail(f"{where} your function returned {got!r}; return a list of class sizes (ints, bytes).")
        if not got:
            _fail(f"{where} you returned no classes.")
        if any(b <= a for a, b in zip(got, got[1:])):
            i = next(i for i, (a, b) in enumerate(zip(got, got[1:])) if b <= a)
            _fail(f"{where} your classes must be increasing and distinct; class {i} is {got[i]} and "
                  f"class {i + 1} is {got[i + 1]}.")
        odd = [c for c in got if c % 8]
        if odd:
            _fail(f"{where} class {odd[0]} is not a multiple of 8. The pool places blocks of a class "
                  "back to back in a slab, so a class that is not a multiple of 8 would put the next "
                  "block's float64 elements off their 8-byte alignment. Round each class down to a "
                  "multiple of 8 (that only makes the waste smaller).")
        if got[0] < LOW:
            _fail(f"{where} your first class is {got[0]} bytes; the pool's smallest block is 64 bytes "
                  "(one cache line: smaller requests get 64), so start at 64.")
        if got[-1] < HIGH:
            _fail(f"{where} your largest class is {got[-1]:,} bytes, so a request of {got[-1] + 1:,} "
                  f"to {HIGH:,} bytes (1 MiB) has no class. The classes must reach 1 MiB; larger "
                  "requests are served directly.")
        waste, n, c = worst_waste(got)
        if waste > bound + 1e-12:
            i = got.index(c)
            prev = got[i - 1] if i else None
            _fail(f"{where} a request of {n:,} bytes lands in your class {c:,} and wastes "
                  f"{c - n:,} bytes, {waste:.1%} of the block, more than {bound:.1%}.\n"
                  + (f"The class below it is {prev:,}: the gap is too wide there. " if prev else "")
                  + f"A class c may follow class p only if (c - (p + 1)) / c ≤ {bound}, i.e. "
                    f"c ≤ (p + 1) / (1 - {bound}) = {(n) / (1 - bound):,.1f}.")
        if len(got) > len(engine):
            _fail(f"{where} your {len(got)} classes all meet the bound, but the engine needs only "
                  f"{len(engine)} (size_classes(per_doubling={m}): {m} evenly spaced classes per "
                  f"doubling, worst case 1/({m} + 1) = {1 / (m + 1):.1%}). More classes than needed "
                  "mean more free lists, and freed blocks spread over more lists are reused less "
                  "often. Space the classes as widely as the bound allows.")
    g = {b: len(greedy_classes(b)) for b in SIZE_CLASS_BOUNDS}
    print("  (for comparison — bound: the engine's classes / the fewest possible, multiples of 8: "
          + ", ".join(f"{b:.1%}: {len(engine_classes_for(b)[1])} / {g[b]}" for b in SIZE_CLASS_BOUNDS) + ")")
    _passed("check_size_classes", len(bounds))


check_size_classes = checker("size_classes_for", blocks=_design_blocks)(check_size_classes)


# ----------------------------------------------------------------------------------------------
# Exercise 2: which class serves a request?
# ----------------------------------------------------------------------------------------------
def _class_of_cases():
    r = rng()
    ns = [0, 1, 63, 64, 65, 71, 72, 73, 127, 128, 129, 143, 144, 4095, 4096, 4097, 4607, 4608, 4609,
          100_000, (1 << 19) + 1, HIGH - 1, HIGH, HIGH + 1, 8 * HIGH]
    ns += [int(n) for n in r.integers(1, HIGH, 600 if hidden() else 200)]
    ms = (8, 4, 2, 1, 16, 32) if hidden() else (8, 4, 2)
    return [(n, m) for m in ms for n in ns]


def check_size_class_of(fn) -> None:
    """``fn(n, per_doubling) -> index or None``: the index, in
    ``mt.memory.size_classes(per_doubling=per_doubling)``, of the smallest class that can
    hold ``n`` bytes (requests under 64 B get the 64-byte class), or ``None`` for a request
    above 1 MiB (the pool serves it directly). Checked against a binary search over evenly
    spaced classes generated here (the engine's ``Pool`` and its ``size_class`` are switched
    off meanwhile; ``mt.memory.size_classes``, the class list, is yours to use).
    """
    cases = _class_of_cases()
    tables = {m: even_classes(m) for m in {m for _, m in cases}}
    for n, m in cases:
        classes = tables[m]
        want = None if n > HIGH else bisect.bisect_left(classes, max(n, LOW))
        where = f"for n = {n:,} bytes with {m} classes per doubling:"
        got = _call(fn, where, n, m)
        if got is not None and not isinstance(got, int):
            try:
                got = int(got)
            except (TypeError, ValueError):
                _fail(f"{where} your function returned {got!r}; return a class index (an int) or None.")
        if got == want:
            continue
        if want is None:
            _fail(f"{where} {n:,} bytes is more than the largest class ({classes[-1]:,} B = 1 MiB): "
                  f"the pool serves it directly, with a buffer of its own. Return None; you returned {got!r}.")
        if got is None:
            _fail(f"{where} you returned None, but class {want} ({classes[want]:,} B) holds it. None "
                  "is only for requests above 1 MiB.")
        size = classes[want]
        msg = f"{where} the pool serves it from class {want} ({size:,} B); you returned {got!r}"
        if 0 <= got < len(classes):
            msg += f" ({classes[got]:,} B)"
        msg += "."
        if got == size:
            hint = "You returned the class's size; return its index in size_classes(...)."
        elif got == want + 1 and size == max(n, LOW):
            hint = (f"{max(n, LOW):,} is exactly a class size (requests under 64 B count as 64): it "
                    "fits its own class. The class is "
                    "the smallest c with c ≥ n (bisect_left, not bisect_right).")
        elif got == want - 1 and 0 <= got < len(classes) and classes[got] < n:
            hint = f"Class {got} holds only {classes[got]:,} bytes, less than {n:,}: round UP."
        elif n < LOW and got != 0:
            hint = "Requests under 64 bytes get the smallest class, index 0."
        else:
            hint = ("The class is the smallest c in size_classes(per_doubling=...) with c ≥ max(n, 64); "
                    "its position in that list is the index.")
        _fail(msg + "\n" + hint)
    _passed("check_size_class_of", len(cases))


check_size_class_of = checker("size_class_of", blocks=_pool_blocks, suite="size_class_of")(check_size_class_of)


# ----------------------------------------------------------------------------------------------
# Exercise 3: a size-class pool with free lists
# ----------------------------------------------------------------------------------------------
class _ReferencePool:
    """The reference free-list pool (tests check it against ``mt.memory.Pool``)."""

    def __init__(self, per_doubling):
        self.classes = even_classes(per_doubling)
        self.free_lists = [[] for _ in self.classes]
        self.carved = [0] * len(self.classes)
        self.direct = 0
        self.reuse_hits = self.reserved = self.free_bytes = 0
        self.sizes = {}

    def alloc(self, n):
        c = None if n > HIGH else bisect.bisect_left(self.classes, max(n, LOW))
        if c is None:
            block, size = (None, self.direct), n
            self.direct += 1
        elif self.free_lists[c]:
            block, size = self.free_lists[c].pop(), self.classes[c]
            self.reuse_hits += 1
            self.free_bytes -= size
        else:
            block, size = (c, self.carved[c]), self.classes[c]
            self.carved[c] += 1
        self.sizes[block] = size
        self.reserved += size
        return block

    def free(self, block):
        size = self.sizes.pop(block)
        self.reserved -= size
        if block[0] is not None:
            self.free_lists[block[0]].append(block)
            self.free_bytes += size


POOL_PROGRAMS = [
    ("a freed block is the next same-class request's block", 8, [100, 1000, ("free", 0), 90, ("free", 1), 1000]),
    ("the most recently freed block comes back first", 8, [100, 100, 100, ("free", 0), ("free", 2), 100, 100]),
    ("different classes keep different free lists", 4, [64, 200, ("free", 0), 200, 64]),
    ("requests above 1 MiB are served directly, never from a free list", 8,
     [(1 << 20) + 1, ("free", 0), (1 << 20) + 1, (1 << 20) + 1, 100]),
    ("a request of exactly 1 MiB has a class (the last one)", 8, [1 << 20, ("free", 0), 1 << 20]),
    ("reserved counts class sizes, not the requested bytes", 2, [65, 100, 129, ("free", 1), 70]),
]


def _random_pool_programs(n: int) -> list:
    r, out = rng(), []
    for k in range(n):
        ops, live = [], []
        for _ in range(int(r.integers(5, 25))):
            if live and r.random() < 0.4:
                ops.append(("free", live.pop(int(r.integers(0, len(live))))))
            else:
                size = int(r.choice([int(r.integers(1, 300)), int(r.integers(300, 20_000)), (1 << 20) + int(r.integers(1, 100))],
                                    p=[0.6, 0.35, 0.05]))
                live.append(sum(1 for op in ops if not isinstance(op, tuple)))
                ops.append(size)
        out.append((f"random program #{k + 1}", int(r.choice([1, 2, 4, 8])), ops))
    return out


def check_free_list_pool(cls) -> None:
    """``cls(per_doubling)``: a pool over ``mt.memory.size_classes(per_doubling=...)`` whose
    ``alloc(n)`` returns a block ``(class index, slot)`` — a freed block of that class if there
    is one (the most recently freed first), else the class's next new slot ``0, 1, 2, …`` —
    or ``(None, k)`` for the k-th request above 1 MiB (served directly, never kept); ``free(block)``
    gives it back; ``reuse_hits``, ``reserved`` (class sizes of the live blocks, the exact size
    of direct ones) and ``free_bytes`` (class sizes of the blocks on free lists) count. Checked
    after every operation of fixed and random programs against a pool written here (the
    engine's ``Pool`` is switched off meanwhile).
    """
    if not isinstance(cls, type):
        _fail(f"check_free_list_pool needs your class (class FreeListPool: ...), got {cls!r}.")
    programs = POOL_PROGRAMS + _random_pool_programs(25 if hidden() else 6)
    steps = 0
    for what, m, ops in programs:
        mine = _call(cls, f"for {what}: FreeListPool({m})", m)
        ref = _ReferencePool(m)
        blocks, mine_blocks, done = [], [], []
        for op in ops:
            steps += 1
            is_free = isinstance(op, tuple)
            call = f"free(block {op[1]})" if is_free else f"alloc({op:,})"
            where = f"for {what}: FreeListPool(per_doubling={m}), then " + "; ".join(done + [call]) + ":"
            if is_free:
                ref.free(blocks[op[1]])
                _call(mine.free, where, mine_blocks[op[1]])
            else:
                want = ref.alloc(op)
                got = _call(mine.alloc, where, op)
                try:
                    got = (None if got[0] is None else int(got[0]), int(got[1]))
                except (TypeError, ValueError, IndexError):
                    _fail(f"{where}\nalloc returned {got!r}; return a block (class index, slot), or (None, k).")
                if got != want:
                    if want[0] is None:
                        hint = (f"{op:,} bytes is more than 1 MiB: no class serves it; it is the direct request "
                                f"number {want[1]} (None, {want[1]}).")
                    elif got[0] != want[0]:
                        hint = (f"The class of {op:,} bytes is {want[0]} ({ref.classes[want[0]]:,} B): the smallest "
                                "class that holds it (your size_class_of).")
                    elif want in blocks and got[1] == ref.carved[want[0]] - (0 if want[1] < ref.carved[want[0]] else 1):
                        hint = (f"Block {want} was freed and is on class {want[0]}'s free list: reuse it before "
                                "carving a new slot.")
                    elif want in blocks:
                        hint = ("Several blocks of this class are free: take the one freed LAST (a stack: append "
                                "on free, pop on alloc) — its bytes are the most likely to still be in the cache.")
                    else:
                        hint = f"No block of class {want[0]} is free: carve the class's next slot, {want[1]}."
                    _fail(f"{where}\nalloc returned {got}, but the pool hands out {want}.\n{hint}")
                blocks.append(want)
                mine_blocks.append(got)
            for key in ("reuse_hits", "reserved", "free_bytes"):
                try:
                    have = int(getattr(mine, key))
                except (AttributeError, TypeError, ValueError) as exc:
                    _fail(f"{where}\nreading your pool's {key} failed: {type(exc).__name__}: {exc}.")
                if have == getattr(ref, key):
                    continue
                hint = {"reuse_hits": "Count one reuse hit per alloc served from a free list.",
                        "reserved": "reserved is the bytes the live blocks occupy: their CLASS sizes (a 65-byte "
                                    "request holds a whole class block), the exact size for direct blocks.",
                        "free_bytes": "free_bytes is the class sizes of the blocks waiting on free lists (direct "
                                      "blocks are given back at once, never kept)."}[key]
                _fail(f"{where}\nyour pool's {key} is {have:,}, but it should be {getattr(ref, key):,}.\n{hint}")
            done.append(call)
    _passed("check_free_list_pool", steps)


check_free_list_pool = checker("FreeListPool", blocks=_pool_blocks)(check_free_list_pool)
