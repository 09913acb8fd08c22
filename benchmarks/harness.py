"""What every benchmark group shares: the :class:`Row` it reports, the timer, the table.

A group is a module with ``run(quick: bool) -> list[Row]`` (registered in ``run.py``).
Times are kept in microseconds everywhere (table and JSON), as median and interquartile
range (IQR) of per-iteration times over ``k`` repeats.
"""
from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, ContextManager


@dataclass
class Stats:
    """Per-iteration time of one callable: median and IQR over ``repeats`` samples, in µs."""

    median_us: float
    iqr_us: float
    q1_us: float
    q3_us: float
    repeats: int
    number: int  # calls per repeat (each sample is the mean over these calls)

    def cell(self) -> str:
        return f"{fmt_us(self.median_us)} ±{fmt_us(self.iqr_us / 2)}"


@dataclass
class Row:
    """One line of the table: microtorch against one peer on one benchmark.

    ``peer_stats`` is ``None`` with ``skipped`` set when the peer is not installed;
    ``stats`` is ``None`` with ``error`` set when microtorch itself failed (the run goes on).
    ``target`` is the goal in words; ``met`` is ``None`` when a row has no target.
    """

    group: str
    benchmark: str
    stats: Stats | None = None
    peer: str = "-"
    peer_stats: Stats | None = None
    target: str = "-"
    met: bool | None = None
    skipped: str | None = None
    error: str | None = None
    value: str | None = None  # a non-time result shown in the microtorch column (e.g. "none")
    notes: list[str] = field(default_factory=list)
    peer_value: str | None = None  # a non-time result shown in the peer column (e.g. "212 MiB")
    value_ratio: float | None = None  # the ratio of non-time results (value / peer_value)

    @property
    def ratio(self) -> float | None:
        if self.value_ratio is not None:
            return self.value_ratio
        if self.stats is None or self.peer_stats is None or self.peer_stats.median_us == 0:
            return None
        return self.stats.median_us / self.peer_stats.median_us

    @property
    def failed(self) -> bool:
        """microtorch errored, or its results disagreed with a peer's (targets do not count)."""
        return self.error is not None or any(n.startswith("CHECK FAILED") for n in self.notes)

    def to_json(self) -> dict:
        d = asdict(self)
        d["ratio"] = self.ratio
        return d


# ------------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------------
def measure(fn: Callable[[], object], quick: bool, **kwargs) -> Stats:
    """Time one callable; see :func:`measure_many` for the method and the options."""
    return measure_many({"fn": fn}, quick, **kwargs)["fn"]


def measure_many(fns: dict[str, Callable[[], object]], quick: bool, *, gc_on: bool = False,
                 min_repeat_s: float | None = None, repeats: int | None = None,
                 budget_s: float | None = None,
                 scopes: dict[str, Callable[[], ContextManager]] | None = None,
                 settle: int = 0) -> dict[str, Stats]:
    """Time several callables side by side; ``{name: Stats}`` of per-call time.

    Each callable is warmed up, then gets a call count ``n`` so one repeat lasts about
    ``min_repeat_s`` (0.05 s; quick 0.01 s). Then ``k`` rounds run, each taking one
    repeat of every callable in turn, so a burst of load on the machine hits all of them
    alike and their ratio stays meaningful. ``k`` is ``repeats`` (21; quick 5), but at
    least 5 and at most what fits in ``budget_s`` per callable (3 s of wall time; quick
    1 s), so a slow peer (micrograd's MLP) does not dominate the run.

    As in :mod:`timeit`, the garbage collector is off inside a repeat, and a collection
    runs (untimed) between repeats. ``gc_on=True`` times with the collector running, as a
    user would see it: an engine that leaves reference cycles behind (micrograd's
    ``_backward`` closures do) pays for collecting them there. Either way everything alive
    before the measurement is frozen (``gc.freeze()``), so a collection costs what the
    engine's own garbage costs, not what the rest of the process holds (torch's modules).

    ``scopes`` maps a callable's name to a context-manager factory: each of that callable's
    repeats (and its warm-up and calibration) runs inside a fresh ``with scopes[name]():``,
    entered before the clock starts and left after it stops — for a configuration that
    must hold only while that callable runs (``mt.memory.use_heap``, a new ``mt.trace()``
    per repeat so a recording does not grow without bound).

    ``settle`` untimed calls open each repeat (after the collection, inside the scope).
    Taking turns means each repeat starts right after the other callables ran and pushed
    this one's buffers out of the CPU caches; for a step that works on megabytes (a training
    step), that first cold call is an artifact of the turns — a training loop runs one
    engine on and on — and with few calls per repeat it would weigh on the median.
    """
    min_repeat_s = min_repeat_s if min_repeat_s is not None else (0.01 if quick else 0.05)
    repeats = repeats if repeats is not None else (5 if quick else 21)
    budget_s = (budget_s if budget_s is not None else (1.0 if quick else 3.0)) * len(fns)
    clock = time.perf_counter
    was_enabled = gc.isenabled()
    scopes = scopes or {}

    def scope(name: str) -> ContextManager:
        return scopes[name]() if name in scopes else contextlib.nullcontext()

    def timed(name: str, fn, number: int) -> float:
        """Seconds for ``number`` calls (the collection and settling calls before them are not timed)."""
        gc.collect()
        with scope(name):
            if not gc_on:
                gc.disable()
            try:
                for _ in range(settle):
                    fn()
                t0 = clock()
                for _ in range(number):
                    fn()
                return clock() - t0
            finally:
                if was_enabled:
                    gc.enable()

    gc.collect()
    gc.freeze()
    try:
        numbers = {}
        for name, fn in fns.items():
            # warm-up: caches, lazy imports, first-call allocations; at least 3 calls
            warm_until = clock() + (0.05 if quick else 0.2)
            calls = 0
            with scope(name):
                while calls < 3 or clock() < warm_until:
                    fn()
                    calls += 1
            # calibrate: n calls per repeat so that a repeat lasts about min_repeat_s
            number = 1
            while True:
                dt = timed(name, fn, number)
                if dt >= min_repeat_s / 10:
                    break
                number *= 10
            numbers[name] = max(1, math.ceil(number * min_repeat_s / dt))

        samples: dict[str, list[float]] = {name: [] for name in fns}
        start = clock()
        rounds = 0
        while rounds < repeats and (rounds < 5 or clock() - start < budget_s):
            for name, fn in fns.items():
                samples[name].append(timed(name, fn, numbers[name]) / numbers[name] * 1e6)
            rounds += 1
    finally:
        gc.unfreeze()
    return {name: summarize(samples[name], numbers[name]) for name in fns}


def summarize(samples_us: list[float], number: int = 1) -> Stats:
    """Median and IQR (inclusive quartiles) of per-iteration samples in µs."""
    samples_us = sorted(samples_us)
    if len(samples_us) >= 2:
        q1, _, q3 = statistics.quantiles(samples_us, n=4, method="inclusive")
    else:
        q1 = q3 = samples_us[0]
    return Stats(median_us=statistics.median(samples_us), iqr_us=q3 - q1, q1_us=q1, q3_us=q3,
                 repeats=len(samples_us), number=number)


# ------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------
HEADER = ("benchmark", "microtorch µs", "peer", "peer µs", "ratio", "target", "met?")


def print_profile(step: Callable[[], object], steps: int, title: str, warmup: int = 2,
                  top: int = 15) -> None:
    """Run ``step`` ``warmup`` times, then cProfile ``steps`` runs and print the top functions."""
    import cProfile
    import pstats

    for _ in range(warmup):
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    print(f"=== cProfile: {title}, {steps} runs, top {top} by tottime ===")
    pstats.Stats(prof).strip_dirs().sort_stats("tottime").print_stats(top)


def fmt_us(us: float) -> str:
    if us >= 1000:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _cells(row: Row) -> list[str]:
    error = row.error if row.error is None or len(row.error) <= 60 else row.error[:57] + "..."
    mine = row.value if row.value is not None else (
        row.stats.cell() if row.stats else f"error: {error}" if row.error else "-")
    if row.skipped:
        return [row.benchmark, mine, row.peer, row.skipped]
    peer = row.peer_value if row.peer_value is not None else (
        row.peer_stats.cell() if row.peer_stats else "-")
    ratio = f"{row.ratio:.3g}x" if row.ratio is not None else "-"
    met = "-" if row.met is None else ("yes" if row.met else "NO")
    return [row.benchmark, mine, row.peer, peer, ratio, row.target, met]


def format_table(rows: list[Row]) -> str:
    """A plain-text table; a skipped peer's message spans the columns after ``peer``."""
    cells = [_cells(r) for r in rows]
    n = len(HEADER)
    widths = [len(h) for h in HEADER]
    for c in cells:
        if len(c) == n:  # spanning (skipped) rows do not widen the columns
            widths = [max(w, len(x)) for w, x in zip(widths, c)]
        else:
            widths[:3] = [max(w, len(x)) for w, x in zip(widths[:3], c[:3])]

    def line(c):
        right = {1, 3, 4} if len(c) == n else {1}  # numbers right-aligned
        parts = [x.rjust(w) if i in right else x.ljust(w) for i, (x, w) in enumerate(zip(c, widths))]
        return "  ".join(parts).rstrip()

    out = [line(list(HEADER)), "  ".join("-" * w for w in widths)]
    group = None
    for r, c in zip(rows, cells):
        if group is not None and r.group != group:
            out.append("")
        group = r.group
        out.append(line(c))
    return "\n".join(out)
