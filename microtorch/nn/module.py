"""Module: the base class of layers and models, with PyTorch's registration rules.

Assigning a :class:`Parameter` or a ``Module`` to an attribute registers it, so
``named_parameters()`` can walk the tree and name everything (``"0.weight"``,
``"encoder.1.bias"``); ``state_dict()`` is exactly those names and values, and
``load_state_dict()`` copies values back into the existing bytes (so parameters that live
in a flat buffer stay there).
"""
from __future__ import annotations

from collections import namedtuple
from typing import Iterator

import numpy as np

from .. import dtypes
from ..autograd import gradient_sink
from ..grad_mode import no_grad
from ..tensor import Tensor, repoint
from .flat import flat_of
from .parameter import Parameter

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    """Base class of everything with parameters: subclass it, set parameters and submodules
    as attributes in ``__init__``, and write ``forward``. Call the module, not ``forward``."""

    training: bool

    def __init__(self):
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_modules"] = {}

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward(); subclasses of Module "
                                  "define forward(self, ...) to say what the module computes")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- registration ----------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() call; call "
                                 "super().__init__() first in your module's __init__")
        if isinstance(value, Parameter):
            d.pop(name, None)
            d["_buffers"].pop(name, None)
            d["_modules"].pop(name, None)
            d["_parameters"][name] = value
        elif isinstance(value, Module):
            d.pop(name, None)
            d["_parameters"].pop(name, None)
            d["_buffers"].pop(name, None)
            d["_modules"][name] = value
        elif name in d["_parameters"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter {name!r} "
                                "(mt.nn.Parameter or None expected)")
            d["_parameters"][name] = None
        elif name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer {name!r} "
                                "(Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)  # respects properties of subclasses

    def __getattr__(self, name: str):
        # only called when normal lookup fails: look in the registration tables
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[table]:
                del self.__dict__[table][name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' as parameter {name!r} "
                            "(mt.nn.Parameter or None expected)")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None) -> None:
        """A tensor that belongs to the module's state (saved in ``state_dict``) but is not learned."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' as buffer {name!r} (Tensor or None expected)")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    # -- walking the tree ------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator["Module"]:
        for _, child in self.named_children():
            yield child

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs, each parameter once (a shared one under its first name)."""
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, m in modules:
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, m in modules:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), b

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn) -> "Module":
        """Call ``fn(m)`` on every submodule (children first) and on self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- modes and gradients ---------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Training mode (Dropout drops); ``eval()`` switches it off. Applies to all submodules."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: ``.grad = None`` (PyTorch's default), or with
        ``set_to_none=False`` zeros — one ``fill(0)`` when the parameters live in a flat buffer."""
        params = list(self.parameters())
        flat = flat_of(params)
        if flat is not None:
            flat.zero_grad(set_to_none)
            return
        for p in params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            elif p.grad.is_sparse:
                p.grad.zero_()  # stays sparse, with no entries (as in PyTorch)
            elif p.grad.grad_fn is not None:  # a graph .grad from create_graph=True
                p.grad = Tensor._wrap(np.zeros(p.shape, dtype=p.dtype), tag="gradient")
            else:
                p.grad._data.fill(0)
                p.grad._storage.version += 1

    # -- state -----------------------------------------------------------------------------
    def state_dict(self, prefix: str = "") -> dict[str, Tensor]:
        """``{name: tensor}`` for every parameter and buffer. The tensors are detached views of
        the live values (no copy): save them with ``mt.save(model.state_dict(), path)``."""
        out = {}
        for name, p in self.named_parameters(prefix=prefix):
            out[name] = p.detach()
        for name, b in self.named_buffers(prefix=prefix):
            out[name] = b.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into this module's parameters and buffers.

        All problems are reported together in ONE error: keys the module has but the dict
        lacks (missing), keys the dict has but the module lacks (unexpected; both only when
        ``strict``), and values whose shape differs from the parameter's (always). Values are
        copied into the existing bytes, so flat buffers and optimizers stay valid.
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = []
        values = {}
        for k, t in own.items():
            if k in state_dict:
                value = values[k] = _loadable(k, state_dict[k])
                shape = value.shape
                if shape != t.shape:
                    mismatched.append(f"size mismatch for {k}: copying a param with shape {list(shape)} "
                                      f"from checkpoint, the shape in current model is {list(t.shape)}.")
        errors = []
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        errors.extend(mismatched)
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with no_grad():
            for k, t in own.items():
                if k in values:
                    np.copyto(t._data, values[k], casting="unsafe")
                    t._storage.version += 1
        return IncompatibleKeys(missing, unexpected)

    # -- dtype -------------------------------------------------------------------------------
    def to(self, dtype) -> "Module":
        """Convert every floating parameter and buffer to ``dtype`` (in place: same objects).

        Each converted parameter gets its own new bytes, so it leaves any flat buffer:
        create optimizers after converting the model (as PyTorch also advises).
        """
        dtype = dtypes.as_dtype(dtype)
        if not dtypes.is_floating(dtype):
            raise TypeError(f"Module.to() only accepts floating point dtypes, got {dtypes.name(dtype)}")
        with no_grad():
            for t in list(self.parameters()) + list(self.buffers()):
                if dtypes.is_floating(t.dtype) and t.dtype != dtype:
                    moved = Tensor._wrap(t._data.astype(dtype), tag="tensor")
                    repoint(t, moved._data, moved._storage)
                    gradient_sink.remove(t)
                    if t.grad is not None and t.grad.is_sparse:  # same rows, converted values
                        t.grad = t.grad._with_values(t.grad._values().to(dtype))
                    elif t.grad is not None:
                        t.grad = Tensor._wrap(t.grad._data.astype(dtype), tag="gradient")
        return self

    def double(self) -> "Module":
        return self.to(dtypes.float64)

    def float(self) -> "Module":  # noqa: A003 — PyTorch's name
        return self.to(dtypes.float32)

    # -- repr --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr (its settings)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = []
        for name, module in self._modules.items():
            text = repr(module).replace("\n", "\n  ")
            child_lines.append(f"({name}): {text}")
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{type(self).__name__}({body})"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._modules) | set(self._buffers))


def _loadable(key: str, value) -> np.ndarray:
    """A state-dict value as an array to copy from: a tensor, an array or (nested lists of)
    numbers of a dtype microtorch has — else a TypeError naming the key."""
    if isinstance(value, Tensor):
        return value._data
    if value is None or isinstance(value, (str, bytes, dict)):
        raise TypeError(f"load_state_dict: the value for {key!r} is {type(value).__name__}; expected a "
                        "tensor (or a numpy array of numbers)")
    array = np.asarray(value)
    try:
        dtypes.of_array(array.dtype)
    except TypeError as e:
        raise TypeError(f"load_state_dict: the value for {key!r}: {e}") from None
    return array
