"""Notebook 09's checkers accept right answers, catch typical wrong ones with a pointed
message, and run only the learner's code (the engine's planner is switched off meanwhile);
an unfinished exercise shows its stub, and the hidden cases run."""
import pytest

import microtorch as mt
from microtorch.exercises import planning as ex
from microtorch.exercises.checking import WriteItYourself
from microtorch.planning import Program, plan, random_program


# -- exercise 1: the liveness equations ----------------------------------------------------------
def solve(blocks, transfer=None, out_of=None, passes=None):
    transfer = transfer or (lambda b, out: b["use"] | (out - b["def"]))
    out_of = out_of or (lambda name, live_in: set().union(*(live_in[s] for s in blocks[name]["succ"])))
    live_in = {b: set() for b in blocks}
    live_out = {b: set() for b in blocks}
    changed, k = True, 0
    while changed and (passes is None or k < passes):
        changed, k = False, k + 1
        for b in reversed(list(blocks)):
            out = out_of(b, live_in)
            new = transfer(blocks[b], out)
            changed |= new != live_in[b] or out != live_out[b]
            live_in[b], live_out[b] = new, out
    return live_in, live_out


def test_block_liveness_accepts_the_fixed_point(capsys):
    ex.check_block_liveness(solve)
    assert "✓ check_block_liveness" in capsys.readouterr().out


def inter(blocks):
    def out_of(name, live_in):
        succ = blocks[name]["succ"]
        return set.intersection(*(set(live_in[s]) for s in succ)) if succ else set()
    return solve(blocks, out_of=out_of)


def preds(blocks):
    return solve(blocks, out_of=lambda name, li: set().union(*(li[p] for p, b in blocks.items() if name in b["succ"])))


@pytest.mark.parametrize("wrong, words", [
    (lambda bl: solve(bl, passes=1), "one pass is not enough"),
    (lambda bl: solve(bl, transfer=lambda b, out: b["use"] | out), "did not subtract def"),
    (lambda bl: solve(bl, transfer=lambda b, out: (b["use"] | out) - b["def"]), "subtracted def from use too"),
    (inter, "union over the successors, not the intersection"),
    (preds, "not its predecessors"),
    (lambda bl: ({b: set() for b in bl}, {b: set() for b in bl}), "should be"),
    (lambda bl: None, "returned None"),
    (lambda bl: solve(bl)[0], "pair of dicts"),
    (lambda bl: (solve(bl)[0], {}), "no answer for block"),
])
def test_wrong_liveness_is_explained(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_block_liveness(wrong)


def test_the_engine_liveness_cannot_be_the_answer():
    def engine(blocks):
        prog = Program.from_statements(["a = f()"])
        return prog.liveness()

    with pytest.raises(WriteItYourself, match="write the liveness solver yourself"):
        ex.check_block_liveness(engine)
    assert Program.from_statements(["a = f()"]).liveness().iterations >= 1  # restored afterwards


def test_reference_liveness_agrees_with_the_engine():
    for blocks in ex._stored_cfgs():
        stmts = {b: ([f"{', '.join(sorted(v['def']))} = f({', '.join(sorted(v['use']))})"] if v["def"] else
                     [f"use({', '.join(sorted(v['use']))})"] if v["use"] else [], v["succ"]) for b, v in blocks.items()}
        names = set().union(*(v["use"] | v["def"] for v in blocks.values()))
        prog = Program.from_blocks(stmts, sizes={n: 1 for n in names})
        want_in, _ = ex.reference_liveness(blocks)
        assert {b: set(s) for b, s in prog.liveness().block_in.items()} == want_in


# -- exercise 2: first-fit --------------------------------------------------------------------------
def first_fit(buffers):
    placed, out = [], {}
    for name, first, last, size in buffers:
        live = sorted((o, s) for n, f, l, s, o in placed if f <= last and first <= l)
        at = 0
        for o, s in live:
            if at + size <= o:
                break
            at = max(at, o + s)
        placed.append((name, first, last, size, at))
        out[name] = at
    return out


def test_first_fit_accepts_the_lowest_gap(capsys):
    ex.check_first_fit(first_fit)
    assert "✓ check_first_fit" in capsys.readouterr().out


def naive(buffers):
    out, top = {}, 0
    for n, *_, s in buffers:
        out[n], top = top, top + s
    return out


def half_open(buffers):  # treats [first, last) as the interval: buffers touching at `last` share bytes
    return first_fit([(n, f, max(f, l - 1), s) if l > f else (n, f, f, s) for n, f, l, s in buffers])


def stacked(buffers):
    placed, out = [], {}
    for n, f, l, s in buffers:
        out[n] = max((o + z for pn, pf, pl, z, o in placed if pf <= l and f <= pl), default=0)
        placed.append((n, f, l, s, out[n]))
    return out


def only_previous(buffers):  # avoids only the buffer placed just before
    out, prev = {}, None
    for n, f, l, s in buffers:
        out[n] = prev[1] + prev[2] if prev and prev[0][1] <= l and f <= prev[0][2] else 0
        prev = ((n, f, l), out[n], s)
    return out


def best_fit(buffers):
    return ex.reference_fit(buffers, "tightest")


@pytest.mark.parametrize("wrong, words", [
    (naive, "never reuse bytes"),
    (half_open, "live at the same time but share bytes"),
    (stacked, "above all the live ones"),
    (only_previous, "live at the same time but share bytes"),
    (best_fit, "That is best-fit"),
    (lambda b: {n: 0 for n, *_ in b}, "share bytes"),
    (lambda b: None, "returned None"),
    (lambda b: {n: o for n, o in list(first_fit(b).items())[1:]}, "no offset for"),
])
def test_wrong_first_fits_are_explained(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_first_fit(wrong)


def test_the_engine_planner_cannot_be_the_answer():
    def engine(buffers):
        prog = Program.from_intervals({n: (f, l, s) for n, f, l, s in buffers})
        return mt.memory.plan(prog, "first_fit").offsets

    with pytest.raises(WriteItYourself, match="write first-fit yourself"):
        ex.check_first_fit(engine)


def test_reference_first_fit_agrees_with_the_engine():
    for buffers in ex._first_fit_cases():
        prog = Program.from_intervals({n: (f, l, s) for n, f, l, s in buffers})
        assert plan(prog, "first_fit").offsets == ex.reference_fit(buffers)


# -- exercise 3: greedy vs first-fit ---------------------------------------------------------------
WINS = {"s1": (0, 0, 1), "s2": (0, 1, 1), "big": (1, 2, 2), "s3": (2, 2, 1)}


def find(want):
    """A search over small random programs (what a learner might do by hand)."""
    import random

    rng = random.Random(0)
    while True:
        p = {}
        for i in range(rng.randint(3, 6)):
            f = rng.randint(0, 4)
            p[f"b{i}"] = (f, f + rng.randint(0, 3), rng.choice([1, 2, 3, 4]))
        ff, g = ex.reference_arenas(p)
        if (g < ff) if want == "wins" else (g > ff):
            return p


def test_greedy_vs_first_fit_accepts_real_examples(capsys):
    wins, loses = find("wins"), find("loses")
    ex.check_greedy_vs_first_fit(lambda: (wins, loses))
    assert "✓ check_greedy_vs_first_fit" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, words", [
    (lambda: (find("loses"), find("wins")), "swapped"),
    (lambda: ({"a": (0, 1, 4)}, find("loses")), "greedy must need fewer"),
    (lambda: (find("wins"), {"a": (0, 1, 4), "b": (2, 3, 4)}), "greedy must need more"),
    (lambda: ({"a": (3, 1, 4)}, find("loses")), "needs 0 ≤ first ≤ last"),
    (lambda: (find("wins"), {"a": (0, 1, 0)}), "sizes are positive"),
    (lambda: find("wins"), "return a pair"),
    (lambda: ({}, {}), "non-empty dict"),
    (lambda: ({"a": (0, 1)}, {}), r"\(first, last, size\) expected"),
])
def test_wrong_greedy_examples_are_explained(wrong, words):
    with pytest.raises(AssertionError, match=words):
        ex.check_greedy_vs_first_fit(wrong)


def test_reference_arenas_agree_with_the_engine():
    for seed in range(30):
        prog = random_program(12, seed, alignment=1, sizes=(1, 2, 3, 5))
        iv = prog.intervals()
        p = {n: (iv[n].first, iv[n].last, prog.buffers[n].size) for n in prog.planned}
        ff, g = ex.reference_arenas(p)
        assert ff == plan(prog, "first_fit").arena_bytes and g == plan(prog, "greedy_by_size").arena_bytes


def test_an_unfinished_function_shows_its_stub_and_hidden_cases_run(capsys):
    def unfinished(*args):
        raise NotImplementedError("write it")
    for check in (ex.check_block_liveness, ex.check_first_fit, ex.check_greedy_vs_first_fit):
        with pytest.raises(NotImplementedError, match="write it"):
            check(unfinished)
    ex.check_block_liveness(solve, hidden=True)
    ex.check_first_fit(first_fit, hidden=True)
    ex.check_greedy_vs_first_fit(lambda: (WINS, find("loses")), hidden=True)
    assert capsys.readouterr().out.count("(the hidden ones)") == 3


def test_the_hidden_cases_differ_from_the_visible_ones():
    from microtorch.exercises import checking

    visible = ex._first_fit_cases()
    checking._HIDDEN[0] = True
    try:
        hidden = ex._first_fit_cases()
    finally:
        checking._HIDDEN[0] = False
    assert not any(case in visible for case in hidden)


def test_the_fallback_first_fit_is_the_engines_and_no_answer():
    for buffers in ex._first_fit_cases():
        assert mt.exercises.fallbacks.first_fit(buffers) == ex.reference_fit(buffers)
    with pytest.raises(WriteItYourself, match="write first-fit yourself"):
        ex.check_first_fit(mt.exercises.fallbacks.first_fit)
