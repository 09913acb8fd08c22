"""The NUMA and unified-memory cost models (simulations): their rules, checked by hand."""
import pytest

import microtorch as mt
from microtorch.memory import numa, unified


def _trace_two_layers():
    mt.manual_seed(0)
    w1, w2 = mt.randn(256, 256), mt.randn(256, 256)
    x = mt.randn(64, 256)
    with mt.trace() as tr:
        h = (x @ w1).relu()
        (h @ w2).sum()
    return tr


def test_access_cost_is_latency_plus_bytes_over_bandwidth():
    t = numa.Topology(local_latency_ns=100, remote_latency_ns=150, local_gbps=40, remote_gbps=20)
    assert t.access_ns(0, 0, 4000) == pytest.approx(100 + 100)
    assert t.access_ns(0, 1, 4000, accesses=2) == pytest.approx(300 + 200)


def test_first_touch_on_one_socket_is_all_local_and_interleave_is_half_remote():
    tr = _trace_two_layers()
    one_socket = numa.simulate(tr, affinity=lambda i, e: 0, policy="first_touch")
    assert one_socket.remote_bytes == 0 and one_socket.local_bytes > 0
    spread = numa.simulate(tr, affinity=lambda i, e: 0, policy="interleave")
    assert spread.remote_fraction == pytest.approx(0.5, abs=0.01)
    assert spread.total_ns > one_socket.total_ns
    # the second socket's ops read what the first socket's ops first touched: remote
    split = numa.simulate(tr, affinity=lambda i, e: i % 2, policy="first_touch")
    assert 0 < split.remote_fraction < 1
    assert numa.simulate(tr, lambda i, e: 1, policy=numa.bind(0)).remote_fraction == 1.0
    with pytest.raises(ValueError, match="has 2 node"):
        numa.simulate(tr, affinity=lambda i, e: 2)
    with pytest.raises(ValueError, match="unknown NUMA policy"):
        numa.simulate(tr, affinity=lambda i, e: 0, policy="random")


def test_affinity_places_each_tensor_where_it_is_used_most():
    tr = _trace_two_layers()
    ops = [e for e in tr.events if e["kind"] == "op"]
    on = lambda i, e: 0 if i == 0 else 1  # the first matmul on socket 0, the rest on 1
    placement = numa.place_by_affinity(tr, on)
    first_out = ops[0]["output_storage"]  # written on 0, read by relu on 1: a tie → node 0
    assert placement[first_out] == {0: 1.0}
    assert placement[ops[-1]["output_storage"]] == {1: 1.0}
    assert numa.affinity_score(tr, on, first_out, 0) == 1 and numa.affinity_score(tr, on, first_out, 1) == 1
    by_affinity = numa.simulate(tr, on, policy=lambda s, w, t: placement.get(s, {w: 1.0}))
    assert by_affinity.total_ns <= numa.simulate(tr, on, policy="interleave").total_ns


def test_the_articles_matmul_exercise_replicating_b_and_splitting_a_wins():
    m, k, n = 10_000, 5_000, 2_000
    best = numa.matmul_cost(m, k, n, {"A": "split", "B": "replicate", "C": "split"})
    for other in ({"A": 0, "B": 0, "C": 0}, {"A": "interleave", "B": "interleave", "C": "interleave"},
                  {"A": "split", "B": 0, "C": "split"}):
        assert numa.matmul_cost(m, k, n, other)["ns"] > best["ns"]
    assert best["remote_bytes"] == 0 and best["fits"]
    with pytest.raises(ValueError, match="every socket needs all of B"):
        numa.matmul_cost(m, k, n, {"A": "split", "B": "split", "C": "split"})


def test_machine_topology_reads_sysfs(tmp_path):
    for i, (cpus, dist) in enumerate((("0-3,8", "10 21"), ("4-7", "21 10"))):
        d = tmp_path / f"node{i}"
        d.mkdir()
        (d / "cpulist").write_text(cpus + "\n")
        (d / "distance").write_text(dist + "\n")
        (d / "meminfo").write_text(f"Node {i} MemTotal:       1024 kB\n")
    t = numa.machine_topology(tmp_path)
    assert t.nodes == 2 and t.cpus == ((0, 1, 2, 3, 8), (4, 5, 6, 7)) and t.memory_bytes == 1 << 20
    assert t.remote_latency_ns == pytest.approx(t.local_latency_ns * 2.1)
    assert numa.machine_topology(tmp_path / "none") is None


def test_unified_memory_page_state_machine():
    um = unified.UnifiedMemory(unified.Link(page_bytes=1000, fault_us=10, gbps=1))
    assert um.touch("x", 3000, "cpu") == 0  # first touch places pages, no migration
    assert um.touch("x", 3000, "gpu") == pytest.approx(3 * (10 + 1))  # 1000 B at 1 KB/µs = 1 µs
    assert um.touch("x", 3000, "gpu") == 0
    assert um.prefetch("x", 3000, "cpu") == pytest.approx(3 * 1)  # no fault latency
    assert (um.faults, um.prefetched, um.migrations) == (3, 3, 6)


def test_thrashing_costs_most_and_prefetch_least():
    costs = unified.pattern_costs(nbytes=8 << 20, rounds=3)
    assert costs["thrashing"]["faults"] == 2 * costs["streaming"]["faults"] * 3
    assert costs["prefetched"]["faults"] == 0
    assert costs["prefetched"]["us"] < costs["streaming"]["us"] < costs["thrashing"]["us"]


def test_unified_simulation_over_a_trace():
    tr = _trace_two_layers()
    ops = [e for e in tr.events if e["kind"] == "op"]
    all_gpu = unified.simulate(tr, lambda i, e: "gpu")
    assert all_gpu.faults == 0  # every buffer first touched on the GPU
    alternate = unified.simulate(tr, lambda i, e: "cpu" if i % 2 else "gpu")
    assert alternate.faults > 0
    prefetched = unified.simulate(tr, lambda i, e: "cpu" if i % 2 else "gpu", prefetch=True)
    assert prefetched.faults < alternate.faults and prefetched.us < alternate.us
    with pytest.raises(ValueError, match="'cpu' or 'gpu'"):
        unified.simulate(tr, lambda i, e: "tpu")
    assert len(ops) == 4


def test_replicating_b_pays_off_only_when_b_is_read_more_than_once():
    m, k, n = 10_000, 5_000, 2_000
    once = {"tile_rows": m}  # one tile per socket: B read once
    rep = numa.matmul_cost(m, k, n, {"A": "split", "B": "replicate", "C": "split"}, **once)
    remote_b = numa.matmul_cost(m, k, n, {"A": "split", "B": 0, "C": "split"}, **once)
    assert rep["b_reads"] == 1 and rep["ns"] > remote_b["ns"]  # the copy costs more than one remote read
    assert rep["memory_bytes"] - remote_b["memory_bytes"] == k * n * 4


def test_numa_picture_shows_the_models_placement_and_costs():
    from microtorch.viz import numa as vn

    tr = _trace_two_layers()
    on = lambda i, e: i % 2
    f = vn.numa_facts(tr, affinity=on, policy="first_touch")
    report = numa.simulate(tr, on, "first_touch")
    assert [o[3] for o in f.ops] == [ns for *_, ns in report.op_ns]
    assert {s: w for s, _, w in f.storages} == report.placement
    assert all(0 <= remote <= ns for *_, ns, remote in f.ops)
    assert any(remote > 0 for *_, remote in f.ops)  # odd ops read what even ops wrote
    fig = vn.render(tr, affinity=on)
    assert "a model, not measured" in fig._suptitle.get_text()
    bars = fig.axes[1].patches
    assert len([b for b in bars if b.get_facecolor()[3] > 0]) == len(f.ops)
    assert "simulated" in fig.description
    first_op_step = next(e["step"] for e in tr.events if e["kind"] == "op")
    assert len(vn.numa_facts(tr, first_op_step, affinity=on).ops) == 1


def test_a_trace_recorded_with_threads_places_each_threads_ops_on_its_socket():
    import threading

    mt.manual_seed(0)
    w = mt.randn(128, 128)
    x = mt.randn(32, 128)
    out = {}
    with mt.trace() as tr:
        out["a"] = (x @ w).relu()                      # the recording thread: node 0
        t = threading.Thread(target=lambda: out.__setitem__("b", (out["a"] @ w).tanh()))
        t.start(), t.join()                            # another thread: node 1
        (out["b"] @ w).sum()                           # back on node 0
    ops = [e for e in tr.events if e["kind"] == "op"]
    assert [("thread" in e) for e in ops] == [False, False, True, True, False, False]
    assert all(e["thread"] == t.ident for e in ops if "thread" in e)
    r = numa.simulate(tr)  # affinity by thread
    assert [node for _, _, node, _ in r.op_ns] == [0, 0, 1, 1, 0, 0]
    # the worker's matmul read what the main thread first touched: remote bytes
    assert r.remote_bytes > 0
    assert numa.simulate(tr, affinity=lambda i, e: 0).remote_bytes == 0
