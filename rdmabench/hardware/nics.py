"""Which network device a rank sends through: the RDMA port nearest its GPU by PCIe topology (the
fewest hops between them in the sysfs device tree, the NUMA node next), given to UCX as
UCX_NET_DEVICES unless the user set it; ties go by local rank, so rank i of a host takes rail i.
Without RDMA ports UCX keeps its own choice among the host's interfaces (a wrong guess there could
pick a management network), and the rank records the interface it has when it has one.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from .topology import normalize_bus_id, read_text

SYSFS = "/sys"


@dataclass(frozen=True)
class NicChoice:
    name: str  # a UCX device name: "mlx5_0:1", "eth0", or what UCX_NET_DEVICES says
    how: str  # why this one
    numa_node: int | None = None
    set_for_ucx: bool = False  # rdmabench set UCX_NET_DEVICES to it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Device:
    name: str
    path: str | None  # its PCI device's place in the sysfs tree (None: virtual)
    numa_node: int | None


def _numa(path: str | None) -> int | None:
    text = read_text(os.path.join(path, "numa_node")) if path else None
    return int(text) if text and text.lstrip("-").isdigit() and int(text) >= 0 else None


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


def choose(gpu_bus_id: str | None, local_rank: int, environ: dict[str, str], root: str = SYSFS) -> NicChoice | None:
    """This rank's device. Sets nothing: `apply` gives the choice to UCX."""
    if environ.get("UCX_NET_DEVICES"):
        return NicChoice(environ["UCX_NET_DEVICES"], "UCX_NET_DEVICES set by the user")
    ports = rdma_ports(root)
    if ports:
        gpu = (
            _pci_path(os.path.join(root, "bus", "pci", "devices", normalize_bus_id(gpu_bus_id))) if gpu_bus_id else None
        )
        gpu_numa = _numa(gpu)
        if gpu is not None and all(p.path for p in ports):
            best = min(hops(gpu, str(p.path)) for p in ports)
            near = [p for p in ports if hops(gpu, str(p.path)) == best]
            how = f"nearest its GPU ({best} PCIe hops)"
        elif gpu_numa is not None and any(p.numa_node == gpu_numa for p in ports):
            near, how = [p for p in ports if p.numa_node == gpu_numa], "on its GPU's NUMA node"
        else:
            near, how = ports, "by local rank (no GPU to be near)"
        pick = near[local_rank % len(near)]
        if len(near) > 1:
            how += f", rail {local_rank % len(near)} of {len(near)} as near"
        return NicChoice(pick.name, how, pick.numa_node, set_for_ucx=True)
    found = interfaces(root)
    if len(found) == 1:
        return NicChoice(found[0].name, "the host's only network interface", found[0].numa_node)
    return None  # several interfaces, no RDMA: UCX chooses, and the transport of each link says which


def apply(choice: NicChoice | None, environ: Any = os.environ) -> None:
    """Give UCX the chosen RDMA port (before its context is created)."""
    if choice is not None and choice.set_for_ucx:
        environ["UCX_NET_DEVICES"] = choice.name
