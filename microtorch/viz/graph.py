"""The computation-graph picture: ``render(trace, t)`` and ``describe(trace, t)``.

Both replay events ``0..t`` of a recorded trace (nothing here looks at live tensors):

* each forward op that recorded a graph node (``op`` event, phase ``forward``, node not
  None) adds an **op** node showing the op and its output's shape, with edges from its
  inputs. Inputs no recorded op produced are **leaves**: a leaf that requires grad
  (the op's ``next`` edge points at it: a parameter) is drawn differently from a
  **constant**. Results no later op consumed are **outputs** (e.g. the loss).
* ops that recorded no node (constants only, or under ``no_grad``) and the ops *inside*
  backward (phase ``backward``: the gradient arithmetic) are not graph nodes and are not
  drawn; ``describe`` counts the first kind.
* after a ``backward`` event: which nodes already ran, which are ready, and each waiting
  node's pending dependency count, exactly as recorded. After a leaf's ``grad`` event the
  leaf shows its gradient's shape and norm. Before backward every parameter says
  "grad: not computed yet" and the title says to call ``.backward()`` — never zeros.

Big graphs: beyond ``max_nodes`` nodes, chains of ops (each the only consumer of the
one before) are collapsed into one labelled group node ("… 37 more ops"), longest
first; if that is not enough, the middle of the graph (in recording order) is. The
node the current step is about and the ready nodes always stay visible.

:func:`graph_state` returns the replayed facts as plain data; :func:`to_dot` turns them
into DOT source; :func:`render` wraps that in a :class:`~microtorch.viz.dot.GraphPicture`
(SVG via Graphviz, text fallback). Tests assert on ``graph_state``/``source``/``describe``.

**Where things are.** This module is the picture's entry point (the player's ``"graph"``
panel is :func:`render` and :func:`describe`); the parts, one concept each:
:mod:`~microtorch.viz.graph_state` (replaying the trace into plain facts),
:mod:`~microtorch.viz.graph_collapse` (big graphs), :mod:`~microtorch.viz.graph_text` (the
words, :func:`describe`) and :mod:`~microtorch.viz.graph_dot` (the DOT source, :func:`to_dot`,
and the title block).
"""
from __future__ import annotations

from .events import clamp_step
from .header import HeaderedPicture
# the picture's API in one place: mt.viz.graph.describe / to_dot / graph_state / NOT_COMPUTED ...
from .graph_collapse import MAX_NODES, Group, collapse  # noqa: F401
from .graph_dot import LEGEND, header, to_dot  # noqa: F401
from .graph_state import GraphState, graph_state  # noqa: F401
from .graph_text import NOT_COMPUTED, describe  # noqa: F401


def render(trace, t: int | None = None, steps=None, *, show_saved: bool = False, show_values: bool = False,
           max_nodes: int | None = MAX_NODES, rankdir: str = "TB", headline: bool | None = None) -> HeaderedPicture:
    """The computation graph after events ``0..t`` of ``trace`` (``None``: the whole trace).

    ``show_saved``: list what each node saved for backward (and when it released it).
    ``show_values``: add what the trace records about each leaf's data (storage, bytes) —
    the trace holds shapes and gradient norms, not the numbers themselves.
    ``max_nodes``: collapse chains beyond this many nodes (``None``: never).
    ``rankdir``: ``"TB"`` (inputs at the top, the loss at the bottom) or ``"LR"``.
    ``steps``: a player's step axis (the header then says "step 2 of 21 · event 15", the
    player's own words, instead of "event 15 of 267"); ``headline``: see :func:`header`.

    The result shows as SVG in Jupyter (with a text fallback); ``.source`` is the DOT,
    ``.text``/``str()`` the same facts in words, ``.header`` the title block.
    """
    s_t = clamp_step(trace, t)
    source = to_dot(trace, s_t, show_saved=show_saved, show_values=show_values,
                    max_nodes=max_nodes, rankdir=rankdir)
    title, _, text = describe(trace, s_t, steps, max_nodes=max_nodes, show_saved=show_saved,
                              show_values=show_values).partition("\n")
    return HeaderedPicture(source, text, title, header(trace, graph_state(trace, s_t), steps, headline))
