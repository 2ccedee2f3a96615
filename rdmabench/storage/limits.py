"""What a path can reach at best: the device's own O_DIRECT rates into and out of host memory, measured
on the run's file, and the GPU's PCIe link; the smaller is an entry's limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from .. import stats
from ..hardware import storage as disk
from .config import StorageConfig
from .datafile import aligned, pattern
from .paths import Region
from .sampling import measure

_LIMIT_REQUEST = 16 << 20  # requests of the O_DIRECT rate measured as the device's limit


class LinkLimit(TypedDict):
    """An entry's limit: its GB/s, what kind of limit (storage, PCIe) and which, in words."""

    gbps: float
    kind: str
    what: str


@dataclass
class Limits:
    """The device's own O_DIRECT rates into and out of host memory (measured on the run's file) and the
    GPU's PCIe link: what a path can reach at best."""

    device_read_gbps: float | None = None
    device_write_gbps: float | None = None
    pcie_gbps: float | None = None
    pcie: str | None = None

    def limit(self, reading: bool, on_gpu: bool) -> LinkLimit | None:
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


def pcie_link(gpu: int) -> tuple[float | None, str | None]:
    """The GPU's PCIe link: its GB/s and how it is described, or (None, None) where it is unknown."""
    from ..hardware.gpu import select_gpu
    from ..hardware.topology import gpu_topology

    info = select_gpu(gpu)
    if info is None:
        return None, None
    link = gpu_topology(gpu, info.pci_bus_id, []).pcie
    return (link.gbps, link.describe()) if link else (None, None)


def device_rate(config: StorageConfig, reading: bool, target: str, size: int) -> float | None:
    """The pinned host path (O_DIRECT into page-aligned host memory) in large requests: the device."""
    if disk.direct_io_supported(target) is not True or size % disk.DIRECT_ALIGNMENT:
        return None
    request = min(_LIMIT_REQUEST, size // disk.DIRECT_ALIGNMENT * disk.DIRECT_ALIGNMENT)
    region = Region(aligned(size), np, False)
    if not reading:
        region.array[:] = pattern(np, 0, size)
    quiet = StorageConfig(file=target, samples=config.samples, validate=False)
    # Several requests in flight, as a device needs to show its rate (an NVMe drive wants a queue).
    measured = measure(quiet, "pinned", reading, target, region, request, max(4, *config.threads))
    return stats.median(measured.gbps)
