"""Mutation run 7, ``exercises/course.py`` (the nbgrader coursework: ``make student`` / ``make grade``).

What an instructor is given, tested fast, without running nbgrader where it is not needed:

* which notebooks are assignments (the ones with solution cells, 01-13, in order, as the README says), read as UTF-8
  whatever the locale (a Windows or ``LANG=C`` machine);
* the stub of a solution region: it names the function, the method (``Class.method``) or the
  class being written and carries the hint of its ``### BEGIN SOLUTION (hint: ...)`` line;
* the hinted ``ClearSolutions`` on hand-built cells: hinted regions get their own stub, unhinted
  ones nbgrader's, at the region's indent, the code around them kept, markdown regions the
  text stub, nested or unclosed regions refused; and ``configure`` puts it in nbgrader's
  ``GenerateAssignment`` pipeline in ClearSolutions' place with the README's 2-minute timeout;
* the throw-away course directory (``_course``), how a failed nbgrader step is reported (``_ok``),
  ``student`` over a stand-in nbgrader API (the files it writes, the messages), the order of the
  graded cells, the instructor notebook found for a submission;
* the command line (``main``): its usage and help, the defaults (``build/student``, every
  notebook with exercises, ``notebooks/<same name>``), the score table it prints, the exit codes;
* one real run of nbgrader on a two-exercise notebook: its student version, and the grades of a
  half-solved submission in notebook order. Marked slow (about 25 s on a loaded 2-core machine),
  so mutmut's selection leaves it out: the record lists the mutants only it kills.

Record: tests/mutation-run-7/exercises-course.md.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from microtorch.exercises import course

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

# nbgrader's gradebook (SQLAlchemy) warns about its own session handling on every autograde
pytestmark = pytest.mark.filterwarnings("ignore:Object of type")


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


# ----------------------------------------------------------------------------------------------
# which notebooks are assignments
# ----------------------------------------------------------------------------------------------
def test_the_assignments_are_the_notebooks_with_solution_cells_in_order():
    found = course.exercise_notebooks()
    assert all(p.parent == NOTEBOOKS and p.suffix == ".ipynb" for p in found)
    on_disk = sorted(p for p in NOTEBOOKS.iterdir() if re.fullmatch(r"\d\d_.*\.ipynb", p.name))
    assert len(on_disk) >= 13
    for p in on_disk:  # 00_start_here has no solution cell
        has = any(_meta(c).get("solution") for c in json.loads(p.read_text(encoding="utf-8"))["cells"])
        assert (p in found) == has, p.name
    assert found == sorted(found)
    # README, "For instructors": "Each notebook with exercises (01–NN) is one assignment"
    first, last = re.search(r"Each notebook with exercises \((\d\d)–(\d\d)\) is one assignment",
                            (ROOT / "README.md").read_text(encoding="utf-8")).groups()
    assert [p.name[:3] for p in found] == [f"{i:02d}_" for i in range(int(first), int(last) + 1)]


_LOCALE_PROBE = """
import json, sys
from microtorch.exercises import course
nbs = course.exercise_notebooks()
cells = json.loads(nbs[0].read_text(encoding="utf-8"))["cells"]
gid = [c["metadata"]["nbgrader"]["grade_id"] for c in cells if c.get("metadata", {}).get("nbgrader")][-1]
print(len(nbs), course._cell_order(nbs[0], gid), sys.flags.utf8_mode)
"""


def test_notebooks_are_read_as_utf8_under_an_ascii_locale():
    """On a machine whose locale is not UTF-8 (Windows, ``LANG=C``) the notebooks, which hold
    "—" and "✓", still read: exercise_notebooks and the grade order name their encoding."""
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    first = sorted(NOTEBOOKS.glob("01_*.ipynb"))[0]
    assert re.search(r"[^\x00-\x7f]", first.read_text(encoding="utf-8")), "the probe needs a non-ASCII notebook"
    run = subprocess.run([sys.executable, "-c", _LOCALE_PROBE], cwd=ROOT, env=env, capture_output=True,
                         text=True, encoding="utf-8", timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    n, order, utf8_mode = run.stdout.split()
    cells = json.loads(first.read_text(encoding="utf-8"))["cells"]
    last = max(i for i, c in enumerate(cells) if _meta(c).get("grade_id"))
    assert (int(n), int(order), utf8_mode) == (len(course.exercise_notebooks()), last, "0")


# ----------------------------------------------------------------------------------------------
# stubs
# ----------------------------------------------------------------------------------------------
CLASS_THEN_FUNCTION = """\
class Stack:
    def push(self, x):
        ### BEGIN SOLUTION (hint: append it)
        self.items.append(x)
        ### END SOLUTION

def top(stack):
    ### BEGIN SOLUTION (hint: the last one)
    return stack.items[-1]
    ### END SOLUTION"""


def _raised(stub: str) -> str:
    """The message of the NotImplementedError the stub raises when run."""
    with pytest.raises(NotImplementedError) as e:
        exec(stub, {})
    return str(e.value)


def test_a_method_stub_names_its_class_and_a_function_after_the_class_does_not():
    stubs = course.stubs_for(CLASS_THEN_FUNCTION)
    assert [_raised(s) for s in stubs] == ["write Stack.push yourself. Hint: append it",
                                           "write top yourself. Hint: the last one"]
    assert stubs[0].startswith("# YOUR CODE HERE\n")


def test_a_class_being_written_is_named_and_a_nested_function_is_not_a_method():
    src = ("class Counter:\n    ### BEGIN SOLUTION (hint: count from zero)\n    n = 0\n    ### END SOLUTION\n\n")
    assert [_raised(s) for s in course.stubs_for(src)] == ["write Counter yourself. Hint: count from zero"]
    src = ("def outer():\n    def inner():\n        ### BEGIN SOLUTION (hint: nothing to do)\n        pass\n"
           "        ### END SOLUTION\n    return inner")
    assert [_raised(s) for s in course.stubs_for(src)] == ["write inner yourself. Hint: nothing to do"]


def test_a_function_after_a_class_and_its_nested_function_are_not_methods_of_the_class():
    src = ("class Stack:\n    def push(self, x):\n        pass\n\n"
           "def outer():\n    def inner():\n        ### BEGIN SOLUTION (hint: nothing to do)\n        pass\n"
           "        ### END SOLUTION\n    return inner")
    assert [_raised(s) for s in course.stubs_for(src)] == ["write inner yourself. Hint: nothing to do"]


def test_a_region_outside_any_function_says_the_exercise_is_not_done():
    stub = course.stub_for("### BEGIN SOLUTION (hint: sum the list)\ntotal = sum(xs)\n### END SOLUTION")
    assert _raised(stub) == "this exercise is not done yet. Hint: sum the list"


def test_no_stub_for_a_cell_without_a_solution_region_or_without_a_hint():
    assert course.stubs_for("x = 1") == [] and course.stub_for("x = 1") is None
    src = "def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION"
    assert course.stubs_for(src) == [None] and course.stub_for(src) is None


# ----------------------------------------------------------------------------------------------
# the hinted ClearSolutions and configure
# ----------------------------------------------------------------------------------------------
THREE_METHODS = """\
import math

class Stack:
    def push(self, x):
        ### BEGIN SOLUTION (hint: append it)
        self.items.append(x)
        ### END SOLUTION

    def pop(self):
        ### BEGIN SOLUTION
        return self.items.pop()
        ### END SOLUTION

    def peek(self):
        ### BEGIN SOLUTION (hint: the last one)
        return self.items[-1]
        ### END SOLUTION
    size = property(len)"""

THREE_METHODS_STUDENT = """\
import math

class Stack:
    def push(self, x):
        # YOUR CODE HERE
        raise NotImplementedError('write Stack.push yourself. Hint: append it')

    def pop(self):
        # YOUR CODE HERE
        raise NotImplementedError()

    def peek(self):
        # YOUR CODE HERE
        raise NotImplementedError('write Stack.peek yourself. Hint: the last one')
    size = property(len)"""


@pytest.fixture(scope="module")
def hinted():
    pytest.importorskip("nbgrader")
    return course._hinted_clear_solutions()()


def _cell(kind: str, source: str, solution: bool = True):
    from nbformat.v4 import new_code_cell, new_markdown_cell

    meta = {"nbgrader": {"schema_version": 3, "solution": solution, "grade": False, "locked": False,
                         "grade_id": "ex"}} if solution else {}
    return (new_code_cell if kind == "code" else new_markdown_cell)(source, metadata=meta)


def test_each_region_gets_its_own_stub_at_its_indent_and_unhinted_ones_nbgrader_s(hinted):
    cell = _cell("code", THREE_METHODS)
    cell, _ = hinted.preprocess_cell(cell, {"language": "python"}, 0)
    assert cell.source == THREE_METHODS_STUDENT
    cell = _cell("code", THREE_METHODS)
    assert hinted._replace_solution_region(cell, "python") is True  # nbgrader: "a region was replaced"
    assert cell.source == THREE_METHODS_STUDENT


def test_a_cell_without_hints_is_left_to_nbgrader(hinted):
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION"
    cell = _cell("code", src)
    assert hinted._replace_solution_region(cell, "python") is True
    assert cell.source == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    plain = _cell("code", "y = 2", solution=False)
    assert hinted._replace_solution_region(plain, "python") is False and plain.source == "y = 2"
    hinted.preprocess_cell(plain, {"language": "python"}, 0)  # no region: no complaint
    assert plain.source == "y = 2"


def test_a_written_answer_gets_the_text_stub(hinted):
    src = "Why?\n\n### BEGIN SOLUTION (hint: think of the pool)\nBecause blocks are reused.\n### END SOLUTION\nEnd."
    cell = _cell("markdown", src)
    assert hinted._replace_solution_region(cell, "python") is True
    assert cell.source == "Why?\n\nYOUR ANSWER HERE\nEnd."


def test_nested_or_unclosed_regions_are_refused(hinted):
    nested = "def f():\n    ### BEGIN SOLUTION (hint: a)\n    ### BEGIN SOLUTION\n    ### END SOLUTION"
    with pytest.raises(RuntimeError, match="nested begin solution"):
        hinted._replace_solution_region(_cell("code", nested), "python")
    unclosed = "def f():\n    ### BEGIN SOLUTION (hint: a)\n    return 1"
    with pytest.raises(RuntimeError, match="no end solution"):
        hinted._replace_solution_region(_cell("code", unclosed), "python")
    closed_then_open = unclosed.replace("return 1", "### END SOLUTION\n    return 1")
    cell = _cell("code", closed_then_open)
    hinted._replace_solution_region(cell, "python")
    assert cell.source.endswith("Hint: a')\n    return 1")


def test_configure_puts_the_hinted_stubs_in_clear_solutions_place_with_a_2_minute_timeout():
    pytest.importorskip("nbgrader")
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions
    from traitlets.config import Config

    c = Config()
    course.configure(c)
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    ours = c.GenerateAssignment.preprocessors
    assert len(ours) == len(default) and ClearSolutions in default
    for mine, theirs in zip(ours, default):
        if theirs is ClearSolutions:
            assert mine is not ClearSolutions and issubclass(mine, ClearSolutions)
            cell = _cell("code", "def f():\n    ### BEGIN SOLUTION (hint: h)\n    ### END SOLUTION")
            mine()._replace_solution_region(cell, "python")
            assert "write f yourself. Hint: h" in cell.source
        else:
            assert mine is theirs
    assert c.Execute.timeout == 120 and c.Execute.interrupt_on_timeout is True  # README: 2-minute cell timeout


# ----------------------------------------------------------------------------------------------
# the course directory, failures, student over a stand-in API
# ----------------------------------------------------------------------------------------------
def test_the_course_directory_holds_one_assignment_per_notebook(tmp_path):
    pytest.importorskip("nbgrader")
    a, b = tmp_path / "in" / "01_a.ipynb", tmp_path / "in" / "02_b.ipynb"
    a.parent.mkdir()
    a.write_text('{"a": 1}', encoding="utf-8")
    b.write_text('{"b": 2}', encoding="utf-8")
    root = tmp_path / "course"
    api = course._course(root, [a, b])
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "source/01_a/01_a.ipynb", "source/02_b/02_b.ipynb"]
    assert (root / "source/02_b/02_b.ipynb").read_text(encoding="utf-8") == '{"b": 2}'
    assert api.coursedir.root == str(root)
    assert api.coursedir.db_url == f"sqlite:///{root}/gradebook.db"
    assert any(p.__name__ == "HintedClearSolutions" for p in api.config.GenerateAssignment.preprocessors)


def test_a_failed_nbgrader_step_prints_its_log_and_error_and_exits(capsys):
    assert course._ok({"success": True, "log": "quiet"}, "autograde x") is None
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit, match=r"^nbgrader autograde x\.ipynb failed \(its log is above\)$"):
        course._ok({"success": False, "log": "the log", "error": "the error"}, "autograde x.ipynb")
    assert capsys.readouterr().err == "the log\nthe error\n"
    with pytest.raises(SystemExit, match="generate_assignment 01_a failed"):
        course._ok({"success": False, "error": None}, "generate_assignment 01_a")
    assert capsys.readouterr().err == "\n\n"


class _FakeAPI:
    """Stands in for nbgrader's API: generate_assignment writes release/<aid>/<aid>.ipynb as nbgrader does."""

    def __init__(self, root, notebooks, fail=()):
        self.root, self.notebooks, self.fail, self.generated = root, notebooks, fail, []

    def generate_assignment(self, aid):
        self.generated.append(aid)
        if aid in self.fail:
            return {"success": False, "log": f"log of {aid}", "error": "boom"}
        (self.root / "release" / aid).mkdir(parents=True)
        (self.root / "release" / aid / f"{aid}.ipynb").write_text(f"student {aid}", encoding="utf-8")
        return {"success": True}


def _fake_course(monkeypatch, made, fail=()):
    def fake(root, notebooks):
        assert isinstance(root, Path) and root.is_dir() and not any(root.iterdir())
        made.append(api := _FakeAPI(root, list(notebooks), fail))
        return api
    monkeypatch.setattr(course, "_course", fake)


def test_student_writes_each_student_version_and_says_where(tmp_path, monkeypatch, capsys):
    made = []
    _fake_course(monkeypatch, made)
    nbs = [tmp_path / "01_a.ipynb", tmp_path / "02_b.ipynb"]
    out = tmp_path / "build" / "student"
    for _ in range(2):  # a second `make student` into the same directory works too
        written = course.student(out, nbs)
        assert written == [out / "01_a.ipynb", out / "02_b.ipynb"]
        assert [p.read_text(encoding="utf-8") for p in written] == ["student 01_a", "student 02_b"]
        assert made[-1].notebooks == nbs and made[-1].generated == ["01_a", "02_b"]
        assert capsys.readouterr().out == f"student version: {out / '01_a.ipynb'}\nstudent version: {out / '02_b.ipynb'}\n"
    assert made[0].root != made[1].root and not made[0].root.exists()  # a throw-away course each time


def test_student_stops_at_a_failed_notebook_naming_it(tmp_path, monkeypatch, capsys):
    made = []
    _fake_course(monkeypatch, made, fail=("02_b",))
    with pytest.raises(SystemExit, match=r"^nbgrader generate_assignment 02_b failed"):
        course.student(tmp_path / "out", [tmp_path / "01_a.ipynb", tmp_path / "02_b.ipynb", tmp_path / "03_c.ipynb"])
    assert made[0].generated == ["01_a", "02_b"]
    assert "log of 02_b\nboom\n" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# grade order, instructor notebook
# ----------------------------------------------------------------------------------------------
def _notebook(path: Path, grade_ids: list) -> Path:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# intro"}]
    cells += [{"cell_type": "code", "metadata": ({"nbgrader": {"grade_id": g}} if g else {}), "source": ""}
              for g in grade_ids]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return path


def test_grades_are_ordered_by_their_cell_in_the_notebook_unknown_ones_last(tmp_path):
    nb = _notebook(tmp_path / "n.ipynb", ["zeta", "zeta_test", None, "alpha", "alpha_test"])
    assert [course._cell_order(nb, g) for g in ("zeta_test", "alpha", "alpha_test", "zeta", "gone")] == [2, 4, 5, 1, 6]


def test_a_submission_is_graded_against_the_notebook_of_its_name(tmp_path):
    sub = tmp_path / "05_memory_pool.ipynb"
    assert course._instructor_notebook(sub) == NOTEBOOKS / "05_memory_pool.ipynb"
    with pytest.raises(SystemExit) as e:
        course._instructor_notebook(tmp_path / "my_work.ipynb")
    assert "notebooks/my_work.ipynb" in str(e.value) and "--source" in str(e.value)


# ----------------------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def calls(monkeypatch):
    """main with student and grade recorded instead of run."""
    class Calls(list):
        result = {"exercises": [("my_sum_test", 2.0, 2.0), ("my_mean_and_var_test", 1.5, 3.0)],
                  "score": 3.5, "max_score": 5.0}
    got = Calls()

    def student(out, notebooks):
        got.append(("student", out, notebooks))
        return []

    def grade(submitted, source):
        got.append(("grade", submitted, source))
        return got.result
    monkeypatch.setattr(course, "student", student)
    monkeypatch.setattr(course, "grade", grade)
    monkeypatch.setenv("COLUMNS", "200")
    return got


def test_usage_and_help_name_the_module_and_what_each_command_does(calls, capsys):
    with pytest.raises(SystemExit) as e:
        course.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m microtorch.exercises.course [-h] {student,grade}")
    description = out.split("\n\n")[1]  # the module docstring's summary line, as documented above it
    assert description == "Coursework with nbgrader: student versions of the notebooks, and autograding a submission."
    helps = dict(re.findall(r"^    (student|grade) +(\S.*)$", out, re.M))
    assert re.fullmatch(r"[a-z][a-z ]* student versions [a-z ]*notebooks", helps["student"])
    assert re.fullmatch(r"autograde [a-z ]*notebook", helps["grade"])
    with pytest.raises(SystemExit):
        course.main(["grade", "--help"])
    out = capsys.readouterr().out
    assert re.search(r"^  --source SOURCE +[a-z ]*instructor notebook \(default: notebooks/<same name>\)$", out, re.M)
    assert calls == []


def test_a_command_is_required(calls, capsys):
    with pytest.raises(SystemExit) as e:
        course.main([])
    assert e.value.code == 2 and "required" in capsys.readouterr().err and calls == []


def test_student_defaults_to_every_notebook_with_exercises_into_build_student(calls):
    assert course.main(["student"]) == 0
    assert calls == [("student", ROOT / "build" / "student", [p.resolve() for p in course.exercise_notebooks()])]
    assert calls[0][2] and isinstance(calls[0][1], Path)


def test_student_takes_the_notebooks_and_the_out_directory_given(calls, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert course.main(["student", "02_x.ipynb", "sub/01_y.ipynb", "--out", "here"]) == 0
    assert calls == [("student", Path("here"), [tmp_path / "02_x.ipynb", tmp_path / "sub" / "01_y.ipynb"])]
    assert all(isinstance(p, Path) for p in calls[0][2])


def test_grade_prints_each_exercise_and_the_total(calls, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert course.main(["grade", "sub/09_mine.ipynb", "--source", "src/09_theirs.ipynb"]) == 0
    assert calls == [("grade", tmp_path / "sub" / "09_mine.ipynb", tmp_path / "src" / "09_theirs.ipynb")]
    assert capsys.readouterr().out == ("09_mine.ipynb\n"
                                       "  my_sum           2 / 2\n"
                                       "  my_mean_and_var  1.5 / 3\n"
                                       "  total            3.5 / 5\n")


def test_grade_pads_short_names_to_the_total_column(calls, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    calls.result = {"exercises": [("a_test", 0.0, 1.0), ("bc", 1.0, 1.0)], "score": 1.0, "max_score": 2.0}
    assert course.main(["grade", "s.ipynb", "--source", "t.ipynb"]) == 0
    assert capsys.readouterr().out == "s.ipynb\n  a      0 / 1\n  bc     1 / 1\n  total  1 / 2\n"


def test_grade_finds_the_instructor_notebook_of_the_same_name(calls, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert course.main(["grade", "inbox/03_refcounts_and_lifetimes.ipynb"]) == 0
    assert calls == [("grade", tmp_path / "inbox" / "03_refcounts_and_lifetimes.ipynb",
                      (NOTEBOOKS / "03_refcounts_and_lifetimes.ipynb").resolve())]
    calls.clear()
    with pytest.raises(SystemExit, match="notebooks/mine.ipynb"):
        course.main(["grade", "mine.ipynb"])
    assert calls == []


# ----------------------------------------------------------------------------------------------
# one real nbgrader run (slow)
# ----------------------------------------------------------------------------------------------
def _tiny_course_notebook(path: Path) -> Path:
    """Two exercises whose grade ids are not in alphabetical order, 2 and 3 points, a hidden test."""
    def meta(grade, gid, points=0):
        return {"nbgrader": {"schema_version": 3, "grade": grade, "solution": not grade, "locked": grade,
                             "grade_id": gid, "points": points}}
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# Tiny — two exercises"},
        {"cell_type": "code", "metadata": meta(False, "zeta"), "outputs": [], "execution_count": None,
         "source": "def zeta(x):\n    ### BEGIN SOLUTION (hint: add one)\n    return x + 1\n    ### END SOLUTION"},
        {"cell_type": "code", "metadata": meta(True, "zeta_test", 2), "outputs": [], "execution_count": None,
         "source": "assert zeta(1) == 2\n### BEGIN HIDDEN TESTS\nassert zeta(5) == 6\n### END HIDDEN TESTS"},
        {"cell_type": "code", "metadata": meta(False, "alpha"), "outputs": [], "execution_count": None,
         "source": "def alpha(x):\n    ### BEGIN SOLUTION (hint: double it)\n    return 2 * x\n    ### END SOLUTION"},
        {"cell_type": "code", "metadata": meta(True, "alpha_test", 3), "outputs": [], "execution_count": None,
         "source": "assert alpha(2) == 4"},
    ]
    nb = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return path


def _nbgrader_env(monkeypatch):
    pytest.importorskip("nbgrader")
    # nbgrader runs alembic from PATH
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@pytest.mark.slow
def test_nbgrader_writes_the_student_version_of_a_tiny_notebook(tmp_path, monkeypatch, capsys):
    _nbgrader_env(monkeypatch)
    (tmp_path / "src").mkdir()
    src = _tiny_course_notebook(tmp_path / "src" / "07_tiny.ipynb")
    out = tmp_path / "student"
    assert course.student(out, [src]) == [out / "07_tiny.ipynb"]
    text = ["".join(c["source"]) for c in json.loads((out / "07_tiny.ipynb").read_text(encoding="utf-8"))["cells"]]
    assert text[1] == "def zeta(x):\n    # YOUR CODE HERE\n    raise NotImplementedError('write zeta yourself. Hint: add one')"
    assert text[2] == "assert zeta(1) == 2"  # the hidden test is gone
    assert "write alpha yourself. Hint: double it" in text[3]
    assert capsys.readouterr().out.endswith(f"student version: {out / '07_tiny.ipynb'}\n")


@pytest.mark.slow
def test_nbgrader_grades_a_half_solved_submission_in_notebook_order(tmp_path, monkeypatch):
    _nbgrader_env(monkeypatch)
    (tmp_path / "src").mkdir()
    src = _tiny_course_notebook(tmp_path / "src" / "07_tiny.ipynb")
    nb = json.loads(src.read_text(encoding="utf-8"))
    # zeta solved (the hidden case too), alpha left as its stub
    nb["cells"][3]["source"] = "def alpha(x):\n    raise NotImplementedError('write alpha yourself')"
    sub = tmp_path / "inbox" / "07_tiny.ipynb"
    sub.parent.mkdir()
    sub.write_text(json.dumps(nb), encoding="utf-8")
    result = course.grade(sub, src)
    assert result == {"exercises": [("zeta_test", 2.0, 2.0), ("alpha_test", 0.0, 3.0)], "score": 2.0, "max_score": 5.0}
