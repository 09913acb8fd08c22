"""The trace file schema: what a saved trace must look like before it is replayed.

:meth:`Trace.load <microtorch.trace.Trace.load>` checks a file in three passes and
raises :class:`TraceFormatError` naming the first thing that is wrong:

1. the document: a JSON object ``{"format": "microtorch-trace/N", "events": [...]}`` whose
   version ``N`` this microtorch reads (:data:`VERSIONS`);
2. each event: a dict whose ``kind`` is one of :data:`~microtorch.trace.events.KINDS`, whose
   ``step`` is its position, and whose fields have the types their record class declares
   (:data:`~microtorch.trace.events.FIELDS`, read off the dataclasses of
   :mod:`microtorch.trace.events`; required ones present; extra fields are allowed and kept);
3. the bookkeeping replay depends on, once a ``baseline`` said what was live: every
   storage is allocated once and freed once, after its reference count fell to zero; each
   ``refcount`` event's count is the previous count plus its ``delta``; a storage's first
   reference is taken after its ``alloc``; blocks are handed out before they come back.

A trace that fails pass 3 was edited or cut: replaying it would show wrong live bytes.
"""
from __future__ import annotations

from .events import BOOL, DICT, FIELDS, INT, LIST, NONE, NUM, STR  # noqa: F401 (FIELDS: the schema, re-exported)

#: The trace file versions this microtorch reads (version 1: the events of ``KINDS``).
VERSIONS = (1,)
FORMAT = "microtorch-trace/"


class TraceFormatError(ValueError):
    """A trace file is not a valid microtorch trace (the message names the first bad event)."""


_INT, _STR, _BOOL, _NUM, _LIST, _DICT, _NONE = INT, STR, BOOL, NUM, LIST, DICT, NONE

# the entries of a baseline's lists that replay reads by key
_BASELINE_ENTRIES = {
    "allocators": {"name": ((_STR,), True), "kind": ((_STR,), True)},
    "blocks": {"allocator": ((_STR,), True), "block": ((_INT,), True), "chunk": ((_INT,), True),
               "offset": ((_INT,), True), "size": ((_INT,), True), "nbytes": ((_INT,), True),
               "size_class": ((_INT, _NONE), False), "storage": ((_INT, _NONE), False)},
    "storages": {"storage": ((_INT,), True), "nbytes": ((_INT,), True), "refcount": ((_INT,), True),
                 "stale": ((_BOOL,), False)},
}
# a baseline's allocators, by kind
_ALLOCATOR = {
    "pool": {"epoch": ((_INT,), False), "classes": ((_LIST,), False), "held": ((_LIST,), False)},
    "arena": {"chunks": ((_LIST,), True), "generation": ((_INT,), False), "resets": ((_INT,), False),
              "used": ((_INT,), False), "padding": ((_INT,), False)},
}
_POOL_CLASS = {"size_class": ((_INT,), True), "size": ((_INT,), True), "slabs": ((_LIST,), True),
               "free": ((_INT,), True)}


#: byte counts and positions: a negative one would turn live bytes negative in replay
_NON_NEGATIVE = {"nbytes", "size", "offset", "padding", "live_bytes", "peak_bytes", "slab_bytes"}


def _type_of(value) -> str:
    if value is None:
        return _NONE
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, int):
        return _INT
    if isinstance(value, float):
        return "float"
    return {str: _STR, list: _LIST, dict: _DICT}.get(type(value), type(value).__name__)


def _check_fields(record: dict, spec: dict, what: str) -> None:
    for name, (types, required) in spec.items():
        if name not in record:
            if required:
                raise TraceFormatError(f"{what} has no {name!r} field")
            continue
        got = _type_of(record[name])
        if got not in types and not (got in (_INT, "float") and _NUM in types):
            raise TraceFormatError(f"{what}: field {name!r} is {record[name]!r} ({got}), "
                                   f"expected {' or '.join(types)}")
        if name in _NON_NEGATIVE and got == _INT and record[name] < 0:
            raise TraceFormatError(f"{what}: field {name!r} is {record[name]}, expected a count ≥ 0")


def _check_allocator(a: dict, what: str) -> None:
    spec = _ALLOCATOR.get(a["kind"])
    if spec is None:
        raise TraceFormatError(f"{what}: kind {a['kind']!r}, expected 'pool' or 'arena'")
    _check_fields(a, spec, what)
    for j, c in enumerate(a.get("classes", ())):
        if not isinstance(c, dict):
            raise TraceFormatError(f"{what}: classes[{j}] is not an object")
        _check_fields(c, _POOL_CLASS, f"{what}: classes[{j}]")
    for j, h in enumerate(a.get("held", ())):
        if not (isinstance(h, list) and len(h) == 2 and all(_type_of(x) == _INT for x in h)):
            raise TraceFormatError(f"{what}: held[{j}] is {h!r}, expected [block, size class]")


def check_document(doc, where: str) -> list:
    """The events of a loaded JSON document, or :class:`TraceFormatError` saying why not."""
    if not isinstance(doc, dict) or "events" not in doc or not str(doc.get("format", "")).startswith(FORMAT):
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise TraceFormatError(f"{where} is not a microtorch trace file (expected a JSON object with "
                               f"\"format\": \"{FORMAT}{VERSIONS[-1]}\" and \"events\"; found {found!r})")
    version = doc["format"][len(FORMAT):]
    if not version.isdigit() or int(version) not in VERSIONS:
        readable = ", ".join(map(str, VERSIONS))
        raise TraceFormatError(f"{where} is a microtorch trace of format version {version!r}, which this "
                               f"microtorch cannot read (it reads version {readable}); "
                               "record the trace again with this version, or upgrade microtorch")
    events = doc["events"]
    if not isinstance(events, list):
        raise TraceFormatError(f"{where}: \"events\" is a {type(events).__name__}, expected a list")
    return events


def check_events(events: list, kinds, where: str) -> None:
    """Raise :class:`TraceFormatError` at the first event that is malformed or that breaks the
    allocation / reference-count bookkeeping replay relies on (see the module docstring)."""
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceFormatError(f"{where}: event {i} is a {type(e).__name__}, expected an object")
        kind = e.get("kind")
        if kind not in kinds:
            raise TraceFormatError(f"{where}: event {i} has unknown kind {kind!r} "
                                   f"(known: {', '.join(sorted(kinds))})")
        if e.get("step") != i:
            raise TraceFormatError(f"{where}: event {i} ({kind}) has step {e.get('step')!r}, expected {i} "
                                   "(an event's step is its position: were events removed or reordered?)")
        what = f"{where}: event {i} ({kind})"
        _check_fields(e, FIELDS.get(kind, {}), what)
        if kind == "baseline":
            for name, spec in _BASELINE_ENTRIES.items():
                for j, entry in enumerate(e.get(name, ())):
                    if not isinstance(entry, dict):
                        raise TraceFormatError(f"{what}: {name}[{j}] is not an object")
                    _check_fields(entry, spec, f"{what}: {name}[{j}]")
            for j, a in enumerate(e.get("allocators", ())):
                _check_allocator(a, f"{what}: allocators[{j}]")
        elif kind == "refcount":
            holder = e.get("holder", "")
            if holder.startswith("tensor ") and not holder[7:].isdigit():
                raise TraceFormatError(f"{what}: holder {holder!r} names no tensor id")
    _Bookkeeping(where).run(events)


class _Bookkeeping:
    """Follows storages and blocks through the events and raises at the first inconsistency."""

    def __init__(self, where: str):
        self.where = where
        self.complete = False  # a baseline said what was live: from then on every storage is known
        self.counts: dict[int, int] = {}  # storage -> reference count, for storages being followed
        self.nbytes: dict[int, int] = {}  # storage -> bytes, from its alloc or a baseline
        self.freed: dict[int, int] = {}  # storage -> step of its free
        self.blocks: set[int] = set()  # live blocks

    def fail(self, e: dict, message: str) -> None:
        raise TraceFormatError(f"{self.where}: event {e['step']} ({e['kind']}) {message}; the trace "
                               "looks edited or cut, so replaying it would give wrong live bytes")

    def run(self, events: list) -> None:
        for e in events:
            handler = getattr(self, "_" + e["kind"], None)
            if handler is not None:
                handler(e)

    def _gone(self, e: dict, sid: int) -> None:
        if sid in self.freed:
            self.fail(e, f"uses storage {sid}, which was freed at event {self.freed[sid]}")

    def _baseline(self, e):
        self.complete = True
        self.counts = {s["storage"]: s["refcount"] for s in e.get("storages", ())}
        self.nbytes.update({s["storage"]: s["nbytes"] for s in e.get("storages", ())})
        self.blocks = {b["block"] for b in e.get("blocks", ())}
        listed = sum(s["nbytes"] for s in e.get("storages", ()) if not s.get("stale"))
        if "live_bytes" in e and e["live_bytes"] < listed:
            self.fail(e, f"says {e['live_bytes']} bytes are live, fewer than the {listed} bytes "
                         "of the storages it lists")

    def _alloc(self, e):
        sid = e["storage"]
        self._gone(e, sid)
        if sid in self.counts:
            self.fail(e, f"allocates storage {sid} again (it is already live)")
        self.counts[sid], self.nbytes[sid] = 0, e["nbytes"]

    def _refcount(self, e):
        sid, count, delta = e["storage"], e["refcount"], e["delta"]
        self._gone(e, sid)
        if count < 0:
            self.fail(e, f"gives storage {sid} a negative reference count ({count})")
        before = self.counts.get(sid)
        if before is None:
            if self.complete and count - delta <= 0:
                self.fail(e, f"gives storage {sid} its first reference, but no alloc event made it "
                             "and no baseline listed it")
        elif before + delta != count:
            self.fail(e, f"says storage {sid} went from {before} references by {delta:+d} to {count}")
        self.counts[sid] = count

    def _free(self, e):
        sid = e["storage"]
        self._gone(e, sid)
        count = self.counts.pop(sid, None)
        if count is None and self.complete:
            self.fail(e, f"frees storage {sid}, which no alloc event made, no baseline listed "
                         "and no reference count event mentioned")
        if count:
            self.fail(e, f"frees storage {sid} while it still has {count} reference(s)")
        if sid in self.nbytes and self.nbytes[sid] != e["nbytes"]:
            self.fail(e, f"frees {e['nbytes']} bytes of storage {sid}, which was allocated "
                         f"with {self.nbytes[sid]}")
        self.freed[sid] = e["step"]

    def _alloc_block(self, e):
        if e["block"] in self.blocks:
            self.fail(e, f"hands out block {e['block']} again (it is already live)")
        self.blocks.add(e["block"])

    def _free_block(self, e):
        if e["block"] not in self.blocks and self.complete:
            self.fail(e, f"returns block {e['block']}, which no alloc_block event handed out "
                         "and no baseline listed")
        self.blocks.discard(e["block"])

    def _arena_reset(self, e):
        for bid in e.get("blocks", ()):
            self.blocks.discard(bid)
