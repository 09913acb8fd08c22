"""Tests written against surviving mutants of microtorch/exercises/plugins.py (mutation run 5,
tests/mutation-run-5/exercises-plugins.md): what the engine does around a learner's plugged-in
function — the dtype of what it returns, several backward roots, an empty layout or trace, the
optimizers' refusals and the buffers they hand over."""
import numpy as np
import pytest

import microtorch as mt
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
