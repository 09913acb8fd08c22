"""Build-your-own: ``mt.exercises.use(...)`` runs the real engine on the learner's functions.

* every suite of :mod:`microtorch.exercises.suites` passes on the engine itself (they are
  engine tests) and with the notebooks' reference solutions plugged in; every suite is registered
  by importing the package, and a plug point without one is named, not a bare KeyError;
* a plugged-in function is really what the engine calls (counted), and the engine's own is
  back after the block, also after an error;
* a plug-in that is wrong inside the engine fails its suite with the test's name.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import plugins, suites

ROOT = Path(__file__).resolve().parents[1]
PLUGS = {  # plug point -> (notebook, the solution's name)
    "unbroadcast": ("01_tensors_and_graphs", "unbroadcast"),
    "topological_order": ("02_backpropagation", "topo_order"),
    "dependency_counts": ("02_backpropagation", "dependency_counts"),
    "peak_extra_bytes": ("03_refcounts_and_lifetimes", "peak_extra_bytes"),
    "align_up": ("04_arena_allocator", "align_up"),
    "size_class_of": ("05_memory_pool", "size_class_of"),
    "extent": ("06_views_and_aliasing", "extent"),
    "derivative_from_output": ("07_inplace_and_versions", "derivative_from_output"),
    "sgd_momentum_step": ("08_training", "sgd_momentum_step"),
    "adam_step": ("08_training", "adam_step"),
}
TESTS = [(plug, t) for plug, ts in suites.SUITES.items() for t in ts]


def _solution(stem: str, name: str):
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    ns = {"mt": mt, "np": np}
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            exec("".join(cell["source"]), ns)
    return ns[name]


def test_every_plug_point_has_a_suite_and_a_notebook_solution():
    assert set(plugins.PLUG_POINTS) == set(suites.SUITES) == set(PLUGS)
    assert all(len(ts) >= 2 for ts in suites.SUITES.values())


def test_importing_the_runner_alone_registers_every_suite():
    """The tests are defined in engine_suites, which the package imports: a fresh interpreter that
    imports only the runner finds every plug point's suite (a submodule loads its package first)."""
    code = ("from microtorch.exercises import suites; "
            "print(sorted((p, len(ts)) for p, ts in suites.SUITES.items()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == str(sorted((p, len(ts)) for p, ts in suites.SUITES.items()))


def test_a_plug_point_without_a_suite_is_named(monkeypatch):
    with pytest.raises(KeyError, match="no plug point 'unbroadcst'; the plug points are unbroadcast, "):
        suites.run_suite("unbroadcst", lambda g, shape: g)
    monkeypatch.delitem(suites.SUITES, "align_up")
    with pytest.raises(KeyError, match="no tests registered for plug point 'align_up': .*engine_suites"):
        suites.run_suite("align_up", lambda n, a: n)


@pytest.mark.parametrize("plug, test", TESTS, ids=[f"{p}-{t.__name__}" for p, t in TESTS])
def test_the_suite_passes_on_the_engine_itself(plug, test):
    test()


@pytest.mark.parametrize("plug", sorted(PLUGS))
def test_the_notebook_solution_plugged_in_passes_the_suite_and_is_what_the_engine_calls(plug):
    fn = _solution(*PLUGS[plug])
    calls = []

    def counted(*args):
        calls.append(args)
        return fn(*args)

    counted.__name__ = fn.__name__
    assert suites.run_suite(plug, counted, quiet=True) == len(suites.SUITES[plug])
    assert calls, f"the engine never called the plugged-in {plug}"


def test_the_engine_is_back_after_the_block_even_after_an_error():
    before = (mt.unbroadcast, mt.autograd._topological_order, mt.memory.align_up,
              mt.memory.Pool.__dict__["size_class"], mt.memory.aliasing.Layout.__dict__["extent"],
              mt.optim.SGD.__dict__["_update"], mt.memory.Trace.__dict__["peak"],
              "backward" in mt.functions.inplace_ops.Tanh_.__dict__, mt.functions.inplace_ops.Relu_.__dict__["backward"])
    with pytest.raises(ZeroDivisionError):
        with mt.exercises.use(unbroadcast=lambda g, s: 1 / 0, align_up=lambda n, a: n,
                              size_class_of=lambda n, m: 0, extent=lambda o, sh, st: (0, 0),
                              topological_order=lambda r: [r], sgd_momentum_step=lambda *a: None,
                              peak_extra_bytes=lambda tr: (0, None), derivative_from_output=lambda op, z: None):
            a = mt.randn(2, 3, requires_grad=True)
            (a + mt.randn(3)).sum().backward()
    after = (mt.unbroadcast, mt.autograd._topological_order, mt.memory.align_up,
             mt.memory.Pool.__dict__["size_class"], mt.memory.aliasing.Layout.__dict__["extent"],
             mt.optim.SGD.__dict__["_update"], mt.memory.Trace.__dict__["peak"],
             "backward" in mt.functions.inplace_ops.Tanh_.__dict__, mt.functions.inplace_ops.Relu_.__dict__["backward"])
    assert after == before


def test_unknown_plug_points_and_non_functions_are_refused():
    with pytest.raises(TypeError, match="no plug point 'topo'"):
        with mt.exercises.use(topo=lambda r: []):
            pass
    with pytest.raises(TypeError, match="needs a function"):
        with mt.exercises.use(align_up=64):
            pass


def test_a_plug_in_wrong_inside_the_engine_fails_its_suite_by_name():
    def mean_not_sum(g, shape):  # averages the copies: right shape, wrong numbers
        lead = g.ndim - len(shape)
        dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
        return (g.mean(dim=dims, keepdim=True) if dims else g).reshape(shape)
    with pytest.raises(AssertionError, match="inside the engine the test \"a \\+ b, a \\* b"):
        suites.run_suite("unbroadcast", mean_not_sum)
    with pytest.raises(AssertionError, match="3,000-node chain|finite-difference"):
        suites.run_suite("topological_order", lambda root: [root])


def test_the_learners_unbroadcast_drives_backward_and_the_trace_shows_it():
    fn = _solution("01_tensors_and_graphs", "unbroadcast")
    seen = []

    def mine(g, shape):
        seen.append((tuple(g.shape), tuple(shape)))
        return fn(g, shape)

    w, b = mt.randn(3, 1, requires_grad=True), mt.randn(1, requires_grad=True)
    with mt.exercises.use(unbroadcast=mine), mt.trace() as tr:
        ((mt.randn(4, 3) @ w + b) ** 2).mean().backward()
    assert ((4, 1), (1,)) in seen and b.grad.shape == (1,)
    assert tr.filter("backward"), "the backward ran inside the recording"


def test_the_training_suites_refuse_an_optimizer_that_does_not_train():
    """engine_suites._trains: the loss must at least halve in 40 steps; an optimizer that never moves the
    parameters, or moves them 1e-6 of the way, fails; SGD with momentum passes."""
    from microtorch.exercises import engine_suites

    class Still:  # an optimizer whose step does nothing
        def __init__(self, params):
            pass

        def zero_grad(self):
            pass

        def step(self):
            pass

    for make in (Still, lambda params: mt.optim.SGD(params, lr=1e-6)):
        with pytest.raises(AssertionError):
            engine_suites._trains(make)
    engine_suites._trains(lambda params: mt.optim.SGD(params, lr=0.1, momentum=0.9))
