"""The physical limit of each measured link, and how close a figure comes to it.

A figure above its limit is a measurement error (a clock, a count or a cache), never a record: the
entry then carries a warning instead of a share."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..modes import MemoryMode
from . import topology
from .nics import NicChoice

# How far above a limit a figure may go before it is called an error: a limit read from the
# hardware's specification is exact; one measured on the spot (a memory copy) is itself noisy.
SPEC_TOLERANCE = 1.02
MEASURED_TOLERANCE = 1.25


@dataclass
class RankTopology:
    """What one rank found out about its hardware, gathered to rank 0 at the start of a run."""

    rank: int
    host: str
    gpu: topology.GpuTopology | None
    cpu_numa_nodes: list[int]
    cpu_affinity: str = ""
    nics: list[topology.NicPort] = field(default_factory=list)
    host_copy_gbps: float | None = None  # measured by one rank per host
    nic: NicChoice | None = None  # the device this rank sends through, where known

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "cpu_affinity": self.cpu_affinity,
            "cpu_numa_nodes": self.cpu_numa_nodes,
            "gpu_numa_local": self.gpu_numa_local,
            "nics": [n.to_dict() for n in self.nics],
            "host_copy_gbps": self.host_copy_gbps,
            "nic": self.nic.to_dict() if self.nic else None,
        }

    @property
    def gpu_numa_local(self) -> bool | None:
        """Whether this rank runs on its GPU's NUMA node (None where either is unknown)."""
        if self.gpu is None or self.gpu.numa_node is None or not self.cpu_numa_nodes:
            return None
        return self.gpu.numa_node in self.cpu_numa_nodes


def collect(
    rank: int, host: str, local_rank: int, gpu: Any, peer_bus_ids: list[str], nic: NicChoice | None = None
) -> RankTopology:
    """This rank's view of its hardware (gpu: its GpuInfo or None; peer_bus_ids: the other GPUs
    of this host in the job)."""
    gpu_topo = topology.gpu_topology(gpu.index, gpu.pci_bus_id, peer_bus_ids) if gpu is not None else None
    return RankTopology(
        rank=rank,
        host=host,
        gpu=gpu_topo,
        cpu_numa_nodes=topology.cpu_numa_nodes(),
        cpu_affinity=topology.cpu_affinity_text(),
        nics=topology.nic_ports(),
        host_copy_gbps=topology.host_copy_gbps() if local_rank == 0 else None,
        nic=nic,
    )


@dataclass(frozen=True)
class Limit:
    gbps: float
    kind: str  # "NVLink", "PCIe", "NIC", "host memory copy"
    detail: str
    measured: bool = False  # True when the limit is itself a measurement, not a specification

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def link_limit(
    src: RankTopology, dst: RankTopology, src_mode: str, dst_mode: str, host_copy: float | None
) -> tuple[Limit | None, str | None]:
    """The per-direction limit of the link a transfer between these ranks and memories uses, or
    None with the reason it is unknown. `host_copy` is the memory copy rate measured on src's host.

    GPU memory handed to UCX at both ends (device, managed) may go GPU to GPU; any other GPU-backed
    end (staged, bounce, or one GPU end facing host memory) crosses its GPU's PCIe link; and when UCX is handed host memory at
    both ends (staged ends included), one host memory copy carries the bytes too."""
    modes = MemoryMode(src_mode), MemoryMode(dst_mode)
    # Managed memory too: UCX copies it through CUDA fragments and CUDA IPC, GPU to GPU.
    src_dev, dst_dev = (mode.ucx_memory != "host" for mode in modes)
    if src.host != dst.host:
        return _inter_node_limit(src, dst, *(mode.on_device for mode in modes))
    if src_dev and dst_dev:
        if src.gpu is None or dst.gpu is None:
            return None, "GPU topology unknown"
        if src.gpu.pci_bus_id == dst.gpu.pci_bus_id:
            return None, "both ranks use the same GPU: its memory bounds the copy, not a link"
        nvlink = src.gpu.nvlinks.get(dst.gpu.pci_bus_id)
        if nvlink is not None and nvlink.gbps > 0:
            return Limit(nvlink.gbps, "NVLink", nvlink.describe()), None
        links = [g.pcie for g in (src.gpu, dst.gpu) if g.pcie]
        if len(links) < 2:
            return None, "PCIe link of a GPU unknown"
        slower = min(links, key=lambda link: link.gbps)
        return Limit(slower.gbps, "PCIe", f"peer-to-peer over {slower.describe()}"), None
    candidates: list[Limit] = []
    for mode, end in zip(modes, (src, dst), strict=True):
        if mode.on_device:
            if end.gpu is None or end.gpu.pcie is None:
                return None, "PCIe link of the GPU unknown"
            candidates.append(Limit(end.gpu.pcie.gbps, "PCIe", f"{end.gpu.pcie.describe()} of GPU {end.gpu.index}"))
    if all(mode.ucx_memory == "host" for mode in modes):
        if host_copy is None:
            return None, "host memory copy not measured"
        candidates.append(
            Limit(
                host_copy, "host memory copy", f"one memory copy on this host, measured at {host_copy:.1f} GB/s", True
            )
        )
    return min(candidates, key=lambda limit: limit.gbps), None


def _inter_node_limit(
    src: RankTopology, dst: RankTopology, src_dev: bool, dst_dev: bool
) -> tuple[Limit | None, str | None]:
    if not src.nics or not dst.nics:
        return None, "no NIC rate readable on one of the hosts"
    fastest_src = max(src.nics, key=lambda n: n.gbps)
    fastest_dst = max(dst.nics, key=lambda n: n.gbps)
    nic = min(fastest_src, fastest_dst, key=lambda n: n.gbps)
    limit = Limit(nic.gbps, "NIC", f"{nic.name}: {nic.rate_text}")
    for is_dev, end in ((src_dev, src), (dst_dev, dst)):
        if is_dev and end.gpu is not None and end.gpu.pcie is not None and end.gpu.pcie.gbps < limit.gbps:
            limit = Limit(end.gpu.pcie.gbps, "PCIe", f"{end.gpu.pcie.describe()} of GPU {end.gpu.index} on {end.host}")
    return limit, None


def judge(figure: float, limit: Limit) -> tuple[float | None, str | None]:
    """A bandwidth's share of its limit, or (None, a warning) when the figure is impossible."""
    share = figure / limit.gbps
    tolerance = MEASURED_TOLERANCE if limit.measured else SPEC_TOLERANCE
    if share > tolerance:
        return None, (
            f"{figure:.2f} GB/s is above the {limit.kind} limit of {limit.gbps:.2f} GB/s ({limit.detail}): "
            "a measurement error, not a record"
        )
    return share, None
