"""A block list's record, the one place its keys are named: what the timing rank kept of a list's
steps (`BlockSteps`, the step protocol's record, sent to rank 0), and the entry's block-list record it
makes (`BlockList`, written as the entry's "blocks"), with its JSON both ways: `to_json` for the
results file, `from_json` for what reads one back (rows, reports, the NIXL anchor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypedDict

from ..stats import median, percentile
from ..units import gbps
from .besiderecord import CARVEOUT
from .blocks import BlockShape
from .blocktable import TableRecord
from .kvhandoff import HandoffRecord
from .postings import CPU, Arming, posting
from .readback import flag, number, only, text, whole

if TYPE_CHECKING:
    from .contract import Figure

KEY = "blocks"  # the entry's field the record is written under
# A block list's companion (blocksteps, offloadsteps): its bytes as one contiguous transfer, alone.
CONTIGUOUS = "contiguous"
OFFLOADS = ("out", "in")  # an offload's directions (`offload`): its GPU pool into its own pinned pool, or back
CARVEOUT_SMS = CARVEOUT  # the `sms` mode where a --beside carve-out set the posting kernel's SMs


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)  # to the nanosecond: the clock's own resolution


class _SmsMode(TypedDict):
    mode: str


class SmsRecord(_SmsMode, total=False):
    """The SMs a block list's posting kernel took (the record's "sms", docs/results-format.md): its `mode`
    ("budget" or "green": --posting-sms; CARVEOUT_SMS: a --beside carve-out's; "whole GPU"; else who posted
    it), and where held, the SMs of the `transfer` and of the `load` beside it, and the CUDA blocks
    (`ctas`) a carve-out's grid took."""

    transfer: int
    load: int
    ctas: int


class _Related(TypedDict, total=False):
    """What StepProtocol.relate sets of a BlockList: BlockList's fields of those names."""

    sustained_gbps: float
    handoff: HandoffRecord
    share_of_ceiling: float
    contiguous_gbps: float
    contiguous_posted_by: str
    share_of_contiguous: float


class _Posted(TypedDict, total=False):
    """Who posted a list and what that cost (BlockSteps._path): BlockList's fields of those names."""

    posted_by: str
    path: str | None
    path_note: str | None
    sms: SmsRecord | None
    ceiling_gbps: float
    ceiling_runs_gbps: list[float]
    posted_descriptors: int
    merged: bool
    arm_us: float
    cpu_us_per_descriptor: float
    armed_lists: int
    arm_bound: int
    host_us_per_descriptor: float


@dataclass(frozen=True)
class BlockList:
    """A block-list entry's shape and its transfers (docs/results-format.md, "blocks"): GB/s and
    latency percentiles from every timed transfer (not sample means), how the time split into posting
    and completion, descriptors a second, what the list cost before its warm transfers (`cold_s`), who
    posted it and its ceiling, and (StepProtocol.relate) its references. Fields left None are not
    written. Read back (`from_json`), each field is checked once (a value of the wrong type reads as
    None), and a record that names no poster was posted by the CPU, as before other paths existed."""

    count: int
    block_bytes: int
    transfer_bytes: int
    layout: str
    batch: int
    regions: int
    pool_bytes: int
    operation: str
    transfers: int
    transfer_us: dict[str, float]  # p50, p99, p99.9, max
    transfer_gbps_p50: float
    descriptors_per_second_p50: float
    post_us_p50: float
    post_share_p50: float
    completion_us_p50: float
    cold_s: dict[str, float] | None = None
    posted_by: str | None = None  # measure/postings.py: who posted the list
    path: str | None = None  # what ran it
    path_note: str | None = None  # why not the GPU, where auto fell back
    sms: SmsRecord | None = None  # the SMs the posting kernel took
    ceiling_gbps: float | None = None  # a plain copy kernel over the same step's list, median
    ceiling_runs_gbps: list[float] | None = None
    posted_descriptors: int | None = None  # the requests the CPU posted a step
    merged: bool | None = None
    table: TableRecord | None = None  # --blocks-from
    # What StepProtocol.relate reads against the list: its handoff, its ceiling, its contiguous reference.
    handoff: HandoffRecord | None = None
    share_of_ceiling: float | None = None
    contiguous_gbps: float | None = None
    contiguous_posted_by: str | None = None
    share_of_contiguous: float | None = None
    # A path that arms its list ahead of the data (postings.Arming): the host's time arming a step (median)
    # and per descriptor armed, the lists armed whole at once, the most copies armed at once.
    cpu_us_per_descriptor: float | None = None
    arm_us: float | None = None
    armed_lists: int | None = None
    arm_bound: int | None = None
    # Every path: the posting thread's microseconds a descriptor submitting and arming a step (median step),
    # and the list's bytes over the longer of a step and that thread's time on it (what one posting thread
    # keeps up back to back; GB/s, the entry's own figure the burst: StepProtocol.relate sets it).
    host_us_per_descriptor: float | None = None
    sustained_gbps: float | None = None
    # An offload (measure/offloadsteps.py): "out" (the rank's GPU pool into its own pinned pool) or "in";
    # the link is then the rank with itself, and this is what says so. The copy kernel's pace
    # (SMSxCTASxTHREADS) and its threads in flight.
    offload: str | None = None
    pace: str | None = None
    pace_threads: int | None = None

    key = KEY  # StepFigure: the entry's field it is written under

    def to_json(self) -> dict[str, object]:
        return {item.name: value for item in fields(self) if (value := getattr(self, item.name)) is not None}

    @classmethod
    def from_json(cls, data: object) -> BlockList | None:
        """A record as a file holds it (None where it is not one), each value checked; unknown keys are
        left out."""
        if not isinstance(data, dict):
            return None
        found: dict[str, Any] = {item.name: _READS[str(item.type)](data.get(item.name)) for item in fields(cls)}
        found["posted_by"] = found["posted_by"] or CPU.name
        # Figures no run can write read as missing: a rate of nothing or less, a thread's negative time.
        # (A sustained rate above its own burst is the rows' to refuse: the burst is the entry's.)
        if found["sustained_gbps"] is not None and not found["sustained_gbps"] > 0:
            found["sustained_gbps"] = None
        if found["host_us_per_descriptor"] is not None and found["host_us_per_descriptor"] < 0:
            found["host_us_per_descriptor"] = None
        return cls(**found)

    @property
    def one_message(self) -> bool:
        """A list of one contiguous block: itself a contiguous reference."""
        return self.count == 1 and self.layout == "contiguous"

    @property
    def posted(self) -> str:
        """Who posted it (a record made here without a path: the CPU's native loop)."""
        return self.posted_by if self.posted_by is not None else CPU.name

    def related(self, value: float, handoff: Any, references: list[tuple[float, str]]) -> BlockList:
        """The record read against what it is a part of: the model's `handoff` it is (or None), its
        ceiling, and the fastest of its link's contiguous references (value, who posted it)."""
        found: _Related = {}
        sustained = self.sustained(value)
        if sustained is not None:
            found["sustained_gbps"] = round(sustained, 6)
        if handoff is not None and self.count == handoff.count and self.block_bytes == handoff.block_bytes:
            found["handoff"] = handoff.record()
        if self.ceiling_gbps:
            found["share_of_ceiling"] = value / self.ceiling_gbps
        if references and not self.one_message:
            best = max(references)
            found |= {
                "contiguous_gbps": best[0],
                "contiguous_posted_by": best[1],
                "share_of_contiguous": value / best[0],
            }
        return replace(self, **found)

    def sustained(self, burst: float) -> float | None:
        """The list's GB/s kept up back to back from one posting thread: `burst` (a step's bytes over its
        seconds, the entry's figure) where the step outlasts the thread's submitting and arming, else a
        step's bytes over the thread's seconds (they do not overlap: the same thread does both). Read
        from the record's own fields, for every path alike; None without a figure or the thread's time."""
        host = self.host_us_per_descriptor
        if host is None or not isinstance(burst, (int, float)) or not burst > 0:
            return None
        bound = self.host_bound()
        return float(burst) if bound is None else min(float(burst), bound)

    def host_bound(self) -> float | None:
        """The GB/s one posting thread's host work alone allows: a descriptor's bytes over the thread's
        microseconds a descriptor. A property of the list and its thread, whichever figure (idle or beside
        a load) it is read against; None without the thread's time, or where it took no clock's tick."""
        host, count, moved = self.host_us_per_descriptor, self.count, self.transfer_bytes
        if host is None or host <= 0 or not isinstance(count, int) or count <= 0 or not isinstance(moved, int):
            return None  # a record read back may lack a field its type promises
        return gbps(moved, host * count / 1e6)


def _mapping(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _figures(value: object) -> dict[str, float] | None:
    """A dict of numbers (transfer_us, cold_s), its values checked."""
    if not isinstance(value, dict):
        return None
    return {str(key): found for key, item in value.items() if (found := number(item)) is not None}


# How each field's value is read back, by its declared type.
_READS: dict[str, Any] = {
    "int": whole, "int | None": whole, "str": text, "str | None": text, "float": number, "float | None": number,
    "bool | None": flag, "dict[str, float]": _figures, "dict[str, float] | None": _figures,
    "list[float] | None": lambda value: only(number)(value) if isinstance(value, list) else None,
    "SmsRecord | None": _mapping, "TableRecord | None": _mapping, "HandoffRecord | None": _mapping,
}  # fmt: skip


def _threads(pace: str | None) -> int | None:
    """The threads in flight of a pace SMSxCTASxTHREADS (None: no pace)."""
    if not pace:
        return None
    sms, ctas, threads = (int(part) for part in pace.split("x"))
    return sms * ctas * threads


@dataclass(frozen=True)
class BlockSteps:
    """What the rank that timed a block list kept of its steps (the step protocol's record): every
    timed transfer and its posting, what the list cost cold, who posted it and how, and the ceiling's
    runs."""

    shape: BlockShape
    operation: str
    transfer_seconds: list[float]
    post_seconds: list[float]
    cold: dict[str, float] = field(default_factory=dict)
    path: str | None = None
    posted_by: str = CPU.name
    path_note: str | None = None
    ceiling_seconds: list[float] | None = None
    sms: SmsRecord | None = None
    posted_descriptors: int | None = None
    arming: Arming | None = None  # a path that arms its list ahead of the data
    offload: str | None = None  # an offload's direction (BlockList.offload)
    pace: str | None = None  # the offload kernel's pace (SMSxCTASxTHREADS)

    def end_bytes(self, size: int) -> int:
        """What each end keeps in flight: its pool."""
        return self.shape.pool_slots(size) * size

    def figure(self, size: int) -> BlockList | None:
        """The entry's block-list record at block size `size` (None: no transfer was timed)."""
        times, posting_s, shape = self.transfer_seconds, self.post_seconds, self.shape
        if not times:
            return None
        moved = size * shape.count
        completion = [t - p for t, p in zip(times, posting_s, strict=True)]
        middle = percentile(times, 50)
        record = BlockList(
            count=shape.count, block_bytes=size, transfer_bytes=moved, layout=shape.layout, batch=shape.batch,
            regions=shape.regions, pool_bytes=self.end_bytes(size), operation=self.operation, transfers=len(times),
            transfer_us={f"p{q:g}": _us(percentile(times, q)) for q in (50, 99, 99.9)} | {"max": _us(max(times))},
            transfer_gbps_p50=round(gbps(moved, middle), 6),
            descriptors_per_second_p50=round(shape.count / middle, 3),
            post_us_p50=_us(percentile(posting_s, 50)),
            post_share_p50=round(percentile([p / t for p, t in zip(posting_s, times, strict=True)], 50), 6),
            completion_us_p50=_us(percentile(completion, 50)),
            cold_s={key.removesuffix("_s"): round(value, 9) for key, value in self.cold.items()} or None,
            table=shape.table.record() if shape.table is not None else None, offload=self.offload, pace=self.pace,
            pace_threads=_threads(self.pace),
        )  # fmt: skip
        return replace(record, **self._path(moved * shape.batch))

    def _path(self, step_bytes: int) -> _Posted:
        """Who posted the list (`path_note`: why not the GPU, where auto fell back), its ceiling: a plain
        copy kernel's GB/s over the same step's list (median and runs), and the requests the CPU posted a
        step (count x batch blocks: adjacent blocks merged, unless --no-merge)."""
        if self.path is None:
            return {}
        posted_by = self.posted_by
        found: _Posted = {"posted_by": posted_by, "path": self.path}
        found["path_note"] = self.path_note or None
        found["sms"] = self.sms or None
        if self.ceiling_seconds:
            found["ceiling_gbps"] = round(gbps(step_bytes, median(self.ceiling_seconds)), 6)
            found["ceiling_runs_gbps"] = [round(gbps(step_bytes, s), 6) for s in self.ceiling_seconds]
        host = self.host_seconds()
        if host is not None:
            found["host_us_per_descriptor"] = round(host / (self.shape.count * self.shape.batch) * 1e6, 6)
        record = posting(posted_by)
        if not (record is not None and record.device) and self.posted_descriptors is not None:
            found |= {"posted_descriptors": self.posted_descriptors, "merged": self.shape.merge}
        arming = self.arming
        if arming is not None and arming.seconds:  # the host's time arming a step, outside the clock
            middle = median(arming.seconds)
            found |= {"arm_us": _us(middle), "cpu_us_per_descriptor": round(middle / arming.copies * 1e6, 6)}
            found |= {"armed_lists": arming.lists, "arm_bound": arming.bound}
        return found

    def host_seconds(self) -> float | None:
        """The posting thread's seconds on one step, submitting and arming it: the median over the timed
        steps of the step's transfers' posting (the host's calls inside the step: a kernel's launch, a
        batch's submission, the CPU's requests, the armed copies submitted past the bound) and the median
        arming (outside the step). Both are that thread's wall time in calls that do not wait for the
        transfer. None where no transfer was timed."""
        batch, posting_s = max(self.shape.batch, 1), self.post_seconds
        steps = [sum(posting_s[at : at + batch]) for at in range(0, len(posting_s) - batch + 1, batch)]
        if not steps:
            return None
        arming = self.arming
        armed = median(arming.seconds) if arming is not None and arming.seconds else 0.0
        return median(steps) + armed


def relate_list(entry: Figure, handoff: Any, companions: Mapping[str, Sequence[Figure]]) -> None:
    """A block list's entry read against what it is a part of (every block-list protocol's `relate`): the
    model's `handoff` it is (or None), its ceiling, and the fastest of its link's contiguous references
    (the CONTIGUOUS companions) and its share of it."""
    if not isinstance(entry.step, BlockList):
        return
    whole = companions.get(CONTIGUOUS, [])
    references = [(c.value, c.step.posted) for c in whole if isinstance(c.step, BlockList)]
    entry.step = entry.step.related(entry.value, handoff, references)
