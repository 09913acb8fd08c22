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

import contextlib
import functools
import sys
import weakref

import numpy as np

from ..tensor import Tensor

_PASSED: "weakref.WeakSet" = weakref.WeakSet()
_HIDDEN = [False]   # is the current checker run the hidden one?
_LEARNER = [False]  # is the learner's function running right now?

VISIBLE_SEED, HIDDEN_SEED = 20260, 918_273


def _fail(message: str):
    raise AssertionError(message)


def _passed(name: str, n: int) -> None:
    print(f"✓ {name}: all {n} cases right{' (the hidden ones)' if _HIDDEN[0] else ''}.")


def hidden() -> bool:
    """True while a checker runs its hidden cases (``check_...(fn, hidden=True)``)."""
    return _HIDDEN[0]


def rng() -> np.random.Generator:
    """The random generator for a checker's randomized cases: one seed for the visible run,
    another for the hidden one."""
    return np.random.default_rng(HIDDEN_SEED if _HIDDEN[0] else VISIBLE_SEED)


class WriteItYourself(AssertionError):
    """Raised when the learner's function calls engine code its exercise asks them to write."""


def _label(obj) -> str:
    owner, name = obj if isinstance(obj, tuple) else (None, None)
    if owner is not None:
        return f"{owner.__module__}.{owner.__qualname__}.{name}"
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _standin(orig, exercise: str, label: str):
    message = (f"this exercise asks you to write {exercise} yourself: the engine's {label} is "
               "switched off while the checker runs your function. Compute the answer with "
               "plain Python (and numpy) instead.")

    def refuse():
        if _LEARNER[0]:
            raise WriteItYourself(message)

    if isinstance(orig, property):
        def get(self):
            refuse()
            return orig.__get__(self, type(self))
        return property(get, orig.fset, orig.fdel, orig.__doc__)

    @functools.wraps(orig)
    def standin(*args, **kwargs):
        refuse()
        return orig(*args, **kwargs)
    return standin


def _replace_everywhere(target, replacement, namespaces=()) -> list:
    """Put ``replacement`` wherever a microtorch module, ``numpy`` or one of ``namespaces``
    holds the function ``target``; returns ``[(namespace, key, target)]`` to undo it."""
    modules = [m for name, m in list(sys.modules.items())
               if m is not None and (name == "microtorch" or name.startswith("microtorch.") or name == "numpy")]
    spaces = [vars(m) for m in modules] + [ns for ns in namespaces if isinstance(ns, dict)]
    undo = []
    for space in spaces:
        for key, value in list(space.items()):
            if value is target:
                space[key] = replacement
                undo.append((space, key, target))
    return undo


@contextlib.contextmanager
def switched_off(exercise: str, targets, namespaces=()):
    """While inside, every target refuses calls from the learner's function (see ``_call``)
    with "this exercise asks you to write <exercise> yourself". A target is a function —
    replaced wherever a microtorch module, ``numpy``, or one of ``namespaces`` (the
    learner's globals) holds it — or an ``(owner, attribute)`` pair: a method or property of
    an engine class. Everything is put back on the way out, also after an error."""
    undo = []
    try:
        for target in targets:
            if isinstance(target, tuple):
                owner, attr = target
                orig = owner.__dict__[attr]
                setattr(owner, attr, _standin(orig, exercise, _label(target)))
                undo.append((owner, attr, orig, True))
                continue
            stand = _standin(target, exercise, _label(target))
            undo += [(space, key, orig, False)
                     for space, key, orig in _replace_everywhere(target, stand, namespaces)]
        yield
    finally:
        for where, key, orig, is_attr in reversed(undo):
            if is_attr:
                setattr(where, key, orig)
            else:
                where[key] = orig


@contextlib.contextmanager
def learner():
    """Marks the learner's code running: switched-off engine code refuses calls."""
    before, _LEARNER[0] = _LEARNER[0], True
    try:
        yield
    finally:
        _LEARNER[0] = before


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
        with learner():
            return fn(*args)
    except (NotImplementedError, WriteItYourself):
        raise  # not done yet (show the stub's hint), or delegated to the engine (say so)
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
