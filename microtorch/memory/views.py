"""Which live tensors are *differentiable views* of which storage.

Every tensor a view op makes (``x[1:]``, ``x.T``, ``x.reshape(...)`` when zero-copy, ...)
is registered here by :meth:`microtorch.node.Function.apply`, with whether grad mode
was on when it was made. In-place ops need this: writing into a view of ``base`` changes
the values every other live view of ``base`` reads, so their ``grad_fn`` must be rebuilt
as views of the *new* base (see :mod:`microtorch.functions.inplace`). PyTorch does the
same lazily; microtorch does it eagerly, at the write, which needs the list of live views.

The registry holds weak references only: a view that goes away drops out by itself.
``detach()`` results, saved tensors unpacked in backward and other internal aliases are
not registered — they are not differentiable views (as in PyTorch).
"""
from __future__ import annotations

import weakref

# storage id -> {id(view): (weakref to the view, grad mode when it was made)}
_by_storage: dict[int, dict[int, tuple]] = {}


def register(view, grad_mode: bool) -> None:
    """Remember ``view`` (a tensor a view op just made) until it goes away."""
    sid = view._storage.id
    group = _by_storage.get(sid)
    if group is None:
        group = _by_storage[sid] = {}
    key = id(view)
    group[key] = (weakref.ref(view, lambda _, sid=sid, key=key: _forget(sid, key)), grad_mode)


def _forget(sid: int, key: int) -> None:
    group = _by_storage.get(sid)
    if group is not None:
        group.pop(key, None)
        if not group:
            del _by_storage[sid]


def made_in_grad_mode(t) -> bool | None:
    """None if ``t`` is not a registered view; else whether grad mode was on when it was made."""
    group = _by_storage.get(t._storage.id)
    entry = group.get(id(t)) if group else None
    if entry is None or entry[0]() is not t:
        return None
    return entry[1]


def live_views(storage) -> list:
    """The registered views of ``storage`` that are still alive."""
    group = _by_storage.get(storage.id)
    if not group:
        return []
    return [t for t in (ref() for ref, _ in list(group.values())) if t is not None]
