"""Pictures of recorded traces; imported lazily, never by the engine.

Every picture is a pure function of a recorded trace and a time index ``t`` (an event's
position in the trace)::

    with mt.trace() as tr:
        loss = model(x).sum(); loss.backward()
    mt.viz.graph.render(tr, t)      # the computation graph after events 0..t
    mt.viz.graph.describe(tr, t)    # the same facts as text
    mt.viz.player(tr, panels=["graph", "arena", "refcounts"])   # one slider moves them all

The pictures, one module each (each has ``render(trace, t)`` and ``describe(trace, t)``):

* :mod:`~microtorch.viz.graph` — the computation graph, forward and backward (Graphviz); its
  parts are ``graph_state`` (the replayed facts), ``graph_collapse`` (big graphs),
  ``graph_text`` (the words) and ``graph_dot`` (the DOT source and title block);
* :mod:`~microtorch.viz.arena` — arena occupancy: blocks on each arena's address axis, by kind;
  the node arena's records;
* :mod:`~microtorch.viz.pool` — the pool's size classes: blocks in use / free / held back,
  requested vs reserved bytes;
* :mod:`~microtorch.viz.refcounts` — each storage's reference count over time, and who
  holds the references;
* :mod:`~microtorch.viz.liveness` — storage lifetimes as a Gantt chart, live bytes and the peak;
* memory planning (these take a program or a plan and an index, not a trace):
  :mod:`~microtorch.viz.live_sets` (live ranges with live_in/live_out at an instruction),
  :mod:`~microtorch.viz.fixed_point` (the liveness iteration, block by block),
  :mod:`~microtorch.viz.conflict_graph` (the interference graph coloured by slot),
  :mod:`~microtorch.viz.packing` (time × address rectangles, placed one by one),
  :mod:`~microtorch.viz.plan_bars` (strategies vs the lower bound vs what the engine used);
  :mod:`~microtorch.viz.sequence_player` steps any of them (``liveness_player``,
  ``packing_player``, ``instruction_player``);
* :mod:`~microtorch.viz.recompute` — checkpointing: the memory/time frontier, a schedule on
  the chain with the step's live bytes before/after, and a budget slider (these take
  schedules and traces: ``render_frontier(chain)``, ``render_schedule(sched, trace)``);
* :mod:`~microtorch.viz.alias` — which elements of one storage several views touch, and the
  must/may/no verdict (this one takes the views, not a time: ``render(a, b)``);
* :mod:`~microtorch.viz.sparse` — a sparse matrix as dense, COO and CSR; the rows sparse
  gradients touch and their density over steps (these take a tensor or a
  ``mt.sparse.record()`` log, not a time).

Around them: :mod:`~microtorch.viz.player` (the step-through widget and the panel
registry), :mod:`~microtorch.viz.alias_sliders` (``alias_player``: sliders for a view's
offset and strides over the alias picture), :mod:`~microtorch.viz.palette` (one colour-blind-safe palette of named kinds),
:mod:`~microtorch.viz.events` (events in words, the step axis, "step 2 of 21 · event 15"),
:mod:`~microtorch.viz.timeline` (per-trace facts the memory pictures share, computed once),
:mod:`~microtorch.viz.figure` (figures outside pyplot, drawn in two layers for the player;
:mod:`~microtorch.viz.text_metrics` is the one place a private matplotlib name is used, and why),
:mod:`~microtorch.viz.dot` (DOT → SVG with or without a system Graphviz),
:mod:`~microtorch.viz.header` (the title block drawn above a Graphviz picture).

Every trace panel reads the trace's one replay (``tr.replay()``,
:class:`microtorch.trace.replay.Replay`): its memory state at ``t``, the states its
cursor drives (:meth:`~microtorch.trace.replay.Replay.follow`: the graph, the buddy tree, the
thread caches' cross-thread frees, the mapped pages, the NUMA model's charges) and the
per-trace facts kept with it (:meth:`~microtorch.trace.replay.Replay.facts`: timeline, event
index, layouts, each allocator panel's constants).

The matplotlib pictures return a :class:`~microtorch.viz.figure.PanelFigure`: it shows as
SVG in Jupyter, and carries ``.facts`` (the numbers it draws: what tests assert on) and
``.description`` (the same facts in words).

Nothing is imported until used: ``import microtorch.viz`` costs nothing, and the engine
(``import microtorch``) never imports matplotlib, graphviz or ipywidgets.
"""
import importlib

_SUBMODULES = ("alias", "alias_sliders", "arena", "buddy", "conflict_graph", "dot", "events", "figure", "fixed_point", "graph",
               "graph_collapse", "graph_dot", "graph_state", "graph_text", "header", "live_sets", "liveness",
               "mapped", "numa", "packing", "palette", "plan_bars", "player", "pool", "recompute", "refcounts",
               "sequence_player", "sparse", "text_metrics", "threads", "timeline")
_PLAYERS = ("sequence_player", "liveness_player", "packing_player", "instruction_player")

__all__ = ["player", "register_panel", "alias_player", "graph", "arena", "pool", "refcounts", "liveness", "alias",
           "palette", "events", "dot"]


def __getattr__(name: str):
    if name in ("player", "register_panel", "PANELS"):
        module = importlib.import_module(".player", __name__)
        value = getattr(module, name)
        # importing the submodule bound `player` to the module; the function wins
        globals()[name] = value
        return value
    if name in _PLAYERS:  # players over planning pictures (a program, a plan: not a trace)
        __getattr__("player")  # load the trace player first, so `player` stays the function
        module = importlib.import_module(".sequence_player", __name__)
        globals()["sequence_player"] = module.sequence_player  # the function wins over the module
        globals()[name] = value = getattr(module, name)
        return value
    if name == "alias_player":
        return importlib.import_module(".alias_sliders", __name__).alias_player
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
