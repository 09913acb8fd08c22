"""Pictures of recorded traces; imported lazily, never by the engine.

Every picture is a pure function of a recorded trace and a step index::

    with mt.trace() as tr:
        loss = model(x).sum(); loss.backward()
    mt.viz.graph.render(tr, t)     # the computation graph after events 0..t
    mt.viz.graph.describe(tr, t)   # the same facts as text
    mt.viz.player(tr)              # slider + play + step buttons over every panel

Modules: :mod:`~microtorch.viz.graph` (computation graph), :mod:`~microtorch.viz.player`
(the step-through widget and the panel registry), :mod:`~microtorch.viz.palette` (the
shared colour-blind-safe colours), :mod:`~microtorch.viz.events` (events in words),
:mod:`~microtorch.viz.dot` (DOT → SVG with or without a system Graphviz), :mod:`~microtorch.viz.header`
(the title block drawn above a Graphviz picture).

Nothing is imported until used: ``import microtorch.viz`` costs nothing, and the engine
(``import microtorch``) never imports matplotlib, graphviz or ipywidgets.
"""
import importlib

_SUBMODULES = ("dot", "events", "graph", "header", "palette", "player")

__all__ = ["player", "register_panel", "graph", "palette", "events", "dot"]


def __getattr__(name: str):
    if name in ("player", "register_panel", "PANELS"):
        module = importlib.import_module(".player", __name__)
        value = getattr(module, name)
        # importing the submodule bound `player` to the module; the function wins
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
