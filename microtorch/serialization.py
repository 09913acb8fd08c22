"""``mt.save`` / ``mt.load``: state dicts as ``.npz`` files — arrays only, never pickles.

A state dict is a flat mapping ``{name: tensor}`` (``model.state_dict()``). ``mt.save``
writes one ``.npy`` entry per name into a zip (numpy's ``.npz`` format, readable with
plain ``np.load``); ``mt.load`` reads it back with pickles off, so loading a file can never
run code — unlike ``torch.load`` of a pickle. The order of the keys and every dtype are kept.

``mt.load`` reads the zip entry by entry and checks each one before it reads the data: a
file that is not an ``.npz`` (empty, a single ``.npy``, a pickle, a damaged or truncated
zip) raises :class:`LoadError` saying what the file is and what was expected; an entry
holding Python objects or a dtype microtorch does not support raises ``TypeError``. Both
name the file (and the entry).
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

from . import dtypes
from .tensor import Tensor

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip with entries / an empty zip
_NPY_MAGIC = b"\x93NUMPY"
_EXPECTED = "mt.load reads .npz state dicts written by mt.save (or np.savez)"
# what zipfile and numpy's .npy reader raise on damaged bytes (encrypted flag, odd compression...)
_DAMAGED = (zipfile.BadZipFile, ValueError, EOFError, OSError, RuntimeError, NotImplementedError)


class LoadError(RuntimeError):
    """A file given to :func:`load` is not a readable ``.npz`` state dict."""


def save(obj, f) -> None:
    """Write ``obj`` (a mapping ``{str: Tensor | ndarray | number}``) to ``f`` (a path or a
    binary file) in ``.npz`` format. The file is written at exactly ``f`` (no suffix added)."""
    if not hasattr(obj, "items"):
        raise TypeError(f"mt.save expects a state dict ({{name: tensor}}, e.g. model.state_dict()), "
                        f"got {type(obj).__name__}; microtorch saves arrays only, not pickled objects")
    arrays = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"mt.save: keys must be strings, got {key!r}")
        if isinstance(value, Tensor):
            value = value.detach()._data
        elif not isinstance(value, (np.ndarray, int, float, bool, np.number)):
            raise TypeError(f"mt.save: the value of {key!r} is a {type(value).__name__}; only tensors, "
                            "numpy arrays and numbers can be saved (no pickles)")
        arrays[key] = np.asarray(value)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def load(f, mmap: bool | str = False) -> dict[str, Tensor]:
    """Read a file written by :func:`save` into ``{name: tensor}`` (same order, same dtypes).

    ``f`` is a path or a binary file open for reading. Raises :class:`LoadError` when the
    file is not an ``.npz`` archive of arrays, ``TypeError`` when an entry's dtype is not one
    microtorch supports (object arrays included: they would need unpickling).

    ``mmap=True`` maps the file instead of reading it: the tensors' storages are the file's
    pages (zero-copy, read from disk on first touch), read-only; ``mmap="c"`` copy-on-write
    (writes stay private to this process). See :mod:`microtorch.memory.mapped`."""
    if mmap:
        from .memory.mapped import MODES, load_mapped

        if mmap not in MODES:
            raise ValueError(f"mt.load: mmap must be False, True (read-only) or 'c' (copy-on-write), "
                             f"got {mmap!r}")
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb") as fh:
                _archive(fh, os.fspath(f)).close()  # the same checks of the file, before mapping it
        return load_mapped(f, MODES[mmap], check_dtype=_check_dtype)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, os.fspath(f))
    return _load(f, getattr(f, "name", None) or repr(f))


def _load(fh, where: str) -> dict[str, Tensor]:
    with _archive(fh, where) as archive:
        return {name[:-4]: _entry(archive, name, where) for name in archive.namelist()}


def _archive(fh, where: str) -> zipfile.ZipFile:
    """The file as a zip of ``.npy`` entries, or a :class:`LoadError` saying what it is instead."""
    head = fh.read(6)
    fh.seek(-len(head), os.SEEK_CUR)
    if not head:
        raise LoadError(f"mt.load: {where!r} is empty (0 bytes); {_EXPECTED}")
    if head.startswith(_NPY_MAGIC):
        raise LoadError(f"mt.load: {where!r} is a single .npy array, not a state dict; {_EXPECTED}. "
                        "Read it with np.load and wrap it yourself: {'name': mt.tensor(np.load(path))}")
    if not head.startswith(_ZIP_MAGIC):
        kind = "a Python pickle (torch.save's legacy format?)" if head[:1] == b"\x80" else "not a zip archive"
        raise LoadError(f"mt.load: {where!r} is {kind} (it starts with {head!r}); {_EXPECTED}; "
                        "microtorch never unpickles files")
    try:
        archive = zipfile.ZipFile(fh)
    except _DAMAGED as e:
        raise LoadError(f"mt.load: {where!r} starts like a zip (.npz) archive but is truncated or "
                        f"damaged ({e}); save it again with mt.save") from None
    foreign = [n for n in archive.namelist() if not n.endswith(".npy")]
    if foreign:
        archive.close()
        raise LoadError(f"mt.load: {where!r} is a zip archive but not an .npz of arrays (entries "
                        f"{foreign[:3]} are not .npy; a torch.save file?); {_EXPECTED}")
    return archive


def _entry(archive: zipfile.ZipFile, name: str, where: str) -> Tensor:
    """One ``.npy`` entry as a tensor: the header is checked before any data is read."""
    from .creation import tensor

    key = name[:-4]
    try:
        with archive.open(name) as fh:
            version = np.lib.format.read_magic(fh)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, _, dtype = read_header(fh)
            header_size = fh.tell()
        if dtype.hasobject:
            raise TypeError(f"mt.load: entry {key!r} of {where!r} holds Python objects (numpy dtype "
                            f"{dtype}), which could only be read by unpickling; microtorch loads "
                            "numeric arrays only")
        _check_dtype(dtype, key, where)
        if header_size + int(np.prod(shape, dtype=object)) * dtype.itemsize > archive.getinfo(name).file_size:
            raise ValueError(f"its header announces shape {shape}, more bytes than the entry holds")
        with archive.open(name) as fh:
            array = np.lib.format.read_array(fh, allow_pickle=False)
    except _DAMAGED as e:
        raise LoadError(f"mt.load: entry {key!r} of {where!r} is damaged or truncated ({e}); "
                        "save the file again with mt.save") from None
    return tensor(array)


def _check_dtype(dtype: np.dtype, key: str, where: str) -> None:
    """Refuse a dtype microtorch does not support, naming the file and the entry."""
    try:
        dtypes.of_array(dtype)  # the one check mt.tensor makes (narrow ints widen, as there)
    except TypeError as e:
        raise TypeError(f"mt.load: entry {key!r} of {where!r}: {e}") from None
