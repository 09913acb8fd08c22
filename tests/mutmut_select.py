"""A pytest plugin loaded only by mutmut (``-p tests.mutmut_select`` in pyproject's [tool.mutmut]).

mutmut runs each mutant against every collected test that covers the mutated function. For
the allocators that is nearly every test (every tensor allocates), so one mutant of
``Pool.allocate`` would cost a whole test run. ``[tool.microtorch.mutate-tests]`` in
pyproject.toml names, per module prefix, the test files that are about that module; this
plugin keeps only those:

- while a mutant runs (mutmut names it in ``MUTANT_UNDER_TEST``), only the test files of the
  longest prefix its module matches; a module no prefix matches keeps every covering test.
  If nothing is left, pytest exits with 5, which mutmut reports as "no tests";
- in mutmut's other passes (the coverage "stats" pass, listing tests, the clean and the
  forced-fail runs), when every mutant pattern on mutmut's command line falls under listed
  prefixes, only the union of their files is collected, so ``make mutate
  MUTATE_ARGS='"microtorch.memory.*"'`` never runs the rest of the suite.
"""
import fnmatch
import os
import sys
import tomllib

_PHASES = {"", "stats", "list_all_tests", "fail", "mutant_generation"}


def _table(rootpath):
    with open(rootpath / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    return data.get("tool", {}).get("microtorch", {}).get("mutate-tests", {})


def _prefixes_of(pattern, table):
    """The table's prefixes a mutant name or pattern falls under (longest first)."""
    hits = [k for k in table if pattern.startswith(k + ".") or fnmatch.fnmatchcase(k + ".x", pattern)]
    return sorted(hits, key=len, reverse=True)


def _allowed_files(table):
    """The test files to keep, or None for no restriction."""
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if mutant not in _PHASES:
        hits = _prefixes_of(mutant, table)
        return set(table[hits[0]]) if hits else None
    patterns = [a for a in sys.argv[1:] if a.startswith("microtorch")]
    if not patterns:
        return None
    files = set()
    for pattern in patterns:
        hits = _prefixes_of(pattern, table)
        if not hits:
            return None
        for k in hits:
            files |= set(table[k])
    return files


def pytest_collection_modifyitems(config, items):
    allowed = _allowed_files(_table(config.rootpath))
    if allowed is None:
        return
    keep = [item for item in items if item.nodeid.split("::")[0] in allowed]
    dropped = [item for item in items if item.nodeid.split("::")[0] not in allowed]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
