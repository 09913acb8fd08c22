"""Mapped files: storages whose bytes are a file's pages, mapped into memory (zero-copy).

``mt.load(path, mmap=True)`` does not read the file: it maps it (``mmap``) and gives back
tensors whose storages *are* regions of the mapping. The kernel reads a page from disk the
first time it is touched (a *page fault*; *major* if the page had to come from disk, *minor*
if it was already in the page cache), and every later pass reads memory. Nothing is copied:
a batch sliced from such a tensor is a view of the file's pages, and so are the model's
first reads of it (see ``mt.memory.alias`` and ``np.shares_memory`` in notebook 12).

A :class:`MappedFile` is the "allocator" of those storages: each tensor of the file is one
:class:`~microtorch.memory.block.Block` over its byte range, refcounted like any storage.
When the last of them is released the file drops its reference to the mapping, and the
operating system unmaps it once no numpy view of it is left either.

Modes (numpy's ``np.memmap`` modes):

* ``"r"`` (``mmap=True``) — read-only. Writing into such a tensor raises a clear error: the
  pages are the file's, and shared with every process mapping it.
* ``"c"`` — copy-on-write: writes go to private copies of the touched pages; the file and
  other processes never see them (PyTorch's ``torch.load(mmap=True)`` maps privately too).

There is no write-through mode: an ``.npz`` is a zip whose members carry a CRC-32 of their
bytes, so writing into the mapping would leave a file that ``np.load`` refuses.
"""
from __future__ import annotations

import ctypes
import mmap as _mmap
import os
import resource
import struct
import zipfile

import numpy as np

from .. import recording as _trace
from .block import AllocatorError, Block

MODES = {True: "r", "r": "r", "c": "c"}


class MappedFile:
    """One file mapped into memory, handing out blocks over its byte ranges."""

    resets_under_users = False

    def __init__(self, path: str | os.PathLike, mode: str = "r"):
        if mode not in ("r", "c"):
            raise ValueError(f"mmap mode must be 'r' (read-only) or 'c' (copy-on-write), got {mode!r}")
        self.path, self.mode = os.fspath(path), mode
        self.name = f"mmap {os.path.basename(self.path)}"
        self.mapping = np.memmap(self.path, dtype=np.uint8, mode=mode)
        self.live: dict[int, Block] = {}
        self.unmapped = False

    def block(self, offset: int, nbytes: int, tag: str = "tensor") -> Block:
        """A block over bytes [offset, offset + nbytes) of the file."""
        if self.mapping is None:
            raise AllocatorError(f"{self.name}: the mapping was released when its last tensor went")
        if offset < 0 or offset + nbytes > self.mapping.size:
            raise ValueError(f"{self.name}: bytes [{offset}, {offset + nbytes}) lie outside the "
                             f"file ({self.mapping.size} bytes)")
        block = Block(self, 0, offset, nbytes, nbytes, 0, tag, self.mapping[offset: offset + nbytes])
        self.live[block.id] = block
        return block

    def free(self, block: Block) -> None:
        if block.owner is not self or not block.live:
            raise AllocatorError(f"{self.name}: {block!r} is not a live block of this mapping")
        block.live = False
        block.memory = None
        del self.live[block.id]
        if not self.live:  # the last tensor of the file is gone: let the mapping go
            self.mapping = None
            self.unmapped = True

    def check(self, block: Block) -> None:
        if not block.live:
            raise AllocatorError(f"use after release: {block!r} of {self.name}")

    def stats(self) -> dict:
        return {"name": self.name, "path": self.path, "mode": self.mode, "live_blocks": len(self.live),
                "requested": sum(b.nbytes for b in self.live.values()),
                "file_bytes": 0 if self.mapping is None else int(self.mapping.size)}

    def resident(self) -> np.ndarray:
        """Which pages of the file are in memory right now (``mincore``), one bool per page."""
        if self.mapping is None:
            raise AllocatorError(f"{self.name}: the mapping was released when its last tensor went")
        return resident_pages(self.mapping)

    def record_pages(self, label: str = "") -> None:
        """Put the file's resident pages in the trace (an ``mmap_pages`` event): the picture
        of the mapping (``mt.viz.mapped``) draws one row per such snapshot."""
        if _trace.active is not None:
            r = self.resident()
            change = np.flatnonzero(np.diff(r.astype(np.int8))) + 1  # run boundaries
            _trace.active.emit("mmap_pages", allocator=self.name, pages=int(r.size), label=label,
                               resident=int(r.sum()), first=bool(r[0]) if r.size else False,
                               runs=np.diff(np.concatenate([[0], change, [r.size]])).tolist())

    def read_only_message(self) -> str:
        return (f"cannot write into a tensor whose bytes are the read-only mapping of {self.path!r} "
                f"(mt.load(..., mmap=True)); load with mmap='c' (copy-on-write: writes stay private "
                f"to this process), or write into a .clone()")


def npz_members(path: str | os.PathLike) -> dict[str, tuple[np.dtype, tuple, int]]:
    """Where each array of an uncompressed ``.npz`` sits in the file: name → (dtype, shape,
    byte offset of its data). A zip member's data follows its 30-byte local header, its
    name and its extra field; inside, an ``.npy`` header precedes the array's bytes."""
    out = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"mt.load(mmap=...): array {name!r} in {os.fspath(path)!r} is compressed "
                                 "(np.savez_compressed); only an uncompressed .npz (as mt.save writes) "
                                 "can be mapped — load it without mmap, or save it again with mt.save")
            f.seek(info.header_offset)
            header = f.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            f.seek(info.header_offset + 30 + name_len + extra_len)
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                     else np.lib.format.read_array_header_2_0(f))
            if fortran and len(shape) > 1:
                raise ValueError(f"mt.load(mmap=...): array {name!r} is stored in Fortran order; "
                                 "save it with mt.save (C order) to map it")
            out[name] = (dtype, tuple(shape), f.tell())
    return out


def resident_pages(array: np.ndarray) -> np.ndarray:
    """One bool per page spanned by ``array``'s bytes: is the page in memory (``mincore(2)``)?"""
    page = _mmap.PAGESIZE
    start = array.ctypes.data // page * page
    n = -(-(array.ctypes.data + array.nbytes - start) // page)
    vec = (ctypes.c_ubyte * n)()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(n * page), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore failed")
    return np.frombuffer(vec, np.uint8) & 1 == 1


def page_faults() -> tuple[int, int]:
    """(minor, major) page faults of this process so far (``getrusage``)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_majflt


def evict_from_page_cache(path: str | os.PathLike) -> None:
    """Ask the kernel to drop the file's clean pages from the page cache (``posix_fadvise``
    DONTNEED), so the next pass over a mapping of it really reads the disk (major faults)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_mapped(path: str | os.PathLike, mode: str = "r", check_dtype=None) -> dict:
    """The arrays of an uncompressed ``.npz`` as tensors over one mapping of the file
    (``check_dtype(dtype, name, path)`` refuses what microtorch has no tensor for)."""
    from ..tensor import Tensor
    from .storage import Storage

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"mt.load(mmap=...) maps a file by its path; got {type(path).__name__} "
                        "(an open file object can only be read: mt.load(f) without mmap)")
    members = npz_members(path)
    for name, (dtype, _, _) in members.items():
        if check_dtype is not None:
            check_dtype(dtype, name, os.fspath(path))
    mapped = MappedFile(path, mode)
    out = {}
    for name, (dtype, shape, offset) in members.items():
        count = int(np.prod(shape, dtype=np.int64))
        block = mapped.block(offset, count * dtype.itemsize, "tensor")
        storage = Storage(np.frombuffer(block.memory, dtype, count), block, "tensor")
        out[name] = Tensor._over(storage.data.reshape(shape), storage)
    if not mapped.live:
        mapped.mapping = None
    return out
