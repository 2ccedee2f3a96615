"""The file a storage run moves and the bytes in it: rdmabench's pattern (every 8-byte word its own
offset's splitmix64) written, reset before a write sample, and checked where it landed (in memory,
or in the file read back); the file's pages evicted from the page cache; page-aligned host memory."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import ResourceError
from ..hardware import storage as disk
from ..memory.payload import file_words
from ..units import format_size
from .paths import Region

CHECK_CHUNK = 64 << 20  # bytes compared at a time


def write_pattern(path: str, size: int, exclusive: bool = True) -> None:
    """Create `path` holding rdmabench's pattern; on any failure nothing is left behind."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:  # a dangling link or a file made meanwhile (O_EXCL), a directory not ours
        raise ResourceError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        os.posix_fallocate(fd, 0, size)  # no space: fail now, before the long write
        for offset in range(0, size, CHECK_CHUNK):
            os.pwrite(fd, pattern(np, offset, min(CHECK_CHUNK, size - offset)), offset)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(path)
        raise ResourceError(f"cannot write {format_size(size)} to {path}: {exc.strerror or exc}") from None
    os.close(fd)


def reset(path: str, size: int) -> None:
    """Make `path` `size` bytes of zeros with its space allocated (unwritten extents: cheap), so that
    what a write sample leaves there is that sample's work and nothing earlier."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, 0)
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ResourceError(f"cannot write {format_size(size)} to {path}: {exc.strerror or exc}") from None


def evict(path: str) -> str | None:
    """Drop the file's pages from the page cache; the reason when it cannot be done."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.access(path, os.W_OK):  # dirty pages stay cached: write them out first
            os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return None
    except OSError as exc:
        return f"the page cache could not be evicted for {path} ({exc.strerror}): reads may come from memory"
    finally:
        os.close(fd)


def aligned(nbytes: int) -> np.ndarray:
    """Page-aligned host memory (an anonymous mapping), as O_DIRECT wants, not page-locked."""
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype=np.uint8, count=nbytes)


def pattern(xp: Any, offset: int, nbytes: int) -> Any:
    """The file's `nbytes` from `offset` (a multiple of 8) as rdmabench writes them, on host or GPU."""
    return file_words(xp, offset // 8, (nbytes + 7) // 8).view(xp.uint8)[:nbytes]


def _wrong_in(xp: Any, got: Any, offset: int) -> int | None:
    """The file offset of the first byte of `got` (the file's bytes from `offset`) off the pattern."""
    bad = xp.flatnonzero(got != pattern(xp, offset, int(got.size)))
    return offset + int(bad[0]) if int(bad.size) else None


def first_wrong(region: Region, size: int) -> int | None:
    """The offset of the first byte of `region` that differs from the pattern, or None."""
    for offset in range(0, size, CHECK_CHUNK):
        wrong = _wrong_in(region.xp, region.array[offset : offset + min(CHECK_CHUNK, size - offset)], offset)
        if wrong is not None:
            return wrong
    return None


def file_first_wrong(path: str, size: int) -> int | None:
    """Read `path` back (O_DIRECT where it can) and find its first byte off the pattern."""
    scratch = Region(aligned(min(size, CHECK_CHUNK)), np, False)
    direct = disk.direct_io_supported(path) and size % disk.DIRECT_ALIGNMENT == 0
    with opened(path, os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)) as fd:
        for offset in range(0, size, CHECK_CHUNK):
            n = min(CHECK_CHUNK, size - offset)
            os.preadv(fd, [scratch.host_view(0, n)], offset)
            wrong = _wrong_in(np, scratch.array[:n], offset)
            if wrong is not None:
                return wrong
    return None


@contextmanager
def opened(path: str, flags: int) -> Iterator[int]:
    """A descriptor of `path`, closed however the block ends."""
    fd = os.open(path, flags)
    try:
        yield fd
    finally:
        os.close(fd)
