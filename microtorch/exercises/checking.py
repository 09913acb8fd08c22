"""What every checker shares: how it reports a pass, a failure, and a learner's function that raised."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor


def _fail(message: str):
    raise AssertionError(message)


def _passed(name: str, n: int) -> None:
    print(f"✓ {name}: all {n} cases agree with the engine.")


def _call(fn, where: str, *args):
    try:
        return fn(*args)
    except Exception as exc:
        args_text = ", ".join(repr(a) if not isinstance(a, Tensor) else f"<tensor of shape {a.shape}>"
                              for a in args)
        _fail(f"{where} your function raised {type(exc).__name__}: {exc}\n(called as "
              f"fn({args_text})). It should return an answer for this case.")


def _as_array(x) -> np.ndarray:
    """A learner's answer (a Tensor, an array, a list) as a numpy array of its values."""
    if isinstance(x, Tensor):
        return np.array(x.detach()._data)
    return np.asarray(x)
