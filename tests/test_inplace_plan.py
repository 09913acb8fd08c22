"""In-place rewriting analysis: the plan's verdicts and reasons on recorded programs, and
running the program again with the in-place variants where the plan says so gives the same
outputs and gradients — and the memory the plan predicts.
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory.inplace_analysis import _peak


class Ops:
    """Runs a program's ops one by one; where a plan says an op can run in place, calls the
    in-place variant on the input the plan names instead (so op ``i`` of the program is
    forward op ``i`` of its trace)."""

    def __init__(self, plan=None):
        self.plan = {d.index: d for d in plan} if plan is not None else {}
        self.i = 0

    def __call__(self, name, *args, **kwargs):
        d = self.plan.get(self.i)
        self.i += 1
        if d is not None and d.inplace:
            target = args[d.position]
            others = [a for k, a in enumerate(args) if k != d.position]
            return getattr(target, d.method)(*others, **kwargs)
        return getattr(mt, name)(*args, **kwargs)


def mlp_like(op, x, w, b, c):
    h = op("matmul", x, w)  # 0
    a = op("add", h, b)  # 1: add_ into h
    r = op("relu", a)  # 2: relu_ into a (relu_ uses its output)
    e = op("exp", r)  # 3: refused, relu_ (rewritten) saves its result
    s = op("mul", e, 2.0)  # 4: refused, Exp saves its output
    t = op("transpose", s, 0, 1)  # 5: a view
    u = op("tanh", t)  # 6: tanh_ into t (a view of s; nothing else reads s)
    v = op("sub", u, 1.0)  # 7: refused, Tanh saves its output
    k = op("add", c, v)  # 8: add_ into v (the second operand: c is smaller)
    m = op("mul", k, k)  # 9: refused, the other factor needs a gradient
    q = op("clamp", m, -1.0, 2.0)  # 10: clamp_ into m
    return op("sum", q)  # 11


EXPECTED = [
    ("Matmul", False, "no in-place variant"), ("Add", True, "add_ needs no values"),
    ("Relu", True, "relu_ takes its gradient from its output"), ("Exp", False, "Relu (node"),
    ("Mul", False, "Exp (node"), ("Transpose", False, "a view op"), ("Tanh", True, "tanh_"),
    ("Sub", False, "Tanh (node"), ("Add", True, "add_"), ("Mul", False, "d(a·b)/db = a"),
    ("Clamp", True, "mask"), ("Sum", False, "no in-place variant"),
]


def leaves(seed=0):
    rng = np.random.default_rng(seed)
    x = mt.tensor(rng.standard_normal((4, 3)), dtype=mt.float64)
    w = mt.tensor(rng.standard_normal((3, 5)), dtype=mt.float64, requires_grad=True)
    b = mt.tensor(rng.standard_normal(5), dtype=mt.float64, requires_grad=True)
    c = mt.tensor(rng.standard_normal((5, 1)), dtype=mt.float64, requires_grad=True)
    return x, w, b, c


def run(program, plan=None, backward=True, seed=0):
    x, *params = args = leaves(seed)
    with mt.trace() as tr:
        out = program(Ops(plan), *args)
        if backward:
            out.backward()
    grads = [p.grad.numpy().copy() if p.grad is not None else None for p in params]
    return tr, out.detach().numpy().copy(), grads


def test_plan_verdicts_and_reasons():
    tr, _, _ = run(mlp_like)
    plan = mt.memory.inplace_plan(tr)
    assert len(plan) == len(EXPECTED)
    for d, (op, inplace, fragment) in zip(plan, EXPECTED):
        assert (d.op, d.inplace) == (op, inplace), str(d)
        assert fragment in d.reason, str(d)
    assert plan.inplace_ops() == [1, 2, 6, 8, 10]
    assert plan[8].position == 1 and plan[8].method == "add_" and plan[1].position == 0
    assert plan.saved_bytes == 5 * 4 * 5 * 8  # five [4, 5] / [5, 4] float64 outputs
    assert plan.peak_after < plan.peak_before
    assert "saves 800 bytes" in str(plan)


def test_replaying_with_the_rewrite_gives_the_same_outputs_gradients_and_predicted_memory():
    tr, out, grads = run(mlp_like)
    plan = mt.memory.inplace_plan(tr)
    tr2, out2, grads2 = run(mlp_like, plan)
    np.testing.assert_allclose(out2, out, rtol=1e-12)
    for g, g2 in zip(grads, grads2):
        np.testing.assert_allclose(g2, g, rtol=1e-12, atol=1e-14)
    ops2 = [e["op"] for e in tr2.filter("op") if e["phase"] == "forward"]
    assert {"Add_", "Relu_", "Tanh_", "Clamp_"} <= set(ops2)
    # the rewritten program really allocates less, exactly as predicted
    assert _peak(tr2.events, {}) == plan.peak_after and _peak(tr.events, {}) == plan.peak_before


def test_inference_without_grad_can_run_almost_everything_in_place():
    def program(op, x, w, b, c):
        h = op("matmul", x, w)
        a = op("add", h, b)
        r = op("relu", a)
        e = op("exp", r)
        s = op("mul", e, 2.0)
        return op("sum", op("sigmoid", s))

    def no_grad(op, *args):
        with mt.no_grad():
            return program(op, *args)

    tr, out, _ = run(no_grad, backward=False)
    plan = mt.memory.inplace_plan(tr)
    assert [d.inplace for d in plan] == [False, True, True, True, True, True, False]
    _, out2, _ = run(no_grad, plan, backward=False)
    np.testing.assert_allclose(out2, out, rtol=1e-12)


def test_refusals_name_the_later_use():
    def prog(op, x, w, b, c):
        h = op("matmul", x, w)  # 0
        v = op("transpose", h, 0, 1)  # 1: a view of h
        a = op("add", h, 1.0)  # 2: refused, h is read later through v
        n = op("neg", v)  # 3: neg_ into v, i.e. into h's bytes: nothing reads them afterwards
        e = op("exp", x)  # 4: refused, x is a program input
        kept = op("add", a, 1.0)  # 5: add_ into a
        prog.kept = kept  # the caller holds on to this one
        y = op("neg", kept)  # 6: refused, kept is still alive when the trace ends
        return op("add", op("add", op("sum", y), op("sum", e)), op("sum", n))

    tr, out, grads = run(prog)
    plan = mt.memory.inplace_plan(tr)
    assert [d.inplace for d in plan][:7] == [False, False, False, True, False, True, False]
    assert "t" in plan[2].reason and "read again through" in plan[2].reason
    assert "another view of storage" in plan[2].reason and "by Neg at step" in plan[2].reason
    assert "is a program input" in plan[4].reason
    assert "still alive when the trace ends" in plan[6].reason
    _, out2, grads2 = run(prog, plan)
    np.testing.assert_allclose(out2, out)
    np.testing.assert_allclose(grads2[0], grads[0])  # w (b and c are unused)


def test_an_output_kept_by_the_caller_is_not_overwritten():
    keep = []

    def prog(op, x, w, b, c):
        h = op("matmul", x, w)
        keep.append(h)  # the caller holds h after the program
        return op("sum", op("exp", h))

    tr, _, _ = run(prog)
    plan = mt.memory.inplace_plan(tr)
    assert not plan[1].inplace and "still alive when the trace ends" in plan[1].reason


def test_leaf_and_saved_input_refusals():
    def prog(op, x, w, b, c):
        s = op("sigmoid", w)  # 0: refused: w is a leaf that requires grad
        t = op("add", s, 1.0)  # 1: refused: Sigmoid saves s
        return op("sum", t)

    tr, _, _ = run(prog)
    plan = mt.memory.inplace_plan(tr)
    assert "a leaf that requires grad" in plan[0].reason
    assert "Sigmoid" in plan[1].reason and "saves storage" in plan[1].reason


def test_the_plan_is_a_pure_function_of_the_events(tmp_path):
    tr, _, _ = run(mlp_like)
    plan = mt.memory.inplace_plan(tr)
    tr.save(tmp_path / "t.json")
    again = mt.memory.inplace_plan(mt.Trace.load(tmp_path / "t.json"))
    assert [str(d) for d in again] == [str(d) for d in plan] and again.peak_after == plan.peak_after
    # traces recorded before op events carried storage ids and strides still work
    old = [{k: v for k, v in e.items() if k not in ("input_storages", "output_storage", "input_strides", "inplace")}
           for e in tr.events]
    assert [str(d) for d in mt.memory.inplace_plan(old)] == [str(d) for d in plan]


def test_an_expanded_input_is_not_overwritten():
    def prog(op, x, w, b, c):
        h = op("matmul", x, w)
        row = op("index", h, (slice(0, 1),))
        e = op("expand", row, 4, 5)
        return op("sum", op("exp", e))

    tr, _, _ = run(prog)
    plan = mt.memory.inplace_plan(tr)
    d = plan[3]
    assert d.op == "Exp" and not d.inplace and "elements overlap (an expanded view, strides [0, 1])" in d.reason


@pytest.mark.parametrize("seed", range(5))
def test_random_elementwise_programs_replay_identically(seed):
    """Random chains of elementwise ops: whatever the plan rewrites, outputs and gradients
    stay the same, and the measured peak is the predicted one."""
    rng = np.random.default_rng(seed)
    names = ["add", "sub", "mul", "relu", "exp", "tanh", "sigmoid", "neg", "clamp", "div"]
    steps = [(rng.choice(names), int(rng.integers(0, 3))) for _ in range(10)]

    def prog(op, x, w, b, c):
        vals = [op("matmul", x, w)]
        for name, back in steps:
            v = vals[max(len(vals) - 1 - back, 0)]
            if name in ("add", "sub", "mul"):
                v = op(name, v, vals[-1] if back else 0.5)
            elif name == "div":
                v = op("div", v, 2.0)
            elif name == "clamp":
                v = op("clamp", v, -0.5, 0.5)
            else:
                v = op(name, v)
            vals.append(v)
        return op("sum", vals[-1])

    tr, out, grads = run(prog)
    plan = mt.memory.inplace_plan(tr)
    tr2, out2, grads2 = run(prog, plan)
    np.testing.assert_allclose(out2, out, rtol=1e-12)
    for g, g2 in zip(grads, grads2):
        assert (g is None) == (g2 is None)
        if g is not None:
            np.testing.assert_allclose(g2, g, rtol=1e-10, atol=1e-12)
    # at most the predicted peak: an in-place op with a number operand (h.add_(0.5)) does not
    # even allocate the 8-byte constant tensor that h + 0.5 made
    assert plan.peak_after - 8 * len(steps) <= _peak(tr2.events, {}) <= plan.peak_after
