"""Responsiveness of the step-through player: how long one step of every panel takes.

The target (the "Pictures and the step-through player" issue): moving one step re-renders
all panels in ≤ 100 ms median and ≤ 250 ms at the 95th percentile, for traces of up to
2,000 events. A step here is exactly what a click on "forward ▶" does headless:
``player.go(k + 1)`` — replay to the new event, redraw every panel (the graph through
Graphviz, the matplotlib panels through their painters), turn each into HTML with its text
description. Every step is new to the player (its per-step HTML cache never hits), so this
is the cost of a step seen for the first time; stepping back to a step already seen costs
next to nothing.

Traces: an MLP (4 → 16 → 16 → 1, batch 32) trained with SGD, activations in a step arena,
recorded until it has at least N events, cut to exactly N (a prefix of a trace is a trace).
Rows: the whole player with all five trace panels (graph, arena, pool, refcounts,
liveness) stepping over ops and over every event; then each panel alone; then starting a
player (first picture of every panel, matplotlib's import included when it is the first).

No peer: these rows have targets, not ratios.
"""
from __future__ import annotations

import statistics
import time

from .harness import Row, summarize

GROUP = "player"
PANELS = ("graph", "arena", "pool", "refcounts", "liveness")
MEDIAN_MS, P95_MS = 100.0, 250.0


def training_trace(n_events: int):
    """A recorded training run of at least ``n_events`` events, cut to exactly that many."""
    import microtorch as mt

    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 16), mt.nn.ReLU(), mt.nn.Linear(16, 16), mt.nn.ReLU(),
                             mt.nn.Linear(16, 1))
    x, y = mt.randn(32, 4), mt.randn(32, 1)
    x.name, y.name = "x", "y"
    opt = mt.optim.SGD(model.parameters(), lr=0.05)
    arena = mt.memory.Arena(capacity=4096, name="step arena")
    with mt.trace() as tr:
        while len(tr) < n_events:
            with mt.memory.step_arena(arena):
                loss = mt.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            del loss
    return mt.Trace(tr.events[:n_events])


def _p95(samples: list[float]) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def time_steps(trace, panels, steps: str, limit: int | None) -> tuple[list[float], dict[str, list[float]]]:
    """Per-step wall time (µs) of a fresh player moved forward one step at a time, and the
    time of each panel within those steps."""
    from microtorch.viz.player import Player

    p = Player(trace, panels=list(panels), steps=steps)  # the first step is drawn here (not timed)
    per_panel: dict[str, list[float]] = {name: [] for name in panels}
    inner = p._panel_html

    def timed(panel, t):
        t0 = time.perf_counter()
        out = inner(panel, t)
        per_panel[panel.name].append((time.perf_counter() - t0) * 1e6)
        return out

    p._panel_html = timed
    n = len(p.steps) if limit is None else min(len(p.steps), limit + 1)
    samples = []
    for k in range(2, n + 1):
        t0 = time.perf_counter()
        p.go(k)
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples, per_panel


def _step_row(name: str, samples: list[float], per_panel: dict, n_events: int) -> Row:
    stats = summarize(samples)
    med, p95 = stats.median_us / 1000, _p95(samples) / 1000
    notes = [f"{len(samples)} steps over a {n_events}-event trace; median {med:.1f} ms, "
             f"p95 {p95:.1f} ms, max {max(samples) / 1000:.1f} ms"]
    if len(per_panel) > 1:
        notes.append("  per panel (median ms): " + ", ".join(
            f"{k} {statistics.median(v) / 1000:.1f}" for k, v in per_panel.items() if v))
    return Row(GROUP, name, stats, target=f"median ≤ {MEDIAN_MS:.0f} ms, p95 ≤ {P95_MS:.0f} ms",
               met=med <= MEDIAN_MS and p95 <= P95_MS, notes=notes)


def run(quick: bool) -> list[Row]:
    try:
        import ipywidgets  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return [Row(GROUP, "player step", skipped=f"skipped: {exc.name} not installed (the viz extra)")]
    rows: list[Row] = []
    sizes = (2000,) if quick else (500, 2000)
    limit = 30 if quick else None
    for n in sizes:
        tr = training_trace(n)
        for steps in ("ops", "events"):
            name = f"player step, {len(PANELS)} panels, {n} events, steps={steps!r}"
            try:
                samples, per_panel = time_steps(tr, PANELS, steps, limit if steps == "ops" else (30 if quick else 300))
                rows.append(_step_row(name, samples, per_panel, n))
            except Exception as exc:  # report, keep going
                rows.append(Row(GROUP, name, error=f"{type(exc).__name__}: {exc}"))
    tr = training_trace(2000)
    if not quick:
        for panel in PANELS:
            name = f"one panel step: {panel}, 2000 events"
            try:
                samples, per_panel = time_steps(tr, [panel], "ops", None)
                stats = summarize(samples)
                rows.append(Row(GROUP, name, stats, notes=[
                    f"median {stats.median_us / 1000:.1f} ms, p95 {_p95(samples) / 1000:.1f} ms"]))
            except Exception as exc:
                rows.append(Row(GROUP, name, error=f"{type(exc).__name__}: {exc}"))
    from microtorch.viz.player import Player

    starts = []
    for _ in range(1 if quick else 3):
        fresh = training_trace(2000)  # a new trace: nothing cached for it
        t0 = time.perf_counter()
        Player(fresh, panels=list(PANELS))
        starts.append((time.perf_counter() - t0) * 1e6)
    rows.append(Row(GROUP, f"start a player, {len(PANELS)} panels, 2000 events", summarize(starts),
                    notes=[f"{len(starts)} run(s), median {statistics.median(starts) / 1000:.0f} ms "
                           "(the first includes importing matplotlib)"]))
    return rows
