"""Containers: modules made of modules — Sequential, ModuleList, and the MLP helper."""
from __future__ import annotations

from typing import Iterable, Iterator

from .layers import Dropout, Linear, ReLU, Sigmoid, Tanh
from .module import Module


class Sequential(Module):
    """Apply the given modules one after another: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Children are named ``"0"``, ``"1"``, ... (so parameters are ``"0.weight"``, as in
    PyTorch); ``seq[i]``, ``seq[1:]``, ``len(seq)``, iteration and ``append`` work.
    """

    def __init__(self, *modules: Module):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*mods[i])
        return mods[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules that registers them (so their parameters are found); no forward."""

    def __init__(self, modules: Iterable[Module] = ()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return ModuleList(mods[i]) if isinstance(i, slice) else mods[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


_ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid}


class MLP(Sequential):
    """A multi-layer perceptron: Linear → activation (→ Dropout) → ... → Linear.

    ``MLP(64, [128], 10)`` is ``Linear(64, 128), ReLU(), Linear(128, 10)``. ``hidden`` is
    one width or a list of widths; ``activation`` is ``"relu"``, ``"tanh"``, ``"sigmoid"``
    or a Module class; ``dropout > 0`` adds a Dropout after every activation.
    """

    def __init__(self, in_features: int, hidden, out_features: int, activation="relu",
                 dropout: float = 0.0, bias: bool = True, dtype=None, generator=None):
        widths = [hidden] if isinstance(hidden, int) else list(hidden)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise ValueError(f"MLP: activation must be one of {sorted(_ACTIVATIONS)} or a Module "
                                 f"class, got {activation!r}")
            activation = _ACTIVATIONS[activation]
        layers: list[Module] = []
        sizes = [in_features] + widths
        for a, b in zip(sizes, sizes[1:]):
            layers += [Linear(a, b, bias=bias, dtype=dtype, generator=generator), activation()]
            if dropout > 0:
                layers.append(Dropout(dropout, generator=generator))
        layers.append(Linear(sizes[-1], out_features, bias=bias, dtype=dtype, generator=generator))
        super().__init__(*layers)
