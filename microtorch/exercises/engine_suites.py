"""The tests of every plug point's suite (:mod:`.suites`): a few of the engine's own tests
per plug point of :mod:`.plugins`, each entered with ``@_test(plug)`` and run by
:func:`.suites.run_suite` with the learner's function plugged in.

They live apart from the runner because they reach into the engine (autograd, allocators,
optimizers, the liveness picture) and into the exercise modules' references (``arena``'s
bump rules, ``training``'s optimizer steps), which import the checker, which imports the
runner; ``microtorch.exercises`` imports this module, so they are registered whenever the
package is used. Each test's expected values come from outside the plugged-in path: finite
differences, numpy, or the rules written out.
"""
from __future__ import annotations

import numpy as np

from .suites import _test


def _gradcheck(f, *shapes, seed=0):
    from ..creation import Generator, randn
    from ..gradcheck import gradcheck

    g = Generator().manual_seed(seed)
    xs = [randn(*s, dtype="float64", generator=g, requires_grad=True) for s in shapes]
    assert gradcheck(f, xs), f"gradients of {f.__doc__ or 'the function'} disagree with finite differences"
    return xs


def _numerical(f, x0: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    from ..creation import tensor
    from ..grad_mode import no_grad

    grad = np.zeros(x0.shape)
    with no_grad():
        for i in np.ndindex(x0.shape):
            hi, lo = x0.copy(), x0.copy()
            hi[i] += eps
            lo[i] -= eps
            grad[i] = (f(tensor(hi)).item() - f(tensor(lo)).item()) / (2 * eps)
    return grad


# -- unbroadcast (notebook 01) -----------------------------------------------------------------
@_test("unbroadcast")
def _broadcast_add_mul():
    """a + b, a * b, a - b, a / b with b broadcast along rows, columns and leading dimensions"""
    for sa, sb in [((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 3, 4), (1, 4)), ((2, 3), ())]:
        _gradcheck(lambda a, b: (a + b * a - b / (b * b + 1)).sum(), sa, sb)


@_test("unbroadcast")
def _broadcast_matmul():
    """a batched matmul (2, 3, 4) @ (4, 5): the weight's gradient summed over the batch"""
    _gradcheck(lambda a, w: (a @ w).tanh().sum(), (2, 3, 4), (4, 5))


@_test("unbroadcast")
def _broadcast_grad_shapes():
    """every operand's .grad has the operand's own shape (a bias of shape (1,) in a linear layer)"""
    from ..creation import randn

    x, w, b = randn(4, 3), randn(3, 1, requires_grad=True), randn(1, requires_grad=True)
    ((x @ w + b) ** 2).mean().backward()
    assert tuple(w.grad.shape) == (3, 1) and tuple(b.grad.shape) == (1,), (w.grad.shape, b.grad.shape)


# -- topological order / dependency counts (notebook 02) ----------------------------------------
def _graphs():
    """(what, f): functions whose gradient the backward schedules must get right."""
    return [
        ("a chain", lambda x: (x * 1.5).tanh().exp().sum()),
        ("fan-in: h used three times", lambda x: (lambda h: (h * h + h).sum())(x.tanh())),
        ("two paths of different lengths", lambda x: (x.exp() + (x * 2.0).tanh().tanh()).sum()),
        ("a small MLP", lambda x: ((x @ _W1()).relu() @ _W2()).pow(2).mean()),
    ]


def _W1():
    from ..creation import tensor
    return tensor(np.linspace(-1, 1, 12).reshape(3, 4))


def _W2():
    from ..creation import tensor
    return tensor(np.linspace(1, -0.5, 4).reshape(4, 1))


def _schedule_grads(order: str):
    from ..creation import tensor

    x0 = np.array([[0.3, -0.7, 1.1], [0.5, 0.2, -1.3]])
    for what, f in _graphs():
        x = tensor(x0, requires_grad=True)
        f(x).backward(order=order)
        want = _numerical(f, x0)
        assert np.allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-7), f"{what}: {x.grad.numpy()} vs {want}"


def _deep_chain(order: str):
    from ..creation import tensor

    x = tensor(1.0, dtype="float64", requires_grad=True)
    y = x
    for _ in range(3000):
        y = y * 1.0001
    y.backward(order=order)
    assert np.isclose(x.grad.item(), 1.0001 ** 3000), x.grad.item()


@_test("topological_order")
def _topo_grads():
    """backward(order="topo") gives the finite-difference gradient: a chain, fan-in, two paths, an MLP"""
    _schedule_grads("topo")


@_test("topological_order")
def _topo_deep():
    """backward(order="topo") through a 3,000-node chain (deeper than Python's recursion limit)"""
    _deep_chain("topo")


@_test("dependency_counts")
def _deps_grads():
    """backward() (dependency counting) gives the finite-difference gradient: a chain, fan-in, two paths, an MLP"""
    _schedule_grads("deps")


@_test("dependency_counts")
def _deps_deep():
    """backward() through a 3,000-node chain (deeper than Python's recursion limit)"""
    _deep_chain("deps")


@_test("dependency_counts")
def _deps_twice():
    """y = x * x: one node, two edges to x's node — both halves of the gradient arrive"""
    from ..creation import tensor

    x = tensor(3.0, dtype="float64", requires_grad=True)
    h = x * 1.0
    (h * h).backward()
    assert np.isclose(x.grad.item(), 6.0), x.grad.item()


# -- peak_extra_bytes (notebook 03) --------------------------------------------------------------
def _step_trace():
    from ..creation import manual_seed, randn
    from ..functions.loss import mse_loss
    from ..trace.recorder import Trace
    from ..nn import MLP

    manual_seed(0)
    model, X, Y = MLP(8, 16, 1), randn(32, 8), randn(32, 1)
    tr = Trace()
    with tr:
        mse_loss(model(X), Y).backward()
    return tr


@_test("peak_extra_bytes")
def _peak_of_a_step():
    """Trace.peak of a training step is the highest point of its live-bytes curve, first reached there"""
    tr = _step_trace()
    curve = tr.replay().live_bytes()
    peak, step = tr.peak()
    assert peak == max(curve) and step == tr.events[curve.index(peak)]["step"], ((peak, step), max(curve))


@_test("peak_extra_bytes")
def _peak_in_the_liveness_picture():
    """the liveness picture's facts carry that peak"""
    from ..viz.liveness import liveness_facts

    tr = _step_trace()
    curve = tr.replay().live_bytes()
    assert liveness_facts(tr).peak[0] == max(curve)


# -- align_up (notebook 04) ---------------------------------------------------------------------
@_test("align_up")
def _arena_alignment():
    """every block an Arena hands out starts at a multiple of its alignment, after the block before it"""
    from ..memory.arena import Arena

    for a in (1, 8, 64, 256):
        arena = Arena(capacity=4096, alignment=a)
        top = 0
        for n in (1, 100, 63, 64, 65, 7, 300):
            b = arena.alloc(n)
            if b.chunk == 0:
                assert b.offset % a == 0 and b.offset >= top, (a, n, b.offset, top)
                top = b.offset + n
        arena.reset()


@_test("align_up")
def _arena_padding_and_growth():
    """an Arena's padding and its chained chunks match the bump and growth rules written out"""
    from ..memory.arena import Arena
    from .arena import _reference_bump, _reference_chunks

    sizes = [100, 20, 64, 1, 200, 700, 900, 30]
    arena = Arena(capacity=sum(sizes) + 64 * 9, alignment=64)
    for n in sizes:
        arena.alloc(n)
    assert arena.padding == _reference_bump(sizes, 64)[1], arena.padding
    arena.reset()
    arena = Arena(capacity=1000, alignment=64, growth=1.5)
    placed = [(b.chunk, b.offset) for b in (arena.alloc(n) for n in sizes)]
    assert (placed, [c.nbytes for c in arena.chunks]) == _reference_chunks(sizes, 1000, 64, 1.5)
    arena.reset()


# -- size_class_of (notebook 05) ------------------------------------------------------------------
@_test("size_class_of")
def _pool_classes():
    """a Pool serves every request from the smallest class that holds it, directly above 1 MiB"""
    import bisect

    from ..memory.pool import Pool, size_classes

    for m in (2, 8):
        pool = Pool(classes_per_doubling=m)
        classes = size_classes(per_doubling=m)
        for n in (1, 63, 64, 65, 100, 4095, 4096, 4097, 70_000, 1 << 20):
            b = pool.alloc(n)
            assert b.size == classes[bisect.bisect_left(classes, max(n, 64))], (m, n, b.size)
            pool.free(b)
        b = pool.alloc((1 << 20) + 1)
        assert pool.direct_allocations == 1, "a request above 1 MiB is served directly"
        pool.free(b)


@_test("size_class_of")
def _pool_reuse():
    """a freed block is the next same-class request's block"""
    from ..memory.pool import Pool

    pool = Pool()
    a = pool.alloc(1000)
    pool.free(a)
    b = pool.alloc(990)
    assert b.offset == a.offset and b.size == a.size and pool.reuse_hits == 1


# -- extent (notebook 06) -------------------------------------------------------------------------
@_test("extent")
def _alias_extents():
    """mt.memory.byte_extent and the cheap alias test (exact=False) on slices, steps, a transpose, windows"""
    from ..creation import arange
    from ..memory.aliasing import alias, byte_extent

    x = arange(24.0).reshape(4, 6)
    for v in (x, x[1:3, 2:5], x[:, ::2], x.T, x[::-1, ::-2], x.diagonal(1), x[:, 3:4].expand(4, 5)):
        vals = v.numpy()
        assert byte_extent(v) == (int(vals.min()) * 4, (int(vals.max()) + 1) * 4), (v.shape, v.stride())
    assert alias(x[:2], x[2:], exact=False).answer == "no"
    assert alias(x[:, ::2], x[:, 1::2], exact=False).answer == "may"


@_test("extent")
def _alias_exact():
    """the exact alias test (which starts from the extents) agrees with np.shares_memory on random views"""
    from ..creation import arange
    from ..memory.aliasing import alias

    s, r = arange(64.0), np.random.default_rng(4)
    for _ in range(200):
        views = []
        for _ in range(2):
            n, st = int(r.integers(1, 6)), int(r.integers(-5, 6))
            lo, hi = min(0, (n - 1) * st), max(0, (n - 1) * st)
            views.append(s.as_strided((n,), (st,), int(r.integers(-lo, 64 - hi))))
        a, b = views
        want = bool(np.intersect1d(a.numpy(), b.numpy()).size)
        assert (alias(a, b).answer == "must") == want, (a.stride(), a.storage_offset(), b.stride(), b.storage_offset())


# -- derivative_from_output (notebook 07) ---------------------------------------------------------
@_test("derivative_from_output")
def _inplace_unary_grads():
    """relu_, exp_, sigmoid_, tanh_, sqrt_ on an op's result: the gradient of the input matches finite differences"""
    from ..creation import tensor

    x0 = np.array([[0.3, -0.7, 1.1], [0.5, 0.2, -1.3]])
    for op in ("relu", "exp", "sigmoid", "tanh", "sqrt"):
        def f(x, op=op):
            y = (x * x + 0.5) if op == "sqrt" else x * 1.0  # an op's result: in place is allowed on it
            return (getattr(y, op + "_")() * 1.5).sum()
        x = tensor(x0, requires_grad=True)
        f(x).backward()
        assert np.allclose(x.grad.numpy(), _numerical(f, x0), rtol=1e-5, atol=1e-7), op


@_test("derivative_from_output")
def _inplace_chain():
    """a chain of in-place ops on op results, ((x * 1).tanh_() * 2).exp_(), then sigmoid_ of a copy, backpropagates correctly"""
    from ..creation import tensor

    x0 = np.array([0.4, -1.2, 0.9])

    def f(x):
        return (((x * 1.0).tanh_() * 2.0).exp_() * 1.0).sigmoid_().sum()
    x = tensor(x0, requires_grad=True)
    f(x).backward()
    assert np.allclose(x.grad.numpy(), _numerical(f, x0), rtol=1e-5, atol=1e-7)


# -- sgd_momentum_step (notebook 08) ----------------------------------------------------------------
@_test("sgd_momentum_step")
def _sgd_matches_the_rule():
    """mt.optim.SGD with momentum, dampening and weight decay follows PyTorch's rule step by step"""
    from ..creation import tensor
    from ..optim import SGD
    from .training import _numpy_sgd

    r = np.random.default_rng(1)
    for lr, mu, damp, wd in [(0.1, 0.9, 0.0, 0.0), (0.5, 0.0, 0.0, 0.0), (0.05, 0.9, 0.3, 0.1)]:
        p0, grads = r.standard_normal(5), [r.standard_normal(5) for _ in range(4)]
        p = tensor(p0, dtype="float64", requires_grad=True)
        opt = SGD([p], lr=lr, momentum=mu, dampening=damp, weight_decay=wd)
        for (want, _), g in zip(_numpy_sgd(p0, grads, lr, mu, damp, wd), grads):
            p.grad = tensor(g, dtype="float64")
            opt.step()
            assert np.allclose(p.detach().numpy(), want, rtol=1e-10), (lr, mu, damp, wd)


def _trains(make_optimizer) -> None:
    """40 steps of ``make_optimizer(model.parameters())`` on an MLP fitting a regression task: the loss
    at least halves."""
    from ..creation import Generator, manual_seed, randn
    from ..functions.loss import mse_loss
    from ..nn import MLP

    g = Generator().manual_seed(0)
    X = randn(64, 4, generator=g)
    Y = (X[:, :1] * 2 - X[:, 1:2]).tanh()
    manual_seed(0)
    model = MLP(4, 16, 1)
    opt = make_optimizer(model.parameters())
    first = None
    for _ in range(40):
        opt.zero_grad()
        loss = mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first, (first, loss.item())


@_test("sgd_momentum_step")
def _sgd_trains():
    """SGD with momentum over an MLP's flat parameter buffer lowers the loss on a regression task"""
    from ..optim import SGD

    _trains(lambda params: SGD(params, lr=0.1, momentum=0.9))


# -- adam_step (notebook 08) --------------------------------------------------------------------------
@_test("adam_step")
def _adam_matches_the_rule():
    """mt.optim.Adam, AdamW and Adam(amsgrad=True) follow PyTorch's rule step by step"""
    from ..creation import tensor
    from ..optim import Adam, AdamW
    from .training import numpy_adam

    r = np.random.default_rng(2)
    for make, wd, dec, ams in [(Adam, 0.0, False, False), (Adam, 0.1, False, True), (AdamW, 0.1, True, False)]:
        p0, grads = r.standard_normal(5), [r.standard_normal(5) for _ in range(4)]
        p = tensor(p0, dtype="float64", requires_grad=True)
        opt = make([p], lr=0.01, weight_decay=wd, amsgrad=ams)
        for (want, _, _), g in zip(numpy_adam(p0, grads, 0.01, 0.9, 0.999, 1e-8, wd, dec, ams), grads):
            p.grad = tensor(g, dtype="float64")
            opt.step()
            assert np.allclose(p.detach().numpy(), want, rtol=1e-9), (make.__name__, wd, ams)


@_test("adam_step")
def _adam_trains():
    """Adam over an MLP's flat parameter buffer lowers the loss on a regression task"""
    from ..optim import Adam

    _trains(lambda params: Adam(params, lr=0.01))
