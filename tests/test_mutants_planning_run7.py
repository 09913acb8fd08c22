"""Mutation run 7, ``exercises/planning.py`` (notebook 09's checkers): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake the notebook warns about (one pass
  over a loop, intersection instead of union, the predecessors instead of the successors,
  forgetting def, first-fit without reuse, best-fit, stacking above every live buffer,
  half-open intervals, ...): each is rejected, and the message names the case, the block or
  buffers, and the hint for that mistake;
* the references against hand-worked values of the notebook and against the engine;
* the cases the checkers generate are the kinds they promise: the notebook's loop program and
  the stored programs first, then random ones (reproducible, another seed and more of them
  in the hidden run, valid, with loops and branches, exercising reuse);
* the pass message counts the cases the learner's function was called on.

Record: tests/mutation-run-7/exercises-planning.md.
"""
from __future__ import annotations

import ast

import pytest

import microtorch as mt
from microtorch.exercises import planning as ex
from microtorch.planning import Program, plan

from checker_probes import Recorder as _Recorder, failure as _message, cases_counted as _cases_counted
from test_exercise_checkers import _solutions

SOLUTION = _solutions("09_liveness_and_planning")  # the notebook's reference answers
my_liveness = SOLUTION["my_liveness"]
my_first_fit = SOLUTION["my_first_fit"]
greedy_examples = SOLUTION["greedy_examples"]

# the notebook's loop program (section 1), as the engine reads it
NOTEBOOK_LOOP = Program.from_blocks({
    "entry": (["i = 0", "s = 0"], ["loop"]),
    "loop": (["t = s + i", "s = t", "i = i + 1", "branch i < n"], ["loop", "exit"]),
    "exit": (["return s"], []),
}, sizes={"n": 4}, default_size=4)


def _except_on(solution, case_index, change, calls=None):
    """The notebook's solution, except on the ``case_index``-th call: there ``change(args, answer)``."""
    seen = [0]

    def answer(*args):
        k, seen[0] = seen[0], seen[0] + 1
        right = solution(*args)
        return change(args, right) if k == case_index else right
    return answer


def _liveness_calls(hidden: bool) -> list:
    spy = _Recorder(my_liveness)
    mt.exercises.check_block_liveness(spy, hidden=hidden)
    return [args[0] for args in spy.calls]


def _first_fit_calls(hidden: bool) -> list:
    spy = _Recorder(my_first_fit)
    mt.exercises.check_first_fit(spy, hidden=hidden)
    return [args[0] for args in spy.calls]


def _reachable(blocks) -> set:
    first = next(iter(blocks))
    seen, stack = set(), [first]
    while stack:
        b = stack.pop()
        if b not in seen:
            seen.add(b)
            stack.extend(blocks[b]["succ"])
    return seen


def _has_back_edge(blocks) -> bool:
    order = {b: k for k, b in enumerate(blocks)}
    return any(order[s] <= order[b] for b, v in blocks.items() for s in v["succ"])


# ----------------------------------------------------------------------------------------------
# exercise 1: the liveness equations
# ----------------------------------------------------------------------------------------------
def _sweep(blocks, transfer=None, out_of=None, passes=None, order=reversed):
    """A learner's iteration with one rule swapped for a mistake."""
    transfer = transfer or (lambda b, out: b["use"] | (out - b["def"]))
    out_of = out_of or (lambda name, li: set().union(*(li[s] for s in blocks[name]["succ"])))
    live_in = {b: set() for b in blocks}
    live_out = {b: set() for b in blocks}
    changed, k = True, 0
    while changed and (passes is None or k < passes):
        changed, k = False, k + 1
        for b in order(list(blocks)):
            out = out_of(b, live_in)
            new = transfer(blocks[b], out)
            changed |= new != live_in[b] or out != live_out[b]
            live_in[b], live_out[b] = new, out
    return live_in, live_out


def _one_pass(blocks):
    return _sweep(blocks, passes=1)


def _no_def(blocks):
    return _sweep(blocks, transfer=lambda b, out: b["use"] | out)


def _def_from_use_too(blocks):
    return _sweep(blocks, transfer=lambda b, out: (b["use"] | out) - b["def"])


def _intersection(blocks):
    def out_of(name, li):
        succ = blocks[name]["succ"]
        return set.intersection(*(set(li[s]) for s in succ)) if succ else set()
    return _sweep(blocks, out_of=out_of)


def _predecessors(blocks):
    return _sweep(blocks, out_of=lambda name, li: set().union(*(li[p] for p, b in blocks.items() if name in b["succ"])))


def _forgets_use(blocks):
    return _sweep(blocks, transfer=lambda b, out: out - b["def"])


def _out_is_in(blocks):
    live_in, _ = my_liveness(blocks)
    return live_in, {b: set(s) for b, s in live_in.items()}


def _swapped(blocks):
    live_in, live_out = my_liveness(blocks)
    return live_out, live_in


def _ignores_self_loops(blocks):
    return _sweep(blocks, out_of=lambda name, li: set().union(*(li[s] for s in blocks[name]["succ"] if s != name)))


def _two_passes(blocks):
    return _sweep(blocks, passes=2)


def _forward_one_pass(blocks):
    return _sweep(blocks, passes=1, order=lambda bs: bs)


def _raises(blocks):
    return blocks["no such block"]


LOOP = "for the loop program of the notebook:"
IN_ENTRY = "live_in['entry'] should be ['n'], you have"
OUT_LOOP = "live_out['loop'] should be ['i', 'n', 's'], you have"
GENERIC = "Check both equations, and keep iterating over all blocks until nothing changes."

LIVENESS_MISTAKES = [  # (wrong answer, the case and set the message names, words of its hint)
    (_one_pass, LOOP, OUT_LOOP + " ['s'].", "one pass is not enough"),
    (_forward_one_pass, LOOP, "live_in['entry'] should be ['n'], you have [].", GENERIC),
    (_two_passes, "for random program", "should be", GENERIC),
    (_no_def, LOOP, IN_ENTRY + " ['i', 'n', 's'].", "You did not subtract def"),
    (_def_from_use_too, LOOP, "live_in['loop'] should be ['i', 'n', 's'], you have ['n'].",
     "You subtracted def from use too"),
    (_intersection, LOOP, OUT_LOOP + " ['s'].", "the union over the successors, not the intersection"),
    (_predecessors, LOOP, "live_in['entry'] should be ['n'], you have [].", "not its predecessors"),
    (_forgets_use, LOOP, "live_in['entry'] should be ['n'], you have [].", GENERIC),
    (_out_is_in, LOOP, "live_out['entry'] should be ['i', 'n', 's'], you have ['n'].", GENERIC),
    (_swapped, LOOP, "live_in['entry'] should be ['n'], you have ['i', 'n', 's'].", GENERIC),
    (_ignores_self_loops, LOOP, OUT_LOOP + " ['s'].", GENERIC),
    (_raises, LOOP, "your function raised KeyError: 'no such block'", "It should return an answer for this case."),
]


@pytest.mark.parametrize("wrong, where, what, hint", LIVENESS_MISTAKES, ids=[m[0].__name__ for m in LIVENESS_MISTAKES])
def test_each_wrong_liveness_is_rejected_with_its_case_and_hint(wrong, where, what, hint):
    """A catalogued liveness mistake fails on its first wrong program, named, with the set and the hint."""
    msg = _message(mt.exercises.check_block_liveness, wrong)
    assert msg.startswith(where + " ")
    assert what in msg and hint in msg


@pytest.mark.parametrize("wrong", [m[0] for m in LIVENESS_MISTAKES], ids=[m[0].__name__ for m in LIVENESS_MISTAKES])
def test_each_wrong_liveness_is_rejected_in_the_hidden_run_too(wrong):
    """The hidden run (random programs only) catches every catalogued mistake as well."""
    msg = _message(mt.exercises.check_block_liveness, wrong, hidden=True)
    assert msg.startswith("for random program ")


def test_a_liveness_failure_shows_the_program_it_failed_on():
    """After the wrong set, the message lists the program: use, def and successors per block."""
    msg = _message(mt.exercises.check_block_liveness, _one_pass)
    assert ("\nThe program: entry: use [] def ['i', 's'] → ['loop']; loop: use ['i', 'n', 's'] def "
            "['i', 's', 't'] → ['loop', 'exit']; exit: use ['s'] def [] → end\n") in msg


def test_a_liveness_wrong_only_on_a_later_stored_program_is_told_its_number():
    """Right on the loop program, wrong on the second stored one: 'for program 2:'."""
    wrong = _except_on(my_liveness, 1, lambda args, right: (right[0], {b: set() for b in right[1]}))
    msg = _message(mt.exercises.check_block_liveness, wrong)
    assert msg.startswith("for program 2: live_out[")


def test_a_liveness_wrong_only_on_a_random_program_is_told_its_number():
    """Wrong only on the 4th program tried (a random one after the three stored): 'for random program 4:'."""
    stored = len(ex._stored_cfgs())
    wrong = _except_on(my_liveness, stored, lambda args, right: ({b: s | {"zz"} for b, s in right[0].items()}, right[1]))
    msg = _message(mt.exercises.check_block_liveness, wrong)
    assert msg.startswith(f"for random program {stored + 1}: live_in[")
    hidden = _message(mt.exercises.check_block_liveness, _except_on(my_liveness, 0, lambda args, right: ({}, {})),
                      hidden=True)
    assert hidden.startswith("for random program 1: no answer for block(s)")


def test_right_live_in_with_a_wrong_live_out_is_rejected():
    """Both dicts are compared: a right live_in does not excuse a wrong live_out."""
    msg = _message(mt.exercises.check_block_liveness, _out_is_in)
    assert "live_out['entry'] should be ['i', 'n', 's'], you have ['n']." in msg


def test_a_liveness_returning_three_sets_is_asked_for_a_pair():
    """(live_in, live_out, something more) is refused with the shape expected, not a crash."""
    def three(blocks):
        live_in, live_out = my_liveness(blocks)
        return live_in, live_out, {b: v["use"] for b, v in blocks.items()}
    msg = _message(mt.exercises.check_block_liveness, three)
    assert msg.startswith(LOOP + " return a pair of dicts (live_in, live_out), each {block: set}; got (")
    msg = _message(mt.exercises.check_block_liveness, lambda blocks: (my_liveness(blocks)[0],))
    assert msg.startswith(LOOP + " return a pair of dicts")


def test_the_liveness_pass_message_counts_the_programs_tried(capsys):
    """'all N cases right': N is how often the learner's function was called."""
    for hidden in (False, True):
        spy = _Recorder(my_liveness)
        mt.exercises.check_block_liveness(spy, hidden=hidden)
        assert _cases_counted(capsys.readouterr().out, "check_block_liveness") == len(spy.calls) > 0


def test_the_first_program_tried_is_the_notebooks_loop():
    """The program labelled 'the loop program of the notebook' has the notebook loop's blocks, use, def and edges."""
    first = _liveness_calls(False)[0]
    lv = NOTEBOOK_LOOP.liveness()
    assert list(first) == [b.name for b in NOTEBOOK_LOOP.blocks]
    for block in NOTEBOOK_LOOP.blocks:
        assert first[block.name]["use"] == set(lv.block_use[block.name])
        assert first[block.name]["def"] == set(lv.block_def[block.name])
        assert first[block.name]["succ"] == list(block.successors)


def test_the_liveness_programs_are_stored_then_random_and_more_when_hidden():
    """Visible: the stored programs, then random ones, the same on every run; hidden: other, more random ones."""
    visible, again, hidden = _liveness_calls(False), _liveness_calls(False), _liveness_calls(True)
    stored = ex._stored_cfgs()
    assert visible == again
    assert visible[:len(stored)] == stored
    randoms = visible[len(stored):]
    assert len(hidden) > len(randoms) > 0
    assert not any(p in visible for p in hidden)


def test_the_stored_programs_have_a_loop_a_branch_and_nested_loops():
    """The stored kinds the notebook promises: a loop, a branch that joins again, and a loop inside a loop."""
    loop, branch, nested = ex._stored_cfgs()
    assert _has_back_edge(loop) and not _has_back_edge(branch) and _has_back_edge(nested)
    forks = [b for b, v in branch.items() if len(v["succ"]) == 2]
    assert forks and len({s2 for s in branch[forks[0]]["succ"] for s2 in branch[s]["succ"]}) == 1  # they join
    self_loops = [b for b, v in nested.items() if b in v["succ"]]
    order = list(nested)
    outer_back = [(b, s) for b, v in nested.items() for s in v["succ"] if order.index(s) < order.index(b)]
    assert self_loops and outer_back  # an inner loop and an outer back edge around it
    (tail, head), inner = outer_back[0], self_loops[0]
    assert order.index(head) < order.index(inner) < order.index(tail)
    for blocks in (loop, branch, nested):
        assert _reachable(blocks) == set(blocks)
        live_in, _ = ex.reference_liveness(blocks)
        assert live_in[next(iter(blocks))]  # something is read before it is written: an input


def test_the_random_programs_are_valid_connected_and_varied():
    """Random programs: every block reachable from the first, one end, some loops and straight runs."""
    stored = len(ex._stored_cfgs())
    randoms = [p for hidden in (False, True) for p in _liveness_calls(hidden)[0 if hidden else stored:]]
    for blocks in randoms:
        assert _reachable(blocks) == set(blocks)
        assert all(s in blocks for v in blocks.values() for s in v["succ"])
    assert any(_has_back_edge(p) for p in randoms) and any(not _has_back_edge(p) for p in randoms)
    assert any(any(len(v["succ"]) == 2 for v in p.values()) for p in randoms)
    assert len({len(p) for p in randoms}) > 2


def test_reference_liveness_of_the_loop_program_is_the_notebooks():
    """The hand-worked values of section 1: n is an input, s is read at the exit, i and n go round the loop."""
    live_in, live_out = ex.reference_liveness(ex._loop_program())
    assert live_in == {"entry": {"n"}, "loop": {"i", "n", "s"}, "exit": {"s"}}
    assert live_out == {"entry": {"i", "n", "s"}, "loop": {"i", "n", "s"}, "exit": set()}


def test_reference_liveness_of_a_branch_by_hand():
    """A value read on one arm only is live into the branch; a value defined on both arms is not."""
    blocks = {"top": {"use": {"x"}, "def": {"c"}, "succ": ["then", "else"]},
              "then": {"use": {"c"}, "def": {"y"}, "succ": ["join"]},
              "else": {"use": {"z"}, "def": {"y"}, "succ": ["join"]},
              "join": {"use": {"y"}, "def": set(), "succ": []}}
    live_in, live_out = ex.reference_liveness(blocks)
    assert live_in == {"top": {"x", "z"}, "then": {"c"}, "else": {"z"}, "join": {"y"}}
    assert live_out == {"top": {"c", "z"}, "then": {"y"}, "else": {"y"}, "join": set()}


# ----------------------------------------------------------------------------------------------
# exercise 2: first-fit
# ----------------------------------------------------------------------------------------------
def _walk(buffers, *, live=lambda p, f, l: p[1] <= l and f <= p[2], fits=lambda at, size, o: at + size <= o,
          by_offset=True):
    """First-fit as the notebook writes it, with one rule swapped for a mistake."""
    placed, out = [], {}
    for name, first, last, size in buffers:
        now = [(o, s) for p, o, s in placed if live(p, first, last)]
        at = 0
        for o, s in (sorted(now) if by_offset else now):
            if fits(at, size, o):
                break
            at = max(at, o + s)
        placed.append(((name, first, last), at, size))
        out[name] = at
    return out


def _best_fit(buffers):
    """Best-fit, written the learner's way: of the gaps that fit, the one with the least room left."""
    placed, out = [], {}
    for name, first, last, size in buffers:
        now = sorted((o, s) for (f, l), o, s in placed if f <= last and first <= l)
        gaps, at = [], 0
        for o, s in now:
            if o - at >= size:
                gaps.append((o - at - size, at))
            at = max(at, o + s)
        out[name] = min(gaps)[1] if gaps else at
        placed.append(((first, last), out[name], size))
    return out


def _naive(buffers):
    out, top = {}, 0
    for name, *_, size in buffers:
        out[name], top = top, top + size
    return out


def _ignores_time(buffers):
    return _walk(buffers, live=lambda p, f, l: True)


def _half_open(buffers):
    return _walk(buffers, live=lambda p, f, l: p[1] < l and f < p[2] or p[1] == f)


def _stacked(buffers):
    placed, out = [], {}
    for name, first, last, size in buffers:
        out[name] = max((o + s for (f, l), o, s in placed if f <= last and first <= l), default=0)
        placed.append(((first, last), out[name], size))
    return out


def _unsorted_walk(buffers):
    return _walk(buffers, by_offset=False)


def _exact_gap_skipped(buffers):
    return _walk(buffers, fits=lambda at, size, o: at + size < o)


def _all_at_zero(buffers):
    return {name: 0 for name, *_ in buffers}


def _highest_gap(buffers):
    """Of the gaps that fit below the live buffers, the highest one."""
    placed, out = [], {}
    for name, first, last, size in buffers:
        now = sorted((o, s) for (f, l), o, s in placed if f <= last and first <= l)
        gaps, at = [], 0
        for o, s in now:
            if o - at >= size:
                gaps.append(at)
            at = max(at, o + s)
        out[name] = max(gaps) if gaps else at
        placed.append(((first, last), out[name], size))
    return out


def _ff_raises(buffers):
    return buffers[99]


def _fixed_case(k):
    return ex._first_fit_cases()[k]


FIT_MISTAKES = [  # (wrong answer, words of the message, words of its hint)
    (_naive, "your plan is valid but is not first-fit", "You never reuse bytes"),
    (_ignores_time, "your plan is valid but is not first-fit", "You never reuse bytes"),
    (_best_fit, "your plan is valid but is not first-fit", "That is best-fit (the tightest gap)."),
    (_stacked, "your plan is valid but is not first-fit", "You put each buffer above all the live ones."),
    (_half_open, "are live at the same time but share bytes (intervals are inclusive: both are live at that "
                 "instruction). That plan would corrupt one of them.", None),
    (_all_at_zero, "are live at the same time but share bytes. That plan would corrupt one of them.", None),
    (_unsorted_walk, "are live at the same time but share bytes", None),
    (_exact_gap_skipped, "your plan is valid but is not first-fit",
     "try offset 0 and the end of every live placed buffer, lowest first"),
    (_highest_gap, "your plan is valid but is not first-fit",
     "try offset 0 and the end of every live placed buffer, lowest first"),
    (_ff_raises, "your function raised IndexError", "It should return an answer for this case."),
]


@pytest.mark.parametrize("wrong, what, hint", FIT_MISTAKES, ids=[m[0].__name__ for m in FIT_MISTAKES])
def test_each_wrong_first_fit_is_rejected_with_its_case_and_hint(wrong, what, hint):
    """A catalogued first-fit mistake fails on a named case with the reason and, for a valid plan, its hint."""
    msg = _message(mt.exercises.check_first_fit, wrong)
    assert msg.startswith("for buffers [(")
    case = msg[len("for buffers "):msg.index(":")]
    assert ast.literal_eval(case) in ex._first_fit_cases()  # the case named is one the function was called on
    assert what in msg and (hint is None or hint in msg)


@pytest.mark.parametrize("wrong, what", [m[:2] for m in FIT_MISTAKES], ids=[m[0].__name__ for m in FIT_MISTAKES])
def test_each_wrong_first_fit_is_rejected_in_the_hidden_run_too(wrong, what):
    """The hidden run (random cases only) catches every catalogued mistake as well, with the same reason."""
    msg = _message(mt.exercises.check_first_fit, wrong, hidden=True)
    assert msg.startswith("for buffers [(") and what in msg


def test_a_valid_plan_with_buffers_touching_in_memory_is_told_it_is_not_first_fit():
    """Buffers that end where another begins share no byte: valid, only not the lowest offsets."""
    case = _fixed_case(0)  # a live [0, 2] 4 B, b live [1, 3] 2 B, ...: b directly below a
    def below(args, right):
        (a, b, *rest) = args[0]
        return {**right, a[0]: b[3], b[0]: 0, **{r[0]: right[r[0]] + b[3] for r in rest}}
    msg = _message(mt.exercises.check_first_fit, _except_on(my_first_fit, 0, below))
    assert msg.startswith(f"for buffers {case}: your plan is valid but is not first-fit: the reference gives "
                          f"{ex.reference_fit(case)} (arena ")


def test_a_one_instruction_buffer_over_one_starting_with_it_is_told_intervals_are_inclusive():
    """Half-open [first, last) makes a one-instruction buffer empty: put over a buffer born at the same
    instruction, the learner is told both are live there."""
    cases = ex._first_fit_cases()
    k = next(k for k, c in enumerate(cases) if c[0][1] == c[1][1] == c[1][2] < c[0][2])
    (b, a), half_open = cases[k][:2], (lambda bf: _walk(bf, live=lambda p, f, l: p[1] < l and f < p[2]))
    msg = _message(mt.exercises.check_first_fit, _except_on(my_first_fit, k, lambda args, right: half_open(args[0])))
    assert msg.startswith(f"for buffers {cases[k]}: {b[0]} (live [{b[1]}, {b[2]}], {b[3]} B at 0) and {a[0]} (live "
                          f"[{a[1]}, {a[2]}], {a[3]} B at 0) are live at the same time but share bytes (intervals are "
                          "inclusive: both are live at that instruction). That plan would corrupt one of them.")


def test_a_first_fit_failure_names_its_case_and_the_two_buffers():
    """The sharing message names the case and both buffers with their intervals, sizes and offsets."""
    case = _fixed_case(0)
    (a, b) = case[:2]
    msg = _message(mt.exercises.check_first_fit, _all_at_zero)
    assert msg.startswith(f"for buffers {case}: {a[0]} (live [{a[1]}, {a[2]}], {a[3]} B at 0) and {b[0]} (live "
                          f"[{b[1]}, {b[2]}], {b[3]} B at 0) are live at the same time but share bytes.")
    msg = _message(mt.exercises.check_first_fit, lambda buffers: None)
    assert msg.startswith(f"for buffers {case}: your function returned None")
    msg = _message(mt.exercises.check_first_fit, _ff_raises)
    assert msg.startswith(f"for buffers {case}: your function raised IndexError")


def test_the_first_fit_pass_message_counts_the_cases_tried(capsys):
    """'all N cases right': N is how often the learner's function was called."""
    for hidden in (False, True):
        spy = _Recorder(my_first_fit)
        mt.exercises.check_first_fit(spy, hidden=hidden)
        assert _cases_counted(capsys.readouterr().out, "check_first_fit") == len(spy.calls) > 0


def test_the_first_fit_cases_are_reproducible_and_more_of_them_when_hidden():
    """The visible cases are the same on every run; the hidden ones are others, and more."""
    visible, again, hidden = _first_fit_calls(False), _first_fit_calls(False), _first_fit_calls(True)
    assert visible == again == ex._first_fit_cases()
    assert len(hidden) > len(visible) and not any(case in visible for case in hidden)


def test_the_first_first_fit_case_is_small_and_needs_reuse():
    """The first case a learner sees is a stored one to work by hand: few buffers, and first-fit reuses bytes."""
    first = _first_fit_calls(False)[0]
    assert len(first) <= 5
    want = ex.reference_fit(first)
    assert ex._arena(first, want) < sum(size for *_, size in first)


def test_the_first_fit_cases_are_valid_ordered_and_exercise_gaps():
    """Every case: distinct names, 0 ≤ first ≤ last, sizes ≥ 1, given by first instruction; among them
    cases where nothing overlaps, where intervals touch, and where a buffer goes into a gap below a live one."""
    cases = _first_fit_calls(False) + _first_fit_calls(True)
    for buffers in cases:
        assert len({n for n, *_ in buffers}) == len(buffers) >= 2
        assert all(0 <= f <= l and isinstance(s, int) and s >= 1 for _, f, l, s in buffers)
        assert [f for _, f, _, _ in buffers] == sorted(f for _, f, _, _ in buffers)
    def overlapping(b):
        return [(x, y) for i, x in enumerate(b) for y in b[:i] if x[1] <= y[2] and y[1] <= x[2]]
    assert any(not overlapping(b) for b in cases)
    assert any(x[1] == y[2] for b in cases for x, y in overlapping(b))
    def gap_below(b):
        off = ex.reference_fit(b)
        return any(off[x[0]] + x[3] <= off[y[0]] for x, y in overlapping(b))
    assert any(gap_below(b) for b in cases)


def test_reference_fit_by_hand():
    """The notebook's examples placed by hand: first-fit in time order, lowest gap."""
    wins, loses = greedy_examples()
    assert ex.reference_fit([(n, *wins[n]) for n in ("s1", "s2", "big", "s3")]) == {"s1": 0, "s2": 1, "big": 2, "s3": 0}
    assert ex.reference_fit([(n, *loses[n]) for n in ("x", "y", "z", "w")]) == {"x": 0, "y": 2, "z": 0, "w": 1}
    # a gap that fits exactly below a live buffer is taken
    assert ex.reference_fit([("a", 0, 0, 2), ("b", 0, 3, 1), ("c", 1, 3, 2)]) == {"a": 0, "b": 2, "c": 0}


def test_reference_best_fit_takes_the_tightest_gap_and_agrees_with_the_engine():
    """rule='tightest' (what the best-fit hint recognises) is the engine's best_fit, and prefers an exact gap."""
    for buffers in ex._first_fit_cases():
        prog = Program.from_intervals({n: (f, l, s) for n, f, l, s in buffers})
        assert ex.reference_fit(buffers, "tightest") == plan(prog, "best_fit").offsets
    # gaps: [0, 3) of 3 bytes and [4, 6) of 2 bytes; a 2-byte buffer: first-fit takes 0, best-fit 4
    case = [("lo", 0, 0, 3), ("p", 0, 5, 1), ("q", 0, 0, 2), ("r", 0, 5, 1), ("h", 1, 1, 2)]
    assert ex.reference_fit(case) == {"lo": 0, "p": 3, "q": 4, "r": 6, "h": 0}
    assert ex.reference_fit(case, "tightest") == {"lo": 0, "p": 3, "q": 4, "r": 6, "h": 4}


# ----------------------------------------------------------------------------------------------
# exercise 3: greedy-by-size vs first-fit
# ----------------------------------------------------------------------------------------------
def test_reference_arenas_of_the_notebooks_examples_by_hand():
    """greedy_wins: first-fit 4 B, greedy 3 B; greedy_loses: first-fit 3 B, greedy 4 B (worked in the notebook's comments)."""
    wins, loses = greedy_examples()
    assert ex.reference_arenas(wins) == (4, 3)
    assert ex.reference_arenas(loses) == (3, 4)


def test_the_greedy_pass_prints_both_arenas_and_counts_two_programs(capsys):
    """The pass tells the four arenas and counts the two programs."""
    mt.exercises.check_greedy_vs_first_fit(greedy_examples)
    out = capsys.readouterr().out
    assert "greedy-by-size wins 3 B vs first-fit's 4 B, and loses 4 B vs 3 B." in out
    assert "✓ check_greedy_vs_first_fit: all 2 cases right." in out


GREEDY_MISTAKES = [  # (wrong answer, the start of the message)
    (lambda: greedy_examples()[::-1], "greedy_wins: first-fit needs 3 B, greedy-by-size 4 B; greedy must need fewer. "
     "That is the program where greedy should LOSE: you swapped the two."),
    (lambda: ({"a": (0, 1, 4), "b": (2, 3, 4)}, greedy_examples()[1]),
     "greedy_wins: first-fit needs 4 B, greedy-by-size 4 B; greedy must need fewer. Greedy wins when"),
    (lambda: (greedy_examples()[0], greedy_examples()[0]), "greedy_loses: first-fit needs 4 B, greedy-by-size 3 B; "
     "greedy must need more."),
    (lambda: ({"a": (3, 1, 4)}, greedy_examples()[1]), "greedy_wins: buffer 'a' is live [3, 1]: it needs 0 ≤ first ≤ last."),
    (lambda: (greedy_examples()[0], {"a": (0, 1, 0)}), "greedy_loses: buffer 'a' has size 0; sizes are positive."),
    (lambda: (greedy_examples()[0], {}), "greedy_loses: give a non-empty dict {name: (first, last, size)}, got {}."),
    (lambda: ({"a": (0, 1)}, greedy_examples()[1]), "greedy_wins: buffer 'a': (first, last, size) expected, got (0, 1)."),
    (lambda: greedy_examples()[0], "your answer: return a pair (greedy_wins, greedy_loses) of programs, got {"),
    (lambda: 1 // 0, "your answer: your function raised ZeroDivisionError"),
]


@pytest.mark.parametrize("wrong, start", GREEDY_MISTAKES, ids=[
    "swapped", "a-tie-is-no-win", "loses-does-not-lose", "first-after-last", "zero-size", "empty-loses",
    "two-numbers", "one-program", "raises"])
def test_each_wrong_greedy_answer_is_rejected_with_its_program_and_reason(wrong, start):
    """A catalogued mistake of exercise 3 is told which program and why, with the arenas measured."""
    assert _message(mt.exercises.check_greedy_vs_first_fit, wrong).startswith(start)
