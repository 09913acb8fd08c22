"""Elementwise ops at their edges, without torch: PyTorch's conventions where a derivative is
not defined (ties, clamp bounds, |x| at 0), gradient dtypes, and the layout of a clone.
Mutation testing (`make mutate`, tests/README.md) found these pinned only by the oracle."""
import numpy as np
import pytest

import microtorch as mt


def leaf(values, dtype=mt.float64):
    return mt.tensor(values, dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_ties_split_the_gradient_evenly(op):
    a, b = leaf([1.0, 2.0, 3.0]), leaf([1.0, 5.0, 0.0])
    getattr(mt, op)(a, b).sum().backward()
    wins_a = [0.5, 0.0, 1.0] if op == "maximum" else [0.5, 1.0, 0.0]
    assert a.grad.tolist() == wins_a and b.grad.tolist() == [1 - w for w in wins_a]


def test_maximum_gradient_is_broadcast_back_and_keeps_the_dtype():
    a, b = leaf([[1.0], [4.0]], mt.float32), leaf([2.0, 4.0, 0.0], mt.float32)
    mt.maximum(a, b).sum().backward()
    assert a.grad.dtype == mt.float32 and b.grad.dtype == mt.float32
    assert a.grad.tolist() == [[1.0], [2.5]] and b.grad.tolist() == [1.0, 1.5, 0.0]




def test_clamp_passes_the_gradient_at_its_bounds():
    x = leaf([-2.0, -1.0, 0.0, 1.0, 2.0], mt.float32)
    x.clamp(-1.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0] and x.grad.dtype == mt.float32
    y = leaf([-1.0, 0.0, 3.0])
    y.clamp(min=0.0).sum().backward()
    assert y.grad.tolist() == [0.0, 1.0, 1.0]
    z = leaf([-1.0, 0.0, 3.0])
    z.clamp(max=0.0).sum().backward()
    assert z.grad.tolist() == [1.0, 1.0, 0.0]


def test_abs_gradient_is_the_sign_and_zero_at_zero():
    x = leaf([-2.0, 0.0, 3.0])
    (x.abs() * mt.tensor([5.0, 7.0, 11.0], dtype=mt.float64)).sum().backward()
    assert x.grad.tolist() == [-5.0, 0.0, 11.0]


def test_where_takes_a_plain_condition_and_keeps_the_gradient_dtype():
    a, b = leaf([1.0, 2.0, 3.0], mt.float32), leaf([10.0, 20.0, 30.0], mt.float32)
    out = mt.where([True, False, True], a, b)
    assert out.tolist() == [1.0, 20.0, 3.0]
    out.sum().backward()
    assert a.grad.tolist() == [1.0, 0.0, 1.0] and b.grad.tolist() == [0.0, 1.0, 0.0]
    assert a.grad.dtype == mt.float32 and b.grad.dtype == mt.float32


def test_clone_is_contiguous_even_of_a_transposed_view():
    x = mt.arange(6.0).reshape(2, 3).transpose(0, 1)
    assert not x.is_contiguous()
    c = x.clone()
    assert c.is_contiguous() and c.stride() == (2, 1) and c.tolist() == x.tolist()
    assert c.storage is not x.storage


@pytest.mark.parametrize("op", ["add", "div", "maximum"])
def test_broadcast_errors_name_the_op(op):
    with pytest.raises(RuntimeError, match=rf"^{op}: shapes \[2\] and \[3\] cannot be broadcast"):
        getattr(mt, op)(mt.ones(2), mt.ones(3))


def test_pow_zero_gradient_keeps_the_dtype_and_int_roots_are_float32():
    x = leaf([1.0, 2.0], mt.float32)
    (x ** 0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0] and x.grad.dtype == mt.float32
    r = mt.tensor([1, 4, 9]) ** 0.5
    assert r.dtype == mt.float32 and r.tolist() == [1.0, 2.0, 3.0]


def test_div_saves_the_numerator_only_when_the_denominator_needs_a_gradient():
    a, b = leaf([1.0, 2.0]), mt.tensor([4.0, 8.0], dtype=mt.float64)
    before = a.storage.refcount
    y = a / b  # dy/da = 1/b: only b is needed
    assert a.storage.refcount == before and b.storage.refcount == 2
    c = leaf([4.0, 8.0])
    z = a / c  # dz/dc = -a/c²: a is needed too
    assert a.storage.refcount == before + 1
    del y, z
