"""One colour-blind-safe palette for every picture, with named kinds of things.

The colours are Okabe & Ito's eight (*Color Universal Design*, 2008), distinguishable
under the common colour-vision deficiencies. Pictures never rely on colour alone: each
kind also has its own shape or line style (see :data:`KINDS`), and every panel has a
text description.

Panels ask for a kind by name, so the graph, the arena, the refcount and the liveness
pictures agree on what "parameter" or "done" looks like::

    from microtorch.viz import palette
    palette.color("parameter")   # '#0072B2'  strong colour: borders, lines, bars
    palette.fill("parameter")    # '#BFDCEC'  light tint: node fills, backgrounds
    palette.KINDS["parameter"].meaning

``fill`` tints are mixed with white so black text on them stays readable.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Okabe–Ito colours by name.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "grey": "#999999",
}


def tint(hex_color: str, amount: float = 0.75) -> str:
    """``hex_color`` mixed with ``amount`` white (0 → the colour, 1 → white)."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    mix = [round(c + (255 - c) * amount) for c in (r, g, b)]
    return "#" + "".join(f"{c:02X}" for c in mix)


@dataclass(frozen=True)
class Kind:
    """How one kind of thing is drawn: a strong colour, a light fill, and what it means."""

    color: str
    fill: str
    meaning: str


def _kind(colour_name: str, meaning: str, amount: float = 0.75) -> Kind:
    colour = OKABE_ITO[colour_name]
    return Kind(colour, tint(colour, amount), meaning)


#: The named kinds every picture uses.
KINDS: dict[str, Kind] = {
    "parameter": _kind("blue", "a leaf tensor that requires grad (a parameter or an input you "
                               "differentiate with respect to); its .grad gets filled by backward"),
    "constant": _kind("grey", "a tensor that does not require grad: no gradient flows into it", 0.8),
    "op": _kind("orange", "an op recorded in the graph (a node: its backward runs during .backward())"),
    "output": _kind("reddish_purple", "a result no later op consumed (e.g. the loss)"),
    "ready": _kind("vermillion", "a node whose pending count reached 0: it runs next"),
    "done": _kind("bluish_green", "a node whose backward already ran"),
    "grad": _kind("yellow", "a gradient accumulated into a leaf's .grad", 0.55),
    "current": Kind(OKABE_ITO["black"], "#FFFFFF", "what the current step did"),
    "freed": _kind("grey", "memory given back / saved tensors released", 0.9),
    "highlight": _kind("sky_blue", "something the current step points at"),
}
KINDS["leaf"] = KINDS["parameter"]  # alias: "leaf" reads better in some panels

#: A qualitative cycle for series with no kind (e.g. several storages in one chart).
CYCLE = [OKABE_ITO[n] for n in ("blue", "orange", "bluish_green", "vermillion",
                                 "reddish_purple", "sky_blue", "yellow", "black")]


def color(kind: str) -> str:
    """The strong colour of ``kind`` (borders, lines, bars)."""
    return _get(kind).color


def fill(kind: str) -> str:
    """The light tint of ``kind`` (fills behind black text)."""
    return _get(kind).fill


def _get(kind: str) -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise KeyError(f"unknown palette kind {kind!r}; known kinds: {', '.join(KINDS)}") from None
