"""Arena occupancy: where every live block sits in each arena, at time ``t``.

One horizontal strip per arena, its **address axis** running over the arena's chunks laid
end to end (chunk boundaries drawn and labelled; a chunk chained when the arena ran out is
marked "growth"). On it, in address order:

* each live block, coloured (and hatched) by what its bytes hold — parameter, activation,
  gradient, data — and labelled with its storage (``#12 Relu``) where the label fits;
* the **padding** before a block (bytes skipped to reach the alignment);
* **freed** bytes below the top: an arena frees blocks only all at once, so a block freed
  early stays dead space until the next reset (a chunk tail skipped when a block did not
  fit counts here too);
* **free** bytes above the top, where the next block goes (the ▼ marks the top);
* the **high-water mark**: the highest the top has been up to ``t``.

The title gives the utilization: bytes requested by live blocks / capacity.

Node records live in the node arena (:mod:`microtorch.memory.node_arena`), a typed bump
allocator of 64-byte records rather than a byte arena; the trace records each node's slot,
so a second strip shows the live records (labelled by op) and the dead ones below its top.

``render(trace, t)`` returns a :class:`~microtorch.viz.figure.PanelFigure` whose
``facts`` is an :class:`ArenaFacts` (the rectangles drawn, as numbers) and ``description``
the same facts in words; ``describe(trace, t)`` is that text, without matplotlib.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import palette
from .events import clamp_step, events_of, step_label
from .figure import (DEFAULT_WIDTH, Painter, TextPool, byte_ticks, first_that_fits, legend_columns, new_figure,
                     points_per_unit, text_fits, titles)
from .timeline import NODE_RECORD_BYTES, as_trace, fmt_bytes, timeline

#: Block kinds in legend order (what the bytes of a block can hold).
BLOCK_KINDS = ("parameter", "activation", "gradient", "data", "unknown")


@dataclass
class Region:
    """A run of bytes drawn as one rectangle. ``x`` is the address on the strip's axis
    (chunk base + offset), ``offset`` the byte offset inside chunk ``chunk``."""
    x: int
    width: int
    kind: str
    label: str = ""
    storage: int | None = None
    block: int | None = None
    chunk: int = 0
    offset: int = 0


@dataclass
class Strip:
    """One arena (or the node arena) at time t."""
    name: str
    what: str  # "arena" or "node arena"
    exists: bool
    chunks: tuple = ()  # bytes of each chunk at t
    growth_steps: dict = field(default_factory=dict)  # chunk index -> event that chained it
    axis_bytes: int = 0  # the x extent: the largest this arena gets over the whole trace
    blocks: list = field(default_factory=list)  # live blocks: Region per block (its nbytes)
    padding: list = field(default_factory=list)  # alignment bytes before blocks
    dead: list = field(default_factory=list)  # freed below the top (until reset)
    used: int = 0  # the top: bytes below it
    requested: int = 0
    high_water: int = 0
    generation: int = 0
    unknown_records: int = 0  # node arena: live records of nodes made before recording

    @property
    def capacity(self) -> int:
        return sum(self.chunks)

    @property
    def bases(self) -> list[int]:
        out, b = [], 0
        for c in self.chunks:
            out.append(b)
            b += c
        return out

    @property
    def utilization(self) -> float:
        return self.requested / self.capacity if self.capacity else 0.0


@dataclass
class ArenaFacts:
    t: int
    when: str  # "step 2 of 21 · event 15" or "event 15 of 267"
    strips: list  # Strip per arena (in the order they appear), then the node arena


# ---------------------------------------------------------------------------------------------
# facts
# ---------------------------------------------------------------------------------------------
def _growths(events) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for e in events:
        if e.kind == "arena_chunk":
            if not e.get("growth"):
                out[e.arena] = {}
            else:
                out.setdefault(e.arena, {})[e.chunk] = e.step
    return out


def _dead_runs(top: int, taken: list[tuple[int, int]], chunk_of) -> list[Region]:
    """The bytes in [0, top) not covered by ``taken`` (start, stop) runs."""
    out, at = [], 0
    for start, stop in sorted(taken):
        if start > at:
            out.append((at, start))
        at = max(at, stop)
    if at < top:
        out.append((at, top))
    regions = []
    for a, b in out:
        # split at chunk boundaries so each region belongs to one chunk
        for chunk, base, size in chunk_of:
            lo, hi = max(a, base), min(b, base + size)
            if lo < hi:
                regions.append(Region(lo, hi - lo, "dead", chunk=chunk, offset=lo - base))
    return regions


def arena_facts(trace, t: int | None = None, steps=None, *, node_arena: bool = True,
                arenas=None) -> ArenaFacts:
    """The rectangles of the arena picture at time ``t``, as numbers (no matplotlib).

    ``arenas``: names of the arenas to show (default: every arena the trace has).
    ``node_arena``: add the node-record strip.
    """
    trace = as_trace(trace)
    t = clamp_step(trace, t)
    tl = timeline(trace)
    state = trace.state_at(t) if t >= 0 else None
    growths = _growths(events_of(trace)) if tl.arenas else {}
    strips = []
    for name in (arenas if arenas is not None else list(tl.arenas)):
        series = tl.arenas.get(name)
        a = state.arenas.get(name) if state is not None else None
        if a is None or series is None:
            strips.append(Strip(name, "arena", False, axis_bytes=series.max_capacity if series else 0))
            continue
        st = Strip(name, "arena", True, tuple(a.chunks),
                   {c: s for c, s in growths.get(name, {}).items() if s <= t},
                   max(series.max_capacity, a.capacity), used=a.used, requested=a.requested,
                   high_water=int(series.high_water[t]), generation=a.generation)
        bases = st.bases
        taken = []
        for b in state.blocks_of(name):
            base = bases[b.chunk] if b.chunk < len(bases) else 0
            x = base + b.offset
            kind = tl.kind(b.storage) if b.storage is not None else palette.memory_kind(b.tag)
            if b.storage is not None and b.storage in tl.storages:
                label = tl.info(b.storage).label
            else:
                label = f"block {b.block}"
            st.blocks.append(Region(x, b.nbytes, kind, label, b.storage, b.block, b.chunk, b.offset))
            if b.padding:
                st.padding.append(Region(x - b.padding, b.padding, "padding", "", b.storage, b.block,
                                         b.chunk, b.offset - b.padding))
            taken.append((x - b.padding, x + b.nbytes))
        st.dead = _dead_runs(a.used, taken, [(i, bases[i], c) for i, c in enumerate(st.chunks)])
        strips.append(st)
    if node_arena:
        strips.append(_node_strip(tl, state, t))
    return ArenaFacts(t, step_label(trace, t, steps), strips)


def _node_strip(tl, state, t: int) -> Strip:
    rb = NODE_RECORD_BYTES
    max_top = int(tl.node_top.max()) if tl.n else 0
    st = Strip("node arena", "node arena", True, axis_bytes=max(max_top, 1) * rb)
    if state is None:
        return st
    top = state.node_records.top
    st.chunks = (max(max_top, top, 1) * rb,)  # the records the trace shows (capacity is not recorded)
    st.used = top * rb
    st.high_water = int(tl.node_top[: t + 1].max()) * rb if t >= 0 else 0
    live_slots = []
    for n in state.nodes.values():
        if n.slot is None:
            continue
        live_slots.append(n.slot)
        st.blocks.append(Region(n.slot * rb, rb, "node record", f"{n.op} (node {n.node})", None, n.node,
                                0, n.slot * rb))
    st.blocks.sort(key=lambda r: r.x)
    st.requested = len(st.blocks) * rb
    st.unknown_records = max(0, state.node_records.live - len(live_slots))
    st.dead = _dead_runs(st.used, [(s * rb, (s + 1) * rb) for s in live_slots], [(0, 0, st.chunks[0])])
    return st


# ---------------------------------------------------------------------------------------------
# words
# ---------------------------------------------------------------------------------------------
def _runs(regions, limit: int = 12) -> str:
    parts = [f"[{r.x:,}, {r.x + r.width:,})" for r in regions[:limit]]
    if len(regions) > limit:
        parts.append(f"… {len(regions) - limit} more")
    return ", ".join(parts)


def facts_text(f: ArenaFacts) -> str:
    lines = [f"Arena occupancy at {f.when}."]
    if not any(s.what == "arena" for s in f.strips):
        lines.append("No byte arena in this trace: activations went to the pool "
                     "(inside `with mt.memory.step_arena():` they go to an arena).")
    for s in f.strips:
        if s.what == "arena":
            if not s.exists:
                lines.append(f"{s.name}: not created yet.")
                continue
            chunks = ", ".join(fmt_bytes(c) + (f" (growth at event {s.growth_steps[i]})"
                                               if i in s.growth_steps else "")
                               for i, c in enumerate(s.chunks))
            pad = sum(r.width for r in s.padding)
            dead = sum(r.width for r in s.dead)
            lines.append(
                f"{s.name}: {len(s.chunks)} chunk(s) [{chunks}], capacity {fmt_bytes(s.capacity)}; "
                f"{len(s.blocks)} live block(s) request {fmt_bytes(s.requested)} "
                f"({s.utilization:.0%} utilization); top at {s.used:,} B, high water "
                f"{s.high_water:,} B; {pad:,} B padding, {dead:,} B freed until the next reset; "
                f"generation {s.generation}.")
            for r in s.blocks:
                lines.append(f"  {r.label}: bytes [{r.x:,}, {r.x + r.width:,}) — chunk {r.chunk} "
                             f"offset {r.offset:,}, {r.width:,} B, {palette.label(r.kind)}")
            if s.dead:
                lines.append(f"  freed (reusable after reset): {_runs(s.dead)}")
        else:
            if not s.used and not s.blocks:
                lines.append("node arena: no node records live.")
                continue
            live = len(s.blocks) + s.unknown_records
            lines.append(f"node arena: {live} live record(s) of {NODE_RECORD_BYTES} B, top at slot "
                         f"{s.used // NODE_RECORD_BYTES}, high water {s.high_water // NODE_RECORD_BYTES} "
                         f"record(s); {sum(r.width for r in s.dead) // NODE_RECORD_BYTES} "
                         "dead record(s) below the top (the records reset when the last one is freed).")
            for r in s.blocks:
                lines.append(f"  slot {r.x // NODE_RECORD_BYTES}: {r.label}")
            if s.unknown_records:
                lines.append(f"  + {s.unknown_records} record(s) of nodes made before recording started")
    return "\n".join(lines)


def describe(trace, t: int | None = None, steps=None, *, node_arena: bool = True, arenas=None,
             **_) -> str:
    """The arena picture's facts at time ``t`` in words."""
    return facts_text(arena_facts(trace, t, steps, node_arena=node_arena, arenas=arenas))


# ---------------------------------------------------------------------------------------------
# the picture
# ---------------------------------------------------------------------------------------------
_Y0, _H = 0.2, 0.58  # the blocks' band inside a strip (axes units 0..1)


def _box(r: Region):
    x0, x1 = r.x, r.x + r.width
    return [(x0, _Y0), (x1, _Y0), (x1, _Y0 + _H), (x0, _Y0 + _H)]


class ArenaPainter(Painter):
    """The arena picture of one trace; ``draw(t)`` moves it to time ``t``."""

    def __init__(self, trace, *, node_arena: bool = True, arenas=None, width: float = DEFAULT_WIDTH):
        from matplotlib.collections import LineCollection, PolyCollection
        from matplotlib.patches import Patch

        trace = as_trace(trace)
        super().__init__(trace, node_arena=node_arena, arenas=arenas)
        first = arena_facts(trace, 0 if len(trace) else None, node_arena=node_arena, arenas=arenas)
        n = len(first.strips)
        legend_kinds = _arena_kinds(trace) or ["activation"]
        legend_kinds += (["node record"] if node_arena else []) + ["padding", "dead", "free"]
        legend_labels = [palette.label(k) for k in legend_kinds] + ["high water", "top: the next block goes here"]
        ncol = legend_columns(legend_labels, width, most=5)
        axes_h, gap, top_h = 0.62, 0.78, 0.72  # inches
        bottom_h = 0.62 + 0.19 * -(-len(legend_labels) // ncol)  # the axis label and the legend's rows
        self.fig = fig = new_figure(width, top_h + n * axes_h + (n - 1) * gap + bottom_h)
        axes = fig.subplots(n, 1, squeeze=False)[:, 0]
        h = fig.get_figheight()
        fig.subplots_adjust(left=0.03, right=0.97, top=1 - top_h / h, bottom=bottom_h / h,
                            hspace=gap / axes_h)
        self.axes = list(axes)
        self.coll = []  # per strip: kind -> PolyCollection
        self.lines = []
        self.texts = []  # per strip: (chunk labels, block labels, a note)
        self.dynamic: list = []
        kinds = BLOCK_KINDS + ("node record", "padding", "dead")
        for ax, s in zip(self.axes, first.strips):
            ax.set_gid(f"arena:{s.name}")
            ax.set_ylim(0, 1)
            ax.set_xlim(0, max(s.axis_bytes, 1) * 1.01)
            ax.set_yticks([])
            for side in ("left", "right", "top"):
                ax.spines[side].set_visible(False)
            ax.tick_params(axis="x", labelsize=8, length=3)
            ax.set_xticks(*byte_ticks(max(s.axis_bytes, 1)))
            colls = {}
            frame = PolyCollection([], facecolors=palette.fill("free"), edgecolors="#333333",
                                   linewidths=1.0, zorder=1)
            ax.add_collection(frame)
            colls["frame"] = frame
            for k in kinds:
                c = PolyCollection([], facecolors=palette.fill(k), edgecolors=palette.color(k),
                                   linewidths=0.8, hatch=palette.hatch(k) or None,
                                   zorder=2 if k in ("padding", "dead") else 3)
                c.set_gid(f"arena-{k}:{s.name}")
                ax.add_collection(c)
                colls[k] = c
            self.coll.append(colls)
            bounds = LineCollection([], colors="black", linewidths=2.2, zorder=6)  # chunk boundaries
            ax.add_collection(bounds)
            colls["bounds"] = bounds
            self.texts.append((TextPool(ax, fontsize=7.5, color="#333333", va="bottom", ha="left"),
                               TextPool(ax, ha="center", va="center", fontsize=7.5, clip_on=True, zorder=7),
                               TextPool(ax, ha="center", va="center", color="#555555", transform=ax.transAxes)))
            hw = ax.axvline(0, color="black", linestyle=(0, (4, 2)), linewidth=1.2, zorder=4)
            top, = ax.plot([0], [_Y0 - 0.07], marker="^", color="black", markersize=7,
                           linestyle="none", zorder=5, clip_on=False)
            self.lines.append((hw, top))
        self.axes[-1].set_xlabel("byte offset (an arena's chunks laid end to end)")
        handles = [Patch(facecolor=palette.fill(k), edgecolor=palette.color(k) if k != "free" else "#333333",
                         hatch=palette.hatch(k) or None, label=palette.label(k)) for k in legend_kinds]
        handles.append(_line_handle("black", (0, (4, 2)), "high water"))
        handles.append(_marker_handle("top: the next block goes here"))
        fig.legend(handles=handles, loc="lower center", frameon=False,
                   ncol=ncol,
                   fontsize=8.5, handlelength=1.6, columnspacing=1.2, bbox_to_anchor=(0.5, 0.01))
        self.title = fig.suptitle("", fontsize=12, fontweight="bold", y=1 - 0.12 / h, va="top")

    def facts(self, t, steps=None) -> ArenaFacts:
        return arena_facts(self.trace, t, steps, **self.options)

    def dynamic_artists(self) -> list:
        out = [self.title]
        for ax, colls, (hw, top), pools in zip(self.axes, self.coll, self.lines, self.texts):
            out += [*colls.values(), hw, top, *titles(ax)]
            for pool in pools:
                out += pool.texts
        return out

    def text(self, f) -> str:
        return facts_text(f)

    def update(self, f: ArenaFacts) -> None:
        self.title.set_text(f"Arena occupancy · {f.when}")
        for ax, colls, (hw, top), (chunk_text, block_text, note), s in zip(
                self.axes, self.coll, self.lines, self.texts, f.strips):
            by_kind: dict[str, list] = {k: [] for k in colls}
            bases = s.bases
            colls["frame"].set_verts([[(b, _Y0), (b + c, _Y0), (b + c, _Y0 + _H), (b, _Y0 + _H)]
                                      for b, c in zip(bases, s.chunks)])
            for r in s.blocks + s.padding + s.dead:
                by_kind.setdefault(r.kind, []).append(_box(r))
            for k, c in colls.items():
                if k not in ("frame", "bounds"):
                    c.set_verts(by_kind.get(k, []))
                    c.set_visible(bool(by_kind.get(k)))
            colls["bounds"].set_segments([[(b, _Y0 - 0.08), (b, _Y0 + _H + 0.08)] for b in bases[1:]])
            hw.set_xdata([s.high_water, s.high_water])
            hw.set_visible(s.exists and s.high_water > 0)
            top.set_xdata([s.used])
            top.set_visible(s.exists and bool(s.chunks))
            ax.set_title(first_that_fits(ax, _strip_titles(s), 10), loc="left", fontsize=10, fontweight="bold",
                         pad=13, y=1.0)
            note.show([] if s.exists else [(0.5, 0.5, "not created yet at this step")])
            scale = points_per_unit(ax)
            labels = []
            if s.exists and (len(s.chunks) > 1 or s.what == "arena"):
                for i, (b, c) in enumerate(zip(bases, s.chunks)):
                    words = f"chunk {i}" + (f" · growth at event {s.growth_steps[i]}" if i in s.growth_steps
                                            else (" · grown" if i > 0 else ""))
                    if not text_fits(ax, b, b + c, words, 7.5, scale):
                        words = f"chunk {i}" if text_fits(ax, b, b + c, f"chunk {i}", 7.5, scale) else ""
                    if words:
                        labels.append((b + 0.004 * s.axis_bytes, _Y0 + _H + 0.04, words))
            chunk_text.show(labels)
            labels = []
            for r in s.blocks if s.exists else ():  # labels inside blocks, where they fit
                short, _, rest = r.label.partition(" ")
                first = rest.split(" (")[0]
                for words in (r.label, f"{short}\n{rest}" if rest else short,
                              f"{short}\n{first}" if first else short, short):
                    if all(text_fits(ax, r.x, r.x + r.width, w, 7.5, scale) for w in words.split("\n")):
                        labels.append((r.x + r.width / 2, _Y0 + _H / 2, words))
                        break
            block_text.show(labels)


def _arena_kinds(trace) -> list[str]:
    """The kinds of bytes any arena holds at any time of the trace (for a steady legend)."""
    tl = timeline(trace)
    kinds = {s.kind for s in tl.storages.values() if s.allocator in tl.arenas}
    return [k for k in BLOCK_KINDS if k in kinds]


def _line_handle(color, style, label):
    from matplotlib.lines import Line2D
    return Line2D([0], [0], color=color, linestyle=style, linewidth=1.2, label=label)


def _marker_handle(label):
    from matplotlib.lines import Line2D
    return Line2D([0], [0], color="black", marker="^", linestyle="none", markersize=6, label=label)


def _strip_titles(s: Strip) -> list[str]:
    """A strip's title, longest first, then shorter forms for narrow figures."""
    if s.what == "node arena":
        live = len(s.blocks) + s.unknown_records
        top, hw = s.used // NODE_RECORD_BYTES, s.high_water // NODE_RECORD_BYTES
        return [f"node arena: {live} live record(s) × {NODE_RECORD_BYTES} B · top slot {top} · high water {hw}",
                f"node arena: {live} live record(s) · top slot {top} · high water {hw}",
                f"node arena: {live} live · top {top} · high water {hw}"]
    if not s.exists:
        return [f"{s.name}"]
    used = f"{fmt_bytes(s.requested)} of {fmt_bytes(s.capacity)} in use"
    hw = f"high water {fmt_bytes(s.high_water)}"
    return [f"{s.name}: {used} ({s.utilization:.0%} utilization) · {len(s.blocks)} block(s) · {hw} · "
            f"generation {s.generation}",
            f"{s.name}: {used} ({s.utilization:.0%} utilization) · {len(s.blocks)} block(s) · {hw}",
            f"{s.name}: {used} ({s.utilization:.0%}) · {len(s.blocks)} block(s) · {hw}",
            f"{s.name}: {used} · {hw}", f"{s.name}: {used}"]


def render(trace, t: int | None = None, steps=None, *, node_arena: bool = True, arenas=None,
           width: float = DEFAULT_WIDTH):
    """The arena picture at time ``t`` (``None``: the end): a fresh
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`ArenaFacts`) and
    ``.description``. ``steps``: a player's step axis (titles then say "step k of N · event t")."""
    return ArenaPainter(trace, node_arena=node_arena, arenas=arenas, width=width).draw(t, steps)
