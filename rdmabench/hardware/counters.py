"""Byte counters of the links a transfer may cross, read around the sampled steps so that what the
application reports can be checked against what went over the wire.

Network interfaces: /proc/self/net/dev, which always describes the reading process's own network
namespace (so a rank in a namespace "host" reads its own veth). NVLink: NVML's data counters of the
rank's GPU (field values NVLINK_THROUGHPUT_DATA_TX/RX, cumulative KiB, payload without protocol
headers), read as the sum over all links (scope id 0xFFFFFFFF: two fields, not two per link; on two
H200s it equalled the per-link sum and the bytes copied), and only for rounds with device memory at
both ends (64 ranks reading 36 fields each per round slowed a sweep's rounds several-fold). RDMA ports: sysfs port_xmit_data/port_rcv_data,
which count 4-byte words (the InfiniBand specification's unit), under the UCX device name
("mlx5_0:1"); untested on a real port (no lent machine has one), tested on a sysfs tree laid out
alike. Shared memory, cma, a copy within one GPU and PCIe (NVML gives PCIe only as a rate sampled
over 20 ms, not a byte count) have no counter: entries say so (n/a) rather than guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..units import is_digits
from .topology import nvml, read_text

Counters = dict[str, tuple[int, int]]  # counter -> (received bytes, sent bytes)

NVLINK = "nvlink"  # the key of this rank's GPU's NVLinks in a reading
NVLINK_TX_FIELD = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
NVLINK_RX_FIELD = 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
_KIB = 1024
_ALL_LINKS = 0xFFFFFFFF  # the scope id that sums a throughput field over every link
_IB_WORD = 4  # port_xmit_data and port_rcv_data count 4-byte words
SYSFS = "/sys"

# The GPU whose NVLinks this process counts: (pynvml, handle); set by watch_gpu.
_gpu: tuple[Any, Any] | None = None


def net_counters() -> Counters:
    """Bytes received and sent so far by every network interface of this process's namespace."""
    found: Counters = {}
    for line in (read_text("/proc/self/net/dev") or "").splitlines()[2:]:
        name, _, fields = line.partition(":")
        values = fields.split()
        if len(values) >= 9:
            found[name.strip()] = (int(values[0]), int(values[8]))
    return found


def rdma_counters(root: str = SYSFS) -> Counters:
    """Bytes received and sent so far by every RDMA port that has data counters, as UCX names it."""
    base = os.path.join(root, "class", "infiniband")
    found: Counters = {}
    for device in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        ports = os.path.join(base, device, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            here = os.path.join(ports, port, "counters")
            rx, tx = read_text(os.path.join(here, "port_rcv_data")), read_text(os.path.join(here, "port_xmit_data"))
            if rx is not None and tx is not None and is_digits(rx) and is_digits(tx):
                found[f"{device}:{port}"] = (int(rx) * _IB_WORD, int(tx) * _IB_WORD)
    return found


def watch_gpu(bus_id: str | None) -> bool:
    """Count the NVLinks of the GPU at `bus_id` in every later reading; False (and nothing counted)
    where it has no active NVLink or NVML has no data counter for it."""
    global _gpu
    _gpu = None
    api = nvml() if bus_id else None
    if api is None or bus_id is None:
        return False
    try:
        handle = api.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
    except Exception:
        return False
    for link in range(getattr(api, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if api.nvmlDeviceGetNvLinkState(handle, link) == 1:
                _gpu = (api, handle)
                break
        except Exception:
            continue
    if _gpu is not None and nvlink_counters() is None:
        _gpu = None
    return _gpu is not None


def nvlink_counters() -> tuple[int, int] | None:
    """Bytes the watched GPU has received and sent over all its NVLinks, or None (n/a)."""
    if _gpu is None:
        return None
    api, handle = _gpu
    try:
        values = api.nvmlDeviceGetFieldValues(handle, [(NVLINK_RX_FIELD, _ALL_LINKS), (NVLINK_TX_FIELD, _ALL_LINKS)])
    except Exception:
        return None
    if any(value.nvmlReturn != 0 for value in values):
        return None
    totals = {value.fieldId: int(value.value.ullVal) for value in values}
    return totals[NVLINK_RX_FIELD] * _KIB, totals[NVLINK_TX_FIELD] * _KIB


def read(nvlink: bool = True) -> Counters:
    """Every counter of this process: its namespace's interfaces, the host's RDMA ports, and (where
    asked) its GPU's NVLinks if watched."""
    found = net_counters() | rdma_counters()
    counted = nvlink_counters() if nvlink else None
    if counted is not None:
        found[NVLINK] = counted
    return found


@dataclass(frozen=True)
class Window:
    """A rank's readings around its sampled steps, kept whole: ranks that share a counter (several
    on one GPU or host) sample at slightly different times, and only the span from the first
    'before' to the last 'after' holds all of their bytes."""

    before: Counters
    after: Counters


def spanning(windows: list[Window], name: str) -> tuple[int, int] | None:
    """Bytes (rx, tx) counter `name` moved from the earliest to the latest of these readings of it
    (cumulative counters: the smallest 'before' is the earliest), or None where none read it."""
    befores = [w.before[name] for w in windows if name in w.before and name in w.after]
    afters = [w.after[name] for w in windows if name in w.before and name in w.after]
    if not befores:
        return None
    return (
        max(a[0] for a in afters) - min(b[0] for b in befores),
        max(a[1] for a in afters) - min(b[1] for b in befores),
    )
