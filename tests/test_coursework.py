"""Coursework: the notebooks as nbgrader assignments, their student versions, and grading.

* every exercise is an nbgrader solution cell followed by a locked, autograded test cell;
* ``microtorch.exercises.course.student`` (``make student``) writes student versions with
  nbgrader's ``generate_assignment``: no solution text, no hidden tests, stubs with hints;
* a student version runs top to bottom, and the only errors are the unsolved exercises'
  ``NotImplementedError`` (in their test cells), so later sections still run;
* nbgrader's ``autograde`` (``make grade``) gives the instructor version full marks and the
  student version zero.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

# nbgrader's gradebook (SQLAlchemy) warns about its own session handling on every autograde
pytestmark = pytest.mark.filterwarnings("ignore:Object of type")

ROOT = Path(__file__).resolve().parents[1]
from microtorch.exercises.course import exercise_notebooks  # noqa: E402

NOTEBOOKS = exercise_notebooks()
IDS = [p.stem for p in NOTEBOOKS]
CELL_TIMEOUT_S = 120


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _solution_lines(cell: dict) -> list[str]:
    """The non-blank lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION``."""
    out, inside = [], False
    for line in _source(cell).splitlines():
        if "BEGIN SOLUTION" in line:
            inside = True
        elif "END SOLUTION" in line:
            inside = False
        elif inside and line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    return out


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    """nbgrader runs ``alembic`` from PATH; the kernels import this checkout."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("MPLBACKEND", "Agg")


# ----------------------------------------------------------------------------------------------
# the instructor notebooks' metadata
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_exercise_is_a_solution_cell_followed_by_a_locked_graded_test(path):
    cells = _cells(path)
    solutions = [i for i, c in enumerate(cells) if _meta(c).get("solution")]
    assert len(solutions) >= 2, f"{path.name}: only {len(solutions)} exercises carry nbgrader metadata"
    for i, c in enumerate(cells):
        if "BEGIN SOLUTION" in _source(c):
            assert _meta(c).get("solution"), f"{path.name} cell {i}: a solution region outside a solution cell"
    ids = [_meta(c)["grade_id"] for c in cells if _meta(c)]
    assert len(ids) == len(set(ids)), f"{path.name}: grade_ids repeat: {sorted(ids)}"
    for i in solutions:
        sol, test = cells[i], cells[i + 1]
        assert _meta(sol)["schema_version"] == 3 and not _meta(sol)["grade"] and not _meta(sol)["locked"]
        assert re.search(r"BEGIN SOLUTION \(hint: .+\)", _source(sol)), f"{path.name} cell {i}: no hint"
        tm = _meta(test)
        assert tm.get("grade") and tm.get("locked") and tm.get("points", 0) > 0, (
            f"{path.name} cell {i + 1}: the cell after a solution must be a locked, graded test")
        assert tm["grade_id"] == _meta(sol)["grade_id"] + "_test"
        src = _source(test)
        assert "mt.exercises.check_" in src and "### BEGIN HIDDEN TESTS" in src and "hidden=True" in src


def test_stub_carries_the_function_name_and_the_hint():
    from microtorch.exercises.course import stub_for

    src = "def f(x):\n    ### BEGIN SOLUTION (hint: add 'one')\n    return x + 1\n    ### END SOLUTION"
    stub = stub_for(src)
    ns = {}
    exec("def f(x):\n" + "\n".join("    " + line for line in stub.splitlines()), ns)
    with pytest.raises(NotImplementedError, match=r"write f yourself\. Hint: add 'one'"):
        ns["f"](1)
    assert stub_for("def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION") is None


# ----------------------------------------------------------------------------------------------
# student versions
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    pytest.importorskip("nbgrader")
    from microtorch.exercises import course

    out = tmp_path_factory.mktemp("student")
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), old])
    try:
        course.student(out, NOTEBOOKS)
    finally:
        os.environ["PATH"] = old
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_student_version_has_no_solution_text_and_no_hidden_tests(path, student_dir):
    student = student_dir / path.name
    text = student.read_text(encoding="utf-8")
    cells, theirs = _cells(path), _cells(student)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text
    student_text = "\n".join(_source(c) for c in theirs)
    outside = "\n".join(_source(c) for c in cells if not _meta(c).get("solution"))
    for i, c in enumerate(cells):
        for line in _solution_lines(c):
            # a line the notebook also shows outside every solution ("return lo, hi") is no leak
            if len(line) > 12 and line not in outside:
                assert line not in student_text, f"{path.name} cell {i}: solution line {line!r} is in the student version"
    stubs = [c for c in theirs if _meta(c).get("solution")]
    assert len(stubs) == sum(1 for c in cells if _meta(c).get("solution"))
    for c in stubs:
        assert re.search(r'raise NotImplementedError\(["\']write [\w.]+ yourself\. Hint: ', _source(c))
        assert c["metadata"].get("deletable") is False
    for c in theirs:
        if _meta(c).get("grade"):
            assert c["metadata"].get("editable") is False, "test cells are read-only for students"


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_student_version_runs_top_to_bottom_with_only_the_unsolved_exercises_failing(path, student_dir):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(student_dir / path.name, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S, allow_errors=True,
                                     resources={"metadata": {"path": str(student_dir)}})
    client.execute()
    failed = {}
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                failed[i] = out
    tests = [i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    assert set(failed) == set(tests), (
        f"{path.name}: errors in cells {sorted(set(failed) - set(tests))} that are not exercise tests: "
        + "; ".join(f"{failed[i]['ename']}: {failed[i]['evalue']}" for i in sorted(set(failed) - set(tests)))
        if set(failed) - set(tests) else f"{path.name}: test cells {sorted(set(tests) - set(failed))} passed unsolved")
    for i, out in failed.items():
        assert out["ename"] == "NotImplementedError", f"{path.name} cell {i}: {out['ename']}: {out['evalue']}"
        assert "yourself. Hint: " in out["evalue"]


# ----------------------------------------------------------------------------------------------
# autograding
# ----------------------------------------------------------------------------------------------
@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_autograde_gives_the_instructor_version_full_marks_and_the_student_version_zero(path, student_dir):
    pytest.importorskip("nbgrader")
    from microtorch.exercises.course import grade

    points = [_meta(c)["points"] for c in _cells(path) if _meta(c).get("grade")]
    full = grade(path, path)
    assert full["max_score"] == sum(points) and full["score"] == sum(points), full
    assert [r[0] for r in full["exercises"]] == [_meta(c)["grade_id"] for c in _cells(path) if _meta(c).get("grade")]
    zero = grade(student_dir / path.name, path)
    assert zero["max_score"] == sum(points) and zero["score"] == 0, zero
