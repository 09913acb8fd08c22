"""mt.optim: SGD / Adam / AdamW over flat buffers match PyTorch step for step (float64, 20
steps, 1e-10 relative), skip parameters without gradients like PyTorch, clip_grad_norm_,
and clear errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
from microtorch import nn

SIZES = (5, 7, 4)  # a 5 → 7 → 4 tanh MLP


def make_model():
    mt.manual_seed(0)
    return nn.MLP(SIZES[0], [SIZES[1]], SIZES[2], activation="tanh", dtype=mt.float64)


def batches(n_steps=20, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, SIZES[0])), rng.integers(0, SIZES[2], 8)) for _ in range(n_steps)]


def microtorch_run(make_opt, data, unused_until=0):
    """Train a float64 MLP; while step < unused_until the last layer's bias gets no gradient."""
    model = make_model()
    opt = make_opt(model)
    history = []
    for step, (x, y) in enumerate(data):
        opt.zero_grad(set_to_none=True)
        h = model[1](model[0](mt.tensor(x)))
        if step < unused_until:  # the last bias takes no part: its .grad stays None
            logits = nn.functional.linear(h, model[2].weight)
        else:
            logits = model[2](h)
        mt.cross_entropy(logits, mt.tensor(y)).backward()
        opt.step()
        history.append([p.detach().numpy().copy() for p in model.parameters()])
    return model, history


# -- oracle: PyTorch -------------------------------------------------------------------------------
CONFIGS = {
    "sgd": (lambda P, O: O.SGD(P, lr=0.1)),
    "sgd_momentum": (lambda P, O: O.SGD(P, lr=0.05, momentum=0.9)),
    "sgd_dampening_wd": (lambda P, O: O.SGD(P, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    "sgd_nesterov_wd": (lambda P, O: O.SGD(P, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    "sgd_maximize": (lambda P, O: O.SGD(P, lr=0.01, momentum=0.5, maximize=True)),
    "adam": (lambda P, O: O.Adam(P, lr=1e-2)),
    "adam_wd_betas": (lambda P, O: O.Adam(P, lr=5e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)),
    "adam_amsgrad": (lambda P, O: O.Adam(P, lr=1e-2, amsgrad=True)),
    "adam_lerp_branch": (lambda P, O: O.Adam(P, lr=1e-2, betas=(0.3, 0.9))),  # 1 − β₁ ≥ 0.5
    "adamw": (lambda P, O: O.AdamW(P, lr=1e-2)),
    "adamw_amsgrad_wd": (lambda P, O: O.AdamW(P, lr=1e-2, weight_decay=0.1, amsgrad=True)),
}


def torch_run(torch, make_opt, data, init, unused_until=0):
    tmodel = torch.nn.Sequential(torch.nn.Linear(SIZES[0], SIZES[1]), torch.nn.Tanh(),
                                 torch.nn.Linear(SIZES[1], SIZES[2])).double()
    with torch.no_grad():
        for p, v in zip(tmodel.parameters(), init):
            p.copy_(torch.from_numpy(v))
    opt = make_opt(list(tmodel.parameters()))
    history = []
    for step, (x, y) in enumerate(data):
        opt.zero_grad(set_to_none=True)
        h = tmodel[1](tmodel[0](torch.from_numpy(x)))
        if step < unused_until:
            logits = torch.nn.functional.linear(h, tmodel[2].weight)
        else:
            logits = tmodel[2](h)
        torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).backward()
        opt.step()
        history.append([p.detach().numpy().copy() for p in tmodel.parameters()])
    return history


@pytest.mark.oracle
@pytest.mark.parametrize("unused_until", [0, 5], ids=["all_grads", "bias_unused_5_steps"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_optimizers_match_pytorch_step_for_step(name, unused_until):
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    make = CONFIGS[name]
    data = batches()
    init = [p.detach().numpy().copy() for p in make_model().parameters()]
    ours_model, ours = microtorch_run(lambda m: make(m.parameters(), mt.optim), data, unused_until)
    theirs = torch_run(torch, lambda P: make(P, _TorchOptim(torch)), data, init, unused_until)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for i, (pa, pb) in enumerate(zip(a, b)):
            np.testing.assert_allclose(pa, pb, rtol=1e-10, atol=1e-13,
                                       err_msg=f"{name}: parameter {i} after step {step + 1}")
    assert not np.allclose(ours[-1][0], init[0])  # it did train
    if unused_until:  # the skipped bias really was left alone for those steps
        np.testing.assert_array_equal(ours[unused_until - 1][3], init[3])


class _TorchOptim:
    """torch.optim with the single-tensor code path pinned (the arithmetic we mirror)."""

    def __init__(self, torch):
        self.torch = torch

    def SGD(self, P, **kw):
        return self.torch.optim.SGD(P, foreach=False, **kw)

    def Adam(self, P, **kw):
        return self.torch.optim.Adam(P, foreach=False, **kw)

    def AdamW(self, P, **kw):
        return self.torch.optim.AdamW(P, foreach=False, **kw)


@pytest.mark.oracle
def test_param_groups_with_their_own_learning_rates_match_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    data = batches(10)
    init = [p.detach().numpy().copy() for p in make_model().parameters()]

    def groups(model_params, lib):
        p = list(model_params)
        return lib.SGD([{"params": p[:2]}, {"params": p[2:], "lr": 0.01, "momentum": 0.9}], lr=0.1)

    model, ours = microtorch_run(lambda m: groups(m.parameters(), mt.optim), data)
    theirs = torch_run(torch, lambda P: groups(P, _TorchOptim(torch)), data, init)
    for a, b in zip(ours, theirs):
        for pa, pb in zip(a, b):
            np.testing.assert_allclose(pa, pb, rtol=1e-10, atol=1e-13)


@pytest.mark.oracle
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.05, 100.0])
def test_clip_grad_norm_matches_pytorch(norm_type, max_norm):
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    model = make_model()
    mt.optim.SGD(model.parameters(), lr=0.1)  # flat buffers: the fast path
    tparams = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in model.parameters()]
    x, y = batches(1)[0]
    mt.cross_entropy(model(mt.tensor(x)), mt.tensor(y)).backward()
    h = torch.tanh(torch.from_numpy(x) @ tparams[0].T + tparams[1]) @ tparams[2].T + tparams[3]
    torch.nn.functional.cross_entropy(h, torch.from_numpy(y)).backward()
    ours = nn.utils.clip_grad_norm_(model, max_norm, norm_type)
    theirs = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type)
    assert abs(ours.item() - theirs.item()) <= 1e-12 * theirs.item()
    for p, t in zip(model.parameters(), tparams):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-12)


# -- without the oracle ------------------------------------------------------------------------------
def test_sgd_step_is_p_minus_lr_g_on_the_flat_buffer():
    w = mt.tensor([1.0, 2.0], dtype=mt.float64, requires_grad=True)
    b = mt.tensor([[0.5]], dtype=mt.float64, requires_grad=True)
    opt = mt.optim.SGD([w, b], lr=0.1)
    flat = opt.flat_buffers[0]
    ((w * w).sum() + 3 * b.sum()).backward()  # grads: 2w, 3
    version = flat.data.storage.version
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [1 - 0.2, 2 - 0.4])
    np.testing.assert_allclose(b.detach().numpy(), [[0.5 - 0.3]])
    np.testing.assert_allclose(flat.data.numpy(), [0.8, 1.6, 0.2])
    assert flat.data.storage.version > version  # an in-place write, seen by saved tensors


def test_step_after_backward_graph_was_built_refuses_stale_saved_parameters():
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    opt = mt.optim.SGD([w], lr=0.1)
    loss = (w * w).sum()  # saves w
    (w * 3).sum().backward()
    opt.step()  # modifies w in place
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_adam_state_lives_in_flat_buffers_with_per_parameter_views():
    model = nn.MLP(3, [4], 2)
    opt = mt.optim.Adam(model.parameters(), lr=1e-3)
    assert opt.state == {}  # no state before the first step, as in PyTorch
    mt.cross_entropy(model(mt.randn(5, 3)), mt.tensor([0, 1, 0, 1, 1])).backward()
    opt.step()
    flat = opt.flat_buffers[0]
    st = opt.state[model[0].weight]
    assert set(st) == {"step", "exp_avg", "exp_avg_sq"} and st["step"].item() == 1
    assert st["exp_avg"].shape == model[0].weight.shape
    big = opt._state[0]["exp_avg"]
    assert np.shares_memory(st["exp_avg"].numpy(), big.numpy()) and big.numel() == flat.numel
    # first Adam step: m = (1 − β₁) g
    np.testing.assert_allclose(st["exp_avg"].numpy(), 0.1 * model[0].weight.grad.numpy(), rtol=1e-6)


def test_one_optimizer_reuses_buffers_a_module_already_has():
    model = nn.MLP(3, [4], 2)
    flat = nn.flatten_parameters(model)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    assert opt.flat_buffers[0] is flat


def test_step_copies_a_create_graph_grad_into_the_buffer():
    w = mt.tensor([1.0, 2.0], dtype=mt.float64, requires_grad=True)
    opt = mt.optim.SGD([w], lr=0.1)
    flat = opt.flat_buffers[0]
    opt.zero_grad()
    (w ** 3).sum().backward(create_graph=True)
    assert w.grad.grad_fn is not None  # a graph tensor, as in PyTorch
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [1 - 0.1 * 3, 2 - 0.1 * 12])
    assert w.grad.storage is flat.grad.storage and w.grad.grad_fn is None


def test_sgd_momentum_first_step_copies_the_gradient():
    w = mt.tensor([1.0], dtype=mt.float64, requires_grad=True)
    opt = mt.optim.SGD([w], lr=1.0, momentum=0.9, dampening=0.5)
    for expected_buf in (2.0, 0.9 * 2.0 + 0.5 * 2.0):
        opt.zero_grad()
        (2 * w).sum().backward()
        opt.step()
        np.testing.assert_allclose(opt.state[w]["momentum_buffer"].numpy(), [expected_buf])


def test_clip_grad_norm_flat_and_per_tensor_paths_agree():
    mt.manual_seed(0)
    a = nn.MLP(3, [4], 2, dtype=mt.float64)
    b = nn.MLP(3, [4], 2, dtype=mt.float64)
    b.load_state_dict(a.state_dict())
    nn.flatten_parameters(b)
    x, y = mt.randn(5, 3, dtype=mt.float64), mt.tensor([0, 1, 0, 1, 1])
    for m in (a, b):
        mt.cross_entropy(m(x), y).backward()
    expected = np.sqrt(sum((p.grad.numpy() ** 2).sum() for p in a.parameters()))
    na = nn.utils.clip_grad_norm_(a.parameters(), 0.01)
    nb = nn.utils.clip_grad_norm_(b, 0.01)
    assert na.item() == pytest.approx(expected, rel=1e-12) and nb.item() == pytest.approx(expected, rel=1e-12)
    clipped = np.sqrt(sum((p.grad.numpy() ** 2).sum() for p in b.parameters()))
    assert clipped == pytest.approx(0.01, rel=1e-4)
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(pa.grad.numpy(), pb.grad.numpy(), rtol=1e-12)
    before = [p.grad.numpy().copy() for p in b.parameters()]
    nn.utils.clip_grad_norm_(b, 1e6)  # under the limit: unchanged
    for p, g in zip(b.parameters(), before):
        np.testing.assert_array_equal(p.grad.numpy(), g)
    with pytest.raises(RuntimeError, match="non-finite"):
        b[0].weight.grad.numpy()[0, 0] = np.inf
        nn.utils.clip_grad_norm_(b, 1.0, error_if_nonfinite=True)


# -- bad input -----------------------------------------------------------------------------------------
def test_optimizer_bad_input_gives_clear_errors():
    w = mt.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        mt.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        mt.optim.Adam(nn.ReLU().parameters())
    with pytest.raises(ValueError, match="non-leaf"):
        mt.optim.SGD([w * 2], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        mt.optim.SGD(w, lr=0.1)
    with pytest.raises(TypeError, match="expected Tensors"):
        mt.optim.SGD([np.ones(3)], lr=0.1)
    for lr in (0.0, -1e-3):
        with pytest.raises(ValueError, match="Invalid learning rate"):
            mt.optim.SGD([w], lr=lr)
        with pytest.raises(ValueError, match="Invalid learning rate"):
            mt.optim.Adam([w], lr=lr)
    with pytest.raises(ValueError, match="Invalid momentum"):
        mt.optim.SGD([w], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        mt.optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        mt.optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon"):
        mt.optim.Adam([w], eps=-1.0)
    with pytest.raises(ValueError, match="Invalid weight_decay"):
        mt.optim.AdamW([w], weight_decay=-0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        mt.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.raises(TypeError, match="mix dtypes"):
        mt.optim.SGD([w, mt.randn(2, dtype=mt.float64, requires_grad=True)], lr=0.1)
    data_before = w.storage
    with pytest.raises(ValueError):
        mt.optim.SGD([w], lr=-1)
    assert w.storage is data_before  # a refused optimizer moved nothing
