"""A result entry: every field the results file documents, built in one place (make_entries) from
what the ranks of a round measured, where they ran, what UCX reported and what the hardware allows."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..hardware import counters, limits, shared, topology
from ..hardware.pathcheck import path_warnings
from ..modes import MemoryMode, pinned_method
from ..stats import median, percentile, summarize
from ..units import gbps
from ..wire.ucx import describe_path
from .beside import DUTY_FLOOR, judge_pairs, largest_drift
from .blocks import DEVICE_PATHS, BlockShape
from .round import LinkMeasurement, RoundSpec, staging_record

# Fields written only where they apply (a round of several links, a known or unknown limit).
_OPTIONAL = frozenset(
    (
        "link_limit_unknown",
        "aggregate_gbps",
        "aggregate_samples",
        "aggregate_share_of_limit",
        "concurrent_links",
        "pattern_aggregate_gbps",
        "pattern_limit",
        "pattern_share_of_limit",
        "wire",
        "remeasured_from",
        "src_nic",
        "dst_nic",
        "blocks",
        "cpu_s_per_gb",
        "one_buffer",
        "beside",
    )
)


@dataclass
class Entry:
    """One link at one size: the figure (under the test's own field name), its samples and how it was made."""

    test: str
    src_rank: int
    dst_rank: int
    src_mode: str
    dst_mode: str
    size_bytes: int
    figure_field: str  # the name the figure is written under: bandwidth_gbps, latency_us, ...
    value: float  # the median sample
    unit: str
    scope: str
    stats: dict[str, float]
    samples: list[float]
    window: int | None
    iterations: int
    warmup: int
    messages_per_sample: int
    validated: bool
    wrong_bytes: int | None
    staging: dict[str, Any] | None
    engine: str
    ucx_memory_type_declared: bool
    passes: int = 1  # windows (round trips) per step: messages_per_sample = iterations x window x passes
    transport: str | None = None
    protocol: str | None = None
    ucx_locality: str | None = None
    ucx_report: dict[str, Any] = field(default_factory=dict)
    src_host: str = ""
    src_gpu: int | None = None
    src_pinned_method: str | None = None
    dst_host: str = ""
    dst_gpu: int | None = None
    dst_pinned_method: str | None = None
    link: str = ""
    src_nic: str | None = None  # inter-node links: the network device of each end, where known
    dst_nic: str | None = None
    warnings: list[str] = field(default_factory=list)
    link_limit: dict[str, Any] | None = None
    share_of_limit: float | None = None
    link_limit_unknown: str | None = None
    aggregate_gbps: float | None = None
    aggregate_samples: list[float] | None = None
    aggregate_share_of_limit: float | None = None
    concurrent_links: int | None = None
    pattern_aggregate_gbps: float | None = None
    # The aggregate's own limit: a resource the round's links share, or every link at its limit.
    pattern_limit: dict[str, Any] | None = None
    pattern_share_of_limit: float | None = None
    # Bytes counted, during the sampled steps at the timing end, on the link the transport claims (its
    # interface or RDMA port; the GPU's NVLinks for CUDA IPC over NVLink): {"dev", "ratio" (counted /
    # moved by the application), "gbps"}, or ratio and gbps None with "n/a" saying why where the
    # counter could not be read. None: no counter exists for this path (shared memory, cma, PCIe).
    wire: dict[str, Any] | None = None
    pattern: str = "pair"
    round_seconds: float = 0.0
    # A screen's re-measure of a slow link, alone: the figure the link had in its concurrent round.
    remeasured_from: float | None = None
    # Block lists (--blocks): the shape, per-transfer percentiles, and the contiguous reference.
    blocks: dict[str, Any] | None = None
    # CPU seconds per GB moved at each end ("src", "dst"), in the sampled steps (bandwidth tests).
    cpu_s_per_gb: dict[str, float | None] | None = None
    # --one-buffer: every message of the window came from one buffer into one (a cache-resident figure).
    one_buffer: bool | None = None
    # --beside: the compute load that ran beside the sampled steps, the transfer alone, each GPU's load
    # alone and beside, and the load's slowdown (the worse GPU's): beside_record.
    beside: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for item in fields(self):
            name, value = item.name, getattr(self, item.name)
            if name == "figure_field":
                continue
            if name == "value":
                data[self.figure_field] = value
            elif not (name in _OPTIONAL and value is None):
                data[name] = value
        return data


@dataclass(frozen=True)
class Placement:
    """What entries need to know of every rank: its host, GPU, and hardware topology."""

    hosts: list[str]
    gpus: list[int | None]
    topologies: list[limits.RankTopology]


def make_entries(
    spec: RoundSpec,
    measured: list[LinkMeasurement],
    fetch_rows: dict[tuple[int, int], dict[str, Any] | None],
    placement: Placement,
    pattern: str,
    pattern_round: bool,
    round_seconds: float,
    cpu: dict[int, float] | None = None,
) -> list[Entry]:
    """The entries of one round (on rank 0, from every rank's measurements). A pattern round's
    entries carry the pattern's aggregate; a pair round of several links (both ways) its own."""
    in_flight = _in_flight(spec, measured, placement)
    entries = [
        _entry(spec, m, fetch_rows.get((m.link.src, m.link.dst)), placement, pattern, round_seconds, in_flight)
        for m in measured
    ]
    if cpu and spec.kind.is_bandwidth:
        _cpu_cost(entries, measured, spec, cpu)
    if spec.kind.is_bandwidth:
        _wire(entries, measured, spec, placement)
    if len(measured) > 1 and spec.kind.is_bandwidth:
        aggregate = round_aggregate(spec.size, measured)
        median = summarize(aggregate)["median"]
        pattern_limit = _pattern_limit(entries, placement, in_flight) if pattern_round else None
        for entry in entries:
            if pattern_round:
                entry.concurrent_links = len(measured)
                entry.pattern_aggregate_gbps = median
                if pattern_limit is not None:
                    entry.pattern_limit = pattern_limit.to_dict()
                    entry.pattern_share_of_limit = median / pattern_limit.gbps
            else:
                entry.aggregate_gbps, entry.aggregate_samples = median, aggregate
                if entry.link_limit:
                    entry.aggregate_share_of_limit = median / (len(measured) * entry.link_limit["gbps"])
    elif pattern_round:
        for entry in entries:
            entry.concurrent_links = len(measured)
    return entries


def _cpu_cost(entries: list[Entry], measured: list[LinkMeasurement], spec: RoundSpec, cpu: dict[int, float]) -> None:
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
    transport = entry.transport or ""
    if "," in transport:
        return None  # several lanes (multi-rail): no one counter to hold them to
    name, _, dev = transport.partition("/")
    rdma = bool(dev) and ":" in dev and not name.startswith("cuda")
    if name == "tcp" or rdma:
        # The row may be the receiver's (a rendezvous fetch names its own port), but the counter is
        # read at the timing end: take that end's own device where it is of the transport's kind.
        own = entry.src_nic if sends else entry.dst_nic
        if own and "," not in own and (":" in own) == rdma:
            dev = own
        return _Counter(dev, dev, dev)
    limit = entry.link_limit or {}
    if transport.startswith("cuda_ipc") and limit.get("kind") == "NVLink":
        rank = entry.src_rank if sends else entry.dst_rank
        gpu = placement.topologies[rank].gpu
        index = entry.src_gpu if sends else entry.dst_gpu
        # One GPU per rank by CUDA_VISIBLE_DEVICES makes every ordinal 0: the bus id tells GPUs apart.
        return _Counter(counters.NVLINK, f"nvlink/gpu{index}", gpu.pci_bus_id if gpu else f"gpu{index}")
    return None


def _wire(entries: list[Entry], measured: list[LinkMeasurement], spec: RoundSpec, placement: Placement) -> None:
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
        key = (entry.src_host if sends else entry.dst_host, counter.identity, sends)
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


def round_aggregate(size: int, measured: list[LinkMeasurement]) -> list[float]:
    """Per sample: all links' bytes over the time the slowest link took, step by step."""
    aggregate = []
    for sample in range(len(measured[0].step_times)):
        steps = list(zip(*(m.step_times[sample] for m in measured), strict=True))
        moved = sum(size * m.per_step * len(m.step_times[sample]) for m in measured)
        aggregate.append(gbps(moved, sum(max(times) for times in steps)))
    return aggregate


def _entry(
    spec: RoundSpec,
    m: LinkMeasurement,
    fetch: dict[str, Any] | None,
    placement: Placement,
    pattern: str,
    round_seconds: float,
    in_flight: dict[str, int],
) -> Entry:
    kind, link = spec.kind, m.link
    values = [kind.figure(spec.size, m.per_step, times) for times in m.step_times]
    stats = summarize(values)
    windowed = spec.protocol.windowed
    entry = Entry(
        test=kind.name,
        src_rank=link.src,
        dst_rank=link.dst,
        src_mode=link.src_mode.value,
        dst_mode=link.dst_mode.value,
        size_bytes=spec.size,
        figure_field=kind.field,
        value=stats["median"],
        unit=kind.unit,
        scope=kind.scope,
        stats=stats,
        samples=values,
        window=m.window if windowed else None,
        iterations=m.iterations,
        warmup=m.warmup,
        messages_per_sample=m.messages_per_sample,
        passes=m.passes,
        validated=spec.validate,
        wrong_bytes=0 if spec.validate else None,
        staging=staging_record(spec, link),
        engine=m.engine,
        ucx_memory_type_declared=m.memory_type_declared,
        pattern=pattern,
        round_seconds=round_seconds,
        one_buffer=True if spec.one_buffer else None,
    )
    if m.sender_rows:
        path = describe_path(m.sender_rows, {"fetch": fetch})
        entry.transport, entry.protocol = path["transport"], path["protocol"]
        entry.ucx_locality, entry.ucx_report = path["ucx_locality"], path["ucx_report"]
    if m.details.get("transfer_seconds"):
        entry.blocks = block_record(spec.size, m.details)
    if m.details.get("beside"):
        entry.beside = beside_record(spec, m, values)
    _place(entry, placement)
    if kind.is_bandwidth:
        _judge(entry, placement, in_flight.get(entry.src_host))
    return entry


def _in_flight(spec: RoundSpec, measured: list[LinkMeasurement], placement: Placement) -> dict[str, int]:
    """Per host, the bytes the round's links within it keep in flight: each link's window of buffers
    (a block list: its pool) at both ends. A memory copy's regime follows it (limits.host_copy_limit)."""
    found: dict[str, int] = {}
    for m in measured:
        host = placement.hosts[m.link.src]
        if host != placement.hosts[m.link.dst]:
            continue
        shape = m.details.get("shape")
        if shape is not None:
            per_end = shape.pool_slots(spec.size) * spec.size
        else:
            per_end = spec.size * spec.distinct_buffers(m.window if spec.protocol.windowed else 1)
        found[host] = found.get(host, 0) + 2 * per_end
    return found


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)  # to the nanosecond: the clock's own resolution


def block_record(size: int, details: dict[str, Any]) -> dict[str, Any]:
    """A block-list entry's shape and its transfers: GB/s and latency percentiles from every timed
    transfer (not sample means), how the time split into posting and completion (and the median
    transfer's share spent posting), descriptors a second, and what the list cost before its warm
    transfers (`cold`, seconds: the peer's registration, the key exchange, preparing the lists, the
    first transfer)."""
    shape: BlockShape = details["shape"]
    times, posting = details["transfer_seconds"], details["post_seconds"]
    moved = size * shape.count
    completion = [t - p for t, p in zip(times, posting, strict=True)]
    median = percentile(times, 50)
    record = {
        "count": shape.count,
        "block_bytes": size,
        "transfer_bytes": moved,
        "layout": shape.layout,
        "batch": shape.batch,
        "regions": shape.regions,
        "pool_bytes": shape.pool_slots(size) * size,
        "operation": details["operation"],
        "transfers": len(times),
        "transfer_us": {f"p{q:g}": _us(percentile(times, q)) for q in (50, 99, 99.9)} | {"max": _us(max(times))},
        "transfer_gbps_p50": round(gbps(moved, median), 6),
        "descriptors_per_second_p50": round(shape.count / median, 3),
        "post_us_p50": _us(percentile(posting, 50)),
        "post_share_p50": round(percentile([p / t for p, t in zip(posting, times, strict=True)], 50), 6),
        "completion_us_p50": _us(percentile(completion, 50)),
    }
    cold = details.get("cold")
    if cold:
        record["cold_s"] = {key.removesuffix("_s"): round(value, 9) for key, value in cold.items()}
    record.update(_block_path(details, moved * shape.batch))
    posted_by = record.get("posted_by")
    if posted_by is not None and posted_by not in DEVICE_PATHS and details.get("posted_descriptors") is not None:
        # The requests the CPU posted a step (count x batch blocks): adjacent blocks merged, unless --no-merge.
        record.update(posted_descriptors=details["posted_descriptors"], merged=shape.merge)
    if shape.table is not None:
        record["table"] = shape.table.record()
    return record


def beside_record(spec: RoundSpec, m: LinkMeasurement, values: list[float]) -> dict[str, Any]:
    """A figure beside compute: the transfer alone (each pair's first half), both GPUs' load alone and
    beside, and the model's cost, the worse of the link's two GPUs pair by pair: its slowdown (the lost
    work over the shared window; median and range over the pairs judged: a transfer in flight for at
    least DUTY_FLOOR of the shared half), the duty, the model's milliseconds lost per GiB moved, and a
    carve-out's own cost (the carved GEMM alone over the whole GPU's)."""
    assert spec.beside is not None
    found = m.details["beside"]
    alone = [spec.kind.figure(spec.size, m.per_step, times) for times in found["alone_step_times"]]
    gpus = found["compute"]
    moved = [spec.size * m.per_step * len(times) for times in m.step_times]  # each pair's shared half
    pairs = judge_pairs(list(gpus.values()), moved)
    judged = [s for index in pairs.judged if (s := pairs.slowdowns[index]) is not None]
    duties = [d for d in pairs.duties if d is not None]
    drifts = [gpu["alone_drift"] for gpu in gpus.values() if gpu.get("alone_drift") is not None]
    costs = [gpu["carveout_cost"] for gpu in gpus.values() if gpu.get("carveout_cost") is not None]
    record: dict[str, Any] = {
        "load": spec.beside.label,
        "unit": spec.beside.unit,
        "transfer_alone": round(median(alone), 6),
        "transfer_alone_samples": [round(v, 6) for v in alone],
        "transfer_share_of_alone": round(median(values) / median(alone), 4) if median(alone) else None,
        "slowdown": round(median(judged), 4) if judged else None,
        "slowdown_pairs": [None if s is None else round(s, 4) for s in pairs.slowdowns],
        "slowdown_range": [round(min(judged), 4), round(max(judged), 4)] if judged else None,
        "duty": round(median(duties), 4) if duties else None,
        "duty_pairs": [None if d is None else round(d, 4) for d in pairs.duties],
        "model_ms_per_gib": round(median(pairs.lost_ms_per_gib), 4) if pairs.lost_ms_per_gib else None,
        "carveout": spec.beside.carveout,
        "carveout_cost": round(max(costs), 4) if costs else None,
        "alone_drift": largest_drift(drifts),
        "drifting_pairs": sorted({i for gpu in gpus.values() for i in gpu.get("drifting_pairs", [])}),
        "pairs": len(judged),
        "gpus": {str(rank): gpu for rank, gpu in sorted(gpus.items())},
    }
    unjudged = len(pairs.slowdowns) - len(pairs.judged)
    if unjudged:
        record["note"] = (
            f"{unjudged} of {len(pairs.slowdowns)} pairs not judged: a transfer in flight for under "
            f"{DUTY_FLOOR:.0%} of the shared half, or no whole operation in its window"
        )
    return record


def _block_path(details: dict[str, Any], step_bytes: int) -> dict[str, Any]:
    """Who posted the list (`posted_by`, `path`; `path_note`: why not the GPU, where auto fell back)
    and the list's ceiling: a plain copy kernel's GB/s over the same step's list (median and runs)."""
    path = details.get("path")
    if path is None:
        return {}
    found: dict[str, Any] = {"posted_by": details.get("posted_by") or "cpu", "path": path}
    if details.get("path_note"):
        found["path_note"] = details["path_note"]
    if details.get("sms"):
        found["sms"] = details["sms"]
    ceiling = details.get("ceiling_seconds")
    if ceiling:
        found["ceiling_gbps"] = round(gbps(step_bytes, median(ceiling)), 6)
        found["ceiling_runs_gbps"] = [round(gbps(step_bytes, s), 6) for s in ceiling]
    return found


def _place(entry: Entry, placement: Placement) -> None:
    """Where each end ran, how its pinned memory was pinned, and whether UCX's path fits the modes."""
    src, dst = entry.src_rank, entry.dst_rank
    entry.src_host, entry.dst_host = placement.hosts[src], placement.hosts[dst]
    entry.src_gpu, entry.dst_gpu = placement.gpus[src], placement.gpus[dst]
    entry.src_pinned_method = pinned_method(MemoryMode(entry.src_mode), placement.gpus[src] is not None)
    entry.dst_pinned_method = pinned_method(MemoryMode(entry.dst_mode), placement.gpus[dst] is not None)
    same_host = entry.src_host == entry.dst_host
    entry.link = "same host" if same_host else "inter-node"
    if not same_host:
        ends = placement.topologies[src].nic, placement.topologies[dst].nic
        entry.src_nic, entry.dst_nic = (nic.name if nic else None for nic in ends)
    entry.warnings = path_warnings(
        {
            "transport": entry.transport,
            "protocol": entry.protocol,
            "ucx_report": entry.ucx_report,
            "src_mode": entry.src_mode,
            "dst_mode": entry.dst_mode,
        },
        same_host,
    )


def _host_copy(topologies: list[limits.RankTopology], host: str) -> topology.HostCopy | None:
    """The memory copy one rank of `host` measured, where one did."""
    return next((t.host_copy for t in topologies if t.host == host and t.host_copy), None)


def _pattern_limit(entries: list[Entry], placement: Placement, in_flight: dict[str, int]) -> limits.Limit | None:
    """The limit of a pattern round's aggregate: hardware/shared.py's bound over its links (a host's
    memory copy among them only where the round keeps as many bytes in flight there as it did)."""
    topologies = placement.topologies
    links = []
    for entry in entries:
        src, dst = topologies[entry.src_rank], topologies[entry.dst_rank]
        copy = _host_copy(topologies, src.host)
        bound = copy.gbps if copy and in_flight.get(src.host, 0) >= copy.in_flight else None
        found = shared.resources(src, dst, entry.src_mode, entry.dst_mode, bound)
        links.append((found, entry.link_limit["gbps"] if entry.link_limit else None))
    return shared.aggregate_limit(links)


def _judge(entry: Entry, placement: Placement, in_flight: int | None) -> None:
    """The link's physical limit and the figure's share of it, or a warning for an impossible figure;
    `in_flight`: the bytes its round keeps in flight on its host (a host memory copy's regime)."""
    topologies = placement.topologies
    src, dst = topologies[entry.src_rank], topologies[entry.dst_rank]
    copy = _host_copy(topologies, src.host)
    limit, reason = limits.link_limit(src, dst, entry.src_mode, entry.dst_mode, copy, in_flight)
    entry.link_limit = limit.to_dict() if limit else None
    if limit is None:
        entry.link_limit_unknown = reason
        return
    share, warning = limits.judge(entry.value, limit)
    entry.share_of_limit = share
    if warning:
        entry.warnings.append(warning)
