"""The node arena: every graph node has a fixed-size record in a bump-allocated arena.

As in the C engine, every function node gets a 64-byte record (one cache line)
bump-allocated from an arena, and the whole arena resets in one step once the last
record is freed:

=================  =====================================================================
``op``             which op made the node (an index into :data:`OPS`)
``n_inputs``       how many tensor inputs it had
``inputs[4]``      for the first four inputs: the producer's record slot, −1 for a leaf
                   that requires grad, −2 for an input that needs no gradient
``n_saved``        how many tensors it saved for backward
``saved[4]``       the storage ids of the first four saved tensors
``slot``           the record's own index in the arena
=================  =====================================================================

**The records are a mirror, not the graph.** The graph is the Python node objects
(:class:`microtorch.node.Function`): ``node.next`` holds every input's edge (any number),
and the backward engine (:mod:`microtorch.autograd`) counts dependencies in
``node.pending``, a plain attribute. A record is written once, when its node is made, and
shows what the C engine's struct would hold — enough for ``table()``, the memory
statistics and the arena pictures (which read the trace's ``op`` and ``release`` events,
not the records) — so the arena's bytes, high water and resets are real while the engine
keeps one source of truth. A record is freed when its node is released after backward (or
dropped), and when the last live record goes the arena resets: the next graph reuses the
same bytes. Records are typed (a structured numpy array per chunk), so the node arena is
its own small bump allocator rather than an :class:`Arena` of raw bytes.
"""
from __future__ import annotations

import numpy as np

# native-endian int32 fields, so the int32 memoryview words read the same numbers
_FIELDS = [("op", "=i4"), ("n_inputs", "=i4"), ("inputs", "=i4", (4,)), ("n_saved", "=i4"),
           ("saved", "=i4", (4,)), ("slot", "=i4")]
RECORD = np.dtype({"names": [f[0] for f in _FIELDS], "formats": [f[1:] if len(f) > 2 else f[1] for f in _FIELDS],
                   "itemsize": 64})  # 48 bytes of fields, padded to the cache line
assert RECORD.itemsize == 64, "a node record is one 64-byte cache line"
WORDS = RECORD.itemsize // 4  # int32 words per record
# each field's first word within a record
OP, N_INPUTS, INPUTS, N_SAVED, SAVED, SLOT = (RECORD.fields[name][1] // 4 for name in RECORD.names)

LEAF, NO_GRAD = -1, -2

OPS: list[str] = []  # op names, in the order ops first made a node
_op_index: dict[type, int] = {}


def op_id(cls: type) -> int:
    """A small integer naming an op class (records store numbers, not Python objects)."""
    i = _op_index.get(cls)
    if i is None:
        i = _op_index[cls] = len(OPS)
        OPS.append(cls.__name__)
    return i


class NodeArena:
    """A bump allocator of node records over chained chunks of record arrays.

    ``new`` hands out the next slot (chaining a chunk 1.5× the capacity so far when the
    current ones are full — records never move); ``free`` only counts the record dead; when
    the last live record dies the top goes back to slot 0 (a reset) and the next graph
    reuses the same bytes.
    """

    def __init__(self, capacity: int = 1024, growth: float = 1.5, name: str = "node arena"):
        self.name, self.growth = name, growth
        self.chunks: list[np.ndarray] = [np.zeros(capacity, dtype=RECORD)]
        self._words = [_words(self.chunks[0])]  # each chunk as int32 words
        self._bases = [0]  # slot number of each chunk's first record
        self._chunk = 0  # chunk the top is in
        self.top = 0  # next free slot
        self.live = 0
        self.high_water = 0
        self.resets = self.growths = self.allocations = 0

    @property
    def capacity(self) -> int:
        """Records the arena can hold before it has to chain another chunk."""
        return self._bases[-1] + len(self.chunks[-1])

    def new(self, node) -> tuple[np.void, int]:
        """The next record, filled in from ``node``'s edges and saved tensors: a structured
        view of it (for reading: nothing writes a record after this) and its slot."""
        slot = self.top
        chunk = self.chunks[self._chunk]
        i = slot - self._bases[self._chunk]
        if i == len(chunk):
            if self._chunk + 1 == len(self.chunks):
                self.chunks.append(np.zeros(max(1, int(self.capacity * (self.growth - 1))), dtype=RECORD))
                self._words.append(_words(self.chunks[-1]))
                self._bases.append(slot)
                self.growths += 1
            self._chunk += 1
            chunk, i = self.chunks[self._chunk], 0
        edges, saved = node.next, node.saved
        n_inputs, n_saved = len(edges), len(saved)
        words = self._words[self._chunk][i * WORDS: (i + 1) * WORDS]
        words[OP], words[N_INPUTS], words[N_SAVED] = op_id(type(node)), n_inputs, n_saved
        for k in range(4):  # word by word: cheaper than a structured-array row or struct.pack_into
            words[INPUTS + k] = _input_code(edges[k]) if k < n_inputs else NO_GRAD
            words[SAVED + k] = saved[k].storage.id if k < n_saved else 0
        words[SLOT] = slot
        self.top = slot + 1
        self.live += 1
        self.allocations += 1
        if self.top > self.high_water:
            self.high_water = self.top
        return chunk[i], slot

    def free(self, node) -> None:
        """``node`` is done (released after backward, or its graph dropped); the arena resets
        once no record is live."""
        self.live -= 1
        if self.live == 0:
            self.top = self._chunk = 0
            self.resets += 1

    @property
    def nbytes(self) -> int:
        return self.capacity * RECORD.itemsize

    def table(self) -> np.ndarray:
        """Every record below the top (live or freed since the last reset), for looking at."""
        return np.concatenate(self.chunks)[: self.top].copy()

    def stats(self) -> dict:
        return {"name": self.name, "capacity_records": self.capacity, "bytes": self.nbytes,
                "live_records": self.live, "top": self.top, "high_water": self.high_water,
                "utilization": self.live / self.capacity, "growths": self.growths,
                "resets": self.resets, "allocations": self.allocations}

    def __repr__(self) -> str:
        return (f"NodeArena({self.live} live records of {RECORD.itemsize} B, top {self.top}, "
                f"capacity {self.capacity}, high water {self.high_water}, {self.growths} growths)")


def _input_code(edge) -> int:
    if edge is None:
        return NO_GRAD
    slot = getattr(edge, "slot", None)  # a leaf tensor has none; a released node's is None
    return LEAF if slot is None else slot


def _words(chunk: np.ndarray) -> memoryview:
    """The chunk's bytes as int32 words (record ``i`` is words ``16 i`` to ``16 i + 15``)."""
    return memoryview(chunk).cast("B").cast("i")


nodes = NodeArena()
