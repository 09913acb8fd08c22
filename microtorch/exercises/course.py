"""Coursework with nbgrader: student versions of the notebooks, and autograding a submission.

Each notebook ``notebooks/NN_topic.ipynb`` is one nbgrader assignment ``NN_topic`` holding that
one notebook. Both commands build a throw-away nbgrader course directory and run nbgrader's
own converters in it (``generate_assignment``, ``autograde``), so what they produce is exactly
what an nbgrader course on JupyterHub produces::

    python -m microtorch.exercises.course student [--out build/student] [NOTEBOOK ...]
    python -m microtorch.exercises.course grade SUBMITTED.ipynb [--source notebooks/NN_topic.ipynb]

In a real course, add ``configure(c)`` to the course's ``nbgrader_config.py`` (see the
README, "For instructors") so its student versions get the same hints.

nbgrader's gradebook is created with ``alembic``, which nbgrader runs from ``PATH``: run these
with the virtual environment's ``bin`` first on ``PATH`` (the Makefile does).

The stub: a solution region opens with ``### BEGIN SOLUTION (hint: ...)``; the student
version replaces it with ``raise NotImplementedError("write <name> yourself. Hint: ...")``,
so running an unfinished exercise prints its one-line hint.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HINT = re.compile(r"\(hint:\s*(.*)\)\s*$")


def exercise_notebooks() -> list[Path]:
    """The notebooks of ``notebooks/`` that have exercises (nbgrader solution cells), in order."""
    import json

    return [p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
            if any(c.get("metadata", {}).get("nbgrader", {}).get("solution")
                   for c in json.loads(p.read_text(encoding="utf-8"))["cells"])]


def stub_for(source: str) -> str | None:
    """The stub replacing the first solution region of one cell's ``source`` (see
    :func:`stubs_for`), or None if it carries no hint."""
    stubs = stubs_for(source)
    return stubs[0] if stubs else None


def stubs_for(source: str) -> list[str | None]:
    """One stub per solution region of a cell's ``source``: a NotImplementedError naming the
    function (or method) being written and carrying the hint of its ``BEGIN SOLUTION`` line;
    None for a region without a hint."""
    name, cls, stubs = None, None, []
    for line in source.split("\n"):
        m = re.match(r"(\s*)(def|class) (\w+)", line)
        if m:
            if not m.group(1):  # a top-level def or class: no class encloses what follows
                cls = None
            if m.group(2) == "class":
                cls, name = m.group(3), m.group(3)
            else:
                name = f"{cls}.{m.group(3)}" if cls and m.group(1) else m.group(3)
        if "BEGIN SOLUTION" in line:
            h = HINT.search(line)
            what = f"write {name} yourself" if name else "this exercise is not done yet"
            stubs.append(f"# YOUR CODE HERE\nraise NotImplementedError({what + '. Hint: ' + h.group(1)!r})"
                         if h else None)
    return stubs


def _hinted_clear_solutions():
    from nbgrader.preprocessors import ClearSolutions

    class HintedClearSolutions(ClearSolutions):
        """nbgrader's ClearSolutions, with a stub per solution region taken from its
        ``### BEGIN SOLUTION (hint: ...)`` line (the configured stub where there is none)."""

        def _replace_solution_region(self, cell, language):
            stubs = stubs_for(cell.source)
            if not any(stubs):
                return super()._replace_solution_region(cell, language)
            default, lines, out, inside, k = self.code_stub[language], cell.source.split("\n"), [], False, 0
            for line in lines:
                if self.begin_solution_delimeter in line:
                    if inside:
                        raise RuntimeError("encountered nested begin solution statements")
                    inside = True
                    indent = re.match(r"\s*", line).group(0)
                    stub = (stubs[k] or default) if cell.cell_type == "code" else self.text_stub
                    out += [indent + s for s in stub.split("\n")]
                    k += 1
                elif self.end_solution_delimeter in line:
                    inside = False
                elif not inside:
                    out.append(line)
            if inside:
                raise RuntimeError("no end solution statement found")
            cell.source = "\n".join(out)
            return True

    return HintedClearSolutions


def configure(c) -> None:
    """Set up an nbgrader config ``c`` (``get_config()`` in ``nbgrader_config.py``) for the
    microtorch notebooks: the hinted solution stubs; the kernel may take 2 minutes per cell."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions

    hinted = _hinted_clear_solutions()
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    c.GenerateAssignment.preprocessors = [hinted if p is ClearSolutions else p for p in default]
    c.Execute.timeout = 120
    c.Execute.interrupt_on_timeout = True


def _course(root: Path, notebooks: list[Path]):
    """An nbgrader API over a course in ``root`` with one assignment per notebook."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    for nb in notebooks:
        dest = root / "source" / nb.stem
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(nb, dest / nb.name)
    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    configure(c)
    return NbGraderAPI(config=c)


def _ok(result: dict, what: str) -> None:
    if not result.get("success"):
        sys.stderr.write(result.get("log", "") + "\n" + (result.get("error") or "") + "\n")
        raise SystemExit(f"nbgrader {what} failed (its log is above)")


def student(out: Path, notebooks: list[Path]) -> list[Path]:
    """Write the student version of each notebook into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="microtorch-course-") as tmp:
        api = _course(Path(tmp), notebooks)
        for nb in notebooks:
            _ok(api.generate_assignment(nb.stem), f"generate_assignment {nb.stem}")
            shutil.copy(Path(tmp) / "release" / nb.stem / nb.name, out / nb.name)
            written.append(out / nb.name)
            print(f"student version: {out / nb.name}")
    return written


def grade(submitted: Path, source: Path) -> dict:
    """Autograde ``submitted`` against the instructor notebook ``source``; returns
    ``{"exercises": [(grade_id, score, max_score), ...], "score": s, "max_score": m}``."""
    with tempfile.TemporaryDirectory(prefix="microtorch-grade-") as tmp:
        root = Path(tmp)
        api = _course(root, [source])
        aid = source.stem
        _ok(api.generate_assignment(aid), f"generate_assignment {aid}")
        dest = root / "submitted" / "student" / aid
        dest.mkdir(parents=True)
        shutil.copy(submitted, dest / source.name)
        _ok(api.autograde(aid, "student"), f"autograde {submitted}")
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            nb = gb.find_submission_notebook(source.stem, aid, "student")
            rows = sorted(((g.cell.name, float(g.score), float(g.max_score)) for g in nb.grades),
                          key=lambda r: _cell_order(source, r[0]))
            return {"exercises": rows, "score": float(nb.score), "max_score": float(nb.max_score)}


def _cell_order(source: Path, grade_id: str) -> int:
    import json

    cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells]
    return ids.index(grade_id) if grade_id in ids else len(ids)


def _instructor_notebook(submitted: Path) -> Path:
    name = submitted.name
    found = ROOT / "notebooks" / name
    if not found.exists():
        raise SystemExit(f"no instructor notebook notebooks/{name} for {submitted}: name the "
                         "submission like its notebook, or pass --source notebooks/NN_topic.ipynb")
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m microtorch.exercises.course", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("student", help="write student versions of the notebooks")
    s.add_argument("notebooks", nargs="*", type=Path)
    s.add_argument("--out", type=Path, default=ROOT / "build" / "student")
    g = sub.add_parser("grade", help="autograde one submitted notebook")
    g.add_argument("submitted", type=Path)
    g.add_argument("--source", type=Path, help="the instructor notebook (default: notebooks/<same name>)")
    args = p.parse_args(argv)
    if args.cmd == "student":
        nbs = args.notebooks or exercise_notebooks()
        student(args.out, [n.resolve() for n in nbs])
        return 0
    submitted = args.submitted.resolve()
    source = (args.source or _instructor_notebook(submitted)).resolve()
    result = grade(submitted, source)
    names = [gid.removesuffix("_test") for gid, _, _ in result["exercises"]]
    width = max(map(len, names + ["total"]))
    print(f"{submitted.name}")
    for name, (_, score, top) in zip(names, result["exercises"]):
        print(f"  {name:<{width}}  {score:g} / {top:g}")
    print(f"  {'total':<{width}}  {result['score']:g} / {result['max_score']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
