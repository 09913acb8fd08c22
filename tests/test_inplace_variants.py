"""In-place variants are declared on their op (``inplace_variant``) and derived from it:
the Tensor methods, the in-place op classes and ``inplace_plan`` all read that declaration."""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
from microtorch.functions import elementwise, inplace_ops
from microtorch.memory import inplace_analysis
from microtorch.node import Function

DECLARED = {cls.__name__: cls for cls in vars(elementwise).values()
            if isinstance(cls, type) and issubclass(cls, Function) and cls.__dict__.get("inplace_variant") is not None}
DERIVED = [cls for cls in vars(inplace_ops).values()
           if isinstance(cls, type) and getattr(cls, "variant_of", None) is not None]


def test_the_plan_knows_exactly_the_declared_variants():
    assert set(DECLARED) == {"Add", "Sub", "Mul", "Div", "Neg", "Exp", "Sqrt", "Tanh", "Sigmoid", "Relu", "Clamp"}
    for name, op in DECLARED.items():
        v = op.inplace_variant
        assert inplace_analysis.VARIANTS[name] == (v.method, v.overwrites)
        assert inplace_analysis._BACKWARD_USES[name].startswith(v.method + " ")
    assert set(inplace_analysis.VARIANTS) == set(DECLARED)  # no other source of variants


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_declared_method_is_a_tensor_method_that_runs_in_place(name):
    method = DECLARED[name].inplace_variant.method
    assert method in vars(mt.Tensor), f"Tensor has no {method} in its class body"
    x = mt.tensor([0.5, 1.5, 2.0], dtype=mt.float64)
    args = {"add_": (1.0,), "sub_": (1.0,), "mul_": (2.0,), "div_": (2.0,), "clamp_": (0.0, 1.0)}.get(method, ())
    before = x._version
    assert getattr(x, method)(*args) is x and x._version == before + 1


@pytest.mark.parametrize("cls", DERIVED, ids=lambda c: c.__name__)
def test_each_in_place_op_names_its_declared_op(cls):
    assert cls.variant_of in DECLARED.values()
    assert cls.__name__ == cls.variant_of.__name__ + "_"


@pytest.mark.parametrize("cls", [c for c in DERIVED if c.__dict__.get("backward") is c.variant_of.__dict__.get("backward")],
                         ids=lambda c: c.__name__)
def test_derived_variants_compute_the_ops_values_and_gradients(cls):
    """x ← f(x) in place gives f's values and f's gradient (vs the out-of-place op, which
    the finite-difference tests check)."""
    op = cls.variant_of
    name = op.__name__.lower()
    rng = np.random.default_rng(0)
    data = rng.uniform(0.2, 2.0, (3, 4)) * rng.choice([-1, 1], (3, 4))
    if name == "sqrt":
        data = np.abs(data)
    g = rng.standard_normal((3, 4))
    a = mt.tensor(data, requires_grad=True)
    b = mt.tensor(data, requires_grad=True)
    out_of_place = getattr(a * 1.0, name)() if name != "neg" else -(a * 1.0)
    in_place = getattr(b * 1.0, op.inplace_variant.method)()
    assert in_place.grad_fn.name == cls.__name__ + "Backward"
    np.testing.assert_allclose(in_place.detach().numpy(), out_of_place.detach().numpy(), rtol=1e-12)
    out_of_place.backward(mt.tensor(g))
    in_place.backward(mt.tensor(g))
    np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-12)


def test_a_users_op_can_declare_a_variant_for_the_plan():
    class Twice(Function):
        inplace_variant = mt.node.InplaceVariant("twice_", reads="nothing")

        @staticmethod
        def forward(ctx, x):
            return x._data * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    try:
        assert inplace_analysis.VARIANTS["Twice"] == ("twice_", (0,))
        assert inplace_analysis._BACKWARD_USES["Twice"] == "twice_ needs no values for backward"
    finally:
        inplace_analysis.VARIANTS.pop("Twice")
        inplace_analysis._BACKWARD_USES.pop("Twice")
