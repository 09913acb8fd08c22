"""mt.nn: Parameter, Module registration and state, the layers (values, gradients, PyTorch's
initialisation), flat parameter/gradient buffers (zero-copy, exact refcounts, no gradient
allocations in backward), and mt.save / mt.load."""
from __future__ import annotations

import math
import zipfile

import numpy as np
import pytest

import microtorch as mt
from microtorch import nn
from microtorch.autograd import gradient_sink
from microtorch.nn import functional as F


def f64(*shape, seed=0, requires_grad=True):
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=mt.float64,
                     requires_grad=requires_grad)


# -- Parameter -------------------------------------------------------------------------------
def test_parameter_is_a_leaf_that_requires_grad_and_shares_bytes():
    t = mt.randn(3, 2)
    p = nn.Parameter(t)
    assert isinstance(p, mt.Tensor) and p.is_leaf and p.requires_grad and p.grad is None
    assert p.storage is t.storage and t.storage.refcount == 2
    assert np.shares_memory(p.detach().numpy(), t.numpy())
    assert repr(p).startswith("Parameter containing:\ntensor(") and "requires_grad=True" in repr(p)
    assert type(p.T) is mt.Tensor  # ops on parameters return plain tensors


def test_parameter_of_a_computed_tensor_is_a_fresh_leaf():
    x = mt.randn(3, requires_grad=True)
    p = nn.Parameter(x * 2)
    assert p.grad_fn is None and p.is_leaf


def test_parameter_refuses_integer_data():
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(mt.arange(3))
    assert not nn.Parameter(mt.arange(3), requires_grad=False).requires_grad


# -- Module ----------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.scale = nn.Parameter(mt.ones(1))
        self.note = "not registered"

    def forward(self, x):
        return self.norm(self.lin(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.second = Block()
        self.second.lin = self.first.lin  # shared: found once, under its first name
        self.head = nn.Linear(4, 2, bias=False)

    def forward(self, x):
        return self.head(self.second(self.first(x)))


def test_named_parameters_walk_the_tree_in_order_and_skip_duplicates():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["first.scale", "first.lin.weight", "first.lin.bias", "first.norm.weight",
                     "first.norm.bias", "second.scale", "second.norm.weight", "second.norm.bias",
                     "head.weight"]
    assert len(list(net.parameters())) == len(names)
    assert [n for n, _ in net.named_children()] == ["first", "second", "head"]
    assert len(list(net.modules())) == 1 + 2 + 2 + 1 + 1  # net, 2 blocks, their lin (shared)+2 norms, head
    assert "note" not in dict(net.named_parameters()) and net.first.note == "not registered"
    assert net.head.bias is None and "head.bias" not in net.state_dict()


def test_assigning_a_plain_tensor_to_a_parameter_name_is_an_error():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="Parameter or None expected"):
        lin.weight = mt.randn(2, 2)
    lin.bias = None
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]


def test_module_without_super_init_explains():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(mt.ones(1))

    with pytest.raises(AttributeError, match=r"super\(\)\.__init__\(\)"):
        Bad()


def test_train_and_eval_reach_every_submodule():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5), nn.ReLU()))
    assert all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_call_runs_forward_and_base_forward_explains():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(mt.ones(1))


def test_repr_reads_like_pytorch():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Dropout(0.25), nn.LayerNorm(3),
                          nn.Sequential(nn.Tanh(), nn.Sigmoid()), nn.Embedding(10, 3))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.25)\n"
        "  (3): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
        "  (4): Sequential(\n"
        "    (0): Tanh()\n"
        "    (1): Sigmoid()\n"
        "  )\n"
        "  (5): Embedding(10, 3)\n"
        ")")
    assert repr(nn.MLP(64, [128], 10)).startswith("MLP(\n  (0): Linear(in_features=64, out_features=128")


def test_sequential_indexing_and_mlp_layout():
    mlp = nn.MLP(4, [8, 6], 3, activation="tanh", dropout=0.1)
    kinds = [type(m).__name__ for m in mlp]
    assert kinds == ["Linear", "Tanh", "Dropout", "Linear", "Tanh", "Dropout", "Linear"]
    assert len(mlp) == 7 and isinstance(mlp[1:3], nn.Sequential) and mlp[-1].out_features == 3
    assert mlp(mt.randn(5, 4)).shape == (5, 3)
    with pytest.raises(ValueError, match="activation"):
        nn.MLP(2, 2, 2, activation="gelu")


# -- initialisation ------------------------------------------------------------------------------
def test_linear_init_is_pytorchs_uniform_bound_and_seeded():
    mt.manual_seed(0)
    a = nn.Linear(256, 300)
    bound = 1 / math.sqrt(256)
    w, b = a.weight.detach().numpy(), a.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound  # U(-c, c) has std c/√3
    assert abs(w.mean()) < 0.01 * bound
    mt.manual_seed(0)
    assert np.array_equal(nn.Linear(256, 300).weight.detach().numpy(), w)
    g1, g2 = mt.Generator(5), mt.Generator(5)
    assert np.array_equal(nn.Linear(3, 4, generator=g1).weight.detach().numpy(),
                          nn.Linear(3, 4, generator=g2).weight.detach().numpy())
    assert not np.array_equal(nn.Linear(256, 300).weight.detach().numpy(), w)


def test_embedding_init_is_standard_normal_and_layernorm_ones_zeros():
    e = nn.Embedding(500, 64, generator=mt.Generator(1)).weight.detach().numpy()
    assert abs(e.mean()) < 0.02 and abs(e.std() - 1) < 0.02
    ln = nn.LayerNorm((2, 3), dtype=mt.float64)
    assert ln.weight.dtype == mt.float64 and ln.weight.shape == (2, 3)
    assert np.all(ln.weight.detach().numpy() == 1) and np.all(ln.bias.detach().numpy() == 0)


# -- layers: values and gradients ------------------------------------------------------------------
def test_linear_computes_x_wT_plus_b_and_gradchecks():
    lin = nn.Linear(3, 2, dtype=mt.float64)
    x = f64(4, 3)
    expected = x.detach().numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    np.testing.assert_allclose(lin(x).detach().numpy(), expected, rtol=1e-12)
    assert mt.gradcheck(lambda x, w, b: F.linear(x, w, b), [x, lin.weight, lin.bias])


def test_linear_is_one_node_that_saves_only_what_its_gradients_read(no_cycle_collector):
    lin = nn.Linear(3, 2)
    x = mt.randn(4, 3)  # data: needs no gradient, so nothing will need W for dL/dx
    w_refs = lin.weight.storage.refcount
    y = lin(x)
    assert y.grad_fn.name == "LinearBackward"
    assert [e for e, _ in y.grad_fn.next_functions] == [None, lin.weight, lin.bias]
    assert x.storage.refcount == 2 and lin.weight.storage.refcount == w_refs  # x saved, W not
    h = lin(mt.randn(4, 3, requires_grad=True))
    assert lin.weight.storage.refcount == w_refs + 1  # now dL/dx needs W
    del y, h
    assert x.storage.refcount == 1 and lin.weight.storage.refcount == w_refs


def test_cross_entropy_is_one_node_and_its_backward_one_op():
    logits = mt.randn(4, 3, requires_grad=True)
    loss = mt.cross_entropy(logits, mt.tensor([0, 2, 1, 2]))
    assert loss.grad_fn.name == "CrossEntropyBackward"
    (g,) = mt.grad(loss, logits, create_graph=True)
    assert g.grad_fn.name == "CrossEntropyGradBackward"
    s = mt.softmax(logits, 1).detach().numpy()
    s[np.arange(4), [0, 2, 1, 2]] -= 1
    np.testing.assert_allclose(g.detach().numpy(), s / 4, rtol=1e-6)


def test_layer_norm_normalises_and_gradchecks():
    x = f64(5, 6)
    y = F.layer_norm(x, 6).detach().numpy()
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(1), 1, rtol=1e-4)  # ε = 1e-5 shrinks it a hair
    w, b = f64(6, seed=1), f64(6, seed=2)
    assert mt.gradcheck(lambda x, w, b: F.layer_norm(x, (6,), w, b), [x, w, b])
    with pytest.raises(RuntimeError, match="expected input with shape"):
        F.layer_norm(x, 4)


def test_embedding_gradient_scatter_adds_repeated_rows():
    emb = nn.Embedding(5, 3, dtype=mt.float64)
    idx = mt.tensor([[0, 2], [2, 2]])
    out = emb(idx)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out.detach().numpy(), emb.weight.detach().numpy()[[[0, 2], [2, 2]]])
    g = np.random.default_rng(0).standard_normal((2, 2, 3))
    out.backward(mt.tensor(g))
    expected = np.zeros((5, 3))
    np.add.at(expected, idx.numpy(), g)
    np.testing.assert_allclose(emb.weight.grad.numpy(), expected, rtol=1e-12)
    assert expected[2].any() and not expected[1].any()  # row 2 got three sums, row 1 nothing
    assert mt.gradcheck(lambda w: F.embedding(idx, w), [f64(5, 3)])


def test_embedding_rejects_float_and_out_of_range_indices():
    emb = nn.Embedding(4, 2)
    with pytest.raises(TypeError, match="integers"):
        emb(mt.tensor([0.0, 1.0]))
    with pytest.raises(IndexError, match="index 4 is out of range .* 4 rows"):
        emb(mt.tensor([1, 4]))


def test_dropout_is_seeded_scales_and_switches_off_in_eval():
    x = mt.ones(200, 50)
    a = nn.Dropout(0.3, generator=mt.Generator(7))(x).numpy()
    b = nn.Dropout(0.3, generator=mt.Generator(7))(x).numpy()
    assert np.array_equal(a, b)
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.7)}
    assert abs((a == 0).mean() - 0.3) < 0.02
    d = nn.Dropout(0.3).eval()
    assert d(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    xg = mt.ones(4, requires_grad=True)
    y = F.dropout(xg, 0.5, generator=mt.Generator(0))
    y.sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), y.detach().numpy())  # mask/(1-p) on ones


def test_activation_modules_match_the_functions():
    x = mt.randn(3, 4)
    for module, fn in ((nn.ReLU(), mt.relu), (nn.Tanh(), mt.tanh), (nn.Sigmoid(), mt.sigmoid)):
        np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())
    assert nn.Flatten()(mt.zeros(2, 3, 4)).shape == (2, 12)


# -- state dicts ----------------------------------------------------------------------------------
def test_state_dict_round_trip_copies_into_existing_bytes():
    a, b = nn.MLP(3, [4], 2), nn.MLP(3, [4], 2)
    ids = [id(p) for p in b.parameters()]
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert [id(p) for p in b.parameters()] == ids
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(pa.detach().numpy(), pb.detach().numpy())
    sd = a.state_dict()
    assert np.shares_memory(sd["0.weight"].numpy(), a[0].weight.detach().numpy())  # views, no copy


def test_load_state_dict_reports_every_problem_in_one_error():
    model = nn.MLP(3, [4], 2)
    sd = model.state_dict()
    del sd["0.bias"], sd["2.weight"]
    sd["extra.weight"] = mt.zeros(1)
    sd["0.weight"] = mt.zeros(5, 3)
    with pytest.raises(RuntimeError) as err:
        model.load_state_dict(sd)
    msg = str(err.value)
    assert msg.startswith("Error(s) in loading state_dict for MLP:")
    assert 'Missing key(s) in state_dict: "0.bias", "2.weight".' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight".' in msg
    assert "size mismatch for 0.weight: copying a param with shape [5, 3] from checkpoint, " \
           "the shape in current model is [4, 3]." in msg
    before = model[2].bias.detach().numpy().copy()
    sd["0.weight"] = mt.zeros(4, 3)
    sd["2.bias"] = mt.ones(2)
    result = model.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["0.bias", "2.weight"] and result.unexpected_keys == ["extra.weight"]
    assert np.all(model[2].bias.detach().numpy() == 1) and not np.all(before == 1)
    with pytest.raises(TypeError, match="dict-like"):
        model.load_state_dict([1, 2])


def test_save_and_load_npz_without_pickle(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4, dtype=mt.float64), nn.Embedding(5, 2))
    sd = model.state_dict()
    path = tmp_path / "model.pt"
    mt.save(sd, path)
    assert path.exists() and not (tmp_path / "model.pt.npz").exists()  # written where asked
    assert zipfile.is_zipfile(path)
    np.load(path, allow_pickle=False)  # plain numpy can read it, with pickles off
    loaded = mt.load(path)
    assert list(loaded) == list(sd)
    for k in sd:
        assert loaded[k].dtype == sd[k].dtype
        np.testing.assert_array_equal(loaded[k].numpy(), sd[k].numpy())
    fresh = nn.Sequential(nn.Linear(3, 4, dtype=mt.float64), nn.Embedding(5, 2))
    fresh.load_state_dict(mt.load(path))
    np.testing.assert_array_equal(fresh[0].weight.detach().numpy(), model[0].weight.detach().numpy())


def test_save_refuses_what_would_need_a_pickle(tmp_path):
    with pytest.raises(TypeError, match="state dict"):
        mt.save(nn.Linear(2, 2), tmp_path / "m.npz")
    with pytest.raises(TypeError, match="no pickles"):
        mt.save({"opt": {"nested": 1}}, tmp_path / "m.npz")
    with pytest.raises(TypeError, match="keys must be strings"):
        mt.save({1: mt.ones(1)}, tmp_path / "m.npz")


# -- flat parameter and gradient buffers ---------------------------------------------------------
def test_flatten_moves_parameters_into_one_buffer_zero_copy(no_cycle_collector):
    model = nn.MLP(4, [8], 3)
    params = list(model.parameters())
    values = [p.detach().numpy().copy() for p in params]
    old = [p.storage for p in params]
    flat = nn.flatten_parameters(model)
    assert all(s.freed for s in old)  # each parameter was its old storage's only holder
    assert flat.data.storage.refcount == 1 + len(params)  # the flat tensor + one per parameter
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]  # same objects
    for p, v, row in zip(params, values, flat.layout()):
        assert p.storage is flat.data.storage and p.storage_offset() == row["offset"]
        assert np.shares_memory(p.detach().numpy(), flat.data.numpy())
        np.testing.assert_array_equal(p.detach().numpy(), v)
        assert p.grad is None  # as in PyTorch, until the first backward
    assert flat.numel == sum(v.size for v in values) and len(flat) == 4
    assert nn.flatten_parameters(model) is flat  # already flat: the same buffers


def test_backward_accumulates_into_the_flat_gradient_buffer_without_allocating(no_cycle_collector):
    model = nn.MLP(4, [8], 3)
    flat = nn.flatten_parameters(model)
    x, y = mt.randn(6, 4), mt.tensor([0, 1, 2, 0, 1, 2])
    for step in range(2):
        with mt.trace() as tr:
            mt.cross_entropy(model(x), y).backward()
        grad_allocs = [e for e in tr.events if e["kind"] == "alloc" and e["tag"] == "gradient"]
        assert grad_allocs == [], f"backward {step} allocated gradient storage"
        for p in model.parameters():
            assert p.grad.storage is flat.grad.storage
            assert np.shares_memory(p.grad.numpy(), flat.grad.numpy())
    assert flat.grad.storage.refcount == 1 + 4  # the flat tensor + one view per parameter


def test_gradients_in_the_buffer_equal_unflattened_gradients():
    mt.manual_seed(3)
    a = nn.MLP(4, [8], 3, dtype=mt.float64)
    b = nn.MLP(4, [8], 3, dtype=mt.float64)
    b.load_state_dict(a.state_dict())
    nn.flatten_parameters(b)
    x, y = f64(6, 4, requires_grad=False), mt.tensor([0, 1, 2, 0, 1, 2])
    for m in (a, b):
        for _ in range(2):  # the second backward accumulates (adds) into the first
            mt.cross_entropy(m(x), y).backward()
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(pb.grad.numpy(), pa.grad.numpy(), rtol=1e-13)


def test_zero_grad_sets_none_and_backward_refills_the_same_views(no_cycle_collector):
    model = nn.MLP(4, [8], 3)
    flat = nn.flatten_parameters(model)
    x, y = mt.randn(6, 4), mt.tensor([0, 1, 2, 0, 1, 2])
    mt.cross_entropy(model(x), y).backward()
    views = [p.grad for p in model.parameters()]
    assert np.abs(flat.grad.numpy()).sum() > 0
    version = flat.grad.storage.version
    model.zero_grad(set_to_none=False)
    assert flat.grad.storage.version == version + 1  # one write: the single fill(0)
    assert np.all(flat.grad.numpy() == 0) and [p.grad for p in model.parameters()] == views
    version = flat.grad.storage.version
    model.zero_grad()  # PyTorch's default: set_to_none=True, and nothing is written
    assert all(p.grad is None for p in model.parameters())
    assert flat.grad.storage.version == version
    with mt.trace() as tr:
        mt.cross_entropy(model(x), y).backward()
    assert not [e for e in tr.events if e["kind"] == "alloc" and e["tag"] == "gradient"]
    assert all(p.grad is v for p, v in zip(model.parameters(), views))


def test_after_zero_grad_linear_writes_parameter_gradients_straight_into_the_buffer(no_cycle_collector):
    """The engine hands Linear's backward the parameters' slices of the flat buffer as
    destinations: W's and b's gradients are computed there, no parameter-sized temporary."""
    model = nn.MLP(4, [8], 3)
    flat = nn.flatten_parameters(model)
    x, y = mt.randn(6, 4), mt.tensor([0, 1, 2, 0, 1, 2])
    sizes = {p.numel() * 4 for p in model.parameters()}
    homes = list(flat.homes)
    for step in range(2):
        model.zero_grad()
        with mt.trace() as tr:
            mt.cross_entropy(model(x), y).backward()
        start = tr.filter("backward")[0]["step"]
        backward_allocs = [e["nbytes"] for e in tr.filter("alloc") if e["step"] > start]
        # the loss's gradient (6 x 3) and the hidden activations' (6 x 8, twice): no parameter-sized temporary
        assert sorted(backward_allocs) == [6 * 3 * 4, 6 * 8 * 4, 6 * 8 * 4], step
        assert not sizes & {6 * 3 * 4, 6 * 8 * 4}  # (so the check above can tell them apart)
        assert all(p.grad is home for p, home in zip(model.parameters(), homes))
        assert all(p.grad.storage is flat.grad.storage for p in model.parameters())


def test_a_layer_used_twice_gets_both_contributions_in_its_flat_gradient():
    """The first LinearBackward to run writes W's gradient into the buffer; the second adds."""
    grads = []
    for flatten in (False, True):
        mt.manual_seed(0)
        lin = nn.Linear(4, 4, dtype=mt.float64)
        if flatten:
            nn.flatten_parameters(lin)
        x = f64(3, 4, requires_grad=False)
        for _ in range(2):
            lin.zero_grad()
            (lin(lin(x).relu()) ** 2).sum().backward()
        grads.append([lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy()])
    for plain, flat in zip(*grads):
        np.testing.assert_allclose(flat, plain, rtol=1e-13)


@pytest.mark.parametrize("loss", ["squares", "mean", "sum", "none"])
def test_numpy_backward_equals_the_recorded_ops(loss):
    """Without create_graph Linear, Relu and CrossEntropy (each reduction) run backward in
    numpy; with it, as microtorch ops (CrossEntropyGrad). Both must give the same gradients."""
    mt.manual_seed(5)
    model = nn.MLP(5, [7], 3, dtype=mt.float64)
    x = f64(4, 5)
    target = mt.tensor(np.array([0, 2, 1, 2]))
    row_weights = mt.tensor(np.array([0.5, -1.0, 2.0, 0.25]))  # d(result)/d(loss_i) for "none"
    grads = []
    for create_graph in (False, True):
        x.grad = None
        model.zero_grad()
        out = model(x)
        if loss == "squares":
            (out ** 2).sum().backward(create_graph=create_graph)
        else:
            value = mt.cross_entropy(out, target, reduction=loss)
            value.backward(row_weights if loss == "none" else None, create_graph=create_graph)
        grads.append([t.grad.detach().numpy().copy() for t in (x, *model.parameters())])
    for fast, recorded in zip(*grads):
        np.testing.assert_allclose(fast, recorded, rtol=1e-13)


def test_unflattened_zero_grad_works_too():
    lin = nn.Linear(2, 2)
    lin(mt.ones(1, 2)).sum().backward()
    lin.zero_grad(set_to_none=False)
    assert np.all(lin.weight.grad.numpy() == 0)
    lin.zero_grad()
    assert lin.weight.grad is None


def test_flatten_errors_are_clear():
    with pytest.raises(ValueError, match="empty parameter list"):
        nn.flatten_parameters([])
    with pytest.raises(ValueError, match="non-leaf"):
        nn.flatten_parameters([mt.randn(2, requires_grad=True) * 2])
    with pytest.raises(TypeError, match="mix dtypes"):
        nn.flatten_parameters([mt.randn(2, requires_grad=True), mt.randn(2, dtype=mt.float64, requires_grad=True)])
    w = mt.randn(4, requires_grad=True)
    tied = mt.Tensor._view(w._data[1:], w)
    with pytest.raises(ValueError, match="share memory"):
        nn.flatten_parameters([w, tied])


def test_module_to_double_converts_in_place_and_leaves_the_flat_buffer():
    model = nn.MLP(2, [3], 1)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    ids = [id(p) for p in model.parameters()]
    model.double()
    assert [id(p) for p in model.parameters()] == ids
    assert all(p.dtype == mt.float64 for p in model.parameters())
    assert all(gradient_sink.home(p) is None for p in model.parameters())
    model(mt.ones(1, 2, dtype=mt.float64)).sum().backward()
    assert model[0].weight.grad.dtype == mt.float64
    with pytest.raises(RuntimeError, match="create the optimizer after converting"):
        opt.step()


def test_a_linear_without_its_weight_says_so():
    lin = nn.Linear(2, 3)
    del lin.weight
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'weight'"):
        lin(mt.ones(1, 2))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("padding_idx, row", [(0, 0), (2, 2), (-1, 4)])
def test_embedding_padding_row_starts_at_zero_and_gets_no_gradient(sparse, padding_idx, row):
    emb = nn.Embedding(5, 3, padding_idx=padding_idx, sparse=sparse, dtype=mt.float64)
    assert emb.padding_idx == row and f"padding_idx={row}" in repr(emb)
    np.testing.assert_array_equal(emb.weight.detach().numpy()[row], 0.0)
    w = np.arange(15.0).reshape(5, 3)
    with mt.no_grad():
        emb.weight.copy_(mt.tensor(w))  # the padding row is read like any other row
    idx = np.array([[0, 2, 2], [4, 0, 1]])
    g = np.arange(18.0).reshape(2, 3, 3) + 1
    out = emb(mt.tensor(idx))
    np.testing.assert_array_equal(out.detach().numpy(), w[idx])
    (out * mt.tensor(g)).sum().backward()
    assert emb.weight.grad.is_sparse == sparse
    want = np.zeros((5, 3))
    np.add.at(want, idx, g)  # each row: the sum of the gradients of the positions that picked it
    want[row] = 0  # ... except the padding row
    got = emb.weight.grad.to_dense() if sparse else emb.weight.grad
    np.testing.assert_array_equal(got.numpy(), want)


def test_embedding_padding_idx_out_of_range_is_refused():
    with pytest.raises(ValueError, match="Padding_idx must be within num_embeddings: got 5 for 5 rows"):
        nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(TypeError, match="padding_idx must be an int"):
        nn.functional.embedding(mt.tensor([0]), mt.ones(5, 3), padding_idx=1.0)


@pytest.mark.oracle
@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_padding_idx_matches_pytorch(sparse):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    idx = rng.integers(0, 6, (3, 5))
    g = rng.standard_normal((3, 5, 4)).astype(np.float32)
    ours, theirs = nn.Embedding(6, 4, padding_idx=1, sparse=sparse), torch.nn.Embedding(6, 4, padding_idx=1, sparse=sparse)
    with mt.no_grad():
        ours.weight.copy_(mt.tensor(w))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    (ours(mt.tensor(idx)) * mt.tensor(g)).sum().backward()
    (theirs(torch.tensor(idx)) * torch.tensor(g)).sum().backward()
    a = ours.weight.grad.to_dense() if sparse else ours.weight.grad
    b = theirs.weight.grad.to_dense() if sparse else theirs.weight.grad
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
