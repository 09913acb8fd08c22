"""``mt.nn.fit``: the training loop, written once — with a progress bar and a divergence check."""
from __future__ import annotations

import math

from ..tensor import Tensor
from .module import Module


class History:
    """What :func:`fit` saw: the loss of every step and the mean loss of every epoch."""

    def __init__(self):
        self.losses: list[float] = []
        self.epoch_losses: list[float] = []

    def __repr__(self) -> str:
        last = f", last loss {self.losses[-1]:.4f}" if self.losses else ""
        return f"History({self.steps} steps, {len(self.epoch_losses)} epochs{last})"

    @property
    def steps(self) -> int:
        return len(self.losses)


def fit(model: Module, loader, optimizer, loss_fn, epochs: int = 1, *, clip_grad_norm: float | None = None,
        progress: bool = True, on_step=None) -> History:
    """Train ``model`` for ``epochs`` passes over ``loader``; return the :class:`History`.

    Each step is the loop every PyTorch user writes::

        optimizer.zero_grad(); loss = loss_fn(model(x), y); loss.backward()
        (clip_grad_norm_ if asked); optimizer.step()

    ``loader`` yields ``(inputs, targets)`` batches (e.g. an ``mt.data.DataLoader``).
    With ``progress=True`` a ``tqdm.auto`` bar shows the running loss when tqdm is installed
    (the ``viz`` extra); without tqdm it trains silently. A loss that is nan or ±inf stops
    training with a ``FloatingPointError`` naming the step — before that step's update, so
    the parameters keep their last finite values. ``on_step(step, loss)`` is called after
    every step (e.g. to log).
    """
    if epochs < 0:
        raise ValueError(f"fit: epochs must be ≥ 0, got {epochs}")
    per_epoch = _len(loader)
    bar = _progress_bar(None if per_epoch is None else epochs * per_epoch, progress)
    history = History()
    model.train()
    step = 0
    try:
        for epoch in range(epochs):
            total, count = 0.0, 0
            for batch, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                if not isinstance(loss, Tensor) or loss.numel() != 1:
                    raise TypeError("fit: loss_fn must return a scalar Tensor (e.g. the mean loss "
                                    f"of the batch), got {loss!r:.80}")
                value = float(loss.item())
                if not math.isfinite(value):
                    raise FloatingPointError(
                        f"fit: the loss became {value} at step {step} (epoch {epoch}, batch {batch}); "
                        "training diverged. Lower the learning rate, clip gradients "
                        "(clip_grad_norm=1.0), or check the data for nan/inf.")
                loss.backward()
                if clip_grad_norm is not None:
                    from .utils import clip_grad_norm_

                    clip_grad_norm_(optimizer_params(optimizer, model), clip_grad_norm)
                optimizer.step()
                history.losses.append(value)
                total, count = total + value, count + 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(epoch=epoch, loss=f"{value:.4f}", refresh=False)
                if on_step is not None:
                    on_step(step, value)
                step += 1
            history.epoch_losses.append(total / max(count, 1))
    finally:
        if bar is not None:
            bar.close()
    return history


def optimizer_params(optimizer, model: Module):
    """The tensors ``optimizer`` updates (its flat buffers' parameters), else the model's."""
    flats = getattr(optimizer, "flat_buffers", None)
    if flats and len(flats) == 1:
        return flats[0].params
    return model.parameters()


def _len(loader) -> int | None:
    try:
        return len(loader)
    except TypeError:
        return None


def _progress_bar(total, wanted: bool):
    if not wanted:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm comes with the viz extra; without it, no bar
        return None
    return tqdm(total=total, desc="training", unit="step")
