"""Tests written to kill mutants that survived the fourth mutation run (issue #21) over
``functions/shape.py``, ``linalg.py``, ``inplace.py``, ``inplace_checks.py``,
``inplace_ops.py`` and ``elementwise.py`` (verdicts in ``tests/mutation-run-4/ops.md``).

Each test asserts real behaviour with expected values worked out independently (numpy written
out by hand, finite differences in float64, the docstrings' formulas, PyTorch's documented
messages); none copies its expected value from the code under test.
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
import microtorch.functions as F


def T(a, dtype=np.float64, requires_grad=False):
    return mt.tensor(np.asarray(a, dtype=dtype), requires_grad=requires_grad)


def backward_ops(loss):
    """The ops run during ``loss.backward()``, in order (read from the trace)."""
    with mt.trace() as tr:
        loss.backward()
    return [e["op"] for e in tr.filter("op")]


# -- inplace_ops.IndexPut_ ----------------------------------------------------------------------
def test_index_put_backward_masks_x_only_when_x_needs_a_gradient():
    """x a constant, v requires grad: dL/dv = g at the written position (here 1, L = Σ x);
    x's masked gradient g ⊙ keep would be one Mul no one reads."""
    x = T([1.0, 2.0, 3.0])
    v = T([5.0], requires_grad=True)
    x[[1]] = v
    assert x.tolist() == [1.0, 5.0, 3.0]
    ops = backward_ops(x.sum())
    assert "Mul" not in ops, ops
    assert v.grad.tolist() == [1.0]


def test_index_put_backward_gathers_v_only_when_v_needs_a_gradient():
    """v a constant, x = w.clone() requires grad: dL/dw = 1 except at the written position;
    v's gradient g[key] would be one Index op no one reads."""
    w = T([1.0, 2.0, 3.0], requires_grad=True)
    x = w.clone()
    x[[1]] = T([7.0])
    ops = backward_ops(x.sum())
    assert "Index" not in ops, ops
    assert w.grad.tolist() == [1.0, 0.0, 1.0]


# -- inplace_ops.Copy_, Div_ --------------------------------------------------------------------
def test_copy_of_a_constant_sends_zeros_back_and_computes_nothing_for_the_constant():
    """x ← src with src a broadcast float32 constant: dL/dw = 0 (x was overwritten); src's
    gradient (a Sum down to [3], a cast to float32) would be work no one reads."""
    w = T(np.zeros((2, 3)), requires_grad=True)
    x = w.clone()
    x.copy_(mt.tensor([1.0, 2.0, 3.0], dtype=mt.float32))
    assert x.dtype == mt.float64 and x.tolist() == [[1.0, 2.0, 3.0]] * 2
    ops = backward_ops(x.sum())
    assert "Sum" not in ops and "Cast" not in ops, ops
    assert w.grad.tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("x_dtype, src_dtype", [(mt.float64, mt.float32), (mt.float32, mt.float64),
                                                (mt.float64, mt.float64)])
def test_copy_sends_src_its_gradient_summed_and_in_its_own_dtype(x_dtype, src_dtype):
    """x (2, 3) ← src (3,): dL/dsrc = Σ_rows c for L = Σ c·x (worked by hand: [5, 7, 9]), in
    src's dtype, whatever x's is (PyTorch: a gradient has its input's dtype)."""
    w = mt.tensor(np.zeros((2, 3)), dtype=x_dtype, requires_grad=True)
    src = mt.tensor([1.0, 2.0, 3.0], dtype=src_dtype, requires_grad=True)
    x = w.clone()
    x.copy_(src)
    (x * mt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=x_dtype)).sum().backward()
    assert src.grad.dtype == src_dtype and src.grad.tolist() == [5.0, 7.0, 9.0]
    assert w.grad.dtype == x_dtype and w.grad.tolist() == [[0.0] * 3] * 2


def test_div_in_place_of_a_constant_by_a_tensor_computes_only_the_divisors_gradient():
    """x ← x / o with x = [6, 8] a constant, o = [2, 4]: dL/do = −x_old / o² = [−1.5, −0.5]
    (L = Σ x). The only quotient backward needs is that one; g / o (x's gradient) is not."""
    x = T([6.0, 8.0])
    o = T([2.0, 4.0], requires_grad=True)
    x.div_(o)
    assert x.tolist() == [3.0, 2.0]
    ops = backward_ops(x.sum())
    assert ops.count("Div") == 1, ops
    assert o.grad.tolist() == [-1.5, -0.5]


# -- inplace.sub_, div_: the refusals -------------------------------------------------------------
@pytest.mark.parametrize("other", [1, 2.5, mt.tensor([1, 0])], ids=["int", "float", "int-tensor"])
def test_sub_in_place_on_a_bool_tensor_gives_pytorchs_bool_message(other):
    t = mt.tensor([True, False])
    with pytest.raises(RuntimeError, match=r"^Subtraction, the `-` operator, with a bool tensor is not supported"):
        t.sub_(other)
    assert t.tolist() == [True, False]


def test_sub_in_place_refuses_a_float_alpha_for_an_integer_tensor():
    """alpha = 2.0 is a float, even though it equals 2: t − 2.0·o is a float result."""
    for alpha in (2.0, 1.5):
        t = mt.tensor([5, 6])
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
            t.sub_(1, alpha=alpha)
        assert t.tolist() == [5, 6]
    t = mt.tensor([5, 6])
    t.sub_(1, alpha=2)
    assert t.tolist() == [3, 4]


def test_div_in_place_refuses_a_non_number_with_a_type_error_even_on_an_integer_tensor():
    for t in (mt.tensor([1, 2]), mt.tensor([1.0, 2.0])):
        with pytest.raises(TypeError, match="in-place ops take tensors or real numbers, got str"):
            t.div_("a")


def test_copy_of_python_numbers_keeps_the_tensors_precision():
    """A list src is made a tensor of t's dtype: 0.1 into float64 stays the double 0.1 (not
    float32's 0.10000000149…), 2⁵³ + 1 into int64 stays exact."""
    x = mt.zeros(3, dtype=mt.float64)
    x.copy_([0.1, 0.2, 0.3])
    assert x.tolist() == [0.1, 0.2, 0.3]
    n = mt.zeros(2, dtype=mt.int64)
    n.copy_([2 ** 53 + 1, -7])
    assert n.tolist() == [2 ** 53 + 1, -7]


def test_copy_names_itself_when_src_does_not_broadcast():
    with pytest.raises(RuntimeError, match=r"^copy_: output with shape \[2, 3\] doesn't match the broadcast shape"):
        mt.zeros(2, 3).copy_(mt.ones(2, 2))


def test_mul_in_place_by_a_constant_tensor_sends_x_the_operand_as_its_gradient():
    """x = w.clone(), x ← x · o with o = [2, 3] a constant: dL/dw = o (L = Σ x)."""
    w = T([1.0, 1.0], requires_grad=True)
    x = w.clone()
    x.mul_(T([2.0, 3.0]))
    x.sum().backward()
    assert w.grad is not None and w.grad.tolist() == [2.0, 3.0]


def test_mul_in_place_of_a_constant_by_a_tensor_computes_only_the_operands_gradient():
    """x = [6, 8] a constant, x ← x · o: dL/do = x_old = [6, 8]; the one product backward
    needs is g · x_old (g · o, x's gradient, is not needed)."""
    x = T([6.0, 8.0])
    o = T([2.0, 4.0], requires_grad=True)
    x.mul_(o)
    ops = backward_ops(x.sum())
    assert ops.count("Mul") == 1, ops
    assert o.grad.tolist() == [6.0, 8.0]


def test_mul_in_place_by_a_constant_tensor_needs_no_old_values():
    """o needs no gradient, so x's old values are not kept (PyTorch keeps them only for o's
    gradient): backward must not look for them."""
    w = T([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = w.clone()
    x.mul_(T([10.0, 100.0]))
    (x * T([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert w.grad.tolist() == [[10.0, 200.0], [30.0, 400.0]]


# -- shape.View -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3,), (2, 1), (1, 3, 1)])
def test_view_to_a_smaller_size_is_a_size_error_even_when_it_divides_the_size(shape):
    """Without a -1 the sizes must multiply to the 6 elements exactly; 3 and 2 divide 6
    but are not 6: PyTorch's "shape '[3]' is invalid for input of size 6", not the stride error."""
    x = mt.arange(6.0)
    with pytest.raises(RuntimeError, match=rf"^shape '\[{', '.join(map(str, shape))}\]' is invalid for input of size 6"):
        x.view(*shape)


# -- linalg.Linear: the bias gradient --------------------------------------------------------------
def _linear_leaves(x_shape, rng=np.random.default_rng(4)):
    return (T(rng.standard_normal(x_shape), requires_grad=True), T(rng.standard_normal((2, 3)), requires_grad=True),
            T(rng.standard_normal(2), requires_grad=True))


@pytest.mark.parametrize("x_shape", [(3,), (4, 3), (2, 4, 3)])
def test_linear_bias_gradient_with_create_graph_is_one_sum_over_the_rows_or_g_itself(x_shape):
    """dL/db = G summed over every row dimension (docstring): with L = Σ y, the number of
    rows, for each of the 2 outputs. A 1-D x has one row: G itself, no Sum; otherwise one Sum
    of G's leading dimensions and nothing more (no Reshape)."""
    x, W, b = _linear_leaves(x_shape)
    y = F.linear(x, W, b)
    with mt.trace() as tr:
        gb, = mt.autograd.grad(y.sum(), [b], create_graph=True)
    ops = [e["op"] for e in tr.filter("op")]
    rows = int(np.prod(x_shape[:-1]))
    assert gb.shape == (2,) and gb.tolist() == [float(rows)] * 2
    tail = ops[len(ops) - 1 - ops[::-1].index("Matmul") + 1:]  # after the weight's product
    assert tail == ([] if len(x_shape) == 1 else ["Sum"]), ops


def test_linear_bias_gradient_of_a_1d_input_costs_only_its_grad_block():
    """Without create_graph (numpy_backward): for a 1-D x, dL/db is g itself, so a layer
    with a bias allocates in backward exactly one b-sized block (b.grad) more than without."""
    def alloc_sizes(with_bias):
        x = T([1.0, 2.0, 3.0], requires_grad=True)
        W = T(np.ones((2, 3)), requires_grad=True)
        b = T([0.5, -0.5], requires_grad=True) if with_bias else None
        loss = F.linear(x, W, b).sum()
        with mt.trace() as tr:
            loss.backward()
        if with_bias:
            assert b.grad.tolist() == [1.0, 1.0]
        return sorted(e["nbytes"] for e in tr.events if e["kind"] == "alloc")
    with_bias, without = alloc_sizes(True), alloc_sizes(False)
    assert sorted(without + [16]) == with_bias, (with_bias, without)


# -- elementwise.Abs --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [mt.float32, mt.float16])
def test_abs_gradient_keeps_the_inputs_dtype(dtype):
    """d|x|/dx = sign(x): [−1, 0, 1] at [−2, 0, 3], in x's own dtype (not float64)."""
    x = mt.tensor([-2.0, 0.0, 3.0], dtype=dtype, requires_grad=True)
    x.abs().sum().backward()
    assert x.grad.dtype == dtype and x.grad.tolist() == [-1.0, 0.0, 1.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_of_a_batch_of_sequences_is_exactly_linear_of_its_rows(dtype):
    """y = x Wᵀ for x (5, 7, 64) is one product over the 35 flattened rows (docstring), so
    it equals, bit for bit, linear of the rows as a (35, 64) matrix (a batched matmul sums
    in another order: it differs in the last bits)."""
    rng = np.random.default_rng(7)
    x = mt.tensor(rng.standard_normal((5, 7, 64)).astype(dtype))
    W = mt.tensor(rng.standard_normal((33, 64)).astype(dtype))
    b = mt.tensor(rng.standard_normal(33).astype(dtype))
    rows = F.linear(x.reshape(35, 64), W, b).numpy().reshape(5, 7, 33)
    np.testing.assert_array_equal(F.linear(x, W, b).numpy(), rows)
    np.testing.assert_allclose(rows, x.numpy() @ W.numpy().T + b.numpy(), rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


# -- inplace.add_, inplace_ops.Add_, _zeros_like ------------------------------------------------------
def test_add_in_place_refuses_a_float_alpha_for_an_integer_tensor():
    t = mt.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t.add_(1, alpha=0.5)
    assert t.tolist() == [1, 2]  # refused before any byte was written


@pytest.mark.parametrize("alpha", [1, 2, -3.0])
def test_add_in_place_sends_the_operand_alpha_times_the_gradient(alpha):
    """x ← x + α·o: dL/dx = 1, dL/do = α (L = Σ x); for α = 1 the gradient is g itself, no
    product."""
    w = T([1.0, 2.0], requires_grad=True)
    o = T([10.0, 20.0], requires_grad=True)
    x = w.clone()
    x.add_(o, alpha=alpha)
    assert x.tolist() == [1.0 + alpha * 10.0, 2.0 + alpha * 20.0]
    ops = backward_ops(x.sum())
    assert o.grad.tolist() == [float(alpha)] * 2 and w.grad.tolist() == [1.0, 1.0]
    if alpha == 1:
        assert "Mul" not in ops, ops


@pytest.mark.parametrize("write", ["fill_", "zero_", "copy_"])
def test_overwriting_in_place_sends_zeros_in_the_tensors_own_dtype(write):
    """x overwritten: dL/dw = 0, in w's dtype (float32 and float16, not numpy's float64)."""
    for dtype in (mt.float32, mt.float16):
        w = mt.tensor([1.0, 2.0, 3.0], dtype=dtype, requires_grad=True)
        x = w.clone()
        {"fill_": lambda: x.fill_(7.0), "zero_": lambda: x.zero_(),
         "copy_": lambda: x.copy_(mt.tensor([4.0, 5.0, 6.0], dtype=dtype))}[write]()
        x.sum().backward()
        assert w.grad.dtype == dtype and w.grad.tolist() == [0.0, 0.0, 0.0]


# -- shape.stack, Cat ---------------------------------------------------------------------------------
def test_stack_and_cat_name_themselves_when_the_dim_is_out_of_range():
    with pytest.raises(IndexError, match=r"^stack: dimension 3 is out of range for a new dimension of a tensor with 1 dimension"):
        mt.stack([mt.ones(2), mt.ones(2)], dim=3)
    with pytest.raises(IndexError, match=r"^cat: dimension 2 is out of range for a tensor with 1 dimension"):
        mt.cat([mt.ones(2), mt.ones(2)], dim=2)


def test_stack_of_a_single_tensor_adds_the_new_dimension():
    x = T([1.0, 2.0], requires_grad=True)
    for dim, shape in ((0, (1, 2)), (-1, (2, 1)), (1, (2, 1))):
        assert F.stack([x], dim=dim).shape == shape
    F.stack([x], dim=-1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_cat_of_a_single_tensor_is_a_copy_and_zero_d_tensors_are_refused_by_cat():
    x = T([1.0, 2.0], requires_grad=True)
    y = F.cat([x])
    assert y.tolist() == [1.0, 2.0] and y._storage is not x._storage
    (y * T([3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]
    with pytest.raises(RuntimeError, match="^cat: "):  # PyTorch: zero-dimensional tensors cannot be concatenated
        F.cat([mt.tensor(1.0), mt.tensor(2.0)])


# -- elementwise: floor_divide and remainder name themselves ---------------------------------------------
@pytest.mark.parametrize("op, name", [(lambda a, b: a // b, "floor_divide"), (lambda a, b: a % b, "remainder")],
                         ids=["floor_divide", "remainder"])
def test_floor_divide_and_remainder_name_themselves_in_a_broadcast_error(op, name):
    with pytest.raises(RuntimeError, match=rf"^{name}: shapes \[2\] and \[3\] cannot be broadcast together"):
        op(mt.ones(2), mt.ones(3))


# -- inplace._inplace / _region: a view reaching outside its base ------------------------------------
def _view_outside_its_base():
    """d = w[1:3].detach() is a base (no _base) whose elements are storage elements 1, 2;
    an as_strided view of it at storage offset 0 reaches element 0, which is not d's."""
    w = mt.arange(4.0, dtype=mt.float64)
    v = w[1:3].detach().as_strided((2,), (1,), 0)
    return w, v


def test_an_in_place_write_into_a_view_reaching_outside_its_base_is_refused():
    w, v = _view_outside_its_base()
    with pytest.raises(RuntimeError, match="in-place write into a view that reaches outside its base's elements"):
        v.add_(T([1.0, 1.0], requires_grad=True))


def test_a_refused_write_into_a_view_reaching_outside_its_base_leaves_the_bytes_unchanged():
    # (the refusal came after the write: w was [1, 2, 2, 3] and its version bumped)
    w, v = _view_outside_its_base()
    version = w._storage.version
    with pytest.raises(RuntimeError, match="reaches outside its base's elements"):
        v.add_(T([1.0, 1.0], requires_grad=True))
    assert w.tolist() == [0.0, 1.0, 2.0, 3.0] and w._storage.version == version


# -- inplace._set_history: retained gradients -----------------------------------------------------------
def test_an_in_place_write_does_not_make_a_tensor_retain_its_gradient():
    """A non-leaf that never called retain_grad() has no .grad after backward (PyTorch), also
    after an in-place write gave it a new history."""
    w = T([1.0, 2.0], requires_grad=True)
    y = w * 1
    y.mul_(2)
    y.sum().backward()
    assert y.grad is None and w.grad.tolist() == [2.0, 2.0]


def test_an_in_place_write_into_a_detached_tensor_that_retained_its_gradient():
    """y.retain_grad(), then y.detach_() (no history left), then y ← y · o with o requiring
    grad: dL/do = y's old values [1, 2] (L = Σ y)."""
    w = T([1.0, 2.0], requires_grad=True)
    y = w * 1
    y.retain_grad()
    y.detach_()
    o = T([3.0, 4.0], requires_grad=True)
    y.mul_(o)
    y.sum().backward()
    assert o.grad.tolist() == [1.0, 2.0]


# -- inplace._binary / _as_operand / inplace_checks._check_broadcast ------------------------------------
def test_in_place_broadcast_errors_name_the_op_and_say_none_when_shapes_clash():
    with pytest.raises(RuntimeError, match=r"^add_: output with shape \[2, 3\] doesn't match the broadcast "
                                           r"shape \(none\) \(the other operand has shape \[4\]"):
        mt.zeros(2, 3).add_(mt.ones(4))
    with pytest.raises(RuntimeError, match=r"^mul_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        mt.zeros(3).mul_(mt.ones(2, 3))


@pytest.mark.parametrize("method", ["add_", "mul_"])
def test_an_operand_of_another_dtype_gets_its_gradient_in_its_own_dtype(method):
    """float32 x ← x op o for a float64 o: o is converted to float32 (a differentiable cast),
    so o.grad is float64 and w.grad float32; dL/do = 1 (add) or x_old = [1, 2] (mul)."""
    w = mt.tensor([1.0, 2.0], dtype=mt.float32, requires_grad=True)
    o = mt.tensor([3.0, 4.0], dtype=mt.float64, requires_grad=True)
    x = w.clone()
    getattr(x, method)(o)
    assert x.dtype == mt.float32
    x.sum().backward()
    assert o.grad.dtype == mt.float64 and o.grad.tolist() == ([1.0, 1.0] if method == "add_" else [1.0, 2.0])
    assert w.grad.dtype == mt.float32 and w.grad.tolist() == ([1.0, 1.0] if method == "add_" else [3.0, 4.0])


def test_an_integer_operand_is_converted_to_the_tensors_integer_dtype_exactly():
    t = mt.zeros(2, dtype=mt.int64)
    t.add_(mt.tensor([2 ** 24 + 1, -3], dtype=mt.int32))  # 2²⁴ + 1 is no float32
    assert t.tolist() == [2 ** 24 + 1, -3]


def test_a_numpy_scalar_operand_is_weak_like_a_python_number():
    """x (float32) ← x · np.float64(0.1): computed in float32, x · float32(0.1), as for the
    Python number 0.1 (PyTorch: a scalar never sets the computation's dtype); in float64 and
    rounded back, this x gives another float32."""
    x0 = np.array([-0.7037352323532104, 0.04132597893476486, -1.2459110021591187], dtype=np.float32)
    expected = x0 * np.float32(0.1)
    assert (expected != (x0.astype(np.float64) * 0.1).astype(np.float32)).any()  # the case tells them apart
    for scalar in (np.float64(0.1), 0.1):
        x = mt.tensor(x0)
        x.mul_(scalar)
        np.testing.assert_array_equal(x.numpy(), expected)


@pytest.mark.parametrize("other, name", [(mt.tensor([1.0, 2.0], dtype=mt.float64), "Double"),
                                         (mt.tensor([1.0, 2.0], dtype=mt.float16), "Half"),
                                         (mt.tensor([1.0, 2.0]), "Float"), (2, "Float"), (2.5, "Float")],
                         ids=["double", "half", "float", "int", "float-number"])
def test_integer_div_in_place_names_pytorchs_result_type(other, name):
    """PyTorch: int64.div_(float64 tensor) says "result type Double can't be cast to the desired
    output type Long" (the promoted type), a number or an integer divisor "Float"."""
    t = mt.tensor([1, 2])
    with pytest.raises(RuntimeError, match=rf"^result type {name} can't be cast to the desired output type Long$"):
        t.div_(other)
    assert t.tolist() == [1, 2]


@pytest.mark.oracle
def test_integer_div_in_place_result_type_matches_pytorch():
    torch = pytest.importorskip("torch")
    for dt, tdt in ((mt.float64, torch.float64), (mt.float16, torch.float16), (mt.float32, torch.float32)):
        with pytest.raises(RuntimeError) as theirs:
            torch.tensor([1, 2]).div_(torch.tensor([1.0, 2.0], dtype=tdt))
        with pytest.raises(RuntimeError) as ours:
            mt.tensor([1, 2]).div_(mt.tensor([1.0, 2.0], dtype=dt))
        assert str(ours.value) == str(theirs.value)


# -- inplace_checks._check_written: the overlap message ---------------------------------------------------
@pytest.mark.parametrize("make, where", [
    (lambda: mt.zeros(3).expand(2, 3), "shape [2, 3], strides [0, 1]: dimension 0 has stride 0"),
    (lambda: mt.zeros(3).expand(1, 2, 3), "shape [1, 2, 3], strides [0, 0, 1]: dimension 1 has stride 0"),
    (lambda: mt.zeros(3).expand(2, 2, 3), "shape [2, 2, 3], strides [0, 0, 1]: dimension 0 has stride 0, "
                                          "dimension 1 has stride 0"),
    (lambda: mt.arange(4.0).unfold(0, 2, 1), "shape [3, 2], strides [1, 1]: its elements overlap"),
], ids=["one-stride-0", "size-1-not-listed", "two-stride-0", "unfold"])
def test_writing_into_an_overlapping_tensor_says_which_dimensions_overlap(make, where):
    """The dimensions listed are those with stride 0 that repeat an element (size > 1)."""
    with pytest.raises(RuntimeError) as info:
        make().add_(1)
    assert str(info.value).endswith(f"({where})"), str(info.value)


# -- linalg.Matmul: backward of the general (not 2-D @ 2-D) case ------------------------------------------
def test_matmul_backward_of_a_plain_non_contiguous_b_gives_a_contiguous_gradient():
    """b = x[:, ::2] is neither contiguous nor a transposed matrix: its gradient aᵀ G
    comes out contiguous (only a W.T operand takes the (Gᵀ a)ᵀ route)."""
    a = T(np.arange(6.0).reshape(2, 3), requires_grad=True)
    x = T(np.arange(24.0).reshape(3, 8), requires_grad=True)
    b = (x * 1)[:, ::2]
    b.retain_grad()
    (a @ b).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), np.repeat(a.detach().numpy().sum(0)[:, None], 4, axis=1))
    assert b.grad.is_contiguous()


def test_matmul_backward_of_a_vector_times_a_matrix_needs_no_sum():
    """a (3,) @ B (3, 2): dL/da = G Bᵀ for the one row, reshaped back to (3,): nothing to sum."""
    a = T([1.0, 2.0, 3.0], requires_grad=True)
    B = T(np.arange(6.0).reshape(3, 2), requires_grad=True)
    ops = backward_ops((a @ B).sum())
    assert "Sum" not in ops, ops
    assert a.grad.tolist() == [1.0, 5.0, 9.0] and B.grad.tolist() == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]


def test_matmul_backward_of_a_batch_times_a_matrix_reshapes_only_to_sum_the_batch():
    """a (2, 3, 4) @ B (4, 5): dL/da = G Bᵀ already has a's shape (no reshape, no unsqueeze);
    dL/dB = Σ_batch aᵀ G, one sum (and its one reshape) over the batch."""
    a = T(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    B = T(np.arange(20.0).reshape(4, 5), requires_grad=True)
    ops = backward_ops((a @ B).sum())
    assert "Unsqueeze" not in ops and ops.count("Reshape") == 1 and ops.count("Sum") == 1, ops
    np.testing.assert_array_equal(a.grad.numpy(), np.broadcast_to(B.detach().numpy().sum(1), (2, 3, 4)))
    np.testing.assert_array_equal(B.grad.numpy(), np.broadcast_to(a.detach().numpy().sum((0, 1))[:, None], (4, 5)))


# -- shape.Transpose, Unsqueeze ---------------------------------------------------------------------------
def test_transpose_names_itself_when_either_dim_is_out_of_range():
    x = mt.zeros(2, 3)
    for dims in ((5, 0), (0, 5)):
        with pytest.raises(IndexError, match=r"^transpose: dimension 5 is out of range"):
            x.transpose(*dims)


def test_unsqueeze_backward_drops_only_the_new_dimension():
    x = T(np.ones((1, 3)), requires_grad=True)
    x.unsqueeze(0).sum().backward()
    assert x.grad.shape == (1, 3)


# -- inplace_checks._check_autograd: only differentiable views rebase their base ----------------------------
def test_writing_into_a_flat_gradient_home_leaves_the_flat_buffer_out_of_the_graph():
    """A parameter's gradient home is a plain view of the flat gradient buffer, not a
    differentiable view: a recorded write into it (o requires grad) gives the home a history,
    Add_, and leaves the buffer without one."""
    from microtorch.nn.flat import FlatParameters
    flat = FlatParameters([T([1.0, 2.0], requires_grad=True)])
    home = flat.homes[0]
    home.add_(T([3.0, 4.0], requires_grad=True))
    assert home.grad_fn is not None and home.grad_fn.name == "Add_Backward"
    assert flat.grad.grad_fn is None and not flat.grad.requires_grad


def test_permute_refuses_a_dim_out_of_range_rather_than_wrapping_it():
    x = mt.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"^permute: dims \[0, 3\] must be a permutation of 0\.\.1"):
        x.permute(0, 3)  # 3 % 2 would be 1: (0, 1), a valid permutation
    with pytest.raises(RuntimeError, match=r"^permute: dims \[1, 2\] must be a permutation of 0\.\.1"):
        x.permute(1, 2)  # 2 = ndim is out of range too (valid: -2 .. 1)
    assert x.permute(-1, 0).shape == (3, 2) and x.permute(-1, -2).shape == (3, 2)
    assert mt.tensor(5.0).permute().shape == ()  # a 0-d tensor: no dims


def test_squeeze_names_itself_when_the_dim_is_out_of_range():
    with pytest.raises(IndexError, match=r"^squeeze: dimension 5 is out of range for a tensor with 2 dimension"):
        mt.zeros(2, 1).squeeze(5)


# -- linalg.Matmul.forward: the 2-D fast path is taken only by 2-D @ 2-D with matching inner sizes ---------
@pytest.mark.parametrize("sa, sb", [((2, 4, 4), (4, 5)), ((2, 3), (3, 3, 5)), ((2, 3), (3, 5))],
                         ids=["3d@2d", "2d@3d", "2d@2d"])
def test_matmul_values_for_batched_and_plain_operands(sa, sb):
    """Shapes where a.shape[1] == b.shape[0] also for a 3-D operand: values as numpy's matmul."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    np.testing.assert_allclose((T(a) @ T(b)).numpy(), a @ b, rtol=1e-12, atol=1e-12)


def test_matmul_of_mismatched_inner_sizes_is_microtorchs_error_not_numpys():
    with pytest.raises(RuntimeError, match=r"^matmul: shapes \[2, 3\] and \[4, 3\] cannot be multiplied \(inner dimensions 3 != 4\)"):
        mt.ones(2, 3) @ mt.ones(4, 3)
