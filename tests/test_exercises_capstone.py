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


def good_peak(tr):
    return ex._reference_peak(tr.events)


def test_activation_peak_reference_passes(capsys):
    ex.check_activation_peak(good_peak)
    ex.check_activation_peak(good_peak, hidden=True)
    assert capsys.readouterr().out.count("✓ check_activation_peak") == 2


def _fold(tr, tags=("activation",), frees=True, unknown=False, final=False):
    live = peak = 0
    sizes = {}
    for e in tr.events:
        if e["kind"] == "alloc" and e.get("tag") in tags:
            sizes[e["storage"]] = e["nbytes"]; live += e["nbytes"]; peak = max(peak, live)
        elif e["kind"] == "free" and frees and (e["storage"] in sizes or unknown):
            live -= sizes.pop(e["storage"], e["nbytes"])
    return live if final else peak


@pytest.mark.parametrize("wrong, words", [
    (lambda tr: _fold(tr, tags=("activation", "gradient", "tensor")), "count only the ones tagged"),
    (lambda tr: _fold(tr, frees=False), "subtract a storage's bytes when it is freed"),
    (lambda tr: _fold(tr, unknown=True), "only for storages you saw allocated"),
    (lambda tr: _fold(tr, final=True), "keep the largest sum"),
    (lambda tr: None, "returned None"),
    (lambda tr: tr.peak()[0], "write activation_peak yourself"),
])
def test_activation_peak_wrong_answers_are_caught(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_activation_peak(wrong)
