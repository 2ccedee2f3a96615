"""An entry judged against what the hardware allows: its link's physical limit and its share of it
(or a warning for an impossible figure), a pattern round's limit of its aggregate, and the bytes a
round keeps in flight on a host (the regime of a host memory copy's limit)."""

from __future__ import annotations

from ..hardware import limits, shared, topology
from .entryrecord import Entry, Placement
from .round import LinkMeasurement, RoundSpec


def in_flight(spec: RoundSpec, measured: list[LinkMeasurement], placement: Placement) -> dict[str, int]:
    """Per host, the bytes the round's links within it keep in flight: each link's window of buffers
    (a block list: its pool) at both ends. A memory copy's regime follows it (limits.host_copy_limit)."""
    found: dict[str, int] = {}
    for m in measured:
        host = placement.hosts[m.link.src]
        if host != placement.hosts[m.link.dst]:
            continue
        per_end = m.record.end_bytes(spec.size) if m.record is not None else None
        if per_end is None:
            per_end = spec.size * spec.distinct_buffers(m.window if spec.protocol.windowed else 1)
        found[host] = found.get(host, 0) + 2 * per_end
    return found


def _host_copy(topologies: list[limits.RankTopology], host: str) -> topology.HostCopy | None:
    """The memory copy one rank of `host` measured, where one did."""
    return next((t.host_copy for t in topologies if t.host == host and t.host_copy), None)


def pattern_limit(entries: list[Entry], placement: Placement, in_flight: dict[str, int]) -> limits.Limit | None:
    """The limit of a pattern round's aggregate: hardware/shared.py's bound over its links (a host's
    memory copy among them only where the round keeps as many bytes in flight there as it did)."""
    topologies = placement.topologies
    links = []
    for entry in entries:
        src, dst = topologies[entry.src_rank], topologies[entry.dst_rank]
        copy = _host_copy(topologies, src.host)
        bound = copy.gbps if copy and in_flight.get(src.host, 0) >= copy.in_flight else None
        found = shared.resources(src, dst, entry.src_mode, entry.dst_mode, bound)
        links.append((found, entry.limit.link_limit["gbps"] if entry.limit.link_limit else None))
    return shared.aggregate_limit(links)


def judge(entry: Entry, placement: Placement, in_flight: int | None) -> None:
    """The link's physical limit and the figure's share of it, or a warning for an impossible figure;
    `in_flight`: the bytes its round keeps in flight on its host (a host memory copy's regime)."""
    topologies = placement.topologies
    src, dst = topologies[entry.src_rank], topologies[entry.dst_rank]
    copy = _host_copy(topologies, src.host)
    limit, reason = limits.link_limit(src, dst, entry.src_mode, entry.dst_mode, copy, in_flight)
    entry.limit.link_limit = limit.to_dict() if limit else None
    if limit is None:
        entry.limit.link_limit_unknown = reason
        return
    share, warning = limits.judge(entry.value, limit)
    entry.limit.share_of_limit = share
    if warning:
        entry.warnings.append(warning)
