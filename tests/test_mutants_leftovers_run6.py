"""Mutation run 6: what run 5 left open in ``exercises/refcounts.py`` (notebook 03's leak and peak
checkers) and ``exercises/suites.py`` (the peak suite's training step, since moved to
``exercises/engine_suites.py``).

* the peak suite (the engine's own tests the peak checker runs with the learner's function plugged
  in) is a real training step: a baseline with the model live, forward then backward, its peak
  inside backward as notebook 03 shows; and it rejects every catalogued peak mistake such a trace
  can show, by the name of its test, while the notebook's answer passes;
* the leak checker's messages after the traces were made reproducible (each case now records after a
  garbage collection): a storage wrongly called leaked is told when it was freed, even when its free
  is the trace's last event; a leak missed is told who holds it at the end, as the trace's refcount
  events say, in the holder words (the tensor, the graph node's saved slot); and the loops that keep
  their losses leak one 4-byte loss per step or batch their labels count.

Record: tests/mutation-run-6/exercises-refcounts-suites.md.
"""
from __future__ import annotations

import re
from collections import Counter

import pytest

import microtorch as mt
from microtorch.exercises import engine_suites, refcounts, suites

from checker_probes import Recorder as _Recorder, failure as _message
from test_exercise_checkers import _peak_at_end, _peak_every_alloc
from test_mutants_refcounts_run5 import (
    CLEAN, _peak_half, _peak_index_not_step, _peak_one_event_late, _peak_times_two, leaked_storages,
    peak_extra_bytes,
)


# ----------------------------------------------------------------------------------------------
# the peak suite's training step (engine_suites._step_trace)
# ----------------------------------------------------------------------------------------------
SUITE_STEP_TEST = "Trace.peak of a training step is the highest point of its live-bytes curve, first reached there"


def test_the_peak_suite_records_a_training_step_whose_peak_is_inside_backward():
    """The suite's trace: the model and data live at the start, forward, one backward, the peak inside it."""
    tr = engine_suites._step_trace()
    assert tr.events[0]["kind"] == "baseline" and tr.replay().live_bytes()[0] > 0
    assert len(tr.filter("backward")) == 1 and tr.filter("op") and tr.filter("node_run")
    first_run = tr.filter("node_run")[0]["step"]
    peak, step = refcounts.peak_of(tr)
    assert peak > 0 and step > first_run
    assert all(e["step"] < first_run for e in tr.filter("op") if e["phase"] == "forward")
    # several tensors live at once: the peak is a running sum, not the largest tensor
    assert peak > max(e["nbytes"] for e in tr.filter("alloc"))


@pytest.mark.parametrize("wrong", [_peak_every_alloc, _peak_at_end, _peak_index_not_step, _peak_one_event_late,
                                   _peak_half, _peak_times_two])
def test_the_peak_suite_rejects_the_catalogued_mistakes_a_training_step_shows(wrong):
    """Every catalogued peak mistake a training step can show fails the suite, named by its step test."""
    with pytest.raises(AssertionError) as info:
        suites.run_suite("peak_extra_bytes", wrong, quiet=True)
    msg = str(info.value)
    assert msg.startswith(f"your {wrong.__name__} passed its own cases, but inside the engine the test "
                          f"\"{SUITE_STEP_TEST}\" failed:\n")


def test_the_notebook_peak_passes_the_peak_suite():
    """The notebook's running sum passes both tests of the suite."""
    assert suites.run_suite("peak_extra_bytes", peak_extra_bytes, quiet=True) == 2


# ----------------------------------------------------------------------------------------------
# the leaked storages (check_leaked_storages)
# ----------------------------------------------------------------------------------------------
def _leak_pairing_one_event_short(trace):
    """The pairing of allocs and frees, but the loop stops one event short (range(len(events) - 1))."""
    events = trace.filter("alloc", "free")
    alive = set()
    for i in range(len(events) - 1):
        e = events[i]
        if e["kind"] == "alloc":
            alive.add(e["storage"])
        else:
            alive.discard(e["storage"])
    return alive


def _holders_by_refcount_events(tr, sid) -> list:
    """Who holds storage ``sid`` at the end: each refcount event's holder, +delta / -delta, added up."""
    held = Counter()
    for e in tr.filter("refcount"):
        if e["storage"] == sid:
            held[e["holder"]] += e["delta"]
    return sorted(h for h, n in held.items() for _ in range(n))


def _in_words(holder: str) -> str:
    """notebook 03's words for a holder: 'tensor 45' (no name in these traces), 'node 7 (MulBackward)'."""
    node = re.fullmatch(r"node \d+ \((\w+Backward)\)", holder)
    if node:
        return f"the graph node {node.group(1)} (a saved slot)"
    assert re.fullmatch(r"tensor \d+", holder), holder
    return f"a tensor object still alive ({holder})"


def test_a_leak_answer_one_event_short_is_told_when_the_last_freed_storage_was_freed():
    """Stopping before the last event calls the last-freed storage leaked: its alloc and its free are named."""
    spy = _Recorder(_leak_pairing_one_event_short)
    msg = _message(mt.exercises.check_leaked_storages, spy)
    tr = spy.calls[-1][0]
    last = tr.filter("alloc", "free")[-1]
    assert last["kind"] == "free" and last["storage"] not in refcounts.leaks_of(tr)
    born = next(e["step"] for e in tr.filter("alloc") if e["storage"] == last["storage"])
    assert msg.startswith(CLEAN + f"you said [{last['storage']}] leaked, but the engine's lifetimes say the "
                          "leaked storages are none.\n")
    assert (f"\nstorage #{last['storage']} was allocated at event {born} and freed at event {last['step']}: "
            "pair every 'alloc' with the 'free' of the same storage id.") in msg


def _missing_one(k, j):
    """A right answer, except on the k-th trace it is called on: there the j-th leak (sorted) is left out."""
    calls = []

    def answer(tr):
        calls.append(tr)
        got = leaked_storages(tr)
        return got - {sorted(got)[j]} if len(calls) == k + 1 else got
    return answer, calls


def test_a_missed_leak_is_told_who_holds_it_at_the_end():
    """Each leak of each trace, missed alone: its bytes, its alloc, and every holder the refcount events leave."""
    cases, _keep = refcounts._leak_cases()
    seen = Counter()
    for k, (what, tr) in enumerate(cases):
        for j in range(len(refcounts.leaks_of(tr))):
            answer, calls = _missing_one(k, j)
            msg = _message(mt.exercises.check_leaked_storages, answer)
            tr = calls[-1]
            sid = sorted(refcounts.leaks_of(tr))[j]
            born = next(e for e in tr.filter("alloc") if e["storage"] == sid)
            assert msg.startswith(f"for the trace of {what}:\nstorage #{sid} ({born['nbytes']} bytes, allocated at "
                                  f"event {born['step']}) is still live at the end, and you missed it")
            held = re.search(r"At the end it is held by: (.*)\.\n", msg).group(1).split("; ")
            holders = _holders_by_refcount_events(tr, sid)
            assert sorted(held) == sorted(_in_words(h) for h in holders) and holders, (what, sid, held)
            seen[what] += len(held) > 1 and all(h.startswith("the graph node ") for h in held)
    # without no_grad and without backward the graph stays: an activation held by two nodes' saved slots
    assert seen["an evaluation loop WITHOUT no_grad that keeps the loss tensors (2 batches)"] > 0


def test_each_loop_that_keeps_its_losses_leaks_one_scalar_per_step_or_batch_its_label_counts():
    """'(3 steps)', '(2 batches)': as many 4-byte losses leak, and each batch leaks the same storages."""
    cases, _keep = refcounts._leak_cases()
    kept = [(what, tr) for what, tr in cases if "keeps the loss tensors" in what]
    assert len(kept) == 3
    for what, tr in kept:
        n = int(re.search(r"\((\d+) (?:steps|batches)\)$", what).group(1))
        leaks = refcounts.leaks_of(tr)
        sizes = sorted(e["nbytes"] for e in tr.filter("alloc") if e["storage"] in leaks)
        assert sizes.count(4) == n, (what, sizes)
        assert len(sizes) % n == 0 and sizes == sorted(sizes[::n] * n), (what, sizes)
