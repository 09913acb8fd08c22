"""The checkers pass only the learner's own work.

* the notebooks' own reference solutions pass every checker, the hidden cases too;
* an answer that delegates to the engine code the exercise asks for is refused with "this
  exercise asks you to write X yourself", and that engine code works again afterwards (also
  when the learner's function raised);
* the checkers' independent references agree with the engine (so "independent" does not
  mean "different");
* typical wrong answers are caught with a message that points at the mistake (the lists for
  most exercises are in tests/test_exercises.py; the ones here top them up to at least five
  per exercise, and cover notebook 03's new exercise 2).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import arena, checking, inplace_derivatives, inplace_safety, pool, refcounts, training, views

ROOT = Path(__file__).resolve().parents[1]


def _solutions(stem: str) -> dict:
    """The functions defined by a notebook's solution cells (its reference answers)."""
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    ns = {"mt": mt, "np": np}
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            exec("".join(cell["source"]), ns)
    return ns


EXERCISES = [  # (notebook, function, checker)
    ("01_tensors_and_graphs", "contiguous_strides", "check_strides"),
    ("01_tensors_and_graphs", "element_offset", "check_element_offset"),
    ("01_tensors_and_graphs", "slice_layout", "check_slice_layout"),
    ("01_tensors_and_graphs", "unbroadcast", "check_unbroadcast"),
    ("02_backpropagation", "topo_order", "check_topo_order"),
    ("02_backpropagation", "dependency_counts", "check_dependency_counts"),
    ("02_backpropagation", "numerical_grad", "check_numerical_grad"),
    ("02_backpropagation", "LogSumExp", "check_logsumexp"),
    ("03_refcounts_and_lifetimes", "refcounts_after", "check_refcounts"),
    ("03_refcounts_and_lifetimes", "peak_extra_bytes", "check_peak_extra_bytes"),
    ("04_arena_allocator", "align_up", "check_align_up"),
    ("04_arena_allocator", "bump_offsets", "check_bump_offsets"),
    ("04_arena_allocator", "chunk_plan", "check_chunk_plan"),
    ("04_arena_allocator", "BumpArena", "check_bump_arena"),
    ("05_memory_pool", "size_classes_for", "check_size_classes"),
    ("05_memory_pool", "size_class_of", "check_size_class_of"),
    ("05_memory_pool", "FreeListPool", "check_free_list_pool"),
    ("06_views_and_aliasing", "extent", "check_extent"),
    ("06_views_and_aliasing", "windows", "check_windows"),
    ("06_views_and_aliasing", "shares_element", "check_alias_by_strides"),
    ("06_views_and_aliasing", "view_strides", "check_view_strides"),
    ("07_inplace_and_versions", "derivative_from_output", "check_derivative_from_output"),
    ("07_inplace_and_versions", "can_run_in_place", "check_inplace_safe"),
    ("08_training", "sgd_momentum_step", "check_momentum_update"),
    ("08_training", "clip_grad_norm", "check_clip_grad_norm"),
    ("08_training", "adam_step", "check_adam_step"),
]


def test_every_notebook_exercise_has_a_row_here():
    graded = set()
    for path in sorted((ROOT / "notebooks").glob("0[1-8]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                graded.add(src.split("(")[0].replace("mt.exercises.", ""))
    assert graded == {check for _, _, check in EXERCISES}


@pytest.mark.parametrize("stem, name, check", EXERCISES, ids=[e[1] for e in EXERCISES])
def test_the_notebooks_solution_passes_the_visible_and_the_hidden_cases(stem, name, check, capsys):
    fn = _solutions(stem)[name]
    getattr(mt.exercises, check)(fn)
    getattr(mt.exercises, check)(fn, hidden=True)
    out = capsys.readouterr().out
    assert out.count("✓") >= 2 and "(the hidden ones)" in out
    assert mt.exercises.has_passed(fn)


def test_hidden_cases_differ_from_the_visible_ones():
    from microtorch.exercises.tensors import _random_shapes

    visible = _random_shapes(5)
    checking._HIDDEN[0] = True
    try:
        hidden = _random_shapes(5)
    finally:
        checking._HIDDEN[0] = False
    assert visible != hidden


# ----------------------------------------------------------------------------------------------
# delegating to the engine is refused
# ----------------------------------------------------------------------------------------------
def _grad_by_backward(f, x, eps):
    xr = x.detach().clone().requires_grad_()
    f(xr).backward()
    return xr.grad.numpy()


def _arena_bump(sizes, alignment):
    a = mt.memory.Arena(capacity=sum(sizes) + alignment * (len(sizes) + 1), alignment=alignment)
    offsets = [a.alloc(n).offset for n in sizes]
    return offsets, a.padding


def _derivative_by_backward(op, z):
    x = mt.tensor(np.arctanh(np.clip(z, -0.999, 0.999)), dtype="float64", requires_grad=True)
    x.tanh().sum().backward()
    return x.grad.numpy()


def _sgd_by_engine(p, g, buf, step, lr, momentum, dampening, weight_decay):
    t = mt.tensor(p, dtype="float64", requires_grad=True)
    opt = mt.optim.SGD([t], lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
    t.grad = mt.tensor(g, dtype="float64")
    opt.step()
    p[...] = t.detach().numpy()


def _clip_by_engine(grads, max_norm):
    params = [mt.zeros(*g.shape, dtype="float64", requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = mt.tensor(g, dtype="float64")
    return float(mt.nn.utils.clip_grad_norm_(params, max_norm).item())


DELEGATES = [  # (checker, an answer that calls the engine, what the exercise asks for)
    ("check_strides", lambda shape: mt.zeros(shape).stride(), "contiguous_strides"),
    ("check_element_offset", lambda index, strides, offset: int(
        mt.arange(1000.).as_strided(tuple(i + 1 for i in index), strides, offset)[index].item()),
     "element_offset"),
    ("check_unbroadcast", lambda g, shape: mt.unbroadcast(g, shape), "unbroadcast"),
    ("check_topo_order", lambda root: mt.autograd._topological_order([(root, None, None)]), "topo_order"),
    ("check_dependency_counts", lambda root: {n: 0 for n in mt.autograd._dependencies([(root, None, None)])},
     "dependency_counts"),
    ("check_numerical_grad", _grad_by_backward, "numerical_grad"),
    ("check_refcounts", lambda program: refcounts._run_program(program)[0], "refcounts_after"),
    ("check_refcounts", lambda program: {"a": mt.randn(3).storage.refcount}, "refcounts_after"),
    ("check_peak_extra_bytes", lambda tr: (tr.peak()[0] - tr.live_bytes()[0], tr.peak()[1]), "peak_extra_bytes"),
    ("check_align_up", lambda n, a: mt.memory.align_up(n, a), "align_up"),
    ("check_bump_offsets", _arena_bump, "bump_offsets"),
    ("check_chunk_plan", lambda sizes, capacity, alignment, growth: mt.memory.Arena(
        capacity=capacity, alignment=alignment, growth=growth).alloc(sizes[0]), "chunk_plan"),
    ("check_size_classes", lambda bound: mt.memory.size_classes(per_doubling=8), "size_classes_for"),
    ("check_size_class_of", lambda n, m: mt.memory.Pool(classes_per_doubling=m).size_class(n), "size_class_of"),
    ("check_extent", lambda off, shape, strides: mt.exercises.fallbacks.extent(off, shape, strides), "extent"),
    ("check_windows", lambda length, stride, size, step: mt.exercises.fallbacks.windows(length, stride, size, step),
     "windows"),
    ("check_alias_by_strides", lambda a, b: mt.exercises.fallbacks.shares_element(a, b), "shares_element"),
    ("check_alias_by_strides", lambda a, b: bool(np.shares_memory(np.zeros(3), np.zeros(3))), "shares_element"),
    ("check_derivative_from_output", _derivative_by_backward, "derivative_from_output"),
    ("check_inplace_safe", lambda c: bool(mt.memory.inplace_plan([]).decisions), "can_run_in_place"),
    ("check_momentum_update", _sgd_by_engine, "sgd_momentum_step"),
    ("check_clip_grad_norm", _clip_by_engine, "clip_grad_norm"),
]


@pytest.mark.parametrize("check, answer, what", DELEGATES, ids=[f"{d[0]}-{i}" for i, d in enumerate(DELEGATES)])
def test_an_answer_that_calls_the_engine_is_refused(check, answer, what):
    with pytest.raises(checking.WriteItYourself, match=f"asks you to write {what} yourself"):
        getattr(mt.exercises, check)(answer)


def test_the_engine_works_again_after_a_refusal_and_after_an_error():
    before = (mt.memory.align_up, mt.memory.Arena.__dict__["alloc"], mt.unbroadcast)
    with pytest.raises(checking.WriteItYourself):
        mt.exercises.check_align_up(lambda n, a: mt.memory.align_up(n, a))
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        mt.exercises.check_align_up(lambda n, a: 1 / 0)
    with pytest.raises(NotImplementedError):
        mt.exercises.check_unbroadcast(lambda g, shape: (_ for _ in ()).throw(NotImplementedError("hint")))
    assert (mt.memory.align_up, mt.memory.Arena.__dict__["alloc"], mt.unbroadcast) == before
    assert mt.memory.align_up(65, 64) == 128
    a = mt.randn(2, 3, requires_grad=True)
    (a + mt.randn(3)).sum().backward()  # unbroadcast runs inside backward: it is the engine's again
    assert a.grad.shape == (2, 3)


def test_a_name_the_learner_imported_is_switched_off_too():
    ns = {}
    exec("from microtorch.memory import align_up as mine\ndef f(n, a):\n    return mine(n, a)", ns)
    with pytest.raises(checking.WriteItYourself):
        mt.exercises.check_align_up(ns["f"])
    assert ns["mine"] is mt.memory.align_up


def test_an_unfinished_exercise_raises_its_hint_not_a_checker_message():
    def unbroadcast(g, shape):
        raise NotImplementedError("write unbroadcast yourself. Hint: sum")
    with pytest.raises(NotImplementedError, match="Hint: sum"):
        mt.exercises.check_unbroadcast(unbroadcast)
    assert not mt.exercises.has_passed(unbroadcast)


def test_yours_or_engine_keeps_a_passing_function_and_falls_back_otherwise(capsys):
    sol = _solutions("06_views_and_aliasing")
    unfinished = lambda off, shape, strides: None  # noqa: E731
    assert mt.exercises.yours_or_engine(unfinished, mt.exercises.fallbacks.extent) is mt.exercises.fallbacks.extent
    mt.exercises.check_extent(sol["extent"])
    assert mt.exercises.yours_or_engine(sol["extent"], mt.exercises.fallbacks.extent) is sol["extent"]
    assert "engine's version" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------
# the independent references agree with the engine
# ----------------------------------------------------------------------------------------------
def test_references_agree_with_the_engine_arena():
    for sizes, capacity, a, growth in arena.CHUNK_CASES:
        ar = mt.memory.Arena(capacity=capacity, alignment=a, growth=growth)
        placed = [(b.chunk, b.offset) for b in (ar.alloc(n) for n in sizes)]
        assert arena._reference_chunks(sizes, capacity, a, growth) == (placed, [c.nbytes for c in ar.chunks])
        ar.reset()
    for sizes, a in arena.BUMP_CASES:
        ar = mt.memory.Arena(capacity=sum(sizes) + a * (len(sizes) + 1), alignment=a)
        offsets = [ar.alloc(n).offset for n in sizes]
        assert arena._reference_bump(sizes, a)[:2] == (offsets, ar.padding)
        ar.reset()
    for n, a in arena.ALIGN_CASES:
        assert arena._ceil_to(n, a) == mt.memory.align_up(n, a)


def test_references_agree_with_the_engine_pool():
    for m in (1, 2, 4, 8, 16, 32):
        classes = pool.even_classes(m)
        assert classes == mt.memory.size_classes(per_doubling=m)
        p = mt.memory.Pool(classes_per_doubling=m)
        import bisect
        for n in [0, 1, 64, 65, 4096, 4097, 100_000, 1 << 20, (1 << 20) + 1]:
            want = None if n > 1 << 20 else bisect.bisect_left(classes, max(n, 64))
            assert p.size_class(n) == want


def test_references_agree_with_the_engine_views():
    for name, v in views._extent_cases():
        lay = mt.memory.aliasing.layout(v)
        p = views._positions(v)
        assert (int(p.min()), int(p.max())) == lay.extent(), name
    for name_a, va, name_b, vb in views._alias_cases():
        shared = bool(np.intersect1d(views._positions(va), views._positions(vb)).size)
        assert shared == (mt.memory.alias(va, vb).answer == "must"), (name_a, name_b)
    for name, sig, size, step in views._window_cases():
        w = sig.unfold(0, size, step)
        assert views._reference_windows(sig.shape[0], sig.stride(0), size, step) == (tuple(w.shape), tuple(w.stride()))


def test_references_agree_with_the_engine_backward_and_plan():
    for op, (words, make, xs, _) in inplace_derivatives._UNARY.items():
        x = mt.tensor(xs, dtype="float64", requires_grad=True)
        make(x).sum().backward()
        assert np.allclose(inplace_derivatives.NUMPY_SLOPES[op][1](np.array(xs)), x.grad.numpy()), op
    forced = 0
    for title, run in inplace_safety._inplace_programs():
        for c, plan_says, _ in inplace_safety._cases(run()):
            assert inplace_safety.reference_verdict(c) == plan_says, (title, c.line)
            forced += (c.op in ("Mul", "Div") and c.other_needs_grad and c.fits and c.made_by_op
                       and not (c.saved_by or c.later_reads or c.alive_at_end))
    assert forced >= 2, "no case where only the Mul/Div rule keeps an op out of place"


def test_references_agree_with_the_engine_optimizer_and_clipping():
    r = np.random.default_rng(0)
    for what, lr, mu, damp, wd, steps in training.MOMENTUM_CASES:
        p0, grads = r.standard_normal(6), [r.standard_normal(6) for _ in range(steps)]
        p = mt.tensor(p0, dtype="float64", requires_grad=True)
        opt = mt.optim.SGD([p], lr=lr, momentum=mu, dampening=damp, weight_decay=wd)
        for (want_p, _), g in zip(training._numpy_sgd(p0, grads, lr, mu, damp, wd), grads):
            p.grad = mt.tensor(g, dtype="float64")
            opt.step()
            assert np.allclose(p.detach().numpy(), want_p, rtol=1e-12), what
    for what, shapes, scale, max_norm in training.CLIP_CASES:
        arrays = training._clip_case(shapes, scale, r)
        params = [mt.zeros(*a.shape, dtype="float64", requires_grad=True) for a in arrays]
        for p, a in zip(params, arrays):
            p.grad = mt.tensor(a, dtype="float64")
        total = float(mt.nn.utils.clip_grad_norm_(params, max_norm).item())
        want_total, want = training._numpy_clip(arrays, max_norm)
        assert np.isclose(total, want_total) and all(np.allclose(p.grad.numpy(), w) for p, w in zip(params, want))


def test_the_peak_reference_agrees_with_the_traces_live_bytes():
    cases, _keep = refcounts._peak_cases()
    for what, tr in cases:
        lb = tr.live_bytes()
        extra = [b - lb[0] for b in lb]
        best = max([0] + extra)
        step = None if best == 0 else tr.events[extra.index(best)]["step"]
        assert refcounts.peak_of(tr) == (best, step), what


# ----------------------------------------------------------------------------------------------
# typical wrong answers, topping up tests/test_exercises.py's lists
# ----------------------------------------------------------------------------------------------
def _peak_every_alloc(tr):
    total = sum(e["nbytes"] for e in tr.filter("alloc"))
    return total, (tr.filter("alloc")[-1]["step"] if total else None)


def _peak_own_frees_only(tr):
    seen, extra, best, step = set(), 0, 0, None
    for e in tr.filter("alloc", "free"):
        if e["kind"] == "alloc":
            seen.add(e["storage"])
            extra += e["nbytes"]
        elif e["storage"] in seen:
            extra -= e["nbytes"]
        if extra > best:
            best, step = extra, e["step"]
    return best, step


def _peak_last_step(tr):
    extra, best, step = 0, 0, None
    for e in tr.filter("alloc", "free"):
        extra += e["nbytes"] if e["kind"] == "alloc" else -e["nbytes"]
        if extra >= best and extra:
            best, step = extra, e["step"]
    return best, step


def _peak_at_end(tr):
    extra = sum(e["nbytes"] if e["kind"] == "alloc" else -e["nbytes"] for e in tr.filter("alloc", "free"))
    return max(extra, 0), None


@pytest.mark.parametrize("wrong, words", [
    (_peak_every_alloc, "every allocation added up"),
    (_peak_own_frees_only, "made before recording"),
    (_peak_last_step, "FIRST event"),
    (_peak_at_end, "not the total at the end"),
    (lambda tr: 0, "return a pair"),
    (lambda tr: None, "did you forget `return`"),
])
def test_wrong_peaks_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for the trace of") as info:
        mt.exercises.check_peak_extra_bytes(wrong)
    assert words in str(info.value)


@pytest.mark.parametrize("wrong, words", [
    (lambda index, strides, offset: offset + sum(i * s for i, s in zip(index, strides)) + 1, "position = offset"),
    (lambda index, strides, offset: sum(index) + offset, "position = offset"),
    (lambda index, strides, offset: None, "did you forget `return`"),
])
def test_more_wrong_element_offsets_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="view") as info:
        mt.exercises.check_element_offset(wrong)
    assert words in str(info.value)


def _chunk_plan_chunk_times_growth(sizes, capacity, alignment, growth):
    up = arena._ceil_to
    chunks, placed, top = [up(capacity, alignment)], [], 0
    for n in sizes:
        start = up(top, alignment)
        if start + n > chunks[-1]:
            chunks.append(max(up(n, alignment), up(int(chunks[-1] * growth), alignment)))
            start = 0
        placed.append((len(chunks) - 1, start))
        top = start + n
    return placed, chunks


@pytest.mark.parametrize("wrong, words", [
    (_chunk_plan_chunk_times_growth, "TOTAL capacity"),
    (lambda sizes, capacity, alignment, growth: None, "did you forget `return`"),
])
def test_more_wrong_chunk_plans_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="for sizes") as info:
        mt.exercises.check_chunk_plan(wrong)
    assert words in str(info.value)


# -- notebook 02, exercise 4: LogSumExp as a new Function -----------------------------------------
def _lse(forward=None, backward=None):
    """A LogSumExp class with the notebook's forward/backward, one of them replaced."""
    ref = _solutions("02_backpropagation")["LogSumExp"]
    body = {"forward": staticmethod(forward or ref.forward), "backward": staticmethod(backward or ref.backward)}
    return type("LogSumExp", (mt.Function,), body)


def _fwd(f):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_output()
        return f(x.detach().numpy())
    return forward


def _softmax_of(ctx):
    x, y = ctx.saved_tensors
    return (x - y.unsqueeze(-1)).exp()


@pytest.mark.parametrize("wrong, words", [
    (_lse(forward=_fwd(lambda d: np.log(np.exp(d).sum(-1)))), "overflows"),
    (_lse(forward=_fwd(lambda d: np.log(np.exp(d).mean(-1)))), "MEAN"),
    (_lse(forward=_fwd(lambda d: d.max(-1))), "only the max"),
    (_lse(forward=_fwd(lambda d: np.log(np.exp(d - d.max(0)).sum(0)) + d.max(0))), "LAST one"),
    (_lse(backward=lambda ctx, g: _softmax_of(ctx)), "upstream gradient g"),
    (_lse(backward=lambda ctx, g: g * _softmax_of(ctx)), "x's shape"),
    (_lse(backward=lambda ctx, g: g.unsqueeze(-1) * ctx.saved_tensors[0].exp()), "divide by"),
    (lambda x: x, "needs your class"),
    (_lse(forward=_fwd(lambda d: -mt.log_softmax(mt.tensor(d), -1).numpy()[..., 0] + d[..., 0])),
     "write LogSumExp yourself"),
])
@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_wrong_logsumexps_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_logsumexp(wrong)
    assert words in str(info.value)


# -- notebook 04, exercise 4: a bump arena class --------------------------------------------------
def _arena_variant(**changes):
    """The notebook's BumpArena with one method replaced."""
    ref = _solutions("04_arena_allocator")["BumpArena"]
    return type("BumpArena", (ref,), changes)


def _alloc_unaligned(self, n):
    start = self.top
    while start + n > self.chunks[self.chunk]:
        self.before += self.chunks[self.chunk]
        self.chunk, self.top, start = self.chunk + 1, 0, 0
        if self.chunk == len(self.chunks):
            self.chunks.append(max(arena._ceil_to(n, self.alignment),
                                   arena._ceil_to(int(sum(self.chunks) * (self.growth - 1)), self.alignment)))
    self.top = start + n
    self.high_water = max(self.high_water, self.used)
    return self.chunk, start


def _alloc_grow_last(self, n):
    up = arena._ceil_to
    start = up(self.top, self.alignment)
    while start + n > self.chunks[self.chunk]:
        self.before += self.chunks[self.chunk]
        self.chunk, self.top, start = self.chunk + 1, 0, 0
        if self.chunk == len(self.chunks):
            self.chunks.append(max(up(n, self.alignment), up(int(self.chunks[-1] * self.growth), self.alignment)))
    self.padding += start - self.top
    self.top = start + n
    self.high_water = max(self.high_water, self.used)
    return self.chunk, start


def _reset_high_water(self):
    self.chunk = self.top = self.before = self.padding = self.high_water = 0


def _reset_forgets_padding(self):
    self.chunk = self.top = self.before = 0


def _reset_drops_chunks(self):
    self.chunks = self.chunks[:1]
    self.chunk = self.top = self.before = self.padding = 0


def _reset_stays(self):
    self.padding = 0


@pytest.mark.parametrize("wrong, words", [
    (_arena_variant(alloc=_alloc_unaligned), "forgot the alignment"),
    (_arena_variant(alloc=_alloc_grow_last), "ALL chunks so far"),
    (_arena_variant(reset=_reset_high_water), "does not lower it"),
    (_arena_variant(reset=_reset_forgets_padding), "padding starts again from 0"),
    (_arena_variant(reset=_reset_drops_chunks), "chunks"),
    (_arena_variant(reset=_reset_stays), "0 after a reset"),
    (_arena_variant(used=property(lambda self: self.top)), "skipped tails"),
    (_arena_variant(alloc=lambda self, n: (0, 64)), "alloc returned"),
    (_arena_variant(alloc=lambda self, n: mt.memory.Arena(capacity=64).alloc(n)), "write BumpArena yourself"),
])
def test_wrong_bump_arenas_are_explained(wrong, words):
    with pytest.raises(AssertionError, match="BumpArena\\(capacity=|BumpArena") as info:
        mt.exercises.check_bump_arena(wrong)
    assert words in str(info.value)


def test_the_bump_arena_reference_agrees_with_the_engine_arena():
    for what, (capacity, a, growth), ops in arena.BUMP_ARENA_PROGRAMS + arena._random_arena_programs(20):
        engine, ref = mt.memory.Arena(capacity=capacity, alignment=a, growth=growth), arena._ReferenceArena(capacity, a, growth)
        for op in ops:
            if op == "reset":
                engine.reset()
                ref.reset()
                continue
            b = engine.alloc(op)
            assert (b.chunk, b.offset) == ref.alloc(op), what
            assert ([c.nbytes for c in engine.chunks], engine.padding, engine.used, engine.high_water) == \
                   (ref.chunks, ref.padding, ref.used, ref.high_water), what
        engine.reset()


# -- notebook 08, exercise 3: Adam / AdamW ----------------------------------------------------------
def _adam(**mistake):
    def step(p, g, m, v, vmax, t, lr, b1, b2, eps, wd, decoupled, amsgrad):
        if mistake.get("swap_decay"):
            decoupled = not decoupled
        if wd and decoupled:
            p *= 1 - lr * wd
        elif wd:
            g = g + wd * p
        if mistake.get("beta_swapped"):
            m *= 1 - b1
            m += b1 * g
        else:
            m *= b1
            m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        if amsgrad and not mistake.get("no_amsgrad"):
            np.maximum(vmax, v, out=vmax)
        second = vmax if amsgrad and not mistake.get("no_amsgrad") else v
        if mistake.get("no_bias"):
            denom = np.sqrt(second) + eps
            update = lr * m / denom
        elif mistake.get("eps_inside"):
            update = lr / (1 - b1 ** t) * m / np.sqrt(second / (1 - b2 ** t) + eps)
        elif mistake.get("step0"):
            update = lr / (1 - b1 ** (t + 1)) * m / (np.sqrt(second) / np.sqrt(1 - b2 ** (t + 1)) + eps)
        else:
            update = lr / (1 - b1 ** t) * m / (np.sqrt(second) / np.sqrt(1 - b2 ** t) + eps)
        if mistake.get("not_in_place"):
            p = p - update  # noqa: F841 - the mistake: a new array
        else:
            p -= update
    return step


def _adam_by_engine(p, g, m, v, vmax, step, lr, b1, b2, eps, wd, decoupled, amsgrad):
    t = mt.tensor(p, dtype="float64", requires_grad=True)
    opt = mt.optim.Adam([t], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, amsgrad=amsgrad)
    t.grad = mt.tensor(g, dtype="float64")
    opt.step()
    p[...] = t.detach().numpy()


@pytest.mark.parametrize("wrong, words", [
    (_adam(no_bias=True), "bias corrections"),
    (_adam(eps_inside=True), "after the square root"),
    (_adam(step0=True), "counted from 1"),
    (_adam(swap_decay=True), "You did the other one"),
    (_adam(no_amsgrad=True), "vmax"),
    (_adam(beta_swapped=True), "m = beta1"),
    (_adam(not_in_place=True), "INTO p"),
    (_adam_by_engine, "write adam_step yourself"),
])
def test_wrong_adam_steps_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_adam_step(wrong)
    assert words in str(info.value)


# -- notebook 06, exercise 4: strides of a view -------------------------------------------------------
def _contiguous_always(shape, strides, new_shape):
    out, acc = [], 1
    for n in reversed(new_shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _view_strides_base_one(shape, strides, new_shape):
    ref = _solutions("06_views_and_aliasing")["view_strides"]
    got = ref(shape, tuple(s if i < len(strides) - 1 else 1 for i, s in enumerate(strides)), new_shape)
    return got


def _view_strides_never_none(shape, strides, new_shape):
    got = _solutions("06_views_and_aliasing")["view_strides"](shape, strides, new_shape)
    return got if got is not None else _contiguous_always(shape, strides, new_shape)


@pytest.mark.parametrize("wrong, words", [
    (_contiguous_always, "contiguous tensor of the new shape"),
    (lambda shape, strides, new_shape: None, "a view exists"),
    (_view_strides_base_one, "read the storage positions"),
    (_view_strides_never_none, "no view can do it"),
    (lambda shape, strides, new_shape: tuple(strides), "strides for"),
    (lambda shape, strides, new_shape: mt.zeros(64).as_strided(shape, strides).view(*new_shape).stride(),
     "write view_strides yourself"),
])
def test_wrong_view_strides_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_view_strides(wrong)
    assert words in str(info.value)


# -- notebook 01, exercise 2b: the layout of x[key] ---------------------------------------------------
def _layout_variant(mistake):
    def slice_layout(shape, strides, offset, key):
        new_shape, new_strides = [], []
        for d, (n, s) in enumerate(zip(shape, strides)):
            k = key[d] if d < len(key) else slice(None)
            if isinstance(k, slice):
                if mistake == "naive_slice":
                    start = k.start or 0
                    stop = n if k.stop is None else k.stop
                    step = k.step or 1
                else:
                    start, stop, step = k.indices(n)
                count = len(range(start, stop, step))
                if count and mistake != "no_offset":
                    offset += start * s
                new_shape.append(count)
                new_strides.append(s if mistake == "no_step" else s * step)
            else:
                if mistake == "keep_int_dim":
                    new_shape.append(1)
                    new_strides.append(s)
                offset += (k if mistake == "negative_as_is" else k % n) * s
        if mistake == "only_key_dims":
            return tuple(new_shape[:len(key)]), tuple(new_strides[:len(key)]), offset
        return tuple(new_shape), tuple(new_strides), offset
    return slice_layout


def test_the_slice_layout_reference_agrees_with_the_engines_indexing():
    from microtorch.exercises import tensors

    for shape, strides, offset, key in tensors._layout_cases():
        v = mt.arange(4096.).as_strided(shape, strides, offset)[key]
        want = tensors._numpy_layout(shape, strides, offset, key)
        if 0 not in want[0]:
            assert (tuple(v.shape), tuple(v.stride()), v.storage_offset()) == want, key


@pytest.mark.parametrize("wrong, words", [
    (_layout_variant("keep_int_dim"), "An int index removes its dimension"),
    (_layout_variant("negative_as_is"), "counts from the end"),
    (_layout_variant("no_step"), "multiplies that dimension's stride"),
    (_layout_variant("naive_slice"), "slice.indices(n)"),
    (_layout_variant("no_offset"), "offset moves to the first element"),
    (_layout_variant("only_key_dims"), "kept whole"),
    (lambda shape, strides, offset, key: (tuple(shape), tuple(strides), offset), "you returned shape"),
    (lambda shape, strides, offset, key: (lambda v: (v.shape, v.stride(), v.storage_offset()))(
        mt.zeros(4096).as_strided(shape, strides, offset)[key]), "write slice_layout yourself"),
])
def test_wrong_slice_layouts_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_slice_layout(wrong)
    assert words in str(info.value)


# -- notebook 05, exercise 3: a free-list pool ----------------------------------------------------------
def _pool_variant(**changes):
    ns = _solutions("05_memory_pool")
    return type("FreeListPool", (ns["FreeListPool"],), changes)


def _alloc_fifo(self, n):
    c = pool.bisect.bisect_left(self.classes, max(n, 64)) if n <= 1 << 20 else None
    if c is not None and self.free_lists[c]:
        block = self.free_lists[c].pop(0)
        self.reuse_hits += 1
        self.free_bytes -= self.classes[c]
        self.sizes[block] = self.classes[c]
        self.reserved += self.classes[c]
        return block
    return type(self).__mro__[1].alloc(self, n)


def _alloc_never_reuse(self, n):
    c = pool.bisect.bisect_left(self.classes, max(n, 64)) if n <= 1 << 20 else None
    if c is None:
        return type(self).__mro__[1].alloc(self, n)
    block = (c, self.carved[c])
    self.carved[c] += 1
    self.sizes[block] = self.classes[c]
    self.reserved += self.classes[c]
    return block


def _alloc_requested_bytes(self, n):
    block = type(self).__mro__[1].alloc(self, n)
    self.reserved += n - self.sizes[block]
    self.sizes[block] = n
    return block


def _free_keeps_direct(self, block):
    size = self.sizes.pop(block)
    self.reserved -= size
    self.free_bytes += size
    if block[0] is not None:
        self.free_lists[block[0]].append(block)


def test_the_free_list_pool_reference_agrees_with_the_engine_pool():
    for what, m, ops in pool.POOL_PROGRAMS + pool._random_pool_programs(20):
        engine, ref, eb, rb = mt.memory.Pool(classes_per_doubling=m), pool._ReferencePool(m), [], []
        for op in ops:
            if isinstance(op, tuple):
                engine.free(eb[op[1]])
                ref.free(rb[op[1]])
                continue
            b, x = engine.alloc(op), ref.alloc(op)
            earlier = [i for i in range(len(rb)) if rb[i] == x]
            if earlier:  # the reference reuses a block: the engine hands out the same bytes
                assert (eb[earlier[-1]].chunk, eb[earlier[-1]].offset) == (b.chunk, b.offset), what
            eb.append(b)
            rb.append(x)
            assert (engine.reserved, engine.reuse_hits) == (ref.reserved, ref.reuse_hits), what


@pytest.mark.parametrize("wrong, words", [
    (_pool_variant(alloc=_alloc_fifo), "freed LAST"),
    (_pool_variant(alloc=_alloc_never_reuse), "reuse it before carving"),
    (_pool_variant(alloc=_alloc_requested_bytes), "CLASS sizes"),
    (_pool_variant(free=_free_keeps_direct), "never kept"),
    (_pool_variant(alloc=lambda self, n: (0, 0)), "The class of"),
    (_pool_variant(alloc=lambda self, n: mt.memory.Pool().alloc(n)), "write FreeListPool yourself"),
])
def test_wrong_free_list_pools_are_explained(wrong, words):
    with pytest.raises(AssertionError) as info:
        mt.exercises.check_free_list_pool(wrong)
    assert words in str(info.value)
