"""GPU discovery and the one-GPU-per-local-rank rule. CuPy is optional: without it there is no GPU."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypedDict


class GpuRecord(TypedDict):
    """A GpuInfo as a results file's metadata keeps it."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    visible_count: int


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    visible_count: int

    def to_dict(self) -> GpuRecord:
        return {
            "index": self.index, "name": self.name, "uuid": self.uuid, "pci_bus_id": self.pci_bus_id,
            "visible_count": self.visible_count,
        }  # fmt: skip


def import_cupy() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # an unusable CUDA install raises more than ImportError
        return None
    return cupy


def visible_gpu_count() -> int:
    """GPUs this process can use (after CUDA_VISIBLE_DEVICES); 0 without CuPy or a driver."""
    cupy = import_cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def gpu_unavailable_reason() -> str:
    if import_cupy() is None:
        return "CuPy is not installed (pip install 'rdmabench[gpu]')"
    return "no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)"


def select_gpu(local_rank: int) -> GpuInfo | None:
    """Make GPU (local_rank mod visible GPUs) current for this process and describe it.

    Launchers that give each rank its own GPU through CUDA_VISIBLE_DEVICES leave one visible GPU,
    which this rule then picks for every rank, as it should.
    """
    count = visible_gpu_count()
    if count == 0:
        return None
    cupy = import_cupy()
    assert cupy is not None
    index = local_rank % count
    cupy.cuda.Device(index).use()
    cupy.cuda.runtime.setDevice(index)
    props = cupy.cuda.runtime.getDeviceProperties(index)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return GpuInfo(
        index=index,
        name=name,
        uuid=_uuid_text(props.get("uuid")),
        pci_bus_id=f"{props.get('pciDomainID', 0):04x}:{props.get('pciBusID', 0):02x}:{props.get('pciDeviceID', 0):02x}.0",
        visible_count=count,
    )


def _uuid_text(raw: Any) -> str:
    if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
        h = raw.hex()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return str(raw) if raw is not None else ""


def driver_version() -> str | None:
    cupy = import_cupy()
    if cupy is None:
        return None
    try:
        version = int(cupy.cuda.runtime.driverGetVersion())
    except Exception:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"
