"""Memory planner: how close each strategy's arena comes to the lower bound, and how fast.

Programs: recorded training steps (MLPs of three sizes, a 1-D conv net through ``unfold``,
a residual net, a transformer block with attention, softmax and layer norm, an RNN
unrolled 32 steps) and 200 random DAG programs (10–40 buffers, so the CP-SAT optimum is
known for each). For every strategy: ``arena_bytes / lower_bound``, geo-mean and worst.
For the recorded steps also: the best plan against what the engine really used for the
same activations in the same run — the pool's peak (bytes of its size-class blocks held
by activations) and the step arena's high-water mark. Then: planning 10,000 buffers.

Where greedy-by-size misses the target, the optimum says whether any plan could do
better: ``optimal / lower bound`` is what the bound itself gives away.
"""
from __future__ import annotations

import math
import time

import numpy as np

from benchmarks.harness import Row, summarize

GROUP = "planner"
HEURISTICS = ("naive", "first_fit", "best_fit", "greedy_by_size", "coloring")


# -- the recorded steps ----------------------------------------------------------------------------
def _mlp(mt, d_in, hidden, d_out, batch):
    model = mt.nn.MLP(d_in, hidden, d_out)
    x, y = mt.randn(batch, d_in), mt.randint(0, d_out, (batch,))
    return model, lambda: mt.nn.functional.cross_entropy(model(x), y)


def _conv(mt, batch=8, channels=4, length=32, k=5, filters=8, classes=5):
    """Two 1-D convolutions, each a sliding-window view (``unfold``) and one matmul."""
    c1 = mt.nn.Linear(channels * k, filters)
    c2 = mt.nn.Linear(filters * k, filters)
    head = mt.nn.Linear(filters * (length - 2 * (k - 1)), classes)
    params = [*c1.parameters(), *c2.parameters(), *head.parameters()]
    x, y = mt.randn(batch, channels, length), mt.randint(0, classes, (batch,))

    def conv(h, layer):  # h: [N, C, L] -> [N, F, L - k + 1]
        n, c, l = h.shape
        cols = h.unfold(2, k, 1).permute(0, 2, 1, 3).reshape(n * (l - k + 1), c * k)
        return layer(cols).relu().reshape(n, l - k + 1, -1).permute(0, 2, 1)

    def loss():
        h = conv(conv(x, c1), c2)
        return mt.nn.functional.cross_entropy(head(h.reshape(batch, -1)), y)

    return params, loss


def _residual(mt, width=64, blocks=4, batch=32, classes=10):
    inp = mt.nn.Linear(16, width)
    layers = [(mt.nn.Linear(width, width), mt.nn.Linear(width, width)) for _ in range(blocks)]
    out = mt.nn.Linear(width, classes)
    params = [*inp.parameters(), *out.parameters()] + [p for a, b in layers for p in (*a.parameters(), *b.parameters())]
    x, y = mt.randn(batch, 16), mt.randint(0, classes, (batch,))

    def loss():
        h = inp(x).relu()
        for a, b in layers:
            h = h + b(a(h).relu())
        return mt.nn.functional.cross_entropy(out(h), y)

    return params, loss


def _transformer(mt, seq=16, d=32, heads=1, ff=64):
    q, k, v, o = (mt.nn.Linear(d, d) for _ in range(4))
    n1, n2 = mt.nn.LayerNorm(d), mt.nn.LayerNorm(d)
    f1, f2 = mt.nn.Linear(d, ff), mt.nn.Linear(ff, d)
    mods = (q, k, v, o, n1, n2, f1, f2)
    params = [p for m in mods for p in m.parameters()]
    x, target = mt.randn(seq, d), mt.randn(seq, d)

    def loss():
        a = (q(x) @ k(x).transpose(0, 1)) * (1.0 / math.sqrt(d))
        h = n1(x + o(a.softmax(-1) @ v(x)))
        h = n2(h + f2(f1(h).relu()))
        return mt.nn.functional.mse_loss(h, target)

    return params, loss


def _rnn(mt, steps=32, d_in=8, hidden=32, batch=8, classes=4):
    wx, wh, head = mt.nn.Linear(d_in, hidden), mt.nn.Linear(hidden, hidden, bias=False), mt.nn.Linear(hidden, classes)
    params = [*wx.parameters(), *wh.parameters(), *head.parameters()]
    xs = [mt.randn(batch, d_in) for _ in range(steps)]
    y = mt.randint(0, classes, (batch,))

    def loss():
        h = mt.zeros(batch, hidden)
        for x in xs:
            h = (wx(x) + wh(h)).tanh()
        return mt.nn.functional.cross_entropy(head(h), y)

    return params, loss


def recorded_steps(mt) -> dict:
    """name -> (trace of one step, step arena high water, pool peak of activation blocks, the
    slab bytes a fresh pool reserves for the step)."""
    mt.manual_seed(0)
    makers = {
        "mlp small (16-32-32-4, batch 16)": lambda: _mlp(mt, 16, [32, 32], 4, 16),
        "mlp medium (64-128-128-10, batch 64)": lambda: _mlp(mt, 64, [128, 128], 10, 64),
        "mlp large (256-512-512-10, batch 128)": lambda: _mlp(mt, 256, [512, 512], 10, 128),
        "conv1d via unfold (2 layers)": lambda: _conv(mt),
        "residual net (4 blocks)": lambda: _residual(mt),
        "transformer block (attention, softmax, layer norm)": lambda: _transformer(mt),
        "rnn unrolled 32 steps": lambda: _rnn(mt),
    }
    out = {}
    for name, make in makers.items():
        model, loss_fn = make()
        params = list(model.parameters()) if hasattr(model, "parameters") else model
        opt = mt.optim.SGD(params, lr=0.01)

        def step():
            loss = loss_fn()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()

        with mt.memory.step_arena():
            step()  # warm up
        with mt.trace() as pool_trace:
            step()  # activations in the pool
        with mt.memory.use_pool(mt.memory.Pool(name="bench pool")) as fresh:
            step()  # ... in a fresh pool: the slabs it reserves are its footprint
        reserved = fresh.stats()["slab_bytes"] + fresh.stats()["direct_bytes"]
        with mt.trace() as tr, mt.memory.step_arena() as arena:
            step()
        out[name] = (tr, arena.high_water, _pool_peak(pool_trace), reserved)
    return out


def _pool_peak(tr) -> int:
    """Peak bytes of pool blocks (size-class rounded) held by activations, from the trace."""
    live = peak = 0
    sizes = {}
    for e in tr.events:
        if e["kind"] == "alloc_block" and e["allocator"].startswith("pool") and e.get("tag") == "activation":
            sizes[e["block"]] = e["size"]
            live += e["size"]
            peak = max(peak, live)
        elif e["kind"] == "free_block" and e["block"] in sizes:
            live -= sizes.pop(e["block"])
    return peak


def live_counts(prog) -> list[int]:
    """How many planned buffers occupy each instruction."""
    delta = [0] * (len(prog.instructions) + 1)
    for runs in prog.segments().values():
        for first, last in runs:
            delta[first] += 1
            delta[last + 1] -= 1
    out, running = [], 0
    for d in delta[:-1]:
        running += d
        out.append(running)
    return out


def _geo(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def run(quick: bool) -> list[Row]:
    import microtorch as mt
    from microtorch.planning import Program, plan, random_program

    rows: list[Row] = []
    steps = recorded_steps(mt)
    n_random = 40 if quick else 200
    rng = np.random.default_rng(0)
    programs = {name: Program.from_trace(tr) for name, (tr, *_) in steps.items()}
    randoms = {f"random DAG #{i}": random_program(int(rng.integers(10, 41)), seed=i, fan_in=int(rng.integers(1, 4)),
                                                  reach=int(rng.integers(2, 10)))
               for i in range(n_random)}
    try:
        import ortools  # noqa: F401
        have_opt = True
    except ImportError:
        have_opt = False
    ratios = {s: {} for s in HEURISTICS + ("optimal", "best")}
    unproven = 0
    for name, prog in {**programs, **randoms}.items():
        lb = prog.lower_bound()
        arenas = {s: plan(prog, s).arena_bytes for s in HEURISTICS}
        if have_opt and len(prog.planned) <= 40:
            p = plan(prog, "optimal", time_limit=1.0 if quick else 5.0)
            arenas["optimal"] = p.arena_bytes
            unproven += not p.proven_optimal
        for s, a in arenas.items():
            ratios[s][name] = a / lb
        ratios["best"][name] = min(arenas.values()) / lb
    n_all = len(programs) + len(randoms)
    for s in HEURISTICS + ("optimal", "best"):
        r = ratios[s]
        if not r:
            rows.append(Row(GROUP, f"{s}: arena / lower bound", skipped="ortools not installed (the `planning` extra)"))
            continue
        worst = max(r, key=r.get)
        target, met = "-", None
        if s == "greedy_by_size":
            target, met = "geo-mean ≤ 1.05x", _geo(r.values()) <= 1.05
        elif s == "best":
            target, met = "geo-mean ≤ 1.02x", _geo(r.values()) <= 1.02
        notes = [f"worst {r[worst]:.3f}x on {worst}"]
        rec = [r[n] for n in programs if n in r]
        rnd = [r[n] for n in randoms if n in r]
        notes.append(f"recorded steps geo-mean {_geo(rec):.3f}x (worst {max(rec):.3f}x), random DAGs "
                     f"{_geo(rnd):.3f}x (worst {max(rnd):.3f}x)" if rec and rnd else f"{len(r)} programs")
        if s == "optimal":
            notes.append(f"{len(r)} of {n_all} programs have ≤ 40 buffers; {unproven} not proven optimal in the "
                         "time limit: the gap above 1.00x is the lower bound's own slack (no plan reaches it)")
        label = "best strategy per program" if s == "best" else s
        rows.append(Row(GROUP, f"{label}: arena / lower bound", value=f"{_geo(r.values()):.3f}x geo-mean",
                        peer="lower bound", peer_value="1.000x", value_ratio=_geo(r.values()), target=target,
                        met=met, notes=notes))
    # the recorded steps against what the engine really used
    for name, (tr, high_water, pool_peak, reserved) in steps.items():
        prog = programs[name]
        best = min(plan(prog, s).arena_bytes for s in ("greedy_by_size", "best_fit", "first_fit"))
        note = (f"{len(prog)} instructions, {len(prog.planned)} planned buffers; lower bound "
                f"{prog.lower_bound():,} B, naive {plan(prog, 'naive').arena_bytes:,} B, pool peak {pool_peak:,} B")
        rows.append(Row(GROUP, f"{name}: best plan vs step arena", value=f"{best:,} B", peer="step arena high water",
                        peer_value=f"{high_water:,} B", value_ratio=best / high_water, notes=[note]))
        rows.append(Row(GROUP, f"{name}: best plan vs pool", value=f"{best:,} B", peer="pool peak (activations)",
                        peer_value=f"{pool_peak:,} B", value_ratio=best / pool_peak if pool_peak else None,
                        notes=[f"the pool's peak counts its blocks in use (size-class rounded) at the worst moment; "
                               f"a fresh pool reserves {reserved:,} B of slabs for the step "
                               f"(the plan needs {best / reserved if reserved else float('nan'):.3f}x of that)"]))
    # speed: 10,000 buffers, with long-lived skips (many buffers live at once) and with short lives
    for label, prog in (("10,000 buffers, long skips", random_program(10_000, seed=7)),
                        ("10,000 buffers, local", random_program(10_000, seed=7, skip=0.0))):
        t0 = time.perf_counter()
        prog.intervals()  # liveness, once: the planners share it
        analysis = time.perf_counter() - t0
        live = _geo([max(1, v) for v in live_counts(prog)])
        for s in ("greedy_by_size", "first_fit", "best_fit"):
            samples = []
            for _ in range(3 if quick else 7):
                t0 = time.perf_counter()
                plan(prog, s)
                samples.append((time.perf_counter() - t0) * 1e6)
            stats = summarize(samples)
            rows.append(Row(GROUP, f"plan {label}: {s}", stats=stats, target="< 1 s", met=stats.median_us < 1e6,
                            notes=[f"~{live:.0f} buffers live at once (geo-mean); liveness + intervals first: "
                                   f"{analysis * 1e3:.0f} ms; plan() includes check()"]))
    return rows
