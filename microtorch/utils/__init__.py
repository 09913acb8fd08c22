"""Tools built on the engine: ``mt.utils.checkpoint`` (recomputation, as ``torch.utils.checkpoint``)."""
from . import checkpoint

__all__ = ["checkpoint"]
