# microtorch — everything runs from a project-local virtual environment in .venv.
#
#   make lab     install microtorch (editable) + JupyterLab (with RISE slideshows) into .venv, open notebooks/
#   make test    install microtorch (editable) + test tools into .venv, run pytest
#   make bench   install micrograd (and torch, if it can be had), run benchmarks/run.py
#   make strip   remove outputs from notebooks/*.ipynb
#   make slides  give every notebook cell RISE slide metadata (tools/slides.py; lecture mode)
#   make mutate  mutation testing of the engine's core with mutmut (slow; not in CI; tests/README.md)
#   make demo    serve the code-free memory explorer (demo/explorer.ipynb) with Voilà
#   make lecture NB=notebooks/13_capstone.ipynb   present a notebook as reveal.js slides with live players (Voilà)
#   make student write student versions of the notebooks with exercises (nbgrader) into build/student/
#   make grade NB=path/to/submitted.ipynb   autograde one submitted notebook (nbgrader)
#   make clean   remove .venv and build/test leftovers
#
# Knobs:  PYTHON=python3.12   LAB_ARGS="--no-browser --port=8899"   PYTEST_ARGS="-k tensor -x"
#         TEST_EXTRAS=test,oracle (CI uses this to add PyTorch)     BENCH_ARGS=...
#         VOILA_ARGS="--no-browser --port=8866"
#         MUTATE_ARGS='"microtorch.node.*"' (one module at a time)   MUTATE_CHILDREN=1

PYTHON      ?= python3
VENV        := .venv
VPY         := $(VENV)/bin/python
LAB_ARGS    ?=
VOILA_ARGS  ?=
PYTEST_ARGS ?=
BENCH_ARGS  ?=
MUTATE_ARGS ?=
MUTATE_CHILDREN ?= 1
TEST_EXTRAS ?= test

# JupyterLab refuses to start as root unless told; containers often run as root.
ifeq ($(shell id -u 2>/dev/null),0)
LAB_ROOT_ARG := --allow-root
endif

.PHONY: lab test bench mutate strip slides demo lecture clean venv student grade

# --- the virtual environment -------------------------------------------------------------
# Created once; pip is upgraded once, right after creation.
$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "microtorch needs Python 3.11+; $(PYTHON) is " + sys.version.split()[0] + ". Try: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --upgrade pip
	touch $@

venv: $(VENV)/.created

# One stamp per set of extras: .venv/.installed-lab, .venv/.installed-test,oracle, ...
# pip runs again only when pyproject.toml is newer than the stamp, or once when
# microtorch/__init__.py first appears (the editable install maps only packages that exist).
PKG_MARK     := $(if $(wildcard microtorch/__init__.py),$(VENV)/.has-package)
INSTALL_DEPS := pyproject.toml $(VENV)/.created $(PKG_MARK)

$(VENV)/.has-package: | $(VENV)/.created
	touch $@

$(VENV)/.installed-%: $(INSTALL_DEPS)
	$(VPY) -m pip install -e '.[$*]'
	touch $@

# The benchmarks compare against PyTorch when it can be installed, and run without it otherwise.
$(VENV)/.installed-bench: $(INSTALL_DEPS)
	$(VPY) -m pip install -e '.[bench,oracle]' || { \
	  echo "make bench: could not install the 'oracle' extra (torch); benchmarking without PyTorch."; \
	  $(VPY) -m pip install -e '.[bench]'; }
	touch $@

# --- targets -------------------------------------------------------------------------------
# JUPYTER_PREFER_ENV_PATH=1: use .venv's kernel even if a user-wide "python3" kernel exists.
lab: $(VENV)/.installed-lab
	JUPYTER_PREFER_ENV_PATH=1 $(VENV)/bin/jupyter lab notebooks/ $(LAB_ROOT_ARG) $(LAB_ARGS)

test: $(VENV)/.installed-$(TEST_EXTRAS)
	$(VPY) -m pytest $(PYTEST_ARGS)

# The memory explorer: a notebook Voilà serves as a page with no code (the `demo` extra).
demo: $(VENV)/.installed-demo
	cd demo && JUPYTER_PREFER_ENV_PATH=1 ../$(VENV)/bin/voila explorer.ipynb $(VOILA_ARGS)

# Lecture slides with live players: Voilà runs the notebook and shows it as reveal.js slides
# (its slide metadata: `make slides`), code hidden, through demo/'s offline reveal template.
# (jupyterlab-rise's slideshow shows the players as text: README, "Teaching with microtorch".)
LECTURE_NB = $(or $(NB),notebooks/00_start_here.ipynb)
lecture: $(VENV)/.installed-demo
	cd $(dir $(LECTURE_NB)) && JUPYTER_PREFER_ENV_PATH=1 JUPYTER_PATH="$(CURDIR)/demo/share/jupyter" \
	  $(CURDIR)/$(VENV)/bin/voila $(notdir $(LECTURE_NB)) --template=microtorch-slides $(VOILA_ARGS)

bench: $(VENV)/.installed-bench
	$(VPY) benchmarks/run.py $(BENCH_ARGS)

# mutmut is configured in pyproject.toml ([tool.mutmut]); it works in ./mutants/.
# `mutmut results` lists the survivors, `mutmut show NAME` shows one.
mutate: $(VENV)/.installed-test,mutate
	$(VENV)/bin/mutmut run --max-children $(MUTATE_CHILDREN) $(MUTATE_ARGS)
	$(VENV)/bin/mutmut results

# Coursework (nbgrader, the `course` extra). nbgrader runs `alembic` from PATH: .venv/bin goes first.
COURSE := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" MPLBACKEND=Agg $(VPY) -m microtorch.exercises.course

student: $(VENV)/.installed-course
	$(COURSE) student --out build/student

grade: $(VENV)/.installed-course
	@test -n "$(NB)" || { echo "usage: make grade NB=path/to/submitted.ipynb"; exit 2; }
	$(COURSE) grade "$(NB)"

# Clears outputs, execution counts and saved widget state; rewrites only notebooks that change.
# Needs nothing but Python's json module, so it works before .venv exists.
define STRIP_PY
import glob, json
for path in sorted(glob.glob("notebooks/**/*.ipynb", recursive=True)):
    if ".ipynb_checkpoints" in path:
        continue
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    before = json.dumps(nb, sort_keys=True)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)
    nb.get("metadata", {}).pop("widgets", None)
    if json.dumps(nb, sort_keys=True) != before:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(nb, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        print("stripped", path)
endef
export STRIP_PY

strip:
	@$(PYTHON) -c "$$STRIP_PY"

# Slide types by rule for cells that have none (an author's choice is kept); needs only Python.
slides:
	@$(PYTHON) tools/slides.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .hypothesis test-artifacts mutants
	find . -name '*.egg-info' -prune -exec rm -rf {} +
	find . -name '__pycache__' -prune -exec rm -rf {} +
