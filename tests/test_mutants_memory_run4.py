"""Tests that kill mutants mutmut left alive in microtorch/memory/ in the fourth run (issue #21).

The fourth run covered the modules the third did not reach (aliasing, pool, storage,
node_arena, block, views, placement) and re-ran the third run's untriaged survivors (arena,
inplace_analysis, mapped). Each test pins a behaviour some surviving mutant changed, with the
expected values worked out by hand from the rules in the module's docstring, not read back
from the code under test. tests/mutation-run-4/memory.md lists the mutants and which test
kills each; tests/README.md ("Mutation testing") says how survivors are triaged. Allocators
that register (Pool, Arena) are compared through ``.name``: a live allocator of the same name
numbers a new one ("arena #2"), as happens under mutmut, which runs with automatic garbage
collection off.
"""
import ctypes
import errno
import io
import os
import types
import zipfile

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import mapped
from microtorch.memory.storage import Storage


def _fields(event):
    d = event.to_dict()
    del d["step"]
    return d


# -- Arena.free / Arena.reset: the blocks they give back and the trace events they write -----------
def test_arena_free_and_reset_events_name_the_arena_the_blocks_and_the_stale_storages():
    arena = mt.memory.Arena(capacity=1024, name="events arena")
    with mt.trace() as tr:
        a = arena.alloc(16, "a")
        b = arena.alloc(16, "b")
        arena.free(a)                                    # one block marked dead, the others stay
        c = arena.alloc(8, "c")
        s = Storage(np.frombuffer(c.memory, np.float32, 2), c, "activation")  # c's bytes in use
        arena.reset()                                    # reclaims b (no storage) and c (stale s)
        arena.reset()                                    # nothing left to reclaim
    assert a.live is False and b.live is False and c.live is False
    assert s.stale == f"its bytes lived in {arena.name}, which was reset"
    assert [_fields(e) for e in tr.filter("free_block")] == [
        {"kind": "free_block", "allocator": arena.name, "block": a.id}]
    assert [_fields(e) for e in tr.filter("arena_reset")] == [
        {"kind": "arena_reset", "arena": arena.name, "generation": 1, "blocks": [b.id, c.id], "stale": [s.id]},
        {"kind": "arena_reset", "arena": arena.name, "generation": 2, "blocks": [], "stale": []}]
    assert (arena.resets, arena.generation, arena.stats()["live_blocks"]) == (2, 2, 0)


# -- MappedFile: its blocks, their refusals, giving them back ---------------------------------------
def _one_file(tmp_path, nbytes=64):
    path = tmp_path / "raw.bin"
    path.write_bytes(bytes(range(nbytes)))
    return path


def test_mapped_file_defaults_to_read_only_and_starts_mapped(tmp_path):
    m = mapped.MappedFile(_one_file(tmp_path))
    assert m.mode == "r" and m.unmapped is False and m.mapping.dtype == np.uint8 and m.mapping.size == 64
    assert not m.mapping.flags.writeable


def test_mapped_file_block_covers_its_byte_range_of_the_file(tmp_path):
    m = mapped.MappedFile(_one_file(tmp_path))
    whole = m.block(0, 64)                                # exactly the file: allowed
    tail = m.block(60, 4, "weights")
    empty = m.block(64, 0)                                # an empty range at the very end
    assert [(x.chunk, x.offset, x.nbytes, x.size, x.padding, x.tag) for x in (whole, tail, empty)] == [
        (0, 0, 64, 64, 0, "tensor"), (0, 60, 4, 4, 0, "weights"), (0, 64, 0, 0, 0, "tensor")]
    assert tail.memory.tolist() == [60, 61, 62, 63]       # the file's bytes 60..63
    assert whole.memory.tolist() == list(range(64))
    assert m.live == {whole.id: whole, tail.id: tail, empty.id: empty}
    for offset, nbytes in ((-1, 1), (-1, 0), (62, 4), (1, 64), (65, 0)):
        with pytest.raises(ValueError, match=r"lie outside the file \(64 bytes\)"):
            m.block(offset, nbytes)


def test_mapped_file_free_refuses_foreign_and_dead_blocks_and_lets_the_mapping_go_last(tmp_path):
    m = mapped.MappedFile(_one_file(tmp_path))
    other = mapped.MappedFile(_one_file(tmp_path))
    a, b = m.block(0, 8), m.block(8, 8)
    foreign = other.block(0, 8)
    with pytest.raises(mt.memory.AllocatorError, match="is not a live block of this mapping"):
        m.free(foreign)                                   # live, but another mapping's
    m.free(a)
    assert a.live is False and a.memory is None and m.mapping is not None and m.unmapped is False
    with pytest.raises(mt.memory.AllocatorError, match="is not a live block of this mapping"):
        m.free(a)                                         # ours, but already given back
    m.free(b)                                             # the last one: the mapping goes
    assert b.live is False and b.memory is None and m.mapping is None and m.unmapped is True
    assert m.live == {}


# -- load_mapped / npz_members ------------------------------------------------------------------------
def _npy(array, version=None, header=None):
    """The bytes of an .npy file of ``array`` (``header``: written as given, then the raw bytes)."""
    f = io.BytesIO()
    if header is None:
        np.lib.format.write_array(f, array, version=version, allow_pickle=False)
    else:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(array.tobytes(order="A"))
    return f.getvalue()


def _zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_load_mapped_defaults_to_read_only_tensors_tagged_tensor(tmp_path):
    path = tmp_path / "w.npz"
    mt.save({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.float64(2.5)}, path)
    out = mapped.load_mapped(path)
    w, s = out["w"], out["s"]
    assert w.shape == (2, 3) and w.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert s.shape == () and s.item() == 2.5
    for t in (w, s):
        assert t.storage.tag == "tensor" and t.storage.block.tag == "tensor"
        assert t.storage.block.owner.mode == "r"
    with pytest.raises(ValueError, match="read-only"):
        w.numpy()[0, 0] = 9.0                             # numpy refuses: the mapping is read-only


def test_load_mapped_asks_check_dtype_about_every_array_with_its_name_and_path(tmp_path):
    path = tmp_path / "two.npz"
    mt.save({"a": np.zeros(2, np.float32), "b": np.zeros(3, np.int64)}, path)
    asked = []
    out = mapped.load_mapped(path, check_dtype=lambda *args: asked.append(args))
    assert asked == [(np.dtype(np.float32), "a", os.fspath(path)), (np.dtype(np.int64), "b", os.fspath(path))]
    assert sorted(out) == ["a", "b"]

    def refuse_int64(dtype, name, where):
        if dtype == np.int64:
            raise TypeError(f"{name} in {where}: no int64 here")

    with pytest.raises(TypeError, match=f"b in {path}: no int64 here"):
        mapped.load_mapped(path, check_dtype=refuse_int64)


def test_npz_members_keeps_names_without_npy_and_reads_version_2_headers(tmp_path):
    x = np.arange(5, dtype=np.int16)
    path = _zip(tmp_path / "hand.npz", {"plain": _npy(x), "v2.npy": _npy(x * 2, version=(2, 0))})
    members = mapped.npz_members(path)
    assert sorted(members) == ["plain", "v2"]
    data = path.read_bytes()
    for name, expected in (("plain", x), ("v2", x * 2)):
        dtype, shape, offset = members[name]
        assert (dtype, shape) == (np.dtype(np.int16), (5,))
        assert np.frombuffer(data, np.int16, 5, offset).tolist() == expected.tolist()


def test_npz_members_reads_names_longer_than_32767_bytes(tmp_path):
    name = "n" * 40000                                    # the local header's length field is unsigned
    path = _zip(tmp_path / "long.npz", {name + ".npy": _npy(np.array([7.0, 8.0]))})
    dtype, shape, offset = mapped.npz_members(path)[name]
    assert (dtype, shape) == (np.dtype(np.float64), (2,))
    assert np.frombuffer(path.read_bytes(), np.float64, 2, offset).tolist() == [7.0, 8.0]


def test_npz_members_accepts_a_one_dimensional_fortran_flag_and_refuses_two_dimensions(tmp_path):
    v = np.array([1.0, 2.0, 3.0], np.float32)              # 1-D: Fortran and C order are the same bytes
    path = _zip(tmp_path / "f1.npz", {"v.npy": _npy(v, header={"descr": "<f4", "fortran_order": True, "shape": (3,)})})
    assert mapped.npz_members(path)["v"][1] == (3,)
    m = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    path = _zip(tmp_path / "f2.npz", {"m.npy": _npy(m)})
    with pytest.raises(ValueError, match="'m' is stored in Fortran order"):
        mapped.npz_members(path)


# -- resident_pages / evict_from_page_cache -----------------------------------------------------------
def test_resident_pages_reports_mincores_errno_when_it_fails():
    unmapped = types.SimpleNamespace(ctypes=types.SimpleNamespace(data=0), nbytes=4096)  # page 0: never mapped
    ctypes.set_errno(0)  # ctypes' private copy of errno, which only a use_errno library updates
    with pytest.raises(OSError, match="mincore failed") as info:
        mapped.resident_pages(unmapped)
    assert info.value.errno == errno.ENOMEM


def test_evict_from_page_cache_drops_every_page_of_the_file_from_the_first(tmp_path):
    import mmap as _mmap
    page = _mmap.PAGESIZE
    path = tmp_path / "cached.bin"
    path.write_bytes(b"\1" * (4 * page))
    assert path.read_bytes()[:1] == b"\1"                 # read: its pages are in the page cache
    m = np.memmap(path, np.uint8, mode="r")
    if not mapped.resident_pages(m).all():
        pytest.skip("this file system does not keep the file's pages in the page cache")
    mapped.evict_from_page_cache(path)
    assert mapped.resident_pages(m).tolist() == [False] * 4


# -- inplace_plan, on programs written by hand as event lists ---------------------------------------
from microtorch.memory import inplace_analysis  # noqa: E402
from microtorch.memory.inplace_analysis import Decision, inplace_plan  # noqa: E402


class _Program:
    """A trace written by hand: plain dict events (as a trace file holds them), numbered in order.
    Tensor ``t<n>`` lives in storage ``#<n>`` unless said otherwise."""

    def __init__(self):
        self.events = []

    def _emit(self, kind, **fields):
        self.events.append({"kind": kind, "step": len(self.events), **fields})
        return len(self.events) - 1

    def tensor(self, tid, sid=None, shape=(4,), dtype="float32", requires_grad=False, is_leaf=False):
        return self._emit("tensor", tensor=tid, storage=tid if sid is None else sid, shape=list(shape),
                          dtype=dtype, requires_grad=requires_grad, is_leaf=is_leaf)

    def alloc(self, sid, nbytes=16):
        return self._emit("alloc", storage=sid, nbytes=nbytes)

    def free(self, sid, nbytes=16):
        return self._emit("free", storage=sid, nbytes=nbytes)

    def op(self, op, inputs, output, node=None, saved=(), next=None, phase="forward", **extra):
        return self._emit("op", op=op, phase=phase, node=node, inputs=list(inputs), output=output,
                          saved=list(saved), next=[None] * len(inputs) if next is None else list(next), **extra)

    def read(self, tid, sid, how, copy=True):
        return self._emit("read", tensor=tid, storage=sid, how=how, copy=copy)

    def drop_array(self, sid):
        return self._emit("refcount", storage=sid, refcount=1, delta=-1, holder="a numpy array from .numpy()")

    def made(self, op, inputs, tid, nbytes=16, **kw):
        """``t<tid> = op(inputs)``: its bytes allocated, the tensor seen, the op event; the op's step."""
        self.alloc(tid, nbytes)
        self.tensor(tid, shape=kw.pop("shape", (4,)))
        return self.op(op, inputs, tid, **kw)


def _program_input(tid, what):
    return (f"t{tid} is {what} (storage #{tid} was not made by a recorded op): overwriting it "
            "would change the caller's tensor")


def test_inplace_plan_keeps_a_program_input_and_rewrites_the_next_op_and_counts_the_bytes():
    p = _Program()
    p.tensor(1)                                   # x: a program input (its bytes allocated before)
    exp = p.made("Exp", [1], 2)                   # t2 = exp(x): x is the caller's, keep
    p.free(1)                                     # the caller drops x (allocated before the trace)
    neg = p.made("Neg", [2], 3)                   # t3 = -t2: t2 is dead afterwards, so neg_ into it
    p.free(2)
    p.free(3)
    plan = inplace_plan(types.SimpleNamespace(events=p.events))  # anything with .events, or the events
    keep, rewrite = plan.decisions
    assert keep == Decision(0, exp, "Exp", 2, False, _program_input(1, "a program input"))
    assert str(keep) == f"op 0 Exp -> t2: keep: {_program_input(1, 'a program input')}"
    assert (rewrite.index, rewrite.step, rewrite.op, rewrite.output, rewrite.inplace, rewrite.method,
            rewrite.into, rewrite.position, rewrite.nbytes) == (1, neg, "Neg", 3, True, "neg_", 2, 0, 16)
    assert rewrite.reason.startswith("writes its result into t2's storage #2: nothing uses those bytes "
                                     "afterwards, and ")
    assert str(rewrite) == f"op 1 Neg -> t3: in place (neg_ into t2): {rewrite.reason}"
    assert plan.rewrite == {3: 2} and plan.inplace_ops() == [1] and plan.saved_bytes == 16
    # live bytes: 16 (t2), 32 (t2 and t3) before; t3 inside t2's bytes: 16 after
    assert (plan.peak_before, plan.peak_after) == (32, 16)
    assert inplace_plan(p.events).decisions == plan.decisions


def test_inplace_plan_names_each_input_of_a_binary_op_and_why_it_cannot_be_overwritten():
    p = _Program()
    p.tensor(1, shape=(4, 5), requires_grad=True, is_leaf=True)   # a parameter
    p.tensor(2, shape=(5,))                                        # data
    p.made("Neg", [1], 3, shape=(4, 5))
    p.made("Neg", [2], 4, shape=(5,))
    p.made("Add", [3, 4], 5, shape=(4, 5))          # t5 = t3 + t4 (broadcast): into t3 or t4?
    item = p.read(3, 3, "item")                     # t3 is read afterwards; t4 has the wrong shape
    p.free(3)
    p.made("Sigmoid", [5], 6, shape=(4, 5))         # t5 is never freed: the caller keeps it
    p.tensor(7, sid=6, shape=(4, 5))                # another view of t6's storage
    p.made("Tanh", [6], 8, shape=(4, 5))
    tolist = p.read(7, 6, "tolist")                 # read through the view, after the Tanh
    plan = inplace_plan(p.events)
    assert [d.reason for d in plan] == [
        _program_input(1, "a leaf that requires grad"),
        _program_input(2, "a program input"),
        f"input 0 (t3): t3 is read again by item() at step {item}; input 1 (t4): the result "
        "(float32 [4, 5]) does not fit the input's shape and dtype (float32 [5])",
        "t5's storage #5 is still alive when the trace ends (returned to, or kept by, the caller): "
        "overwriting it would change what the caller sees",
        f"t6 is read again through t7, another view of storage #6, by tolist() at step {tolist}"]
    assert plan.inplace_ops() == [] and plan.rewrite == {} and plan.saved_bytes == 0


def test_inplace_plan_mul_and_div_refuse_to_overwrite_what_the_gradient_of_the_other_operand_needs():
    p = _Program()
    p.tensor(1)
    p.tensor(2)
    p.made("Neg", [1], 3)
    p.made("Neg", [2], 4)
    p.made("Div", [3, 4], 5, node=10, saved=[3, 4], next=[None, 11])      # t4 needs a gradient
    p.made("Mul", [3, 4], 6, node=12, saved=[3, 4], next=[11, 13])        # both need one
    p.tensor(7, sid=3)                                                      # t3.detach(): same bytes
    p.made("Mul", [3, 7], 8, node=14, saved=[3, 3], next=[15, None])     # t3 * t3.detach()
    p.made("Div", [3, 7], 9, node=16, saved=[3, 3], next=[15, None])
    for sid in (3, 4, 5, 6, 8, 9):
        p.free(sid)
    plan = inplace_plan(p.events)

    def old_values(op, tid):
        return (f"{op}_ would need the old values of t{tid} for the gradient of the other operand "
                "(d(a·b)/db = a, d(a/b)/db = -a/b²), and they would be overwritten")

    def same_bytes(op):
        return (f"the other operand reads the same bytes (storage #3), and {op}_ saves it for backward: "
                "it would be overwritten before backward reads it")

    assert [d.reason for d in plan][2:] == [
        old_values("div", 3),
        f"input 0 (t3): {old_values('mul', 3)}; input 1 (t4): {old_values('mul', 4)}",
        f"input 0 (t3): {same_bytes('mul')}; input 1 (t7): {old_values('mul', 7)}",
        same_bytes("div")]


def test_inplace_plan_add_may_overwrite_an_operand_that_is_also_the_other_and_a_scalar_op_has_one():
    p = _Program()
    p.tensor(1)
    p.made("Neg", [1], 2)
    p.made("Add", [2, 2], 3, node=5, next=[6, 6])          # t2 + t2: add_ needs no values
    p.made("Mul", [3], 4, node=7, next=[5])                # t3 * 2: one input, positions (0, 1)
    p.made("Add", [4], 8, node=9, next=[7])                # t4 + 1
    for sid in (2, 3, 4, 8):
        p.free(sid)
    plan = inplace_plan(p.events)
    assert [(d.inplace, d.method, d.into, d.position) for d in plan] == [
        (False, None, None, None), (True, "add_", 2, 0), (True, "mul_", 3, 0), (True, "add_", 4, 0)]
    assert plan.rewrite == {3: 2, 4: 3, 8: 4} and plan.saved_bytes == 48


def test_inplace_plan_refuses_what_another_node_saves_and_what_an_earlier_rewrite_now_saves():
    p = _Program()
    p.tensor(1)
    p.made("Neg", [1], 2)
    relu = p.made("Relu", [2], 3, node=4, saved=[2])       # relu_ into t2: it then saves its output t3
    p.free(2)
    p.made("Neg", [3], 5, node=6, next=[4])                # would overwrite what relu_ saved
    p.made("Exp", [5], 7, node=8, saved=[7], next=[6])
    mul = p.made("Mul", [5, 1], 9, node=10, saved=[5, 1], next=[8, None])  # saves t5 for backward
    for sid in (3, 5, 7, 9):
        p.free(sid)
    plan = inplace_plan(p.events)
    assert [d.inplace for d in plan] == [False, True, False, False, True]  # mul_ into t5: its own save
    assert plan[1].method == "relu_" and plan[1].into == 2
    assert plan[2].reason == (f"t3 is the result of relu_ (step {relu}, rewritten in place by this plan), "
                              "which saves its result for backward: overwriting it would corrupt that gradient")
    assert plan[3].reason == (f"Mul (node 10, op event at step {mul}) saves storage #5 for backward: "
                              "overwriting it would corrupt that gradient")


def test_inplace_plan_counts_a_numpy_array_over_the_bytes_as_a_read_until_it_is_dropped():
    p = _Program()
    p.tensor(1)
    p.made("Neg", [1], 2)
    exported = p.read(2, 2, "numpy", copy=False)          # an array over t2's bytes
    p.made("Exp", [2], 3)
    dropped = p.drop_array(2)
    p.free(2)
    p.free(3)
    plan = inplace_plan(p.events)
    assert plan[1].reason == (f"t2 is read again by the array numpy() returned at step {exported} (it "
                              f"shares the bytes until it is dropped) at step {dropped}")


def test_inplace_plan_takes_storages_from_the_op_event_when_it_names_them():
    # t2 was seen in storage #2 first, then repointed to #5 (not made by a recorded op): the op
    # event's input_storages say which bytes it read
    p = _Program()
    p.tensor(1)
    p.made("Neg", [1], 2)
    p.tensor(2, sid=5)
    p.made("Exp", [2], 3, input_storages=[5])
    for sid in (2, 3, 5):
        p.free(sid)
    assert inplace_plan(p.events)[1].reason == (
        "t2 is a program input (storage #5 was not made by a recorded op): overwriting it would change "
        "the caller's tensor")
    # the output's storage named by the op event (#6), not the one the tensor was first seen in (#2)
    p = _Program()
    p.tensor(1)
    p.alloc(6, 24)
    p.tensor(2)
    p.op("Neg", [1], 2, output_storage=6)
    p.made("Exp", [2], 3, input_storages=[6])
    p.free(6)
    p.free(3)
    plan = inplace_plan(p.events)
    assert plan[1].inplace and plan[1].reason.startswith("writes its result into t2's storage #6:")


def test_inplace_plan_decides_forward_ops_only_and_refuses_overlapping_views_in_place_ops_and_views():
    p = _Program()
    p.tensor(1, shape=(2, 3))
    p.made("Neg", [1], 2, shape=(2, 3))
    p.made("Relu", [2], 3, shape=(2, 3), input_strides=[[2, 1]])   # rows overlap: 0 1 2 / 2 3 4
    p.tensor(9, shape=(2, 3))
    p.op("Neg", [3], 9, phase="backward")                            # not a forward op: no decision
    p.made("Relu", [2], 4, shape=(2, 3), input_strides=[[0, 1]])   # an expanded row
    p.tensor(5, sid=2, shape=(2, 3))
    p.op("Relu", [2], 5, inplace=True, output_storage=2)             # relu_ itself
    p.tensor(6, sid=2, shape=(3, 2))
    p.op("View", [2], 6)                                             # a view: same bytes
    p.made("Matmul", [2, 6], 7, shape=(2, 2))
    for sid in (2, 3, 4, 7):
        p.free(sid)
    plan = inplace_plan(p.events)
    assert [d.index for d in plan] == [0, 1, 2, 3, 4, 5]
    assert [d.reason for d in plan][1:] == [
        "t2's elements overlap (an expanded view, strides [2, 1]): it cannot be written",
        "t2's elements overlap (an expanded view, strides [0, 1]): it cannot be written",
        "already an in-place op",
        "a view op: its result shares its input's bytes, so there are no new bytes to save",
        "microtorch has no in-place variant of Matmul"]


def test_inplace_plan_without_some_alloc_events_counts_only_the_bytes_it_saw(monkeypatch):
    # a window of a trace: t2's bytes (and t5's) were allocated before it starts
    p = _Program()
    p.tensor(1)
    p.tensor(2)
    p.op("Exp", [1], 2)
    p.made("Neg", [2], 3)                         # 16 B seen; neg_ into t2 (host allocated unseen)
    p.free(2)                                     # the host goes with its last member...
    p.free(3)                                     # ...t3: the bytes t3 reused were never counted
    p.tensor(5)
    p.op("Tanh", [3], 5)                          # tanh_ into t3; t5's own bytes were never seen
    p.free(5)
    p.alloc(6, 16)
    plan = inplace_plan(p.events)
    assert plan.inplace_ops() == [1, 2] and [d.nbytes for d in plan] == [0, 16, 0]
    assert (plan.saved_bytes, plan.peak_before, plan.peak_after) == (16, 16, 16)


def test_declare_records_an_ops_variant_and_the_positions_in_the_order_given(monkeypatch):
    monkeypatch.setattr(inplace_analysis, "VARIANTS", {})
    monkeypatch.setattr(inplace_analysis, "_BACKWARD_USES", {})
    inplace_analysis.declare("Rsub", "rsub_", [1, 0], "rsub_ needs no values for backward")
    assert inplace_analysis.VARIANTS == {"Rsub": ("rsub_", (1, 0))}
    assert inplace_analysis._BACKWARD_USES == {"Rsub": "rsub_ needs no values for backward"}
    p = _Program()
    p.tensor(1)
    p.made("Rsub", [1], 2)                        # 1 - x: one input; position 1 is skipped, 0 tried
    p.made("Rsub", [2], 3)
    p.free(2)
    p.free(3)
    plan = inplace_plan(p.events)
    assert plan[0].reason == "input 0 (t1): " + _program_input(1, "a program input")  # two positions
    assert plan[1].reason == ("writes its result into t2's storage #2: nothing uses those bytes afterwards, "
                              "and rsub_ needs no values for backward")


# -- views.made_in_grad_mode: what in-place ops on views consult ---------------------------------
from microtorch.memory import views as _views  # noqa: E402
from microtorch.memory.aliasing import Layout, alias  # noqa: E402


def test_made_in_grad_mode_tells_registered_views_made_with_and_without_grad_from_other_tensors():
    a = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1.0
    v = b[1:]
    with mt.no_grad():
        w = b[:2]
    assert _views.made_in_grad_mode(v) is True and _views.made_in_grad_mode(w) is False
    assert _views.made_in_grad_mode(b) is None and _views.made_in_grad_mode(b.detach()) is None


def test_in_place_writes_into_views_refuse_a_leafs_view_and_a_no_grad_view_and_rebase_the_rest():
    a = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        a[1:].add_(1.0)
    b = a * 1.0
    with mt.no_grad():
        w = b[:2]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        w.mul_(2.0)
    v = b[1:]
    v.mul_(2.0)                     # b = [a0, 2 a1, 2 a2]: d(sum b)/da = [1, 2, 2]
    b.sum().backward()
    assert a.grad.tolist() == [1.0, 2.0, 2.0]


# -- aliasing: the layouts the exact answers are computed on ----------------------------------------
def test_layout_moving_drops_the_dimensions_that_do_not_move_and_keeps_the_rest():
    lay = Layout(7, 3, (4, 1, 5, 2), (10, 99, 0, -1), 8, 50, 4096)   # size 1 and stride 0 do not move
    assert lay.moving() == Layout(7, 3, (4, 2), (10, -1), 8, 50, 4096)
    assert np.unique(lay.addresses()).tolist() == np.unique(lay.moving().addresses()).tolist()


def test_layout_in_bytes_is_the_same_bytes_as_one_byte_elements_from_the_origin():
    lay = Layout(3, 5, (2, 3), (4, 1), 4, 12, 1000)   # float32 elements 5 + 4i + j of a storage at byte 1000
    b = lay.in_bytes(960)
    assert (b.shape, b.strides, b.itemsize, b.address) == ((2, 3, 4), (16, 4, 1), 1, 960)
    # element (i, j) holds the bytes 1000 + 4 (5 + 4i + j) + k, k < 4: minus the origin 960
    i, j, k = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    assert np.array_equal(b.addresses(), 40 + 4 * (5 + 4 * i + j) + k)
    assert b.storage_size == 40 + 12 * 4                # the storage ends 88 bytes past the origin
    other = Layout(4, 0, (3,), (1,), 4, 3, 1000).in_bytes(960)
    assert other.storage == b.storage                   # one frame of raw memory for both


def test_alias_past_the_solvers_budget_enumerates_both_views_and_names_a_shared_element():
    a = Layout(1, 0, (2, 2, 2), (100, 10, 1), 4, 1000)           # addresses 0 1 10 11 100 101 110 111
    apart = Layout(1, 5, (2, 2, 2), (100, 10, 1), 4, 1000)       # each + 5: none shared
    shifted = Layout(1, 1, (2, 2, 2), (100, 10, 1), 4, 1000)     # each + 1: 1, 11, 101, 111 shared
    no = alias(a, apart, max_work=0)
    assert (no.answer, no.method, no.reason) == ("no", "enumeration", "no shared address (enumerated both views)")
    must = alias(a, shifted, max_work=0)
    assert (must.answer, must.method, must.reason) == ("must", "enumeration", "a shared address (enumerated both views)")
    assert must.witness == ((0, 0, 1), (0, 0, 0)) and must.shared_byte == 4   # address 1, the lowest shared
    assert alias(a, apart).answer == "no" and alias(a, shifted).answer == "must"   # the solver agrees


# -- Pool: direct blocks ------------------------------------------------------------------------------
def test_pool_direct_bytes_sum_every_live_direct_block():
    pool = mt.memory.Pool(max_block=1024, name="direct pool")
    a, b = pool.alloc(2000), pool.alloc(3000)          # both above max_block: one buffer each
    assert (a.size_class, b.size_class) == (None, None)
    assert pool.stats()["direct_bytes"] == 5000 and pool.stats()["direct_allocations"] == 2
    pool.free(a)
    assert pool.stats()["direct_bytes"] == 3000
    edge = pool.alloc(1024)                            # exactly max_block: the largest class, not direct
    assert pool.classes[edge.size_class] == 1024 and pool.stats()["direct_allocations"] == 2


def test_pool_defaults_to_the_name_pool_and_spaces_its_classes_as_asked():
    import re
    assert re.fullmatch(r"pool( #\d+)?", mt.memory.Pool().name)   # numbered if another "pool" is alive
    pool = mt.memory.Pool(min_block=64, max_block=256, classes_per_doubling=4, name="jemalloc spacing")
    assert pool.classes == [64, 80, 96, 112, 128, 160, 192, 224, 256]    # 4 per doubling: 2ᵏ/4 apart


def test_size_classes_accept_every_power_of_two_down_to_one_and_refuse_the_rest():
    from microtorch.memory.pool import size_classes
    assert size_classes(1, 4, 1) == [1, 2, 4]                  # 2⁰ is a power of two; one class per doubling
    assert size_classes(1, 1, 1) == [1]
    assert size_classes(64, 256, 1) == [64, 128, 256]
    assert size_classes(4, 16, 4) == [4, 5, 6, 7, 8, 10, 12, 14, 16]   # per_doubling == min_block: steps of 1
    for bad in ((3, 16, 1), (4, 24, 1)):
        with pytest.raises(ValueError, match="must be powers of two"):
            size_classes(*bad)
    for per in (0, 3, 8):
        with pytest.raises(ValueError, match="per_doubling must be a power of two no larger than min_block"):
            size_classes(4, 16, per)


def test_a_pool_of_one_byte_classes_serves_one_byte_from_the_one_byte_class():
    pool = mt.memory.Pool(min_block=1, max_block=64, classes_per_doubling=1, name="tiny classes")
    assert pool.alloc_ns == 0                                   # no time spent allocating yet
    assert [pool.alloc(n).size for n in (0, 1, 2, 3, 64)] == [1, 1, 2, 4, 64]


def test_alias_finds_the_shared_bytes_of_two_storages_over_one_buffer_far_into_the_second():
    base = np.zeros(16, np.float32)                 # 64 bytes
    back = mt.from_numpy(base[8:])                  # a storage over its last 32 bytes
    whole = mt.from_numpy(base)                     # a storage over all of them
    for a, b in ((back, whole), (whole, back), (back, whole[12:]), (back, whole[:8])):
        expected = np.shares_memory(a.numpy(), b.numpy())
        assert alias(a, b).answer == ("must" if expected else "no")
    assert alias(back, whole[:8]).answer == "no" and alias(back, whole[12:]).answer == "must"


# -- the exact solver: random strided pairs against brute force ---------------------------------------
def _random_layout(rng):
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(n) for n in rng.integers(1, 7, ndim))
    strides = tuple(int(s) for s in rng.integers(-12, 13, ndim))
    return Layout(1, int(rng.integers(0, 40)), shape, strides, 1, 200)


def test_alias_solver_agrees_with_brute_force_and_its_witness_indexes_both_views():
    rng = np.random.default_rng(21)
    decided = 0
    for _ in range(3000):
        a, b = _random_layout(rng), _random_layout(rng)
        shared = set(a.addresses().ravel().tolist()) & set(b.addresses().ravel().tolist())
        r = alias(a, b)
        assert r.answer == ("must" if shared else "no"), (a, b, r)
        if r.answer == "must":
            ia, ib = r.witness
            assert all(type(i) is int for i in ia + ib), r.witness     # usable as indices
            assert a.addresses()[ia] == b.addresses()[ib] == r.shared_byte
        decided += r.method == "solver"
    assert decided > 300                                # the solver, not the cheap steps, decided many


def test_alias_of_two_one_dimensional_views_is_solved_in_closed_form_with_no_search():
    # two long 1-D views: one unknown each, solved by the extended Euclidean algorithm
    a = Layout(1, 0, (100_000,), (3,), 1, 10**6)
    b = Layout(1, 1, (100_000,), (5,), 1, 10**6)       # 3y = 1 + 5z: y = 2, z = 1 is the first
    r = alias(a, b, max_work=10)
    assert (r.answer, r.method, r.work) == ("must", "solver", 0)
    assert a.addresses()[r.witness[0]] == b.addresses()[r.witness[1]]


def test_alias_solver_search_counts_worked_by_hand():
    # one element of b at address d against a's Σ stride·index: the solver's candidates, by hand
    def one(d):
        return Layout(1, d, (1,), (1,), 1, 1000)
    a = Layout(1, 0, (5, 2, 2), (100, 10, 1), 1, 1000)          # reach: 1 (last), 11, 411
    r = alias(a, one(411))        # 100·y ≥ 411 − 11 forces y = 4 at once; 10·1 + 1·1 = 11 in closed form
    assert (r.answer, r.method, r.work, r.witness) == ("must", "solver", 1, ((4, 1, 1), (0,)))
    r = alias(a, one(312))        # y ≥ ⌈(312 − 11) / 100⌉ = 4 but y ≤ ⌊312 / 100⌋ = 3: no candidate at all
    assert (r.answer, r.method, r.work) == ("no", "solver", 0)
    c = Layout(1, 0, (4, 3, 3), (5, 4, 2), 1, 1000)              # reach: 4, 12, 27; the rest are even
    r = alias(c, one(14))         # y ∈ [1, 2] and 14 − 5y even: only y = 2, then 4·y' + 2·z = 4 in closed form
    assert (r.answer, r.method, r.work) == ("must", "solver", 1)
    assert r.witness[0][0] == 2 and c.addresses()[r.witness[0]] == 14


def test_alias_reports_each_decision_step_whole():
    def report(a, b, **kw):
        r = alias(a, b, **kw)
        assert r.layouts == (a, b)
        return r.answer, r.exact, r.method, r.reason, r.work

    x = Layout(1, 0, (4,), (1,), 4, 16, 1000)
    elsewhere = Layout(2, 0, (4,), (1,), 4, 4, None)             # another storage, address unknown
    assert report(elsewhere, x) == ("no", True, "storage", "different storages (#2 and #1) over different bytes", 0)
    assert report(x, elsewhere) == ("no", True, "storage", "different storages (#1 and #2) over different bytes", 0)
    assert report(x, Layout(1, 0, (0,), (1,), 4, 16, 1000)) == ("no", True, "empty", "an empty tensor touches no bytes", 0)
    after = Layout(1, 4, (4,), (1,), 4, 16, 1000)               # elements 4..7: touches x's end exactly
    assert report(after, x) == ("no", True, "extent", "their byte extents are disjoint", 0)
    assert report(x, after) == ("no", True, "extent", "their byte extents are disjoint", 0)
    evens, odds = Layout(1, 0, (4,), (2,), 4, 16, 1000), Layout(1, 1, (4,), (2,), 4, 16, 1000)
    assert report(evens, odds, exact=False) == ("may", False, "extent", "overlapping byte extents", 0)
    assert report(evens, odds) == ("no", True, "gcd", "the start addresses differ by 1 elements, not a multiple "
                                                     "of gcd(strides) = 2", 0)
    one, three = Layout(1, 0, (1,), (1,), 4, 16, 1000), Layout(1, 3, (2,), (5,), 4, 16, 1000)
    assert report(x, Layout(1, 0, (2,), (2,), 4, 16, 1000)) == ("must", True, "offset", "both start at the same element", 0)
    assert report(one, three)[2] == "extent"
    c = Layout(1, 0, (2, 2, 2), (10, 4, 3), 1, 100)             # addresses 0 3 4 7 10 13 14 17
    probe = Layout(1, 5, (1,), (1,), 1, 100)                     # 5: y = 0 for 10, then 4y + 3z = 5 fails
    assert report(c, probe) == ("no", True, "solver", "no index pair reaches the same address (exact solver)", 1)
    a = Layout(1, 0, (5, 2, 2), (100, 10, 1), 1, 1000)
    assert report(a, Layout(1, 411, (1,), (1,), 1, 1000), max_work=1) == (
        "must", True, "solver", "an index pair reaches the same address (exact solver)", 1)   # exactly the budget
    hard = Layout(1, 1, (2, 2, 2), (100, 10, 1), 4, 1000)
    base = Layout(1, 0, (2, 2, 2), (100, 10, 1), 4, 1000)
    assert report(base, hard, max_work=0, max_enumerate=16)[2] == "enumeration"     # 8 + 8 addresses: allowed
    assert report(base, hard, max_work=0, max_enumerate=15) == (
        "may", True, "budget", "undecided: the solver tried max_work=0 candidates and enumerating 8 + 8 addresses "
        "is past max_enumerate=15; raise them for an exact answer", 0)
    busy_a = Layout(1, 19, (2, 4), (-7, -9), 1, 100)             # a pair the solver needs 6 candidates for
    busy_b = Layout(1, 38, (3, 2, 6), (-6, -12, -3), 1, 100)
    assert report(busy_a, busy_b, max_work=2, max_enumerate=1)[2:] == (
        "budget", "undecided: the solver tried max_work=2 candidates and enumerating 8 + 36 addresses is past "
        "max_enumerate=1; raise them for an exact answer", 2)
    # two storages over one buffer: every reason says so first
    buf_a = Layout(5, 0, (4,), (1,), 4, 8, 2000)
    buf_b = Layout(6, 0, (4,), (1,), 4, 4, 2016)                 # starts 16 bytes (4 floats) in
    assert report(buf_a, buf_b) == ("no", True, "extent", "storages #5 and #6 share a buffer; their byte extents "
                                                          "are disjoint", 0)


def test_register_numbers_a_name_only_when_a_live_allocator_already_has_it():
    first = mt.memory.Arena(capacity=64, name="register probe")
    second = mt.memory.Arena(capacity=64, name="register probe")
    third = mt.memory.Pool(name="register probe")
    assert (first.name, second.name, third.name) == ("register probe", "register probe #2", "register probe #3")


# -- Pool's trace events and description; refcount holders; layout() ------------------------------
def test_pool_alloc_block_events_carry_every_field_and_describe_names_the_epoch():
    pool = mt.memory.Pool(max_block=1024, name="event pool")
    with mt.trace() as tr:
        a = pool.alloc(60, "x")            # class 64 B, carved at 0 of a 64 KiB slab
        pool.free(a)
        b = pool.alloc(50, "y")            # the same bytes again: reused
        d = pool.alloc(2000, "big")        # direct: its own 2000 B
    assert (a.padding, b.padding) == (0, 0)
    assert [_fields(e) for e in tr.filter("alloc_block")] == [
        {"kind": "alloc_block", "allocator": pool.name, "block": a.id, "size_class": 0, "chunk": 0, "offset": 0,
         "nbytes": 60, "size": 64, "tag": "x", "reused": False, "slab_bytes": 65536},
        {"kind": "alloc_block", "allocator": pool.name, "block": b.id, "size_class": 0, "chunk": 0, "offset": 0,
         "nbytes": 50, "size": 64, "tag": "y", "reused": True, "slab_bytes": 65536},
        {"kind": "alloc_block", "allocator": pool.name, "block": d.id, "size_class": None, "chunk": -1, "offset": 0,
         "nbytes": 2000, "size": 2000, "tag": "big", "reused": False, "slab_bytes": 2000}]
    assert pool.describe() == {"name": pool.name, "kind": "pool", "epoch": 0, "defer_epochs": 0,
                               "classes": [{"size_class": 0, "size": 64, "slabs": [65536], "free": 0}], "held": []}


def test_refcount_events_name_the_tensor_or_the_node_that_holds_the_storage():
    with mt.trace() as tr:
        a = mt.tensor([1.0, 2.0], requires_grad=True)
        b = a * a                          # MulBackward saves a twice
    (ta,) = [e.tensor for e in tr.filter("tensor") if e.storage == a.storage.id][:1]
    holders = [(e.storage, e.holder) for e in tr.filter("refcount")]
    node = tr.filter("op")[0].node
    assert (a.storage.id, f"tensor {ta}") in holders
    assert holders.count((a.storage.id, f"node {node} (MulBackward)")) == 2
    nodes = [e.holder for e in tr.filter("refcount") if e.holder.startswith("node")]
    assert {(h.kind, h.id) for h in nodes} == {("node", node)}
    assert {(e.holder.kind, e.holder.id) for e in tr.filter("refcount") if e.holder == f"tensor {ta}"} == {("tensor", ta)}
    del b


def test_a_size_one_dimension_does_not_weaken_the_gcd_step_and_layout_sizes_are_ints():
    evens = Layout(1, 0, (4, 1), (2, 3), 4, 16)       # the size-1 dimension's stride 3 never moves
    odds = Layout(1, 1, (4, 1), (2, 3), 4, 16)
    assert alias(evens, odds).method == "gcd"
    from microtorch.memory.aliasing import layout
    lay = layout(mt.zeros(2, 3)[:, 1:])
    assert type(lay.storage_size) is int and lay.storage_size == 6


# -- NodeArena: records across several chained chunks, op ids --------------------------------------
from microtorch.memory import node_arena as _node_arena  # noqa: E402


class _Leafless:
    """A stand-in graph node: no inputs, nothing saved."""
    next = ()
    saved = ()


class _OtherLeafless(_Leafless):
    pass


def test_op_id_numbers_each_op_class_once_and_names_it():
    first = type("FirstProbeOp", (_Leafless,), {})      # classes never seen before
    second = type("SecondProbeOp", (_Leafless,), {})
    i = _node_arena.op_id(first)
    assert _node_arena.op_id(first) == i and _node_arena.OPS[i] == "FirstProbeOp"
    j = _node_arena.op_id(second)
    assert j == i + 1 and _node_arena.OPS[j] == "SecondProbeOp" and _node_arena.op_id(second) == j


def test_node_arena_records_land_in_every_chained_chunk_and_resets_are_counted():
    arena = _node_arena.NodeArena(capacity=2, growth=1.5, name="chained node arena")
    ops = [(_Leafless if k % 2 else _OtherLeafless)() for k in range(5)]
    slots = [arena.new(op)[1] for op in ops]      # chunks of 2, then 1 (half of 2), 1 (of 3, rounded down), 2
    assert slots == [0, 1, 2, 3, 4]
    table = arena.table()
    assert table["slot"].tolist() == [0, 1, 2, 3, 4]
    ids = [_node_arena.op_id(type(op)) for op in ops]
    assert table["op"].tolist() == ids
    assert arena.stats()["growths"] == len(arena.chunks) - 1 >= 2
    for op in ops:
        arena.free(op)
    arena.new(ops[0])
    arena.free(ops[0])
    assert arena.stats()["resets"] == 2


def test_node_arena_records_name_the_saved_storages_and_leave_the_rest_zero():
    saved = (types.SimpleNamespace(storage=types.SimpleNamespace(id=7)),
             types.SimpleNamespace(storage=types.SimpleNamespace(id=9)))
    node = types.SimpleNamespace(next=(), saved=saved)
    arena = _node_arena.NodeArena(capacity=4, name="saving node arena")
    arena.new(node)
    (record,) = arena.table()
    assert (record["n_inputs"], record["n_saved"], record["saved"].tolist()) == (0, 2, [7, 9, 0, 0])
    assert record["op"] == _node_arena.op_id(types.SimpleNamespace)


def test_a_heap_storage_keeps_the_tag_it_was_made_for():
    from microtorch.memory.storage import empty_storage
    with mt.memory.use_heap():
        s = empty_storage(3, np.dtype(np.float32), "gradient")
    assert s.block is None and s.tag == "gradient" and s.data.shape == (3,)
