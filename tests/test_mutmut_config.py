"""`make mutate`'s per-module test table ([tool.microtorch.mutate-tests] in pyproject.toml) and
the plugin applying it (tests/mutmut_select.py): tests/README.md, "Mutation testing"."""
import ast
import os
import tomllib
from pathlib import Path

import pytest

from tests import mutmut_select

ROOT = Path(__file__).resolve().parents[1]
TABLE = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["microtorch"]["mutate-tests"]


def test_every_test_file_the_table_names_exists_and_every_prefix_is_a_module():
    for prefix, files in TABLE.items():
        parts = prefix.split(".")
        assert (ROOT.joinpath(*parts).with_suffix(".py").is_file() or ROOT.joinpath(*parts).is_dir()), prefix
        for f in files:
            assert (ROOT / f).is_file(), f"{prefix}: {f} does not exist (renamed? update pyproject.toml)"


def _redefined(tree) -> list[str]:
    """Names of the functions and classes a module (or class body) defines more than once (a
    property's setter, ``@name.setter``, is not a second definition)."""
    seen, twice = set(), []
    for node in tree.body:
        accessor = any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
                       for d in getattr(node, "decorator_list", ()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not accessor:
            twice += [node.name] if node.name in seen else []
            seen.add(node.name)
            if isinstance(node, ast.ClassDef):
                twice += [f"{node.name}.{n}" for n in _redefined(node)]
    return twice


def test_no_module_defines_a_function_twice():
    """mutmut names a mutant by its function, and a second ``def`` of one name takes over the
    first one's mutants, so every checker using the first would run the second's code."""
    twice = {str(p.relative_to(ROOT)): _redefined(ast.parse(p.read_text(encoding="utf-8")))
             for p in sorted((ROOT / "microtorch").rglob("*.py"))}
    assert {p: names for p, names in twice.items() if names} == {}


def test_the_plugin_is_loaded_by_mutmut():
    args = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]["pytest_add_cli_args"]
    assert "tests.mutmut_select" in args and "tests.mutmut_gc" in args and "tests.mutmut_hypothesis" in args


_FAILS_FROM_11 = """
from hypothesis import given, strategies as st

@given(st.integers(0, 1000))
def test_small(x):
    assert x <= 10
"""


@pytest.mark.parametrize("plugin", [False, True])
def test_under_mutmut_a_failing_hypothesis_example_is_not_kept_for_the_next_mutant(tmp_path, plugin):
    """Without the plugin hypothesis saves the failing example (and the next run replays it first:
    in a shared mutants/ that made every later mutant look killed); with it nothing is saved."""
    import subprocess
    import sys

    (tmp_path / "test_fails.py").write_text(_FAILS_FROM_11, encoding="utf-8")
    # as on a developer's machine: with CI set, hypothesis loads its own "ci" profile, which has no
    # database either, so without this the two cases would not differ in CI
    (tmp_path / "conftest.py").write_text('from hypothesis import settings\nsettings.load_profile("default")\n',
                                          encoding="utf-8")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "test_fails.py"]
    if plugin:
        args[3:3] = ["-p", "tests.mutmut_hypothesis"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outs = [subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True) for _ in range(2)]
    assert [o.returncode for o in outs] == [1, 1], outs[0].stdout[-2000:]
    saved = [p for p in (tmp_path / ".hypothesis" / "examples").rglob("*") if p.is_file()]
    assert bool(saved) is not plugin
    assert all("x=11" in o.stdout for o in outs)  # hypothesis shrank to the smallest failing x either way


@pytest.mark.parametrize("mutant, files", [
    ("microtorch.memory.pool.xǁPoolǁalloc__mutmut_3", TABLE["microtorch.memory"]),
    ("microtorch.trace.recorder.xǁTraceǁemit__mutmut_1", TABLE["microtorch.trace"]),
    ("microtorch.trace.schema.x_check__mutmut_1", TABLE["microtorch.trace"]),
    ("microtorch.exercises.course.x_student__mutmut_2", TABLE["microtorch.exercises.course"]),
    ("microtorch.exercises.pool.x_worst_waste__mutmut_1", TABLE["microtorch.exercises"]),
    ("microtorch.node.xǁFunctionǁapply__mutmut_1", TABLE["microtorch.node"]),
    ("microtorch.functions.linalg.xǁLinearǁforward__mutmut_1", TABLE["microtorch.functions"]),
    ("microtorch.sparse.coo.x_coalesce__mutmut_1", None),  # not in the table: every covering test
])
def test_a_mutant_runs_the_files_of_the_longest_prefix_its_module_matches(monkeypatch, mutant, files):
    monkeypatch.setenv("MUTANT_UNDER_TEST", mutant)
    assert mutmut_select._allowed_files(TABLE) == (None if files is None else set(files))


def test_the_other_passes_collect_the_union_of_the_patterns_files_or_everything(monkeypatch):
    monkeypatch.setenv("MUTANT_UNDER_TEST", "stats")
    monkeypatch.setattr("sys.argv", ["mutmut", "run", "--max-children", "1", "microtorch.memory.pool.*",
                                     "microtorch.exercises.pool.*"])
    assert mutmut_select._allowed_files(TABLE) == set(TABLE["microtorch.memory"]) | set(TABLE["microtorch.exercises"])
    monkeypatch.setattr("sys.argv", ["mutmut", "run", "microtorch.exercises.*"])  # also every exercises.* prefix
    assert mutmut_select._allowed_files(TABLE) == set(TABLE["microtorch.exercises.course"]) | set(TABLE["microtorch.exercises"])
    monkeypatch.setattr("sys.argv", ["mutmut", "run", "microtorch.memory.pool.*", "microtorch.sparse.*"])
    assert mutmut_select._allowed_files(TABLE) is None  # sparse/ is not in the table: no narrowing
    monkeypatch.setattr("sys.argv", ["mutmut", "run"])
    assert mutmut_select._allowed_files(TABLE) is None
