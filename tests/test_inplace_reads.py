"""Reads that are not ops — item(), tolist(), numpy() — are recorded as ``read`` events, and
mt.memory.inplace_plan respects them: it no longer proposes overwriting bytes that the
program reads afterwards. Replay, trace files and the pictures' event text take the new kind."""
from __future__ import annotations

import numpy as np

import microtorch as mt


def leaves(rows=4, cols=2, seed=0):
    rng = np.random.default_rng(seed)
    x = mt.tensor(rng.standard_normal((rows, 3)), dtype=mt.float64)
    w = mt.tensor(rng.standard_normal((3, cols)), dtype=mt.float64, requires_grad=True)
    b = mt.tensor(rng.standard_normal(cols), dtype=mt.float64, requires_grad=True)
    return x, w, b


def program(read, rewrite=False, shape=(4, 2)):
    """h = x @ w; a = h + b (op 1: add_ into h is the candidate), with ``read["before"](h)``
    before op 1 (its result kept until after it) and ``read["after"](h)`` after it."""
    x, w, b = leaves(*shape)

    def body():
        h = x @ w
        early = read.get("before", lambda h: None)(h)
        a = h.add_(b) if rewrite else h + b
        seen = read.get("after", lambda h: None)(h)
        del early
        (a * a).sum().backward()
        return seen

    with mt.trace() as tr:
        seen = body()
    return tr, seen


def add_decision(tr):
    plan = mt.memory.inplace_plan(tr)
    d = plan[1]
    assert d.op == "Add"
    return d


def test_without_a_read_the_rewrite_is_proposed():
    d = add_decision(program({})[0])
    assert d.inplace and d.method == "add_"


def test_tolist_after_the_op_blocks_the_rewrite_that_would_change_what_it_returns():
    tr, seen = program({"after": lambda h: h.tolist()})
    reads = tr.filter("read")
    assert [e["how"] for e in reads] == ["tolist"] and reads[0]["copy"] is True
    d = add_decision(tr)
    assert not d.inplace and f"is read again by tolist() at step {reads[0]['step']}" in d.reason
    _, rewritten = program({"after": lambda h: h.tolist()}, rewrite=True)  # what the old plan proposed
    assert not np.allclose(rewritten, seen)  # it would have changed what tolist() returned


def test_item_after_the_op_blocks_the_rewrite():
    tr, seen = program({"after": lambda h: h.item()}, shape=(1, 1))
    d = add_decision(tr)
    assert not d.inplace and "read again by item()" in d.reason


def test_a_numpy_array_alive_across_the_op_blocks_the_rewrite():
    tr, seen = program({"before": lambda h: h.detach().numpy(), "after": lambda h: None})
    (read,) = tr.filter("read")
    assert read["how"] == "numpy" and read["copy"] is False  # zero-copy: it reads until dropped
    d = add_decision(tr)
    assert not d.inplace and f"the array numpy() returned at step {read['step']}" in d.reason
    # the same array dropped before the op reads nothing afterwards
    tr, _ = program({"before": lambda h: h.detach().numpy().sum()})
    assert add_decision(tr).inplace


def test_a_numpy_array_read_after_the_op_would_see_overwritten_bytes():
    def keep(h):
        keep.array = h.detach().numpy()

    tr, _ = program({"before": keep})
    plain = keep.array.copy()
    assert not add_decision(tr).inplace
    program({"before": keep}, rewrite=True)
    assert not np.allclose(keep.array, plain)  # the array shows the overwritten bytes


def test_reads_in_a_step_arena_are_copies_at_that_moment():
    with mt.memory.step_arena():
        tr, _ = program({"before": lambda h: h.detach().numpy()})
    (read,) = tr.filter("read")
    assert read["copy"] is True
    assert add_decision(tr).inplace  # a copy taken before the op reads nothing later


def test_recording_off_costs_no_event_and_reads_work():
    x = mt.arange(3.0)
    assert x.tolist() == [0.0, 1.0, 2.0] and x.sum().item() == 3.0 and x.numpy().sum() == 3.0


def test_replay_files_and_event_text_take_read_events(tmp_path):
    tr, _ = program({"after": lambda h: h.tolist(), "before": lambda h: h.detach().numpy()})
    reads = tr.filter("read")
    assert len(reads) == 2
    stripped = mt.Trace([dict(e, step=i) for i, e in enumerate(e for e in tr if e["kind"] != "read")])
    assert tr.peak()[0] == stripped.peak()[0]  # reads change no memory
    for t in range(len(tr)):
        tr.state_at(t)
    tr.save(tmp_path / "t.json")
    back = mt.Trace.load(tmp_path / "t.json")
    assert back.events == tr.events
    from microtorch.viz.events import describe_event
    text = describe_event(back, reads[1]["step"])
    assert "tolist()" in text and f"storage #{reads[1]['storage']}" in text
    assert "an array over the same bytes" in describe_event(back, reads[0]["step"])


def test_memory_pictures_draw_a_step_that_is_a_read():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from microtorch.viz import arena, liveness, pool, refcounts
    tr, _ = program({"after": lambda h: h.tolist()})
    t = tr.filter("read")[0]["step"]
    for panel in (refcounts, liveness, pool, arena):
        before, at = panel.render(tr, t - 1), panel.render(tr, t)
        plt.close("all")
        assert type(before) is type(at)
