"""The memory a message lives in, as a name: what each mode means to UCX, to CuPy and to pinning.

A base module (no allocation here, see memory/buffers.py): limits, path checks, reports and the
configuration all reason about modes without loading CUDA or UCX.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, Literal, get_args

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
    def record(self) -> ModeRecord:
        """Everything the rest of the package asks of this mode (RECORDS below)."""
        return RECORDS[self]

    @property
    def on_device(self) -> bool:
        """The message's bytes live in GPU-addressable memory that CuPy handles (fill, check)."""
        return self.record.cupy

    @property
    def needs_gpu(self) -> bool:
        return self.record.needs_gpu

    @property
    def ucx_allocated(self) -> bool:
        """UCX allocates the memory (and lends it): only a one-sided protocol can provide it."""
        return self.record.allocation == "ucx"

    @property
    def staged(self) -> bool:
        """Device memory that UCX never sees: it moves through pinned host buffers."""
        return self.record.staging is not None

    @property
    def ucx_memory(self) -> UcxMemory:
        """The memory type UCX detects for the buffers it is handed, as its reports name it."""
        return self.record.ucx_memory

    @property
    def pinned_host(self) -> bool:
        """Page-locked host memory comes from the pool (staging buffers too)."""
        return self.record.allocation in ("pinned", "mapped")

    @property
    def cpu_copied(self) -> bool:
        """Host memory that a CPU copies between two processes (cma, shared memory)."""
        return self.record.cpu_copied


# The memory type UCX detects for the buffers it is handed, as its reports name it (wire/native maps
# each to its ucs_memory_type_t).
UcxMemory = Literal["host", "cuda", "cuda-managed"]
# How memory/buffers.py makes a mode's buffers.
Allocation = Literal["pageable", "pinned", "mapped", "device", "managed", "ucx"]
# How UCX is kept from seeing device memory: chunks through several pinned buffers, or one
# message-sized pinned buffer.
StagingKind = Literal["pipelined", "bounce"]
# How page-locked memory is pinned: cudaHostAlloc (mlock without a GPU), or cudaHostAlloc(Mapped).
Pin = Literal["cuda", "mapped"]


@dataclass(frozen=True)
class ModeRecord:
    """What a memory mode is, once: to UCX, to CuPy, to the allocator, to staging and to limits.
    A new mode is a member of MemoryMode, its record here, and its allocation in memory/buffers.py.
    A value outside its field's Literal is refused when the record is made (at import)."""

    ucx_memory: UcxMemory
    allocation: Allocation
    cupy: bool = False  # CuPy fills and checks the bytes (GPU-addressable memory)
    needs_gpu: bool = False
    # Host memory that a CPU copies between two processes (cma, shared memory): a cache-sized window.
    cpu_copied: bool = False
    staging: StagingKind | None = None  # None: UCX is handed the buffers
    pin: Pin | None = None  # None: not page-locked by us
    # A one-sided peer can poll a flag word in it with CPU loads (host memory, whoever allocated it).
    pollable: bool = False
    # GPU memory UCX is handed and moves without a CPU copy (cuda_ipc, GPUDirect RDMA): a round of it
    # at both ends takes the device's deep default window (measure/plan.py).
    gpu_direct: bool = False

    def __post_init__(self) -> None:
        for field in fields(self):
            allowed = _LITERALS.get(field.name)
            value = getattr(self, field.name)
            if allowed is not None and value is not None and value not in allowed:
                raise ValueError(f"ModeRecord.{field.name} {value!r}: not one of {', '.join(allowed)}")


_LITERALS: dict[str, tuple[str, ...]] = {
    "ucx_memory": get_args(UcxMemory),
    "allocation": get_args(Allocation),
    "staging": get_args(StagingKind),
    "pin": get_args(Pin),
}


def mode_named(text: Any) -> MemoryMode | None:
    """The mode a results file names, or None for a name this version does not know."""
    try:
        return MemoryMode(text)
    except ValueError:
        return None


RECORDS: dict[MemoryMode, ModeRecord] = {
    MemoryMode.PAGEABLE: ModeRecord("host", "pageable", cpu_copied=True, pollable=True),
    MemoryMode.PINNED: ModeRecord("host", "pinned", cpu_copied=True, pin="cuda", pollable=True),
    # Mapped memory is pinned host memory to UCX.
    MemoryMode.MAPPED: ModeRecord("host", "mapped", needs_gpu=True, cpu_copied=True, pin="mapped", pollable=True),
    MemoryMode.DEVICE: ModeRecord("cuda", "device", cupy=True, needs_gpu=True, gpu_direct=True),
    # Managed memory may sit on the GPU: not a CPU copy.
    MemoryMode.MANAGED: ModeRecord("cuda-managed", "managed", cupy=True, needs_gpu=True),
    MemoryMode.STAGED: ModeRecord("host", "device", cupy=True, needs_gpu=True, staging="pipelined", pin="cuda"),
    MemoryMode.BOUNCE: ModeRecord("host", "device", cupy=True, needs_gpu=True, staging="bounce", pin="cuda"),
    MemoryMode.UCX: ModeRecord("host", "ucx", cpu_copied=True, pollable=True),
}

# What each mode is, in a few words, for `run --help` (every mode has its line).
MODE_HELP = {
    MemoryMode.PAGEABLE: "pageable host",
    MemoryMode.PINNED: "pinned (page-locked) host",
    MemoryMode.DEVICE: "device (GPU memory handed to UCX: CUDA IPC, GPUDirect RDMA)",
    MemoryMode.MANAGED: "managed (cudaMallocManaged)",
    MemoryMode.MAPPED: "mapped (pinned host memory mapped into the GPU)",
    MemoryMode.STAGED: "staged (GPU memory sent through pinned chunks, double-buffered on a copy stream)",
    MemoryMode.BOUNCE: "bounce (GPU memory sent through one message-sized pinned buffer, unpipelined)",
    MemoryMode.UCX: "ucx (one-sided tests: host memory UCX allocates, as ucx_perftest's)",
}

# How pinned memory was obtained; the results record it because the two differ in what the GPU can DMA.
PIN_CUDA = "cudaHostAlloc"
PIN_MLOCK = "mlock"
PIN_MAPPED = "cudaHostAlloc(Mapped)"


def pinned_method(mode: MemoryMode, have_gpu: bool) -> str | None:
    """How an end of this mode pins its page-locked memory (staged ends: their staging buffers)."""
    pin = mode.record.pin
    if pin == "mapped":
        return PIN_MAPPED
    if pin == "cuda":
        return PIN_CUDA if have_gpu else PIN_MLOCK
    return None
