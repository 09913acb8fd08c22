"""Exercises of notebook 08 (training): one SGD-with-momentum step and gradient clipping,
written over flat numpy buffers.

While the learner's function runs, ``mt.optim.SGD`` (its update and step) and
``mt.nn.utils.clip_grad_norm_`` are switched off. The references are independent: PyTorch's
update rule and the clipping rule written out in numpy (tests/test_exercise_checkers.py
checks them against the engine's optimizer and clipping).
"""
from __future__ import annotations

import numpy as np

from .checker import checker
from .checking import _call, _fail, _passed, hidden, rng


def _sgd_blocks():
    from ..optim import SGD, Optimizer

    return [(SGD, "_update"), (SGD, "__init__"), (Optimizer, "step")]


def _clip_blocks():
    from ..nn import utils

    return [utils.clip_grad_norm_]


def _fmt(a) -> str:
    return np.array2string(np.asarray(a, dtype=np.float64), precision=5, suppress_small=True,
                           max_line_width=100)


# ----------------------------------------------------------------------------------------------
# Exercise 1: SGD with momentum over flat buffers
# ----------------------------------------------------------------------------------------------
#: (what, lr, momentum, dampening, weight_decay, steps)
MOMENTUM_CASES = [
    ("momentum 0.9, three steps", 0.1, 0.9, 0.0, 0.0, 3),
    ("plain SGD (momentum 0: no buffer)", 0.5, 0.0, 0.0, 0.0, 2),
    ("momentum 0.9 with dampening 0.5 (the first step is special)", 0.1, 0.9, 0.5, 0.0, 3),
    ("momentum 0.9 with weight decay 0.1", 0.05, 0.9, 0.0, 0.1, 4),
    ("everything at once: momentum 0.5, dampening 0.2, weight decay 0.3", 0.2, 0.5, 0.2, 0.3, 4),
]


def _numpy_sgd(p0, grads, lr, momentum, dampening, weight_decay, *, first_dampened=False,
               decoupled=False, zero_start=False):
    """PyTorch's update in numpy (the reference, with no flags set); the flags give variants a
    learner may have written, to name their mistake."""
    p, buf, out = p0.copy(), np.zeros_like(p0), []
    for k, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
            d = g.copy()
        else:
            d = g + weight_decay * p
        if momentum:
            if k == 1 and not first_dampened and not zero_start:
                buf = d.copy()
            else:
                buf = momentum * buf + (1 - dampening) * d
            d = buf
        p = p - lr * d
        out.append((p.copy(), buf.copy()))
    return out


def _random_momentum_cases(n: int) -> list:
    r = rng()
    return [(f"random settings #{k + 1}", round(float(r.uniform(0.01, 0.5)), 3),
             float(r.choice([0.0, 0.5, 0.9, 0.99])), float(r.choice([0.0, 0.0, 0.1, 0.5])),
             float(r.choice([0.0, 0.0, 0.01, 0.2])), int(r.integers(1, 6))) for k in range(n)]


def check_momentum_update(fn) -> None:
    """``fn(p, g, buf, step, lr, momentum, dampening, weight_decay)``: one step of SGD with
    momentum, PyTorch's formula, written **in place** into the numpy arrays ``p`` (the flat
    parameter buffer) and ``buf`` (the flat momentum buffer); ``g`` is the flat gradient
    buffer and ``step`` counts from 1. Checked step by step against PyTorch's rule written
    out in numpy (``mt.optim.SGD`` is switched off meanwhile), on fixed and random settings.
    """
    r = np.random.default_rng(8 + (1000 if hidden() else 0))
    cases = MOMENTUM_CASES + _random_momentum_cases(12 if hidden() else 4)
    for what, lr, mu, damp, wd, steps in cases:
        p0 = r.standard_normal(6)
        grads = [r.standard_normal(6) for _ in range(steps)]
        want = _numpy_sgd(p0, grads, lr, mu, damp, wd)
        p, buf = p0.copy(), np.zeros_like(p0)
        for k, g in enumerate(grads, start=1):
            before_p, before_buf = p.copy(), buf.copy()
            where = (f"for {what} (lr={lr}, momentum={mu}, dampening={damp}, weight_decay={wd}), "
                     f"at step {k}:")
            _call(fn, where, p, g.copy(), buf, k, lr, mu, damp, wd)
            want_p, want_buf = want[k - 1]
            if np.array_equal(p, before_p) and not np.allclose(want_p, before_p):
                _fail(f"{where}\np holds the same numbers after your function returned. "
                      "`p = p - lr * d` makes a NEW array and points your local name p at it; the "
                      "caller's array (the flat parameter buffer every parameter is a view of) never "
                      "changes. Write into it: `p -= lr * d` (or `p[...] = ...`).")
            if mu and np.array_equal(buf, before_buf) and not np.allclose(want_buf, before_buf):
                _fail(f"{where}\nbuf holds the same numbers after your function returned: the "
                      "momentum buffer must be updated in place (`buf *= momentum; buf += ...`, or "
                      "`buf[...] = ...` on the first step), or the next step starts from stale "
                      "momentum.")
            p_ok = np.allclose(p, want_p, rtol=1e-10, atol=1e-12)
            buf_ok = not mu or np.allclose(buf, want_buf, rtol=1e-10, atol=1e-12)
            if p_ok and buf_ok:
                continue
            msg = f"{where}\n"
            if not p_ok:
                msg += f"p is       {_fmt(p)}\nbut SGD's  {_fmt(want_p)}\n"
            if not buf_ok:
                msg += f"buf is     {_fmt(buf)}\nbut SGD's  {_fmt(want_buf)}\n"
            _fail(msg + _momentum_hint(p0, grads, k, p, buf, lr, mu, damp, wd, before_p))
    _passed("check_momentum_update", len(cases))


check_momentum_update = checker("sgd_momentum_step", blocks=_sgd_blocks, suite="sgd_momentum_step")(check_momentum_update)


def _momentum_hint(p0, grads, k, p, buf, lr, mu, damp, wd, before_p) -> str:
    def same(variant):
        vp, vb = variant[k - 1]
        return np.allclose(p, vp, rtol=1e-9, atol=1e-12) and (not mu or np.allclose(buf, vb, rtol=1e-9))

    if k == 1 and mu and damp and same(_numpy_sgd(p0, grads, lr, mu, damp, wd, first_dampened=True)):
        return ("On the first step PyTorch does not dampen: the buffer does not exist yet, and it "
                "is created as a copy of d (`buf[...] = d`). Dampening applies from step 2 on.")
    if wd and same(_numpy_sgd(p0, grads, lr, mu, damp, 0.0)):
        return ("You left out weight decay: SGD adds weight_decay · p to the gradient first, "
                "d = g + weight_decay * p, and everything after uses d.")
    if wd and same(_numpy_sgd(p0, grads, lr, mu, damp, wd, decoupled=True)):
        return ("That is decoupled weight decay (AdamW's: shrink p by 1 − lr·wd, then step). "
                "SGD's weight_decay adds weight_decay · p to the gradient: d = g + weight_decay * p.")
    engine_like = _numpy_sgd(p0, grads, lr, mu, damp, wd)
    vp = engine_like[k - 1][0]
    if np.allclose(p - before_p, -(vp - before_p), rtol=1e-9, atol=1e-12):
        return "You moved p uphill: the update is p -= lr * d (minus: against the gradient)."
    if mu and not np.allclose(buf, engine_like[k - 1][1], rtol=1e-9):
        return ("The momentum buffer is off. PyTorch: buf = d on step 1, then "
                "buf = momentum * buf + (1 − dampening) * d; with momentum, the step uses buf: "
                "p -= lr * buf.")
    return ("With d = g + weight_decay * p: on step 1 buf = d, later buf = momentum * buf + "
            "(1 − dampening) * d; then p -= lr * buf (or p -= lr * d when momentum is 0). "
            "See mt.show_source(mt.optim.SGD._update).")


# ----------------------------------------------------------------------------------------------
# Exercise 2: clipping the global gradient norm
# ----------------------------------------------------------------------------------------------
#: (what, gradient shapes, scale of the values, max_norm)
CLIP_CASES = [
    ("one gradient whose norm is 5 times max_norm", [(8,)], None, 1.0),
    ("a layer's three gradients (a weight, a bias, another weight), together too large",
     [(4, 3), (3,), (3, 2)], 1.0, 2.0),
    ("gradients whose norm is already below max_norm", [(5,), (2, 2)], 0.05, 1.0),
    ("gradients that are all zero", [(3,), (2,)], 0.0, 1.0),
    ("one big and one tiny gradient", [(6,), (6,)], "mixed", 0.5),
]


def _clip_case(shapes, scale, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    if scale is None:  # norm exactly 5
        arrays = [a * 5.0 / np.sqrt(sum(float((b * b).sum()) for b in arrays)) for a in arrays]
    elif scale == "mixed":
        arrays = [arrays[0] * 3.0, arrays[1] * 0.01]
    else:
        arrays = [a * scale for a in arrays]
    return arrays


def _random_clip_cases(n: int) -> list:
    r = rng()
    return [(f"random gradients #{k + 1}", [tuple(int(d) for d in r.integers(1, 5, int(r.integers(1, 3))))
                                             for _ in range(int(r.integers(1, 4)))],
             float(r.choice([0.01, 0.3, 1.0, 3.0])), float(r.choice([0.1, 1.0, 2.5]))) for k in range(n)]


def _numpy_clip(arrays, max_norm):
    """The reference: the total norm, and the gradients scaled if it is above max_norm."""
    total = float(np.sqrt(sum(float((a * a).sum()) for a in arrays)))
    coef = max_norm / (total + 1e-6)
    return total, [a * coef if coef < 1 else a.copy() for a in arrays]


def check_clip_grad_norm(fn) -> None:
    """``fn(grads, max_norm) -> total_norm``: ``grads`` is a list of numpy arrays, views of
    ONE flat gradient buffer (as the engine's ``p.grad``\\ s are). Return the norm of all of
    them seen as one long vector, and if it exceeds ``max_norm`` scale every gradient **in
    place** by ``max_norm / (norm + 1e-6)``. Checked against that rule written out in numpy
    (``mt.nn.utils.clip_grad_norm_`` is switched off meanwhile), on fixed and random cases.
    """
    r = np.random.default_rng(9 + (1000 if hidden() else 0))
    cases = CLIP_CASES + _random_clip_cases(12 if hidden() else 4)
    for what, shapes, scale, max_norm in cases:
        arrays = _clip_case(shapes, scale, r)
        want_total, want = _numpy_clip(arrays, max_norm)
        sizes = [a.size for a in arrays]
        flat = np.concatenate([a.ravel() for a in arrays])
        views, start = [], 0
        for a, n in zip(arrays, sizes):
            views.append(flat[start:start + n].reshape(a.shape))
            start += n
        grads = list(views)
        where = f"for {what} (shapes {[tuple(s) for s in shapes]}, max_norm={max_norm}):"
        got = _call(fn, where, grads, max_norm)
        if got is None:
            _fail(f"{where}\nyour function returned None: return the total norm (the norm BEFORE "
                  "clipping, what you would log to watch training).")
        try:
            got = float(np.asarray(got.item() if hasattr(got, "item") else got))
        except (TypeError, ValueError):
            _fail(f"{where}\nyour function returned {got!r}; return the total norm as a number.")
        if np.isnan(got) or any(np.isnan(v).any() for v in views):
            _fail(f"{where}\nnan: with all-zero gradients the norm is 0, and max_norm / 0 is not a "
                  "number. Scale only when the norm exceeds max_norm (or add the 1e-6 PyTorch adds: "
                  "max_norm / (norm + 1e-6)).")
        clipped = want_total > max_norm
        # float32's rounding (a norm returned as mt.tensor(total)) is still the right norm
        if not np.isclose(got, want_total, rtol=1e-6, atol=1e-12):
            per = [float(np.sqrt((a * a).sum())) for a in arrays]
            if clipped and np.isclose(got, max_norm, rtol=1e-5):
                hint = ("That is the norm AFTER clipping (max_norm, by construction). Return the norm "
                        "before: it tells you how large the gradients really were.")
            elif any(np.isclose(got, x, rtol=1e-9) for x in per) and len(per) > 1:
                hint = ("That is the norm of one gradient only. The total norm treats all gradients "
                        "as one long vector: sqrt(sum of every element squared, over all of them).")
            elif np.isclose(got, sum(per), rtol=1e-9):
                hint = ("You added up the norms of the gradients. The total norm is "
                        "sqrt(sum over ALL elements of g²), not the sum of norms.")
            elif np.isclose(got, want_total ** 2, rtol=1e-9):
                hint = "That is the squared norm: take the square root."
            else:
                hint = "The total norm is sqrt(sum over all gradients of (g * g).sum())."
            _fail(f"{where}\nyou returned the norm {got:.6g}, but clip_grad_norm_ returns "
                  f"{want_total:.6g}.\n{hint}")
        rebound = any(g is not v for g, v in zip(grads, views))
        ok = all(np.allclose(v, w, rtol=1e-5, atol=1e-12) for v, w in zip(views, want))
        if ok:
            continue
        unchanged = all(np.array_equal(v, a) for v, a in zip(views, arrays))
        msg = (f"{where}\nafter your function the gradients are\n"
               + "\n".join(_fmt(v) for v in views) + "\nbut clip_grad_norm_ leaves\n"
               + "\n".join(_fmt(w) for w in want) + "\n")
        if unchanged and clipped:
            if rebound:
                hint = ("You replaced the entries of the list (grads[i] = ...): the list is yours, "
                        "but the gradients are the arrays in it, views of the flat gradient buffer. "
                        "Scale them in place: `g *= coef` for each g.")
            else:
                hint = (f"The gradients did not change, but their total norm {want_total:.4g} is above "
                        f"max_norm = {max_norm}: scale every one by max_norm / (norm + 1e-6). (If you did: "
                        "`g = g * coef` makes a new array; scale the arrays themselves, in place: `g *= coef`.)")
        elif not clipped:
            hint = (f"The total norm {want_total:.4g} is already at most max_norm = {max_norm}: leave "
                    "the gradients as they are. The factor is min(1, max_norm / norm): clipping "
                    "only ever shrinks.")
        elif all(float(np.sqrt((v * v).sum())) <= max_norm * (1 + 1e-6) for v in views) and \
                not np.isclose(float(np.sqrt(sum((v * v).sum() for v in views))), max_norm, rtol=1e-4):
            hint = ("You clipped each gradient by its own norm. Clipping uses ONE factor for all of "
                    "them, from the total norm, so the direction of the whole update is kept.")
        else:
            hint = ("Scale every gradient by the same factor, max_norm / (total_norm + 1e-6), when "
                    "the total norm exceeds max_norm.")
        _fail(msg + hint)
    _passed("check_clip_grad_norm", len(cases))


check_clip_grad_norm = checker("clip_grad_norm", blocks=_clip_blocks)(check_clip_grad_norm)


# ----------------------------------------------------------------------------------------------
# Exercise 3: one Adam / AdamW step over flat buffers
# ----------------------------------------------------------------------------------------------
#: (what, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, steps)
ADAM_CASES = [
    ("Adam, default betas, three steps", 0.01, 0.9, 0.999, 1e-8, 0.0, False, False, 3),
    ("Adam with weight decay 0.1 (added to the gradient)", 0.01, 0.9, 0.999, 1e-8, 0.1, False, False, 3),
    ("AdamW: weight decay 0.1 applied to the weights directly", 0.01, 0.9, 0.999, 1e-8, 0.1, True, False, 3),
    ("Adam with amsgrad (the running max of v)", 0.05, 0.8, 0.9, 1e-8, 0.0, False, True, 5),
    ("AdamW with amsgrad (weight decay 0.1 on the weights, the running max of v)", 0.05, 0.8, 0.9, 1e-8, 0.1,
     True, True, 5),
    ("a large eps, 0.1 (it is added after the square root)", 0.1, 0.5, 0.6, 0.1, 0.0, False, False, 2),
]


def numpy_adam(p0, grads, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad):
    """The reference: PyTorch's Adam/AdamW in numpy; ``[(p, m, v)]`` after every step."""
    p, m, v, vmax, out = p0.copy(), np.zeros_like(p0), np.zeros_like(p0), np.zeros_like(p0), []
    for t, g in enumerate(grads, start=1):
        if weight_decay and decoupled:
            p = p * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / np.sqrt(1 - beta2 ** t) + eps
        p = p - lr / (1 - beta1 ** t) * m / denom
        out.append((p.copy(), m.copy(), v.copy()))
    return out


def _random_adam_cases(n: int) -> list:
    r = rng()
    return [(f"random settings #{k + 1}", float(r.choice([0.001, 0.01, 0.1])), float(r.choice([0.0, 0.5, 0.9])),
             float(r.choice([0.9, 0.99, 0.999])), float(r.choice([1e-8, 1e-3])), float(r.choice([0.0, 0.0, 0.05])),
             bool(r.random() < 0.5), bool(r.random() < 0.3), int(r.integers(1, 6))) for k in range(n)]


def _adam_blocks():
    from ..optim import Adam, AdamW, Optimizer

    return [(Adam, "_update"), (Adam, "__init__"), (AdamW, "__init__"), (Optimizer, "step")]


def check_adam_step(fn) -> None:
    """``fn(p, g, m, v, vmax, step, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad)``:
    one step of Adam (``decoupled=False``) or AdamW (``decoupled=True``), PyTorch's formulas,
    written **in place** into the flat numpy arrays ``p``, ``m`` (first moment), ``v`` (second
    moment) and ``vmax`` (the running max of v, used with ``amsgrad``); ``step`` counts from 1.
    Checked step by step against the rule written out in numpy (``mt.optim.Adam`` is switched
    off meanwhile), on fixed and random settings.
    """
    r = np.random.default_rng(12 + (1000 if hidden() else 0))
    cases = ADAM_CASES + _random_adam_cases(12 if hidden() else 4)
    for what, lr, b1, b2, eps, wd, dec, ams, steps in cases:
        p0 = r.standard_normal(6)
        grads = [r.standard_normal(6) for _ in range(steps)]
        want = numpy_adam(p0, grads, lr, b1, b2, eps, wd, dec, ams)
        p, m, v, vmax = p0.copy(), np.zeros(6), np.zeros(6), np.zeros(6)
        settings = (f"lr={lr}, betas=({b1}, {b2}), eps={eps}, weight_decay={wd}, "
                    f"decoupled={dec}, amsgrad={ams}")
        for k, g in enumerate(grads, start=1):
            before = p.copy()
            where = f"for {what} ({settings}), step {k}:"
            _call(fn, where, p, g.copy(), m, v, vmax, k, lr, b1, b2, eps, wd, dec, ams)
            want_p, want_m, want_v = want[k - 1]
            if np.array_equal(p, before) and not np.allclose(want_p, before):
                _fail(f"{where}\np did not change. Write the update INTO p (p -= ..., or p[...] = ...): "
                      "`p = p - ...` makes a new array, and the engine's parameters are views of the old one.")
            if np.allclose(p, want_p, rtol=1e-9, atol=1e-12) and np.allclose(m, want_m, rtol=1e-9, atol=1e-12) \
                    and np.allclose(v, want_v, rtol=1e-9, atol=1e-12):
                continue
            msg = f"{where}\np is    {_fmt(p)}\nbut it should be {_fmt(want_p)}\n"
            hint = _adam_hint(p0, grads, k, p, m, v, want_m, want_v, lr, b1, b2, eps, wd, dec, ams)
            _fail(msg + hint)
    _passed("check_adam_step", len(cases))


check_adam_step = checker("adam_step", blocks=_adam_blocks, suite="adam_step")(check_adam_step)


def _adam_hint(p0, grads, k, p, m, v, want_m, want_v, lr, b1, b2, eps, wd, dec, ams) -> str:
    def same(**change):
        args = dict(lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, decoupled=dec, amsgrad=ams)
        args.update(change)
        return np.allclose(numpy_adam(p0, grads, **args)[k - 1][0], p, rtol=1e-9, atol=1e-12)
    if wd and same(decoupled=not dec):
        return ("Adam adds weight_decay · p to the gradient; AdamW (decoupled=True) instead shrinks the "
                "weights first, p *= 1 − lr · weight_decay, and leaves the gradient alone. You did the other one.")
    if ams and same(amsgrad=False):
        return ("With amsgrad, keep vmax = max(vmax, v) (in place) and divide by √vmax instead of √v.")
    if not np.allclose(m, want_m, rtol=1e-9, atol=1e-12):
        return ("m is off: m = beta1 · m + (1 − beta1) · g (the gradient after weight decay, for Adam), "
                "updated in place (m *= beta1; m += ...).")
    if not np.allclose(v, want_v, rtol=1e-9, atol=1e-12):
        return "v is off: v = beta2 · v + (1 − beta2) · g², updated in place."
    return ("The step is p −= lr / (1 − beta1ᵗ) · m / (√v / √(1 − beta2ᵗ) + eps): both bias corrections use "
            "the step t counted from 1, and eps is added after the square root.")
