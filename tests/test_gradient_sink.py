"""The gradient sink (microtorch.autograd.GradientSink): where a leaf's gradient goes.

By default into the leaf's own ``.grad``; for a leaf nn placed in a flat buffer, into its
slice. Checked against finite differences and, as an oracle, against PyTorch.
"""
from __future__ import annotations

import gc

import numpy as np
import pytest

import microtorch as mt
from microtorch import nn
from microtorch.autograd import GradientSink, gradient_sink


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f(x)
        x[i] = old - eps
        down = f(x)
        x[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def quadratic_loss(w, x):
    return ((x @ w).tanh() ** 2).sum()


def test_a_placed_leaf_gets_its_gradient_in_its_slice_and_an_unplaced_one_in_its_own_grad():
    rng = np.random.default_rng(0)
    w0, x0 = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    w = mt.tensor(w0, dtype=mt.float64, requires_grad=True)
    free = mt.tensor(w0, dtype=mt.float64, requires_grad=True)
    x = mt.tensor(x0, dtype=mt.float64)
    buffer = mt.zeros(10, dtype=mt.float64)
    home = buffer[2:8].reshape(3, 2)
    sink = gradient_sink
    sink.place(w, home)
    try:
        quadratic_loss(w, x).backward()
        quadratic_loss(free, x).backward()
        expected = numeric_grad(lambda a: float(np.sum(np.tanh(x0 @ a) ** 2)), w0.copy())
        assert w.grad is home  # the slice itself became .grad: no allocation
        assert np.allclose(buffer.numpy()[2:8].reshape(3, 2), expected, atol=1e-6)
        assert np.all(buffer.numpy()[:2] == 0) and np.all(buffer.numpy()[8:] == 0)  # nothing outside it
        assert free.grad is not None and sink.home(free) is None
        assert not np.shares_memory(free.grad.numpy(), buffer.numpy())
        assert np.allclose(free.grad.numpy(), expected, atol=1e-6)
    finally:
        sink.remove(w)
    assert sink.home(w) is None


def test_two_backward_calls_accumulate_in_the_slice():
    model = nn.Linear(3, 2).double()
    flat = nn.flatten_parameters(model)
    x = mt.randn(5, 3, dtype=mt.float64)
    model(x).sum().backward()
    first = flat.grad.numpy().copy()
    model(x).sum().backward()
    assert np.allclose(flat.grad.numpy(), 2 * first)
    assert all(p.grad.storage is flat.grad.storage for p in model.parameters())
    model.zero_grad()  # .grad to None; the next backward writes the slices again
    assert all(p.grad is None for p in model.parameters())
    model(x).sum().backward()
    assert np.allclose(flat.grad.numpy(), first)
    assert [p.grad for p in model.parameters()] == flat.homes


def test_assigning_grad_by_hand_takes_the_leaf_out_of_its_slice_until_the_optimizer_syncs():
    """PyTorch semantics: ``p.grad = t`` makes ``t`` the gradient (backward then adds into
    it); the flat buffer gets it back at the next optimizer step (sync_grads)."""
    model = nn.Linear(2, 2).double()
    opt = mt.optim.SGD(model.parameters(), lr=0.5)
    flat = nn.flatten_parameters(model)
    w = model.weight
    mine = mt.ones(2, 2, dtype=mt.float64)
    w.grad = mine
    assert w.grad is mine
    x = mt.randn(3, 2, dtype=mt.float64)
    model(x).sum().backward()
    assert w.grad is mine  # backward added into the assigned tensor, as in PyTorch
    expected = 1 + x.numpy().sum(0)[None, :].repeat(2, 0)
    assert np.allclose(mine.numpy(), expected)
    before = w.detach().numpy().copy()
    opt.step()
    assert w.grad is flat.homes[0]  # back in the buffer, holding the same numbers
    assert np.allclose(w.grad.numpy(), expected)
    assert np.allclose(w.detach().numpy(), before - 0.5 * expected)
    w.grad = None
    model(x).sum().backward()
    assert w.grad is flat.homes[0]  # None again: the next gradient goes to the slice


def test_inputs_and_grad_respect_the_sink():
    model = nn.Linear(2, 1).double()
    flat = nn.flatten_parameters(model)
    x = mt.randn(4, 2, dtype=mt.float64)
    gw, = mt.grad(model(x).sum(), [model.weight])
    assert model.weight.grad is None and np.all(flat.grad.numpy() == 0)  # grad() returns, never stores
    assert np.allclose(gw.numpy(), x.numpy().sum(0, keepdims=True))
    model(x).sum().backward(inputs=[model.bias])
    assert model.weight.grad is None and model.bias.grad is flat.homes[1]
    assert np.allclose(model.bias.grad.numpy(), [4.0])


def test_a_placement_must_match_its_leaf_and_goes_with_it():
    sink = GradientSink()
    x = mt.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="must match its leaf"):
        sink.place(x, mt.zeros(4))
    with pytest.raises(ValueError, match="float64"):
        sink.place(x, mt.zeros(3, dtype=mt.float64))
    sink.place(x, mt.zeros(3))
    assert len(sink) == 1
    del x
    gc.collect()
    assert len(sink) == 0  # keyed by identity, dropped with the leaf


def test_the_engine_has_no_mode_global_for_homes():
    import microtorch.autograd as autograd

    assert not hasattr(autograd, "grad_homes") and not hasattr(autograd, "grad_buffer")
    assert not autograd.in_plain_backward()
    seen = []

    class Probe(mt.Function):
        @staticmethod
        def forward(ctx, x):
            return x._data * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(autograd.in_plain_backward())
            return g

    x = mt.ones(2, requires_grad=True)
    Probe.apply(x).sum().backward()
    mt.grad(Probe.apply(x).sum(), [x])
    Probe.apply(x).sum().backward(inputs=[x])
    assert seen == [True, False, False] and not autograd.in_plain_backward()


@pytest.mark.oracle
def test_flat_gradients_match_torch_over_two_backwards():
    torch = pytest.importorskip("torch")
    mt.manual_seed(0)
    model = nn.MLP(4, [5], 3).double()
    flat = nn.flatten_parameters(model)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).double()
    with torch.no_grad():
        for p, q in zip(model.parameters(), tm.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    x = np.random.default_rng(1).standard_normal((6, 4))
    y = np.array([0, 1, 2, 0, 1, 2])
    for _ in range(2):
        mt.cross_entropy(model(mt.tensor(x)), mt.tensor(y)).backward()
        torch.nn.functional.cross_entropy(tm(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    for p, q, home in zip(model.parameters(), tm.parameters(), flat.homes):
        assert p.grad is home
        assert np.allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-12)
