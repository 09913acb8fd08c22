"""cross_entropy's ``ignore_index``, ``label_smoothing`` and probability targets (and
nll_loss's ``ignore_index``): values vs PyTorch, gradients vs finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((5, 4))
INDICES = np.array([1, -100, 3, 0, 2])
PROBS = RNG.dirichlet(np.ones(4), size=5)


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch oracle not installed: pip install -e '.[oracle]'")


CASES = {
    "ignore": dict(target="indices"),
    "ignore_7": dict(target="indices7", ignore_index=7),
    "ignore_a_real_class": dict(target="indices_all", ignore_index=0),  # 0..C-1: e.g. a padding class
    "smoothing": dict(target="indices_all", label_smoothing=0.2),
    "ignore_and_smoothing": dict(target="indices", label_smoothing=0.1),
    "probabilities": dict(target="probs"),
    "probabilities_smoothing": dict(target="probs", label_smoothing=0.3),
    "all_ignored": dict(target="none_kept"),
}


def _target(F, kind):
    if kind == "probs":
        return F.tensor(PROBS, dtype=F.float64, requires_grad=True)
    values = {"indices": INDICES, "indices7": np.where(INDICES < 0, 7, INDICES),
              "indices_all": np.abs(INDICES) % 4, "none_kept": np.full(5, -100)}[kind]
    return F.tensor(values)


def _loss(F, case, reduction, functional):
    options = dict(CASES[case])
    target = _target(F, options.pop("target"))
    x = F.tensor(LOGITS, dtype=F.float64, requires_grad=True)
    loss = functional(F)(x, target, reduction=reduction, **options)
    return x, target, loss


def _ce(F):
    return F.nn.functional.cross_entropy


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_torch(case, reduction, torch):
    results = []
    for F in (mt, torch):
        x, target, loss = _loss(F, case, reduction, _ce)
        out = loss.detach().numpy().copy()
        if not np.isnan(out).any():
            (loss.sum() if reduction == "none" else loss).backward()
        grads = [t.grad.numpy().copy() if t.grad is not None else None for t in (x, target)
                 if t.requires_grad]
        results.append((out, grads))
    (ours, our_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c != "all_ignored"])
def test_gradients_match_finite_differences(case):
    options = dict(CASES[case])
    kind = options.pop("target")
    target = _target(mt, kind)
    x = mt.tensor(LOGITS, dtype=mt.float64, requires_grad=True)
    inputs = [x, target] if kind == "probs" else [x]
    fn = (lambda x, y: mt.cross_entropy(x, y, **options)) if kind == "probs" else \
        (lambda x: mt.cross_entropy(x, target, **options))
    assert mt.gradcheck(fn, inputs)


def test_ignored_rows_contribute_nothing_and_mean_counts_the_others():
    x = mt.tensor(LOGITS, dtype=mt.float64, requires_grad=True)
    loss = mt.cross_entropy(x, mt.tensor(INDICES))
    kept = INDICES != -100
    expected = mt.cross_entropy(mt.tensor(LOGITS[kept], dtype=mt.float64), mt.tensor(INDICES[kept]))
    assert np.isclose(loss.item(), expected.item())
    loss.backward()
    assert np.all(x.grad.numpy()[1] == 0)
    per_row = mt.cross_entropy(x, mt.tensor(INDICES), reduction="none")
    assert per_row[1].item() == 0.0
    assert np.isnan(mt.cross_entropy(x, mt.tensor([-100] * 5)).item())  # nothing kept: 0/0, as torch


def test_nll_loss_ignores_rows_too():
    logp = mt.log_softmax(mt.tensor(LOGITS), 1)
    a = mt.nll_loss(logp, mt.tensor(INDICES)).item()
    b = mt.cross_entropy(mt.tensor(LOGITS), mt.tensor(INDICES)).item()
    assert np.isclose(a, b)


def test_option_errors():
    x = mt.tensor(LOGITS)
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        mt.cross_entropy(x, mt.tensor([0] * 5), label_smoothing=1.5)
    with pytest.raises(ValueError, match="probability target must have the input's shape"):
        mt.cross_entropy(x, mt.ones(5, 3) / 3)
    with pytest.raises(IndexError, match="out of bounds"):
        mt.cross_entropy(x, mt.tensor([0, -1, 0, 0, 0]))
    with pytest.raises(RuntimeError, match="dtype"):
        mt.cross_entropy(x, mt.ones(5, 4, dtype=mt.float32) / 4)


def test_1d_logits_take_every_kind_of_target():
    x = mt.tensor(LOGITS[0], dtype=mt.float32)
    p = mt.tensor(PROBS[0], dtype=mt.float32)
    assert np.isclose(mt.cross_entropy(x, p).item(), -(p.numpy() * mt.log_softmax(x, 0).numpy()).sum(), rtol=1e-5)
    assert mt.cross_entropy(x, mt.tensor(1), label_smoothing=0.1).shape == ()


def test_the_loss_module_passes_the_options_on():
    loss = mt.nn.CrossEntropyLoss(ignore_index=7, label_smoothing=0.1)
    x, t = mt.tensor(LOGITS), mt.tensor([7, 1, 2, 3, 0])
    assert np.isclose(loss(x, t).item(), mt.cross_entropy(x, t, ignore_index=7, label_smoothing=0.1).item())


@pytest.mark.parametrize("functional", ["cross_entropy", "nll_loss"])
def test_an_ignore_index_that_is_a_real_class_skips_its_rows(functional):
    """ignore_index = 0 (a padding class, say) is one of the C classes: its rows contribute
    nothing, even where their log-probability is -inf, and "mean" counts only the others."""
    logits = np.array([[0.0, 1.0], [-np.inf, 0.0], [2.0, -1.0]])
    target = np.array([1, 0, 0])
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    x = mt.tensor(logits if functional == "cross_entropy" else logp, requires_grad=True)
    f = getattr(mt, functional)
    assert np.isclose(f(x, mt.tensor(target), ignore_index=0).item(), -logp[0, 1])
    per_row = f(x, mt.tensor(target), ignore_index=0, reduction="none").detach().numpy()
    assert np.isclose(per_row[0], -logp[0, 1]) and np.array_equal(per_row[1:], [0.0, 0.0])
    f(x, mt.tensor(target), ignore_index=0, reduction="sum").backward()
    assert np.isfinite(x.grad.numpy()).all() and not x.grad.numpy()[1:].any()  # ignored rows: no gradient


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_a_mean_over_no_rows_is_nan_and_gives_no_gradient(label_smoothing):
    """Every target ignored: "mean" is 0/0 = nan, as in PyTorch, but the gradient is 0, not
    nan (PyTorch's too), and no numpy warning leaks out."""
    x = mt.tensor([[0.5, -np.inf], [1.0, 2.0]], requires_grad=True)
    with np.errstate(all="raise"):
        loss = mt.cross_entropy(x, mt.tensor([0, 0]), ignore_index=0, label_smoothing=label_smoothing)
        loss.backward()
    assert np.isnan(loss.item()) and loss.dtype == x.dtype
    assert np.array_equal(x.grad.numpy(), np.zeros((2, 2)))
