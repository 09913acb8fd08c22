"""Where the training step's time goes: a per-phase breakdown, microtorch next to raw numpy.

The ``training`` group's headline ratio (microtorch step / raw-numpy step) is one number
per CPU. This module splits the same step (``benchmarks/training.py``: batch 256, MLP
784 → 256 → 10, cross-entropy, SGD, one BLAS thread) into its phases, for microtorch and
for the raw-numpy floor **in the same run, taking turns**:

* ``zero_grad`` (numpy has none), ``forward`` (model and loss), ``backward``, ``optimizer``
  (the SGD update), and the ``rest`` of the step (picking the batch, ``loss.item()``):
  the clock is read between the phases inside each step. The clock is the thread's CPU
  time (``time.thread_time``; with one BLAS thread the products run on it too), so time
  slices lost to other processes on a shared machine do not count — cache interference
  still does. Each read costs about half a µs, the same number of reads in both engines;
* ``allocation``: the time microtorch's allocators spend handing out blocks in one step
  (their own ``alloc_ns`` counters, already part of forward and backward);
* the **fixed cost** per step: the same step at batch 1 with an MLP 8 → 8 → 2, where the
  arithmetic vanishes and what remains is the Python around it — the engine's (modules,
  autograd, storages, node records, optimizer) for microtorch, numpy's call overhead alone
  for raw numpy. Their difference is microtorch's overhead per step, in µs.

**The model.** microtorch's step ≈ the numpy floor + a fixed overhead, so the ratio is
``1 + overhead / floor``. The overhead is interpreter work (µs scale with the CPU's
single-thread speed and its caches, not with BLAS); the floor is mostly two 256×784×256
matrix products (it shrinks with a faster BLAS kernel: AVX-512, more cache). A CPU with
a slower interpreter or a faster BLAS therefore reads a higher ratio for the same engine.
The notes give the predicted ratio next to the measured one, so a result from another
machine says which of the two moved. Compare ratios only between runs on the same CPU.
"""
from __future__ import annotations

import gc
import time

from .harness import Row, summarize
from .training import BATCH, SIZES, STEP, _Blas, _cpu, _data, _matmuls, microtorch_step, numpy_step

GROUP = "phases"

PHASES = ("zero_grad", "forward", "backward", "optimizer", "rest")
TINY_BATCH, TINY_SIZES = 1, (8, 8, 2)
TINY = f"{TINY_BATCH}x{'-'.join(map(str, TINY_SIZES))}"
CLOCK = time.thread_time  # CPU time of this thread: robust to sharing the machine


class _Phased:
    """One engine's step with the clock read between its phases; collects per-step samples."""

    def __init__(self, name: str, build, pool=None):
        self.name, self.marks, self.pool = name, [], pool
        self.step = build(self.marks, CLOCK)
        self.samples = {p: [] for p in PHASES}  # per repeat: mean µs per step
        self.total: list[float] = []
        self.alloc: list[float] = []  # µs per step in microtorch's allocators
        self.allocations: list[float] = []

    def repeat(self, n: int, before=None) -> None:
        """``n`` steps; ``before`` (if given) runs, untimed, ahead of each one."""
        clock, marks, step = CLOCK, self.marks, self.step
        step()  # settle: the first step after another engine's runs on cold caches
        marks.clear()
        ns0, count0 = (self.pool.alloc_ns, self.pool.allocations) if self.pool is not None else (0, 0)
        spans = []
        for _ in range(n):
            if before is not None:
                before()
            t0 = clock()
            step()
            spans.append((t0, clock()))
        if self.pool is not None:
            self.alloc.append((self.pool.alloc_ns - ns0) / 1e3 / n)
            self.allocations.append((self.pool.allocations - count0) / n)
        sums = dict.fromkeys(PHASES, 0.0)
        for i, (t0, t1) in enumerate(spans):
            m = marks[5 * i: 5 * i + 5]
            for phase, a, b in zip(PHASES, m, m[1:]):
                sums[phase] += b - a
            sums["rest"] += (t1 - t0) - (m[4] - m[0])
        for phase in PHASES:
            self.samples[phase].append(sums[phase] / n * 1e6)
        self.total.append(sum(t1 - t0 for t0, t1 in spans) / n * 1e6)


def measure(quick: bool) -> dict[str, _Phased]:
    """Time every phase of the full-size and the tiny step, microtorch and numpy taking turns."""
    import microtorch as mt

    full, tiny = _data(), _data(batch=TINY_BATCH, sizes=TINY_SIZES)
    pool = mt.memory.pool()
    engines = {
        "microtorch": _Phased("microtorch", lambda m, c: microtorch_step("sgd", full, m, c), pool),
        "numpy": _Phased("numpy", lambda m, c: numpy_step(0.0, full, m, c)),
        "microtorch tiny": _Phased("microtorch tiny", lambda m, c: microtorch_step("sgd", tiny, m, c), pool),
        "numpy tiny": _Phased("numpy tiny", lambda m, c: numpy_step(0.0, tiny, m, c)),
    }
    steps = {"microtorch": 5, "numpy": 5, "microtorch tiny": 100, "numpy tiny": 100}
    return _take_turns(engines, 5 if quick else 21, warm=lambda e: steps[e.name],
                       timed=lambda e: steps[e.name] * (1 if quick else 4))


def _take_turns(engines: dict, rounds: int, warm, timed, before=None) -> dict[str, _Phased]:
    """Warm each engine up (``warm(e)`` steps, then its samples cleared), then ``rounds`` rounds
    in which the engines take turns at ``timed(e)`` steps, the garbage collector off inside a
    turn and the objects alive before the rounds frozen out of its view."""
    for e in engines.values():
        e.repeat(warm(e), before)
        for series in (e.total, e.alloc, e.allocations, *e.samples.values()):
            series.clear()
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    try:
        for _ in range(rounds):
            for e in engines.values():
                gc.collect()
                gc.disable()
                try:
                    e.repeat(timed(e), before)
                finally:
                    if was_enabled:
                        gc.enable()
    finally:
        gc.unfreeze()
    return engines


def measure_cold(quick: bool) -> dict[str, _Phased]:
    """The tiny step again, each step right after the full step's five matrix products
    (untimed, in numpy, the same for both engines): the state a real step's Python runs in,
    its code and objects pushed out of the core's caches by megabytes of BLAS traffic."""
    import microtorch as mt

    tiny = _data(batch=TINY_BATCH, sizes=TINY_SIZES)
    products = _matmuls(None)["numpy"]
    engines = {
        "microtorch tiny cold": _Phased("microtorch tiny cold",
                                        lambda m, c: microtorch_step("sgd", tiny, m, c), mt.memory.pool()),
        "numpy tiny cold": _Phased("numpy tiny cold", lambda m, c: numpy_step(0.0, tiny, m, c)),
    }
    return _take_turns(engines, 5 if quick else 21, warm=lambda e: 3,
                       timed=lambda e: 10 if quick else 20, before=products)


def rows(quick: bool) -> list[Row]:
    """The breakdown as table rows (microtorch vs raw numpy per phase) with the model in notes."""
    engines = measure(quick)
    st = {name: {p: summarize(e.samples[p]) for p in PHASES} for name, e in engines.items()}
    total = {name: summarize(e.total) for name, e in engines.items()}
    mt, np_ = st["microtorch"], st["numpy"]
    floor, measured = total["numpy"].median_us, total["microtorch"].median_us
    fixed = total["microtorch tiny"].median_us - total["numpy tiny"].median_us
    bench = f"{STEP} phase"
    whole = Row(GROUP, f"{bench}s: whole step", stats=total["microtorch"], peer="numpy (raw)",
                peer_stats=total["numpy"], notes=[
                    f"{_cpu()}: the training group's step ({BATCH}x{'-'.join(map(str, SIZES))}, sgd, "
                    "1 BLAS thread) with the clock read between its phases, microtorch and raw numpy "
                    "taking turns; CPU time of the thread (time.thread_time: time slices lost to other "
                    "processes do not count), so these µs can be below the wall-clock rows above; "
                    f"rest = picking the batch and loss.item(); load average {_load()}"])
    out = [whole]
    for phase in PHASES:
        peer = np_[phase] if phase != "zero_grad" else None
        out.append(Row(GROUP, f"{bench}: {phase}", stats=mt[phase], peer="numpy (raw)" if peer else "-",
                       peer_stats=peer))
    deltas = {p: mt[p].median_us - (np_[p].median_us if p != "zero_grad" else 0) for p in PHASES}
    whole.notes.append("microtorch minus numpy per phase (medians), µs: "
                       + ", ".join(f"{p} {d:+.0f}" for p, d in deltas.items())
                       + f"; sum {sum(deltas.values()):+.0f} (whole-step medians: {measured - floor:+.0f})")
    alloc = summarize(engines["microtorch"].alloc)
    allocations = summarize(engines["microtorch"].allocations).median_us
    out.append(Row(GROUP, f"{bench}: allocation", stats=alloc, peer="-",
                   notes=[f"microtorch's pool handing out {allocations:.0f} blocks per step (its "
                          "alloc_ns counter; a part of forward and backward above)"]))
    out.append(Row(GROUP, f"{STEP} fixed cost (step at {TINY})", stats=total["microtorch tiny"],
                   peer="numpy (raw)", peer_stats=total["numpy tiny"], notes=[
                       f"at batch {TINY_BATCH}, MLP {' -> '.join(map(str, TINY_SIZES))} (no arithmetic to "
                       "speak of) the step is its Python: microtorch's overhead is "
                       f"~{fixed:.0f} µs per step (microtorch minus raw numpy)",
                       f"model: ratio ≈ 1 + overhead / numpy floor = 1 + {fixed:.0f} / {floor:.0f} = "
                       f"{1 + fixed / floor:.3f}x predicted, {measured / floor:.3f}x measured; a CPU whose "
                       "interpreter is s times slower and whose matrix products are f times faster "
                       f"reads about 1 + s·f·{fixed / floor:.3f}"]))
    cold = {name: summarize(e.total) for name, e in measure_cold(quick).items()}
    fixed_cold = cold["microtorch tiny cold"].median_us - cold["numpy tiny cold"].median_us
    out.append(Row(GROUP, f"{STEP} fixed cost, cold caches (step at {TINY} after the 5 products)",
                   stats=cold["microtorch tiny cold"], peer="numpy (raw)", peer_stats=cold["numpy tiny cold"],
                   notes=[f"the same tiny step, each one right after the full step's five matrix "
                          "products (untimed, numpy, both engines alike): the Python now runs with its "
                          "code and objects evicted from the core's caches, as between the products of "
                          f"a real step; microtorch's overhead is ~{fixed_cold:.0f} µs per step "
                          f"(warm: ~{fixed:.0f})",
                          f"model with the cold overhead: 1 + {fixed_cold:.0f} / {floor:.0f} = "
                          f"{1 + fixed_cold / floor:.3f}x predicted, {measured / floor:.3f}x measured: the "
                          "engine's cost is its bookkeeping's memory footprint (objects and code "
                          "touched per op, refetched after each product) more than its instruction count"]))
    return out


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def run(quick: bool) -> list[Row]:
    """The ``phases`` group (one BLAS thread, as the training group)."""
    with _Blas().threads(1):
        return rows(quick)
