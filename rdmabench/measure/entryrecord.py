"""A results entry as a record: every field the results file documents (docs/results-format.md), grouped
into the records an entry is made of (how its steps ran, UCX's path, where its ends ran, its limit, its
round's aggregate), written flat in the file's order; and where a round's ranks ran (`Placement`).
Built by measure/entry.py."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TypedDict

from ..hardware import limits
from ..wire.staging import StagingRecord
from ..wire.ucx import UcxReport
from .besiderecord import BesideFigure
from .contract import StepFigure

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
        "cpu_s_per_gb",
        "one_buffer",
        "beside",
    )
)
_FIGURE, _STEP = "value", "step"  # written under the test's figure field, and under the step record's key
# The file's order of an entry's fields (its groups' fields in place).
_ORDER = (
    "test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes", _FIGURE, "unit", "scope", "stats",
    "samples", "window", "iterations", "warmup", "messages_per_sample", "validated", "wrong_bytes", "staging",
    "engine", "ucx_memory_type_declared", "passes", "transport", "protocol", "ucx_locality", "ucx_report",
    "src_host", "src_gpu", "src_pinned_method", "dst_host", "dst_gpu", "dst_pinned_method", "link", "src_nic",
    "dst_nic", "warnings", "link_limit", "share_of_limit", "link_limit_unknown", "aggregate_gbps",
    "aggregate_samples", "aggregate_share_of_limit", "concurrent_links", "pattern_aggregate_gbps", "pattern_limit",
    "pattern_share_of_limit", "wire", "pattern", "round_seconds", "remeasured_from", _STEP, "cpu_s_per_gb",
    "one_buffer", "beside",
)  # fmt: skip


class _WireFigures(TypedDict):
    dev: str
    ratio: float | None
    gbps: float | None


_WireWhy = TypedDict("_WireWhy", {"n/a": str}, total=False)


class WireRecord(_WireFigures, _WireWhy):
    """The wire check of an entry (its "wire", docs/results-format.md): the counter (`dev`), the bytes it
    counted over those the application moved (`ratio`) and their rate (`gbps`), or both None with "n/a"
    saying why where the counter could not be read."""


@dataclass
class Steps:
    """How the link's steps ran: the window, steps per sample, warm-up, and who timed them."""

    window: int | None  # messages in flight (None: a protocol of one message each way)
    iterations: int
    warmup: int
    messages_per_sample: int
    engine: str  # "native" or "python"
    ucx_memory_type_declared: bool
    passes: int = 1  # windows (round trips) per step: messages_per_sample = iterations x window x passes


@dataclass
class UcxPath:
    """What UCX reported of the path: its transport, protocol, locality and report rows."""

    transport: str | None = None
    protocol: str | None = None
    ucx_locality: str | None = None
    ucx_report: UcxReport = field(default_factory=UcxReport)


@dataclass
class Ends:
    """Where each end ran: its host, GPU, how its pinned memory was pinned, the link's class, and (inter-node
    links) the network device of each end, where known."""

    src_host: str = ""
    src_gpu: int | None = None
    src_pinned_method: str | None = None
    dst_host: str = ""
    dst_gpu: int | None = None
    dst_pinned_method: str | None = None
    link: str = ""
    src_nic: str | None = None
    dst_nic: str | None = None


@dataclass
class Limit:
    """The link's physical limit and the figure's share of it, or why no limit is known (measure/judge.py)."""

    link_limit: limits.LimitRecord | None = None
    share_of_limit: float | None = None
    link_limit_unknown: str | None = None


@dataclass
class Together:
    """A round of several links: a pair round's aggregate (both ways), or a pattern round's aggregate and
    its own limit (a resource the round's links share, or every link at its limit)."""

    aggregate_gbps: float | None = None
    aggregate_samples: list[float] | None = None
    aggregate_share_of_limit: float | None = None
    concurrent_links: int | None = None
    pattern_aggregate_gbps: float | None = None
    pattern_limit: limits.LimitRecord | None = None
    pattern_share_of_limit: float | None = None


_GROUPS = (Steps, UcxPath, Ends, Limit, Together)


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
    steps: Steps
    validated: bool
    wrong_bytes: int | None
    staging: StagingRecord | None
    path: UcxPath = field(default_factory=UcxPath)
    ends: Ends = field(default_factory=Ends)
    warnings: list[str] = field(default_factory=list)
    limit: Limit = field(default_factory=Limit)
    together: Together = field(default_factory=Together)
    # Bytes counted, during the sampled steps at the timing end, on the link the transport claims (its
    # interface or RDMA port; the GPU's NVLinks for CUDA IPC over NVLink): {"dev", "ratio" (counted /
    # moved by the application), "gbps"}, or ratio and gbps None with "n/a" saying why where the
    # counter could not be read. None: no counter exists for this path (shared memory, cma, PCIe).
    wire: WireRecord | None = None
    pattern: str = "pair"
    round_seconds: float = 0.0
    # A screen's re-measure of a slow link, alone: the figure the link had in its concurrent round.
    remeasured_from: float | None = None
    # The protocol's own record of the entry (StepRecord.figure), written under its key: a block list's
    # ("blocks": the shape, per-transfer percentiles, and the contiguous reference).
    step: StepFigure | None = None
    # CPU seconds per GB moved at each end ("src", "dst"), in the sampled steps (bandwidth tests).
    cpu_s_per_gb: dict[str, float | None] | None = None
    # --one-buffer: every message of the window came from one buffer into one (a cache-resident figure).
    one_buffer: bool | None = None
    # --beside: the compute load that ran beside the sampled steps, the transfer alone, each GPU's load
    # alone and beside, and the load's slowdown (the worse GPU's): judging.beside_figure.
    beside: BesideFigure | None = None

    def to_dict(self) -> dict[str, object]:
        """The entry as a results file writes it (schema 1's shape; compact.py stores it in schema 2):
        open keys, since its figure is written under its test's field and its step record under its key."""
        flat: dict[str, object] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, _GROUPS):
                flat.update((part.name, getattr(value, part.name)) for part in fields(value))
            elif item.name != "figure_field":
                flat[item.name] = value
        data: dict[str, object] = {}
        for name in _ORDER:
            value = flat[name]
            if name == _FIGURE:
                data[self.figure_field] = value
            elif name == _STEP:
                if self.step is not None:
                    data[self.step.key] = self.step.to_json()
            elif name == BesideFigure.key and self.beside is not None:
                data[name] = self.beside.to_json()
            elif not (name in _OPTIONAL and value is None):
                data[name] = value
        return data


@dataclass(frozen=True)
class Placement:
    """What entries need to know of every rank: its host, GPU, and hardware topology."""

    hosts: list[str]
    gpus: list[int | None]
    topologies: list[limits.RankTopology]
