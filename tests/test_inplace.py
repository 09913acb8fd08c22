"""In-place ops: version counters, PyTorch's hazards and errors, and correct gradients
through in-place writes on views (CopySlices), with PyTorch as the oracle.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import microtorch as mt

PACKAGE = Path(mt.__file__).resolve().parent


def raises(exc, fn, *fragments):
    """fn() raises exc with every fragment in its message, from inside microtorch (not numpy)."""
    with pytest.raises(exc) as e:
        fn()
    msg = str(e.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in the message: {msg}"
    last = Path(str(e.traceback[-1].path)).resolve()
    assert PACKAGE in last.parents, f"the error was raised in {last}, not in microtorch"
    assert e.value.__context__ is None or e.value.__suppress_context__
    return msg


def leaf(*shape, seed=0):
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=mt.float64, requires_grad=True)


# -- values and version counters ---------------------------------------------------------------
def test_inplace_ops_write_into_the_same_bytes_and_return_self():
    x = mt.tensor([1.0, -2.0, 3.0, 4.0])
    storage, data = x.storage, x.numpy()
    cases = [
        (lambda t: t.add_(1), [2, -1, 4, 5]), (lambda t: t.sub_(mt.tensor([1.0, 1, 1, 1])), [1, -2, 3, 4]),
        (lambda t: t.mul_(2), [2, -4, 6, 8]), (lambda t: t.div_(2), [1, -2, 3, 4]),
        (lambda t: t.add_(mt.ones(4), alpha=-2), [-1, -4, 1, 2]), (lambda t: t.clamp_(-3, 1.5), [-1, -3, 1, 1.5]),
        (lambda t: t.relu_(), [0, 0, 1, 1.5]), (lambda t: t.neg_(), [0, 0, -1, -1.5]),
        (lambda t: t.fill_(4), [4, 4, 4, 4]), (lambda t: t.sqrt_(), [2, 2, 2, 2]),
        (lambda t: t.copy_(mt.tensor([0.0, 1, 2, 3])), [0, 1, 2, 3]), (lambda t: t.zero_(), [0, 0, 0, 0]),
        (lambda t: t.exp_(), [1, 1, 1, 1]), (lambda t: t.tanh_(), [np.tanh(1)] * 4),
        (lambda t: t.sigmoid_(), [1 / (1 + np.exp(-np.tanh(1)))] * 4),
    ]
    for i, (fn, expected) in enumerate(cases):
        assert fn(x) is x
        assert x.storage is storage and x._version == i + 1
        np.testing.assert_allclose(data, expected, rtol=1e-6)  # the very same bytes changed


def test_views_share_the_version_counter_and_setitem_writes_through():
    x = mt.zeros(3, 4)
    row, col = x[1], x[:, 2]
    x[1] = 5.0
    assert x._version == row._version == col._version == 1
    x[:, 2] = mt.tensor([1.0, 2.0, 3.0])
    x[0, 0] = 7
    x[mt.tensor([2, 2, 0]), mt.tensor([3, 1, 1])] = mt.tensor([8.0, 9.0, 10.0])
    x[x > 7.5] = -1.0
    assert x.tolist() == [[7, -1, 1, 0], [5, 5, 2, 5], [0, -1, 3, -1]]
    assert row.tolist() == [5, 5, 2, 5] and col.tolist() == [1, 2, 3]
    assert x._version == 5
    x[1:, 1:].mul_(0)
    assert x.tolist() == [[7, -1, 1, 0], [5, 0, 0, 0], [0, 0, 0, 0]]
    x[:2] = mt.tensor([1.0, 2.0, 3.0, 4.0])  # broadcast over the rows
    assert x[:2].tolist() == [[1, 2, 3, 4]] * 2


def test_writes_into_a_slice_of_an_expanded_view_that_no_longer_overlaps():
    x = mt.zeros(4)
    e = x.expand(3, 4)
    e[0].add_(1)  # one row of the expand: its elements are distinct bytes
    assert x.tolist() == [1, 1, 1, 1]


# -- the classic hazards ---------------------------------------------------------------------------
def test_modifying_a_saved_output_raises_at_backward():
    x = leaf(3)
    y = x.float().sigmoid()
    y.mul_(2)
    msg = raises(RuntimeError, lambda: y.sum().backward(),
                 "one of the variables needed for gradient computation has been modified by an inplace "
                 "operation: [mt.float32 [3]], which is output 0 of SigmoidBackward, is at version 1; "
                 "expected version 0 instead. Hint:")
    assert "mul_" in msg


def test_relu_on_an_input_saved_by_a_previous_op_raises():
    a, b = leaf(3), leaf(3, seed=1)
    h = a * 2
    m = h * b  # Mul saves h (the output of a * 2) for backward
    h.relu_()
    raises(RuntimeError, lambda: m.sum().backward(), "which is output 0 of MulBackward, is at version 1; "
           "expected version 0")


def test_modifying_a_saved_leaf_names_no_producer():
    a, b = leaf(3), mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64)
    z = a * b
    b.add_(1)
    msg = raises(RuntimeError, lambda: z.sum().backward(), "[mt.float64 [3]] is at version 1; expected version 0")
    assert "which is output" not in msg


def test_x_mul_x_in_place_raises_like_pytorch():
    a = leaf(3)
    y = a * 2
    y.mul_(y)  # mul_ saved y (the other factor) before the write bumped its version
    raises(RuntimeError, lambda: y.sum().backward(), "modified by an inplace operation")


def test_no_grad_write_into_a_non_leaf_keeps_the_graph_and_is_caught():
    a = leaf(3)
    y = a.exp()
    fn = y.grad_fn
    with mt.no_grad():
        y.mul_(2)
    assert y.grad_fn is fn and y._version == 1
    raises(RuntimeError, lambda: y.sum().backward(), "output 0 of ExpBackward")


# -- refusals -------------------------------------------------------------------------------------
def test_inplace_on_a_leaf_that_requires_grad_raises_but_no_grad_allows_it():
    w = leaf(3)
    raises(RuntimeError, lambda: w.add_(1), "a leaf Variable that requires grad is being used in an in-place operation.")
    raises(RuntimeError, lambda: w.zero_(), "a leaf Variable that requires grad")
    raises(RuntimeError, lambda: w[0].mul_(2), "a view of a leaf Variable that requires grad is being used in an "
           "in-place operation.")
    raises(RuntimeError, lambda: w.__setitem__(1, 0.0), "a view of a leaf Variable")
    raises(RuntimeError, lambda: w.T.unsqueeze(0).relu_(), "a view of a leaf Variable")
    before = w.numpy().copy() if not w.requires_grad else w.detach().numpy().copy()
    with mt.no_grad():  # how optimizers update parameters
        w.sub_(mt.ones(3, dtype=mt.float64), alpha=0.5)
        w[0] = 10.0
    np.testing.assert_allclose(w.detach().numpy(), [10.0, *(before[1:] - 0.5)])
    assert w.is_leaf and w.requires_grad and w._version == 2
    w.detach().mul_(2)  # a detached alias is not a differentiable view: allowed
    assert w._version == 3


def test_a_view_made_under_no_grad_cannot_be_written_with_grad_on():
    a = leaf(4)
    y = a * 1
    with mt.no_grad():
        v = y[1:3]
    raises(RuntimeError, lambda: v.mul_(2), "A view was created in no_grad mode and is being modified inplace")


@pytest.mark.parametrize("fn, fragment", [
    (lambda: mt.ones(3, dtype=mt.int64).add_(0.5), "result type Float can't be cast to the desired output type Long"),
    (lambda: mt.ones(3, dtype=mt.int64).div_(2), "result type Float can't be cast to the desired output type Long"),
    (lambda: mt.ones(3, dtype=mt.int32).mul_(mt.ones(3)), "result type Float can't be cast to the desired output type Int"),
    (lambda: mt.ones(3, dtype=mt.int64).exp_(), "result type Float can't be cast to the desired output type Long"),
    (lambda: mt.ones(3, dtype=mt.int64).clamp_(0.5), "result type Float can't be cast to the desired output type Long"),
    (lambda: mt.ones(3, dtype=mt.bool_).add_(1), "result type Long can't be cast to the desired output type Bool"),
    (lambda: mt.ones(3, dtype=mt.int64).sub_(1, alpha=0.5), "can't be cast"),
])
def test_dtype_changing_inplace_ops_raise(fn, fragment):
    raises(RuntimeError, fn, fragment)


def test_dtype_preserving_and_converting_inplace_ops_are_allowed():
    x = mt.zeros(3)  # float32
    x.add_(mt.ones(3, dtype=mt.float64))  # a wider float fits (converted, as in PyTorch)
    assert x.dtype == mt.float32 and x.tolist() == [1, 1, 1]
    i = mt.zeros(3, dtype=mt.int64)
    i.add_(mt.ones(3, dtype=mt.int32)).add_(True)
    i.copy_(mt.tensor([1.7, -2.2, 3.9]))  # copy_ converts (truncates), as in PyTorch
    assert i.tolist() == [1, -2, 3] and i.dtype == mt.int64
    i.fill_(2.9)
    assert i.tolist() == [2, 2, 2]


def test_writing_into_overlapping_elements_raises():
    x = mt.zeros(4)
    msg = "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation."
    raises(RuntimeError, lambda: x.expand(3, 4).add_(1), msg, "dimension 0 has stride 0")
    raises(RuntimeError, lambda: x.unsqueeze(1).expand(4, 2).fill_(1), msg)
    raises(RuntimeError, lambda: x.unfold(0, 2, 1).mul_(2), msg, "overlap")  # PyTorch cannot tell; microtorch can
    raises(RuntimeError, lambda: x.as_strided((2, 2), (1, 1)).zero_(), msg)
    raises(RuntimeError, lambda: x.expand(2, 4).copy_(mt.ones(2, 4)), msg)
    x.unfold(0, 2, 2).mul_(2)  # non-overlapping windows are fine
    assert x._version == 1


def test_partial_overlap_between_input_and_output_raises():
    x = mt.arange(6.0)
    msg = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
           "single memory location. Please clone() the tensor before performing the operation.")
    raises(RuntimeError, lambda: x[1:].add_(x[:-1]), msg)
    raises(RuntimeError, lambda: x[1:].copy_(x[:-1]), msg)
    raises(RuntimeError, lambda: x.view(2, 3).T.mul_(x.view(3, 2)), msg)
    x[::2].add_(x[1::2])  # disjoint (exactly): fine, although the byte extents overlap
    x.add_(x)  # the very same elements: fine
    assert x.tolist() == [2, 2, 10, 6, 18, 10]
    x[1:].add_(x[:-1].clone())


def test_broadcast_mismatch_and_bad_arguments():
    raises(RuntimeError, lambda: mt.zeros(3, 1).add_(mt.ones(3, 4)),
           "output with shape [3, 1] doesn't match the broadcast shape [3, 4]")
    raises(RuntimeError, lambda: mt.zeros(3).copy_(mt.ones(2)), "doesn't match the broadcast shape")
    raises(RuntimeError, lambda: mt.zeros(3).fill_(mt.ones(2)), "fill_ only supports 0-dimension value tensor")
    raises(RuntimeError, lambda: mt.zeros(3).clamp_(), "at least one of 'min' or 'max'")
    raises(IndexError, lambda: mt.zeros(3).__setitem__(mt.tensor([5]), 1.0), "index 5 is out of bounds")


# -- gradients: PyTorch as the oracle ------------------------------------------------------------------
def compare(program, *arrays):
    """Run program(lib, leaves) in microtorch and torch; outputs and leaf grads must match —
    or, if PyTorch's backward refuses (a saved tensor was modified), microtorch's must too.
    Skips the calling test (only it) when PyTorch is not installed."""
    torch = pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")
    tl = [torch.tensor(a, requires_grad=True) for a in arrays]
    ml = [mt.tensor(a, dtype=mt.float64, requires_grad=True) for a in arrays]
    to, mo = program(torch, tl), program(mt, ml)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=1e-10)
    w = np.random.default_rng(7).standard_normal(tuple(to.shape))
    try:
        (to * torch.tensor(w)).sum().backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (mo * mt.tensor(w, dtype=mt.float64)).sum().backward()
        return "refused"
    (mo * mt.tensor(w, dtype=mt.float64)).sum().backward()
    for i, (m, t) in enumerate(zip(ml, tl)):
        if t.grad is None:
            assert m.grad is None or not m.grad.numpy().any(), f"leaf {i}: torch has no gradient"
        else:
            np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"gradient of leaf {i}")
    return "same gradients"


R = np.random.default_rng(0)
A, B, C = R.standard_normal((4, 5)), R.standard_normal((2, 5)), R.standard_normal(5)


def _chain(T, xs):
    a, b, c = xs
    y = a * 1.5
    y.add_(c).mul_(c).sub_(0.5).neg_().clamp_(-1, 0.8).mul_(3).add_(b[0], alpha=-2)
    return y.div_(c * c + 1)


def _chain_ending_in_ops_that_save_their_output(T, xs):
    a, b, c = xs
    y = a * 1.5
    y.add_(c).relu_()
    return y.exp() + (a * 2).exp_() + (a - 1).tanh_() + (a * 3).sigmoid_() + (a * a + 0.1).sqrt_()


def _unsafe_chain(T, xs):  # relu_ saves its output, exp_ overwrites it: both engines refuse
    a, b, c = xs
    y = a * 1.5
    return y.relu_().exp_()


def _mul_other_requires_grad(T, xs):
    a, b, c = xs
    y = a + 0
    y.mul_(c)  # keeps a copy of y's old values (c needs a gradient)
    return y


def _view_written_overlaps_earlier_view(T, xs):
    a, b, c = xs
    y = a * 1.5
    v1 = y[0:3]  # taken before the write, overlaps it: must see the new history
    y[1:3].mul_(b)
    return v1 * 2 + y.sum(0)


def _setitem_and_views(T, xs):
    a, b, c = xs
    y = a * 2
    y[:, 1] = c[:4]
    y[2] = c
    z = y.T
    z[::2].add_(1.0)
    y.mul_(2)
    y.relu_()
    return z * y.T


def _setitem_after_relu_(T, xs):  # relu_ saved its output; the setitem overwrites part of it
    a, b, c = xs
    y = a * 2
    y.relu_()
    y[2] = c
    return y


def _buffer_without_grad(T, xs):
    a, b, c = xs
    buf = T.zeros(4, 5, dtype=T.float64)  # requires no grad until values that do are written in
    buf[1:3] = a[1:3] * 2
    buf[:, 0].copy_(c[:4])
    w = buf.unsqueeze(0)
    w[0, 3].sigmoid_()
    return buf * a


def _advanced_setitem(T, xs):
    a, b, c = xs
    y = a * 1
    y[T.tensor([0, 2])] = c * 3
    y[y > 0.5] = y[y > 0.5] * 0 + 1
    return y


def _diagonal_and_windows(T, xs):
    a, b, c = xs
    y = a * 1
    y[:4, :4].diagonal().mul_(c[:4])
    w = y.unfold(1, 2, 2)  # non-overlapping windows: writable
    w[..., 0].add_(b[0, :2])
    return y.exp()


def _negative_steps(T, xs):
    a, b, c = xs
    y = a * 1
    if T is not mt:  # PyTorch has no negative steps: the same elements by an index list
        y[:, [4, 2, 0]] = y[:, [4, 2, 0]].clone().mul_(c[:3])
        return y
    y[:, ::-2].mul_(c[:3])
    return y


def _fill_with_a_tensor(T, xs):
    a, b, c = xs
    y = a * 1
    y[1].fill_(c[2])
    return y


@pytest.mark.oracle
@pytest.mark.parametrize("program", [_chain, _chain_ending_in_ops_that_save_their_output,
                                     _mul_other_requires_grad, _view_written_overlaps_earlier_view,
                                     _setitem_and_views, _buffer_without_grad, _advanced_setitem,
                                     _diagonal_and_windows, _negative_steps, _fill_with_a_tensor])
def test_safe_inplace_programs_give_pytorchs_gradients(program):
    assert compare(program, A, B, C) == "same gradients"


@pytest.mark.oracle
@pytest.mark.parametrize("program", [_unsafe_chain, _setitem_after_relu_])
def test_unsafe_inplace_programs_are_refused_by_both(program):
    assert compare(program, A, B, C) == "refused"


def test_grad_fns_after_inplace_on_views():
    a = leaf(4, 5)
    y = a * 1
    v = y[1:3]
    old = v.grad_fn
    v.mul_(2)
    assert y.grad_fn.name == "CopySlices" and y.grad_fn.next[1].name == "Mul_Backward"
    assert v.grad_fn is not old and v.grad_fn.name == "AsStridedBackward"
    assert v.grad_fn.next[0] is y.grad_fn
    buf = mt.zeros(3)
    assert buf.is_leaf and not buf.requires_grad
    buf[0] = a[0, 0]
    assert not buf.is_leaf and buf.requires_grad and buf.grad_fn.name == "CopySlices"


def test_gradcheck_through_inplace_on_views():
    def f(a, c):
        y = a * 1
        y[1:3, ::2].mul_(c[::2])
        y[:, 0] = c[:4] * 2
        y.T[::-1].sigmoid_()
        return y

    assert mt.gradcheck(f, (leaf(4, 5), leaf(5, seed=2)))


def test_second_derivative_through_inplace_ops():
    def first_derivative(a):
        with mt.enable_grad():
            y = a * 1
            y.mul_(a)
            y[1:].exp_()
            (g,) = mt.grad(y.sum(), a, create_graph=True)
        return g

    assert mt.gradcheck(first_derivative, (leaf(3, 2),))


def test_inplace_op_events_in_the_trace():
    a = leaf(3)
    with mt.trace() as tr:
        y = a * 2
        y.relu_()
    ops = tr.filter("op")
    assert [e["op"] for e in ops] == ["Mul", "Relu_"]
    mul, relu = ops
    assert relu["inplace"] and not mul["inplace"]
    assert relu["input_storages"] == [mul["output_storage"]] == [relu["output_storage"]]
    assert relu["saved"] == [mul["output_storage"]]  # relu_ saved its output (the same bytes)


# -- random in-place programs on views, against PyTorch ---------------------------------------------
_VIEWS = [
    lambda v: v, lambda v: v[1], lambda v: v[:, 2], lambda v: v[1:3, ::2], lambda v: v.T,
    lambda v: v.diagonal(), lambda v: v[::2], lambda v: v.T[1:, :3], lambda v: v[2:, 1:].unsqueeze(0),
]
_OPS = [
    lambda v, s: v.add_(s), lambda v, s: v.sub_(s, alpha=0.5), lambda v, s: v.mul_(s),
    lambda v, s: v.mul_(1.5), lambda v, s: v.add_(0.25), lambda v, s: v.neg_(), lambda v, s: v.clamp_(-0.5, 0.7),
    lambda v, s: v.copy_(s * 2), lambda v, s: v.fill_(s), lambda v, s: v.zero_(), lambda v, s: v.div_(s * s + 1),
    lambda v, s: v.relu_(), lambda v, s: v.exp_(), lambda v, s: v.sigmoid_(), lambda v, s: v.tanh_(),
]


def _random_program(seed):
    rng = np.random.default_rng(seed)
    steps = [(int(rng.integers(len(_VIEWS))), int(rng.integers(len(_OPS))), bool(rng.random() < 0.3))
             for _ in range(int(rng.integers(1, 6)))]

    def program(T, xs):
        a, b, c = xs
        y = a * 1.0
        s = (b * 0.5).sum() * 0.3 + 1  # a 0-d operand that needs a gradient
        kept = []
        for view, op, keep in steps:
            v = _VIEWS[view](y)
            if keep:  # a view taken before the write, read afterwards
                kept.append(_VIEWS[view](y))
            _OPS[op](v, s)
        out = y * 1.0
        for k in kept:
            out = out + k.sum()
        return out

    return program


@pytest.mark.oracle
@pytest.mark.parametrize("seed", range(150))
def test_random_inplace_programs_on_views_match_pytorch(seed):
    compare(_random_program(seed), A, B, C)


# -- a loss's class-index target is saved for backward, as in PyTorch ----------------------------
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_changing_the_target_before_backward_is_refused(loss):
    x = leaf(3, 4)
    y = mt.tensor(np.array([0, 1, 2]))
    value = (mt.cross_entropy(x, y) if loss == "cross_entropy" else mt.nll_loss(x.log_softmax(1), y))
    y[0] = 3  # the loss was computed for class 0 in row 0: its gradient can no longer be had
    raises(RuntimeError, value.backward, "modified by an inplace operation", "is at version 1")


def test_a_numpy_target_is_copied_when_the_loss_is_computed():
    x = leaf(3, 4)
    y = np.array([0, 1, 2])
    mt.cross_entropy(x, y).backward()
    expected = x.grad.numpy().copy()
    x.grad = None
    loss = mt.cross_entropy(x, y)
    y[0] = 3  # the user's array changes after forward: backward still uses what forward used
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15)


# -- so are the index tensors of indexing, embedding and index_put_ --------------------------------
def _index_then_change(kind):
    x = leaf(4)
    i = mt.tensor(np.array([0, 1]))
    if kind == "index":
        value = x[i].sum()
    elif kind == "embedding":
        value = mt.nn.functional.embedding(i, x.reshape(4, 1)).sum()
    else:  # index_put_: z[i] = v writes through the index
        z, v = x * 1, leaf(2, seed=1)
        z[i] = v
        value = z.sum()
    i[0] = 3  # the gradient would go to the wrong rows
    return value


@pytest.mark.parametrize("kind", ["index", "embedding", "index_put_"])
def test_changing_an_index_tensor_before_backward_is_refused(kind):
    value = _index_then_change(kind)
    raises(RuntimeError, value.backward, "modified by an inplace operation", "is at version 1")


def test_a_numpy_index_is_copied_when_the_op_runs():
    x = leaf(4)
    i = np.array([0, 1])
    y = x[i].sum()
    i[0] = 3
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 0.0, 0.0])
