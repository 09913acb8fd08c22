"""Tests written against surviving mutants of microtorch/exercises/plugins.py (mutation run 5,
tests/mutation-run-5/exercises-plugins.md): what the engine does around a learner's plugged-in
function — the dtype of what it returns, several backward roots, an empty layout or trace, the
optimizers' refusals and the buffers they hand over; and of microtorch/exercises/capstone.py: the
cases notebook 13's two checkers run and what their messages say."""
import contextlib

import numpy as np
import pytest

import microtorch as mt
from microtorch.exercises import capstone
from microtorch.memory.aliasing import byte_extent
from microtorch.memory.pool import Pool, size_classes
from microtorch.trace.recorder import Trace

from test_exercise_plugins import PLUGS, _solution

TOPO = _solution(*PLUGS["topological_order"])
DEPS = _solution(*PLUGS["dependency_counts"])
PEAK = _solution(*PLUGS["peak_extra_bytes"])
EXTENT = _solution(*PLUGS["extent"])
SIZE_CLASS = _solution(*PLUGS["size_class_of"])
SGD_STEP = _solution(*PLUGS["sgd_momentum_step"])
ADAM_STEP = _solution(*PLUGS["adam_step"])


def numpy_unbroadcast(g, shape):
    """A learner's unbroadcast in numpy: returns a float64 array, not a Tensor."""
    a = g.numpy().astype(np.float64)
    a = a.sum(axis=tuple(range(a.ndim - len(shape))))
    for i, n in enumerate(shape):
        if n == 1 and a.shape[i] != 1:
            a = a.sum(axis=i, keepdims=True)
    return a.reshape(shape)


def _tanh_shared_by_two_outputs():
    """x -> tanh -> (* 2, * 3): two outputs whose graphs share the tanh node."""
    x = mt.tensor([0.3, -0.7], dtype="float64", requires_grad=True)
    h = x.tanh()
    return x, [(h * 2.0).sum(), (h * 3.0).sum()]


# -- unbroadcast ---------------------------------------------------------------------------------
def test_an_unbroadcast_returning_numpy_gives_gradients_of_the_operands_dtype():
    """a plug-in returning a float64 numpy array: the float32 operands' gradients stay float32"""
    a, b = mt.randn(2, 3, requires_grad=True), mt.randn(3, requires_grad=True)
    with mt.exercises.use(unbroadcast=numpy_unbroadcast):
        ga, gb = mt.autograd.grad((a * b).sum(), (a, b))
    assert (ga.dtype, gb.dtype) == (mt.float32, mt.float32)
    assert np.allclose(gb.numpy(), a.detach().numpy().sum(axis=0))


# -- topological_order / dependency_counts ---------------------------------------------------------
@pytest.mark.parametrize("order, plug", [("topo", {"topological_order": TOPO}), ("deps", {"dependency_counts": DEPS})])
def test_a_leaf_given_as_a_root_is_not_handed_to_the_learners_function(order, plug):
    """backward([y, x]) with x a leaf: x gets 1 + dy/dx, the learner's function only sees nodes"""
    x = mt.tensor(0.5, dtype="float64", requires_grad=True)
    y = (x * 2.0).tanh()
    with mt.exercises.use(**plug):
        mt.autograd.backward([y, x], order=order)
    assert np.isclose(x.grad.item(), 1 + 2 * (1 - np.tanh(1.0) ** 2))


def test_a_root_given_twice_is_scheduled_once_with_a_plugged_in_topological_order():
    """backward([y, y], order="topo"): the recorded schedule lists every node once, and y counts twice"""
    x = mt.tensor([0.3, -0.7], dtype="float64", requires_grad=True)
    y = (x * 2.0).tanh().sum()
    with mt.exercises.use(topological_order=TOPO), mt.trace() as tr:
        mt.autograd.backward([y, y], order="topo")
    (event,) = tr.filter("backward")
    assert len(event["schedule"]) == len(set(event["schedule"])) == 3  # sum, tanh, mul
    assert np.allclose(x.grad.numpy(), 2 * 2 * (1 - np.tanh(2 * np.array([0.3, -0.7])) ** 2))


def test_dependency_counts_of_two_outputs_sharing_a_node_add_up():
    """two outputs reaching tanh through different consumers: both halves of its gradient arrive"""
    x, ys = _tanh_shared_by_two_outputs()
    with mt.exercises.use(dependency_counts=DEPS):
        mt.autograd.backward(ys)
    assert np.allclose(x.grad.numpy(), 5 * (1 - np.tanh(x.detach().numpy()) ** 2))


def _several_roots():
    """(what, outputs of x): backward roots whose graphs overlap."""
    return [
        ("tanh shared through two consumers", lambda x: (lambda h: [(h * 2.0).sum(), (h * 3.0).sum()])(x.tanh())),
        ("exp shared, and the tanh below it", lambda x: (lambda a: [(a * 2.0).sum(), (a * 3.0).sum()])(x.tanh().exp())),
        ("the second output computed from the first", lambda x: (lambda y: [y, y.exp()])(x.tanh().sum())),
        ("the first output computed from the second", lambda x: (lambda y: [y.exp(), y])(x.tanh().sum())),
    ]


@pytest.mark.parametrize("order, plug", [("topo", {"topological_order": TOPO}), ("deps", {"dependency_counts": DEPS})])
def test_several_overlapping_roots_give_the_engines_gradient_with_a_plugged_in_schedule(order, plug):
    """backward(outputs) over graphs that share nodes: with the notebook's solution, the gradient is the engine's own"""
    x0 = np.array([0.3, -0.7])
    for what, f in _several_roots():
        x = mt.tensor(x0, dtype="float64", requires_grad=True)
        mt.autograd.backward(f(x), order=order)
        want = x.grad.numpy()
        x = mt.tensor(x0, dtype="float64", requires_grad=True)
        with mt.exercises.use(**plug):
            mt.autograd.backward(f(x), order=order)
        assert x.grad is not None and np.allclose(x.grad.numpy(), want), what


# -- size_class_of --------------------------------------------------------------------------------
def test_a_pool_made_with_positional_arguments_inside_the_block_keeps_them():
    """Pool(64, 1 MiB, 2) with a plugged-in size_class_of has 2 classes per doubling and serves from them"""
    with mt.exercises.use(size_class_of=SIZE_CLASS):
        pool = Pool(64, 1 << 20, 2)
        sizes = [pool.alloc(n).size for n in (1, 65, 100, 129, 200)]
    assert pool.classes == size_classes(64, 1 << 20, 2)
    assert sizes == [64, 96, 128, 192, 256]


# -- extent ---------------------------------------------------------------------------------------
def test_an_empty_view_touches_no_bytes_with_a_plugged_in_extent():
    """byte_extent of an empty slice is None, whatever the learner's extent says of a 0-length dimension"""
    x = mt.arange(24.0).reshape(4, 6)
    with mt.exercises.use(extent=EXTENT):
        assert byte_extent(x[:, 2:2]) is None
        assert byte_extent(x[1:3, 2:5]) == (32, 68)


# -- peak_extra_bytes -------------------------------------------------------------------------------
def test_the_peak_of_an_empty_trace_counts_no_bytes_with_a_plugged_in_peak():
    """Trace().peak() of a trace with no events is 0 bytes (nothing to replay, no baseline)"""
    with mt.exercises.use(peak_extra_bytes=PEAK):
        assert Trace().peak()[0] == 0


def test_a_plugged_in_peak_adds_the_baseline_bytes_not_the_first_events():
    """a hand-written trace: a baseline of 1000 live bytes, then 64 allocated and freed: peak (1064, 1)"""
    tr = Trace([{"kind": "baseline", "step": 0, "live_bytes": 1000},
                {"kind": "alloc", "step": 1, "storage": 2, "nbytes": 64},
                {"kind": "free", "step": 2, "storage": 2, "nbytes": 64}])
    assert tr.peak() == (1064, 1)
    with mt.exercises.use(peak_extra_bytes=PEAK):
        assert tr.peak() == (1064, 1)


def test_a_plugged_in_peak_of_a_trace_without_baseline_counts_the_first_alloc_once():
    """a hand-written trace starting with an alloc (no baseline): 64 then 32 live, peak (96, 1) as the engine's"""
    tr = Trace([{"kind": "alloc", "step": 0, "storage": 1, "nbytes": 64},
                {"kind": "alloc", "step": 1, "storage": 2, "nbytes": 32},
                {"kind": "free", "step": 2, "storage": 1, "nbytes": 64},
                {"kind": "free", "step": 3, "storage": 2, "nbytes": 32}])
    assert tr.peak() == (96, 1)
    with mt.exercises.use(peak_extra_bytes=PEAK):
        assert tr.peak() == (96, 1)


def test_a_plug_in_with_no_peak_step_gives_the_baseline_at_step_0():
    """a recorded trace that allocates nothing: the learner's (0, None) is the engine's (baseline, 0)"""
    x = mt.randn(50)
    with mt.trace() as tr:
        del x
    want = tr.peak()
    assert PEAK(tr) == (0, None) and want[1] == 0
    with mt.exercises.use(peak_extra_bytes=PEAK):
        assert tr.peak() == want


# -- derivative_from_output ---------------------------------------------------------------------------
@pytest.mark.parametrize("derivative", [lambda op, z: 1 - z.astype(np.float64) ** 2, lambda op, z: 1 - z * z],
                         ids=["float64 from the plug-in", "float32 from the plug-in"])
def test_an_in_place_backward_gives_gradients_of_the_tensors_dtype(derivative):
    """tanh_ on a float32 op result with a plugged-in derivative: the input's gradient is float32 and right"""
    x = mt.tensor([0.3, -0.7, 1.1], requires_grad=True)
    with mt.exercises.use(derivative_from_output=derivative):
        (g,) = mt.autograd.grad(((x * 1.0).tanh_() * 2.0).sum(), x)
    assert g.dtype == mt.float32
    assert np.allclose(g.numpy(), 2 * (1 - np.tanh(x.detach().numpy()) ** 2), rtol=1e-6)


# -- sgd_momentum_step / adam_step ----------------------------------------------------------------------
@pytest.mark.parametrize("options", [{"momentum": 0.9, "nesterov": True}, {"maximize": True}], ids=["nesterov", "maximize"])
def test_a_plugged_in_sgd_step_refuses_nesterov_and_maximize(options):
    """SGD(nesterov=True) or SGD(maximize=True) with a plugged-in step raises instead of ignoring the option"""
    p = mt.tensor([1.0, 2.0], requires_grad=True)
    opt = mt.optim.SGD([p], lr=0.1, **options)
    p.grad = mt.tensor([0.5, 0.5])
    with mt.exercises.use(sgd_momentum_step=SGD_STEP), pytest.raises(RuntimeError, match="knows no nesterov or maximize"):
        opt.step()
    assert np.array_equal(p.detach().numpy(), [1.0, 2.0])


def test_sgd_without_momentum_hands_the_plug_in_a_zero_buffer_of_the_parameters_shape():
    """momentum 0: the buf argument is zeros shaped and typed like p, so a step writing into it works"""
    seen = []

    def step(p, g, buf, *rest):
        seen.append((buf.shape, buf.dtype, buf.copy()))
        SGD_STEP(p, g, buf, *rest)

    p = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    opt = mt.optim.SGD([p], lr=0.5)
    p.grad = mt.tensor([1.0, 1.0, 1.0])
    with mt.exercises.use(sgd_momentum_step=step):
        opt.step()
    ((shape, dtype, buf),) = seen
    assert (shape, dtype) == ((3,), np.float32) and not buf.any()
    assert np.allclose(p.detach().numpy(), [0.5, 1.5, 2.5])


def test_adam_without_amsgrad_hands_the_plug_in_a_zero_vmax_of_the_parameters_shape():
    """amsgrad off: the vmax argument is zeros shaped and typed like p (the signature's array, unused)"""
    seen = []

    def step(p, g, m, v, vmax, *rest):
        seen.append((vmax.shape, vmax.dtype, vmax.copy()))
        ADAM_STEP(p, g, m, v, vmax, *rest)

    p = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    opt = mt.optim.Adam([p], lr=0.1)
    p.grad = mt.tensor([1.0, -1.0, 1.0])
    with mt.exercises.use(adam_step=step):
        opt.step()
    ((shape, dtype, vmax),) = seen
    assert (shape, dtype) == ((3,), np.float32) and not vmax.any()
    assert np.allclose(p.detach().numpy(), [0.9, 2.1, 2.9])


# ==================================================================================================
# microtorch/exercises/capstone.py (notebook 13)
# ==================================================================================================
def fastest_that_fits(budget, results):
    """The rule of the capstone's docstring, written out."""
    fits = [(r["step_ms"], r["peak_bytes"], n) for n, r in results.items() if r["peak_bytes"] <= budget]
    return min(fits)[2] if fits else None


def _cases_seen(hidden):
    """The (budget, results) pairs check_choose_configuration hands to the learner's function."""
    seen = []

    def recording(budget, results):
        seen.append((budget, results))
        return fastest_that_fits(budget, results)

    capstone.check_choose_configuration(recording, hidden=hidden)
    return seen


def test_the_visible_choose_configuration_cases_start_with_the_table_at_its_boundaries(capsys):
    """the notebook's table at 1,000,000 (all fit), exactly / a byte under each edge, then 40 random tables"""
    seen = _cases_seen(hidden=False)
    assert [b for b, _ in seen[:6]] == [1_000_000, 700_000, 699_999, 420_000, 350_000, 299_999]
    assert all(r == capstone.FIXED for _, r in seen[:6])
    assert [fastest_that_fits(b, r) for b, r in seen[:6]] == [
        "step arena", "step arena", "planned arena", "planned arena", "checkpointed", None]
    assert len(seen) == 46 and "all 46 cases right." in capsys.readouterr().out


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_the_random_choose_configuration_tables_span_their_ranges(hidden):
    """40 random tables: 2 to 6 of the six names, peaks 50,000-950,000 B in 50,000s, 2.0-7.9 ms in tenths"""
    seen = _cases_seen(hidden)[0 if hidden else 6:]
    names = {"pool", "step arena", "planned arena", "checkpointed", "sparse", "mmap"}
    assert len(seen) == 40
    assert {len(r) for _, r in seen} == {2, 3, 4, 5, 6}
    assert set().union(*(r for _, r in seen)) == names
    peaks = {v["peak_bytes"] for _, r in seen for v in r.values()}
    assert peaks == {50_000 * i for i in range(1, 20)}
    times = {v["step_ms"] for _, r in seen for v in r.values()}
    assert times <= {i / 10 for i in range(20, 80)} and min(times) == 2.0 and max(times) == 7.9
    kinds = set()
    for budget, r in seen:
        ps = [v["peak_bytes"] for v in r.values()]
        kinds.add("a peak" if budget in ps else "a byte under one" if budget + 1 in ps
                  else "twice the largest" if budget == 2 * max(ps) else "other")
    assert kinds == {"a peak", "a byte under one", "twice the largest"}


CHOOSE = _solution("13_capstone", "choose_configuration")
ACTIVATION_PEAK = _solution("13_capstone", "activation_peak")


def largest_that_fits(budget, results):
    """A wrong answer: as much of the budget as possible (the largest peak that fits)."""
    fits = [(r["peak_bytes"], n) for n, r in results.items() if r["peak_bytes"] <= budget]
    return max(fits)[1] if fits else None


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_the_notebook_solutions_pass_the_capstone_checkers(hidden, capsys):
    """notebook 13's choose_configuration and activation_peak pass their checkers, which count their cases"""
    capstone.check_choose_configuration(CHOOSE, hidden=hidden)
    capstone.check_activation_peak(ACTIVATION_PEAK, hidden=hidden)
    out = capsys.readouterr().out
    assert f"✓ check_choose_configuration: all {40 if hidden else 46} cases right" in out
    assert f"✓ check_activation_peak: all {30 if hidden else 33} cases right" in out


def test_a_wrong_choice_is_told_the_budget_and_the_whole_table():
    """"<" for "<=": the message opens with the budget and every configuration's peak and time"""
    with pytest.raises(AssertionError) as info:
        capstone.check_choose_configuration(lambda b, r: fastest_that_fits(b - 1, r))
    assert str(info.value).startswith(
        "for a budget of 700,000 B and {pool: 900,000 B in 4.0 ms, step arena: 700,000 B in 3.6 ms, "
        "planned arena: 420,000 B in 3.9 ms, checkpointed: 300,000 B in 5.2 ms}: 'planned arena' fits but takes 3.9 ms")


def test_a_choice_that_raises_is_told_which_case():
    """a function that reads results["pool"] raises KeyError on a table without it: the message says which table"""
    with pytest.raises(AssertionError, match=r"^for a budget of [\d,]+ B and \{[^}]*\}: your function raised KeyError: 'pool'"):
        capstone.check_choose_configuration(lambda b, r: r["pool"] and fastest_that_fits(b, r))


def test_a_configuration_whose_peak_is_the_budget_is_told_it_fits():
    """the largest that fits, at a budget equal to its peak: "fits but takes", not "over the budget\""""
    with pytest.raises(AssertionError, match=r"budget of 350,000 B .*'step arena' fits but takes 7.8 ms; 'sparse' fits too"):
        capstone.check_choose_configuration(largest_that_fits, hidden=True)


def _traces_seen(hidden):
    """The traces check_activation_peak hands to the learner's function."""
    seen = []

    def recording(tr):
        seen.append(tr)
        return ACTIVATION_PEAK(tr)

    capstone.check_activation_peak(recording, hidden=hidden)
    return seen


def _training_step(width, arena):
    """What notebook 13 records: one cross-entropy step of an MLP 8→width→width→3 on a batch of 20."""
    mt.manual_seed(width)
    model = mt.nn.MLP(8, [width, width], 3)
    x, y = mt.randn(20, 8), mt.randint(0, 3, (20,))
    with mt.trace() as tr, (mt.memory.step_arena() if arena else contextlib.nullcontext()):
        mt.nn.functional.cross_entropy(model(x), y).backward()
    return tr


def _memory_events(tr):
    return [(e["kind"], e.get("tag"), e.get("allocator"), e["nbytes"]) for e in tr.events if e["kind"] in ("alloc", "free")]


def test_the_visible_activation_peak_cases_are_three_recorded_steps_then_random_traces():
    """widths 16, 48 (in a step arena) and 32, recorded; then 30 random traces (30 only, when hidden)"""
    seen = _traces_seen(hidden=False)
    assert len(seen) == 33 and len(_traces_seen(hidden=True)) == 30
    for tr, (width, arena) in zip(seen, [(16, False), (48, True), (32, False)]):
        assert _memory_events(tr) == _memory_events(_training_step(width, arena)), (width, arena)
    assert all(tr.events[0]["kind"] == "free" for tr in seen[3:])


def test_the_random_activation_traces_free_by_storage_only_and_span_their_ranges():
    """30 traces a run: a free of 4,096 B of a storage from before, then 5-39 allocs and frees of fresh storages"""
    traces = _traces_seen(hidden=False)[-30:] + _traces_seen(hidden=True)
    lengths, sizes, tags, most_live = set(), set(), set(), 0
    for tr in traces:
        first, *rest = tr.events
        assert (first["kind"], first["nbytes"]) == ("free", 4096)
        assert [e["step"] for e in tr.events] == list(range(len(tr.events)))
        lengths.add(len(rest))
        live, allocated = set(), set()
        for e in rest:
            if e["kind"] == "alloc":
                assert e["storage"] not in allocated | {first["storage"]} and e["nbytes"] % 64 == 0
                allocated.add(e["storage"])
                live.add(e["storage"])
                sizes.add(e["nbytes"])
                tags.add(e["tag"])
            else:  # a free names a live storage and says no size: the alloc's size is to be remembered
                assert e["kind"] == "free" and e["storage"] in live and e["nbytes"] == 0
                live.remove(e["storage"])
            most_live = max(most_live, len(live))
    assert min(lengths) == 5 and max(lengths) == 39
    assert min(sizes) == 64 and max(sizes) == 63 * 64
    assert tags == {"activation", "gradient", "tensor"} and most_live >= 3


def test_a_wrong_activation_peak_is_told_which_trace():
    """the messages name the trace: the recorded step (with its MLP, and the step arena) or the random trace's number"""
    def pool_only(tr):  # right on the pool's traces, wrong under the step arena
        return ACTIVATION_PEAK(Trace([e for e in tr.events if e.get("allocator") in ("pool", None)]))

    with pytest.raises(AssertionError, match=r"^for a recorded training step \(MLP 8→16→16→3\): the peak"):
        capstone.check_activation_peak(lambda tr: 0)
    with pytest.raises(AssertionError, match=r"^for a recorded training step \(MLP 8→48→48→3, step arena\): the peak"):
        capstone.check_activation_peak(pool_only)
    with pytest.raises(AssertionError, match=r"^for random trace 1: the peak"):
        capstone.check_activation_peak(lambda tr: 0, hidden=True)


def test_an_activation_peak_that_raises_is_told_which_trace():
    """a function reading every event's tag raises KeyError on the recorded step's baseline: the message says which trace"""
    with pytest.raises(AssertionError, match=r"^for a recorded training step \(MLP 8→16→16→3\): your function raised KeyError"):
        capstone.check_activation_peak(lambda tr: sum(e["nbytes"] for e in tr.events if e["tag"] == "activation"))


def test_the_activation_peak_hints_come_on_the_random_traces_too():
    """the hidden run (random traces only): never subtracting a free is told to, as on the recorded steps"""
    def never_frees(tr):
        return sum(e["nbytes"] for e in tr.events if e["kind"] == "alloc" and e.get("tag") == "activation")

    for hidden in (False, True):
        with pytest.raises(AssertionError, match="subtract a storage's bytes when it is freed"):
            capstone.check_activation_peak(never_frees, hidden=hidden)
