"""Alias ranges: which elements of one storage each of several views touches, and which
they share.

This picture is about layouts, not about a moment of a trace, so it takes the views
themselves — tensors, :class:`~microtorch.memory.aliasing.Layout` objects, or plain view
descriptions ``{"storage", "offset", "shape", "strides", "itemsize"}`` (``storage_size``
optional; offsets and strides in elements) — and keeps the ``render``/``describe`` pair::

    x = mt.arange(24.).reshape(4, 6)
    mt.viz.alias.render(x[:, ::2], x[:, 1::2], names=["even cols", "odd cols"])

**1-D form** (always available): the storage's element addresses run left to right; one
row per view marks exactly the elements it touches (each cell shows the view's index of
that element when there is room), a bracket above the row spans its extent (lowest to
highest byte it touches), and elements touched by two or more views are **highlighted**
(vermillion, hatched) in every row that touches them, with a band across all rows.

**2-D grid form** (``grid="auto"`` picks it when the views look like parts of a
row-major matrix; ``grid=(rows, cols)`` forces it, ``grid=None`` turns it off): the
storage drawn as a rows × cols matrix, one small grid per view plus one of the shared
elements; ``[`` and ``]`` mark where each view's extent starts and ends.

The title carries the verdict of :func:`microtorch.memory.alias` (``must``, ``may`` with
``exact=False``, or ``no``) for every pair, with its reason. The highlighted cells are
always the exact truth, whatever ``exact`` says: with ``exact=False`` a "may" verdict sits
above a picture that shows whether the bytes are really shared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from . import palette
from .figure import DEFAULT_WIDTH, new_figure, rc

SHARED = "ready"  # the palette kind shared elements are drawn in (vermillion: "look here")


@dataclass
class View:
    """One view as the picture sees it."""
    name: str
    layout: object  # microtorch.memory.aliasing.Layout
    addresses: np.ndarray  # element address of each element, shaped like the view
    shared: np.ndarray  # bool, shaped like the view: this element's bytes are also another view's
    colour: str = ""

    @property
    def extent(self) -> tuple[int, int] | None:
        return self.layout.extent()

    @property
    def touched(self) -> np.ndarray:
        """Sorted unique element addresses the view touches."""
        return np.unique(self.addresses)

    @property
    def highlighted(self) -> set[int]:
        """Element addresses drawn highlighted in this view's row."""
        return {int(a) for a in np.unique(self.addresses[self.shared])}


@dataclass
class AliasFacts:
    views: list
    exact: bool
    verdict: str  # "must", "may" or "no" — over every pair
    pairs: list  # (i, j, AliasReport)
    grid: tuple | None  # (rows, cols) for the 2-D form
    storage_size: dict = field(default_factory=dict)  # storage id -> elements

    @property
    def shared(self) -> set[int]:
        """Element addresses touched by two or more views (of one storage)."""
        out = set()
        for v in self.views:
            out |= v.highlighted
        return out

    @property
    def one_storage(self) -> bool:
        return len({v.layout.storage for v in self.views}) == 1


def _layout(view):
    from ..memory.aliasing import Layout, layout

    if isinstance(view, Layout):
        return view
    if isinstance(view, dict):
        shape = tuple(view["shape"])
        strides = tuple(view["strides"])
        size = view.get("storage_size")
        if size is None:
            hi = view["offset"] + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0 and n > 0)
            size = hi + 1
        return Layout(view["storage"], view["offset"], shape, strides, view.get("itemsize", 4), size)
    return layout(view)


def _name(view, i: int) -> str:
    name = view.get("name") if isinstance(view, dict) else getattr(view, "name", None)
    return name or "abcdefghijklmnopqrstuvwxyz"[i % 26] + ("" if i < 26 else str(i // 26))


def _auto_grid(layouts) -> tuple | None:
    if len({la.storage for la in layouts}) != 1:
        return None
    size = layouts[0].storage_size
    best = None
    for la in layouts:
        if len(la.shape) != 2:
            continue
        cols = max(abs(s) for s in la.strides)
        if cols > 1 and size % cols == 0 and size // cols >= 2 and cols >= la.shape[1] and cols <= 64:
            best = max(best or 0, cols)
    return (size // best, best) if best else None


def alias_facts(*views, names=None, exact: bool = True, grid="auto") -> AliasFacts:
    """What the alias picture shows, as numbers (no matplotlib)."""
    from ..memory.aliasing import alias

    if len(views) == 1 and isinstance(views[0], (list, tuple)):
        views = tuple(views[0])
    if len(views) < 1:
        raise ValueError("the alias picture needs at least one view (two to compare)")
    layouts = [_layout(v) for v in views]
    names = list(names) if names is not None else [_name(v, i) for i, v in enumerate(views)]
    if len(names) != len(layouts):
        raise ValueError(f"{len(names)} names for {len(layouts)} views")
    addrs = [la.addresses() for la in layouts]
    out = []
    for i, (la, a) in enumerate(zip(layouts, addrs)):
        others = [addrs[j].ravel() for j, lb in enumerate(layouts) if j != i and lb.storage == la.storage]
        mask = np.isin(a, np.concatenate(others)) if others else np.zeros(a.shape, dtype=bool)
        out.append(View(names[i], la, a, mask, palette.CYCLE[i % len(palette.CYCLE)]))
    pairs = [(i, j, alias(layouts[i], layouts[j], exact=exact)) for i, j in combinations(range(len(layouts)), 2)]
    answers = {rep.answer for _, _, rep in pairs}
    verdict = "must" if "must" in answers else "may" if "may" in answers else "no"
    if grid == "auto":
        grid = _auto_grid(layouts)
    elif grid is not None:
        grid = tuple(grid)
        size = layouts[0].storage_size
        if grid[0] * grid[1] < size:
            raise ValueError(f"grid {grid} has fewer cells than the storage's {size} elements")
    sizes = {}
    for la in layouts:
        sizes[la.storage] = max(sizes.get(la.storage, 0), la.storage_size, (la.extent() or (0, -1))[1] + 1)
    return AliasFacts(out, exact, verdict, pairs, grid, sizes)


_VERDICT_WORDS = {"must": "MUST alias: they share bytes", "may": "MAY alias: their byte extents overlap",
                  "no": "NO alias: no byte is shared"}


def facts_text(f: AliasFacts) -> str:
    lines = [f"Alias ranges: {_VERDICT_WORDS[f.verdict]}"
             + ("" if f.exact else " (exact=False: extents only)") + "."]
    for v in f.views:
        la = v.layout
        e = la.byte_extent()
        ext = "touches no bytes" if e is None else f"byte extent [{e[0]}, {e[1]})"
        lines.append(f"  {v.name}: storage #{la.storage}, offset {la.offset}, shape {list(la.shape)}, strides "
                     f"{list(la.strides)} (elements of {la.itemsize} B); {v.touched.size} element(s) touched, "
                     f"{ext}; {int(v.shared.sum())} of its {v.shared.size} element(s) share bytes with another view")
    for i, j, rep in f.pairs:
        a, b = f.views[i].name, f.views[j].name
        line = f"  {a} vs {b}: {rep.answer} — {rep.reason}"
        if rep.witness is not None:
            line += f"; e.g. {a}{list(rep.witness[0])} and {b}{list(rep.witness[1])} both read byte {rep.shared_byte}"
        lines.append(line)
    shared = sorted(f.shared)
    if shared:
        item = f.views[0].layout.itemsize
        shown = ", ".join(str(a) for a in shared[:24]) + (" …" if len(shared) > 24 else "")
        lines.append(f"Shared elements (addresses; bytes = address × {item}): {shown}")
        if f.verdict == "may":
            lines.append("The extents overlap, and the elements above really are shared: exact=True says must.")
    elif f.verdict == "may":
        lines.append("The extents overlap but no element is shared: exact=True would say no.")
    return "\n".join(lines)


def describe(*views, names=None, exact: bool = True, grid="auto") -> str:
    """The alias picture's facts in words."""
    return facts_text(alias_facts(*views, names=names, exact=exact, grid=grid))


# ---------------------------------------------------------------------------------------------
# drawing
# ---------------------------------------------------------------------------------------------
def _cell(x: float, y: float, w: float = 1.0, h: float = 0.72):
    return [(x, y - h / 2), (x + w, y - h / 2), (x + w, y + h / 2), (x, y + h / 2)]


def _index_words(view: View) -> dict[int, str]:
    """address -> the view's index of that element (first one, if several)."""
    out = {}
    for idx in np.ndindex(*view.addresses.shape):
        a = int(view.addresses[idx])
        if a not in out:
            out[a] = ",".join(map(str, idx)) if len(idx) != 1 else str(idx[0])
    return out


def _row_label(v: View) -> str:
    la = v.layout
    be = la.byte_extent()
    ext = "touches no bytes" if be is None else f"extent: bytes [{be[0]}, {be[1]})"
    return f"{v.name}\noffset {la.offset}, shape {list(la.shape)}, strides {list(la.strides)}\n{ext}"


def _title(f: AliasFacts) -> str:
    pairs = "  ".join(f"{f.views[i].name} ~ {f.views[j].name}: {rep.answer}" for i, j, rep in f.pairs[:6])
    return pairs


def render(*views, names=None, exact: bool = True, grid="auto", width: float = DEFAULT_WIDTH):
    """The alias picture of ``views`` (see the module docstring): a
    :class:`~microtorch.viz.figure.PanelFigure` with ``.facts`` (:class:`AliasFacts`) and
    ``.description``."""
    f = alias_facts(*views, names=names, exact=exact, grid=grid)
    with rc():
        fig = _draw_grid(f, width) if f.grid else _draw_line(f, width)
    fig.facts = f
    fig.description = facts_text(f)
    return fig


def _verdict_title(fig, f: AliasFacts, h: float) -> None:
    colour = {"must": palette.color(SHARED), "may": palette.color("op"), "no": palette.color("done")}[f.verdict]
    fig.suptitle(f"Alias ranges · {_VERDICT_WORDS[f.verdict]}", fontsize=12, fontweight="bold", y=1 - 0.1 / h,
                 va="top", color=colour)
    reason = f.pairs[0][2].reason if len(f.pairs) == 1 else _title(f)
    if not f.exact:
        truth = f"{len(f.shared)} element(s) really shared" if f.shared else "no element is really shared"
        reason += f" (exact=False; the cells show the truth: {truth})"
    fig.text(0.5, 1 - 0.38 / h, reason, ha="center", va="top", fontsize=9.5, color="#333333")


def _legend(fig, f: AliasFacts):
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=palette.tint(v.colour, 0.55), edgecolor=v.colour, label=f"{v.name} touches")
               for v in f.views]
    handles.append(Patch(facecolor=palette.fill(SHARED), edgecolor=palette.color(SHARED), hatch="////",
                         label="shared by two or more views"))
    handles.append(Patch(facecolor="white", edgecolor="#AAAAAA", label="storage element, untouched"))
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), frameon=False, fontsize=8.5,
               bbox_to_anchor=(0.5, 0.0))


def _draw_line(f: AliasFacts, width: float):
    from matplotlib.collections import PolyCollection

    n = len(f.views)
    size = max(f.storage_size.values())
    row_h, top_h, bottom_h = 0.66, 0.85, 1.2
    fig = new_figure(width, top_h + n * row_h + bottom_h)
    h = fig.get_figheight()
    ax = fig.add_axes((0.33, bottom_h / h, 0.63, 1 - (top_h + bottom_h) / h))
    ax.set_xlim(0, size)
    ax.set_ylim(n - 0.35, -0.65)
    ax.spines[["top", "right", "left"]].set_visible(False)
    cell_pt = ax.get_position().width * width * 72 / max(size, 1)
    shared = sorted(f.shared)
    if shared:  # a band across all rows at each shared element
        ax.add_collection(PolyCollection([[(a, -0.6), (a + 1, -0.6), (a + 1, n - 0.4), (a, n - 0.4)] for a in shared],
                                         facecolors=palette.tint(palette.color(SHARED), 0.88), edgecolors="none",
                                         zorder=0, gid="alias-band"))
    highlighted = []
    for i, v in enumerate(f.views):
        size_i = f.storage_size[v.layout.storage]
        ax.add_collection(PolyCollection([_cell(a, i) for a in range(size_i)], facecolors="white",
                                         edgecolors="#AAAAAA", linewidths=0.5, zorder=1))
        touched = [int(a) for a in v.touched]
        hl = v.highlighted
        ax.add_collection(PolyCollection([_cell(a, i) for a in touched if a not in hl],
                                         facecolors=palette.tint(v.colour, 0.55), edgecolors=v.colour,
                                         linewidths=0.8, zorder=2, gid=f"alias-touched-{i}"))
        cells = [_cell(a, i) for a in sorted(hl)]
        highlighted.append(cells)
        ax.add_collection(PolyCollection(cells, facecolors=palette.fill(SHARED), edgecolors=palette.color(SHARED),
                                         linewidths=1.4, hatch="////", zorder=3, gid=f"alias-shared-{i}"))
        if cell_pt >= 15:
            words = _index_words(v)
            fs = min(8.0, cell_pt / 3.2)
            for a in touched:
                ax.text(a + 0.5, i, words[a], ha="center", va="center", fontsize=fs, zorder=4)
        ext = v.extent
        if ext is not None:  # the extent as a bracket above the row
            lo, hi = ext[0], ext[1] + 1
            y = i - 0.46
            ax.plot([lo, lo, hi, hi], [y + 0.08, y, y, y + 0.08], color="black", linewidth=1.1, zorder=5,
                    solid_joinstyle="miter", clip_on=False)
    ax.set_yticks(range(n), [_row_label(v) for v in f.views], fontsize=8.5)
    ax.tick_params(axis="y", length=0)
    storages = sorted(f.storage_size)
    ax.set_xlabel(f"element address in storage {', '.join(f'#{s}' for s in storages)} "
                  f"(byte offset = address × {f.views[0].layout.itemsize})")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(nbins=12, integer=True))
    _verdict_title(fig, f, h)
    _legend(fig, f)
    fig._alias_highlighted = highlighted
    return fig


def _view_title(v, points: float, fontsize: float = 8.5) -> str:
    """A view's name and layout over its panel: on two lines, or three if two would be wider
    than the panel (``points``) and run into the next panel's title."""
    la = v.layout
    layout = f"offset {la.offset}, shape {list(la.shape)}, strides {list(la.strides)}"
    if max(len(v.name), len(layout)) * fontsize * 0.58 <= points:
        return f"{v.name}\n{layout}"
    return f"{v.name}\noffset {la.offset}, shape {list(la.shape)}\nstrides {list(la.strides)}"


def _draw_grid(f: AliasFacts, width: float):
    from matplotlib.collections import PolyCollection

    rows, cols = f.grid
    n = len(f.views) + 1
    per_row = min(n, 3 if cols > 8 else 4)
    lines = math.ceil(n / per_row)
    cell_in = min(0.32, (width - 0.6) / per_row / (cols + 1))
    panel_pt = 0.94 * width * 72 / (per_row + 0.15 * (per_row - 1))  # one panel's width (wspace 0.15)
    view_titles = [_view_title(v, panel_pt) for v in f.views]
    panel_h = rows * cell_in + 0.75 + 0.16 * max(0, max(t.count("\n") for t in view_titles) - 1)
    top_h, bottom_h = 0.85, 0.75
    fig = new_figure(width, top_h + lines * panel_h + bottom_h)
    h = fig.get_figheight()
    gs = fig.add_gridspec(lines, per_row, left=0.03, right=0.97, top=1 - top_h / h, bottom=bottom_h / h,
                          hspace=0.55, wspace=0.15)
    shared = f.shared
    highlighted = []
    for k in range(lines * per_row):
        ax = fig.add_subplot(gs[k // per_row, k % per_row])
        ax.set_xlim(-0.6, cols + 0.6)
        ax.set_ylim(rows + 0.1, -0.1)
        ax.set_aspect("equal")
        ax.set_axis_off()
        if k >= n:
            continue
        grid_cells = [[(c, r), (c + 1, r), (c + 1, r + 1), (c, r + 1)] for r in range(rows) for c in range(cols)]
        ax.add_collection(PolyCollection(grid_cells, facecolors="white", edgecolors="#AAAAAA", linewidths=0.5))

        def box(a):
            r, c = divmod(a, cols)
            return [(c, r), (c + 1, r), (c + 1, r + 1), (c, r + 1)]
        fs = min(8.0, cell_in * 72 / 3.2)
        if k < len(f.views):
            v = f.views[k]
            hl = v.highlighted
            touched = [int(a) for a in v.touched]
            ax.add_collection(PolyCollection([box(a) for a in touched if a not in hl],
                                             facecolors=palette.tint(v.colour, 0.55), edgecolors=v.colour,
                                             linewidths=0.8, gid=f"alias-touched-{k}"))
            cells = [box(a) for a in sorted(hl)]
            highlighted.append(cells)
            ax.add_collection(PolyCollection(cells, facecolors=palette.fill(SHARED),
                                             edgecolors=palette.color(SHARED), linewidths=1.4, hatch="////",
                                             gid=f"alias-shared-{k}"))
            if cell_in * 72 >= 14:
                words = _index_words(v)
                for a in touched:
                    r, c = divmod(a, cols)
                    ax.text(c + 0.5, r + 0.5, words[a], ha="center", va="center", fontsize=fs)
            ext = v.extent
            if ext is not None:
                for a, mark, dx in ((ext[0], "[", -0.05), (ext[1], "]", 1.05)):
                    r, c = divmod(a, cols)
                    ax.text(c + dx, r + 0.5, mark, ha="center", va="center", fontsize=fs * 1.9,
                            fontweight="bold", color="black")
            ax.set_title(view_titles[k], fontsize=8.5, fontweight="normal", y=1.0, pad=4)
        else:
            ax.add_collection(PolyCollection([box(a) for a in sorted(shared)], facecolors=palette.fill(SHARED),
                                             edgecolors=palette.color(SHARED), linewidths=1.4, hatch="////",
                                             gid="alias-shared-all"))
            ax.set_title(f"shared: {len(shared)} element(s)\n(touched by two or more views)", fontsize=8.5,
                         fontweight="normal", y=1.0, pad=4)
    fig.text(0.5, bottom_h / h - 0.05 / h, f"storage #{f.views[0].layout.storage} drawn as a {rows} × {cols} "
             "matrix (row-major element addresses); numbers: each view's index of the element",
             ha="center", va="top", fontsize=8.5, color="#333333")
    _verdict_title(fig, f, h)
    _legend(fig, f)
    fig._alias_highlighted = highlighted
    return fig
