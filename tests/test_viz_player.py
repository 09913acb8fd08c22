"""The step-through player, driven headless: setting the slider or clicking the buttons
must move every panel to the same step, and each panel must show render(trace, t)."""
import html
import re

import pytest

widgets = pytest.importorskip("ipywidgets")

import microtorch as mt  # noqa: E402
from microtorch.viz import graph, player as make_player, register_panel  # noqa: E402
from microtorch.viz.events import describe_event, select_steps  # noqa: E402
from microtorch.viz.player import DESCRIPTION_STYLE, PANELS, Panel, Player, to_html  # noqa: E402

PRE = f'<pre style="{DESCRIPTION_STYLE}">'  # text shown in a panel wraps at spaces, never mid-word


@pytest.fixture(scope="module")
def tr():
    mt.manual_seed(0)
    x = mt.randn(4, 3); x.name = "x"
    W = mt.randn(3, 2, requires_grad=True); W.name = "W"
    b = mt.zeros(2, requires_grad=True); b.name = "b"
    with mt.trace() as tr:
        loss = (x @ W + b).relu().sum(); loss.name = "loss"
        loss.backward()
    return tr


class Spy:
    """A panel that remembers which step it was asked to draw."""

    def __init__(self):
        self.calls = []

    def render(self, trace, t):
        self.calls.append(t)
        return f"spy at {t}"

    def describe(self, trace, t):
        return f"spy text {t}"


@pytest.fixture
def spy():
    s = Spy()
    register_panel("spy", s.render, s.describe, "Spy")
    yield s
    PANELS.pop("spy", None)


def test_player_returns_a_box_with_linked_controls(tr):
    box = make_player(tr)
    assert isinstance(box, widgets.VBox)
    p = box.player
    assert isinstance(p.play, widgets.Play) and isinstance(p.slider, widgets.IntSlider)
    assert {p.link.source, p.link.target} == {(p.play, "value"), (p.slider, "value")}
    assert p.play.min == p.slider.min == 1  # steps count from 1: the readout is the step number
    assert p.play.max == p.slider.max == len(select_steps(tr, "ops"))
    for w in (p.play, p.slider, p.back, p.forward):
        assert w.description and w.tooltip
    assert p.label.tooltip and not p.label.description  # a description would space wrapped lines apart
    assert "line-height" in p.label.value and "<b>Now</b>" in p.label.value
    descendants = [c for child in box.children for c in getattr(child, "children", (child,))]
    for w in (p.play, p.slider, p.back, p.forward, p.label, p.panel_widgets["graph"]):
        assert w in descendants


def test_slider_moves_every_panel_to_the_same_step(tr, spy):
    p = make_player(tr, panels=["graph", "spy"]).player
    steps = select_steps(tr, "ops")
    for k in (4, 1, len(steps), 6):
        p.slider.value = k
        t = steps[k - 1]
        assert p.t == t and t in spy.calls and p.step == k
        assert p.panel_html["spy"].startswith(f"{PRE}spy at {t}</pre>") and f"spy text {t}" in p.panel_html["spy"]
        when = f"step {k} of {len(steps)} · event {t}"  # one notion of "when", everywhere
        assert p.when() == when
        assert when in p.panel_html["graph"] and when in p.label.value
        assert f"of {len(tr) - 1}" not in p.panel_html["graph"]  # no second numbering
        assert p.panel_widgets["graph"].value == p.panel_html["graph"]
        assert html.escape(describe_event(tr, t)) in p.label.value


def test_buttons_step_and_stop_at_the_ends(tr, spy):
    p = make_player(tr, panels=["spy", "graph"]).player
    n = len(p.steps)
    assert p.step == 1 and p.back.disabled and not p.forward.disabled
    p.forward.click()
    p.forward.click()
    assert p.step == 3 and spy.calls[-1] == p.steps[2]
    p.back.click()  # a step seen before comes from the player's cache
    assert p.step == 2 and p.panel_html["spy"].startswith(f"{PRE}spy at {p.steps[1]}<")
    assert f"step 2 of {n} · event {p.steps[1]}" in p.panel_html["graph"]
    p.go(n + 10)
    assert p.step == n and p.forward.disabled
    p.forward.click()  # at the end: nothing moves
    assert p.step == n
    p.go(-3)
    assert p.step == 1 and p.back.disabled


def test_play_value_moves_the_panels_through_the_link(tr, spy):
    # jslink syncs play and slider in the browser; headless we play the browser's part
    p = make_player(tr, panels=["spy"]).player
    p.play.value = 4
    p.slider.value = p.play.value
    assert spy.calls[-1] == p.steps[3]


def test_graph_panel_shows_exactly_render_of_trace_at_t(tr):
    p = make_player(tr).player
    p.go(len(p.steps))
    t = p.t
    def same_ids(h):  # each drawing gets its own id prefix (ids must be unique on a page)
        return re.sub(r"mt\d+-", "mt-", h)
    expected = to_html(graph.render(tr, t, p.steps))
    assert same_ids(p.panel_html["graph"]).startswith(same_ids(expected))
    assert "Text description" in p.panel_html["graph"]
    assert graph.describe(tr, t, p.steps).splitlines()[1].replace("'", "&#x27;") in p.panel_html["graph"]


def test_step_axis_is_configurable(tr, spy):
    for steps in ("ops", "events", ("grad",), lambda e: e["kind"] == "node_run"):
        p = make_player(tr, panels=["spy"], steps=steps).player
        assert p.steps == select_steps(tr, steps)
        assert p.slider.max == len(p.steps)
    assert select_steps(tr, "events") == list(range(len(tr)))
    ops = select_steps(tr, "ops")
    kinds = {tr[i]["kind"] for i in ops}
    assert kinds == {"op", "backward", "node_run", "grad"}
    assert all(tr[i]["phase"] == "forward" for i in ops if tr[i]["kind"] == "op")
    with pytest.raises(ValueError):
        select_steps(tr, "nonsense")


def test_start_and_options(tr):
    p = make_player(tr, start=-1, options={"graph": {"show_saved": True}}).player
    assert p.step == len(p.steps)
    assert "released" in p.panel_html["graph"]
    p = make_player(tr, start="backward").player
    assert tr[p.t]["kind"] == "backward" and tr[p.steps[p.step - 2]]["kind"] == "op"
    assert make_player(tr, start=3).player.step == 3 and make_player(tr, start=0).player.step == 1


def test_panels_by_function_and_errors_do_not_break_the_player(tr):
    def broken(trace, t):
        raise RuntimeError("boom")

    p = Player(tr, panels=[broken, Panel("inline", lambda trace, t: f"at {t}")])
    assert "boom" in p.panel_html["broken"] and p.panel_html["inline"] == f"{PRE}at {p.t}</pre>"
    p.forward.click()
    assert p.panel_html["inline"] == f"{PRE}at {p.t}</pre>"
    with pytest.raises(KeyError, match="registered panels: graph, arena, pool, refcounts, liveness"):
        make_player(tr, panels=["no such panel"])


def test_matplotlib_panel_is_drawn_and_closed(tr):
    plt = pytest.importorskip("matplotlib.pyplot")
    import matplotlib
    matplotlib.use("Agg")

    def bars(trace, t):
        fig, ax = plt.subplots()
        ax.bar([0, 1], [t, 1])
        ax.set_title(f"step {t}")
        return fig

    before = len(plt.get_fignums())
    p = Player(tr, panels=[bars])
    p.forward.click()
    p.forward.click()
    assert p.panel_html["bars"].startswith("<svg")
    assert len(plt.get_fignums()) == before  # no leaked figures


def test_trace_without_ops_still_shows_something():
    with mt.trace() as tr:
        mt.zeros(3)
    p = Player(tr)
    assert p.slider.max == 1 and "No graph yet" in p.panel_html["graph"]
    with mt.trace() as empty:
        pass
    p = Player(empty)
    assert "nothing recorded yet" in p.label.value


def test_inline_svgs_get_ids_of_their_own(tr):
    a = Player(tr, start=-1).panel_html["graph"]
    b = Player(tr, start=-1).panel_html["graph"]
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b
    for ref in re.findall(r"url\(#([^)]+)\)", a):
        assert ref in ids_a


# ---------------------------------------------------------------------------------------------
# every panel together
# ---------------------------------------------------------------------------------------------
ALL = ["graph", "arena", "pool", "refcounts", "liveness"]


@pytest.fixture(scope="module")
def arena_tr():
    pytest.importorskip("matplotlib")
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    with mt.trace() as tr:
        with mt.memory.step_arena(mt.memory.Arena(capacity=1024)):
            mt.mse_loss(model(x), y).backward()
    return tr


def test_every_panel_follows_the_one_step(arena_tr):
    from microtorch.viz import arena, liveness, pool, refcounts

    p = make_player(arena_tr, panels=ALL).player
    modules = {"arena": arena, "pool": pool, "refcounts": refcounts, "liveness": liveness}
    for k in (5, 2, len(p.steps), 9):
        p.slider.value = k
        when = f"step {k} of {len(p.steps)} · event {p.t}"
        for name in ALL:
            assert when in p.panel_html[name], (name, k)  # every title says the same "when"
            assert p.panel_widgets[name].value == p.panel_html[name]
        for name, module in modules.items():  # each panel shows render(trace, t) of that t
            text = module.describe(arena_tr, p.t, p.steps)
            assert html.escape(text) in p.panel_html[name]
    p.forward.click()
    assert all(f"step {p.step} of" in p.panel_html[name] for name in ALL)


def test_open_figures_stay_constant_over_200_steps():
    plt = pytest.importorskip("matplotlib.pyplot")
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 1))
    x, y = mt.randn(16, 4), mt.randn(16, 1)
    with mt.trace() as tr:  # two training steps, over 200 events
        for _ in range(2):
            model.zero_grad()
            with mt.memory.step_arena(mt.memory.Arena(capacity=1024)):
                mt.mse_loss(model(x), y).backward()

    def pyplot_panel(trace, t):  # a user's panel drawn with pyplot: the player closes it
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot([0, t], [0, 1])
        ax.set_axis_off()
        return fig

    p = Player(tr, panels=["arena", "liveness", pyplot_panel], steps="events")
    assert len(p.steps) >= 200
    before = len(plt.get_fignums())
    for k in range(2, 202):
        p.go(k)
        assert len(plt.get_fignums()) == before
    p.go(1)  # and back: all from the cache
    assert len(plt.get_fignums()) == before


def test_layout_side_or_stacked(arena_tr):
    side = make_player(arena_tr, panels=["arena", "pool"], layout="side")
    shown = side.children[-1]
    assert isinstance(shown, widgets.HBox) and shown.layout.flex_flow == "row wrap"
    assert all(w.layout.flex.startswith("1 1") for w in shown.children)
    stacked = make_player(arena_tr, panels=["arena", "pool"])
    assert isinstance(stacked.children[-1], widgets.VBox)
    with pytest.raises(ValueError):
        make_player(arena_tr, layout="grid")


def test_side_layout_columns(arena_tr):
    """A list among the panels is one column of the side layout: the graph beside the arena
    and the liveness picture stacked (notebook 08's dashboard)."""
    box = make_player(arena_tr, panels=["graph", ["arena", "liveness"]], layout="side")
    p = box.player
    assert [q.name for q in p.panels] == ["graph", "arena", "liveness"]
    row = box.children[-1]
    assert isinstance(row, widgets.HBox) and len(row.children) == 2
    graph_w, column = row.children
    assert graph_w is p.panel_widgets["graph"] and graph_w.layout.flex.startswith("1 1")
    assert isinstance(column, widgets.VBox) and column.layout.flex.startswith("1 1")
    assert list(column.children) == [p.panel_widgets["arena"], p.panel_widgets["liveness"]]
    assert all(w.layout.width == "100%" for w in column.children)
    before = dict(p.panel_html)
    p.go(len(p.steps))
    assert all(p.panel_html[k] != before[k] for k in ("arena", "liveness"))  # every panel moved
    stacked = make_player(arena_tr, panels=["graph", ["arena", "liveness"]])  # stacked: one list
    assert len(stacked.children[-1].children) == 3


def test_matplotlib_panels_scale_to_width(arena_tr):
    p = make_player(arena_tr, panels=["arena", "liveness"]).player
    for name in ("arena", "liveness"):
        svg_tag = re.search(r"<svg\b[^>]*>", p.panel_html[name]).group(0)
        assert "max-width:100%" in svg_tag and "height:auto" in svg_tag


def test_graph_header_in_the_player_does_not_repeat_the_now_line(tr):
    p = make_player(tr).player
    p.go(3)
    pic = graph.render(tr, p.t, p.steps)
    assert pic.header.lines == []  # the event is a graph op: the "Now" line says it
    assert graph.render(tr, p.t).header.lines  # drawn on its own, the header says it


def test_words_wrap_at_spaces_not_mid_word():
    """Jupyter styles output <pre> with word-break: break-all; the player's text description,
    its "Now" line and source listings override it, so words are never cut mid-word."""
    import microtorch as mt
    from microtorch.source import PRE_STYLE
    from microtorch.viz.player import DESCRIPTION_STYLE, description_html

    assert "word-break:normal" in DESCRIPTION_STYLE and "white-space:pre-wrap" in DESCRIPTION_STYLE
    assert f'<pre style="{DESCRIPTION_STYLE}">' in description_html("saving")
    listing = mt.show_source(mt.functions.elementwise.Tanh)._repr_html_()
    assert listing.count("<pre") == 1 and "word-break:normal" in listing and "white-space:pre" in listing
    with mt.trace() as tr:
        (mt.randn(3, requires_grad=True) * 2).sum().backward()
    p = mt.viz.player(tr, panels=["graph", "refcounts"]).player
    assert "anywhere" not in p.label.value and "overflow-wrap:break-word" in p.label.value
    assert f'<pre style="{DESCRIPTION_STYLE}">' in p.panel_html["refcounts"]
