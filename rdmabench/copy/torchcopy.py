"""`rdmabench copy --framework torch`: PyTorch's own path to the GPU, beside the raw copy.

Most people meet pinned memory through PyTorch: `tensor.pin_memory()`, `.to("cuda",
non_blocking=True)`, `DataLoader(pin_memory=True)`, copies on a side stream. This measures each, and
puts the raw CuPy figure for the same copy (copy/copy.py, measured in the same run) beside it:

- copies host-to-device and device-to-host of pageable and pinned tensors, with and without
  `non_blocking`, timed with CUDA events on the copy's stream, plus how long the call held the CPU
  (a pageable `non_blocking=True` copy returns only once it is done: it synchronises);
- what `pin_memory()` costs per call against copying into a pinned buffer kept from a pool;
- a copy on a side stream against a matmul on the default stream: the share of the copy hidden;
- a DataLoader over an in-memory dataset, with and without `pin_memory`: batches per second delivered
  to the GPU (`.to("cuda", non_blocking=True)`) and the process's CPU seconds per batch.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypedDict

from .. import stats
from ..errors import ConfigError, ValidationError
from ..results.files.contents import EntryHead, ResultsDocument
from ..stats import summarize
from ..units import format_size, gbps

HOST_KINDS = ("pageable", "pinned")


def import_torch() -> ModuleType:
    """torch, or one line saying what is missing."""
    try:
        import torch
    except ImportError:
        raise ConfigError(
            "rdmabench copy --framework torch needs PyTorch: pip install 'rdmabench[torch]' (a CUDA build for GPUs)"
        ) from None
    return torch


def require_cuda(torch: ModuleType) -> None:
    if torch.version.cuda is None:
        raise ConfigError(
            f"rdmabench copy --framework torch needs a CUDA GPU: PyTorch {torch.__version__} is built without CUDA"
        )
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise ConfigError("rdmabench copy --framework torch needs a CUDA GPU: PyTorch sees none")


def _host(torch: ModuleType, kind: str, nbytes: int) -> Any:
    tensor = torch.empty(nbytes, dtype=torch.uint8, pin_memory=kind == "pinned")
    tensor.copy_(torch.arange(nbytes, dtype=torch.int64).to(torch.uint8))
    return tensor


@dataclass(frozen=True)
class CopyTimes:
    """A copy's samples (GB/s, CUDA events) and the CPU time its call held (median seconds)."""

    samples: list[float]
    call_seconds: float


class Overlap(TypedDict):
    """A host-to-device copy beside matmuls (the document's "overlap" rows)."""

    host_memory: str
    size_bytes: int
    copy_seconds: float
    compute_seconds: float
    together_seconds: float
    share_hidden: float


class LoaderRate(TypedDict):
    """A DataLoader's batches a second (the document's "dataloader" rows)."""

    pin_memory: bool
    batches: int
    batch_bytes: int
    batches_per_second: float
    cpu_seconds_per_batch: float


def copy_once(torch: ModuleType, direction: str, kind: str, nbytes: int, non_blocking: bool, samples: int) -> CopyTimes:
    """GB/s of `samples` copies (CUDA events on a side stream) and the CPU time each call held."""
    host = _host(torch, kind, nbytes)
    device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    if direction == "d2h":
        device.copy_(host)
        host.zero_()
    src, dst = (host, device) if direction == "h2d" else (device, host)
    stream = torch.cuda.Stream()
    speeds, held = [], []
    with torch.cuda.stream(stream):
        for index in range(samples + 2):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            began = time.perf_counter()
            start.record(stream)
            dst.copy_(src, non_blocking=non_blocking)
            end.record(stream)
            returned = time.perf_counter() - began
            end.synchronize()
            if index >= 2:
                speeds.append(gbps(nbytes, start.elapsed_time(end) / 1e3))
                held.append(returned)
    if not torch.equal(host.cpu() if direction == "h2d" else host, device.cpu()):
        raise ValidationError(f"torch {direction} copy of {format_size(nbytes)} from {kind} memory landed wrong")
    return CopyTimes(speeds, stats.median(held))


class TorchDocument(ResultsDocument):
    """`rdmabench copy --framework torch`'s results document: its entries, and what it measured beside them."""

    pin_memory_cost: dict[str, float]
    overlap: list[Overlap]
    dataloader: list[LoaderRate]


def pin_cost(torch: ModuleType, nbytes: int, samples: int) -> dict[str, float]:
    """Seconds per call: tensor.pin_memory() (a fresh pinned copy every time) against copying into a
    pinned buffer kept from a pool."""
    pageable = _host(torch, "pageable", nbytes)
    pooled = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    fresh, reused = [], []
    for _ in range(samples):
        began = time.perf_counter()
        pinned = pageable.pin_memory()
        fresh.append(time.perf_counter() - began)
        del pinned
        began = time.perf_counter()
        pooled.copy_(pageable)
        reused.append(time.perf_counter() - began)
    return {"pin_memory_seconds": stats.median(fresh), "pooled_copy_seconds": stats.median(reused)}


def _timed(torch: ModuleType, work: Callable[[], None]) -> float:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    work()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / 1e3


def overlap(torch: ModuleType, kind: str, nbytes: int) -> Overlap:
    """A host-to-device copy on a side stream beside matmuls on the default stream, issued in a
    training loop's order (copy for the next step, then this step's compute)."""
    host = _host(torch, kind, nbytes)
    device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    a = torch.randn(4096, 4096, device="cuda")

    def copy() -> None:
        with torch.cuda.stream(side):
            device.copy_(host, non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)

    copy_seconds = _timed(torch, copy)
    for _ in range(3):  # cuBLAS picks and loads its kernel on the first products: not what one costs
        a @ a
    one = _timed(torch, lambda: a @ a)
    repeats = max(1, math.ceil(copy_seconds / max(one, 1e-6)))  # at least as long as the copy

    def compute() -> None:
        for _ in range(repeats):
            a @ a

    compute_seconds = _timed(torch, compute)

    def both() -> None:
        with torch.cuda.stream(side):
            device.copy_(host, non_blocking=True)
        compute()
        torch.cuda.current_stream().wait_stream(side)

    together = _timed(torch, both)
    # The compute lasts at least as long as the copy: the share of the copy that ran behind it.
    hidden = copy_seconds + compute_seconds - together
    share = max(0.0, min(1.0, hidden / copy_seconds))
    return {
        "host_memory": kind,
        "size_bytes": nbytes,
        "copy_seconds": copy_seconds,
        "compute_seconds": compute_seconds,
        "together_seconds": together,
        "share_hidden": share,
    }


def dataloader_rate(torch: ModuleType, pin_memory: bool, batches: int, batch_bytes: int, to_gpu: bool) -> LoaderRate:
    """Batches per second out of a DataLoader over an in-memory dataset (and onto the GPU with
    `.to("cuda", non_blocking=True)` when `to_gpu`), and the process's CPU seconds per batch (the
    pin-memory thread's work included). Pinning is refused without CUDA, not silently skipped as
    PyTorch does (it warns and hands out pageable batches)."""
    from torch.utils.data import DataLoader, TensorDataset

    if pin_memory and not torch.cuda.is_available():
        raise ConfigError("DataLoader pin_memory needs CUDA: PyTorch sees no GPU (it would hand out pageable batches)")
    rows = 64
    data = torch.randint(0, 255, (batches * rows, max(1, batch_bytes // rows)), dtype=torch.uint8)
    loader = DataLoader(TensorDataset(data), batch_size=rows, pin_memory=pin_memory)
    if to_gpu:
        torch.cuda.synchronize()
    cpu, began = time.process_time(), time.perf_counter()
    count = 0
    for (batch,) in loader:
        if to_gpu:
            batch = batch.to("cuda", non_blocking=True)
        count += 1
    if to_gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    return {
        "pin_memory": pin_memory,
        "batches": count,
        "batch_bytes": rows * data.shape[1],
        "batches_per_second": count / seconds,
        "cpu_seconds_per_batch": (time.process_time() - cpu) / count,
    }


class TorchEntry(EntryHead):
    """One torch copy's results entry (a results file's entry, schema 1), in the order files hold its keys."""

    validated: bool
    wrong_bytes: int
    engine: str
    transport: str
    protocol: str
    framework: str
    framework_version: str
    cuda_version: str | None
    call_seconds: float
    raw_cupy_gbps: float | None
    ratio_to_raw: float | None
    src_host: str
    dst_host: str
    link: str


def _entry(
    torch: ModuleType, direction: str, kind: str, size: int, nb: bool, got: CopyTimes, raw: float | None
) -> TorchEntry:
    stats = summarize(got.samples)
    src, dst = (kind, "device") if direction == "h2d" else ("device", kind)
    host = socket.gethostname()
    return {
        "test": f"copy-{direction}",
        "src_rank": 0,
        "dst_rank": 0,
        "src_mode": src,
        "dst_mode": dst,
        "size_bytes": size,
        "bandwidth_gbps": stats["median"],
        "unit": "GB/s",
        "scope": "one copy engine direction",
        "stats": stats,
        "samples": got.samples,
        "validated": True,
        "wrong_bytes": 0,
        "engine": f"torch {'non_blocking' if nb else 'blocking'}",
        "transport": f"tensor.copy_(non_blocking={nb})",
        "protocol": "CUDA events on a side stream",
        "framework": "torch",
        "framework_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "call_seconds": got.call_seconds,
        "raw_cupy_gbps": raw,
        "ratio_to_raw": stats["median"] / raw if raw else None,
        "src_host": host,
        "dst_host": host,
        "link": "same host",
    }


def _raw(cupy: ModuleType | None, gpu: int, direction: str, kind: str, size: int, samples: int) -> float | None:
    """The raw copy (copy/copy.py, cudaMemcpyAsync from the same kind of host memory), same run."""
    if cupy is None:
        return None
    from .copy import measure

    return float(stats.median(measure(cupy, gpu, direction, kind, size, samples).samples))


HEADER = f"{'dir':>4} {'host memory':>11} {'non_blocking':>12} {'size':>8} {'median':>9} {'raw CuPy':>9} {'ratio':>6} {'call held':>10}"


def copies(
    torch: ModuleType, cupy: ModuleType | None, sizes: list[int], samples: int, say: Callable[[str], None]
) -> list[TorchEntry]:
    say("# rdmabench copy --framework torch: GB/s = 1e9 bytes/s, CUDA events, median of samples; raw = CuPy's")
    say("# cudaMemcpyAsync from the same memory in the same run; call held = how long the copy_ call kept the CPU")
    say(HEADER)
    entries = []
    gpu = torch.cuda.current_device()
    for direction in ("h2d", "d2h"):
        for kind in HOST_KINDS:
            for size in sizes:
                raw = _raw(cupy, gpu, direction, kind, size, samples)
                for nb in (False, True):
                    got = copy_once(torch, direction, kind, size, nb, samples)
                    entry = _entry(torch, direction, kind, size, nb, got, raw)
                    entries.append(entry)
                    ratio = f"{entry['ratio_to_raw']:6.2f}" if entry["ratio_to_raw"] else f"{'-':>6}"
                    raw_text = f"{raw:9.2f}" if raw else f"{'-':>9}"
                    say(
                        f"{direction:>4} {kind:>11} {nb!s:>12} {format_size(size):>8} {entry['bandwidth_gbps']:9.2f} "
                        f"{raw_text} {ratio} {got.call_seconds * 1e3:8.3f}ms"
                    )
    return entries


def run(sizes: list[int], samples: int, gpu: int, say: Callable[[str], None]) -> TorchDocument:
    """Every measurement of `rdmabench copy --framework torch`, as a results document."""
    from ..hardware.gpu import import_cupy
    from ..results.files import document

    torch = import_torch()
    require_cuda(torch)
    torch.cuda.set_device(gpu)
    cupy = import_cupy()
    if cupy is not None:
        cupy.cuda.Device(gpu).use()
    entries = copies(torch, cupy, sizes, samples, say)
    largest = max(sizes)
    pinning = pin_cost(torch, largest, samples)
    say(
        f"# pin_memory() of {format_size(largest)}: {pinning['pin_memory_seconds'] * 1e3:.2f} ms a call; a copy into "
        f"a pooled pinned buffer: {pinning['pooled_copy_seconds'] * 1e3:.2f} ms"
    )
    overlaps = [overlap(torch, kind, largest) for kind in HOST_KINDS]
    for row in overlaps:
        say(
            f"# overlap h2d {row['host_memory']:>8} {format_size(largest)} on a side stream with matmuls: copy "
            f"{row['copy_seconds'] * 1e3:.1f} ms, compute {row['compute_seconds'] * 1e3:.1f} ms, together "
            f"{row['together_seconds'] * 1e3:.1f} ms: {row['share_hidden']:.0%} of the copy hidden"
        )
    loaders = [dataloader_rate(torch, pin, 200, 4 << 20, True) for pin in (False, True)]
    for rate in loaders:
        say(
            f"# DataLoader pin_memory={rate['pin_memory']}: {rate['batches_per_second']:.1f} batches/s of "
            f"{format_size(rate['batch_bytes'])} to the GPU, {rate['cpu_seconds_per_batch'] * 1e3:.2f} ms CPU a batch"
        )
    metadata = {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hosts": [socket.gethostname()],
        "world_size": 1,
        "ranks": [{"rank": 0, "host": socket.gethostname(), "gpus": [torch.cuda.get_device_name(gpu)]}],
        "units": {"bandwidth": "GB/s = 1e9 bytes/s", "size": "bytes"},
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cupy": getattr(cupy, "__version__", None),
        },
        "config": {"test": "copy", "framework": "torch", "sizes": sizes, "samples": samples, "gpu": gpu},
    }
    doc = document.document(metadata, [dict(e) for e in entries], complete=True)
    return {**doc, "pin_memory_cost": pinning, "overlap": overlaps, "dataloader": loaders}
