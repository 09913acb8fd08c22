"""The base class of every optimizer (``mt.optim.Optimizer``), as ``torch/optim/optimizer.py``.

It keeps the parameter groups, each group's flat parameter and gradient buffers and its
state as flat buffers of the same layout; ``step`` runs a subclass's ``_update`` once per
run of neighbouring parameters that have a gradient and took the same number of steps, and
``_sparse_update`` for each parameter whose gradient is sparse. Also here: ``zero_grad``,
the per-parameter ``state`` view, ``state_dict`` / ``load_state_dict`` in PyTorch's layout,
and the two helpers a sparse step reads its rows with (shared by SGD and SparseAdam).
"""
from __future__ import annotations

import numpy as np

from ..grad_mode import enable_grad, no_grad
from .. import recording as _trace
from ..nn.flat import FlatParameters, _flat_tensor, collect_parameters, flatten_parameters
from ..sparse.coo import coalesce_plan, sum_duplicates
from ..tensor import Tensor


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


def _rows_of(buf: Tensor, flat: FlatParameters, i: int) -> np.ndarray:
    """Parameter ``i``'s slice of a flat buffer, in the parameter's shape (a numpy view)."""
    return buf._data[flat.slice_of(i)].reshape(flat.shapes[i])


def _coalesced_rows(g) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """A sparse gradient's distinct positions (a tuple of index arrays, for p[rows]) and
    their summed values — numpy arrays for this step only (coalesced as ``g.coalesce()``)."""
    indices, values = g._indices()._data, g._values()._data
    if g.is_coalesced():
        return tuple(indices), values
    plan = coalesce_plan(indices, g.shape[:g.sparse_dim()])
    return tuple(plan.indices), sum_duplicates(values, plan)
