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
"""

from __future__ import annotations

import mmap
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import privatedirs, stats
from ..errors import ConfigError, ResourceError, ValidationError
from ..hardware import storage as disk
from ..memory.payload import file_words
from ..stats import summarize
from ..units import format_size, gbps
from .paths import GPU_ONLY_PATHS, PATHS, WORKERS, Region, Worker, describe, kvikio_mode, open_flags

TESTS = ("read", "write")
DEFAULT_SIZES = (1 << 20, 16 << 20)
_CHECK_CHUNK = 64 << 20  # bytes compared at a time
_LIMIT_REQUEST = 16 << 20  # requests of the O_DIRECT rate measured as the device's limit
_STAGING_PREFIX = ".rdmabench-write-"  # the private directory of the write tests' file, beside FILE


@dataclass
class StorageConfig:
    file: str
    create_size: int | None = None  # create the file with rdmabench's pattern (removed at the end unless keep)
    tests: list[str] = field(default_factory=lambda: ["read"])
    paths: list[str] | None = None  # None: every path this machine can run
    memory: str | None = None  # "device" or "host"; None: device where there is a GPU
    sizes: list[int] | None = None  # request sizes; None: DEFAULT_SIZES that fit in the file
    threads: list[int] = field(default_factory=lambda: [1])
    buffers: int = 2
    samples: int = 3
    validate: bool = True
    keep: bool = False
    gpu: int = 0


def _cupy_or_none(config: StorageConfig) -> Any:
    from ..hardware.gpu import gpu_unavailable_reason, import_cupy, visible_gpu_count

    cupy = import_cupy()
    have = cupy is not None and visible_gpu_count() > 0
    if config.memory == "device" and not have:
        raise ConfigError(f"--mode device needs a CUDA GPU: {gpu_unavailable_reason()}")
    if config.memory is None:
        config.memory = "device" if have else "host"
    if config.memory == "device" and config.gpu >= visible_gpu_count():
        raise ConfigError(f"--gpu {config.gpu}: this machine has GPUs 0..{visible_gpu_count() - 1}")
    return cupy if config.memory == "device" else None


def check(config: StorageConfig) -> int:
    """Refuse bad input before anything is written; returns the file size the run will move."""
    if config.memory not in (None, "device", "host"):
        raise ConfigError(f"unknown --mode {config.memory!r}: choose device or host")
    for test in config.tests:
        if test not in TESTS:
            raise ConfigError(f"unknown storage test {test!r}: choose read or write")
    for name in config.paths or []:
        if name not in PATHS:
            raise ConfigError(f"unknown storage path {name!r}: choose {', '.join(PATHS)}")
    if not 1 <= config.samples <= 1000 or not 1 <= config.buffers <= 64:
        raise ConfigError("--samples must be 1..1000 and --stage-buffers 1..64")
    if not config.threads or any(not 1 <= t <= 256 for t in config.threads):
        raise ConfigError("--threads must be 1..256")
    if os.path.isdir(config.file):
        raise ConfigError(f"{config.file} is a directory: give a file (one to create with --size, or one to read)")
    if os.path.exists(config.file):
        if config.create_size is not None:
            raise ConfigError(f"{config.file} exists: --size creates a new file; leave it out to read this one")
        if not os.path.isfile(config.file):
            raise ConfigError(f"{config.file} is not a regular file")
        size = os.path.getsize(config.file)
    elif config.create_size is None:
        raise ConfigError(f"no such file: {config.file} (give --size to create one with rdmabench's pattern)")
    else:
        size = config.create_size
    if size <= 0:
        raise ConfigError(f"{config.file} is empty")
    if config.sizes is None:
        config.sizes = [s for s in DEFAULT_SIZES if s <= size] or [size]
    too_big = [s for s in config.sizes if s > size]
    if too_big or not config.sizes or any(s <= 0 for s in config.sizes):
        raise ConfigError(
            f"request sizes must be 1 byte..the file's {format_size(size)}, not {format_size(max(config.sizes or [0]))}"
        )
    return size


def _paths(config: StorageConfig, fs: disk.FileSystemInfo, size: int) -> list[str]:
    on_gpu = config.memory == "device"
    wanted = config.paths or [p for p in PATHS if on_gpu or p not in GPU_ONLY_PATHS]
    if not on_gpu and any(p in GPU_ONLY_PATHS for p in wanted):
        raise ConfigError("the kvikio path moves a file to or from GPU memory: use --mode device")
    if "pinned" in wanted:
        if fs.direct_io is False:
            raise ConfigError(
                f"{fs.mount_point} ({fs.fstype}) refuses O_DIRECT, which the pinned path needs: use --paths pageable"
            )
        odd = [s for s in config.sizes or () if s % disk.DIRECT_ALIGNMENT] + (
            [size] if size % disk.DIRECT_ALIGNMENT else []
        )
        if odd:
            raise ConfigError(
                f"O_DIRECT (the pinned path) moves multiples of {disk.DIRECT_ALIGNMENT} bytes: "
                f"{format_size(odd[0])} is not one"
            )
    if "kvikio" in wanted:
        from .paths import import_kvikio

        import_kvikio()
    return wanted


def write_pattern(path: str, size: int, exclusive: bool = True) -> None:
    """Create `path` holding rdmabench's pattern; on any failure nothing is left behind."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:  # a dangling link or a file made meanwhile (O_EXCL), a directory not ours
        raise ResourceError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        os.posix_fallocate(fd, 0, size)  # no space: fail now, before the long write
        for offset in range(0, size, _CHECK_CHUNK):
            os.pwrite(fd, pattern(np, offset, min(_CHECK_CHUNK, size - offset)), offset)
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


def _region(cupy: Any, size: int, on_gpu: bool) -> Region:
    from ..memory.buffers import allocate
    from ..modes import MemoryMode

    if on_gpu:
        try:
            return Region(cupy.zeros(size, dtype=cupy.uint8), cupy, True)
        except cupy.cuda.memory.OutOfMemoryError:
            raise ResourceError(f"cannot allocate {format_size(size)} of GPU memory for the file") from None
    buffer = allocate(MemoryMode.PINNED, size, False)  # page-aligned and page-locked: O_DIRECT-ready
    return Region(buffer.array[:size], np, False)


def pattern(xp: Any, offset: int, nbytes: int) -> Any:
    """The file's `nbytes` from `offset` (a multiple of 8) as rdmabench writes them, on host or GPU."""
    return file_words(xp, offset // 8, (nbytes + 7) // 8).view(xp.uint8)[:nbytes]


def _wrong_in(xp: Any, got: Any, offset: int) -> int | None:
    """The file offset of the first byte of `got` (the file's bytes from `offset`) off the pattern."""
    bad = xp.flatnonzero(got != pattern(xp, offset, int(got.size)))
    return offset + int(bad[0]) if int(bad.size) else None


def first_wrong(region: Region, size: int) -> int | None:
    """The offset of the first byte of `region` that differs from the pattern, or None."""
    for offset in range(0, size, _CHECK_CHUNK):
        wrong = _wrong_in(region.xp, region.array[offset : offset + min(_CHECK_CHUNK, size - offset)], offset)
        if wrong is not None:
            return wrong
    return None


def _file_first_wrong(path: str, size: int) -> int | None:
    """Read `path` back (O_DIRECT where it can) and find its first byte off the pattern."""
    scratch = Region(aligned(min(size, _CHECK_CHUNK)), np, False)
    direct = disk.direct_io_supported(path) and size % disk.DIRECT_ALIGNMENT == 0
    with _opened(path, os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)) as fd:
        for offset in range(0, size, _CHECK_CHUNK):
            n = min(_CHECK_CHUNK, size - offset)
            os.preadv(fd, [scratch.host_view(0, n)], offset)
            wrong = _wrong_in(np, scratch.array[:n], offset)
            if wrong is not None:
                return wrong
    return None


@contextmanager
def _opened(path: str, flags: int) -> Iterator[int]:
    fd = os.open(path, flags)
    try:
        yield fd
    finally:
        os.close(fd)


@dataclass
class Measured:
    gbps: list[float]
    request_seconds: list[float]
    cpu_seconds: float
    warnings: list[str]


def _sample(
    workers: list[Worker], plan: list[list[tuple[int, int]]], reading: bool, fd: int
) -> tuple[float, list[float]]:
    """One timed pass over the whole file by every worker at once: (seconds, request times)."""
    times: list[list[float]] = [[] for _ in workers]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            workers[index].run(plan[index], reading, times[index])
        except BaseException as exc:  # raised again in the caller's thread
            errors.append(exc)

    began = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers:
        worker.drain()
    if not reading:
        os.fdatasync(fd)
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return elapsed, [t for each in times for t in each]


def _plan(size: int, request: int, threads: int) -> list[list[tuple[int, int]]]:
    """Every request of a pass over the file, dealt out to the workers in turn."""
    requests = [(offset, min(request, size - offset)) for offset in range(0, size, request)]
    return [requests[worker::threads] for worker in range(threads)]


def measure(
    config: StorageConfig,
    cupy: Any,
    path_name: str,
    reading: bool,
    target: str,
    region: Region,
    request: int,
    threads: int,
) -> Measured:
    """Samples of one (test, path, request size, threads) on `target` (the file read, or written)."""
    size = int(region.array.size)
    warnings: list[str] = []
    speeds: list[float] = []
    request_times: list[float] = []
    cpu = 0.0
    with _opened(target, open_flags(path_name, reading)) as fd:
        workers = [
            WORKERS[path_name](target, fd, region, request, config.buffers, cupy, reading) for _ in range(threads)
        ]
        try:
            plan = _plan(size, request, threads)
            for _ in range(config.samples):
                if not reading:
                    reset(target, size)
                problem = evict(target) if reading else None
                if problem and problem not in warnings:
                    warnings.append(problem)
                began = time.process_time()
                seconds, times = _sample(workers, plan, reading, fd)
                cpu += time.process_time() - began
                speeds.append(gbps(size, seconds))
                request_times.extend(times)
                _validate(config, region, target, size, reading, path_name)
        finally:
            for worker in workers:
                worker.close()
    return Measured(speeds, request_times, cpu, warnings)


def _validate(config: StorageConfig, region: Region, target: str, size: int, reading: bool, path_name: str) -> None:
    if not config.validate:
        return
    wrong = first_wrong(region, size) if reading else _file_first_wrong(target, size)
    if wrong is not None:
        what = "memory read from" if reading else "file written to"
        raise ValidationError(
            f"storage-{'read' if reading else 'write'} ({path_name}): the {what} {target} is wrong from byte "
            f"{wrong} on: the file was corrupted or does not hold rdmabench's pattern (create it with --size, "
            "or pass --no-validate)"
        )


def _percentiles_us(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6, 3)

    return {"p50": at(0.5), "p99": at(0.99), "p99_9": at(0.999), "max": round(ordered[-1] * 1e6, 3)}


@dataclass
class Limits:
    """The device's own O_DIRECT rates into and out of host memory (measured on the run's file) and the
    GPU's PCIe link: what a path can reach at best."""

    device_read_gbps: float | None = None
    device_write_gbps: float | None = None
    pcie_gbps: float | None = None
    pcie: str | None = None

    def limit(self, reading: bool, on_gpu: bool) -> dict[str, Any] | None:
        device = self.device_read_gbps if reading else self.device_write_gbps
        options = (
            []
            if device is None
            else [(device, "storage", f"the device's O_DIRECT {'read' if reading else 'write'} rate, measured")]
        )
        if on_gpu and self.pcie_gbps:
            options.append((self.pcie_gbps, "PCIe", f"{self.pcie} of the GPU"))
        if not options:
            return None
        value, kind, what = min(options)
        return {"gbps": round(value, 3), "kind": kind, "what": what}


def _pcie(gpu: int) -> tuple[float | None, str | None]:
    from ..hardware.gpu import select_gpu
    from ..hardware.topology import gpu_topology

    info = select_gpu(gpu)
    if info is None:
        return None, None
    link = gpu_topology(gpu, info.pci_bus_id, []).pcie
    return (link.gbps, link.describe()) if link else (None, None)


def _device_rate(config: StorageConfig, reading: bool, target: str, size: int) -> float | None:
    """The pinned host path (O_DIRECT into page-aligned host memory) in large requests: the device."""
    if disk.direct_io_supported(target) is not True or size % disk.DIRECT_ALIGNMENT:
        return None
    request = min(_LIMIT_REQUEST, size // disk.DIRECT_ALIGNMENT * disk.DIRECT_ALIGNMENT)
    region = Region(aligned(size), np, False)
    if not reading:
        region.array[:] = pattern(np, 0, size)
    quiet = StorageConfig(file=target, samples=config.samples, validate=False)
    # Several requests in flight, as a device needs to show its rate (an NVMe drive wants a queue).
    measured = measure(quiet, None, "pinned", reading, target, region, request, max(4, *config.threads))
    return stats.median(measured.gbps)


@dataclass(frozen=True)
class Case:
    """One measurement's identity: test, path, request size and workers."""

    reading: bool
    path_name: str
    request: int
    threads: int

    @property
    def test(self) -> str:
        return "storage-read" if self.reading else "storage-write"


def entry(
    config: StorageConfig, case: Case, measured: Measured, size: int, fs: disk.FileSystemInfo, limits: Limits
) -> dict[str, Any]:
    on_gpu = config.memory == "device"
    memory = config.memory or "host"
    stats = summarize(measured.gbps)
    cpu = round(measured.cpu_seconds / (size * len(measured.gbps) / 1e9), 6)
    host = socket.gethostname()
    gpu = config.gpu if on_gpu else None
    requests = -(-size // case.request)
    result: dict[str, Any] = {
        "test": case.test,
        "src_rank": 0,
        "dst_rank": 0,
        "src_mode": case.path_name if case.reading else memory,
        "dst_mode": memory if case.reading else case.path_name,
        "size_bytes": case.request,
        "bandwidth_gbps": stats["median"],
        "unit": "GB/s",
        "scope": "the whole file into memory" if case.reading else "memory into the whole file, fdatasync included",
        "stats": stats,
        "samples": measured.gbps,
        "window": case.threads,
        "iterations": requests,
        "warmup": 0,
        "messages_per_sample": requests,
        "validated": config.validate,
        "wrong_bytes": 0 if config.validate else None,
        "engine": "python threads",
        "transport": describe(case.path_name, on_gpu, config.buffers),
        "protocol": _cache_handling(case),
        "src_host": host,
        "dst_host": host,
        "src_gpu": gpu,
        "dst_gpu": gpu,
        "link": "same host",
        "storage_path": case.path_name,
        "threads": case.threads,
        "file_bytes": size,
        "file_system": {"fstype": fs.fstype, "mount_point": fs.mount_point, "device": fs.block_device},
        "request_latency_us": _percentiles_us(measured.request_seconds),
        "cpu_s_per_gb": {"src": cpu, "dst": cpu},
        "warnings": list(measured.warnings),
    }
    if case.path_name == "pinned" and on_gpu:
        result["pinned_buffers"] = config.buffers
    if case.path_name == "kvikio":
        result["kvikio_mode"] = kvikio_mode()
    limit = limits.limit(case.reading, on_gpu)
    result["link_limit"] = limit
    result["share_of_limit"] = round(stats["median"] / limit["gbps"], 4) if limit else None
    return result


def _cache_handling(case: Case) -> str:
    if case.path_name == "pinned":
        return "O_DIRECT: the page cache bypassed"
    if case.path_name == "kvikio":
        return "KvikIO: cuFile (O_DIRECT) or POSIX; the file's pages evicted before each read sample"
    if case.reading:
        return "the file's pages evicted from the page cache before each sample (posix_fadvise DONTNEED)"
    return "through the page cache, fdatasync at the end of each sample"


HEADER = (
    f"{'test':<13} {'path':<9} {'memory':<6} {'request':>8} {'thr':>3} {'median':>9} {'min':>8} {'max':>8} "
    f"{'p50 us':>9} {'p99 us':>9} {'cpu s/GB':>8} {'share':>6}  moved by"
)


def row(result: dict[str, Any]) -> str:
    s, lat = result["stats"], result["request_latency_us"]
    share = f"{result['share_of_limit']:.0%}" if result.get("share_of_limit") is not None else "-"
    memory = result["dst_mode"] if result["test"] == "storage-read" else result["src_mode"]
    return (
        f"{result['test']:<13} {result['storage_path']:<9} {memory:<6} {format_size(result['size_bytes']):>8} "
        f"{result['threads']:>3} {s['median']:9.3f} {s['min']:8.3f} {s['max']:8.3f} {lat['p50']:9.1f} "
        f"{lat['p99']:9.1f} {result['cpu_s_per_gb']['src']:8.3f} {share:>6}  {result['transport']}"
    )


def cases(config: StorageConfig, paths: list[str]) -> list[Case]:
    return [
        Case(test == "read", path_name, request, threads)
        for test in config.tests
        for path_name in paths
        for request in config.sizes or DEFAULT_SIZES
        for threads in config.threads
    ]


def run(config: StorageConfig, say: Callable[[str], None]) -> dict[str, Any]:
    """Every storage measurement of `config`, as a results document; `say` prints progress and rows.
    Files rdmabench creates (with --size, and the write tests' file) are removed at the end unless
    `keep`, however the run ends."""
    size = check(config)
    cupy = _cupy_or_none(config)
    created: list[str] = []
    staging: Path | None = None
    try:
        if not os.path.exists(config.file):
            say(f"# writing {format_size(size)} of rdmabench's pattern to {config.file}")
            write_pattern(config.file, size)
            if not config.keep:
                created.append(config.file)
        fs = disk.file_system(config.file)
        paths = _paths(config, fs, size)
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
    return _document(config, entries, fs, limits, cupy)


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
        limits.pcie_gbps, limits.pcie = _pcie(config.gpu)
    if "read" in config.tests:
        limits.device_read_gbps = _device_rate(config, True, config.file, size)
    if "write" in config.tests:
        limits.device_write_gbps = _device_rate(config, False, write_target, size)
    return limits


def _measure_all(
    config: StorageConfig,
    cupy: Any,
    paths: list[str],
    size: int,
    fs: disk.FileSystemInfo,
    limits: Limits,
    write_target: str,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    region = _region(cupy, size, config.memory == "device")
    say(HEADER)
    entries = []
    filled = False
    for case in cases(config, paths):
        if not case.reading and not filled:  # what the write tests write: the pattern
            region.array[:] = pattern(region.xp, 0, size)
            filled = True
        target = config.file if case.reading else write_target
        measured = measure(config, cupy, case.path_name, case.reading, target, region, case.request, case.threads)
        result = entry(config, case, measured, size, fs, limits)
        entries.append(result)
        say(row(result))
        for warning in measured.warnings:
            say(f"# warning: {warning}")
    return entries


def _document(
    config: StorageConfig, entries: list[dict[str, Any]], fs: disk.FileSystemInfo, limits: Limits, cupy: Any
) -> dict[str, Any]:
    from .. import __version__
    from ..results.files import document

    versions: dict[str, Any] = {"rdmabench": __version__}
    if cupy is not None:
        versions["cupy"] = cupy.__version__
    if "kvikio" in (config.paths or []) or any(e.get("kvikio_mode") for e in entries):
        import kvikio

        versions["kvikio"] = kvikio.__version__
    driver = disk.gds()
    metadata = {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hosts": [socket.gethostname()],
        "world_size": 1,
        "ranks": [{"rank": 0, "host": socket.gethostname()}],
        "units": {"bandwidth": "GB/s = 1e9 bytes/s", "size": "bytes (request size)", "latency": "us per request"},
        "versions": versions,
        "config": {"test": "storage", **{k: v for k, v in vars(config).items()}},
        "storage": {
            "file_system": fs.to_dict(),
            "gds": driver.to_dict(),
            "gds_verdict": disk.gds_verdict(fs, driver),
            "limits": vars(limits),
            "page_cache": "evicted per file (posix_fadvise DONTNEED) before each read sample; O_DIRECT bypasses it",
        },
    }
    return document.document(metadata, entries, complete=True)
