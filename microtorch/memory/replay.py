"""Replay: the engine's memory state at any step ``t``, rebuilt from a trace's events alone.

``tr.state_at(t)`` replays events ``0..t`` (inclusive) and returns a :class:`MemoryState`:
every live block of every allocator (where it sits, how big, which storage uses it), each
arena's chunks, each pool size class's blocks in use / free / held back, every live
storage's reference count *and who holds the references*, the storages freed so far,
live and peak bytes, the live graph nodes and node records. ``tr.lifetimes()`` gives one
:class:`Lifetime` per storage (birth and death steps), ``tr.peak()`` the peak live bytes.

Nothing here touches live engine objects: a trace loaded from JSON replays identically.

**What the trace cannot know.** Events exist only for what happened while the recorder
was on. The first event of a recorded trace is a ``baseline`` describing what was already
live (the allocators' blocks, the storages using them, the node records); references
taken before recording started are counted in ``StorageState.unknown_holders``, and bytes
of storages no allocator knows about (plain-numpy "heap" storages made before recording)
only as part of ``live_bytes``. A nested ``mt.trace()`` hides events from the outer trace;
when it ends the outer trace records a fresh ``baseline`` and replay resynchronises.

**Cost.** One forward pass over the events (done once, extended when the trace grows)
keeps a snapshot every :data:`CHECKPOINT_EVERY` events; ``state_at(t)`` starts from the
nearest snapshot at or before ``t`` — or continues from the previous call when scrubbing
forward — so stepping through every ``t`` costs one event plus a few dict copies per step.
Snapshots are cheap because every value in them is an immutable record (a ``NamedTuple``)
that an event replaces rather than changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

#: A snapshot of the replayed state is kept every this many events.
CHECKPOINT_EVERY = 64


class BlockState(NamedTuple):
    """A live block: which allocator, where (chunk/slab and byte offset), how big, who uses it."""
    allocator: str
    block: int
    chunk: int
    offset: int
    size: int  # bytes it occupies (≥ nbytes: alignment padding or size-class rounding)
    nbytes: int  # bytes asked for
    padding: int  # arena: alignment bytes skipped before it
    tag: str
    size_class: int | None  # pool: class index (None: a direct block, or an arena block)
    storage: int | None  # the storage using it, if any
    born: int | None  # step of its alloc_block (None: handed out before recording started)


class StorageState(NamedTuple):
    """A live storage: its bytes, reference count, and who holds the references."""
    storage: int
    nbytes: int | None  # None: first seen at a refcount event, allocated before recording
    dtype: str | None
    tag: str | None
    allocator: str | None  # allocator name, "heap" for plain numpy
    block: int | None
    refcount: int
    holders: tuple  # ("tensor 3", "node 7 (MulBackward)", "a numpy array from .numpy()", ...)
    unknown_holders: int  # references taken before recording started (holders not named)
    stale: bool  # its arena was reset: the bytes are gone though references remain
    born: int | None  # step of its alloc (None: before recording started)


class ArenaState(NamedTuple):
    name: str
    chunks: tuple  # bytes of each chunk of backing memory, in order
    generation: int
    resets: int
    live_blocks: int
    requested: int  # bytes asked for by live blocks
    padding: int  # alignment bytes lost since the last reset
    used: int  # bytes below the top (blocks, padding, skipped chunk tails)

    @property
    def capacity(self) -> int:
        return sum(self.chunks)


class PoolState(NamedTuple):
    name: str
    epoch: int
    held: int  # freed blocks held back until a later epoch (deferred release)


class PoolClassState(NamedTuple):
    """One size class of one pool (``size_class`` None: the pool's direct, oversized blocks)."""
    allocator: str
    size_class: int | None
    size: int | None  # the class's block size
    in_use: int
    free: int  # on the free list, ready for reuse
    held: int  # freed but held back (deferred release)
    requested: int  # bytes asked for by the blocks in use
    reserved: int  # bytes those blocks occupy
    slabs: tuple  # bytes of each slab the class carves blocks from


class TensorState(NamedTuple):
    """The latest description of a live tensor the trace has seen."""
    tensor: int
    name: str | None
    shape: tuple
    dtype: str
    requires_grad: bool
    is_leaf: bool
    storage: int


class NodeState(NamedTuple):
    """A graph node whose record is live (made by an op, not yet released)."""
    node: int
    op: str
    slot: int | None  # its record's slot in the node arena
    phase: str
    inputs: tuple  # tensor ids
    output: int
    saved: tuple  # storage ids it holds for backward
    next: tuple  # where input grads go: {"node": id} / {"leaf": tensor id} / None
    born: int
    ran: bool  # its backward ran in the latest backward pass


class NodeRecords(NamedTuple):
    live: int
    top: int  # next free slot of the node arena (0 again once no record is live)


class Lifetime(NamedTuple):
    """When a storage's bytes were live: the input of liveness pictures."""
    storage: int
    birth: int | None  # step it got its bytes (a baseline's step if it was already live)
    death: int | None  # step its bytes stopped being live (None: still live at the end)
    nbytes: int
    tag: str | None
    allocator: str | None
    dtype: str | None
    block: int | None
    end: str | None  # "free" (refcount reached 0), "reset" (its arena was reset), "gap" (gone
    #                  while a nested trace recorded instead), None (alive at the end)
    preexisting: bool  # already live when recording started


@dataclass
class MemoryState:
    """What the engine's memory looked like right after event ``t``. Read-only: a snapshot.

    Dicts are keyed by id (block, storage, tensor, node), by name (``arenas``, ``pools``)
    or by ``(pool name, class index)`` (``pool_classes``).
    """
    t: int
    blocks: dict
    storages: dict
    tensors: dict
    nodes: dict
    arenas: dict
    pools: dict
    pool_classes: dict
    held_blocks: dict  # block id -> (pool name, class index), for blocks held back
    node_records: NodeRecords
    pending: dict | None  # node id -> dependency count, from the latest backward/node_run event
    ready: tuple | None
    live_bytes: int  # bytes of live storages (the engine's ``placement.live_bytes``)
    peak_bytes: int  # the most live bytes at any step up to t
    peak_step: int | None
    n_freed: int
    complete: bool  # a baseline was replayed: what existed before recording is accounted for
    _freed_log: list = field(default_factory=list, compare=False, repr=False)

    # -- views ----------------------------------------------------------------------------
    @property
    def freed(self) -> dict[int, int]:
        """Storages freed (refcount reached 0) so far: storage id -> step."""
        return dict(self._freed_log[: self.n_freed])

    @property
    def refcounts(self) -> dict[int, int]:
        return {sid: s.refcount for sid, s in self.storages.items()}

    def holders(self, storage: int) -> tuple:
        """Who holds ``storage``'s references (unnamed ones, taken before recording, as "?")."""
        s = self.storages[storage]
        return s.holders + ("?",) * s.unknown_holders

    @property
    def allocators(self) -> list[str]:
        """Names of the allocators with state at t (pools first, then arenas)."""
        return list(self.pools) + [a for a in self.arenas if a not in self.pools]

    def blocks_of(self, allocator: str) -> list[BlockState]:
        """``allocator``'s live blocks in address order (chunk, then offset)."""
        return sorted((b for b in self.blocks.values() if b.allocator == allocator),
                      key=lambda b: (b.chunk, b.offset))

    def size_classes(self, pool: str) -> dict:
        """``pool``'s size classes that have blocks or slabs: class index -> PoolClassState."""
        return {c: s for (name, c), s in self.pool_classes.items() if name == pool}

    def summary(self) -> str:
        """The state in a few plain sentences (the text beside a memory picture)."""
        parts = [f"after event {self.t}: {len(self.storages)} live storages, "
                 f"{self.live_bytes} bytes live (peak {self.peak_bytes} B"
                 + (f" at event {self.peak_step})" if self.peak_step is not None else ")")
                 + f", {self.n_freed} storages freed so far"]
        for name, p in self.pools.items():
            classes = self.size_classes(name).values()
            parts.append(f"{name}: {sum(c.in_use for c in classes)} blocks in use "
                         f"({sum(c.requested for c in classes)} B requested, "
                         f"{sum(c.reserved for c in classes)} B reserved), "
                         f"{sum(c.free for c in classes)} free, {p.held} held back")
        for name, a in self.arenas.items():
            parts.append(f"{name}: {a.live_blocks} live blocks, {a.used} of {a.capacity} B used "
                         f"in {len(a.chunks)} chunk(s), generation {a.generation}")
        parts.append(f"{len(self.nodes)} graph nodes recorded live, {self.node_records.live} node records live")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"MemoryState({self.summary()})"


def _empty_state() -> MemoryState:
    return MemoryState(t=-1, blocks={}, storages={}, tensors={}, nodes={}, arenas={}, pools={},
                       pool_classes={}, held_blocks={}, node_records=NodeRecords(0, 0), pending=None,
                       ready=None, live_bytes=0, peak_bytes=0, peak_step=None, n_freed=0, complete=False)


class _Replayer:
    """Applies events one by one to mutable dicts of immutable records.

    The ``main`` replayer runs once over the whole trace and also builds the lifetimes and
    the freed log; the others only move a cursor between snapshots.
    """

    def __init__(self, state: MemoryState, main: bool = False):
        self.t = state.t
        self.blocks, self.storages = dict(state.blocks), dict(state.storages)
        self.tensors, self.nodes = dict(state.tensors), dict(state.nodes)
        self.arenas, self.pools = dict(state.arenas), dict(state.pools)
        self.pool_classes, self.held = dict(state.pool_classes), dict(state.held_blocks)
        self.node_records, self.pending, self.ready = state.node_records, state.pending, state.ready
        self.live_bytes, self.peak_bytes, self.peak_step = state.live_bytes, state.peak_bytes, state.peak_step
        self.n_freed, self.complete, self.log = state.n_freed, state.complete, state._freed_log
        self.main = main
        if main:
            self.lives: list[list] = []  # Lifetime fields, mutable while the pass runs
            self.alive: dict[int, list] = {}  # storage id -> its open lifetime
            self.segments: list[list] = []  # [baseline step, bytes of storages replay cannot see]

    def snapshot(self) -> MemoryState:
        return MemoryState(
            t=self.t, blocks=dict(self.blocks), storages=dict(self.storages), tensors=dict(self.tensors),
            nodes=dict(self.nodes), arenas=dict(self.arenas), pools=dict(self.pools),
            pool_classes=dict(self.pool_classes), held_blocks=dict(self.held),
            node_records=self.node_records, pending=self.pending, ready=self.ready,
            live_bytes=self.live_bytes, peak_bytes=self.peak_bytes, peak_step=self.peak_step,
            n_freed=self.n_freed, complete=self.complete, _freed_log=self.log)

    def apply(self, e: dict) -> None:
        self.t += 1
        handler = _HANDLERS.get(e["kind"])
        if handler is not None:
            handler(self, e)
        if self.live_bytes > self.peak_bytes or self.peak_step is None:
            self.peak_bytes, self.peak_step = max(self.live_bytes, self.peak_bytes), self.t

    # -- lifetimes (main replayer only) ------------------------------------------------------
    def _born(self, s: StorageState, step: int, preexisting: bool) -> None:
        life = [s.storage, step, None, s.nbytes, s.tag, s.allocator, s.dtype, s.block, None, preexisting]
        self.lives.append(life)
        self.alive[s.storage] = life

    def _died(self, sid: int, step: int, end: str) -> None:
        life = self.alive.pop(sid, None)
        if life is not None:
            life[2], life[8] = step, end

    # -- storages ---------------------------------------------------------------------------
    def _alloc(self, e):
        sid, bid = e["storage"], e.get("block")
        s = StorageState(sid, e["nbytes"], e.get("dtype"), e.get("tag"), e.get("allocator"), bid,
                         0, (), 0, False, e["step"])
        self.storages[sid] = s
        if bid is not None and bid in self.blocks:
            self.blocks[bid] = self.blocks[bid]._replace(storage=sid)
        self.live_bytes += s.nbytes
        if self.main:
            self._born(s, e["step"], False)

    def _refcount(self, e):
        sid, delta, holder = e["storage"], e["delta"], e.get("holder", "?")
        s = self.storages.get(sid)
        if s is None:  # a storage made before recording, seen for the first time
            before = e["refcount"] - delta
            s = StorageState(sid, None, None, None, None, None, before, (), before, False, None)
        holders, unknown = s.holders, s.unknown_holders
        tensor = self.tensors.get(int(holder[7:])) if holder.startswith("tensor ") else None
        if delta > 0:
            holders += (holder,) * delta
            if tensor is not None and tensor.storage != sid:  # repointed to these bytes
                self.tensors[tensor.tensor] = tensor._replace(storage=sid)
        else:
            for _ in range(-delta):
                if holder in holders:
                    i = holders.index(holder)
                    holders = holders[:i] + holders[i + 1:]
                elif unknown:
                    unknown -= 1
            if tensor is not None and tensor.storage == sid:  # a tensor holds one reference: it died
                del self.tensors[tensor.tensor]
        self.storages[sid] = s._replace(refcount=e["refcount"], holders=holders, unknown_holders=unknown)

    def _free(self, e):
        sid, step = e["storage"], e["step"]
        s = self.storages.pop(sid, None)
        stale = e.get("stale", False) or (s is not None and s.stale)
        if s is not None and s.nbytes is not None:
            if not stale:
                self.live_bytes -= s.nbytes
                if self.main:
                    self._died(sid, step, "free")
        elif self.complete and not stale:
            # made before recording, outside every allocator the baseline saw: its bytes were
            # part of the baseline's live bytes all along
            self.live_bytes -= e["nbytes"]
            if self.main and self.segments:
                start, _ = self.segments[-1]
                self.segments[-1][1] -= e["nbytes"]
                self.lives.append([sid, start, step, e["nbytes"], s.tag if s else None, "heap",
                                   s.dtype if s else None, None, "free", True])
        self.n_freed += 1
        if self.main:
            self.log.append((sid, step))

    def _tensor(self, e):
        tid = e["tensor"]
        self.tensors[tid] = TensorState(tid, e.get("name"), tuple(e["shape"]), e["dtype"],
                                        e["requires_grad"], e["is_leaf"], e["storage"])

    # -- blocks -----------------------------------------------------------------------------
    def _pool_class(self, name: str, c, size) -> PoolClassState:
        cls = self.pool_classes.get((name, c))
        if cls is None:
            cls = PoolClassState(name, c, size, 0, 0, 0, 0, 0, ())
            if name not in self.pools:
                self.pools[name] = PoolState(name, 0, 0)
        return cls

    def _arena(self, name: str) -> ArenaState:
        a = self.arenas.get(name)
        return a if a is not None else ArenaState(name, (), 0, 0, 0, 0, 0, 0)

    def _alloc_block(self, e):
        name, bid, chunk, offset = e["allocator"], e["block"], e["chunk"], e["offset"]
        nbytes, size = e["nbytes"], e["size"]
        pooled = "size_class" in e
        c = e.get("size_class") if pooled else None
        self.blocks[bid] = BlockState(name, bid, chunk, offset, size, nbytes, e.get("padding", 0),
                                      e.get("tag", ""), c, None, e["step"])
        if pooled:
            cls = self._pool_class(name, c, size if c is not None else None)
            slabs = cls.slabs
            if c is not None and chunk >= len(slabs):
                slabs += (e.get("slab_bytes", size),) * (chunk + 1 - len(slabs))
            self.pool_classes[(name, c)] = cls._replace(
                in_use=cls.in_use + 1, requested=cls.requested + nbytes, reserved=cls.reserved + size,
                free=cls.free - 1 if e.get("reused") else cls.free, slabs=slabs)
        else:
            a = self._arena(name)
            chunks = a.chunks if chunk < len(a.chunks) else a.chunks + (0,) * (chunk + 1 - len(a.chunks))
            self.arenas[name] = a._replace(
                chunks=chunks, live_blocks=a.live_blocks + 1, requested=a.requested + nbytes,
                padding=a.padding + e.get("padding", 0), used=sum(chunks[:chunk]) + offset + nbytes)

    def _free_block(self, e):
        b = self.blocks.pop(e["block"], None)
        if b is None:  # handed out before recording, and no baseline described it
            return
        key = (b.allocator, b.size_class)
        cls = self.pool_classes.get(key)
        if cls is not None:  # a pool block
            held, free = cls.held, cls.free
            if e.get("held"):
                held += 1
                self.held[b.block] = key
                p = self.pools[b.allocator]
                self.pools[b.allocator] = p._replace(held=p.held + 1)
            elif b.size_class is not None:
                free += 1
            self.pool_classes[key] = cls._replace(in_use=cls.in_use - 1, requested=cls.requested - b.nbytes,
                                                  reserved=cls.reserved - b.size, held=held, free=free)
        else:
            a = self._arena(b.allocator)
            self.arenas[b.allocator] = a._replace(live_blocks=a.live_blocks - 1,
                                                  requested=a.requested - b.nbytes)

    def _pool_epoch(self, e):
        name = e["allocator"]
        for bid in e.get("released", ()):
            key = self.held.pop(bid, None)
            if key is not None:
                cls = self.pool_classes[key]
                self.pool_classes[key] = cls._replace(held=cls.held - 1, free=cls.free + 1)
        self.pools[name] = PoolState(name, e["epoch"], e.get("held", 0))

    def _arena_chunk(self, e):
        name = e["arena"]
        if not e.get("growth"):  # a new arena (one made again under an old name replaces it)
            self.arenas[name] = ArenaState(name, (e["nbytes"],), 0, 0, 0, 0, 0, 0)
            return
        a = self._arena(name)
        chunks = a.chunks + (0,) * max(0, e["chunk"] - len(a.chunks))
        self.arenas[name] = a._replace(chunks=chunks + (e["nbytes"],))

    def _arena_reset(self, e):
        name, step = e["arena"], e["step"]
        blocks = e.get("blocks")
        if blocks is None:  # a trace from before resets listed their blocks
            blocks = [bid for bid, b in self.blocks.items() if b.allocator == name]
        for bid in blocks:
            self.blocks.pop(bid, None)
        stale = e.get("stale")
        if stale is None:
            stale = [s.storage for s in self.storages.values() if s.allocator == name and not s.stale]
        for sid in stale:
            s = self.storages.get(sid)
            if s is not None and not s.stale:
                self.storages[sid] = s._replace(stale=True)
                if s.nbytes is not None:
                    self.live_bytes -= s.nbytes
                if self.main:
                    self._died(sid, step, "reset")
        a = self._arena(name)
        self.arenas[name] = a._replace(generation=e.get("generation", a.generation + 1), resets=a.resets + 1,
                                       live_blocks=0, requested=0, padding=0, used=0)

    # -- the graph --------------------------------------------------------------------------
    def _op(self, e):
        nid = e.get("node")
        if nid is None:
            return
        slot = e.get("slot")
        self.nodes[nid] = NodeState(nid, e["op"], slot, e.get("phase", "forward"), tuple(e["inputs"]),
                                    e["output"], tuple(e.get("saved", ())), tuple(e.get("next", ())),
                                    e["step"], False)
        live, top = self.node_records
        self.node_records = NodeRecords(live + 1, top if slot is None else slot + 1)

    def _release(self, e):
        node = self.nodes.pop(e["node"], None)
        freed = e["slot"] is not None if "slot" in e else node is not None
        if freed and (node is not None or self.complete):
            live, top = self.node_records
            live = max(0, live - 1)
            self.node_records = NodeRecords(live, top if live else 0)

    def _backward(self, e):
        for nid, n in self.nodes.items():
            if n.ran:
                self.nodes[nid] = n._replace(ran=False)
        self.pending = e.get("pending")
        ready = e.get("ready")
        self.ready = None if ready is None else tuple(ready)

    def _node_run(self, e):
        n = self.nodes.get(e["node"])
        if n is not None:
            self.nodes[e["node"]] = n._replace(ran=True)
        self.pending = e.get("pending")
        ready = e.get("ready")
        self.ready = None if ready is None else tuple(ready)

    # -- what was live when recording started ----------------------------------------------
    def _baseline(self, e):
        step = e["step"]
        self.blocks, self.arenas, self.pools, self.pool_classes, self.held = {}, {}, {}, {}, {}
        for a in e.get("allocators", ()):
            name = a["name"]
            if a["kind"] == "pool":
                old = self.pools.get(name)
                held = len(a.get("held", ())) + (old.held if old else 0)
                self.pools[name] = PoolState(name, a.get("epoch", 0), held)
                for c in a.get("classes", ()):
                    cls = self._pool_class(name, c["size_class"], c["size"])
                    self.pool_classes[(name, c["size_class"])] = cls._replace(
                        free=cls.free + c["free"], slabs=cls.slabs + tuple(c["slabs"]))
                for bid, c in a.get("held", ()):
                    cls = self._pool_class(name, c, None)
                    self.pool_classes[(name, c)] = cls._replace(held=cls.held + 1)
                    self.held[bid] = (name, c)
            else:
                self.arenas[name] = ArenaState(name, tuple(a["chunks"]), a.get("generation", 0),
                                               a.get("resets", 0), 0, 0, a.get("padding", 0), a.get("used", 0))
        for b in e.get("blocks", ()):
            name, c = b["allocator"], b.get("size_class")
            self.blocks[b["block"]] = BlockState(name, b["block"], b["chunk"], b["offset"], b["size"],
                                                 b["nbytes"], b.get("padding", 0), b.get("tag", ""), c,
                                                 b.get("storage"), None)
            if name in self.pools:
                cls = self._pool_class(name, c, b["size"] if c is not None else None)
                self.pool_classes[(name, c)] = cls._replace(
                    in_use=cls.in_use + 1, requested=cls.requested + b["nbytes"],
                    reserved=cls.reserved + b["size"])
            else:
                a = self._arena(name)
                self.arenas[name] = a._replace(live_blocks=a.live_blocks + 1, requested=a.requested + b["nbytes"])
        # storages: the baseline sees every storage in an allocator's live block; keep the
        # ones it cannot see (heap storages, stale ones) from what replay knew
        seen = {s["storage"]: s for s in e.get("storages", ())}
        storages = {}
        for sid, s in self.storages.items():
            if sid not in seen and (s.stale or s.allocator in (None, "heap")):
                storages[sid] = s
            elif sid not in seen and self.main:
                self._died(sid, step, "gap")  # gone while a nested trace recorded instead
        for sid, d in seen.items():
            old = self.storages.get(sid)
            if old is not None and old.refcount == d["refcount"]:
                holders, unknown = old.holders, old.unknown_holders
            else:
                holders, unknown = (), d["refcount"]
            s = StorageState(sid, d["nbytes"], d.get("dtype"), d.get("tag"), d.get("allocator"),
                             d.get("block"), d["refcount"], holders, unknown, d.get("stale", False),
                             old.born if old is not None else None)
            storages[sid] = s
            if self.main:
                if s.stale:
                    self._died(sid, step, "gap")
                elif sid not in self.alive:
                    self._born(s, step, True)
        self.storages = storages
        records = e.get("node_records") or {}
        self.node_records = NodeRecords(records.get("live", 0), records.get("top", 0))
        self.live_bytes = e.get("live_bytes", self.live_bytes)
        self.complete = True
        if self.main:
            seen_bytes = sum(s.nbytes for s in storages.values() if not s.stale and s.nbytes is not None)
            self.segments.append([step, self.live_bytes - seen_bytes])


_HANDLERS = {
    "alloc": _Replayer._alloc, "refcount": _Replayer._refcount, "free": _Replayer._free,
    "tensor": _Replayer._tensor, "alloc_block": _Replayer._alloc_block,
    "free_block": _Replayer._free_block, "pool_epoch": _Replayer._pool_epoch,
    "arena_chunk": _Replayer._arena_chunk, "arena_reset": _Replayer._arena_reset,
    "op": _Replayer._op, "release": _Replayer._release, "backward": _Replayer._backward,
    "node_run": _Replayer._node_run, "baseline": _Replayer._baseline,
}


class Replay:
    """Replayed state of one event list; grows with it (a trace still recording)."""

    def __init__(self, events: list[dict], every: int = CHECKPOINT_EVERY):
        if every < 1:
            raise ValueError(f"checkpoint interval must be ≥ 1, got {every}")
        self.events, self.every = events, every
        self.initial = _empty_state()  #: the state before event 0
        self._main = _Replayer(self.initial, main=True)
        self._checkpoints = [self.initial]  # checkpoint i: the state after event i * every - 1
        self._cursor: _Replayer | None = None
        self._last: MemoryState | None = None

    def _extend(self) -> None:
        main, events, every = self._main, self.events, self.every
        while main.t < len(events) - 1:
            main.apply(events[main.t + 1])
            if (main.t + 1) % every == 0:
                self._checkpoints.append(main.snapshot())

    def state_at(self, t: int) -> MemoryState:
        """The state right after event ``t`` (negative ``t`` counts from the end, as ``tr[t]``)."""
        self._extend()
        n = len(self.events)
        if t < 0:
            t += n
        if not 0 <= t < n:
            raise IndexError(f"no event {t}: the trace has {n} events (0..{n - 1})")
        last = self._last
        if last is not None and last.t == t:
            return last
        c = self._cursor
        if c is None or c.t > t or t - c.t > self.every:
            c = self._cursor = _Replayer(self._checkpoints[(t + 1) // self.every])
        events = self.events
        while c.t < t:
            c.apply(events[c.t + 1])
        self._last = c.snapshot()
        return self._last

    def lifetimes(self) -> list[Lifetime]:
        """One record per storage whose bytes were live at some step, in birth order."""
        self._extend()
        return [Lifetime(*life) for life in self._main.lives]

    def untracked(self) -> list[tuple[int, int]]:
        """``(baseline step, bytes)``: from that step on, live bytes of storages the trace never
        saw (made before recording, outside the allocators); constant between baselines."""
        self._extend()
        return [tuple(s) for s in self._main.segments]

    def live_bytes(self) -> list[int]:
        """Live bytes after each event, from the lifetimes (the liveness picture's curve)."""
        self._extend()
        n = len(self.events)
        delta = [0] * (n + 1)
        previous = 0
        for step, untracked in self._main.segments:
            delta[step] += untracked - previous
            previous = untracked
        for life in self._main.lives:
            birth, death, nbytes = life[1], life[2], life[3]
            if birth is None or not nbytes:
                continue
            delta[birth] += nbytes
            if death is not None:
                delta[death] -= nbytes
        out, running = [], 0
        for i in range(n):
            running += delta[i]
            out.append(running)
        return out

    def peak(self) -> tuple[int, int | None]:
        """``(peak live bytes, the first step it is reached)`` over the whole trace."""
        best, step = 0, None
        for i, b in enumerate(self.live_bytes()):
            if step is None or b > best:
                best, step = b, i
        return best, step
