"""One colour-blind-safe palette for every picture, with named kinds of things.

The colours are Okabe & Ito's eight (*Color Universal Design*, 2008), distinguishable
under the common colour-vision deficiencies. Pictures never rely on colour alone: each
kind also has its own shape or line style (see :data:`KINDS`), and every panel has a
text description.

Panels ask for a kind by name, so the graph, the arena, the pool, the refcount and the
liveness pictures agree on what "parameter" or "gradient" looks like::

    from microtorch.viz import palette
    palette.color("parameter")   # '#0072B2'  strong colour: borders, lines, bars
    palette.fill("parameter")    # '#BFDCEC'  light tint: node fills, backgrounds
    palette.KINDS["parameter"].meaning

``fill`` tints are mixed with white so black text on them stays readable. Memory kinds
(what a block of bytes holds, :data:`MEMORY_KINDS`) also carry a matplotlib ``hatch``, so
the memory pictures tell kinds apart without colour too; :func:`memory_kind` says which
kind a storage is from its allocation tag and the tensors seen viewing it.
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
    """How one kind of thing is drawn: a strong colour, a light fill, what it means, and a
    hatch pattern (matplotlib's: ``"//"``, ``".."``, ``"xx"``; ``""`` for none)."""

    color: str
    fill: str
    meaning: str
    hatch: str = ""
    label: str = ""  # the words in a legend (defaults to the kind's name)


def _kind(colour_name: str, meaning: str, amount: float = 0.75, hatch: str = "", label: str = "") -> Kind:
    colour = OKABE_ITO[colour_name]
    return Kind(colour, tint(colour, amount), meaning, hatch, label)


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

# what a block of bytes holds (the arena, pool, refcount and liveness pictures)
KINDS.update({
    "activation": _kind("orange", "an op's result (forward activations and backward temporaries)",
                        0.6, label="activation"),
    "gradient": _kind("yellow", "a gradient buffer: a leaf's .grad (or the flat gradient buffer)",
                      0.45, hatch="\\\\", label="gradient"),
    "data": Kind(OKABE_ITO["grey"], tint(OKABE_ITO["grey"], 0.6),
                 "a tensor you made that needs no grad (inputs, targets, optimizer state)",
                 "||", "data (no grad)"),
    "node record": _kind("reddish_purple", "a graph node's 64-byte record in the node arena", 0.55,
                         label="node record"),
    "padding": Kind("#666666", "#FFFFFF", "bytes lost to alignment (arena) or to rounding a "
                    "request up to its size class (pool)", "xxxx", "padding / rounding"),
    "dead": Kind("#999999", "#E6E6E6", "freed, but an arena reuses bytes only after a reset "
                 "(freed blocks, chunk tails skipped)", "////", "freed (until reset)"),
    "free": Kind("#999999", "#FFFFFF", "bytes not handed out: room for the next allocation", "",
                 "free"),
    "in use": _kind("bluish_green", "pool blocks handed out and not yet freed", 0.55, label="in use"),
    "held": _kind("vermillion", "freed pool blocks held back until a later epoch (deferred release)",
                  0.6, hatch="--", label="held back"),
    "unknown": Kind("#555555", "#CCCCCC", "bytes whose owner the trace did not see (made before "
                    "recording started)", "", "unknown"),
})
KINDS["parameter"] = Kind(KINDS["parameter"].color, KINDS["parameter"].fill,
                          KINDS["parameter"].meaning, "", "parameter")

#: The kinds of bytes, in legend order.
MEMORY_KINDS = ("parameter", "activation", "gradient", "data", "node record", "padding", "dead",
                "free")

#: A qualitative cycle for series with no kind (e.g. several storages in one chart).
CYCLE = [OKABE_ITO[n] for n in ("blue", "orange", "bluish_green", "vermillion",
                                 "reddish_purple", "sky_blue", "yellow", "black")]


def color(kind: str) -> str:
    """The strong colour of ``kind`` (borders, lines, bars)."""
    return _get(kind).color


def fill(kind: str) -> str:
    """The light tint of ``kind`` (fills behind black text)."""
    return _get(kind).fill


def ink(kind: str) -> str:
    """A colour for ``kind`` that reads as a thin line or small text on white: the strong
    colour, darkened when it is light (Okabe–Ito yellow is hard to see as a line)."""
    c = _get(kind).color
    r, g, b = (int(c[i:i + 2], 16) for i in (1, 3, 5))
    if 0.2126 * r + 0.7152 * g + 0.0722 * b > 180:  # light: mix with black
        r, g, b = (round(v * 0.62) for v in (r, g, b))
        return f"#{r:02X}{g:02X}{b:02X}"
    return c


def hatch(kind: str) -> str:
    """The hatch pattern of ``kind`` (``""`` for none)."""
    return _get(kind).hatch


def label(kind: str) -> str:
    """The legend words for ``kind``."""
    return _get(kind).label or kind


def memory_kind(tag: str | None, requires_grad_leaf: bool = False) -> str:
    """The kind of a storage's bytes: from its allocation ``tag`` (``"activation"``,
    ``"gradient"``, ``"tensor"``) and whether a leaf tensor that requires grad views it
    (a ``"tensor"`` that does is a parameter; one that does not is data)."""
    if tag == "activation":
        return "activation"
    if tag == "gradient":
        return "gradient"
    if tag == "tensor":
        return "parameter" if requires_grad_leaf else "data"
    return "unknown"


def _get(kind: str) -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise KeyError(f"unknown palette kind {kind!r}; known kinds: {', '.join(KINDS)}") from None
