"""What every checker shares: how it reports a pass, a failure, and a learner's function that raised.

Conventions (DESIGN.md, "Coursework conventions"):

* ``check_...(fn)`` runs the visible cases plus randomized ones; ``check_...(fn, hidden=True)``
  (what an autograded notebook's hidden tests call) runs a second, larger set of randomized
  cases with a seed the learner's copy never uses.
* An unfinished exercise raises ``NotImplementedError`` (the student version's stub): it goes
  through unchanged, so the notebook shows the stub's hint, not a checker message.
* A function that passed its checker is remembered, so later sections can use it
  (:func:`yours_or_engine`) and fall back to the engine's own version until then.
"""
from __future__ import annotations

import functools
import weakref

import numpy as np

from ..tensor import Tensor

_PASSED: "weakref.WeakSet" = weakref.WeakSet()
_HIDDEN = [False]  # is the current checker run the hidden one?

VISIBLE_SEED, HIDDEN_SEED = 20260, 918_273


def _fail(message: str):
    raise AssertionError(message)


def _passed(name: str, n: int) -> None:
    print(f"✓ {name}: all {n} cases agree with the engine.")


def hidden() -> bool:
    """True while a checker runs its hidden cases (``check_...(fn, hidden=True)``)."""
    return _HIDDEN[0]


def rng() -> np.random.Generator:
    """The random generator for a checker's randomized cases: one seed for the visible run,
    another for the hidden one."""
    return np.random.default_rng(HIDDEN_SEED if _HIDDEN[0] else VISIBLE_SEED)


def checker(check):
    """Make ``check(fn)`` a checker: adds ``hidden=``, lets ``NotImplementedError`` through,
    and remembers ``fn`` when it passes."""

    @functools.wraps(check)
    def run(fn, *args, hidden: bool = False, **kwargs):
        if not callable(fn):
            _fail(f"{check.__name__} needs your function itself (the name, without calling it); "
                  f"it got {type(fn).__name__} {fn!r}.")
        before, _HIDDEN[0] = _HIDDEN[0], bool(hidden)
        try:
            check(fn, *args, **kwargs)
        finally:
            _HIDDEN[0] = before
        try:
            _PASSED.add(fn)
        except TypeError:  # a builtin or some other object without weak references
            pass

    return run


def has_passed(fn) -> bool:
    """Did ``fn`` pass its checker in this session?"""
    try:
        return fn in _PASSED
    except TypeError:
        return False


def yours_or_engine(fn, engine):
    """``fn`` if it passed its checker, else ``engine`` (the engine's own version), so a
    notebook's later sections run whether or not the exercise is done yet."""
    if has_passed(fn):
        print(f"Later sections use your {getattr(fn, '__name__', 'function')}.")
        return fn
    print(f"Your {getattr(fn, '__name__', 'function')} has not passed its checker yet: later "
          "sections use the engine's version until it does (re-run this cell then).")
    return engine


def _call(fn, where: str, *args):
    try:
        return fn(*args)
    except NotImplementedError:
        raise  # the exercise is not done yet: show its hint, not a checker message
    except Exception as exc:
        args_text = ", ".join(repr(a) if not isinstance(a, Tensor) else f"<tensor of shape {a.shape}>"
                              for a in args)
        _fail(f"{where} your function raised {type(exc).__name__}: {exc}\n(called as "
              f"fn({args_text})). It should return an answer for this case.")


def _as_array(x) -> np.ndarray:
    """A learner's answer (a Tensor, an array, a list) as a numpy array of its values."""
    if isinstance(x, Tensor):
        return np.array(x.detach()._data)
    return np.asarray(x)
