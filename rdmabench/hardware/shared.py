"""Limits of resources that links share: a concurrent pattern's aggregate can be bounded by one
resource many of its links cross, not by any single link's own limit.

The resources a link crosses, per direction:
- GPU to GPU on one host over NVLink: behind NVSwitch, the source GPU's NVLink egress and the
  destination GPU's NVLink ingress (all its links, shared by all its peers); with direct links, the
  pair's own links.
- a GPU end facing host memory (or staged through it): that GPU's PCIe link, in the direction the
  bytes cross it;
- host memory at both ends on one host: that host's memory copy rate (one copy a link, all links of
  the host share the memory system);
- between hosts: the NIC of each end (egress at the source, ingress at the destination), and the PCIe
  link of a GPU end.

The aggregate's limit is the tightest of two kinds of bound: every link at its own limit; and, for
each shared resource, that resource at its capacity plus every link that does not cross it at its
own limit. It is exact for a fan-out or an incast (one resource every link crosses) and for links that
share nothing, and an upper bound in between. The resource that gives it is named.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..modes import MemoryMode
from .limits import Limit, RankTopology


@dataclass(frozen=True)
class Resource:
    key: tuple[str, ...]  # identity: the same key on two links is one resource
    kind: str  # "NVLink", "PCIe", "NIC", "host memory copy"
    gbps: float
    what: str


def _gpu_name(end: RankTopology) -> str:
    return f"GPU {end.gpu.index} on {end.host}" if end.gpu else f"the GPU of rank {end.rank}"


def _nvlink(src: RankTopology, dst: RankTopology) -> list[Resource]:
    assert src.gpu is not None and dst.gpu is not None
    link = src.gpu.nvlinks.get(dst.gpu.pci_bus_id)
    if link is None or link.gbps <= 0:
        return _pcie(src, "egress") + _pcie(dst, "ingress")
    if src.gpu.nvswitch or dst.gpu.nvswitch:
        return [
            Resource(("nvlink-out", src.host, src.gpu.pci_bus_id), "NVLink", link.gbps, f"NVLink egress of {_gpu_name(src)} (via NVSwitch)"),
            Resource(("nvlink-in", dst.host, dst.gpu.pci_bus_id), "NVLink", link.gbps, f"NVLink ingress of {_gpu_name(dst)} (via NVSwitch)"),
        ]  # fmt: skip
    pair = (src.host, src.gpu.pci_bus_id, dst.gpu.pci_bus_id)
    return [Resource(("nvlink", *pair), "NVLink", link.gbps, f"NVLink {_gpu_name(src)} -> GPU {dst.gpu.index}")]


def _pcie(end: RankTopology, direction: str) -> list[Resource]:
    if end.gpu is None or end.gpu.pcie is None:
        return []
    key = ("pcie-" + direction, end.host, end.gpu.pci_bus_id)
    return [Resource(key, "PCIe", end.gpu.pcie.gbps, f"PCIe {direction} of {_gpu_name(end)}")]


def _nic(end: RankTopology, direction: str) -> list[Resource]:
    nic = end.nic.name if end.nic else None
    ports = [n for n in end.nics if n.name == nic] or end.nics
    if not ports:
        return []
    port = max(ports, key=lambda n: n.gbps)
    return [
        Resource(
            ("nic-" + direction, end.host, port.name), "NIC", port.gbps, f"NIC {port.name} {direction} on {end.host}"
        )
    ]


def resources(
    src: RankTopology, dst: RankTopology, src_mode: str, dst_mode: str, host_copy: float | None
) -> list[Resource]:
    """The shared resources one link's bytes cross (see the module's description)."""
    modes = MemoryMode(src_mode), MemoryMode(dst_mode)
    src_dev, dst_dev = (mode.ucx_memory != "host" for mode in modes)
    found: list[Resource] = []
    if src.host != dst.host:
        found += _nic(src, "egress") + _nic(dst, "ingress")
        found += (_pcie(src, "egress") if modes[0].on_device else []) + (
            _pcie(dst, "ingress") if modes[1].on_device else []
        )
        return found
    if src_dev and dst_dev and src.gpu and dst.gpu and src.gpu.pci_bus_id != dst.gpu.pci_bus_id:
        return _nvlink(src, dst)
    found += (_pcie(src, "egress") if modes[0].on_device else []) + (
        _pcie(dst, "ingress") if modes[1].on_device else []
    )
    if all(mode.ucx_memory == "host" for mode in modes) and host_copy:
        found.append(Resource(("host-copy", src.host), "host memory copy", host_copy, f"memory copies on {src.host}"))
    return found


def aggregate_limit(links: list[tuple[list[Resource], float | None]]) -> Limit | None:
    """The limit of a round's aggregate from each link's shared resources and own limit (GB/s, None
    where unknown): the tightest bound of the module's description, or None when nothing bounds it."""
    bounds: list[tuple[float, Limit]] = []
    own = [limit for _, limit in links]
    if all(limit is not None for limit in own):
        total = sum(limit for limit in own if limit is not None)
        bounds.append((total, Limit(total, "links", f"{len(links)} links, each at its own limit")))
    shared: dict[tuple[str, ...], tuple[Resource, list[int]]] = {}
    for index, (found, _) in enumerate(links):
        for resource in found:
            shared.setdefault(resource.key, (resource, []))[1].append(index)
    for resource, users in shared.values():
        others = [own[i] for i in range(len(links)) if i not in users]
        if any(limit is None for limit in others):
            continue
        bound = resource.gbps + sum(limit for limit in others if limit is not None)
        what = f"{resource.what}, shared by {len(users)} of the {len(links)} links"
        if others:
            what += f" (the other {len(others)} at their own limits)"
        bounds.append((bound, Limit(bound, resource.kind, what)))
    return min(bounds, key=lambda pair: pair[0])[1] if bounds else None
