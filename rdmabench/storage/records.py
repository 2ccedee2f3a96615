"""A storage measurement as the rest of rdmabench reads it: its identity (Case), its results entry
(figures, request latencies, CPU cost, limit, how the page cache was handled), its printed row, and
the run's results document."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TypedDict

from ..hardware import storage as disk
from ..results.files.contents import EntryHead, ResultsDocument
from ..stats import summarize
from ..units import format_size
from .config import StorageConfig
from .limits import Limits, LinkLimit
from .paths import describe, kvikio_mode
from .sampling import Measured


def _percentiles_us(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6, 3)

    return {"p50": at(0.5), "p99": at(0.99), "p99_9": at(0.999), "max": round(ordered[-1] * 1e6, 3)}


class EntryFileSystem(TypedDict):
    """The file system the measured file is on, as an entry names it."""

    fstype: str
    mount_point: str
    device: str | None


class _Entry(EntryHead):
    window: int
    iterations: int
    warmup: int
    messages_per_sample: int
    validated: bool
    wrong_bytes: int | None
    engine: str
    transport: str
    protocol: str
    src_host: str
    dst_host: str
    src_gpu: int | None
    dst_gpu: int | None
    link: str
    storage_path: str
    threads: int
    file_bytes: int
    file_system: EntryFileSystem
    request_latency_us: dict[str, float]  # p50, p99, p99_9, max
    cpu_s_per_gb: dict[str, float]  # src, dst
    warnings: list[str]


class StorageEntry(_Entry, total=False):
    """One storage measurement's results entry (a results file's entry, schema 1), in this key order;
    the pinned path's buffers and KvikIO's mode where they apply, then the limit and the share of it
    (always written, after those)."""

    pinned_buffers: int
    kvikio_mode: str
    link_limit: LinkLimit | None
    share_of_limit: float | None


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
) -> StorageEntry:
    on_gpu = config.memory == "device"
    memory = config.memory or "host"
    stats = summarize(measured.gbps)
    cpu = round(measured.cpu_seconds / (size * len(measured.gbps) / 1e9), 6)
    host = socket.gethostname()
    gpu = config.gpu if on_gpu else None
    requests = -(-size // case.request)
    result: StorageEntry = {
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


def row(result: StorageEntry) -> str:
    s, lat = result["stats"], result["request_latency_us"]
    share = f"{result['share_of_limit']:.0%}" if result.get("share_of_limit") is not None else "-"
    memory = result["dst_mode"] if result["test"] == "storage-read" else result["src_mode"]
    return (
        f"{result['test']:<13} {result['storage_path']:<9} {memory:<6} {format_size(result['size_bytes']):>8} "
        f"{result['threads']:>3} {s['median']:9.3f} {s['min']:8.3f} {s['max']:8.3f} {lat['p50']:9.1f} "
        f"{lat['p99']:9.1f} {result['cpu_s_per_gb']['src']:8.3f} {share:>6}  {result['transport']}"
    )


def results_document(
    config: StorageConfig, entries: list[StorageEntry], fs: disk.FileSystemInfo, limits: Limits, cupy: ModuleType | None
) -> ResultsDocument:
    from .. import __version__
    from ..results.files import document

    versions: dict[str, str] = {"rdmabench": __version__}
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
    return document.document(metadata, [dict(e) for e in entries], complete=True)
