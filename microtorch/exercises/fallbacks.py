"""The engine's own versions of the exercise functions that later sections of a notebook use.

A student version of a notebook runs top to bottom before any exercise is done: after each
exercise, ``f = mt.exercises.yours_or_engine(f, fallbacks.f)`` keeps the learner's ``f`` once
it passed its checker and uses one of these until then. Each is a thin call into the engine.
"""
from __future__ import annotations

from ..functions.broadcast import unbroadcast
from ..memory.aliasing import Layout, alias

__all__ = ["LogSumExp", "extent", "first_fit", "shares_element", "unbroadcast", "windows"]


def _layout(offset, shape, strides) -> Layout:
    return Layout(0, int(offset), tuple(shape), tuple(strides), 1, 0)


def extent(offset, shape, strides) -> tuple[int, int]:
    """``(lo, hi)``, the lowest and highest element position a view reads: ``Layout.extent``."""
    return _layout(offset, shape, strides).extent()


def windows(length, stride, size, step):
    """``(shape, strides)`` of the windows of a 1-D signal of ``length`` elements ``stride``
    apart: the layout ``unfold`` makes, scaled by the signal's stride."""
    from ..creation import zeros

    w = zeros(length).unfold(0, size, step)
    return tuple(w.shape), tuple(s * stride for s in w.stride())


def shares_element(a, b) -> bool:
    """Do two views of one storage, each ``(offset, shape, strides)``, read a common element?
    The engine's exact alias test, ``mt.memory.alias``."""
    return alias(_layout(*a), _layout(*b)).answer == "must"


def first_fit(buffers) -> dict:
    """``{name: offset}`` of ``(name, first, last, size)`` buffers: the engine's first-fit
    planner, ``plan(Program.from_intervals(...), "first_fit")``."""
    from ..planning import Program, plan

    return plan(Program.from_intervals({n: (f, l, s) for n, f, l, s in buffers}), "first_fit").offsets


class LogSumExp:
    """``LogSumExp.apply(x)``: log Σⱼ exp(x[..., j]) over the last dimension, made of the
    engine's own ops (Sub, Exp, Sum, Log, Add: several nodes, not one) — what notebook 02
    uses until the learner's one-node op passes its checker."""

    @staticmethod
    def apply(x):
        from ..creation import tensor

        m = tensor(x.detach().numpy().max(axis=-1), dtype=x.dtype)  # a constant: no gradient through it
        return (x - m.unsqueeze(-1)).exp().sum(-1).log() + m
