"""Where the bytes live: refcounted storages and the trace recorder (allocators come next)."""
from .storage import Storage, new_storage
from .trace import Trace

__all__ = ["Storage", "Trace", "new_storage"]
