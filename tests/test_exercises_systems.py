"""Notebook 12's checkers: right answers written here pass, a few wrong ones are caught.

The catalogue of common wrong answers, each with the case and hint it gets, is in
tests/test_mutants_systems_run6.py."""
import threading

import pytest

import microtorch as mt
from microtorch.exercises import systems as ex


# -- exercise 1: a thread cache --------------------------------------------------------------
class GoodCache:
    def __init__(self, central, capacity, batch):
        self.central, self.capacity, self.batch, self.blocks = central, capacity, batch, []

    def alloc(self):
        if not self.blocks:
            with self.central.lock:
                self.blocks = self.central.take(self.batch)
        return self.blocks.pop()

    def free(self, block):
        self.blocks.append(block)
        if len(self.blocks) > self.capacity:
            with self.central.lock:
                self.central.give(self.blocks[-self.batch:])
            del self.blocks[-self.batch:]

    def flush(self):
        with self.central.lock:
            self.central.give(self.blocks)
        self.blocks = []

    def __len__(self):
        return len(self.blocks)


class DoubleGive(GoodCache):
    def free(self, block):
        self.blocks.append(block)
        if len(self.blocks) > self.capacity:
            with self.central.lock:
                self.central.give(self.blocks[-self.batch:])
            del self.blocks[:self.batch]  # off by a slice: keeps the blocks it gave back


class UsesEngine(GoodCache):
    def __init__(self, central, capacity, batch):
        from microtorch.memory.thread_cache import ThreadCaches
        super().__init__(central, capacity, batch)
        self.engine = ThreadCaches(mt.memory.Pool(name="x"), capacity)


def test_thread_cache_reference_passes(capsys):
    ex.check_thread_cache(GoodCache)
    assert "✓ check_thread_cache" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, words", [
    (DoubleGive, "while thread .* still held it|missing"),
    (UsesEngine, "write the thread cache yourself"),
])
def test_thread_cache_wrong_answers_are_caught(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_thread_cache(wrong)
    from microtorch.memory import thread_cache
    assert thread_cache.ThreadCaches.__name__ == "ThreadCaches"  # restored after the checker


# -- exercise 2: best fit --------------------------------------------------------------------
class GoodFit:
    def __init__(self, heap_bytes, round_to):
        self.round_to, self.free_blocks, self.live = round_to, [(0, heap_bytes)], {}

    def alloc(self, nbytes):
        size = -(-max(nbytes, 1) // self.round_to) * self.round_to
        fits = sorted((s, o) for o, s in self.free_blocks if s >= size)
        if not fits:
            return None
        s, o = fits[0]
        self.free_blocks.remove((o, s))
        if s > size:
            self.free_blocks.append((o + size, s - size))
        self.live[o] = size
        return o

    def free(self, offset):
        start = offset
        end = offset + self.live.pop(offset)
        for o, s in list(self.free_blocks):
            if o + s == start or o == end:
                self.free_blocks.remove((o, s))
                start, end = min(start, o), max(end, o + s)
        self.free_blocks.append((start, end - start))


class WrapsEngine:
    def __init__(self, heap_bytes, round_to):
        self.a = mt.memory.BestFit(heap_bytes, round_to)


def test_best_fit_reference_passes(capsys):
    ex.check_best_fit(GoodFit)
    assert "✓ check_best_fit" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, words", [
    (WrapsEngine, "write the best-fit allocator yourself"),
])
def test_best_fit_wrong_answers_are_caught(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_best_fit(wrong)
    assert mt.memory.BestFit.__name__ == "BestFit"


# -- exercise 3: NUMA layout -----------------------------------------------------------------
def good_layout(m, k, n, t):
    reads = -(-m // 2 // 1000)
    b = k * n * 4
    fits_twice = (m * k + m * n) * 4 + 2 * b <= t.nodes * t.memory_bytes
    # replicating costs one copy over the link; interleaving B (the best single copy: both
    # sockets wait equally) makes each socket read half of B remotely on each of its passes
    remote_extra = reads * b / 2 * (1 / t.remote_gbps - 1 / t.local_gbps) + reads * (b / 2 / 4096) * (
        t.remote_latency_ns - t.local_latency_ns)
    if fits_twice and remote_extra > b / t.remote_gbps:
        return {"A": "split", "B": "replicate", "C": "split"}
    return {"A": "split", "B": "interleave", "C": "split"}


@pytest.mark.parametrize("wrong, words", [
    (lambda m, k, n, t: {"A": "split", "B": "replicate", "C": "split"}, "needs .* MB but the machine has"),
    (lambda m, k, n, t: {"A": "split", "B": 0, "C": "split"}, "takes .* ms in the model"),
    (lambda m, k, n, t: {"A": 0, "B": 0, "C": 0}, "takes .* ms in the model"),
    (lambda m, k, n, t: {"A": "interleave", "B": "interleave", "C": "interleave"}, "takes .* ms"),
    (lambda m, k, n, t: {"A": "replicate", "B": "split", "C": "split"}, "is not a layout"),
    (lambda m, k, n, t: ("split", "replicate", "split"), "return a dict"),
    (lambda m, k, n, t: min(({"A": "split", "B": b, "C": "split"} for b in ("replicate", 0)),
                            key=lambda lay: mt.memory.numa.matmul_cost(m, k, n, lay, t)["ns"]),
     "cost reasoning yourself"),
])
def test_numa_layout_wrong_answers_are_caught(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_numa_layout(wrong)


def test_numa_layout_reference_passes(capsys):
    ex.check_numa_layout(good_layout)
    assert "✓ check_numa_layout" in capsys.readouterr().out
    assert mt.memory.numa.matmul_cost.__name__ == "matmul_cost"


def test_the_checkers_cost_model_agrees_with_the_engines():
    from microtorch.memory import numa

    t = numa.Topology()
    for layout in ({"A": "split", "B": "replicate", "C": "split"}, {"A": 0, "B": "interleave", "C": 1}):
        ns, memory = ex._cost(10_000, 5_000, 2_000, layout, t)
        engine = numa.matmul_cost(10_000, 5_000, 2_000, layout, t)
        assert ns == pytest.approx(engine["ns"]) and memory == engine["memory_bytes"]


class Unfinished:
    def __init__(self, *args):
        raise NotImplementedError("write it")


@pytest.mark.parametrize("check", [ex.check_thread_cache, ex.check_best_fit])
def test_an_unfinished_class_shows_its_stub(check):
    with pytest.raises(NotImplementedError, match="write it"):
        check(Unfinished)


def test_an_unfinished_function_shows_its_stub_and_hidden_cases_run(capsys):
    def unfinished(m, k, n, t):
        raise NotImplementedError("write it")
    with pytest.raises(NotImplementedError, match="write it"):
        ex.check_numa_layout(unfinished)
    ex.check_best_fit(GoodFit, hidden=True)
    ex.check_thread_cache(GoodCache, hidden=True)
    ex.check_numa_layout(good_layout, hidden=True)
    assert capsys.readouterr().out.count("(the hidden ones)") == 3
