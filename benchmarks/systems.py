"""Systems: thread caches, a threaded data loader, memory-mapped data, buddy and best-fit allocators.

Every row compares two configurations measured in this run, on this machine:

* **thread caches** — two threads allocate and free pool blocks (with a little numpy work in
  between, which lets go of the GIL): lock acquisitions per 1,000 allocations with
  ``Pool(thread_cache=0)`` (a lock on every call) against ``Pool(thread_cache=16)``.
* **threaded loader** — one epoch of a small MLP over a shuffled 20,000 × 256 float32 data set,
  batch 256: ``DataLoader(num_workers=2)`` against ``num_workers=0``. The workers gather the
  next batches while the main thread trains.
* **memory-mapped data** — an 8 MiB array read through ``mt.load(..., mmap=True)`` after its
  pages were dropped from the page cache: page faults (minor + major) on the first pass
  against the second.
* **allocators on one workload** — the allocation requests of 40 recorded training steps with
  random sequence lengths (16–399 rows), replayed into a size-class pool, a buddy allocator
  and a best-fit allocator (:mod:`microtorch.memory.workload`): peak backing memory against
  the pool's, with exact lengths and with lengths bucketed to powers of two.
"""
from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import numpy as np

from .harness import Row, measure_many

GROUP = "systems"


def _lock_rows(quick: bool) -> list[Row]:
    from microtorch.memory.pool import Pool

    per_thousand = {}
    n = 500 if quick else 5000
    for cache in (0, 16):
        pool = Pool(name=f"bench threads {cache}", thread_cache=cache)

        def worker():
            a, b = np.ones(64), np.ones(64)
            for i in range(n):
                block = pool.alloc(256 + 64 * (i % 4))
                np.dot(a, b)
                pool.free(block)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        s = pool.stats()
        per_thousand[cache] = s["lock_acquisitions"] / s["allocations"] * 1000
    r = Row(GROUP, "thread caches: lock acquisitions per 1,000 allocations", peer="no cache",
            value=f"{per_thousand[16]:.1f}", peer_value=f"{per_thousand[0]:.0f}",
            value_ratio=per_thousand[16] / per_thousand[0], target="fewer locks", met=per_thousand[16] < per_thousand[0])
    r.notes.append("2 threads, alloc + numpy dot + free; thread_cache=16 blocks per class and thread "
                   "against thread_cache=0 (the central lock on every alloc and free)")
    return [r]


def _loader_rows(quick: bool) -> list[Row]:
    import microtorch as mt

    mt.manual_seed(0)
    n = 4000 if quick else 20000
    ds = mt.data.TensorDataset(mt.randn(n, 256), mt.randint(0, 10, (n,)))
    model = mt.nn.MLP(256, [128], 10)
    opt = mt.optim.SGD(model.parameters(), lr=0.01)
    loaders = {k: mt.data.DataLoader(ds, batch_size=256, shuffle=True, num_workers=k) for k in (0, 2)}

    def epoch(loader):
        def run():
            for xb, yb in loader:
                opt.zero_grad()
                mt.nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
        return run

    stats = measure_many({f"workers={k}": epoch(v) for k, v in loaders.items()}, quick, repeats=5 if quick else 9)
    r = Row(GROUP, "threaded loader: one epoch", stats=stats["workers=2"], peer="num_workers=0",
            peer_stats=stats["workers=0"], target="faster")
    if r.ratio is not None:
        r.met = r.ratio < 1.0
    s = loaders[2].workers.pool.stats()
    r.notes.append(f"{n:,} × 256 float32, batch 256, shuffled, MLP 256→128→10 + SGD; loader pool: "
                   f"{s['lock_acquisitions'] / max(1, s['allocations']) * 1000:.0f} lock acquisitions per "
                   f"1,000 allocations, {s['cross_thread_frees']:,} cross-thread frees")
    return [r]


def _mmap_rows(quick: bool) -> list[Row]:
    import microtorch as mt
    from microtorch.memory import mapped

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pages.npz"
        mt.save({"x": np.ones((2048, 1024), np.float32)}, path)
        mapped.evict_from_page_cache(path)
        x = mt.load(path, mmap=True)["x"]
        f0 = mapped.page_faults()
        x.numpy().sum()
        f1 = mapped.page_faults()
        x.numpy().sum()
        f2 = mapped.page_faults()
        first, second = f1[0] - f0[0] + f1[1] - f0[1], f2[0] - f1[0] + f2[1] - f1[1]
        del x
    r = Row(GROUP, "mmap: page faults, second pass vs first", peer="first pass", value=f"{second:,}",
            peer_value=f"{first:,}", value_ratio=second / first if first else None)
    r.notes.append(f"8 MiB (2,048 pages) mapped after posix_fadvise(DONTNEED); first pass "
                   f"{f1[0] - f0[0]:,} minor + {f1[1] - f0[1]:,} major faults (the kernel maps pages ahead)")
    return [r]


def random_length_steps(bucket: str, steps: int = 40, seed: int = 0):
    """A trace of ``steps`` training steps of a small model on inputs of random length L
    (16 ≤ L < 400), with L used as is (``"exact"``) or rounded up to a power of two (``"pow2"``)."""
    import microtorch as mt

    mt.manual_seed(seed)
    rng = np.random.default_rng(seed)
    embed, head = mt.nn.Linear(32, 64), mt.nn.Linear(64, 10)
    with mt.trace() as tr:
        for _ in range(steps):
            length = int(rng.integers(16, 400))
            if bucket == "pow2":
                length = 1 << (length - 1).bit_length()
            x, y = mt.randn(length, 32), mt.randint(0, 10, (length,))
            mt.nn.functional.cross_entropy(head(embed(x).relu()), y).backward()
    return tr


def _workload_rows(quick: bool) -> list[Row]:
    from microtorch.memory import BestFit, Buddy, Pool
    from microtorch.memory.workload import replay_into, requests

    rows = []
    for bucket in ("exact", "pow2"):
        steps = requests(random_length_steps(bucket, steps=10 if quick else 40))
        pool = replay_into(Pool(name=f"bench pool {bucket}"), steps)
        peak = max(pool.requested)
        for name, allocator in (("buddy", Buddy(heap_bytes=256 << 10)), ("best fit", BestFit(heap_bytes=256 << 10))):
            res = replay_into(allocator, steps)
            r = Row(GROUP, f"dynamic shapes ({bucket} lengths): {name} peak backing", peer="size-class pool",
                    value=f"{res.peak_backing / 2**20:.2f} MiB", peer_value=f"{pool.peak_backing / 2**20:.2f} MiB",
                    value_ratio=res.peak_backing / pool.peak_backing)
            r.notes.append(f"peak requested {peak / 2**20:.2f} MiB; overhead (peak backing / peak requested): "
                           f"{name} {res.overhead:.2f}×, pool {pool.overhead:.2f}×; internal fragmentation "
                           f"at the peak: {name} {res.internal_fragmentation:.1%}, pool "
                           f"{pool.internal_fragmentation:.1%}")
            rows.append(r)
    return rows


def run(quick: bool) -> list[Row]:
    return _lock_rows(quick) + _loader_rows(quick) + _mmap_rows(quick) + _workload_rows(quick)
