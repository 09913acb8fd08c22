"""Optimizers (``mt.optim``): SGD, Adam and AdamW over flat buffers.

On construction an optimizer moves its parameters into one flat parameter buffer and one
flat gradient buffer (:func:`microtorch.nn.flatten_parameters`; per parameter group), and
keeps its own state (momentum, Adam's moments) as flat buffers of the same layout. A step
is then a handful of vectorized numpy calls over whole buffers — the same arithmetic as
PyTorch's per-parameter loop, so the numbers match PyTorch's step for step::

    opt = mt.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in loader:
        opt.zero_grad()            # every .grad to None (the buffer stays)
        loss_fn(model(x), y).backward()   # writes each gradient into its slice of the buffer
        opt.step()                 # p -= lr · m̂ / (√v̂ + ε) on the whole buffer at once

A parameter whose ``.grad`` is None is skipped (as in PyTorch): the update then runs over
the runs of neighbouring parameters that do have one.

Difference from PyTorch, on purpose: a learning rate of 0 is refused (PyTorch accepts
``lr=0``; here it is almost always a bug).
"""
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "SparseAdam"]
