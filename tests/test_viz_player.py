"""The step-through player, driven headless: setting the slider or clicking the buttons
must move every panel to the same step, and each panel must show render(trace, t)."""
import html
import re

import pytest

widgets = pytest.importorskip("ipywidgets")

import microtorch as mt  # noqa: E402
from microtorch.viz import graph, player as make_player, register_panel  # noqa: E402
from microtorch.viz.events import describe_event, select_steps  # noqa: E402
from microtorch.viz.player import PANELS, Panel, Player, to_html  # noqa: E402


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
    assert p.play.max == p.slider.max == len(select_steps(tr, "ops")) - 1
    for w in (p.play, p.slider, p.back, p.forward):
        assert w.description and w.tooltip
    assert p.label.description
    descendants = [c for child in box.children for c in getattr(child, "children", (child,))]
    for w in (p.play, p.slider, p.back, p.forward, p.label, p.panel_widgets["graph"]):
        assert w in descendants


def test_slider_moves_every_panel_to_the_same_step(tr, spy):
    p = make_player(tr, panels=["graph", "spy"]).player
    steps = select_steps(tr, "ops")
    for k in (3, 0, len(steps) - 1, 5):
        p.slider.value = k
        t = steps[k]
        assert p.t == t and t in spy.calls
        assert p.panel_html["spy"].startswith(f"<pre>spy at {t}</pre>") and f"spy text {t}" in p.panel_html["spy"]
        assert f"step {t} of {len(tr) - 1}" in p.panel_html["graph"]
        assert p.panel_widgets["graph"].value == p.panel_html["graph"]
        assert html.escape(describe_event(tr, t)) in p.label.value
        assert f"event {t} " in p.label.value


def test_buttons_step_and_stop_at_the_ends(tr, spy):
    p = make_player(tr, panels=["spy", "graph"]).player
    n = len(p.steps)
    assert p.step == 0 and p.back.disabled and not p.forward.disabled
    p.forward.click()
    p.forward.click()
    assert p.step == 2 and spy.calls[-1] == p.steps[2]
    p.back.click()  # a step seen before comes from the player's cache
    assert p.step == 1 and p.panel_html["spy"].startswith(f"<pre>spy at {p.steps[1]}<")
    assert f"step {p.steps[1]} of" in p.panel_html["graph"]
    p.go(n + 10)
    assert p.step == n - 1 and p.forward.disabled
    p.forward.click()  # at the end: nothing moves
    assert p.step == n - 1
    p.go(-3)
    assert p.step == 0 and p.back.disabled


def test_play_value_moves_the_panels_through_the_link(tr, spy):
    # jslink syncs play and slider in the browser; headless we play the browser's part
    p = make_player(tr, panels=["spy"]).player
    p.play.value = 4
    p.slider.value = p.play.value
    assert spy.calls[-1] == p.steps[4]


def test_graph_panel_shows_exactly_render_of_trace_at_t(tr):
    p = make_player(tr).player
    p.go(len(p.steps) - 1)
    t = p.t
    def same_ids(h):  # each drawing gets its own id prefix (ids must be unique on a page)
        return re.sub(r"mt\d+-", "mt-", h)
    expected = to_html(graph.render(tr, t))
    assert same_ids(p.panel_html["graph"]).startswith(same_ids(expected))
    assert "Text description" in p.panel_html["graph"]
    assert graph.describe(tr, t).splitlines()[1].replace("'", "&#x27;") in p.panel_html["graph"]


def test_step_axis_is_configurable(tr, spy):
    for steps in ("ops", "events", ("grad",), lambda e: e["kind"] == "node_run"):
        p = make_player(tr, panels=["spy"], steps=steps).player
        assert p.steps == select_steps(tr, steps)
        assert p.slider.max == len(p.steps) - 1
    assert select_steps(tr, "events") == list(range(len(tr)))
    ops = select_steps(tr, "ops")
    kinds = {tr[i]["kind"] for i in ops}
    assert kinds == {"op", "backward", "node_run", "grad"}
    assert all(tr[i]["phase"] == "forward" for i in ops if tr[i]["kind"] == "op")
    with pytest.raises(ValueError):
        select_steps(tr, "nonsense")


def test_start_and_options(tr):
    p = make_player(tr, start=-1, options={"graph": {"show_saved": True}}).player
    assert p.step == len(p.steps) - 1
    assert "released" in p.panel_html["graph"]
    p = make_player(tr, start="backward").player
    assert tr[p.t]["kind"] == "backward" and tr[p.steps[p.step - 1]]["kind"] == "op"


def test_panels_by_function_and_errors_do_not_break_the_player(tr):
    def broken(trace, t):
        raise RuntimeError("boom")

    p = Player(tr, panels=[broken, Panel("inline", lambda trace, t: f"at {t}")])
    assert "boom" in p.panel_html["broken"] and p.panel_html["inline"] == f"<pre>at {p.t}</pre>"
    p.forward.click()
    assert p.panel_html["inline"] == f"<pre>at {p.t}</pre>"
    with pytest.raises(KeyError, match="registered panels: graph"):
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
    assert p.slider.max == 0 and "No graph yet" in p.panel_html["graph"]
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
