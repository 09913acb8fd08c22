"""microtorch: a compact reverse-mode autograd engine whose memory machinery is real.

``import microtorch as mt`` gives PyTorch-like names: ``mt.tensor``, ``mt.randn``, ops
(``mt.exp``, ``mt.matmul``, ...), ``mt.no_grad``, ``mt.grad``, ``mt.gradcheck``, and
``mt.trace()`` to record what the engine does for the pictures in ``microtorch.viz``;
``mt.nn`` (modules), ``mt.optim`` (optimizers over flat buffers), ``mt.data`` (datasets and
loaders), ``mt.save``/``mt.load`` (state dicts as ``.npz``).
Importing microtorch loads numpy only: no matplotlib, graphviz or ipywidgets.
"""
from .tensor import Tensor  # first: binding its operator methods imports the ops
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
from .comparison import logical_and, logical_not, logical_or
from .gradcheck import GradcheckError, gradcheck
from .memory.trace import Trace
from .memory.trace import record as trace
from .source import show_source
from . import data, nn, optim  # after the ops: layers and optimizers are built from them
from . import sparse  # sparse tensors and sparse gradients (mt.sparse.mm, mt.sparse.stats)
from .sparse import sparse_coo_tensor, sparse_csr_tensor
from .serialization import load, save

float = float32  # noqa: A001 — PyTorch's alias (mt.float)
bool = bool_  # noqa: A001 — PyTorch's name (mt.bool)

__version__ = "0.1.0"


def __getattr__(name: str):
    # mt.viz (pictures: imports ipywidgets/graphviz when used) and mt.exercises load on first use
    if name in ("viz", "exercises"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'microtorch' has no attribute {name!r}")
