"""Exercises of notebook 03 (reference counts and lifetimes): predict storage refcounts,
the peak of a trace's live bytes (and, not in the notebook any more, the storages a
program leaked).

What the refcount model is checked against is the engine itself: a program is run for real
(``mt.randn``, ``a * b``, ``s.backward()`` …) and its storages' ``refcount`` read back — and
while the learner's function runs, making tensors, reading a tensor's storage and running
programs are switched off. The peak is checked against a running sum over the trace's
``alloc``/``free`` events taken here, with the trace's replay (``live_bytes``, ``peak``,
``lifetimes``) switched off for the learner.
"""
from __future__ import annotations

import contextlib
import gc

from ..recording import Holder
from .checker import checker
from .checking import _call, _fail, _passed, hidden, learner, rng

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
    from ..trace.recorder import Trace

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


def _holder_words(h, names: dict) -> str:
    h = Holder.parse(h)
    if h.kind == "tensor":
        name = names.get(h.id)
        return f"the tensor {name}" if name else f"a tensor object still alive ({h})"
    if h.kind == "node":
        return "the graph node " + h.split("(", 1)[-1].rstrip(")") + " (a saved slot)"
    return str(h)


def _random_programs(n: int) -> list:
    """Random programs that keep to the exercise's rules: names never reused, only views and
    numpy arrays deleted (never an op's result, so no graph dies unseen), one backward."""
    r, programs = rng(), []
    for k in range(n):
        tensors, names, prog, views = [], iter(f"t{i}" for i in range(100)), [], []
        for _ in range(int(r.integers(1, 3))):
            tensors.append(next(names))
            prog.append(("tensor", tensors[-1]))
        for _ in range(int(r.integers(2, 7))):
            op = ("view", "numpy", "mul", "add", "tanh")[int(r.integers(0, 5))]
            a, b = (tensors[int(j)] for j in r.integers(0, len(tensors), 2))
            name = next(names)
            if op == "numpy":
                prog.append(("numpy", name, a))
                views.append(name)
                continue
            prog.append((op, name, a, b) if op in ("mul", "add") else (op, name, a))
            (views if op == "view" else tensors).append(name)
        root = next(names)
        prog.append(("sum", root, tensors[-1]))
        if r.random() < 0.8:
            prog.append(("backward", root))
        for v in views:
            if r.random() < 0.5:
                prog.append(("del", v))
        programs.append((f"random program #{k + 1}", prog))
    return programs


def _refcount_blocks():
    from .. import creation
    from ..tensor import Tensor

    return [_run_program, creation.randn, creation.tensor, creation.zeros, creation.ones,
            (Tensor, "storage")]


def check_refcounts(fn) -> None:
    """``fn(program) -> {name: refcount}``: after running ``program`` (a list of instructions
    such as ``("tensor", "a")``, ``("mul", "c", "a", "b")``, ``("del", "a")``,
    ``("backward", "s")``; :data:`INSTRUCTIONS` lists them all), the reference count of the
    storage behind every name still bound (tensors and numpy arrays). Checked after every
    instruction of several programs, against the engine running the same Python.
    """
    n = 0
    for what, program in REFCOUNT_PROGRAMS + _random_programs(10 if hidden() else 3):
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


check_refcounts = checker("refcounts_after", blocks=_refcount_blocks)(check_refcounts)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# ----------------------------------------------------------------------------------------------
# Exercise 2: find the leak in a trace
# ----------------------------------------------------------------------------------------------
def _fresh_trace():
    """A new ``Trace``, after a garbage collection: storages earlier code left unreachable are
    freed now, not while a case records (their frees would make the trace depend on what ran before)."""
    from ..trace.recorder import Trace

    gc.collect()
    return Trace()


def _leak_cases():
    """``(what, trace)``: small programs recorded by the engine, some leaking, some not."""
    from ..creation import manual_seed, randn
    from ..functions.loss import mse_loss
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
        tr = _fresh_trace()
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
        tr = _fresh_trace()
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
    tr = _fresh_trace()
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
        except Exception:  # any other error, in the usual words (_call lets a stub's NotImplementedError through)
            got = _call(fn, where, tr)
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


check_leaked_storages = checker(check_leaked_storages)


# ----------------------------------------------------------------------------------------------
# Exercise 2: the peak of a trace's live bytes
# ----------------------------------------------------------------------------------------------
def _peak_cases():
    """``(what, trace)``: the leak cases, and random programs of tensors made and deleted."""
    from ..creation import Generator, randn

    cases, keep = _leak_cases()
    tr = _fresh_trace()
    with tr:  # the same peak twice: the answer is the FIRST step that reaches it
        a = randn(100)
        del a
        b = randn(100)
    cases.append(("a = mt.randn(100); del a; b = mt.randn(100) (the peak is reached twice)", tr))
    keep = (keep, b)
    r = rng()
    g = Generator().manual_seed(int(r.integers(1 << 30)))
    for k in range(8 if hidden() else 3):
        before = [randn(int(r.integers(1, 64)), generator=g) for _ in range(3)]  # made before recording
        alive, lines = {}, []
        tr = _fresh_trace()
        with tr:
            for i in range(int(r.integers(4, 12))):
                if alive and r.random() < 0.4:
                    name = sorted(alive)[int(r.integers(0, len(alive)))]
                    del alive[name]
                    lines.append(f"del {name}")
                elif before and r.random() < 0.2:
                    before.pop()
                    lines.append("del one made before recording")
                else:
                    n = int(r.integers(1, 200))
                    alive[f"t{i}"] = randn(n, generator=g)
                    lines.append(f"t{i} = mt.randn({n})")
        cases.append((f"random program #{k + 1} ({'; '.join(lines)})", tr))
        keep = (keep, alive, before)
    return cases, keep


def peak_of(trace) -> tuple[int, int | None]:
    """The reference: a running sum of the ``alloc`` and ``free`` events' bytes (frees of
    storages made before recording count too: their bytes were live at the start)."""
    extra, best, step = 0, 0, None
    for e in trace.filter("alloc", "free"):
        extra += e["nbytes"] if e["kind"] == "alloc" else -e["nbytes"]
        if extra > best:
            best, step = extra, e["step"]
    return best, step


def _peak_blocks():
    from ..trace.replay import Replay
    from ..trace.recorder import Trace

    return [(Trace, "live_bytes"), (Trace, "peak"), (Trace, "lifetimes"), (Trace, "replay"),
            (Trace, "state_at"), (Replay, "live_bytes"), (Replay, "peak")]


def check_peak_extra_bytes(fn) -> None:
    """``fn(trace) -> (peak, step)``: the most bytes live at any moment *beyond* what was
    live when recording started, and the step (the event's ``"step"``) where that peak is
    first reached; ``(0, None)`` if nothing ever went above the start. Checked on traces of
    leaking and clean loops and random programs, against a running sum over the events (the
    trace's own ``live_bytes``, ``peak`` and replay are switched off meanwhile).
    """
    cases, _keep = _peak_cases()
    for what, tr in cases:
        want = peak_of(tr)
        where = f"for the trace of {what}:\n"
        got = _call(fn, where, tr)
        if got is None:
            _fail(f"{where}your function returned None: did you forget `return`?")
        try:
            peak, step = got
            peak, step = int(peak), (None if step is None else int(step))
        except (TypeError, ValueError):
            _fail(f"{where}your function returned {got!r}; return a pair (peak bytes, step), "
                  "with step None when nothing was ever live beyond the start.")
        if (peak, step) == want:
            continue
        allocs = sum(e["nbytes"] for e in tr.filter("alloc"))
        frees = tr.filter("free")
        early = [e for e in frees if e["storage"] not in {a["storage"] for a in tr.filter("alloc")}]
        msg = (f"{where}the peak is {want[0]:,} bytes beyond the start, first reached at step "
               f"{want[1]}; you said {peak:,} bytes at step {step}.")
        if peak == allocs:
            hint = ("That is every allocation added up: frees give bytes back, so subtract each "
                    "'free' event's nbytes as you go and keep the largest running total.")
        elif early and peak > want[0]:
            hint = (f"Storage #{early[0]['storage']} was made before recording and freed while it "
                    "recorded: its bytes were live at the start, so its free lowers the running "
                    "total too (subtract every free, not only frees of storages you saw allocated).")
        elif peak == want[0]:
            hint = ("Right peak, wrong step: report the FIRST event at which the running total "
                    "reaches it (update only when the total is strictly larger), and use the "
                    "event's own 'step' field.")
        elif peak < want[0]:
            hint = ("Too low: the peak is the largest running total at any event, not the total "
                    "at the end (what is still live when the trace stops).")
        else:
            hint = "Add each alloc's nbytes, subtract each free's, and keep the largest total seen."
        _fail(msg + "\n" + hint)
    _passed("check_peak_extra_bytes", len(cases))


check_peak_extra_bytes = checker("peak_extra_bytes", blocks=_peak_blocks, suite="peak_extra_bytes")(check_peak_extra_bytes)
