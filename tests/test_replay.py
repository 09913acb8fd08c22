"""Replay: ``tr.state_at(t)`` rebuilds the memory state from events alone, and agrees with the
live allocators; ``tr.lifetimes()`` / ``tr.peak()`` agree with it; training loops leak nothing.

Agreement is checked against the real engine: at chosen moments a test puts a ``mark`` in
the trace and snapshots the live pool/arena/refcount state right then; the replayed state
at the mark's step must be identical.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import Arena, Pool, placement, step_arena, use_pool
from microtorch.memory.node_arena import nodes
from microtorch.trace.replay import CHECKPOINT_EVERY, MemoryState


# --------------------------------------------------------------------------------------------
# the live side and the replayed side, in one comparable shape
# --------------------------------------------------------------------------------------------
def live_view(pools, arenas) -> dict:
    """The engine's memory state now, for the given allocators (plus engine-wide counters)."""
    blocks, refcounts = {}, {}
    for a in list(pools) + list(arenas):
        live = a.live if isinstance(a, Pool) else a.live_blocks
        for b in live.values():
            s = b.user() if b.user is not None else None
            sid = s.id if (s is not None and not s.freed and s.stale is None) else None
            blocks[b.id] = (a.name, b.chunk, b.offset, b.size, b.nbytes, b.padding, b.tag, b.size_class, sid)
            if sid is not None:
                refcounts[sid] = s.refcount
    return {
        "blocks": blocks,
        "refcounts": refcounts,
        "pools": {p.name: {"epoch": p.epoch, "requested": p.requested, "reserved": p.reserved,
                           "live": len(p.live), "held": len(p.held),
                           "classes": [(r["size"], r["in_use"], r["free"], r["held"], r["slab_bytes"])
                                       for r in p.class_table()]}
                  for p in pools},
        "arenas": {a.name: {"chunks": tuple(c.nbytes for c in a.chunks), "generation": a.generation,
                            "resets": a.resets, "requested": a.requested, "used": a.used,
                            "padding": a.padding, "live": len(a.live_blocks)}
                   for a in arenas},
        "live_bytes": placement.live_bytes,
        "node_records": (nodes.live, nodes.top),
    }


def replayed_view(state: MemoryState, pools, arenas) -> dict:
    """The same shape as :func:`live_view`, from a replayed state only."""
    names = {a.name for a in list(pools) + list(arenas)}
    blocks = {bid: (b.allocator, b.chunk, b.offset, b.size, b.nbytes, b.padding, b.tag, b.size_class, b.storage)
              for bid, b in state.blocks.items() if b.allocator in names}
    refcounts = {b[-1]: state.storages[b[-1]].refcount for b in blocks.values() if b[-1] is not None}
    out_pools = {}
    for p in pools:
        classes = state.size_classes(p.name)
        out_pools[p.name] = {
            "epoch": state.pools[p.name].epoch if p.name in state.pools else 0,
            "requested": sum(c.requested for c in classes.values()),
            "reserved": sum(c.reserved for c in classes.values()),
            "live": sum(c.in_use for c in classes.values()),
            "held": state.pools[p.name].held if p.name in state.pools else 0,
            "classes": [(c.size, c.in_use, c.free, c.held, sum(c.slabs))
                        for _, c in sorted((k, c) for k, c in classes.items() if k is not None and c.slabs)],
        }
    out_arenas = {a.name: {"chunks": s.chunks, "generation": s.generation, "resets": s.resets,
                           "requested": s.requested, "used": s.used, "padding": s.padding, "live": s.live_blocks}
                  for a in arenas for s in [state.arenas[a.name]]}
    return {"blocks": blocks, "refcounts": refcounts, "pools": out_pools, "arenas": out_arenas,
            "live_bytes": state.live_bytes, "node_records": tuple(state.node_records)}


class Marks:
    """``marks.here(label)``: a mark event plus a snapshot of the live state at that moment."""

    def __init__(self, tr, pools=(), arenas=()):
        self.tr, self.pools, self.arenas, self.taken = tr, list(pools), list(arenas), []

    def here(self, label: str) -> None:
        step = self.tr.mark(label)
        self.taken.append((step, label, live_view(self.pools, self.arenas)))

    def check(self, tr=None) -> int:
        tr = tr or self.tr
        for step, label, live in self.taken:
            state = tr.state_at(step)
            assert replayed_view(state, self.pools, self.arenas) == live, f"at mark {label!r} (step {step})"
            for s in state.storages.values():  # every reference is accounted for, named or not
                assert len(s.holders) + s.unknown_holders == s.refcount, s
        return len(self.taken)


# --------------------------------------------------------------------------------------------
# a small MLP trained with plain ops
# --------------------------------------------------------------------------------------------
def make_problem(seed=0, n=16, din=4, dh=8, classes=3):
    mt.manual_seed(seed)
    X = mt.randn(n, din)
    y = mt.tensor(np.digitize(X.numpy()[:, 0] + 0.5 * X.numpy()[:, 1], [-0.5, 0.5]).astype(np.int64))
    params = []
    for shape, scale in (((din, dh), 0.5), ((dh,), 0.0), ((dh, classes), 0.5), ((classes,), 0.0)):
        p = (mt.randn(*shape) * scale).requires_grad_()
        params.append(p)
    return X, y, params


def train_step(X, y, params, lr=0.1, marks: Marks | None = None) -> float:
    W1, b1, W2, b2 = params
    h = (X @ W1 + b1).relu()
    logits = h @ W2 + b2
    loss = mt.cross_entropy(logits, y)
    if marks:
        marks.here("forward done")
    loss.backward()
    if marks:
        marks.here("backward done")
    with mt.no_grad():
        for p in params:
            p._data -= (p.grad * lr)._data  # the update step's temporary is an engine tensor too
            p._storage.version += 1
            p.grad = None
    if marks:
        marks.here("updated")
    return loss.item()


def usage(pool: Pool) -> tuple:
    return (pool.requested, pool.reserved, len(pool.live), nodes.live, placement.live_bytes)


@pytest.mark.parametrize("with_arena", [False, True], ids=["pool only", "step arena"])
def test_a_thousand_training_steps_leak_nothing(with_arena):
    pool = Pool(name="train pool")
    arena = Arena(capacity=1 << 12, name="train arena") if with_arena else None
    with use_pool(pool):
        X, y, params = make_problem()
        before = usage(pool)
        losses, capacities = [], []
        for _ in range(1000):
            if arena is None:
                losses.append(train_step(X, y, params))
            else:
                with step_arena(arena):
                    losses.append(train_step(X, y, params))
                    assert not arena.live_blocks  # every step tensor died before the reset
                capacities.append(arena.capacity)
            assert usage(pool) == before  # pool, node records and live bytes back to where they were
    assert losses[-1] < 0.5 * losses[0]  # it did learn
    if arena is not None:
        assert arena.resets == 1000 and len(set(capacities[1:])) == 1  # no growth after the first step


@pytest.mark.parametrize("with_arena", [False, True], ids=["pool only", "step arena"])
def test_state_at_agrees_with_the_live_allocators_during_training(with_arena):
    pool = Pool(name="recorded pool", defer_epochs=1)  # deferred release: blocks are held back
    arena = Arena(capacity=256, name="recorded arena") if with_arena else None  # small: it grows
    engine_pool = placement.pool()  # holds whatever earlier tests left alive: the baseline knows
    with use_pool(pool):
        X, y, params = make_problem(seed=1)
        train_step(X, y, params)  # something already live before recording starts
        with mt.trace() as tr:
            marks = Marks(tr, [pool, engine_pool], [arena] if arena else [])
            marks.here("start")
            for _ in range(20):
                if arena is None:
                    train_step(X, y, params, marks=marks)
                else:
                    with step_arena(arena):
                        train_step(X, y, params, marks=marks)
                    marks.here("after the arena reset")
                pool.advance_epoch()
                marks.here("next epoch")
    assert marks.check() > 60
    kinds = tr.kinds()
    assert kinds["baseline"] == 1 and kinds["pool_epoch"] == 20
    if arena is not None:
        assert kinds["arena_reset"] == 20 and tr.state_at(-1).arenas[arena.name].resets == 20
    # a parameter made before recording: one reference (the tensor itself), taken unseen
    W1 = params[0]
    final = tr.state_at(-1)
    assert final.holders(W1.storage.id) == ("?",) and final.storages[W1.storage.id].unknown_holders == 1
    assert final.freed and all(step <= final.t for step in final.freed.values())


def test_state_at_every_step_equals_a_fresh_replay_from_scratch():
    """The cursor/checkpoint machinery gives exactly what replaying 0..t from empty gives."""
    from microtorch.trace.replay import Replay

    pool = Pool(name="scratch pool")
    with use_pool(pool):
        X, y, params = make_problem(seed=2)
        with mt.trace() as tr:
            for _ in range(3):
                train_step(X, y, params)
    assert len(tr) > 2 * CHECKPOINT_EVERY
    small = Replay(tr.events, every=1)  # a snapshot after every event: the reference
    order = list(range(len(tr)))
    random.Random(0).shuffle(order)  # random jumps, not just forward scrubbing
    for t in order[:200] + list(range(len(tr))):
        assert tr.state_at(t) == small.state_at(t), t
    assert tr.state_at(-1) == tr.state_at(len(tr) - 1)
    with pytest.raises(IndexError):
        tr.state_at(len(tr))


# --------------------------------------------------------------------------------------------
# allocators on their own: random alloc / free / epoch / reset sequences
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_random_allocator_programs_replay_exactly(seed):
    rng = random.Random(seed)
    pool = Pool(name=f"random pool {seed}", max_block=1024, defer_epochs=rng.choice([0, 1, 2]))
    arena = Arena(capacity=128, alignment=rng.choice([8, 64]), name=f"random arena {seed}")
    pool_blocks = [pool.alloc(rng.randint(1, 300), "early") for _ in range(5)]  # before recording
    arena_blocks = [arena.alloc(rng.randint(1, 100), "early") for _ in range(3)]
    pool.free(pool_blocks.pop())
    with mt.trace() as tr:
        marks = Marks(tr, [pool], [arena])
        marks.here("start")
        for _ in range(150):
            r = rng.random()
            if r < 0.3:
                pool_blocks.append(pool.alloc(rng.choice([rng.randint(0, 200), rng.randint(500, 2000)]), "p"))
            elif r < 0.5 and pool_blocks:
                pool.free(pool_blocks.pop(rng.randrange(len(pool_blocks))))
            elif r < 0.55:
                pool.advance_epoch()
            elif r < 0.8:
                arena_blocks.append(arena.alloc(rng.randint(0, 150), "a"))
            elif r < 0.95 and arena_blocks:
                arena.free(arena_blocks.pop(rng.randrange(len(arena_blocks))))
            else:
                arena.reset()
                arena_blocks.clear()
            marks.here("op")
    assert marks.check() == 151


# --------------------------------------------------------------------------------------------
# storages, holders, graphs
# --------------------------------------------------------------------------------------------
def test_holders_name_tensors_nodes_and_numpy_arrays():
    pool = Pool(name="holders pool")
    with use_pool(pool):
        x = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)  # before recording: holder unknown
        with mt.trace() as tr:
            v = x.detach()
            arr = v.numpy()
            y = x * x  # Mul saves x twice
            s0 = tr.mark("graph built")
            del arr
            y.sum().backward()
            s1 = tr.mark("after backward")
    sid = x.storage.id
    at0 = tr.state_at(s0)
    holders = at0.holders(sid)
    assert at0.storages[sid].unknown_holders == 1 and holders.count("?") == 1  # x itself, from before
    assert f"tensor {v._tid}" in holders and "a numpy array from .numpy()" in holders
    mul = next(e for e in tr.filter("op") if e["op"] == "Mul")
    assert holders.count(f"node {mul['node']} (MulBackward)") == 2
    assert at0.refcounts[sid] == 5 == len(holders)
    assert set(at0.nodes) == {mul["node"]} and not at0.nodes[mul["node"]].ran
    at1 = tr.state_at(s1)
    assert at1.holders(sid) == (f"tensor {v._tid}", "?") and at1.refcounts[sid] == x.storage.refcount
    assert not at1.nodes and at1.node_records.live == nodes.live
    assert y.storage.id in at1.storages  # y is still referenced; its saved copies were released


def test_dropping_a_graph_frees_its_records_in_the_trace():
    with mt.trace() as tr:
        x = mt.randn(3, requires_grad=True)
        y = (x * 2).exp().sum()
        s0 = tr.mark("built")
        live0 = (nodes.live, nodes.top)
        del y
        s1 = tr.mark("dropped")
        live1 = (nodes.live, nodes.top)
    assert tuple(tr.state_at(s0).node_records) == live0 and len(tr.state_at(s0).nodes) == 3
    assert [n.op for n in tr.state_at(s0).nodes.values()] == ["Mul", "Exp", "Sum"]
    assert [n.slot for n in tr.state_at(s0).nodes.values()] == [live0[1] - 3, live0[1] - 2, live0[1] - 1]
    assert tuple(tr.state_at(s1).node_records) == live1 and not tr.state_at(s1).nodes
    dropped = [e for e in tr.filter("release") if e["dropped"]]
    assert len(dropped) == 3 and all(e["slot"] is not None for e in dropped)


def test_preexisting_storages_come_from_the_baseline():
    pool = Pool(name="baseline pool")
    with use_pool(pool):
        keep = mt.ones(4)
        gone = mt.ones(8)
        with mt.trace() as tr:
            del gone
    first = tr[0]
    assert first["kind"] == "baseline"
    state0 = tr.state_at(0)
    assert {keep.storage.id, *(s["storage"] for s in first["storages"])} <= set(state0.storages)
    assert state0.live_bytes == first["live_bytes"] and state0.complete
    (life,) = [lt for lt in tr.lifetimes() if lt.storage not in (keep.storage.id,) and lt.death is not None]
    assert life.preexisting and life.birth == 0 and life.end == "free" and life.nbytes == 32
    assert tr.state_at(-1).live_bytes == placement.live_bytes


def test_a_nested_trace_resynchronises_the_outer_one():
    pool = Pool(name="nested pool")
    with use_pool(pool):
        with mt.trace() as outer:
            marks = Marks(outer, [pool])
            a = mt.ones(3) * 2
            marks.here("before inner")
            with mt.trace() as inner:
                b = a + 1  # the outer trace never sees these events
                del a
            marks.here("after inner")
            c = b * 3
            marks.here("end")
    assert [e["kind"] for e in outer].count("baseline") == 2 and inner[0]["kind"] == "baseline"
    assert marks.check() == 3
    assert c.storage.id in outer.state_at(-1).storages


def test_arena_reset_makes_storages_stale_and_ends_their_lifetimes():
    arena = Arena(capacity=1024, name="stale arena")
    with mt.trace() as tr:
        with step_arena(arena):
            x = mt.ones(4, requires_grad=True)
            kept = x * 2  # still referenced when the step ends
        s = tr.mark("after reset")
    state = tr.state_at(s)
    sid = kept.storage.id
    assert state.storages[sid].stale and state.storages[sid].refcount == kept.storage.refcount
    assert state.live_bytes == placement.live_bytes
    (life,) = [lt for lt in tr.lifetimes() if lt.storage == sid]
    assert life.end == "reset" and life.death < s
    del kept
    with mt.trace() as tr2:
        pass
    assert sid not in tr2.state_at(-1).storages


# --------------------------------------------------------------------------------------------
# lifetimes, peak, JSON
# --------------------------------------------------------------------------------------------
def recorded_run(steps=5, with_arena=True):
    pool = Pool(name="lifetime pool")
    arena = Arena(capacity=512, name="lifetime arena")
    with use_pool(pool):
        X, y, params = make_problem(seed=3)
        with mt.trace() as tr:
            for _ in range(steps):
                if with_arena:
                    with step_arena(arena):
                        train_step(X, y, params)
                else:
                    train_step(X, y, params)
    return tr


@pytest.mark.parametrize("with_arena", [False, True], ids=["pool only", "step arena"])
def test_lifetimes_and_peak_agree_with_state_at(with_arena):
    tr = recorded_run(with_arena=with_arena)
    lives = tr.lifetimes()
    freed = {e["storage"] for e in tr.filter("free")}
    by_id = {lt.storage: lt for lt in lives}
    for lt in lives:
        assert lt.nbytes > 0
        if lt.death is not None:
            assert lt.birth is not None and lt.birth < lt.death
    for sid in freed:  # every storage freed in the trace has a lifetime ending at or before its free
        assert sid in by_id and by_id[sid].death is not None
    assert any(lt.end == "free" for lt in lives)
    states = [tr.state_at(t) for t in range(len(tr))]
    curve = [s.live_bytes for s in states]
    assert tr.live_bytes() == curve
    peak, step = tr.peak()
    assert peak == max(curve) and step == curve.index(peak)
    assert states[-1].peak_bytes == peak and states[-1].peak_step == step
    # from the lifetimes alone: intervals plus the bytes the trace never saw
    untracked = dict(tr.replay().untracked())
    sweep = [sum(v for s, v in untracked.items() if s <= t)  # one baseline here: a constant
             + sum(lt.nbytes for lt in lives if lt.birth <= t and (lt.death is None or t < lt.death))
             for t in range(len(tr))]
    assert max(sweep) == peak


def test_json_round_trip_keeps_state_at_identical(tmp_path):
    tr = recorded_run(steps=2)
    path = tmp_path / "run.json"
    tr.save(path)
    back = mt.Trace.load(path)
    assert back.events == tr.events
    for t in range(len(tr)):
        assert back.state_at(t) == tr.state_at(t), t
        assert back.state_at(t).freed == tr.state_at(t).freed
    assert back.lifetimes() == tr.lifetimes() and back.peak() == tr.peak()


def test_replay_follows_a_trace_that_is_still_recording():
    with mt.trace() as tr:
        a = mt.ones(2)
        n = len(tr)
        first = tr.state_at(-1)
        b = a * 2
        later = tr.state_at(-1)
    assert first.t == n - 1 and later.t > first.t
    assert b.storage.id in later.storages and b.storage.id not in first.storages


def test_summary_reads_in_words():
    tr = recorded_run(steps=1)
    text = tr.state_at(-1).summary()
    assert "lifetime pool" in text and "lifetime arena" in text and "bytes live" in text
    assert repr(tr.state_at(-1)).startswith("MemoryState(")


def test_a_repointed_tensor_stays_alive_on_its_new_storage():
    from microtorch.memory.storage import new_storage
    from microtorch.tensor import repoint

    pool = Pool(name="repoint pool")
    with use_pool(pool):
        p = mt.ones(4)
        with mt.trace() as tr:
            marks = Marks(tr, [pool])
            old_id = p.storage.id
            flat = new_storage(np.zeros(8, np.float32), "tensor")
            repoint(p, flat.data[:4], flat)
            marks.here("repointed")
    state = tr.state_at(-1)
    assert marks.check() == 1
    assert state.tensors[p._tid].storage == flat.id == p.storage.id
    assert old_id in state.freed and state.holders(flat.id) == (f"tensor {p._tid}",)
