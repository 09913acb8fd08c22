"""The seed article's "tinytorch" as a benchmark peer: the least a numpy autograd engine can be.

A tensor is a numpy array, a ``grad``, its parents and a closure that pushes its gradient
to them (the seed's design, with gradients accumulated instead of overwritten, and
broadcasting reduced back for the bias add). ``backward`` is a recursive topological sort
and one call per closure. There is nothing else: no storages or
refcounts, no allocator, no node records, no version counters, no shape or dtype checks,
no trace, no higher-order gradients.

It is here to put a number on the floor for *any* Python engine over numpy: the
difference between microtorch and it is what microtorch's memory model and checks cost,
and its own ratio to PyTorch shows how far a Python engine can go at all.
"""
from __future__ import annotations

import numpy as np


class Tensor:
    __slots__ = ("data", "grad", "_prev", "_backward")

    def __init__(self, data, prev=(), backward=None):
        self.data, self.grad, self._prev, self._backward = data, None, prev, backward

    def item(self):
        return self.data.item()

    def _push(self, g):
        self.grad = g if self.grad is None else self.grad + g

    def __add__(self, other):
        def backward(g):
            self._push(_unbroadcast(g, self.data.shape))
            other._push(_unbroadcast(g, other.data.shape))
        return Tensor(self.data + other.data, (self, other), backward)

    def __mul__(self, other):
        def backward(g):
            self._push(g * other.data)
            other._push(g * self.data)
        return Tensor(self.data * other.data, (self, other), backward)

    def __matmul__(self, other):
        def backward(g):
            self._push(g @ other.data.T)
            other._push(self.data.T @ g)
        return Tensor(self.data @ other.data, (self, other), backward)

    def relu(self):
        mask = self.data > 0

        def backward(g):
            self._push(g * mask)
        return Tensor(self.data * mask, (self,), backward)

    def sum(self):
        def backward(g):
            self._push(np.broadcast_to(g, self.data.shape))
        return Tensor(self.data.sum(), (self,), backward)

    def mean(self):
        def backward(g):
            self._push(np.broadcast_to(g / self.data.size, self.data.shape))
        return Tensor(self.data.mean(), (self,), backward)

    def backward(self):
        order, seen = [], set()

        def visit(t):
            if id(t) not in seen:
                seen.add(id(t))
                for p in t._prev:
                    visit(p)
                order.append(t)

        visit(self)
        self.grad = np.ones_like(self.data)
        for t in reversed(order):
            if t._backward is not None:
                t._backward(t.grad)


def _unbroadcast(g, shape):
    """Sum ``g`` over the dimensions broadcasting added or stretched, back to ``shape``."""
    while g.ndim > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdims=True)
    return g


def tensor(data, requires_grad=False):
    """``torch.tensor``'s signature, so the benchmarks' shared engine code runs on it."""
    return Tensor(np.array(data))


def linear(x, w, b):
    """y = x Wᵀ + b (W in PyTorch's out × in layout), one closure like the ops above; x gets a
    gradient only if an op made it (the input batch needs none, as in the other engines)."""
    def backward(g):
        if x._backward is not None:
            x._push(g @ w.data)
        w._push(g.T @ x.data)
        b._push(g.sum(0))
    y = x.data @ w.data.T
    y += b.data
    return Tensor(y, (x, w, b), backward)


def cross_entropy(z, target):
    """Mean over the rows of −log softmax(z)[target] (shifted by the row max), with the
    gradient (softmax − onehot) / N — the training step's loss as one closure."""
    n = z.data.shape[0]
    rows = np.arange(n)
    e = z.data - z.data.max(axis=1, keepdims=True)
    picked = e[rows, target]
    np.exp(e, out=e)
    total = e.sum(axis=1, keepdims=True)

    def backward(g):
        d = e / total
        d[rows, target] -= 1
        d *= g / n
        z._push(d)
    return Tensor(np.asarray((np.log(total[:, 0]) - picked).mean()), (z,), backward)
