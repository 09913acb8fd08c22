"""Notebook 05's checkers (microtorch/exercises/pool.py) as a learner meets them: right answers
pass with a truthful count, the common mistakes are rejected with a message that names the case
and the mistake, and the cases are of the kinds the checkers promise. Written against the
survivors of mutation run 5 (tests/mutation-run-5/exercises-pool.md)."""
import bisect

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import checking, pool

from checker_probes import failure as _failure

LOW, HIGH = 64, 1 << 20


# -- answers written here, independently of the checker's references --------------------------
def _even(m):
    """m evenly spaced classes per doubling from 64 B, then 1 MiB (the engine's spacing)."""
    return [(1 << k) + i * ((1 << k) // m) for k in range(6, 20) for i in range(m)] + [HIGH]


def _fewest(bound):
    """The notebook's answer: each class as wide as the bound allows for the request above the last."""
    classes = [LOW]
    while classes[-1] < HIGH:
        n = classes[-1] + 1
        classes.append(min(max(int(n / (1 - bound)) // 8 * 8, classes[-1] + 8), HIGH))
    return classes


def _engine_m(bound):
    m = 1
    while 1 / (m + 1) > bound:
        m *= 2
    return m


def _engine_spacing(bound):
    return _even(_engine_m(bound))


def _worst(classes):
    """(share, n, class) of the worst request in [64, 1 MiB], by brute force over every n."""
    c = np.array(classes)
    n = np.arange(LOW, HIGH + 1)
    got = c[np.searchsorted(c, n)]
    waste = (got - n) / got
    i = int(np.argmax(waste))
    return float(waste[i]), int(n[i]), int(got[i])


def _class_index(n, m):
    return None if n > HIGH else bisect.bisect_left(_even(m), max(n, LOW))


class _Counting:
    """Wraps an answer and records every call's arguments."""

    made = 0  # calls made through any _Counting so far

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args):
        self.calls.append(args)
        _Counting.made += 1
        return self.fn(*args)


@pytest.fixture
def passes(monkeypatch):
    """Records each pass line's name and count as the checker reports it, with the calls made so far."""
    seen = []

    def record(name, n):
        seen.append((name, n, _Counting.made))
        checking._passed(name, n)
    monkeypatch.setattr(pool, "_passed", record)
    _Counting.made = 0
    return seen


# ----------------------------------------------------------------------------------------------
# check_size_classes
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", [_fewest, _engine_spacing])
@pytest.mark.parametrize("hidden", [False, True])
def test_size_classes_right_answers_pass_with_the_count_of_bounds_tried(answer, hidden, passes, capsys):
    """A right design passes; the pass line counts the bounds it was really asked about."""
    fn = _Counting(answer)
    mt.exercises.check_size_classes(fn, hidden=hidden)
    (name, n, made), = passes
    assert (name, n) == ("check_size_classes", made)
    assert f"✓ check_size_classes: all {made} cases right" \
           f"{' (the hidden ones)' if hidden else ''}." in capsys.readouterr().out.splitlines()
    bounds = [b for (b,) in fn.calls]
    assert bounds[:len(pool.SIZE_CLASS_BOUNDS)] == pool.SIZE_CLASS_BOUNDS
    extra = bounds[len(pool.SIZE_CLASS_BOUNDS):]
    assert extra and all(type(b) is float and 0 < b < 1 for b in extra)


def test_size_classes_comparison_line_gives_the_engines_and_the_fewest_counts(capsys):
    """After a pass the learner sees, per fixed bound, the engine's class count and the fewest possible."""
    mt.exercises.check_size_classes(_fewest)
    line = next(s for s in capsys.readouterr().out.splitlines() if "for comparison" in s)
    parts = ", ".join(f"{b:.1%}: {len(_engine_spacing(b))} / {len(_fewest(b))}" for b in pool.SIZE_CLASS_BOUNDS)
    assert line == ("  (for comparison — bound: the engine's classes / the fewest possible, multiples of 8: "
                    + parts + ")")


def test_size_classes_a_design_meeting_the_bound_exactly_passes():
    """The bound is 'no more than': a first class of 128 B wastes exactly 50 % on a 64-byte request."""
    def exact(bound):
        return [128 << k for k in range(14)] if bound == 0.5 else _engine_spacing(bound)
    assert _worst(exact(0.5)) == (0.5, 64, 128)
    mt.exercises.check_size_classes(exact)


def _powers_of_two(bound):
    return [LOW << k for k in range(15)]


def _first_class_too_wide(bound):
    return [128] + [c for c in _fewest(bound) if c > 128]


def _duplicate(bound):
    classes = _fewest(bound)
    return classes[:4] + [classes[3]] + classes[4:]


def _swapped_neighbours(bound):
    classes = _fewest(bound)
    return classes[:2] + [classes[3], classes[2]] + classes[4:]


def _odd_class(bound):
    classes = _fewest(bound)
    return classes[:2] + [classes[2] + 4] + classes[3:]


def test_size_classes_gap_too_wide_names_the_worst_request_and_the_class_below():
    """Powers of two waste almost half a block: the message gives the worst request, its class and the class below."""
    msg = _failure(mt.exercises.check_size_classes, _powers_of_two)
    waste, n, c = _worst(_powers_of_two(0.25))
    assert msg.startswith("for bound = 0.25 (25.0%): ")
    assert f"a request of {n:,} bytes lands in your class {c:,} and wastes {c - n:,} bytes, {waste:.1%}" in msg
    assert f"The class below it is {c // 2:,}: the gap is too wide there." in msg


def test_size_classes_a_too_wide_first_class_has_no_class_below():
    """When the first class is the culprit, the worst request is 64 B and no class below is named."""
    msg = _failure(mt.exercises.check_size_classes, _first_class_too_wide)
    assert "a request of 64 bytes lands in your class 128 and wastes 64 bytes, 50.0% of the block" in msg
    assert "The class below it" not in msg


def test_size_classes_only_the_failing_bound_is_named():
    """An answer wrong for one bound only fails there, and the message names that bound."""
    msg = _failure(mt.exercises.check_size_classes, lambda b: _powers_of_two(b) if b == 0.2 else _fewest(b))
    assert msg.startswith("for bound = 0.2 (20.0%): a request of 524,289 bytes lands in your class 1,048,576")


@pytest.mark.parametrize("wrong, words", [
    (_duplicate, "class 3 is {c3} and class 4 is {c3}."),
    (_swapped_neighbours, "class 2 is {c3} and class 3 is {c2}."),
])
def test_size_classes_not_increasing_names_the_first_offending_pair(wrong, words):
    """Duplicates and swapped neighbours are rejected, naming the first pair out of order."""
    msg = _failure(mt.exercises.check_size_classes, wrong)
    classes = _fewest(0.25)
    assert msg.startswith("for bound = 0.25 (25.0%): your classes must be increasing and distinct")
    assert words.format(c2=classes[2], c3=classes[3]) in msg


def test_size_classes_odd_class_is_named():
    """A class that is not a multiple of 8 is rejected by its size."""
    msg = _failure(mt.exercises.check_size_classes, _odd_class)
    assert f"class {_fewest(0.25)[2] + 4} is not a multiple of 8" in msg


@pytest.mark.parametrize("wrong, words", [
    (lambda b: None, "your function returned None: did you forget `return`?"),
    (lambda b: "sixty-four", "your function returned 'sixty-four'; return a list of class sizes"),
    (lambda b: 64, "your function returned 64; return a list of class sizes"),
    (lambda b: [], "you returned no classes."),
    (lambda b: [32] + _fewest(b), "your first class is 32 bytes"),
    (lambda b: _fewest(b)[:-1], "a request of {last1:,} to 1,048,576 bytes (1 MiB) has no class"),
    (lambda b: list(range(64, HIGH + 1, 8)), "your 131065 classes all meet the bound, but the engine needs only {n}"),
    (lambda b: 1 / 0, "your function raised ZeroDivisionError"),
])
def test_size_classes_common_mistakes_are_rejected_with_their_reason(wrong, words):
    """Each catalogued mistake fails at the first bound, with a message naming it."""
    msg = _failure(mt.exercises.check_size_classes, wrong)
    assert msg.startswith("for bound = 0.25 (25.0%): ")
    assert words.format(last1=_fewest(0.25)[-2] + 1, n=len(_engine_spacing(0.25))) in msg


def test_size_classes_engine_spacing_count_is_allowed_exactly():
    """As many classes as the engine's spacing is allowed; one more is not."""
    mt.exercises.check_size_classes(_engine_spacing)
    def one_more(bound):
        classes = _engine_spacing(bound)
        return classes[:1] + [classes[0] + 8] + [c for c in classes[1:] if c != classes[0] + 8]
    extra = one_more(0.25)
    assert len(extra) == len(_engine_spacing(0.25)) + 1
    assert "the engine needs only" in _failure(mt.exercises.check_size_classes, one_more)


# ----------------------------------------------------------------------------------------------
# check_size_class_of
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", [False, True])
def test_size_class_of_right_answer_passes_with_the_count_of_requests(hidden, passes, capsys):
    """A right answer passes; the pass line counts the requests it was asked about."""
    fn = _Counting(_class_index)
    mt.exercises.check_size_class_of(fn, hidden=hidden)
    (name, n, made), = passes
    assert (name, n) == ("check_size_class_of", made)
    assert f"✓ check_size_class_of: all {made} cases right" \
           f"{' (the hidden ones)' if hidden else ''}." in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("hidden", [False, True])
def test_size_class_of_cases_cover_the_promised_kinds_for_each_spacing(hidden):
    """For each spacing tried: requests under 64, exact class sizes, one byte above one, 1 MiB and above."""
    fn = _Counting(_class_index)
    mt.exercises.check_size_class_of(fn, hidden=hidden)
    ms = {m for _, m in fn.calls}
    assert {2, 4, 8} <= ms and all(m & (m - 1) == 0 for m in ms)
    for m in ms:
        ns, classes = {n for n, k in fn.calls if k == m}, set(_even(m))
        assert any(n < LOW for n in ns) and ns & (classes - {HIGH}) and {n - 1 for n in ns} & (classes - {HIGH})
        assert HIGH in ns and any(n > HIGH for n in ns)


def test_size_class_of_accepts_numpy_indices():
    """An index from np.searchsorted (a numpy integer) counts as an int."""
    def searchsorted(n, m):
        return None if n > HIGH else np.searchsorted(np.array(_even(m)), max(n, LOW))
    mt.exercises.check_size_class_of(searchsorted)


def _bisect_right(n, m):
    return None if n > HIGH else bisect.bisect_right(_even(m), max(n, LOW))


def _round_down(n, m):
    i = _class_index(n, m)
    return i if i is None or n <= LOW or _even(m)[i] == n else i - 1


def _no_doubling_offset(n, m):
    """The index within n's doubling, forgetting the classes of the doublings below."""
    if n > HIGH:
        return None
    n = max(n, LOW)
    if n == LOW:
        return 0
    k = (n - 1).bit_length() - 1
    return -(-(n - (1 << k)) // ((1 << k) // m))


def _said(wrong, n, m):
    """What the message for request n, spacing m should quote: the case, the right and the given answer."""
    classes, want = _even(m), _class_index(n, m)
    try:
        got = wrong(n, m)
    except Exception:
        got = None
    in_range = isinstance(got, (int, np.integer)) and 0 <= got < len(classes)
    return dict(where=f"for n = {n:,} bytes with {m} classes per doubling:", n=n, m=m, mx=max(n, LOW), want=want,
                got=got, cw=0 if want is None else classes[want], cg=classes[got] if in_range else 0)


SERVES = "{where} the pool serves it from class {want} ({cw:,} B); you returned {got} ({cg:,} B)."


@pytest.mark.parametrize("wrong, words", [
    (_bisect_right, [SERVES, "{mx:,} is exactly a class size", "bisect_left, not bisect_right"]),
    (lambda n, m: None if n > HIGH else _even(m)[_class_index(n, m)],
     ["{where} ", "you returned {got}", "return its index in size_classes"]),
    (_round_down, [SERVES, "Class {got} holds only {cg:,} bytes, less than {n:,}: round UP."]),
    (lambda n, m: _class_index(n, m) if n >= LOW else n // 8,
     [SERVES, "Requests under 64 bytes get the smallest class, index 0."]),
    (lambda n, m: _class_index(n, m) + 2 if LOW <= n <= HIGH else _class_index(n, m),
     [SERVES, "its position in that list is the index"]),
    (_no_doubling_offset, [SERVES, "its position in that list is the index"]),
    (lambda n, m: len(_even(m)) if n == HIGH else _class_index(n, m),
     ["{where} the pool serves it from class {want} ({cw:,} B); you returned {got}.\n", "bisect_left, not bisect_right"]),
    (lambda n, m: _class_index(min(n, HIGH), m),
     ["{where} {n:,} bytes is more than the largest class (1,048,576 B = 1 MiB)", "Return None; you returned {got}."]),
    (lambda n, m: None, ["{where} you returned None, but class {want} ({cw:,} B) holds it."]),
    (lambda n, m: "first", ["{where} your function returned 'first'; return a class index"]),
    (lambda n, m: [][n], ["{where} your function raised IndexError", "(called as fn({n}, {m}))"]),
])
def test_size_class_of_common_mistakes_are_rejected_with_their_reason(wrong, words):
    """Each catalogued mistake fails at its first wrong request; the message quotes that case and the hint that fits."""
    fn = _Counting(wrong)
    msg = _failure(mt.exercises.check_size_class_of, fn)
    said = _said(wrong, *fn.calls[-1])
    assert said["got"] != said["want"] or said["got"] is None
    for w in words:
        assert w.format(**said) in msg
    hints = ["bisect_left, not bisect_right", "round UP", "under 64 bytes", "return its index",
             "its position in that list"]
    assert sum(h in msg for h in hints) <= 1  # one hint, the one that fits


# ----------------------------------------------------------------------------------------------
# check_free_list_pool
# ----------------------------------------------------------------------------------------------
class _Pool:
    """A right free-list pool, written here (its class of a request by bisect over _even)."""

    def __init__(self, per_doubling):
        self.classes = _even(per_doubling)
        self.free_lists = [[] for _ in self.classes]
        self.slots = [0] * len(self.classes)
        self.direct = self.reuse_hits = self.reserved = self.free_bytes = 0
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
            block, size = (c, self.slots[c]), self.classes[c]
            self.slots[c] += 1
        self.sizes[block] = size
        self.reserved += size
        return block

    def free(self, block):
        size = self.sizes.pop(block)
        self.reserved -= size
        if block[0] is not None:
            self.free_lists[block[0]].append(block)
            self.free_bytes += size


class _CountingPool(_Pool):
    calls = []

    def alloc(self, n):
        type(self).calls.append(("alloc", n))
        return super().alloc(n)

    def free(self, block):
        type(self).calls.append(("free", block))
        return super().free(block)


class _SlotsFromOne(_Pool):
    def alloc(self, n):
        block = super().alloc(n)
        return block if block[0] is None else (block[0], block[1] + 1)

    def free(self, block):
        return super().free(block if block[0] is None else (block[0], block[1] - 1))


class _DirectFromLastClass(_Pool):
    def alloc(self, n):
        return super().alloc(min(n, HIGH))


class _NumpyBlocks(_Pool):
    def alloc(self, n):
        block = super().alloc(n)
        return [None if block[0] is None else np.int64(block[0]), np.int64(block[1])]

    def free(self, block):
        return super().free((None if block[0] is None else int(block[0]), int(block[1])))


class _DirectAtOneMiB(_Pool):
    """Serves a request of exactly 1 MiB directly (n >= 1 MiB instead of n > 1 MiB)."""

    def alloc(self, n):
        if n == HIGH:
            block = (None, self.direct)
            self.direct += 1
            self.sizes[block] = n
            self.reserved += n
            return block
        return super().alloc(n)


class _DirectCounterStuck(_Pool):
    """Numbers the direct requests with a counter set to 1 instead of counted up."""

    def alloc(self, n):
        block = super().alloc(n)
        if block[0] is None:
            self.direct = 1
        return block


class _FreeForgetsDirect(_Pool):
    """free puts every block on a free list, also a direct one (class None)."""

    def free(self, block):
        size = self.sizes.pop(block)
        self.reserved -= size
        self.free_lists[block[0]].append(block)
        self.free_bytes += size


class _AllocForgetsDirect(_Pool):
    """alloc looks every request up in the class list, also one above 1 MiB."""

    def alloc(self, n):
        c = bisect.bisect_left(self.classes, max(n, LOW))
        self.free_lists[c].append(None)
        self.free_lists[c].pop()
        return super().alloc(n)


class _ReturnsSize(_Pool):
    def alloc(self, n):
        super().alloc(n)
        return n


class _NoCounters(_Pool):
    def __getattribute__(self, name):
        if name == "free_bytes":
            raise AttributeError("no free_bytes here")
        return super().__getattribute__(name)


@pytest.mark.parametrize("hidden", [False, True])
def test_free_list_pool_right_pool_passes_with_the_count_of_operations(hidden, passes, capsys):
    """A right pool passes; the pass line counts the allocs and frees it was put through."""
    _CountingPool.calls = []
    mt.exercises.check_free_list_pool(_CountingPool, hidden=hidden)
    calls = _CountingPool.calls
    assert [(name, n) for name, n, _ in passes] == [("check_free_list_pool", len(calls))]
    assert f"✓ check_free_list_pool: all {len(calls)} cases right" \
           f"{' (the hidden ones)' if hidden else ''}." in capsys.readouterr().out.splitlines()
    assert sum(1 for op, _ in calls if op == "free") >= 5 and any(op == "alloc" and n > HIGH for op, n in calls)


def test_free_list_pool_accepts_blocks_as_lists_of_numpy_integers():
    """A block given back as [np.int64, np.int64] is read as (class, slot)."""
    mt.exercises.check_free_list_pool(_NumpyBlocks)


def test_free_list_pool_message_replays_the_program_up_to_the_failing_call():
    """The failure names the program, the spacing and every call up to the wrong one."""
    class Fifo(_Pool):
        def alloc(self, n):
            c = None if n > HIGH else bisect.bisect_left(self.classes, max(n, LOW))
            if c is not None and len(self.free_lists[c]) > 1:
                self.free_lists[c].reverse()
            return super().alloc(n)
    msg = _failure(mt.exercises.check_free_list_pool, Fifo)
    assert msg.startswith("for the most recently freed block comes back first: FreeListPool(per_doubling=8), then "
                          "alloc(100); alloc(100); alloc(100); free(block 0); free(block 2); alloc(100):\n"
                          "alloc returned (5, 0), but the pool hands out (5, 2).\n")
    assert "take the one freed LAST" in msg


@pytest.mark.parametrize("wrong, words", [
    (_SlotsFromOne, ["then alloc(100):\nalloc returned (5, 1), but the pool hands out (5, 0).",
                     "No block of class 5 is free: carve the class's next slot, 0."]),
    (_DirectFromLastClass, ["then alloc(1,048,577):\nalloc returned (112, 0), but the pool hands out (None, 0).",
                            "it is the direct request number 0 (None, 0)"]),
    (_DirectAtOneMiB, ["then alloc(1,048,576):\nalloc returned (None, 0), but the pool hands out (112, 0).",
                       "The class of 1,048,576 bytes is 112 (1,048,576 B)"]),
    (_DirectCounterStuck, ["for requests above 1 MiB are served directly, never from a free list: "
                           "FreeListPool(per_doubling=8), then alloc(1,048,577); free(block 0); alloc(1,048,577); "
                           "alloc(1,048,577):\nalloc returned (None, 1), but the pool hands out (None, 2).",
                           "it is the direct request number 2 (None, 2)"]),
    (_FreeForgetsDirect, ["for requests above 1 MiB are served directly, never from a free list: "
                          "FreeListPool(per_doubling=8), then alloc(1,048,577); free(block 0): "
                          "your function raised TypeError"]),
    (_AllocForgetsDirect, ["for requests above 1 MiB are served directly, never from a free list: "
                           "FreeListPool(per_doubling=8), then alloc(1,048,577): your function raised IndexError"]),
    (_ReturnsSize, ["then alloc(100):\nalloc returned 100; return a block (class index, slot), or (None, k)."]),
    (_NoCounters, ["then alloc(100):\nreading your pool's free_bytes failed: AttributeError: no free_bytes here."]),
])
def test_free_list_pool_common_mistakes_are_rejected_with_their_reason(wrong, words):
    """Each catalogued pool mistake fails at its first wrong call, with the hint that fits it."""
    msg = _failure(mt.exercises.check_free_list_pool, wrong)
    for w in words:
        assert w in msg
    assert not any(h in msg for h in ["freed LAST", "reuse it before carving"])


def test_free_list_pool_a_constructor_without_per_doubling_is_named():
    """A pool whose __init__ forgets per_doubling fails at construction, and the message says so."""
    class NoSpacing(_Pool):
        def __init__(self):
            super().__init__(8)
    msg = _failure(mt.exercises.check_free_list_pool, NoSpacing)
    assert msg.startswith("for a freed block is the next same-class request's block: FreeListPool(8) "
                          "your function raised TypeError")


def test_free_list_pool_needs_the_class_itself():
    """Passing an instance instead of the class is refused with a pointer to the class."""
    with pytest.raises(AssertionError, match="needs your class"):
        mt.exercises.check_free_list_pool(lambda m: _Pool(m))
    mt.exercises.check_free_list_pool(_Pool)


@pytest.mark.parametrize("m", [1, 8])
def test_reference_pool_agrees_with_a_pool_written_here_at_the_edges(m):
    """The reference's blocks and counters at 1 MiB exactly, three direct requests, reuse after frees."""
    ops = [HIGH, HIGH + 1, HIGH + 1, ("free", 1), HIGH + 1, 64, 65, ("free", 0), ("free", 5), HIGH, 64, 1, 0]
    ref, mine, blocks = pool._ReferencePool(m), _Pool(m), []
    for op in ops:
        if isinstance(op, tuple):
            ref.free(blocks[op[1]])
            mine.free(blocks[op[1]])
        else:
            blocks.append(ref.alloc(op))
            assert blocks[-1] == mine.alloc(op)
        assert (ref.reuse_hits, ref.reserved, ref.free_bytes) == (mine.reuse_hits, mine.reserved, mine.free_bytes)
    assert blocks[:4] == [(len(_even(m)) - 1, 0), (None, 0), (None, 1), (None, 2)]


@pytest.mark.parametrize("n", [6, 25])
def test_random_pool_programs_free_only_live_blocks_and_mix_the_kinds(n):
    """Each random program frees only blocks that are live, and the programs mix small, mid and direct sizes."""
    programs = pool._random_pool_programs(n)
    assert [what for what, _, _ in programs] == [f"random program #{k + 1}" for k in range(n)]
    ms = {m for _, m, _ in programs}
    assert len(ms) > 1 and all(m & (m - 1) == 0 for m in ms)  # the engine's size_classes takes powers of two
    sizes = []
    for _, m, ops in programs:
        allocated, freed = 0, set()
        for op in ops:
            if isinstance(op, tuple):
                assert op[0] == "free" and 0 <= op[1] < allocated and op[1] not in freed
                freed.add(op[1])
            else:
                assert type(op) is int and op >= 1
                sizes.append(op)
                allocated += 1
    assert any(s < LOW for s in sizes) and any(LOW < s < 20_000 for s in sizes) and any(s > HIGH for s in sizes)
