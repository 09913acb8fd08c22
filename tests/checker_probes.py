"""Probes the exercise-checker tests share: the message a checker fails with, an answer that
records how the checker called it, and the number of cases a pass message counts."""
import re

import pytest


def failure(check, answer, **kwargs) -> str:
    """The message ``check(answer, **kwargs)`` fails with (it must fail)."""
    with pytest.raises(AssertionError) as info:
        check(answer, **kwargs)
    return str(info.value)


class Recorder:
    """A right answer that records the arguments of every call."""

    def __init__(self, solution):
        self.solution, self.calls = solution, []

    def __call__(self, *args):
        self.calls.append(args)
        return self.solution(*args)


def cases_counted(out: str, name: str) -> int:
    """N of a checker's pass message '✓ name: all N cases right'."""
    return int(re.search(f"✓ {name}: all (\\d+) cases right", out).group(1))
