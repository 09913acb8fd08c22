"""Exercises of notebook 03 (reference counts and lifetimes): predict storage refcounts,
find the storages a program leaked from its trace.

The reference is always the engine: a refcount program is run for real (``mt.randn``,
``a * b``, ``s.backward()`` …) and its storages' ``refcount`` read back; a leak is judged
from the trace's own lifetimes (``tr.lifetimes()``), and the checker says who holds each
reference from the trace's replay (``tr.state_at(t).holders(storage)``).
"""
from __future__ import annotations

import contextlib

from .checking import _call, _fail, _passed, checker, learner, rng

# ----------------------------------------------------------------------------------------------
# Exercise 1: predict reference counts
# ----------------------------------------------------------------------------------------------
#: Instruction -> (the Python it stands for, what it does to reference counts)
INSTRUCTIONS = {
    "tensor": ("{0} = mt.randn(3, requires_grad=True)",
               "a new tensor gets a new storage, held once: by the tensor itself"),
    "view": ("{0} = {1}[:]",
             "a view is a new tensor over the SAME storage: +1 on that storage (the view's own "
             "node, IndexBackward, saves nothing). A view also keeps its base tensor object "
             "alive (v._base), so delete views before their base"),
    "numpy": ("{0} = {1}.detach().numpy()",
              "the array from .numpy() holds the storage: +1 for as long as the array exists "
              "(detach() made a temporary view that went away at once: +1 then -1)"),
    "mul": ("{0} = {1} * {2}",
            "Mul saves both inputs for backward (d(a*b)/da = b, d(a*b)/db = a; here every tensor "
            "requires grad, so both gradients are needed): +1 on each input's storage, so a * a adds "
            "2 to a's storage; the result is a new storage held once"),
    "add": ("{0} = {1} + {2}",
            "Add saves nothing (it only passes its gradient on): the inputs' counts do not change; "
            "the result is a new storage held once"),
    "tanh": ("{0} = {1}.tanh()",
             "Tanh saves its OUTPUT (tanh' = 1 - tanh²), not its input: the new storage is held "
             "twice, by the result and by TanhBackward; the input's count does not change"),
    "sum": ("{0} = {1}.sum()",
            "Sum saves nothing (its backward only needs the input's shape): the result is a new "
            "storage held once"),
    "del": ("del {0}",
            "del drops one reference, the variable's own; the storage lives on while views, "
            "saved slots or numpy arrays still hold it"),
    "backward": ("{0}.backward()",
                 "every node reachable from the root runs and then releases what it saved: -1 per "
                 "saved slot. A graph the root does not reach keeps its saved tensors"),
}

#: The programs the checker runs, as (what they show, instructions). Names are never reused.
REFCOUNT_PROGRAMS = [
    ("views and numpy arrays share a storage",
     [("tensor", "a"), ("view", "v", "a"), ("numpy", "arr", "a"), ("del", "v"), ("del", "arr")]),
    ("saved tensors, and backward releasing them",
     [("tensor", "a"), ("tensor", "b"), ("mul", "c", "a", "b"), ("add", "d", "c", "a"),
      ("sum", "s", "d"), ("backward", "s")]),
    ("a * a saves a twice; tanh saves its output; deleting intermediates",
     [("tensor", "a"), ("mul", "h", "a", "a"), ("tanh", "t", "h"), ("sum", "s", "t"),
      ("del", "t"), ("del", "h"), ("backward", "s")]),
    ("a graph the root does not reach keeps what it saved",
     [("tensor", "a"), ("tensor", "b"), ("mul", "c", "a", "b"), ("mul", "e", "a", "a"),
      ("sum", "s", "c"), ("backward", "s")]),
    ("a view of an op's result, saved by a later op",
     [("tensor", "a"), ("tensor", "b"), ("mul", "c", "a", "b"), ("view", "v", "c"),
      ("mul", "w", "v", "b"), ("sum", "s", "w"), ("del", "v"), ("del", "c"), ("backward", "s")]),
    ("a numpy array outlives its tensor",
     [("tensor", "a"), ("numpy", "arr", "a"), ("del", "a")]),
]


def program_source(program) -> str:
    """The Python a refcount program stands for, one line per instruction."""
    return "\n".join(INSTRUCTIONS[op][0].format(*args) for op, *args in program)


def _run_program(program, record: bool = False):
    """Run ``program`` on the engine. Returns ``(counts, holders)``: ``{name: refcount of the
    storage it views}`` for every name still bound, and, when ``record``, ``{name: [who holds
    that storage, in words]}`` from the trace's replay."""
    from ..creation import randn
    from ..memory.trace import Trace

    env: dict = {}
    tr = Trace()
    with (tr if record else contextlib.nullcontext()):
        for op, *args in program:
            if op == "tensor":
                t = randn(3, dtype="float64", requires_grad=True)
            elif op == "view":
                t = env[args[1]][:]
            elif op == "numpy":
                env[args[0]] = env[args[1]].detach().numpy()
                continue
            elif op == "mul":
                t = env[args[1]] * env[args[2]]
            elif op == "add":
                t = env[args[1]] + env[args[2]]
            elif op == "tanh":
                t = env[args[1]].tanh()
            elif op == "sum":
                t = env[args[1]].sum()
            elif op == "del":
                del env[args[0]]
                continue
            elif op == "backward":
                env[args[0]].backward()
                continue
            else:  # pragma: no cover - the programs above use only these
                raise ValueError(f"unknown instruction {op!r}")
            t.name = args[0]
            env[args[0]] = t
            del t
        storages = {name: _storage_of(x) for name, x in env.items()}
        counts = {name: s.refcount for name, s in storages.items()}
    holders = {}
    if record:
        state = tr.state_at(-1)
        names = {e["tensor"]: e["name"] for e in tr.filter("tensor") if e.get("name")}
        for name, s in storages.items():
            got = state.storages.get(s.id)
            holders[name] = [_holder_words(h, names) for h in state.holders(s.id)] if got else []
    env.clear()
    return counts, holders


def _storage_of(x):
    s = getattr(x, "storage", None)
    if s is not None and not callable(s):
        if hasattr(s, "refcount"):
            return s
    base = getattr(x, "base", None)  # a numpy array from .numpy(): its base holds the storage
    return base.storage


def _holder_words(h: str, names: dict) -> str:
    if h.startswith("tensor "):
        name = names.get(int(h[7:]))
        return f"the tensor {name}" if name else f"a tensor object still alive ({h})"
    if h.startswith("node "):
        return "the graph node " + h.split("(", 1)[-1].rstrip(")") + " (a saved slot)"
    return h


@checker
def check_refcounts(fn) -> None:
    """``fn(program) -> {name: refcount}``: after running ``program`` (a list of instructions
    such as ``("tensor", "a")``, ``("mul", "c", "a", "b")``, ``("del", "a")``,
    ``("backward", "s")``; :data:`INSTRUCTIONS` lists them all), the reference count of the
    storage behind every name still bound (tensors and numpy arrays). Checked after every
    instruction of several programs, against the engine running the same Python.
    """
    n = 0
    for what, program in REFCOUNT_PROGRAMS:
        for k in range(1, len(program) + 1):
            prefix = program[:k]
            want, _ = _run_program(prefix)
            where = (f"for the program ({what}):\n\n{_indent(program_source(prefix))}\n\n")
            got = _call(fn, where, [tuple(i) for i in prefix])
            n += 1
            if got is None:
                _fail(f"{where}your function returned None: did you forget `return`?")
            if not hasattr(got, "items"):
                _fail(f"{where}your function returned {type(got).__name__}; return a dict "
                      "{name: refcount} with one entry per name still bound.")
            got = dict(got)
            extra = sorted(set(got) - set(want))
            if extra:
                gone = [x for x in extra if any(op == "del" and args[0] == x for op, *args in prefix)]
                why = (f" {gone[0]} was deleted (del {gone[0]}): leave deleted names out, even if "
                       "their storage still lives." if gone else "")
                _fail(f"{where}your dict has entries for {extra}, which are not bound after this "
                      f"program; the names bound are {sorted(want)}.{why}")
            missing = sorted(set(want) - set(got))
            if missing:
                _fail(f"{where}your dict has no entry for {missing}; give the refcount of every "
                      f"name still bound: {sorted(want)}.")
            wrong = [x for x in want if got[x] != want[x]]
            if not wrong:
                continue
            name = wrong[0]
            _, holders = _run_program(prefix, record=True)
            op, *args = prefix[-1]
            who = holders.get(name) or []
            held = "; ".join(who) if who else "nobody"
            _fail(f"{where}after the last line, {name}'s storage has refcount {want[name]}, "
                  f"you said {got[name]}. The engine's trace says it is held by: {held}.\n"
                  f"The last line ({INSTRUCTIONS[op][0].format(*args)}): {INSTRUCTIONS[op][1]}.")
    _passed("check_refcounts", n)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# ----------------------------------------------------------------------------------------------
# Exercise 2: find the leak in a trace
# ----------------------------------------------------------------------------------------------
def _leak_cases():
    """``(what, trace)``: small programs recorded by the engine, some leaking, some not."""
    from ..creation import manual_seed, randn
    from ..functions.loss import mse_loss
    from ..memory.trace import Trace
    from ..nn import MLP
    from ..grad_mode import no_grad
    from ..optim import SGD

    manual_seed(0)
    X, Y = randn(16, 4), randn(16, 1)
    model = MLP(4, 8, 1)
    opt = SGD(model.parameters(), lr=0.05)
    cases = []

    def train(n, keep):
        kept = []
        tr = Trace()
        with tr:
            for _ in range(n):
                opt.zero_grad()
                loss = mse_loss(model(X), Y)
                loss.backward()
                opt.step()
                kept.append(loss if keep else loss.item())
            del loss  # only what the list keeps outlives the loop
        return tr, kept

    tr, _ = train(3, keep=False)
    cases.append(("a training loop that keeps loss.item() (3 steps)", tr))
    tr, kept_losses = train(3, keep=True)
    cases.append(("a training loop that keeps the loss tensors, losses.append(loss) (3 steps)", tr))

    def evaluate(n, keep, grad):
        kept = []
        tr = Trace()
        with tr:
            for _ in range(n):
                if grad:
                    loss = mse_loss(model(X), Y)
                else:
                    with no_grad():
                        loss = mse_loss(model(X), Y)
                kept.append(loss if keep else loss.item())
            del loss
        return tr, kept

    tr, kept_eval = evaluate(2, keep=True, grad=True)
    cases.append(("an evaluation loop WITHOUT no_grad that keeps the loss tensors (2 batches)", tr))
    tr, kept_nograd = evaluate(2, keep=True, grad=False)
    cases.append(("an evaluation loop under no_grad that keeps the loss tensors (2 batches)", tr))

    early = randn(64, 64)  # made before recording, freed while it records
    tr = Trace()
    with tr:
        del early
        scratch = randn(32, 32)
        (scratch * 2).sum().item()
        del scratch
    cases.append(("a tensor made before recording and deleted while it records, then a scratch "
                  "tensor made and deleted", tr))
    keep_alive = (kept_losses, kept_eval, kept_nograd)  # the leaks stay leaked until we return
    return cases, keep_alive


def leaks_of(trace) -> set[int]:
    """The engine's answer: storages whose bytes were allocated while recording and are
    still live when the trace ends (``tr.lifetimes()``: ``death`` None, not preexisting)."""
    return {life.storage for life in trace.lifetimes() if life.death is None and not life.preexisting}


@checker
def check_leaked_storages(fn) -> None:
    """``fn(trace) -> set of storage ids``: the storages that got their bytes while the trace
    recorded (an ``alloc`` event) and never gave them back (no ``free`` event after it).
    Checked on traces of leaking and clean programs, against the trace's own lifetimes
    (``tr.lifetimes()``, the ones with ``death`` None that were not already live when
    recording started).
    """
    cases, _keep = _leak_cases()
    for what, tr in cases:
        want = leaks_of(tr)
        where = f"for the trace of {what}:\n"
        try:
            with learner():
                got = fn(tr)
        except (KeyError, ValueError) as exc:
            pre = sorted({e["storage"] for e in tr.filter("free")} - {e["storage"] for e in tr.filter("alloc")})
            if not pre:
                got = _call(fn, where, tr)  # reports the error in the usual words
            _fail(f"{where}your function raised {type(exc).__name__}: {exc}.\nIn this trace storage "
                  f"#{pre[0]} has a 'free' event but no 'alloc' event: it got its bytes before "
                  "recording started and was freed while recording. Frees of storages you never "
                  "saw allocated are not leaks and not errors: ignore them (set.discard, or "
                  "dict.pop(key, None), instead of remove/del).")
        if got is None:
            _fail(f"{where}your function returned None: did you forget `return`?")
        try:
            got = {int(x) for x in got}
        except (TypeError, ValueError):
            _fail(f"{where}your function returned {got!r}; return a set of storage ids (the ints "
                  "in the events' 'storage' field).")
        if got == want:
            continue
        allocated = {e["storage"] for e in tr.filter("alloc")}
        state = tr.state_at(-1)
        extra, missing = sorted(got - want), sorted(want - got)
        if extra:
            sid = extra[0]
            if sid not in allocated:
                hint = (f"storage #{sid} has no 'alloc' event in this trace: it got its bytes "
                        "before recording started (a parameter, the data, …). Only storages "
                        "allocated while recording can be leaks of the recorded code.")
            else:
                hint = (f"storage #{sid} was allocated at event "
                        f"{next(e['step'] for e in tr.filter('alloc') if e['storage'] == sid)} and "
                        f"freed at event {state.freed.get(sid)}: pair every 'alloc' with the "
                        "'free' of the same storage id.")
            _fail(f"{where}you said {extra} leaked, but the engine's lifetimes say the leaked "
                  f"storages are {sorted(want) or 'none'}.\n{hint}")
        sid = missing[0]
        born = next(e for e in tr.filter("alloc") if e["storage"] == sid)
        names = {e["tensor"]: e["name"] for e in tr.filter("tensor") if e.get("name")}
        holders = "; ".join(_holder_words(h, names) for h in state.holders(sid)) or "nobody"
        _fail(f"{where}storage #{sid} ({born['nbytes']} bytes, allocated at event {born['step']}) "
              f"is still live at the end, and you missed it (you said {sorted(got) or 'none'}; the "
              f"leaked storages are {sorted(want)}). At the end it is held by: {holders}.\n"
              "A storage leaks if its 'alloc' event has no 'free' event for the same storage id "
              "after it. Look at every 'alloc' event (tr.filter('alloc', 'free')).")
    _passed("check_leaked_storages", len(cases))
