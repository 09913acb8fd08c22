"""The recomputation cost model and schedules: the dynamic program is the brute-force optimum,
√n is Chen et al.'s, and the model's peak is what the allocator measures."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import microtorch as mt
from microtorch.utils import checkpoint as C

layers_st = st.lists(st.tuples(st.integers(1, 9), st.integers(0, 50), st.integers(1, 20), st.integers(0, 30)),
                     min_size=1, max_size=7)


@settings(max_examples=60, deadline=None)
@given(layers=layers_st, frac=st.floats(0.0, 1.2))
def test_dynamic_program_matches_brute_force(layers, frac):
    chain = C.chain_of(layers)
    budget = C.no_checkpoint(chain).peak * frac
    dp, bf = C.optimal(chain, budget), C.brute_force(chain, budget)
    assert (dp is None) == (bf is None)
    if dp is not None:
        assert dp.peak <= budget
        assert dp.recompute == pytest.approx(bf.recompute)
        again = C.predict(chain, dp.segments)  # the reported numbers are the model's for those segments
        assert (again.peak, again.time) == (dp.peak, dp.time)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 15, 16, 17, 64, 99])
def test_sqrt_segments(n):
    segs = C.sqrt_segments(n)
    assert len(segs) == max(1, round(math.sqrt(n)))
    assert segs[0][0] == 0 and segs[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
    lengths = [b - a for a, b in segs]
    assert max(lengths) - min(lengths) <= 1 and lengths == sorted(lengths, reverse=True)


def test_sqrt_n_on_the_textbook_chain():
    chain = C.Chain.uniform(64, forward=1.0, saved=10, output=10)
    s = C.sqrt_n(chain)
    assert [c for _, _, c in s.segments] == [True] * 7 + [False]
    assert s.recompute == 56  # every layer but the last segment's, once more
    # kept: 7 segment outputs and the last segment's 8 layers; recomputing one segment adds 7
    # (its 8 layers' saved bytes but its output, kept already)
    assert s.peak == (7 + 8) * 10 + 0
    plain = C.no_checkpoint(chain)
    assert plain.peak == 640 and plain.recompute == 0
    opt = C.optimal(chain, s.peak)
    assert opt.peak <= s.peak and opt.recompute <= s.recompute


def test_optimal_frontier_is_monotone_and_ends_at_no_recompute():
    chain = C.chain_of([(1 + i % 3, 10 + 5 * (i % 4), 8, 2) for i in range(20)])
    plain = C.no_checkpoint(chain)
    floor = C.min_peak(chain)
    budgets = np.linspace(floor, plain.peak, 8)
    times = [C.optimal(chain, b).recompute for b in budgets]
    assert all(a >= b for a, b in zip(times, times[1:]))
    assert times[-1] == 0
    assert C.optimal(chain, floor - 1) is None
    with pytest.raises(ValueError, match="no schedule fits"):
        C.schedule(chain, floor - 1)


def test_bad_segments_are_refused():
    chain = C.Chain.uniform(4)
    with pytest.raises(ValueError, match="without gaps"):
        C.predict(chain, [(0, 2, True), (3, 4, False)])
    with pytest.raises(ValueError, match="must end at layer 3"):
        C.predict(chain, [(0, 2, True)])
    with pytest.raises(ValueError, match="method must be"):
        C.schedule(chain, 100, method="greedy")
    with pytest.raises(TypeError, match="input="):
        C.schedule([mt.nn.ReLU()], 100)
    with pytest.raises(TypeError, match="not a Layer"):
        C.Chain([(1, 2, 3)])


def test_store_or_recompute_rule():
    # Cost_store = Memory × Duration, Cost_recompute = ComputeTime × NumReuse
    assert C.store_or_recompute(1000, 2.0, 1.0, 1) == ("recompute", 2000.0, 1.0)
    assert C.store_or_recompute(1000, 2.0, 1.0, 1, price=1e-4)[0] == "store"  # 0.2 < 1.0
    assert C.store_or_recompute(10, 1.0, 4.0, 3)[0] == "store"  # 12 > 10
    with pytest.raises(ValueError):
        C.store_or_recompute(-1, 1, 1)


def _mlp_blocks(n=6, width=16):
    mt.manual_seed(0)
    return [mt.nn.Sequential(mt.nn.Linear(width, width), mt.nn.ReLU()) for _ in range(n)]


def test_measured_bytes_and_flops_model_agree():
    blocks = _mlp_blocks()
    x = mt.randn(8, 16)
    measured, flops = C.layer_costs(blocks, x, repeat=1), C.flops_model(blocks, x)
    act = 8 * 16 * 4
    assert [l.saved for l in measured] == [act] * 6 == [l.saved for l in flops]
    assert [l.output for l in measured] == [act] * 6
    assert flops[0].forward == 2 * 8 * 16 * 16 + 8 * 16  # the matmul and the ReLU
    assert all(l.forward > 0 and l.backward > 0 for l in measured)
    # a Linear+ReLU block after another needs no rerun as a segment's last layer; a Linear
    # after a Linear does (its input is saved by it alone)
    assert [l.rerun_free for l in measured] == [False] + [True] * 5 == [l.rerun_free for l in flops]
    linears = [mt.nn.Linear(16, 16) for _ in range(3)]
    assert [l.rerun_free for l in C.layer_costs(linears, x, repeat=1)] == [False] * 3


def test_early_stop_runs_what_the_model_says():
    """The rerun of a checkpointed block segment stops before its last block: the trace's
    recompute ops are the model's recomputed layers minus the rerun-free last one."""
    blocks = _mlp_blocks(6)
    x = mt.randn(8, 16)
    chain = C.layer_costs(blocks, x, repeat=1)
    s = C.predict(chain, [(0, 4, True), (4, 6, False)])
    assert s.recompute == pytest.approx(sum(l.forward for l in chain[0:3]))
    tr = C.trace_step(blocks, s, x)
    begin, end = [e["step"] for e in tr.filter("recompute")]
    ops = [e["op"] for e in tr.events[begin:end] if e["kind"] == "op"]
    assert ops == ["Linear", "Relu"] * 2 + ["Linear"]  # blocks 0, 1 and block 2's Linear; its ReLU stopped it


@pytest.mark.parametrize("method", ["none", "sqrt", "optimal"])
def test_predicted_peak_is_the_allocators_peak(method):
    blocks = _mlp_blocks(9, 32)
    x = mt.randn(16, 32)
    chain = C.layer_costs(blocks, x, repeat=1)
    budget = C.sqrt_n(chain).peak
    s = C.schedule(chain, budget, method=method)
    m = C.measure(blocks, s, x, repeat=1)
    # the model's peak is what the allocator saw, up to the loss scalar and its gradient
    assert abs(m["peak_bytes"] - s.peak) <= 16
    # and the output of every checkpointed segment really was all it kept
    kept_model = sum(chain[b - 1].output if c else sum(l.saved for l in chain[a:b]) for a, b, c in s.segments)
    assert abs(m["kept_bytes"] - kept_model) <= 16


def test_run_schedule_gives_the_plain_gradients():
    blocks = _mlp_blocks(5, 8)
    x = mt.randn(4, 8, requires_grad=True)

    def grads(sched):
        for b in blocks:
            for p in b.parameters():
                p.grad = None
        x.grad = None
        C.run_schedule(blocks, sched, x).sum().backward()
        return [p.grad.numpy().copy() for b in blocks for p in b.parameters()] + [x.grad.numpy().copy()]

    plain = grads([(0, 5, False)])
    for segs in ([(0, 2, True), (2, 5, False)], [(0, 1, True), (1, 3, True), (3, 5, True)]):
        assert all(np.array_equal(a, b) for a, b in zip(plain, grads(segs)))


def test_schedule_measures_a_model_given_an_input():
    blocks = _mlp_blocks(4, 8)
    x = mt.randn(4, 8)
    seq = mt.nn.Sequential(*blocks)
    plain = C.schedule(seq, math.inf, method="none", input=x, repeat=1)
    s = C.schedule(seq, C.min_peak(plain.chain), input=x, repeat=1)
    assert s.fits and s.checkpointed and s.method == "optimal"
    assert len(s.chain) == 4 and s.chain[0].saved == 4 * 8 * 4
