"""The planning pictures, tested on their data (headless): live sets, the fixed-point
iteration, the conflict graph, the packing picture, the comparison bars, and their players."""
import pytest

pytest.importorskip("matplotlib")

import microtorch as mt
from microtorch.planning import Program, plan, random_program
from microtorch.viz import conflict_graph, fixed_point, live_sets, packing, plan_bars

LOOP = {"entry": (["i = 0", "s = 0"], ["loop"]),
        "loop": (["t = s + i", "s = t", "i = i + 1", "branch i < n"], ["loop", "exit"]),
        "exit": (["return s"], [])}


def loop_program():
    return Program.from_blocks(LOOP, sizes={"n": 4, "t": 8}, default_size=4)


def test_live_sets_show_the_equation_at_the_chosen_instruction():
    prog = loop_program()
    lv = prog.liveness()
    for i in range(len(prog)):
        f = live_sets.render(prog, i).facts
        assert set(f.live_in) == lv.live_in[i] and set(f.live_out) == lv.live_out[i]
        assert set(f.live_in) == set(f.use) | (set(f.live_out) - set(f.defs))
        assert {r[0]: r[4] for r in f.rows} == prog.segments()
    f = live_sets.render(prog, 2).facts
    assert f.instruction == "t = s + i" and f.defs == ["t"] and set(f.use) == {"s", "i"}
    text = live_sets.describe(prog, 2)
    assert "live_in = use ∪ (live_out − def)" in text and "t = s + i" in text
    fig = live_sets.render(prog, 2)
    runs = [p for p in fig.axes[0].collections if (p.get_gid() or "").startswith("run-")]
    assert len(runs) == sum(len(r) for r in prog.segments().values())


def test_live_sets_of_a_trace_program_keep_what_is_live_in_view():
    prog = random_program(200, seed=3)
    f = live_sets.render(prog, 150, max_rows=20).facts
    occ = prog.liveness().live_in[150] | prog.liveness().defs[150]
    drawn = {r[0] for r in f.rows}
    assert len(f.rows) == 20 and f.hidden == len(prog.buffers) - 20
    assert occ <= drawn or len(occ) > 20


def test_fixed_point_pictures_step_through_every_update():
    prog = loop_program()
    lv = prog.liveness()
    for k, u in enumerate(lv.history):
        f = fixed_point.fixed_point_facts(prog, k)
        assert f.block == u.block and f.iteration == u.iteration and f.changed == u.changed
        assert {b: set(s) for b, s in f.live_in.items()} == {b: set(s) for b, s in u.live_in.items()}
        prev = lv.history[k - 1].live_in[u.block] if k else frozenset()
        assert set(f.added_in[u.block]) == u.live_in[u.block] - prev
    last = fixed_point.fixed_point_facts(prog, -1)
    assert last.iteration == lv.iterations
    pic = fixed_point.render(prog, -1)
    assert "fixed point" in pic.source and "back edge" in pic.source
    assert pic.to_html().lstrip().startswith(("<svg", "<pre"))
    assert "pass" in fixed_point.describe(prog, 0) and "updated now" in fixed_point.describe(prog, 0)


def test_conflict_graph_nodes_coloured_by_slot():
    prog = random_program(14, seed=5)
    p = plan(prog, "coloring")
    f = conflict_graph.conflict_facts(p)
    g = prog.conflict_graph()
    assert sorted(tuple(e) for e in f.edges) == sorted(tuple(e) for e in g.edges)
    slot = {x: s for x, _, _, s, _ in f.nodes}
    assert slot == p.slots and f.n_slots == len(set(p.slots.values()))
    for x, y in f.edges:
        assert slot[x] != slot[y]  # conflicting buffers never share a slot
    pic = conflict_graph.render(p)
    for x in p.slots:
        assert f'"{x}"' in pic.source and f"slot {p.slots[x]}" in pic.source
    # other plans: one slot per distinct offset
    q = plan(prog, "greedy_by_size")
    fq = conflict_graph.conflict_facts(q)
    assert fq.n_slots == len(set(q.offsets.values()))
    bare = conflict_graph.conflict_facts(prog)
    assert bare.strategy is None and all(n[3] is None for n in bare.nodes)
    assert "conflicts with" in conflict_graph.describe(p)


def test_packing_places_buffers_in_the_planners_order():
    prog = random_program(20, seed=2)
    p = plan(prog, "greedy_by_size")
    iv = prog.intervals()
    for k in range(len(p.order) + 1):
        f = packing.packing_facts(p, k)
        assert [r[0] for r in f.rects] == p.order[:k]
        assert f.current == (p.order[k - 1] if k else None)
    f = packing.render(p).facts
    assert f.k == len(p.order) and f.top == p.arena_bytes and f.lower_bound == prog.lower_bound()
    for x, _, _, first, last, offset, size in f.rects:
        assert (first, last) == tuple(iv[x]) and offset == p.offsets[x] and size == prog.buffers[x].size
    sizes = [r[6] for r in packing.packing_facts(p, 5).rects]
    assert sizes == sorted(sizes, reverse=True)  # greedy by size: the big ones first
    fig = packing.render(p, 5)
    rects = [c for c in fig.axes[0].collections if (c.get_gid() or "").startswith("buffer-")]
    assert len(rects) == 5
    lines = {round(l.get_ydata()[0]) for l in fig.axes[0].get_lines()}
    assert {p.arena_bytes, prog.lower_bound()} <= lines


def test_plan_bars_compare_strategies_bound_and_measured():
    prog = random_program(16, seed=4)
    numbers = plan_bars.measure(prog, {"pool peak": 12_345, "step arena high water": 40_000},
                                strategies=["naive", "greedy_by_size", "coloring"])
    f = plan_bars.render(numbers).facts
    names = [b[0] for b in f.bars]
    assert names == ["naive", "greedy_by_size", "coloring", "lower bound", "pool peak", "step arena high water"]
    by = {b[0]: b for b in f.bars}
    assert by["naive"][1] == plan(prog, "naive").arena_bytes and by["lower bound"][2] == 1.0
    assert by["pool peak"][3] == "measured" and by["naive"][3] == "plan"
    with pytest.raises(ValueError, match="lower bound"):
        plan_bars.render({"naive": 3})


def test_planning_players_move_their_pictures():
    pytest.importorskip("ipywidgets")
    prog = loop_program()
    box = mt.viz.liveness_player(prog)
    pl = box.player
    first = pl.panel.value
    pl.go(len(prog.liveness().history) - 1)
    assert pl.panel.value != first
    assert f"pass {prog.liveness().iterations}" in pl.label.value and "unchanged" in pl.label.value
    p = plan(random_program(10, seed=1), "greedy_by_size")
    pk = mt.viz.packing_player(p).player
    pk.go(3)
    assert pk.k == 3 and "Text description" in pk.panel.value
    assert "placing" in pk.label.value
    ip = mt.viz.instruction_player(prog).player
    ip.forward.click()
    assert ip.k == 1
    with pytest.raises(ValueError, match="at least one step"):
        mt.viz.sequence_player(lambda k: "x", 0)
