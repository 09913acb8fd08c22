"""What a replayed step looks like: :class:`MemoryState` and the immutable records it holds.

One ``NamedTuple`` per thing the trace describes — a live block (:class:`BlockState`), a live
storage with its holders (:class:`StorageState`), an arena, a pool and each of its size
classes, a tensor, a graph node, the node records — plus :class:`Lifetime`, one storage's
birth and death. An event replaces a record rather than changing it, which is what makes
the replay's snapshots cheap (:mod:`microtorch.trace.replay`); how each event kind changes
them is in :mod:`microtorch.trace.replay_events`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..recording import UNKNOWN


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
    holders: tuple  # Holders (microtorch.recording.Holder): "tensor 3", "node 7 (MulBackward)", ...
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
        """Who holds ``storage``'s references (:class:`~microtorch.recording.Holder`; unnamed
        ones, taken before recording, as ``UNKNOWN``, whose words are "?")."""
        s = self.storages[storage]
        return s.holders + (UNKNOWN,) * s.unknown_holders

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
