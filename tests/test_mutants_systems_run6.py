"""Mutation run 6, ``exercises/systems.py`` (notebook 12's checkers): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake a learner makes (a cache that never
  gives blocks back, refills one block at a time, forgets the lock, frees into the allocating
  thread's list; a first fit instead of best fit, no splitting or coalescing, no rounding; a
  layout that forgets the copy, the memory or the passes over B): each is rejected, and the
  message names the case and gives the hint and numbers for that mistake;
* the cases the checkers generate are the kinds they promise (real threads with a cache each and
  cross-thread frees; requests that split, merge and do not fit; a B that cannot be replicated),
  fixed ones first, then random ones, other random ones in the hidden run; every label describes
  its own case, and the pass message counts the cases;
* the references (``Central``, ``_ReferenceBestFit``, ``_cost``) against values worked out by hand
  and against the engine (``numa.matmul_cost``).

Record: tests/mutation-run-6/exercises-systems.md.
"""
from __future__ import annotations

import itertools
import random
import re
import threading

import pytest

import microtorch as mt
from microtorch.exercises import systems
from microtorch.memory import numa

from checker_probes import Recorder as _Recorder, failure as _message, cases_counted as _cases_counted
from test_exercise_checkers import _solutions

SOLUTION = _solutions("12_systems")  # the notebook's reference answers
ThreadCache = SOLUTION["ThreadCache"]
BestFitAllocator = SOLUTION["BestFitAllocator"]
choose_layout = SOLUTION["choose_layout"]


# ----------------------------------------------------------------------------------------------
# exercise 1: the thread cache
# ----------------------------------------------------------------------------------------------
class _NeverGivesBack(ThreadCache):
    def free(self, block):
        self.blocks.append(block)


class _RefillsOneAtATime(ThreadCache):
    def alloc(self):
        if not self.blocks:
            with self.central.lock:
                self.blocks = self.central.take(1)
        return self.blocks.pop()


class _GivesOneBack(ThreadCache):
    def free(self, block):
        self.blocks.append(block)
        if len(self.blocks) > self.capacity:
            with self.central.lock:
                self.central.give([self.blocks.pop()])


class _LocksEveryCall(ThreadCache):
    def alloc(self):
        with self.central.lock:
            return self.central.take(1)[0]

    def free(self, block):
        with self.central.lock:
            self.central.give([block])


class _LocksEveryAlloc(ThreadCache):
    def alloc(self):
        with self.central.lock:
            if not self.blocks:
                self.blocks = self.central.take(self.batch)
        return self.blocks.pop()


class _TakesWithoutTheLock(ThreadCache):
    def alloc(self):
        if not self.blocks:
            self.blocks = self.central.take(self.batch)
        return self.blocks.pop()


class _GivesWithoutTheLock(ThreadCache):
    def free(self, block):
        self.blocks.append(block)
        if len(self.blocks) > self.capacity:
            self.central.give(self.blocks[-self.batch:])
            del self.blocks[-self.batch:]


class _FlushesWithoutTheLock(ThreadCache):
    def flush(self):
        self.central.give(self.blocks)
        self.blocks = []


class _FlushForgetsTheBlocks(ThreadCache):
    def flush(self):
        self.blocks = []


class _FlushGivesOneTwice(ThreadCache):
    def flush(self):
        with self.central.lock:
            self.central.give(self.blocks + self.blocks[:1])
        self.blocks = []


class _PeeksInsteadOfPopping(ThreadCache):
    def alloc(self):
        if not self.blocks:
            with self.central.lock:
                self.blocks = self.central.take(self.batch)
        return self.blocks[-1]


class _NoLen(ThreadCache):
    __len__ = None


_ALLOCATED_BY = {}  # block -> the cache that handed it out (for _FreesToTheAllocatingThread)


class _FreesToTheAllocatingThread(ThreadCache):
    """Puts a freed block back into the list of the cache that handed it out, another thread's."""

    def alloc(self):
        block = super().alloc()
        _ALLOCATED_BY[block] = self
        return block

    def free(self, block):
        owner = _ALLOCATED_BY.pop(block, self)
        owner.blocks.append(block)
        if len(owner.blocks) > owner.capacity:
            with owner.central.lock:
                owner.central.give(owner.blocks[-owner.batch:])
            del owner.blocks[-owner.batch:]


class _RaisesOnFree(ThreadCache):
    def free(self, block):
        raise KeyError(block)


CASE_1 = "case 1: 2 threads, capacity 8, batch 4:"
LOCK_HINT = ("Take a whole batch from central when the cache is empty (not one block), and give a batch back "
             "only when it is too full.")
HELD_HINT = "another thread could take the same blocks. Wrap it in `with central.lock:`."
CACHE_MISTAKES = [  # (wrong answer, the case it fails on, what the message says)
    (_NeverGivesBack, CASE_1, "after a free, a thread's cache holds 9 blocks; capacity is 8: give a batch back "
     "to central when it grows past it"),
    (_RefillsOneAtATime, "case 3: 2 threads, capacity 16, batch 8, cross-thread frees:", LOCK_HINT),
    (_GivesOneBack, "case 3: 2 threads, capacity 16, batch 8, cross-thread frees:", LOCK_HINT),
    (_LocksEveryCall, CASE_1, LOCK_HINT),
    (_LocksEveryAlloc, CASE_1, LOCK_HINT),
    (_TakesWithoutTheLock, CASE_1, "central.take() called without holding central.lock: " + HELD_HINT),
    (_GivesWithoutTheLock, CASE_1, "central.give() called without holding central.lock: " + HELD_HINT),
    (_FlushesWithoutTheLock, CASE_1, "central.give() called without holding central.lock: " + HELD_HINT),
    (_FlushForgetsTheBlocks, CASE_1, "are there twice. Does flush() give back every cached block?"),
    (_FlushGivesOneTwice, CASE_1, "0 are missing and 2 are there twice. A block was given back twice "
     "(freed and also kept?)."),
    (_PeeksInsteadOfPopping, CASE_1, "still held it (step "),
    (_NoLen, CASE_1, "len(cache) must say how many blocks the cache holds: define __len__"),
    (_FreesToTheAllocatingThread, "case 2: 3 threads, capacity 4, batch 2, cross-thread frees:",
     "are missing and 0 are there twice. Does flush() give back every cached block?"),
    (_RaisesOnFree, CASE_1, "your cache raised KeyError: "),
]


@pytest.mark.parametrize("wrong, where, words", CACHE_MISTAKES, ids=[m[0].__name__[1:] for m in CACHE_MISTAKES])
def test_each_wrong_thread_cache_is_rejected_with_its_case_and_hint(wrong, where, words):
    """A catalogued thread-cache mistake fails on the case named, with its hint."""
    _ALLOCATED_BY.clear()
    msg = _message(mt.exercises.check_thread_cache, wrong)
    assert msg.startswith(where + " ") and words in msg


def test_a_cache_that_hands_out_a_held_block_is_told_the_block_the_threads_and_the_step():
    """A block handed out twice: the message names it, the thread it went to, the holder, the step."""
    msg = _message(mt.exercises.check_thread_cache, _PeeksInsteadOfPopping)
    found = re.fullmatch(rf"{re.escape(CASE_1)} block (\d+) was handed to thread ([01]) while thread ([01]) still "
                         r"held it \(step (\d+)\): a block left the cache without being removed from it, or was "
                         "taken twice", msg)
    assert found and 0 <= int(found.group(1)) < 10_000 and found.group(2) == found.group(3)  # no cross frees here
    assert 1 <= int(found.group(4)) < 200  # the second allocation at the earliest, within the 200 steps


def test_a_cache_without_len_is_told_to_define_it():
    """No __len__: the message says what len(cache) is for, word for word."""
    msg = _message(mt.exercises.check_thread_cache, _NoLen)
    assert msg == f"{CASE_1} len(cache) must say how many blocks the cache holds: define __len__"


def test_a_cache_that_raises_is_told_the_thread_and_the_error():
    """An exception in the learner's cache is reported with the thread, its type and its text."""
    msg = _message(mt.exercises.check_thread_cache, _RaisesOnFree)
    assert re.fullmatch(rf"{re.escape(CASE_1)} thread [01]: your cache raised KeyError: \d+", msg)


def test_a_cache_that_takes_the_lock_too_often_is_told_its_counts():
    """The lock message counts the lock, the allocations and frees, and the batches needed."""
    counts = {"calls": 0}
    guard = threading.Lock()

    class Counted(_LocksEveryCall):
        def alloc(self):
            with guard:
                counts["calls"] += 1
            return super().alloc()

    msg = _message(mt.exercises.check_thread_cache, Counted)
    allocs = counts["calls"]  # case 1 is the one it fails on: every allocated block is freed once
    # per call one lock, and one per thread for the final flush (2 threads)
    assert msg.startswith(f"{CASE_1} your caches took the lock {2 * allocs + 2} times for {allocs} allocations "
                          f"and {allocs} frees; with batches of 4 it needs about {2 * allocs // 4}. {LOCK_HINT}")


def test_a_cache_that_loses_blocks_is_told_how_many():
    """Blocks dropped by flush() are counted as missing, none twice."""
    kept = []
    guard = threading.Lock()

    class Drops(ThreadCache):
        def flush(self):
            with guard:
                kept.extend(self.blocks)
            self.blocks = []

    msg = _message(mt.exercises.check_thread_cache, Drops)
    assert kept and msg.startswith(f"{CASE_1} after every thread freed its blocks and flushed its cache, central "
                                   f"should hold all 10,000 blocks once; {len(kept)} are missing and 0 are "
                                   "there twice. Does flush() give back every cached block?")


class _Watched(ThreadCache):
    """The notebook's cache, recording each case: its central, capacity, batch, the threads, which
    cache allocated and which freed each block, and the batches taken and given back."""
    log: list = []
    guard = threading.Lock()

    def __init__(self, central, capacity, batch):
        super().__init__(central, capacity, batch)
        with self.guard:
            if not self.log or self.log[-1]["central"] is not central:
                self.log.append({"central": central, "capacity": capacity, "batch": batch, "caches": [],
                                 "threads": set(), "allocated": {}, "cross": 0, "frees": 0,
                                 "refills": 0, "given": 0})
            self.case = self.log[-1]
            self.case["caches"].append(self)
            self.case["threads"].add(threading.get_ident())

    def alloc(self):
        if not self.blocks:
            with self.guard:
                self.case["refills"] += 1
        block = super().alloc()
        with self.guard:
            self.case["allocated"][block] = self
        return block

    def free(self, block):
        with self.guard:
            self.case["frees"] += 1
            self.case["cross"] += self.case["allocated"].pop(block) is not self
            self.case["given"] += len(self.blocks) + 1 > self.capacity
        super().free(block)


def _watched_run(hidden):
    _Watched.log = []
    mt.exercises.check_thread_cache(_Watched, hidden=hidden)
    return _Watched.log


def test_the_thread_cache_cases_use_real_threads_a_cache_each_and_cross_thread_frees(capsys):
    """Every case: 2-4 threads with a cache each, refills and give-backs; most with cross-thread frees."""
    for hidden in (False, True):
        log = _watched_run(hidden)
        assert _cases_counted(capsys.readouterr().out, "check_thread_cache") == len(log)
        for case in log:
            assert 2 <= len(case["caches"]) == len(case["threads"]) <= 4  # one cache per real thread
            assert 1 <= case["batch"] < case["capacity"]
            assert case["refills"] >= 2 * len(case["caches"]) and case["given"] >= 1
            assert case["frees"] >= 100 * len(case["caches"]) and not case["allocated"]  # all freed
        assert sum(case["cross"] > 0 for case in log) >= len(log) - 1
    assert {case["capacity"] for case in log} != {log[0]["capacity"]}  # the hidden cases vary too


def test_the_thread_cache_has_fixed_cases_then_random_ones_and_other_ones_hidden(capsys):
    """The visible run: the fixed cases (one without cross-thread frees), then random ones; hidden: random only."""
    visible, hidden = _watched_run(False), _watched_run(True)
    assert len(visible) > 3 and len(hidden) > 0
    assert [case["cross"] > 0 for case in visible[:3]] == [False, True, True]
    shape = [(len(c["caches"]), c["capacity"], c["batch"]) for c in visible]
    assert [(len(c["caches"]), c["capacity"], c["batch"]) for c in hidden] != shape[3:]
    assert len({c["capacity"] for c in visible[3:]}) > 1
    msg = _message(mt.exercises.check_thread_cache, _loses_on_case(0), hidden=True)
    assert msg.startswith("random case 1: ")


def test_the_thread_cache_cases_are_the_same_on_every_run():
    """Seeded: a second run tries the same cases, so a learner sees the same case fail again."""
    def shape(log):
        return [(len(c["caches"]), c["capacity"], c["batch"], c["frees"] if not c["cross"] else None) for c in log]
    for hidden in (False, True):
        assert shape(_watched_run(hidden)) == shape(_watched_run(hidden))


def _loses_on_case(index):
    """The notebook's cache, except that in case ``index`` (0-based) flush() drops the blocks."""
    seen = []

    class LosesOnce(ThreadCache):
        def __init__(self, central, capacity, batch):
            super().__init__(central, capacity, batch)
            if not any(c is central for c in seen):
                seen.append(central)
            self.case = next(i for i, c in enumerate(seen) if c is central)

        def flush(self):
            if self.case == index:
                self.blocks = []
            else:
                super().flush()
    return LosesOnce


@pytest.mark.parametrize("index", range(7))
def test_each_thread_cache_label_names_its_own_case(index):
    """The message names the case by number, its threads, capacity, batch and cross-thread frees."""
    case = _watched_run(False)[index]
    msg = _message(mt.exercises.check_thread_cache, _loses_on_case(index))
    label = (f"{'random case' if index >= 3 else 'case'} {index + 1}: {len(case['caches'])} threads, capacity "
             f"{case['capacity']}, batch {case['batch']}{', cross-thread frees' if case['cross'] else ''}: "
             "after every thread freed its blocks")
    assert msg.startswith(label)


def test_a_thread_cache_must_be_a_class():
    """A function that makes caches is refused: the checker needs the class, and names what it got."""
    def make_cache(central, capacity, batch):
        return ThreadCache(central, capacity, batch)
    msg = _message(mt.exercises.check_thread_cache, make_cache)
    assert msg.startswith("check_thread_cache needs your class (class ThreadCache: ...), got <function ")
    assert "make_cache" in msg


def test_a_thread_run_without_cross_frees_counts_every_allocation_and_free():
    """_thread_run: each block allocated is freed once, central gets all of them back, no problem."""
    plans = [[("alloc", 0), ("alloc", 5), ("free", 1), ("free", 0), ("free", 7), ("alloc", 2)],
             [("free", 3), ("alloc", 4), ("alloc", 4), ("alloc", 4)]]
    # thread 0: alloc, alloc, free, free, then "free" with nothing live is an alloc, alloc: 4 allocs
    # thread 1: "free" with nothing live is an alloc, then 3 allocs: 4 allocs; all freed at the end
    central, (allocs, frees), problem = systems._thread_run(ThreadCache, 4, 2, plans, False)
    assert problem is None and (allocs, frees) == (8, 8)
    assert sorted(central.free) == list(range(10_000))


def test_a_thread_run_hands_blocks_to_the_next_thread_to_free():
    """With cross-thread frees a block allocated by one thread is freed by the next one's cache."""
    plans = [[("alloc", 0), ("free", 3)], [("alloc", 1)]]  # 3 % 3 == 0: thread 0's block goes to thread 1
    _Watched.log = []
    central, (allocs, frees), problem = systems._thread_run(_Watched, 8, 4, plans, True)
    case = _Watched.log[0]
    assert problem is None and (allocs, frees) == (2, 2) and case["cross"] == 1
    assert sorted(central.free) == list(range(10_000))


def test_the_plans_mix_allocations_and_frees_of_varied_picks():
    """_plans: one plan per thread, steps long, both kinds of op, picks spread over 0..999."""
    plans = systems._plans(random.Random(1), 3, 400)
    assert len(plans) == 3 and all(len(p) == 400 for p in plans)
    ops = [op for p in plans for op, _ in p]
    assert 0.45 < ops.count("alloc") / len(ops) < 0.65  # (the worker frees on any other op)
    picks = [n for p in plans for _, n in p]
    assert all(isinstance(n, int) and 0 <= n < 1000 for n in picks) and len(set(picks)) > 500
    assert max(picks) > 900 and any(n % 3 == 0 for n in picks) and any(n % 3 for n in picks)


# -- Central, the shared free list ---------------------------------------------------------------
def test_central_hands_out_its_last_blocks_and_takes_blocks_back():
    """take(n) gives the last n free blocks and removes them; give() appends; each `with` counts."""
    central = systems.Central(6)
    assert central.free == [0, 1, 2, 3, 4, 5] and central.acquisitions == 0
    with central.lock:
        assert central.take(2) == [4, 5]
    assert central.free == [0, 1, 2, 3] and central.acquisitions == 1
    with central.lock:
        central.give([5, 9])
        assert central.take(1) == [9]
    assert central.free == [0, 1, 2, 3, 5] and central.acquisitions == 2


def test_central_holds_ten_thousand_blocks_by_default():
    """Central(): blocks 0..9999, the number the checker's 'all 10,000 blocks' message counts."""
    assert systems.Central().free == list(range(10_000))


def test_central_refuses_take_and_give_without_the_lock():
    """take/give outside `with central.lock:` raise, saying what to do."""
    central = systems.Central(4)
    with pytest.raises(RuntimeError, match=r"^central.take\(\) called without holding central.lock: another"):
        central.take(1)
    with pytest.raises(RuntimeError, match=r"^central.give\(\) called without holding central.lock"):
        central.give([9])
    with central.lock:
        pass
    with pytest.raises(RuntimeError, match="without holding"):  # released again after the `with`
        central.take(1)
    assert central.free == [0, 1, 2, 3]


def test_central_lock_held_by_another_thread_does_not_count():
    """While one thread holds the lock, another thread's take() is still refused."""
    central, errors = systems.Central(4), []

    def other():
        try:
            central.take(1)
        except RuntimeError as exc:
            errors.append(str(exc))

    with central.lock:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert central.take(1) == [3]
    assert len(errors) == 1 and errors[0].startswith("central.take() called without holding")


@pytest.mark.parametrize("n", [0, -1, 2.0, "2"])
def test_central_take_needs_a_positive_int(n):
    """take(n) refuses a count that is not a positive int, and takes nothing."""
    central = systems.Central(4)
    with central.lock:
        with pytest.raises(ValueError, match=re.escape(f"central.take(n) needs a positive int, got {n!r}")):
            central.take(n)
    assert central.free == [0, 1, 2, 3]


# ----------------------------------------------------------------------------------------------
# exercise 2: best fit
# ----------------------------------------------------------------------------------------------
def _rounded(self, nbytes):
    return -(-max(nbytes, 1) // self.round_to) * self.round_to


class _Picking(BestFitAllocator):
    """The notebook's allocator with its rules as methods, for mistakes to swap one."""

    def size_for(self, nbytes):
        return _rounded(self, nbytes)

    def holds(self, s, size):
        return s >= size

    def pick(self, fits):  # fits: the free (offset, size) that hold the request
        return min(fits, key=lambda f: (f[1], f[0]))

    def alloc(self, nbytes):
        size = self.size_for(nbytes)
        fits = [(o, s) for o, s in self.free_blocks if self.holds(s, size)]
        if not fits:
            return None
        o, s = self.pick(fits)
        self.free_blocks.remove((o, s))
        if s > size:
            self.free_blocks.append((o + size, s - size))
        self.live[o] = size
        return o


class _FirstFit(_Picking):
    def pick(self, fits):
        return min(fits)


class _WorstFit(_Picking):
    def pick(self, fits):
        return max(fits, key=lambda f: (f[1], -f[0]))


class _HighestAddressAmongEquals(_Picking):
    def pick(self, fits):
        return min(fits, key=lambda f: (f[1], -f[0]))


class _LastFreed(_Picking):
    def pick(self, fits):
        return fits[-1]


class _RefusesAnExactFit(_Picking):
    def holds(self, s, size):
        return s > size


class _RoundsDown(_Picking):
    def size_for(self, nbytes):
        return max(self.round_to, nbytes // self.round_to * self.round_to)


class _RoundsToAPowerOfTwo(_Picking):
    def size_for(self, nbytes):
        return max(self.round_to, 1 << (nbytes - 1).bit_length())


class _NoRounding(_Picking):
    def size_for(self, nbytes):
        return nbytes


class _NoSplit(BestFitAllocator):
    def alloc(self, nbytes):
        size = _rounded(self, nbytes)
        fits = sorted((s, o) for o, s in self.free_blocks if s >= size)
        if not fits:
            return None
        s, o = fits[0]
        self.free_blocks.remove((o, s))  # the whole block, the rest not split off
        self.live[o] = s
        return o


class _SplitsFromTheTop(BestFitAllocator):
    def alloc(self, nbytes):
        size = _rounded(self, nbytes)
        fits = sorted((s, o) for o, s in self.free_blocks if s >= size)
        if not fits:
            return None
        s, o = fits[0]
        self.free_blocks.remove((o, s))
        if s > size:
            self.free_blocks.append((o, s - size))
        self.live[o + s - size] = size
        return o + s - size


class _NoCoalescing(BestFitAllocator):
    def free(self, offset):
        self.free_blocks.append((offset, self.live.pop(offset)))


class _CoalescesOnlyAfter(BestFitAllocator):
    def free(self, offset):
        start, end = offset, offset + self.live.pop(offset)
        for o, s in list(self.free_blocks):
            if o == end:
                self.free_blocks.remove((o, s))
                end = o + s
        self.free_blocks.append((start, end - start))


class _CoalescesOnlyBefore(BestFitAllocator):
    def free(self, offset):
        start, end = offset, offset + self.live.pop(offset)
        for o, s in list(self.free_blocks):
            if o + s == start:
                self.free_blocks.remove((o, s))
                start = o
        self.free_blocks.append((start, end - start))


class _CoalescesWithOneNeighbour(BestFitAllocator):
    def free(self, offset):
        start, end = offset, offset + self.live.pop(offset)
        for o, s in list(self.free_blocks):
            if o + s == start or o == end:
                self.free_blocks.remove((o, s))
                start, end = min(start, o), max(end, o + s)
                break
        self.free_blocks.append((start, end - start))


class _NeverReuses(BestFitAllocator):
    def free(self, offset):
        self.live.pop(offset)


class _GrowsPastTheHeap(BestFitAllocator):
    def __init__(self, heap_bytes, round_to):
        super().__init__(heap_bytes, round_to)
        self.top = heap_bytes

    def alloc(self, nbytes):
        got = super().alloc(nbytes)
        if got is None:
            got, self.top = self.top, self.top + _rounded(self, nbytes)
        return got


class _MinusOneWhenFull(BestFitAllocator):
    def alloc(self, nbytes):
        got = super().alloc(nbytes)
        return -1 if got is None else got


class _RaisesWhenFull(BestFitAllocator):
    def alloc(self, nbytes):
        got = super().alloc(nbytes)
        if got is None:
            raise MemoryError("out of memory")
        return got


FIT_CASE_1 = "case 1 (heap 4096 B, round_to 512): after "
FIT_CASE_2 = ("case 2 (heap 8192 B, round_to 512): after ['alloc(1000)→0', 'alloc(512)→1024', 'alloc(2000)→1536', "
              "'alloc(512)→3584', 'free(0)', 'free(3584)'], alloc(400) should give offset 0; yours gave ")
FIT_RANDOM_5 = "random case 5 (heap 16384 B, round_to 512): after ['alloc(1063)→0', "
FIT_HINT = "(Did you merge a freed block with BOTH neighbours, and split the rest off a larger block?)"
FIT_MISTAKES = [  # (wrong answer, the case and what it says, the hint's words)
    (_FirstFit, FIT_RANDOM_5, "alloc(377) should give offset 15872; yours gave 4096."),
    (_WorstFit, FIT_CASE_2 + "3584.", "the smallest that holds 512 B (the request rounded up to 512) starts at 0."),
    (_HighestAddressAmongEquals, FIT_RANDOM_5, "alloc(445) should give offset 3584; yours gave 15360. The free "
     "blocks were (offset, size) [(0, 2048), (3584, 512), (5120, 7680), (15360, 512)]; the smallest that holds "
     "512 B (the request rounded up to 512) starts at 3584."),
    (_LastFreed, FIT_CASE_2 + "3584.", "starts at 0."),
    (_RefusesAnExactFit, FIT_CASE_1 + "['alloc(1000)→0'], alloc(3000) should give offset 1024; yours gave None.",
     "the smallest that holds 3072 B (the request rounded up to 512) starts at 1024."),
    (_RoundsDown, FIT_CASE_1 + "['alloc(1000)→0'], alloc(3000) should give offset 1024; yours gave 512.",
     "the smallest that holds 3072 B"),
    (_RoundsToAPowerOfTwo, FIT_CASE_1 + "['alloc(1000)→0'], alloc(3000) should give offset 1024; yours gave None.",
     "(the request rounded up to 512)"),
    (_NoRounding, FIT_CASE_1 + "['alloc(1000)→0'], alloc(3000) should give offset 1024; yours gave 1000.",
     "(the request rounded up to 512)"),
    (_NoSplit, FIT_CASE_1 + "['alloc(1000)→0'], alloc(3000) should give offset 1024; yours gave None.",
     "starts at 1024."),
    (_SplitsFromTheTop, FIT_CASE_1 + "nothing, alloc(1000) should give offset 0; yours gave 3072.",
     "the smallest that holds 1024 B (the request rounded up to 512) starts at 0."),
    (_NoCoalescing, FIT_CASE_2 + "3584.", "starts at 0."),
    (_CoalescesOnlyAfter, FIT_RANDOM_5, "alloc(377) should give offset 15872; yours gave 4096."),
    (_CoalescesOnlyBefore, FIT_CASE_2 + "3584.", "starts at 0."),
    (_CoalescesWithOneNeighbour, FIT_RANDOM_5, "yours gave "),
    (_NeverReuses, FIT_CASE_1 + "['alloc(1000)→0', 'alloc(3000)→1024', 'free(0)'], alloc(600) should give offset "
     "0; yours gave None.", "The free blocks were (offset, size) [(0, 1024)]; the smallest that holds 1024 B"),
    (_GrowsPastTheHeap, "case 4 (heap 2048 B, round_to 512): after ['alloc(2048)→0'], alloc(1) should give offset "
     "None; yours gave 2048.", "No free block was large enough: return None. " + FIT_HINT),
    (_MinusOneWhenFull, "case 4 (heap 2048 B, round_to 512): after ['alloc(2048)→0'], alloc(1) should give offset "
     "None; yours gave -1.", "No free block was large enough: return None."),
    (_RaisesWhenFull, "case 4 (heap 2048 B, round_to 512): after ['alloc(2048)→0'], your function raised "
     "MemoryError: out of memory", "(called as fn(1)). It should return an answer for this case."),
]


@pytest.mark.parametrize("wrong, where, hint", FIT_MISTAKES, ids=[m[0].__name__[1:] for m in FIT_MISTAKES])
def test_each_wrong_best_fit_is_rejected_with_its_case_and_hint(wrong, where, hint):
    """A catalogued best-fit mistake fails on the request named, with its numbers and hint."""
    msg = _message(mt.exercises.check_best_fit, wrong)
    assert msg.startswith(where) and hint in msg


def test_a_wrong_offset_is_shown_with_the_free_blocks_and_the_general_hint():
    """The hint lists the free blocks (offset, size) and ends with the merge/split question."""
    msg = _message(mt.exercises.check_best_fit, _NoCoalescing)
    assert msg.endswith(" starts at 0. " + FIT_HINT)
    assert "The free blocks were (offset, size) [(0, " in msg


class _WatchedFit(BestFitAllocator):
    """The notebook's allocator, recording each case: heap, round_to and every call with the free
    blocks before and after it."""
    log: list = []

    def __init__(self, heap_bytes, round_to):
        super().__init__(heap_bytes, round_to)
        self.heap, self.calls = heap_bytes, []
        self.log.append(self)

    def alloc(self, nbytes):
        before = sorted(self.free_blocks)
        got = super().alloc(nbytes)
        self.calls.append(("alloc", nbytes, got, before, sorted(self.free_blocks)))
        return got

    def free(self, offset):
        before, size = sorted(self.free_blocks), self.live[offset]
        super().free(offset)
        self.calls.append(("free", offset, size, before, sorted(self.free_blocks)))


def _watched_fit_run(hidden):
    _WatchedFit.log = []
    mt.exercises.check_best_fit(_WatchedFit, hidden=hidden)
    return _WatchedFit.log


def test_the_best_fit_cases_split_merge_and_run_out(capsys):
    """Every run: requests not a multiple of round_to, splits, merges with both neighbours, a None."""
    for hidden in (False, True):
        log = _watched_fit_run(hidden)
        assert _cases_counted(capsys.readouterr().out, "check_best_fit") == len(log)
        calls = [c for a in log for c in a.calls]
        allocs = [(n, got, before, after) for op, n, got, before, after in calls if op == "alloc"]
        assert all(isinstance(n, int) and n >= 1 for n, *_ in allocs)
        assert any(n % a.round_to for a in log for op, n, *_ in a.calls if op == "alloc")
        assert any(got is None for _, got, _, _ in allocs)
        assert any(got is not None and len(after) == len(before) for _, got, before, after in allocs)  # a split
        assert sum(op == "free" for op, *_ in calls) >= 10
        both = [(off, size) for op, off, size, before, _ in calls if op == "free"
                and off in {o + s for o, s in before} and off + size in {o for o, _ in before}]
        assert both  # a freed block merged with the free blocks before and after it
        assert {a.round_to for a in log} == {256, 512}


def test_best_fit_has_fixed_cases_then_random_ones_and_other_ones_hidden():
    """Visible: fixed cases, then random ones of 60 steps; hidden: other random ones, as long."""
    visible, hidden = _watched_fit_run(False), _watched_fit_run(True)
    assert len(visible) > 4 and len(hidden) > 0
    assert [[c[:3] for c in a.calls] for a in hidden] != [[c[:3] for c in a.calls] for a in visible[4:]]
    assert all(len(a.calls) >= 30 for a in visible[4:] + hidden)
    assert len({tuple(c[1] for c in a.calls[:2]) for a in visible[4:]}) == len(visible) - 4  # varied
    assert _message(mt.exercises.check_best_fit, _wrong_on_case(0), hidden=True).startswith("random case 1 (heap ")


def test_the_best_fit_cases_are_the_same_on_every_run():
    """Seeded: a second run makes the same requests and frees, the hidden run too."""
    for hidden in (False, True):
        first = [(a.heap, a.round_to, [c[:3] for c in a.calls]) for a in _watched_fit_run(hidden)]
        assert first == [(a.heap, a.round_to, [c[:3] for c in a.calls]) for a in _watched_fit_run(hidden)]


def _wrong_on_case(index):
    """The notebook's allocator, except that in case ``index`` (0-based) its first alloc is off by 1."""
    made = []

    class Off(BestFitAllocator):
        def __init__(self, heap_bytes, round_to):
            super().__init__(heap_bytes, round_to)
            made.append(self)
            self.first = len(made) - 1 == index

        def alloc(self, nbytes):
            got = super().alloc(nbytes)
            if self.first:
                self.first = False
                return got + 1
            return got
    return Off


@pytest.mark.parametrize("index", range(10))
def test_each_best_fit_label_names_its_own_case(index):
    """The message names the case by number, its heap and round_to, and the request."""
    a = _watched_fit_run(False)[index]
    msg = _message(mt.exercises.check_best_fit, _wrong_on_case(index))
    assert msg.startswith(f"{'random case' if index >= 4 else 'case'} {index + 1} (heap {a.heap} B, round_to "
                          f"{a.round_to}): after nothing, alloc({a.calls[0][1]}) should give offset 0; yours "
                          "gave 1.")


def test_a_best_fit_must_be_a_class():
    """A function that makes allocators is refused: the checker needs the class, and names what it got."""
    def make_allocator(heap_bytes, round_to):
        return BestFitAllocator(heap_bytes, round_to)
    msg = _message(mt.exercises.check_best_fit, make_allocator)
    assert msg.startswith("check_best_fit needs your class (class BestFitAllocator: ...), got <function ")
    assert "make_allocator" in msg


def test_a_best_fit_that_cannot_be_created_is_told_the_case():
    """An allocator whose constructor raises is told which case was being set up."""
    class Broken(BestFitAllocator):
        def __init__(self, heap_bytes, round_to):
            raise TypeError("bad")
    msg = _message(mt.exercises.check_best_fit, Broken)
    assert msg.startswith("case 1 (heap 4096 B, round_to 512): creating your allocator: your function raised "
                          "TypeError: bad\n(called as fn(4096, 512))")


def test_a_best_fit_whose_first_alloc_raises_is_told_nothing_ran_before():
    """An alloc() that raises on the first request is told the case and that nothing ran before it."""
    class Broken(BestFitAllocator):
        def alloc(self, nbytes):
            raise KeyError(nbytes)
    msg = _message(mt.exercises.check_best_fit, Broken)
    assert msg.startswith("case 1 (heap 4096 B, round_to 512): after nothing, your function raised KeyError: 1000\n")


def test_a_best_fit_whose_free_raises_is_told_what_ran_before():
    """A free() that raises is told the case and the operations so far."""
    class Broken(BestFitAllocator):
        def free(self, offset):
            raise KeyError(offset)
    msg = _message(mt.exercises.check_best_fit, Broken)
    assert msg.startswith("case 1 (heap 4096 B, round_to 512): after ['alloc(1000)→0', 'alloc(3000)→1024'], your "
                          "function raised KeyError: 0\n(called as fn(0))")


# -- the reference best fit, by hand ---------------------------------------------------------------
def test_reference_best_fit_rounds_splits_and_says_none():
    """Rounded up to round_to (at least one unit), split off the front, None when nothing fits."""
    ref = systems._ReferenceBestFit(4096, 512)
    assert ref.free == [(0, 4096)] and ref.live == {}
    assert ref.alloc(1000) == 0 and ref.free == [(1024, 3072)] and ref.live == {0: 1024}
    assert ref.alloc(0) == 1024 and ref.live[1024] == 512  # a zero-byte request still takes one unit
    assert ref.alloc(2560) == 1536 and ref.free == []  # an exact fit: nothing left to split
    assert ref.alloc(1) is None


def test_reference_best_fit_takes_the_smallest_block_then_the_lowest_address():
    """Among free blocks that fit: the smallest; among those of that size, the lowest offset."""
    ref = systems._ReferenceBestFit(8192, 512)
    offsets = [ref.alloc(512) for _ in range(8)]
    assert offsets == [0, 512, 1024, 1536, 2048, 2560, 3072, 3584]
    for off in (3072, 1024, 0):  # free blocks: (3072, 512), (1024, 512), (0, 512), (4096, 4096)
        ref.free_(off)
    assert ref.alloc(100) == 0  # three of 512 fit: the lowest address
    assert ref.alloc(600) == 4096  # only the big one holds 1024
    assert sorted(ref.free) == [(1024, 512), (3072, 512), (5120, 3072)]


def test_reference_best_fit_merges_a_freed_block_with_both_neighbours():
    """free_ merges with the free block ending at its start and the one starting at its end."""
    ref = systems._ReferenceBestFit(4096, 256)
    offsets = [ref.alloc(256) for _ in range(8)]
    assert offsets == [256 * i for i in range(8)] and ref.free == [(2048, 2048)]
    ref.free_(256)
    ref.free_(768)
    assert sorted(ref.free) == [(256, 256), (768, 256), (2048, 2048)]
    ref.free_(512)  # between the two: one block of three
    assert sorted(ref.free) == [(256, 768), (2048, 2048)] and 512 not in ref.live
    ref.free_(1792)  # merges with the rest of the heap after it
    ref.free_(0)
    assert sorted(ref.free) == [(0, 1024), (1792, 2304)]
    assert ref.alloc(700) == 0  # 768 B: (0, 1024) is the smaller of the two that hold it


def test_reference_best_fit_leaves_blocks_that_only_touch_elsewhere():
    """A free block that neither ends at the start nor starts at the end stays separate."""
    ref = systems._ReferenceBestFit(2048, 512)
    a, b, c, d = (ref.alloc(512) for _ in range(4))
    ref.free_(a)
    ref.free_(c)
    assert sorted(ref.free) == [(0, 512), (1024, 512)]
    ref.free_(d)
    assert sorted(ref.free) == [(0, 512), (1024, 1024)]


# ----------------------------------------------------------------------------------------------
# exercise 3: the NUMA layout
# ----------------------------------------------------------------------------------------------
def _reasoned(reads=lambda m, t: -(-m // t.nodes // 1000), memory=True, copy=True, single="interleave",
              copies_of_b=2):
    """The notebook's choose_layout with one step of its reasoning swapped for a learner's mistake."""
    def choose(m, k, n, t):
        a, b, c = m * k * 4, k * n * 4, m * n * 4
        passes = reads(m, t)
        fits = a + c + copies_of_b * b <= t.nodes * t.memory_bytes if memory else True
        extra = passes * (b / 2) * (1 / t.remote_gbps - 1 / t.local_gbps) \
            + passes * (b / 2 / 4096) * (t.remote_latency_ns - t.local_latency_ns)
        if fits and extra > (b / t.remote_gbps if copy else 0):
            return {"A": "split", "B": "replicate", "C": "split"}
        return {"A": "split", "B": single, "C": "split"}
    return choose


NUMA_1 = "case 1: A [10000, 5000], B [5000, 2000], 34,360 MB per node, remote 135 ns / 20 GB/s: "
NUMA_2 = "case 2: A [10000, 5000], B [5000, 2000], 170 MB per node, remote 135 ns / 20 GB/s: "
NUMA_3 = "case 3: A [2000, 20000], B [20000, 500], 34,360 MB per node, remote 135 ns / 20 GB/s: "
SLOW_HINT = ("count the remote bytes of each choice (remote reads are slower), and the one-time copy replication "
             "costs.")
REPLICA, INTERLEAVED = "{'A': 'split', 'B': 'replicate', 'C': 'split'}", "{'A': 'split', 'B': 'interleave', 'C': 'split'}"
NUMA_MISTAKES = [  # (wrong answer, the case it fails on, what the message says)
    (lambda m, k, n, t: {"A": "split", "B": "replicate", "C": "split"}, NUMA_2,
     f"{REPLICA} needs 360 MB but the machine has 340 MB: replicating B costs a second copy of it."),
    (_reasoned(memory=False), NUMA_2, f"{REPLICA} needs 360 MB but the machine has 340 MB"),
    (_reasoned(copies_of_b=1), NUMA_2, f"{REPLICA} needs 360 MB but the machine has 340 MB"),
    (lambda m, k, n, t: {"A": "split", "B": "interleave", "C": "split"}, NUMA_1,
     f"{INTERLEAVED} takes 19.57 ms in the model; {REPLICA} takes 17.97 ms. Each socket reads its rows of A once "
     f"and B 5 time(s); {SLOW_HINT}"),
    (_reasoned(reads=lambda m, t: 1), NUMA_1, f"{INTERLEAVED} takes 19.57 ms in the model; {REPLICA} takes 17.97 ms."),
    (_reasoned(copy=False), NUMA_3, f"{REPLICA} takes 7.73 ms in the model; {INTERLEAVED} takes 6.45 ms. Each "
     "socket reads its rows of A once and B 1 time(s);"),
    (_reasoned(single=0), NUMA_2, f"{{'A': 'split', 'B': 0, 'C': 'split'}} takes 23.17 ms in the model; "
     f"{INTERLEAVED} takes 19.57 ms."),
    (lambda m, k, n, t: {"A": 0, "B": 0, "C": 0}, NUMA_1, f"takes 28.21 ms in the model; {REPLICA} takes 17.97 ms."),
    (lambda m, k, n, t: dict(choose_layout(m, k, n, t), A="interleave"), NUMA_1,
     "{'A': 'interleave', 'B': 'replicate', 'C': 'split'} takes 19.77 ms in the model;"),
    (lambda m, k, n, t: dict(choose_layout(m, k, n, t), C=0), NUMA_1,
     "{'A': 'split', 'B': 'replicate', 'C': 0} takes 19.41 ms in the model;"),
    (lambda m, k, n, t: {"A": "split", "B": "split", "C": "split"}, NUMA_1,
     "{'A': 'split', 'B': 'split', 'C': 'split'} is not a layout: A and C are one of ('split', 'interleave', 0, 1), "
     "B one of ('replicate', 'interleave', 0, 1)"),
    (lambda m, k, n, t: {"A": "replicate", "B": "interleave", "C": "split"}, NUMA_1, "is not a layout"),
    (lambda m, k, n, t: {"A": "split", "B": "interleave", "C": "replicate"}, NUMA_1, "is not a layout"),
    (lambda m, k, n, t: {"A": "split", "B": 2, "C": "split"}, NUMA_1, "is not a layout"),
    (lambda m, k, n, t: ("split", "interleave", "split"), NUMA_1,
     "return a dict with keys 'A', 'B', 'C'; got ('split', 'interleave', 'split')"),
    (lambda m, k, n, t: {"A": "split", "B": "interleave"}, NUMA_1, "return a dict with keys 'A', 'B', 'C'; got {"),
    (lambda m, k, n, t: m // 0, NUMA_1, "your function raised ZeroDivisionError: integer division or modulo by zero\n"
     "(called as fn(10000, 5000, 2000, Topology("),
]
NUMA_IDS = ["always-replicate", "no-memory-check", "one-copy-of-B-counted", "always-interleave", "B-read-once",
            "forgets-the-copy", "B-on-node-0", "all-on-node-0", "A-interleaved", "C-on-node-0", "B-split",
            "A-replicated", "C-replicated", "node-2", "a-tuple", "no-C", "raises"]


@pytest.mark.parametrize("wrong, where, words", NUMA_MISTAKES, ids=NUMA_IDS)
def test_each_wrong_numa_layout_is_rejected_with_its_case_and_hint(wrong, where, words):
    """A catalogued layout mistake fails on the case named, with its numbers and hint."""
    msg = _message(mt.exercises.check_numa_layout, wrong)
    assert msg.startswith(where) and words in msg


def _slow_on_call(index, recorder):
    """choose_layout, except that on call ``index`` (0-based) it puts everything on node 0."""
    def answer(m, k, n, t):
        recorder.append((m, k, n, t))
        return {"A": 0, "B": 0, "C": 0} if len(recorder) - 1 == index else choose_layout(m, k, n, t)
    return answer


@pytest.mark.parametrize("index", range(11))
def test_each_numa_label_names_its_own_case_and_its_times(index):
    """The message names the case: its shapes and topology; its times are the engine's matmul_cost."""
    calls = []
    msg = _message(mt.exercises.check_numa_layout, _slow_on_call(index, calls))
    m, k, n, t = calls[index]
    assert len(calls) == index + 1
    label = re.match(r"(random case|case) (\d+): A \[(\d+), (\d+)\], B \[(\d+), (\d+)\], ([\d,]+) MB per node, "
                     r"remote (\d+) ns / ([\d.]+) GB/s: ", msg)
    assert label and label.group(1) == ("random case" if index >= 3 else "case") and int(label.group(2)) == index + 1
    assert [int(g) for g in label.group(3, 4, 5, 6)] == [m, k, k, n]
    assert int(label.group(7).replace(",", "")) == round(t.memory_bytes / 1e6)
    assert int(label.group(8)) == round(t.remote_latency_ns) and float(label.group(9)) == t.remote_gbps
    mine = numa.matmul_cost(m, k, n, {"A": 0, "B": 0, "C": 0}, t)["ns"]
    best = min(numa.matmul_cost(m, k, n, dict(zip("ABC", c)), t)["ns"]
               for c in itertools.product(systems.A_LAYOUTS, systems.B_LAYOUTS, systems.A_LAYOUTS)
               if numa.matmul_cost(m, k, n, dict(zip("ABC", c)), t)["fits"])
    reads = numa.matmul_cost(m, k, n, {"A": 0, "B": 0, "C": 0}, t)["b_reads"]
    assert msg[label.end():].startswith(f"{{'A': 0, 'B': 0, 'C': 0}} takes {mine / 1e6:.2f} ms in the model; ")
    assert f"takes {best / 1e6:.2f} ms. Each socket reads its rows of A once and B {reads} time(s);" in msg


def test_the_numa_cases_are_the_same_on_every_run():
    """Seeded: a second run asks about the same shapes and machines, the hidden run too."""
    for hidden in (False, True):
        runs = []
        for _ in range(2):
            spy = _Recorder(choose_layout)
            mt.exercises.check_numa_layout(spy, hidden=hidden)
            runs.append(spy.calls)
        assert runs[0] == runs[1]


def _numa_kinds(calls):
    """Which answer each case needs: B replicated, B interleaved, or no room for a replica."""
    kinds = set()
    for m, k, n, t in calls:
        cost = {b: numa.matmul_cost(m, k, n, {"A": "split", "B": b, "C": "split"}, t) for b in ("replicate", "interleave")}
        assert cost["interleave"]["fits"]  # a layout always fits
        kinds.add("no room" if not cost["replicate"]["fits"] else
                  "replicate" if cost["replicate"]["ns"] < cost["interleave"]["ns"] else "interleave")
    return kinds


def test_the_numa_cases_need_each_kind_of_answer(capsys):
    """Fixed then random cases, other ones hidden: replicating B pays, does not pay, does not fit."""
    seen = {}
    for hidden in (False, True):
        spy = _Recorder(choose_layout)
        mt.exercises.check_numa_layout(spy, hidden=hidden)
        assert _cases_counted(capsys.readouterr().out, "check_numa_layout") == len(spy.calls)
        seen[hidden] = spy.calls
    visible, hidden = seen[False], seen[True]
    assert len(visible) > 3 and len(hidden) > 0 and hidden[:3] != visible[3:6]
    assert _numa_kinds(visible[:3]) == {"no room", "replicate", "interleave"}
    assert _numa_kinds(visible[3:]) >= {"replicate", "interleave"} <= _numa_kinds(hidden)
    topologies = {(t.memory_bytes, t.remote_latency_ns, t.remote_gbps) for *_, t in visible[3:] + hidden}
    assert len({lat for _, lat, _ in topologies}) == 2 and len({g for *_, g in topologies}) == 2


# -- the checker's cost model, by hand ------------------------------------------------------------
T = numa.Topology()  # local 90 ns, 40 GB/s; remote 135 ns, 20 GB/s (1 GB/s = 1 byte/ns)
SPLIT_REPLICATE = {"A": "split", "B": "replicate", "C": "split"}


def test_cost_of_the_replicated_layout_by_hand():
    """A [4000, 1024], B [1024, 1024]: all local, B read twice, plus one copy of B over the link."""
    # a = c = 16,384,000 B, b = 4,194,304 B; each socket: half of A and of C, B ⌈2000/1000⌉ = 2 times
    # A: 8,192,000 B = 2000 pages: 2000 × 90 + 8,192,000 / 40 = 384,800 ns (C the same)
    # B: 8,388,608 B = 2048 pages: 2048 × 90 + 8,388,608 / 40 = 394,035.2 ns
    # copy: 4,194,304 / 20 = 209,715.2 ns; memory a + c + 2 b = 41,156,608 B
    ns, memory = systems._cost(4000, 1024, 1024, SPLIT_REPLICATE, T)
    assert ns == pytest.approx(384_800 * 2 + 394_035.2 + 209_715.2) and memory == 41_156_608


def test_cost_on_one_node_is_the_remote_sockets_time():
    """Everything on node 0: socket 1 reads all of it remotely, and the slower socket sets the time."""
    # socket 1: A 2000 × 135 + 8,192,000 / 20 = 679,600 (C the same); B 2048 × 135 + 8,388,608 / 20 = 695,910.4
    ns, memory = systems._cost(4000, 1024, 1024, {"A": 0, "B": 0, "C": 0}, T)
    assert ns == pytest.approx(679_600 * 2 + 695_910.4) and memory == 36_962_304
    ns, _ = systems._cost(4000, 1024, 1024, {"A": 1, "B": 1, "C": 1}, T)
    assert ns == pytest.approx(679_600 * 2 + 695_910.4)


def test_cost_of_interleaved_operands_halves_each_read():
    """Interleaved: each socket reads half of its bytes locally and half remotely, pages counted per half."""
    # B: two halves of 4,194,304 B (1024 pages): 1024 × 90 + 4,194,304 / 40 = 197,017.6 local,
    # 1024 × 135 + 4,194,304 / 20 = 347,955.2 remote; A, C split: 384,800 each
    ns, memory = systems._cost(4000, 1024, 1024, {"A": "split", "B": "interleave", "C": "split"}, T)
    assert ns == pytest.approx(384_800 * 2 + 197_017.6 + 347_955.2) and memory == 36_962_304
    # A interleaved too: two halves of 4,096,000 B (1000 pages): 90,000 + 102,400 and 135,000 + 204,800
    ns, _ = systems._cost(4000, 1024, 1024, {"A": "interleave", "B": "interleave", "C": "split"}, T)
    assert ns == pytest.approx(192_400 + 339_800 + 197_017.6 + 347_955.2 + 384_800)


def test_cost_counts_at_least_one_access_and_b_passes_per_socket_rows():
    """Tiny operands still pay one latency; B is read ⌈m / 2 / 1000⌉ times (m = 2001: twice)."""
    # m = 2, k = n = 1: a = c = 8 B, b = 4 B; each read of 4 B: 1 access × 90 + 4 / 40 = 90.1
    ns, memory = systems._cost(2, 1, 1, SPLIT_REPLICATE, T)
    assert ns == pytest.approx(3 * 90.1 + 4 / 20) and memory == 24
    # m = 2001, k = n = 512: b = 1,048,576 B read twice: 512 pages × 90 + 2,097,152 / 40 per socket
    one, _ = systems._cost(2000, 512, 512, SPLIT_REPLICATE, T)
    two, _ = systems._cost(2001, 512, 512, SPLIT_REPLICATE, T)
    # (and each socket's half of A and of C grows by 512 × 4 / 2 = 1,024 B, at 40 GB/s: 25.6 ns each)
    assert two - one == pytest.approx(256 * 90 + 1_048_576 / 40 + 2 * 25.6)


def test_cost_on_a_machine_without_latency_is_bytes_over_bandwidth():
    """With zero latencies only bandwidth counts, even below one nanosecond."""
    # m = 2, k = n = 1: each socket reads 4 B of A and writes 4 B of C locally (0.1 ns each) and reads
    # B (4 B, once) half locally (2 / 40 = 0.05 ns) and half remotely (2 / 20 = 0.1 ns)
    t = numa.Topology(local_latency_ns=0.0, remote_latency_ns=0.0)
    ns, memory = systems._cost(2, 1, 1, {"A": "split", "B": "interleave", "C": "split"}, t)
    assert ns == pytest.approx(0.35) and memory == 20


def test_cost_uses_the_topology_it_is_given():
    """Other latencies and bandwidths change the time by hand-worked amounts."""
    slow = numa.Topology(remote_latency_ns=200.0, remote_gbps=10.0, local_latency_ns=100.0, local_gbps=50.0)
    # 4000 × 1024 × 1024 with everything on node 1: socket 0 reads all of it remotely
    # A: 2000 × 200 + 8,192,000 / 10 = 1,219,200 (C the same); B: 2048 × 200 + 8,388,608 / 10 = 1,248,460.8
    ns, _ = systems._cost(4000, 1024, 1024, {"A": 1, "B": 1, "C": 1}, slow)
    assert ns == pytest.approx(1_219_200 * 2 + 1_248_460.8)
    # replicated: local A 2000 × 100 + 8,192,000 / 50 = 363,840; B 2048 × 100 + 8,388,608 / 50 = 372,572.16;
    # the copy 4,194,304 / 10
    ns, _ = systems._cost(4000, 1024, 1024, SPLIT_REPLICATE, slow)
    assert ns == pytest.approx(363_840 * 2 + 372_572.16 + 419_430.4)


@pytest.mark.parametrize("topology", [numa.Topology(), numa.Topology(remote_latency_ns=200.0, remote_gbps=10.0),
                                      numa.Topology(memory_bytes=10 ** 6, local_gbps=25.0, local_latency_ns=70.0)])
def test_the_checkers_cost_agrees_with_the_engine_on_every_layout(topology):
    """_cost equals numa.matmul_cost (time and memory) for all 64 layouts, on several shapes."""
    for (m, k, n), combo in itertools.product([(10_000, 5_000, 2_000), (2_001, 300, 7), (16_000, 1_000, 500)],
                                              itertools.product(systems.A_LAYOUTS, systems.B_LAYOUTS,
                                                                systems.A_LAYOUTS)):
        layout = dict(zip("ABC", combo))
        ns, memory = systems._cost(m, k, n, layout, topology)
        engine = numa.matmul_cost(m, k, n, layout, topology)
        assert ns == pytest.approx(engine["ns"], rel=1e-12) and memory == engine["memory_bytes"], layout


def test_the_layout_choices_are_the_ones_the_notebook_names():
    """A and C: split, interleave or a node; B: replicate, interleave or a node (two sockets)."""
    assert systems.A_LAYOUTS == ("split", "interleave", 0, 1)
    assert systems.B_LAYOUTS == ("replicate", "interleave", 0, 1)


# ----------------------------------------------------------------------------------------------
# the four checker fixes of this run (they fail, or hang, on the code before them)
# ----------------------------------------------------------------------------------------------
class _FlushKeepsTheBlocks(ThreadCache):
    def flush(self):
        with self.central.lock:
            self.central.give(self.blocks)


def test_a_flush_that_keeps_its_blocks_is_rejected():
    """flush() gives every block back AND empties the cache: blocks kept would be handed out twice."""
    msg = _message(mt.exercises.check_thread_cache, _FlushKeepsTheBlocks)
    assert re.match(rf"{re.escape(CASE_1)} thread [01]: after flush\(\) your cache still holds \d+ blocks, which "
                    r"are central's again: a later alloc\(\) would hand out a block central also has\. Empty the "
                    r"cache in flush\(\)$", msg)


def _first_cache_never_gives_back():
    """The notebook's cache, except that the first one made (one thread of case 1) never gives blocks back."""
    made = []

    class OneHoards(ThreadCache):
        def __init__(self, central, capacity, batch):
            super().__init__(central, capacity, batch)
            made.append(self)

        def free(self, block):
            if self is made[0]:
                self.blocks.append(block)
            else:
                super().free(block)
    return OneHoards


def test_a_problem_in_one_thread_does_not_leave_the_others_waiting():
    """Only one thread's cache goes past capacity: the checker still finishes, with that message."""
    result = []
    runner = threading.Thread(target=lambda: result.append(_message(mt.exercises.check_thread_cache,
                                                                    _first_cache_never_gives_back())), daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive(), "the checker hangs: a thread waits at the barrier for one that has stopped"
    assert result[0].startswith(f"{CASE_1} after a free, a thread's cache holds 9 blocks; capacity is 8")


def test_a_best_fit_hint_lists_the_free_blocks_as_they_were_before_the_request():
    """The hint shows the free blocks the request was served from, not the pieces after the split."""
    msg = _message(mt.exercises.check_best_fit, _SplitsFromTheTop)
    assert msg.startswith(FIT_CASE_1 + "nothing, alloc(1000) should give offset 0; yours gave 3072. The free blocks "
                          "were (offset, size) [(0, 4096)]; the smallest that holds 1024 B")
    msg = _message(mt.exercises.check_best_fit, _WorstFit)
    assert msg.startswith(FIT_CASE_2 + "3584. The free blocks were (offset, size) [(0, 1024), (3584, 4608)]; ")


def test_some_random_numa_cases_have_no_room_for_a_second_copy_of_b():
    """As the generator's comment says: in the visible and the hidden random cases, B sometimes cannot be replicated."""
    for hidden in (False, True):
        spy = _Recorder(choose_layout)
        mt.exercises.check_numa_layout(spy, hidden=hidden)
        assert "no room" in _numa_kinds(spy.calls[0 if hidden else 3:])
