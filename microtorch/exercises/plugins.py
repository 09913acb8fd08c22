"""Build-your-own: run the real engine on the learner's code.

``with mt.exercises.use(unbroadcast=my_unbroadcast): loss.backward()`` swaps one of the
engine's entry points for the learner's function for the duration of the block, and puts
the engine's own back afterwards (also after an error). Everything else — the graph, the
pictures, the traces — is the real engine, so a player recorded inside the block shows the
learner's version at work. The plug points, each the signature the notebook's exercise asks
for:

=====================  ====================================================  ========
plug point             what the engine then calls                            notebook
=====================  ====================================================  ========
``unbroadcast``        ``unbroadcast(g, shape)`` in every broadcasting op's   01
                       backward
``peak_extra_bytes``   ``peak_extra_bytes(trace)``: ``Trace.peak`` (what the   03
                       liveness picture marks as the peak)
``topological_order``  ``topo_order(root)``: the schedule of                 02
                       ``backward(order="topo")``
``dependency_counts``  ``dependency_counts(root)``: the pending counts of    02
                       the default ``backward()``
``align_up``           ``align_up(n, a)``: where every ``Arena`` puts a      04
                       block and how it grows
``size_class_of``      ``size_class_of(n, per_doubling)``: the class every   05
                       ``Pool`` made inside the block serves a request from
``extent``             ``extent(offset, shape, strides)``: the cheap alias   06
                       test (``mt.memory.alias(..., exact=False)`` and the
                       first step of the exact one)
``derivative_from_``   ``derivative_from_output(op, z)``: the backward of     07
``output``             ``relu_``, ``exp_``, ``sigmoid_``, ``tanh_``, ``sqrt_``
``adam_step``          ``adam_step(p, g, m, v, vmax, step, lr, beta1, beta2,  08
                       eps, weight_decay, decoupled, amsgrad)``: the update
                       of ``mt.optim.Adam`` and ``AdamW``
``sgd_momentum_step``  ``sgd_momentum_step(p, g, buf, step, lr, momentum,    08
                       dampening, weight_decay)``: ``mt.optim.SGD``'s update
=====================  ====================================================  ========

Each plug point has a suite: a few of the engine's own tests (defined in :mod:`.engine_suites`,
run by :mod:`.suites`; the engine's test suite runs them too) that must pass with the learner's
function plugged in; the checker of that exercise runs it after the exercise's own cases pass.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .checking import _replace_everywhere


def _engine():
    """plug point -> (what to replace, how to wrap the learner's function)."""
    from .. import autograd
    from ..functions import broadcast
    from ..memory import block
    from ..memory.aliasing import Layout
    from ..memory.pool import Pool
    from ..node import Function
    from ..trace.recorder import Trace
    from ..optim import SGD, Adam
    from ..tensor import Tensor

    def as_tensor_unbroadcast(fn):
        def unbroadcast(g, shape):
            out = fn(g, tuple(shape))
            if not isinstance(out, Tensor):
                out = Tensor._wrap(np.asarray(out, dtype=g.dtype))
            if tuple(out.shape) != tuple(shape):
                raise RuntimeError(f"your unbroadcast returned shape {tuple(out.shape)} for an operand "
                                   f"of shape {tuple(shape)}")
            return out
        return unbroadcast

    def topological_order(fn):
        def order(roots):
            out, seen = [], set()
            for root, _, _ in roots:
                if isinstance(root, Function) and root not in seen:
                    fresh = []
                    for node in fn(root):
                        if node not in seen:
                            seen.add(node)
                            fresh.append(node)
                    # a later root's new nodes run first: they may feed the nodes seen before
                    # (which never feed them), as in the engine's one post-order over all roots
                    out = fresh + out
            return out
        return order

    def dependencies(fn):
        def counts(roots):
            reachable, total = [], {}
            for root, _, _ in roots:
                if isinstance(root, Function) and root not in total:
                    mine = fn(root)
                    new = [node for node in mine if node not in total]
                    # a node reached before gains only the edges from the new nodes (the
                    # learner's counts repeat those among the nodes seen before); a new
                    # node's consumers are all new, so its count is complete
                    for node in new:
                        for e in node.next:
                            if isinstance(e, Function) and e in total:
                                total[e] += 1
                    for node in new:
                        total[node] = int(mine[node])
                    reachable += new
            for node in reachable:
                autograd._alive(node).pending = total[node]
            return reachable
        return counts

    def size_class(fn):
        def per_doubling(pool_):
            return sum(1 for c in pool_.classes if c < 2 * pool_.min_block)

        def size_class(self, nbytes):
            return fn(nbytes, per_doubling(self))

        init = Pool.__init__

        def __init__(self, *args, **kwargs):
            init(self, *args, **kwargs)
            m = per_doubling(self)
            self._small = [fn(n, m) for n in range(len(self._small))]  # the small-request table too
        return {"size_class": size_class, "__init__": __init__}

    def extent(fn):
        def layout_extent(self):
            return None if self.numel == 0 else tuple(fn(self.offset, self.shape, self.strides))
        return layout_extent

    def peak(fn):
        def trace_peak(self):
            extra, step = fn(self)
            # what was live before the first event: a baseline's bytes (a hand-written trace
            # may have none, and its first event's bytes are the learner's to count)
            start = self.replay().live_bytes()[0] if self.events and self.events[0]["kind"] == "baseline" else 0
            return (start + int(extra), 0 if step is None else int(step))
        return trace_peak

    def from_output(fn):
        def backward_of(op):
            def backward(ctx, g):
                (z,) = ctx.saved_tensors
                d = fn(op, np.array(z._data))
                if d is None:
                    raise RuntimeError(f"your derivative_from_output says {op}'s derivative is not a "
                                       "function of its output, but the engine's in-place "
                                       f"{op}_ needs it")
                return g * Tensor._wrap(np.asarray(d, dtype=g.dtype) * np.ones(z.shape, dtype=g.dtype))
            return staticmethod(backward)
        return {cls: backward_of(op) for op, cls in _from_output_ops().items()}

    def sgd(fn):
        def _update(self, group, state, p, g, step):
            if group["nesterov"] or group["maximize"]:
                raise RuntimeError("your sgd_momentum_step knows no nesterov or maximize: make the "
                                   "optimizer without them")
            mu = group["momentum"]
            buf = state["momentum_buffer"] if mu != 0 else np.zeros_like(p)
            fn(p, g, buf, step, group["lr"], mu, group["dampening"], group["weight_decay"])
        return _update

    def adam(fn):
        def _update(self, group, state, p, g, step):
            if group["maximize"]:
                raise RuntimeError("your adam_step knows no maximize: make the optimizer without it")
            vmax = state["max_exp_avg_sq"] if group["amsgrad"] else np.zeros_like(p)
            fn(p, g, state["exp_avg"], state["exp_avg_sq"], vmax, step, group["lr"], *group["betas"],
               group["eps"], group["weight_decay"], self.decoupled, group["amsgrad"])
        return _update

    return {
        "unbroadcast": (broadcast.unbroadcast, as_tensor_unbroadcast),
        "topological_order": (autograd._topological_order, topological_order),
        "dependency_counts": (autograd._dependencies, dependencies),
        "align_up": (block.align_up, lambda fn: fn),
        "size_class_of": (Pool, size_class),
        "extent": ((Layout, "extent"), extent),
        "peak_extra_bytes": ((Trace, "peak"), peak),
        "derivative_from_output": (None, from_output),
        "sgd_momentum_step": ((SGD, "_update"), sgd),
        "adam_step": ((Adam, "_update"), adam),
    }


PLUG_POINTS = ("unbroadcast", "topological_order", "dependency_counts", "peak_extra_bytes", "align_up",
               "size_class_of", "extent", "derivative_from_output", "sgd_momentum_step", "adam_step")


_INHERITED = object()  # a class had no attribute of its own: remove ours, not restore one


def _from_output_ops() -> dict:
    """op name -> the in-place op class whose backward uses only its output."""
    from ..functions import inplace_ops as ops

    return {cls.variant_of.__name__.lower(): cls for cls in vars(ops).values()
            if isinstance(cls, type) and getattr(cls, "variant_of", None) is not None
            and cls.variant_of.inplace_variant.reads == "output"}


@contextlib.contextmanager
def use(**plugins):
    """Run the engine on your functions inside the block: ``use(unbroadcast=f, ...)``; the
    names are :data:`PLUG_POINTS` (see the module docstring for what each replaces)."""
    unknown = sorted(set(plugins) - set(PLUG_POINTS))
    if unknown:
        raise TypeError(f"mt.exercises.use: no plug point {unknown[0]!r}; the plug points are "
                        + ", ".join(PLUG_POINTS))
    engine = _engine()
    undo = []
    try:
        for name, fn in plugins.items():
            if not callable(fn):
                raise TypeError(f"mt.exercises.use({name}=...) needs a function, got {type(fn).__name__}")
            target, wrap = engine[name]
            wrapped = wrap(fn)
            if target is None:  # the backward of several op classes
                for cls, backward in wrapped.items():
                    undo.append((cls, "backward", cls.__dict__.get("backward", _INHERITED)))
                    setattr(cls, "backward", backward)
            elif isinstance(target, tuple):  # a method of an engine class
                owner, attr = target
                undo.append((owner, attr, owner.__dict__[attr]))
                setattr(owner, attr, wrapped)
            elif isinstance(target, type):  # several methods of one class
                for attr, method in wrapped.items():
                    undo.append((target, attr, target.__dict__[attr]))
                    setattr(target, attr, method)
            else:  # a function: wherever a microtorch module holds it
                undo.append((None, None, _replace_everywhere(target, wrapped)))
        yield
    finally:
        for owner, attr, orig in reversed(undo):
            if owner is None:
                for space, key, value in orig:
                    space[key] = value
            elif orig is _INHERITED:
                delattr(owner, attr)
            else:
                setattr(owner, attr, orig)


@contextlib.contextmanager
def use_if_passed(**plugins):
    """Like :func:`use`, for a notebook: plugs in each function that has passed its checker
    in this session and leaves the engine's own in place for the others, saying which."""
    from .checking import has_passed

    mine = {name: fn for name, fn in plugins.items() if has_passed(fn)}
    for name, fn in plugins.items():
        who = getattr(fn, "__name__", name)
        print(f"the engine runs on your {who}" if name in mine else
              f"the engine runs on its own {name} (your {who} has not passed its checker yet)")
    with use(**mine):
        yield
