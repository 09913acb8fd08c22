"""Engine results and semantics that once differed from PyTorch (issue 13), each pinned here.

Every case states the PyTorch behaviour it matches; the ``oracle`` tests run the same code in
torch 2.13 (skipped per test when torch is missing).
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")


# -- retain_grad follows an in-place op ---------------------------------------------------------
def test_retained_grad_follows_the_in_place_op():
    x = mt.tensor([1., 2.], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * y).sum().backward()
    assert y.grad.tolist() == [12., 24.]  # d(sum y²)/dy of the new y = 6x
    assert x.grad.tolist() == [72., 144.]


def test_retained_grad_of_a_base_follows_an_in_place_op_on_its_view():
    x = mt.tensor([1., 2.], requires_grad=True)
    b = x * 1
    b.retain_grad()
    b[0:1].mul_(5)
    (b * b).sum().backward()
    assert b.grad.tolist() == [10., 4.]


@pytest.mark.oracle
def test_retained_grad_after_in_place_ops_matches_torch(torch):
    def run(lib, x):
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        y.add_(1)
        z = y[1:]
        z.mul_(2)
        (y * y).sum().backward()
        return y.grad.tolist(), x.grad.tolist()

    ours = run(mt, mt.tensor([1., 2., 3.], dtype=mt.float64, requires_grad=True))
    theirs = run(torch, torch.tensor([1., 2., 3.], dtype=torch.float64, requires_grad=True))
    np.testing.assert_allclose(ours, theirs)


# -- numpy dtypes: accept what microtorch has, refuse the rest as PyTorch does ------------------
UNSUPPORTED = [np.zeros(2, np.complex128), np.zeros(2, np.complex64), np.array(["a", "b"]),
               np.array(["2020-01-01"], dtype="datetime64[D]"), np.zeros(2, np.uint64),
               np.array([1, "a"], dtype=object), np.zeros(2, np.longdouble)]


@pytest.mark.parametrize("array", UNSUPPORTED, ids=lambda a: a.dtype.name)
@pytest.mark.parametrize("make", [mt.tensor, mt.from_numpy, mt.Tensor, lambda a: mt.tensor(a, dtype=mt.float32)],
                         ids=["tensor", "from_numpy", "Tensor", "tensor_dtype"])
def test_unsupported_numpy_dtypes_are_refused(array, make):
    with pytest.raises(TypeError, match=f"can't convert np.ndarray of type numpy.{array.dtype.type.__name__}"):
        make(array)


def test_unsupported_numpy_scalars_are_refused():
    with pytest.raises(TypeError, match="numpy.complex128"):
        mt.tensor(np.complex128(1 + 2j))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16, np.uint32])
def test_narrow_integers_widen_to_int64_in_a_copy_but_cannot_be_viewed(dtype):
    a = np.array([1, 2, 100], dtype=dtype)
    t = mt.tensor(a)
    assert t.dtype == mt.int64 and t.tolist() == [1, 2, 100]
    with pytest.raises(TypeError, match="mt.tensor"):
        mt.from_numpy(a)


def test_supported_numpy_dtypes_are_kept():
    for d in (np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_):
        a = np.ones(3, dtype=d)
        assert mt.tensor(a).dtype == d and mt.from_numpy(a).dtype == d
    big_endian = np.arange(3, dtype=">f4")
    assert mt.tensor(big_endian).tolist() == [0., 1., 2.]


def test_load_refuses_an_npz_with_unsupported_arrays(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, w=np.zeros(2, np.complex128))
    with pytest.raises(TypeError, match="numpy.complex128"):
        mt.load(path)


def test_a_python_int_past_int64_is_refused():
    with pytest.raises(RuntimeError, match="Overflow"):
        mt.tensor([2 ** 63])


@pytest.mark.oracle
@pytest.mark.parametrize("array", UNSUPPORTED[2:4] + UNSUPPORTED[5:6], ids=lambda a: a.dtype.name)
def test_refusal_message_is_torchs(array, torch):
    with pytest.raises(TypeError) as theirs:
        torch.from_numpy(array)
    with pytest.raises(TypeError) as ours:
        mt.from_numpy(array)
    head = str(theirs.value).split(". ")[0]
    assert str(ours.value).startswith(head)


# -- sizes are ints: ones((2, 3.5)) and reshape(-2, 3) are errors, as in PyTorch ----------------
MAKERS = {"zeros": mt.zeros, "ones": mt.ones, "empty": mt.empty, "randn": mt.randn, "rand": mt.rand,
          "full": lambda s: mt.full(s, 1.0), "randint": lambda s: mt.randint(0, 5, s)}
VIEWERS = {"reshape": lambda s: mt.zeros(6).reshape(s), "view": lambda s: mt.zeros(6).view(s),
           "expand": lambda s: mt.zeros(3).expand(s), "broadcast_to": lambda s: mt.broadcast_to(mt.zeros(3), s),
           "mt.reshape": lambda s: mt.reshape(mt.zeros(6), s)}


@pytest.mark.parametrize("name", list(MAKERS) + list(VIEWERS))
def test_a_float_size_is_a_type_error(name):
    make = {**MAKERS, **VIEWERS}[name]
    with pytest.raises(TypeError, match="must be tuple of ints, but found element of type float"):
        make((2, 3.5) if name in MAKERS else (2.0, 3))


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_negative_size_is_refused(name):
    with pytest.raises(RuntimeError, match=r"negative dimension -1: \[2, -1\]"):
        MAKERS[name]((2, -1))


@pytest.mark.parametrize("name", list(VIEWERS))
def test_a_size_below_minus_one_is_refused(name):
    with pytest.raises(RuntimeError, match="invalid shape dimension -2"):
        VIEWERS[name]((-2, 3))


def test_integer_sizes_of_every_kind_are_accepted():
    assert mt.ones(2, np.int64(3)).shape == (2, 3)
    assert mt.zeros((mt.tensor(2), 3)).shape == (2, 3)
    assert mt.zeros(6).reshape(np.int32(2), -1).shape == (2, 3)
    assert mt.zeros(3).expand(2, -1).shape == (2, 3)


def test_inferring_more_than_one_size_or_a_leading_expand_size_is_refused():
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        mt.zeros(6).reshape(-1, -1)
    with pytest.raises(RuntimeError, match="isn't allowed in a leading, non-existing dimension 0"):
        mt.zeros(3).expand(-1, 3)
    with pytest.raises(TypeError, match="'dims' must be tuple of ints"):
        mt.zeros(2, 3).permute(1.0, 0)


@pytest.mark.oracle
@pytest.mark.parametrize("call", ["ones((2, 3.5))", "zeros(6).reshape(-2, 3)", "zeros(6).view(-2, 3)",
                                  "ones((2, -1))", "zeros(6).reshape(-1, -1)"])
def test_size_errors_have_torchs_type(call, torch):
    with pytest.raises(Exception) as theirs:
        eval("torch." + call, {"torch": torch})
    with pytest.raises(Exception) as ours:
        eval("mt." + call, {"mt": mt})
    assert type(ours.value) is type(theirs.value)


# -- NaN routing: where a NaN sends its gradient, as in PyTorch ---------------------------------
NAN = float("nan")
NAN_CASES = {
    "max": (lambda F, x: x.max(), [[1., NAN, 3.]]),
    "max_two_nans": (lambda F, x: x.max(), [[1., NAN, NAN]]),
    "max_ties": (lambda F, x: x.max(), [[3., 1., 3.]]),
    "min": (lambda F, x: x.min(), [[1., NAN, 3.]]),
    "amax": (lambda F, x: x.amax(), [[1., NAN, 3.]]),
    "amax_dim": (lambda F, x: x.amax(1), [[[1., NAN, 3.], [2., 5., 5.]]]),
    "max_dim": (lambda F, x: x.max(1).values, [[[1., NAN, 3.], [2., 5., 5.]]]),
    "min_dim": (lambda F, x: x.min(0).values, [[[1., NAN], [0., 5.]]]),
    "maximum": (lambda F, a, b: F.maximum(a, b), [[1., 2., NAN, 0.], [NAN, 2., NAN, 1.]]),
    "minimum": (lambda F, a, b: F.minimum(a, b), [[1., 2., NAN, 0.], [NAN, 2., NAN, 1.]]),
    "relu": (lambda F, x: F.relu(x), [[NAN, -1., 0., 1.]]),
    "relu_": (lambda F, x: (x * 1).relu_(), [[NAN, -1., 0., 1.]]),
    "clamp": (lambda F, x: x.clamp(-1, 1), [[NAN, -2., 0., 2., 1.]]),
    "abs": (lambda F, x: x.abs(), [[NAN, 0., -2.]]),
}


def nan_grads(F, case):
    fn, values = NAN_CASES[case]
    xs = [F.tensor(v, dtype=F.float64, requires_grad=True) for v in values]
    out = fn(F, *xs)
    out.sum().backward()
    return [x.grad.tolist() for x in xs]


def test_nan_gradients_follow_pytorchs_rules():
    assert nan_grads(mt, "max") == [[0., 1., 0.]]
    assert nan_grads(mt, "maximum")[0] == [1., .5, 1., 0.]  # a NaN b: a keeps its gradient
    assert nan_grads(mt, "relu") == [[1., 0., 0., 1.]]  # relu'(NaN) = 1
    assert nan_grads(mt, "abs") == [[0., 0., -1.]]


@pytest.mark.oracle
@pytest.mark.parametrize("case", list(NAN_CASES))
def test_nan_gradients_match_torch(case, torch):
    np.testing.assert_array_equal(np.array(nan_grads(mt, case)), np.array(nan_grads(torch, case)))


# -- dtype rules ---------------------------------------------------------------------------------
def test_an_integer_clamped_to_float_bounds_is_the_default_float():
    t = mt.tensor([1, 2, 3]).clamp(-1.5, 2.5)
    assert t.dtype == mt.float32 and t.tolist() == [1., 2., 2.5]
    assert mt.tensor([1, 2, 3]).clamp(-1, 2).dtype == mt.int64
    assert mt.tensor([1., 2.], dtype=mt.float64).clamp(np.float32(0.5)).dtype == mt.float64
    assert mt.tensor([1., 2.]).clamp(np.float64(0.5)).dtype == mt.float32  # numpy scalars are weak too


@pytest.mark.parametrize("op", [lambda x: x.softmax(0), lambda x: x.log_softmax(0),
                                lambda x: mt.cross_entropy(x.reshape(1, 3), mt.tensor([0]))],
                         ids=["softmax", "log_softmax", "cross_entropy"])
def test_softmax_of_an_integer_tensor_is_refused(op):
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        op(mt.tensor([1, 2, 3]))


@pytest.mark.parametrize("da, db", [(mt.int64, mt.float64), (mt.float32, mt.float64), (mt.int32, mt.int64)])
def test_matmul_of_two_dtypes_is_refused(da, db):
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        mt.ones(2, 2, dtype=da) @ mt.ones(2, 2, dtype=db)
    assert (mt.ones(2, 2, dtype=da) @ mt.ones(2, 2, dtype=da)).dtype == da


def test_subtracting_bools_is_refused_and_minimum_of_bools_works():
    m = mt.tensor([True, False])
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        m - m
    with pytest.raises(RuntimeError, match="with a bool tensor"):
        mt.tensor([1, 2]) - True
    assert mt.minimum(m, mt.tensor([True, True])).tolist() == [True, False]
    assert (m + 2).dtype == mt.int64 and (m + 2).tolist() == [3, 2]
    with pytest.raises(TypeError, match="real numbers"):
        mt.tensor([1., 2.]) * 1j


PROMOTION_OPS = {"add": lambda F, a, b: a + b, "sub": lambda F, a, b: a - b, "mul": lambda F, a, b: a * b,
                 "div": lambda F, a, b: a / b, "maximum": lambda F, a, b: F.maximum(a, b),
                 "minimum": lambda F, a, b: F.minimum(a, b), "lt": lambda F, a, b: a < b,
                 "eq": lambda F, a, b: a == b, "matmul": lambda F, a, b: a @ b,
                 "pow": lambda F, a, b: a ** b, "floordiv": lambda F, a, b: a // b,
                 "mod": lambda F, a, b: a % b,
                 "where": lambda F, a, b: F.where(F.ones(3, dtype=F.bool), a, b)}
DTYPES = ["bool", "int32", "int64", "float16", "float32", "float64"]
PYTHON_NUMBERS = {"bool": True, "int32": 2, "int64": 3, "float16": 1.5, "float32": 2.5, "float64": 0.5}


def _operand(F, dtype, kind):
    if kind == "number":
        return PYTHON_NUMBERS[dtype]
    values = np.array([1, 2, 3] if kind == "1-d" else 2).astype(dtype)
    return F.tensor(values, dtype=getattr(F, dtype if F is not mt or dtype != "bool" else "bool_"))


def _result_type(F, op, a, b):
    try:
        return str(PROMOTION_OPS[op](F, a, b).dtype).replace("torch.", "")
    except Exception as e:  # the error's type is the answer then (which message does not matter here)
        return type(e).__name__


INPLACE_OPS = {"add_": lambda a, b: a.add_(b), "sub_": lambda a, b: a.sub_(b), "mul_": lambda a, b: a.mul_(b),
               "div_": lambda a, b: a.div_(b), "iadd": lambda a, b: a.__iadd__(b),
               "copy_or_fill_": lambda a, b: a.copy_(b) if hasattr(b, "shape") else a.fill_(b)}


@pytest.mark.oracle
@pytest.mark.parametrize("op", list(INPLACE_OPS))
def test_in_place_result_types_match_torch(op, torch):
    """Every (dtype, operand dtype, operand kind): the in-place op keeps the dtype, or both refuse alike."""
    def outcome(F, da, db, kind):
        try:
            return str(INPLACE_OPS[op](_operand(F, da, "1-d"), _operand(F, db, kind)).dtype).replace("torch.", "")
        except Exception as e:
            return type(e).__name__

    for da in DTYPES:
        for db in DTYPES:
            for kind in ("1-d", "0-d", "number"):
                assert outcome(mt, da, db, kind) == outcome(torch, da, db, kind), (da, db, kind)


@pytest.mark.oracle
def test_type_promotion_of_binary_ops_matches_torch(torch):
    """Random (op, dtype pair, operand kinds) cases: the result dtype — or the error type — is torch's."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    kinds = st.sampled_from([("1-d", "1-d"), ("1-d", "0-d"), ("0-d", "1-d"), ("1-d", "number"), ("number", "1-d")])

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.sampled_from(sorted(PROMOTION_OPS)), st.sampled_from(DTYPES), st.sampled_from(DTYPES), kinds)
    def check(op, da, db, kind):
        ka, kb = kind
        if op in ("maximum", "minimum", "matmul") and "number" in kind:
            return  # torch takes tensors only there
        theirs = _result_type(torch, op, _operand(torch, da, ka), _operand(torch, db, kb))
        ours = _result_type(mt, op, _operand(mt, da, ka), _operand(mt, db, kb))
        assert ours == theirs, (op, da, ka, db, kb)

    check()


# -- writing through a detached view; .data and .grad assignment ---------------------------------
@pytest.mark.parametrize("write", [lambda x: x.detach().__setitem__(0, 9.0),
                                   lambda x: x.data.__setitem__(0, 9.0),
                                   lambda x: x.detach()[0:2].mul_(2),
                                   lambda x: x.data.add_(1)],
                         ids=["detach_setitem", "data_setitem", "detach_slice_mul_", "data_add_"])
def test_writing_through_a_detached_view_of_a_leaf_changes_the_leaf(write):
    x = mt.tensor([1., 2., 3.], requires_grad=True)
    before, version = x.tolist(), x._version
    write(x)
    assert x.tolist() != before and x.is_leaf and x.requires_grad
    assert x._version == version + 1  # one storage, one version counter
    assert x.detach()._base is None


def test_a_saved_tensor_sees_a_write_through_detach():
    x = mt.tensor([1., 2.], requires_grad=True)
    y = x * x
    x.detach()[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.oracle
def test_detached_writes_match_torch(torch):
    def run(F):
        x = F.tensor([1., 2., 3.], requires_grad=True)
        x.detach()[0] = 9.0
        x.detach()[1:3].mul_(2)
        version = x._version  # detach() shares the version counter, in both
        x.data[1] = 8.0  # (PyTorch's .data has a counter of its own: microtorch's is shared, see below)
        return x.tolist(), version

    assert run(mt) == run(torch)


def test_writes_through_data_bump_the_shared_version_on_purpose():
    """A reasoned difference: PyTorch's ``.data`` gets a fresh version counter, so a write
    through it is invisible to saved tensors and backward silently uses the new values.
    microtorch keeps versions on the storage, so the same write raises the version error."""
    x = mt.tensor([1., 2.], requires_grad=True)
    y = x * x
    x.data[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_data_assignment_repoints_a_tensor_as_in_pytorch():
    x = mt.tensor([1., 2., 3.], requires_grad=True)
    new = mt.zeros(5, dtype=mt.float64)
    x.data = new
    assert x.shape == (5,) and x.dtype == mt.float64 and x.requires_grad and x.is_leaf
    new[0] = 4.0
    assert x[0].item() == 4.0  # shares the bytes
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        x.data = [1.0]
    with pytest.raises(RuntimeError, match="must be floating point"):
        x.data = mt.tensor([1, 2])


def test_parameter_data_assignment_keeps_the_flat_buffer_consistent():
    model = mt.nn.Linear(3, 2)
    opt = mt.optim.SGD(model.parameters(), lr=0.5)
    w = model.weight
    storage = w.storage
    model.weight.data = mt.ones(2, 3)  # same shape and dtype: copied into its slice of the buffer
    assert w.storage is storage and w.tolist() == [[1.] * 3] * 2
    model(mt.ones(4, 3)).sum().backward()
    opt.step()  # the optimizer updates the buffer, and w reads it
    assert np.allclose(w.detach().numpy(), 1 - 0.5 * 4)
    model.weight.data = mt.ones(5, 3)  # another shape: w leaves the buffer, the optimizer says so
    assert w.shape == (5, 3) and w.storage is not storage
    with pytest.raises(RuntimeError, match="no longer lives in this flat parameter buffer"):
        opt.step()


def test_grad_assignment_is_checked():
    x = mt.tensor([1., 2.], requires_grad=True)
    with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but got grad of type str"):
        x.grad = "hello"
    with pytest.raises(TypeError, match="numpy.ndarray|ndarray"):
        x.grad = np.zeros(2)
    with pytest.raises(RuntimeError, match="assigned grad has data of a different size"):
        x.grad = mt.zeros(3)
    with pytest.raises(RuntimeError, match="dtype"):
        x.grad = mt.zeros(2, dtype=mt.float64)
    with pytest.raises(RuntimeError, match="own grad"):
        x.grad = x
    x.grad = mt.ones(2)
    assert x.grad.tolist() == [1., 1.]
    x.grad = None
    assert x.grad is None


@pytest.mark.oracle
@pytest.mark.parametrize("value", ["str", "shape", "dtype"])
def test_grad_assignment_errors_have_torchs_types(value, torch):
    def attempt(F):
        x = F.tensor([1., 2.], requires_grad=True)
        v = {"str": "hello", "shape": F.zeros(3), "dtype": F.zeros(2, dtype=F.float64)}[value]
        with pytest.raises(Exception) as e:
            x.grad = v
        return type(e.value)

    assert attempt(mt) is attempt(torch)


# -- tensor exponents, // and %, sum(dtype=) ------------------------------------------------------
def _f64(values, grad=True):
    return mt.tensor(values, dtype=mt.float64, requires_grad=grad)


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (4,))])
def test_tensor_exponent_gradients_match_finite_differences(shapes):
    rng = np.random.default_rng(len(shapes[0]) + 3 * len(shapes[1]))
    a = _f64(rng.uniform(0.5, 2.0, shapes[0]))
    b = _f64(rng.uniform(-1.5, 2.5, shapes[1]))
    assert mt.gradcheck(lambda a, b: a ** b, [a, b])
    assert mt.gradcheck(lambda b: 2.5 ** b, [b])  # a number base


def test_tensor_exponent_second_derivatives_match_finite_differences():
    a, b = _f64([0.7, 1.3]), _f64([1.5, -0.5])

    def first(a, b):
        with mt.enable_grad():  # gradcheck evaluates under no_grad for its differences
            ga, gb = mt.grad((a ** b).sum(), [a, b], create_graph=True)
        return (ga * gb).sum()

    assert mt.gradcheck(first, [a, b])


@pytest.mark.oracle
def test_pow_floor_divide_and_remainder_match_torch(torch):
    cases = {
        "pow": lambda a, b: a ** b, "rpow": lambda a, b: 2.0 ** b, "rpow_int": lambda a, b: 3 ** b,
        "mod": lambda a, b: a % b, "mod_number": lambda a, b: a % 1.5,  # (torch has no gradient for 7.5 % b)
    }
    a_values = [[0., 2., -1., 3.5], [1.5, -2.5, 0.25, 4.]]
    b_values = [0., 3., 0.5, -2.]
    for name, fn in cases.items():
        outs = []
        for F in (mt, torch):
            a = F.tensor(a_values, dtype=F.float64, requires_grad=True)
            b = F.tensor(b_values, dtype=F.float64, requires_grad=True)
            z = fn(a, b)
            z.sum().backward()
            outs.append([t.detach().numpy().copy() if t is not None else None for t in (z, a.grad, b.grad)])
        for ours, theirs in zip(*outs):
            assert (ours is None) == (theirs is None), name
            if ours is not None:
                np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=name)
    ints = ([5, -5, 7, 0], [3, 3, -2, 4])
    for fn in (lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ** b, lambda a, b: 7 // b,
               lambda a, b: a ** 2, lambda a, b: b % 3):
        ours = fn(mt.tensor(ints[0]), mt.tensor(ints[1]))
        theirs = fn(torch.tensor(ints[0]), torch.tensor(ints[1]))
        assert ours.tolist() == theirs.tolist() and ours.dtype.name == str(theirs.dtype)[6:]
    assert (mt.tensor([2, 3]) ** mt.tensor([-1, 2])).tolist() == (torch.tensor([2, 3]) ** torch.tensor([-1, 2])).tolist()


def test_floor_divide_has_no_gradient_as_in_pytorch():
    x = _f64([3.5, -2.5])
    z = x // 2
    assert z.tolist() == [1., -2.] and z.requires_grad
    with pytest.raises(RuntimeError, match="derivative for floor_divide is not implemented"):
        z.sum().backward()


def test_integer_division_by_zero_and_negative_integer_powers_are_refused():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        mt.tensor([1, 2]) // 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        mt.tensor([1, 2]) % mt.tensor([1, 0])
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        mt.tensor([2, 3]) ** -1
    assert (mt.tensor([1., -2.]) // 0).tolist() == [float("inf"), float("-inf")]


def test_sum_and_mean_take_a_dtype():
    x = mt.tensor([1., 2.], requires_grad=True)
    s = x.sum(dtype=mt.float64)
    assert s.dtype == mt.float64
    s.backward()
    assert x.grad.dtype == mt.float32 and x.grad.tolist() == [1., 1.]
    assert mt.tensor([1, 2]).sum(dtype=mt.float32).dtype == mt.float32
    assert mt.tensor([1, 2]).mean(dtype=mt.float64).item() == 1.5
    assert mt.tensor([True, True]).sum().dtype == mt.int64
    big = mt.full((1000,), 16777216.0)  # float32 cannot count past 2**24 one by one
    assert big.sum(dtype=mt.float64).item() == 16777216.0 * 1000


def test_strided_views_take_int_sizes_only():
    x = mt.arange(6.0)
    with pytest.raises(TypeError, match="must be tuple of ints"):
        x.as_strided((2, 1.5), (1, 1))
    with pytest.raises(TypeError, match="'stride' must be int"):
        x.as_strided((2, 2), (1.0, 1))
    with pytest.raises(TypeError, match="'size' must be int"):
        x.unfold(0, 2.5, 1)
    assert x.as_strided((2, 2), (1, 2)).tolist() == [[0., 2.], [1., 3.]]


# -- ~, &, | are bitwise (logical on bools), as in PyTorch; unary ops on bools refuse as torch ----
@pytest.mark.oracle
@pytest.mark.parametrize("dtype", DTYPES)
def test_bitwise_operators_match_torch(dtype, torch):
    def outcome(F, fn):
        try:
            r = fn(F)
            return r.tolist(), str(r.dtype).replace("torch.", "")
        except Exception as e:
            return type(e).__name__

    cases = [lambda F: ~_operand(F, dtype, "1-d"), lambda F: _operand(F, dtype, "1-d") & _operand(F, dtype, "1-d") * 0,
             lambda F: _operand(F, dtype, "1-d") | 2, lambda F: 6 & _operand(F, dtype, "1-d"),
             lambda F: F.relu(_operand(F, dtype, "1-d")), lambda F: F.abs(_operand(F, dtype, "1-d")),
             lambda F: -_operand(F, dtype, "1-d"), lambda F: _operand(F, dtype, "1-d").argmax(),
             lambda F: _operand(F, dtype, "1-d").argmin()]
    for fn in cases:
        assert outcome(mt, fn) == outcome(torch, fn)


def test_invert_of_an_integer_tensor_is_bitwise():
    assert (~mt.tensor([0, 1, -2])).tolist() == [-1, -2, 1]  # not a bool mask
    assert (~mt.tensor([True, False])).tolist() == [False, True]
    assert (mt.tensor([6, 5]) & mt.tensor([3, 3])).tolist() == [2, 1]
    with pytest.raises(TypeError, match="only supported for integer and bool tensors"):
        ~mt.tensor([1.5])


def test_copy_and_deepcopy_follow_pytorch():
    import copy

    x = mt.tensor([1., 2.], requires_grad=True)
    x.grad = mt.ones(2)
    c = copy.copy(x)
    assert c.storage is x.storage and c.requires_grad and c.grad is None
    d = copy.deepcopy(x)
    assert d.storage is not x.storage and d.tolist() == [1., 2.] and d.grad.tolist() == [1., 1.]
    assert d.storage.refcount == 1  # its own bytes, counted
    assert type(copy.deepcopy(mt.nn.Parameter(mt.ones(2)))) is mt.nn.Parameter
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(x * 2)
    model = mt.nn.Linear(2, 2)
    twin = copy.deepcopy(model)
    twin.weight.data = mt.zeros(2, 2)
    assert model.weight.abs().sum().item() > 0  # independent bytes
