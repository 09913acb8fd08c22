"""The shipped Census names and the next-character windows built from them."""
import hashlib
from importlib import resources

import numpy as np
import pytest

import microtorch as mt


def test_names_file_content_is_pinned():
    raw = resources.files("microtorch.data").joinpath("names.txt").read_bytes()
    lines = [l for l in raw.decode().splitlines() if not l.startswith("#")]
    assert len(lines) == 5494
    assert lines[0] == "mary F 2.629 1" and lines[4275] == "james M 3.318 1"
    assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == _DIGEST


_DIGEST = "f1e2f7b60678c3d05efcf6fc49f7e9aa36d35939d4887faa5ec59ceac16b7702"  # sha256 of the 5,494 data lines, computed once when the file was made


def test_load_names_lists_and_filters():
    names = mt.data.load_names()
    assert len(names) == 5163 and len(set(names)) == 5163
    assert names[:3] == ["mary", "patricia", "linda"]
    assert len(mt.data.load_names("female")) == 4275 and len(mt.data.load_names("male")) == 1219
    assert len(mt.data.load_names(unique=False)) == 5494
    assert all(n.isalpha() and n.islower() for n in names)
    with pytest.raises(ValueError, match="sex must be"):
        mt.data.load_names("other")


def test_char_windows_are_makemore_examples():
    x, y, vocab = mt.data.char_windows(["emma", "ab"], block_size=3)
    assert vocab == [".", "a", "b", "e", "m"]
    decode = lambda row: "".join(vocab[i] for i in row)
    assert [decode(r) for r in x.tolist()] == ["...", "..e", ".em", "emm", "mma", "...", "..a", ".ab"]
    assert "".join(vocab[i] for i in y.tolist()) == "emma.ab."
    assert x.dtype == mt.int64 and x.shape == (8, 3) and y.shape == (8,)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        mt.data.char_windows(["zed"], 2, vocab)
    with pytest.raises(ValueError, match="block_size must be at least 1"):
        mt.data.char_windows(["a"], 0)
    with pytest.raises(ValueError, match="marks a word's start and end"):
        mt.data.char_windows(["a.b"])
