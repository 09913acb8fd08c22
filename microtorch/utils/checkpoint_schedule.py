"""Where to checkpoint a chain under a memory budget: √n segments and the exact optimum.

A schedule cuts the chain's layers ``0 … n-1`` into consecutive segments ``(start, stop,
checkpointed)`` (half-open ranges). A plain segment keeps what its layers save; a
checkpointed one keeps only its output (the next segment's input) and recomputes its
layers when backward reaches it. The model (:func:`predict`), with the layer costs of
:mod:`microtorch.utils.checkpoint_cost`:

* kept(s) = Σ saved over the layers of s  (plain),   output of its last layer  (checkpointed)
* peak    = max over segments s of  Σ kept(s') for s' up to s  +  recomputed(s)  +  workspace(s)
  where recomputed(s) = Σ saved over s's layers minus its output (kept already: the last
  layer's min(saved, output)) if s is checkpointed, else 0, and workspace(s) = the largest
  workspace of its layers — backward runs the segments last to first, and when it is at s
  the later ones have freed their bytes;
* time    = Σ forward + Σ backward  +  Σ forward over the checkpointed layers — but a
  segment's last layer when it is ``rerun_free``: the rerun stops once it has remade what
  backward needs, and nothing of that layer is needed (a Linear + ReLU block: its ReLU's
  output is the segment's output, its Linear's input is the block before's saved output).

:func:`sqrt_n` is Chen et al.'s schedule (2016): about √n segments of √n layers, all but
the last checkpointed — kept bytes O(√n) for one extra forward. :func:`optimal` is an exact
dynamic program over the same model: the least recompute time whose peak fits the
budget. :func:`brute_force` tries every schedule (small chains; the tests' reference).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from .checkpoint_cost import Chain, layer_costs


@dataclass(frozen=True)
class Schedule:
    """A schedule and what the model predicts for it."""

    segments: tuple
    peak: float
    time: float
    recompute: float
    method: str = ""
    budget: float | None = None
    chain: Chain | None = field(default=None, repr=False, compare=False)

    @property
    def checkpointed(self) -> list[int]:
        """The layers that run twice (forward, then again in backward)."""
        return [i for a, b, c in self.segments if c for i in range(a, b)]

    @property
    def boundaries(self) -> list[int]:
        """Index of each segment's first layer."""
        return [a for a, _, _ in self.segments]

    @property
    def fits(self) -> bool:
        return self.budget is None or self.peak <= self.budget

    def __str__(self) -> str:
        parts = " ".join(f"[{a}..{b - 1}]{'*' if c else ''}" for a, b, c in self.segments)
        return (f"{self.method or 'schedule'}: {parts} (* = recomputed) · predicted peak "
                f"{self.peak:,.0f} B, time {self.time:.4g}, recompute {self.recompute:.4g}")


def _check_segments(n: int, segments) -> tuple:
    segs = tuple((int(a), int(b), bool(c)) for a, b, c in segments)
    at = 0
    for a, b, _ in segs:
        if a != at or b <= a:
            raise ValueError(f"segments must cover layers 0..{n - 1} in order without gaps or "
                             f"empty pieces; got {list(segs)}")
        at = b
    if at != n:
        raise ValueError(f"segments must end at layer {n - 1} (stop={n}); got {list(segs)}")
    return segs


def predict(chain: Chain, segments, method: str = "", budget=None) -> Schedule:
    """The model's peak bytes and time of running ``chain`` with these segments."""
    layers = chain.layers
    segs = _check_segments(len(layers), segments)
    kept, peak, recompute = 0, 0, 0.0
    for a, b, ckpt in segs:
        inside = layers[a:b]
        saved = sum(layer.saved for layer in inside)
        kept += inside[-1].output if ckpt else saved
        work = max(layer.workspace for layer in inside)
        peak = max(peak, kept + (_recomputed(inside, saved) if ckpt else 0) + work)
        if ckpt:
            recompute += _rerun_time(inside)
    base = sum(layer.forward + layer.backward for layer in layers)
    return Schedule(segs, peak, base + recompute, recompute, method, budget, chain)


def _recomputed(inside, saved: int) -> int:
    """Bytes a checkpointed segment recomputes: what its layers save, except its output —
    kept anyway (the next segment's input), so if the last layer saved it, it is not made again."""
    last = inside[-1]
    return saved - min(last.saved, last.output)


def _rerun_time(inside) -> float:
    """Time to recompute a checkpointed segment: its layers' forward, but the last one's if
    the rerun can stop before it (``rerun_free``: nothing of it is needed again)."""
    t = sum(layer.forward for layer in inside)
    return t - inside[-1].forward if inside[-1].rerun_free and len(inside) > 1 else t


def sqrt_segments(n: int) -> list[tuple[int, int]]:
    """``k = max(1, round(√n))`` consecutive ranges ``(start, stop)`` covering ``range(n)``,
    lengths differing by at most one (the longer ones first)."""
    if n < 1:
        raise ValueError(f"a chain needs at least one layer, got n={n}")
    k = max(1, round(math.sqrt(n)))
    size, extra = divmod(n, k)
    out, at = [], 0
    for i in range(k):
        stop = at + size + (1 if i < extra else 0)
        out.append((at, stop))
        at = stop
    return out


def sqrt_n(chain: Chain, budget=None) -> Schedule:
    """Chen et al.'s √n schedule: :func:`sqrt_segments`, every segment but the last
    checkpointed (the last one's backward comes right after its forward)."""
    ranges = sqrt_segments(len(chain))
    segs = [(a, b, i < len(ranges) - 1) for i, (a, b) in enumerate(ranges)]
    return predict(chain, segs, "√n", budget)


def no_checkpoint(chain: Chain, budget=None) -> Schedule:
    """Everything stored: one plain segment."""
    return predict(chain, [(0, len(chain), False)], "none", budget)


def optimal(chain: Chain, budget: float) -> Schedule | None:
    """The schedule with the least recompute time whose predicted peak is ≤ ``budget``
    (None if none fits) — exact, by dynamic programming over the segment ends.

    After the segments covering layers ``0..j-1`` the only thing the rest depends on is
    the bytes kept so far, K; so for each j keep the Pareto frontier of (K, recompute
    time) pairs — a pair with more bytes *and* more time can never be better — and extend
    each by a plain or a checkpointed segment ``[j, i)`` whose peak term fits.
    """
    layers = chain.layers
    n = len(layers)
    prefix_saved = list(itertools.accumulate((layer.saved for layer in layers), initial=0))
    prefix_fwd = list(itertools.accumulate((layer.forward for layer in layers), initial=0.0))
    # frontier[j]: {kept bytes: (recompute time, previous (j, kept), segment)}
    frontier: list[dict] = [dict() for _ in range(n + 1)]
    frontier[0][0] = (0.0, None, None)
    for j in range(n):
        frontier[j] = _pareto(frontier[j])
        work = 0
        for i in range(j + 1, n + 1):
            work = max(work, layers[i - 1].workspace)
            saved = prefix_saved[i] - prefix_saved[j]
            again = saved - min(layers[i - 1].saved, layers[i - 1].output)  # see _recomputed
            rerun = prefix_fwd[i] - prefix_fwd[j]
            if layers[i - 1].rerun_free and i - j > 1:  # see _rerun_time
                rerun -= layers[i - 1].forward
            for kept, (t, _, _) in list(frontier[j].items()):
                for ckpt in (False, True):
                    k2 = kept + (layers[i - 1].output if ckpt else saved)
                    if k2 + (again if ckpt else 0) + work > budget:
                        continue
                    t2 = t + (rerun if ckpt else 0.0)
                    old = frontier[i].get(k2)
                    if old is None or t2 < old[0]:
                        frontier[i][k2] = (t2, (j, kept), (j, i, ckpt))
    if not frontier[n]:
        return None
    kept = min(frontier[n], key=lambda k: (frontier[n][k][0], k))
    segs, at = [], (n, kept)
    while at[0] > 0:
        _, prev, seg = frontier[at[0]][at[1]]
        segs.append(seg)
        at = prev
    return predict(chain, segs[::-1], "optimal", budget)


def _pareto(points: dict) -> dict:
    """Keep the (kept, time) pairs no other pair beats on both."""
    out, best = {}, math.inf
    for k in sorted(points):
        if points[k][0] < best:
            out[k] = points[k]
            best = points[k][0]
    return out


def brute_force(chain: Chain, budget: float) -> Schedule | None:
    """Every way to cut the chain and label the pieces, the best that fits (2·3ⁿ⁻¹ schedules:
    small chains only). The reference the dynamic program is tested against."""
    n = len(chain)
    if n > 14:
        raise ValueError(f"brute_force tries 2·3^(n-1) schedules; n={n} is too many (use optimal)")
    best = None
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        pieces = list(zip(bounds, bounds[1:]))
        for labels in itertools.product((False, True), repeat=len(pieces)):
            s = predict(chain, [(a, b, c) for (a, b), c in zip(pieces, labels)], "brute force", budget)
            if s.peak <= budget and (best is None or (s.recompute, s.peak) < (best.recompute, best.peak)):
                best = s
    return best


def schedule(model_or_chain, budget_bytes: float, method: str = "optimal", input=None,
             repeat: int = 3) -> Schedule:
    """Which layers to keep and which to recompute under ``budget_bytes``.

    ``model_or_chain``: a :class:`~microtorch.utils.checkpoint_cost.Chain`, or the layers
    (an ``nn.Sequential`` or a list) with an example ``input`` to measure them on.
    ``method``: ``"optimal"`` (the dynamic program), ``"sqrt"`` (√n, whatever the budget)
    or ``"none"``. Raises if the optimum does not fit: no schedule of this model does.
    """
    chain = model_or_chain
    if not isinstance(chain, Chain):
        if input is None:
            raise TypeError("schedule: give a Chain, or the layers together with input=<an example "
                            "batch> to measure them on")
        chain = layer_costs(model_or_chain, input, repeat)
    if method == "optimal":
        best = optimal(chain, budget_bytes)
        if best is None:
            least = optimal(chain, math.inf)
            floor = min_peak(chain)
            raise ValueError(f"no schedule fits {budget_bytes:,.0f} bytes: the smallest predicted "
                             f"peak of this chain is {floor:,.0f} bytes (no checkpoints: "
                             f"{least.peak:,.0f}); raise the budget")
        return best
    if method == "sqrt":
        return sqrt_n(chain, budget_bytes)
    if method == "none":
        return no_checkpoint(chain, budget_bytes)
    raise ValueError(f"method must be 'optimal', 'sqrt' or 'none', got {method!r}")


def min_peak(chain: Chain) -> float:
    """The smallest predicted peak any schedule reaches (bisection over the budget)."""
    lo, hi = 0.0, float(min(no_checkpoint(chain).peak, sqrt_n(chain).peak))
    for _ in range(60):
        mid = (lo + hi) / 2
        if optimal(chain, mid) is None:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1:
            break
    return optimal(chain, hi).peak


def frontier(chain: Chain, budgets) -> list[Schedule | None]:
    """The optimal schedule for each budget: the predicted memory/time trade-off curve."""
    return [optimal(chain, b) for b in budgets]
