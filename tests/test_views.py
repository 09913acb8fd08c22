"""Strided views: zero-copy, correct values, correct gradients, clear errors.

Every view op (slices with positive and negative steps, transpose/permute, expand,
unsqueeze/squeeze, diagonal, unfold, as_strided, view/reshape) must share bytes with its
base (``np.shares_memory`` agrees with microtorch's storage bookkeeping), read the
elements numpy or PyTorch read, and pass gradcheck. ``byte_ranges()`` must name exactly
the bytes the view touches.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt

PACKAGE = Path(mt.__file__).resolve().parent


def raised_by_microtorch(excinfo) -> None:
    last = Path(str(excinfo.traceback[-1].path)).resolve()
    assert PACKAGE in last.parents, f"the error was raised in {last}, not in microtorch"
    assert excinfo.value.__context__ is None or excinfo.value.__suppress_context__


def base64(*shape, seed=0) -> mt.Tensor:
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=mt.float64, requires_grad=True)


def actual_bytes(t: mt.Tensor) -> set[int]:
    """The bytes of the storage t's numpy array really touches (from its pointer and strides)."""
    a = t._data
    start = a.__array_interface__["data"][0] - t.storage.data.__array_interface__["data"][0]
    out = set()
    for idx in np.ndindex(a.shape):
        b = start + sum(i * s for i, s in zip(idx, a.strides))
        out.update(range(b, b + a.itemsize))
    return out


def as_set(ranges) -> set[int]:
    return {b for start, stop in ranges for b in range(start, stop)}


# -- zero-copy -------------------------------------------------------------------------------
VIEWS = {
    "slice_step": lambda t: t[1:, ::2],
    "negative_step": lambda t: t[::-1, ::-2],
    "transpose": lambda t: t.transpose(0, 1),
    "permute": lambda t: t.permute(1, 0),
    "expand": lambda t: t[:, :1].expand(2, 4, 3),
    "unsqueeze_squeeze": lambda t: t.unsqueeze(1).squeeze(1),
    "diagonal": lambda t: t.diagonal(),
    "diagonal_offset": lambda t: t.diagonal(1),
    "diagonal_negative_offset": lambda t: t.diagonal(-2),
    "unfold": lambda t: t.unfold(1, 2, 1),
    "unfold_step": lambda t: t.unfold(0, 2, 2),
    "as_strided": lambda t: t.as_strided((3, 3), (1, 1), 2),
    "as_strided_negative": lambda t: t.as_strided((3,), (-4,), 11),
    "view": lambda t: t.view(3, 4),
    "reshape": lambda t: t.reshape(2, 2, 3),
}


@pytest.mark.parametrize("name", VIEWS)
def test_views_are_zero_copy(name):
    base = mt.arange(12, dtype=mt.float64).reshape(4, 3).clone()
    v = VIEWS[name](base)
    assert v.storage is base.storage and v._base is base
    assert np.shares_memory(v.numpy(), base.numpy())
    before = v.numpy().copy()
    base.numpy()[...] += 100  # a write through the base shows in the view
    np.testing.assert_array_equal(v.numpy(), before + 100)
    assert as_set(v.byte_ranges()) == actual_bytes(v)


def test_diagonal_unfold_as_strided_values_match_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = mt.tensor(a, dtype=mt.float64)
    for off in (-3, -1, 0, 1, 2, 5):
        for d1, d2 in ((0, 1), (1, 2), (2, 0), (-1, -2)):
            np.testing.assert_array_equal(t.diagonal(off, d1, d2).numpy(), np.diagonal(a, off, d1, d2))
    w = np.lib.stride_tricks.sliding_window_view(a, 3, axis=2)[:, :, ::1]
    np.testing.assert_array_equal(t.unfold(2, 3, 1).numpy(), w)
    np.testing.assert_array_equal(t.unfold(2, 2, 2).numpy(), np.lib.stride_tricks.sliding_window_view(a, 2, axis=2)[:, :, ::2])
    np.testing.assert_array_equal(t.as_strided((2, 2), (5, 1), 3).numpy(), [[3, 4], [8, 9]])
    assert t.unfold(2, 3, 1).stride() == (12, 4, 1, 1)
    assert t.diagonal(1, 1, 2).stride() == (12, 5) and t.diagonal(1, 1, 2).storage_offset() == 1
    assert mt.as_strided(t, (3,), (1,)).storage is t.storage and mt.diagonal(t).shape == (4, 2)


def test_negative_steps_are_views_with_negative_strides():
    """PyTorch refuses negative slice steps; microtorch allows them (as numpy does)."""
    t = mt.arange(10, dtype=mt.float64).clone()
    r = t[::-3]
    assert r.tolist() == [9, 6, 3, 0] and r.stride() == (-3,) and r.storage_offset() == 9
    assert r.storage is t.storage and not r.is_contiguous()
    assert r.byte_ranges() == [(0, 8), (24, 32), (48, 56), (72, 80)]
    assert t.as_strided((4,), (-3,), 9).tolist() == [9, 6, 3, 0]


# -- view vs reshape vs contiguous: copy only when the strides force it ------------------------
def test_view_raises_when_a_copy_would_be_needed_and_reshape_copies():
    t = mt.arange(12, dtype=mt.float64).reshape(3, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible") as e:
        t.T.view(12)
    raised_by_microtorch(e)
    assert "reshape" in str(e.value)
    r = t.T.reshape(12)
    assert r.storage is not t.storage and r.tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    # zero-copy whenever the strides allow, even for non-contiguous tensors
    s = t[:, ::2]  # strides (4, 2)
    assert s.reshape(3, 2, 1).storage is t.storage
    assert s.view(3, 1, 2).storage is t.storage
    assert t.T.reshape(2, 2, 3).storage is t.storage  # splitting a dimension never needs a copy
    assert t.T.reshape(3, 4).storage is not t.storage  # merging (4, 3) with strides (1, 4) does
    e4 = t[:1].expand(5, 4)
    assert e4.view(5, 2, 2).storage is t.storage and e4.view(5, 2, 2).stride() == (0, 2, 1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        e4.view(20)
    assert e4.reshape(20).storage is not t.storage


def test_contiguous_copies_only_when_needed():
    t = mt.arange(12, dtype=mt.float64).reshape(3, 4)
    s = t[1:]
    assert t.contiguous() is t and s.contiguous() is s
    c = t[:, ::-1].contiguous()
    assert c.storage is not t.storage and c.is_contiguous() and c.tolist() == t.numpy()[:, ::-1].tolist()
    assert t.unsqueeze(0).contiguous().storage is t.storage  # size-1 dims do not matter


# -- errors ---------------------------------------------------------------------------------------
def test_as_strided_out_of_bounds_names_extent_and_storage_size():
    t = mt.zeros(3, 3)  # 9 float32 elements = 36 bytes
    with pytest.raises(RuntimeError) as e:
        t.as_strided((3, 3), (3, 1), 2)
    raised_by_microtorch(e)
    msg = str(e.value)
    assert "elements 2 .. 10" in msg and "9 elements (36 bytes)" in msg and "outside" in msg
    with pytest.raises(RuntimeError, match="elements -2 .. 0"):
        t.as_strided((2,), (-2,), 0)  # a negative stride reaching before the start
    with pytest.raises(RuntimeError, match="storage_offset must be non-negative"):
        t.as_strided((1,), (1,), -1)
    with pytest.raises(RuntimeError, match="mismatch in length"):
        t.as_strided((2, 2), (1,))
    # a view of a view is checked against the whole storage, not against the view
    assert t[2:].as_strided((9,), (1,), 0).shape == (9,)


@pytest.mark.parametrize("fn, fragment", [
    (lambda t: t.unfold(1, 5, 1), "maximum size for tensor at dimension 1 is 4 but size is 5"),
    (lambda t: t.unfold(0, 2, 0), "step is 0 but must be > 0"),
    (lambda t: t.unfold(3, 1, 1), "out of range"),
    (lambda t: t.diagonal(0, 1, 1), "diagonal dimensions cannot be identical"),
    (lambda t: t[0].diagonal(), "at least 2 dimensions"),
])
def test_view_errors_are_clear(fn, fragment):
    with pytest.raises((RuntimeError, IndexError)) as e:
        fn(mt.zeros(3, 4))
    assert fragment in str(e.value)
    raised_by_microtorch(e)


# -- gradients --------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: x[::-1, 1::2],
    lambda x: x[::2, ::-3],
    lambda x: x.T[1:],
    lambda x: x.permute(1, 0).unsqueeze(0).squeeze(0),
    lambda x: x[:, :1].expand(4, 6) * x,
    lambda x: x.diagonal(),
    lambda x: x.diagonal(2),
    lambda x: x.diagonal(-1, 1, 0),
    lambda x: x.unfold(1, 3, 1),  # overlapping windows: gradients add up
    lambda x: x.unfold(0, 2, 1).unfold(1, 2, 3),
    lambda x: x.as_strided((5, 3), (1, 1), 2),  # overlapping windows over the storage
    lambda x: x.as_strided((2, 2), (0, -1), 7),  # stride 0 and a negative stride
    lambda x: x.T.as_strided((4, 2), (6, 1), 1),
    lambda x: x.reshape(2, 12).view(3, 8)[::-1],
    lambda x: x[:, ::2].reshape(4, 3, 1).T.contiguous(),
])
def test_gradcheck_through_views(fn):
    x = base64(4, 6)
    assert mt.gradcheck(lambda x: fn(x) * 1.5, (x,))


@pytest.mark.parametrize("view", [
    lambda x: x.as_strided((5, 3), (1, 1), 2),
    lambda x: x.unfold(1, 3, 2),
    lambda x: x.diagonal(1),
])
def test_double_backward_through_strided_views(view):
    x = base64(4, 6)

    def first_derivative(x):
        with mt.enable_grad():  # gradcheck evaluates fn under no_grad for the differences
            (g,) = mt.grad((view(x) ** 3).sum(), x, create_graph=True)
        return g

    assert mt.gradcheck(first_derivative, (x,))


def test_as_strided_reaching_outside_its_input_gives_those_positions_no_gradient():
    """As in PyTorch: as_strided on the view x[1:] may read storage positions of x[0], but
    only x[1:]'s positions are inputs of this op, so x[0] gets no gradient through it."""
    x = base64(4, 6)
    x[1:].as_strided((3,), (5,), 1).sum().backward()  # storage positions 1, 6, 11
    expected = np.zeros((4, 6))
    expected[1, 0] = expected[1, 5] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_as_strided_of_an_expanded_input_shares_the_gradient_like_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    a = np.arange(3.0)
    ta = torch.tensor(a, requires_grad=True)
    ma = mt.tensor(a, dtype=mt.float64, requires_grad=True)
    w = np.arange(1.0, 5.0)
    (ta.expand(2, 3).as_strided((2, 2), (1, 1), 0) * torch.tensor(w).reshape(2, 2)).sum().backward()
    (ma.expand(2, 3).as_strided((2, 2), (1, 1), 0) * mt.tensor(w, dtype=mt.float64).reshape(2, 2)).sum().backward()
    np.testing.assert_allclose(ma.grad.numpy(), ta.grad.numpy())


# -- random view chains: storage bookkeeping, byte ranges, and PyTorch as the oracle -------------
def _chain(data, t, ref, steps):
    """Apply random view ops to the microtorch tensor t and describe each for the oracle.
    ``ref`` is the numpy array read the same way (checked along the way)."""
    ops = []
    for _ in range(steps):
        nd = t.ndim
        choices = ["unsqueeze"] + (["slice", "T", "permute", "expand", "squeeze", "unfold", "reshape"] if nd else [])
        if nd >= 2:
            choices.append("diagonal")
        op = data.draw(st.sampled_from(choices))
        if op == "slice":
            d = data.draw(st.integers(0, nd - 1))
            n = t.shape[d]
            step = data.draw(st.sampled_from([1, 2, 3, -1, -2]))
            start = data.draw(st.integers(0, max(n - 1, 0)))
            key = (slice(None),) * d + (slice(start, None, step),)
            t, ref = t[key], ref[key]
            ops.append(("slice", d, list(range(n))[slice(start, None, step)]))
        elif op == "T":
            t, ref = t.T, ref.T
            ops.append(("T",))
        elif op == "permute":
            p = data.draw(st.permutations(range(nd)))
            t, ref = t.permute(*p), ref.transpose(p)
            ops.append(("permute", tuple(p)))
        elif op == "unsqueeze":
            d = data.draw(st.integers(0, nd))
            t, ref = t.unsqueeze(d), np.expand_dims(ref, d)
            ops.append(("unsqueeze", d))
        elif op == "squeeze":
            t, ref = t.squeeze(), np.squeeze(ref)
            ops.append(("squeeze",))
        elif op == "expand":
            if 0 in t.shape:  # nothing to repeat
                continue
            d = data.draw(st.integers(0, nd - 1))
            key = (slice(None),) * d + (slice(0, 1),)
            new = t.shape[:d] + (2,) + t.shape[d + 1:]
            t, ref = t[key].expand(*new), np.broadcast_to(ref[key], new)
            ops.append(("expand", d, new))
        elif op == "unfold":
            d = data.draw(st.integers(0, nd - 1))
            size = data.draw(st.integers(0, t.shape[d]))
            step = data.draw(st.integers(1, 3))
            t = t.unfold(d, size, step)
            ref = np.moveaxis(np.lib.stride_tricks.sliding_window_view(ref, size, axis=d), -1, -1)[
                (slice(None),) * d + (slice(None, None, step),)]
            ops.append(("unfold", d, size, step))
        elif op == "diagonal":
            off = data.draw(st.integers(-2, 2))
            t, ref = t.diagonal(off), np.diagonal(ref, off)
            ops.append(("diagonal", off))
        else:  # reshape: flatten then back (a view when the strides allow, else a copy)
            shape = t.shape
            t = t.reshape(-1).reshape(shape) if t.numel() else t
            ops.append(("reshape",))
        np.testing.assert_array_equal(t.detach().numpy(), ref)
    return t, ops


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_random_view_chains_share_storage_and_report_their_bytes(shape, data):
    base = mt.arange(int(np.prod(shape)), dtype=mt.float64).reshape(*shape).clone()
    t, _ = _chain(data, base, base.numpy(), data.draw(st.integers(1, 5)))
    if t.storage is base.storage:
        assert t.numel() == 0 or np.shares_memory(t.numpy(), base.numpy())
        assert as_set(t.byte_ranges()) == actual_bytes(t)
        ranges = t.byte_ranges()
        assert all(a < b for a, b in ranges) and all(b1 < a2 for (_, b1), (a2, _) in zip(ranges, ranges[1:]))
    else:  # a reshape had to copy: fresh bytes
        assert not np.shares_memory(t.numpy(), base.numpy())
    other = mt.arange(int(np.prod(shape)), dtype=mt.float64).reshape(*shape).clone()
    assert not np.shares_memory(t.numpy(), other.numpy())


def _torch_chain(torch, x, ops):
    for op in ops:
        if op[0] == "slice":  # torch has no negative steps: pick the same elements
            x = x.index_select(op[1], torch.tensor(op[2], dtype=torch.long))
        elif op[0] == "T":
            x = x.permute(*reversed(range(x.ndim)))
        elif op[0] == "permute":
            x = x.permute(*op[1])
        elif op[0] == "unsqueeze":
            x = x.unsqueeze(op[1])
        elif op[0] == "squeeze":
            x = x.squeeze()
        elif op[0] == "expand":
            x = x.narrow(op[1], 0, 1).expand(*op[2])
        elif op[0] == "unfold":
            x = x.unfold(op[1], op[2], op[3])
        elif op[0] == "diagonal":
            x = x.diagonal(op[1])
        else:
            x = x.reshape(-1).reshape(x.shape) if x.numel() else x
    return x


@pytest.mark.oracle
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_random_view_chains_match_pytorch_values_and_gradients(shape, data):
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    a = np.random.default_rng(0).standard_normal(shape)
    x = mt.tensor(a, dtype=mt.float64, requires_grad=True)
    t, ops = _chain(data, x, a, data.draw(st.integers(1, 5)))
    tx = torch.tensor(a, requires_grad=True)
    tt = _torch_chain(torch, tx, ops)
    np.testing.assert_allclose(t.detach().numpy(), tt.detach().numpy())
    w = np.random.default_rng(1).standard_normal(t.shape)
    (t * mt.tensor(w, dtype=mt.float64)).sum().backward()
    (tt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)


@pytest.mark.oracle
@pytest.mark.parametrize("size, stride, offset", [
    ((3, 3), (1, 1), 0), ((4, 2), (2, 1), 3), ((2, 3, 2), (0, 2, 5), 1), ((6,), (2,), 0), ((2, 2), (3, 3), 2),
])
@pytest.mark.parametrize("pre", ["none", "slice", "T"])
def test_as_strided_matches_pytorch(size, stride, offset, pre):
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    a = np.random.default_rng(2).standard_normal((4, 3))
    x = mt.tensor(a, dtype=mt.float64, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    prep = {"none": lambda v: v, "slice": lambda v: v[1:], "T": lambda v: v.T}[pre]
    y, ty = prep(x).as_strided(size, stride, offset), prep(tx).as_strided(size, stride, offset)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    w = np.random.default_rng(3).standard_normal(size)
    (y * mt.tensor(w, dtype=mt.float64)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)
