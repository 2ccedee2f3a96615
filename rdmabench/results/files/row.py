"""Row: one link at one (test, modes, size, load, settings), over every run that measured it: its
figures, shares of the link's limit, costs, tails and what ran beside it, and its keys."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple, TypedDict

from ...measure.besiderecord import BesideFigure
from ...measure.blockrecord import BlockList
from ...stats import median
from .entries import finite_number
from .rowgroups import BesideCompute, BesideRun, ListFigures, ListPace

_LINK_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load")
ROW_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load", "settings")  # link_key and settings


class RowWire(TypedDict):
    """A row's wire check as its JSON gives it: the counters' device and wire bytes over payload bytes."""

    dev: str | None
    ratio: float | None


class _RowFigures(TypedDict):
    test: str
    src_mode: str
    dst_mode: str
    size_bytes: int
    link: str
    link_class: str
    load: str
    settings: dict[str, str]
    unit: str
    runs: int
    median: float
    min: float
    max: float
    spread: float
    share_of_limit: float | None
    link_limit: str | None
    cpu_s_per_gb: dict[str, float] | None
    wire: RowWire | None
    transfer_p99_us: float | None
    transfer_p999_us: float | None
    transports: list[str]
    warnings: list[str]


class RowBesideRecord(TypedDict, total=False):
    """What a row's JSON gives of the model beside it (where a run had one judged, and where any had one)."""

    transfer_alone: float
    slowdown: float
    slowdown_range: list[float] | None
    transfer_alone_idle: float | None
    slowdown_interval: list[float] | None
    noise_floor: float | None


class RowListRecord(TypedDict, total=False):
    """What a row's JSON gives of its block list: its posting path, SMs, carve-out and costs."""

    posting: str | None
    posting_sms: int | None
    posting_green: bool
    carveout: int | None
    cpu_us_per_descriptor: float | None
    sustained_gbps: float | None
    host_bound_gbps: float | None
    cta_us_per_descriptor: float | None


class RowRecord(_RowFigures, RowBesideRecord, RowListRecord, total=False):
    """A row as the report's JSON writes it; what ran beside it and the block list's posting path
    only where it has them (older reports keep their shape)."""


class CpuCosts(NamedTuple):
    """CPU seconds per GB at each end, summed over the runs that recorded it (`runs`): a mean, two floats a
    row rather than two lists, for a million rows."""

    src: float
    dst: float
    runs: int


@dataclass(slots=True)
class Row:
    """One link at one (test, modes, size), over every run that measured it."""

    test: str
    src_mode: str
    dst_mode: str
    size_bytes: int
    link: str
    link_class: str
    src_host: str
    dst_host: str
    unit: str
    # The link measured alone, with others at once ("ring, 4 links"), re-measured or beside a model, as it
    # prints (entries.load_of, from the entry's fields; a part of the row's key): readers read the fields.
    load: str = "alone"
    settings: tuple[tuple[str, str], ...] = ()  # what must match for runs to be merged (settings_of)
    higher_is_better: bool = True
    differs: str = ""  # the settings that tell this row from rows of the same link with other settings
    values: list[float] = field(default_factory=list)  # one figure per run (a run's samples are not kept: no
    # output shows them, and a million rows' lists of samples took a fifth of their memory)
    shares: list[float] = field(default_factory=list)
    transports: frozenset[str] = frozenset()
    dates: frozenset[str] = frozenset()
    warnings: frozenset[str] = frozenset()
    limit: str | None = None
    limit_kind: str | None = None  # "NVLink", "PCIe", "NIC", "host memory copy"
    nics: frozenset[str] = frozenset()  # inter-node links: "host/device" of each end
    limit_gbps: float | None = None  # the physical limit `limit` names, in GB/s
    cpu: CpuCosts | None = None
    # The wire check: the lowest share of the bytes its counter saw over the runs, and the counter.
    wire: tuple[float, str] | None = None
    run: int = -1  # the run (the aggregate's count of documents) that gave its last figure: one figure a run
    remeasured: bool = False  # a screen's slow link measured again, alone
    at_once: int = 1  # the links measured at once in its round (a concurrent pattern's)
    sample_ranges: list[tuple[float, float]] | None = None  # per run, the min and max of its samples (GB/s)
    lists: ListFigures | None = None  # block lists
    compute: BesideCompute | None = None  # beside compute

    def state(self) -> RowState:
        """What a run's figure may change of this row, kept to be put back (`restore`) if the run
        turns out damaged after it was folded: every field but those set when the row is made (a group
        as a copy), and the lengths of the lists a run appends to in place."""
        found = tuple(
            copy.copy(value) if name in _GROUPS else value
            for name, value in zip(_FOLDED, _FOLDED_STATE(self), strict=True)
        )
        return found, (len(self.values), len(self.shares))

    def restore(self, state: RowState) -> None:
        """The row as it was when `state` was taken."""
        fields, lengths = state
        for name, value in zip(_FOLDED, fields, strict=True):
            setattr(self, name, value)
        for name, length in zip(_APPENDED, lengths, strict=True):
            del getattr(self, name)[length:]

    @property
    def link_key(self) -> tuple[str, str, str, int, str, str]:
        return _LINK_KEY(self)  # type: ignore[no-any-return]

    @property
    def key(self) -> tuple[Any, ...]:
        return ROW_KEY(self)  # type: ignore[no-any-return]

    def worse(self, off: float, fraction: float) -> bool:
        """Whether a relative change `off` of this row's figure is worse than `fraction`."""
        return off < -fraction if self.higher_is_better else off > fraction

    @property
    def median(self) -> float:
        values = self.values  # one run, most rows: no call (a million rows ask it several times)
        return float(values[0]) if len(values) == 1 else median(values)

    @property
    def spread(self) -> float:
        """(max - min) / median across runs; of a single run, across its own samples where they were kept
        (its one figure has no spread of its own: 0.0 there said nothing)."""
        median = self.median
        low, high = self.gbps_range if len(self.values) == 1 else (min(self.values), max(self.values))
        return (high - low) / median if median else 0.0

    @property
    def alone(self) -> bool:
        """Measured alone: one link a round, no model beside it, not a screen's re-measure."""
        return self.at_once == 1 and self.compute is None and not self.remeasured

    # --- the groups' fields, read as the row's (the answer, the reports) ---------------------------

    @property
    def posting(self) -> str | None:
        return self.lists.posting if self.lists is not None else None

    @property
    def posting_sms(self) -> int | None:
        return self.lists.posting_sms if self.lists is not None else None

    @property
    def posting_green(self) -> bool:
        return self.lists.posting_green if self.lists is not None else False

    @property
    def kernel_posted(self) -> bool:
        """A kernel on the GPU's SMs posted the row's lists (whatever its path's name: an offload's pace in it)."""
        return self.lists.kernel if self.lists is not None else False

    @property
    def block_list(self) -> str | None:
        return self.lists.block_list if self.lists is not None else None

    @property
    def ceilings(self) -> list[float] | None:
        return self.lists.ceilings if self.lists is not None else None

    @property
    def carveout(self) -> int | None:
        """The SMs carved from the model beside the row (0: none), or None where no model ran."""
        return self.compute.carveout if self.compute is not None else None

    @property
    def besides(self) -> list[BesideRun] | None:
        return self.compute.runs if self.compute is not None else None

    @property
    def unjudged(self) -> str | None:
        return self.compute.unjudged if self.compute is not None else None

    @property
    def wire_ratio(self) -> float | None:
        return self.wire[0] if self.wire is not None else None

    @property
    def wire_dev(self) -> str | None:
        return self.wire[1] if self.wire is not None else None

    @property
    def share(self) -> float | None:
        return median(self.shares) if self.shares else None

    @property
    def modes(self) -> str:
        return f"{self.src_mode}->{self.dst_mode}"

    @property
    def cpu_s_per_gb(self) -> dict[str, float] | None:
        """Mean CPU seconds per GB of each end over the runs, or None where no run recorded it."""
        cpu = self.cpu
        if cpu is None or not cpu.runs:
            return None
        return {"src": cpu.src / cpu.runs, "dst": cpu.dst / cpu.runs}

    def add_costs(self, cpu: Any, wire: Any, intern: Callable[[str], str]) -> None:
        """A run's CPU cost ({"src", "dst"}) and wire check ({"dev", "ratio"}), where it has them."""
        if isinstance(cpu, dict) and cpu.get("src") is not None and cpu.get("dst") is not None:
            was = self.cpu or CpuCosts(0.0, 0.0, 0)
            self.cpu = CpuCosts(was.src + float(cpu["src"]), was.dst + float(cpu["dst"]), was.runs + 1)
        if isinstance(wire, dict) and isinstance(wire.get("ratio"), (int, float)):
            ratio = float(wire["ratio"])
            if self.wire is None or ratio < self.wire[0]:
                self.wire = ratio, intern(str(wire.get("dev")))

    def add_list(self, record: BlockList, samples: Any, first: bool) -> None:
        """A block-list run (its entry's record, read back once): what its group keeps of it
        (ListFigures.add; `first`: the row's first run names the path and the list), and its samples' range."""
        if first or self.lists is None:
            self.lists = ListFigures.of(record)
        self.lists.add(record, samples)
        self.add_samples(samples)

    def add_beside(self, beside: BesideFigure, path: str | None, first: bool) -> None:
        """A run beside compute (its entry's figure, read back once; `path`: the posting path of its block
        list, None for plain messages): what its group keeps of it (BesideCompute.add; `first`: the row's
        first run names the model, its size and carve-out)."""
        if first or self.compute is None:
            self.compute = BesideCompute.of(beside.load, path)
        self.compute.add(beside)

    def add_samples(self, samples: Any) -> None:
        """The min and max of a run's samples (its figure's own spread, where the row has one run)."""
        figures = [value for value in map(finite_number, samples) if value is not None] if samples else []
        if figures:
            self.sample_ranges = [*(self.sample_ranges or ()), (min(figures), max(figures))]

    @property
    def cpu_us_per_descriptor(self) -> float | None:
        """The median over runs of the CPU microseconds the posting path spent per descriptor, or None."""
        found = self.lists.cpu_us if self.lists is not None else None
        return median(found) if found else None

    @property
    def slowdown_range(self) -> tuple[float, float] | None:
        """The lowest and highest slowdown of the model over every pair of every run, or None."""
        ranges = self.compute.slowdown_ranges if self.compute is not None else None
        if not ranges:
            return None
        return min(r[0] for r in ranges), max(r[1] for r in ranges)

    @property
    def gbps_range(self) -> tuple[float, float]:
        """The lowest and highest figure: of every run's samples where kept (block lists), else of the runs."""
        if not self.sample_ranges:
            return min(self.values), max(self.values)
        return min(r[0] for r in self.sample_ranges), max(r[1] for r in self.sample_ranges)

    @property
    def contiguous_gbps(self) -> float | None:
        """The median over runs of the list's contiguous reference (its bytes as one message), or None."""
        found = self.lists.contiguous if self.lists is not None else None
        return median(found) if found else None

    @property
    def ceiling_gbps(self) -> float | None:
        """The median over runs of the list's ceiling (a copy kernel over the same list), or None."""
        found = self.ceilings
        return median(found) if found else None

    @property
    def beside(self) -> tuple[float, float] | None:
        """The median over the runs whose slowdown was judged of the transfer alone and of the model's
        slowdown beside it, or None where none was."""
        judged = [(b.alone, b.slowdown) for b in self.besides or () if b.alone is not None and b.slowdown is not None]
        if not judged:
            return None
        return median([b[0] for b in judged]), median([b[1] for b in judged])

    @property
    def alone_gbps(self) -> float | None:
        """The median over runs of the transfer alone on an idle GPU (the alone halves of its pairs beside
        compute, judged or not), or None where the row ran beside nothing."""
        found = [b.alone for b in self.besides or () if b.alone is not None]
        return median(found) if found else None

    @property
    def slowdown_interval(self) -> tuple[float, float] | None:
        """The 95% interval of the model's slowdown: a run's own, or over several runs the lowest low and the
        highest high; None where no run's file gives one (files before issue 54)."""
        found = [b.interval for b in self.besides or () if b.interval is not None]
        return (min(i[0] for i in found), max(i[1] for i in found)) if found else None

    @property
    def noise_floor(self) -> float | None:
        """The load's own swing in this row (a fraction): the smallest slowdown it can tell from none; the
        largest over runs, or None where no file gives it."""
        found = [b.noise for b in self.besides or () if b.noise is not None]
        return max(found) if found else None

    @property
    def sustained_gbps(self) -> float | None:
        """The median over runs of the rate kept going back to back from one posting thread, or None
        where no run's file gives it (files before issue 54: their figure is the burst alone)."""
        found = [p.sustained for p in self._paces if p.sustained is not None]
        return median(found) if found else None

    @property
    def host_bound_gbps(self) -> float | None:
        """The median over runs of the rate the posting thread's host work alone allows (whichever figure it
        bounds: idle or beside a load), or None."""
        found = [p.host_gbps for p in self._paces if p.host_gbps is not None]
        return median(found) if found else None

    @property
    def post_us_per_descriptor(self) -> float | None:
        """The median over runs of the posting call's time per descriptor, or None."""
        found = [p.post_us for p in self._paces if p.post_us is not None]
        return median(found) if found else None

    @property
    def cta_us_per_descriptor(self) -> float | None:
        """The median over runs of a posting kernel's CTA-microseconds per descriptor, or None."""
        found = [p.cta_us for p in self._paces if p.cta_us is not None]
        return median(found) if found else None

    @property
    def _paces(self) -> list[ListPace]:
        return (self.lists.paces or []) if self.lists is not None else []

    @property
    def tail_us(self) -> tuple[float, float] | None:
        """The median over runs of the p99 and of the p99.9 of transfer times (us), or None."""
        tails = self.lists.tails if self.lists is not None else None
        if not tails:
            return None
        return median([t[0] for t in tails]), median([t[1] for t in tails])

    def to_dict(self) -> RowRecord:
        tail = self.tail_us
        found: RowRecord = {
            "test": self.test,
            "src_mode": self.src_mode,
            "dst_mode": self.dst_mode,
            "size_bytes": self.size_bytes,
            "link": self.link,
            "link_class": self.link_class,
            "load": self.load,
            "settings": dict(self.settings),
            "unit": self.unit,
            "runs": len(self.values),
            "median": self.median,
            "min": min(self.values),
            "max": max(self.values),
            "spread": self.spread,
            "share_of_limit": self.share,
            "link_limit": self.limit,
            "cpu_s_per_gb": self.cpu_s_per_gb,
            "wire": {"dev": self.wire_dev, "ratio": self.wire_ratio} if self.wire_dev else None,
            "transfer_p99_us": tail[0] if tail else None,
            "transfer_p999_us": tail[1] if tail else None,
            "transports": sorted(self.transports),
            "warnings": sorted(self.warnings),
        }
        found.update(self._beside_record())
        if self.posting is not None:  # block lists only: older reports keep their shape
            found.update(
                RowListRecord(
                    posting=self.posting, posting_sms=self.posting_sms, posting_green=self.posting_green,
                    carveout=self.carveout, cpu_us_per_descriptor=self.cpu_us_per_descriptor,
                    sustained_gbps=self.sustained_gbps, host_bound_gbps=self.host_bound_gbps,
                    cta_us_per_descriptor=self.cta_us_per_descriptor,
                )
            )  # fmt: skip
        return found

    def _beside_record(self) -> RowBesideRecord:
        """The model beside the row, as its JSON gives it: only where a run had compute beside it (older
        reports keep their shape)."""
        found = RowBesideRecord()
        beside, ranged = self.beside, self.slowdown_range
        if beside is not None:
            judged = list(ranged) if ranged else None
            found.update(RowBesideRecord(transfer_alone=beside[0], slowdown=beside[1], slowdown_range=judged))
        if self.besides:
            interval = list(self.slowdown_interval or ()) or None
            found.update(
                RowBesideRecord(
                    transfer_alone_idle=self.alone_gbps, slowdown_interval=interval, noise_floor=self.noise_floor
                )
            )
        return found


# A row's fields set when it is made (its key and labels) or after every run is folded (`differs`); a
# run's figure may change any other (Row.state), a group's fields too (a block list's posting path and a
# model's carve-out, from its first run, among them).
_FIXED = frozenset(
    {
        "test", "src_mode", "dst_mode", "size_bytes", "link", "link_class", "src_host", "dst_host", "unit", "load",
        "settings", "higher_is_better", "differs", "remeasured", "at_once",
    }
)  # fmt: skip
_FOLDED = tuple(name for name in Row.__slots__ if name not in _FIXED)
_FOLDED_STATE = attrgetter(*_FOLDED)
_GROUPS = frozenset({"lists", "compute"})  # mutable groups: kept as copies (their lists are replaced, never grown)
_APPENDED = ("values", "shares")  # lists a run's figure appends to in place
RowState = tuple[tuple[Any, ...], tuple[int, ...]]
