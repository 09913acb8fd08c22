"""The capstone's exercise (notebook 13): pick the configuration that fits a memory budget.

``choose_configuration(budget_bytes, results)`` gets the measured configurations of one
training step — ``{name: {"peak_bytes": int, "step_ms": float}}`` — and returns the name of
the *fastest* configuration whose peak fits the budget (``peak_bytes <= budget_bytes``), or
``None`` when none fits. Ties in time go to the smaller peak. The checker's reference is the
rule written out here; cases are fixed tables, then random ones (another seed when hidden).
"""
from __future__ import annotations

from .checking import _call, _fail, _passed, checker, hidden, rng


def _reference(budget: int, results: dict):
    fits = [(r["step_ms"], r["peak_bytes"], name) for name, r in results.items() if r["peak_bytes"] <= budget]
    return min(fits)[2] if fits else None


FIXED = {
    "pool": {"peak_bytes": 900_000, "step_ms": 4.0},
    "step arena": {"peak_bytes": 700_000, "step_ms": 3.6},
    "planned arena": {"peak_bytes": 420_000, "step_ms": 3.9},
    "checkpointed": {"peak_bytes": 300_000, "step_ms": 5.2},
}


def _cases():
    if not hidden():
        yield from ((b, FIXED) for b in (1_000_000, 700_000, 699_999, 420_000, 350_000, 299_999))
    r = rng()
    for _ in range(40):
        names = list(r.permutation(["pool", "step arena", "planned arena", "checkpointed", "sparse", "mmap"]))
        k = int(r.integers(2, 7))
        results = {str(n): {"peak_bytes": int(r.integers(1, 20)) * 50_000, "step_ms": float(r.integers(20, 80)) / 10}
                   for n in names[:k]}
        peaks = sorted(v["peak_bytes"] for v in results.values())
        budget = int(r.choice(peaks + [p - 1 for p in peaks] + [peaks[-1] * 2]))
        yield budget, results


@checker("choose_configuration")
def check_choose_configuration(fn) -> None:
    """``fn(budget_bytes, results) -> name | None``: the fastest configuration whose measured
    peak is at most the budget (ties: the smaller peak), or None if none fits."""
    n = 0
    for budget, results in _cases():
        n += 1
        want = _reference(budget, results)
        table = ", ".join(f"{k}: {v['peak_bytes']:,} B in {v['step_ms']} ms" for k, v in results.items())
        where = f"for a budget of {budget:,} B and {{{table}}}:"
        got = _call(fn, where, budget, {k: dict(v) for k, v in results.items()})
        if got == want:
            continue
        if got is not None and (not isinstance(got, str) or got not in results):
            _fail(f"{where} you returned {got!r}; return one of the names {list(results)} or None.")
        if want is None:
            _fail(f"{where} no configuration fits ({min(v['peak_bytes'] for v in results.values()):,} B is the "
                  f"smallest peak), so the answer is None; you returned {got!r}.")
        if got is None:
            _fail(f"{where} {want!r} fits ({results[want]['peak_bytes']:,} B ≤ {budget:,} B); you returned None.")
        mine = results[got]
        if mine["peak_bytes"] > budget:
            _fail(f"{where} {got!r} needs {mine['peak_bytes']:,} B, over the budget of {budget:,} B "
                  "(a configuration fits when its peak is at most the budget).")
        _fail(f"{where} {got!r} fits but takes {mine['step_ms']} ms; {want!r} fits too and takes "
              f"{results[want]['step_ms']} ms. Among the ones that fit, take the fastest (ties: the smaller peak).")
    _passed("check_choose_configuration", n)
