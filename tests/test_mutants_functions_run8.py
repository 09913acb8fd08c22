"""Tests written to kill mutants that survived the eighth mutation run (issue #21) over the
``functions/`` code the fourth run never reached: ``elementwise.py``'s ``Add``/``Sub``/``Mul``/
``Div``/``Neg``/``Pow`` and their functional forms, ``shape.py``'s ``Expand``/``Reshape``/
``Unsqueeze``/``Index`` and helpers, ``broadcast.py`` and ``reduction.reduced_dims`` (verdicts in
``tests/mutation-run-8/functions.md``).

Each test asserts what a user sees — values against numpy written out by hand, gradients against
finite differences or the derivative worked out by hand, dtypes and errors as PyTorch gives them,
the ops and allocations the trace records — never a mutant's text.
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt


def T(a, dtype=np.float64, requires_grad=False):
    return mt.tensor(np.asarray(a, dtype=dtype), requires_grad=requires_grad)


# -- the op's name in a broadcast error ---------------------------------------------------------------
@pytest.mark.parametrize("name, op", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                      ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b)],
                         ids=["add", "sub", "mul", "div"])
def test_arithmetic_broadcast_errors_name_the_op_and_the_clashing_dimension(name, op):
    """What a learner reads when shapes clash: the op, both shapes, the first clashing dimension
    counted from the end (here -2: 2 vs 3; the last dims agree), and the rule."""
    with pytest.raises(RuntimeError) as info:
        op(mt.ones(2, 3), mt.ones(3, 3))
    assert str(info.value) == (f"{name}: shapes [2, 3] and [3, 3] cannot be broadcast together (at dimension "
                               "-2: 2 vs 3); each trailing dimension must be equal, or 1 in one of them")
    with pytest.raises(RuntimeError, match=rf"^{name}: shapes \[4\] and \[2, 3\] cannot"):
        getattr(mt, name)(mt.ones(4), mt.ones(2, 3))


# -- unsqueeze names itself when the dim is out of range ----------------------------------------------
@pytest.mark.parametrize("shape, dim", [((2, 3), 3), ((2, 3), -4), ((), 1), ((), -2)])
def test_unsqueeze_names_itself_when_the_dim_is_out_of_range(shape, dim):
    """A (2, 3) tensor takes dims -3 .. 2 (the new dim can go at any of 3 places), a 0-d one -1 .. 0."""
    with pytest.raises(IndexError, match=rf"^unsqueeze: dimension {dim} is out of range for a new dimension "
                                         rf"of a tensor with {len(shape)} dimension\(s\) \(valid: "
                                         rf"{-len(shape) - 1} \.\. {len(shape)}\)$"):
        mt.zeros(*shape).unsqueeze(dim)
    assert mt.zeros(*shape).unsqueeze(dim + 1 if dim < 0 else dim - 1).ndim == len(shape) + 1


# -- expand: stride 0 along new and size-1 dims -------------------------------------------------------
def test_expand_gives_stride_0_to_new_and_size_1_dims_for_one_byte_bools_too():
    """Strides count elements; with one-byte elements (bool) a byte stride is an element stride,
    so a stray 1-byte stride on a new or size-1 dim would show. numpy's rule, as for float64 (see
    test_mutants_linalg): the new leading dim and the kept size-1 dim both get stride 0."""
    col = mt.tensor([[True], [False], [True]])  # (3, 1), strides (1, 1)
    for shape, want in [((1, 3, 1), (0, 1, 0)), ((3, 1), (1, 0)), ((2, 3, 1), (0, 1, 0))]:
        y = col.expand(*shape)
        assert y.stride() == want == tuple(s for s in np.broadcast_to(col.numpy(), shape).strides)
        np.testing.assert_array_equal(y.numpy(), np.broadcast_to(col.numpy(), shape))
    row = mt.tensor([True, False, True])
    assert row.expand(1, 3).stride() == (0, 1) and row.expand(1, 1, 3).stride() == (0, 0, 1)


# -- Mul.backward: a constant operand gets no gradient ------------------------------------------------
def test_mul_by_a_constant_sends_the_constant_back_and_computes_nothing_for_it():
    """L = Σ c ⊙ w: dL/dw = c; c is a constant (not saved, no gradient), so backward runs the one
    Mul g · c and nothing for c."""
    c = T([[2.0, 3.0], [4.0, 5.0]])
    w = T([1.0, -1.0], requires_grad=True)
    loss = (c * w).sum()
    with mt.trace() as tr:
        loss.backward()
    assert [(e["op"], e["shape"]) for e in tr.filter("op")] == [
        ("Expand", [2, 2]), ("Mul", [2, 2]), ("Sum", [1, 2]), ("Reshape", [2])]
    assert w.grad.tolist() == [6.0, 8.0]
    v = T([1.0, -1.0], requires_grad=True)
    (v * c).sum().backward()
    assert v.grad.tolist() == [6.0, 8.0]


# -- unbroadcast ------------------------------------------------------------------------------------
def test_a_gradient_is_summed_over_exactly_the_dims_an_operand_was_stretched_along():
    """a (2, 1, 1) meets b (2, 4, 1): a was stretched along dim 1 only (b has 1 in dim 2 too),
    so dL/da = Σ_j b[:, j, :] and dL/db = a broadcast (L = Σ a ⊙ b)."""
    an = np.array([1.0, 2.0]).reshape(2, 1, 1)
    bn = np.arange(8.0).reshape(2, 4, 1)
    a, b = T(an, requires_grad=True), T(bn, requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), bn.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(b.grad.numpy(), np.broadcast_to(an, (2, 4, 1)))
    a.grad = b.grad = None
    (b * a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), bn.sum(axis=1, keepdims=True))


def test_a_bias_gradient_is_one_sum_keeping_dims_then_a_reshape():
    """x (2, 3) + bias (3,): backward sums g over the new leading dim keeping it, (1, 3), and
    reshapes that to the bias's (3,) — the two ops the trace shows, with those shapes."""
    x = T(np.ones((2, 3)), requires_grad=True)
    bias = T([1.0, 2.0, 3.0], requires_grad=True)
    loss = mt.add(x, bias).sum()
    with mt.trace() as tr:
        loss.backward()
    ops = [(e["op"], e["shape"]) for e in tr.filter("op")]
    assert ops == [("Expand", [2, 3]), ("Sum", [1, 3]), ("Reshape", [3])], ops
    assert bias.grad.tolist() == [2.0, 2.0, 2.0] and x.grad.tolist() == [[1.0] * 3] * 2


# -- sub refuses bool operands --------------------------------------------------------------------------
BOOL_SUB = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead.")


@pytest.mark.parametrize("a, b", [(mt.tensor([True, False]), mt.tensor([1, 2])), (mt.tensor([True, False]), 1),
                                  (mt.tensor([1, 2]), mt.tensor([True, False])), (mt.tensor([1.0, 2.0]), True),
                                  (True, mt.tensor([1.0, 2.0]))],
                         ids=["bool-int", "bool-number", "int-bool", "float-True", "True-float"])
def test_sub_refuses_a_bool_operand_on_either_side_with_pytorchs_message(a, b):
    with pytest.raises(RuntimeError) as info:
        mt.sub(a, b)
    assert str(info.value) == BOOL_SUB
    with pytest.raises(RuntimeError, match="^Subtraction, the `-` operator, with a bool tensor"):
        a - b


# -- reduced_dims: a 0-d tensor reduced over dim 0 or -1 ------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dim", [0, -1, (0,), [-1]])
def test_a_zero_d_tensor_reduces_over_dim_0_or_minus_1_to_itself(name, dim):
    """PyTorch: torch.tensor(2.5).sum(0) is tensor(2.5) (a 0-d tensor accepts dim 0 and -1)."""
    x = T(2.5, requires_grad=True)
    y = getattr(x, name)(dim=dim)
    assert y.shape == () and y.item() == 2.5
    y.backward()
    assert x.grad.shape == () and x.grad.item() == 1.0


# -- IndexAdd.backward: a second derivative through advanced indexing -----------------------------------
def test_second_derivative_through_repeated_advanced_indexing():
    """y = x[[0, 0, 1]], L = Σ y²: dL/dx = [4x₀, 2x₁, 0] (x₀ read twice), built with create_graph;
    then L₂ = Σ c ⊙ dL/dx has dL₂/dx = [4c₀, 2c₁, 0]."""
    x = T([1.0, 2.0, 3.0], requires_grad=True)
    y = x[[0, 0, 1]]
    (gx,) = mt.autograd.grad((y * y).sum(), [x], create_graph=True)
    assert gx.tolist() == [4.0, 4.0, 0.0]
    c = T([1.0, 2.0, 3.0])
    (ggx,) = mt.autograd.grad((gx * c).sum(), [x])
    assert ggx.tolist() == [4.0, 4.0, 0.0]
    m = T([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    z = m[[1, 1], [0, 1]]  # (m10, m11)
    (gm,) = mt.autograd.grad((z * z).sum(), [m], create_graph=True)
    assert gm.tolist() == [[0.0, 0.0], [6.0, 8.0]]
    (ggm,) = mt.autograd.grad((gm * T([[1.0, 1.0], [1.0, 3.0]])).sum(), [m])
    assert ggm.tolist() == [[0.0, 0.0], [2.0, 6.0]]


# -- index keys ---------------------------------------------------------------------------------------
def test_an_empty_index_list_selects_nothing():
    """PyTorch: x[[]] has 0 rows and x[:, []] 0 columns (numpy alone would read [] as a float
    index and refuse it); the gradient of nothing selected is zeros."""
    x = T(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x[[]].shape == (0, 3) and x[:, []].shape == (2, 0) and x[[], 1].shape == (0,)
    (x[[]].sum() + x[:, []].sum()).backward()
    assert x.grad.tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("key", [[0.0, 1.0], [0.5], [[1.0], [0.0]]])
def test_a_list_of_floats_is_refused_as_an_index_not_truncated(key):
    """A deliberate difference from PyTorch, which truncates a float list (``x[[0.5]]`` is row 0,
    silently): a float index is almost always a mistake (``n / 2`` for ``n // 2``), and rows picked
    by truncation would be a wrong number without a word. microtorch refuses it, as numpy does, and
    says which tensor was being indexed."""
    x = T(np.arange(6.0).reshape(3, 2))
    with pytest.raises(IndexError, match=r"integer \(or boolean\) type \(indexing a tensor of shape \[3, 2\]\)"):
        x[key]


def test_an_index_tensor_inside_a_tuple_key_changed_in_place_makes_backward_raise():
    """x[i, :] saves i, as PyTorch does: writing into i before backward would scatter the gradient
    to other rows, so backward raises the version error instead (as for x[i] alone)."""
    for key_of in (lambda i: (i, slice(None)), lambda i: (slice(None), i), lambda i: i):
        x = T(np.arange(6.0).reshape(2, 3), requires_grad=True)
        i = mt.tensor([1, 0])
        y = x[key_of(i)]
        i.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


# -- found on the way: an empty view one past the end of an empty input ----------------------------
def test_backward_of_an_empty_diagonal_of_an_empty_unfold_gives_zeros():
    """x (1, 2) unfolded along dim 0 with size-0 windows is (2, 2, 0) (strides (2, 1, 2)); its
    diagonal -1 is empty, (0, 1), at storage offset 2, one past x's two elements — as in PyTorch.
    Nothing is read, so the gradient is zeros (PyTorch: tensor([[0., 0.]])). Backward maps the
    view onto element numbers of the empty (2, 2, 0) input, where that offset lies past the
    one-number buffer: numpy refused it ("strides is incompatible with shape ... size of buffer").
    Found by test_views.py's random view chains (hypothesis) in the eighth run's re-runs."""
    x = T(np.arange(2.0).reshape(1, 2), requires_grad=True)
    u = x.unfold(0, 0, 1)
    assert u.shape == (2, 2, 0) and u.stride() == (2, 1, 2)
    d = u.diagonal(-1)
    assert d.shape == (0, 1) and d.stride() == (2, 3) and d.storage_offset() == 2
    (d * 3.0).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0]]
    e = T(np.zeros((0, 3)), requires_grad=True)
    d2 = e.unfold(1, 2, 1).diagonal(1, 0, 2)  # PyTorch: shape (2, 0), strides (1, 4), offset 0
    assert d2.shape == (2, 0) and d2.stride() == (1, 4) and d2.storage_offset() == 0
    d2.sum().backward()
    assert e.grad.shape == (0, 3)
