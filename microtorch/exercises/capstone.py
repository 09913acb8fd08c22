"""The capstone's exercise (notebook 13): pick the configuration that fits a memory budget.

``choose_configuration(budget_bytes, results)`` gets the measured configurations of one
training step — ``{name: {"peak_bytes": int, "step_ms": float}}`` — and returns the name of
the *fastest* configuration whose peak fits the budget (``peak_bytes <= budget_bytes``), or
``None`` when none fits. Ties in time go to the smaller peak. The checker's reference is the
rule written out here; cases are fixed tables, then random ones (another seed when hidden).
"""
from __future__ import annotations

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng


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


check_choose_configuration = checker("choose_configuration")(check_choose_configuration)


# ----------------------------------------------------------------------------------------------
# Exercise 1: the peak of a step's live activations, from its events
# ----------------------------------------------------------------------------------------------
def _reference_peak(events) -> int:
    live = peak = 0
    sizes = {}
    for e in events:
        if e["kind"] == "alloc" and e.get("tag") == "activation":
            sizes[e["storage"]] = e["nbytes"]
            live += e["nbytes"]
            peak = max(peak, live)
        elif e["kind"] == "free" and e["storage"] in sizes:
            live -= sizes.pop(e["storage"])
    return peak


def _recorded_traces():
    import microtorch as mt

    out = []
    for width, arena in ((16, False), (48, True), (32, False)):
        mt.manual_seed(width)
        model = mt.nn.MLP(8, [width, width], 3)
        x, y = mt.randn(20, 8), mt.randint(0, 3, (20,))
        with mt.trace() as tr:
            if arena:
                with mt.memory.step_arena():
                    mt.nn.functional.cross_entropy(model(x), y).backward()
            else:
                mt.nn.functional.cross_entropy(model(x), y).backward()
        out.append((f"a recorded training step (MLP 8→{width}→{width}→3{', step arena' if arena else ''})", tr))
    return out


def _random_trace(r):
    from ..trace.recorder import Trace

    events, live, sid = [], [], 100
    for _ in range(int(r.integers(5, 40))):
        if live and r.random() < 0.45:
            s = live.pop(int(r.integers(len(live))))
            events.append({"kind": "free", "storage": s, "nbytes": 0})
        else:
            sid += 1
            tag = str(r.choice(["activation", "activation", "gradient", "tensor"]))
            events.append({"kind": "alloc", "storage": sid, "nbytes": int(r.integers(1, 64)) * 64, "tag": tag})
            live.append(sid)
    events.insert(0, {"kind": "free", "storage": 7, "nbytes": 4096})  # a storage from before the trace
    for i, e in enumerate(events):
        e["step"] = i
    return Trace(events)


def _peak_blocks():
    from ..trace.recorder import Trace
    return [(Trace, "peak"), (Trace, "live_bytes"), (Trace, "lifetimes")]


def check_activation_peak(fn) -> None:
    """``fn(trace) -> int``: the most bytes of storages tagged ``activation`` live at once, from
    the trace's ``alloc`` (``storage``, ``nbytes``, ``tag``) and ``free`` (``storage``) events. A
    storage freed that was not allocated in the trace (it was live before) does not count."""
    from ..trace.recorder import Trace

    cases = [] if hidden() else _recorded_traces()
    r = rng()
    cases += [(f"random trace {i + 1}", _random_trace(r)) for i in range(30)]
    for what, tr in cases:
        want = _reference_peak(tr.events)
        got = _call(fn, f"for {what}:", Trace(list(tr.events)))
        if got == want:
            continue
        if got is None:
            _fail(f"for {what}: your function returned None; return the peak in bytes (an int).")
        everything = max_live = live = 0
        sizes = {}
        for e in tr.events:
            if e["kind"] == "alloc":
                sizes[e["storage"]] = e["nbytes"]
                live += e["nbytes"]
                max_live = max(max_live, live)
            elif e["kind"] == "free" and e["storage"] in sizes:
                live -= sizes.pop(e["storage"])
        everything = max_live
        total = sum(e["nbytes"] for e in tr.events if e["kind"] == "alloc" and e.get("tag") == "activation")
        hint = ("that is the peak of every storage; count only the ones tagged 'activation'." if got == everything
                else "that is every activation ever allocated: subtract a storage's bytes when it is freed."
                if got == total else "walk the events in order: add at an activation's alloc, subtract at its "
                "free (only for storages you saw allocated), and keep the largest sum.")
        _fail(f"for {what}: the peak of live activation bytes is {want:,}; you returned {got!r}: {hint}")
    _passed("check_activation_peak", len(cases))


check_activation_peak = checker("activation_peak", blocks=_peak_blocks)(check_activation_peak)
