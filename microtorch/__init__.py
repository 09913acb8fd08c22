"""microtorch: a compact reverse-mode autograd engine whose memory machinery is real.

``import microtorch as mt`` gives PyTorch's names. ``help(mt)`` lists every one of them
(``mt.__all__``); ``help(mt.exp)``, ``mt.show_source(mt.exp)`` show one.

* **Tensors**: ``Tensor``; made by ``tensor``, ``from_numpy``, ``zeros``, ``ones``, ``full``,
  ``empty``, ``eye``, ``arange``, ``linspace``, ``rand``, ``randn``, ``randint``,
  ``randperm`` and their ``*_like`` forms; random numbers from ``manual_seed`` /
  ``Generator``; dtypes ``float32`` (``float``), ``float64`` (``double``), ``float16``,
  ``int32``, ``int64`` (``long``), ``bool``.
* **Ops** (each with its backward next to its forward, in ``microtorch/functions/``):
  elementwise ``add sub mul div neg pow exp log sqrt abs tanh sigmoid relu clamp maximum
  minimum where clone``; reductions ``sum mean var max min amax amin``; shapes and views
  ``reshape view flatten permute transpose squeeze unsqueeze expand broadcast_to cat stack
  index as_strided diagonal``; ``matmul``; ``softmax log_softmax mse_loss nll_loss
  cross_entropy``; ``floor_divide remainder`` (``//``, ``%``); ``logical_and logical_or
  logical_not``; ``unbroadcast`` (the sum that undoes a broadcast, what every broadcasting op's
  backward uses); sparse tensors ``sparse_coo_tensor sparse_csr_tensor``.
* **Autograd**: ``backward``, ``grad``, ``no_grad`` / ``enable_grad`` /
  ``set_grad_enabled`` / ``is_grad_enabled``, ``Function`` (write your own op),
  ``gradcheck`` (against central differences; ``GradcheckError``).
* **Recording**: ``with mt.trace() as tr:`` records what the engine does as events
  (a :class:`Trace`): the pictures of ``mt.viz`` replay it.
* **Subpackages**: ``mt.nn`` (modules), ``mt.optim`` (optimizers over flat buffers),
  ``mt.data`` (datasets and loaders), ``mt.memory`` (storages, the pool, arenas, buddy and
  best-fit allocators, alias analysis, in-place planning, memory planning, the NUMA and
  unified-memory models), ``mt.sparse`` (sparse tensors and gradients), ``mt.utils``
  (``mt.utils.checkpoint``: recomputation), ``mt.dtypes``; ``mt.viz`` (pictures and the step-through
  player) and ``mt.exercises`` (the notebooks' checkers) load on first use.
* **Files and code**: ``save`` / ``load`` (state dicts as ``.npz``), ``show_source``.

Importing microtorch loads numpy only: no matplotlib, graphviz or ipywidgets.
"""
from .tensor import Tensor  # the top of the core's layers (see microtorch.tensor_base)
from . import dtypes, memory
from .autograd import backward, grad
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .node import Function
from .creation import (Generator, arange, default_generator, empty, eye, from_numpy, full,
                       full_like, linspace, manual_seed, ones, ones_like, rand, rand_like, randint,
                       randn, randn_like, randperm, tensor, zeros, zeros_like)
from .dtypes import bool_, double, float16, float32, float64, int32, int64, long
from .functions import (abs, add, amax, amin, broadcast_to, cat, clamp, clone, cross_entropy, div,
                        exp, expand, flatten, index, log, log_softmax, matmul, max, maximum, mean,
                        min, minimum, mse_loss, mul, neg, nll_loss, permute, pow, relu, reshape,
                        sigmoid, softmax, sqrt, squeeze, stack, sub, sum, tanh, transpose,
                        unbroadcast, unsqueeze, var, view, where)
from .functions import as_strided, diagonal  # strided views (and Tensor.unfold)
from .functions import floor_divide, remainder  # // and %
from .comparison import logical_and, logical_not, logical_or
from .gradcheck import GradcheckError, gradcheck
from .trace import Trace
from .trace import record as trace  # mt.trace() is the function; the package is microtorch.trace
from .source import show_source
from . import data, nn, optim  # after the ops: layers and optimizers are built from them
from . import utils  # mt.utils.checkpoint: recomputation
from . import sparse  # sparse tensors and sparse gradients (mt.sparse.mm, mt.sparse.stats)
from .sparse import sparse_coo_tensor, sparse_csr_tensor
from .serialization import load, save

float = float32  # noqa: A001 — PyTorch's alias (mt.float)
bool = bool_  # noqa: A001 — PyTorch's name (mt.bool)

__version__ = "0.1.0"

#: The public names (what ``help(mt)`` documents and ``from microtorch import *`` binds).
__all__ = [
    # tensors, dtypes, random numbers
    "Tensor", "tensor", "from_numpy", "zeros", "ones", "full", "empty", "eye", "arange", "linspace", "rand",
    "randn", "randint", "randperm", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
    "Generator", "default_generator", "manual_seed",
    "float32", "float", "float64", "double", "float16", "int32", "int64", "long", "bool", "bool_",
    # ops
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "clamp",
    "maximum", "minimum", "where", "clone", "sum", "mean", "var", "max", "min", "amax", "amin", "reshape",
    "view", "flatten", "permute", "transpose", "squeeze", "unsqueeze", "expand", "broadcast_to", "cat",
    "stack", "index", "as_strided", "diagonal", "matmul", "softmax", "log_softmax", "mse_loss", "nll_loss",
    "cross_entropy", "logical_and", "logical_or", "logical_not", "unbroadcast", "floor_divide", "remainder",
    "sparse_coo_tensor", "sparse_csr_tensor",
    # autograd
    "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "Function",
    "gradcheck", "GradcheckError",
    # recording, files, code
    "trace", "Trace", "save", "load", "show_source",
    # subpackages
    "nn", "optim", "data", "memory", "dtypes", "sparse", "utils",
]

_LAZY = ("viz", "exercises")  # imported on first use: the pictures import ipywidgets/graphviz


def __getattr__(name: str):
    # mt.viz (pictures: imports ipywidgets/graphviz when used) and mt.exercises load on first use
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'microtorch' has no attribute {name!r}")


def __dir__():
    # tab completion offers the public names and the lazy subpackages (not the engine's modules)
    return sorted(set(__all__) | set(_LAZY) | {"__version__"})
