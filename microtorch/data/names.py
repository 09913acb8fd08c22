"""First names (US Census 1990, public domain) and next-character windows for a language model.

:func:`load_names` reads ``names.txt``, shipped with microtorch (see ``microtorch/data/README.md``):
the 1990 US Census first names, 4,275 female and 1,219 male (5,494 rows; 5,163 distinct names),
lower-case a–z, with each name's share of the population in percent.

:func:`char_windows` turns words into a makemore-style data set: each word is padded with
``block_size`` start marks and one end mark (``"."``, index 0), and every position gives one
example — the ``block_size`` characters before it (as indices) and the character at it::

    emma → ... → e,  ..e → m,  .em → m,  emm → a,  mma → .
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..creation import tensor

END = "."


def load_names(sex: str = "all", unique: bool = True) -> list[str]:
    """The Census first names, most common first: ``sex`` ``"all"``, ``"female"`` or ``"male"``;
    ``unique`` drops the second appearance of a name that is on both lists."""
    if sex not in ("all", "female", "male"):
        raise ValueError(f"load_names: sex must be 'all', 'female' or 'male', got {sex!r}")
    from importlib import resources

    rows = []
    for line in resources.files(__package__).joinpath("names.txt").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, s, percent, rank = line.split()
        if sex == "all" or s == sex[0].upper():
            rows.append((name, s, float(percent), int(rank)))
    names = [r[0] for r in rows]
    if unique:
        names = list(dict.fromkeys(names))
    return names


def vocabulary(words: list[str]) -> list[str]:
    """The characters of ``words``, sorted, after the end mark ``"."`` (index 0)."""
    chars = sorted(set("".join(words)))
    if END in chars:
        raise ValueError(f"the words contain {END!r}, which marks a word's start and end")
    return [END] + chars


def char_windows(words: list[str], block_size: int = 3, vocab: list[str] | None = None):
    """``(X, Y, vocab)``: X int64 (N, block_size) the characters before each position, Y int64 (N,)
    the character at it, over every position of every word plus its end mark."""
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    vocab = vocab or vocabulary(words)
    index = {c: i for i, c in enumerate(vocab)}
    xs, ys = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + END:
            if ch not in index:
                raise ValueError(f"character {ch!r} of {w!r} is not in the vocabulary")
            xs.append(context)
            ys.append(index[ch])
            context = context[1:] + [index[ch]]
    return (tensor(np.array(xs, np.int64), dtype=dtypes.int64), tensor(np.array(ys, np.int64), dtype=dtypes.int64),
            vocab)
