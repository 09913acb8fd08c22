"""In-place rewriting analysis: which ops of a recorded program could write into their input?

``mt.memory.inplace_plan(trace)`` reads a trace recorded with ``with mt.trace() as tr:``
(a forward pass, usually followed by ``backward()``) and decides, for every forward op,
whether its result could be written into the bytes of one of its inputs instead of new
bytes — ``a = h + 1`` becoming ``h.add_(1)``. It is a pure function of the trace's events
(op events, tensor events, alloc/free events, reads); nothing is re-run.

**The rules** (an op passes only if all hold; the first that fails is the reason given):

1. The op has an in-place variant in microtorch — its class declares one
   (``inplace_variant``: ``add_``, ``sub_``, ``mul_``, ``div_``, ``relu_``, ``clamp_``,
   ``exp_``, ``sigmoid_``, ``tanh_``, ``neg_``, ``sqrt_``; :data:`VARIANTS` collects the
   declarations) — and it is not a view op (those make no new bytes anyway).
2. The result has the input's shape and dtype (``h + b`` with ``h`` of shape [4, 5] and
   ``b`` of shape [5] can overwrite ``h``, not ``b``). Add and mul may overwrite either
   operand; sub, div and the unary ops only the first.
3. The input was made by a recorded op: overwriting a program input (a parameter, the
   data, a tensor created outside the recorded ops) would change the caller's tensors.
4. The input's elements do not overlap each other (an expanded input cannot be written).
5. The in-place variant's backward does not need the overwritten values (what it reads
   instead is part of its declaration). Here the variant matters, not the recorded op:
   ``relu_`` takes its gradient from its *output* (x > 0 exactly where relu(x) > 0), so it
   is fine; ``exp_``, ``sigmoid_``, ``tanh_`` and ``sqrt_`` use their output too; ``add_``,
   ``sub_``, ``neg_`` need nothing; ``clamp_`` keeps a mask. ``mul_`` and ``div_`` need the
   old values when the *other* operand needs a gradient (d(a·b)/db = a, d(a/b)/db =
   -a/b²) — refused then.
6. No later use of the input's bytes: no other node saved them for backward (a saved
   tensor is a use during backward), no later op reads them (directly or through another
   view of the same storage), and they are not still alive when the trace ends (returned
   to, or kept by, the caller). Reads that are not ops count too: ``item()``,
   ``tolist()`` and ``numpy()`` record ``read`` events, and an array ``numpy()`` handed
   out over the bytes themselves reads them until it is dropped.

Decisions are made greedily in program order, and each accepted rewrite changes what the
program saves from then on (an in-place op's saved output is now the overwritten storage),
so a later op may be refused because of an earlier rewrite.

**What it saves.** Every accepted op's output reuses its input's storage, so that output's
allocation disappears: ``saved_bytes`` sums them. The plan also replays the trace's
alloc/free events with the rewrite (an output's bytes are its input's; the merged storage
lives until the last of them is freed) and reports the peak of live bytes before and
after (bytes allocated while recording; what was live before is not counted).

Running the program again with the in-place variants where the plan says so gives the
same outputs and gradients (``tests/test_inplace_plan.py`` checks this).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .aliasing import Layout, overlaps_itself

#: op name -> (in-place method, which input positions it may overwrite), and what the variant's
#: backward uses, in words (rule 5). Filled by :func:`declare` from each op's own declaration
#: (``inplace_variant`` on its :class:`~microtorch.node.Function` class) as the class is defined.
VARIANTS: dict[str, tuple[str, tuple[int, ...]]] = {}
_BACKWARD_USES: dict[str, str] = {}


def declare(op: str, method: str, overwrites: tuple[int, ...], backward_uses: str) -> None:
    """Op ``op`` has the in-place variant ``method``, which may overwrite the inputs at
    ``overwrites`` and whose backward uses ``backward_uses`` (in words)."""
    VARIANTS[op] = (method, tuple(overwrites))
    _BACKWARD_USES[op] = backward_uses


@dataclass
class Decision:
    """The verdict on one forward op. ``index`` counts forward ops from 0; ``step`` is the op
    event's position in the trace; ``into`` is the tensor id whose storage the output would
    reuse (its position among the op's inputs is ``position``)."""

    index: int
    step: int
    op: str
    output: int
    inplace: bool
    reason: str
    method: str | None = None
    into: int | None = None
    position: int | None = None
    nbytes: int = 0  # the output's bytes that the rewrite saves

    def __str__(self) -> str:
        verdict = f"in place ({self.method} into t{self.into})" if self.inplace else "keep"
        return f"op {self.index} {self.op} -> t{self.output}: {verdict}: {self.reason}"


@dataclass
class InplacePlan:
    """The verdict on every forward op, and what the rewrite saves."""

    decisions: list[Decision]
    saved_bytes: int
    peak_before: int
    peak_after: int
    rewrite: dict[int, int] = field(default_factory=dict)  # output tensor id -> input tensor id

    def inplace_ops(self) -> list[int]:
        """Indices (among forward ops) of the ops that can run in place."""
        return [d.index for d in self.decisions if d.inplace]

    def __iter__(self):
        return iter(self.decisions)

    def __len__(self) -> int:
        return len(self.decisions)

    def __getitem__(self, i) -> Decision:
        return self.decisions[i]

    def __str__(self) -> str:
        lines = [str(d) for d in self.decisions]
        lines.append(f"saves {self.saved_bytes} bytes of outputs; peak live bytes "
                     f"{self.peak_before} -> {self.peak_after}")
        return "\n".join(lines)


class _Storage:
    __slots__ = ("nbytes", "alloc", "free", "reads", "saved_by", "made_by_op")

    def __init__(self):
        self.nbytes, self.alloc, self.free = 0, None, None
        self.reads: list[tuple[int, str, int]] = []  # (step, op, tensor id)
        self.saved_by: list[tuple[int, str, int]] = []  # (step, op, node)
        self.made_by_op = False


def inplace_plan(trace) -> InplacePlan:
    """Decide, for every forward op in ``trace``, whether it could run in place (see the
    module docstring for the rules); returns an :class:`InplacePlan`."""
    events = list(trace.events if hasattr(trace, "events") else trace)
    tensors: dict[int, dict] = {}
    storages: dict[int, _Storage] = {}

    def storage(sid) -> _Storage:
        if sid not in storages:
            storages[sid] = _Storage()
        return storages[sid]

    ops = []
    exported: dict[int, list[int]] = {}  # storage -> steps of numpy() arrays over it still alive
    for e in events:
        kind = e["kind"]
        if kind == "tensor":
            tensors.setdefault(e["tensor"], e)  # storage, shape, dtype never change
        elif kind == "alloc":
            s = storage(e["storage"])
            s.nbytes, s.alloc = e["nbytes"], e["step"]
        elif kind == "free":
            storage(e["storage"]).free = e["step"]
        elif kind == "read":
            storage(e["storage"]).reads.append((e["step"], f"{e['how']}()", e["tensor"]))
            if e.get("copy") is False:
                exported.setdefault(e["storage"], []).append(e["step"])
        elif kind == "refcount" and e["delta"] < 0 and e.get("holder") == _EXPORT_HOLDER:
            made = exported.get(e["storage"])
            if made:  # the array is dropped: up to now anything could have read the bytes through it
                storage(e["storage"]).reads.append(
                    (e["step"], f"the array numpy() returned at step {made.pop(0)} (it shares the "
                                "bytes until it is dropped)", None))
        elif kind == "op":
            ins = e.get("input_storages") or [tensors[t]["storage"] for t in e["inputs"]]
            for tid, sid in zip(e["inputs"], ins):
                storage(sid).reads.append((e["step"], e["op"], tid))
            for sid in e["saved"]:
                storage(sid).saved_by.append((e["step"], e["op"], e["node"]))
            out_sid = e.get("output_storage", tensors[e["output"]]["storage"])
            if out_sid not in ins:  # new bytes (a view op's output reads its input's)
                storage(out_sid).made_by_op = True
            ops.append((e, ins, out_sid))

    decisions, rewrite = [], {}
    merged: dict[int, int] = {}  # output storage -> the input storage it now lives in
    index = 0
    for e, ins, out_sid in ops:
        if e["phase"] != "forward":
            continue
        d = _decide(index, e, ins, out_sid, tensors, storages)
        if d.inplace:
            d.nbytes = storages[out_sid].nbytes
            rewrite[e["output"]] = d.into
            merged[out_sid] = ins[d.position]
            _rewrite_saves(e, ins[d.position], out_sid, storages)
        decisions.append(d)
        index += 1
    before = _peak(events, {})
    after = _peak(events, merged)
    return InplacePlan(decisions, sum(d.nbytes for d in decisions), before, after, rewrite)


def _rewrite_saves(e, overwritten: int, out_sid: int, storages) -> None:
    """From now on the program runs the in-place variant: it no longer saves the old input
    (rule 5 said it does not need it), and the variants that take their gradient from
    their output save that (later in-place writes into it must then be refused)."""
    s = storages[overwritten]
    s.saved_by = [entry for entry in s.saved_by if entry[2] != e["node"] or e["node"] is None]
    if e["node"] is not None and e["op"] in _SAVES_OUTPUT:
        storages[out_sid].saved_by.append((e["step"], VARIANTS[e["op"]][0], e["node"]))


_SAVES_OUTPUT = {"Relu", "Exp", "Sigmoid", "Tanh", "Sqrt"}
_EXPORT_HOLDER = "a numpy array from .numpy()"  # how refcount events name a numpy() array's reference


def _decide(index, e, ins, out_sid, tensors, storages) -> Decision:
    op, step, out = e["op"], e["step"], e["output"]

    def keep(reason):
        return Decision(index, step, op, out, False, reason)

    if e.get("inplace"):
        return keep("already an in-place op")
    if out_sid in ins:
        return keep("a view op: its result shares its input's bytes, so there are no new bytes to save")
    if op not in VARIANTS:
        return keep(f"microtorch has no in-place variant of {op}")
    method, positions = VARIANTS[op]
    o = tensors[out]
    refusals = []
    for p in positions:
        if p >= len(ins):
            continue
        why = _refusal(e, p, ins, o, tensors, storages)
        if why is None:
            tid = e["inputs"][p]
            return Decision(index, step, op, out, True,
                            f"writes its result into t{tid}'s storage #{ins[p]}: nothing uses those "
                            f"bytes afterwards, and {_BACKWARD_USES[op]}", method, tid, p)
        refusals.append(f"input {p} (t{e['inputs'][p]}): {why}" if len(positions) > 1 else why)
    return keep("; ".join(refusals))


def _refusal(e, p, ins, o, tensors, storages) -> str | None:
    """Why the op's output cannot overwrite input ``p``, or None if it can."""
    tid, sid = e["inputs"][p], ins[p]
    t, s = tensors[tid], storages[sid]
    if t["shape"] != o["shape"] or t["dtype"] != o["dtype"]:
        return (f"the result ({o['dtype']} {o['shape']}) does not fit the input's shape and dtype "
                f"({t['dtype']} {t['shape']})")
    if not s.made_by_op:
        what = "a leaf that requires grad" if t.get("requires_grad") and t.get("is_leaf") else "a program input"
        return (f"t{tid} is {what} (storage #{sid} was not made by a recorded op): overwriting it "
                "would change the caller's tensor")
    strides = (e.get("input_strides") or [None] * len(ins))[p]
    if strides is not None and overlaps_itself(Layout(sid, 0, tuple(t["shape"]), tuple(strides), 1, 0)):
        return f"t{tid}'s elements overlap (an expanded view, strides {strides}): it cannot be written"
    other = 1 - p if len(ins) == 2 else None
    node = e["node"]
    if e["op"] in ("Mul", "Div") and other is not None and e["next"] and e["next"][other] is not None:
        return (f"{e['op'].lower()}_ would need the old values of t{tid} for the gradient of the other "
                "operand (d(a·b)/db = a, d(a/b)/db = -a/b²), and they would be overwritten")
    if e["op"] in ("Mul", "Div") and other is not None and ins[other] == sid and node is not None:
        return (f"the other operand reads the same bytes (storage #{sid}), and {e['op'].lower()}_ "
                "saves it for backward: it would be overwritten before backward reads it")
    for step, op, saver in s.saved_by:
        if saver != node:  # the op's own saves were judged by rule 5 above
            if op.endswith("_"):  # an earlier op this plan already rewrote
                return (f"t{tid} is the result of {op} (step {step}, rewritten in place by this plan), "
                        "which saves its result for backward: overwriting it would corrupt that gradient")
            return (f"{op} (node {saver}, op event at step {step}) saves storage #{sid} for backward: "
                    "overwriting it would corrupt that gradient")
    for step, op, reader in s.reads:
        if step > e["step"]:
            via = ("" if reader in (tid, None) else
                   f" through t{reader}, another view of storage #{sid},")
            return f"t{tid} is read again{via} by {op} at step {step}"
    if s.free is None:
        return (f"t{tid}'s storage #{sid} is still alive when the trace ends (returned to, or kept "
                "by, the caller): overwriting it would change what the caller sees")
    return None


def _peak(events, merged: dict[int, int]) -> int:
    """Peak live bytes over the trace's alloc/free events, with each storage in ``merged``
    living inside another one (its alloc dropped; the host freed with the last of them)."""

    def host(sid):
        while sid in merged:
            sid = merged[sid]
        return sid

    holders: dict[int, int] = {}  # host storage -> members still allocated
    live = peak = 0
    nbytes: dict[int, int] = {}
    for e in events:
        kind = e["kind"]
        if kind == "alloc":
            h = host(e["storage"])
            if h == e["storage"]:
                nbytes[h] = e["nbytes"]
                live += e["nbytes"]
                peak = max(peak, live)
            holders[h] = holders.get(h, 0) + 1
        elif kind == "free":
            h = host(e["storage"])
            if h not in holders:  # allocated before the trace started
                continue
            holders[h] -= 1
            if holders[h] == 0:
                live -= nbytes.get(h, 0)
                del holders[h]
    return peak
