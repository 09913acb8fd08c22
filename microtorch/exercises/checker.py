"""``checker``: what turns an exercise's ``check(fn)`` into the ``check_...`` a notebook calls.

It sits above the primitives every checker uses (:mod:`.checking`: pass and fail lines, the
hidden run, switching engine code off) and the runner of the plug points' suites
(:mod:`.suites`), since a checker with ``suite=`` runs one after its own cases pass; every
exercise module imports it from here.
"""
from __future__ import annotations

import functools

from .checking import _HIDDEN, _PASSED, _fail, switched_off
from .suites import run_suite


def checker(exercise: str | None = None, blocks=(), suite: str | None = None):
    """Make ``check(fn)`` a checker: adds ``hidden=``, lets ``NotImplementedError`` through,
    switches off the engine code the exercise asks for (``blocks``: a function returning the
    targets, see :func:`switched_off`) while the learner's function runs, then (``suite``: a
    plug point of :mod:`.plugins`) runs a subset of the engine's own tests with ``fn``
    plugged into the engine, and remembers ``fn`` when all of it passes. ``exercise`` names
    what the learner writes.

    The exercise modules apply it after the function, ``check_x = checker(...)(check_x)``,
    not as ``@checker(...)``: mutmut (``make mutate``) leaves decorated functions unmutated,
    and a checker's body is what the mutation run has to reach."""
    if callable(exercise):  # used bare, as @checker
        return checker()(exercise)

    def wrap(check):
        @functools.wraps(check)
        def run(fn, *args, hidden: bool = False, **kwargs):
            if not callable(fn):
                _fail(f"{check.__name__} needs your function itself (the name, without calling it); "
                      f"it got {type(fn).__name__} {fn!r}.")
            name = exercise or getattr(fn, "__name__", "this function")
            before, _HIDDEN[0] = _HIDDEN[0], bool(hidden)
            try:
                with switched_off(name, blocks() if blocks else (),
                                  [getattr(fn, "__globals__", None)]):
                    check(fn, *args, **kwargs)
                if suite and not hidden:
                    run_suite(suite, fn)
            finally:
                _HIDDEN[0] = before
            try:
                _PASSED.add(fn)
            except TypeError:  # a builtin or some other object without weak references
                pass

        return run

    return wrap
