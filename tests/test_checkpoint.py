"""mt.utils.checkpoint: recomputation gives the plain run's gradients bit for bit, keeps only
the region's inputs, preserves the random state, and shows up in the trace."""
import gc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import microtorch as mt
from microtorch.memory import placement
from microtorch.utils.checkpoint import checkpoint, checkpoint_sequential

VARIANTS = [False, True]  # use_reentrant


def _mlp(widths, seed=0, dropout=0.0, act="relu"):
    mt.manual_seed(seed)
    mods = []
    for a, b in zip(widths, widths[1:]):
        mods.append(mt.nn.Linear(a, b, dtype=mt.float64))
        mods.append({"relu": mt.nn.ReLU, "tanh": mt.nn.Tanh}[act]())
        if dropout:
            mods.append(mt.nn.Dropout(dropout))
    return mt.nn.Sequential(*mods)


def _grads(net, x, run, seed=1):
    for p in net.parameters():
        p.grad = None
    x.grad = None
    mt.manual_seed(seed)
    out = run()
    out.sum().backward()
    return [out.detach().numpy().copy()] + [p.grad.numpy().copy() for p in net.parameters()] + [x.grad.numpy().copy()]


def _same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        assert np.array_equal(u, v), "checkpointed gradients differ from the plain run's"


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_gradients_bit_identical_with_dropout(reentrant):
    net = _mlp([6, 7, 7, 5], dropout=0.3)
    x = mt.randn(4, 6, dtype=mt.float64, requires_grad=True)
    plain = _grads(net, x, lambda: net(x))
    ck = _grads(net, x, lambda: checkpoint(net, x, use_reentrant=reentrant))
    _same(plain, ck)
    # the mask really was random: another seed gives other numbers
    other = _grads(net, x, lambda: net(x), seed=2)
    assert not np.array_equal(plain[0], other[0])


def test_without_preserved_rng_the_mask_differs():
    net = _mlp([6, 8, 5], dropout=0.5)
    x = mt.randn(4, 6, dtype=mt.float64, requires_grad=True)
    plain = _grads(net, x, lambda: net(x))
    ck = _grads(net, x, lambda: checkpoint(net, x, use_reentrant=False, preserve_rng_state=False))
    assert np.array_equal(plain[0], ck[0])  # the forward is the same run
    assert not all(np.array_equal(a, b) for a, b in zip(plain[1:], ck[1:]))  # backward saw another mask


@settings(max_examples=25, deadline=None)
@given(widths=st.lists(st.integers(1, 6), min_size=3, max_size=7), segments=st.integers(1, 6),
       seed=st.integers(0, 10_000), reentrant=st.booleans(), act=st.sampled_from(["relu", "tanh"]),
       dropout=st.sampled_from([0.0, 0.25]))
def test_random_chains_checkpoint_sequential(widths, segments, seed, reentrant, act, dropout):
    net = _mlp(widths, seed, dropout, act)
    segments = min(segments, len(net))
    x = mt.randn(3, widths[0], dtype=mt.float64, requires_grad=True)
    plain = _grads(net, x, lambda: net(x), seed)
    ck = _grads(net, x, lambda: checkpoint_sequential(net, segments, x, use_reentrant=reentrant), seed)
    _same(plain, ck)


@settings(max_examples=20, deadline=None)
@given(widths=st.lists(st.integers(1, 5), min_size=3, max_size=6), seed=st.integers(0, 10_000),
       cut=st.integers(1, 5))
@pytest.mark.slow
def test_random_chains_create_graph(widths, seed, cut):
    """Second derivatives through a checkpoint (double backward through the recomputed graph)."""
    net = _mlp(widths, seed, act="tanh")
    layers = list(net)
    cut = min(cut, len(layers) - 1)
    head, tail = mt.nn.Sequential(*layers[:cut]), mt.nn.Sequential(*layers[cut:])

    def hessian_vector(run):
        x = mt.tensor(np.linspace(-1, 1, 2 * widths[0]).reshape(2, widths[0]), dtype=mt.float64,
                      requires_grad=True)
        (g,) = mt.grad(run(x).pow(2).sum(), x, create_graph=True)
        (h,) = mt.grad((g * g).sum(), x)
        return [g.detach().numpy().copy(), h.numpy().copy()]

    plain = hessian_vector(lambda x: tail(head(x)))
    ck = hessian_vector(lambda x: tail(checkpoint(head, x, use_reentrant=False)))
    nested = hessian_vector(lambda x: checkpoint(
        lambda z: tail(checkpoint(head, z, use_reentrant=False)), x, use_reentrant=False))
    _same(plain, ck)
    _same(plain, nested)


def test_nested_checkpoints_give_the_same_gradients():
    net = _mlp([5, 6, 6, 6, 4])
    layers = list(net)
    inner = mt.nn.Sequential(*layers[2:6])

    def outer(z):
        z = layers[1](layers[0](z))
        z = checkpoint(inner, z, use_reentrant=False)
        return layers[7](layers[6](z))

    x = mt.randn(3, 5, dtype=mt.float64, requires_grad=True)
    _same(_grads(net, x, lambda: net(x)), _grads(net, x, lambda: checkpoint(outer, x, use_reentrant=False)))


def test_several_outputs_and_non_tensor_arguments():
    mt.manual_seed(0)
    w = mt.randn(4, 4, dtype=mt.float64, requires_grad=True)

    def fn(x, scale, mode, y):
        h = (x @ w).tanh() * scale
        return h, (h * y).sum(dim=1) if mode == "sum" else None, "tag"

    def loss_of(out):
        h, s, tag = out
        assert tag == "tag"
        return h.pow(2).sum() + s.sum()

    for reentrant in VARIANTS:
        res = []
        for run in (fn, lambda *a: checkpoint(fn, *a, use_reentrant=reentrant)):
            x = mt.randn(3, 4, dtype=mt.float64, generator=mt.Generator(3), requires_grad=True)
            y = mt.randn(3, 4, dtype=mt.float64, generator=mt.Generator(4))  # needs no grad
            w.grad = None
            loss_of(run(x, 0.5, "sum", y)).backward()
            assert y.grad is None
            res.append([w.grad.numpy().copy(), x.grad.numpy().copy()])
        _same(*res)


def test_inputs_without_grad_parameters_still_get_gradients():
    net = _mlp([4, 5, 3])
    x = mt.randn(2, 4, dtype=mt.float64)  # no grad: only the parameters need it
    for p in net.parameters():
        p.grad = None
    net(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    checkpoint(net, x, use_reentrant=False).sum().backward()
    _same(plain, [p.grad.numpy().copy() for p in net.parameters()])
    # the reentrant variant cannot see the parameters: like PyTorch it warns, and the output needs no grad
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = checkpoint(net, x, use_reentrant=True)
    assert not out.requires_grad


def test_missing_use_reentrant_warns_like_pytorch():
    net = _mlp([3, 3])
    x = mt.randn(2, 3, dtype=mt.float64, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        checkpoint(net, x)


def test_reentrant_refuses_grad_and_inputs():
    net = _mlp([3, 3])
    x = mt.randn(2, 3, dtype=mt.float64, requires_grad=True)
    out = checkpoint(net, x, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match="not compatible with .grad"):
        mt.grad(out, x)
    out = checkpoint(net, x, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match="not compatible with .grad"):
        out.backward(inputs=[x])
    # the non-reentrant variant supports both
    out = checkpoint(net, x, use_reentrant=False).sum()
    (g,) = mt.grad(out, x)
    assert g.shape == x.shape


def test_bad_arguments_are_refused():
    x = mt.randn(2, 3, requires_grad=True)
    with pytest.raises(TypeError, match="the function to run"):
        checkpoint(x, x, use_reentrant=False)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: flag"):
        checkpoint(lambda z, flag=1: z, x, use_reentrant=True, flag=2)
    net = _mlp([3, 3])
    with pytest.raises(ValueError, match="at most one segment per function"):
        checkpoint_sequential(net, 5, x, use_reentrant=False)
    with pytest.raises(ValueError, match="positive int"):
        checkpoint_sequential(net, 0, x, use_reentrant=False)


def test_recomputation_that_saves_differently_is_an_error():
    calls = []

    def fickle(z):  # first: tanh's output is saved inside the region; then: nothing is
        calls.append(1)
        return z.tanh().exp() if len(calls) == 1 else z + 1

    x = mt.randn(3, requires_grad=True)
    out = checkpoint(fickle, x, use_reentrant=False).sum()
    with pytest.raises(RuntimeError, match="different number of tensors was saved"):
        out.backward()

    def reshaped(z):
        calls.append(1)
        return z.tanh().exp() if len(calls) % 2 else z[:2].tanh().exp()

    calls.clear()
    out = checkpoint(reshaped, x, use_reentrant=False).sum()
    with pytest.raises(RuntimeError, match="different metadata"):
        out.backward()


def test_second_backward_needs_retain_graph():
    net = _mlp([3, 4, 3], act="tanh")
    x = mt.randn(2, 3, dtype=mt.float64, requires_grad=True)
    out = checkpoint(net, x, use_reentrant=False).sum()
    out.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    out.backward()
    assert np.allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


# -- memory ---------------------------------------------------------------------------------
def _kept_after_forward(run):
    gc.collect()
    before = placement.live_bytes
    out = run()
    kept = placement.live_bytes - before
    return out, kept


@pytest.mark.slow
@pytest.mark.parametrize("reentrant", VARIANTS)
def test_forward_keeps_only_the_inputs(reentrant):
    net = _mlp([32] * 9)  # 8 Linear+ReLU layers, float64
    x = mt.randn(16, 32, dtype=mt.float64, requires_grad=True)
    act = 16 * 32 * 8  # bytes of one activation
    out, plain = _kept_after_forward(lambda: net(x))
    del out
    out, ck = _kept_after_forward(lambda: checkpoint(net, x, use_reentrant=reentrant))
    # plain keeps each ReLU output (the next Linear's input): 8 activations; checkpointed
    # keeps the output alone
    assert plain == 8 * act
    assert ck == act  # (reentrant: the node's copy of the output; its run without a graph is gone)
    before = placement.live_bytes
    out.sum().backward()
    del out
    gc.collect()
    grads = sum(p.grad.storage.nbytes for p in net.parameters()) + x.grad.storage.nbytes
    assert placement.live_bytes - before == grads - act  # the recomputed bytes were all given back


def test_recompute_events_in_the_trace():
    net = _mlp([8, 8, 8, 8])
    x = mt.randn(4, 8, dtype=mt.float64, requires_grad=True)
    with mt.trace() as tr:
        out = checkpoint_sequential(net, 2, x, use_reentrant=False)
        out.sum().backward()
    ck = tr.filter("checkpoint")
    rc = tr.filter("recompute")
    assert [e["stage"] for e in ck] == ["begin", "end"]
    assert [e["stage"] for e in rc] == ["begin", "end"]
    assert ck[1]["dropped_bytes"] > 0 and ck[0]["kept_bytes"] == x.storage.nbytes
    assert rc[1]["recomputed_bytes"] == ck[1]["dropped_bytes"]
    # the recomputed ops are in the trace, between begin and end, with phase "recompute"
    inside = tr.events[rc[0]["step"] + 1: rc[1]["step"]]
    ops = [e for e in inside if e["kind"] == "op"]
    assert ops and all(e["phase"] == "recompute" for e in ops)
    # segment 1 of 2 is layers 0..2 (Linear, ReLU, Linear): its only saved bytes of its own are
    # the ReLU's output, so the rerun stops inside that ReLU (early stop): the Linear after it,
    # whose output is the segment's output (alive anyway), is not run again
    assert [e["op"] for e in ops] == ["Linear"] and rc[1]["stopped_early"]
    assert [e["kind"] for e in inside].count("alloc") == 2  # the Linear's result and the ReLU's
    # every picture's replay reads the trace; the liveness curve has the recompute bump
    live = tr.live_bytes()
    assert max(live[rc[0]["step"]: rc[1]["step"] + 1]) > live[rc[0]["step"]]
    from microtorch.viz.events import describe_event
    assert "recomputes" in describe_event(tr, rc[0]["step"])
    assert "recomputed" in describe_event(tr, rc[1]["step"])
    assert "checkpoint" in describe_event(tr, ck[1]["step"])
    from microtorch.viz import graph
    assert "1 op(s) rerun by a checkpoint's recomputation" in graph.describe(tr, rc[1]["step"])


def test_trace_with_recompute_events_saves_and_loads(tmp_path):
    net = _mlp([4, 4, 4])
    x = mt.randn(2, 4, dtype=mt.float64, requires_grad=True)
    with mt.trace() as tr:
        checkpoint(net, x, use_reentrant=False).sum().backward()
    path = tmp_path / "t.json"
    tr.save(path)
    back = mt.Trace.load(path)
    assert back.events == tr.events
    assert back.live_bytes() == tr.live_bytes()


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("reentrant", VARIANTS)
def test_matches_torch_utils_checkpoint(reentrant):
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tc

    net = _mlp([5, 6, 6, 3], act="tanh")
    x_np = np.linspace(-1, 1, 15).reshape(3, 5)
    tnet = torch.nn.Sequential(*[torch.nn.Linear(a, b, dtype=torch.float64) if isinstance(m, mt.nn.Linear)
                                 else torch.nn.Tanh() for m, (a, b) in
                                 zip(net, [(5, 6), (6, 6), (6, 6), (6, 6), (6, 3), (3, 3)])])
    with torch.no_grad():
        for m, tm in zip(net, tnet):
            if isinstance(m, mt.nn.Linear):
                tm.weight.copy_(torch.from_numpy(m.weight.detach().numpy()))
                tm.bias.copy_(torch.from_numpy(m.bias.detach().numpy()))
    x = mt.tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    checkpoint_sequential(net, 2, x, use_reentrant=reentrant).pow(2).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tc.checkpoint_sequential(tnet, 2, tx, use_reentrant=reentrant).pow(2).sum().backward()
    assert np.allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    for m, tm in zip(net, tnet):
        if isinstance(m, mt.nn.Linear):
            assert np.allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_mixed_nesting_and_no_grad():
    mt.manual_seed(0)
    w = mt.randn(3, 3, dtype=mt.float64, requires_grad=True)
    x = mt.randn(2, 3, dtype=mt.float64, requires_grad=True)

    def inner(y):
        return (y @ w).tanh()

    def grads(run):
        x.grad = w.grad = None
        run().backward()
        return [x.grad.numpy().copy(), w.grad.numpy().copy()]

    plain = grads(lambda: inner(x * 1.0).sum())
    mixed = grads(lambda: checkpoint(lambda z: checkpoint(inner, z * 1.0, use_reentrant=True).sum(), x,
                                     use_reentrant=False))
    _same(plain, mixed)
    with mt.no_grad():  # inference: a checkpoint is just the function
        for reentrant in VARIANTS:
            out = checkpoint(inner, x, use_reentrant=reentrant)
            assert not out.requires_grad and np.array_equal(out.numpy(), inner(x).numpy())
