"""Pictures of sparse tensors and sparse gradients (pure functions of their data).

* :func:`render_layout` (``describe_layout``) — one 2-d sparse matrix three ways: the dense
  matrix with its stored elements marked (a position stored more than once is labelled
  ``×k``: an uncoalesced tensor), its COO arrays as stored (row, col, value per element),
  and its CSR arrays (``crow_indices`` above ``col_indices``/``values``; under those, one
  bracket per row spans ``crow[i] : crow[i + 1]`` — the elements of row i).
* :func:`render_rows` (``describe_rows``) — from a :func:`microtorch.sparse.record` log: the
  rows each sparse gradient touched, one column of marks per backward call.
* :func:`render_density` (``describe_density``) — from the same log: the accumulated
  gradient's density (fraction of rows it touches) over the backward calls, the
  densification threshold as a dashed line, and what each accumulation did (new, merge,
  coalesce, densify) as the marker.

Each ``render_*`` returns a :class:`~microtorch.viz.figure.PanelFigure` whose ``facts`` are
the plain numbers drawn (what tests assert on) and whose ``description`` says them in words.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import palette
from .figure import DEFAULT_WIDTH, new_figure, rc

STORED, EMPTY = "parameter", "free"  # palette kinds: a stored element, an empty position
ACTION_MARKERS = {"new": "o", "merge": "^", "coalesce": "s", "densify": "X", "into dense": "D"}


# ---------------------------------------------------------------------------------------------
# layout: dense | COO | CSR
# ---------------------------------------------------------------------------------------------
@dataclass
class LayoutFacts:
    """A 2-d sparse matrix as the layout picture sees it (numpy arrays, no microtorch objects)."""
    shape: tuple[int, int]
    dense: np.ndarray  # the matrix's values
    counts: np.ndarray  # how many stored elements sit at each position (0: none)
    coo_rows: np.ndarray  # as stored (any order, duplicates kept)
    coo_cols: np.ndarray
    coo_values: np.ndarray
    coalesced: bool
    crow: np.ndarray  # CSR of the coalesced matrix
    csr_cols: np.ndarray
    csr_values: np.ndarray

    @property
    def row_spans(self) -> list[tuple[int, int, int]]:
        """(row, first element, one past the last) of every non-empty row in the CSR arrays."""
        return [(i, int(a), int(b)) for i, (a, b) in enumerate(zip(self.crow[:-1], self.crow[1:])) if b > a]


def layout_facts(s) -> LayoutFacts:
    """The arrays of a 2-d COO or CSR tensor (no dense dims) that :func:`render_layout` draws."""
    if getattr(s, "layout", None) not in ("sparse_coo", "sparse_csr") or s.ndim != 2:
        raise TypeError("layout pictures take a 2-d sparse tensor (COO without dense dims, or CSR); "
                        f"got {type(s).__name__} of size {getattr(s, 'shape', '?')}")
    coo = s.to_sparse() if s.layout == "sparse_csr" else s
    if coo.sparse_dim() != 2:
        raise TypeError("layout pictures take a 2-d sparse matrix without dense dims "
                        "(for an embedding gradient, use render_rows)")
    rows, cols = (np.array(a) for a in coo._indices()._data)
    values = np.array(coo._values().detach()._data, dtype=float)
    counts = np.zeros(s.shape, int)
    np.add.at(counts, (rows, cols), 1)
    dense = np.zeros(s.shape)
    np.add.at(dense, (rows, cols), values)
    csr = s if s.layout == "sparse_csr" else s.to_sparse_csr()
    return LayoutFacts(tuple(s.shape), dense, counts, rows, cols, values, coo.is_coalesced(),
                       np.array(csr.crow_indices()._data), np.array(csr.col_indices()._data),
                       np.array(csr.values().detach()._data, dtype=float))


def describe_layout(s) -> str:
    return _layout_text(layout_facts(s))


def _layout_text(f: LayoutFacts) -> str:
    m, n = f.shape
    nnz = len(f.coo_rows)
    dup = int((f.counts > 1).sum())
    lines = [f"A {m}×{n} sparse matrix with {nnz} stored element(s) at {int((f.counts > 0).sum())} "
             f"position(s) ({'coalesced' if f.coalesced else 'uncoalesced'}"
             + (f"; {dup} position(s) stored more than once, holding the sum" if dup else "") + ").",
             "COO as stored: " + ", ".join(f"({r}, {c}) = {v:g}" for r, c, v in
                                            zip(f.coo_rows[:12], f.coo_cols[:12], f.coo_values[:12]))
             + (" …" if nnz > 12 else "") + ".",
             f"CSR: crow_indices = {f.crow.tolist()}, col_indices = {f.csr_cols.tolist()}; "
             + "; ".join(f"row {i} holds elements {a}..{b - 1}" for i, a, b in f.row_spans[:8])
             + (" …" if len(f.row_spans) > 8 else "") + "."]
    return "\n".join(lines)


def render_layout(s, width: float = DEFAULT_WIDTH):
    """The layout picture of a 2-d sparse matrix (see the module docstring)."""
    f = layout_facts(s)
    with rc():
        fig = _draw_layout(f, width)
    fig.facts = f
    fig.description = _layout_text(f)
    return fig


def _boxes(ax, y, items, colour, label, fontsize=8):
    from matplotlib.patches import Rectangle

    for k, text in enumerate(items):
        ax.add_patch(Rectangle((k, y - 0.4), 1, 0.8, facecolor=palette.fill(colour), edgecolor=palette.color(colour),
                               linewidth=0.8))
        ax.text(k + 0.5, y, text, ha="center", va="center", fontsize=fontsize)
    ax.text(-0.3, y, label, ha="right", va="center", fontsize=8.5)


def _draw_layout(f: LayoutFacts, width: float):
    from matplotlib.patches import Rectangle

    m, n = f.shape
    nnz, ncsr = len(f.coo_rows), len(f.csr_cols)
    cells = max(nnz, ncsr, m + 1, 1)
    fig = new_figure(width, max(3.8, 0.4 * m + 2.0))
    gs = fig.add_gridspec(2, 2, width_ratios=[max(n, 2), max(cells + 2, 6) * 0.8], height_ratios=[1, 1.25],
                          left=0.05, right=0.98, top=0.84, bottom=0.14, wspace=0.12, hspace=0.45)
    ax = fig.add_subplot(gs[:, 0])
    for i in range(m):
        for j in range(n):
            c = int(f.counts[i, j])
            kind = STORED if c else EMPTY
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=palette.fill(kind) if c else "white",
                                   edgecolor=palette.color(kind) if c else "#BBBBBB", linewidth=1.2 if c else 0.5,
                                   hatch="////" if c > 1 else ""))
            if c:
                ax.text(j + 0.5, i + 0.5, f"{f.dense[i, j]:.3g}" + (f"\n×{c}" if c > 1 else ""),
                        ha="center", va="center", fontsize=7.5)
    ax.set_xlim(0, n)
    ax.set_ylim(m, 0)
    ax.set_aspect("equal")
    ax.set_xticks(np.arange(n) + 0.5, range(n), fontsize=7.5)
    ax.set_yticks(np.arange(m) + 0.5, range(m), fontsize=7.5)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.set_title(f"dense {m}×{n}", fontsize=10)
    ax.tick_params(length=0)

    coo = fig.add_subplot(gs[0, 1])
    _boxes(coo, 0, [str(r) for r in f.coo_rows], STORED, "row")
    _boxes(coo, 1, [str(c) for c in f.coo_cols], STORED, "col")
    _boxes(coo, 2, [f"{v:.3g}" for v in f.coo_values], "grad", "value", 7)
    coo.set_xlim(-2.2, cells)
    coo.set_ylim(2.7, -0.7)
    coo.axis("off")
    coo.set_title(f"COO as stored ({nnz} elements, {'coalesced' if f.coalesced else 'uncoalesced'})",
                  fontsize=10, loc="left")

    csr = fig.add_subplot(gs[1, 1])
    _boxes(csr, 0, [str(p) for p in f.crow], "op", "crow")
    _boxes(csr, 1.3, [str(c) for c in f.csr_cols], STORED, "col")
    _boxes(csr, 2.3, [f"{v:.3g}" for v in f.csr_values], "grad", "value", 7)
    for i, a, b in f.row_spans:  # row i = elements crow[i] .. crow[i+1]: a bracket under them
        y = 2.85
        csr.plot([a + 0.06, a + 0.06, b - 0.06, b - 0.06], [y - 0.1, y, y, y - 0.1], color="black", linewidth=1.0,
                 gid=f"row-bracket-{i}")
        csr.text((a + b) / 2, y + 0.12, f"row {i}", ha="center", va="top", fontsize=7.5)
    csr.set_xlim(-2.2, cells)
    csr.set_ylim(3.5, -0.7)
    csr.axis("off")
    csr.set_title(f"CSR ({m + 1} row pointers): row i = crow[i] .. crow[i+1]−1", fontsize=10, loc="left")
    fig.suptitle("A sparse matrix: dense, COO and CSR", fontsize=12, fontweight="bold")
    return fig


# ---------------------------------------------------------------------------------------------
# sparse gradients over steps (from a mt.sparse.record() log)
# ---------------------------------------------------------------------------------------------
@dataclass
class GradientSteps:
    """Per backward call of one parameter: rows its gradient touched, and what accumulating did."""
    param: str
    num_rows: int
    rows: list[list[int]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    density: list[float] = field(default_factory=list)
    sparse_bytes: list[int | None] = field(default_factory=list)
    dense_bytes: int = 0
    threshold: float | None = None


def gradient_steps(log, param: str | None = None) -> GradientSteps:
    """The entries of a :func:`microtorch.sparse.record` log (or its ``entries`` list) for
    one parameter (default: the first one logged)."""
    entries = list(getattr(log, "entries", log))
    if not entries:
        raise ValueError("the log is empty: record with `with mt.sparse.record() as log:` around "
                         "backward calls of a model with sparse gradients")
    param = param if param is not None else entries[0]["param"]
    mine = [e for e in entries if e["param"] == param]
    if not mine:
        raise ValueError(f"no entries for parameter {param!r}; logged: {sorted({e['param'] for e in entries})}")
    out = GradientSteps(param, mine[0]["num_rows"], dense_bytes=mine[0]["dense_bytes"],
                        threshold=mine[-1]["threshold"])
    for e in mine:
        out.rows.append(list(e["rows"]))
        out.actions.append(e["action"])
        out.density.append(float(e["density"]))
        out.sparse_bytes.append(e["sparse_bytes"])
    return out


def describe_rows(log, param: str | None = None) -> str:
    return _rows_text(gradient_steps(log, param))


def _rows_text(f: GradientSteps) -> str:
    per = ", ".join(f"{len(r)}" for r in f.rows[:20]) + (" …" if len(f.rows) > 20 else "")
    seen = len({r for rows in f.rows for r in rows})
    return (f"{len(f.rows)} backward call(s) gave {f.param} a sparse gradient; rows touched per call: {per} "
            f"(of {f.num_rows:,}). Over all calls {seen:,} distinct row(s) were touched "
            f"({seen / f.num_rows:.1%}); every other row's gradient is zero and is never stored.")


def render_rows(log, param: str | None = None, width: float = DEFAULT_WIDTH):
    """Which rows each sparse gradient touched, one column per backward call."""
    f = gradient_steps(log, param)
    with rc():
        fig = new_figure(width, 3.6)
        ax = fig.add_axes((0.1, 0.16, 0.86, 0.68))
        xs = [k for k, rows in enumerate(f.rows) for _ in rows]
        ys = [r for rows in f.rows for r in rows]
        ax.scatter(xs, ys, s=9, marker="s", color=palette.color(STORED), linewidths=0, gid="rows-touched")
        ax.set_xlim(-0.6, max(len(f.rows) - 0.4, 0.6))
        ax.set_ylim(f.num_rows, -0.5)
        ax.set_xlabel("backward call")
        ax.set_ylabel("row of the table (id)")
        ax.set_title(f"Rows the gradient of {f.param} touches (of {f.num_rows:,}), per backward call",
                     fontsize=10.5)
        ax.spines[["top", "right"]].set_visible(False)
    fig.facts = f
    fig.description = _rows_text(f)
    return fig


def describe_density(log, param: str | None = None) -> str:
    return _density_text(gradient_steps(log, param))


def _density_text(f: GradientSteps) -> str:
    steps = "; ".join(f"call {k}: {a}, density {d:.1%}" for k, (a, d) in enumerate(zip(f.actions, f.density)))
    th = "no threshold (densifying off)" if f.threshold is None else f"threshold {f.threshold:.0%}"
    dens = [k for k, a in enumerate(f.actions) if a == "densify"]
    tail = (f" The gradient became dense at call {dens[0]}." if dens else " It stayed sparse.")
    return f"Accumulated gradient of {f.param} ({th}): {steps}.{tail}"


def render_density(log, param: str | None = None, width: float = DEFAULT_WIDTH):
    """The accumulated gradient's density over backward calls, with the densification threshold."""
    f = gradient_steps(log, param)
    with rc():
        fig = new_figure(width, 3.6)
        ax = fig.add_axes((0.1, 0.16, 0.62, 0.68))
        x = np.arange(len(f.density))
        ax.plot(x, f.density, color=palette.color(STORED), linewidth=1.4, zorder=2, gid="density")
        for action, marker in ACTION_MARKERS.items():
            ks = [k for k, a in enumerate(f.actions) if a == action]
            if ks:
                kind = "ready" if action == "densify" else STORED
                ax.scatter(ks, [f.density[k] for k in ks], marker=marker, s=46, zorder=3, label=action,
                           color=palette.color(kind), edgecolors="black", linewidths=0.5)
        if f.threshold is not None:
            ax.axhline(f.threshold, color=palette.color("ready"), linestyle="--", linewidth=1.2,
                       label=f"threshold {f.threshold:.0%}", gid="threshold")
        top = max([*f.density, f.threshold or 0, 0.05]) * 1.15
        ax.set_ylim(0, min(1.05, top))
        ax.set_xlim(-0.5, max(len(x) - 0.5, 0.5))
        ax.set_xlabel("backward call")
        ax.set_ylabel("fraction of rows touched")
        ax.set_title(f"Density of the accumulated gradient of {f.param}", fontsize=10.5)
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=8.5,
                  title="accumulation", title_fontsize=8.5)
    fig.facts = f
    fig.description = _density_text(f)
    return fig
