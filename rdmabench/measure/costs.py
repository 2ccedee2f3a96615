"""What moving an entry's bytes cost beyond its figure: the CPU seconds per GB at each end, and the
wire check (the bytes the counter of the link the transport claims saw, against the bytes moved)."""

from __future__ import annotations

from dataclasses import dataclass

from ..hardware import counters
from ..units import gbps
from .entryrecord import Entry, Placement
from .round import LinkMeasurement, RoundSpec


def cpu_cost(entries: list[Entry], measured: list[LinkMeasurement], spec: RoundSpec, cpu: dict[int, float]) -> None:
    """CPU seconds per GB moved, per end: a rank's CPU time in the sampled steps over every byte of
    the round's links it sent or received (a rank of several links shares its time among them)."""
    moved: dict[int, float] = {}
    for m in measured:
        nbytes = m.sampled_bytes(spec.size)
        for rank in {m.link.src, m.link.dst}:
            moved[rank] = moved.get(rank, 0.0) + nbytes
    for entry in entries:
        ends = {
            end: (cpu.get(rank), moved.get(rank)) for end, rank in (("src", entry.src_rank), ("dst", entry.dst_rank))
        }
        entry.cpu_s_per_gb = {
            end: round(seconds / (nbytes / 1e9), 6) if seconds is not None and nbytes else None
            for end, (seconds, nbytes) in ends.items()
        }


@dataclass(frozen=True)
class _Counter:
    """The counter a link's bytes should cross at its timing end."""

    reading: str  # its name in a rank's reading: an interface, an RDMA port, or counters.NVLINK
    label: str  # its name in the entry: "eth0", "mlx5_0:1", "nvlink/gpu1"
    identity: str  # what makes two ranks' readings the same counter on one host (a GPU's PCI bus id)


def _wire_counter(entry: Entry, sends: bool, placement: Placement) -> _Counter | None:
    """A TCP transport's interface ("tcp/eth0"), an RDMA transport's port ("rc_mlx5/mlx5_0:1"), or
    the timing end's GPU's NVLinks for CUDA IPC between two NVLink-joined GPUs; None where no
    counter exists (shared memory, cma, one GPU, PCIe, several lanes)."""
    transport = entry.path.transport or ""
    if "," in transport:
        return None  # several lanes (multi-rail): no one counter to hold them to
    name, _, dev = transport.partition("/")
    rdma = bool(dev) and ":" in dev and not name.startswith("cuda")
    if name == "tcp" or rdma:
        # The row may be the receiver's (a rendezvous fetch names its own port), but the counter is
        # read at the timing end: take that end's own device where it is of the transport's kind.
        own = entry.ends.src_nic if sends else entry.ends.dst_nic
        if own and "," not in own and (":" in own) == rdma:
            dev = own
        return _Counter(dev, dev, dev)
    limit = entry.limit.link_limit
    if transport.startswith("cuda_ipc") and limit is not None and limit["kind"] == "NVLink":
        rank = entry.src_rank if sends else entry.dst_rank
        gpu = placement.topologies[rank].gpu
        index = entry.ends.src_gpu if sends else entry.ends.dst_gpu
        # One GPU per rank by CUDA_VISIBLE_DEVICES makes every ordinal 0: the bus id tells GPUs apart.
        return _Counter(counters.NVLINK, f"nvlink/gpu{index}", gpu.pci_bus_id if gpu else f"gpu{index}")
    return None


def wire_check(entries: list[Entry], measured: list[LinkMeasurement], spec: RoundSpec, placement: Placement) -> None:
    """Check each link's bytes against the counter of the link it claims, at the timing end. A
    counter belongs to an interface of a host or to a GPU, not to one link or rank: it is compared
    with the bytes of every link of the round whose timing end sends (or receives) through it, over
    the span from the first of their ranks' readings to the last. (That span can hold some of their
    warm-up too: a ratio above 1 is no alarm; one well below 1 is.)"""
    Key = tuple[str, str, bool]
    moved: dict[Key, float] = {}
    seconds: dict[Key, float] = {}
    windows: dict[Key, dict[int, counters.Window]] = {}
    keys: list[tuple[Key, _Counter] | None] = []
    for entry, m in zip(entries, measured, strict=True):
        sends = m.timer == m.link.src
        counter = _wire_counter(entry, sends, placement)
        if counter is None:
            keys.append(None)
            continue
        key = (entry.ends.src_host if sends else entry.ends.dst_host, counter.identity, sends)
        keys.append((key, counter))
        moved[key] = moved.get(key, 0.0) + m.sampled_bytes(spec.size)
        seconds[key] = max(seconds.get(key, 0.0), sum(sum(times) for times in m.step_times))
        windows.setdefault(key, {})[m.timer] = m.wire
    for entry, found in zip(entries, keys, strict=True):
        if found is None:
            continue
        key, counter = found
        counted_pair = counters.spanning(list(windows[key].values()), counter.reading)
        if counted_pair is None:  # never "0% counted": a counter nobody could read says nothing
            why = (
                "NVML has no NVLink data counter here"
                if counter.reading == counters.NVLINK
                else f"{counter.label} has no byte counter readable at the timing end"
            )
            entry.wire = {"dev": counter.label, "ratio": None, "gbps": None, "n/a": why}
            continue
        rx, tx = counted_pair
        counted = tx if key[2] else rx
        ratio = counted / moved[key] if moved[key] else 0.0
        entry.wire = {"dev": counter.label, "ratio": round(ratio, 3), "gbps": round(gbps(counted, seconds[key]), 3)}
        if ratio < 0.9:  # (a same-host link over tcp/lo is already named by the path check)
            entry.warnings.append(
                f"only {ratio:.0%} of the bytes were counted on {counter.label}, the link the transport claims: "
                "they went another way"
            )
