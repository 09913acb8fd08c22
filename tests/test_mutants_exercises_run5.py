"""Tests written against surviving mutants of microtorch/exercises/checking.py (mutation run 5,
tests/mutation-run-5/exercises-core.md): the messages a checker prints, the labels of switched-off
engine code, the bare ``@checker`` form, and learners' callables that are not plain functions."""
import functools
import sys
import types

import pytest

import microtorch as mt
from microtorch.exercises import checking


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

    bare = checking.checker(check_double)

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
    checking.checker("double")(_check_ok)(fn)
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
    checking.checker("double")(_check_ok)(double)
    checking.checker("double")(_check_ok)(nameless)
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
