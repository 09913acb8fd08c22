"""Grad mode: whether ops record a graph right now (``mt.no_grad()``, ``mt.enable_grad()``).

One module-level flag, read by :meth:`microtorch.node.Function.apply` on every op: with it
off, ops compute their results and record no node, save nothing, and cost the least.
"""
from __future__ import annotations

import contextlib

_grad_enabled = True


def is_grad_enabled() -> bool:
    return _grad_enabled


class set_grad_enabled(contextlib.ContextDecorator):
    """Turn graph recording on or off inside a ``with`` block (or a decorated function)."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        global _grad_enabled
        self.prev, _grad_enabled = _grad_enabled, self.mode

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self.prev


class no_grad(set_grad_enabled):
    """``with mt.no_grad():`` or ``@mt.no_grad()``: ops inside record no graph."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    def __init__(self):
        super().__init__(True)
