"""Liveness analysis and memory planning: the dataflow solution against brute force, plans
valid and never below the lower bound, and planned execution of real training steps."""
import itertools
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import microtorch as mt
from microtorch.planning import PlanError, PlanMismatchError, Program, STRATEGIES, plan, planned, random_program
from microtorch.planning.conflicts import occupied

HEURISTICS = [s for s in STRATEGIES if s != "optimal"]
try:
    import ortools  # noqa: F401
    HAVE_ORTOOLS = True
except ImportError:
    HAVE_ORTOOLS = False
needs_ortools = pytest.mark.skipif(not HAVE_ORTOOLS, reason="needs the `planning` extra (ortools)")

LOOP = {
    "entry": (["i = 0", "s = 0"], ["loop"]),
    "loop": (["t = s + i", "s = t", "i = i + 1", "branch i < n"], ["loop", "exit"]),
    "exit": (["return s"], []),
}


# -- brute force: a buffer is live before instruction i if some path from i reads it before writing it
END = -1  # the end of the program, where the outputs are read


def instruction_successors(prog):
    """Instruction-level control flow; an empty block passes control straight through."""
    def entry_of(block, seen=()):
        b = prog.block_of[block]
        if b.instructions:
            return {b.instructions[0]}
        if not b.successors:
            return {END}
        return set().union(*(entry_of(s, seen + (block,)) for s in b.successors if s not in seen))

    succ = {}
    for b in prog.blocks:
        for k, i in enumerate(b.instructions):
            if k + 1 < len(b.instructions):
                succ[i] = {b.instructions[k + 1]}
            elif b.successors:
                succ[i] = set().union(*(entry_of(s) for s in b.successors))
            else:
                succ[i] = {END}
    return succ


def brute_live_in(prog, i, x):
    succ = instruction_successors(prog)
    stack, seen = [i], set()
    while stack:
        j = stack.pop()
        if j in seen:
            continue
        seen.add(j)
        if j == END:
            if x in prog.outputs:
                return True
            continue
        ins = prog.instructions[j]
        if x in ins.uses:
            return True
        if x in ins.defs:
            continue
        stack.extend(succ[j])
    return False


@st.composite
def cfgs(draw):
    names = ["a", "b", "c", "d", "e"]
    n_blocks = draw(st.integers(1, 5))
    blocks = {}
    for k in range(n_blocks):
        stmts = []
        for _ in range(draw(st.integers(0, 3))):
            lhs = draw(st.sampled_from(names))
            rhs = draw(st.lists(st.sampled_from(names), max_size=2))
            stmts.append(f"{lhs} = f({', '.join(rhs)})")
        succ = draw(st.lists(st.sampled_from([f"B{j}" for j in range(n_blocks)]), max_size=2, unique=True))
        blocks[f"B{k}"] = (stmts, succ)
    outputs = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    return blocks, outputs


@settings(max_examples=150, deadline=None)
@given(cfgs())
def test_liveness_fixed_point_agrees_with_brute_force_paths(spec):
    blocks, outputs = spec
    prog = Program.from_blocks(blocks, sizes={n: 8 for n in "abcde"}, outputs=outputs)
    lv = prog.liveness()
    for ins in prog.instructions:
        for x in prog.buffers:
            assert (x in lv.live_in[ins.index]) == brute_live_in(prog, ins.index, x), (ins, x, prog.listing())
    # a fixed point: applying the block equations once more changes nothing
    for b in prog.blocks:
        out = frozenset().union(*(lv.block_in[s] for s in b.successors)) if b.successors else prog.outputs
        assert lv.block_out[b.name] == out
        assert lv.block_in[b.name] == lv.block_use[b.name] | (out - lv.block_def[b.name])


def test_loop_program_liveness_and_iterations():
    prog = Program.from_blocks(LOOP, sizes={"n": 4}, default_size=4)
    lv = prog.liveness()
    assert lv.block_in["loop"] == {"s", "i", "n"}
    assert lv.block_out["loop"] == {"s", "i", "n"}  # around the back edge
    assert lv.block_in["entry"] == {"n"}  # n is an input: used, never defined
    assert lv.block_in["exit"] == {"s"}
    assert lv.iterations >= 2 and lv.history[-1].iteration == lv.iterations
    assert not any(u.changed for u in lv.history if u.iteration == lv.iterations)  # the last pass proves it
    assert any(u.changed for u in lv.history if u.iteration == 1)
    # t dies inside the loop body; s and i live across the whole loop
    iv = prog.intervals()
    assert iv["t"].first == iv["t"].last - 1
    assert iv["s"].first == 1 and iv["s"].last == len(prog) - 1
    g = prog.conflict_graph()
    # an instruction's result conflicts with what it reads (t = s + i writes t while reading s):
    # in this loop everything is live together somewhere
    assert g.conflicts("s", "i") and g.conflicts("t", "i") and g.conflicts("t", "s") and len(g.edges) == 6
    # t is dead on the back edge: a straight-line version with t used once has no t — i conflict after it
    line = Program.from_statements(["a = f()", "b = g(a)", "c = h(b)", "d = k(c)"], outputs=["d"])
    gl = line.conflict_graph()
    assert gl.conflicts("a", "b") and not gl.conflicts("a", "c") and not gl.conflicts("b", "d")


def test_block_use_is_read_before_written():
    prog = Program.from_statements(["i = i + 1", "j = i"], sizes={"i": 4, "j": 4}, outputs=["j"])
    lv = prog.liveness()
    assert lv.block_use["entry"] == {"i"}  # i is read before the block writes it
    assert lv.block_def["entry"] == {"i", "j"}


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000))
def test_lower_bound_and_conflicts_against_brute_force(n, seed):
    prog = random_program(n, seed)
    occ = occupied(prog)
    sizes = {x: prog.buffers[x].size for x in prog.planned}
    assert prog.lower_bound() == max(sum(sizes[x] for x in o) for o in occ)
    g = prog.conflict_graph()
    pairs = {tuple(sorted(p)) for o in occ for p in itertools.combinations(sorted(o), 2)}
    assert {tuple(sorted(e)) for e in g.edges} == pairs
    # straight-line code: intervals overlap exactly when buffers conflict
    iv = prog.intervals()
    for x, y in itertools.combinations(prog.planned, 2):
        assert iv[x].overlaps(iv[y]) == g.conflicts(x, y)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 80), st.integers(0, 10_000), st.sampled_from([1, 2, 4]), st.integers(1, 12))
def test_every_heuristic_plan_is_valid_and_not_below_the_lower_bound(n, seed, fan_in, reach):
    prog = random_program(n, seed, fan_in=fan_in, reach=reach)
    lb = prog.lower_bound()
    naive = plan(prog, "naive").arena_bytes
    assert naive == sum(prog.buffers[x].size for x in prog.planned)
    for s in HEURISTICS:
        p = plan(prog, s)
        p.check()
        assert lb <= p.arena_bytes <= naive, s
        assert all(o % prog.alignment == 0 for o in p.offsets.values())


@settings(max_examples=40, deadline=None)
@given(cfgs())
def test_plans_of_branchy_loop_programs_are_valid(spec):
    blocks, outputs = spec
    prog = Program.from_blocks(blocks, sizes={"a": 8, "b": 16, "c": 24, "d": 8, "e": 40}, outputs=outputs)
    for s in HEURISTICS:
        assert plan(prog, s).check().arena_bytes >= prog.lower_bound()


@needs_ortools
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 14), st.integers(0, 10_000))
def test_optimal_is_valid_and_no_worse_than_any_heuristic(n, seed):
    prog = random_program(n, seed, sizes=(64, 192, 320, 512))
    best = plan(prog, "optimal", time_limit=20)
    assert best.proven_optimal
    assert prog.lower_bound() <= best.arena_bytes
    for s in HEURISTICS:
        assert best.arena_bytes <= plan(prog, s).arena_bytes, s


@needs_ortools
def test_optimal_beats_greedy_where_greedy_is_not_optimal():
    # sizes 3,2,2,1... a classic: greedy largest-first wastes a gap the optimum fills
    prog = Program.from_intervals({"a": (0, 1, 2), "b": (1, 2, 1), "c": (2, 3, 2), "d": (0, 0, 1),
                                   "e": (3, 3, 1), "f": (0, 3, 1)})
    opt = plan(prog, "optimal")
    assert opt.proven_optimal and opt.arena_bytes == prog.lower_bound()


def test_optimal_without_ortools_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ortools", None)
    monkeypatch.setitem(sys.modules, "ortools.sat", None)
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)
    with pytest.raises(ImportError, match=r"pip install 'microtorch\[planning\]'"):
        plan(random_program(5), "optimal")


def test_optimal_refuses_large_programs():
    with pytest.raises(ValueError, match="max_buffers"):
        plan(random_program(60), "optimal")


def test_check_catches_overlapping_buffers():
    prog = Program.from_statements(["a = f()", "b = g(a)", "c = h(a, b)"], sizes={"a": 8, "b": 8, "c": 8},
                                   outputs=["c"])
    p = plan(prog, "greedy_by_size")
    p.offsets["b"] = p.offsets["a"] + 4
    with pytest.raises(PlanError, match=r"a .* and b .* both live at instruction 1"):
        p.check()
    p.offsets["b"] = -8
    with pytest.raises(PlanError, match="offset"):
        p.check()


def test_bad_programs_and_strategies_raise_clear_errors():
    with pytest.raises(ValueError, match="successor 'nowhere'"):
        Program.from_blocks({"entry": (["a = f()"], ["nowhere"])})
    with pytest.raises(ValueError, match="unknown strategy 'fastest'"):
        plan(random_program(3), "fastest")
    with pytest.raises(TypeError, match="Program"):
        plan({"a": 1}, "naive")
    with pytest.raises(ValueError, match="0 ≤ first ≤ last"):
        Program.from_intervals({"a": (3, 1, 8)})


def test_ten_thousand_buffers_plan_and_check():
    prog = random_program(10_000, seed=1)
    p = plan(prog, "greedy_by_size")
    assert p.arena_bytes >= prog.lower_bound()


# -- programs of real training steps -------------------------------------------------------------
def make_step(hidden=16, batch=8, act="relu", seed=0):
    rng = np.random.default_rng(seed)
    mt.manual_seed(seed)
    model = mt.nn.Sequential(mt.nn.Linear(6, hidden), mt.nn.ReLU() if act == "relu" else mt.nn.Tanh(),
                             mt.nn.Linear(hidden, hidden), mt.nn.Tanh(), mt.nn.Linear(hidden, 4))
    opt = mt.optim.Adam(model.parameters(), lr=0.01)
    x = mt.tensor(rng.standard_normal((batch, 6)).astype(np.float32))
    y = mt.tensor(rng.integers(0, 4, batch))

    def step():
        loss = mt.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return model, opt, step


def recorded(step):
    with mt.memory.step_arena():
        step()  # warm up: the optimizer's state, every .grad home exists
    with mt.trace() as tr, mt.memory.step_arena() as arena:
        loss = step()
    return tr, loss, arena.high_water


def test_program_from_trace_has_every_part_of_the_step():
    model, opt, step = make_step()
    tr, _, _ = recorded(step)
    prog = Program.from_trace(tr)
    kinds = {ins.kind for ins in prog.instructions}
    assert {"forward", "backward", "grad", "optimizer"} <= kinds
    assert prog.instructions[-1].kind == "optimizer"
    bkinds = {b.kind for b in prog.buffers.values()}
    assert {"parameter", "input", "activation", "gradient"} <= bkinds
    assert all(prog.buffers[n].tag == "activation" for n in prog.planned)
    assert all(b.external for b in prog.buffers.values() if b.kind in ("parameter", "input"))
    # each planned buffer is a storage the trace allocated, with its size
    allocs = {e["storage"]: e for e in tr.filter("alloc")}
    for n in prog.planned:
        b = prog.buffers[n]
        assert allocs[b.storage]["nbytes"] == b.nbytes and b.size % 64 == 0 and b.size >= b.nbytes
        assert b.producer is not None


def test_intervals_agree_with_trace_lifetimes_where_the_engine_freed_at_last_use():
    model, opt, step = make_step(hidden=32)
    tr, _, _ = recorded(step)
    prog = Program.from_trace(tr)
    closing = sorted(ins.event for ins in prog.instructions)
    allocs = [e["step"] for e in tr.filter("alloc")]

    def instruction_at(step_):  # the instruction running when event `step_` happened
        return sum(1 for c in closing if c < step_)

    iv = prog.intervals()
    lives = {lf.storage: lf for lf in tr.lifetimes()}
    equal = 0
    for n in prog.planned:
        b = prog.buffers[n]
        life = lives[b.storage]
        assert instruction_at(life.birth) == iv[n].first, n
        if n in prog.outputs:
            assert iv[n].last == len(prog) - 1
            continue
        end = instruction_at(life.death)
        assert end >= iv[n].last, f"{n} freed at instruction {end}, before its last use {iv[n].last}"
        # freed during its last use, or right after it before anything else was allocated
        last_close = closing[iv[n].last]
        at_last_use = end == iv[n].last or not any(last_close < a < life.death for a in allocs)
        equal += at_last_use
    assert equal >= 0.8 * len(prog.planned)


def test_lower_bound_is_below_what_the_engine_used():
    model, opt, step = make_step(hidden=32)
    tr, _, high_water = recorded(step)
    prog = Program.from_trace(tr)
    assert prog.lower_bound() <= plan(prog, "greedy_by_size").arena_bytes <= high_water


@pytest.mark.parametrize("strategy", ["greedy_by_size", "first_fit", "best_fit", "coloring", "naive"])
def test_planned_step_is_bit_identical_and_uses_exactly_the_plan(strategy):
    # two identical twins: one records its step (the reference), the other runs it planned
    ref_model, _, ref_step = make_step(hidden=24)
    model, _, step = make_step(hidden=24)
    tr, loss_ref, _ = recorded(ref_step)
    p = plan(Program.from_trace(tr), strategy)
    with mt.memory.step_arena():
        step()  # the twin's warm-up step
    with mt.trace() as tr2, planned(p) as run:
        loss = step()
    assert loss == loss_ref
    for a, q in zip(ref_model.parameters(), model.parameters()):
        assert np.array_equal(a._data, q._data) and np.array_equal(a.grad._data, q.grad._data)
    assert run.high_water == p.arena_bytes
    assert run.trace is tr2
    placed = {e["planned"]: e["offset"] for e in tr2.filter("alloc_block") if e["allocator"] == run.arena.name}
    assert placed == p.offsets
    # the planned run's trace is the same program again
    again = Program.from_trace(tr2)
    assert [i.signature for i in again.instructions] == [i.signature for i in p.program.instructions]


def test_planned_without_an_outer_trace_records_its_own():
    model, opt, step = make_step()
    tr, _, _ = recorded(step)
    p = plan(Program.from_trace(tr))
    with planned(p) as run:
        step()
    assert run.trace is not None and run.trace.filter("alloc_block")
    assert mt.recording.active is None


def test_another_shape_raises_naming_the_first_instruction_that_differs():
    model, opt, step = make_step(batch=8)
    tr, _, _ = recorded(step)
    p = plan(Program.from_trace(tr))
    _, _, other = make_step(batch=5)
    with pytest.raises(PlanMismatchError, match=r"instruction 0 \(Linear"):
        with planned(p):
            other()


def test_another_op_order_raises_naming_the_instruction():
    model, opt, step = make_step(act="relu")
    tr, _, _ = recorded(step)
    prog = Program.from_trace(tr)
    p = plan(prog)
    _, _, other = make_step(act="tanh")
    with mt.memory.step_arena():
        other()
    with pytest.raises(PlanMismatchError, match=r"instruction 1 \(Relu.*expects forward op Relu.*ran forward op Tanh"):
        with planned(p):
            other()


def test_a_shorter_step_raises_at_the_end():
    model, opt, step = make_step()
    tr, _, _ = recorded(step)
    p = plan(Program.from_trace(tr))
    x = mt.randn(8, 6)
    with pytest.raises(PlanMismatchError, match="ended before the plan"):
        with planned(p):
            model(x)  # the forward pass only: the plan has backward and the update too


def test_planned_needs_a_plan_of_a_trace():
    with pytest.raises(ValueError, match="from_trace"):
        with planned(plan(random_program(3))):
            pass
    with pytest.raises(TypeError, match="mt.memory.plan"):
        with planned("greedy"):
            pass


def test_bytes_reused_under_a_live_tensor_are_poisoned_not_read():
    rng = np.random.default_rng(1)
    w = mt.tensor(rng.standard_normal((6, 6)).astype(np.float32))
    x = mt.tensor(rng.standard_normal((4, 6)).astype(np.float32))

    def step():
        h = (x @ w).tanh()
        out = (h @ w).relu()  # h's last use as far as the trace can tell
        z = out * 3.0
        seen = h.numpy()  # a read that is not an op: the trace does not see it
        del h
        return float((z.sum()).item() + seen.sum())

    with mt.trace() as tr, mt.memory.step_arena():
        step()
    p = plan(Program.from_trace(tr), "greedy_by_size")
    h_name = p.program.instructions[1].defs[0]
    out_name = p.program.instructions[3].defs[0]
    assert p.offsets[out_name] == p.offsets[h_name]  # the plan gives h's bytes to `out`
    with pytest.raises(mt.memory.StaleTensorError, match="the plan reused its bytes"):
        with planned(p):
            step()


def test_planned_execution_is_exported_from_memory():
    for name in ("Program", "plan", "planned", "Plan", "PlanMismatchError", "PlanError"):
        assert hasattr(mt.memory, name)


@settings(max_examples=100, deadline=None)
@given(cfgs())
def test_live_ranges_are_exactly_the_occupied_instructions(spec):
    from microtorch.planning.conflicts import segments

    blocks, outputs = spec
    prog = Program.from_blocks(blocks, sizes={n: 8 for n in "abcde"}, outputs=outputs)
    occ = occupied(prog)
    runs = segments(prog)
    for x in prog.buffers:
        points = {i for i, o in enumerate(occ) if x in o}
        from_runs = {i for first, last in runs.get(x, []) for i in range(first, last + 1)}
        assert points == from_runs, (x, runs.get(x), prog.listing())


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(0, 1000), st.lists(st.integers(0, 6), min_size=30, max_size=30))
def test_check_rejects_exactly_the_plans_that_overlap_live_buffers(n, seed, slots):
    prog = random_program(n, seed, sizes=(64, 128))
    p = plan(prog, "naive")
    p.offsets = {x: 64 * slots[k] for k, x in enumerate(prog.planned)}
    size = {x: prog.buffers[x].size for x in prog.planned}
    bad = any(p.offsets[x] < p.offsets[y] + size[y] and p.offsets[y] < p.offsets[x] + size[x]
              for o in occupied(prog) for x, y in itertools.combinations(sorted(o), 2))
    if bad:
        with pytest.raises(PlanError, match="both live at instruction"):
            p.check()
    else:
        p.check()


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), st.tuples(st.integers(0, 8), st.integers(0, 4), st.integers(1, 9)),
                       min_size=1))
def test_from_intervals_gives_back_the_intervals(spec):
    intervals = {n: (f, f + d, s) for n, (f, d, s) in spec.items()}
    prog = Program.from_intervals(intervals)
    iv = prog.intervals()
    assert {n: (iv[n].first, iv[n].last) for n in intervals} == {n: (f, l) for n, (f, l, _) in intervals.items()}


def test_views_use_their_base_buffer():
    w = mt.randn(6, 4, requires_grad=True)
    x = mt.randn(5, 6)
    with mt.trace() as tr, mt.memory.step_arena():
        h = x @ w                 # a new buffer
        t = h.transpose(0, 1)     # a view of it: no new buffer
        loss = (t * t).sum()
        loss.backward()
    prog = Program.from_trace(tr)
    ops = {ins.op: ins for ins in prog.instructions if ins.kind == "forward"}
    assert ops["Transpose"].defs == () and ops["Transpose"].uses == ops["Matmul"].defs
    assert ops["Mul"].uses == ops["Matmul"].defs  # t * t reads h's bytes
