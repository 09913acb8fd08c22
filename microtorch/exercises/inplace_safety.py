"""Exercise 2 of notebook 07 (in-place ops and versions): which ops of a recorded program can
run in place.

:func:`candidates` turns a recorded trace into the facts :func:`~microtorch.memory.inplace_plan`
weighs for each op that has an in-place variant (a learner can ``print`` them). While the
learner's function runs, the engine's in-place plan is switched off. The reference is
independent: the in-place rule written out over the facts (:func:`reference_verdict`;
tests/test_exercise_checkers.py checks it against the plan's verdicts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng


def _plan_blocks():
    from ..memory import inplace_analysis

    return [inplace_analysis.inplace_plan, inplace_analysis._decide, inplace_analysis._refusal]


# ----------------------------------------------------------------------------------------------
# Exercise 2: can this op of a recorded program run in place?
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """One op of a recorded program that has an in-place variant, and one input it could
    overwrite: the facts :func:`~microtorch.memory.inplace_plan` weighs (as the plan sees
    them when it reaches this op: earlier rewrites already applied)."""

    line: str  # the op, as a line of code: "C = relu(B)"
    op: str  # the recorded op: "Relu"
    method: str  # its in-place variant: "relu_"
    overwrites: str  # the input whose bytes it would write into: "B"
    other: str | None  # the other operand of a binary op ("W", "a number"), else None
    fits: bool  # the result has the overwritten input's shape and dtype
    made_by_op: bool  # the input was made by an op of the program (False: a program input or parameter)
    other_needs_grad: bool  # the other operand needs a gradient (binary ops)
    saved_by_itself: bool  # the (out-of-place) op saved this input for its own backward
    saved_by: tuple[str, ...]  # OTHER ops that saved the input's bytes for their backward
    later_reads: tuple[str, ...]  # ops that read the input's bytes after this one
    alive_at_end: bool  # the caller still holds the input when the program ends

    def __str__(self) -> str:
        def lst(x):
            return ", ".join(x) if x else "none"

        lines = [f"{self.line}  ->  {self.method} into {self.overwrites}?",
                 f"  fits (same shape and dtype)  : {self.fits}",
                 f"  made by an op of the program : {self.made_by_op}"]
        if self.other is not None:
            lines.append(f"  other operand                : {self.other} "
                         f"({'needs' if self.other_needs_grad else 'needs no'} gradient)")
        lines += [f"  saved by this op itself      : {self.saved_by_itself}",
                  f"  saved by other ops           : {lst(self.saved_by)}",
                  f"  read later by                : {lst(self.later_reads)}",
                  f"  alive when the program ends  : {self.alive_at_end}"]
        return "\n".join(lines)


def _names(events) -> dict[int, str]:
    """tensor id -> a name for the learner: its own name, "a number" for an unnamed 0-d
    constant, else "t<id>"."""
    names = {}
    for e in events:
        if e["kind"] != "tensor":
            continue
        tid = e["tensor"]
        if e.get("name"):
            names[tid] = e["name"]
        elif tid not in names or names[tid].startswith("t"):
            names[tid] = "a number" if (e["shape"] == [] and not e.get("requires_grad")) else f"t{tid}"
    return names


def _cases(trace):
    """``[(candidate, expected verdict, the plan's Decision)]`` for every (op, input) the
    plan judged, walking the trace as :func:`~microtorch.memory.inplace_plan` does."""
    from ..memory.inplace_analysis import VARIANTS, inplace_plan

    events = list(trace.events if hasattr(trace, "events") else trace)
    plan = inplace_plan(events)
    names = _names(events)
    tensors: dict[int, dict] = {}
    alloc_free: dict[int, list] = {}
    reads: dict[int, list] = {}  # storage -> [(step, label, tensor)]
    saved: dict[int, list] = {}  # storage -> [(step, label, node)]
    made: set[int] = set()
    phase_of: dict[int, str] = {}
    ops = []
    for e in events:
        kind = e["kind"]
        if kind == "tensor":
            tensors.setdefault(e["tensor"], e)
        elif kind == "alloc":
            alloc_free[e["storage"]] = [e["step"], None]
        elif kind == "free":
            alloc_free.setdefault(e["storage"], [None, None])[1] = e["step"]
        elif kind == "op":
            phase_of[e["step"]] = e["phase"]
            ins = e.get("input_storages") or [tensors[t]["storage"] for t in e["inputs"]]
            for tid, sid in zip(e["inputs"], ins):
                reads.setdefault(sid, []).append((e["step"], e["op"], tid))
            for sid in e["saved"]:
                saved.setdefault(sid, []).append((e["step"], e["op"], e["node"]))
            out_sid = e.get("output_storage", tensors[e["output"]]["storage"])
            if out_sid not in ins:
                made.add(out_sid)
            ops.append((e, ins, out_sid))

    cases = []
    forward = [(e, ins, out_sid) for e, ins, out_sid in ops if e["phase"] == "forward"]
    for d, (e, ins, out_sid) in zip(plan.decisions, forward):
        if e["op"] not in VARIANTS or e.get("inplace") or out_sid in ins:
            continue
        method, positions = VARIANTS[e["op"]]
        node = e["node"]
        args = ", ".join(names.get(t, f"t{t}") for t in e["inputs"])
        line = f"{names.get(e['output'], 't%d' % e['output'])} = {e['op'].lower()}({args})"
        for p in positions:
            if p >= len(ins) or (d.inplace and p > d.position):
                continue  # the plan stopped at the first input that works
            tid, sid = e["inputs"][p], ins[p]
            other = 1 - p if len(ins) == 2 else None
            t, o = tensors[tid], tensors[e["output"]]
            savers: dict = {}  # one entry per node that saved the bytes (its first label)
            for _, op, s in saved.get(sid, []):
                if s != node:
                    savers.setdefault(s, f"{op} (rewritten in place)" if op.endswith("_") else op)
            later = []
            for step, op, reader in reads.get(sid, []):
                if step <= e["step"]:
                    continue
                if phase_of.get(step) == "backward":
                    # backward reads saved bytes (through fresh tensors): only the nodes that
                    # saved them do, so with no other saver these are this op's own backward
                    # reading what it saved — what the Mul/Div rule is about, not a later read
                    if savers:
                        later.append(f"{op} (during backward)")
                else:
                    later.append(op + ("" if reader == tid else f" through {names.get(reader, f't{reader}')}"))
            c = Candidate(
                line=line, op=e["op"], method=method, overwrites=names.get(tid, f"t{tid}"),
                other=None if other is None else names.get(e["inputs"][other], "?"),
                fits=t["shape"] == o["shape"] and t["dtype"] == o["dtype"],
                made_by_op=sid in made,
                other_needs_grad=bool(other is not None and e["next"] and e["next"][other] is not None),
                saved_by_itself=node is not None and any(s == node for _, _, s in saved.get(sid, [])),
                saved_by=tuple(savers.values()),
                later_reads=tuple(later),
                alive_at_end=alloc_free.get(sid, [None, None])[1] is None)
            cases.append((c, bool(d.inplace and p == d.position), d))
        if d.inplace:  # from here on the program runs the in-place variant (the plan's rule)
            sid = ins[d.position]
            saved[sid] = [x for x in saved.get(sid, []) if x[2] != node or node is None]
            if node is not None and e["op"] in ("Relu", "Exp", "Sigmoid", "Tanh", "Sqrt"):
                saved.setdefault(out_sid, []).append((e["step"], method, node))
    return cases


def candidates(trace) -> list[Candidate]:
    """Every (op, input it could overwrite) of a recorded program that
    :func:`~microtorch.memory.inplace_plan` judges, with the facts it weighs.

    Tensors are called by their ``.name`` (set it before the op, or right after); unnamed
    0-d constants are "a number", other unnamed tensors ``t<id>`` (their trace ids).
    """
    return [c for c, _, _ in _cases(trace)]


def _inplace_programs():
    """``(title, run)`` pairs: each ``run()`` records one small program and returns its trace."""
    from ..grad_mode import no_grad
    from ..creation import Generator, randn
    from ..trace.recorder import record

    g = Generator().manual_seed(7)

    def leaves(**shapes):
        out = []
        for name, (shape, grad) in shapes.items():
            t = randn(*shape, dtype="float64", generator=g, requires_grad=grad)
            t.name = name
            out.append(t)
        return out

    def named(t, name):
        t.name = name
        return t

    programs = []

    def layer():
        x, W, b = leaves(x=((4, 3), False), W=((3, 5), True), b=((5,), True))

        def body():  # intermediates die when it returns, as in a real forward pass
            h = named(x @ W, "h")
            a = named(h + b, "a")
            r = named(a.relu(), "r")
            s = named(r * 3.0, "s")
            return named(s.sum(), "loss")
        with record() as tr:
            body().backward()
        return tr
    programs.append(("a layer: h = x @ W; a = h + b; r = relu(a); s = r * 3; loss = sum(s); "
                     "then loss.backward()  (W, b require grad)", layer))

    def seed(training):
        def run():
            (A,) = leaves(A=((4, 5), training))

            def body():
                B = named(A + 1.0, "B")
                C = named(B.relu(), "C")
                D = named(B * C, "D")
                E = named(D.softmax(1), "E")
                return named(named(D + E, "F").sum(), "out")
            with record() as tr:
                if training:
                    body().backward()
                else:
                    with no_grad():
                        body()
            return tr
        return run
    programs.append(("B = A + 1; C = relu(B); D = B * C; E = softmax(D); F = D + E; out = sum(F); "
                     "then out.backward()  (A requires grad)", seed(True)))
    programs.append(("the same program for inference, under mt.no_grad(): B = A + 1; C = relu(B); "
                     "D = B * C; E = softmax(D); F = D + E; out = sum(F)", seed(False)))

    def hazard():
        x, W = leaves(x=((3, 4), False), W=((4, 4), True))

        def body():
            z = named(x @ W, "z")
            s = named(z.sigmoid(), "s")
            t = named(s * 2.0, "t")
            u = named(t + 1.0, "u")
            v = named(u.tanh(), "v")
            w = named(v - 0.5, "w")
            return named(w.sum(), "loss")
        with record() as tr:
            body().backward()
        return tr
    programs.append(("z = x @ W; s = sigmoid(z); t = s * 2; u = t + 1; v = tanh(u); w = v - 0.5; "
                     "loss = sum(w); then loss.backward()  (W requires grad)", hazard))

    def reread():
        x, W = leaves(x=((2, 3), False), W=((3, 3), True))

        def body():
            h = named(x @ W, "h")
            a = named(h + 1.0, "a")
            y = named(a.relu(), "y")
            z = named(a + y, "z")
            e = named(x.exp(), "e")
            return named(named(z.sum(), "sz") + named(e.sum(), "se"), "loss")
        with record() as tr:
            body().backward()
        return tr
    programs.append(("h = x @ W; a = h + 1; y = relu(a); z = a + y; e = exp(x); "
                     "sz = sum(z); se = sum(e); loss = sz + se; then loss.backward()  "
                     "(W requires grad; x is data)", reread))

    def weights():
        x, W, V, c = leaves(x=((3, 4), False), W=((4, 4), True), V=((3, 4), True), c=((3, 4), False))
        kept = []

        def body():
            h = named(x @ W, "h")
            m = named(h * V, "m")
            k = named(m * c, "k")
            kept.append(k)  # the caller keeps k
            e = named(k.exp(), "e")
            g = named(e.sigmoid(), "g")
            q = named(g / 4.0, "q")
            return named(q.sum(), "loss")
        with record() as tr:
            body().backward()
        return tr
    programs.append(("h = x @ W; m = h * V; k = m * c; e = exp(k); g = sigmoid(e); q = g / 4; "
                     "loss = sum(q); then loss.backward(), and the caller keeps k  "
                     "(W, V require grad; c is data)", weights))

    def factors():  # Mul/Div where only "the other factor needs its gradient" keeps it out of place
        x, W, V, c = leaves(x=((3, 4), False), W=((4, 4), True), V=((3, 4), True), c=((3, 4), False))

        def body():
            h = named(x @ W, "h")
            m = named(h * V, "m")
            n = named(m / V, "n")
            k = named(n * c, "k")
            q = named(k / c, "q")
            return named(q.sum(), "loss")
        with record() as tr:
            body().backward()
        return tr
    programs.append(("h = x @ W; m = h * V; n = m / V; k = n * c; q = k / c; loss = sum(q); "
                     "then loss.backward()  (W, V require grad; c is data)", factors))

    def mixed():  # an op whose own save its variant does not need, an operand that does not fit, a view
        x, W, b = leaves(x=((3, 4), False), W=((4, 4), True), b=((4,), True))

        def body():
            h = named(x @ W, "h")
            u = named(h.clamp(-1.0, 1.0), "u")  # Clamp saves h for itself; clamp_ keeps a mask instead
            bb = named(b + 1.0, "bb")  # made by an op, but of shape [4]: p cannot be written into it
            p = named(u + bb, "p")
            q = named(p * u, "q")
            qT = named(q.t(), "qT")  # a view: reading it later reads q's bytes
            y = named(q.sigmoid(), "y")
            z = named(qT * 2.0, "z")
            return named(named(y.sum(), "sy") + named(z.sum(), "sz"), "loss")
        with record() as tr:
            body().backward()
        return tr
    programs.append(("a clamp, a broadcast and a view: h = x @ W; u = clamp(h, -1, 1); bb = b + 1; "
                     "p = u + bb; q = p * u; qT = q.t() (a view of q); y = sigmoid(q); z = qT * 2; "
                     "sy = sum(y); sz = sum(z); loss = sy + sz; then loss.backward()  "
                     "(W, b require grad; b has shape [4])", mixed))
    r = rng()
    for k in range(10 if hidden() else 3):
        programs.append(_random_program(k, leaves, named, record, int(r.integers(1 << 30))))
    return programs


def _random_program(k, leaves, named, record, seed):
    """A random chain of unary ops, products and quotients with leaves that need a gradient
    or not, sometimes reusing an earlier value (so it is read later)."""
    r = np.random.default_rng(seed)
    x, W, V, c = leaves(x=((3, 4), False), W=((4, 4), True), V=((3, 4), bool(r.random() < 0.6)),
                        c=((3, 4), False))
    steps = [(("relu", "exp", "sigmoid", "tanh", "mulV", "divV", "mulc", "divc", "add")[int(i)],
              bool(r.random() < 0.25)) for i in r.integers(0, 9, int(r.integers(3, 7)))]
    text = ["v0 = x @ W"]

    def body():
        vals = [named(x @ W, "v0")]
        for i, (op, reuse) in enumerate(steps, 1):
            a = vals[-1]
            if op in ("relu", "exp", "sigmoid", "tanh"):
                v = getattr(a, op)() if op != "exp" else (a * 0.1).exp()
            elif op == "add":
                v = a + vals[0] if reuse else a + c
            else:
                other = V if op.endswith("V") else c
                v = a * other if op.startswith("mul") else a / (other * other + 1.0)
            vals.append(named(v, f"v{i}"))
        return named(vals[-1].sum(), "loss")
    for i, (op, reuse) in enumerate(steps, 1):
        a = f"v{i - 1}"
        text.append(f"v{i} = " + {"relu": f"relu({a})", "exp": f"exp({a} * 0.1)", "sigmoid": f"sigmoid({a})",
                                  "tanh": f"tanh({a})", "mulV": f"{a} * V", "divV": f"{a} / (V * V + 1)",
                                  "mulc": f"{a} * c", "divc": f"{a} / (c * c + 1)",
                                  "add": f"{a} + v0" if reuse else f"{a} + c"}[op])

    def run():
        with record() as tr:
            body().backward()
        return tr
    grad = "W, V require grad" if V.requires_grad else "W requires grad, V does not"
    return (f"random program #{k + 1}: " + "; ".join(text) + f"; loss = sum(v{len(steps)}); then "
            f"loss.backward()  ({grad}; x, c are data)", run)


def reference_verdict(c) -> bool:
    """The reference for exercise 2: the in-place rule, written out over the facts."""
    if not c.fits or not c.made_by_op:
        return False
    if c.op in ("Mul", "Div") and c.other_needs_grad:
        return False
    return not (c.saved_by or c.later_reads or c.alive_at_end)


def _explain_refusal(c: Candidate) -> str:
    """Why the plan keeps the op out of place, in words (the first reason that applies)."""
    if not c.fits:
        return (f"the result of {c.line} does not have {c.overwrites}'s shape and dtype: it does "
                f"not fit in {c.overwrites}'s bytes")
    if not c.made_by_op:
        return (f"{c.overwrites} is an input of the program (data or a parameter), not made by one "
                "of its ops: overwriting it would change the caller's tensor")
    if c.op in ("Mul", "Div") and c.other_needs_grad:
        formula = "g · (old " + c.overwrites + ")" if c.op == "Mul" else f"−g · {c.overwrites} / {c.other}²"
        return (f"{c.other} needs a gradient, and that gradient is {formula}: it needs the old "
                f"values of {c.overwrites}, which {c.method} would have overwritten")
    if c.saved_by:
        return (f"{c.saved_by[0]} saved {c.overwrites}'s bytes for its backward: after {c.method} "
                f"they would hold different numbers, and backward would raise \"one of the variables "
                f"needed for gradient computation has been modified by an inplace operation\"")
    if c.later_reads:
        return (f"{c.later_reads[0]} reads {c.overwrites} later: it would see the result of "
                f"{c.line} instead of {c.overwrites}")
    if c.alive_at_end:
        return (f"the caller still holds {c.overwrites} when the program ends: it would find "
                "different numbers in it")
    return "the plan refused it for a reason these facts do not show (see its reason below)"


def _explain_safe(c: Candidate) -> str:
    why = []
    if c.saved_by_itself:
        why.append(f"{c.op} saved its input, but the in-place variant does not need it: "
                   f"{c.method}'s backward does not need the old values")
    elif c.op in ("Mul", "Div") and c.other is not None:
        why.append(f"{c.method} needs only {c.other} for the gradient, and {c.other} needs no "
                   "gradient of its own")
    why.append(f"no other op saved {c.overwrites} or reads it later, and the caller does not keep it")
    return "; ".join(why)


def check_inplace_safe(fn) -> None:
    """``fn(c) -> bool``: may the op run in place, writing into ``c.overwrites``? ``c`` is a
    :class:`Candidate` (print it to see its facts). Checked against the rule written out
    over the facts (the same verdicts as :func:`~microtorch.memory.inplace_plan`, which is
    switched off meanwhile) on several small recorded programs (training, inference, a kept
    output, weights that need gradients, products and quotients whose other factor needs
    its gradient; an op whose own save its in-place variant does not need, an operand the
    result does not fit, a later read through a view) and random ones.
    """
    total = 0
    for title, run in _inplace_programs():
        tr = run()
        for c, _plan_says, d in _cases(tr):
            want = reference_verdict(c)
            total += 1
            where = f"in the program: {title}\nfor {c.line}, written as {c.method} into {c.overwrites}:"
            got = _call(fn, where, c)
            if got is None:
                _fail(f"{where}\nyour function returned None: did you forget `return`? Return True "
                      "(it can run in place) or False.")
            if not isinstance(got, (bool, np.bool_)):
                _fail(f"{where}\nyour function returned {got!r}; return True or False.")
            if bool(got) == want:
                continue
            facts = f"\nThe facts:\n{c}\n"
            if want:
                _fail(f"{where}\nyou said no, but the plan runs it in place: {_explain_safe(c)}."
                      f"{facts}The plan: {d.reason}")
            _fail(f"{where}\nyou said yes, but it must stay out of place: {_explain_refusal(c)}."
                  f"{facts}The plan: {d.reason}")
    _passed("check_inplace_safe", total)


check_inplace_safe = checker("can_run_in_place", blocks=_plan_blocks)(check_inplace_safe)
