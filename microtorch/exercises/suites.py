"""The plug points' suites: a chosen subset of the engine's own tests for each plug point of
:mod:`.plugins`, and the runner.

``run_suite(name, fn)`` runs them with the learner's ``fn`` plugged in
(``mt.exercises.use(name=fn)``); the exercise's checker calls it once the exercise's own
cases pass. The tests themselves are defined in :mod:`.engine_suites` (they use the engine's
modules and the exercise modules' references, which sit above this one), each entered with
``@_test(plug)``; ``microtorch.exercises`` imports that module, so every suite is registered
once the package is. tests/test_exercise_plugins.py runs every suite with the engine's own
functions too, so these are tests of the engine as much as of the learner's plug-in. Each
test's expected values come from outside the plugged-in path: finite differences, numpy, or
the rules written out.
"""
from __future__ import annotations

from .checking import _fail
from .plugins import PLUG_POINTS, use


class _Suites(dict):
    """plug point -> its tests; looking up one without tests says why (not a bare KeyError)."""

    def __missing__(self, plug):
        if plug not in PLUG_POINTS:
            raise KeyError(f"no plug point {plug!r}; the plug points are " + ", ".join(PLUG_POINTS))
        raise KeyError(f"no tests registered for plug point {plug!r}: they are defined in "
                       "microtorch.exercises.engine_suites, which importing microtorch.exercises loads")


SUITES: dict[str, list] = _Suites()


def _test(plug: str):
    def register(f):
        SUITES.setdefault(plug, []).append(f)
        return f
    return register


def run_suite(plug: str, fn, quiet: bool = False) -> int:
    """Run plug point ``plug``'s tests with ``fn`` plugged in; returns how many passed, or
    raises AssertionError naming the first test that failed and why."""
    tests = SUITES[plug]
    for test in tests:
        what = test.__doc__.strip().splitlines()[0]
        try:
            with use(**{plug: fn}):
                test()
        except NotImplementedError:
            raise
        except Exception as exc:  # an AssertionError of the test, or anything the plug-in raised
            _fail(f"your {getattr(fn, '__name__', plug)} passed its own cases, but inside the engine "
                  f"the test \"{what}\" failed:\n{type(exc).__name__}: {exc}")
    if not quiet:
        print(f"✓ the engine's own tests with your {getattr(fn, '__name__', plug)} plugged in: all "
              f"{len(tests)} pass.")
    return len(tests)
