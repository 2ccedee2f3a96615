"""`rdmabench copy`: what pinning buys on this machine, GPU by GPU.

Host-to-device, device-to-host and device-to-device copies over a size sweep, from pageable memory,
pinned memory (cudaHostAlloc), write-combined pinned memory and pageable memory pinned after the fact
(cudaHostRegister); timed with CUDA events on a dedicated stream, medians of samples, every copy's
data checked. Two kinds of memory are not copied by the copy engine at all: `mapped` (pinned host
memory a kernel reads or writes in place across PCIe: zero-copy) and `managed` (cudaMallocManaged,
which a kernel touches while its pages sit on the host, so the driver migrates them on demand). Beside them: a plain CuPy loop as the reference, the cost of pinning itself, and the
overlap of a copy with a kernel on another stream, which pageable memory cannot give.
"""

from __future__ import annotations

import ctypes
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from .. import stats
from ..errors import ConfigError, ResourceError
from ..hardware.gpu import gpu_unavailable_reason, import_cupy, visible_gpu_count
from ..results.files import document
from ..stats import summarize
from ..units import format_size, gbps
from .records import AllGpusRead, CopyConfig, CopyDocument, CopyEntry, CopyExtras, CopyMetadata, Overlap

DIRECTIONS = ("h2d", "d2h", "d2d")
HOST_KINDS = ("pageable", "pinned", "write-combined", "registered", "mapped", "managed")
# Moved by a kernel's loads and stores, not by cudaMemcpy.
KERNEL_ACCESS_KINDS = ("mapped", "managed")
_MOVED_BY = {
    "mapped": "kernel loads/stores across PCIe (zero-copy)",
    "managed": "on-demand page migration (cudaMallocManaged)",
}
_MEMCPY_KIND = {"h2d": 1, "d2h": 2, "d2d": 3}  # cudaMemcpyHostToDevice, DeviceToHost, DeviceToDevice
_HOST_ALLOC_WRITE_COMBINED = 4  # cudaHostAllocWriteCombined
_HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped
_HOST_REGISTER_DEFAULT = 0


def require_gpu() -> ModuleType:
    cupy = import_cupy()
    if cupy is None or visible_gpu_count() == 0:
        raise ConfigError(f"rdmabench copy needs a CUDA GPU: {gpu_unavailable_reason()}")
    return cupy


class HostBuffer:
    """Host memory of one kind, with the time it took to make it usable for DMA."""

    def __init__(self, cupy: ModuleType, kind: str, nbytes: int):
        self.kind = kind
        self._cupy = cupy
        self._registered: int | None = None
        self._keep: Any = None
        self.array: Any = None
        start = time.perf_counter()
        try:
            if kind == "pageable":
                self.array = np.ones(nbytes, dtype=np.uint8)
            elif kind in ("pinned", "write-combined", "mapped"):
                flags = {"write-combined": _HOST_ALLOC_WRITE_COMBINED, "mapped": _HOST_ALLOC_MAPPED}.get(kind, 0)
                memory = cupy.cuda.PinnedMemory(nbytes, flags)
                self._keep = (memory, cupy.cuda.PinnedMemoryPointer(memory, 0))
                self.array = np.frombuffer(self._keep[1], dtype=np.uint8, count=nbytes)
            elif kind == "managed":
                memory = cupy.cuda.ManagedMemory(nbytes)
                self._keep = memory
                self.array = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(memory.ptr))
                self.array[:] = 1  # first touch on the CPU: the pages start on the host
            elif kind == "registered":
                self.array = np.ones(nbytes, dtype=np.uint8)
                pointer = self.array.ctypes.data
                cupy.cuda.runtime.hostRegister(pointer, nbytes, _HOST_REGISTER_DEFAULT)
                self._registered = pointer
            else:
                raise ConfigError(f"unknown host memory {kind!r}: choose one of {', '.join(HOST_KINDS)}")
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise ResourceError(f"cannot get {format_size(nbytes)} of {kind} host memory: {exc}") from None
        self.prepare_seconds = time.perf_counter() - start

    @property
    def device_pointer(self) -> int:
        """Where a kernel finds these bytes: the same address, by unified virtual addressing."""
        return int(self.array.ctypes.data)

    def release(self) -> None:
        if self._registered is not None:
            self._cupy.cuda.runtime.hostUnregister(self._registered)
            self._registered = None
        self.array = None
        self._keep = None


@dataclass
class CopyResult:
    gpu: int
    direction: str
    host_kind: str | None
    size: int
    samples: list[float]  # GB/s
    reference_gbps: float | None  # a plain CuPy loop, same buffers, wall clock
    prepare_seconds: float | None  # allocation (+ registration) of the host buffer
    validated: bool

    def entry(self) -> CopyEntry:
        stats = summarize(self.samples)
        host = self.host_kind or "device"
        src, dst = {"h2d": (host, "device"), "d2h": ("device", host), "d2d": ("device", "device")}[self.direction]
        return {
            "test": f"copy-{self.direction}",
            "src_rank": 0,
            "dst_rank": 0,
            "src_mode": src,
            "dst_mode": dst,
            "size_bytes": self.size,
            "bandwidth_gbps": stats["median"],
            "unit": "GB/s",
            "scope": "one copy engine direction"
            if self.direction != "d2d"
            else "bytes copied once (read + write not summed)",
            "stats": stats,
            "samples": self.samples,
            "validated": self.validated,
            "wrong_bytes": 0,
            "transport": _MOVED_BY.get(self.host_kind or "", "cudaMemcpyAsync"),
            "protocol": "wall clock around the CPU's first touch"
            if self.host_kind == "managed" and self.direction == "d2h"
            else "CUDA events on a dedicated stream",
            "gpu": self.gpu,
            "src_host": socket.gethostname(),
            "dst_host": socket.gethostname(),
            "src_gpu": self.gpu,
            "dst_gpu": self.gpu,
            "link": "same host",
            "reference_gbps": self.reference_gbps,
            "ratio_to_reference": stats["median"] / self.reference_gbps if self.reference_gbps else None,
            "host_prepare_seconds": self.prepare_seconds,
            "warnings": [],
        }


def _timed(cupy: ModuleType, stream: Any, action: Callable[[], None], repeats: int) -> float:
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    for _ in range(repeats):
        action()
    end.record(stream)
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end)) / 1e3


def _sampled_rates(
    cupy: ModuleType, stream: Any, action: Callable[[], None], size: int, samples: int
) -> tuple[list[float], int]:
    """GB/s of `samples` samples, each about 20 ms of `action` (moving `size` bytes) back to back on
    `stream`, and how many actions a sample ran."""
    once = max(_timed(cupy, stream, action, 1), 1e-6)
    repeats = max(1, min(1000, int(0.02 / once)))
    return [gbps(size * repeats, _timed(cupy, stream, action, repeats)) for _ in range(samples)], repeats


def measure(cupy: ModuleType, gpu: int, direction: str, host_kind: str | None, size: int, samples: int) -> CopyResult:
    """One (direction, host memory, size) on one GPU."""
    if host_kind in KERNEL_ACCESS_KINDS and direction != "d2d":
        return _measure_kernel_access(cupy, gpu, direction, host_kind, size, samples)
    with cupy.cuda.Device(gpu):
        device = cupy.zeros(size, dtype=cupy.uint8)
        other = cupy.ones(size, dtype=cupy.uint8) if direction == "d2d" else None
        host = HostBuffer(cupy, host_kind, size) if direction != "d2d" and host_kind else None
        stream = cupy.cuda.Stream(non_blocking=True)
        memcpy = cupy.cuda.runtime.memcpyAsync
        if direction == "h2d":
            assert host is not None
            host.array[:] = 7
            dst, src = device.data.ptr, host.array.ctypes.data
        elif direction == "d2h":
            assert host is not None
            device.fill(7)
            dst, src = host.array.ctypes.data, device.data.ptr
        else:
            assert other is not None
            other.fill(7)
            dst, src = device.data.ptr, other.data.ptr
        kind = _MEMCPY_KIND[direction]

        def copy() -> None:
            memcpy(dst, src, size, kind, stream.ptr)

        values, repeats = _sampled_rates(cupy, stream, copy, size, samples)
        stream.synchronize()
        # Every copy wrote the same bytes: check them once, where they landed.
        landed = host.array if direction == "d2h" and host is not None else cupy.asnumpy(device)
        validated = bool(np.all(landed == 7))
        if not validated:
            raise ResourceError(f"GPU {gpu} {direction} copy of {format_size(size)} delivered wrong bytes")
        reference = _reference(cupy, direction, device, other, host, size, repeats)
        prepare = host.prepare_seconds if host else None
        if host:
            host.release()
    return CopyResult(
        gpu, direction, host_kind if direction != "d2d" else None, size, values, reference, prepare, validated
    )


_COPY_KERNELS = r"""
extern "C" __global__ void copy_words(const unsigned long long *src, unsigned long long *dst, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) dst[i] = src[i];
}
extern "C" __global__ void copy_bytes(const unsigned char *src, unsigned char *dst, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) dst[i] = src[i];
}
"""


class _KernelCopy:
    """A grid-stride copy kernel: 8-byte words, then the odd tail bytes."""

    def __init__(self, cupy: ModuleType, gpu: int):
        module = cupy.RawModule(code=_COPY_KERNELS)
        self._words, self._bytes = module.get_function("copy_words"), module.get_function("copy_bytes")
        sms = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrMultiProcessorCount, gpu)
        self._grid, self._block = (sms * 4,), (512,)
        self._cupy = cupy

    def __call__(self, dst: int, src: int, size: int, stream: Any) -> None:
        u64 = self._cupy.uint64
        words = size // 8
        if words:
            self._words(self._grid, self._block, (u64(src), u64(dst), u64(words)), stream=stream)
        if size % 8:
            tail = words * 8
            self._bytes((1,), (32,), (u64(src + tail), u64(dst + tail), u64(size % 8)), stream=stream)


def _measure_kernel_access(
    cupy: ModuleType, gpu: int, direction: str, host_kind: str, size: int, samples: int
) -> CopyResult:
    """A kernel moves the bytes between a device buffer and mapped or managed memory.

    mapped: the kernel's loads (h2d) or stores (d2h) cross PCIe to pinned host memory, timed with
    events over repeated copies. managed: every sample starts with the pages where the data was
    produced (written by the CPU for h2d, by a kernel for d2h) and times the first access from the
    other side: a kernel reading them (h2d, CUDA events) or the CPU copying them out (d2h, wall
    clock), so each sample pays the on-demand migration."""
    with cupy.cuda.Device(gpu):
        device = cupy.zeros(size, dtype=cupy.uint8)
        host = HostBuffer(cupy, host_kind, size)
        stream = cupy.cuda.Stream(non_blocking=True)
        kernel = _KernelCopy(cupy, gpu)
        if direction == "h2d":
            dst, src = device.data.ptr, host.device_pointer
        else:
            dst, src = host.device_pointer, device.data.ptr
        values: list[float] = []
        if host_kind == "mapped":
            if direction == "h2d":
                host.array[:] = 7
            else:
                device.fill(7)
            cupy.cuda.Device().synchronize()
            values, _repeats = _sampled_rates(cupy, stream, lambda: kernel(dst, src, size, stream), size, samples)
        elif direction == "h2d":
            for _ in range(samples + 1):  # the first is a warm-up (module load, first faults)
                host.array[:] = 7  # the CPU writes: the pages now live on the host
                seconds = _timed(cupy, stream, lambda: kernel(dst, src, size, stream), 1)
                values.append(gbps(size, seconds))
            values = values[1:]
        else:
            landing = np.empty(size, dtype=np.uint8)
            for _ in range(samples + 1):
                device.fill(7)
                kernel(dst, src, size, stream)  # a kernel writes: the pages now live on the GPU
                stream.synchronize()
                start = time.perf_counter()
                np.copyto(landing, host.array)  # the CPU's first touch migrates them back
                values.append(gbps(size, time.perf_counter() - start))
            values = values[1:]
        stream.synchronize()
        landed = host.array if direction == "d2h" else cupy.asnumpy(device)
        if not bool(np.all(landed == 7)):
            raise ResourceError(
                f"GPU {gpu} {direction} {host_kind} kernel copy of {format_size(size)} delivered wrong bytes"
            )
        prepare = host.prepare_seconds
        host.release()
    return CopyResult(gpu, direction, host_kind, size, values, None, prepare, True)


def _reference(
    cupy: ModuleType, direction: str, device: Any, other: Any, host: HostBuffer | None, size: int, repeats: int
) -> float:
    """The same copy as a plain CuPy user writes it, timed by the wall clock around the loop."""
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        if direction == "h2d":
            assert host is not None
            device.set(host.array)
        elif direction == "d2h":
            assert host is not None
            device.get(out=host.array)
        else:
            device[...] = other
    cupy.cuda.Device().synchronize()
    return gbps(size * repeats, time.perf_counter() - start)


def all_gpus_h2d(cupy: ModuleType, host_kind: str, size: int, samples: int) -> tuple[float, list[float]]:
    """Every GPU reading host memory at once, one thread per GPU: the aggregate a node can pull,
    as total bytes over the time from the first start to the last finish; and each GPU's own rate."""
    count = visible_gpu_count()
    results: list[list[float]] = [[] for _ in range(count)]
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * count
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def worker(gpu: int) -> None:
        try:
            with cupy.cuda.Device(gpu):
                device = cupy.empty(size, dtype=cupy.uint8)
                host = HostBuffer(cupy, host_kind, size)
                stream = cupy.cuda.Stream(non_blocking=True)
                repeats = 10
                barrier.wait()
                began = time.perf_counter()
                for _ in range(samples):
                    seconds = _timed(
                        cupy,
                        stream,
                        lambda: cupy.cuda.runtime.memcpyAsync(
                            device.data.ptr, host.array.ctypes.data, size, 1, stream.ptr
                        ),
                        repeats,
                    )
                    results[gpu].append(gbps(size * repeats, seconds))
                spans[gpu] = (began, time.perf_counter())
                host.release()
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(gpu,)) for gpu in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    total = size * 10 * samples * count
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    return gbps(total, elapsed), [stats.median(r) for r in results]


def _warm_then_time(action: Callable[[], None], stream: Any) -> float:
    """Wall-clock seconds of one `action` on `stream`, after one untimed run."""
    action()
    stream.synchronize()
    start = time.perf_counter()
    action()
    stream.synchronize()
    return time.perf_counter() - start


_SPIN_KERNEL = r"""
extern "C" __global__ void spin(long long cycles, int *sink) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    if (threadIdx.x == 0 && blockIdx.x == 0) { sink[0] = 1; }
}
"""


def overlap(cupy: ModuleType, gpu: int, host_kind: str, size: int, direction: str = "d2h") -> Overlap:
    """How much of a copy (d2h or h2d) hides behind a kernel on another stream, in the order a
    pipeline issues them: the copy first, then the next kernel.

    Efficiency = (kernel alone + copy alone - both together) / the shorter of the two: 1 when the
    copy is hidden entirely, 0 when they serialise. A pinned copy returns at once and the kernel
    starts beside it; a pageable one holds the CPU until the driver has staged it, so the kernel
    starts late."""
    with cupy.cuda.Device(gpu):
        kernel = cupy.RawKernel(_SPIN_KERNEL, "spin")
        sink = cupy.zeros(1, dtype=cupy.int32)
        device = cupy.empty(size, dtype=cupy.uint8)
        host = HostBuffer(cupy, host_kind, size)
        compute, copier = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
        rate = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrClockRate, gpu) * 1e3  # Hz

        dst, src = (
            (device.data.ptr, host.array.ctypes.data)
            if direction == "h2d"
            else (host.array.ctypes.data, device.data.ptr)
        )

        def copy() -> None:
            cupy.cuda.runtime.memcpyAsync(dst, src, size, _MEMCPY_KIND[direction], copier.ptr)

        copy_seconds = _warm_then_time(copy, copier)
        cycles = int(copy_seconds * rate)  # a kernel about as long as the copy

        def run_kernel() -> None:
            kernel((1,), (32,), (cupy.int64(cycles), sink), stream=compute)

        kernel_seconds = _warm_then_time(run_kernel, compute)
        start = time.perf_counter()
        copy()
        run_kernel()
        compute.synchronize()
        copier.synchronize()
        both = time.perf_counter() - start
        host.release()
    hidden = kernel_seconds + copy_seconds - both
    return {
        "gpu": gpu,
        "host_memory": host_kind,
        "direction": direction,
        "size_bytes": size,
        "copy_seconds": copy_seconds,
        "kernel_seconds": kernel_seconds,
        "together_seconds": both,
        "overlap_efficiency": max(0.0, min(1.0, hidden / min(kernel_seconds, copy_seconds))),
    }


def run(
    cupy: ModuleType,
    sizes: list[int],
    directions: list[str],
    kinds: list[str],
    gpus: list[int],
    together: bool,
    with_overlap: bool,
    samples: int,
    say: Callable[[str], None],
) -> CopyDocument:
    """Every measurement `rdmabench copy` makes, as a results document; `say` prints table rows."""
    entries = _copies(cupy, sizes, directions, kinds, gpus, samples, say)
    extra: CopyExtras = {}
    if together and len(gpus) > 1 and "pinned" in kinds:
        extra["all_gpus_h2d"] = _together(cupy, len(gpus), max(sizes), samples, say)
    if with_overlap:
        extra["overlap"] = _overlaps(cupy, gpus[0], max(sizes), say)
    config: CopyConfig = {
        "test": "copy",
        "sizes": sizes,
        "directions": directions,
        "host_memory": kinds,
        "samples": samples,
    }
    doc = document.document(dict(_metadata(cupy, gpus, config)), [dict(e) for e in entries], complete=True)
    return {**doc, **extra}


def _copies(
    cupy: ModuleType,
    sizes: list[int],
    directions: list[str],
    kinds: list[str],
    gpus: list[int],
    samples: int,
    say: Callable[[str], None],
) -> list[CopyEntry]:
    say("# rdmabench copy: GB/s = 1e9 bytes/s, CUDA events on a dedicated stream, median of samples;")
    say("# reference = a plain CuPy loop (set/get/copy) timed by the wall clock; prepare = allocation + pinning")
    say(
        f"{'gpu':>3} {'dir':>4} {'host memory':>15} {'size':>8} {'median':>9} {'min':>8} {'max':>8} {'reference':>10} {'ratio':>6} {'prepare':>9}"
    )
    entries = []
    for gpu in gpus:
        for direction in directions:
            for kind in kinds if direction != "d2d" else [None]:  # type: ignore[list-item]
                for size in sizes:
                    result = measure(cupy, gpu, direction, kind, size, samples)
                    entry = result.entry()
                    entries.append(entry)
                    ref = f"{result.reference_gbps:10.2f}" if result.reference_gbps else f"{'-':>10}"
                    ratio = f"{entry['ratio_to_reference']:6.2f}" if entry["ratio_to_reference"] else f"{'-':>6}"
                    prep = (
                        f"{result.prepare_seconds * 1e3:7.1f}ms" if result.prepare_seconds is not None else f"{'-':>9}"
                    )
                    s = entry["stats"]
                    say(
                        f"{gpu:>3} {direction:>4} {kind or 'device':>15} {format_size(size):>8} {s['median']:9.2f} {s['min']:8.2f} {s['max']:8.2f} {ref} {ratio} {prep}"
                    )
    return entries


def _together(cupy: ModuleType, count: int, size: int, samples: int, say: Callable[[str], None]) -> AllGpusRead:
    aggregate, each = all_gpus_h2d(cupy, "pinned", size, samples)
    say(
        f"# all {count} GPUs reading pinned host memory at once, {format_size(size)}: {aggregate:.2f} GB/s aggregate ({', '.join(f'{v:.1f}' for v in each)} each)"
    )
    return {"host_memory": "pinned", "size_bytes": size, "aggregate_gbps": aggregate, "per_gpu_gbps": each}


def _overlaps(cupy: ModuleType, gpu: int, size: int, say: Callable[[str], None]) -> list[Overlap]:
    rows = [
        overlap(cupy, gpu, kind, size, direction) for direction in ("d2h", "h2d") for kind in ("pageable", "pinned")
    ]
    for row in rows:
        say(
            f"# overlap {row['direction']} {row['host_memory']:>8} {format_size(size)} with a kernel on another stream: "
            f"copy {row['copy_seconds'] * 1e3:.1f} ms, kernel {row['kernel_seconds'] * 1e3:.1f} ms, together "
            f"{row['together_seconds'] * 1e3:.1f} ms: {row['overlap_efficiency']:.0%} of the copy hidden"
        )
    return rows


def _metadata(cupy: ModuleType, gpus: list[int], config: CopyConfig) -> CopyMetadata:
    from .. import __version__
    from ..hardware.gpu import driver_version, select_gpu

    infos = [select_gpu(g) for g in gpus]
    return {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hosts": [socket.gethostname()],
        "world_size": 1,
        "ranks": [{"rank": 0, "host": socket.gethostname(), "gpus": [i.to_dict() for i in infos if i]}],
        "units": {"bandwidth": "GB/s = 1e9 bytes/s", "size": "bytes"},
        "versions": {"rdmabench": __version__, "cupy": cupy.__version__, "cuda_driver": driver_version()},
        "config": config,
    }
