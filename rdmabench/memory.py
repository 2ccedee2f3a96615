"""The memory a message lives in: pageable host, pinned (page-locked) host, or CUDA device memory."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from enum import Enum
from typing import Any

import numpy as np

from .errors import ConfigError, ResourceError
from .gpu import gpu_unavailable_reason, import_cupy
from .units import format_size


class MemoryMode(str, Enum):
    PAGEABLE = "pageable"
    PINNED = "pinned"
    DEVICE = "device"

    @classmethod
    def parse(cls, text: str) -> MemoryMode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ConfigError(f"unknown memory mode {text!r}: choose one of {choices}") from None

    @property
    def on_device(self) -> bool:
        return self is MemoryMode.DEVICE


# How pinned memory was obtained; the results record it because the two differ in what the GPU can DMA.
PIN_CUDA = "cudaHostAlloc"
PIN_MLOCK = "mlock"


class Buffer:
    """One message buffer: `.array` is a 1-D uint8 NumPy (host) or CuPy (device) array of `nbytes`,
    backed by `capacity` bytes (rounded up to whole 64-bit words so patterns work on words)."""

    def __init__(self, array: Any, mode: MemoryMode, pinned_method: str | None, keepalive: Any = None):
        self.array = array
        self.whole = array  # the allocation itself; `array` may be a prefix of it when reused
        self.capacity = int(array.size)
        self.mode = mode
        self.pinned_method = pinned_method
        self._keepalive = keepalive
        self._unlock: Any = None

    @property
    def xp(self) -> Any:
        if self.mode.on_device:
            return import_cupy()
        return np

    def release(self) -> None:
        """Give the memory back; pinned buffers go back to the pool, to serve the next size."""
        if self.mode is MemoryMode.PINNED and self.array is not None:
            PINNED_POOL.give_back(self)
            self.array = None
            return
        self.free()

    def free(self) -> None:
        if self._unlock is not None:
            self._unlock()
            self._unlock = None
        self.array = None
        self._keepalive = None


class PinnedPool:
    """Pinned buffers are allocated once and reused for every later need they are big enough for:
    pinning costs far more than a malloc, and page-locked memory is scarce. `cap` bounds how much
    the pool may hold (None: no bound beyond the memlock limit or the CUDA driver's)."""

    def __init__(self) -> None:
        self.cap: int | None = None
        self._free: list[Buffer] = []
        self.pinned_bytes = 0  # in the pool and in use
        self.allocations = 0  # how many times memory was actually pinned

    def take(self, capacity: int, have_gpu: bool) -> Buffer:
        fits = [
            b for b in self._free if b.capacity >= capacity and b.pinned_method == (PIN_CUDA if have_gpu else PIN_MLOCK)
        ]
        if fits:
            buffer = min(fits, key=lambda b: b.capacity)
            self._free.remove(buffer)
            buffer.array = buffer.whole[:capacity]
            buffer.array[:] = 0  # like a new allocation: no bytes of an earlier size survive
            return buffer
        if self.cap is not None and self.pinned_bytes + capacity > self.cap:
            # Smaller buffers no later size can use make room first.
            for small in sorted((b for b in self._free if b.capacity < capacity), key=lambda b: b.capacity):
                self._forget(small)
                if self.pinned_bytes + capacity <= self.cap:
                    break
        if self.cap is not None and self.pinned_bytes + capacity > self.cap:
            raise ResourceError(
                f"pinning {format_size(capacity)} more would hold {format_size(self.pinned_bytes + capacity)} "
                f"page-locked, over the --max-pinned cap of {format_size(self.cap)}; raise the cap or use smaller sizes or --window"
            )
        buffer = _allocate_cuda_pinned(capacity) if have_gpu else _allocate_mlocked(capacity)
        self.pinned_bytes += capacity
        self.allocations += 1
        return buffer

    def give_back(self, buffer: Buffer) -> None:
        self._free.append(buffer)

    def _forget(self, buffer: Buffer) -> None:
        self._free.remove(buffer)
        self.pinned_bytes -= buffer.capacity
        buffer.array = buffer.whole
        buffer.free()

    def clear(self) -> None:
        for buffer in list(self._free):
            self._forget(buffer)


PINNED_POOL = PinnedPool()


def word_capacity(nbytes: int) -> int:
    return (nbytes + 7) // 8 * 8


def allocate(mode: MemoryMode, nbytes: int, have_gpu: bool) -> Buffer:
    """Allocate a zeroed buffer of at least `nbytes` in `mode`.

    Pinned memory comes from cudaHostAlloc where a GPU is present (so the GPU can DMA it) and from
    mlock otherwise; both are page-locked, but only the first is registered with the CUDA driver.
    """
    capacity = word_capacity(nbytes)
    if mode is MemoryMode.PAGEABLE:
        return Buffer(np.zeros(capacity, dtype=np.uint8), mode, None)
    if mode is MemoryMode.DEVICE:
        cupy = import_cupy()
        if cupy is None or not have_gpu:
            raise ResourceError(f"device memory needs a GPU: {gpu_unavailable_reason()}")
        try:
            return Buffer(cupy.zeros(capacity, dtype=cupy.uint8), mode, None)
        except cupy.cuda.memory.OutOfMemoryError:
            raise ResourceError(
                f"out of GPU memory allocating {format_size(nbytes)}; use smaller sizes or a smaller --window"
            ) from None
    return PINNED_POOL.take(capacity, have_gpu)


def _allocate_cuda_pinned(capacity: int) -> Buffer:
    cupy = import_cupy()
    assert cupy is not None
    try:
        memory = cupy.cuda.PinnedMemory(capacity)
    except Exception as exc:
        raise ResourceError(f"cudaHostAlloc of {format_size(capacity)} failed: {exc}") from None
    pointer = cupy.cuda.PinnedMemoryPointer(memory, 0)
    array = np.frombuffer(pointer, dtype=np.uint8, count=capacity)
    array[:] = 0
    return Buffer(array, MemoryMode.PINNED, PIN_CUDA, keepalive=(memory, pointer))


_libc: Any = None


def _load_libc() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def _allocate_mlocked(capacity: int) -> Buffer:
    region = mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    array = np.frombuffer(region, dtype=np.uint8, count=capacity)
    address = array.ctypes.data
    libc = _load_libc()
    if libc.mlock(ctypes.c_void_p(address), ctypes.c_size_t(capacity)) != 0:
        err = ctypes.get_errno()
        del array
        region.close()
        raise ResourceError(
            f"cannot pin {format_size(capacity)} with mlock ({os.strerror(err)}); "
            f"raise the memlock limit (ulimit -l, now {memlock_limit_text()}) or use smaller sizes"
        )
    buffer = Buffer(array, MemoryMode.PINNED, PIN_MLOCK, keepalive=region)

    def unlock() -> None:
        libc.munlock(ctypes.c_void_p(address), ctypes.c_size_t(capacity))

    buffer._unlock = unlock
    return buffer


def memlock_limit_text() -> str:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return "unlimited" if soft == resource.RLIM_INFINITY else format_size(soft)


_CAP_IPC_LOCK = 14  # the capability that lets a process lock memory beyond RLIMIT_MEMLOCK


def can_lock_beyond_limit() -> bool:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_IPC_LOCK & 1)
    except (OSError, ValueError):
        pass
    return False


def mlock_problem(nbytes: int) -> str | None:
    """Why mlock of `nbytes` would fail under this process's memlock limit, or None."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or nbytes <= soft or can_lock_beyond_limit():
        return None
    return (
        f"pinned memory without a GPU is locked with mlock: {format_size(nbytes)} per rank is more than "
        f"the memlock limit of {memlock_limit_text()} (ulimit -l); raise the limit or use smaller --sizes or --window"
    )


def synchronize(mode: MemoryMode) -> None:
    """Wait for GPU work that wrote a device buffer before UCX reads it."""
    if mode.on_device:
        cupy = import_cupy()
        assert cupy is not None
        cupy.cuda.get_current_stream().synchronize()
