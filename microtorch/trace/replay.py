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

**One replay for every panel.** A trace has one :class:`Replay` (``tr.replay()``). It
answers the memory state itself, drives the other concerns' reducers with its own cursor
(:meth:`Replay.follow`: the graph picture's state at ``t``) and holds the per-trace facts
pictures share (:meth:`Replay.facts`: the memory timeline, the event index, layouts), so
no panel replays events on its own or keeps its own cache of them.

**Where things are.** This module keeps the snapshots and answers ``state_at``,
``lifetimes`` and ``peak``; the records a state is made of (re-exported here) are in
:mod:`microtorch.trace.replay_state`, and what each event kind does to them in
:mod:`microtorch.trace.replay_events`.
"""
from __future__ import annotations

from .replay_events import _Replayer
# the records a replayed state is made of, re-exported: tr.state_at(t) returns them
from .replay_state import (ArenaState, BlockState, Lifetime, MemoryState, NodeRecords, NodeState,  # noqa: F401
                           PoolClassState, PoolState, StorageState, TensorState, _empty_state)

#: A snapshot of the replayed state is kept every this many events.
CHECKPOINT_EVERY = 64


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
        self._followers: dict = {}  # reducer class -> (its cursor, its last (t, state))
        self._facts: dict = {}  # key -> facts of the whole trace, for self._facts_n events
        self._facts_n = -1

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

    def follow(self, reducer, t: int):
        """The state of another concern after event ``t``, replayed by this replay's cursor.

        ``reducer`` is a class (or a hashable callable: one cursor per distinct value, like
        the NUMA panel's :class:`~microtorch.viz.numa.NumaConcern`) with ``__init__(events)``, ``t`` (the last event applied, -1 at
        first), ``apply(event)`` and ``snapshot()`` (an independent, read-only state): the
        graph picture's :class:`~microtorch.viz.graph_state.GraphReplayer`, say. One cursor per
        reducer is kept here: stepping forward applies only the new events, stepping back
        starts it over."""
        self._extend()
        events = self.events
        cursor, last = self._followers.get(reducer, (None, None))
        if last is not None and last[0] == t and last[2] == len(events):
            return last[1]
        if cursor is None or cursor.t > t:
            cursor = reducer(events)
        while cursor.t < t:
            cursor.apply(events[cursor.t + 1])
        state = cursor.snapshot()
        self._followers[reducer] = (cursor, (t, state, len(events)))
        return state

    def facts(self, key, build):
        """``build()``, once per ``key`` while the trace keeps its length: the facts pictures
        share that do not depend on ``t`` (the memory timeline, the event index, layouts).
        Every panel's per-trace store is this one, so they are forgotten together when the
        trace grows."""
        n = len(self.events)
        if n != self._facts_n:
            self._facts, self._facts_n = {}, n
        got = self._facts.get(key, self)
        if got is self:
            got = self._facts[key] = build()
        return got

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
