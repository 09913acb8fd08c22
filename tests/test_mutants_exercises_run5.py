"""Tests written against surviving mutants of microtorch/exercises/checking.py, suites.py and
fallbacks.py (mutation run 5, tests/mutation-run-5/exercises-core.md; ``checker`` has since moved
to checker.py, the suites' tests and helpers to engine_suites.py): the messages a checker
prints, the labels and refusals of switched-off engine code, the bare ``@checker`` form, learners'
callables that are not plain functions, what a suite prints and which graph it names when one
fails, and the fallbacks agreeing with the checkers they stand in for."""
import functools
import sys
import types

import pytest

import numpy as np

import microtorch as mt
from microtorch.exercises import backprop_gradients, checking, engine_suites, fallbacks, suites, views
from microtorch.exercises.checker import checker
from microtorch.functions.elementwise import Exp
from microtorch.functions.reduction import Mean

_ENGINE_ALIGN_UP = mt.memory.align_up
_ENGINE_TOPO = mt.autograd._topological_order


def _check_ok(fn):
    assert fn(2) == 4


def test_a_pass_says_hidden_only_on_the_hidden_run(capsys):
    checking._passed("double", 3)
    assert capsys.readouterr().out == "✓ double: all 3 cases right.\n"
    checking._HIDDEN[0] = True
    try:
        checking._passed("double", 5)
    finally:
        checking._HIDDEN[0] = False
    assert capsys.readouterr().out == "✓ double: all 5 cases right (the hidden ones).\n"


class Engine:
    def method(self):
        return 1


def plain(x):
    return x


class _NoNames:
    """An object without __module__ / __qualname__ (its class's are hidden)."""
    __slots__ = ()

    def __getattribute__(self, name):
        if name in ("__module__", "__qualname__"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __repr__(self):
        return "<no names>"


def test_labels_name_the_module_and_qualified_name_of_what_is_switched_off():
    assert checking._label((Engine, "method")) == f"{__name__}.Engine.method"
    assert checking._label(plain) == f"{__name__}.plain"
    assert checking._label(_NoNames()) == "?.<no names>"


def test_a_switched_off_method_names_itself_in_the_refusal():
    with checking.switched_off("ex", [(Engine, "method")]):
        with checking.learner(), pytest.raises(checking.WriteItYourself, match=rf"engine's {__name__}\.Engine\.method is"):
            Engine().method()
    assert Engine().method() == 1


def test_only_microtorch_and_numpy_modules_are_rewritten():
    # `target` is a local: rewriting every module would also rewrite this test module's
    # global `plain`, and a comparison with it could then never fail.
    target = plain
    other = types.ModuleType("not_microtorch_run5")
    other.f = target
    sys.modules["not_microtorch_run5"] = other
    undo = []
    try:
        undo = checking._replace_everywhere(target, "stand-in")
        assert other.f is target
        assert all(key != "plain" or space is not globals() for space, key, _ in undo)
    finally:
        for space, key, orig in undo:
            space[key] = orig
        del sys.modules["not_microtorch_run5"]


def test_checker_used_bare_checks_and_remembers_the_function():
    seen = []

    def check_double(fn):
        seen.append(fn)
        _check_ok(fn)

    bare = checker(check_double)

    def double(x):
        return 2 * x
    assert bare(double) is None and seen == [double]
    assert checking.has_passed(double)


class _Unhashable:
    __hash__ = None

    def __call__(self, x):
        return 2 * x


def test_an_unhashable_callable_passes_its_checker_but_is_not_remembered(capsys):
    fn = _Unhashable()
    checker("double")(_check_ok)(fn)
    assert not checking.has_passed(fn)
    assert checking.yours_or_engine(fn, plain) is plain


def test_yours_or_engine_says_which_function_later_sections_use(capsys):
    def double(x):
        return 2 * x
    assert checking.yours_or_engine(double, plain) is plain
    assert capsys.readouterr().out == ("Your double has not passed its checker yet: later sections use the "
                                       "engine's version until it does (re-run this cell then).\n")
    nameless = functools.partial(double)
    checking.yours_or_engine(nameless, plain)
    assert capsys.readouterr().out.startswith("Your function has not passed")
    checker("double")(_check_ok)(double)
    checker("double")(_check_ok)(nameless)
    capsys.readouterr()
    assert checking.yours_or_engine(double, plain) is double
    assert capsys.readouterr().out == "Later sections use your double.\n"
    assert checking.yours_or_engine(nameless, plain) is nameless
    assert capsys.readouterr().out == "Later sections use your function.\n"


def test_a_raising_function_is_shown_with_its_arguments():
    def bad(*args):
        raise ValueError("nope")
    with pytest.raises(AssertionError) as e:
        checking._call(bad, "case 1:", 3, mt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert "called as fn(3, <tensor of shape (2, 3)>)" in str(e.value)
    assert "raised ValueError: nope" in str(e.value)


def test_the_refusal_says_what_to_write_what_is_off_and_what_to_use_instead():
    with checking.switched_off("the thing", [(Engine, "method")]):
        with checking.learner(), pytest.raises(checking.WriteItYourself) as e:
            Engine().method()
    assert str(e.value) == (f"this exercise asks you to write the thing yourself: the engine's "
                            f"{__name__}.Engine.method is switched off while the checker runs your "
                            "function. Compute the answer with plain Python (and numpy) instead.")


def test_a_switched_off_property_still_sets_and_keeps_its_doc_for_the_engine():
    doc = mt.Tensor.__dict__["data"].__doc__
    x, t = mt.zeros(3), mt.ones(3)
    with checking.switched_off("data", [(mt.Tensor, "data")]):
        assert mt.Tensor.__dict__["data"].__doc__ == doc
        x.data = t
        with checking.learner(), pytest.raises(checking.WriteItYourself):
            x.data
    assert x.tolist() == [1.0, 1.0, 1.0]


class _Cache:
    def __init__(self):
        self._value = 1

    @property
    def value(self):
        """The cached value."""
        return self._value

    @value.deleter
    def value(self):
        self._value = None


def test_a_switched_off_property_still_deletes_for_the_engine():
    c = _Cache()
    with checking.switched_off("value", [(_Cache, "value")]):
        del c.value
        assert c.value is None
        with checking.learner(), pytest.raises(checking.WriteItYourself):
            c.value


# -- suites.py, engine_suites.py -----------------------------------------------------------------
def _round_up(n, a):
    return _ENGINE_ALIGN_UP(n, a)


def test_a_suite_run_says_how_many_engine_tests_passed_with_the_plug_in(capsys):
    assert suites.run_suite("align_up", _round_up) == 2
    assert capsys.readouterr().out == "✓ the engine's own tests with your _round_up plugged in: all 2 pass.\n"
    assert suites.run_suite("align_up", functools.partial(_round_up)) == 2
    assert capsys.readouterr().out == "✓ the engine's own tests with your align_up plugged in: all 2 pass.\n"
    assert suites.run_suite("align_up", _round_up, quiet=True) == 2
    assert capsys.readouterr().out == ""


def test_gradient_suites_draw_their_inputs_from_seed_0_whatever_the_global_seed():
    inputs = []
    for global_seed in (1, 2):
        mt.manual_seed(global_seed)
        inputs.append(engine_suites._gradcheck(lambda a, b: (a * b).sum(), (2, 3), (3,)))
    g = mt.Generator().manual_seed(0)
    want = [mt.randn(2, 3, dtype="float64", generator=g), mt.randn(3, dtype="float64", generator=g)]
    for xs in inputs:
        assert [x.tolist() for x in xs] == [w.tolist() for w in want]


def _preorder(root):
    """A topological order that visits a node when it is first popped, before all its consumers ran."""
    out, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            out.append(node)
            stack.extend(e for e in node.next if isinstance(e, mt.Function))
    return out


def _first_inputs_only(root):
    """A topological order that follows each node's first input only, as down a chain."""
    out, node = [], root
    while isinstance(node, mt.Function):
        out.append(node)
        node = node.next[0]
    return out


def _suite_failure(plug, fn):
    with pytest.raises(AssertionError) as e:
        suites.run_suite(plug, fn, quiet=True)
    return str(e.value)


def test_a_schedule_that_runs_h_before_all_its_three_uses_fails_on_the_fan_in_graph():
    assert suites.run_suite("topological_order", lambda root: _ENGINE_TOPO([(root, None, None)]), quiet=True) == 2
    assert "failed:\nAssertionError: fan-in: h used three times: " in _suite_failure("topological_order", _preorder)


def test_a_schedule_that_misses_the_longer_path_fails_on_the_two_path_graph():
    assert ("failed:\nAssertionError: two paths of different lengths: "
            in _suite_failure("topological_order", _first_inputs_only))


def test_an_engine_op_with_a_wrong_backward_is_named_by_the_graph_that_uses_it(monkeypatch):
    monkeypatch.setattr(Exp, "backward", staticmethod(lambda ctx, g: g * ctx.saved_tensors[0] * 2.0))
    with pytest.raises(AssertionError, match="^a chain: "):
        engine_suites._schedule_grads("deps")
    monkeypatch.undo()
    monkeypatch.setattr(Mean, "backward", staticmethod(lambda ctx, g: mt.ones(ctx.shape, dtype=g.dtype) * g))
    monkeypatch.delattr(Mean, "numpy_backward")
    with pytest.raises(AssertionError, match="^a small MLP: "):
        engine_suites._schedule_grads("deps")


# -- fallbacks.py: each agrees with the checker it stands in for, on the checker's own cases --------
def _visible_and_hidden(cases):
    """A checker's cases, visible run then hidden run."""
    visible = cases()
    checking._HIDDEN[0] = True
    try:
        return visible + cases()
    finally:
        checking._HIDDEN[0] = False


def test_the_fallback_extent_gives_the_lowest_and_highest_position_of_every_checker_view():
    for name, v in _visible_and_hidden(views._extent_cases):
        p = views._positions(v)
        assert fallbacks.extent(*views._triple(v)) == (p.min(), p.max()), name


def test_the_fallback_shares_element_answers_every_checker_pair_as_the_positions_do():
    answers = []
    for name_a, va, name_b, vb in _visible_and_hidden(views._alias_cases):
        want = bool(np.intersect1d(views._positions(va), views._positions(vb)).size)
        assert fallbacks.shares_element(views._triple(va), views._triple(vb)) is want, (name_a, name_b)
        answers.append(want)
    assert True in answers and False in answers


def test_the_fallback_windows_are_the_windows_counted_one_by_one_for_every_checker_signal():
    for name, sig, size, step in _visible_and_hidden(views._window_cases):
        length, stride = sig.shape[0], sig.stride(0)
        assert fallbacks.windows(length, stride, size, step) == views._reference_windows(length, stride, size, step), \
            (name, size, step)


def test_the_fallback_logsumexp_has_the_checkers_values_and_softmax_gradient_on_its_cases():
    r = np.random.default_rng(0)
    for what, x0 in _visible_and_hidden(backprop_gradients._lse_cases):
        x = mt.tensor(x0, dtype="float64", requires_grad=True)
        y = fallbacks.LogSumExp.apply(x)
        want = backprop_gradients._numpy_logsumexp(x0)
        assert y.dtype == mt.float64 and y.shape == want.shape, what
        assert np.allclose(y.detach().numpy(), want, rtol=1e-10, atol=1e-10), what
        g0 = r.standard_normal(want.shape)
        (y * mt.tensor(g0, dtype="float64")).sum().backward()
        assert np.allclose(x.grad.numpy(), g0[..., None] * backprop_gradients._numpy_softmax(x0), rtol=1e-8, atol=1e-10), what


def test_the_fallback_logsumexp_keeps_float32():
    x0 = np.array([[1000.0, 1001.0, 999.0], [-1.0, 0.0, 0.5]], dtype=np.float32)
    y = fallbacks.LogSumExp.apply(mt.tensor(x0))
    assert y.dtype == mt.float32
    assert np.allclose(y.numpy(), backprop_gradients._numpy_logsumexp(x0.astype(np.float64)), rtol=1e-6)
