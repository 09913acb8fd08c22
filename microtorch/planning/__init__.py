"""Memory planning: liveness analysis of a program, and where each buffer goes in one arena.

``prog = Program.from_trace(tr)`` (or written by hand as basic blocks) →
``prog.liveness()`` (use/def, live-in/live-out, solved to a fixed point) →
``prog.intervals()``, ``prog.lower_bound()``, ``prog.conflict_graph()`` →
``plan(prog, strategy=...)`` (offsets, ``arena_bytes``, ``check()``) →
``with planned(plan): step()`` (the same step, every buffer at its planned offset).

One module per concept: :mod:`.instructions`, :mod:`.program`, :mod:`.from_trace`, :mod:`.liveness`,
:mod:`.conflicts`, :mod:`.plan`, :mod:`.planners`, :mod:`.optimal`, :mod:`.execution`,
:mod:`.random_programs`. The names below are re-exported by :mod:`microtorch.memory`.
"""
from .conflicts import ConflictGraph, Interval
from .execution import PlanMismatchError, PlannedArena, planned
from .instructions import BasicBlock, Buffer, Instruction
from .liveness import Liveness
from .plan import Plan, PlanError
from .planners import STRATEGIES, plan
from .program import Program
from .random_programs import random_program

__all__ = ["BasicBlock", "Buffer", "ConflictGraph", "Instruction", "Interval", "Liveness", "Plan", "PlanError",
           "PlanMismatchError", "PlannedArena", "Program", "STRATEGIES", "plan", "planned", "random_program"]
