"""Lecture mode: every notebook carries RISE slide metadata, by tools/slides.py's rules.

`make slides` (tools/slides.py) writes the metadata; these tests read the committed notebooks,
so a notebook added or edited without running it fails here, and so does a script that is
not idempotent or that touches anything but the slide types.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("**/*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)

_spec = importlib.util.spec_from_file_location("slides", ROOT / "tools" / "slides.py")
slides = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slides)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_cell_has_a_slide_type(path):
    nb = _load(path)
    bad = [i for i, cell in enumerate(nb["cells"])
           if cell.get("metadata", {}).get("slideshow", {}).get("slide_type") not in slides.SLIDE_TYPES]
    assert not bad, f"{path.name}: cells {bad} have no slide type; run `make slides`"
    assert nb["cells"][0]["metadata"]["slideshow"]["slide_type"] == "slide", (
        f"{path.name}: the title cell should open the slideshow")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_rerunning_the_script_changes_nothing(path):
    nb = _load(path)
    assert slides.add_slides(copy.deepcopy(nb)) == nb


def test_the_script_only_adds_slide_types_and_keeps_nbgrader(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# 99 · Title\n", "text"]},
        {"cell_type": "code", "metadata": {}, "source": ["import numpy as np\n", "\n",
                                                         "import microtorch as mt"],
         "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "metadata": {}, "source": ["## 1. A section"]},
        {"cell_type": "code", "metadata": {}, "source": ["x = mt.randn(3)"],
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {}, "source": ["mt.viz.player(tr)"],
         "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "metadata": {}, "source": ["### What to notice\n", "* ä"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["### Exercise 1: ..."]},
        {"cell_type": "code", "source": ["def f():\n", "    ### BEGIN SOLUTION\n"],
         "metadata": {"nbgrader": {"solution": True, "grade": False, "grade_id": "f",
                                   "locked": False, "schema_version": 3}},
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "source": ["mt.exercises.check_f(f)"],
         "metadata": {"nbgrader": {"solution": False, "grade": True, "grade_id": "f_test",
                                   "points": 1, "locked": True, "schema_version": 3}},
         "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": "fragment"}},
         "source": ["## chosen by the author"]},
    ]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99_test.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    before = copy.deepcopy(nb)

    slides.main([str(path)])
    text = path.read_text(encoding="utf-8")
    after = json.loads(text)
    types = [c["metadata"]["slideshow"]["slide_type"] for c in after["cells"]]
    assert types == ["slide", "skip", "slide", "-", "fragment", "subslide", "subslide",
                     "skip", "-", "fragment"]
    assert text == json.dumps(after, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert after["cells"][-1] == before["cells"][-1]  # the author's choice is kept
    for cell, old in zip(after["cells"][:-1], before["cells"][:-1]):
        cell["metadata"]["slideshow"].pop("slide_type")
        if not cell["metadata"]["slideshow"]:
            del cell["metadata"]["slideshow"]
        assert cell == old  # nbgrader metadata, sources, outputs: untouched

    mtime = path.stat().st_mtime_ns
    slides.main([str(path)])
    assert path.read_text(encoding="utf-8") == text and path.stat().st_mtime_ns == mtime

    slides.main(["--reset", str(path)])
    assert json.loads(path.read_text(encoding="utf-8"))["cells"][-1]["metadata"][
        "slideshow"]["slide_type"] == "slide"


# `make lecture`: Voilà's reveal template, offline (tests/test_browser.py drives it in Chromium)
LECTURE = ROOT / "demo" / "share" / "jupyter" / "voila" / "templates" / "microtorch-slides"


def test_lecture_template_loads_nothing_from_outside():
    """The template's reveal.js prefix is its own static folder, which holds reveal.css and
    the theme it names, and no file of it names a URL of another host."""
    conf = json.loads((LECTURE / "conf.json").read_text(encoding="utf-8"))
    assert conf["base_template"] == "reveal"
    reveal = conf["traitlet_configuration"]["resources"]["reveal"]
    prefix = reveal["url_prefix"]
    assert prefix.startswith("voila/templates/microtorch-slides/static/"), prefix  # page-relative
    local = LECTURE / "static" / prefix.split("/static/", 1)[1]
    assert (local / "dist" / "reveal.css").is_file()
    assert (local / "dist" / "theme" / f"{reveal['theme']}.css").is_file()
    assert (local / "LICENSE").is_file(), "reveal.js's licence travels with its style sheet"
    remote = re.compile(r"""(url\(\s*["']?|@import\s+["']|(href|src)\s*=\s*["']|"url_prefix":\s*")"""
                        r"\s*(https?:)?//")
    files = [p for p in LECTURE.rglob("*") if p.suffix in (".j2", ".json", ".css")]
    assert len(files) >= 4, files
    for path in files:
        found = remote.search(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(ROOT)} loads from another host: {found.group(0)}"
