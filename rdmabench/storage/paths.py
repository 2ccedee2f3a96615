"""The ways `rdmabench storage` moves a file's bytes into memory and back, one worker thread each:

- `pageable`: read() into ordinary memory, then (for GPU memory) a copy to the GPU: the bounce the
  driver makes for every pageable read; writes copy back from the GPU, then write() through the
  page cache (fdatasync at the end of a sample, inside the clock).
- `pinned`: O_DIRECT reads into page-locked buffers, each buffer's copy to the GPU queued on a copy
  stream while the next buffer is read (double buffering with two or more buffers); writes copy the
  next request off the GPU while the current one is written with O_DIRECT. For host memory the
  destination itself is page-locked and read into with O_DIRECT: the device's own rate.
- `kvikio`: KvikIO's CuFile pread/pwrite straight between the file and GPU memory: cuFile, with
  GPUDirect Storage where the driver and file system allow it, else KvikIO's POSIX compatibility
  mode (which `kvikio_mode` reports: never called GDS when it was not).

A worker handles every `threads`-th request of a sample and times each one: until its bytes are in
the destination (pageable, kvikio) or, for the pinned pipeline, in its pinned buffer (the copy to the
GPU overlaps the next read, which is the point of the pipeline).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ConfigError, ResourceError
from ..memory.buffers import Buffer, allocate
from ..modes import MemoryMode

PATHS = ("pageable", "pinned", "kvikio")
GPU_ONLY_PATHS = ("kvikio",)
_H2D, _D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost


@dataclass
class Region:
    """The memory a sample reads the file into (or writes it from): the file's bytes, offset for
    offset, in GPU memory (`xp` is CuPy) or page-aligned host memory (NumPy)."""

    array: Any
    xp: ModuleType  # numpy or cupy
    on_gpu: bool

    @property
    def address(self) -> int:
        return int(self.array.data.ptr) if self.on_gpu else int(self.array.ctypes.data)

    def host_view(self, offset: int, nbytes: int) -> memoryview:
        return memoryview(self.array.data)[offset : offset + nbytes]


Requests = list[tuple[int, int]]  # (file offset, bytes)


def kvikio_mode() -> str:
    """What KvikIO will really do: 'cuFile (GPUDirect Storage)' or 'POSIX (compatibility mode)'."""
    import kvikio.defaults

    compat = kvikio.defaults.is_compat_mode_preferred()
    return "POSIX compatibility mode (no GPUDirect Storage)" if compat else "cuFile (GPUDirect Storage)"


def import_kvikio() -> Any:
    try:
        import kvikio
    except Exception as exc:  # a broken CUDA install raises more than ImportError
        raise ConfigError(
            f"the kvikio path needs KvikIO ({exc}): pip install 'rdmabench[storage-cu13]', or leave kvikio out of --paths"
        ) from None
    return kvikio


def _checked(done: int, nbytes: int, what: str, offset: int) -> None:
    if done != nbytes:
        raise ResourceError(f"{what} moved {done} of {nbytes} bytes at offset {offset} (is the file shorter?)")


class Worker:
    """One thread's share of a sample on one path; subclasses move the bytes."""

    def __init__(self, path: str, fd: int, region: Region, request: int, buffers: int, reading: bool) -> None:
        self.path, self.fd, self.region, self.request = path, fd, region, request
        self.buffers, self.reading = buffers, reading

    def run(self, requests: Requests, reading: bool, times: list[float]) -> None:
        for offset, nbytes in requests:
            began = time.perf_counter()
            (self.read if reading else self.write)(offset, nbytes)
            times.append(time.perf_counter() - began)

    def read(self, offset: int, nbytes: int) -> None:
        raise NotImplementedError

    def write(self, offset: int, nbytes: int) -> None:
        raise NotImplementedError

    def drain(self) -> None:
        """Wait for what this worker queued (copies to or from the GPU)."""

    def close(self) -> None:
        """Give back buffers and handles."""


class PageableWorker(Worker):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.bounce = np.empty(self.request, dtype=np.uint8) if self.region.on_gpu else None

    def read(self, offset: int, nbytes: int) -> None:
        if self.bounce is None:
            _checked(os.preadv(self.fd, [self.region.host_view(offset, nbytes)], offset), nbytes, "read()", offset)
            return
        _checked(os.preadv(self.fd, [self.bounce.data[:nbytes]], offset), nbytes, "read()", offset)
        self.region.array[offset : offset + nbytes].set(self.bounce[:nbytes])  # pageable: a synchronous copy

    def write(self, offset: int, nbytes: int) -> None:
        if self.bounce is None:
            _checked(os.pwrite(self.fd, self.region.host_view(offset, nbytes), offset), nbytes, "write()", offset)
            return
        self.region.array[offset : offset + nbytes].get(out=self.bounce[:nbytes])
        _checked(os.pwrite(self.fd, self.bounce.data[:nbytes], offset), nbytes, "write()", offset)


class PinnedWorker(Worker):
    """O_DIRECT between the file and page-locked buffers; for GPU memory, `buffers` of them in turn,
    each one's copy queued on this worker's stream while the next request is read or written."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if not self.region.on_gpu:  # the destination is page-locked already: no staging
            self.staging: list[Buffer] = []
            return
        self.staging = [allocate(MemoryMode.PINNED, self.request, True) for _ in range(self.buffers)]
        self.stream = self.region.xp.cuda.Stream(non_blocking=True)  # xp: CuPy, the region being on the GPU
        self.events = [self.region.xp.cuda.Event(disable_timing=True) for _ in self.staging]

    def run(self, requests: Requests, reading: bool, times: list[float]) -> None:
        if not self.staging:
            return super().run(requests, reading, times)
        if reading:
            return self._read_pipeline(requests, times)
        return self._write_pipeline(requests, times)

    def read(self, offset: int, nbytes: int) -> None:  # host memory: straight into the destination
        _checked(os.preadv(self.fd, [self.region.host_view(offset, nbytes)], offset), nbytes, "O_DIRECT read", offset)

    def write(self, offset: int, nbytes: int) -> None:
        done = os.pwrite(self.fd, self.region.host_view(offset, nbytes), offset)
        _checked(done, nbytes, "O_DIRECT write", offset)

    def _copy(self, slot: int, offset: int, nbytes: int, kind: int) -> None:
        host, device = self.staging[slot].address, self.region.address + offset
        dst, src = (device, host) if kind == _H2D else (host, device)
        self.region.xp.cuda.runtime.memcpyAsync(dst, src, nbytes, kind, self.stream.ptr)
        self.events[slot].record(self.stream)

    def _read_pipeline(self, requests: Requests, times: list[float]) -> None:
        for index, (offset, nbytes) in enumerate(requests):
            slot = index % len(self.staging)
            self.events[slot].synchronize()  # this buffer's last copy to the GPU is done
            began = time.perf_counter()
            view = self.staging[slot].array.data[:nbytes]
            _checked(os.preadv(self.fd, [view], offset), nbytes, "O_DIRECT read", offset)
            times.append(time.perf_counter() - began)
            self._copy(slot, offset, nbytes, _H2D)

    def _write_pipeline(self, requests: Requests, times: list[float]) -> None:
        ahead = len(self.staging)
        for index, (offset, nbytes) in enumerate(requests[:ahead]):
            self._copy(index, offset, nbytes, _D2H)
        for index, (offset, nbytes) in enumerate(requests):
            slot = index % ahead
            self.events[slot].synchronize()  # its bytes are off the GPU
            began = time.perf_counter()
            view = self.staging[slot].array.data[:nbytes]
            _checked(os.pwrite(self.fd, view, offset), nbytes, "O_DIRECT write", offset)
            times.append(time.perf_counter() - began)
            if index + ahead < len(requests):
                self._copy(slot, *requests[index + ahead], _D2H)

    def drain(self) -> None:
        if self.staging:
            self.stream.synchronize()

    def close(self) -> None:
        self.drain()
        for buffer in self.staging:
            buffer.release()
        self.staging = []


class KvikioWorker(Worker):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        kvikio = import_kvikio()
        self.file = kvikio.CuFile(self.path, "r" if self.reading else "r+")

    def read(self, offset: int, nbytes: int) -> None:
        done = self.file.pread(self.region.array[offset : offset + nbytes], nbytes, offset).get()
        _checked(int(done), nbytes, "KvikIO pread", offset)

    def write(self, offset: int, nbytes: int) -> None:
        done = self.file.pwrite(self.region.array[offset : offset + nbytes], nbytes, offset).get()
        _checked(int(done), nbytes, "KvikIO pwrite", offset)

    def close(self) -> None:
        self.file.close()


WORKERS: dict[str, Callable[..., Worker]] = {"pageable": PageableWorker, "pinned": PinnedWorker, "kvikio": KvikioWorker}


def open_flags(path_name: str, reading: bool) -> int:
    """How a path opens the file: O_DIRECT for the pinned path (the page cache bypassed)."""
    flags = os.O_RDONLY if reading else os.O_WRONLY
    return flags | (getattr(os, "O_DIRECT", 0) if path_name == "pinned" else 0)


def describe(path_name: str, on_gpu: bool, buffers: int) -> str:
    """What moved the bytes, for the entry's `transport`."""
    if path_name == "pageable":
        return "read()/write() through the page cache" + (" + a copy to/from the GPU (the bounce)" if on_gpu else "")
    if path_name == "pinned":
        if not on_gpu:
            return "O_DIRECT into/from page-locked host memory (the device's own rate)"
        return f"O_DIRECT into/from {buffers} pinned buffers, each copied on a copy stream while the next moves"
    return f"KvikIO CuFile: {kvikio_mode()}"
