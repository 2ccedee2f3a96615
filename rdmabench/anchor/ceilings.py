"""Copy-engine ceilings for device-to-device figures: what CUDA's own peer copies move between the
GPUs of this node (cudaMemcpyPeerAsync on streams, timed by CUDA events, medians). The anchor sets
rdmabench's device patterns against them: one link against one peer copy, bibw against both
directions copying at once, an incast against every GPU copying into GPU 0 at once. Each returns None
where the node has too few GPUs."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from ..hardware.gpu import import_cupy, visible_gpu_count

WARMUP = 3  # timed copies not counted: the first ones pay for peer mappings and stream creation


@dataclass(frozen=True)
class PeerCopy:
    """One cudaMemcpyPeerAsync: `nbytes` from `src` on GPU `src_device` to `dst` on `dst_device`,
    issued on a stream of GPU `issuer`, whose copy engine runs it."""

    issuer: int
    dst: int
    dst_device: int
    src: int
    src_device: int
    nbytes: int


def _enable_peer_access(cupy: ModuleType, device: int, peer: int) -> None:
    """Let `device` reach `peer`'s memory directly (over NVLink or PCIe), where the node allows it."""
    runtime = cupy.cuda.runtime
    if runtime.deviceCanAccessPeer(device, peer):
        with cupy.cuda.Device(device):
            try:
                runtime.deviceEnablePeerAccess(peer)
            except runtime.CUDARuntimeError:
                pass  # already enabled


def copies_together_seconds(cupy: ModuleType, copies: list[PeerCopy], repeats: int = 20, lead: int = 0) -> float:
    """Seconds from one start until the last of `copies` has finished, the upper median of `repeats`
    after WARMUP. The start and end events are recorded on a stream of GPU `lead`; each copy runs on
    a stream of its own GPU's, started by the start event and joined into the end. The first copy
    that `lead` issues runs on the lead stream itself, so a single copy is timed as on a plain
    stream. Copies are issued in list order."""
    runtime = cupy.cuda.runtime
    with cupy.cuda.Device(lead):
        lead_stream = cupy.cuda.Stream(non_blocking=True)
    streams = []
    for position, copy in enumerate(copies):
        first_of_lead = copy.issuer == lead and all(c.issuer != lead for c in copies[:position])
        with cupy.cuda.Device(copy.issuer):
            streams.append(lead_stream if first_of_lead else cupy.cuda.Stream(non_blocking=True))
    times = []
    for index in range(repeats + WARMUP):
        with cupy.cuda.Device(lead):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(lead_stream)
        joined = []
        for copy, stream in zip(copies, streams, strict=True):
            with cupy.cuda.Device(copy.issuer):
                if stream is not lead_stream:
                    stream.wait_event(start)
                runtime.memcpyPeerAsync(copy.dst, copy.dst_device, copy.src, copy.src_device, copy.nbytes, stream.ptr)
                if stream is not lead_stream:
                    done = cupy.cuda.Event(disable_timing=True)
                    done.record(stream)
                    joined.append(done)
        with cupy.cuda.Device(lead):
            for done in joined:
                lead_stream.wait_event(done)
            end.record(lead_stream)
            end.synchronize()
            if index >= WARMUP:
                times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    times.sort()
    return float(times[len(times) // 2])


def peer_copy_gbps(size: int, repeats: int = 20) -> float | None:
    """GPU 0 -> GPU 1 copy-engine bandwidth (cudaMemcpyPeerAsync, CUDA events, median), the ceiling
    a device-to-device transfer between those GPUs can approach. None with fewer than two GPUs."""
    cupy = import_cupy()
    if cupy is None or visible_gpu_count() < 2:
        return None
    with cupy.cuda.Device(1):
        dst = cupy.empty(size, dtype=cupy.uint8)
    _enable_peer_access(cupy, 0, 1)
    with cupy.cuda.Device(0):
        src = cupy.ones(size, dtype=cupy.uint8)
    copy = PeerCopy(0, dst.data.ptr, 1, src.data.ptr, 0, size)
    return size / copies_together_seconds(cupy, [copy], repeats) / 1e9


def bidirectional_copy_gbps(size: int, repeats: int = 20) -> float | None:
    """GPU 0 -> GPU 1 and GPU 1 -> GPU 0 copy-engine copies at once (cudaMemcpyPeerAsync on a stream
    of each GPU, both started by one event and joined into one end event): both directions' bytes
    over the time until the later one finished, median of `repeats`. The ceiling of bibw between
    those GPUs. None with fewer than two GPUs."""
    cupy = import_cupy()
    if cupy is None or visible_gpu_count() < 2:
        return None
    buffers = {}
    for device in (0, 1):
        with cupy.cuda.Device(device):
            buffers[device] = (cupy.ones(size, dtype=cupy.uint8), cupy.empty(size, dtype=cupy.uint8))
        _enable_peer_access(cupy, device, 1 - device)
    # GPU 1's copy is issued first, on its own stream; GPU 0's on the lead stream that times both.
    copies = [
        PeerCopy(1, buffers[0][1].data.ptr, 0, buffers[1][0].data.ptr, 1, size),
        PeerCopy(0, buffers[1][1].data.ptr, 1, buffers[0][0].data.ptr, 0, size),
    ]
    return 2 * size / copies_together_seconds(cupy, copies, repeats) / 1e9


def all_to_one_copy_gbps(size: int, repeats: int = 20) -> float | None:
    """Every other GPU copies `size` bytes into its own buffer on GPU 0, all at once: the ceiling of
    an incast to GPU 0 with one rank a GPU. The copies run once issued by the sources' copy engines
    (each pushes) and once by GPU 0's (it pulls, as UCX's CUDA IPC receiver does); each way all start
    on one event and join into one end event; the better way's aggregate (all bytes over the time
    until the last copy finished), median of `repeats`. None with fewer than two GPUs."""
    cupy = import_cupy()
    gpus = visible_gpu_count() if cupy is not None else 0
    if cupy is None or gpus < 2:
        return None
    sources = list(range(1, gpus))
    src, dst = {}, {}
    for device in sources:
        with cupy.cuda.Device(device):
            src[device] = cupy.ones(size, dtype=cupy.uint8)
        with cupy.cuda.Device(0):
            dst[device] = cupy.empty(size, dtype=cupy.uint8)
        _enable_peer_access(cupy, device, 0)
        _enable_peer_access(cupy, 0, device)
    best = 0.0
    for pulled in (False, True):
        copies = [
            PeerCopy(0 if pulled else device, dst[device].data.ptr, 0, src[device].data.ptr, device, size)
            for device in sources
        ]
        best = max(best, len(sources) * size / copies_together_seconds(cupy, copies, repeats) / 1e9)
    return best
