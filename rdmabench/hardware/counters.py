"""Byte counters of the links a transfer may cross, read around the sampled steps so that what the
application reports can be checked against what went over the wire.

Network interfaces: /proc/self/net/dev, which always describes the reading process's own network
namespace (so a rank in a namespace "host" reads its own veth). Shared memory, cma and CUDA IPC have
no byte counter: entries say so (n/a) rather than guess. NVLink (NVML) and RDMA port counters
(sysfs) are not read yet.
"""

from __future__ import annotations

from .topology import read_text

Counters = dict[str, tuple[int, int]]  # interface -> (received bytes, sent bytes)


def net_counters() -> Counters:
    """Bytes received and sent so far by every network interface of this process's namespace."""
    found: Counters = {}
    for line in (read_text("/proc/self/net/dev") or "").splitlines()[2:]:
        name, _, fields = line.partition(":")
        values = fields.split()
        if len(values) >= 9:
            found[name.strip()] = (int(values[0]), int(values[8]))
    return found


def delta(before: Counters, after: Counters) -> Counters:
    """What each interface moved between two readings (interfaces that moved nothing left out)."""
    moved = {}
    for name, (rx, tx) in after.items():
        old_rx, old_tx = before.get(name, (rx, tx))
        if rx > old_rx or tx > old_tx:
            moved[name] = (rx - old_rx, tx - old_tx)
    return moved
