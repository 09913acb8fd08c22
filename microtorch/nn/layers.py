"""Layers: modules that hold parameters (Linear, Embedding, LayerNorm) or settings
(Dropout, activations, Flatten). Each forward is one call into :mod:`.functional`."""
from __future__ import annotations

import math

from ..creation import empty
from ..grad_mode import no_grad
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """y = x Wᵀ + b, with W of shape (out_features, in_features).

    Initialised like PyTorch: W ~ U(−1/√in, 1/√in) (``kaiming_uniform_`` with a = √5) and
    b ~ U(−1/√in, 1/√in), drawn from ``generator`` (default: the global one, ``mt.manual_seed``).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None,
                 generator=None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = Parameter(empty(self.out_features, self.in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(self.out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound, generator)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table: ``emb(idx)`` returns rows ``weight[idx]`` (integer indices of any shape).

    ``weight`` (num_embeddings, embedding_dim) ~ N(0, 1) as in PyTorch. The gradient is
    dense — a scatter-add of the output gradients into the picked rows — or, with
    ``sparse=True``, a sparse COO tensor of just those rows (``weight.grad.is_sparse``;
    optimize it with ``mt.optim.SGD`` or ``mt.optim.SparseAdam``; see :mod:`microtorch.sparse`).
    ``padding_idx``: that row starts at zeros and never gets a gradient (the id of padding
    in a batch of sequences of different lengths), as in PyTorch.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 dtype=None, generator=None, sparse: bool = False):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.padding_idx = None if padding_idx is None else F._padding_row(padding_idx, self.num_embeddings)
        self.sparse = bool(sparse)
        self.weight = Parameter(empty(self.num_embeddings, self.embedding_dim, dtype=dtype))
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None) -> None:
        init.normal_(self.weight, generator=generator)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx, sparse=self.sparse)

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}"
                + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
                + (", sparse=True" if self.sparse else ""))


class LayerNorm(Module):
    """y = (x − μ) / √(σ² + ε) · γ + β over the last dims given by ``normalized_shape``;
    γ starts at ones and β at zeros (PyTorch's defaults)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = tuple(int(n) for n in shape), eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(init.ones_(empty(self.normalized_shape, dtype=dtype)))
            if bias:
                self.bias = Parameter(init.zeros_(empty(self.normalized_shape, dtype=dtype)))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    """In training mode zero each element with probability ``p`` and scale the rest by
    1/(1 − p); in eval mode the identity. Seeded by ``generator`` (default: the global one)."""

    def __init__(self, p: float = 0.5, generator=None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.generator = float(p), generator

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ReLU(Module):
    """max(x, 0) elementwise."""

    def forward(self, x):
        return F.relu(x)


class Tanh(Module):
    """tanh x elementwise."""

    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    """1 / (1 + e⁻ˣ) elementwise."""

    def forward(self, x):
        return F.sigmoid(x)


class Identity(Module):
    """Returns its input (a placeholder, e.g. where a layer is optional)."""

    def forward(self, x):
        return x


class Flatten(Module):
    """Merge dims ``start_dim..end_dim`` into one (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class CrossEntropyLoss(Module):
    """``F.cross_entropy(logits, target)``: log-softmax over classes, then negative log-likelihood."""

    def __init__(self, reduction: str = "mean", ignore_index: int = -100, label_smoothing: float = 0.0):
        super().__init__()
        self.reduction, self.ignore_index, self.label_smoothing = reduction, ignore_index, label_smoothing

    def forward(self, logits, target):
        return F.cross_entropy(logits, target, reduction=self.reduction, ignore_index=self.ignore_index,
                               label_smoothing=self.label_smoothing)


class MSELoss(Module):
    """``F.mse_loss(input, target)``: the mean of squared differences."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)
