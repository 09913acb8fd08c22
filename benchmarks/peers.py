"""The peers microtorch is measured against, each optional.

``torch_or_skip()`` / ``micrograd_or_skip()`` return ``(module, None)`` when the peer is
installed, else ``(None, message)``; the message goes into the table row instead of a crash.
"""
from __future__ import annotations

SKIP_TORCH = "skipped: torch not installed (pip install -e '.[oracle]')"
SKIP_MICROGRAD = "skipped: micrograd not installed (pip install -e '.[bench]')"

#: PyTorch runs with one intra-op thread. At the sizes benchmarked here (≤ 16×16) PyTorch
#: never splits an op across threads anyway (its grain size is 32k elements), numpy's
#: elementwise ops are single-threaded, and one thread removes thread-pool wake-up noise.
TORCH_THREADS = 1


def torch_or_skip():
    try:
        import torch
    except ImportError:
        return None, SKIP_TORCH
    torch.set_num_threads(TORCH_THREADS)
    return torch, None


def micrograd_or_skip():
    try:
        import micrograd.engine
        import micrograd.nn
    except ImportError:
        return None, SKIP_MICROGRAD
    return micrograd, None


def versions() -> dict[str, str | None]:
    """Installed versions of the peers (``None`` when missing), without importing torch."""
    from importlib import metadata

    out = {}
    for name in ("torch", "micrograd"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
