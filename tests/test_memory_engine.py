"""The engine on its allocators: where tensors' bytes live, step arenas, node records, stats."""
import gc

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import Arena, Pool, StaleTensorError, placement, use_heap, use_pool
from microtorch.memory.node_arena import nodes


def test_tensors_live_in_pool_blocks_and_numpy_agrees_where_the_bytes_are():
    pool = Pool(name="test pool")
    with use_pool(pool):
        a = mt.randn(8, 4)
        b = a * 2
        v = b.T
    for t in (a, b):
        block = t.storage.block
        assert block.owner is pool and block.live
        assert np.shares_memory(t.numpy(), block.memory)
        assert block.nbytes == t.numel() * t.dtype.itemsize
    assert v.storage is b.storage and np.shares_memory(v.numpy(), b.storage.block.memory)
    # two live tensors never share a block
    assert not np.shares_memory(a.numpy(), b.numpy())
    assert {a.storage.block.id, b.storage.block.id} <= set(pool.live)


def test_freeing_the_last_reference_returns_the_block_and_the_next_tensor_reuses_it():
    pool = Pool(name="reuse pool")
    with use_pool(pool):
        a = mt.ones(16)
        block = a.storage.block
        address = block.memory.ctypes.data
        del a
        assert not block.live and pool.requested == 0
        b = mt.zeros(16)
        assert b.storage.block.memory.ctypes.data == address
        assert pool.reuse_hits == 1


def test_use_heap_turns_the_allocators_off():
    with use_heap():
        t = mt.ones(3) + 1
    assert t.storage.block is None
    assert t.tolist() == [2.0, 2.0, 2.0]


def test_numpy_holds_a_storage_reference_so_the_pool_cannot_reuse_its_bytes():
    pool = Pool(name="numpy pool")
    with use_pool(pool):
        arr = mt.full((4,), 7.0).numpy()  # the tensor itself is gone at once
        assert pool.live  # ...but its block is still held by the array
        others = [mt.zeros(4) for _ in range(5)]
        assert arr.tolist() == [7.0] * 4
        del arr
        gc.collect()
        assert len(pool.live) == len(others)


def test_step_arena_holds_activations_and_reset_makes_leftovers_raise():
    w = mt.randn(8, 4, requires_grad=True)
    arena = Arena(capacity=4096, name="test step")
    with mt.memory.step_arena(arena):
        x = mt.randn(16, 8)
        h = (x @ w).relu()
        loss = h.mean()
        loss.backward()
        value = loss.item()
        assert h.storage.block.owner is arena
        assert x.storage.block.owner is placement.pool()  # created tensors stay in the pool
        assert w.grad.storage.block.owner is placement.pool()  # and so do gradients
    assert arena.used == 0 and arena.resets == 1
    assert np.isfinite(value) and w.grad.shape == (8, 4)
    with pytest.raises(StaleTensorError, match="use after reset"):
        h + 1
    with pytest.raises(StaleTensorError, match="use after reset"):
        h.shape
    assert "stale" in repr(h)
    assert x.sum().item() == pytest.approx(float(np.sum(x.numpy())))  # pool tensors are fine


def test_a_reused_step_arena_keeps_its_capacity_and_stops_growing():
    w = mt.randn(32, 32, requires_grad=True)
    arena = Arena(capacity=256, name="growing step")
    capacities = []
    for _ in range(4):
        with mt.memory.step_arena(arena):
            loss = ((mt.randn(64, 32) @ w).tanh() ** 2).mean()
            loss.backward()
        capacities.append(arena.capacity)
    assert arena.growths >= 1
    assert capacities[1] == capacities[2] == capacities[3]


def test_node_records_are_freed_after_backward_and_kept_with_retain_graph():
    base = nodes.live
    x = mt.randn(3, requires_grad=True)
    y = (x * x).sum()
    assert nodes.live == base + 2
    mul = y.grad_fn.next[0]
    assert y.grad_fn.record["n_inputs"] == 1
    assert y.grad_fn.record["inputs"][0] == mul.record["slot"]  # Sum's input is Mul's record
    assert list(mul.record["inputs"]) == [-1, -1, -2, -2]  # Mul's inputs: the leaf x, twice
    y.backward(retain_graph=True)
    assert nodes.live == base + 2
    y.backward()
    assert nodes.live == base
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_dropping_a_graph_without_backward_frees_its_records_and_saved_bytes():
    base = nodes.live
    x = mt.randn(5, requires_grad=True)
    y = x.exp().sum()
    assert nodes.live == base + 2 and x.storage.refcount == 1  # exp saves its output, not x
    del y
    assert nodes.live == base


def test_dependency_counts_live_on_the_nodes():
    from microtorch.autograd import _dependencies, _roots

    x = mt.randn(3, requires_grad=True)
    h = x.tanh()
    y = (h * h + h).sum()
    reachable = _dependencies(_roots(y, None))
    # tanh's node has three incoming edges: h*h uses h twice, and + uses it once
    assert h.grad_fn.pending == 3
    assert y.grad_fn.pending == 0  # the root: nobody sends it a gradient
    assert {n.name for n in reachable} == {"SumBackward", "AddBackward", "MulBackward", "TanhBackward"}
    y.backward()
    assert np.allclose(x.grad.numpy(), (2 * h.detach().numpy() + 1) * (1 - h.detach().numpy() ** 2))


def test_stats_report_peak_and_current_bytes_and_reset_peak():
    mt.memory.reset_peak()
    before = mt.memory.stats()
    big = mt.zeros(1000)  # 4000 bytes
    during = mt.memory.stats()
    assert during["current_bytes"] - before["current_bytes"] == 4000
    assert during["peak_bytes"] >= during["current_bytes"]
    del big
    after = mt.memory.stats()
    assert after["current_bytes"] == before["current_bytes"]
    assert after["peak_bytes"] >= before["current_bytes"] + 4000
    mt.memory.reset_peak()
    assert mt.memory.stats()["peak_bytes"] == after["current_bytes"]
    s = mt.memory.stats()
    for key in ("pool_fragmentation", "allocations", "mean_alloc_us", "growths", "node_arena_records"):
        assert key in s
    assert s["allocations"] > 0 and s["mean_alloc_us"] > 0
