"""Alias analysis: which bytes does a strided view touch, and do two views share any?

**The model.** A tensor is a *layout* over a storage: ``offset`` (elements), ``shape`` and
``strides`` (elements, possibly 0 or negative). Element ``(i0, ..., i_{n-1})`` starts at
element address ::

    addr(i) = offset + i0*stride0 + ... + i_{n-1}*stride_{n-1}

and occupies the bytes ``[addr*itemsize, (addr+1)*itemsize)`` of the storage. Every view of
one storage has the storage's dtype (microtorch has no dtype-reinterpreting views), so two
views share a byte exactly when they share an element address — the analysis works in
element addresses and reports bytes.

**What you can ask.**

* :func:`byte_extent` — the smallest byte interval ``[start, stop)`` holding every byte the
  view touches (two numbers; cheap).
* :func:`byte_ranges` (also ``t.byte_ranges()``) — the exact set of bytes, as a sorted
  list of merged half-open intervals ``[(start, stop), ...]`` in bytes from the start of the
  storage. ``mt.zeros(4, 6)[:, ::2]`` (float32) gives ``[(0, 4), (8, 12), (16, 20), ...]``:
  every other float. A contiguous tensor gives one interval.
* :func:`overlaps_itself` — does some byte belong to two elements (a stride-0 expand, an
  overlapping ``as_strided`` / ``unfold``)? Writing into such a view is refused.
* :func:`alias` — do two tensors share bytes? Returns an :class:`AliasReport`.

**Two storages, one buffer.** Storages are compared by the memory they cover, not by
id: ``mt.from_numpy(x.numpy())`` is a second storage over ``x``'s bytes, and so is any
storage over a numpy view of another's buffer. When two views live in different storages
whose buffers overlap, both are rewritten as views of 1-byte elements addressed from the
lower buffer start (:meth:`Layout.in_bytes`: strides × itemsize, plus one dimension walking
an element's bytes), and the steps below run on those. Storages over disjoint memory: "no".

**alias(a, b, exact=True): answers and cost.**

* ``exact=False`` compares byte extents only — O(ndim): ``"no"`` (different memory, an
  empty view, or disjoint extents) or ``"may"`` (overlapping extents).
* ``exact=True`` (default) says ``"must"`` (at least one shared byte; the report names one
  element position in each tensor that both read) or ``"no"`` — or, when both work bounds
  below are used up, ``"may"`` with ``method="budget"`` (undecided; raise the bounds). The
  work, cheapest first:

  1. O(ndim): different memory, empty views, disjoint extents → ``"no"``; equal start
     addresses → ``"must"``.
  2. O(ndim): a gcd test. Shared addresses need ``offset_b - offset_a`` to be a multiple of
     the gcd of all strides; e.g. the even and odd columns of a matrix (strides 2 and 6,
     offsets 0 and 1) overlap in extent but never in bytes.
  3. An exact bounded Diophantine solver: find indices with ``addr_a(i) == addr_b(j)``,
     i.e. ``Σ stride·index (a's dims) − Σ stride·index (b's dims) = offset_b − offset_a``
     with every index in its range. Dimensions that do not move (size 1, or stride 0 as
     ``expand`` makes) are dropped first, and unknowns with equal strides merge into one
     (``c·y1 + c·y2 = c·(y1 + y2)``). Depth-first over the rest, largest stride first; at
     each level only index values whose remaining difference the smaller dimensions can
     still reach (an interval test) and that respect the gcd of the remaining strides (a
     congruence) are tried, and the last two are solved in closed form with the extended
     Euclidean algorithm (so two 1-D views cost O(log stride)). For the views real
     programs make (slices, transposes, windows, halves, expands) this visits a handful
     of nodes. Its work is capped (``max_work`` candidate values, default 20,000).
  4. Past the cap, enumeration: the element addresses of both views' moving dimensions
     (each clipped to the other's extent) are intersected with numpy — O((n + m) log(n + m))
     time and O(n + m) memory for n and m addresses. Exact, just not clever; bounded by
     ``max_enumerate`` addresses in all (default 4M, about 100 MB at the peak). Past that
     bound the answer is an honest ``"may"``.

  The report says which step decided (``method``) and how many candidates the solver tried
  (``work``). The exact answer is tested against ``np.shares_memory(x, y, max_work=None)``
  on 10,000+ random pairs of strided views (stride 0 and negative strides included), and on
  pairs reached through two storages over one buffer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["AliasReport", "Layout", "alias", "byte_extent", "byte_ranges", "layout", "overlaps_itself"]


# ----------------------------------------------------------------------------------------------
# layouts
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Where a view's elements sit in its storage; all numbers in elements except ``itemsize``."""

    storage: int  # storage id (views of one storage share it)
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    storage_size: int  # elements in the storage
    address: int | None = None  # where the storage's first byte is in memory (None: unknown)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def extent(self) -> tuple[int, int] | None:
        """``(lowest, highest)`` element address touched (inclusive), None for an empty view."""
        if self.numel == 0:
            return None
        lo = hi = self.offset
        for n, s in zip(self.shape, self.strides):
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return lo, hi

    def byte_extent(self) -> tuple[int, int] | None:
        e = self.extent()
        return None if e is None else (e[0] * self.itemsize, (e[1] + 1) * self.itemsize)

    def addresses(self) -> np.ndarray:
        """The element address of every element, as an int64 array of ``shape``."""
        addr = np.full(self.shape, self.offset, dtype=np.int64)
        for d, (n, s) in enumerate(zip(self.shape, self.strides)):
            if s and n > 1:
                addr += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(self.shape) - d - 1))
        return addr

    def terms(self) -> list[tuple[int, int, int]]:
        """``(stride, size, dim)`` for the dimensions that move: size > 1 and stride != 0."""
        return [(s, n, d) for d, (n, s) in enumerate(zip(self.shape, self.strides)) if n > 1 and s != 0]

    def moving(self) -> "Layout":
        """The same addresses without the dimensions that do not move (size 1 or stride 0):
        an expand by 50 touches no byte its unexpanded view does not."""
        terms = self.terms()
        return Layout(self.storage, self.offset, tuple(n for _, n, _ in terms),
                      tuple(s for s, _, _ in terms), self.itemsize, self.storage_size, self.address)

    def in_bytes(self, origin: int) -> "Layout":
        """The same bytes as a view of 1-byte elements, addressed from byte ``origin`` of
        memory: strides × itemsize, plus a last dimension walking the bytes of one element.
        Two views over different storages compare in this frame."""
        item = self.itemsize
        return Layout(-1, self.address - origin + self.offset * item, self.shape + (item,),
                      tuple(s * item for s in self.strides) + (1,), 1,
                      self.address - origin + self.storage_size * item, origin)

    def __str__(self) -> str:
        return (f"storage #{self.storage}: offset {self.offset}, shape {list(self.shape)}, strides "
                f"{list(self.strides)} (elements of {self.itemsize} bytes)")


def layout(t) -> Layout:
    """The :class:`Layout` of tensor ``t`` (its storage, offset, shape, strides)."""
    storage = t._storage
    return Layout(storage.id, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t._data.itemsize,
                  storage.nbytes // t._data.itemsize, storage.data.__array_interface__["data"][0])


def _as_layout(x) -> Layout:
    return x if isinstance(x, Layout) else layout(x)


# ----------------------------------------------------------------------------------------------
# bytes one view touches
# ----------------------------------------------------------------------------------------------
def byte_extent(t) -> tuple[int, int] | None:
    """The byte interval ``[start, stop)`` of the storage holding every byte ``t`` touches
    (None for an empty tensor). Cheap: O(ndim)."""
    return _as_layout(t).byte_extent()


def _is_dense(lay: Layout) -> bool:
    """Every address between the lowest and the highest is used, each exactly once
    (contiguous, or a permutation / flip of contiguous dimensions)."""
    terms = sorted((abs(s), n) for s, n, _ in lay.terms())
    expected = 1
    for s, n in terms:
        if s != expected:
            return False
        expected *= n
    return len(terms) == len(lay.terms())


def byte_ranges(t) -> list[tuple[int, int]]:
    """The exact bytes ``t`` touches: a sorted list of merged half-open intervals
    ``[(start, stop), ...]``, in bytes from the start of its storage.

    Adjacent elements merge into one interval, so a contiguous tensor (or its transpose)
    is a single interval and ``x[:, ::2]`` of a float32 matrix is one 4-byte interval per
    element. Cost: O(ndim) for dense views, else O(n log n) for n elements.
    """
    lay = _as_layout(t)
    item = lay.itemsize
    extent = lay.extent()
    if extent is None:
        return []
    if _is_dense(lay):
        return [(extent[0] * item, (extent[1] + 1) * item)]
    addr = np.unique(lay.addresses())
    breaks = np.flatnonzero(np.diff(addr) != 1)
    starts = addr[np.concatenate(([0], breaks + 1))]
    stops = addr[np.concatenate((breaks, [addr.size - 1]))] + 1
    return [(int(a) * item, int(b) * item) for a, b in zip(starts, stops)]


def overlaps_itself(t) -> bool:
    """True if two different elements of ``t`` share bytes (writing into it is ambiguous).

    O(ndim log ndim) when the strides, sorted by size, each step over everything the
    smaller ones span (every ordinary view: slices, transposes, non-overlapping windows);
    otherwise the addresses are enumerated and checked for repeats (O(n log n)).
    """
    lay = _as_layout(t)
    if lay.numel <= 1:
        return False
    if any(n > 1 and s == 0 for n, s in zip(lay.shape, lay.strides)):
        return True
    span = 0
    for s, n in sorted((abs(s), n) for s, n, _ in lay.terms()):
        if s <= span:
            break
        span += s * (n - 1)
    else:
        return False
    return np.unique(lay.addresses()).size < lay.numel


# ----------------------------------------------------------------------------------------------
# two views
# ----------------------------------------------------------------------------------------------
@dataclass
class AliasReport:
    """The answer of :func:`alias`, with its evidence.

    ``answer``: ``"no"``, ``"may"`` (extents only, or the work bounds ran out) or ``"must"``.
    ``extent_a`` / ``extent_b``: each view's byte extent ``[start, stop)`` in its own storage
    (None if empty). For ``"must"``: ``witness`` = ``(index_in_a, index_in_b)``, an element
    position in each tensor's index space that reads the same bytes, starting at byte
    ``shared_byte`` of ``a``'s storage. ``reason`` says why in words; ``method`` names the
    step that decided; ``work`` counts the solver's candidates.
    ``bool(report)`` is True unless the answer is ``"no"``.
    """

    answer: str
    exact: bool
    reason: str
    method: str
    extent_a: tuple[int, int] | None = None
    extent_b: tuple[int, int] | None = None
    witness: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    shared_byte: int | None = None
    work: int = 0
    layouts: tuple = field(default=(), repr=False)

    def __bool__(self) -> bool:
        return self.answer != "no"

    def __str__(self) -> str:
        lines = [f"alias: {self.answer} ({self.reason})",
                 f"  a touches bytes {_fmt(self.extent_a)}, b touches bytes {_fmt(self.extent_b)}"]
        if self.witness is not None:
            lines.append(f"  a{list(self.witness[0])} and b{list(self.witness[1])} both read the "
                         f"element at byte {self.shared_byte}")
        return "\n".join(lines)


def _fmt(extent) -> str:
    return "none (empty)" if extent is None else f"[{extent[0]}, {extent[1]})"


class _TooHard(Exception):
    """The solver used up its work budget (the caller falls back to enumeration)."""


def alias(a, b, exact: bool = True, max_work: int = 20_000,
          max_enumerate: int = 1 << 22) -> AliasReport:
    """Do tensors ``a`` and ``b`` share bytes? See the module docstring for the answers and
    what each costs. ``a`` and ``b`` may also be :class:`Layout` objects."""
    la, lb = _as_layout(a), _as_layout(b)
    ea, eb = la.byte_extent(), lb.byte_extent()

    def report(answer, reason, method, **kw):
        return AliasReport(answer, exact, reason, method, ea, eb, layouts=(la, lb), **kw)

    different = la.storage != lb.storage
    if different and (la.address is None or lb.address is None or not _buffers_overlap(la, lb)):
        return report("no", f"different storages (#{la.storage} and #{lb.storage}) over different "
                            "bytes", "storage")
    if ea is None or eb is None:
        return report("no", "an empty tensor touches no bytes", "empty")
    sa, sb, shift = la, lb, 0  # the layouts compared, and a's storage start in their frame (bytes)
    if different:
        origin = min(la.address, lb.address)  # two storages over one buffer: compare addresses
        sa, sb, shift = la.in_bytes(origin), lb.in_bytes(origin), la.address - origin
        ea_, eb_ = sa.byte_extent(), sb.byte_extent()
        shared = f"storages #{la.storage} and #{lb.storage} share a buffer; "
    else:
        ea_, eb_, shared = ea, eb, ""
    if ea_[1] <= eb_[0] or eb_[1] <= ea_[0]:
        return report("no", shared + "their byte extents are disjoint", "extent")
    if not exact:
        return report("may", shared + "overlapping byte extents", "extent")
    if sa.itemsize != sb.itemsize:
        raise ValueError("alias: views of one storage with different element sizes are not supported")
    ndim_a, ndim_b = len(la.shape), len(lb.shape)

    def must(ia, ib, method, reason, work=0):
        ia, ib = tuple(ia), tuple(ib)
        byte = _address(sa, ia) * sa.itemsize - shift
        return report("must", shared + reason, method, witness=(ia[:ndim_a], ib[:ndim_b]),
                      shared_byte=byte, work=work)

    if sa.offset == sb.offset:
        return must((0,) * len(sa.shape), (0,) * len(sb.shape), "offset", "both start at the same element")
    ta, tb = sa.terms(), sb.terms()
    diff = sb.offset - sa.offset
    g = math.gcd(*(s for s, _, _ in ta + tb)) if ta or tb else 0
    if g == 0 or diff % g:
        return report("no", shared + f"the start addresses differ by {diff} elements, not a multiple "
                                     f"of gcd(strides) = {g}", "gcd")
    try:
        found, work = _solve(ta, tb, diff, max_work)
    except _TooHard:
        ma, mb = sa.moving(), sb.moving()
        if ma.numel + mb.numel > max_enumerate:
            return report("may", shared + f"undecided: the solver tried max_work={max_work} candidates "
                                 f"and enumerating {ma.numel} + {mb.numel} addresses is past "
                                 f"max_enumerate={max_enumerate}; raise them for an exact answer",
                          "budget", work=max_work)
        return _enumerate(sa, sb, report, must)
    if found is None:
        return report("no", shared + "no index pair reaches the same address (exact solver)", "solver",
                      work=work)
    ia = tuple(found[0].get(d, 0) for d in range(len(sa.shape)))
    ib = tuple(found[1].get(d, 0) for d in range(len(sb.shape)))
    return must(ia, ib, "solver", "an index pair reaches the same address (exact solver)", work)


def _buffers_overlap(la: Layout, lb: Layout) -> bool:
    """Do the two storages' buffers share a byte of memory?"""
    return (la.address < lb.address + lb.storage_size * lb.itemsize
            and lb.address < la.address + la.storage_size * la.itemsize)


def _address(lay: Layout, index) -> int:
    return lay.offset + sum(i * s for i, s in zip(index, lay.strides))


def _enumerate(la: Layout, lb: Layout, report, must) -> AliasReport:
    """Intersect the two address sets (each clipped to the other's extent) with numpy; the
    dimensions that do not move are left out (they repeat addresses), then put back at 0."""
    ma, mb = la.moving(), lb.moving()
    aa, ab = ma.addresses().ravel(), mb.addresses().ravel()
    (alo, ahi), (blo, bhi) = la.extent(), lb.extent()
    ka = np.flatnonzero((aa >= blo) & (aa <= bhi))
    kb = np.flatnonzero((ab >= alo) & (ab <= ahi))
    common, ia, ib = np.intersect1d(aa[ka], ab[kb], return_indices=True)
    if common.size == 0:
        return report("no", "no shared address (enumerated both views)", "enumeration")

    def position(lay, moving, k):
        index = [0] * len(lay.shape)
        for (_, _, d), i in zip(lay.terms(), np.unravel_index(k, moving.shape)):
            index[d] = int(i)
        return tuple(index)

    return must(position(la, ma, ka[ia[0]]), position(lb, mb, kb[ib[0]]), "enumeration",
                "a shared address (enumerated both views)")


# -- the bounded Diophantine solver ----------------------------------------------------------
def _solve(ta, tb, diff: int, max_work: int):
    """Indices with addr_a(i) == addr_b(j), or None; raises _TooHard past ``max_work``.

    Unknowns x_t in [0, n_t - 1] with Σ c_t x_t = diff, where c_t = stride for a's dims and
    −stride for b's. Substituting x = (n − 1) − y for negative c makes every coefficient
    positive: Σ |c_t| y_t = E (E = diff + Σ_{c<0} |c| (n − 1)), 0 ≤ y_t ≤ n_t − 1.
    """
    terms = [(s, n, ("a", d)) for s, n, d in ta] + [(-s, n, ("b", d)) for s, n, d in tb]
    E = diff + sum(-c * (n - 1) for c, n, _ in terms if c < 0)
    # unknowns with the same |c| merge into one: c*y1 + c*y2 = c*(y1 + y2), and every sum in
    # [0, u1 + u2] splits back into y1, y2 in range (a view and its copy at an offset, the
    # two halves of one tensor: without merging, the search is the product of their sizes)
    groups: dict[int, list] = {}
    for c, n, key in terms:
        groups.setdefault(abs(c), []).append((c, n, key))
    order = sorted(groups.items(), key=lambda g: -g[0])
    coef = [c for c, _ in order]
    upper = [sum(n - 1 for _, n, _ in members) for _, members in order]
    m = len(order)
    reach = [0] * (m + 1)  # reach[k]: the largest sum dims k.. can make
    gcds = [0] * (m + 1)  # gcds[k]: every sum of dims k.. is a multiple of this
    for k in range(m - 1, -1, -1):
        reach[k] = reach[k + 1] + coef[k] * upper[k]
        gcds[k] = math.gcd(gcds[k + 1], coef[k])
    budget = [max_work]

    def dfs(k: int, rest: int):
        if rest < 0 or rest > reach[k]:
            return None
        if k == m:
            return [] if rest == 0 else None
        if k == m - 1:
            return [rest // coef[k]] if rest % coef[k] == 0 else None
        if k == m - 2:
            return _two_terms(coef[k], upper[k], coef[k + 1], upper[k + 1], rest)
        c, g = coef[k], gcds[k + 1]
        lo = max(0, -((reach[k + 1] - rest) // c))  # c*y >= rest - reach[k+1]
        hi = min(upper[k], rest // c)
        # c*y ≡ rest (mod g): y ≡ y0 (mod step)
        g1 = math.gcd(c, g)
        if rest % g1:
            return None
        step = g // g1
        y0 = (rest // g1) * pow(c // g1, -1, step) % step if step > 1 else 0
        y = lo + (y0 - lo) % step
        while y <= hi:
            budget[0] -= 1
            if budget[0] < 0:
                raise _TooHard
            found = dfs(k + 1, rest - c * y)
            if found is not None:
                return [y] + found
            y += step
        return None

    ys = dfs(0, E)
    work = max_work - budget[0]
    if ys is None:
        return None, work
    index = {"a": {}, "b": {}}  # dim -> index; dims that do not move stay at 0
    for (_, members), total in zip(order, ys):
        for c, n, (who, d) in reversed(members):  # split the merged unknown back: the first
            y = min(total, n - 1)                    # members keep the smallest values
            total -= y
            index[who][d] = y if c > 0 else (n - 1) - y
    return (index["a"], index["b"]), work


def _two_terms(a: int, u: int, b: int, v: int, E: int):
    """y, z with a*y + b*z = E, 0 <= y <= u, 0 <= z <= v (extended Euclid), or None."""
    g, p, q = _ext_gcd(a, b)
    if E % g:
        return None
    y0, z0 = p * (E // g), q * (E // g)
    bs, as_ = b // g, a // g  # y = y0 + t*bs, z = z0 - t*as_
    t_lo = max(-(y0 // bs), -((v - z0) // as_))  # ceil(-y0/bs), ceil((z0 - v)/as_)
    t_hi = min((u - y0) // bs, z0 // as_)
    if t_lo > t_hi:
        return None
    return [y0 + t_lo * bs, z0 - t_lo * as_]


def _ext_gcd(a: int, b: int) -> tuple[int, int, int]:
    """(g, p, q) with a*p + b*q = g = gcd(a, b)."""
    p0, q0, p1, q1 = 1, 0, 0, 1
    while b:
        k = a // b
        a, b = b, a - k * b
        p0, p1 = p1, p0 - k * p1
        q0, q1 = q1, q0 - k * q1
    return a, p0, q0
