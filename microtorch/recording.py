"""The recorder slot: where engine code reports what it does, if anyone is listening.

This is the bottom layer of tracing. It imports nothing of microtorch, so every module —
tensors, ops, the backward engine, the allocators in :mod:`microtorch.memory` — can report
events without importing the trace package (which itself reads the allocators to describe
what was live when recording started: :mod:`microtorch.trace`).

``active`` is the recorder (a :class:`microtorch.trace.Trace`) inside ``with mt.trace():``,
``None`` otherwise — one attribute read per event site, so recording off costs next to
nothing. An event site reads it once::

    rec = _trace.active
    if rec is not None:
        rec.emit("op", op=..., inputs=..., output=...)

``rec.emit(kind, **fields)`` builds the typed record of that kind
(:mod:`microtorch.trace.events`) and appends it.
"""
from __future__ import annotations

import itertools

#: The recorder events go to, or ``None`` when nothing records (set by ``Trace.__enter__``).
active = None

_tensor_ids = itertools.count(1)
_node_ids = itertools.count(1)


def emit(kind: str, **fields) -> None:
    """Record an event if a recorder is active (allocators call this; hot paths inline the check)."""
    if active is not None:
        active.emit(kind, **fields)


def read(t, how: str, copy: bool = True) -> None:
    """Record that ``t``'s values left the engine through ``how`` (``item``, ``tolist``,
    ``numpy``): a read no op event shows, which in-place analysis must respect."""
    rec = active
    if rec is not None:
        rec.emit("read", tensor=rec.tensor(t), storage=t._storage.id, how=how, copy=copy)


def tensor_id(t) -> int:
    """A stable id for a tensor, assigned the first time a recorder sees it."""
    if t._tid is None:
        t._tid = next(_tensor_ids)
    return t._tid


def node_id(n) -> int:
    """A stable id for a graph node, assigned the first time a recorder sees it."""
    if n._nid is None:
        n._nid = next(_node_ids)
    return n._nid


class Holder(str):
    """Who holds a reference to a storage (a ``refcount`` event's ``holder``): the words a
    trace file keeps (``"tensor 3"``, ``"node 7 (MulBackward)"``, ``"a numpy array from
    .numpy()"``, ``"?"`` for a reference taken before recording) and, as data, ``kind``
    (``"tensor"``, ``"node"``, ``"unknown"`` or ``"other"``) and ``id`` (the tensor or node id,
    else ``None``), so nothing has to read the words back."""

    def __new__(cls, words: str, kind: str = "other", id: int | None = None):
        h = str.__new__(cls, words)
        h.kind, h.id = kind, id
        return h

    @classmethod
    def of_tensor(cls, tid: int) -> "Holder":
        return cls(f"tensor {tid}", "tensor", tid)

    @classmethod
    def of_node(cls, nid: int, op: str) -> "Holder":
        return cls(f"node {nid} ({op})", "node", nid)

    @classmethod
    def parse(cls, words: str) -> "Holder":
        """The holder a saved trace's words name (the file boundary: done once, on load)."""
        if isinstance(words, Holder):
            return words
        head, _, rest = words.partition(" ")
        number = rest.split(" ", 1)[0]
        if head in ("tensor", "node") and number.isdigit():
            return cls(words, head, int(number))
        return cls(words, "unknown" if words == "?" else "other")

    def __reduce__(self):
        return (Holder, (str(self), self.kind, self.id))


#: the holder of references taken before recording started
UNKNOWN = Holder("?", "unknown")
