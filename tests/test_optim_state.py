"""Optimizer ``state_dict()`` / ``load_state_dict()``: PyTorch's layout, and a round trip
that continues training bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt

OPTIMIZERS = {
    "sgd": lambda ps: mt.optim.SGD(ps, lr=0.1),
    "momentum": lambda ps: mt.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda ps: mt.optim.Adam(ps, lr=0.01),
    "adamw": lambda ps: mt.optim.AdamW(ps, lr=0.01, amsgrad=True),
}


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")


def _model(seed=0):
    mt.manual_seed(seed)
    return mt.nn.Sequential(mt.nn.Linear(4, 8), mt.nn.ReLU(), mt.nn.Linear(8, 3))


def _batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(mt.tensor(rng.standard_normal((5, 4)).astype(np.float32)), mt.tensor(rng.integers(0, 3, 5)))
            for _ in range(n)]


def _train(model, opt, batches):
    for x, y in batches:
        opt.zero_grad()
        mt.cross_entropy(model(x), y).backward()
        opt.step()


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_a_round_trip_continues_training_bit_identically(kind):
    batches = _batches(6)
    model = _model()
    opt = OPTIMIZERS[kind](model.parameters())
    _train(model, opt, batches[:3])
    # (module state dicts view the parameters, as in PyTorch: clone to keep this moment)
    saved_model, saved_opt = {k: v.clone() for k, v in model.state_dict().items()}, opt.state_dict()
    _train(model, opt, batches[3:])

    again = _model(seed=5)  # other weights: everything comes from the state dicts
    opt2 = OPTIMIZERS[kind](again.parameters())
    again.load_state_dict(saved_model)
    opt2.load_state_dict(saved_opt)
    _train(again, opt2, batches[3:])
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert np.array_equal(a.numpy(), b.numpy()), name


def test_the_saved_dict_is_a_copy():
    model = _model()
    opt = mt.optim.Adam(model.parameters())
    _train(model, opt, _batches(1))
    sd = opt.state_dict()
    before = sd["state"][0]["exp_avg"].numpy().copy()
    _train(model, opt, _batches(1, seed=3))
    assert np.array_equal(sd["state"][0]["exp_avg"].numpy(), before)
    assert sd["state"][0]["step"].item() == 1.0


def test_loading_checks_before_changing_anything():
    model = _model()
    opt = mt.optim.Adam(model.parameters())
    _train(model, opt, _batches(1))
    sd = opt.state_dict()
    with pytest.raises(TypeError, match="expects the dict returned by optimizer.state_dict"):
        opt.load_state_dict(None)
    with pytest.raises(TypeError, match="keys"):
        opt.load_state_dict({"state": {}})
    short = {"state": {}, "param_groups": [{**sd["param_groups"][0], "params": [0]}]}
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(short)
    bad = {"state": {**sd["state"], 0: {**sd["state"][0], "exp_avg": mt.zeros(2)}},
           "param_groups": sd["param_groups"]}
    kept = opt.state_dict()
    with pytest.raises(ValueError, match="expected a tensor of shape"):
        opt.load_state_dict(bad)
    assert np.array_equal(opt.state_dict()["state"][0]["exp_avg"].numpy(), kept["state"][0]["exp_avg"].numpy())
    with_momentum = mt.optim.SGD(_model().parameters(), lr=0.1, momentum=0.9).state_dict()
    with pytest.raises(ValueError, match="momentum"):
        mt.optim.SGD(model.parameters(), lr=0.1).load_state_dict(with_momentum)


def _torch_twin(torch, model):
    layers = [m for m in model.modules() if isinstance(m, mt.nn.Linear)]
    twin = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for ours, theirs in zip(layers, [twin[0], twin[2]]):
            theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
            theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
    return twin


TORCH_OPTIMIZERS = {
    "sgd": lambda torch, ps: torch.optim.SGD(ps, lr=0.1),
    "momentum": lambda torch, ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda torch, ps: torch.optim.Adam(ps, lr=0.01),
    "adamw": lambda torch, ps: torch.optim.AdamW(ps, lr=0.01, amsgrad=True),
}


@pytest.mark.oracle
@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_state_dict_has_torchs_structure_and_loads_torchs_state(kind, torch):
    batches = _batches(5)
    model = _model()
    twin = _torch_twin(torch, model)
    opt, topt = OPTIMIZERS[kind](model.parameters()), TORCH_OPTIMIZERS[kind](torch, twin.parameters())
    _train(model, opt, batches[:2])
    for x, y in batches[:2]:
        topt.zero_grad()
        torch.nn.functional.cross_entropy(twin(torch.tensor(x.numpy())), torch.tensor(y.numpy())).backward()
        topt.step()
    ours, theirs = opt.state_dict(), topt.state_dict()
    assert ours["state"].keys() == theirs["state"].keys()
    for i in theirs["state"]:
        assert ours["state"][i].keys() == theirs["state"][i].keys()
        for name, value in theirs["state"][i].items():
            np.testing.assert_allclose(ours["state"][i][name].numpy(), value.numpy(), rtol=1e-5, atol=1e-7)
    assert [g["params"] for g in ours["param_groups"]] == [g["params"] for g in theirs["param_groups"]]
    shared = set(ours["param_groups"][0]) & set(theirs["param_groups"][0])
    assert {"lr", "params", "weight_decay", "maximize"} <= shared
    # torch's state, converted, loads into a fresh microtorch optimizer and training agrees
    fresh = _model(seed=9)
    fresh.load_state_dict(model.state_dict())
    opt2 = OPTIMIZERS[kind](fresh.parameters())
    opt2.load_state_dict({"state": {i: {k: mt.tensor(v.numpy()) for k, v in e.items()}
                                    for i, e in theirs["state"].items()},
                          "param_groups": ours["param_groups"]})
    _train(fresh, opt2, batches[2:])
    for x, y in batches[2:]:
        topt.zero_grad()
        torch.nn.functional.cross_entropy(twin(torch.tensor(x.numpy())), torch.tensor(y.numpy())).backward()
        topt.step()
    np.testing.assert_allclose(fresh[2].weight.detach().numpy(), twin[2].weight.detach().numpy(),
                               rtol=1e-4, atol=1e-5)
