"""The buddy, thread-cache, mapped-pages and NUMA panels read through the trace's one replay:
stepping forward applies each event once, stepping back gives what a fresh replay gives."""
import threading

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import numa
from microtorch.memory.buddy import Buddy
from microtorch.memory.pool import Pool
from microtorch.trace.recorder import Trace
from microtorch.viz import buddy as vb, mapped as vm, numa as vn, threads as vt


def _buddy_trace():
    b = Buddy(heap_bytes=1024, min_block=64, name="stepped buddy")
    with mt.trace() as tr:
        x, y = b.alloc(100, "activation"), b.alloc(300, "gradient")
        b.free(x)
        z = b.alloc(60, "tensor")
        b.free(y), b.free(z)
    return tr


def _threads_trace():
    pool = Pool(name="stepped threads", thread_cache=2)
    with mt.trace() as tr:
        handed = []
        t = threading.Thread(target=lambda: handed.extend(pool.alloc(100) for _ in range(3)))
        t.start(), t.join()
        for b in handed:  # freed by the main thread: cross-thread frees
            pool.free(b)
        pool.free(pool.alloc(100))
    return tr, pool


def _mapped_trace(tmp_path):
    path = tmp_path / "pages.npz"
    mt.save({"x": np.ones((256, 1024), np.float32)}, path)
    x = mt.load(path, mmap=True)["x"]
    owner = x._storage.block.owner
    with mt.trace() as tr:
        owner.record_pages("mapped")
        x[:4].numpy().sum()
        owner.record_pages("some rows")
        x.numpy().sum()
        owner.record_pages("all")
    return tr


def _numa_trace():
    mt.manual_seed(0)
    w1, w2, x = mt.randn(64, 64), mt.randn(64, 64), mt.randn(16, 64)
    with mt.trace() as tr:
        ((x @ w1).relu() @ w2).sum()
    return tr


def _on_two_sockets(i, e):
    return i % 2


def _pages_key(f):
    return vm.facts_text(f), [(s.step, s.label, s.mask.tolist()) for s in f.snapshots]


PANELS = {
    "buddy": (lambda tmp: _buddy_trace(), vb.buddy_facts, vb.BuddyReplayer, lambda f: f),
    "threads": (lambda tmp: _threads_trace()[0], vt.thread_facts, vt.CrossFreeReplayer, lambda f: f),
    "mapped": (_mapped_trace, vm.pages_facts, vm.PagesReplayer, _pages_key),
    "numa": (lambda tmp: _numa_trace(), lambda tr, t: vn.numa_facts(tr, t, affinity=_on_two_sockets),
             vn.NumaReplayer, lambda f: f),
}


@pytest.mark.parametrize("panel", sorted(PANELS))
def test_stepping_forward_applies_only_new_events_and_back_matches_a_fresh_replay(panel, tmp_path, monkeypatch):
    make, facts, reducer, key = PANELS[panel]
    tr = make(tmp_path)
    applied = []
    apply = reducer.apply

    def counting(self, e):
        applied.append(e["step"])
        apply(self, e)

    monkeypatch.setattr(reducer, "apply", counting)
    n = len(tr.events)
    forward = [key(facts(tr, t)) for t in range(n)]
    assert applied == list(range(n))  # each event applied once, by the one cursor
    assert key(facts(tr, n - 1)) == forward[-1] and applied == list(range(n))  # same t: nothing new
    back = [key(facts(tr, t)) for t in reversed(range(n))][::-1]
    fresh = [key(facts(Trace(list(tr.events)), t)) for t in range(n)]
    assert back == fresh and forward == fresh
    assert len({repr(k) for k in fresh}) > 2  # the facts do change along the trace


def test_the_numa_panel_charges_what_the_model_charges_for_each_prefix():
    tr = _numa_trace()
    for t in range(len(tr.events)):
        f = vn.numa_facts(tr, t, affinity=_on_two_sockets, policy="interleave")
        report = numa.simulate(Trace(list(tr.events[: t + 1])), _on_two_sockets, "interleave")
        assert [o[:4] for o in f.ops] == report.op_ns
        assert {s: w for s, _, w in f.storages} == report.placement
        assert (f.local_bytes, f.remote_bytes, f.policy) == (report.local_bytes, report.remote_bytes, report.policy)


def test_the_thread_panel_counts_the_pools_cross_thread_frees():
    tr, pool = _threads_trace()
    counts = [vt.thread_facts(tr, t).cross_frees for t in range(len(tr.events))]
    assert counts == sorted(counts) and counts[-1] == pool.stats()["cross_thread_frees"] == 3
