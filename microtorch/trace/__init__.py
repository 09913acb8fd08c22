"""Tracing: the engine's events recorded, typed, saved, and replayed for the pictures.

``with mt.trace() as tr:`` records what the engine does inside the block as a list of typed
events; every picture in :mod:`microtorch.viz` is a pure function of such a trace and a
step ``t``. One module per concept:

* :mod:`.events` — one dataclass per event kind (``Op``, ``Alloc``, ``Refcount``, ...): the
  schema in code; ``rec.emit(kind, **fields)`` builds them.
* :mod:`.recorder` — :class:`Trace` (recording, reading, ``save``/``load``) and the
  ``baseline`` event (each allocator describes itself).
* :mod:`.schema` — what a trace file must look like (format version, fields, bookkeeping)
  before it is replayed; :class:`TraceFormatError`.
* :mod:`.replay` (with :mod:`.replay_events`, the handlers of each kind, and
  :mod:`.replay_state`, the immutable records a state is made of) — the memory state at
  any step, the lifetimes and the live-bytes curve.

The slot engine code reports to (``active``, ``emit``, tensor and node ids, and
:class:`~microtorch.recording.Holder`: who holds a reference, as data) is the bottom
module :mod:`microtorch.recording`, which imports nothing, so :mod:`microtorch.memory`'s
allocators report events without importing this package (which reads them).

``mt.trace`` is :func:`record` (a function, as in ``with mt.trace() as tr:``); import this
package's modules with ``from microtorch.trace import events`` or
``from microtorch.trace.replay import Replay``.
"""
from ..recording import Holder
from .events import EVENT_TYPES, KINDS, UNSET, Event
from .recorder import Trace, baseline, record
from .schema import VERSIONS, TraceFormatError

__all__ = ["EVENT_TYPES", "KINDS", "UNSET", "Event", "Holder", "Trace", "TraceFormatError", "VERSIONS",
           "baseline", "record"]
