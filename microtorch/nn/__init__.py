"""Neural-network building blocks (``mt.nn``), named and behaving like PyTorch's ``torch.nn``.

* :class:`Module` — the base class (parameters, submodules, train/eval, state_dict);
  :class:`Parameter` — a leaf tensor a module learns.
* Layers: :class:`Linear`, :class:`Embedding`, :class:`LayerNorm`, :class:`Dropout`,
  activations (:class:`ReLU`, :class:`Tanh`, :class:`Sigmoid`), :class:`Flatten`,
  containers (:class:`Sequential`, :class:`ModuleList`) and the :class:`MLP` helper.
* :func:`flatten_parameters` — one flat parameter buffer and one flat gradient buffer,
  each parameter's slice placed on the engine's gradient sink
  (:class:`microtorch.autograd.GradientSink`; optimizers do this for you).
* :mod:`~microtorch.nn.functional` (``F``), :mod:`~microtorch.nn.init`,
  :mod:`~microtorch.nn.utils` (``clip_grad_norm_``), and :func:`fit`, the training loop.
"""
from . import functional, init, utils
from .containers import MLP, ModuleList, Sequential
from .fit import History, fit
from .flat import FlatParameters, flatten_parameters
from .layers import (CrossEntropyLoss, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear,
                     MSELoss, ReLU, Sigmoid, Tanh)
from .module import Module
from .parameter import Parameter

__all__ = ["CrossEntropyLoss", "Dropout", "Embedding", "FlatParameters", "Flatten", "History",
           "Identity", "LayerNorm", "Linear", "MLP", "MSELoss", "Module", "ModuleList", "Parameter",
           "ReLU", "Sequential", "Sigmoid", "Tanh", "fit", "flatten_parameters", "functional", "init",
           "utils"]
