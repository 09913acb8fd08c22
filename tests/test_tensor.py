"""Tensors: creation, what a tensor reports about itself, and zero-copy views.

A tensor is a view (shape, strides, offset, dtype) over a refcounted Storage; these tests
check that the views really share bytes (``np.shares_memory`` agrees) and that creation
follows PyTorch's dtype rules.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import microtorch as mt


def shares(a: mt.Tensor, b: mt.Tensor) -> bool:
    return np.shares_memory(a.detach().numpy(), b.detach().numpy())


# -- creation and dtype inference ---------------------------------------------------------------
@pytest.mark.parametrize("data, dtype", [
    ([1.0, 2.0], mt.float32),
    ([1, 2.5], mt.float32),       # any float in the list makes it float
    (3.0, mt.float32),
    ([[1, 2], [3, 4]], mt.int64),
    (7, mt.int64),
    ([True, False], mt.bool_),
    (np.array([1.0, 2.0]), mt.float64),            # numpy keeps its dtype
    (np.array([1.0], dtype=np.float32), mt.float32),
    (np.array([1, 2], dtype=np.int64), mt.int64),
    (np.array([1, 2], dtype=np.int32), mt.int32),
    (np.float64(2.5), mt.float64),
])
def test_tensor_dtype_inference(data, dtype):
    t = mt.tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0])
    t = mt.tensor(a)
    a[0] = 99
    assert t.tolist() == [1.0, 2.0]
    assert not np.shares_memory(t.numpy(), a)


def test_tensor_explicit_dtype_and_requires_grad():
    t = mt.tensor([1, 2], dtype=mt.float64, requires_grad=True)
    assert t.dtype == mt.float64 and t.requires_grad and t.is_leaf and t.grad is None
    assert mt.tensor([1.7, -2.2], dtype=mt.int64).tolist() == [1, -2]


def test_filled_creation_functions():
    z = mt.zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == mt.float32 and not z.numpy().any()
    assert mt.zeros((2, 3)).shape == (2, 3)
    o = mt.ones(4, dtype=mt.float64)
    assert o.dtype == mt.float64 and o.tolist() == [1.0] * 4
    f = mt.full((2, 2), 1.5)
    assert f.dtype == mt.float32 and f.tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert mt.full((3,), 7).dtype == mt.int64
    assert mt.full((3,), True).dtype == mt.bool_
    assert mt.zeros(2, requires_grad=True).requires_grad
    assert mt.eye(3).tolist() == np.eye(3).tolist()


def test_arange():
    a = mt.arange(5)
    assert a.dtype == mt.int64 and a.tolist() == [0, 1, 2, 3, 4]
    assert mt.arange(2, 8, 3).tolist() == [2, 5]
    b = mt.arange(0, 1, 0.25)
    assert b.dtype == mt.float32 and b.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert mt.arange(3, dtype=mt.float64).dtype == mt.float64
    with pytest.raises(ValueError, match="step"):
        mt.arange(0, 3, 0)


def test_zeros_like_ones_like():
    x = mt.randn(2, 3, dtype=mt.float64, requires_grad=True)
    z, o = mt.zeros_like(x), mt.ones_like(x)
    assert z.shape == o.shape == (2, 3)
    assert z.dtype == o.dtype == mt.float64
    assert not z.requires_grad  # PyTorch: *_like does not inherit requires_grad
    assert not z.numpy().any() and (o.numpy() == 1).all()
    assert not shares(z, x)
    assert mt.zeros_like(x, dtype=mt.float32).dtype == mt.float32
    assert mt.full_like(x, 2.0).tolist() == [[2.0] * 3] * 2


def test_seeded_generator_reproducible():
    g = mt.Generator().manual_seed(3)
    a, b = mt.randn(2, 3, generator=g), mt.rand(4, generator=g)
    g.manual_seed(3)
    a2, b2 = mt.randn(2, 3, generator=g), mt.rand(4, generator=g)
    np.testing.assert_array_equal(a.numpy(), a2.numpy())
    np.testing.assert_array_equal(b.numpy(), b2.numpy())
    assert not np.array_equal(a.numpy()[0], a.numpy()[1])  # not a constant
    assert a.dtype == mt.float32
    other = mt.randn(2, 3, generator=mt.Generator().manual_seed(4))
    assert not np.array_equal(a.numpy(), other.numpy())
    assert g.initial_seed() == 3


def test_manual_seed_reproducible_and_independent_of_other_generators():
    mt.manual_seed(5)
    c = mt.randn(5)
    mt.randn(3, generator=mt.Generator().manual_seed(1))  # does not advance the default one
    d = mt.rand(3)
    mt.manual_seed(5)
    np.testing.assert_array_equal(c.numpy(), mt.randn(5).numpy())
    np.testing.assert_array_equal(d.numpy(), mt.rand(3).numpy())


def test_random_distributions_and_dtypes():
    g = mt.Generator(0)
    u = mt.rand(10_000, generator=g).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    n = mt.randn(10_000, generator=g, dtype=mt.float64).numpy()
    assert n.dtype == np.float64 and abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    assert mt.randn(2, requires_grad=True).requires_grad
    r = mt.randint(0, 5, (100,), generator=g)
    assert r.dtype == mt.int64 and r.numpy().min() >= 0 and r.numpy().max() < 5
    assert sorted(mt.randperm(6, generator=g).tolist()) == list(range(6))


def test_from_numpy_is_zero_copy_both_ways():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = mt.from_numpy(a)
    assert t.dtype == mt.float64 and t.shape == (2, 3)
    assert np.shares_memory(t.numpy(), a)
    a[0, 1] = 42.0
    assert t.tolist()[0][1] == 42.0
    t.numpy()[1, 2] = -1.0
    assert a[1, 2] == -1.0
    assert mt.from_numpy(np.array([1, 2], dtype=np.int32)).dtype == mt.int32


def test_from_numpy_rejects_what_it_cannot_view():
    with pytest.raises(TypeError, match="ndarray"):
        mt.from_numpy([1.0, 2.0])
    with pytest.raises(ValueError, match="contiguous"):
        mt.from_numpy(np.ones((3, 3))[:, ::2])


# -- what a tensor reports --------------------------------------------------------------------
def test_shape_dtype_ndim_numel_size():
    t = mt.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4)
    assert t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24 and len(t) == 2
    assert t.stride() == (12, 4, 1) and t.stride(0) == 12
    s = mt.tensor(3.0)
    assert s.shape == () and s.ndim == 0 and s.numel() == 1
    with pytest.raises(TypeError):
        len(s)


def test_item_numpy_tolist():
    assert mt.tensor(2.5).item() == 2.5
    assert isinstance(mt.tensor(2.5).item(), float)
    assert mt.tensor([7]).item() == 7 and isinstance(mt.tensor([7]).item(), int)
    assert mt.tensor([[True]]).item() is True
    with pytest.raises(RuntimeError, match="2 elements"):
        mt.tensor([1.0, 2.0]).item()
    t = mt.tensor([[1, 2], [3, 4]])
    assert t.tolist() == [[1, 2], [3, 4]]
    assert isinstance(t.numpy(), np.ndarray)
    assert float(mt.tensor([1.5])) == 1.5 and int(mt.tensor(3)) == 3


def test_numpy_of_a_tensor_that_requires_grad_raises():
    x = mt.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"detach\(\)\.numpy\(\)"):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.0, 1.0]


def test_detach_shares_bytes_but_leaves_the_graph():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert d.storage is y.storage and shares(d, y)
    d.numpy()[0] = 10.0
    assert y.tolist()[0] == 10.0  # same bytes, as in PyTorch


def test_clone_copies_and_stays_in_the_graph():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.storage is not x.storage and not shares(c, x)
    assert c.requires_grad and c.grad_fn is not None and not c.is_leaf
    c.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    n = mt.tensor([1.0, 2.0]).T.clone()
    assert n.is_contiguous()


def test_to_and_casts():
    x = mt.tensor([1.7, -2.5])
    assert x.double().dtype == mt.float64
    assert x.long().tolist() == [1, -2]
    assert x.to(mt.float32) is x
    assert mt.tensor([0, 2]).bool().tolist() == [False, True]
    a = mt.tensor([1.0, 2.0], dtype=mt.float64, requires_grad=True)
    b = a.float()
    assert b.dtype == mt.float32 and b.requires_grad
    (b * b).sum().backward()
    assert a.grad.dtype == mt.float64 and a.grad.tolist() == [2.0, 4.0]


def test_binary_op_dtype_promotion():
    i, f = mt.tensor([1, 2]), mt.tensor([0.5, 0.5])
    assert (i + f).dtype == mt.float32
    assert (i * 2).dtype == mt.int64
    assert (i * 2.5).dtype == mt.float32            # int tensor, float scalar -> default float
    assert (f * 2).dtype == mt.float32              # scalars are "weak"
    assert (mt.tensor([1.0], dtype=mt.float64) + f).dtype == mt.float64
    assert (i / 2).dtype == mt.float32 and (i / 2).tolist() == [0.5, 1.0]  # true division
    # a 0-d tensor does not widen a dimensioned tensor of its own kind (PyTorch)
    assert (f + mt.tensor(1.0, dtype=mt.float64)).dtype == mt.float32
    assert (mt.tensor(1.0, dtype=mt.float64) * f).dtype == mt.float32
    assert (i + mt.tensor(1.5, dtype=mt.float64)).dtype == mt.float64  # but a higher kind does
    assert (mt.tensor([1, 2], dtype=mt.int32) + mt.tensor(3)).dtype == mt.int32


def test_float_valued_ops_of_integer_tensors_give_the_default_float():
    i = mt.tensor([1, 4])
    for out in (i.exp(), mt.log(i), i.sqrt(), mt.tanh(i), i.sigmoid(), i ** 0.5):
        assert out.dtype == mt.float32
    assert (i ** 2).dtype == mt.int64 and (i ** 2).tolist() == [1, 16]
    assert i.sqrt().tolist() == [1.0, 2.0]


def test_where_with_python_scalars():
    m = mt.tensor([True, False, True])
    w = mt.where(m, 1.0, 0.0)
    assert w.dtype == mt.float32 and w.tolist() == [1.0, 0.0, 1.0]
    assert mt.where(m, 1, 0).dtype == mt.int64
    x = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    mt.where(m, x, 0.0).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]


def test_shape_ops_on_zero_dim_tensors():
    x = mt.tensor(2.0, requires_grad=True)
    for y in (x.squeeze(), x.squeeze(0), x.transpose(0, -1), x.T, x.flatten().squeeze(0), x.unsqueeze(0)[0]):
        assert y.shape == () and y.item() == 2.0
    (x.squeeze(0) * x.transpose(0, 0)).backward()
    assert x.grad.item() == 4.0


# -- repr ---------------------------------------------------------------------------------------
def test_repr_follows_pytorch():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(mt.tensor([1, 2])) == "tensor([1, 2])"
    r = repr(x * 2)
    assert r.startswith("tensor([2., 4.], grad_fn=<Mul") and r.endswith(">)")
    assert "requires_grad" not in r  # PyTorch shows grad_fn instead
    r64 = repr(mt.tensor([1.0, 2.0], dtype=mt.float64))
    assert r64.startswith("tensor([1., 2.], dtype=") and "float64" in r64
    assert "dtype" not in repr(mt.tensor([1.0]))  # the default dtype is not spelled out
    m = repr(mt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert m.startswith("tensor([[1., 2.],\n") and m.endswith("[3., 4.]])")
    assert repr(mt.tensor(3.5)).startswith("tensor(3.5")


# -- views share storage ------------------------------------------------------------------------
def _views(t):
    return {
        "reshape": t.reshape(3, 4),
        "view": t.view(4, 3),
        "flatten": t.flatten(),
        "transpose": t.transpose(0, 1),
        "T": t.T,
        "permute": t.permute(1, 0),
        "slice": t[1:, ::2],
        "int_index": t[1],
        "none_index": t[None],
        "unsqueeze": t.unsqueeze(1),
        "squeeze": t.unsqueeze(0).squeeze(0),
        "expand": t[:, :1].expand(2, 6, 5),
        "detach": t.detach(),
    }


@pytest.mark.parametrize("name", list(_views(mt.zeros(6, 2))))
def test_views_share_storage_with_their_base(name):
    base = mt.arange(12, dtype=mt.float64).reshape(6, 2).clone()
    assert base._base is None and base.is_contiguous()
    v = _views(base)[name]
    assert v.storage is base.storage
    assert shares(v, base)
    if name != "detach":
        assert v._base is base
    # a write through the base shows in the view (the same bytes)
    before = v.numpy().copy()
    base.numpy()[...] += 100
    np.testing.assert_array_equal(v.numpy(), before + 100)


def test_view_of_a_view_reports_the_original_base():
    base = mt.zeros(4, 6)
    v = base[1:].T[::2]
    assert v._base is base and v.storage is base.storage


def test_is_contiguous_and_strides_of_views():
    t = mt.zeros(3, 4)
    assert t.is_contiguous()
    assert not t.T.is_contiguous() and t.T.stride() == (1, 4)
    assert not t[:, ::2].is_contiguous()
    assert t[1:].is_contiguous() and t[1:].storage_offset() == 4
    assert t[1:, 2:].storage_offset() == 6
    assert t[:1].expand(5, 4).stride() == (0, 1)
    assert t.T.contiguous().is_contiguous() and t.T.contiguous().storage is not t.storage
    assert t.contiguous() is t


def test_reshape_of_a_non_contiguous_tensor_copies():
    t = mt.arange(6).reshape(2, 3)
    r = t.T.reshape(6)
    assert r.storage is not t.storage and not shares(r, t)
    assert r.tolist() == [0, 3, 1, 4, 2, 5]


def test_ops_make_fresh_storage():
    a, b = mt.ones(3), mt.ones(3)
    for out in (a + b, a * 2, a.exp(), a.sum(), a[[0, 1]], mt.cat([a, b])):
        assert out.storage is not a.storage and out.storage is not b.storage
        assert out._base is None


@settings(max_examples=30, deadline=None)
@given(array_shapes(min_dims=1, max_dims=4, max_side=4), st.data())
def test_random_view_chains_agree_with_numpy(shape, data):
    """A random chain of view ops reads the same elements numpy's views read, from the same bytes."""
    base = mt.arange(int(np.prod(shape)), dtype=mt.float64).reshape(shape).clone()
    ref = base.numpy()
    t, a = base, ref
    for _ in range(data.draw(st.integers(1, 4))):
        nd = t.ndim
        op = data.draw(st.sampled_from(["T", "permute", "slice", "unsqueeze", "expand"] if nd else ["unsqueeze"]))
        if op == "T":
            t, a = t.T, a.T
        elif op == "permute":
            p = data.draw(st.permutations(range(nd)))
            t, a = t.permute(*p), a.transpose(p)
        elif op == "slice":
            d = data.draw(st.integers(0, nd - 1))
            start = data.draw(st.integers(0, max(t.shape[d] - 1, 0)))
            step = data.draw(st.integers(1, 2))
            key = (slice(None),) * d + (slice(start, None, step),)
            t, a = t[key], a[key]
        elif op == "unsqueeze":
            d = data.draw(st.integers(0, nd))
            t, a = t.unsqueeze(d), np.expand_dims(a, d)
        else:
            d = data.draw(st.integers(0, nd - 1))
            key = (slice(None),) * d + (slice(0, 1),)
            new = t.shape[:d] + (3,) + t.shape[d + 1:]
            t, a = t[key].expand(*new), np.broadcast_to(a[key], new)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.storage is base.storage and t._base is base
    assert t.stride() == tuple(s // 8 for s in a.strides)
    assert t.is_contiguous() == a.flags.c_contiguous
    if t.numel():
        assert np.shares_memory(t.numpy(), ref)


def test_t_transposes_a_matrix_as_a_view_and_refuses_more_dimensions():
    x = mt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x.t()
    assert y.shape == (3, 2) and y._storage is x._storage  # a view: zero-copy
    np.testing.assert_array_equal(y.detach().numpy(), np.arange(6.0).reshape(2, 3).T)
    (y * mt.tensor(np.arange(6.0).reshape(3, 2))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6.0).reshape(3, 2).T)
    for shape in [(), (4,)]:  # 0-d and 1-d: the tensor itself, as a view
        v = mt.ones(shape)
        assert v.t().shape == shape and v.t()._storage is v._storage
    with pytest.raises(RuntimeError, match="t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        mt.ones(2, 3, 4).t()


@pytest.mark.parametrize("shape", [(), (3,)])
def test_mT_of_fewer_than_two_dimensions_says_what_it_needs(shape):
    with pytest.raises(RuntimeError, match=f"only supported on matrices or batches of matrices. Got {len(shape)}-D"):
        mt.ones(shape).mT
    assert mt.ones(2, 3, 4).mT.shape == (2, 4, 3)


# the dtype PyTorch gives when joining two tensors: the higher kind (float > int > bool), the wider of that kind
JOINED = [("int64", "float32", "float32"), ("int32", "float64", "float64"), ("bool", "int32", "int32"),
          ("int32", "int64", "int64"), ("float32", "float64", "float64"), ("bool", "float32", "float32")]


@pytest.mark.parametrize("a, b, want", JOINED)
def test_cat_and_stack_promote_mixed_dtypes_as_pytorch_does(a, b, want):
    x, y = mt.ones(2, dtype=getattr(mt, a)), mt.zeros(2, dtype=getattr(mt, b))
    for joined in (mt.cat([x, y]), mt.stack([x, y]), mt.cat([y, x])):
        assert joined.dtype == getattr(mt, want)
    np.testing.assert_array_equal(mt.cat([x, y]).numpy(), [1, 1, 0, 0])


def test_a_promoted_input_of_cat_gets_its_gradient_in_its_own_dtype():
    x = mt.ones(2, requires_grad=True)  # float32
    y = mt.ones(1, dtype=mt.float64, requires_grad=True)
    z = mt.cat([x, y])
    assert z.dtype == mt.float64
    (z * mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64)).sum().backward()
    assert x.grad.dtype == mt.float32 and y.grad.dtype == mt.float64
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(y.grad.numpy(), [3.0])
