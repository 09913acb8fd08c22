"""Mutation run 7, ``exercises/inplace.py``, second half (since split: ``inplace_safety.py``;
notebook 07's exercise 2, ``can_run_in_place``, checked by ``check_inplace_safe``): what a
learner is shown.

* a catalogue of wrong verdict functions, each a mistake the notebook warns about (always yes,
  always no, the other factor's gradient forgotten for Mul or for Div, other ops' saves
  ignored, later readers ignored, the caller's tensor ignored, the Mul/Div rule applied to
  every binary op or whatever the other factor needs, unary variants thought to need their
  input, a program input or a non-fitting operand overwritten, a value returned that is not
  a bool, a function that raises): each is rejected on a named program and op, with the
  reason in words, the candidate's facts and the plan's own reason, visible and hidden;
* the references: ``reference_verdict`` against hand-built candidates (one rule at a time),
  the notebook's solution, the engine's ``inplace_plan`` (visible and hidden programs), and
  PyTorch running each op of the stored programs in place (it refuses what autograd saved and
  leaves that require grad; a later read sees other values; the caller's tensors change);
* the programs are the kinds the checker promises: the stored ones first (training,
  inference, a kept output, weights that need gradients, products and quotients whose other
  factor needs its gradient), each kind of refusal the only reason somewhere, then random
  ones (reproducible, other and more in the hidden run, described by their title);
* the pass message counts the calls made; the engine's plan is switched off meanwhile.

Record: tests/mutation-run-7/exercises-inplace-programs.md.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import checking
from microtorch.exercises import inplace_safety as ex
from microtorch.exercises.inplace_safety import Candidate

from checker_probes import Recorder, cases_counted, failure
from test_exercise_checkers import _solutions

can_run_in_place = _solutions("07_inplace_and_versions")["can_run_in_place"]  # the notebook's answer
check = mt.exercises.check_inplace_safe

# the stored programs, as the notebook describes them (the message's first line names the program)
LAYER = ("a layer: h = x @ W; a = h + b; r = relu(a); s = r * 3; loss = sum(s); then loss.backward()  "
         "(W, b require grad)")
SEED = ("B = A + 1; C = relu(B); D = B * C; E = softmax(D); F = D + E; out = sum(F); then out.backward()  "
        "(A requires grad)")
INFERENCE = ("the same program for inference, under mt.no_grad(): B = A + 1; C = relu(B); D = B * C; "
             "E = softmax(D); F = D + E; out = sum(F)")
HAZARD = ("z = x @ W; s = sigmoid(z); t = s * 2; u = t + 1; v = tanh(u); w = v - 0.5; loss = sum(w); "
          "then loss.backward()  (W requires grad)")
REREAD = ("h = x @ W; a = h + 1; y = relu(a); z = a + y; e = exp(x); sz = sum(z); se = sum(e); "
          "loss = sz + se; then loss.backward()  (W requires grad; x is data)")
WEIGHTS = ("h = x @ W; m = h * V; k = m * c; e = exp(k); g = sigmoid(e); q = g / 4; loss = sum(q); then "
           "loss.backward(), and the caller keeps k  (W, V require grad; c is data)")
FACTORS = ("h = x @ W; m = h * V; n = m / V; k = n * c; q = k / c; loss = sum(q); then loss.backward()  "
           "(W, V require grad; c is data)")
KNOWN = [LAYER, SEED, INFERENCE, HAZARD, REREAD, WEIGHTS, FACTORS]
# the eighth, added with the fix of the checker (an op whose own save its variant does not need, an
# operand the result does not fit, a later read through a view); the tests outside its own ones pass
# with or without it, so the generated mutants (made before the fix) can be checked with them
MIXED = ("a clamp, a broadcast and a view: h = x @ W; u = clamp(h, -1, 1); bb = b + 1; p = u + bb; q = p * u; "
         "qT = q.t() (a view of q); y = sigmoid(q); z = qT * 2; sy = sum(y); sz = sum(z); loss = sy + sz; then "
         "loss.backward()  (W, b require grad; b has shape [4])")


def _mul_rule(c):
    return c.op in ("Mul", "Div") and c.other_needs_grad


def _uses(c):
    return bool(c.saved_by or c.later_reads or c.alive_at_end)


# ----------------------------------------------------------------------------------------------
# the catalogue of wrong verdicts
# ----------------------------------------------------------------------------------------------
def _always_yes(c):
    return True


def _always_no(c):
    return False


def _ignores_the_other_factor(c):  # forgets the Mul/Div rule
    return c.fits and c.made_by_op and not _uses(c)


def _forgets_div(c):  # knows d(a·b)/db = a, forgets d(a/b)/db = -a/b²
    return c.fits and c.made_by_op and not (c.op == "Mul" and c.other_needs_grad) and not _uses(c)


def _ignores_other_saves(c):
    return c.fits and c.made_by_op and not _mul_rule(c) and not (c.later_reads or c.alive_at_end)


def _ignores_later_reads(c):
    return c.fits and c.made_by_op and not _mul_rule(c) and not (c.saved_by or c.alive_at_end)


def _ignores_the_caller(c):
    return c.fits and c.made_by_op and not _mul_rule(c) and not (c.saved_by or c.later_reads)


def _only_its_own_save(c):  # looks at saved_by_itself where saved_by is meant
    return c.fits and c.made_by_op and not _mul_rule(c) and not (c.saved_by_itself or c.later_reads or c.alive_at_end)


def _mul_rule_for_every_binary_op(c):  # add_ needs nothing, but refused like mul_
    return c.fits and c.made_by_op and not (c.other is not None and c.other_needs_grad) and not _uses(c)


def _mul_div_never_in_place(c):
    return c.fits and c.made_by_op and c.op not in ("Mul", "Div") and not _uses(c)


def _div_never_in_place(c):
    return c.fits and c.made_by_op and c.op != "Div" and not _mul_rule(c) and not _uses(c)


def _unary_variants_need_their_input(c):
    return can_run_in_place(c) and c.other is not None


def _overwrites_numbers_and_inputs(c):  # neither fits nor made_by_op looked at
    return not _mul_rule(c) and not _uses(c)


def _overwrites_program_inputs(c):  # made_by_op and alive_at_end both forgotten
    return c.fits and not _mul_rule(c) and not (c.saved_by or c.later_reads)


def _returns_none(c):
    can_run_in_place(c)


def _returns_a_word(c):
    return "yes" if can_run_in_place(c) else "no"


def _returns_an_int(c):
    return int(can_run_in_place(c))


def _raises(c):
    return {"Relu": True}[c.op]


def _asks_the_plan(c):
    return bool(mt.memory.inplace_plan([]).decisions)


YES = "\nyou said yes, but it must stay out of place: "
NO = "\nyou said no, but the plan runs it in place: "
SAVED_BY_RELU = ("Relu saved r's bytes for its backward: after mul_ they would hold different numbers, and backward "
                 "would raise \"one of the variables needed for gradient computation has been modified by an inplace "
                 "operation\".")

MISTAKES = [  # (wrong answer, the program, the op as the message names it, what it says)
    (_always_yes, LAYER, "s = mul(r, a number), written as mul_ into r:", YES + SAVED_BY_RELU),
    (_always_no, LAYER, "a = add(h, b), written as add_ into h:",
     NO + "no other op saved h or reads it later, and the caller does not keep it."),
    (_ignores_the_other_factor, SEED, "D = mul(B, C), written as mul_ into B:",
     YES + "C needs a gradient, and that gradient is g · (old B): it needs the old values of B, which mul_ "
           "would have overwritten."),
    (_forgets_div, FACTORS, "n = div(m, V), written as div_ into m:",
     YES + "V needs a gradient, and that gradient is −g · m / V²: it needs the old values of m, which div_ "
           "would have overwritten."),
    (_ignores_other_saves, LAYER, "s = mul(r, a number), written as mul_ into r:", YES + SAVED_BY_RELU),
    (_only_its_own_save, LAYER, "s = mul(r, a number), written as mul_ into r:", YES + SAVED_BY_RELU),
    (_ignores_later_reads, INFERENCE, "C = relu(B), written as relu_ into B:",
     YES + "Mul reads B later: it would see the result of C = relu(B) instead of B."),
    (_ignores_the_caller, WEIGHTS, "e = exp(k), written as exp_ into k:",
     YES + "the caller still holds k when the program ends: it would find different numbers in it."),
    (_mul_rule_for_every_binary_op, LAYER, "a = add(h, b), written as add_ into h:",
     NO + "no other op saved h or reads it later, and the caller does not keep it."),
    (_mul_div_never_in_place, INFERENCE, "D = mul(B, C), written as mul_ into B:",
     NO + "mul_ needs only C for the gradient, and C needs no gradient of its own; no other op saved B or "
          "reads it later, and the caller does not keep it."),
    (_div_never_in_place, FACTORS, "q = div(k, c), written as div_ into k:",
     NO + "div_ needs only c for the gradient, and c needs no gradient of its own; no other op saved k or "
          "reads it later, and the caller does not keep it."),
    (_unary_variants_need_their_input, LAYER, "r = relu(a), written as relu_ into a:",
     NO + "no other op saved a or reads it later, and the caller does not keep it."),
    (_overwrites_numbers_and_inputs, SEED, "B = add(A, a number), written as add_ into a number:",
     YES + "the result of B = add(A, a number) does not have a number's shape and dtype: it does not fit in "
           "a number's bytes."),
    (_overwrites_program_inputs, SEED, "B = add(A, a number), written as add_ into A:",
     YES + "A is an input of the program (data or a parameter), not made by one of its ops: overwriting it "
           "would change the caller's tensor."),
    (_returns_none, LAYER, "a = add(h, b), written as add_ into h:",
     "\nyour function returned None: did you forget `return`? Return True (it can run in place) or False."),
    (_returns_a_word, LAYER, "a = add(h, b), written as add_ into h:",
     "\nyour function returned 'yes'; return True or False."),
    (_returns_an_int, LAYER, "a = add(h, b), written as add_ into h:",
     "\nyour function returned 1; return True or False."),
    (_raises, LAYER, "a = add(h, b), written as add_ into h:",
     " your function raised KeyError: 'Add'\n(called as fn(Candidate(line='a = add(h, b)', op='Add', "
     "method='add_', overwrites='h', other='b', fits=True, made_by_op=True, other_needs_grad=True, "
     "saved_by_itself=False, saved_by=(), later_reads=(), alive_at_end=False))). It should return an "
     "answer for this case."),
]
IDS = [m[0].__name__.lstrip("_") for m in MISTAKES]


@pytest.mark.parametrize("wrong, program, op, says", MISTAKES, ids=IDS)
def test_each_wrong_verdict_is_rejected_with_its_program_op_and_reason(wrong, program, op, says):
    """A catalogued mistake fails on its first wrong op: the program, the op and its variant, why."""
    msg = failure(check, wrong)
    assert msg.startswith(f"in the program: {program}\nfor {op}{says}")


@pytest.mark.parametrize("wrong, program, op, says", MISTAKES, ids=IDS)
def test_each_wrong_verdict_is_rejected_in_the_hidden_run_too(wrong, program, op, says):
    """The hidden run tries the stored programs too: the same first wrong op, the same words."""
    msg = failure(check, wrong, hidden=True)
    assert msg.startswith(f"in the program: {program}\nfor {op}{says}")


def test_a_wrong_verdict_shows_the_facts_and_the_plans_own_reason():
    """After the reason: 'The facts:' (the candidate as printed) and 'The plan:' (inplace_plan's reason)."""
    msg = failure(check, _always_yes)
    facts = msg.split("\nThe facts:\n", 1)[1]
    assert facts.startswith("s = mul(r, a number)  ->  mul_ into r?\n"
                            "  fits (same shape and dtype)  : True\n"
                            "  made by an op of the program : True\n"
                            "  other operand                : a number (needs no gradient)\n"
                            "  saved by this op itself      : False\n"
                            "  saved by other ops           : Relu\n"
                            "  read later by                : none\n"
                            "  alive when the program ends  : False\nThe plan: ")
    plan = facts.split("\nThe plan: ", 1)[1]
    assert re.fullmatch(r"input 0 \(t\d+\): Relu \(node \d+, op event at step \d+\) saves storage #\d+ for "
                        r"backward: overwriting it would corrupt that gradient; input 1 \(t\d+\): the result "
                        r"\(float64 \[4, 5\]\) does not fit the input's shape and dtype \(float64 \[\]\)", plan)
    msg = failure(check, _always_no)
    assert re.search(r"\nThe facts:\na = add\(h, b\)  ->  add_ into h\?\n(.*\n){7}The plan: writes its result into "
                     r"t\d+'s storage #\d+: nothing uses those bytes afterwards, and add_ needs no values for "
                     r"backward$", msg)


def test_a_value_of_the_wrong_type_gets_no_facts():
    """None, a word, an int: the message asks for True or False and shows no verdict or facts."""
    for wrong in (_returns_none, _returns_a_word, _returns_an_int):
        msg = failure(check, wrong)
        assert "The facts:" not in msg and "you said" not in msg and "The plan:" not in msg


def test_numpy_bools_are_accepted(capsys):
    """np.bool_ (what a comparison of numpy values gives) counts as a bool."""
    check(lambda c: np.bool_(can_run_in_place(c)))
    assert "✓ check_inplace_safe: all" in capsys.readouterr().out


def _flip_at(k):
    """The notebook's answer, except on the k-th call, where it says the opposite."""
    seen = [0]

    def answer(c):
        i, seen[0] = seen[0], seen[0] + 1
        return can_run_in_place(c) != (i == k)
    return answer


def test_each_stored_program_is_named_when_a_verdict_on_it_is_wrong():
    """Wrong only on the first op of the k-th stored program: the message names that program."""
    firsts, seen = [], 0
    calls = _calls(False)
    for title, run in _programs(False)[:_n_stored()]:
        firsts.append(seen)
        seen += len(ex.candidates(run()))
    assert len(calls) > seen
    for title, k in zip(_stored(False), firsts):
        c = calls[k]
        msg = failure(check, _flip_at(k))
        assert msg.startswith(f"in the program: {title}\nfor {c.line}, written as {c.method} into {c.overwrites}:\n"
                              f"you said {'no' if can_run_in_place(c) else 'yes'}")


def test_a_wrong_verdict_on_a_random_program_names_it():
    """Past the stored programs, the message names 'random program #1: v0 = x @ W; ...'."""
    stored = sum(len(ex.candidates(run())) for _, run in _programs(False)[:_n_stored()])
    for hidden in (False, True):
        msg = failure(check, _flip_at(stored), hidden=hidden)
        assert msg.startswith("in the program: random program #1: v0 = x @ W; v1 = ")
        assert "; then loss.backward()  (W" in msg.split("\n")[0]


def test_the_pass_message_counts_the_calls(capsys):
    """'all N cases right': N is how often the learner's function was called; more in the hidden run."""
    counts = []
    for hidden in (False, True):
        spy = Recorder(can_run_in_place)
        check(spy, hidden=hidden)
        out = capsys.readouterr().out
        assert cases_counted(out, "check_inplace_safe") == len(spy.calls)
        assert out.rstrip().endswith("(the hidden ones).") == hidden
        counts.append(len(spy.calls))
    assert counts[1] > counts[0] > 40


def test_the_plan_is_switched_off_while_the_learners_function_runs_and_back_on_after():
    """inplace_plan, _decide and _refusal refuse calls from the learner's function; they work afterwards."""
    from microtorch.memory import inplace_analysis as ia

    for target in (lambda: mt.memory.inplace_plan([]), lambda: ia.inplace_plan([]),
                   lambda: ia._decide(0, {}, [], 0, {}, {}), lambda: ia._refusal({}, 0, [], {}, {}, {})):
        msg = failure(check, lambda c, target=target: target())
        assert "this exercise asks you to write can_run_in_place yourself" in msg
    assert mt.memory.inplace_plan([]).decisions == []


# ----------------------------------------------------------------------------------------------
# the programs the checker records
# ----------------------------------------------------------------------------------------------
def _programs(hidden: bool):
    before, checking._HIDDEN[0] = checking._HIDDEN[0], hidden
    try:
        return ex._inplace_programs()
    finally:
        checking._HIDDEN[0] = before


def _stored(hidden: bool) -> list:
    """The titles of the stored programs (those before the random ones)."""
    titles = [t for t, _ in _programs(hidden)]
    return titles[:[t.startswith("random program") for t in titles].index(True)]


def _n_stored() -> int:
    return len(_stored(False))


def _calls(hidden: bool) -> list:
    spy = Recorder(can_run_in_place)
    check(spy, hidden=hidden)
    return [args[0] for args in spy.calls]


def _facts(calls) -> list:
    """The candidates with their trace ids (t<id>, which count on) taken out."""
    return [re.sub(r"\bt\d+", "t#", str(c)) for c in calls]


@pytest.fixture(autouse=True, scope="module")
def _let_the_cached_graphs_go():
    """The cache lives as long as this file's tests: the suite's later tests (the pictures count live
    storages) must not see its tensors."""
    yield
    _by_program.cache_clear()
    import gc
    gc.collect()


@functools.cache
def _by_program(hidden: bool):
    """[(title, the checker's cases)] per program (recorded once per test process)."""
    return [(title, ex._cases(run())) for title, run in _programs(hidden)]


def _first_reason(c) -> str:
    for reason, fails in (("fits", not c.fits), ("made_by_op", not c.made_by_op), ("other factor", _mul_rule(c)),
                          ("saved", bool(c.saved_by)), ("later", bool(c.later_reads)), ("alive", c.alive_at_end)):
        if fails:
            return reason
    return "none"


def _reasons(c) -> set:
    return {r for r, fails in (("fits", not c.fits), ("made_by_op", not c.made_by_op), ("other factor", _mul_rule(c)),
                               ("saved", bool(c.saved_by)), ("later", bool(c.later_reads)),
                               ("alive", c.alive_at_end)) if fails}


def test_the_programs_are_the_stored_ones_then_random_ones_other_and_more_when_hidden(capsys):
    """Visible: the stored programs in order, then a few random ones; hidden: the stored ones, then more,
    other random ones; the same on every run."""
    visible, hidden, n = _programs(False), _programs(True), _n_stored()
    assert _stored(False) == _stored(True)
    assert _stored(False)[:len(KNOWN)] == KNOWN and _stored(False)[len(KNOWN):] in ([], [MIXED])
    vr, hr = [t for t, _ in visible[n:]], [t for t, _ in hidden[n:]]
    assert [t.split(":")[0] for t in vr] == [f"random program #{k}" for k in range(1, len(vr) + 1)]
    assert [t.split(":")[0] for t in hr] == [f"random program #{k}" for k in range(1, len(hr) + 1)]
    assert len(hr) > len(vr) >= 3
    assert not set(vr) & set(hr)
    assert [t for t, _ in _programs(False)] == [t for t, _ in visible]
    assert _facts(_calls(False)) == _facts(_calls(False))
    assert _facts(_calls(True)) != _facts(_calls(False))


def test_every_program_has_candidates_and_the_stored_ones_both_verdicts():
    """Each stored program has an op that can run in place and one that cannot; every program is judged."""
    for hidden in (False, True):
        for title, cases in _by_program(hidden):
            assert cases, title
            if not title.startswith("random program"):
                assert {ex.reference_verdict(c) for c, _, _ in cases} == {True, False}, title


def test_training_inference_a_kept_output_and_weights_are_among_the_stored_programs():
    """The docstring's kinds: training (autograd's saves block), the same program for inference (no
    saves: the same op is then safe), a kept output, weights that need gradients."""
    progs = dict(_by_program(False))
    train, infer = progs[SEED], progs[INFERENCE]
    assert any(c.saved_by for c, _, _ in train) and not any(c.saved_by for c, _, _ in infer)
    assert not any("during backward" in r for c, _, _ in infer for r in c.later_reads)
    safe = lambda cases: {(c.line, c.overwrites) for c, _, _ in cases if ex.reference_verdict(c)}
    assert safe(infer) > safe(train) - {("B = add(A, a number)", "A")}
    assert ("D = mul(B, C)", "B") in safe(infer) - safe(train)
    kept = [c for c, _, _ in progs[WEIGHTS] if c.alive_at_end and c.made_by_op]
    assert [c.overwrites for c in kept] == ["k"]
    weights = [c for c, _, _ in progs[WEIGHTS] if c.other == "V"]
    assert weights and all(c.other_needs_grad for c in weights)


def test_products_and_quotients_whose_other_factor_needs_its_gradient():
    """Mul and Div each kept out of place only because the other factor needs its gradient; and each
    run in place when it does not."""
    cases = [c for _, cs in _by_program(False) for c, _, _ in cs]
    only = [c for c in cases if _reasons(c) == {"other factor"}]
    assert {c.op for c in only} == {"Mul", "Div"}
    assert sum(c.op == "Div" for c in only) >= 1 and sum(c.op == "Mul" for c in only) >= 1
    free = [c for c in cases if c.op in ("Mul", "Div") and c.other not in (None, "a number")
            and not c.other_needs_grad and ex.reference_verdict(c)]
    assert {c.op for c in free} == {"Mul", "Div"}


def test_every_kind_of_refusal_is_the_first_reason_somewhere():
    """Each rule is the first one that refuses some visible op (so each explanation is shown to someone)."""
    first = {_first_reason(c) for _, cs in _by_program(False) for c, _, _ in cs}
    assert first == {"fits", "made_by_op", "other factor", "saved", "later", "alive", "none"}


def test_saved_later_and_alive_are_each_the_only_reason_somewhere():
    """The use rules are each the only reason for some visible op: dropping one of them is caught."""
    only = {next(iter(_reasons(c))) for _, cs in _by_program(False) for c, _, _ in cs if len(_reasons(c)) == 1}
    assert {"other factor", "saved", "later", "alive"} <= only


_VARIANT_OPS = {"add", "sub", "mul", "div", "relu", "exp", "sigmoid", "tanh", "clamp"}


def _statements(title):
    """A stored program's title as {name: (op, operands)} (numbers as "a number"), and its last clause."""
    body, _, clause = title.rpartition("  (") if "  (" in title else (title, "", "")
    body = body.split("; then ")[0]
    if ": " in body.split(" = ")[0]:
        body = body.split(": ", 1)[1]
    num = lambda a: "a number" if re.fullmatch(r"-?[\d.]+", a) else a
    out = {}
    for st in body.split("; "):
        name, expr = st.split(" = ", 1)
        for pattern, op in ((r"(\w+) @ (\w+)", "matmul"), (r"(\w+|[\d.]+) \+ (\w+|[\d.]+)", "add"),
                            (r"(\w+|[\d.]+) - (\w+|[\d.]+)", "sub"), (r"(\w+|[\d.]+) \* (\w+|[\d.]+)", "mul"),
                            (r"(\w+|[\d.]+) / (\w+|[\d.]+)", "div"), (r"clamp\((\w+), -1, 1\)", "clamp"),
                            (r"(\w+)\.t\(\) \(a view of \w+\)", "t"), (r"(relu|exp|sigmoid|tanh|softmax|sum)\((\w+)\)", None)):
            m = re.fullmatch(pattern, expr)
            if m:
                args = m.groups()
                if op is None:
                    op, args = args[0], args[1:]
                out[name] = (op, tuple(num(a) for a in args))
                break
        else:
            raise AssertionError(f"cannot read {st!r} of {title!r}")
    return out, clause.rstrip(")")


def test_each_stored_program_is_what_its_title_says():
    """The title's statements are the recorded ops: every op with an in-place variant is judged, on the
    operands the title names; the values the title says require grad are the leaves that do; 'then
    loss.backward()' means a backward ran, 'under mt.no_grad()' that nothing was saved, 'the caller
    keeps k' that k is alive at the end."""
    for title, run in _programs(False)[:_n_stored()]:
        stmts, clause = _statements(title)
        tr = run()
        cases = ex._cases(tr)
        named = {}
        for c, _, _ in cases:
            lhs, rest = c.line.split(" = ", 1)
            op, args = re.fullmatch(r"(\w+)\((.*)\)", rest).groups()
            named.setdefault(lhs, (op, tuple(args.split(", "))))
        assert named == {n: st for n, st in stmts.items() if st[0] in _VARIANT_OPS}, title
        tensors = {e["name"]: e for e in tr.events if e["kind"] == "tensor" and e.get("name")}
        ids = {e["tensor"]: e.get("name") for e in tr.events if e["kind"] == "tensor"}
        made_by = {ids.get(e["output"]): e["op"].lower() for e in tr.events if e["kind"] == "op" and e["phase"] == "forward"}
        assert all(made_by.get(n, "").startswith(st[0]) for n, st in stmts.items()), (title, made_by)
        leaves = {a for _, args in stmts.values() for a in args if a not in stmts and a != "a number"}
        needs = set(re.split(r", | and ", re.split(r" requires? grad", clause)[0])) if " grad" in clause else set()
        assert {n for n in leaves if tensors[n]["requires_grad"]} == needs and needs <= leaves, title
        assert all(tensors[n]["is_leaf"] for n in leaves), title
        ops = [e for e in tr.events if e["kind"] == "op"]
        assert any(e["phase"] == "backward" for e in ops) == ("backward()" in title), title
        if "no_grad" in title:
            assert not any(e["saved"] for e in ops) and not needs
        shapes = dict(re.findall(r"(\w+) has shape (\[[\d, ]*\])", clause))
        assert all(str(tensors[n]["shape"]) == sh for n, sh in shapes.items()), title
        kept = re.findall(r"the caller keeps (\w+)", title)
        alive = {c.overwrites for c, _, _ in cases if c.alive_at_end and c.made_by_op}
        assert alive == set(kept), title


def _steps(title):
    """The random program's statements: [(name, op, operand)] from its title."""
    body = title.split(": ", 1)[1].split("; loss = sum(")[0]
    out = []
    for st in body.split("; ")[1:]:
        name, expr = st.split(" = ", 1)
        m = re.fullmatch(r"(relu|sigmoid|tanh)\((v\d+)\)", expr)
        if m:
            out.append((name, m.group(1), m.group(2), None))
            continue
        m = re.fullmatch(r"exp\((v\d+) \* 0\.1\)", expr)
        if m:
            out.append((name, "exp", m.group(1), None))
            continue
        m = re.fullmatch(r"(v\d+) ([*+]) (V|c|v0)", expr)
        if m:
            out.append((name, {"*": "mul", "+": "add"}[m.group(2)], m.group(1), m.group(3)))
            continue
        m = re.fullmatch(r"(v\d+) / \((V|c) \* \2 \+ 1\)", expr)
        assert m, st
        out.append((name, "div", m.group(1), m.group(2)))
    return out


def test_the_random_programs_are_what_their_title_says():
    """Each statement of a random program's title is an op of the recorded program, on the values named,
    in order (v1 from v0, v2 from v1, ...), and 'V requires grad' matches the candidates."""
    for hidden in (False, True):
        for title, cases in _by_program(hidden)[_n_stored():]:
            steps = _steps(title)
            assert steps, title
            assert title.endswith(f"; loss = sum(v{len(steps)}); then loss.backward()  "
                                  f"({'W, V require grad' if 'V require' in title else 'W requires grad, V does not'}"
                                  "; x, c are data)")
            lines = [c.line for c, _, _ in cases]
            for k, (name, op, a, other) in enumerate(steps, 1):
                assert name == f"v{k}" and a == f"v{k - 1}", title
                mine = [c for c, _, _ in cases if c.line.startswith(f"{name} = ")]
                if op in ("relu", "sigmoid", "tanh"):
                    assert f"{name} = {op}({a})" in lines, (title, name)
                elif op == "exp":  # exp(a * 0.1): the product, then its exp
                    (arg,) = re.fullmatch(rf"{name} = exp\((t\d+)\)", mine[0].line).groups()
                    assert f"{arg} = mul({a}, a number)" in lines, (title, name)
                elif op == "div":  # a / (O * O + 1): the square, plus one, then the quotient
                    (den,) = re.fullmatch(rf"{name} = div\({a}, (t\d+)\)", mine[0].line).groups()
                    (sq,) = [re.fullmatch(rf"{den} = add\((t\d+), a number\)", x).group(1) for x in lines
                             if x.startswith(f"{den} = ")]
                    assert f"{sq} = mul({other}, {other})" in lines, (title, name)
                    needs = "W, V require grad" in title and other == "V"
                    assert mine[0].other_needs_grad == needs, (title, name)
                else:
                    assert mine and mine[0].line == f"{name} = {op}({a}, {other})", (title, name)
                    needs = other == "V" and "W, V require grad" in title or other == "v0"
                    assert mine[0].other_needs_grad == needs, (title, name)


def test_the_random_programs_leaves_and_loss_are_what_their_title_says():
    """x and c are data, W requires grad, V as the title says; loss = sum(v<last>), then a backward."""
    for hidden in (False, True):
        for title, run in _programs(hidden)[_n_stored():]:
            tr = run()
            tensors = {e["name"]: e for e in tr.events if e["kind"] == "tensor" and e.get("name")}
            grads = {n: tensors[n]["requires_grad"] for n in ("x", "W", "V", "c") if n in tensors}
            want = {"x": False, "W": True, "V": "W, V require grad" in title, "c": False}
            assert grads == {n: want[n] for n in grads} and {"x", "W"} <= set(grads), title
            assert all(tensors[n]["is_leaf"] for n in grads)
            ops = [e for e in tr.events if e["kind"] == "op"]
            ids = {e["tensor"]: e.get("name") for e in tr.events if e["kind"] == "tensor"}
            last = [e for e in ops if e["phase"] == "forward"][-1]
            assert last["op"] == "Sum" and ids[last["output"]] == "loss", title
            assert [ids[t] for t in last["inputs"]] == [f"v{len(_steps(title))}"], title
            assert any(e["phase"] == "backward" for e in ops), title


def test_the_random_programs_vary():
    """Over the visible and hidden random programs: every op, V with and without a gradient, a reuse of v0,
    and both verdicts among their candidates."""
    titles = [t for h in (False, True) for t, _ in _programs(h)[_n_stored():]]
    ops = {(op, other) for t in titles for _, op, _, other in _steps(t)}
    assert {o for o, _ in ops} == {"relu", "exp", "sigmoid", "tanh", "mul", "div", "add"}
    assert {("mul", "V"), ("mul", "c"), ("div", "V"), ("div", "c"), ("add", "c"), ("add", "v0")} <= ops
    assert any("W, V require grad" in t for t in titles) and any("V does not" in t for t in titles)
    verdicts = {ex.reference_verdict(c) for h in (False, True) for _, cs in _by_program(h)[_n_stored():]
                for c, _, _ in cs}
    assert verdicts == {True, False}


# ----------------------------------------------------------------------------------------------
# the reference
# ----------------------------------------------------------------------------------------------
def _cand(**changes):
    base = dict(line="y = mul(x, w)", op="Mul", method="mul_", overwrites="x", other="w", fits=True,
                made_by_op=True, other_needs_grad=False, saved_by_itself=False, saved_by=(), later_reads=(),
                alive_at_end=False)
    base.update(changes)
    return Candidate(**base)


@pytest.mark.parametrize("changes, verdict", [
    ({}, True),
    ({"fits": False}, False),
    ({"made_by_op": False}, False),
    ({"other_needs_grad": True}, False),
    ({"op": "Div", "method": "div_", "other_needs_grad": True}, False),
    ({"op": "Div", "method": "div_"}, True),
    ({"op": "Add", "method": "add_", "other_needs_grad": True}, True),
    ({"op": "Sub", "method": "sub_", "other_needs_grad": True}, True),
    ({"saved_by": ("Sigmoid",)}, False),
    ({"later_reads": ("Add",)}, False),
    ({"alive_at_end": True}, False),
    ({"saved_by_itself": True}, True),
    ({"op": "Relu", "method": "relu_", "other": None, "saved_by_itself": True}, True),
    ({"op": "Relu", "method": "relu_", "other": None, "later_reads": ("Mul through t3",)}, False),
], ids=lambda v: str(v))
def test_reference_verdict_one_rule_at_a_time(changes, verdict):
    """Hand-built candidates: every rule refuses on its own; the other factor matters for Mul and Div only;
    the op's own save does not refuse."""
    assert ex.reference_verdict(_cand(**changes)) is verdict
    assert can_run_in_place(_cand(**changes)) is verdict


def test_reference_verdict_agrees_with_the_notebook_and_the_engines_plan_visible_and_hidden():
    """On every candidate of every program: the notebook's answer and inplace_plan's decision."""
    n = 0
    for hidden in (False, True):
        for title, cases in _by_program(hidden):
            for c, plan_says, d in cases:
                assert ex.reference_verdict(c) == can_run_in_place(c) == plan_says, (title, c.line, d.reason)
                n += 1
    assert n > 150


# PyTorch as an oracle: the stored programs written for torch, each op runnable in place (torch is
# imported by the test itself, so that the file's other tests start without it)
torch = None

_TORCH = {  # title -> (leaves {name: (shape, requires_grad)}, steps [(out, op, *args)], kept, training)
    LAYER: ({"x": ((4, 3), False), "W": ((3, 5), True), "b": ((5,), True)},
            [("h", "matmul", "x", "W"), ("a", "add", "h", "b"), ("r", "relu", "a"), ("s", "mul", "r", 3.0),
             ("loss", "sum", "s")], [], True),
    SEED: ({"A": ((4, 5), True)},
           [("B", "add", "A", 1.0), ("C", "relu", "B"), ("D", "mul", "B", "C"), ("E", "softmax", "D"),
            ("F", "add", "D", "E"), ("out", "sum", "F")], [], True),
    INFERENCE: ({"A": ((4, 5), False)},
                [("B", "add", "A", 1.0), ("C", "relu", "B"), ("D", "mul", "B", "C"), ("E", "softmax", "D"),
                 ("F", "add", "D", "E"), ("out", "sum", "F")], [], False),
    HAZARD: ({"x": ((3, 4), False), "W": ((4, 4), True)},
             [("z", "matmul", "x", "W"), ("s", "sigmoid", "z"), ("t", "mul", "s", 2.0), ("u", "add", "t", 1.0),
              ("v", "tanh", "u"), ("w", "sub", "v", 0.5), ("loss", "sum", "w")], [], True),
    REREAD: ({"x": ((2, 3), False), "W": ((3, 3), True)},
             [("h", "matmul", "x", "W"), ("a", "add", "h", 1.0), ("y", "relu", "a"), ("z", "add", "a", "y"),
              ("e", "exp", "x"), ("sz", "sum", "z"), ("se", "sum", "e"), ("loss", "add", "sz", "se")], [], True),
    WEIGHTS: ({"x": ((3, 4), False), "W": ((4, 4), True), "V": ((3, 4), True), "c": ((3, 4), False)},
              [("h", "matmul", "x", "W"), ("m", "mul", "h", "V"), ("k", "mul", "m", "c"), ("e", "exp", "k"),
               ("g", "sigmoid", "e"), ("q", "div", "g", 4.0), ("loss", "sum", "q")], ["k"], True),
    FACTORS: ({"x": ((3, 4), False), "W": ((4, 4), True), "V": ((3, 4), True), "c": ((3, 4), False)},
              [("h", "matmul", "x", "W"), ("m", "mul", "h", "V"), ("n", "div", "m", "V"), ("k", "mul", "n", "c"),
               ("q", "div", "k", "c"), ("loss", "sum", "q")], [], True),
    MIXED: ({"x": ((3, 4), False), "W": ((4, 4), True), "b": ((4,), True)},
            [("h", "matmul", "x", "W"), ("u", "clamp", "h"), ("bb", "add", "b", 1.0), ("p", "add", "u", "bb"),
             ("q", "mul", "p", "u"), ("qT", "t", "q"), ("y", "sigmoid", "q"), ("z", "mul", "qT", 2.0),
             ("sy", "sum", "y"), ("sz", "sum", "z"), ("loss", "add", "sy", "sz")], [], True),
}
_OUT = {"matmul": lambda a, b: a @ b, "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b, "div": lambda a, b: a / b, "relu": lambda a: a.relu(),
        "sigmoid": lambda a: a.sigmoid(), "tanh": lambda a: a.tanh(), "exp": lambda a: a.exp(),
        "softmax": lambda a: a.softmax(1), "sum": lambda a: a.sum(), "t": lambda a: a.t(),
        "clamp": lambda a: a.clamp(-1.0, 1.0)}
_INPLACE = {"clamp": lambda a: a.clamp_(-1.0, 1.0)}


def _torch_run(spec, inplace=None):
    """Run the program in torch, op ``inplace = (out, position)`` as its in-place variant. Returns
    ("raised", message) or ("ran", what every op read, the loss, the gradients, the caller's tensors)."""
    shapes, steps, kept, training = spec
    gen = torch.Generator().manual_seed(3)
    leaves = {n: torch.randn(*s, dtype=torch.float64, generator=gen).requires_grad_(g) for n, (s, g) in shapes.items()}
    env, reads = dict(leaves), []
    try:
        with torch.enable_grad() if training else torch.no_grad():
            for out, op, *args in steps:
                vals = [env[a] if isinstance(a, str) else a for a in args]
                reads.append([v.detach().clone() for v in vals if isinstance(v, torch.Tensor)])
                if inplace is not None and inplace[0] == out:
                    p = inplace[1]
                    target = vals[p] if isinstance(vals[p], torch.Tensor) else torch.tensor(vals[p], dtype=torch.float64)
                    rest = [v for i, v in enumerate(vals) if i != p]
                    ip = _INPLACE.get(op) or (lambda t, *r: getattr(t, op + "_")(*r))
                    env[out] = ip(target, *rest)  # add_/mul_ into the second operand: commutative
                else:
                    env[out] = _OUT[op](*vals)
            loss = env[steps[-1][0]]
            if training:
                loss.backward()
    except RuntimeError as e:
        return ("raised", str(e))
    grads = [leaves[n].grad for n in shapes if shapes[n][1] and training]
    caller = [leaves[n].detach().clone() for n in shapes] + [env[k].detach().clone() for k in kept]
    return ("ran", reads, float(loss.detach()), grads, caller)


def _same(a, b):
    if a[0] != b[0] or a[0] == "raised":
        return False
    (_, ra, la, ga, ca), (_, rb, lb, gb, cb) = a, b
    return (all(len(x) == len(y) and all(torch.allclose(u, v) for u, v in zip(x, y)) for x, y in zip(ra, rb))
            and np.isclose(la, lb) and all(torch.allclose(u, v) for u, v in zip(ga, gb))
            and all(torch.allclose(u, v) for u, v in zip(ca, cb)))


def test_reference_verdict_agrees_with_pytorch_running_the_op_in_place():
    """Each op of the stored programs run in place in PyTorch: where the reference says yes, torch runs it
    with every read, the loss, the gradients and the caller's tensors unchanged; where it says no, the
    first reason shows in torch: autograd's "modified by an inplace operation", the leaf error, a shape
    error, a later read that sees other values, a caller's tensor changed. (Only the Mul/Div rule is
    microtorch's own: torch keeps a copy of the old values there, and gets the same numbers.)"""
    global torch
    torch = pytest.importorskip("torch")
    seen, raised_by_backward = set(), 0
    for title, cases in _by_program(False)[:_n_stored()]:
        spec = _TORCH[title]
        steps = {s[0]: s for s in spec[1]}
        plain = _torch_run(spec)
        assert plain[0] == "ran"
        for c, _, _ in cases:
            out, args = c.line.split(" = ", 1)
            step = steps[out]
            names = [a if isinstance(a, str) else "a number" for a in step[2:]]
            assert c.line == f"{out} = {step[1]}({', '.join(names)})", (title, c.line)
            got = _torch_run(spec, (out, names.index(c.overwrites)))
            reason = _first_reason(c)
            seen.add(reason)
            if ex.reference_verdict(c):
                assert _same(got, plain), (title, c.line, c.overwrites, got[:2])
            elif reason == "fits":
                assert got[0] == "raised" and "doesn't match the broadcast shape" in got[1], (title, c.line)
            elif reason == "made_by_op" and c.overwrites in [n for n, (_, g) in spec[0].items() if g] and spec[3]:
                assert got[0] == "raised" and "a leaf Variable that requires grad" in got[1], (title, c.line)
            elif _reasons(c) == {"other factor"}:
                assert _same(got, plain), (title, c.line)  # torch saved a copy of the old values
            else:  # saved, made_by_op (data), later, alive: backward raises, or something reads or keeps other numbers
                modified = got[0] == "raised" and "modified by an inplace operation" in got[1]
                raised_by_backward += modified and reason == "saved"
                assert modified or (got[0] == "ran" and not _same(got, plain)), (title, c.line, reason)
    assert seen == {"fits", "made_by_op", "other factor", "saved", "later", "alive", "none"}
    assert raised_by_backward >= 3


# ----------------------------------------------------------------------------------------------
# the fix: the eighth stored program (these tests fail on the code before it)
# ----------------------------------------------------------------------------------------------
def _ignores_fits(c):  # forgets that the result must fit the overwritten operand
    return c.made_by_op and not _mul_rule(c) and not _uses(c)


def _refuses_its_own_save(c):  # thinks the op's own save of its input blocks the variant too
    return can_run_in_place(c) and not c.saved_by_itself


def _ignores_reads_through_a_view(c):
    return (c.fits and c.made_by_op and not _mul_rule(c)
            and not (c.saved_by or [r for r in c.later_reads if " through " not in r] or c.alive_at_end))


FIXED_MISTAKES = [
    (_ignores_fits, "p = add(u, bb), written as add_ into bb:",
     YES + "the result of p = add(u, bb) does not have bb's shape and dtype: it does not fit in bb's bytes."),
    (_refuses_its_own_save, "u = clamp(h), written as clamp_ into h:",
     NO + "Clamp saved its input, but the in-place variant does not need it: clamp_'s backward does not need "
          "the old values; no other op saved h or reads it later, and the caller does not keep it."),
    (_ignores_reads_through_a_view, "y = sigmoid(q), written as sigmoid_ into q:",
     YES + "Mul through qT reads q later: it would see the result of y = sigmoid(q) instead of q."),
]


@pytest.mark.parametrize("wrong, op, says", FIXED_MISTAKES, ids=[m[0].__name__.lstrip("_") for m in FIXED_MISTAKES])
@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_the_clamp_broadcast_view_program_rejects_what_the_others_let_through(wrong, op, says, hidden):
    """Forgetting c.fits, refusing whenever the op saved its own input, ignoring a read through another
    view: each passed the seven other programs; the eighth rejects it, visible and hidden."""
    msg = failure(check, wrong, hidden=hidden)
    assert msg.startswith(f"in the program: {MIXED}\nfor {op}{says}")


def test_the_clamp_broadcast_view_program_is_the_eighth_stored_one():
    """After the seven, before the random ones; with fits and the use rules each the only reason
    somewhere, and an op whose own save does not keep it out of place."""
    assert _stored(False) == KNOWN + [MIXED] == _stored(True)
    cases = [c for _, cs in _by_program(False) for c, _, _ in cs]
    only = {next(iter(_reasons(c))) for c in cases if len(_reasons(c)) == 1}
    assert {"fits", "other factor", "saved", "later", "alive"} <= only
    assert any(c.saved_by_itself and ex.reference_verdict(c) for c in cases)
    assert any(" through " in r for c in cases if _reasons(c) == {"later"} for r in c.later_reads)


def test_a_candidate_prints_every_fact_in_words():
    """The facts a learner reads for one candidate: a binary op whose other operand needs a gradient,
    two other savers and two later reads (joined with ", "); with neither, "none"."""
    c = Candidate(line="C = A * W", op="Mul", method="mul_", overwrites="A", other="W", fits=True,
                  made_by_op=True, other_needs_grad=True, saved_by_itself=True,
                  saved_by=("Exp", "Relu"), later_reads=("Sum", "Mean"), alive_at_end=False)
    assert str(c).splitlines() == [
        "C = A * W  ->  mul_ into A?",
        "  fits (same shape and dtype)  : True",
        "  made by an op of the program : True",
        "  other operand                : W (needs gradient)",
        "  saved by this op itself      : True",
        "  saved by other ops           : Exp, Relu",
        "  read later by                : Sum, Mean",
        "  alive when the program ends  : False",
    ]
    quiet = Candidate(line="C = A + 1", op="Add", method="add_", overwrites="A", other="a number", fits=True,
                      made_by_op=True, other_needs_grad=False, saved_by_itself=False, saved_by=(),
                      later_reads=(), alive_at_end=True)
    assert "  other operand                : a number (needs no gradient)" in str(quiet).splitlines()
    assert "  read later by                : none" in str(quiet).splitlines()
