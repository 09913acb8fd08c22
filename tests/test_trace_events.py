"""Typed event records, the schema they carry, holders as data, allocators describing
themselves, and the layering of the trace package (allocators never import it)."""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

import microtorch as mt
from microtorch.recording import Holder
from microtorch.trace import VERSIONS, baseline
from microtorch.trace import events as ev
from microtorch.trace.schema import FIELDS, TraceFormatError

ROOT = Path(__file__).resolve().parents[1]


def _program():
    pool = mt.memory.Pool(name="events pool")
    with mt.memory.use_pool(pool), mt.trace() as tr:
        w = mt.randn(3, 2, requires_grad=True)
        w.name = "w"
        x = mt.randn(4, 3)
        loss = (x @ w).relu().sum()
        loss.backward()
        tr.mark("done", epoch=1, note="after backward")
        del loss
    return tr


def test_every_kind_is_a_record_class_and_the_schema_is_read_off_it():
    assert set(ev.KINDS) == set(ev.EVENT_TYPES) == set(FIELDS)
    for kind, cls in ev.EVENT_TYPES.items():
        assert cls.kind == kind and dataclasses.is_dataclass(cls) and "__slots__" in vars(cls)
        declared = {f.name for f in dataclasses.fields(cls) if f.metadata.get("types")}
        assert set(FIELDS[kind]) == declared, kind
        assert cls.__doc__ and ev.KINDS[kind].startswith(cls.__doc__.split()[0])


def test_recorded_events_are_typed_and_read_like_their_dicts():
    tr = _program()
    assert tr.events and all(type(e) is ev.EVENT_TYPES[e.kind] for e in tr.events)
    for i, e in enumerate(tr.events):
        d = e.to_dict()
        assert d["kind"] == e["kind"] == e.kind and d["step"] == e.step == i
        assert ev.from_dict(d) == e and ev.from_dict(json.loads(json.dumps(d))).to_dict() == json.loads(json.dumps(d))
        assert all(e[k] == v for k, v in d.items()) and set(d) == set(e.keys())
    op = next(e for e in tr.events if e.kind == "op")
    assert op.op == op["op"] and isinstance(op.inputs, list) and "padding" not in op and op.get("padding") is None
    with pytest.raises(KeyError):
        op["padding"]  # a field the event did not carry is absent, as in the dict it saves as
    mark = tr.filter("mark")[0]
    assert mark.label == "done" and mark.extra == {"epoch": 1, "note": "after backward"} and mark["epoch"] == 1


def test_an_unknown_kind_is_refused_naming_where_kinds_are_declared():
    with mt.trace() as tr:
        with pytest.raises(ValueError, match=r"unknown event kind 'allocate'.*microtorch/trace/events.py"):
            tr.emit("allocate", storage=1)


def test_a_trace_saved_today_loads_back_equal_and_typed(tmp_path):
    tr = _program()
    path = tmp_path / "t.json"
    tr.save(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == f"microtorch-trace/{VERSIONS[-1]}" and VERSIONS == (1,)
    back = mt.Trace.load(path)
    assert back.events == tr.events and all(type(e) is ev.EVENT_TYPES[e.kind] for e in back.events)
    holders = [e.holder for e in back.filter("refcount")]
    assert holders and all(isinstance(h, Holder) for h in holders)
    assert [(h.kind, h.id) for h in holders] == [(h.kind, h.id) for h in (e.holder for e in tr.filter("refcount"))]


@pytest.mark.parametrize("version", ["0", "2", "17"])
def test_an_unknown_version_names_the_version_found_and_the_ones_read(tmp_path, version):
    tr = _program()
    path = tmp_path / "t.json"
    tr.save(path)
    doc = json.loads(path.read_text())
    doc["format"] = f"microtorch-trace/{version}"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=rf"format version '{version}'.*reads version 1"):
        mt.Trace.load(path)


def test_holders_are_data_matching_the_tensors_and_nodes_they_name():
    tr = _program()
    tensors = {e.tensor for e in tr.filter("tensor")}
    nodes = {e.node for e in tr.filter("op") if e.node is not None}
    kinds = set()
    for e in tr.filter("refcount"):
        h = e.holder
        kinds.add(h.kind)
        if h.kind == "tensor":
            assert h.id in tensors and h == f"tensor {h.id}"
        elif h.kind == "node":
            assert h.id in nodes and h.startswith(f"node {h.id} (")
    assert {"tensor", "node"} <= kinds
    assert Holder.parse("tensor 12") == "tensor 12" and Holder.parse("tensor 12").id == 12
    assert Holder.parse("?").kind == "unknown" and Holder.parse("a numpy array from .numpy()").id is None


def test_allocators_describe_themselves_as_plain_data_and_the_baseline_is_those_descriptions():
    pool, arena = mt.memory.Pool(name="described pool"), mt.memory.Arena(capacity=1024, name="described arena")
    with mt.memory.use_pool(pool):
        keep = mt.randn(8)
    with mt.memory.step_arena(arena):
        inside = mt.randn(4) * 2  # an activation: its bytes are in the step arena
        for a in (pool, arena):
            d = a.describe()
            assert json.loads(json.dumps(d)) == d and d["name"] == a.name and d["kind"] in ("pool", "arena")
            assert all(b.live for b in a.blocks_in_use())
        base = baseline()
        described = {d["name"]: d for d in base["allocators"]}
        assert described[pool.name] == pool.describe() and described[arena.name] == arena.describe()
        blocks = {b["block"] for b in base["blocks"] if b["allocator"] == arena.name}
        assert blocks == {b.id for b in arena.blocks_in_use()} and inside.storage.block.id in blocks
    del keep, inside


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_recorder_slot_imports_nothing_and_allocators_never_import_the_trace_package():
    assert not {m for m in _imports(ROOT / "microtorch" / "recording.py") if m.startswith("microtorch")}
    for f in sorted((ROOT / "microtorch" / "memory").glob("*.py")):
        if f.name == "__init__.py":  # re-exports mt.memory.Trace at its very end
            continue
        bad = {m for m in _imports(f) if m == "microtorch.trace" or m.startswith("microtorch.trace.")}
        assert not bad, f"{f.name} imports {sorted(bad)}: allocators report through microtorch.recording"


def _trace_diff():
    spec = importlib.util.spec_from_file_location("trace_diff", ROOT / "tools" / "trace_diff.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_trace_diff_finds_a_changed_event_and_ignores_thread_ids():
    td = _trace_diff()
    events = [e.to_dict() for e in _program().events]
    base = {"nb.ipynb": {"failed": None, "traces": [events]}}
    same = {"nb.ipynb": {"failed": None, "traces": [[dict(e) for e in events]]}}
    assert td.compare(base, same)[0]
    threaded = [dict(events[0], thread=111)] + events[1:]
    other_thread = [dict(events[0], thread=222)] + events[1:]
    assert td.compare({"nb": {"failed": None, "traces": [threaded]}},
                      {"nb": {"failed": None, "traces": [other_thread]}})[0]
    changed = [dict(e) for e in events]
    i = next(k for k, e in enumerate(changed) if e["kind"] == "alloc")
    changed[i]["nbytes"] += 4
    equal, lines = td.compare(base, {"nb.ipynb": {"failed": None, "traces": [changed]}})
    assert not equal and any(f"event {i} (alloc)" in ln and "nbytes" in ln for ln in lines)
    equal, lines = td.compare(base, {"nb.ipynb": {"failed": None, "traces": [events[:-1]]}})
    assert not equal


def test_trace_diff_renumber_ignores_ids_shifted_by_untraced_allocations():
    td = _trace_diff()
    events = [e.to_dict() for e in _program().events]

    def shifted(o, key=None):  # every id as a run that allocated 1000 more times first would have it
        if isinstance(o, dict):
            o = {k: shifted(v, k) for k, v in o.items()}
            if o.get("holder", "").startswith("tensor "):
                o["holder"] = f"tensor {int(o['holder'][7:]) + 1000}"
            return o
        if isinstance(o, list):
            return [shifted(x, key) for x in o]
        return o + 1000 if key in td._ID_FIELDS and isinstance(o, int) and o else o

    a, b = ({"nb": {"failed": None, "traces": [t]}} for t in (events, [shifted(e) for e in events]))
    assert not td.compare(a, b)[0]
    assert td.compare(a, b, renumber=True)[0]
    swapped = [dict(e) for e in b["nb"]["traces"][0]]
    k = next(k for k, e in enumerate(swapped) if e["kind"] == "op" and len(set(e["inputs"])) == 2)
    swapped[k]["inputs"] = swapped[k]["inputs"][::-1]
    assert not td.compare(a, {"nb": {"failed": None, "traces": [swapped]}}, renumber=True)[0]


def _first(events, pred, start=0):
    return next(k for k in range(start, len(events)) if pred(events[k]))


def test_a_temporary_forward_saved_is_let_go_after_its_op_event():
    # CrossEntropy saves softmax(x), a tensor made inside forward: its holder lets go of it
    # only once the op event that lists it as saved is recorded (as before the refactor)
    x = mt.randn(4, 3, requires_grad=True)
    t = mt.tensor([0, 2, 1, 0])
    with mt.trace() as tr:
        mt.nn.functional.cross_entropy(x, t)
    events = [e.to_dict() for e in tr.events]
    op = _first(events, lambda e: e["kind"] == "op" and e["op"] == "CrossEntropy")
    probs = events[op]["saved"][1]
    drop = _first(events, lambda e: e["kind"] == "refcount" and e["storage"] == probs and e["delta"] == -1)
    assert drop > op


def test_relu_inplace_backward_frees_its_mask_before_letting_go_of_the_saved_output():
    x = mt.randn(2, 3, requires_grad=True)
    with mt.trace() as tr:
        y = x * 2
        y.relu_()
        y.sum().backward()
    events = [e.to_dict() for e in tr.events]
    relu = _first(events, lambda e: e["kind"] == "op" and e["op"] == "Relu_")
    (out,) = events[relu]["saved"]
    mul = _first(events, lambda e: e["kind"] == "op" and e["op"] == "Mul" and e["phase"] == "backward")
    mask = events[mul]["input_storages"][1]
    freed = _first(events, lambda e: e["kind"] == "free" and e["storage"] == mask, mul)
    let_go = _first(events, lambda e: e["kind"] == "refcount" and e["storage"] == out and e["delta"] == -1
                    and e["holder"].startswith("tensor"), mul)
    assert freed < let_go
