"""Random programs: compositions of microtorch's ops on random shapes, replayable on any backend.

A :class:`Program` is built once from a seed (running it on microtorch to learn the shapes
and to keep only steps whose values stay finite and moderate), then replayed on
microtorch or PyTorch (the oracle) from the same leaf arrays. Steps pick their operands
from *every* value computed so far, so values are reused (shared subexpressions, diamonds,
``x * x``), and binary ops draw broadcast-compatible partners or make new leaves whose shape
broadcasts against the other operand.

The ops are written once against a backend namespace ``F`` whose names both libraries share
(``F.exp``, ``F.cat``, ``F.softmax``, ... and tensor methods).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import microtorch as mt

MAX_NUMEL = 48
MAX_NDIM = 4


@dataclass
class Step:
    name: str
    fn: Callable | None  # fn(F, *operands); None for a new leaf
    args: tuple[int, ...] = ()
    leaf: np.ndarray | None = None


@dataclass
class Program:
    steps: list[Step] = field(default_factory=list)
    outputs: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (value index, weight)

    def run(self, backend):
        """Values of every step (leaves included) and the scalar loss, on ``backend``."""
        vals = []
        for s in self.steps:
            if s.fn is None:
                vals.append(backend.leaf(s.leaf))
            else:
                vals.append(s.fn(backend.F, *(vals[i] for i in s.args)))
        loss = None
        for i, w in self.outputs:
            term = (vals[i] * backend.const(w)).sum()
            loss = term if loss is None else loss + term
        return vals, loss

    @property
    def leaf_indices(self) -> list[int]:
        return [i for i, s in enumerate(self.steps) if s.fn is None]

    def describe(self) -> str:
        lines = []
        for i, s in enumerate(self.steps):
            what = f"leaf {list(s.leaf.shape)}" if s.fn is None else f"{s.name}({', '.join(f'v{j}' for j in s.args)})"
            lines.append(f"v{i} = {what}")
        lines.append("loss = " + " + ".join(f"(v{i} * w).sum()" for i, _ in self.outputs))
        return "\n".join(lines)


class MicrotorchBackend:
    F = mt

    def __init__(self, dtype=np.float64):
        self.dtype = dtype

    def leaf(self, a):
        return mt.tensor(a.astype(self.dtype), requires_grad=True)

    def const(self, a):
        return mt.tensor(a.astype(self.dtype))


def _unary(rng, shape):
    """(name, fn) for a random shape-preserving or reducing op applicable to ``shape``."""
    nd = len(shape)
    c = float(np.round(rng.uniform(-2, 2), 3)) or 0.5
    ops = {
        "exp": lambda F, x: F.exp(x),
        "log(x²+1)": lambda F, x: F.log(x * x + 1),
        "sqrt(x²+½)": lambda F, x: F.sqrt(x * x + 0.5),
        "tanh": lambda F, x: F.tanh(x),
        "sigmoid": lambda F, x: F.sigmoid(x),
        "relu": lambda F, x: F.relu(x),
        "abs": lambda F, x: F.abs(x),
        "neg": lambda F, x: -x,
        "x**2": lambda F, x: x ** 2,
        "x**3": lambda F, x: x ** 3,
        "(x²+1)**1.5": lambda F, x: (x * x + 1) ** 1.5,
        "(x²+1)**-1": lambda F, x: (x * x + 1) ** -1,
        "clamp": lambda F, x: F.clamp(x, -0.5, 0.5),
        f"x*{c}+1": lambda F, x: x * c + 1,
        f"{c}-x": lambda F, x: c - x,
        f"{c}/(x²+1)": lambda F, x: c / (x * x + 1),
        "sum": lambda F, x: x.sum(),
        "mean": lambda F, x: x.mean(),
        "max": lambda F, x: x.max(),
    }
    if nd:
        d = int(rng.integers(-nd, nd))
        k = bool(rng.integers(2))
        dims = tuple(int(v) for v in rng.choice(nd, size=int(rng.integers(1, nd + 1)), replace=False))
        p = tuple(int(v) for v in rng.permutation(nd))
        ops.update({
            f"sum({dims},keepdim={k})": lambda F, x: x.sum(dims, keepdim=k),
            f"mean({d},keepdim={k})": lambda F, x: x.mean(d, keepdim=k),
            f"amax({dims},keepdim={k})": lambda F, x: x.amax(dims, keepdim=k),
            f"max({d}).values": lambda F, x: x.max(d, keepdim=k).values,
            f"softmax({d})": lambda F, x: F.softmax(x, d),
            f"log_softmax({d})": lambda F, x: F.log_softmax(x, d),
            f"permute{p}": lambda F, x: x.permute(*p),
            f"transpose(0,{d})": lambda F, x: x.transpose(0, d),
            "flatten": lambda F, x: x.flatten(),
            f"reshape{shape[::-1]}": lambda F, x: x.reshape(*shape[::-1]),
            f"[{d % shape[0]}]": lambda F, x: x[d % shape[0]],
            f"[..., 1:]" if shape[-1] > 1 else "[..., :1]":
                (lambda F, x: x[..., 1:]) if shape[-1] > 1 else (lambda F, x: x[..., :1]),
        })
        idx = [int(v) for v in rng.integers(0, shape[0], size=int(rng.integers(1, 4)))]
        idx.append(idx[0])  # a repeated index
        ops[f"[{idx}]"] = lambda F, x: x[idx]
        if shape[d] > 1:
            ops[f"var({d},keepdim={k})"] = lambda F, x: x.var(d, keepdim=k)
        ones = [i for i, n in enumerate(shape) if n == 1]
        if ones:
            e = ones[int(rng.integers(len(ones)))]
            big = shape[:e] + (3,) + shape[e + 1:]
            ops[f"expand{big}"] = lambda F, x: x.expand(*big)
            ops[f"squeeze({e})"] = lambda F, x: x.squeeze(e)
    if nd < MAX_NDIM:
        u = int(rng.integers(-nd - 1, nd + 1))
        ops[f"unsqueeze({u})"] = lambda F, x: x.unsqueeze(u)
        ops["stack([x,x*2])"] = lambda F, x: F.stack([x, x * 2], dim=u)
    if nd:
        d = int(rng.integers(-nd, nd))
        ops[f"cat([x,x²],{d})"] = lambda F, x: F.cat([x, x * x], dim=d)
    name = list(ops)[int(rng.integers(len(ops)))]
    return name, ops[name]


BINARY = {
    "add": lambda F, a, b: a + b,
    "sub": lambda F, a, b: a - b,
    "mul": lambda F, a, b: a * b,
    "div": lambda F, a, b: a / (b * b + 1),
    "maximum": lambda F, a, b: F.maximum(a, b),
    "minimum": lambda F, a, b: F.minimum(a, b),
    "where": lambda F, a, b: F.where(a.detach() > 0, a, b),
}


def _broadcastable(s1, s2) -> bool:
    try:
        np.broadcast_shapes(s1, s2)
        return True
    except ValueError:
        return False


def _partner_shape(rng, shape):
    """A random shape that broadcasts against ``shape``: trailing dims, some set to 1."""
    keep = int(rng.integers(0, len(shape) + 1))
    tail = list(shape[len(shape) - keep:])
    for i in range(len(tail)):
        if rng.random() < 0.3:
            tail[i] = 1
    lead = [] if len(shape) >= MAX_NDIM or rng.random() < 0.7 else [2]
    return tuple(lead + tail)


def random_program(seed: int, n_steps: int = 12, n_leaves: int = 2) -> Program:
    """A random program of ``n_steps`` op steps over ``n_leaves`` initial leaves (more may be added)."""
    rng = np.random.default_rng(seed)
    prog = Program()
    vals: list[mt.Tensor] = []
    backend = MicrotorchBackend()

    def add_leaf(shape):
        a = rng.standard_normal(shape)
        prog.steps.append(Step("leaf", None, leaf=a))
        vals.append(backend.leaf(a))
        return len(vals) - 1

    for _ in range(n_leaves):
        add_leaf(tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3)))))
    ops_done, attempts = 0, 0
    while ops_done < n_steps and attempts < 20 * n_steps:
        attempts += 1
        # prefer recent values, but any value can be reused
        i = int(len(vals) - 1 - min(rng.geometric(0.35) - 1, len(vals) - 1))
        x = vals[i]
        kind = rng.random()
        if kind < 0.5:
            name, fn = _unary(rng, x.shape)
            args = (i,)
        elif kind < 0.85:
            name = list(BINARY)[int(rng.integers(len(BINARY)))]
            fn = BINARY[name]
            partners = [j for j, v in enumerate(vals) if _broadcastable(v.shape, x.shape)
                        and len(np.broadcast_shapes(v.shape, x.shape)) <= MAX_NDIM]
            if rng.random() < 0.25 or not partners:
                j = add_leaf(_partner_shape(rng, x.shape))
            else:
                j = partners[int(rng.integers(len(partners)))]  # may be i itself: x op x
            args = (i, j) if rng.random() < 0.5 else (j, i)
        else:
            if x.ndim == 0:
                continue
            k, m = x.shape[-1], int(rng.integers(1, 4))
            other = [j for j, v in enumerate(vals) if v.ndim >= 1 and
                     (v.shape[0] if v.ndim == 1 else v.shape[-2]) == k]
            if other and rng.random() < 0.5:
                j = other[int(rng.integers(len(other)))]
            else:
                shape = (k,) if rng.random() < 0.3 else (k, m) if rng.random() < 0.6 else (2, k, m)
                j = add_leaf(shape)
            name, fn, args = "matmul", (lambda F, a, b: F.matmul(a, b)), (i, j)
        try:
            with np.errstate(all="ignore"):  # a step with non-finite values is dropped below
                out = fn(mt, *(vals[a] for a in args))
        except (RuntimeError, ValueError, IndexError):
            continue  # e.g. batch dims that do not broadcast
        d = out.detach().numpy()
        if out.numel() == 0 or out.numel() > MAX_NUMEL or out.ndim > MAX_NDIM:
            continue
        if not np.all(np.isfinite(d)) or np.abs(d).max() > 1e4:
            continue
        if name.startswith("max(") and out.numel() and _has_ties_along(vals[args[0]], name):
            continue  # max(dim) sends the gradient to one index; ties make that index arbitrary
        prog.steps.append(Step(name, fn, args))
        vals.append(out)
        ops_done += 1
    op_indices = [i for i, s in enumerate(prog.steps) if s.fn is not None]
    chosen = {len(prog.steps) - 1} | {i for i in op_indices if rng.random() < 0.3}
    prog.outputs = [(i, rng.standard_normal(vals[i].shape)) for i in sorted(chosen)]
    return prog


def _has_ties_along(x: mt.Tensor, name: str) -> bool:
    d = int(name[len("max("):name.index(")")])
    a = np.sort(x.detach().numpy(), axis=d)
    return bool(np.any(np.diff(a, axis=d) < 1e-9))
