"""The trace recorder: the engine reports what it does as events.

``with mt.trace() as tr:`` makes ``tr`` the active recorder. Engine code calls
``trace.active`` (a module global, ``None`` when nothing records — one attribute read per
event site, so recording off costs next to nothing) and, when a recorder is active,
appends one event per thing it did: an op ran, a node was created or released, a storage
was allocated or freed or its reference count changed, a backward node ran, a gradient
was accumulated.

Every picture in :mod:`microtorch.viz` is a pure function of a recorded trace and a step
index ``t`` (the event's position), so the same trace can be replayed, saved, compared and
tested headless.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Iterator

active: "Trace | None" = None

#: What each event kind means, and the fields it carries (besides ``kind`` and ``step``).
KINDS = {
    "tensor": "a tensor seen for the first time, or seen again after its name, requires_grad or "
              "is_leaf changed (the latest event wins): tensor, name, shape, dtype, requires_grad, "
              "is_leaf, storage",
    "alloc": "a storage got its bytes: storage, nbytes, dtype",
    "free": "a storage's bytes were released (its refcount reached 0): storage, nbytes",
    "refcount": "a storage's reference count changed: storage, refcount (new value), delta, holder",
    "op": "an op ran: op, phase ('forward' or 'backward'), node (None if no graph was recorded), "
          "inputs, output (tensor ids), shape, dtype, saved (storage ids), next (where input grads go)",
    "backward": "a backward pass starts: order ('deps' or 'topo'), roots (tensor ids backward starts "
                "from), pending (node -> count) and ready, or schedule",
    "node_run": "a node's backward ran: node, op, grad_shape, pending (counts after it ran), ready",
    "grad": "a gradient was accumulated into a leaf's .grad: tensor, shape, norm",
    "release": "a node let go of its saved tensors: node",
    "alloc_block": "an allocator handed out a block: allocator, block, chunk, offset, nbytes, size, "
                   "tag, and padding (arena) or size_class and reused (pool)",
    "free_block": "a block went back to its allocator: allocator, block, and held (pool: deferred release)",
    "arena_chunk": "an arena got a chunk of backing memory: arena, chunk, nbytes, growth (False for the first)",
    "arena_reset": "an arena freed every block at once: arena, generation (after the reset)",
    "pool_epoch": "a pool advanced its epoch: allocator, epoch, held (blocks still held back)",
}

_tensor_ids = itertools.count(1)
_node_ids = itertools.count(1)


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


class Trace:
    """An ordered list of events; event ``i`` happened at step ``i``.

    Each event is a plain dict with at least ``"kind"`` (see :data:`KINDS`) and ``"step"``,
    so a trace saves to JSON and loads back unchanged.
    """

    def __init__(self, events: list[dict] | None = None):
        self.events: list[dict] = list(events or [])
        self.phase = "forward"  # the backward engine sets "backward" while it runs
        self._seen_tensors: dict[int, tuple] = {}  # tensor id -> (name, requires_grad, is_leaf) last recorded
        self._previous: Trace | None = None

    # -- recording -----------------------------------------------------------------
    def emit(self, kind: str, **fields) -> None:
        fields["kind"] = kind
        fields["step"] = len(self.events)
        self.events.append(fields)

    def tensor(self, t) -> int:
        """Id of ``t``; record a ``tensor`` event describing it the first time it is seen,
        and again if its name or autograd flags changed since (``a = mt.randn(3,
        requires_grad=True); a.name = "a"`` is first seen inside ``randn``, nameless)."""
        tid = tensor_id(t)
        state = (t.name, t.requires_grad, t.grad_fn is None)
        if self._seen_tensors.get(tid) != state:
            self._seen_tensors[tid] = state
            self.emit(
                "tensor",
                tensor=tid,
                name=t.name,
                shape=list(t.shape),
                dtype=t.dtype.name,
                requires_grad=t.requires_grad,
                is_leaf=t.grad_fn is None,
                storage=t._storage.id,
            )
        return tid

    def __enter__(self) -> "Trace":
        global active
        self._previous, active = active, self
        return self

    def __exit__(self, *exc) -> None:
        global active
        active = self._previous

    # -- reading -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.events)

    def __getitem__(self, i):
        return self.events[i]

    def filter(self, *kinds: str) -> list[dict]:
        """The events of the given kinds, in order."""
        return [e for e in self.events if e["kind"] in kinds]

    def kinds(self) -> dict[str, int]:
        """How many events of each kind were recorded."""
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e["kind"]] = counts.get(e["kind"], 0) + 1
        return counts

    def __repr__(self) -> str:
        summary = ", ".join(f"{k}={n}" for k, n in self.kinds().items())
        return f"Trace({len(self)} events: {summary})"

    # -- saving --------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the events as JSON (no pickle: a trace file is plain data)."""
        Path(path).write_text(json.dumps({"format": "microtorch-trace/1", "events": self.events}))

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        # JSON object keys are strings; the only int-keyed dicts in events map node ids to
        # counts ("pending"), so digit keys become ints again and the trace loads back unchanged
        doc = json.loads(Path(path).read_text(), object_pairs_hook=_int_keys)
        if doc.get("format") != "microtorch-trace/1":
            raise ValueError(f"{path} is not a microtorch trace file (format={doc.get('format')!r})")
        return cls(doc["events"])


def _int_keys(pairs) -> dict:
    return {int(k) if k.isdigit() else k: v for k, v in pairs}


def record() -> Trace:
    """``with mt.trace() as tr:`` — record what the engine does inside the block."""
    return Trace()
