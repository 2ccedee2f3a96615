"""What the hardware allows: PCIe links of GPUs, NVLinks between GPUs, NIC port rates, NUMA nodes, and
a host memory copy measured on the spot. Everything is read from NVML and sysfs; what cannot be read
is None, never guessed."""

from __future__ import annotations

import ctypes
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from ..units import is_digits

# Usable bandwidth of one PCIe lane per direction, GB/s, after line encoding (8b/10b up to Gen2,
# 128b/130b from Gen3; Gen6 FLIT mode counted at its 242/256 payload share).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.9846, 4: 1.9692, 5: 3.9385, 6: 7.5636}
# NVML's NVLink version codes (nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1,
# 6 = 4.0, 7 = 5.0), their names, and one link's bandwidth per direction in GB/s. An H100 or H200
# reports 6: NVLink 4 at 26.5625 GB/s, 18 links = 478 GB/s.
NVLINK_GENERATIONS = {
    1: ("1", 20.0),
    2: ("2", 25.0),
    3: ("2.2", 25.0),
    4: ("3", 25.0),
    5: ("3.1", 25.0),
    6: ("4", 26.5625),
    7: ("5", 50.0),
}
_PCI_ROOT = "/sys/bus/pci/devices"


def read_text(path: str) -> str | None:
    """A sysfs or procfs value, stripped; None where it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


class PcieRecord(TypedDict):
    """A PcieLink as a results file's metadata keeps it."""

    generation: int
    width: int
    max_generation: int | None
    max_width: int | None


class NvLinkRecord(TypedDict):
    links: int
    version: int


class GpuTopologyRecord(TypedDict):
    """A GpuTopology as a rank's topology in a results file's metadata keeps it."""

    index: int
    pci_bus_id: str
    pcie: PcieRecord | None
    numa_node: int | None
    nvlinks: dict[str, NvLinkRecord]
    nvswitch: bool
    pcie_gbps: float | None


class NicPortRecord(TypedDict):
    name: str
    kind: str
    gbps: float
    rate_text: str
    numa_node: int | None


@dataclass(frozen=True)
class PcieLink:
    generation: int
    width: int
    max_generation: int | None = None
    max_width: int | None = None

    @property
    def gbps(self) -> float:
        return PCIE_LANE_GBPS.get(self.generation, 0.0) * self.width

    def to_dict(self) -> PcieRecord:
        return {
            "generation": self.generation, "width": self.width, "max_generation": self.max_generation,
            "max_width": self.max_width,
        }  # fmt: skip

    def describe(self) -> str:
        text = f"PCIe Gen{self.generation} x{self.width}"
        if (self.max_generation and self.max_generation > self.generation) or (
            self.max_width and self.max_width > self.width
        ):
            text += f" (capable of Gen{self.max_generation} x{self.max_width}: running below its best)"
        return text


@dataclass(frozen=True)
class NvLink:
    links: int
    version: int  # NVML's version code, not the generation: see NVLINK_GENERATIONS

    @property
    def per_link_gbps(self) -> float:
        return NVLINK_GENERATIONS.get(self.version, ("?", 0.0))[1]

    @property
    def gbps(self) -> float:
        return self.links * self.per_link_gbps

    def describe(self) -> str:
        name = NVLINK_GENERATIONS.get(self.version, (f"(NVML version {self.version})", 0.0))[0]
        return f"{self.links} x NVLink {name} at {self.per_link_gbps:g} GB/s each"


@dataclass
class GpuTopology:
    """One GPU as its rank sees it."""

    index: int
    pci_bus_id: str
    pcie: PcieLink | None = None
    numa_node: int | None = None
    nvlinks: dict[str, NvLink] = field(default_factory=dict)  # peer PCI bus id -> links to it
    # Its NVLinks end at NVSwitch ports (NVML's remote device type): every peer shares all of them.
    nvswitch: bool = False

    def to_dict(self) -> GpuTopologyRecord:
        pcie = self.pcie
        return {
            "index": self.index,
            "pci_bus_id": self.pci_bus_id,
            "pcie": pcie.to_dict() if pcie else None,
            "numa_node": self.numa_node,
            "nvlinks": {peer: {"links": link.links, "version": link.version} for peer, link in self.nvlinks.items()},
            "nvswitch": self.nvswitch,
            "pcie_gbps": pcie.gbps if pcie else None,
        }


def normalize_bus_id(bus_id: str) -> str:
    """'00000000:19:00.0' (NVML) and '0000:19:00.0' (sysfs) name the same device."""
    match = re.match(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])$", bus_id.strip())
    if not match:
        return bus_id.strip().lower()
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def nvml() -> Any:
    """pynvml, initialised, or None (no nvidia-ml-py, or no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _sysfs_pcie(bus_id: str) -> PcieLink | None:
    base = os.path.join(_PCI_ROOT, normalize_bus_id(bus_id))
    speed, width = read_text(f"{base}/current_link_speed"), read_text(f"{base}/current_link_width")
    if not speed or not width:
        return None
    rate = re.match(r"([\d.]+)\s*GT/s", speed)
    by_rate = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
    if not rate or not is_digits(width):
        return None
    generation = by_rate.get(float(rate.group(1)))
    return PcieLink(generation, int(width)) if generation else None


def numa_node_of(bus_id: str) -> int | None:
    value = read_text(os.path.join(_PCI_ROOT, normalize_bus_id(bus_id), "numa_node"))
    if value is None or not is_digits(value.lstrip("-")) or int(value) < 0:
        return None
    return int(value)


def gpu_topology(index: int, bus_id: str, peer_bus_ids: list[str]) -> GpuTopology:
    """PCIe link, NUMA node and NVLinks (to each of `peer_bus_ids`) of this process's GPU `index`."""
    topo = GpuTopology(index=index, pci_bus_id=normalize_bus_id(bus_id), numa_node=numa_node_of(bus_id))
    api = nvml()
    if api is None:
        topo.pcie = _sysfs_pcie(bus_id)
        return topo
    try:
        handle = api.nvmlDeviceGetHandleByPciBusId(normalize_bus_id(bus_id).encode())
    except Exception:
        try:
            handle = api.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            topo.pcie = _sysfs_pcie(bus_id)
            return topo
    try:
        topo.pcie = PcieLink(
            api.nvmlDeviceGetCurrPcieLinkGeneration(handle),
            api.nvmlDeviceGetCurrPcieLinkWidth(handle),
            api.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            api.nvmlDeviceGetMaxPcieLinkWidth(handle),
        )
    except Exception:
        topo.pcie = _sysfs_pcie(bus_id)
    topo.nvlinks = _nvlinks(api, handle, [normalize_bus_id(b) for b in peer_bus_ids])
    topo.nvswitch = _behind_nvswitch(api, handle)
    return topo


_NVLINK_DEVICE_TYPE_SWITCH = 2  # nvmlIntNvLinkDeviceType_t: 0 GPU, 1 IBMNPU, 2 NVSwitch


def _behind_nvswitch(nvml: Any, handle: Any) -> bool:
    remote_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    if remote_type is None:
        return False
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) == 1:
                return int(remote_type(handle, link)) == _NVLINK_DEVICE_TYPE_SWITCH
        except Exception:
            continue
    return False


def _nvlinks(nvml: Any, handle: Any, peers: list[str]) -> dict[str, NvLink]:
    """Active NVLinks of a GPU, grouped by the GPU of this job they reach."""
    remote_info = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or getattr(
        nvml, "nvmlDeviceGetNvLinkRemotePciInfo", None
    )
    groups: dict[str, list[int]] = {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) != 1:
                continue
            version = int(nvml.nvmlDeviceGetNvLinkVersion(handle, link))
            remote = remote_info(handle, link).busId if remote_info else b"?"
        except Exception:
            continue
        groups.setdefault(normalize_bus_id(remote.decode() if isinstance(remote, bytes) else str(remote)), []).append(
            version
        )
    found = {peer: NvLink(len(groups[peer]), max(groups[peer])) for peer in peers if peer in groups}
    unmatched = [v for remote, versions in groups.items() if remote not in peers for v in versions]
    if not unmatched:
        return found
    # Links whose far end is no GPU of this job by its bus id: NVSwitch ports (every peer is behind
    # them), or, in a virtual machine, GPUs named by their host's bus ids. NVML's peer-to-peer status
    # says which peers they reach.
    connected = [peer for peer in peers if peer not in found and _nvlink_p2p(nvml, handle, peer)]
    for peer in connected:
        found[peer] = NvLink(len(unmatched), max(unmatched))
    return found


def _nvlink_p2p(nvml: Any, handle: Any, peer: str) -> bool:
    try:
        other = nvml.nvmlDeviceGetHandleByPciBusId(peer.encode())
        status = nvml.nvmlDeviceGetP2PStatus(handle, other, getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", 2))
    except Exception:
        return False
    return bool(status == getattr(nvml, "NVML_P2P_STATUS_OK", 0))


_CPU_ROOT = "/sys/devices/system/cpu"
# The memory copy's buffers: each as large as the last-level cache (two of them, source and
# destination, hold twice what it can), at least PROBE_MIN_BYTES, at most PROBE_MAX_BYTES; where the
# cache cannot be read, the largest (today's largest caches a core sees, 320 MB, stay below two of them).
PROBE_MIN_BYTES = 64 << 20
PROBE_MAX_BYTES = 256 << 20
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class HostCopy:
    """One memory copy on a host, measured beyond its last-level cache: what a transfer between two
    processes of the host that keeps as many bytes in flight is bound by."""

    gbps: float
    copy_bytes: int  # each of the copy's two buffers
    cache_bytes: int | None  # the last-level cache of the CPU that copied (None: not readable)
    measured_utc: str | None = None  # when it was measured (ISO 8601, UTC), where known
    cached: bool = False  # taken from this boot's cache (hardware/copycache.py), not measured by this run
    note: str = ""  # why it was measured though a cache exists (a refused file, a forced re-measure)

    @property
    def in_flight(self) -> int:
        """Bytes the copy kept in flight: its source and its destination."""
        return 2 * self.copy_bytes

    @property
    def provenance(self) -> str:
        """Where the figure comes from: "measured" by this run (with why, where a cache was passed
        over), or "cached from <UTC time> on this boot"."""
        if self.cached:
            return f"cached from {self.measured_utc} on this boot"
        return f"measured ({self.note})" if self.note else "measured"


def last_level_cache_bytes(root: str = _CPU_ROOT) -> int | None:
    """The largest data or unified cache of the first CPU this process may run on (sysfs), or of
    cpu0; None where neither can be read."""
    first = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    for cpu in dict.fromkeys((first, 0)):
        folder = f"{root}/cpu{cpu}/cache"
        caches = []
        for index in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            kind, level = read_text(f"{folder}/{index}/type"), read_text(f"{folder}/{index}/level")
            size = _cache_size(read_text(f"{folder}/{index}/size") or "")
            if kind in ("Data", "Unified") and level and is_digits(level) and size:
                caches.append((int(level), size))
        if caches:
            return max(caches)[1]
    return None


def _cache_size(text: str) -> int | None:
    """sysfs's cache size ("32768K", "1M") in bytes, or None."""
    match = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip().upper())
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)] if match else None


def probe_bytes(cache_bytes: int | None) -> int:
    """Each buffer of the memory copy that measures a host: as large as its last-level cache, within
    PROBE_MIN_BYTES and PROBE_MAX_BYTES (the largest where the cache is unknown)."""
    if cache_bytes is None:
        return PROBE_MAX_BYTES
    return min(PROBE_MAX_BYTES, max(PROBE_MIN_BYTES, cache_bytes))


def host_copy() -> HostCopy:
    """One memory copy on this host, measured now beyond its last-level cache (bytes copied once per
    second; the faster of a user-space and a kernel copy). A copy that fits a cache may run much
    faster, and faster than a copy from user space says (glibc's memcpy streams past the cache from
    sizes that scale with the cache per thread): no figure bounds it, so none is measured."""
    cache = last_level_cache_bytes()
    nbytes = probe_bytes(cache)
    return HostCopy(_copy_rate(nbytes, repeats=5), nbytes, cache)


def _copy_rate(nbytes: int, repeats: int) -> float:
    """GB/s of the faster copy of `nbytes` on this host: in user space (memcpy: what shared-memory
    transports do) or by the kernel between two address spaces (process_vm_readv: what cma does),
    each its fastest of `repeats` (a neighbour only ever slows a copy down)."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    fastest = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    kernel = _kernel_copy(dst.ctypes.data, src.ctypes.data, nbytes)
    if kernel is not None:
        fastest = min(fastest, *(_timed(kernel) for _ in range(repeats)))
    return nbytes / fastest / 1e9


def _timed(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _kernel_copy(dst: int, src: int, nbytes: int) -> Callable[[], object] | None:
    """A copy of `nbytes` from `src` to `dst` by the kernel, as cma copies (process_vm_readv of this
    process), or None where the call is missing or refused (a seccomp filter, say)."""
    readv = getattr(ctypes.CDLL(None, use_errno=True), "process_vm_readv", None)
    if readv is None:
        return None
    readv.restype = ctypes.c_ssize_t
    readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    local, remote, pid = _IoVec(dst, nbytes), _IoVec(src, nbytes), os.getpid()

    def copy() -> object:
        return readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)

    return copy if copy() == nbytes else None


@dataclass(frozen=True)
class NicPort:
    name: str
    kind: str  # "infiniband" or "ethernet"
    gbps: float  # per direction, GB/s
    rate_text: str
    numa_node: int | None

    def to_dict(self) -> NicPortRecord:
        return {
            "name": self.name, "kind": self.kind, "gbps": self.gbps, "rate_text": self.rate_text,
            "numa_node": self.numa_node,
        }  # fmt: skip


def nic_ports() -> list[NicPort]:
    """Active InfiniBand/RoCE ports (sysfs rate) and Ethernet interfaces (speed), loopback excluded."""
    ports: list[NicPort] = []
    ib_root = "/sys/class/infiniband"
    for device in sorted(os.listdir(ib_root)) if os.path.isdir(ib_root) else []:
        numa = read_text(f"{ib_root}/{device}/device/numa_node")
        for port in sorted(os.listdir(f"{ib_root}/{device}/ports")):
            state = read_text(f"{ib_root}/{device}/ports/{port}/state") or ""
            rate = read_text(f"{ib_root}/{device}/ports/{port}/rate") or ""
            match = re.match(r"([\d.]+)\s*Gb/sec", rate)
            if "ACTIVE" in state and match:
                node = int(numa) if numa and is_digits(numa.lstrip("-")) and int(numa) >= 0 else None
                ports.append(NicPort(f"{device}:{port}", "infiniband", float(match.group(1)) / 8, rate, node))
    net_root = "/sys/class/net"
    for name in sorted(os.listdir(net_root)) if os.path.isdir(net_root) else []:
        if name == "lo" or not os.path.exists(f"{net_root}/{name}/device"):
            continue  # virtual interfaces (bridges, veth) have no rate of their own
        speed = read_text(f"{net_root}/{name}/speed")
        if speed and is_digits(speed.lstrip("-")) and int(speed) > 0:
            numa = read_text(f"{net_root}/{name}/device/numa_node")
            node = int(numa) if numa and is_digits(numa.lstrip("-")) and int(numa) >= 0 else None
            ports.append(NicPort(name, "ethernet", int(speed) / 8000, f"{speed} Mb/s", node))
    return ports


def cpu_numa_nodes() -> list[int]:
    """NUMA nodes of the CPUs this process may run on."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:
        return []
    nodes = []
    root = "/sys/devices/system/node"
    for entry in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not re.fullmatch(r"node\d+", entry):
            continue
        listed = _parse_cpulist(read_text(f"{root}/{entry}/cpulist") or "")
        if listed & cpus:
            nodes.append(int(entry[4:]))
    return nodes


def cpu_affinity_text() -> str:
    """The CPUs this process may run on, as a cpulist ("0-3,8")."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return ""
    ranges: list[str] = []
    start = previous = None
    for cpu in [*cpus, None]:
        if cpu is not None and previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            ranges.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(ranges)


def _parse_cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif is_digits(part.strip()):
            cpus.add(int(part))
    return cpus
