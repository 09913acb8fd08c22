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
from __future__ import annotations

import math

import numpy as np

from ..grad_mode import enable_grad, no_grad
from .. import recording as _trace
from ..nn.flat import FlatParameters, _flat_tensor, collect_parameters, flatten_parameters
from ..sparse.coo import coalesce_plan, sum_duplicates
from ..tensor import Tensor

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "SparseAdam"]


class Optimizer:
    """Base class: parameter groups, flat buffers, ``zero_grad`` and the step loop.

    Subclasses set ``state_names`` (their flat state buffers), check hyperparameters in
    ``_check``, and write ``_update(group, state, params, grads, step)`` — the math on
    numpy arrays (slices of the flat buffers) for parameters that all took ``step`` steps.
    """

    state_names: tuple[str, ...] = ()

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self._scratch: dict[np.dtype, np.ndarray] = {}  # per dtype: room for a step's temporaries (see _room)
        self.param_groups: list[dict] = []
        self._flats: list[FlatParameters] = []
        self._state: list[dict[str, Tensor]] = []  # per group: name -> flat state tensor
        self._steps: list[np.ndarray] = []  # per group: steps taken, per parameter
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {type(params).__name__}; wrap it in a list: [t]")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list: pass model.parameters() (or a "
                             "list of tensors with requires_grad=True)")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict) -> None:
        """Add parameters (with their own hyperparameters) — they get their own flat buffers."""
        if not isinstance(group, dict):
            raise TypeError(f"param group must be a dict, got {type(group).__name__}")
        params, _ = collect_parameters(group["params"], type(self).__name__)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        mine = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in mine for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group = {**self.defaults, **group, "params": params}
        self._check(group)
        flat = flatten_parameters(params, what=type(self).__name__)
        self.param_groups.append(group)
        self._flats.append(flat)
        self._steps.append(np.zeros(len(params), dtype=np.int64))
        state = {}
        for name in self._state_names(group):
            buf = _flat_tensor(flat.numel, flat.dtype, "tensor")
            buf._data.fill(0)
            state[name] = buf
        self._state.append(state)

    def _state_names(self, group: dict) -> tuple[str, ...]:
        return self.state_names

    def _check(self, group: dict) -> None:
        lr = group["lr"]
        if not isinstance(lr, (int, float)) or not lr > 0:
            raise ValueError(f"Invalid learning rate: {lr} (it must be a number > 0; microtorch "
                             "refuses lr=0, which PyTorch accepts)")
        if group.get("weight_decay", 0.0) < 0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")

    # -- the loop ----------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every ``.grad`` to None (PyTorch's default), or with ``set_to_none=False`` one
        ``fill(0)`` of each group's gradient buffer (see :meth:`FlatParameters.zero_grad`)."""
        for flat in self._flats:
            flat.zero_grad(set_to_none)

    @no_grad()
    def step(self, closure=None):
        """Update every parameter that has a gradient; ``closure`` (optional) recomputes the
        loss first and its value is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group, flat, state, steps in zip(self.param_groups, self._flats, self._state, self._steps):
            has = flat.sync_grads()
            for i, p in enumerate(flat.params):
                if p.grad is not None and p.grad.is_sparse:  # Embedding(sparse=True): its own branch
                    self._sparse_update(group, {k: _rows_of(v, flat, i) for k, v in state.items()},
                                        _rows_of(flat.data, flat, i), p.grad, int(steps[i]) + 1)
                    steps[i] += 1
            for sl, members in flat.segments(has, key=steps):
                step = int(steps[members.start]) + 1
                self._update(group, {k: v._data[sl] for k, v in state.items()},
                             flat.data._data[sl], flat.grad._data[sl], step)
                steps[members] += 1
            flat.bump_version()
        rec = _trace.active
        if rec is not None:
            rec.emit("optimizer_step", optimizer=type(self).__name__,
                     params=[f.data._storage.id for f in self._flats],
                     grads=[f.grad._storage.id for f in self._flats])
        return loss

    def _update(self, group: dict, state: dict, p: np.ndarray, g: np.ndarray, step: int) -> None:
        raise NotImplementedError

    def _sparse_update(self, group: dict, state: dict, p: np.ndarray, g, step: int) -> None:
        """The step for one parameter ``p`` (its slice of the flat buffer, in its shape)
        whose gradient ``g`` is sparse; optimizers that have no lazy form refuse, as in PyTorch."""
        raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")

    def _room(self, p: np.ndarray) -> np.ndarray:
        """A scratch array of p's size and dtype, the same memory every step: the seam that
        lets an update write its temporaries with ``out=`` instead of allocating (and
        page-faulting) new p-sized arrays each step — several times faster on a flat buffer
        of a million parameters than the same expressions written as plain numpy."""
        buf = self._scratch.get(p.dtype)
        if buf is None or buf.size < p.size:
            buf = self._scratch[p.dtype] = np.empty(p.size, p.dtype)
        return buf[:p.size]

    # -- looking inside ------------------------------------------------------------------------
    @property
    def flat_buffers(self) -> list[FlatParameters]:
        """Each parameter group's :class:`~microtorch.nn.flat.FlatParameters`."""
        return list(self._flats)

    @property
    def state(self) -> dict:
        """PyTorch's per-parameter view: ``opt.state[p]["exp_avg"]`` is a tensor viewing p's
        slice of the flat state buffer (no copy); parameters not yet stepped have no entry."""
        from ..creation import tensor

        out = {}
        for flat, state, steps in zip(self._flats, self._state, self._steps):
            for i, p in enumerate(flat.params):
                if steps[i] == 0:
                    continue
                entry = {"step": tensor(float(steps[i]))}
                for name, buf in state.items():
                    entry[name] = Tensor._view(buf._data[flat.slice_of(i)].reshape(p.shape), buf)
                out[p] = entry
        return out

    # -- saving and restoring ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """PyTorch's layout: ``{"state": {i: {name: tensor}}, "param_groups": [{..., "params": [i, ...]}]}``,
        parameters numbered across groups in order; only parameters that took a step have a
        ``state`` entry. The tensors are copies (later steps do not change a saved dict).
        SGD keeps ``momentum_buffer`` (nothing without momentum), Adam/AdamW ``step`` (a 0-d
        float32 tensor, as in PyTorch), ``exp_avg``, ``exp_avg_sq`` (and ``max_exp_avg_sq``)."""
        from ..creation import tensor

        state, groups, index = {}, [], 0
        for group, flat, bufs, steps in zip(self.param_groups, self._flats, self._state, self._steps):
            numbers = list(range(index, index + len(flat.params)))
            for i, p in enumerate(flat.params):
                if steps[i]:
                    entry = {} if not self._counts_steps else {"step": tensor(float(steps[i]))}
                    for name, buf in bufs.items():
                        entry[name] = tensor(buf._data[flat.slice_of(i)].reshape(p.shape))
                    if entry:
                        state[numbers[i]] = entry
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": numbers})
            index += len(numbers)
        return {"state": state, "param_groups": groups}

    _counts_steps = True  # does the state_dict carry "step" (PyTorch's SGD does not)

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned (from this or an identically built
        optimizer): hyperparameters, state buffers (copied into the flat state buffers) and
        step counts, so training continues exactly where it was saved."""
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= state_dict.keys():
            raise TypeError("load_state_dict expects the dict returned by optimizer.state_dict() "
                            "(with keys 'state' and 'param_groups'), got "
                            + (f"a dict with keys {sorted(map(str, state_dict))}" if isinstance(state_dict, dict)
                               else type(state_dict).__name__))
        groups, state = state_dict["param_groups"], state_dict["state"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups "
                             f"({len(groups)}, this optimizer has {len(self.param_groups)})")
        for saved, flat in zip(groups, self._flats):
            if len(saved["params"]) != len(flat.params):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the "
                                 f"size of optimizer's group ({len(saved['params'])} parameters, "
                                 f"this group has {len(flat.params)})")
        plan = []  # check everything before changing anything
        for saved, group, flat, bufs in zip(groups, self.param_groups, self._flats, self._state):
            hyper = {k: v for k, v in saved.items() if k != "params"}
            self._check({**group, **hyper})
            names = self._state_names({**group, **hyper})
            if set(names) != set(bufs):
                raise ValueError(f"loaded state dict needs state {sorted(names)}, but this optimizer was "
                                 f"built with {sorted(bufs)} (e.g. momentum=0 vs momentum>0); build it "
                                 "with the same hyperparameters")
            entries = []
            for i, (number, p) in enumerate(zip(saved["params"], flat.params)):
                entry = state.get(number)
                if entry is None:
                    entries.append(None)
                    continue
                for name in names:
                    value = entry.get(name)
                    if not isinstance(value, Tensor) or value.shape != p.shape:
                        raise ValueError(f"loaded state for parameter {number} has {name!r} "
                                         f"{'of shape ' + str(list(value.shape)) if isinstance(value, Tensor) else repr(value)}; "
                                         f"expected a tensor of shape {list(p.shape)}")
                step = entry.get("step", 1) if self._counts_steps else 1
                entries.append((int(float(step)), entry))
            plan.append((hyper, entries))
        for (hyper, entries), group, flat, bufs, steps in zip(plan, self.param_groups, self._flats,
                                                              self._state, self._steps):
            group.update(hyper)
            for i, item in enumerate(entries):
                steps[i] = 0 if item is None else item[0]
                for name, buf in bufs.items():
                    piece = buf._data[flat.slice_of(i)]
                    piece[...] = 0 if item is None else item[1][name]._data.reshape(-1)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

    With d = g + λp (weight decay λ) and momentum μ, dampening τ::

        b ← d (first step),  b ← μ b + (1 − τ) d (later steps)
        d ← d + μ b (Nesterov)  or  d ← b
        p ← p − lr · d
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False):
        self._row_marks: dict[int, np.ndarray] = {}  # scratch of the sparse (lazy) step
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

    _counts_steps = False  # PyTorch's SGD state is the momentum buffer alone

    def _state_names(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _check(self, group):
        super()._check(group)
        if group["momentum"] < 0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _update(self, group, state, p, g, step):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        d = -g if group["maximize"] else g
        if wd != 0:
            d = d + wd * p
        if mu != 0:
            buf = state["momentum_buffer"]
            if step == 1:
                np.copyto(buf, d)
            else:
                buf *= mu
                if group["dampening"]:
                    buf += (1 - group["dampening"]) * d
                else:
                    buf += d  # no temporary for the common case
            d = d + mu * buf if group["nesterov"] else buf
        p -= np.multiply(d, lr, out=self._room(p))  # = p − lr·d, with no temporary as large as p

    def _sparse_update(self, group, state, p, g, step):
        """Lazy SGD: only the rows the gradient touches change, p[r] ← p[r] − lr · g[r]
        (duplicates summed first). Momentum and weight decay would touch every row."""
        if group["momentum"] != 0 or group["weight_decay"] != 0:
            raise RuntimeError("SGD with a sparse gradient supports neither momentum nor weight_decay "
                               "in microtorch (they would update every row, not only the touched ones); "
                               "use momentum=0, weight_decay=0, or mt.optim.SparseAdam")
        scale = group["lr"] if group["maximize"] else -group["lr"]
        if g.sparse_dim() != 1:
            rows, values = _coalesced_rows(g)
            p[rows] += values * scale
            return
        _add_rows(p, g._indices()._data[0], g._values()._data, scale, self._marks(p.shape[0]))

    def _marks(self, n: int) -> np.ndarray:
        """Scratch space for :func:`_add_rows`: one int per row, the same array every step."""
        if n not in self._row_marks:
            self._row_marks[n] = np.empty(n, np.int64)
        return self._row_marks[n]


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction; ``amsgrad`` keeps the running max of v.

    With gradient g (plus λp when ``weight_decay`` λ > 0), step t::

        m ← β₁ m + (1 − β₁) g          v ← β₂ v + (1 − β₂) g²
        p ← p − lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)

    :class:`AdamW` instead decays the weights directly: p ← p (1 − lr λ) before the step.
    """

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())

    def _check(self, group):
        super()._check(group)
        if not 0.0 <= group["eps"]:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        for i, b in enumerate(group["betas"]):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b} (it must be in [0, 1))")

    def _sparse_update(self, group, state, p, g, step):
        raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")

    def _update(self, group, state, p, g, step):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if group["maximize"]:
            g = -g
        if wd != 0:
            if self.decoupled:
                p *= 1 - lr * wd
            else:
                g = g + wd * p
        m, v = state["exp_avg"], state["exp_avg_sq"]
        t = self._room(p)  # every temporary below goes into this one scratch array
        m += np.multiply(np.subtract(g, m, out=t), 1 - beta1, out=t)  # m ← β₁ m + (1 − β₁) g
        v *= beta2
        v += np.multiply(np.multiply(g, 1 - beta2, out=t), g, out=t)  # v ← β₂ v + (1 − β₂) g²
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            np.maximum(vmax, v, out=vmax)
            v = vmax
        bias1 = 1 - beta1 ** step
        bias2_sqrt = math.sqrt(1 - beta2 ** step)
        denom = np.sqrt(v, out=t)
        denom /= bias2_sqrt
        denom += eps  # √v / √(1 − β₂ᵗ) + ε
        p -= np.multiply(np.divide(m, denom, out=t), lr / bias1, out=t)  # p ← p − lr / (1 − β₁ᵗ) · m / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p ← p (1 − lr λ), then Adam's step.
    ``weight_decay`` defaults to 0.01, as in PyTorch."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class SparseAdam(Optimizer):
    """Adam masked to the rows a sparse gradient touches (``torch.optim.SparseAdam``).

    For the coalesced gradient's rows R only (the other rows of p, m and v do not move)::

        m[R] ← β₁ m[R] + (1 − β₁) g        v[R] ← β₂ v[R] + (1 − β₂) g²
        p[R] ← p[R] − lr √(1 − β₂ᵗ) / (1 − β₁ᵗ) · m[R] / (√v[R] + ε)

    with t the parameter's step count (every step it had a gradient). It is an
    approximation of Adam: dense Adam would also decay m and v of the untouched rows
    (their gradient is 0) and still move those rows by their momentum. Dense gradients
    are refused, as in PyTorch — including one that microtorch's density threshold made
    dense while accumulating many backward calls (see :mod:`microtorch.sparse.gradient`;
    ``mt.sparse.options.densify_threshold = None`` keeps gradients sparse, as PyTorch does).
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize))

    def _check(self, group):
        super()._check(group)
        if not 0.0 < group["eps"]:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        for i, b in enumerate(group["betas"]):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")

    def _update(self, group, state, p, g, step):
        raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")

    def _sparse_update(self, group, state, p, g, step):
        (beta1, beta2), eps, lr = group["betas"], group["eps"], group["lr"]
        rows, grad = _coalesced_rows(g)
        if group["maximize"]:
            grad = -grad
        if grad.shape[0] == 0:
            return
        m, v = state["exp_avg"], state["exp_avg_sq"]
        old_m, old_v = m[rows], v[rows]  # the same operations in PyTorch's order
        m_update = (grad - old_m) * (1 - beta1)
        m[rows] += m_update
        v_update = (grad ** 2 - old_v) * (1 - beta2)
        v[rows] += v_update
        numer = m_update + old_m
        denom = np.sqrt(v_update + old_v) + eps
        step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        p[rows] += -step_size * (numer / denom)


def _rows_of(buf: Tensor, flat: FlatParameters, i: int) -> np.ndarray:
    """Parameter ``i``'s slice of a flat buffer, in the parameter's shape (a numpy view)."""
    return buf._data[flat.slice_of(i)].reshape(flat.shapes[i])


def _add_rows(p: np.ndarray, rows: np.ndarray, values: np.ndarray, scale: float,
              marks: np.ndarray) -> None:
    """p[rows[k]] += scale · values[k] for every k, repeated rows adding up — without sorting.

    ``marks[rows] = k`` keeps, for each distinct row, the last k that wrote it. The few
    repeats are first added (``np.add.at``) into that last entry's scaled values; then one
    fancy-indexed ``+=`` over all the rows adds them, the last write of a repeated row
    carrying the row's whole sum. Equal to adding the coalesced gradient, up to the order
    of the sums."""
    k = np.arange(rows.size)
    marks[rows] = k
    owner = marks[rows]
    scaled = np.multiply(values, scale, dtype=p.dtype)
    repeats = owner != k
    if repeats.any():  # (none, the usual case for a large table)
        np.add.at(scaled, owner[repeats], scaled[repeats])
    p[rows] += scaled


def _coalesced_rows(g) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """A sparse gradient's distinct positions (a tuple of index arrays, for p[rows]) and
    their summed values — numpy arrays for this step only (coalesced as ``g.coalesce()``)."""
    indices, values = g._indices()._data, g._values()._data
    if g.is_coalesced():
        return tuple(indices), values
    plan = coalesce_plan(indices, g.shape[:g.sparse_dim()])
    return tuple(plan.indices), sum_duplicates(values, plan)
