"""Higher-order gradients: with ``create_graph=True`` the backward pass is itself recorded
(every backward is written in microtorch ops), so gradients of gradients work.

Second derivatives are checked against central differences of the first derivative
(``mt.gradcheck`` on a function that *returns* a create_graph gradient); a Hessian-vector
product of a small MLP loss, and a gradient penalty through ``.grad``, against PyTorch.
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
from microtorch import nn
from microtorch.nn import functional as F


def first_derivative(f):
    """x ↦ ∂(Σ f(x))/∂x, recorded so it can be differentiated again."""
    def df(x):
        with mt.enable_grad():  # gradcheck evaluates under no_grad for its differences
            (g,) = mt.grad(f(x).sum(), x, create_graph=True)
        return g
    return df


OPS = {
    "exp": mt.exp, "log": mt.log, "sqrt": mt.sqrt, "tanh": mt.tanh, "sigmoid": mt.sigmoid,
    "pow": lambda x: x ** 3, "reciprocal": lambda x: 1 / x, "mul": lambda x: x * x * x,
    "div": lambda x: x / (x + 2), "sub_neg": lambda x: -(x - x ** 2) ** 2,
    "softmax": lambda x: mt.softmax(x, 1) ** 2, "log_softmax": lambda x: mt.log_softmax(x, 1) ** 2,
    "matmul": lambda x: (x @ x.T) ** 2, "matmul_vec": lambda x: (x @ x[0]) ** 2,
    "sum_dim": lambda x: x.sum(1) ** 2, "mean": lambda x: x.mean(0) ** 3,
    "var": lambda x: x.var(1) ** 2, "max_dim": lambda x: x.max(1).values ** 2,
    "amax": lambda x: x.amax() ** 3,
    "transpose_reshape": lambda x: x.T.reshape(-1) ** 3, "expand": lambda x: x[:, :1].expand(3, 4) ** 3,
    "slice_view": lambda x: x[1:, ::2] ** 3, "unsqueeze_squeeze": lambda x: x.unsqueeze(0).squeeze(0) ** 3,
    "fancy_index": lambda x: x[[0, 0, 2]] ** 3, "cat_stack": lambda x: mt.cat([x, x * x], 1) ** 2,
    "stack": lambda x: mt.stack([x, x ** 2]) ** 2,
    "abs": lambda x: mt.abs(x - 1) ** 3, "relu": lambda x: mt.relu(x - 1) ** 3,
    "clamp": lambda x: x.clamp(0.7, 1.2) ** 3, "where": lambda x: mt.where(x > 1, x ** 2, x ** 3),
    "maximum": lambda x: mt.maximum(x, 1 - x) ** 3,
    "cross_entropy": lambda x: mt.cross_entropy(x * x, mt.tensor([0, 1, 3])),
    "cross_entropy_sum": lambda x: mt.cross_entropy(x * x, mt.tensor([0, 1, 3]), reduction="sum") ** 2,
    "cross_entropy_none": lambda x: mt.cross_entropy(x * x, mt.tensor([0, 1, 3]), reduction="none") ** 2,
    "cross_entropy_1d": lambda x: mt.cross_entropy(x[0] * x[1], mt.tensor(2)) ** 2,
    "linear": lambda x: F.linear(x, x[:2] * x[1:], x[0, :2]) ** 2,
    "linear_batched_no_bias": lambda x: F.linear(x.reshape(3, 2, 2), x[:2, 2:]) ** 2,
    "linear_1d": lambda x: F.linear(x[1], x[:2] ** 2, x[2, :2]) ** 2,
    "mse_loss": lambda x: mt.mse_loss(x ** 2, mt.zeros(3, 4, dtype=mt.float64)),
    "layer_norm": lambda x: F.layer_norm(x, 4) ** 3,
    "embedding": lambda x: F.embedding(mt.tensor([2, 0, 2]), x) ** 3,
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_second_derivative_matches_central_differences(name):
    x = mt.tensor(np.random.default_rng(0).uniform(0.5, 1.5, (3, 4)), dtype=mt.float64, requires_grad=True)
    assert mt.gradcheck(first_derivative(OPS[name]), [x])


def test_second_derivative_of_a_product_reaches_both_inputs():
    rng = np.random.default_rng(1)
    a = mt.tensor(rng.uniform(0.5, 1.5, 4), dtype=mt.float64, requires_grad=True)
    b = mt.tensor(rng.uniform(0.5, 1.5, 4), dtype=mt.float64, requires_grad=True)

    def da(a, b):
        with mt.enable_grad():
            (g,) = mt.grad((mt.tanh(a) * b ** 2).sum(), a, create_graph=True)
        return g

    assert mt.gradcheck(da, [a, b])  # ∂²/∂a∂b and ∂²/∂a²


def test_a_wrong_second_derivative_is_caught():
    """The check above can fail: a first derivative that forgot a term does not pass."""
    x = mt.tensor([0.7, 1.3], dtype=mt.float64, requires_grad=True)

    def wrong(x):
        with mt.enable_grad():
            (g,) = mt.grad((x ** 3).sum(), x, create_graph=True)
        return g + g.detach() * 0.1  # value shifted, slope not: d/dx disagrees
    with pytest.raises(mt.GradcheckError):
        mt.gradcheck(wrong, [x])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_third_derivative_of_cross_entropy(reduction):
    """Cross-entropy's backward is an op of its own (CrossEntropyGrad); its backward must be
    right too: the derivative of a second derivative, against central differences — with
    respect to the logits and to a weight the loss is multiplied by (the incoming gradient)."""
    rng = np.random.default_rng(3)
    x = mt.tensor(rng.uniform(-1, 1, (3, 4)), dtype=mt.float64, requires_grad=True)
    a = mt.tensor(rng.uniform(0.5, 1.5, 3 if reduction == "none" else ()), dtype=mt.float64,
                  requires_grad=True)
    t = mt.tensor([0, 3, 1])

    def second(x, a):
        with mt.enable_grad():
            (g,) = mt.grad((mt.cross_entropy(x * x, t, reduction) * a).sum(), x, create_graph=True)
            (h,) = mt.grad((g * g).sum(), x, create_graph=True)
        return h

    assert mt.gradcheck(second, [x, a])


def test_third_derivative_of_tanh():
    x = mt.tensor([0.3, -0.8], dtype=mt.float64, requires_grad=True)
    (d1,) = mt.grad(mt.tanh(x).sum(), x, create_graph=True)
    (d2,) = mt.grad(d1.sum(), x, create_graph=True)
    (d3,) = mt.grad(d2.sum(), x)
    t = np.tanh(x.detach().numpy())
    np.testing.assert_allclose(d3.numpy(), -2 * (1 - t ** 2) * (1 - 3 * t ** 2), rtol=1e-12)


# -- against PyTorch -------------------------------------------------------------------------------
def _mlp_and_data():
    mt.manual_seed(0)
    model = nn.MLP(4, [6], 3, activation="tanh", dtype=mt.float64)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((5, 4)), rng.integers(0, 3, 5)
    v = [rng.standard_normal(p.shape) for p in model.parameters()]
    return model, x, y, v


def _torch_params(torch, model):
    return [torch.tensor(p.detach().numpy(), requires_grad=True) for p in model.parameters()]


def _torch_loss(torch, P, x, y):
    h = torch.tanh(torch.from_numpy(x) @ P[0].T + P[1])
    return torch.nn.functional.cross_entropy(h @ P[2].T + P[3], torch.from_numpy(y))


@pytest.mark.oracle
def test_hessian_vector_product_of_an_mlp_loss_matches_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    model, x, y, v = _mlp_and_data()
    params = list(model.parameters())
    loss = mt.cross_entropy(model(mt.tensor(x)), mt.tensor(y))
    grads = mt.grad(loss, params, create_graph=True)
    dot = sum((g * mt.tensor(vi)).sum() for g, vi in zip(grads, v))
    hvp = mt.grad(dot, params)

    P = _torch_params(torch, model)
    tgrads = torch.autograd.grad(_torch_loss(torch, P, x, y), P, create_graph=True)
    thvp = torch.autograd.grad(sum((g * torch.from_numpy(vi)).sum() for g, vi in zip(tgrads, v)), P)
    for ours, theirs in zip(hvp, thvp):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)
    assert any(np.abs(h.numpy()).max() > 1e-3 for h in hvp)  # a real, non-zero curvature


@pytest.mark.oracle
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
def test_gradient_penalty_through_dot_grad_with_flat_buffers_matches_pytorch():
    """backward(create_graph=True) leaves a differentiable .grad (as in PyTorch); a penalty on
    it backpropagates, and the optimizer's step copies the graph .grad into its flat buffer."""
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    model, x, y, _ = _mlp_and_data()
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    params = list(model.parameters())
    P = _torch_params(torch, model)

    opt.zero_grad(set_to_none=True)
    mt.cross_entropy(model(mt.tensor(x)), mt.tensor(y)).backward(create_graph=True)
    penalty = sum((p.grad ** 2).sum() for p in params)
    dpen = mt.grad(penalty, params)

    _torch_loss(torch, P, x, y).backward(create_graph=True)
    tdpen = torch.autograd.grad(sum((p.grad ** 2).sum() for p in P), P)
    for ours, theirs in zip(dpen, tdpen):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)

    grads = [p.grad.detach().numpy().copy() for p in params]
    before = [p.detach().numpy().copy() for p in params]
    opt.step()
    flat = opt.flat_buffers[0]
    for p, g, b in zip(params, grads, before):
        np.testing.assert_allclose(p.detach().numpy(), b - 0.1 * g, rtol=1e-12)
        assert p.grad.storage is flat.grad.storage
