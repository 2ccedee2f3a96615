"""The memory a message lives in, as a name: what each mode means to UCX, to CuPy and to pinning.

A base module (no allocation here, see memory/buffers.py): limits, path checks, reports and the
configuration all reason about modes without loading CUDA or UCX.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from .errors import ConfigError


class MemoryMode(str, Enum):
    PAGEABLE = "pageable"
    PINNED = "pinned"
    DEVICE = "device"
    MANAGED = "managed"  # cudaMallocManaged: one address on host and GPU, pages migrate on access
    MAPPED = "mapped"  # cudaHostAlloc(Mapped): pinned host memory a kernel can read across PCIe
    STAGED = "staged"  # device memory sent through pinned chunks: copy streams, events, double buffering
    BOUNCE = "bounce"  # device memory sent through one message-sized pinned buffer, one step after another
    # Host memory UCX allocates itself (ucp_mem_map ALLOCATE, as ucx_perftest does): a shared-memory
    # segment a peer on the node attaches, so small puts are CPU stores. One-sided tests only.
    UCX = "ucx"

    @classmethod
    def parse(cls, text: str) -> MemoryMode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ConfigError(f"unknown memory mode {text!r}: choose one of {choices}") from None

    @property
    def on_device(self) -> bool:
        """The message's bytes live in GPU-addressable memory that CuPy handles (fill, check)."""
        return self in _CUPY_MODES

    @property
    def needs_gpu(self) -> bool:
        return self not in (MemoryMode.PAGEABLE, MemoryMode.PINNED, MemoryMode.UCX)

    @property
    def ucx_allocated(self) -> bool:
        """UCX allocates the memory (and lends it): only a one-sided protocol can provide it."""
        return self is MemoryMode.UCX

    @property
    def staged(self) -> bool:
        """Device memory that UCX never sees: it moves through pinned host buffers."""
        return self in (MemoryMode.STAGED, MemoryMode.BOUNCE)

    @property
    def ucx_memory(self) -> str:
        """The memory type UCX detects for the buffers it is handed, as its reports name it."""
        if self is MemoryMode.DEVICE:
            return "cuda"
        if self is MemoryMode.MANAGED:
            return "cuda-managed"
        return "host"

    @property
    def pinned_host(self) -> bool:
        """Page-locked host memory comes from the pool (staging buffers too)."""
        return self in (MemoryMode.PINNED, MemoryMode.MAPPED)


def mode_named(text: Any) -> MemoryMode | None:
    """The mode a results file names, or None for a name this version does not know."""
    try:
        return MemoryMode(text)
    except ValueError:
        return None


_CUPY_MODES = frozenset((MemoryMode.DEVICE, MemoryMode.MANAGED, MemoryMode.STAGED, MemoryMode.BOUNCE))

# How pinned memory was obtained; the results record it because the two differ in what the GPU can DMA.
PIN_CUDA = "cudaHostAlloc"
PIN_MLOCK = "mlock"
PIN_MAPPED = "cudaHostAlloc(Mapped)"


def pinned_method(mode: MemoryMode, have_gpu: bool) -> str | None:
    """How an end of this mode pins its page-locked memory (staged ends: their staging buffers)."""
    if mode is MemoryMode.MAPPED:
        return PIN_MAPPED
    if mode in (MemoryMode.PINNED, MemoryMode.STAGED, MemoryMode.BOUNCE):
        return PIN_CUDA if have_gpu else PIN_MLOCK
    return None
