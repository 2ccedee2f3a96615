"""`rdmabench storage`: what each path from a file into GPU (or host) memory delivers on this node,
side by side, with its limits, its CPU cost and whether the bytes that landed are right.

A sample moves the whole file (tests `storage-read`, `storage-write`) in requests of one size, by
`threads` workers at once (storage_paths.py has the paths). Before each read sample the file's pages
are evicted from the page cache (posix_fadvise DONTNEED: no root needed; O_DIRECT bypasses it anyway);
a write sample ends with fdatasync, inside the clock. The file holds a pattern (every 8-byte word its
own offset's splitmix64), written when rdmabench creates the file; after each sample every byte that
landed is checked (a read: the memory; a write: the file, read back with O_DIRECT), untimed.
Beside each figure: the device's own O_DIRECT rate into host memory, measured on the same file, and
the GPU's PCIe link; the smaller is the entry's limit.

This module runs the measurements in turn; beside it: what is asked and refused (config), the file
and its pattern (datafile), one measurement's samples (sampling), the limits (limits), and the
results entries, rows and document (records).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from .. import privatedirs
from ..errors import ResourceError
from ..hardware import storage as disk
from ..results.files.contents import ResultsDocument
from ..units import format_size
from .config import DEFAULT_SIZES, StorageConfig, check, chosen_paths, cupy_or_none
from .datafile import pattern, reset, write_pattern
from .limits import Limits, device_rate, pcie_link
from .records import HEADER, Case, StorageEntry, entry, results_document, row
from .sampling import destination, measure

# What callers import from here, wherever it lives.
__all__ = ["StorageConfig", "check", "run"]

_STAGING_PREFIX = ".rdmabench-write-"  # the private directory of the write tests' file, beside FILE


def cases(config: StorageConfig, paths: list[str]) -> list[Case]:
    return [
        Case(test == "read", path_name, request, threads)
        for test in config.tests
        for path_name in paths
        for request in config.sizes or DEFAULT_SIZES
        for threads in config.threads
    ]


def run(config: StorageConfig, say: Callable[[str], None]) -> ResultsDocument:
    """Every storage measurement of `config`, as a results document; `say` prints progress and rows.
    Files rdmabench creates (with --size, and the write tests' file) are removed at the end unless
    `keep`, however the run ends."""
    size = check(config)
    cupy = cupy_or_none(config)
    created: list[str] = []
    staging: Path | None = None
    try:
        if not os.path.exists(config.file):
            say(f"# writing {format_size(size)} of rdmabench's pattern to {config.file}")
            write_pattern(config.file, size)
            if not config.keep:
                created.append(config.file)
        fs = disk.file_system(config.file)
        paths = chosen_paths(config, fs, size)
        write_target = ""
        if "write" in config.tests:
            staging = _staging_dir(config.file)
            write_target = str(staging / "write")
            reset(write_target, size)  # its space claimed up front: a full disk fails here
        limits = _limits(config, size, write_target)
        entries = _measure_all(config, cupy, paths, size, fs, limits, write_target, say)
    finally:
        for path in created:
            if os.path.exists(path):
                os.unlink(path)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return results_document(config, entries, fs, limits, cupy)


def _staging_dir(file: str) -> Path:
    """A private directory (new, mode 0700) beside FILE, on its file system, for the write tests'
    file: a name beside FILE that anyone could predict (in /tmp, say) may be a link another user
    planted to one of ours, which the write tests would fill and truncate. One a killed run of ours
    left there goes first."""
    folder = os.path.dirname(os.path.abspath(file))
    privatedirs.sweep_stale(_STAGING_PREFIX, folder)
    try:
        return privatedirs.scratch_dir(_STAGING_PREFIX, folder)
    except OSError as exc:
        raise ResourceError(f"cannot make the write tests' file beside {file}: {exc.strerror or exc}") from None


def _limits(config: StorageConfig, size: int, write_target: str) -> Limits:
    limits = Limits()
    if config.memory == "device":
        limits.pcie_gbps, limits.pcie = pcie_link(config.gpu)
    if "read" in config.tests:
        limits.device_read_gbps = device_rate(config, True, config.file, size)
    if "write" in config.tests:
        limits.device_write_gbps = device_rate(config, False, write_target, size)
    return limits


def _measure_all(
    config: StorageConfig,
    cupy: ModuleType | None,
    paths: list[str],
    size: int,
    fs: disk.FileSystemInfo,
    limits: Limits,
    write_target: str,
    say: Callable[[str], None],
) -> list[StorageEntry]:
    region = destination(cupy, size)
    say(HEADER)
    entries = []
    filled = False
    for case in cases(config, paths):
        if not case.reading and not filled:  # what the write tests write: the pattern
            region.array[:] = pattern(region.xp, 0, size)
            filled = True
        target = config.file if case.reading else write_target
        measured = measure(config, case.path_name, case.reading, target, region, case.request, case.threads)
        result = entry(config, case, measured, size, fs, limits)
        entries.append(result)
        say(row(result))
        for warning in measured.warnings:
            say(f"# warning: {warning}")
    return entries
