"""The physical limit of each measured link, and how close a figure comes to it.

A figure above its limit is a measurement error (a clock or a count), never a record: the entry then
carries a warning instead of a share. The host memory copy is a limit only in the regime it was
measured in: a link that keeps fewer bytes in flight than the measuring copy did may run from a cache,
faster than memory allows; it has no known limit (and so is never called an error), and says why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..modes import MemoryMode
from ..units import format_size
from . import copycache, topology
from .nics import NicChoice, NicRecord

# How far above a limit a figure may go before it is called an error: a limit read from the
# hardware's specification is exact; one measured on the spot (a memory copy) is itself noisy.
SPEC_TOLERANCE = 1.02
MEASURED_TOLERANCE = 1.25
HOST_COPY = "host memory copy"
# Regimes of a copy within a host: the link keeps at least as many bytes in flight as the measuring
# copy did (both stream from memory: the copy bounds it), or fewer (a cache may hold them: no bound).
MEMORY, CACHE = "memory", "cache"
CACHE_REGIME = f"{CACHE} regime"  # how a link's unknown limit says it is in the cache regime


class RankRecord(TypedDict):
    """A RankTopology as a results file's metadata keeps it (its "topology", one a rank)."""

    rank: int
    host: str
    gpu: topology.GpuTopologyRecord | None
    cpu_affinity: str
    cpu_numa_nodes: list[int]
    gpu_numa_local: bool | None
    nics: list[topology.NicPortRecord]
    host_copy_gbps: float | None
    host_copy_bytes: int | None
    last_level_cache_bytes: int | None
    host_copy_measured_utc: str | None
    host_copy_provenance: str | None
    nic: NicRecord | None


@dataclass
class RankTopology:
    """What one rank found out about its hardware, gathered to rank 0 at the start of a run."""

    rank: int
    host: str
    gpu: topology.GpuTopology | None
    cpu_numa_nodes: list[int]
    cpu_affinity: str = ""
    nics: list[topology.NicPort] = field(default_factory=list)
    host_copy: topology.HostCopy | None = None  # measured (or taken from this boot's cache) by one rank per host
    nic: NicChoice | None = None  # the device this rank sends through, where known

    @property
    def host_copy_gbps(self) -> float | None:
        return self.host_copy.gbps if self.host_copy else None

    def to_dict(self) -> RankRecord:
        return {
            "rank": self.rank,
            "host": self.host,
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "cpu_affinity": self.cpu_affinity,
            "cpu_numa_nodes": self.cpu_numa_nodes,
            "gpu_numa_local": self.gpu_numa_local,
            "nics": [n.to_dict() for n in self.nics],
            "host_copy_gbps": self.host_copy_gbps,
            "host_copy_bytes": self.host_copy.copy_bytes if self.host_copy else None,
            "last_level_cache_bytes": self.host_copy.cache_bytes if self.host_copy else None,
            "host_copy_measured_utc": self.host_copy.measured_utc if self.host_copy else None,
            "host_copy_provenance": self.host_copy.provenance if self.host_copy else None,
            "nic": self.nic.to_dict() if self.nic else None,
        }

    @property
    def gpu_numa_local(self) -> bool | None:
        """Whether this rank runs on its GPU's NUMA node (None where either is unknown)."""
        if self.gpu is None or self.gpu.numa_node is None or not self.cpu_numa_nodes:
            return None
        return self.gpu.numa_node in self.cpu_numa_nodes


def collect(
    rank: int,
    host: str,
    local_rank: int,
    gpu: Any,
    peer_bus_ids: list[str],
    nic: NicChoice | None = None,
    remeasure_host_copy: bool = False,
) -> RankTopology:
    """This rank's view of its hardware (gpu: its GpuInfo or None; peer_bus_ids: the other GPUs
    of this host in the job). Local rank 0 adds its host's memory copy: this boot's cached figure,
    or measured now where there is none or `remeasure_host_copy` (copycache)."""
    gpu_topo = topology.gpu_topology(gpu.index, gpu.pci_bus_id, peer_bus_ids) if gpu is not None else None
    return RankTopology(
        rank=rank,
        host=host,
        gpu=gpu_topo,
        cpu_numa_nodes=topology.cpu_numa_nodes(),
        cpu_affinity=topology.cpu_affinity_text(),
        nics=topology.nic_ports(),
        host_copy=copycache.host_copy(remeasure_host_copy) if local_rank == 0 else None,
        nic=nic,
    )


class _LimitFields(TypedDict):
    gbps: float
    kind: str
    detail: str
    measured: bool


class LimitRecord(_LimitFields, total=False):
    """A Limit as a results entry's link_limit and pattern_limit hold it (docs/results-format.md): a host
    memory copy's regime and provenance only where it has them."""

    regime: str
    provenance: str


@dataclass(frozen=True)
class Limit:
    gbps: float
    kind: str  # "NVLink", "PCIe", "NIC", "host memory copy"
    detail: str
    measured: bool = False  # True when the limit is itself a measurement, not a specification
    regime: str | None = None  # a host memory copy's: MEMORY where the link's bytes in flight are known
    provenance: str | None = None  # a host memory copy's: "measured" or "cached from <UTC> on this boot"

    def to_dict(self) -> LimitRecord:
        found: LimitRecord = {"gbps": self.gbps, "kind": self.kind, "detail": self.detail, "measured": self.measured}
        if self.regime is not None:
            found["regime"] = self.regime
        if self.provenance is not None:
            found["provenance"] = self.provenance
        return found


def link_limit(
    src: RankTopology,
    dst: RankTopology,
    src_mode: str,
    dst_mode: str,
    host_copy: topology.HostCopy | float | None,
    in_flight: int | None = None,
) -> tuple[Limit | None, str | None]:
    """The per-direction limit of the link a transfer between these ranks and memories uses, or
    None with the reason it is unknown. `host_copy` is the memory copy measured on src's host (a
    bare GB/s: its regime unknown), `in_flight` the bytes the link's copy keeps in flight there.

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
        copy, why = host_copy_limit(host_copy, in_flight)
        if copy is None and not candidates:
            return None, why
        candidates += [copy] if copy is not None else []  # a cached copy: bound by the links it crosses
    return min(candidates, key=lambda limit: limit.gbps), None


def host_copy_limit(host_copy: topology.HostCopy | float, in_flight: int | None) -> tuple[Limit | None, str | None]:
    """The host memory copy as a link's limit where the link is in the copy's regime (MEMORY: it
    keeps at least as many bytes in flight as the measuring copy did); else None and why (CACHE
    regime: a copy that may run from a cache has no limit we know, and is never called an error)."""
    if isinstance(host_copy, (int, float)):
        return Limit(
            host_copy, HOST_COPY, f"one memory copy on this host, measured at {host_copy:.1f} GB/s", True
        ), None
    cache = host_copy.cache_bytes
    cache_text = f"its {format_size(cache)} last-level cache" if cache else "its last-level cache (size unreadable)"
    measured = (
        f"one memory copy on this host, measured at {host_copy.gbps:.1f} GB/s with "
        f"{format_size(host_copy.in_flight)} in flight, beyond {cache_text}"
    )
    if host_copy.cached:  # a figure above it may be the cache's: say how to measure it again
        measured += f" ({host_copy.provenance}; {copycache.REMEASURED} measures it again)"
    source = host_copy.provenance
    if in_flight is None:
        return Limit(host_copy.gbps, HOST_COPY, measured, True, provenance=source), None
    keeps = f"this link keeps {format_size(in_flight)} in flight"
    if in_flight >= host_copy.in_flight:
        detail = f"{measured}; {keeps}: {MEMORY} regime"
        return Limit(host_copy.gbps, HOST_COPY, detail, True, MEMORY, source), None
    fewer = "within the cache" if cache and in_flight <= cache else "fewer than the measuring copy"
    return None, (
        f"{CACHE_REGIME}: {keeps}, {fewer}, and may run from it, faster than memory allows: no limit is known "
        f"(the host memory copy bounds only copies that keep as many bytes in flight as it did: {measured})"
    )


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
        # A figure kept from an earlier run of this boot may have been measured while the host was
        # busier than now: then the limit, not the figure, is wrong, and the warning says so first.
        cached = bool(limit.provenance and limit.provenance.startswith("cached"))
        verdict = (
            "not a record: the limit kept for this boot may be from a busier moment (measure it again), "
            "else a measurement error"
            if cached
            else "a measurement error, not a record"
        )
        return (
            None,
            f"{figure:.2f} GB/s is above the {limit.kind} limit of {limit.gbps:.2f} GB/s ({limit.detail}): {verdict}",
        )
    return share, None
