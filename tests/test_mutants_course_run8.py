"""Mutation run 8, ``exercises/course.py``: ``grade`` over a stand-in nbgrader (fast).

The real nbgrader run (``test_nbgrader_grades_a_half_solved_submission_in_notebook_order`` in
tests/test_mutants_course_run7.py, marked slow) kills most of ``grade``'s mutants; what it cannot
reach is tested here with nbgrader's API and gradebook stood in for:

* the steps ``grade`` asks nbgrader for: the assignment generated from the instructor notebook, the
  submission copied into ``submitted/student/<assignment>/`` under the instructor notebook's name
  (whatever the submission is called), autograded for student ``student``, its grades read from the
  course's own gradebook;
* the grades come back in the notebook's cell order whatever order the gradebook gives them in (the
  real gradebook of nbgrader 0.9.6 happens to give the notebook's order), with their scores as floats;
* a failed nbgrader step stops ``grade`` with a message naming it (the assignment, or the
  submission), after its log; nothing after it runs.

Record: tests/mutation-run-8/exercises-course.md.
"""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from microtorch.exercises import course

from test_mutants_course_run7 import _tiny_course_notebook

# the tiny notebook's graded cells, in the gradebook's order: alphabetical, not the notebook's
GRADEBOOK = [("alpha_test", 0, 3), ("zeta_test", 2, 2)]


class _Gradebook:
    """Stands in for nbgrader.api.Gradebook: one submitted notebook, its grades in GRADEBOOK's order."""
    opened = []

    def __init__(self, db_url):
        self.db_url, self.asked = db_url, []
        _Gradebook.opened.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True
        return False

    def find_submission_notebook(self, notebook, assignment, student):
        self.asked.append((notebook, assignment, student))
        grades = [SimpleNamespace(cell=SimpleNamespace(name=n), score=s, max_score=m) for n, s, m in GRADEBOOK]
        return SimpleNamespace(grades=grades, score=2, max_score=5)


class _GradingAPI:
    """Stands in for nbgrader's API: records each step, and what was submitted when autograde ran."""

    def __init__(self, root, notebooks, fail):
        self.root, self.notebooks, self.fail, self.steps = root, notebooks, fail, []

    def generate_assignment(self, aid):
        self.steps.append(("generate_assignment", aid))
        if "generate_assignment" in self.fail:
            return {"success": False, "log": "the generate log", "error": "no source"}
        return {"success": True}

    def autograde(self, aid, student):
        folder = self.root / "submitted" / "student" / "07_tiny"
        self.steps.append(("autograde", aid, student,
                           {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()} if folder.is_dir() else None))
        if "autograde" in self.fail:
            return {"success": False, "log": "the autograde log", "error": "a cell timed out"}
        return {"success": True}


@pytest.fixture
def stand_ins(monkeypatch, tmp_path):
    """nbgrader's API and gradebook stood in for; returns (made APIs, the instructor notebook, a submission)."""
    api_module = pytest.importorskip("nbgrader.api")
    made, fail = [], set()

    def fake_course(root, notebooks):
        assert isinstance(root, Path) and root.is_dir() and not any(root.iterdir())
        made.append(api := _GradingAPI(root, list(notebooks), fail))
        return api
    monkeypatch.setattr(course, "_course", fake_course)
    monkeypatch.setattr(api_module, "Gradebook", _Gradebook)
    _Gradebook.opened = []
    (tmp_path / "src").mkdir()
    source = _tiny_course_notebook(tmp_path / "src" / "07_tiny.ipynb")
    sub = tmp_path / "inbox" / "my answers.ipynb"
    sub.parent.mkdir()
    sub.write_text("the learner's notebook", encoding="utf-8")
    return SimpleNamespace(made=made, fail=fail, source=source, sub=sub)


def test_grade_asks_nbgrader_for_each_step_and_reads_the_grades_in_notebook_order(stand_ins):
    result = course.grade(stand_ins.sub, stand_ins.source)
    assert result == {"exercises": [("zeta_test", 2.0, 2.0), ("alpha_test", 0.0, 3.0)], "score": 2.0, "max_score": 5.0}
    assert all(type(x) is float for _, s, m in result["exercises"] for x in (s, m))
    assert type(result["score"]) is float and type(result["max_score"]) is float
    api, = stand_ins.made
    assert api.notebooks == [stand_ins.source]
    assert api.steps == [("generate_assignment", "07_tiny"),
                         ("autograde", "07_tiny", "student", {"07_tiny.ipynb": "the learner's notebook"})]
    gb, = _Gradebook.opened
    assert gb.db_url == f"sqlite:///{api.root / 'gradebook.db'}" and gb.closed
    assert gb.asked == [("07_tiny", "07_tiny", "student")]
    assert not api.root.exists()  # the course directory was a throw-away one


def test_grade_stops_at_a_failed_generate_assignment_naming_the_assignment(stand_ins, capsys):
    stand_ins.fail.add("generate_assignment")
    with pytest.raises(SystemExit, match=r"^nbgrader generate_assignment 07_tiny failed \(its log is above\)$"):
        course.grade(stand_ins.sub, stand_ins.source)
    assert capsys.readouterr().err == "the generate log\nno source\n"
    assert stand_ins.made[0].steps == [("generate_assignment", "07_tiny")] and _Gradebook.opened == []


def test_grade_stops_at_a_failed_autograde_naming_the_submission(stand_ins, capsys):
    stand_ins.fail.add("autograde")
    with pytest.raises(SystemExit, match=f"^nbgrader autograde {re.escape(str(stand_ins.sub))} failed "
                                         r"\(its log is above\)$"):
        course.grade(stand_ins.sub, stand_ins.source)
    assert capsys.readouterr().err == "the autograde log\na cell timed out\n"
    assert [s[0] for s in stand_ins.made[0].steps] == ["generate_assignment", "autograde"] and _Gradebook.opened == []
