"""The program of one recorded step: what each op, backward node, gradient accumulation and
optimizer update defined and used, read from the trace's events alone.

One instruction per event that closes a piece of work:

==================  =======================================================================
``op`` (forward)    defines the storages allocated since the previous instruction (its
                    result, anything it saved besides); uses its inputs' storages
``op`` (backward)   gradient arithmetic inside backward (``a + b`` of two incoming grads)
``node_run``        a node's backward: defines the gradients it allocated; uses the
                    tensors its forward saved and the incoming gradient (``grad_storage``)
``grad``            accumulation into a leaf's ``.grad``: uses the gradient (``source``),
                    writes the ``.grad`` storage (placed right after the node that made it)
``optimizer_step``  the update: reads the flat gradient buffer, writes the parameters
==================  =======================================================================

Views use their base buffer (events name storages, and a view shares its base's). Buffers
already live when recording started (parameters, inputs, the flat buffers) and storages
not tagged ``"activation"`` (a new ``.grad`` goes to the pool) are *external*: the plan
places only the step's activations and temporaries — what the step arena holds.

A storage still live when the step's last instruction ran (the loss, read with ``.item()``
afterwards) is an *output*: live to the end. Reads that are not ops (``.item()``,
``.numpy()``) are not in the trace; a buffer read that way must still be live at the end.
"""
from __future__ import annotations

from .instructions import BasicBlock, Buffer, Instruction, align

BOUNDARIES = ("op", "node_run", "grad", "optimizer_step")


def signature(e: dict) -> tuple:
    """What identifies an instruction's closing event when the same step runs again."""
    kind = e["kind"]
    if kind == "op":
        return ("op", e["op"], e.get("phase"), tuple(e.get("shape") or ()))
    if kind == "node_run":
        return ("node_run", e["op"], tuple(e.get("grad_shape") or ()))
    if kind == "grad":
        return ("grad", tuple(e.get("shape") or ()))
    return ("optimizer_step", e.get("optimizer"))


def program_from_trace(trace, alignment: int, cls):
    """``cls`` (:class:`~microtorch.planning.program.Program`) built from the events of ``trace``."""
    events = trace.events if hasattr(trace, "events") else list(trace)
    buffers: dict[int, Buffer] = {}
    tensors: dict[int, dict] = {}
    instructions: list[Instruction] = []
    saved_by_node: dict = {}
    pending: list[int] = []  # storages allocated since the last instruction
    pending_grads: list[dict] = []  # grad events waiting for the node_run they happened in
    death: dict[int, int] = {}
    grad_targets, param_storages, grad_flow, forward_out, backward_def = set(), set(), set(), {}, set()
    last_boundary = -1

    def external(sid: int, nbytes: int = 0, tag=None) -> None:
        if sid is not None and sid not in buffers:
            buffers[sid] = Buffer(f"s{sid}", nbytes, align(nbytes, alignment), "input", None, True,
                                  storage=sid, tag=tag)

    def add(kind: str, op: str, text: str, defs, uses, event: int, sig: tuple = ()) -> None:
        defs = list(dict.fromkeys(d for d in defs if d is not None))
        new = set(pending) & set(defs)
        uses = [u for u in dict.fromkeys(uses) if u is not None and u not in new]
        for u in uses + defs:
            external(u)
        i = len(instructions)
        for d in defs:
            if buffers[d].producer is None and not (buffers[d].external and d not in new):
                buffers[d].producer = i
        instructions.append(Instruction(i, text, tuple(f"s{d}" for d in defs), tuple(f"s{u}" for u in uses),
                                        "step", kind, op, event, sig))

    def flush_grads() -> None:
        for g in pending_grads:
            target = g.get("storage")
            grad_targets.add(target)
            grad_flow.add(g.get("source"))
            name = tensors.get(g.get("tensor"), {}).get("name") or f"tensor {g.get('tensor')}"
            add("grad", f"grad {g.get('shape')}", f"{name} {g.get('shape')}: .grad += gradient", [target],
                [g.get("source"), target], g["step"], signature(g))
            if target in pending:  # a new .grad: this accumulation made it
                pending.remove(target)
        pending_grads.clear()

    for e in events:
        kind = e["kind"]
        if kind == "baseline":
            for s in e.get("storages", ()):
                external(s["storage"], s["nbytes"], s.get("tag"))
        elif kind == "tensor":
            tensors[e["tensor"]] = e
        elif kind == "refcount":
            external(e["storage"])
        elif kind == "alloc":
            sid, tag = e["storage"], e.get("tag")
            buffers[sid] = Buffer(f"s{sid}", e["nbytes"], align(e["nbytes"], alignment), "temporary", None,
                                  tag != "activation", storage=sid, tag=tag, event=e["step"])
            pending.append(sid)
        elif kind == "free":
            death[e["storage"]] = e["step"]
        elif kind == "op":
            out = e.get("output_storage")
            ins = list(e.get("input_storages", ()))
            defs = list(pending) + ([out] if e.get("inplace") else [])
            if out in pending and e.get("phase") == "forward":
                forward_out[out] = e
            if e.get("phase") == "backward":
                backward_def.update(pending)
                grad_flow.add(out)
            if e.get("node") is not None:
                saved_by_node[e["node"]] = list(e.get("saved", ()))
            names = [tensors.get(t, {}).get("name") or f"t{t}" for t in e.get("inputs", ())]
            add("forward" if e.get("phase") == "forward" else "backward", e["op"],
                f"{e['op']}({', '.join(names)}) → {e.get('shape')}", defs, ins + list(e.get("saved", ())), e["step"], signature(e))
            pending.clear()
            last_boundary = e["step"]
        elif kind == "node_run":
            backward_def.update(pending)
            g = e.get("grad_storage")
            grad_flow.add(g)
            targets = {gr.get("storage") for gr in pending_grads}  # new .grad storages: the grad's own
            add("backward", e["op"], f"{e['op']} (grad {e.get('grad_shape')})",
                [p for p in pending if p not in targets], saved_by_node.get(e["node"], []) + [g], e["step"], signature(e))
            pending[:] = [p for p in pending if p in targets]
            flush_grads()
            pending.clear()
            last_boundary = e["step"]
        elif kind == "grad":
            pending_grads.append(e)
            last_boundary = e["step"]
        elif kind == "optimizer_step":
            flush_grads()
            param_storages.update(e.get("params", ()))
            grad_targets.update(e.get("grads", ()))
            add("optimizer", e["optimizer"], f"{e['optimizer']}.step()", list(pending) + list(e.get("params", ())),
                list(e.get("params", ())) + list(e.get("grads", ())), e["step"], signature(e))
            pending.clear()
            last_boundary = e["step"]
    flush_grads()
    if pending:  # allocated after the last op: still part of the step
        add("tail", "", "allocations after the last op", list(pending), [], len(events) - 1)
        pending.clear()
    _name_kinds(buffers, tensors, grad_targets, param_storages, grad_flow, forward_out, backward_def, instructions)
    used = {n for ins in instructions for n in ins.defs + ins.uses}
    # external buffers first; the planned ones in allocation order (storage ids count up)
    ordered = sorted((b for b in buffers.values() if not b.external or b.name in used),
                     key=lambda b: (not b.external, b.storage))
    outputs = [b.name for b in ordered  # still live after the last instruction ran
               if b.external or death.get(b.storage) is None or death[b.storage] > last_boundary]
    return cls(ordered, instructions, [BasicBlock("step", list(range(len(instructions))))], outputs,
               alignment, source=f"from a trace of {len(events)} events")


def _name_kinds(buffers, tensors, grad_targets, param_storages, grad_flow, forward_out, backward_def,
                instructions) -> None:
    """Kind and label of every buffer, from what the events said about its storage."""
    leaf_params = {t["storage"] for t in tensors.values() if t.get("requires_grad") and t.get("is_leaf")}
    for sid, b in buffers.items():
        if b.external:
            if sid in grad_targets or b.tag == "gradient":
                b.kind = "gradient"
            elif sid in param_storages or sid in leaf_params:
                b.kind = "parameter"
            else:
                b.kind = "input"
        elif sid in forward_out:
            b.kind = "activation"
        elif sid in grad_flow or sid in backward_def:
            b.kind = "gradient"
        else:
            b.kind = "temporary"
        e = forward_out.get(sid)
        if e is not None:
            what = f"{e['op']} {e.get('shape')}"
        elif b.producer is not None:
            what = f"{b.kind} of {instructions[b.producer].op}"
        else:
            what = b.kind
        b.label = f"s{sid} {what}"
