"""Tests that kill mutants mutmut left alive in microtorch/functions/inplace*.py and
strided.py (tests/README.md lists them): ``t[key] = v`` with integer-array keys
(``index_put_``), the refusal to write into read-only bytes, and ``Regather``'s weights."""
import numpy as np
import pytest

import microtorch as mt
from microtorch.functions.strided import Regather


# -- t[int-array key] = v  (index_put_) --------------------------------------------------------
def test_a_number_written_by_an_index_array_keeps_the_tensors_precision():
    x = mt.zeros(4, dtype=mt.float64)
    x[[0, 2]] = 0.1
    x[np.array([True, False, False, True])] += 0  # no-op write through a mask: values stay
    assert x.dtype == mt.float64
    assert x.numpy().tolist() == [0.1, 0.0, 0.1, 0.0]  # 0.1 as a double, not float32's 0.10000000149


def test_a_tensor_of_another_dtype_is_converted_before_index_put():
    x = mt.zeros(3, dtype=mt.int64)
    x[[1]] = mt.tensor([2 ** 24 + 1], dtype=mt.int32)  # not exactly a float32: must stay an int
    assert x.numpy().tolist() == [0, 2 ** 24 + 1, 0]
    y = mt.zeros(3, dtype=mt.float64)
    y[[0, 2]] = mt.tensor([1.5, -2.0], dtype=mt.float32)
    assert y.dtype == mt.float64 and y.numpy().tolist() == [1.5, 0.0, -2.0]


def test_index_put_gradients_reach_each_input_in_its_own_dtype():
    """y = w·1 with y[[1]] = v: dL/dw = c with position 1 zeroed, dL/dv = c[1] (worked by
    hand for L = Σ c·y); v's gradient comes back as float32, v's dtype."""
    c = np.array([1.0, 2.0, 3.0])
    w = mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64, requires_grad=True)
    v = mt.tensor([5.0], dtype=mt.float32, requires_grad=True)
    y = w * 1
    y[[1]] = v
    assert y.tolist() == [1.0, 5.0, 3.0]
    (y * mt.tensor(c)).sum().backward()
    assert w.grad.dtype == mt.float64 and w.grad.numpy().tolist() == [1.0, 0.0, 3.0]
    assert v.grad.dtype == mt.float32 and v.grad.numpy().tolist() == [2.0]


def test_index_put_of_a_constant_still_sends_the_rest_of_the_gradient_back():
    """Only x requires grad (v is a constant): dL/dx = c outside the written positions."""
    for dtype in (mt.float32, mt.float64):
        w = mt.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=dtype, requires_grad=True)
        y = w * 1
        y[np.array([[True, False], [False, True]])] = 0.0
        c = np.array([[10.0, 20.0], [30.0, 40.0]])
        (y * mt.tensor(c, dtype=dtype)).sum().backward()
        assert w.grad.dtype == dtype
        assert w.grad.numpy().tolist() == [[0.0, 20.0], [30.0, 0.0]]


def test_index_put_refuses_an_input_that_partly_overlaps_the_written_tensor():
    x = mt.arange(5.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        x[[1, 2, 3]] = x[0:3]
    assert x.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # refused before any byte was written


@pytest.mark.oracle
def test_index_put_overlap_refusal_matches_pytorch():
    torch = pytest.importorskip("torch")
    xt = torch.arange(5.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        xt[[1, 2, 3]] = xt[0:3]


def test_index_put_on_a_leaf_that_requires_grad_names_the_op():
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"a leaf Variable .*\(index_put_ on a tensor created"):
        w[[0]] = 5.0


# -- read-only bytes -----------------------------------------------------------------------------
def test_writing_into_a_read_only_file_mapping_says_so(tmp_path):
    path = tmp_path / "w.npz"
    mt.save({"w": mt.arange(6.0)}, path)
    m = mt.load(path, mmap=True)
    for write in (lambda: m["w"].add_(1), lambda: m["w"][1:3].mul_(2), lambda: m["w"].__setitem__([0], 5.0)):
        with pytest.raises(RuntimeError, match="read-only mapping of .*mmap='c'"):
            write()
    assert m["w"].numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_an_expanded_heap_tensor_is_refused_for_its_overlap_not_an_attribute_error():
    """A tensor over a numpy array (``from_numpy``: no allocator block) expanded: its data is
    read-only because it is a broadcast, which is the overlap refusal's business."""
    e = mt.from_numpy(np.zeros((1, 3))).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.add_(1)
    row = mt.from_numpy(np.zeros((1, 3))).expand(2, 3)[0]  # no overlap left: writable
    row.add_(1)
    assert row.numpy().tolist() == [1.0, 1.0, 1.0]


# -- Regather (as_strided's backward) -----------------------------------------------------------
def _regather_matrix(n_in, src, dst, w_src, w_dst):
    """z = M g for Regather: M[j, i] = w_dst[j] · w_src[i] · [src[i] == dst[j]]."""
    M = np.zeros((dst.size, n_in))
    for j, d in enumerate(dst.ravel()):
        for i, s in enumerate(src.ravel()):
            if s == d:
                M[j, i] = w_dst.ravel()[j] * w_src.ravel()[i]
    return M


def test_regather_forward_and_backward_apply_both_weights():
    """Regather is linear, z = M g; its backward must be Mᵀ (with the weights swapped onto
    the right sides), checked against the matrix built by hand."""
    src = np.array([0, 2, 2, 1, 3])
    dst = np.array([2, 0, 1, 2, 3, 4])
    w_src = np.array([0.5, 2.0, 3.0, 0.25, 4.0])
    w_dst = np.array([1.5, -1.0, 2.0, 0.5, 3.0, 7.0])
    g0 = np.array([1.0, -2.0, 0.5, 3.0, 1.25])
    gg = np.array([0.5, 1.0, -1.0, 2.0, 0.25, 4.0])
    M = _regather_matrix(5, src, dst, w_src, w_dst)
    g = mt.tensor(g0, dtype=mt.float64, requires_grad=True)
    z = Regather.apply(g, src, dst, w_src, w_dst)
    np.testing.assert_allclose(z.detach().numpy(), M @ g0)
    (z * mt.tensor(gg)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), M.T @ gg)


def test_the_second_derivative_through_as_strided_of_an_expanded_tensor_shares_equally():
    """x = b.expand(3, 2) reads each of b's 2 elements three times; z = x.as_strided((2,), (1,))
    reads storage positions 0 and 1. The first backward gives dL/dx = g(z) at positions
    0 and 1 shared by the 3 readers: each x element gets g/3; differentiating that gradient
    again (a Regather of a Regather) must keep the 1/3 weights."""
    b = mt.tensor([1.0, 2.0], dtype=mt.float64, requires_grad=True)
    x = b.reshape(1, 2).expand(3, 2)
    z = x.as_strided((2,), (1,), 0)
    u = mt.tensor([1.0, 2.0], dtype=mt.float64, requires_grad=True)  # upstream gradient
    (gx,) = mt.grad(z, x, grad_outputs=u, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), np.tile([1.0 / 3, 2.0 / 3], (3, 1)))
    c = np.array([[1.0, 10.0], [100.0, 1000.0], [0.5, 5.0]])
    (gu,) = mt.grad((gx * mt.tensor(c)).sum(), u)
    np.testing.assert_allclose(gu.numpy(), c.sum(axis=0) / 3)


# -- clamp_ -----------------------------------------------------------------------------------
def test_clamp_in_place_refuses_a_tensor_bound_on_either_side():
    x = mt.tensor([-1.0, 0.5, 2.0])
    for kwargs in ({"min": mt.tensor(0.0)}, {"max": mt.tensor(1.0)}, {"min": 0.0, "max": mt.tensor(1.0)},
                   {"min": mt.tensor(0.0), "max": 1.0}):
        with pytest.raises(TypeError, match="clamp_: microtorch takes numbers for min and max"):
            x.clamp_(**kwargs)
    assert x.tolist() == [-1.0, 0.5, 2.0]


def test_clamp_in_place_checks_the_result_type_of_max_too():
    x = mt.arange(5)  # int64
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        x.clamp_(max=2.5)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        x.clamp_(min=0, max=2.5)
    assert x.tolist() == [0, 1, 2, 3, 4]
    x.clamp_(min=1, max=3)
    assert x.tolist() == [1, 1, 2, 3, 3]


@pytest.mark.oracle
def test_clamp_in_place_result_type_refusal_matches_pytorch():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type"):
        torch.arange(5).clamp_(max=2.5)  # PyTorch names the type "long int" here, "Long" for add_


def test_clamp_in_place_on_a_leaf_that_requires_grad_names_the_op():
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"a leaf Variable .*\(clamp_ on a tensor created"):
        w.clamp_(min=0.0)


# -- read-only bytes: the engine fix that came with this file -----------------------------------
# (these two fail on the code the mutants were made from: there a read-only numpy array gave
# numpy's bare ValueError, and an expanded copy-on-write mapping was called read-only)
def test_writing_into_a_read_only_numpy_array_is_refused_clearly():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = mt.from_numpy(a)
    for write in (lambda: t.add_(1), lambda: t[1:3].zero_(), lambda: t.__setitem__([0], 5.0),
                  lambda: t.__setitem__(0, 5.0), lambda: t.reshape(1, 4).expand(2, 4)[0].mul_(2)):
        with pytest.raises(RuntimeError, match=r"read-only numpy array .*\.clone\(\)"):
            write()
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    w = mt.from_numpy(np.array(a))  # a writeable copy: fine
    w.add_(1)
    assert w.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_an_expanded_copy_on_write_mapping_is_not_called_read_only(tmp_path):
    """Under mmap='c' the bytes are writeable; an expand is numpy-read-only only because it
    is a broadcast: a row of it may be written, the whole expand overlaps itself."""
    path = tmp_path / "w.npz"
    mt.save({"w": mt.arange(3.0)}, path)
    c = mt.load(path, mmap="c")
    row = c["w"].reshape(1, 3).expand(2, 3)[0]
    row.add_(1)
    assert c["w"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        c["w"].reshape(1, 3).expand(2, 3).add_(1)
    r = mt.load(path, mmap=True)  # read-only: even a row of its expand says why
    with pytest.raises(RuntimeError, match="read-only mapping of .*mmap='c'"):
        r["w"].reshape(1, 3).expand(2, 3)[0].add_(1)
    assert mt.load(path)["w"].tolist() == [0.0, 1.0, 2.0]  # the file is unchanged


# -- the floating-only unary methods and the derived in-place classes ----------------------------
# (made at import time by _floating_only and inplace_of: mutmut's coverage pass, which starts
# after the import, sees no test calling them and reports their mutants as "no tests")
_UNARY = {  # method: (f, f' in terms of x), by hand
    "exp_": (np.exp, np.exp),
    "sigmoid_": (lambda x: 1 / (1 + np.exp(-x)), lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2),
    "tanh_": (np.tanh, lambda x: 1 / np.cosh(x) ** 2),
    "sqrt_": (np.sqrt, lambda x: 0.5 / np.sqrt(x)),
}


@pytest.mark.parametrize("method", sorted(_UNARY))
def test_floating_only_methods_write_f_of_x_and_differentiate_it(method):
    f, df = _UNARY[method]
    data = np.array([[0.25, 1.0, 2.5], [0.5, 3.0, 0.125]])
    c = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
    x = mt.tensor(data, dtype=mt.float64, requires_grad=True)
    y = x * 1
    out = getattr(y, method)()
    assert out is y and y._storage is not x._storage
    np.testing.assert_allclose(y.detach().numpy(), f(data), rtol=1e-12)
    (y * mt.tensor(c)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), c * df(data), rtol=1e-12)


@pytest.mark.parametrize("method", sorted(_UNARY))
def test_floating_only_methods_refuse_an_integer_tensor_and_leave_it(method):
    t = mt.tensor([1, 4, 9])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        getattr(t, method)()
    assert t.tolist() == [1, 4, 9]
    w = mt.tensor([1.0, 4.0], requires_grad=True)  # the method passes its own name along
    with pytest.raises(RuntimeError, match=rf"a leaf Variable .*\({method} on a tensor created"):
        getattr(w, method)()


@pytest.mark.oracle
@pytest.mark.parametrize("method", sorted(_UNARY))
def test_floating_only_refusal_matches_pytorch(method):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        getattr(torch.tensor([1, 4, 9]), method)()


@pytest.mark.parametrize("method", sorted(_UNARY))
def test_floating_only_methods_are_named_and_documented_for_their_op(method):
    m = getattr(mt.Tensor, method)
    assert m.__name__ == method
    assert f"``t = t.{method[:-1]}()``, in place" in m.__doc__


# what each derived class's backward reads, from the math: d exp = exp, d sigmoid = s(1 - s),
# d tanh = 1 - tanh², d sqrt = 1/(2 sqrt), relu's mask is (out > 0); d(-x) = -1 reads nothing
_READS = {"Exp_": "the output", "Sigmoid_": "the output", "Tanh_": "the output", "Sqrt_": "the output",
          "Relu_": "the output", "Neg_": "the incoming gradient only"}


@pytest.mark.parametrize("name", sorted(_READS))
def test_derived_in_place_classes_name_their_op_and_say_what_backward_reads(name):
    from microtorch.functions import elementwise, inplace_ops
    cls = getattr(inplace_ops, name)
    op = getattr(elementwise, name[:-1])
    assert cls.variant_of is op
    assert (cls.__name__, cls.__qualname__, cls.__module__) == (name, name, "microtorch.functions.inplace_ops")
    assert cls.__doc__.startswith(f"x ← {name[:-1].lower()}(x) in place, derived from :class:`{name[:-1]}`")
    assert cls.__doc__.endswith(f"reading {_READS[name]}.")


def test_relu_and_neg_in_place_values_and_gradients():
    """relu_ (its own backward, reading the saved output) and neg_ (reading nothing), by hand."""
    data = np.array([-1.5, 0.5, 2.0, -0.25])
    c = np.array([1.0, 2.0, 3.0, 4.0])
    for method, f, df in (("relu_", lambda a: np.maximum(a, 0), lambda a: (a > 0) * 1.0),
                          ("neg_", lambda a: -a, lambda a: -np.ones_like(a))):
        x = mt.tensor(data, dtype=mt.float64, requires_grad=True)
        y = x * 1
        getattr(y, method)()
        assert y.tolist() == f(data).tolist()
        (y * mt.tensor(c)).sum().backward()
        assert x.grad.tolist() == (c * df(data)).tolist()


# -- every method names itself in the leaf refusal --------------------------------------------
_METHODS = {  # method: arguments
    "add_": (1.0,), "sub_": (1.0,), "mul_": (2.0,), "div_": (2.0,), "clamp_": (0.0, 1.0),
    "relu_": (), "exp_": (), "sigmoid_": (), "tanh_": (), "sqrt_": (), "neg_": (), "zero_": (),
    "fill_": (3.0,), "copy_": (mt.tensor([5.0, 6.0]),),
}


@pytest.mark.parametrize("method", sorted(_METHODS))
def test_every_in_place_method_names_itself_when_refusing_a_leaf(method):
    w = mt.tensor([1.0, 4.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=rf"a leaf Variable .*\({method} on a tensor created"):
        getattr(w, method)(*_METHODS[method])
    assert w.tolist() == [1.0, 4.0]


def test_fill_from_a_zero_d_tensor_names_itself_when_refusing_a_leaf():
    w = mt.tensor([1.0, 4.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"a leaf Variable .*\(fill_ on a tensor created"):
        w.fill_(mt.tensor(2.0))


# -- div_ gradients -----------------------------------------------------------------------------
def test_div_in_place_by_a_number_and_by_a_constant_tensor():
    """y = x / o in place: dL/dx = c / o, by hand; o a number, then a tensor needing no grad."""
    data = np.array([1.0, -2.0, 3.0])
    c = np.array([1.0, 2.0, 4.0])
    for o in (4.0, np.array([2.0, 4.0, 8.0])):
        x = mt.tensor(data, dtype=mt.float64, requires_grad=True)
        y = x * 1
        y.div_(o if isinstance(o, float) else mt.tensor(o, dtype=mt.float64))
        assert y.tolist() == (data / o).tolist()
        (y * mt.tensor(c)).sum().backward()
        assert x.grad.tolist() == (c / o).tolist()


# -- fill_ from an element of the same tensor: the engine fix that came with this file -----------
# (fails on the code the mutants were made from, which refused it as a partial overlap)
def test_fill_from_an_element_of_the_same_tensor_as_pytorch():
    """t.fill_(t[i]) reads one value before writing, so no order of writes can change it:
    PyTorch allows it. y = w·1, y.fill_(y[2]): dL/dw = (0, 0, Σ c)."""
    x = mt.arange(6.0).reshape(2, 3)
    x[0].fill_(x[1, 2])
    assert x.tolist() == [[5.0, 5.0, 5.0], [3.0, 4.0, 5.0]]
    w = mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64, requires_grad=True)
    y = w * 1
    y.fill_(y[2])
    assert y.tolist() == [3.0, 3.0, 3.0]
    (y * mt.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 111.0]


@pytest.mark.oracle
def test_fill_from_an_element_of_the_same_tensor_matches_pytorch():
    torch = pytest.importorskip("torch")
    w = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    y = w * 1
    y.fill_(y[2])
    (y * torch.tensor([1.0, 10.0, 100.0], dtype=torch.float64)).sum().backward()
    wm = mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64, requires_grad=True)
    ym = wm * 1
    ym.fill_(ym[2])
    (ym * mt.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert ym.tolist() == y.tolist() and wm.grad.tolist() == w.grad.tolist()
