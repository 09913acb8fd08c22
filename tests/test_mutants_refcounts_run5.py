"""Mutation run 5, ``exercises/refcounts.py`` (notebook 03's checkers): what a learner is shown.

* a catalogue of wrong answers per checker, each a mistake a learner makes (Mul saving
  nothing, backward releasing nothing, a deleted name kept, every allocation added up, the
  last step of the peak instead of the first, ...): each is rejected, and the message names
  the case (the program's lines, the trace) and the hint for that mistake;
* the cases the checkers generate are the kinds they promise: every prefix of every program,
  random programs that keep the exercise's rules (more in the hidden run), traces of leaking
  and clean loops, random traces whose labels say what they did;
* the engine's answers the checkers compare with (``_run_program``, ``peak_of``,
  ``leaks_of``) against independent computations, and the pass message counts the cases.

Record: tests/mutation-run-5/exercises-refcounts.md.
"""
from __future__ import annotations

import re

import pytest

import microtorch as mt
from microtorch.exercises import checking, refcounts
from microtorch.recording import Holder

# the notebook loader and the wrong peaks test_exercise_checkers.py already writes
from checker_probes import Recorder as _Recorder, failure as _message, cases_counted as _cases_counted
from test_exercise_checkers import _peak_at_end, _peak_every_alloc, _peak_last_step, _peak_own_frees_only, _solutions

SOLUTION = _solutions("03_refcounts_and_lifetimes")  # the notebook's reference answers
refcounts_after = SOLUTION["refcounts_after"]
peak_extra_bytes = SOLUTION["peak_extra_bytes"]


def leaked_storages(trace):
    """A right answer of the leak exercise: pair each alloc with the free of the same storage."""
    alive = set()
    for e in trace.filter("alloc", "free"):
        if e["kind"] == "alloc":
            alive.add(e["storage"])
        else:
            alive.discard(e["storage"])
    return alive


def _replace(program, old, new):
    return [tuple(new(i)) if i[0] == old else i for i in program]


def _storage_refcount(x) -> int:
    """The refcount of the storage behind a tensor, or behind the array ``.numpy()`` gave."""
    return (x.storage if isinstance(x, mt.Tensor) else x.base.storage).refcount


def _exec_counts(program) -> dict:
    """Run the program's Python (program_source) for real and read each name's storage refcount."""
    ns = {"mt": mt}
    exec(refcounts.program_source(program), ns)
    del ns["mt"], ns["__builtins__"]
    return {name: _storage_refcount(x) for name, x in ns.items()}


def _hidden_random_programs(n):
    before, checking._HIDDEN[0] = checking._HIDDEN[0], True
    try:
        return refcounts._random_programs(n)
    finally:
        checking._HIDDEN[0] = before


# ----------------------------------------------------------------------------------------------
# exercise 1: refcounts_after
# ----------------------------------------------------------------------------------------------
def _mul_saves_nothing(program):
    return refcounts_after(_replace(program, "mul", lambda i: ("add",) + tuple(i[1:])))


def _mul_saves_a_once(program):
    """a * a: a saved once, not twice (the saved inputs as a set)."""
    out = refcounts_after(program)
    for k, (op, *args) in enumerate(program):
        if op == "mul" and args[1] == args[2]:
            base = refcounts_after(program[:k] + [("tensor", "_unused")])
            out[args[1]] = out[args[1]] - 1 if out[args[1]] > base.get(args[1], 0) else out[args[1]]
    return out


def _keeps_deleted_names(program):
    out = refcounts_after(program)
    out.update({args[0]: 0 for op, *args in program if op == "del"})
    return out


def _view_adds_nothing(program):
    return refcounts_after(_replace(program, "view", lambda i: ("tensor", i[1])))


def _releases_unreached_graphs_too(program):
    """backward walks every node, not only those the root reaches."""
    if not any(op == "backward" for op, *_ in program):
        return refcounts_after(program)
    roots = [args[0] for op, *args in program if op not in ("del", "backward", "numpy", "tensor")]
    out = refcounts_after(program + [("backward", root) for root in roots])
    return {k: v for k, v in out.items() if k in refcounts_after(program)}


REFCOUNT_MISTAKES = [  # (wrong answer, the program and line the message names, words it must show)
    (_mul_saves_nothing, "for the program (saved tensors, and backward releasing them):\n\n"
     "    a = mt.randn(3, requires_grad=True)\n    b = mt.randn(3, requires_grad=True)\n    c = a * b\n\n"
     "after the last line, a's storage has refcount 2, you said 1.",
     ["held by: the tensor a; the graph node MulBackward (a saved slot).",
      "The last line (c = a * b): Mul saves both inputs for backward"]),
    (lambda program: refcounts_after([i for i in program if i[0] != "backward"]),
     "    s.backward()\n\nafter the last line, a's storage has refcount 1, you said 2.",
     ["held by: the tensor a.", "The last line (s.backward()): every node reachable from the root runs and "
      "then releases what it saved"]),
    (_keeps_deleted_names, "for the program (views and numpy arrays share a storage):\n\n"
     "    a = mt.randn(3, requires_grad=True)\n    v = a[:]\n    arr = a.detach().numpy()\n    del v\n\n"
     "your dict has entries for ['v'], which are not bound after this program; the names bound are ['a', 'arr'].",
     [" v was deleted (del v): leave deleted names out, even if their storage still lives."]),
    (lambda program: {**refcounts_after(program), "zz": 1}, "for the program (views and numpy arrays share a "
     "storage):\n\n    a = mt.randn(3, requires_grad=True)\n\nyour dict has entries for ['zz'], which are not "
     "bound after this program; the names bound are ['a'].", []),
    (lambda program: {**refcounts_after(program), "zz": 1} if any(i[0] == "del" for i in program)
     else refcounts_after(program), "    del v\n\nyour dict has entries for ['zz'], which are not bound after this "
     "program; the names bound are ['a', 'arr'].", []),
    (lambda program: refcounts_after(_replace(program, "tanh", lambda i: ("mul", i[1], i[2], i[2]))),
     "    h = a * a\n    t = h.tanh()\n\nafter the last line, h's storage has refcount 1, you said 3.",
     ["held by: the tensor h.", "The last line (t = h.tanh()): Tanh saves its OUTPUT"]),
    (lambda program: refcounts_after(_replace(program, "numpy", lambda i: ("tensor", i[1]))),
     "    arr = a.detach().numpy()\n\nafter the last line, a's storage has refcount 3, you said 2.",
     ["a numpy array from .numpy()", "The last line (arr = a.detach().numpy()): the array from .numpy() "
      "holds the storage"]),
    (_view_adds_nothing, "    v = a[:]\n\nafter the last line, a's storage has refcount 2, you said 1.",
     ["the tensor a; a tensor object still alive (tensor ", "The last line (v = a[:]): a view is a new tensor "
      "over the SAME storage"]),
    (lambda program: dict(list(refcounts_after(program).items())[1:]), "for the program (views and numpy "
     "arrays share a storage):\n\n    a = mt.randn(3, requires_grad=True)\n\nyour dict has no entry for ['a']; "
     "give the refcount of every name still bound: ['a'].", []),
    (lambda program: {k: v + 1 for k, v in refcounts_after(program).items()},
     "    a = mt.randn(3, requires_grad=True)\n\nafter the last line, a's storage has refcount 1, you said 2.",
     ["The last line (a = mt.randn(3, requires_grad=True)): a new tensor gets a new storage, held once"]),
    (lambda program: None, "    a = mt.randn(3, requires_grad=True)\n\nyour function returned None: "
     "did you forget `return`?", []),
    (lambda program: [1], "    a = mt.randn(3, requires_grad=True)\n\nyour function returned list; return a "
     "dict {name: refcount} with one entry per name still bound.", []),
    (lambda program: 1 // 0, "for the program (views and numpy arrays share a storage):\n\n"
     "    a = mt.randn(3, requires_grad=True)\n\n your function raised ZeroDivisionError",
     ["(called as fn([('tensor', 'a')]))"]),
]

REFCOUNT_IDS = [
    "mul-saves-nothing", "backward-releases-nothing", "keeps-deleted-names", "an-unbound-name", "an-unbound-name-after-a-del",
    "tanh-saves-its-input", "numpy-holds-nothing", "view-adds-nothing", "a-name-missing", "one-too-many",
    "returns-none", "returns-a-list", "raises",
]


@pytest.mark.parametrize("wrong, where, words", REFCOUNT_MISTAKES, ids=REFCOUNT_IDS)
def test_each_wrong_refcounts_is_rejected_with_its_program_and_hint(wrong, where, words):
    """A catalogued refcount mistake fails on its first wrong prefix: the program, the line, the hint."""
    msg = _message(mt.exercises.check_refcounts, wrong)
    assert msg.startswith("for the program (") and where in msg
    for w in words:
        assert w in msg
    if not words:  # nothing follows: no hint about deleted names when the extra name was never deleted
        assert msg.endswith(where)


def test_a_times_a_counted_once_is_rejected_on_the_a_times_a_line():
    """a * a saves a twice: counting it once fails on the line h = a * a, with Mul's hint."""
    msg = _message(mt.exercises.check_refcounts, _mul_saves_a_once)
    assert "    h = a * a\n\nafter the last line, a's storage has refcount 3, you said 2." in msg
    assert "so a * a adds 2 to a's storage" in msg


def test_releasing_graphs_the_root_does_not_reach_is_rejected():
    """backward releasing every graph fails on the program whose unreached graph keeps what it saved."""
    msg = _message(mt.exercises.check_refcounts, _releases_unreached_graphs_too)
    assert msg.startswith("for the program (a graph the root does not reach keeps what it saved):")
    assert "A graph the root does not reach keeps its saved tensors" in msg


def test_refcounts_is_called_on_every_prefix_of_every_program_and_counts_them(capsys):
    """Each fixed program line by line, then random ones (more hidden); the pass message counts the calls."""
    seen = {}
    for hidden in (False, True):
        spy = _Recorder(refcounts_after)
        mt.exercises.check_refcounts(spy, hidden=hidden)
        assert _cases_counted(capsys.readouterr().out, "check_refcounts") == len(spy.calls)
        fixed = [[tuple(i) for i in program[:k]] for _, program in refcounts.REFCOUNT_PROGRAMS
                 for k in range(1, len(program) + 1)]
        assert [list(c[0]) for c in spy.calls[:len(fixed)]] == fixed
        seen[hidden] = [c[0] for c in spy.calls[len(fixed):]]
    # the random programs are tried prefix by prefix too: each call extends the last one or starts anew
    for calls in seen.values():
        starts = [c for c in calls if len(c) == 1]
        assert len(starts) >= 3
        for prev, cur in zip(calls, calls[1:]):
            assert len(cur) == 1 or list(cur[:-1]) == list(prev)
    assert len(seen[True]) > len(seen[False]) > 0 and seen[True][:12] != seen[False][:12]


def _check_rules(program):
    """The exercise's rules: names never reused, defined before use, only views and numpy arrays
    deleted, one sum as root, at most one backward (of that root)."""
    bound, made_by = set(), {}
    for op, *args in program:
        assert op in refcounts.INSTRUCTIONS
        if op in ("del", "backward"):
            assert args[0] in made_by
            if op == "del":
                assert made_by[args[0]] in ("view", "numpy") and args[0] in bound
                bound.discard(args[0])
            else:
                assert made_by[args[0]] == "sum"
            continue
        name, *inputs = args
        assert name not in made_by and all(x in bound for x in inputs)
        assert len(inputs) == {"tensor": 0, "view": 1, "numpy": 1, "mul": 2, "add": 2, "tanh": 1, "sum": 1}[op]
        made_by[name] = op
        bound.add(name)
    assert sum(op == "sum" for op, *_ in program) == 1
    assert sum(op == "backward" for op, *_ in program) <= 1


def test_random_programs_keep_the_rules_and_are_varied():
    """Random programs: labelled #1..#n, the rules kept, every instruction tried, with and without backward."""
    for programs in (refcounts._random_programs(10), _hidden_random_programs(10)):
        assert [what for what, _ in programs] == [f"random program #{k}" for k in range(1, 11)]
        for _, program in programs:
            _check_rules(program)
            assert program[0][0] == "tensor"
        ops = [op for _, program in programs for op, *_ in program]
        assert set(ops) == set(refcounts.INSTRUCTIONS)
        with_backward = [any(op == "backward" for op, *_ in p) for _, p in programs]
        assert any(with_backward) and not all(with_backward)
        assert len({len(p) for _, p in programs}) > 2
        assert any(sum(op == "tensor" for op, *_ in p) == 2 for _, p in programs)
        assert any(args[1] != args[2] for _, p in programs for op, *args in p if op in ("mul", "add"))
        made_by = [{args[0]: op for op, *args in p if op not in ("del", "backward")} for _, p in programs]
        deleted = [{args[0] for op, *args in p if op == "del"} for _, p in programs]
        # views are deleted in some programs, and views or arrays outlive others to the end
        assert any(made[x] == "view" for made, gone in zip(made_by, deleted) for x in gone)
        assert any(op in ("view", "numpy") and name not in gone
                   for made, gone in zip(made_by, deleted) for name, op in made.items())
        # an array from .numpy() made in the middle of a program, with ops after it
        assert any(p[i][0] == "numpy" and p[i + 1][0] in ("view", "numpy", "mul", "add", "tanh")
                   for _, p in programs for i in range(len(p) - 1))
    assert len(refcounts._random_programs(3)) == 3 and refcounts._random_programs(3) == refcounts._random_programs(10)[:3]
    assert _hidden_random_programs(3) != refcounts._random_programs(3)


def test_the_visible_random_programs_try_the_cases_that_matter():
    """Even the 3 visible random programs: two leaves, a numpy array, a view, a backward and a del."""
    programs = [p for _, p in refcounts._random_programs(3)]
    ops = {op for p in programs for op, *_ in p}
    assert {"tensor", "view", "numpy", "sum", "backward", "del"} <= ops
    for p in programs:
        _check_rules(p)


def test_run_program_counts_are_the_engines_and_the_notebooks_after_every_prefix():
    """_run_program's counts = the program's Python run for real = notebook 03's model, prefix by prefix."""
    programs = refcounts.REFCOUNT_PROGRAMS + refcounts._random_programs(10) + _hidden_random_programs(10)
    for what, program in programs:
        for k in range(1, len(program) + 1):
            counts, holders = refcounts._run_program(program[:k])
            assert counts == _exec_counts(program[:k]) == refcounts_after(program[:k]), (what, k)
            assert holders == {}
            assert all(type(v) is int for v in counts.values())


def test_run_program_recording_names_every_holder_of_every_storage():
    """With record=True: one holder per reference, the tensor itself by name, saved slots by node."""
    programs = refcounts.REFCOUNT_PROGRAMS + refcounts._random_programs(3)
    for what, program in programs:
        for k in range(1, len(program) + 1):
            counts, holders = refcounts._run_program(program[:k], record=True)
            assert counts == refcounts_after(program[:k])
            assert set(holders) == set(counts), (what, k)
            for name, who in holders.items():
                assert len(who) == counts[name], (what, k, name, who)
    counts, holders = refcounts._run_program(refcounts.REFCOUNT_PROGRAMS[1][1][:3], record=True)
    assert "the graph node MulBackward (a saved slot)" in holders["a"]
    assert "the graph node MulBackward (a saved slot)" in holders["b"]
    assert holders["c"] == [h for h in holders["c"] if "MulBackward" not in h] and len(holders["c"]) == 1
    counts, holders = refcounts._run_program(refcounts.REFCOUNT_PROGRAMS[5][1], record=True)
    assert holders == {"arr": ["a numpy array from .numpy()"]} and counts == {"arr": 1}


def test_program_source_is_one_line_of_python_per_instruction():
    """program_source: the instruction's Python, one per line, in order, with the names filled in."""
    program = refcounts.REFCOUNT_PROGRAMS[1][1]
    assert refcounts.program_source(program).split("\n") == [
        "a = mt.randn(3, requires_grad=True)", "b = mt.randn(3, requires_grad=True)", "c = a * b",
        "d = c + a", "s = d.sum()", "s.backward()"]


def test_storage_of_finds_the_storage_behind_tensors_views_and_arrays():
    """A tensor's own storage, a view's base storage, the storage an array from .numpy() holds."""
    a = mt.randn(3, requires_grad=True)
    v = a[:]
    arr = a.detach().numpy()
    for x in (a, v, arr):
        assert refcounts._storage_of(x) is a.storage
    assert refcounts._storage_of(a).refcount == 3


def test_holder_words_say_who_holds_a_storage():
    """A named tensor by name, an unnamed one by its id, a node as a saved slot, anything else as is."""
    names = {3: "a"}
    assert refcounts._holder_words("tensor 3", names) == "the tensor a"
    assert refcounts._holder_words(Holder.of_tensor(3), names) == "the tensor a"
    assert refcounts._holder_words("tensor 4", names) == "a tensor object still alive (tensor 4)"
    assert refcounts._holder_words("node 7 (MulBackward)", names) == "the graph node MulBackward (a saved slot)"
    assert refcounts._holder_words(Holder.of_node(8, "TanhBackward"), names) == \
        "the graph node TanhBackward (a saved slot)"
    assert refcounts._holder_words("a numpy array from .numpy()", names) == "a numpy array from .numpy()"
    assert refcounts._holder_words("?", names) == "?"


# ----------------------------------------------------------------------------------------------
# exercise 2: the leaked storages
# ----------------------------------------------------------------------------------------------
def _still_referenced(trace):
    return {sid for sid, s in trace.state_at(-1).storages.items() if s.refcount > 0}


def _remove_not_discard(trace):
    alive = set()
    for e in trace.filter("alloc", "free"):
        if e["kind"] == "alloc":
            alive.add(e["storage"])
        else:
            alive.remove(e["storage"])
    return alive


def _dict_del_not_pop(trace):
    alive = {}
    for e in trace.filter("alloc", "free"):
        if e["kind"] == "alloc":
            alive[e["storage"]] = e
        else:
            del alive[e["storage"]]
    return set(alive)


def _only_the_last_leak(trace):
    got = leaked_storages(trace)
    return {max(got)} if got else got


def _one_freed_storage_counted(trace):
    """A right answer plus one storage that was allocated and freed again."""
    got = leaked_storages(trace)
    freed = [e["storage"] for e in trace.filter("free") if e["storage"] in {a["storage"] for a in trace.filter("alloc")}]
    return got | set(freed[:1])


LEAK = "for the trace of a training loop that keeps the loss tensors, losses.append(loss) (3 steps):\n"
CLEAN = "for the trace of a training loop that keeps loss.item() (3 steps):\n"
EARLY = ("for the trace of a tensor made before recording and deleted while it records, then a scratch "
         "tensor made and deleted:\n")

LEAK_MISTAKES = [  # (wrong answer, the case the message names (None: depends on the pool's state), words of its hint)
    (lambda tr: set(), LEAK + "storage #", ["is still live at the end, and you missed it (you said none; the "
                                             "leaked storages are [", "4 bytes, allocated at event ",
                                             "At the end it is held by: ", "Look at every 'alloc' event"]),
    (_only_the_last_leak, LEAK + "storage #", ["and you missed it (you said ["]),
    (lambda tr: {e["storage"] for e in tr.filter("alloc")}, CLEAN + "you said [",
     ["leaked, but the engine's lifetimes say the leaked storages are none.\nstorage #",
      "was allocated at event 2 and freed at event ", "pair every 'alloc' with the 'free' of the same storage id."]),
    (_still_referenced, CLEAN + "you said [", ["has no 'alloc' event in this trace: it got its bytes before "
                                               "recording started (a parameter, the data, …)"]),
    (_remove_not_discard, None,
     ["In this trace storage #", "has a 'free' event but no 'alloc' event", "ignore them (set.discard"]),
    (_dict_del_not_pop, None, ["dict.pop(key, None)"]),
    (_one_freed_storage_counted, CLEAN + "you said [", ["pair every 'alloc' with the 'free' of the same storage id."]),
    (lambda tr: None, CLEAN + "your function returned None: did you forget `return`?", []),
    (lambda tr: "abc", CLEAN + "your function returned 'abc'; return a set of storage ids", []),
]

LEAK_IDS = ["none-found", "only-the-last", "every-alloc", "still-referenced", "remove-not-discard",
            "dict-del-not-pop", "one-freed-storage-counted", "returns-none", "returns-a-string"]


@pytest.mark.parametrize("wrong, where, words", LEAK_MISTAKES, ids=LEAK_IDS)
def test_each_wrong_leaked_storages_is_rejected_with_its_trace_and_hint(wrong, where, words):
    """A catalogued leak mistake fails on its first wrong trace, named, with its hint."""
    spy = _Recorder(wrong)
    msg = _message(mt.exercises.check_leaked_storages, spy)
    if where is not None:
        assert msg.startswith(where)
        tr = spy.calls[-1][0]
        got, want = wrong(tr), refcounts.leaks_of(tr)
        if isinstance(got, set) and got != want:  # the storage the message names, and its events
            extra, missing = sorted(got - want), sorted(want - got)
            sid = (extra or missing)[0]
            born = [e for e in tr.filter("alloc") if e["storage"] == sid]
            if extra:
                assert f"you said {extra} leaked" in msg
                if born:
                    died = [e["step"] for e in tr.filter("free") if e["storage"] == sid]
                    assert f"storage #{sid} was allocated at event {born[0]['step']} and freed at event {died[0]}:" in msg
            else:
                assert f"storage #{sid} ({born[0]['nbytes']} bytes, allocated at event {born[0]['step']}) is still live" in msg
    else:  # a KeyError: the first trace with a free of a storage made before recording, and its id
        tr = spy.calls[-1][0]
        what = next(w for w, t in refcounts._leak_cases()[0] if msg.startswith(f"for the trace of {w}:\n"))
        allocated = {e["storage"] for e in tr.filter("alloc")}
        early = sorted({e["storage"] for e in tr.filter("free")} - allocated)
        assert msg.startswith(f"for the trace of {what}:\nyour function raised KeyError: ")
        assert f"In this trace storage #{early[0]} has a 'free' event but no 'alloc' event" in msg
    for w in words:
        assert w in msg


def test_a_leak_answer_that_raises_value_error_is_told_which_trace():
    """A ValueError: the trace and 'your function raised', with the early-free hint only if the trace has one."""
    def wrong(tr):
        raise ValueError("no storage field")
    spy = _Recorder(wrong)
    msg = _message(mt.exercises.check_leaked_storages, spy)
    tr = spy.calls[0][0]
    early = sorted({e["storage"] for e in tr.filter("free")} - {e["storage"] for e in tr.filter("alloc")})
    assert msg.startswith(CLEAN)
    if early:
        assert msg.startswith(CLEAN + "your function raised ValueError: no storage field.\nIn this trace storage "
                              f"#{early[0]} has a 'free' event but no 'alloc' event")
    else:
        assert msg.startswith(CLEAN + " your function raised ValueError: no storage field\n(called as fn(Trace(")


def test_a_leak_answer_that_raises_another_error_is_told_which_trace_not_shown_a_traceback():
    """Any other error (an AttributeError) is reported like every checker's: the trace and 'your function raised'."""
    def wrong(tr):
        raise AttributeError("no attribute 'storage'")
    msg = _message(mt.exercises.check_leaked_storages, wrong)
    assert msg.startswith(CLEAN + " your function raised AttributeError: no attribute 'storage'\n(called as fn(Trace(")


def test_a_leak_stub_still_shows_its_not_implemented_hint():
    """An exercise not done yet (NotImplementedError) is not turned into 'your function raised'."""
    def stub(tr):
        raise NotImplementedError("write leaked_storages")
    with pytest.raises(NotImplementedError, match="write leaked_storages"):
        mt.exercises.check_leaked_storages(stub)


def test_leaked_storages_is_tried_on_every_leak_case_and_counts_them(capsys):
    """The pairing answer passes; it is called once per trace, and the pass message counts them."""
    spy = _Recorder(leaked_storages)
    mt.exercises.check_leaked_storages(spy)
    assert _cases_counted(capsys.readouterr().out, "check_leaked_storages") == len(spy.calls) == 5


def test_leaks_of_is_the_pairing_of_allocs_and_frees():
    """leaks_of: the storages allocated while recording with no free after, as the events pair them."""
    cases, _keep = refcounts._leak_cases()
    for what, tr in cases:
        assert refcounts.leaks_of(tr) == leaked_storages(tr), what


def test_the_leak_cases_leak_what_their_labels_say():
    """Kept losses leak one 4-byte scalar per step/batch, a graph more, loss.item() and scratch nothing."""
    cases, _keep = refcounts._leak_cases()
    assert len(cases) == 5
    leaks = {what: refcounts.leaks_of(tr) for what, tr in cases}
    traces = dict(cases)
    sizes = {what: sorted(e["nbytes"] for e in tr.filter("alloc") if e["storage"] in leaks[what])
             for what, tr in cases}
    item, kept, graph, nograd, early = (what for what, _ in cases)
    assert leaks[item] == set() and leaks[early] == set()
    assert sizes[kept] == [4, 4, 4] and "(3 steps)" in kept
    assert sizes[nograd] == [4, 4] and "(2 batches)" in nograd
    assert len(leaks[graph]) > 2 and "(2 batches)" in graph and 4 in sizes[graph]
    for what in (item, kept):  # 3 training steps: 3 backward passes, 3 optimizer steps
        assert len(traces[what].filter("backward")) == 3 == len(traces[what].filter("optimizer_step"))
    for what in (graph, nograd):
        assert len(traces[what].filter("backward")) == 0
    allocated = {e["storage"] for e in traces[early].filter("alloc")}
    before = [e for e in traces[early].filter("free") if e["storage"] not in allocated]
    assert 64 * 64 * 4 in [e["nbytes"] for e in before]
    assert 32 * 32 * 4 in [e["nbytes"] for e in traces[early].filter("alloc")]


# ----------------------------------------------------------------------------------------------
# exercise 3: the peak of a trace's live bytes
# ----------------------------------------------------------------------------------------------
def _peak_index_not_step(tr):
    """The position in the filtered list instead of the event's own 'step'."""
    best, step = peak_extra_bytes(tr)
    events = tr.filter("alloc", "free")
    return best, (None if step is None else [e["step"] for e in events].index(step))


def _peak_one_event_late(tr):
    best, step = peak_extra_bytes(tr)
    return best, (None if step is None else step + 1)


def _peak_nonzero_step_when_nothing(tr):
    best, step = peak_extra_bytes(tr)
    return best, (0 if step is None else step)


def _peak_half(tr):
    best, step = peak_extra_bytes(tr)
    return best // 2, step


def _peak_times_two(tr):
    best, step = peak_extra_bytes(tr)
    return 2 * best, step


PEAK_MISTAKES = [  # (wrong answer, the trace it fails on first (None: depends on the pool's state), words of its hint)
    (_peak_every_alloc, CLEAN, ["\nThat is every allocation added up: frees give bytes back"]),
    (_peak_own_frees_only, None, ["was made before recording and freed while it recorded: its bytes were live "
                                  "at the start, so its free lowers the running total too"]),
    (_peak_last_step, None, ["\nRight peak, wrong step: report the FIRST event at which the running total"]),
    (_peak_at_end, CLEAN, ["\nToo low: the peak is the largest running total at any event, not the total at the end"]),
    (_peak_index_not_step, CLEAN, ["\nRight peak, wrong step", "use the event's own 'step' field"]),
    (_peak_one_event_late, CLEAN, ["\nRight peak, wrong step"]),
    (_peak_nonzero_step_when_nothing, EARLY, ["\nRight peak, wrong step"]),
    (_peak_half, CLEAN, ["\nToo low: the peak is the largest running total at any event"]),
    (_peak_times_two, CLEAN, []),
]

PEAK_IDS = ["every-alloc", "own-frees-only", "last-step", "at-the-end", "index-not-step", "one-event-late",
            "step-0-for-nothing", "half-the-peak", "twice-the-peak"]


@pytest.mark.parametrize("wrong, where, words", PEAK_MISTAKES, ids=PEAK_IDS)
def test_each_wrong_peak_is_rejected_with_its_trace_numbers_and_hint(wrong, where, words):
    """A catalogued peak mistake fails on its first wrong trace, named, with both answers' numbers and its hint."""
    spy = _Recorder(wrong)
    msg = _message(mt.exercises.check_peak_extra_bytes, spy)
    *right, (tr,) = spy.calls
    assert all(wrong(t) == refcounts.peak_of(t) for (t,) in right)  # the first trace it gets wrong
    labels = [w for w, _ in refcounts._peak_cases()[0]]
    what = next(w for w in labels if msg.startswith(f"for the trace of {w}:\n"))
    assert where is None or msg.startswith(where)
    (peak, step), got = refcounts.peak_of(tr), wrong(tr)
    assert (f"for the trace of {what}:\nthe peak is {peak:,} bytes beyond the start, first reached at step "
            f"{step}; you said {got[0]:,} bytes at step {got[1]}.\n") in msg
    for w in words:
        assert w in msg
    allocated = {e["storage"] for e in tr.filter("alloc")}
    early = [e for e in tr.filter("free") if e["storage"] not in allocated]
    if wrong is _peak_own_frees_only or (wrong is _peak_times_two and early):
        assert f"\nStorage #{early[0]['storage']} was made before recording and freed while it recorded" in msg
    elif wrong is _peak_times_two:  # too high, and no free of a storage made before recording to blame
        assert msg.endswith("\nAdd each alloc's nbytes, subtract each free's, and keep the largest total seen.")


@pytest.mark.parametrize("wrong, words", [
    (lambda tr: 0, "your function returned 0; return a pair (peak bytes, step), with step None when nothing "
     "was ever live beyond the start."),
    (lambda tr: ("many", None), "your function returned ('many', None); return a pair"),
    (lambda tr: None, "your function returned None: did you forget `return`?"),
    (lambda tr: 1 // 0, " your function raised ZeroDivisionError: integer division or modulo by zero\n"
     "(called as fn(Trace("),
])
def test_a_peak_answer_of_the_wrong_kind_is_told_on_the_first_trace(wrong, words):
    """No pair, None, or an exception: the message starts with the first trace and says what to return."""
    msg = _message(mt.exercises.check_peak_extra_bytes, wrong)
    assert msg.startswith(CLEAN + words)


def test_the_peak_is_tried_on_the_leak_cases_the_twice_reached_peak_and_random_programs(capsys):
    """The leak traces, the peak reached twice, then random programs (more hidden); the pass counts them."""
    leak_cases, _keep = refcounts._leak_cases()
    counted = {}
    for hidden in (False, True):
        mt.exercises.check_peak_extra_bytes(peak_extra_bytes, hidden=hidden)
        counted[hidden] = _cases_counted(capsys.readouterr().out, "check_peak_extra_bytes")
    assert counted[True] > counted[False] > len(leak_cases) + 1
    cases, _keep = refcounts._peak_cases()
    assert len(cases) == counted[False]
    assert [w for w, _ in cases[:len(leak_cases)]] == [w for w, _ in leak_cases]
    twice = cases[len(leak_cases)]
    source = re.fullmatch(r"(.*) \(the peak is reached twice\)", twice[0]).group(1)
    _check_labelled_trace(source.split("; "), twice[1])
    allocs = twice[1].filter("alloc")
    assert len(allocs) == 2 and allocs[0]["nbytes"] == allocs[1]["nbytes"] == 400
    assert refcounts.peak_of(twice[1]) == (400, allocs[0]["step"])


def _label_lines(what):
    return re.fullmatch(r"random program #\d+ \((.*)\)", what).group(1).split("; ")


def _check_random_peak_case(what, tr):
    """The label says what the trace did: tN = mt.randn(n) an alloc of n floats, del tN its free,
    'del one made before recording' a free of a storage never allocated while recording."""
    _check_labelled_trace(_label_lines(what), tr)


def _check_labelled_trace(lines, tr):
    events = tr.filter("alloc", "free")
    assert len(events) == len(lines) > 0
    storage_of = {}
    for line, e in zip(lines, events):
        made = re.fullmatch(r"(\w+) = mt\.randn\((\d+)\)", line)
        if made:
            assert e["kind"] == "alloc" and e["nbytes"] == 4 * int(made.group(2)) > 0
            storage_of[made.group(1)] = e["storage"]
        elif line == "del one made before recording":
            assert e["kind"] == "free" and e["storage"] not in storage_of.values() and e["nbytes"] > 0
        else:
            name = re.fullmatch(r"del (\w+)", line).group(1)
            assert e["kind"] == "free" and e["storage"] == storage_of.pop(name)


def test_the_random_peak_programs_do_what_their_labels_say():
    """Random programs #1..#n (3 visible, 8 hidden): labels that match the traces, varied, some early frees."""
    cases, _keep = refcounts._peak_cases()
    randoms = [c for c in cases if c[0].startswith("random program #")]
    assert [w.split(" (")[0] for w, _ in randoms] == [f"random program #{k}" for k in range(1, len(randoms) + 1)]
    before, checking._HIDDEN[0] = checking._HIDDEN[0], True
    try:
        hidden_cases, _keep2 = refcounts._peak_cases()
    finally:
        checking._HIDDEN[0] = before
    hidden_randoms = [c for c in hidden_cases if c[0].startswith("random program #")]
    assert [w.split(" (")[0] for w, _ in hidden_randoms] == [f"random program #{k}" for k in range(1, len(hidden_randoms) + 1)]
    assert len(hidden_randoms) > len(randoms) >= 3 and hidden_randoms[0][0] != randoms[0][0]
    for group in (randoms, hidden_randoms):
        for what, tr in group:
            _check_random_peak_case(what, tr)
        lines = [line for what, _ in group for line in _label_lines(what)]
        assert "del one made before recording" in lines
        assert any(line.startswith("del t") for line in lines)
        assert len({len(_label_lines(w)) for w, _ in group}) > 1
        assert all(refcounts.peak_of(tr)[0] > 0 for _, tr in group)
        # several tensors live at once somewhere: the peak is a running sum, not the largest tensor
        assert any(refcounts.peak_of(tr)[0] > max(e["nbytes"] for e in tr.filter("alloc")) for _, tr in group)


class _Events:
    """A hand-written trace: just the alloc/free events, with their own step numbers."""

    def __init__(self, *events):
        self.events = [{"kind": k, "nbytes": n, "step": s} for k, n, s in events]

    def filter(self, *kinds):
        return [e for e in self.events if e["kind"] in kinds]


@pytest.mark.parametrize("events, want", [
    ((), (0, None)),
    ((("alloc", 10, 3),), (10, 3)),
    ((("alloc", 10, 3), ("alloc", 7, 5), ("free", 10, 8)), (17, 5)),
    ((("alloc", 10, 3), ("free", 10, 4), ("alloc", 10, 9)), (10, 3)),
    ((("free", 50, 1), ("alloc", 30, 2)), (0, None)),
    ((("free", 50, 1), ("alloc", 30, 2), ("alloc", 30, 6)), (10, 6)),
    ((("alloc", 1, 2), ("alloc", 1, 4), ("free", 1, 6), ("alloc", 5, 7)), (6, 7)),
])
def test_peak_of_is_the_first_step_of_the_largest_running_total(events, want):
    """Hand-worked traces: + each alloc, - each free (early ones too), the first step at the maximum."""
    assert refcounts.peak_of(_Events(*events)) == want
    assert peak_extra_bytes(_Events(*events)) == want
