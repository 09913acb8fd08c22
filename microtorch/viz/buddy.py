"""The buddy allocator's tree at time ``t``: which blocks are split, in use, or free.

Each heap of a :class:`~microtorch.memory.buddy.Buddy` is a binary tree: the heap itself
(order K, 2ᴷ bytes) at the top, and every block that was split shown with its two halves
in the row below, down to the smallest order used. One row per order, addresses left to
right, so a block of order k is a bar 2ᵏ bytes wide:

* **in use** — handed out (coloured by what it holds, with the bytes asked for inside it:
  the rest of the bar is the rounding to a power of two);
* **free** — on its order's free list (hatched);
* **split** — halved into two buddies below (outlined only).

The tree is replayed from the trace's ``buddy_alloc`` / ``buddy_free`` events (their splits
and merges) by :class:`BuddyReplayer`, the buddy concern of the trace's one replay, so the
picture is a pure function of the trace and ``t``.

``render(trace, t)`` returns a :class:`~microtorch.viz.figure.PanelFigure` with ``facts``
(:class:`BuddyFacts`) and ``description``; ``describe(trace, t)`` is the text alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import palette
from .events import clamp_step, replay_of, step_label
from .figure import DEFAULT_WIDTH, Painter, new_figure
from .timeline import as_trace, fmt_bytes


@dataclass(frozen=True)
class TreeNode:
    """One block of the tree: heap, byte offset, order, and its state at time t."""
    heap: int
    offset: int
    order: int
    state: str  # "in use", "free" or "split"
    nbytes: int = 0  # bytes asked for (in use only)
    tag: str = ""

    @property
    def size(self) -> int:
        return 1 << self.order


@dataclass
class BuddyFacts:
    t: int
    when: str
    allocator: str | None
    heap_bytes: int = 0
    min_order: int = 0
    heaps: int = 0
    nodes: list = field(default_factory=list)  # TreeNode, heap by heap, top order first
    direct: list = field(default_factory=list)  # nbytes of live blocks served directly

    def count(self, state: str) -> int:
        return sum(n.state == state for n in self.nodes)

    @property
    def requested(self) -> int:
        return sum(n.nbytes for n in self.nodes if n.state == "in use")

    @property
    def reserved(self) -> int:
        return sum(n.size for n in self.nodes if n.state == "in use")


class BuddyReplayer:
    """The buddy concern of a trace's replay (:meth:`~microtorch.trace.replay.Replay.follow`
    drives it): per buddy allocator, the split blocks and live blocks after each event."""

    def __init__(self, events: list):
        self.events, self.t = events, -1
        self.trees: dict[str, dict] = {}  # allocator -> heap_bytes, min_order, heaps, split, live

    def apply(self, e) -> None:
        self.t += 1
        if e["kind"] not in ("buddy_alloc", "buddy_free"):
            return
        tree = self.trees.setdefault(e["allocator"], {"heap_bytes": 0, "min_order": 0, "heaps": 0,
                                                      "split": frozenset(), "live": {}})
        if e["kind"] == "buddy_alloc":
            tree["heap_bytes"], tree["min_order"] = e["heap_bytes"], e["min_order"]
            tree["heaps"] = max(tree["heaps"], e["heaps"])
            tree["split"] = tree["split"] | {(e["heap"], o, k) for o, k in e["splits"]}
            tree["live"] = {**tree["live"], e["block"]: (e["heap"], e["offset"], e["order"], e["nbytes"], e["tag"])}
        else:
            live = dict(tree["live"])
            heap, _, _, _, _ = live.pop(e["block"])
            tree["live"] = live
            tree["split"] = tree["split"] - {(heap, o, k) for o, k in e["merges"]}

    def snapshot(self) -> dict[str, dict]:
        """``{allocator: tree}``; each tree's sets and dicts are replaced, never changed, by later events."""
        return {name: dict(tree) for name, tree in self.trees.items()}


def _trace_facts(trace) -> dict:
    """Per-trace constants: the first buddy allocator, the deepest order and the most heaps
    any ``buddy_alloc`` reached."""
    allocs = [e for e in trace.events if e["kind"] == "buddy_alloc"]
    return {"allocator": allocs[0]["allocator"] if allocs else None,
            "deepest": min((e["order"] for e in allocs if e["order"] is not None), default=None),
            "heaps": max((e["heaps"] for e in allocs), default=1)}


def buddy_facts(trace, t: int | None = None, steps=None, *, allocator: str | None = None) -> BuddyFacts:
    """The tree after events ``0..t`` as numbers (no matplotlib), from the trace's one replay.
    ``allocator``: which buddy allocator (default: the first in the trace)."""
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    replay = replay_of(trace)
    if allocator is None:
        allocator = replay.facts("buddy", lambda: _trace_facts(trace))["allocator"]
    f = BuddyFacts(t, step_label(trace, t, steps), allocator)
    tree = replay.follow(BuddyReplayer, t).get(allocator) if t >= 0 else None
    if tree is None:
        return f
    f.heap_bytes, f.min_order, f.heaps = tree["heap_bytes"], tree["min_order"], tree["heaps"]
    split = tree["split"]
    in_use = {(h, o, k): (n, tag) for h, o, k, n, tag in tree["live"].values() if k is not None}
    f.direct = [n for h, o, k, n, tag in tree["live"].values() if k is None]
    top = f.heap_bytes.bit_length() - 1

    def walk(heap: int, offset: int, k: int) -> None:
        if (heap, offset, k) in split:
            f.nodes.append(TreeNode(heap, offset, k, "split"))
            walk(heap, offset, k - 1)
            walk(heap, offset + (1 << (k - 1)), k - 1)
        elif (heap, offset, k) in in_use:
            n, tag = in_use[heap, offset, k]
            f.nodes.append(TreeNode(heap, offset, k, "in use", n, tag))
        else:
            f.nodes.append(TreeNode(heap, offset, k, "free"))

    for heap in range(f.heaps):
        walk(heap, 0, top)
    return f


def facts_text(f: BuddyFacts) -> str:
    if f.allocator is None:
        return f"Buddy tree at {f.when}: no buddy allocator in this trace."
    lines = [f"Buddy tree of {f.allocator!r} at {f.when}: {f.heaps} heap(s) of {fmt_bytes(f.heap_bytes)}; "
             f"{f.count('in use')} block(s) in use ({fmt_bytes(f.requested)} requested in "
             f"{fmt_bytes(f.reserved)} reserved), {f.count('free')} free, {f.count('split')} split."]
    for n in f.nodes:
        if n.state != "split":
            what = f"in use, {n.nbytes:,} B asked ({n.tag or 'untagged'})" if n.state == "in use" else "free"
            lines.append(f"  heap {n.heap} +{n.offset:,}: order {n.order} ({n.size:,} B) {what}")
    if f.direct:
        lines.append(f"  served directly (above the heap size): {', '.join(f'{n:,} B' for n in f.direct)}")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, allocator: str | None = None, **_) -> str:
    """The buddy tree at time ``t`` in words."""
    return facts_text(buddy_facts(trace, t, steps, allocator=allocator))


class BuddyPainter(Painter):
    """The buddy tree of one trace; ``draw(t)`` moves it to time ``t``."""

    def __init__(self, trace, *, allocator: str | None = None, width: float = DEFAULT_WIDTH):
        from matplotlib.patches import Patch

        trace = as_trace(trace)
        super().__init__(trace, allocator=allocator)
        last = buddy_facts(trace, None, allocator=allocator)
        # rows: every order any step of the trace reached (the deepest split decides)
        whole = replay_of(trace).facts("buddy", lambda: _trace_facts(trace))
        deepest = last.min_order if whole["deepest"] is None else whole["deepest"]
        self.top = max(last.heap_bytes.bit_length() - 1, deepest)
        self.orders = list(range(self.top, deepest - 1, -1))
        heaps = max(1, whole["heaps"])
        self.fig = fig = new_figure(width, 1.6 + 0.32 * len(self.orders) * heaps)
        self.axes = fig.subplots(heaps, 1, squeeze=False)[:, 0]
        for h, ax in enumerate(self.axes):
            ax.set_xlim(0, max(1, last.heap_bytes))
            ax.set_ylim(len(self.orders), 0)
            ax.set_yticks([i + 0.5 for i in range(len(self.orders))],
                          [f"2^{k} = {fmt_bytes(1 << k)}" for k in self.orders])
            ax.set_ylabel(f"heap {h}: order")
            ax.set_xlabel("byte offset in the heap")
        handles = [Patch(facecolor=palette.fill("activation"), edgecolor=palette.color("activation"),
                         label="in use (dark: bytes asked)"),
                   Patch(facecolor="white", edgecolor=palette.color("free"), hatch="//", label="free"),
                   Patch(facecolor="none", edgecolor="#555555", label="split")]
        fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
        fig.subplots_adjust(left=0.2, right=0.98, top=0.88, bottom=0.3 if heaps == 1 else 0.15, hspace=0.5)
        self.title = fig.suptitle("")

    def facts(self, t, steps=None):
        return buddy_facts(self.trace, t, steps, **self.options)

    def update(self, f: BuddyFacts) -> None:
        from matplotlib.patches import Rectangle

        for a in self.dynamic:
            a.remove()
        self.dynamic = [self.title]
        rows = {k: i for i, k in enumerate(self.orders)}
        for n in f.nodes:
            if n.heap >= len(self.axes) or n.order not in rows:
                continue
            ax, y = self.axes[n.heap], rows[n.order]
            if n.state == "in use":
                kind = palette.memory_kind(n.tag)
                patches = [Rectangle((n.offset, y + 0.1), n.size, 0.8, facecolor=palette.fill(kind),
                                     edgecolor=palette.color(kind), linewidth=0.8),
                           Rectangle((n.offset, y + 0.1), n.nbytes, 0.8, facecolor=palette.color(kind),
                                     edgecolor="none", alpha=0.75)]
            elif n.state == "free":
                patches = [Rectangle((n.offset, y + 0.1), n.size, 0.8, facecolor="white",
                                     edgecolor=palette.color("free"), hatch="//", linewidth=0.8)]
            else:
                patches = [Rectangle((n.offset, y + 0.1), n.size, 0.8, facecolor="none",
                                     edgecolor="#555555", linewidth=0.8)]
            for p in patches:
                ax.add_patch(p)
            self.dynamic.extend(patches)
        self.title.set_text(f"Buddy tree: {f.count('in use')} in use, {f.count('free')} free, "
                            f"{f.count('split')} split; {fmt_bytes(f.requested)} asked in "
                            f"{fmt_bytes(f.reserved)} ({f.when})")

    def text(self, f: BuddyFacts) -> str:
        return facts_text(f)


def render(trace, t: int | None = None, steps=None, *, allocator: str | None = None,
           width: float = DEFAULT_WIDTH):
    """The buddy tree at time ``t`` (``None``: the end), a fresh
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`BuddyFacts`)."""
    return BuddyPainter(trace, allocator=allocator, width=width).draw(t, steps)
