"""Parameter: a leaf tensor that requires grad and that a Module registers as its own."""
from __future__ import annotations

from .. import dtypes
from ..tensor import Tensor, _init


class Parameter(Tensor):
    """A tensor a :class:`~microtorch.nn.Module` learns: a leaf with ``requires_grad=True``.

    ``Parameter(t)`` shares ``t``'s bytes (no copy) but is a fresh leaf, cut off from any
    graph that made ``t`` — as in PyTorch. Assigning a Parameter to a module attribute
    (``self.weight = Parameter(...)``) registers it, so ``module.parameters()`` finds it.
    Ops on a parameter return plain tensors (``p.T`` is a ``Tensor``, not a ``Parameter``).
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from ..creation import empty

            data = empty(0)
        elif not isinstance(data, Tensor):
            from ..creation import tensor

            data = tensor(data)
        if requires_grad and not dtypes.is_floating(data.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients, so a "
                               f"Parameter cannot hold {dtypes.name(data.dtype)} data; convert it "
                               "with .float() first (or pass requires_grad=False)")
        return _init(object.__new__(cls), data._data, data._storage, None, bool(requires_grad), None)

    def __init__(self, data=None, requires_grad: bool = True):
        pass  # everything happened in __new__ (a half-built tensor must never reach __del__)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
