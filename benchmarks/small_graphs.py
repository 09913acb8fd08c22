"""Forward + backward of small-tensor graphs: where per-op overhead is all there is.

Two graphs, each timed as one training-style iteration — clear the leaves' grads
(``p.grad = None``, PyTorch's ``zero_grad(set_to_none=True)``), forward, ``backward()``:

* ``chain 4x4``: ``(a*b + a).relu().sum()`` with ``a, b`` 4×4 float32 leaves (4 ops).
  micrograd (scalars only) runs the same graph on 16 ``Value`` pairs:
  ``sum((a_i*b_i + a_i).relu())``.
* ``mlp 16x16``: a 3-layer MLP, batch 16, 16 → 16 → 16 → 1, ReLU after the two hidden
  layers, linear output, loss = mean over the batch. microtorch and PyTorch run the same
  explicit ops (``x @ W + b``, ``relu``, ``mean``: 9 ops, no fused ``nn.Linear``/``addmm``);
  micrograd runs its own ``nn.MLP(16, [16, 16, 1])`` sample by sample, per scalar.

Peers: PyTorch CPU eager (the target: microtorch within 0.5x of its time), plain numpy
with forward and backward written out by hand (the floor: arithmetic without any engine),
the seed article's "tinytorch" (:mod:`benchmarks.tinytorch`: numpy arrays, closures and a
topological sort, nothing else — the floor for any Python engine, so the gap to it is what
microtorch's memory model and checks cost), and micrograd (scalar autograd, for scale).

Every engine gets the same weights and inputs, and before timing the run checks that
microtorch's gradients (or loss, for micrograd) agree with each peer's.
"""
from __future__ import annotations

import numpy as np

from .harness import Row, measure, measure_many
from . import tinytorch
from .peers import micrograd_or_skip, torch_or_skip

GROUP = "small_graphs"
TARGET = "<= 0.5x torch"
BATCH, SIZES = 16, (16, 16, 16, 1)
PEERS = ("torch", "numpy", "tinytorch", "micrograd")


def _data(seed=0):
    rng = np.random.default_rng(seed)
    chain = rng.standard_normal((2, 4, 4)).astype(np.float32)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    layers = []
    for nin, nout in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(nin)
        layers.append((rng.uniform(-bound, bound, (nin, nout)).astype(np.float32),
                       rng.uniform(-bound, bound, nout).astype(np.float32)))
    return chain, x, layers


# ------------------------------------------------------------------------------------------
# each engine: build(...) -> (step, result); step() is the timed iteration,
# result() runs one more and returns what the correctness check compares
# ------------------------------------------------------------------------------------------
def _tensor_engine(lib):
    """microtorch and PyTorch share the code: the same names do the same thing."""

    def chain(data):
        a = lib.tensor(data[0], requires_grad=True)
        b = lib.tensor(data[1], requires_grad=True)

        def step():
            a.grad = None
            b.grad = None
            loss = (a * b + a).relu().sum()
            loss.backward()
            return loss

        def result():
            loss = step()
            return float(loss.item()), [_np(a.grad), _np(b.grad)]

        return step, result

    def mlp(x_np, layers_np):
        x = lib.tensor(x_np)
        params = [lib.tensor(p, requires_grad=True) for layer in layers_np for p in layer]
        (w1, b1, w2, b2, w3, b3) = params

        def step():
            for p in params:
                p.grad = None
            h = (x @ w1 + b1).relu()
            h = (h @ w2 + b2).relu()
            loss = (h @ w3 + b3).mean()
            loss.backward()
            return loss

        def result():
            loss = step()
            return float(loss.item()), [_np(p.grad) for p in params]

        return step, result

    return {"chain": chain, "mlp": mlp}


def _np(t):
    return np.array(t.detach().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def _numpy_engine():
    """Plain numpy, forward and backward written out by hand: no graph, no tensor objects.
    The floor any numpy-based engine pays for the arithmetic alone."""

    def chain(data):
        a, b = data[0].copy(), data[1].copy()

        def step():
            s = a * b + a
            loss = np.maximum(s, 0).sum()
            g = (s > 0).astype(a.dtype)  # d loss / d s
            return loss, g * b + g, g * a

        def result():
            loss, ga, gb = step()
            return float(loss), [ga.astype(np.float64), gb.astype(np.float64)]

        return step, result

    def mlp(x_np, layers_np):
        x = x_np.copy()
        (w1, b1), (w2, b2), (w3, b3) = [(w.copy(), b.copy()) for w, b in layers_np]

        def step():
            z1 = x @ w1 + b1
            h1 = np.maximum(z1, 0)
            z2 = h1 @ w2 + b2
            h2 = np.maximum(z2, 0)
            out = h2 @ w3 + b3
            loss = out.mean()
            g = np.full(out.shape, 1 / out.size, dtype=out.dtype)
            gw3, gb3 = h2.T @ g, g.sum(0)
            g = (g @ w3.T) * (z2 > 0)
            gw2, gb2 = h1.T @ g, g.sum(0)
            g = (g @ w2.T) * (z1 > 0)
            gw1, gb1 = x.T @ g, g.sum(0)
            return loss, [gw1, gb1, gw2, gb2, gw3, gb3]

        def result():
            loss, grads = step()
            return float(loss), [gr.astype(np.float64) for gr in grads]

        return step, result

    return {"chain": chain, "mlp": mlp}


def _micrograd_engine(mg):
    Value = mg.engine.Value

    def chain(data):
        a = [Value(float(v)) for v in data[0].ravel()]
        b = [Value(float(v)) for v in data[1].ravel()]
        leaves = a + b

        def step():
            for v in leaves:
                v.grad = 0
            loss = sum((ai * bi + ai).relu() for ai, bi in zip(a, b))
            loss.backward()
            return loss

        def result():
            loss = step()
            return loss.data, [np.array([v.grad for v in a]).reshape(4, 4),
                               np.array([v.grad for v in b]).reshape(4, 4)]

        return step, result

    def mlp(x_np, layers_np):
        model = mg.nn.MLP(SIZES[0], list(SIZES[1:]))
        for layer, (w, bias) in zip(model.layers, layers_np):  # same weights as the others
            for j, neuron in enumerate(layer.neurons):
                for i, wi in enumerate(neuron.w):
                    wi.data = float(w[i, j])
                neuron.b.data = float(bias[j])
        xs = [[float(v) for v in row] for row in x_np]
        scale = 1.0 / len(xs)

        def step():
            model.zero_grad()
            loss = sum(model(xi) for xi in xs) * scale
            loss.backward()
            return loss

        def result():
            loss = step()
            return loss.data, None  # grads live per scalar; the loss is compared

        return step, result

    return {"chain": chain, "mlp": mlp}


BENCHMARKS = {
    "chain 4x4": ("chain", "(a*b + a).relu().sum(), a, b: 4x4 float32; micrograd: 16 Value pairs"),
    "mlp 16x16": ("mlp", "batch 16, 16->16->16->1, relu, mean loss; micrograd: its nn.MLP per sample"),
}


def _args(kind, data):
    chain, x, layers = data
    return (chain,) if kind == "chain" else (x, layers)


def _agree(mine, theirs, rtol=1e-4, atol=1e-5) -> str | None:
    """``None`` if microtorch's (loss, grads) match the peer's, else what differs."""
    loss_m, grads_m = mine
    loss_p, grads_p = theirs
    if not np.isclose(loss_m, loss_p, rtol=rtol, atol=atol):
        return f"loss differs: microtorch {loss_m:.6g} vs {loss_p:.6g}"
    if grads_p is not None:
        for i, (gm, gp) in enumerate(zip(grads_m, grads_p)):
            if not np.allclose(gm, gp, rtol=rtol, atol=atol):
                return f"grad {i} differs (max abs diff {np.max(np.abs(gm - gp)):.3g})"
    return None


def microtorch_steps() -> dict:
    """``{benchmark: step}`` for microtorch alone (used by ``run.py --profile``)."""
    import microtorch as mt

    data = _data()
    eng = _tensor_engine(mt)
    return {name: eng[kind](*_args(kind, data))[0] for name, (kind, _) in BENCHMARKS.items()}


def run(quick: bool) -> list[Row]:
    import microtorch as mt

    torch, torch_skip = torch_or_skip()
    mg, mg_skip = micrograd_or_skip()
    data = _data()
    engines = {"microtorch": _tensor_engine(mt)}
    if torch is not None:
        engines["torch"] = _tensor_engine(torch)
    engines["numpy"] = _numpy_engine()
    engines["tinytorch"] = _tensor_engine(tinytorch)
    if mg is not None:
        engines["micrograd"] = _micrograd_engine(mg)

    rows = []
    for name, (kind, desc) in BENCHMARKS.items():
        built, errors = {}, {}
        for eng, fns in engines.items():
            try:
                built[eng] = fns[kind](*_args(kind, data))
            except Exception as e:  # the engine is being edited in parallel: report, go on
                errors[eng] = f"{type(e).__name__}: {e}"
        mine = None
        if "microtorch" in built:
            try:
                mine = built["microtorch"][1]()
            except Exception as e:
                errors["microtorch"] = f"{type(e).__name__}: {e}"
                del built["microtorch"]
        # microtorch, torch and numpy take turns (their ratios are the point);
        # micrograd, 100x slower on the MLP, is timed on its own
        side_by_side = {e: built[e][0] for e in ("microtorch", "torch", "numpy", "tinytorch") if e in built}
        stats = measure_many(side_by_side, quick)
        if "micrograd" in built:
            stats["micrograd"] = measure(built["micrograd"][0], quick)
        gc_notes = {}
        if not quick:  # the same with the garbage collector running (cycles cost extra)
            for eng in ("microtorch", "micrograd"):
                if eng in stats:
                    on = measure(built[eng][0], quick, gc_on=True, repeats=9, budget_s=1.5)
                    gc_notes[eng] = (f"{eng} with gc on: {on.cell()} µs "
                                     f"({on.median_us / stats[eng].median_us:.2f}x its gc-off time)")

        skips = {"torch": torch_skip, "numpy": None, "tinytorch": None, "micrograd": mg_skip}
        for peer in PEERS:
            skip, target = skips[peer], TARGET if peer == "torch" else "-"
            row = Row(GROUP, name, stats=stats.get("microtorch"), peer=peer,
                      peer_stats=stats.get(peer), skipped=skip, error=errors.get("microtorch"),
                      target=target, notes=[desc])
            if peer in errors:
                row.skipped = f"error: {errors[peer]}"
            if mine is not None and peer in built:
                bad = _agree(mine, built[peer][1]())
                if bad:
                    row.notes.append(f"CHECK FAILED vs {peer}: {bad}")
                else:
                    row.notes.append(f"results agree with {peer}")
            row.notes += [gc_notes[e] for e in ("microtorch", peer) if e in gc_notes]
            if peer == "torch" and "torch" in stats and "tinytorch" in stats:
                floor = stats["tinytorch"].median_us / stats["torch"].median_us
                row.notes.append(f"the floor for a Python engine: tinytorch (closures over numpy, no "
                                 f"allocator, records or checks) takes {floor:.2f}x torch's time")
            if target != "-" and row.ratio is not None:
                row.met = row.ratio <= 0.5
            rows.append(row)
    return rows
