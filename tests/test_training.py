"""Training end to end: mt.nn.fit learns the shipped digits (a short seeded run drops the loss
≥ 3×; the full recipe reaches ≥ 97 % test accuracy), stops on a nan/inf loss naming the step,
and shows a tqdm bar only when tqdm is there."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import microtorch as mt
from microtorch import nn
from microtorch.data import DataLoader, TensorDataset, load_digits


def digits_loader(batch_size=64, seed=0):
    x, y = load_digits("train")
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True, generator=mt.Generator(seed))


def accuracy(model, x, y) -> float:
    model.eval()
    with mt.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def test_a_short_seeded_run_drops_the_loss_at_least_3x():
    """4 epochs × 23 batches of 64 = 92 Adam steps (well under a second)."""
    mt.manual_seed(0)
    model = nn.MLP(64, [64], 10)
    opt = mt.optim.Adam(model.parameters(), lr=3e-3)
    history = nn.fit(model, digits_loader(), opt, mt.cross_entropy, epochs=4, progress=False)
    assert history.steps == 4 * 23 and len(history.epoch_losses) == 4
    start, end = np.mean(history.losses[:3]), np.mean(history.losses[-5:])
    assert start > 2.0  # ≈ ln 10: it starts knowing nothing
    assert start / end >= 3, f"loss only fell from {start:.3f} to {end:.3f}"
    assert history.epoch_losses == sorted(history.epoch_losses, reverse=True)


def test_the_digits_recipe_reaches_97_percent_test_accuracy():
    """The README's recipe: MLP 64→128→10, Adam lr 1e-3, batch 32, 40 epochs (~1–2 s)."""
    mt.manual_seed(0)
    model = nn.MLP(64, [128], 10)
    opt = mt.optim.Adam(model.parameters(), lr=1e-3)
    nn.fit(model, digits_loader(32), opt, mt.cross_entropy, epochs=40, progress=False)
    assert accuracy(model, *load_digits("test")) >= 0.97


def test_a_nan_loss_stops_training_naming_the_step_before_the_update():
    mt.manual_seed(0)
    model = nn.MLP(64, [16], 10)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    calls = []
    snapshots = []

    def loss_fn(logits, y):
        calls.append(1)
        loss = mt.cross_entropy(logits, y)
        return loss * float("nan") if len(calls) == 4 else loss

    def on_step(step, loss):
        snapshots.append([p.detach().numpy().copy() for p in model.parameters()])

    with pytest.raises(FloatingPointError, match=r"loss became nan at step 3 \(epoch 0, batch 3\)"):
        nn.fit(model, digits_loader(), opt, loss_fn, epochs=2, progress=False, on_step=on_step)
    assert len(snapshots) == 3  # steps 0, 1, 2 ran; step 3 did not update
    for p, s in zip(model.parameters(), snapshots[-1]):
        np.testing.assert_array_equal(p.detach().numpy(), s)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own inf - inf warnings on the way
def test_an_exploding_learning_rate_is_reported_not_silent():
    mt.manual_seed(0)
    x, y = mt.data.make_moons(64, noise=0.1, generator=mt.Generator(0))
    model = nn.MLP(2, [16], 2)
    opt = mt.optim.SGD(model.parameters(), lr=1e12)
    with pytest.raises(FloatingPointError, match=r"at step \d+ .* training diverged"):
        nn.fit(model, DataLoader(TensorDataset(x, y), batch_size=16), opt, mt.cross_entropy,
               epochs=50, progress=False)


def test_fit_clips_gradients_when_asked():
    mt.manual_seed(0)
    model = nn.MLP(64, [16], 10)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    norms = []

    def on_step(step, loss):
        norms.append(np.sqrt((opt.flat_buffers[0].grad.numpy().astype(np.float64) ** 2).sum()))

    nn.fit(model, digits_loader(), opt, mt.cross_entropy, epochs=1, clip_grad_norm=0.05,
           progress=False, on_step=on_step)
    assert max(norms) <= 0.05 * (1 + 1e-5)


def test_loss_fn_must_return_a_scalar():
    model = nn.MLP(64, [8], 10)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="scalar Tensor"):
        nn.fit(model, digits_loader(), opt, lambda out, y: mt.cross_entropy(out, y, reduction="none"),
               progress=False)


def test_progress_bar_shows_the_loss_when_tqdm_is_installed(monkeypatch, capsys):
    tqdm_auto = pytest.importorskip("tqdm.auto")
    postfixes = []

    class Recording(tqdm_auto.tqdm):
        def set_postfix(self, *args, **kwargs):
            postfixes.append(kwargs)
            super().set_postfix(*args, **kwargs)

    monkeypatch.setattr(tqdm_auto, "tqdm", Recording)
    model = nn.MLP(64, [8], 10)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    history = nn.fit(model, digits_loader(), opt, mt.cross_entropy, epochs=1)
    assert [p["loss"] for p in postfixes] == [f"{v:.4f}" for v in history.losses]
    err = capsys.readouterr().err
    assert "training" in err and "23/23" in err and f"loss={history.losses[-1]:.4f}" in err


def test_without_tqdm_fit_trains_without_a_bar(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` now raises ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    model = nn.MLP(64, [8], 10)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    history = nn.fit(model, digits_loader(), opt, mt.cross_entropy, epochs=1)
    assert history.steps == 23 and "training" not in capsys.readouterr().err


def test_importing_microtorch_loads_no_tqdm_or_plotting():
    code = ("import sys, microtorch; bad = [m for m in ('tqdm', 'matplotlib', 'ipywidgets', 'torch') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
