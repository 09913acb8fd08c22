"""How each event kind changes the replayed memory state: the event handlers of a replay.

:class:`_Replayer` holds the state of one step as mutable dicts of the immutable records of
:mod:`microtorch.trace.replay_state` and applies events to them one by one (``alloc``,
``refcount``, ``free``, ``tensor``, ``alloc_block``, ``free_block``, ``pool_epoch``,
``arena_chunk``, ``arena_reset``, ``op``, ``release``, ``backward``, ``node_run``,
``baseline``). :class:`~microtorch.trace.replay.Replay` drives it.
"""
from __future__ import annotations

from ..recording import UNKNOWN, Holder
from .replay_state import (ArenaState, BlockState, MemoryState, NodeRecords, NodeState, PoolClassState,
                           PoolState, StorageState, TensorState)


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
        sid, delta, holder = e["storage"], e["delta"], Holder.parse(e.get("holder", UNKNOWN))
        s = self.storages.get(sid)
        if s is None:  # a storage made before recording, seen for the first time
            before = e["refcount"] - delta
            s = StorageState(sid, None, None, None, None, None, before, (), before, False, None)
        holders, unknown = s.holders, s.unknown_holders
        tensor = self.tensors.get(holder.id) if holder.kind == "tensor" else None
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
