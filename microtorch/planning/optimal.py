"""The optimal plan of a small program, by constraint programming (OR-Tools CP-SAT).

In units of the alignment ``a`` (every slot size is a multiple of it), with one integer
``o[x]`` per planned buffer and one for the arena height ``H``::

    minimize H
    subject to   o[x] + size[x] ≤ H                               for every buffer x
                 o[x] + size[x] ≤ o[y]  or  o[y] + size[y] ≤ o[x]  for every conflict x — y
                 0 ≤ o[x] ≤ U − size[x]

where ``U`` is the best heuristic's arena (first/best fit, greedy by size, colouring) (a plan at least that good exists) and ``H ≥``
the lower bound. The "or" is one boolean per conflict edge (``OnlyEnforceIf``). This is
NP-hard in general (it contains bin packing), so it is for programs of up to ~40 buffers:
the heuristics can then be compared with the true optimum. ``proven_optimal`` says whether
the solver proved optimality within ``time_limit``; otherwise the plan is the best found.

Needs the ``planning`` extra: ``pip install 'microtorch[planning]'`` (``ortools``).
"""
from __future__ import annotations

from .plan import Plan

MAX_BUFFERS = 40


def optimal(program, start: Plan, time_limit: float = 10.0, max_buffers: int = MAX_BUFFERS, workers: int = 1) -> Plan:
    """The least arena for ``program``; ``start``: the best heuristic plan (the bound ``U``, and the hint)."""
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        raise ImportError("strategy='optimal' needs OR-Tools (the CP-SAT solver): "
                          "pip install 'microtorch[planning]'  (or: pip install ortools)") from None
    planned = program.planned
    if len(planned) > max_buffers:
        raise ValueError(f"strategy='optimal' is for small programs: this one plans {len(planned)} buffers, "
                         f"more than max_buffers={max_buffers} (the search grows exponentially). Use "
                         "'greedy_by_size', or pass max_buffers=... and a time_limit to try anyway.")
    a = program.alignment
    g = program.conflict_graph()
    upper = max(start.arena_bytes // a, 1)
    lower = program.lower_bound() // a
    size = {x: g.sizes[x] // a for x in planned}
    m = cp_model.CpModel()
    o = {x: m.NewIntVar(0, max(0, upper - size[x]), f"o_{x}") for x in planned}
    height = m.NewIntVar(lower, upper, "H")
    for x in planned:
        m.Add(o[x] + size[x] <= height)
        m.AddHint(o[x], start.offsets[x] // a)
    for x, y in g.edges:
        if size[x] == 0 or size[y] == 0:
            continue
        below = m.NewBoolVar(f"{x}_below_{y}")
        m.Add(o[x] + size[x] <= o[y]).OnlyEnforceIf(below)
        m.Add(o[y] + size[y] <= o[x]).OnlyEnforceIf(below.Not())
    m.Minimize(height)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Plan(program, "optimal", dict(start.offsets), list(start.order), proven_optimal=False)
    offsets = {x: int(solver.Value(o[x])) * a for x in planned}
    order = sorted(planned, key=lambda x: (offsets[x], x))
    return Plan(program, "optimal", offsets, order, proven_optimal=status == cp_model.OPTIMAL)
