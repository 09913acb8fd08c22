"""Thread caches over time: how many free bytes each thread keeps, and when the lock was taken.

For a pool with thread caches (``Pool(thread_cache=k)``), replayed from the trace:

* **top** — bytes waiting in each thread's cache after each of its events: an allocation
  served from the cache lowers it, a free raises it, a *refill* (a batch of blocks from the
  central free lists, under the lock) or a *flush* (a batch given back) moves it by a batch;
  one step line per thread;
* **bottom** — allocations served per thread (``alloc_block`` events carrying the thread)
  against the lock acquisitions so far: the gap between the two is the work the caches
  did without the lock.

A vertical line marks ``t``. ``render(trace, t)`` returns a
:class:`~microtorch.viz.figure.PanelFigure` with ``facts`` (:class:`ThreadFacts`);
``describe(trace, t)`` is the text alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import palette
from .events import clamp_step, replay_of, step_label
from .figure import DEFAULT_WIDTH, Painter, byte_ticks, new_figure
from .timeline import as_trace, fmt_bytes

LINE_COLORS = ("blue", "vermillion", "bluish_green", "reddish_purple", "orange", "sky_blue")


@dataclass
class ThreadFacts:
    t: int
    when: str
    allocator: str | None
    threads: list = field(default_factory=list)  # thread ids, in order of appearance
    cached: dict = field(default_factory=dict)  # thread -> [(step, cached bytes)] up to the end
    allocations: dict = field(default_factory=dict)  # thread -> [(step, count so far)]
    locks: list = field(default_factory=list)  # [(step, lock acquisitions so far)]
    cross_frees: int = 0  # up to t

    def cached_at(self, thread: int, t: int | None = None) -> int:
        t = self.t if t is None else t
        return next((b for s, b in reversed(self.cached.get(thread, [])) if s <= t), 0)

    def count_at(self, series: list, t: int | None = None) -> int:
        t = self.t if t is None else t
        return next((n for s, n in reversed(series) if s <= t), 0)


class CrossFreeReplayer:
    """The thread-cache concern of a trace's replay (:meth:`~microtorch.trace.replay.Replay.follow`
    drives it): per pool, the blocks freed so far by a thread other than the one that allocated them."""

    def __init__(self, events: list):
        self.events, self.t = events, -1
        self.allocated_by: dict[tuple, int] = {}  # (allocator, block) -> thread
        self.cross: dict[str, int] = {}  # allocator -> cross-thread frees so far

    def apply(self, e) -> None:
        self.t += 1
        if "thread" not in e:
            return
        key, th = (e.get("allocator"), e.get("block")), e["thread"]
        if e["kind"] == "alloc_block":
            self.allocated_by[key] = th
        elif e["kind"] == "free_block" and self.allocated_by.get(key, th) != th:
            self.cross[key[0]] = self.cross.get(key[0], 0) + 1

    def snapshot(self) -> dict[str, int]:
        return dict(self.cross)


def _series(trace, allocator) -> ThreadFacts:
    """The whole trace's per-thread series of one pool (``t`` and ``when`` left unset)."""
    f = ThreadFacts(-1, "", allocator)
    for e in trace.events:
        if e.get("allocator") != allocator or "thread" not in e:
            continue
        th = e["thread"]
        if th not in f.cached:
            f.threads.append(th)
            f.cached[th], f.allocations[th] = [], []
        f.cached[th].append((e["step"], e["cached"]))
        if e["kind"] == "thread_cache":
            f.locks.append((e["step"], e["lock_acquisitions"]))
        elif e["kind"] == "alloc_block":
            f.allocations[th].append((e["step"], len(f.allocations[th]) + 1))
    return f


def thread_facts(trace, t: int | None = None, steps=None, *, allocator: str | None = None) -> ThreadFacts:
    """Per-thread cache bytes, allocations and the lock count (no matplotlib): the series are
    per-trace facts of the trace's one replay, the cross-thread frees up to ``t`` its
    :class:`CrossFreeReplayer`. The series are shared: treat them as read-only."""
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    replay = replay_of(trace)
    if allocator is None:
        allocator = replay.facts("thread-cache pool", lambda: next(
            (e["allocator"] for e in trace.events if e["kind"] == "thread_cache"), None))
    whole = replay.facts(("thread-cache series", allocator), lambda: _series(trace, allocator))
    f = ThreadFacts(t, step_label(trace, t, steps), allocator, threads=whole.threads, cached=whole.cached,
                    allocations=whole.allocations, locks=whole.locks)
    if t >= 0:
        f.cross_frees = replay.follow(CrossFreeReplayer, t).get(allocator, 0)
    return f


def facts_text(f: ThreadFacts) -> str:
    if f.allocator is None:
        return f"Thread caches at {f.when}: no pool with thread caches in this trace."
    lines = [f"Thread caches of {f.allocator!r} at {f.when}: {len(f.threads)} thread(s), "
             f"{f.count_at(f.locks)} lock acquisition(s) so far for "
             f"{sum(f.count_at(a) for a in f.allocations.values())} allocation(s); "
             f"{f.cross_frees} block(s) freed by a thread other than the one that allocated them."]
    for i, th in enumerate(f.threads):
        lines.append(f"  thread {i + 1} (id {th}): {fmt_bytes(f.cached_at(th))} cached, "
                     f"{f.count_at(f.allocations[th])} allocation(s)")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, allocator: str | None = None, **_) -> str:
    """The thread-cache picture's facts at ``t`` in words."""
    return facts_text(thread_facts(trace, t, steps, allocator=allocator))


class ThreadPainter(Painter):
    """The thread-cache picture of one trace; ``draw(t)`` moves its time line to ``t``."""

    def __init__(self, trace, *, allocator: str | None = None, width: float = DEFAULT_WIDTH):
        trace = as_trace(trace)
        super().__init__(trace, allocator=allocator)
        f = thread_facts(trace, None, allocator=allocator)
        self.fig = fig = new_figure(width, 5.2)
        self.top, self.bottom = fig.subplots(2, 1, sharex=True)
        end = max(1, len(trace.events) - 1)
        peak = 1
        for i, th in enumerate(f.threads):
            colour = palette.OKABE_ITO[LINE_COLORS[i % len(LINE_COLORS)]]
            pts = [(0, 0)] + f.cached[th] + [(end, f.cached[th][-1][1] if f.cached[th] else 0)]
            self.top.step([s for s, _ in pts], [b for _, b in pts], where="post", color=colour,
                          label=f"thread {i + 1}")
            peak = max(peak, max(b for _, b in pts))
            allocs = [(0, 0)] + f.allocations[th] + [(end, len(f.allocations[th]))]
            self.bottom.step([s for s, _ in allocs], [n for _, n in allocs], where="post", color=colour,
                             label=f"allocations, thread {i + 1}")
        locks = [(0, 0)] + f.locks + [(end, f.locks[-1][1] if f.locks else 0)]
        self.bottom.step([s for s, _ in locks], [n for _, n in locks], where="post", color="black",
                         linestyle="--", label="lock acquisitions (all threads)")
        ticks, labels = byte_ticks(peak)
        self.top.set_yticks(ticks, labels)
        self.top.set_ylabel("bytes in the cache")
        self.bottom.set_ylabel("count so far")
        self.bottom.set_xlabel("event")
        self.top.set_xlim(0, end)
        for ax in (self.top, self.bottom):
            ax.legend(loc="upper left", fontsize=8, frameon=False)
        self.cursor = [ax.axvline(0, color="#555555", linewidth=1) for ax in (self.top, self.bottom)]
        self.title = fig.suptitle("")
        fig.subplots_adjust(left=0.12, right=0.97, top=0.9, bottom=0.1, hspace=0.15)

    def dynamic_artists(self) -> list:
        return [*self.cursor, self.title]

    def facts(self, t, steps=None):
        return thread_facts(self.trace, t, steps, **self.options)

    def update(self, f: ThreadFacts) -> None:
        for line in self.cursor:
            line.set_xdata([f.t, f.t])
        self.title.set_text(f"Thread caches: {f.count_at(f.locks)} lock acquisitions for "
                            f"{sum(f.count_at(a) for a in f.allocations.values())} allocations ({f.when})")

    def text(self, f: ThreadFacts) -> str:
        return facts_text(f)


def render(trace, t: int | None = None, steps=None, *, allocator: str | None = None,
           width: float = DEFAULT_WIDTH):
    """The thread-cache picture at ``t`` (``None``: the end), a fresh
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`ThreadFacts`)."""
    return ThreadPainter(trace, allocator=allocator, width=width).draw(t, steps)
