"""Which network device a rank sends through: the RDMA port nearest its GPU by PCIe topology (the
fewest hops between them in the sysfs device tree, the NUMA node next), given to UCX as
UCX_NET_DEVICES unless the user set it; ties go by local rank, so rank i of a host takes rail i.
Without RDMA ports UCX keeps its own choice among the host's interfaces (a wrong guess there could
pick a management network), and the rank records the interface it has when it has one. `--nics`
names the rails (RDMA ports or interfaces) to choose among, by the same rule: the way to give each
rank its own interface on hosts without RDMA (NCCL_SOCKET_IFNAME's role).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, TypedDict

from ..units import is_digits
from .topology import normalize_bus_id, read_text

SYSFS = "/sys"


class NicRecord(TypedDict):
    """A NicChoice as a results file's metadata keeps it (a rank's topology's "nic")."""

    name: str
    how: str
    numa_node: int | None
    set_for_ucx: bool


@dataclass(frozen=True)
class NicChoice:
    name: str  # a UCX device name: "mlx5_0:1", "eth0", or what UCX_NET_DEVICES says
    how: str  # why this one
    numa_node: int | None = None
    set_for_ucx: bool = False  # rdmabench set UCX_NET_DEVICES to it

    def to_dict(self) -> NicRecord:
        return {"name": self.name, "how": self.how, "numa_node": self.numa_node, "set_for_ucx": self.set_for_ucx}


@dataclass(frozen=True)
class _Device:
    name: str
    path: str | None  # its PCI device's place in the sysfs tree (None: virtual)
    numa_node: int | None


def _numa(path: str | None) -> int | None:
    text = read_text(os.path.join(path, "numa_node")) if path else None
    return int(text) if text and is_digits(text.lstrip("-")) and int(text) >= 0 else None


def _pci_path(link: str) -> str | None:
    return os.path.realpath(link) if os.path.exists(link) else None


def rdma_ports(root: str = SYSFS) -> list[_Device]:
    """Active InfiniBand/RoCE ports, as UCX names them (device:port)."""
    base = os.path.join(root, "class", "infiniband")
    found = []
    for device in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = _pci_path(os.path.join(base, device, "device"))
        ports = os.path.join(base, device, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            if "ACTIVE" in (read_text(os.path.join(ports, port, "state")) or ""):
                found.append(_Device(f"{device}:{port}", path, _numa(path)))
    return found


def interfaces(root: str = SYSFS) -> list[_Device]:
    """Network interfaces that are up, loopback and bridges left out."""
    base = os.path.join(root, "class", "net")
    found = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        here = os.path.join(base, name)
        if name == "lo" or os.path.isdir(os.path.join(here, "bridge")):
            continue
        if (read_text(os.path.join(here, "operstate")) or "") != "up":
            continue
        path = _pci_path(os.path.join(here, "device"))
        found.append(_Device(name, path, _numa(path)))
    return found


def hops(a: str, b: str) -> int:
    """Steps between two devices in the sysfs tree: up to their common ancestor, then down."""
    first, second = a.strip("/").split("/"), b.strip("/").split("/")
    shared = 0
    for x, y in zip(first, second, strict=False):
        if x != y:
            break
        shared += 1
    return len(first) + len(second) - 2 * shared


def wanted_problem(wanted: tuple[str, ...], root: str = SYSFS) -> str | None:
    """Why this host cannot use the rails `--nics` names (one missing, or down), or None."""
    have = {d.name: d for d in rdma_ports(root)} | {d.name: d for d in interfaces(root)}
    missing = [name for name in wanted if name not in have]
    if missing:
        known = ", ".join(sorted(have)) or "none"
        return f"--nics {','.join(missing)}: no such active RDMA port or interface that is up (this host has: {known})"
    return None


def choose(
    gpu_bus_id: str | None,
    local_rank: int,
    environ: dict[str, str],
    root: str = SYSFS,
    wanted: tuple[str, ...] = (),
) -> NicChoice | None:
    """This rank's device: among the rails `wanted` names, else the host's active RDMA ports. Sets
    nothing: `apply` gives the choice to UCX."""
    if environ.get("UCX_NET_DEVICES"):
        return NicChoice(environ["UCX_NET_DEVICES"], "UCX_NET_DEVICES set by the user")
    if wanted:
        have = {d.name: d for d in rdma_ports(root)} | {d.name: d for d in interfaces(root)}
        rails = [have[name] for name in wanted if name in have]
        if rails:
            return _nearest(rails, gpu_bus_id, local_rank, root, "among --nics")
    ports = rdma_ports(root)
    if ports:
        return _nearest(ports, gpu_bus_id, local_rank, root, "")
    found = interfaces(root)
    if len(found) == 1:
        return NicChoice(found[0].name, "the host's only network interface", found[0].numa_node)
    return None  # several interfaces, no RDMA: UCX chooses, and the transport of each link says which


def _nearest(devices: list[_Device], gpu_bus_id: str | None, local_rank: int, root: str, among: str) -> NicChoice:
    """The device nearest the GPU (PCIe hops, else its NUMA node), ties by local rank."""
    gpu = _pci_path(os.path.join(root, "bus", "pci", "devices", normalize_bus_id(gpu_bus_id))) if gpu_bus_id else None
    gpu_numa = _numa(gpu)
    if gpu is not None and all(d.path for d in devices):
        best = min(hops(gpu, str(d.path)) for d in devices)
        near = [d for d in devices if hops(gpu, str(d.path)) == best]
        how = f"nearest its GPU ({best} PCIe hops)"
    elif gpu_numa is not None and any(d.numa_node == gpu_numa for d in devices):
        near, how = [d for d in devices if d.numa_node == gpu_numa], "on its GPU's NUMA node"
    else:
        near = devices
        how = "by local rank (no GPU to be near)" if gpu is None else "by local rank (no PCIe place to compare)"
    pick = near[local_rank % len(near)]
    if len(near) > 1:
        how += f", rail {local_rank % len(near)} of {len(near)} as near"
    if among:
        how += f", {among}"
    return NicChoice(pick.name, how, pick.numa_node, set_for_ucx=True)


def apply(choice: NicChoice | None, environ: Any = os.environ) -> None:
    """Give UCX the chosen RDMA port (before its context is created)."""
    if choice is not None and choice.set_for_ucx:
        environ["UCX_NET_DEVICES"] = choice.name
