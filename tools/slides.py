"""Give every notebook cell slide metadata (`make slides`), so a lecture needs no scrolling.

`make lecture` (Voilà's reveal.js slides, live players) and JupyterLab's RISE extension
(`jupyterlab-rise`, installed by `make lab`) both read `cell.metadata.slideshow.slide_type`:

    slide      a new slide (left/right)        subslide  a new slide below (up/down)
    fragment   appears on the current slide    -         belongs to the current slide
    skip       not shown in the slideshow

The rules, in the order they are tried, are what a lecturer expects:

    markdown  `# ` or `## ` heading                  -> slide      (a notebook's title, a section)
              `### ` heading or "**What to notice"   -> subslide   (what to notice, exercises, parts)
              anything else                          -> -
    code      an nbgrader solution cell              -> skip       (the answer stays off the screen)
              only imports / environment set-up      -> skip       (plumbing, not the point)
              draws a picture or a player            -> fragment   (the picture appears after its code)
              anything else                          -> -          (incl. mt.show_source: the real
                                                                   code is the point of a section)

A cell that already has a slide_type keeps it: an author's choice wins over the rules, and a
second run changes nothing. `--reset` throws the old types away and applies the rules to every
cell. Only the slideshow key is touched; files are written as `make strip` writes them (json,
indent=1, sorted keys, UTF-8, trailing newline) and only when they change. Needs only Python.

    python3 tools/slides.py [--reset] [notebook.ipynb ...]     (default: notebooks/**/*.ipynb)
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys

SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "-")

# A call that draws: the viz package, matplotlib, a renderer or a player.
DRAWS = re.compile(r"\bmt\.viz\.|\bplt\.|\brender\w*\(|\bplayer\(|_player\(")
# A line of set-up: an import, an environment variable, a comment or nothing.
SETUP_LINE = re.compile(r"^\s*(import\s|from\s+\S+\s+import\s|os\.environ|#|$)")


def slide_type(cell: dict) -> str:
    """The slide type the rules give one cell (see the module docstring)."""
    source = "".join(cell.get("source", []))
    if cell.get("cell_type") == "markdown":
        first = source.lstrip().split("\n", 1)[0]
        if first.startswith(("# ", "## ")):
            return "slide"
        if first.startswith("### ") or first.startswith("**What to notice"):
            return "subslide"
        return "-"
    if cell.get("cell_type") != "code":
        return "-"
    if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
        return "skip"
    if source.strip() and all(SETUP_LINE.match(line) for line in source.splitlines()):
        return "skip"
    if DRAWS.search(source):
        return "fragment"
    return "-"


def add_slides(nb: dict, reset: bool = False) -> dict:
    """Set `metadata.slideshow.slide_type` on every cell of a notebook (in place); return it."""
    for cell in nb.get("cells", []):
        show = cell.setdefault("metadata", {}).setdefault("slideshow", {})
        if reset or show.get("slide_type") not in SLIDE_TYPES:
            show["slide_type"] = slide_type(cell)
    return nb


def dumps(nb: dict) -> str:
    """The notebook as `make strip` writes it."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("notebooks", nargs="*", help="default: notebooks/**/*.ipynb")
    parser.add_argument("--reset", action="store_true", help="re-derive every cell's slide type")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(glob.glob("notebooks/**/*.ipynb", recursive=True))
    for path in paths:
        if ".ipynb_checkpoints" in path:
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        nb = add_slides(json.loads(text), reset=args.reset)
        if json.loads(dumps(nb)) != json.loads(text):
            with open(path, "w", encoding="utf-8") as f:
                f.write(dumps(nb))
            print("slides", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
