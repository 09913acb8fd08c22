"""Tests that kill mutants mutmut left alive in microtorch/memory/ (tests/README.md lists them)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import microtorch as mt
from microtorch.memory import numa, unified


# -- mt.memory.stats() -------------------------------------------------------------------------
def test_stats_report_exactly_what_the_pool_the_step_arena_and_the_node_arena_counted():
    pool = mt.memory.Pool(name="stats pool")
    with mt.memory.use_pool(pool), mt.memory.step_arena(capacity=256) as arena:
        x = mt.randn(300, requires_grad=True)        # the pool (a tensor)
        big = mt.zeros(300_000)                      # > 1 MiB: a direct block
        y = (x * 2).relu()                           # activations: the arena, which must grow
        y.sum().backward()
        del big
        pending = x * 3                              # a graph not run backward: a live node record
        s = mt.memory.stats()
        p, a, n = pool.stats(), arena.stats(), mt.memory.nodes
        assert a["growths"] > 0 and a["allocations"] > 0 and n.live > 0 and p["slab_bytes"] > 0
        expected = {
            "current_bytes": s["current_bytes"], "peak_bytes": s["peak_bytes"],
            "pool_requested": p["requested"], "pool_reserved": p["reserved"],
            "pool_fragmentation": p["fragmentation"], "pool_peak_reserved": p["peak"],
            "pool_reuse_hits": p["reuse_hits"], "pool_direct_allocations": 1,
            "pool_slab_bytes": p["slab_bytes"],
            "allocations": p["allocations"] + n.allocations + a["allocations"],
            "mean_alloc_us": pytest.approx((pool.alloc_ns + arena.alloc_ns)
                                           / (p["allocations"] + n.allocations + a["allocations"]) / 1000),
            "growths": n.growths + a["growths"],
            "node_arena_records": n.capacity, "node_arena_utilization": n.live / n.capacity,
            "node_arena_high_water": n.high_water,
            "step_arena_capacity": a["capacity"], "step_arena_utilization": a["utilization"],
            "step_arena_high_water": a["high_water"],
        }
        assert s == expected
        assert s["current_bytes"] <= s["peak_bytes"] and s["mean_alloc_us"] > 0
        del pending
    assert "step_arena_capacity" not in mt.memory.stats()  # no step arena outside the block


def test_stats_before_any_allocation_say_zero_time_per_allocation():
    # a fresh interpreter with a fresh pool: nothing allocated yet, so no division by zero
    code = ("import microtorch as mt\n"
            "with mt.memory.use_pool(mt.memory.Pool()):\n"
            "    s = mt.memory.stats()\n"
            "print(s['allocations'], s['mean_alloc_us'])\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, check=True).stdout.split()
    assert out == ["0", "0.0"]


# -- numa.matmul_cost: the model of its docstring, worked by hand --------------------------------
_T = numa.Topology(nodes=2, memory_bytes=10252, local_latency_ns=100, remote_latency_ns=200,
                   local_gbps=2, remote_gbps=1)
# m=4, k=1024, n=3, itemsize=2: A 8192 B, B 6144 B, C 24 B; tile_rows=1: B read ceil(4/2/1)=2 times


def test_matmul_cost_with_interleaved_a_and_b_on_one_socket_worked_by_hand():
    r = numa.matmul_cost(4, 1024, 3, {"A": "interleave", "B": 1, "C": "split"}, _T, itemsize=2, tile_rows=1)
    # each socket's half of A (4096 B) lies half on each node: 2048 B local, 2048 B remote,
    # one access each (2048 B is under a page); B (2 × 6144 B = 3 pages) on node 1; C 12 B local
    a_local, a_remote = 100 + 2048 / 2, 200 + 2048 / 1
    c_local = 100 + 12 / 2
    socket0 = a_local + a_remote + (3 * 200 + 12288 / 1) + c_local
    socket1 = a_remote + a_local + (3 * 100 + 12288 / 2) + c_local
    assert r == {"ns": pytest.approx(socket0), "per_socket_ns": [pytest.approx(socket0), pytest.approx(socket1)],
                 "copy_ns": 0.0, "b_reads": 2, "remote_bytes": 2048 + 12288 + 2048,
                 "memory_bytes": 8192 + 6144 + 24, "fits": True}


def test_matmul_cost_with_b_replicated_pays_the_copy_once_and_fits_exactly():
    r = numa.matmul_cost(4, 1024, 3, {"A": "split", "B": "replicate", "C": "split"}, _T, itemsize=2, tile_rows=1)
    per_socket = (100 + 4096 / 2) + (3 * 100 + 12288 / 2) + (100 + 12 / 2)
    assert r == {"ns": pytest.approx(per_socket + 6144 / 1), "per_socket_ns": [pytest.approx(per_socket)] * 2,
                 "copy_ns": 6144 / 1, "b_reads": 2, "remote_bytes": 0,
                 "memory_bytes": 8192 + 24 + 2 * 6144, "fits": True}  # 20504 B = 2 nodes × 10252 B


def test_matmul_cost_defaults_tiles_of_1000_rows_and_rejects_nodes_that_do_not_exist():
    layout = {"A": "split", "B": "replicate", "C": "split"}
    assert numa.matmul_cost(2002, 8, 8, layout)["b_reads"] == 2  # 1001 rows per socket: two tiles
    assert numa.matmul_cost(2000, 8, 8, layout)["b_reads"] == 1
    for bad in (2, "bogus"):
        with pytest.raises(ValueError, match="unknown layout"):
            numa.matmul_cost(4, 4, 4, {"A": "split", "B": bad, "C": "split"})


# -- numa.machine_topology --------------------------------------------------------------------
def test_machine_topology_orders_nodes_by_number_and_copes_with_missing_files(tmp_path):
    for i, cpus in ((2, "2"), (10, "10-11"), (0, "0-1")):
        (tmp_path / f"node{i}").mkdir()
        (tmp_path / f"node{i}" / "cpulist").write_text(cpus + "\n")
    (tmp_path / "node0" / "meminfo").write_text("Node 0 MemTotal:       2048 kB\n")
    t = numa.machine_topology(tmp_path)
    assert t.nodes == 3 and t.cpus == ((0, 1), (2,), (10, 11))  # node10 after node2
    assert t.memory_bytes == 0  # the nodes without meminfo report no memory
    assert t.distances == () and t.remote_latency_ns == t.local_latency_ns  # no distance table
    (tmp_path / "node2" / "cpulist").unlink()
    for i, row in ((0, "10 20 30"), (2, "20 10 30"), (10, "30 30 10")):
        (tmp_path / f"node{i}" / "distance").write_text(row + "\n")
    t = numa.machine_topology(tmp_path)
    assert t.cpus == ((0, 1), (), (10, 11))
    assert t.distances == ((10, 20, 30), (20, 10, 30), (30, 30, 10))
    assert t.remote_latency_ns == pytest.approx(3 * t.local_latency_ns)


@pytest.mark.skipif(not Path("/sys/devices/system/node/node0").is_dir(), reason="no /sys NUMA nodes here (not Linux)")
def test_machine_topology_reads_sys_by_default():
    assert numa.machine_topology() == numa.machine_topology("/sys/devices/system/node") is not None


# -- unified.pattern_costs ----------------------------------------------------------------------
def test_pattern_costs_default_to_four_rounds_and_report_four_numbers():
    costs = unified.pattern_costs()
    pages = (64 << 20) // (64 * 1024)
    assert set(costs) == {"streaming", "thrashing", "prefetched"}
    for c in costs.values():
        assert set(c) == {"us", "faults", "migrations", "prefetched"}
    assert costs["thrashing"]["faults"] == costs["thrashing"]["migrations"] == 2 * 4 * pages
    assert costs["streaming"]["migrations"] == pages
    assert costs["prefetched"] == {"us": pytest.approx(unified.Link().migrate_us(pages, fault=False)),
                                   "faults": 0, "migrations": pages, "prefetched": pages}


# -- the reports' text -----------------------------------------------------------------------
def test_alias_report_text_gives_each_views_byte_extent_and_the_shared_element():
    base = mt.arange(12.)  # float32: element i is bytes [4i, 4i + 4)
    text = str(mt.memory.alias(base[2:6], base[4:10]))
    assert text.split("\n")[1:] == ["  a touches bytes [8, 24), b touches bytes [16, 40)",
                                    "  a[2] and b[0] both read the element at byte 16"]
    assert str(mt.memory.alias(base[3:3], base[4:10])).split("\n")[1] == \
        "  a touches bytes none (empty), b touches bytes [16, 40)"
    assert str(mt.memory.alias(base[4:10], base[3:3])).split("\n")[1] == \
        "  a touches bytes [16, 40), b touches bytes none (empty)"


def test_inplace_plan_text_has_one_line_per_op_then_the_saving():
    x = mt.randn(4, 4)
    with mt.trace() as tr:
        (x * 2).relu().exp()
    plan = mt.memory.inplace_plan(tr)
    lines = str(plan).split("\n")
    assert len(lines) == len(plan.decisions) + 1 == 4
    assert [line.split(" -> ")[0] for line in lines[:3]] == ["op 0 Mul", "op 1 Relu", "op 2 Exp"]
    assert lines[1].startswith("op 1 Relu") and "in place (relu_ into" in lines[1]
    assert lines[-1] == f"saves {plan.saved_bytes} bytes of outputs; peak live bytes {plan.peak_before} -> {plan.peak_after}"
