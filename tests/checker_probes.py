"""Probes the exercise-checker tests share: the message a checker fails with, and an answer that
records how the checker called it."""
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
