"""A real training step, and the optimizer step alone, against raw numpy and PyTorch.

**1. MLP training step**: batch 256, MLP 784 → 256 → 10 (ReLU), float32, cross-entropy
over 10 classes, SGD (lr 0.1). One iteration is the whole loop body::

    opt.zero_grad(); loss = cross_entropy(model(x), y); loss.backward(); opt.step()

* microtorch: ``mt.nn.Sequential(Linear, ReLU, Linear)``, ``mt.cross_entropy``,
  ``mt.optim.SGD`` (flat parameter/gradient buffers); the same with momentum 0.9; and the
  plain-SGD step inside ``with mt.memory.step_arena(arena):`` with one arena reused; and
  inside ``with mt.memory.use_heap():`` (results in numpy arrays of their own, no pool);
* raw numpy: forward (``x @ W1ᵀ + b1``, relu, ``@ W2ᵀ + b2``, log-softmax, nll), backward
  written by hand, in-place SGD (with momentum: PyTorch's buffer rule) — no engine at all,
  the floor any numpy-based engine can reach (target: microtorch ≤ 1.10× it);
* PyTorch CPU eager: the same explicit modules (``nn.Sequential(nn.Linear, nn.ReLU,
  nn.Linear)``), ``F.cross_entropy``, ``torch.optim.SGD``;
* the seed article's tinytorch (``benchmarks/tinytorch.py``, a closure per op), plain SGD:
  the floor of a Python engine's design, next to the numpy floor.

All three start from the same seeded weights and data, and before timing the group checks
that their losses agree over a few steps (rtol 1e-4). The engines take turns, and each
repeat opens with one untimed step: the first step after another engine's runs on cold
caches (it evicted this engine's megabytes), which a training loop never sees.

**BLAS threads.** Nearly all of this step is two 256×784×256 matrix products. numpy uses
OpenBLAS, PyTorch uses MKL (through its own matmul paths), and each has its own thread
pool. The group runs both with ONE thread: ``torch.set_num_threads(1)`` and OpenBLAS set
to 1 thread (through threadpoolctl when installed, else through the OpenBLAS library numpy
loaded, found in ``/proc/self/maps``) — restored afterwards. So the ratio compares the
engines on one core, where it is reproducible. A second BLAS thread (the libraries' default
on 2 cores) nearly halves the matrix products but not the engine's Python work, which runs
on the main thread between them: the ratio to numpy is then higher. Full runs time the
libraries' default thread counts too and print them as a note (torch in a round of its own:
its idle OpenMP workers keep spinning after its steps and would slow the others).
Because the BLAS libraries differ, the numpy/PyTorch ratio is a BLAS comparison as much as
anything; the notes time the step's five matrix products alone in both to show it.

**2. Optimizer step over 1M parameters** (100 tensors of 100×100 float32, fixed
gradients): microtorch's flat-buffer SGD (momentum 0.9) and Adam against the same math in
numpy on one flat array (the floor), a per-parameter Python loop in numpy, and
``torch.optim`` (its default — which on CPU resolves to the per-parameter loop, foreach
off — and ``foreach=True``).

    python -m benchmarks.training --profile sgd      # cProfile of microtorch's step (sgd|momentum|arena|heap)
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import sys
import time

import numpy as np

from .harness import Row, measure_many, print_profile
from .peers import torch_or_skip

GROUP = "training"
BATCH, SIZES, CLASSES, BATCHES = 256, (784, 256, 10), 10, 16
LR, MOMENTUM = 0.1, 0.9
TARGET = "<= 1.10x numpy"
CHECK_STEPS, RTOL = 5, 1e-4
STEP = f"mlp step {BATCH}x{'-'.join(map(str, SIZES))}"
# the optimizer step: 100 tensors of 100 x 100 = 1,000,000 float32 parameters
OPT_TENSORS, OPT_SHAPE = 100, (100, 100)
OPT_LR, ADAM_LR, BETAS, EPS = 0.01, 1e-3, (0.9, 0.999), 1e-8


# ==========================================================================================
# BLAS threads: read / set numpy's OpenBLAS pool (threadpoolctl if installed, else ctypes)
# ==========================================================================================
class _Blas:
    """numpy's BLAS thread pool: ``get()``, ``set(n)``, ``describe()``; no-op if not found."""

    def __init__(self):
        self.how, self._get, self._set, self._ctl, self.name = None, None, None, None, "unknown"
        np.ones((2, 2)) @ np.ones((2, 2))  # make sure the BLAS library is loaded
        try:
            import threadpoolctl

            self._ctl = threadpoolctl.ThreadpoolController()
            info = [i for i in self._ctl.info() if i.get("user_api") == "blas"]
            if info:
                self.how = "threadpoolctl"
                self.name = f"{info[0].get('internal_api')} {info[0].get('version')}"
                return
        except ImportError:
            pass
        try:
            with open("/proc/self/maps") as f:
                paths = sorted({l.split()[-1] for l in f if "openblas" in l.lower() and "/" in l})
        except OSError:
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""),
                                   ("openblas", "64_"), ("openblas", "")):
                get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    self._get, self._set, self.how = get, put, "ctypes"
                    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                    config = getattr(lib, f"{prefix}_get_config{suffix}", None)
                    if config is not None:
                        config.restype = ctypes.c_char_p
                        self.name = config().decode().split("  ")[0]
                    else:
                        self.name = os.path.basename(path)
                    return

    def get(self) -> int | None:
        if self.how == "threadpoolctl":
            info = [i for i in self._ctl.info() if i.get("user_api") == "blas"]
            return info[0]["num_threads"] if info else None
        return int(self._get()) if self._get is not None else None

    def set(self, n: int | None) -> None:
        if n is None:
            return
        if self.how == "threadpoolctl":
            self._ctl.limit(limits=n, user_api="blas")  # kept: not used as a context manager
        elif self._set is not None:
            self._set(int(n))

    @contextlib.contextmanager
    def threads(self, n: int):
        before = self.get()
        self.set(n)
        try:
            yield
        finally:
            self.set(before)


# ==========================================================================================
# 1. the MLP training step
# ==========================================================================================
def _data(seed: int = 0, batch: int = BATCH, sizes: tuple = SIZES):
    """BATCHES batches of MNIST-like inputs (pixels in [0, 1), 80 % of them 0) with random
    labels, and PyTorch-style initial weights in PyTorch's layout (W: out x in).

    The steps cycle through the batches (batch ``i % BATCHES`` at step ``i``), as a loader
    would: on one fixed batch the loss runs to ~0 within the thousand-odd steps a run takes
    (and with dense uniform inputs momentum 0.9 at lr 0.1 kills every ReLU); here every
    engine keeps training normally while it is timed (the notes show its loss afterwards).
    """
    rng = np.random.default_rng(seed)
    x = rng.random((BATCHES, batch, sizes[0]), dtype=np.float32)
    x[rng.random(x.shape) < 0.8] = 0
    y = rng.integers(0, sizes[-1], (BATCHES, batch)).astype(np.int64)
    layers = []
    for nin, nout in zip(sizes[:-1], sizes[1:]):
        bound = 1 / math.sqrt(nin)
        layers.append((rng.uniform(-bound, bound, (nout, nin)).astype(np.float32),
                       rng.uniform(-bound, bound, nout).astype(np.float32)))
    return x, y, layers


def _state_dict(layers, wrap):
    (w1, b1), (w2, b2) = layers
    return {"0.weight": wrap(w1), "0.bias": wrap(b1), "2.weight": wrap(w2), "2.bias": wrap(b2)}


def _module_step(lib, cross_entropy, momentum: float, data, marks: list | None = None,
                 clock=time.perf_counter):
    """The step with ``lib``'s modules and optimizer: microtorch and PyTorch share the code
    (the same names do the same thing), so the two are timed on exactly the same loop.
    With ``marks`` (a list), each step appends ``clock()`` at its start and after zero_grad,
    forward, backward and the optimizer step (the per-phase breakdown, ``benchmarks/phases.py``)."""
    x_np, y_np, layers = data or _data()
    (w1, _), (w2, _) = layers
    model = lib.nn.Sequential(lib.nn.Linear(w1.shape[1], w1.shape[0]), lib.nn.ReLU(),
                              lib.nn.Linear(w2.shape[1], w2.shape[0]))
    model.load_state_dict(_state_dict(layers, lib.tensor))
    opt = lib.optim.SGD(model.parameters(), lr=LR, momentum=momentum)
    batches = [(lib.tensor(xb), lib.tensor(yb)) for xb, yb in zip(x_np, y_np)]
    state = {"steps": 0}

    def step() -> float:
        x, y = batches[state["steps"] % BATCHES]
        state["steps"] += 1
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def phased_step() -> float:
        x, y = batches[state["steps"] % BATCHES]
        state["steps"] += 1
        marks.append(clock())
        opt.zero_grad()
        marks.append(clock())
        loss = cross_entropy(model(x), y)
        marks.append(clock())
        loss.backward()
        marks.append(clock())
        opt.step()
        marks.append(clock())
        return loss.item()

    if marks is not None:
        step = phased_step

    step.steps = lambda: state["steps"]
    return step


def microtorch_step(config: str, data=None, marks: list | None = None, clock=time.perf_counter):
    """A microtorch training step: ``config`` is "sgd", "momentum", "arena" (sgd in a step
    arena) or "heap" (sgd in ``use_heap()``: every result its own numpy array, no pool)."""
    import microtorch as mt

    plain = _module_step(mt, mt.cross_entropy, MOMENTUM if config == "momentum" else 0.0, data, marks,
                         clock)
    if config == "heap":
        def on_the_heap() -> float:
            with mt.memory.use_heap():
                return plain()

        on_the_heap.steps = plain.steps
        return on_the_heap
    if config != "arena":
        return plain
    arena = mt.memory.Arena(name="training step arena")

    def step() -> float:  # the same step, its activations in the arena
        with mt.memory.step_arena(arena):
            return plain()

    step.steps = plain.steps
    return step


def numpy_step(momentum: float = 0.0, data=None, marks: list | None = None, clock=time.perf_counter):
    """The same step in raw numpy: forward, backward by hand, in-place SGD. No engine.
    With ``marks``, each step appends ``clock()`` at its start and after forward, backward
    and the update (no zero_grad: the clock is read twice there)."""
    xs, ys, layers = data or _data()
    params = [p.copy() for layer in layers for p in layer]  # W1, b1, W2, b2
    bufs = [np.zeros_like(p) for p in params] if momentum else None
    batch = xs.shape[1]
    rows = np.arange(batch)
    lr = np.float32(LR)
    state = {"steps": 0}
    mark = marks.append if marks is not None else None

    def step() -> float:
        x, y = xs[state["steps"] % BATCHES], ys[state["steps"] % BATCHES]
        if mark is not None:
            mark(clock())
            mark(clock())
        w1, b1, w2, b2 = params
        z1 = x @ w1.T
        z1 += b1
        h = np.maximum(z1, 0)
        z2 = h @ w2.T
        z2 += b2
        z2 -= z2.max(axis=1, keepdims=True)  # log-softmax, shifted by the row max
        e = np.exp(z2)
        se = e.sum(axis=1, keepdims=True)
        loss = float(np.log(se).mean() - z2[rows, y].mean())  # nll of log-softmax, mean
        if mark is not None:
            mark(clock())
        g = e / se  # d loss / d logits = (softmax - onehot) / N
        g[rows, y] -= 1
        g /= batch
        gw2, gb2 = g.T @ h, g.sum(axis=0)
        gz = g @ w2
        gz *= z1 > 0
        gw1, gb1 = gz.T @ x, gz.sum(axis=0)
        grads = (gw1, gb1, gw2, gb2)
        if mark is not None:
            mark(clock())
        if momentum:  # PyTorch's rule: buf = g on the first step, then mu * buf + g
            first = state["steps"] == 0
            for p, gr, buf in zip(params, grads, bufs):
                if first:
                    np.copyto(buf, gr)
                else:
                    buf *= momentum
                    buf += gr
                buf_lr = buf * lr
                p -= buf_lr
        else:
            for p, gr in zip(params, grads):
                gr *= lr
                p -= gr
        if mark is not None:
            mark(clock())
        state["steps"] += 1
        return loss

    step.steps = lambda: state["steps"]
    return step


def tinytorch_step(data=None):
    """The same step on the seed article's tinytorch (:mod:`benchmarks.tinytorch`: closures
    over numpy arrays, nothing else), plain SGD: the floor of a Python engine's design."""
    from . import tinytorch as tt

    xs, ys, layers = data or _data()
    params = [tt.Tensor(p.copy()) for layer in layers for p in layer]  # W1, b1, W2, b2
    lr = np.float32(LR)
    state = {"steps": 0}

    def step() -> float:
        i = state["steps"] % BATCHES
        state["steps"] += 1
        for p in params:
            p.grad = None
        w1, b1, w2, b2 = params
        loss = tt.cross_entropy(tt.linear(tt.linear(tt.Tensor(xs[i]), w1, b1).relu(), w2, b2), ys[i])
        loss.backward()
        for p in params:
            p.data -= p.grad * lr
        return loss.item()

    step.steps = lambda: state["steps"]
    return step


def torch_step(momentum: float = 0.0, data=None):
    import torch
    import torch.nn.functional as F

    return _module_step(torch, F.cross_entropy, momentum, data)


def _matmuls(torch):
    """The step's five matrix products (2 forward, 3 backward; the shapes and transposes of
    the raw numpy step), in numpy (OpenBLAS) and in torch (MKL): the BLAS difference alone."""
    xs, _, ((w1, _), (w2, _)) = _data()
    x = xs[0]
    rng = np.random.default_rng(1)
    h = rng.random((BATCH, SIZES[1]), dtype=np.float32)
    g = rng.random((BATCH, SIZES[2]), dtype=np.float32)
    gz = rng.random((BATCH, SIZES[1]), dtype=np.float32)

    def numpy_mm():
        return (x @ w1.T, h @ w2.T, g.T @ h, g @ w2, gz.T @ x)

    fns = {"numpy": numpy_mm}
    if torch is not None:
        tx, tw1, th, tw2, tg, tgz = map(torch.tensor, (x, w1, h, w2, g, gz))

        def torch_mm():
            return (tx @ tw1.T, th @ tw2.T, tg.T @ th, tg @ tw2, tgz.T @ tx)

        fns["torch"] = torch_mm
    return fns


TRAIN_CONFIGS = {  # name -> (builder, label)
    "microtorch": (lambda d: microtorch_step("sgd", d), "microtorch"),
    "microtorch momentum": (lambda d: microtorch_step("momentum", d), "microtorch"),
    "microtorch arena": (lambda d: microtorch_step("arena", d), "microtorch"),
    "microtorch heap": (lambda d: microtorch_step("heap", d), "microtorch"),
    "numpy": (lambda d: numpy_step(0.0, d), "numpy (raw)"),
    "numpy momentum": (lambda d: numpy_step(MOMENTUM, d), "numpy (raw)"),
    "tinytorch": (tinytorch_step, "tinytorch (seed)"),
    "torch": (lambda d: torch_step(0.0, d), "torch"),
    "torch momentum": (lambda d: torch_step(MOMENTUM, d), "torch"),
}


def _check_losses(built: dict, errors: dict) -> dict:
    """Run CHECK_STEPS steps of every engine from the same start; ``{(name, peer): note}``.
    An engine that fails here is moved from ``built`` to ``errors``."""
    losses = {}
    for name, step in list(built.items()):
        try:
            losses[name] = [step() for _ in range(CHECK_STEPS)]
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"
            del built[name]
    out = {}
    for name, ref_name in (("microtorch", "numpy"), ("microtorch", "torch"),
                           ("microtorch momentum", "numpy momentum"),
                           ("microtorch momentum", "torch momentum"),
                           ("microtorch arena", "numpy"), ("microtorch arena", "microtorch"),
                           ("microtorch heap", "numpy"),
                           ("tinytorch", "numpy")):
        if name not in losses or ref_name not in losses:
            continue
        mine, ref = losses[name], losses[ref_name]
        if np.allclose(mine, ref, rtol=RTOL, atol=1e-6):
            out[name, ref_name] = (f"results agree with {ref_name}: losses of {CHECK_STEPS} steps "
                                   f"{mine[0]:.5f} -> {mine[-1]:.5f} within rtol {RTOL:g}")
        else:
            out[name, ref_name] = (f"CHECK FAILED vs {ref_name}: losses {[round(v, 6) for v in mine]} "
                                   f"vs {[round(v, 6) for v in ref]}")
    return out


def _train_rows(quick: bool, torch, torch_skip, blas: _Blas, defaults: dict) -> list[Row]:
    data = _data()
    configs = {k: v for k, v in TRAIN_CONFIGS.items() if torch is not None or not k.startswith("torch")}
    built, errors = {}, {}
    for name, (build, _) in configs.items():
        try:  # the engine is edited in parallel: report, go on
            built[name] = build(data)
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"
    checks = _check_losses(built, errors)
    stats = measure_many(built, quick, settle=1)  # each repeat: one untimed step first (see harness)
    after = {}
    for name, step in built.items():  # every engine kept training while timed: show it stayed sane
        after[name] = step()
    mm = measure_many(_matmuls(torch), quick)

    shape = (f"batch {BATCH}, MLP {' -> '.join(map(str, SIZES))}, relu, float32, cross-entropy, "
             f"SGD lr {LR}; one iteration = opt.zero_grad(), forward, loss.backward(), opt.step() "
             "(zero_grad's default in both libraries: .grad = None; microtorch's next backward writes "
             "each gradient into its flat gradient buffer); raw numpy = forward, backward "
             "by hand, in-place SGD")
    threads = (f"BLAS threads: 1 for every engine — torch.set_num_threads(1) (torch's default "
               f"here: {defaults['torch'] or '?'}), numpy's {blas.name} set to 1 through "
               f"{blas.how or 'nothing (not found: left as is)'} (its default here: "
               f"{defaults['blas'] or '?'}); on this {os.cpu_count()}-core machine a second BLAS "
               "thread competes with the Python thread and the other library's idle pool"
               + ("" if quick else " (full runs time the defaults too: see below)"))
    ratio_note = ""
    if "numpy" in stats and "torch" in stats and "torch" in mm:
        r = stats["numpy"].median_us / stats["torch"].median_us
        r_mm = mm["numpy"].median_us / mm["torch"].median_us
        ratio_note = (
            f"BLAS caveat: numpy multiplies with {blas.name}, torch with MKL, and the step's matrix "
            f"products are most of its time, so the torch ratio measures BLAS as much as engine "
            f"overhead (the numpy ratio is the engine's). Here: raw numpy step / torch step = "
            f"{r:.2f}x; the step's 5 matrix products alone take {mm['numpy'].cell()} µs in numpy vs "
            f"{mm['torch'].cell()} µs in torch = {r_mm:.2f}x ({_cpu()}). The issue expected raw "
            "numpy at ~1.3x torch; which side wins depends on the CPU and the two libraries' "
            "kernels for it, so compare microtorch with torch through the numpy floor")
    after_note = (f"data: {BATCHES} batches of MNIST-like inputs (80 % zeros, the rest in [0, 1)) "
                  "with random labels, cycled; loss after timing (every engine kept training: "
                  "steps taken, last loss): " + ", ".join(
                      f"{n} {built[n].steps()} steps {v:.4f}" for n, v in after.items()))
    bad = [n for n, v in after.items() if not math.isfinite(v)]
    if any(n.startswith("microtorch") for n in bad):
        after_note = f"CHECK FAILED: a loss went non-finite while timed ({', '.join(bad)}); " + after_note

    rows: list[Row] = []

    def row(name, peer, target="-", notes=()):
        skipped = torch_skip if peer.startswith("torch") and torch is None else (
            f"error: {errors[peer]}" if peer in errors else None)
        r = Row(GROUP, f"{STEP}: {name.replace('microtorch', '').strip() or 'sgd'}",
                stats=stats.get(name), peer=TRAIN_CONFIGS[peer][1], peer_stats=stats.get(peer),
                target=target, skipped=skipped, error=errors.get(name), notes=list(notes))
        if (name, peer) in checks:
            r.notes.append(checks[(name, peer)])
        if target != "-" and r.ratio is not None:
            r.met = r.ratio <= 1.10
        rows.append(r)
        return r

    row("microtorch", "numpy", TARGET, [shape, threads])
    row("microtorch", "torch", notes=[ratio_note] if ratio_note else [])
    row("microtorch momentum", "numpy momentum", TARGET, [f"momentum {MOMENTUM} (PyTorch's rule, "
                                                          "dampening 0) in all three"])
    row("microtorch momentum", "torch momentum")
    row("microtorch arena", "numpy", TARGET, ["arena: the sgd step inside `with "
                                              "mt.memory.step_arena(arena):`, one Arena reused "
                                              "every step (parameters and .grad stay in the pool)"])
    a = row("microtorch arena", "microtorch")
    a.peer = "microtorch (pool)"
    row("microtorch heap", "numpy", notes=["heap: the sgd step inside `with mt.memory.use_heap():`, "
                                           "every result a numpy array of its own (np.empty) instead "
                                           "of a pool block: what the size-class pool's bookkeeping "
                                           "costs per step (a design choice, not a target)"])
    row("tinytorch", "numpy", notes=["the floor of the design: the seed article's tinytorch "
                                     "(benchmarks/tinytorch.py: a closure per op over numpy arrays, a "
                                     "linear op and a fused cross-entropy in the same style; no storages, "
                                     "node records, version counters, checks or trace) on the same step, "
                                     "plain SGD, p -= lr * grad"])
    rows[0].notes.append(after_note)

    if not quick:  # the libraries' own thread defaults, for the record
        try:
            rows[0].notes.append(_default_threads_note(built, blas, torch, defaults))
        except Exception as e:
            rows[0].notes.append(f"default thread counts: not timed ({type(e).__name__}: {e})")
    return rows


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "this CPU")
    except OSError:
        return "this CPU"


def _default_threads_note(built: dict, blas: _Blas, torch, defaults: dict) -> str:
    """Time microtorch and numpy, then torch, with the libraries' default thread counts.

    torch runs in a round of its own: its idle OpenMP workers keep spinning for a while after
    each of its steps, and interleaved with it the two numpy engines would be timed on a
    contended second core."""
    pair = {n: built[n] for n in ("microtorch", "numpy") if n in built}
    prev_torch = torch.get_num_threads() if torch is not None else None
    try:
        with blas.threads(defaults["blas"] or 1):
            st = measure_many(pair, False, settle=1, repeats=9, budget_s=1.5)
            if torch is not None and "torch" in built and defaults["torch"]:
                torch.set_num_threads(defaults["torch"])
                st.update(measure_many({"torch": built["torch"]}, False, settle=1, repeats=9, budget_s=1.0))
    finally:
        if torch is not None:
            torch.set_num_threads(prev_torch)
    cells = ", ".join(f"{n} {st[n].cell()} µs" for n in st)
    ratio = (f"; microtorch / numpy = {st['microtorch'].median_us / st['numpy'].median_us:.2f}x (the "
             "matrix products take about half as long, the engine's Python work does not)"
             if len(pair) == 2 else "")
    return (f"with the libraries' default thread counts (OpenBLAS {defaults['blas']}, torch "
            f"{defaults['torch']}) instead of 1: {cells} (9 rounds; torch timed on its own){ratio}")


# ==========================================================================================
# 2. the optimizer step over 1M parameters
# ==========================================================================================
def _opt_data(seed: int = 2):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(OPT_SHAPE).astype(np.float32) * 0.1 for _ in range(OPT_TENSORS)]
    grads = [rng.standard_normal(OPT_SHAPE).astype(np.float32) * 0.01 for _ in range(OPT_TENSORS)]
    return params, grads


def _mt_opt(kind: str, data):
    import microtorch as mt

    params_np, grads_np = data
    params = [mt.tensor(p, requires_grad=True) for p in params_np]
    opt = (mt.optim.SGD(params, lr=OPT_LR, momentum=MOMENTUM) if kind == "sgd" else
           mt.optim.Adam(params, lr=ADAM_LR, betas=BETAS, eps=EPS))
    for p, g in zip(params, grads_np):  # the first step copies them into the flat gradient buffer
        p.grad = mt.tensor(g)
    return opt.step, lambda: np.concatenate([p.detach().numpy().ravel() for p in params])


def _numpy_opt(kind: str, data, flat: bool):
    """The same math in numpy: on one flat array (``flat``: the floor) or tensor by tensor.
    Temporaries go into one reused scratch array, as in microtorch's optimizers (a fresh
    4 MB temporary per operation would cost page faults that neither side needs)."""
    params_np, grads_np = data
    if flat:
        params = [np.concatenate([p.ravel() for p in params_np])]
        grads = [np.concatenate([g.ravel() for g in grads_np])]
    else:
        params = [p.copy() for p in params_np]
        grads = [g.copy() for g in grads_np]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params] if kind == "adam" else None
    scratch = np.empty(max(p.size for p in params), np.float32)
    rooms = [scratch[:p.size].reshape(p.shape) for p in params]  # each array's view of it
    state = {"t": 0}
    b1, b2 = BETAS

    def sgd():
        first = state["t"] == 0
        state["t"] += 1
        for p, g, buf, tmp in zip(params, grads, m, rooms):
            if first:
                np.copyto(buf, g)
            else:
                buf *= MOMENTUM
                buf += g
            p -= np.multiply(buf, OPT_LR, out=tmp)

    def adam():
        state["t"] += 1
        t = state["t"]
        bias1, bias2_sqrt = 1 - b1 ** t, math.sqrt(1 - b2 ** t)
        for p, g, mi, vi, tmp in zip(params, grads, m, v, rooms):
            mi *= b1
            mi += np.multiply(g, 1 - b1, out=tmp)
            vi *= b2
            np.multiply(g, 1 - b2, out=tmp)
            tmp *= g
            vi += tmp
            denom = np.sqrt(vi, out=tmp)
            denom /= bias2_sqrt
            denom += EPS
            np.divide(mi, denom, out=denom)
            denom *= ADAM_LR / bias1
            p -= denom  # p -= (lr / bias1) * m / denom

    return (sgd if kind == "sgd" else adam), lambda: np.concatenate([p.ravel() for p in params])


def _torch_opt(kind: str, data, foreach):
    import torch

    params_np, grads_np = data
    params = [torch.tensor(p, requires_grad=True) for p in params_np]
    for p, g in zip(params, grads_np):
        p.grad = torch.tensor(g)
    opt = (torch.optim.SGD(params, lr=OPT_LR, momentum=MOMENTUM, foreach=foreach) if kind == "sgd" else
           torch.optim.Adam(params, lr=ADAM_LR, betas=BETAS, eps=EPS, foreach=foreach))
    return opt.step, lambda: torch.cat([p.detach().reshape(-1) for p in params]).numpy()


OPT_PEERS = {  # name -> label
    "numpy flat": "numpy, one flat array",
    "numpy loop": "numpy, per-param loop",
    "torch": "torch.optim (default)",
    "torch foreach": "torch.optim foreach=True",
}


def _opt_rows(quick: bool, torch, torch_skip) -> list[Row]:
    data = _opt_data()
    numel = OPT_TENSORS * math.prod(OPT_SHAPE)
    rows: list[Row] = []
    foreach_default = None
    if torch is not None:
        try:
            from torch.optim.optimizer import _default_to_fused_or_foreach

            foreach_default = _default_to_fused_or_foreach([torch.zeros(1)], False)[1]
        except Exception:  # a private helper: may move
            pass
    for kind, title in (("sgd", f"SGD momentum {MOMENTUM}"), ("adam", "Adam")):
        builders = {
            "microtorch": lambda: _mt_opt(kind, data),
            "numpy flat": lambda: _numpy_opt(kind, data, True),
            "numpy loop": lambda: _numpy_opt(kind, data, False),
        }
        if torch is not None:
            builders["torch"] = lambda: _torch_opt(kind, data, None)
            builders["torch foreach"] = lambda: _torch_opt(kind, data, True)
        built, errors, checks = {}, {}, {}
        for name, build in builders.items():
            try:
                built[name] = build()
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}"
        # the same 3 steps from the same start: the parameters must agree
        finals = {}
        for name, (step, values) in list(built.items()):
            try:
                for _ in range(3):
                    step()
                finals[name] = values()
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}"
                del built[name]
        for name in OPT_PEERS:
            if "microtorch" in finals and name in finals:
                a, b = finals["microtorch"], finals[name]
                checks[name] = (f"results agree with {OPT_PEERS[name]}: parameters after 3 steps "
                                f"within rtol {RTOL:g}" if np.allclose(a, b, rtol=RTOL, atol=1e-7) else
                                f"CHECK FAILED vs {OPT_PEERS[name]}: max abs diff "
                                f"{np.max(np.abs(a - b)):.3g} after 3 steps")
        stats = measure_many({n: s for n, (s, _) in built.items()}, quick)
        bench = f"optimizer step 1M: {title}"
        for i, (peer, label) in enumerate(OPT_PEERS.items()):
            skipped = torch_skip if peer.startswith("torch") and torch is None else (
                f"error: {errors[peer]}" if peer in errors else None)
            r = Row(GROUP, bench, stats=stats.get("microtorch"), peer=label, peer_stats=stats.get(peer),
                    skipped=skipped, error=errors.get("microtorch"))
            if i == 0:
                r.notes.append(
                    f"{OPT_TENSORS} tensors of {OPT_SHAPE[0]}x{OPT_SHAPE[1]} float32 = {numel:,} "
                    f"parameters, fixed gradients; one iteration = opt.step(); microtorch updates "
                    "its flat buffers with a few numpy calls; 'numpy, one flat array' is the same "
                    "math on one 1M array (the floor), 'numpy, per-param loop' the same math "
                    f"tensor by tensor; {'SGD lr %g' % OPT_LR if kind == 'sgd' else 'Adam lr %g' % ADAM_LR}")
                if kind == "sgd" and torch is not None:
                    r.notes.append(
                        "torch.optim's default foreach=None resolves to "
                        f"{foreach_default if foreach_default is not None else '?'} for CPU tensors "
                        "(foreach kernels are the default only on cuda/xpu), so the default row is "
                        "its per-parameter loop; torch with 1 intra-op thread (no op split across "
                        "cores, like numpy's elementwise ops)")
            if peer in checks:
                r.notes.append(checks[peer])
            rows.append(r)
    return rows


# ==========================================================================================
def run(quick: bool) -> list[Row]:
    blas = _Blas()
    defaults = {"blas": blas.get(), "torch": None}
    fresh = "torch" not in sys.modules  # else an earlier group already set it to 1
    try:
        import torch as _torch

        # its default before peers.torch_or_skip sets 1 (the physical cores: os.cpu_count() here)
        defaults["torch"] = _torch.get_num_threads() if fresh else (os.cpu_count() or 1)
    except ImportError:
        pass
    torch, torch_skip = torch_or_skip()
    with blas.threads(1):
        rows = _train_rows(quick, torch, torch_skip, blas, defaults)
        rows += _opt_rows(quick, torch, torch_skip)
    return rows


def profile(config: str, steps: int, top: int = 15) -> None:
    """cProfile of ``steps`` microtorch training steps (OpenBLAS at 1 thread, as in the group)."""
    with _Blas().threads(1):
        print_profile(microtorch_step(config), steps, f"microtorch {STEP} ({config})", warmup=10, top=top)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="training benchmark: profile microtorch's training step")
    p.add_argument("--profile", choices=("sgd", "momentum", "arena", "heap"), default="sgd")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    profile(args.profile, args.steps, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
