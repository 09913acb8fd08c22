"""Recomputation: what checkpointing saves in bytes and costs in time, against the plain run.

The model is a 64-layer MLP chain (each layer Linear 512 → 512 then ReLU; batch 64,
float32), one training step = forward, loss (mean of squares), backward, SGD update.
Configurations, timed side by side in one :func:`~benchmarks.harness.measure_many` call:

* ``plain``: no checkpoints;
* ``√n``: Chen et al.'s schedule (8 segments of 8 layers, all but the last checkpointed,
  ``mt.utils.checkpoint.sqrt_n``), run with ``checkpoint(..., use_reentrant=False)``;
* ``optimal``: the dynamic program's schedule under √n's predicted peak
  (``mt.utils.checkpoint.optimal``), on the measured bytes with the FLOPs model's times
  (the layers are identical: their measured times differ only by noise, which the exact
  optimum would otherwise exploit).

Bytes are the allocators' counters (``mt.memory`` live and peak bytes): *kept* is live
after forward minus live before (the activations kept for backward), *peak* the step's
peak above what was live before it (noted twice: with every ``.grad`` allocated, as the
cost model measures its layers, next to the prediction; and after ``zero_grad()``). Targets: √n keeps ≤ 25 % of the plain run's kept
bytes at ≤ 1.30× its step time; the optimal schedule is no slower than √n (within the
2 % the two differ by from run to run). PyTorch: ``torch.utils.checkpoint.
checkpoint_sequential`` with 8 segments on the same model, its time ratio to its own
plain step (no target: reported). BLAS at one thread, as in the training group.

    python -m benchmarks.checkpoint       # this group alone, quick
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import replace

import numpy as np

from benchmarks.harness import Row, measure_many
from benchmarks.peers import torch_or_skip
from benchmarks.training import _Blas

GROUP = "checkpoint"
LAYERS, WIDTH, BATCH = 64, 512, 64
NOISE = 1.02  # "no slower than √n": within the run-to-run noise of two near-equal schedules


def _model(mt):
    mt.manual_seed(0)
    return [mt.nn.Sequential(mt.nn.Linear(WIDTH, WIDTH), mt.nn.ReLU()) for _ in range(LAYERS)]


def _step(mt, C, blocks, opt, x, segments):
    def step():
        opt.zero_grad()
        y = C.run_schedule(blocks, segments, x)
        y.pow(2).mean().backward()
        opt.step()
    return step


def _kept_and_peak(mt, C, blocks, opt, x, segments) -> tuple[int, int]:
    from microtorch.memory import placement

    _step(mt, C, blocks, opt, x, segments)()  # the flat gradient buffer exists from here on
    opt.zero_grad()
    before = placement.live_bytes
    placement.reset_peak()
    y = C.run_schedule(blocks, segments, x)
    kept = placement.live_bytes - before
    y.pow(2).mean().backward()
    del y
    peak = placement.peak_bytes - before
    return kept, peak


def _torch_rows(quick: bool) -> list[Row]:
    torch, skip = torch_or_skip()
    bench = "torch.utils.checkpoint √n / its plain step"
    if torch is None:
        return [Row(GROUP, bench, peer="torch", skipped=skip)]
    import torch.utils.checkpoint as tc

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(LAYERS) for m in (torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU())])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(BATCH, WIDTH)

    def plain():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    def ckpt():
        opt.zero_grad()
        tc.checkpoint_sequential(model, 8, x, use_reentrant=False).pow(2).mean().backward()
        opt.step()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = measure_many({"ckpt": ckpt, "plain": plain}, quick, settle=1)
    ratio = stats["ckpt"].median_us / stats["plain"].median_us
    return [Row(GROUP, bench, stats=stats["ckpt"], peer="torch plain", peer_stats=stats["plain"],
                notes=[f"torch.utils.checkpoint (8 segments, use_reentrant=False) costs {ratio:.3f}x "
                       f"torch's plain step on the same model (torch {torch.__version__}, "
                       f"{torch.get_num_threads()} thread)"])]


def run(quick: bool) -> list[Row]:
    import microtorch as mt
    from microtorch.utils import checkpoint as C

    with _Blas().threads(1):
        blocks = _model(mt)
        params = [p for b in blocks for p in b.parameters()]
        opt = mt.optim.SGD(params, lr=1e-4)
        x = mt.randn(BATCH, WIDTH)
        chain = C.layer_costs(blocks, x, repeat=2 if quick else 5)
        plain, sqrt = C.no_checkpoint(chain), C.sqrt_n(chain)
        # the dynamic program on the measured bytes and the FLOPs model's times: the 64 layers
        # are identical, so their measured times differ by noise only, which it would exploit
        flops = C.flops_model(blocks, x)
        costed = C.Chain([replace(m, forward=f.forward, backward=f.backward) for m, f in zip(chain, flops)],
                         "FLOPs")
        best = C.predict(chain, C.optimal(costed, sqrt.peak).segments, "optimal", sqrt.peak)
        schedules = {"plain": plain, "√n": sqrt, "optimal": best}
        memory = {k: _kept_and_peak(mt, C, blocks, opt, x, s.segments) for k, s in schedules.items()}
        # the model's regime: every .grad allocated, backward adding into it (layer_costs measures so)
        model_regime = {k: C.measure(blocks, s, x, loss=lambda y: y.pow(2).mean(), repeat=1)["peak_bytes"]
                        for k, s in schedules.items()}
        steps = {k: _step(mt, C, blocks, opt, x, s.segments) for k, s in schedules.items()}
        stats = measure_many(steps, quick, settle=1)
        rows = []
        kept_ratio = memory["√n"][0] / memory["plain"][0]
        rows.append(Row(GROUP, f"√n kept activation bytes ({LAYERS} layers, {len(sqrt.segments)} segments)",
                        value=f"{memory['√n'][0]:,} B", peer="plain", peer_value=f"{memory['plain'][0]:,} B",
                        value_ratio=kept_ratio, target="≤ 0.25x", met=kept_ratio <= 0.25,
                        notes=["peak over the step above what was live before it, measured with every .grad "
                               "allocated (the cost model's regime) vs predicted: " + ", ".join(
                                   f"{k} {model_regime[k]:,} B vs {s.peak:,.0f} B" for k, s in schedules.items()),
                               "the same after optimizer.zero_grad() (.grad None: the weight gradients go straight "
                               "into the flat buffer, no workspace): " + ", ".join(
                                   f"{k} {memory[k][1]:,} B" for k in schedules)]))
        t_ratio = stats["√n"].median_us / stats["plain"].median_us
        rows.append(Row(GROUP, "√n step time", stats=stats["√n"], peer="plain", peer_stats=stats["plain"],
                        target="≤ 1.30x", met=t_ratio <= 1.30,
                        notes=[f"predicted step times (measured layer costs): plain {plain.time * 1e3:.1f} ms, "
                               f"√n {sqrt.time * 1e3:.1f} ms, optimal {best.time * 1e3:.1f} ms"]))
        o_ratio = stats["optimal"].median_us / stats["√n"].median_us
        rows.append(Row(GROUP, "optimal at √n's budget, step time", stats=stats["optimal"], peer="√n",
                        peer_stats=stats["√n"], target=f"≤ 1x (±{(NOISE - 1) * 100:.0f} %)", met=o_ratio <= NOISE,
                        notes=[f"optimal schedule: {best}", f"recomputed layers: optimal {len(best.checkpointed)}, "
                               f"√n {len(sqrt.checkpointed)}"]))
        rows += _torch_rows(quick)
    return rows


if __name__ == "__main__":
    from benchmarks.harness import format_table

    out = run(quick="--full" not in sys.argv)
    print(format_table(out))
    for r in out:
        for n in r.notes:
            print(f"- {r.benchmark}: {n}")
