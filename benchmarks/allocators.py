"""The memory substrate: what microtorch's allocators and trace recorder cost, and what they save.

**1. Small graphs** (``chain 4x4`` and ``mlp 16x16`` from :mod:`benchmarks.small_graphs`,
the same builders): forward + backward in three microtorch configurations taking turns
in one :func:`~benchmarks.harness.measure_many` call, with PyTorch beside them:

* ``pool``: the default (storages from the size-class pool, node records in the node arena);
* ``heap``: the same code inside ``mt.memory.use_heap()`` — no allocators, plain numpy
  arrays: the baseline the allocators must beat or at least match;
* ``pool + trace``: allocators on and a recorder active (``with mt.trace():`` around the
  timed loop; a fresh trace per repeat, so a recording never grows past one repeat).

Reported: pool/heap, recording-on/recording-off, pool/PyTorch (target ≤ 0.5×), and the
cost of the recorder *when off*. That last one cannot be measured on the live engine, whose
event sites always read ``trace.active``. So the group copies the package twice into a
temporary directory — once unchanged, once with every ``_trace.active`` read replaced by
``None`` — imports both under other names and times them side by side: a true A/B of
"checks in" against "checks removed" (target: ≤ 1.05×, i.e. unchanged within 5 %). Beside
it, in the notes, the mechanism: how many reads one iteration makes (counted) times what
one read costs in a tight loop, against the noise (IQR) of the recording-off timing.

**2. A training step with large activations**: batch 2048, a 2-layer MLP 128 → 1024 → 128
(ReLU, MSE loss, plain SGD on the parameters' bytes), so the hidden activations and their
gradients are 2048 × 1024 float32 = 8 MiB each. Configurations: ``pool`` (the default),
``heap`` (``use_heap()``: ``np.empty`` per result), ``step arena`` (one
:class:`~microtorch.memory.Arena` reused by ``with mt.memory.step_arena(arena):`` every
step), and as references plain numpy written by hand and PyTorch. Each configuration runs
in a FRESH subprocess (rounds take turns between them), so its peak RSS (``VmHWM``, reset
to the current RSS before the steps through ``/proc/self/clear_refs`` where the kernel
allows it, else ``ru_maxrss``) and its page faults (``ru_minflt``) are its own.

    python -m benchmarks.allocators --worker pool --steps 10   # one configuration, JSON out
    python -m benchmarks.allocators --profile pool             # cProfile of the large step, top 10
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from .harness import Row, measure_many, print_profile, summarize
from .peers import torch_or_skip, versions
from .small_graphs import BENCHMARKS, _agree, _args, _data, _tensor_engine

GROUP = "allocators"
ROOT = Path(__file__).resolve().parent.parent
TORCH_TARGET = "<= 0.5x torch"
RECORDER_TARGET = "<= 1.05x (within 5%)"

# the large step: batch x hidden float32 = 2048 x 1024 x 4 B = 8 MiB per activation
BATCH, SIZES, LR = 2048, (128, 1024, 128), 1e-3
TRAIN = f"train {BATCH}x{SIZES[1]}"
MIB = 1 << 20


# ==========================================================================================
# 1. small graphs: pool / heap / pool + trace / torch, and the recorder when off
# ==========================================================================================
def _small_graphs(quick: bool) -> list[Row]:
    import microtorch as mt

    torch, torch_skip = torch_or_skip()
    data = _data()
    scopes = {"heap": mt.memory.use_heap, "trace": mt.trace}  # entered per repeat, untimed
    copies, copy_error, stripped_sites = _engine_copies()
    rows: list[Row] = []
    for name, (kind, desc) in BENCHMARKS.items():
        args = _args(kind, data)
        libs = {"pool": mt, "heap": mt, "trace": mt}
        if torch is not None:
            libs["torch"] = torch
        built, errors, results = {}, {}, {}
        for key, lib in libs.items():
            try:  # the engine is edited in parallel: report, go on
                with scopes[key]() if key in scopes else contextlib.nullcontext():
                    built[key] = _tensor_engine(lib)[kind](*args)
                    results[key] = built[key][1]()
            except Exception as e:
                errors[key] = f"{type(e).__name__}: {e}"
                built.pop(key, None)
        allocs = _allocations_per_iteration(mt, built["pool"][0]) if "pool" in built else None
        events = None
        if "trace" in built:
            with mt.trace() as tr:
                built["trace"][0]()
            events = len(tr)
        stats = measure_many({k: v[0] for k, v in built.items()}, quick,
                             scopes={k: s for k, s in scopes.items() if k in built})

        def row(bench, mine, peer, target="-", notes=(), skipped=None):
            key = _PEER_KEYS.get(peer, peer)
            if skipped is None and key in errors:
                skipped = f"error: {errors[key]}"
            r = Row(GROUP, f"{name}: {bench}", stats=stats.get(mine), peer=peer,
                    peer_stats=stats.get(key), target=target,
                    error=errors.get(mine), skipped=skipped, notes=list(notes))
            if target != "-" and r.ratio is not None:
                r.met = r.ratio <= (0.5 if target == TORCH_TARGET else 1.05)
            rows.append(r)
            return r

        def check(a, b) -> list[str]:
            if a not in results or b not in results:
                return []
            bad = _agree(results[a], results[b])
            return [f"CHECK FAILED {a} vs {b}: {bad}" if bad else f"results agree: {a} and {b}"]

        pool_notes = [desc, "configurations: 'pool' = the default allocators (size-class pool, node "
                      "arena); 'heap' = the same code inside mt.memory.use_heap() (plain numpy arrays, "
                      "node records still in the node arena)"]
        if allocs and allocs["allocations"] and "pool" in stats and "heap" in stats:
            extra = stats["pool"].median_us - stats["heap"].median_us
            pool_notes.append(
                f"one iteration makes {allocs['allocations']:g} pool allocations ({allocs['reused']:g} "
                f"served from free lists, {allocs['direct']:g} direct) and {allocs['nodes']:g} node "
                f"records; pool - heap = {extra:.1f} µs, i.e. {extra / allocs['allocations']:.2f} µs per "
                "allocation if all of it is the allocator's (alloc + Block + typed view + free)")
        row("pool", "pool", "heap", notes=pool_notes + check("pool", "heap"))
        row("pool", "pool", "torch", TORCH_TARGET, skipped=torch_skip, notes=check("pool", "torch"))
        on = [f"a fresh mt.trace() per repeat; one iteration records {events} events"
              if events is not None else "no recording made"]
        if events and "trace" in stats and "pool" in stats:
            per = (stats["trace"].median_us - stats["pool"].median_us) / events
            on.append(f"recording costs {per:.2f} µs per event over the recording-off time")
        row("pool + trace", "trace", "pool, recording off", notes=on + check("trace", "pool"))
        rows.append(_recorder_off_row(name, kind, args, copies, copy_error, stripped_sites, quick))
    return rows


_PEER_KEYS = {"pool, recording off": "pool"}


def _allocations_per_iteration(mt, step, n: int = 50) -> dict:
    """Pool allocations (reused, direct) and node records per call of ``step``."""
    step()
    pool, nodes = mt.memory.pool(), mt.memory.nodes
    p0, n0 = pool.stats(), nodes.allocations
    for _ in range(n):
        step()
    p1, n1 = pool.stats(), nodes.allocations
    return {"allocations": (p1["allocations"] - p0["allocations"]) / n,
            "reused": (p1["reuse_hits"] - p0["reuse_hits"]) / n,
            "direct": (p1["direct_allocations"] - p0["direct_allocations"]) / n,
            "nodes": (n1 - n0) / n}


def _recorder_off_row(name, kind, args, copies, copy_error, sites, quick) -> Row:
    """Recording off: the engine as it is against a copy with every recorder check removed."""
    r = Row(GROUP, f"{name}: recorder off", peer="checks removed", target=RECORDER_TARGET)
    if copies is None:
        r.error = f"could not copy the engine: {copy_error}"
        return r
    checks, nochecks = copies
    try:
        steps = {"checks": _tensor_engine(checks)[kind](*args),
                 "nochecks": _tensor_engine(nochecks)[kind](*args)}
        bad = _agree(steps["checks"][1](), steps["nochecks"][1]())
    except Exception as e:
        r.error = f"{type(e).__name__}: {e}"
        return r
    # more rounds than the default: the difference looked for is a few percent
    stats = measure_many({k: v[0] for k, v in steps.items()}, quick, repeats=9 if quick else 31,
                         budget_s=1.5 if quick else 4.0)
    r.stats, r.peer_stats = stats["checks"], stats["nochecks"]
    r.met = r.ratio <= 1.05
    reads = _count_reads(checks.recording, steps["checks"][0])
    left = _count_reads(nochecks.recording, steps["nochecks"][0])
    ns = _read_cost_ns(checks.recording, quick)
    off = stats["checks"]
    est_us = reads * ns / 1000
    r.notes += [
        "both sides are copies of microtorch/ taken when the group ran, imported under other "
        f"names in this process and timed in turns, allocators on; 'checks removed' has its "
        f"{sites} `_trace.active` reads replaced by `None` (the `if rec is not None` branch "
        f"stays) and made {left:g} reads per iteration",
        f"mechanism: one iteration reads `_trace.active` {reads:g} times (counted); one read "
        f"costs {ns:.1f} ns in a tight loop, so ~{est_us:.2f} µs = {est_us / off.median_us:.1%} "
        f"of the iteration, against a recording-off IQR of {off.iqr_us:.2f} µs "
        f"({off.iqr_us / off.median_us:.1%} of the median)",
        ("CHECK FAILED checks vs checks removed: " + bad) if bad else
        "results agree: checks and checks removed",
    ]
    return r


def _engine_copies():
    """Two copies of the microtorch package, imported under other names: unchanged, and with
    every ``_trace.active`` read replaced by ``None``. ``((checks, nochecks), error, sites)``."""
    import microtorch

    names = ("_microtorch_ab_checks", "_microtorch_ab_nochecks")
    if all(n in sys.modules for n in names):
        return tuple(sys.modules[n] for n in names), None, sys.modules[names[1]]._ab_sites
    src = Path(microtorch.__file__).resolve().parent
    tmp = Path(tempfile.mkdtemp(prefix="mt-ab-"))
    try:
        sites = 0
        for name in names:
            dst = tmp / name
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
            if name.endswith("nochecks"):
                for f in dst.rglob("*.py"):
                    if f.relative_to(dst).as_posix() == "recording.py":
                        continue  # the recorder itself (its global is only written there)
                    text = f.read_text(encoding="utf-8")
                    new, n = re.subn(r"\b_trace\.active\b", "None", text)
                    if n:
                        f.write_text(new, encoding="utf-8")
                        sites += n
        sys.path.insert(0, str(tmp))
        try:
            mods = tuple(importlib.import_module(n) for n in names)
        finally:
            sys.path.remove(str(tmp))
        mods[1]._ab_sites = sites
        return mods, None, sites
    except Exception as e:
        return None, f"{type(e).__name__}: {e}", 0
    finally:  # the modules are loaded; only lazily imported submodules (viz) would need the files
        shutil.rmtree(tmp, ignore_errors=True)


class _CountingModule(types.ModuleType):
    """Swapped in as a trace module's class: counts reads of ``module.active``."""

    reads = 0

    @property
    def active(self):
        _CountingModule.reads += 1
        return self.__dict__["active"]

    @active.setter
    def active(self, value):
        self.__dict__["active"] = value


def _count_reads(trace_module, step, n: int = 20) -> float:
    """``trace.active`` reads per call of ``step`` (attribute reads from other modules)."""
    step()
    cls = trace_module.__class__
    trace_module.__class__ = _CountingModule
    try:
        _CountingModule.reads = 0
        for _ in range(n):
            step()
        return _CountingModule.reads / n
    finally:
        trace_module.__class__ = cls


_READ_LOOP = """
def reads(n):
    for _ in range(n):
        rec = _trace.active
        if rec is not None:
            rec.emit("x")

def nones(n):
    for _ in range(n):
        rec = None
        if rec is not None:
            rec.emit("x")
"""


def _read_cost_ns(trace_module, quick: bool, n: int = 1000) -> float:
    """ns per ``rec = _trace.active`` (a module global's attribute, as at every event site)
    over the same loop with ``rec = None``."""
    ns: dict = {"_trace": trace_module}
    exec(_READ_LOOP, ns)
    reads, nones = ns["reads"], ns["nones"]
    s = measure_many({"reads": lambda: reads(n), "nones": lambda: nones(n)}, quick, repeats=9)
    return max(0.0, (s["reads"].median_us - s["nones"].median_us) / n * 1000)


# ==========================================================================================
# 2. one training step with 8 MiB activations, each configuration in a fresh subprocess
# ==========================================================================================
#: configuration -> what it is (in table order)
TRAIN_CONFIGS = {
    "pool": "microtorch, default allocators: blocks > 1 MiB are served directly by the pool",
    "heap": "microtorch inside use_heap(): np.empty per result",
    "arena": "microtorch, activations in one Arena reused by step_arena(arena) every step",
    "bigpool": "microtorch with use_pool(Pool(max_block=16 MiB)): the engine's own pool, "
               "configured so 8 MiB blocks get a size class and a free list (cached, reused): "
               "what caching big blocks would give",
    "numpy": "forward/backward written by hand in numpy: the arithmetic without an engine, "
             "allocating fresh arrays as plain numpy code does",
    "torch": "PyTorch eager, same ops (F.mse_loss), its default intra-op thread count",
}
LABELS = {"pool": "pool", "heap": "heap", "arena": "step arena", "bigpool": "pool max_block=16M",
          "numpy": "numpy by hand", "torch": "torch"}
MICROTORCH_CONFIGS = ("pool", "heap", "arena", "bigpool")
BIG_BLOCK = 16 * MIB


def _train_data(seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.standard_normal((BATCH, SIZES[-1])).astype(np.float32)
    layers = []
    for nin, nout in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(nin)
        layers.append((rng.uniform(-bound, bound, (nin, nout)).astype(np.float32),
                       rng.uniform(-bound, bound, nout).astype(np.float32)))
    return x, y, layers


def build_train_step(config: str):
    """``(step, engine_stats)``: ``step()`` runs one training step and returns the loss;
    ``engine_stats()`` returns microtorch's allocator counters (``{}`` for the references)."""
    x_np, y_np, layers = _train_data()
    if config == "numpy":
        return _numpy_train(x_np, y_np, layers), dict
    if config == "torch":
        return _torch_train(x_np, y_np, layers), dict
    if config not in MICROTORCH_CONFIGS:
        raise ValueError(f"unknown configuration {config!r}; choose from {', '.join(TRAIN_CONFIGS)}")
    import microtorch as mt

    if config == "heap":
        scope = mt.memory.use_heap
    elif config == "bigpool":
        big = mt.memory.Pool(max_block=BIG_BLOCK, name="pool 16M")
        scope = lambda: mt.memory.use_pool(big)  # noqa: E731
    else:
        scope = contextlib.nullcontext
    with scope():
        x, y = mt.tensor(x_np), mt.tensor(y_np)
        params = [mt.tensor(p, requires_grad=True) for layer in layers for p in layer]
    w1, b1, w2, b2 = params

    def train_step() -> float:
        for p in params:
            p.grad = None  # zero_grad(set_to_none=True)
        h = (x @ w1 + b1).relu()
        loss = mt.mse_loss(h @ w2 + b2, y)
        loss.backward()
        for p in params:  # SGD on the parameters' bytes: w -= lr * g, no temporaries
            g, w = p.grad.numpy(), p.detach().numpy()
            g *= LR
            w -= g
        return loss.item()

    if config in ("heap", "bigpool"):
        def step() -> float:
            with scope():
                return train_step()
        return step, lambda: _pool_stats(mt, big if config == "bigpool" else None)

    if config == "arena":
        arena = mt.memory.Arena(name="step arena")  # default 1 MiB; it grows on the first step

        def step() -> float:
            with mt.memory.step_arena(arena):
                return train_step()
        return step, lambda: {**_pool_stats(mt), **{f"arena_{k}": v for k, v in arena.stats().items()
                                                   if k != "name"}}
    return train_step, lambda: _pool_stats(mt)


def _pool_stats(mt, pool=None) -> dict:
    p = (pool or mt.memory.pool()).stats()
    s = mt.memory.stats()
    return {"pool_allocations": p["allocations"], "pool_reuse_hits": p["reuse_hits"],
            "pool_direct_allocations": p["direct_allocations"], "pool_slab_bytes": p["slab_bytes"],
            "pool_peak_reserved": p["peak"], "live_peak_bytes": s["peak_bytes"],
            "node_records": s["node_arena_high_water"]}


def _numpy_train(x, y, layers):
    (w1, b1), (w2, b2) = [(w.copy(), b.copy()) for w, b in layers]

    def step() -> float:
        z1 = x @ w1 + b1
        h = np.maximum(z1, 0)
        d = (h @ w2 + b2) - y
        loss = float(np.mean(d * d))
        g = d * np.float32(2 / d.size)
        gw2, gb2 = h.T @ g, g.sum(0)
        gz = (g @ w2.T) * (z1 > 0)
        gw1, gb1 = x.T @ gz, gz.sum(0)
        for w, gr in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2)):
            gr *= LR
            w -= gr
        return loss

    return step


def _torch_train(x_np, y_np, layers):
    import torch
    import torch.nn.functional as F

    x, y = torch.tensor(x_np), torch.tensor(y_np)
    params = [torch.tensor(p, requires_grad=True) for layer in layers for p in layer]
    w1, b1, w2, b2 = params

    def step() -> float:
        for p in params:
            p.grad = None
        h = (x @ w1 + b1).relu()
        loss = F.mse_loss(h @ w2 + b2, y)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=LR)
        return loss.item()

    return step


def _proc_status(field: str) -> int | None:
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``), or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak RSS (VmHWM) to the current RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def worker(config: str, steps: int, warmup: int) -> dict:
    """Run ``warmup`` + ``steps`` training steps of ``config`` in this (fresh) process."""
    import_t0 = time.perf_counter()
    step, engine_stats = build_train_step(config)
    setup_s = time.perf_counter() - import_t0
    gc.collect()
    rss_before = _proc_status("VmRSS")
    hwm_reset = _reset_peak_rss()
    records = []
    stats_before = None
    for i in range(warmup + steps):
        if i == warmup:
            stats_before = engine_stats()
        gc.collect()
        gc.disable()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        loss = step()
        t1 = time.perf_counter()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        gc.enable()
        records.append({"us": (t1 - t0) * 1e6, "minflt": r1.ru_minflt - r0.ru_minflt,
                        "majflt": r1.ru_majflt - r0.ru_majflt,
                        "sys_us": (r1.ru_stime - r0.ru_stime) * 1e6,
                        "user_us": (r1.ru_utime - r0.ru_utime) * 1e6, "loss": loss})
    stats_after = engine_stats()
    per_step = {k: (stats_after[k] - stats_before[k]) / steps for k in stats_after
                if k in ("pool_allocations", "pool_reuse_hits", "pool_direct_allocations",
                         "arena_allocations", "arena_growths")}
    return {"config": config, "steps": steps, "warmup": warmup, "setup_s": setup_s,
            "rss_before": rss_before, "peak_rss": _proc_status("VmHWM"), "hwm_reset": hwm_reset,
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "records": records, "engine": stats_after, "engine_per_step": per_step,
            "threads": _threads(config), "pid": os.getpid()}


def _threads(config: str) -> int | None:
    if config == "torch":
        import torch

        return torch.get_num_threads()
    return None


def _run_worker(config: str, steps: int, warmup: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.allocators", "--worker", config,
           "--steps", str(steps), "--warmup", str(warmup)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"worker {config} exited {proc.returncode}: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _large_step(quick: bool) -> list[Row]:
    rounds, steps, warmup = (1, 5, 1) if quick else (3, 12, 2)
    configs = list(TRAIN_CONFIGS)
    torch_skip = None if versions()["torch"] else "skipped: torch not installed (pip install -e '.[oracle]')"
    if torch_skip:
        configs.remove("torch")
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    errors: dict[str, str] = {}
    for r in range(rounds):
        order = configs[r % len(configs):] + configs[: r % len(configs)]  # take turns
        for c in order:
            if c in errors:
                continue
            try:
                runs[c].append(_run_worker(c, steps, warmup))
            except Exception as e:
                errors[c] = f"{type(e).__name__}: {e}"
    agg = {c: _aggregate(rs) for c, rs in runs.items() if rs and c not in errors}

    shape = (f"batch {BATCH}, MLP {' -> '.join(map(str, SIZES))}, relu, mse loss, SGD on the "
             f"parameters' bytes; hidden activations and their grads {BATCH}x{SIZES[1]} float32 "
             f"= {BATCH * SIZES[1] * 4 / MIB:g} MiB each")
    method = (f"each configuration in a fresh subprocess, {rounds} round(s) taking turns, "
              f"{warmup} warm-up + {steps} timed steps each; times: median and IQR over all "
              "timed steps (gc off inside a step, collected between steps)")
    rows: list[Row] = []

    def mt_error(c):
        return errors.get(c) if c in MICROTORCH_CONFIGS else None

    def time_row(c, peer, target="-", notes=()):
        skipped = torch_skip if peer == "torch" else (f"error: {errors[peer]}" if peer in errors else None)
        r = Row(GROUP, f"{TRAIN}: {LABELS[c]}", stats=agg.get(c, {}).get("stats"), peer=LABELS[peer],
                peer_stats=agg.get(peer, {}).get("stats"), target=target, skipped=skipped,
                error=mt_error(c), notes=list(notes))
        rows.append(r)
        return r

    checks = _loss_checks(agg)
    descs = [f"'{LABELS[c]}' = {TRAIN_CONFIGS[c]}" for c in configs]
    if agg.get("torch", {}).get("threads"):
        descs[-1] += f" ({agg['torch']['threads']} here; numpy's BLAS uses its own default)"
    time_row("pool", "heap", notes=[shape, method, *descs, *checks, *_memory_notes(agg, errors)])
    time_row("arena", "heap")
    time_row("bigpool", "heap")
    time_row("pool", "numpy")
    time_row("pool", "torch")
    for c in ("pool", "arena", "bigpool"):
        if c in agg and "heap" in agg:
            a, h = agg[c], agg["heap"]
            rows.append(Row(GROUP, f"{TRAIN}: {LABELS[c]} RSS +MiB", peer="heap",
                            value=_rss_cell(a), peer_value=_rss_cell(h),
                            value_ratio=a["rss_added"] / h["rss_added"] if h["rss_added"] else None))
            rows.append(Row(GROUP, f"{TRAIN}: {LABELS[c]} faults/step (sys)", peer="heap",
                            value=_faults_cell(a), peer_value=_faults_cell(h),
                            value_ratio=a["minflt"] / h["minflt"] if h["minflt"] else None))
        else:
            rows.append(Row(GROUP, f"{TRAIN}: {LABELS[c]} RSS/faults", peer="heap",
                            error=errors.get(c) or errors.get("heap") or "no result"))
    return rows


def _aggregate(runs: list[dict]) -> dict:
    timed = [rec for run in runs for rec in run["records"][run["warmup"]:]]
    first = [run["records"][0] for run in runs]
    med = statistics.median
    peak = med(run["peak_rss"] if run["hwm_reset"] and run["peak_rss"] else run["ru_maxrss"]
               for run in runs)
    before = med(run["rss_before"] or 0 for run in runs)
    return {
        "stats": summarize([rec["us"] for rec in timed]),
        "minflt": med(rec["minflt"] for rec in timed),
        "minflt_rounds": [med(rec["minflt"] for rec in run["records"][run["warmup"]:]) for run in runs],
        "best_us": min(rec["us"] for rec in timed),
        "sys_us": med(rec["sys_us"] for rec in timed),
        "first_minflt": med(rec["minflt"] for rec in first),
        "first_us": med(rec["us"] for rec in first),
        "peak_rss": peak, "rss_before": before, "rss_added": peak - before,
        "hwm_reset": all(run["hwm_reset"] for run in runs),
        "losses": runs[0]["records"],
        "engine": runs[0]["engine"], "engine_per_step": runs[0]["engine_per_step"],
        "setup_s": med(run["setup_s"] for run in runs),
        "threads": runs[0].get("threads"),
    }


def _rss_cell(a: dict) -> str:
    return f"+{a['rss_added'] / MIB:.1f} (peak {a['peak_rss'] / MIB:.0f})"


def _faults_cell(a: dict) -> str:
    return f"{a['minflt']:,.0f} ({a['sys_us'] / 1000:.1f} ms)"


def _loss_checks(agg: dict) -> list[str]:
    """Every configuration starts from the same weights: its losses must follow the pool's."""
    if "pool" not in agg:
        return []
    ref = [rec["loss"] for rec in agg["pool"]["losses"]]
    out = []
    for c, a in agg.items():
        if c == "pool":
            continue
        mine = [rec["loss"] for rec in a["losses"]]
        same = c in MICROTORCH_CONFIGS  # the same ops in the same order: only alignment differs
        rtol = 1e-6 if same else 1e-4
        ok = np.allclose(mine, ref, rtol=rtol, atol=1e-7)
        out.append(f"results agree: pool and {LABELS[c]} (losses of {len(ref)} steps, rtol {rtol:g})"
                   if ok else
                   f"CHECK FAILED pool vs {LABELS[c]}: losses {ref[:3]} vs {mine[:3]}")
    return out


def _memory_notes(agg: dict, errors: dict) -> list[str]:
    notes = []
    for c, a in agg.items():
        s = a["stats"]
        rounds = ", ".join(f"{f:,.0f}" for f in a["minflt_rounds"])
        line = (f"{LABELS[c]}: {s.median_us / 1000:.1f} ms/step (best {a['best_us'] / 1000:.1f}, first "
                f"step {a['first_us'] / 1000:.1f} ms), {a['minflt']:,.0f} minor faults/step "
                f"(per round: {rounds}; first step {a['first_minflt']:,.0f}), "
                f"{a['sys_us'] / 1000:.1f} ms system CPU/step, RSS {a['rss_before'] / MIB:.0f} MiB "
                f"before the steps -> peak {a['peak_rss'] / MIB:.0f} MiB (+{a['rss_added'] / MIB:.1f})")
        e, per = a["engine"], a["engine_per_step"]
        if "pool_allocations" in per:
            line += (f"; engine per step: {per['pool_allocations']:.0f} pool allocations "
                     f"({per['pool_direct_allocations']:.0f} direct = fresh buffers, "
                     f"{per['pool_reuse_hits']:.0f} reused), live-storage peak "
                     f"{e['live_peak_bytes'] / MIB:.1f} MiB")
        if "arena_allocations" in per:
            line += (f"; arena: {per['arena_allocations']:.0f} allocations/step, capacity "
                     f"{e['arena_capacity'] / MIB:.1f} MiB in {e['arena_chunks']} chunks, high water "
                     f"{e['arena_high_water'] / MIB:.1f} MiB, {e['arena_growths']} growths (all in "
                     f"warm-up: {per['arena_growths']:.0f}/step after)")
        notes.append(line)
    notes.append("minor faults per step are constant within a process but differ between "
                 "processes (where glibc's heap and numpy's huge-page-advised buffers land), "
                 "hence the per-round values; system CPU/step is the kernel's time for them")
    if agg and not all(a["hwm_reset"] for a in agg.values()):
        notes.append("peak RSS is ru_maxrss (the process's whole life, imports included): "
                     "/proc/self/clear_refs could not reset VmHWM here")
    else:
        notes.append("peak RSS: VmHWM, reset to the current RSS just before the first step "
                     "(/proc/self/clear_refs), so '+MiB' is what the steps added to RSS")
    notes += [f"{LABELS[c]}: error: {e}" for c, e in errors.items()]
    return notes


def run(quick: bool) -> list[Row]:
    return _small_graphs(quick) + _large_step(quick)


# ==========================================================================================
# command line: the subprocess worker, and a profile of the large step
# ==========================================================================================
def profile(config: str, steps: int, top: int = 10) -> None:
    step, _ = build_train_step(config)
    print_profile(step, steps, f"{TRAIN} {LABELS[config]}", top=top)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="allocators benchmark: subprocess worker / profiler")
    p.add_argument("--worker", choices=list(TRAIN_CONFIGS), help="run one configuration, print JSON")
    p.add_argument("--profile", choices=list(TRAIN_CONFIGS), help="cProfile the large step")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps, args.warmup)))
    elif args.profile:
        profile(args.profile, args.steps)
    else:
        p.error("use --worker CONFIG or --profile CONFIG (the group itself runs from benchmarks/run.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
