"""Figures a results file holds that follow from others: recomputed whenever a file is read, never
trusted. A file keeps them for readers without rdmabench (pandas); rdmabench's reports and verdicts
take them from here, so a file that claims a share of 1e9 is judged by its figure and its limit.

- share_of_limit: the figure over the link's limit (`link_limit.gbps`), as the run judged it
  (hardware.limits.judge: None for a figure above its limit beyond the limit's tolerance);
- aggregate_gbps: the median of `aggregate_samples`;
- aggregate_share_of_limit: the aggregate over the limit of every link of the pair's round;
- pattern_share_of_limit: the pattern round's aggregate over `pattern_limit.gbps`;
- the figure (bandwidth_gbps, latency_us...): the median of `samples`, and `stats`, their summary.
(messages_per_sample of a schema-2 entry is recomputed by compact.expand.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...hardware.limits import Limit, judge
from ...measure import registry
from ...stats import summarize


def limit_of(entry: Mapping[str, object]) -> Limit | None:
    """The physical limit a bandwidth entry's share is taken of; None for a time or no limit. (The
    loader has checked link_limit against the schema: an object with gbps above 0, or null.)"""
    limit = entry.get("link_limit")
    if entry.get("unit") != "GB/s" or not isinstance(limit, dict):
        return None
    return Limit(
        float(limit["gbps"]), str(limit.get("kind")), str(limit.get("detail", "")), limit.get("measured") is True
    )


# Limits that are a reference rate, not a bound: the storage device's O_DIRECT rate, measured at one
# request size (a buffered path with read-ahead, or a VM's host cache, may beat it). The run writes
# their share as the plain ratio, and a figure above one is a finding, not a measurement error.
REFERENCE_KINDS = frozenset({"storage"})


def share_of_limit(figure: float, limit: Limit | None) -> float | None:
    """A bandwidth's share of its limit, by the rule the run applied; None without a limit."""
    if limit is None:
        return None
    if limit.kind in REFERENCE_KINDS:
        return figure / limit.gbps
    return judge(figure, limit)[0]


def _links_of_a_pair(test: Any) -> int | None:
    """How many links a pair round of `test` has (bibw: 2); None for a test this process does not know."""
    kind = registry.find(test)
    return len(kind.pair_links(0, 1)) if kind is not None else None


def recompute(entry: dict[str, Any], figure: str) -> None:
    """Replace the entry's derived figures (see the module's docstring) by what its figure, samples
    and limits give. `figure` names the field holding the entry's figure."""
    samples = entry.get("samples")
    if isinstance(samples, list) and samples:
        entry["stats"] = summarize([float(v) for v in samples])
        entry[figure] = entry["stats"]["median"]
    limit = limit_of(entry)
    if figure in entry:
        entry["share_of_limit"] = share_of_limit(entry[figure], limit)
    together = entry.get("aggregate_samples")
    if isinstance(together, list) and together:
        entry["aggregate_gbps"] = summarize([float(v) for v in together])["median"]
    if "aggregate_share_of_limit" in entry:
        links, aggregate = _links_of_a_pair(entry.get("test")), entry.get("aggregate_gbps")
        known = limit is not None and links is not None and isinstance(aggregate, (int, float))
        entry["aggregate_share_of_limit"] = _finite(aggregate / (links * limit.gbps)) if known else None  # type: ignore[operator,union-attr]
    if "pattern_share_of_limit" in entry:
        pattern, whole = entry.get("pattern_limit"), entry.get("pattern_aggregate_gbps")
        known = isinstance(pattern, dict) and isinstance(whole, (int, float))
        entry["pattern_share_of_limit"] = _finite(whole / float(pattern["gbps"])) if known else None  # type: ignore[index,operator]


def _finite(share: float) -> float | None:
    """A share, or None where the limit is too small for one (no real limit is)."""
    return share if math.isfinite(share) else None
