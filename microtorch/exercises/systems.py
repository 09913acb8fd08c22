"""Exercises of notebook 12 (systems): a thread cache, a best-fit allocator for changing
shapes, and a NUMA layout for C = A × B (the AI-compiler article's exercises 4 and 5).

Each checker runs only the learner's code (:func:`~.checker.checker`): while it runs, the
engine's own answer is switched off — ``ThreadCaches``, ``BestFit`` and ``numa.matmul_cost``
say "write this yourself". The references are independent: a ledger of which thread holds
which block, a best-fit written here in a few lines over a plain list, and an exhaustive
search over layouts with this module's own cost formula. Fixed cases come first, then
random ones (another seed with ``hidden=True``).
"""
from __future__ import annotations

import itertools
import math
import queue
import random
import threading

from .checker import checker
from .checking import WriteItYourself, _call, _fail, _passed, hidden, learner


def _thread_cache_blocks():
    from ..memory.thread_cache import ThreadCaches
    return [ThreadCaches]


def _best_fit_blocks():
    from ..memory.best_fit import BestFit
    return [BestFit]


def _numa_blocks():
    from ..memory.numa import matmul_cost
    return [matmul_cost]


# ----------------------------------------------------------------------------------------------
# Exercise 1: a thread cache in front of a shared free list
# ----------------------------------------------------------------------------------------------
class Central:
    """The shared free list the learner's cache sits in front of: ``take(n)`` and ``give(blocks)``
    must be called while holding ``central.lock``; the checker counts the acquisitions."""

    def __init__(self, blocks: int = 10_000):
        self._lock = threading.Lock()
        self.free = list(range(blocks))
        self.acquisitions = 0
        self._holder = None

    @property
    def lock(self):
        central = self

        class _Counted:
            def __enter__(self):
                central._lock.acquire()
                central._holder = threading.get_ident()
                central.acquisitions += 1
                return self

            def __exit__(self, *exc):
                central._holder = None
                central._lock.release()

        return _Counted()

    def _check_held(self, what: str):
        if self._holder != threading.get_ident():
            raise RuntimeError(f"central.{what}() called without holding central.lock: another thread "
                               "could take the same blocks. Wrap it in `with central.lock:`.")

    def take(self, n: int) -> list:
        self._check_held("take")
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"central.take(n) needs a positive int, got {n!r}")
        out, self.free = self.free[-n:], self.free[:-n]
        return out

    def give(self, blocks) -> None:
        self._check_held("give")
        self.free.extend(blocks)


def _thread_run(cache_cls, capacity, batch, plans, cross):
    """Run one cache per thread over ``plans``; freed blocks sometimes travel to the next thread
    (``cross``). Returns (central, caches, allocations, frees, error text or None)."""
    central = Central()
    ledger, ledger_lock = {}, threading.Lock()
    mailboxes = [queue.Queue() for _ in plans]
    caches, problems, counts = [None] * len(plans), [], [0, 0]
    barrier = threading.Barrier(len(plans))

    def worker(k):
        try:
            cache = caches[k] = cache_cls(central, capacity, batch)
            live = []
            barrier.wait()
            for step, (op, n) in enumerate(plans[k]):
                while not mailboxes[k].empty():
                    live.append(mailboxes[k].get())
                if op == "alloc" or not live:
                    b = cache.alloc()
                    with ledger_lock:
                        counts[0] += 1
                        if b in ledger:
                            problems.append(f"block {b!r} was handed to thread {k} while thread "
                                            f"{ledger[b]} still held it (step {step}): a block left the "
                                            "cache without being removed from it, or was taken twice")
                            barrier.abort()  # the other threads must not wait for this one at the barrier
                            return
                        ledger[b] = k
                    live.append(b)
                else:
                    b = live.pop(n % len(live))
                    if cross and n % 3 == 0:  # hand it to the next thread, which will free it
                        mailboxes[(k + 1) % len(plans)].put(b)
                        continue
                    with ledger_lock:
                        counts[1] += 1
                        del ledger[b]
                    cache.free(b)
                    try:
                        held = len(cache)
                    except TypeError:
                        problems.append("len(cache) must say how many blocks the cache holds: define __len__")
                        barrier.abort()
                        return
                    if held > capacity:
                        problems.append(f"after a free, a thread's cache holds {held} blocks; capacity is "
                                        f"{capacity}: give a batch back to central when it grows past it")
                        barrier.abort()
                        return
            barrier.wait()
            while not mailboxes[k].empty():
                live.append(mailboxes[k].get())
            for b in live:
                with ledger_lock:
                    counts[1] += 1
                    del ledger[b]
                cache.free(b)
            cache.flush()
            if len(cache):
                problems.append(f"thread {k}: after flush() your cache still holds {len(cache)} blocks, which are "
                                "central's again: a later alloc() would hand out a block central also has. "
                                "Empty the cache in flush()")
        except threading.BrokenBarrierError:
            pass
        except (NotImplementedError, WriteItYourself) as exc:  # the stub's hint, or a delegation
            raised.append(exc)
            barrier.abort()
        except Exception as exc:  # noqa: BLE001 - reported to the learner
            problems.append(f"thread {k}: your cache raised {type(exc).__name__}: {exc}")
            barrier.abort()

    raised = []
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(plans))]
    with learner():  # the learner's methods run in these threads
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if raised:
        raise raised[0]
    return central, counts, problems[0] if problems else None


def _plans(rng, threads, steps):
    return [[("alloc" if rng.random() < 0.55 else "free", rng.randrange(1000)) for _ in range(steps)]
            for _ in range(threads)]


def check_thread_cache(cache_cls) -> None:
    """``cache_cls(central, capacity, batch)``: one thread's cache of free blocks in front of a
    shared :class:`Central` free list, with ``alloc() -> block``, ``free(block)``, ``flush()``
    (give every cached block back) and ``len(cache)`` (blocks it holds now).

    Checked with real threads, each with its own cache, blocks freed by other threads than
    the ones that allocated them: no block held by two threads at once; nothing lost (after
    every cache is flushed, central holds every block exactly once); a cache never holds
    more than ``capacity`` blocks after a free; ``central.take``/``give`` only under the lock;
    and the lock taken at most about once per ``batch`` allocations or frees."""
    if not isinstance(cache_cls, type):
        _fail(f"check_thread_cache needs your class (class ThreadCache: ...), got {cache_cls!r}.")
    rng = random.Random(918 if hidden() else 12)
    cases = [] if hidden() else [(2, 8, 4, False, 200), (3, 4, 2, True, 300), (2, 16, 8, True, 400)]
    randomized = [(rng.randint(2, 4), c, max(1, c // 2), True, 300)
                  for c in (rng.choice([4, 8, 16]) for _ in range(4))]
    for i, (threads, capacity, batch, cross, steps) in enumerate(cases + randomized):
        where = (f"{'random case' if i >= len(cases) else 'case'} {i + 1}: {threads} threads, "
                 f"capacity {capacity}, batch {batch}{', cross-thread frees' if cross else ''}:")
        plans = _plans(random.Random(rng.random() if i >= len(cases) else i), threads, steps)
        central, (allocs, frees), problem = _thread_run(cache_cls, capacity, batch, plans, cross)
        if problem:
            _fail(f"{where} {problem}")
        if sorted(central.free) != list(range(10_000)):
            missing = set(range(10_000)) - set(central.free)
            twice = len(central.free) - len(set(central.free))
            _fail(f"{where} after every thread freed its blocks and flushed its cache, central "
                  f"should hold all 10,000 blocks once; {len(missing)} are missing and {twice} are "
                  "there twice. " + ("Does flush() give back every cached block?" if missing else
                                     "A block was given back twice (freed and also kept?)."))
        bound = (allocs + frees) / batch + 3 * threads + 2
        if central.acquisitions > bound:
            _fail(f"{where} your caches took the lock {central.acquisitions} times for {allocs} "
                  f"allocations and {frees} frees; with batches of {batch} it needs about "
                  f"{int((allocs + frees) / batch)}. Take a whole batch from central when the cache "
                  "is empty (not one block), and give a batch back only when it is too full.")
    _passed("check_thread_cache", len(cases) + len(randomized))


check_thread_cache = checker("the thread cache", blocks=_thread_cache_blocks)(check_thread_cache)


# ----------------------------------------------------------------------------------------------
# Exercise 2: a best-fit allocator for shapes that keep changing
# ----------------------------------------------------------------------------------------------
class _ReferenceBestFit:
    """Best fit over a list of free (offset, size), lowest address among equal sizes."""

    def __init__(self, heap_bytes, round_to):
        self.round_to, self.free, self.live = round_to, [(0, heap_bytes)], {}

    def alloc(self, nbytes):
        size = -(-max(nbytes, 1) // self.round_to) * self.round_to
        fits = [(s, o) for o, s in self.free if s >= size]
        if not fits:
            return None
        s, o = min(fits)
        self.free.remove((o, s))
        if s > size:
            self.free.append((o + size, s - size))
        self.live[o] = size
        return o

    def free_(self, offset):
        size = self.live.pop(offset)
        start, end = offset, offset + size
        for o, s in list(self.free):
            if o + s == start or o == end:
                self.free.remove((o, s))
                start, end = min(start, o), max(end, o + s)
        self.free.append((start, end - start))


def _fit_plan(rng, steps):
    return [("alloc", rng.choice([rng.randint(1, 600), rng.randint(600, 3000)])) if rng.random() < 0.6
            else ("free", rng.randrange(10 ** 6)) for _ in range(steps)]


def check_best_fit(alloc_cls) -> None:
    """``alloc_cls(heap_bytes, round_to)`` with ``alloc(nbytes) -> offset`` (or ``None`` when
    no free block fits) and ``free(offset)``: requests rounded up to a multiple of
    ``round_to``; the *smallest* free block that fits (the lowest address among equals),
    split when larger; a freed block merged with the free blocks right before and after it.
    Checked offset by offset against a reference on fixed and hidden random sequences."""
    if not isinstance(alloc_cls, type):
        _fail(f"check_best_fit needs your class (class BestFitAllocator: ...), got {alloc_cls!r}.")
    fixed = [
        (4096, 512, [("alloc", 1000), ("alloc", 3000), ("free", 0), ("alloc", 600)]),
        (8192, 512, [("alloc", 1000), ("alloc", 512), ("alloc", 2000), ("alloc", 512), ("free", 0),
                     ("free", 2), ("alloc", 400), ("alloc", 900)]),
        (4096, 256, [("alloc", 256)] * 8 + [("free", 1), ("free", 3), ("free", 2), ("alloc", 700)]),
        (2048, 512, [("alloc", 2048), ("alloc", 1), ("free", 0), ("alloc", 1)]),
    ]
    rng = random.Random(918 if hidden() else 5)
    fixed = [] if hidden() else fixed
    randomized = [(rng.choice([8192, 16384]), rng.choice([256, 512]), _fit_plan(rng, 60)) for _ in range(6)]
    for i, (heap, round_to, plan) in enumerate(fixed + randomized):
        where = f"{'random case' if i >= len(fixed) else 'case'} {i + 1} (heap {heap} B, round_to {round_to}):"
        ref, offsets, done = _ReferenceBestFit(heap, round_to), [], []
        mine = _call(alloc_cls, f"{where} creating your allocator:", heap, round_to)
        for op, n in plan:
            if op == "free":
                if not offsets:
                    continue
                off = offsets.pop(n % len(offsets))
                ref.free_(off)
                _call(mine.free, f"{where} after {done},", off)
                done.append(f"free({off})")
                continue
            free_before = sorted(ref.free)
            want = ref.alloc(n)
            got = _call(mine.alloc, f"{where} after {done or 'nothing'},", n)
            if got != want:
                size = -(-n // round_to) * round_to
                hint = ("" if want is None else
                        f" The free blocks were (offset, size) {free_before}; the smallest that holds "
                        f"{size} B (the request rounded up to {round_to}) starts at {want}.")
                if want is None:
                    hint = " No free block was large enough: return None."
                _fail(f"{where} after {done or 'nothing'}, alloc({n}) should give offset {want}; "
                      f"yours gave {got}.{hint} (Did you merge a freed block with BOTH neighbours, "
                      "and split the rest off a larger block?)")
            if want is not None:
                offsets.append(want)
            done.append(f"alloc({n})→{want}")
    _passed("check_best_fit", len(fixed) + len(randomized))


check_best_fit = checker("the best-fit allocator", blocks=_best_fit_blocks)(check_best_fit)


# ----------------------------------------------------------------------------------------------
# Exercise 3: C = A × B on two sockets (the article's exercise 4)
# ----------------------------------------------------------------------------------------------
A_LAYOUTS, B_LAYOUTS = ("split", "interleave", 0, 1), ("replicate", "interleave", 0, 1)


def _cost(m, k, n, layout, t, itemsize=4, tile_rows=1000):
    """The same model as ``numa.matmul_cost``, written out again here (the checker's own)."""
    def parts(spec, worker):
        if spec in ("split", "replicate"):
            return {worker: 1.0}
        if spec == "interleave":
            return {0: 0.5, 1: 0.5}
        return {spec: 1.0}

    a, b, c = m * k * itemsize, k * n * itemsize, m * n * itemsize
    reads = math.ceil(m / 2 / tile_rows)
    worst = 0.0
    for w in (0, 1):
        ns = 0.0
        for name, nbytes in (("A", a / 2), ("B", b * reads), ("C", c / 2)):
            for node, frac in parts(layout[name], w).items():
                local = node == w
                ns += (max(1, round(nbytes * frac / 4096)) * (t.local_latency_ns if local else t.remote_latency_ns)
                       + nbytes * frac / (t.local_gbps if local else t.remote_gbps))
        worst = max(worst, ns)
    copy = b / t.remote_gbps if layout["B"] == "replicate" else 0.0
    memory = a + c + b * (2 if layout["B"] == "replicate" else 1)
    return worst + copy, memory


def check_numa_layout(fn) -> None:
    """``fn(m, k, n, topology) -> {"A": ..., "B": ..., "C": ...}``: where to put the operands of
    C[m,n] = A[m,k] × B[k,n] (float32) on two sockets that each compute half the rows of C
    (A and C: ``"split"`` by rows, ``"interleave"``, or a node 0/1; B: ``"replicate"``,
    ``"interleave"`` or a node). The layout must fit in the machine's memory
    (``topology.nodes × topology.memory_bytes``) and be within 2 % of the fastest layout that
    fits, in the model's time (numa.matmul_cost's formula; that function is switched off
    while your code runs)."""
    from ..memory import numa

    cases = [(10_000, 5_000, 2_000, numa.Topology()),
             (10_000, 5_000, 2_000, numa.Topology(memory_bytes=170 * 10 ** 6)),  # B does not fit twice
             (2_000, 20_000, 500, numa.Topology())]  # B read once: replicating does not pay
    rng = random.Random(918 if hidden() else 3)
    cases = [] if hidden() else cases
    randomized = []
    for _ in range(8):
        m, k, n = rng.choice([1000, 4000, 16000]), rng.choice([1000, 8000]), rng.choice([500, 4000])
        need = (m * k + m * n + k * n) * 4
        mem = rng.choice([need, (need + k * n * 4) // 2 - 1, 10 * need])  # sometimes B cannot be replicated
        randomized.append((m, k, n, numa.Topology(memory_bytes=mem, remote_latency_ns=rng.choice([120.0, 200.0]),
                                                  remote_gbps=rng.choice([10.0, 25.0]))))
    for i, (m, k, n, t) in enumerate(cases + randomized):
        where = (f"{'random case' if i >= len(cases) else 'case'} {i + 1}: A [{m}, {k}], B [{k}, {n}], "
                 f"{t.memory_bytes / 1e6:,.0f} MB per node, remote {t.remote_latency_ns:.0f} ns / "
                 f"{t.remote_gbps:g} GB/s:")
        got = _call(fn, where, m, k, n, t)
        if not isinstance(got, dict) or set(got) != {"A", "B", "C"}:
            _fail(f"{where} return a dict with keys 'A', 'B', 'C'; got {got!r}")
        if got["A"] not in A_LAYOUTS or got["C"] not in A_LAYOUTS or got["B"] not in B_LAYOUTS:
            _fail(f"{where} {got} is not a layout: A and C are one of {A_LAYOUTS}, B one of {B_LAYOUTS}")
        options = [dict(zip("ABC", combo)) for combo in itertools.product(A_LAYOUTS, B_LAYOUTS, A_LAYOUTS)]
        fitting = [(_cost(m, k, n, o, t)[0], o) for o in options
                   if _cost(m, k, n, o, t)[1] <= t.nodes * t.memory_bytes]
        best_ns, best = min(fitting, key=lambda p: p[0])
        ns, memory = _cost(m, k, n, got, t)
        if memory > t.nodes * t.memory_bytes:
            _fail(f"{where} {got} needs {memory / 1e6:,.0f} MB but the machine has "
                  f"{t.nodes * t.memory_bytes / 1e6:,.0f} MB: replicating B costs a second copy of it.")
        if ns > best_ns * 1.02:
            reads = math.ceil(m / 2 / 1000)
            _fail(f"{where} {got} takes {ns / 1e6:.2f} ms in the model; {best} takes {best_ns / 1e6:.2f} ms. "
                  f"Each socket reads its rows of A once and B {reads} time(s); count the remote bytes "
                  "of each choice (remote reads are slower), and the one-time copy replication costs.")
    _passed("check_numa_layout", len(cases) + len(randomized))


check_numa_layout = checker("the layout's cost reasoning", blocks=_numa_blocks)(check_numa_layout)
