"""A result entry: every field the results file documents, built in one place (make_entries) from
what the ranks of a round measured, where they ran and what UCX reported; judged against the hardware's
limits (judge.py) and costed (costs.py), which the entry reads."""

from __future__ import annotations

from ..hardware.pathcheck import path_warnings
from ..modes import MemoryMode, pinned_method
from ..stats import summarize
from ..units import gbps
from ..wire.protoinfo import ProtoRow
from ..wire.ucx import describe_path
from .costs import cpu_cost, wire_check
from .entryrecord import Entry, Placement, Steps, UcxPath
from .judge import in_flight as in_flight_bytes
from .judge import judge
from .judge import pattern_limit as aggregate_limit
from .judging import beside_figure
from .round import LinkMeasurement, RoundSpec, staging_record

__all__ = ["Entry", "Placement", "make_entries", "round_aggregate"]


def make_entries(
    spec: RoundSpec,
    measured: list[LinkMeasurement],
    fetch_rows: dict[tuple[int, int], ProtoRow | None],
    placement: Placement,
    pattern: str,
    pattern_round: bool,
    round_seconds: float,
    cpu: dict[int, float] | None = None,
) -> list[Entry]:
    """The entries of one round (on rank 0, from every rank's measurements). A pattern round's
    entries carry the pattern's aggregate; a pair round of several links (both ways) its own."""
    in_flight = in_flight_bytes(spec, measured, placement)
    entries = [
        _entry(spec, m, fetch_rows.get((m.link.src, m.link.dst)), placement, pattern, round_seconds, in_flight)
        for m in measured
    ]
    if cpu and spec.kind.is_bandwidth:
        cpu_cost(entries, measured, spec, cpu)
    if spec.kind.is_bandwidth:
        wire_check(entries, measured, spec, placement)
    if len(measured) > 1 and spec.kind.is_bandwidth:
        aggregate = round_aggregate(spec.size, measured)
        median = summarize(aggregate)["median"]
        pattern_limit = aggregate_limit(entries, placement, in_flight) if pattern_round else None
        for entry in entries:
            together = entry.together
            if pattern_round:
                together.concurrent_links = len(measured)
                together.pattern_aggregate_gbps = median
                if pattern_limit is not None:
                    together.pattern_limit = pattern_limit.to_dict()
                    together.pattern_share_of_limit = median / pattern_limit.gbps
            else:
                together.aggregate_gbps, together.aggregate_samples = median, aggregate
                if entry.limit.link_limit:
                    together.aggregate_share_of_limit = median / (len(measured) * entry.limit.link_limit["gbps"])
    elif pattern_round:
        for entry in entries:
            entry.together.concurrent_links = len(measured)
    return entries


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
    fetch: ProtoRow | None,
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
        steps=Steps(
            m.window if windowed else None,
            m.iterations,
            m.warmup,
            m.messages_per_sample,
            m.engine,
            m.memory_type_declared,
            m.passes,
        ),
        validated=spec.validate,
        wrong_bytes=0 if spec.validate else None,
        staging=staging_record(spec, link),
        pattern=pattern,
        round_seconds=round_seconds,
        one_buffer=True if spec.one_buffer else None,
    )
    if m.sender_rows is not None:
        path = describe_path(m.sender_rows, fetch)
        entry.path = UcxPath(path.transport, path.protocol, path.ucx_locality, path.ucx_report)
    entry.step = m.record.figure(spec.size) if m.record is not None else None
    if m.beside is not None and spec.beside is not None:  # made by the load's side, passed through
        alone = [kind.figure(spec.size, m.per_step, times) for times in m.beside.alone_step_times]
        moved = [spec.size * m.per_step * len(times) for times in m.step_times]  # each pair's shared half
        entry.beside = beside_figure(spec.beside, alone, values, moved, m.beside.compute)
    _place(entry, placement)
    if kind.is_bandwidth:
        judge(entry, placement, in_flight.get(entry.ends.src_host))
    return entry


def _place(entry: Entry, placement: Placement) -> None:
    """Where each end ran, how its pinned memory was pinned, and whether UCX's path fits the modes."""
    src, dst = entry.src_rank, entry.dst_rank
    ends = entry.ends
    ends.src_host, ends.dst_host = placement.hosts[src], placement.hosts[dst]
    ends.src_gpu, ends.dst_gpu = placement.gpus[src], placement.gpus[dst]
    ends.src_pinned_method = pinned_method(MemoryMode(entry.src_mode), placement.gpus[src] is not None)
    ends.dst_pinned_method = pinned_method(MemoryMode(entry.dst_mode), placement.gpus[dst] is not None)
    same_host = ends.src_host == ends.dst_host
    ends.link = "same host" if same_host else "inter-node"
    if not same_host:
        nics = placement.topologies[src].nic, placement.topologies[dst].nic
        ends.src_nic, ends.dst_nic = (nic.name if nic else None for nic in nics)
    entry.warnings = path_warnings(
        {
            "transport": entry.path.transport,
            "protocol": entry.path.protocol,
            "ucx_report": entry.path.ucx_report,
            "ucx_locality": entry.path.ucx_locality,
            "src_mode": entry.src_mode,
            "dst_mode": entry.dst_mode,
        },
        same_host,
    )
