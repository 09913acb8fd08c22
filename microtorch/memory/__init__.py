"""Where the bytes live: allocators, refcounted storages, node records.

``mt.memory.step_arena()`` scopes a training step's activations to an arena;
``mt.memory.stats()`` reports what the allocators did; ``use_heap()`` turns them off.
``mt.memory.Program.from_trace(tr)``, ``mt.memory.plan(prog, strategy=...)`` and
``with mt.memory.planned(plan):`` plan a step's memory ahead of time (:mod:`microtorch.planning`).
``mt.memory.alias(a, b)`` says whether two views share bytes (and ``t.byte_ranges()`` which
bytes a view touches); ``mt.memory.inplace_plan(trace)`` says which ops of a recorded
program could safely write into their input.

The trace recorder and its analysis (replay, the file schema) are :mod:`microtorch.trace`;
allocators report to it through :mod:`microtorch.recording` and describe themselves
(``describe()``) for its ``baseline`` event. ``mt.memory.Trace`` is re-exported from there.
"""
from .arena import Arena
from .best_fit import BestFit
from .buddy import Buddy
from .block import AllocatorError, Block, OutOfMemoryError, align_up
from .node_arena import NodeArena, nodes
from .placement import pool, reset_peak, step, step_arena, use_heap, use_pool
from .pool import Pool, size_classes
from .stats import stats
from .storage import StaleTensorError, Storage, empty_storage, new_storage
from .aliasing import AliasReport, alias, byte_extent, byte_ranges, overlaps_itself
from .inplace_analysis import InplacePlan, inplace_plan

__all__ = ["AliasReport", "InplacePlan", "alias", "byte_extent", "byte_ranges", "inplace_plan",
           "overlaps_itself", "AllocatorError", "Arena", "BestFit", "Block", "Buddy", "NodeArena", "OutOfMemoryError", "Pool",
           "StaleTensorError", "Storage", "Trace", "align_up", "empty_storage", "new_storage",
           "nodes", "pool", "reset_peak", "size_classes", "stats", "step", "step_arena",
           "use_heap", "use_pool"]

# memory planning (microtorch/planning/): liveness, conflict graph, planners, planned execution
from ..planning import (ConflictGraph, Liveness, Plan, PlanError, PlanMismatchError, PlannedArena,  # noqa: E402
                        Program, plan, planned)

__all__ += ["ConflictGraph", "Liveness", "Plan", "PlanError", "PlanMismatchError", "PlannedArena", "Program",
            "plan", "planned"]

# the recorder, re-exported: mt.memory.Trace (the trace package reads this package, not the other way)
from ..trace import Trace  # noqa: E402
