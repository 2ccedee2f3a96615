"""Copy-engine ceilings for device-to-device figures: what CUDA's own peer copies move between the
GPUs of this node (cudaMemcpyPeerAsync on streams, timed by CUDA events, medians). The anchor sets
rdmabench's device patterns against them: one link against one peer copy, bibw against both
directions copying at once, an incast against every GPU copying into GPU 0 at once. Each returns None
where the node has too few GPUs."""

from __future__ import annotations

from typing import Any

from ..hardware.gpu import import_cupy, visible_gpu_count


def _enable_peer_access(cupy: Any, device: int, peer: int) -> None:
    """Let `device` reach `peer`'s memory directly (over NVLink or PCIe), where the node allows it."""
    runtime = cupy.cuda.runtime
    if runtime.deviceCanAccessPeer(device, peer):
        with cupy.cuda.Device(device):
            try:
                runtime.deviceEnablePeerAccess(peer)
            except runtime.CUDARuntimeError:
                pass  # already enabled


def peer_copy_gbps(size: int, repeats: int = 20) -> float | None:
    """GPU 0 -> GPU 1 copy-engine bandwidth (cudaMemcpyPeerAsync, CUDA events, median), the ceiling
    a device-to-device transfer between those GPUs can approach. None with fewer than two GPUs."""
    cupy = import_cupy()
    if cupy is None or visible_gpu_count() < 2:
        return None
    runtime = cupy.cuda.runtime
    with cupy.cuda.Device(1):
        dst = cupy.empty(size, dtype=cupy.uint8)
    _enable_peer_access(cupy, 0, 1)
    with cupy.cuda.Device(0):
        src = cupy.ones(size, dtype=cupy.uint8)
        stream = cupy.cuda.Stream(non_blocking=True)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        times = []
        for index in range(repeats + 3):
            start.record(stream)
            runtime.memcpyPeerAsync(dst.data.ptr, 1, src.data.ptr, 0, size, stream.ptr)
            end.record(stream)
            end.synchronize()
            if index >= 3:
                times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    times.sort()
    return size / times[len(times) // 2] / 1e9


def bidirectional_copy_gbps(size: int, repeats: int = 20) -> float | None:
    """GPU 0 -> GPU 1 and GPU 1 -> GPU 0 copy-engine copies at once (cudaMemcpyPeerAsync on a stream
    of each GPU, both started by one event and joined into one end event): both directions' bytes
    over the time until the later one finished, median of `repeats`. The ceiling of bibw between
    those GPUs. None with fewer than two GPUs."""
    cupy = import_cupy()
    if cupy is None or visible_gpu_count() < 2:
        return None
    runtime = cupy.cuda.runtime
    buffers, streams = {}, {}
    for device in (0, 1):
        with cupy.cuda.Device(device):
            buffers[device] = (cupy.ones(size, dtype=cupy.uint8), cupy.empty(size, dtype=cupy.uint8))
            streams[device] = cupy.cuda.Stream(non_blocking=True)
        _enable_peer_access(cupy, device, 1 - device)
    times = []
    for index in range(repeats + 3):
        with cupy.cuda.Device(0):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(streams[0])
        with cupy.cuda.Device(1):
            joined = cupy.cuda.Event(disable_timing=True)
            streams[1].wait_event(start)
            runtime.memcpyPeerAsync(buffers[0][1].data.ptr, 0, buffers[1][0].data.ptr, 1, size, streams[1].ptr)
            joined.record(streams[1])
        with cupy.cuda.Device(0):
            runtime.memcpyPeerAsync(buffers[1][1].data.ptr, 1, buffers[0][0].data.ptr, 0, size, streams[0].ptr)
            streams[0].wait_event(joined)
            end.record(streams[0])
            end.synchronize()
            if index >= 3:
                times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    times.sort()
    return 2 * size / times[len(times) // 2] / 1e9


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
    for issuer in ("source", "destination"):
        streams = {}
        for device in sources:  # a stream a copy, on the GPU whose copy engine runs it
            with cupy.cuda.Device(device if issuer == "source" else 0):
                streams[device] = cupy.cuda.Stream(non_blocking=True)
        with cupy.cuda.Device(0):
            lead = cupy.cuda.Stream(non_blocking=True)  # starts every copy and waits for all
        times = []
        for index in range(repeats + 3):
            with cupy.cuda.Device(0):
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(lead)
            joined = []
            for device in sources:
                with cupy.cuda.Device(device if issuer == "source" else 0):
                    stream = streams[device]
                    stream.wait_event(start)
                    cupy.cuda.runtime.memcpyPeerAsync(
                        dst[device].data.ptr, 0, src[device].data.ptr, device, size, stream.ptr
                    )
                    done = cupy.cuda.Event(disable_timing=True)
                    done.record(stream)
                    joined.append(done)
            with cupy.cuda.Device(0):
                for done in joined:
                    lead.wait_event(done)
                end.record(lead)
                end.synchronize()
                if index >= 3:
                    times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        times.sort()
        best = max(best, len(sources) * size / times[len(times) // 2] / 1e9)
    return best
