"""Notebook 13's checker: the reference passes, typical wrong answers are caught."""
import pytest

from microtorch.exercises import capstone as ex


def good(budget, results):
    fits = [(r["step_ms"], r["peak_bytes"], n) for n, r in results.items() if r["peak_bytes"] <= budget]
    return min(fits)[2] if fits else None


def test_reference_passes_visible_and_hidden(capsys):
    ex.check_choose_configuration(good)
    ex.check_choose_configuration(good, hidden=True)
    out = capsys.readouterr().out
    assert out.count("✓ check_choose_configuration") == 2 and "(the hidden ones)" in out


@pytest.mark.parametrize("wrong, words", [
    (lambda b, r: min(r, key=lambda n: r[n]["peak_bytes"]), "takes .* ms; .* fits too"),      # always least memory
    (lambda b, r: min(r, key=lambda n: r[n]["step_ms"]), "over the budget"),                 # ignores the budget
    (lambda b, r: good(b - 1, r), "fits .* you returned None|fits but takes"),               # < instead of <=
    (lambda b, r: good(b, r) or "pool", "no configuration fits"),                            # never None
    (lambda b, r: next((n for n in r if r[n]["peak_bytes"] <= b), None), "fits but takes"),  # first that fits
    (lambda b, r: r.get(good(b, r)), "return one of the names"),                             # returns the entry
    (lambda b, r: min((x["step_ms"], -x["peak_bytes"], n) for n, x in r.items() if x["peak_bytes"] <= b)[2]
     if any(x["peak_bytes"] <= b for x in r.values()) else None, "ties: the smaller peak"),  # ties the wrong way
])
def test_wrong_answers_are_caught(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_choose_configuration(wrong)


def test_an_unfinished_function_shows_its_stub():
    def unfinished(budget, results):
        raise NotImplementedError("write it")
    with pytest.raises(NotImplementedError, match="write it"):
        ex.check_choose_configuration(unfinished)
