"""Row: one link at one (test, modes, size, load, settings), over every run that measured it: its
figures, shares of the link's limit, costs, tails and what ran beside it, and its keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, TypedDict

from ...measure.besiderecord import BesideFigure
from ...measure.blockrecord import BlockList
from ...measure.judging import unjudged_words
from ...stats import median
from .entries import block_list_of, carveout_of, finite_number, posting_of

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


class RowRecord(_RowFigures, total=False):
    """A row as the report's JSON writes it; what ran beside it and the block list's posting path
    only where it has them (older reports keep their shape)."""

    transfer_alone: float
    slowdown: float
    slowdown_range: list[float] | None
    posting: str
    posting_sms: int | None
    posting_green: bool
    carveout: int | None
    cpu_us_per_descriptor: float | None


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
    load: str = "alone"  # the link measured alone, or with others at once ("ring, 4 links")
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
    # CPU seconds per GB at each end, summed over the runs that recorded it (cpu_runs): a mean, two
    # floats a row rather than two lists, for a million rows.
    cpu_src: float = 0.0
    cpu_dst: float = 0.0
    cpu_runs: int = 0
    # The wire check: the lowest share of the bytes its counter saw over the runs, and the counter.
    wire_ratio: float | None = None
    wire_dev: str | None = None
    # Block lists (--blocks, --model): each run's p99 and p99.9 of its transfer times, in us.
    tails: list[tuple[float, float]] | None = None
    # Beside compute (--beside): each run's transfer alone (its unit) and the model's slowdown.
    besides: list[tuple[float, float]] | None = None
    ceilings: list[float] | None = None  # block lists: each run's ceiling (a copy kernel over the list), GB/s
    run: int = -1  # the run (the aggregate's count of documents) that gave its last figure: one figure a run
    # Block lists: who posted them (entries.posting_of: the path, the SMs its kernel was held to, a green
    # context), the list apart from its path (None: a list's one-message reference) and the SMs carved
    # from the model beside it (0: none; None: no model ran). Part of the row's settings: never merged.
    posting: str | None = None
    posting_sms: int | None = None
    posting_green: bool = False
    block_list: str | None = None
    carveout: int | None = None
    # Per run, where recorded: the CPU microseconds the path spent per descriptor, the model's slowdown
    # range over the pairs, the min and max of the run's samples (GB/s) and the list's contiguous reference.
    cpu_us: list[float] | None = None
    slowdown_ranges: list[tuple[float, float]] | None = None
    sample_ranges: list[tuple[float, float]] | None = None
    contiguous: list[float] | None = None
    # Beside compute, where the run's model figure was not judged: why, in words (its duty, its drift).
    unjudged: str | None = None

    def state(self) -> RowState:
        """What a run's figure may change of this row, kept to be put back (`restore`) if the run
        turns out damaged after it was folded: every field but those set when the row is made, and the
        lengths of the lists a run appends to in place."""
        tails, besides = self.tails, self.besides
        lengths = (len(self.values), len(self.shares), len(tails) if tails else 0, len(besides) if besides else 0)
        return _FOLDED_STATE(self), lengths

    def restore(self, state: RowState) -> None:
        """The row as it was when `state` was taken."""
        fields, lengths = state
        for name, value in zip(_FOLDED, fields, strict=True):
            setattr(self, name, value)
        for name, length in zip(_APPENDED, lengths, strict=True):
            found = getattr(self, name)
            if found is not None:
                del found[length:]

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
        """(max - min) / median across runs: 0 for a single run."""
        median = self.median
        return (max(self.values) - min(self.values)) / median if median else 0.0

    @property
    def share(self) -> float | None:
        return median(self.shares) if self.shares else None

    @property
    def modes(self) -> str:
        return f"{self.src_mode}->{self.dst_mode}"

    @property
    def cpu_s_per_gb(self) -> dict[str, float] | None:
        """Mean CPU seconds per GB of each end over the runs, or None where no run recorded it."""
        if not self.cpu_runs:
            return None
        return {"src": self.cpu_src / self.cpu_runs, "dst": self.cpu_dst / self.cpu_runs}

    def add_costs(self, cpu: Any, wire: Any, intern: Callable[[str], str]) -> None:
        """A run's CPU cost ({"src", "dst"}) and wire check ({"dev", "ratio"}), where it has them."""
        if isinstance(cpu, dict) and cpu.get("src") is not None and cpu.get("dst") is not None:
            self.cpu_src += float(cpu["src"])
            self.cpu_dst += float(cpu["dst"])
            self.cpu_runs += 1
        if isinstance(wire, dict) and isinstance(wire.get("ratio"), (int, float)):
            ratio = float(wire["ratio"])
            if self.wire_ratio is None or ratio < self.wire_ratio:
                self.wire_ratio, self.wire_dev = ratio, intern(str(wire.get("dev")))

    def add_tail(self, blocks: Any) -> None:
        """A block-list run's p99 and p99.9 of transfer times and its list's ceiling (its entry's
        `blocks`), where it has them."""
        record = BlockList.from_json(blocks)
        ceiling = finite_number(record.ceiling_gbps) if record is not None else None
        if ceiling is not None:
            self.ceilings = [*(self.ceilings or ()), ceiling]
        us = record.transfer_us if record is not None else None
        if not isinstance(us, dict):
            return
        p99, p999 = finite_number(us.get("p99")), finite_number(us.get("p99.9"))
        if p99 is not None and p999 is not None:
            if self.tails is None:
                self.tails = []
            self.tails.append((p99, p999))

    def add_beside(self, beside: Any) -> None:
        """A run beside compute: its transfer alone and the load's slowdown (its entry's `beside`)."""
        if not isinstance(beside, dict):
            return
        alone, slowdown = finite_number(beside.get("transfer_alone")), finite_number(beside.get("slowdown"))
        if alone is not None and slowdown is not None:
            if self.besides is None:
                self.besides = []
            self.besides.append((alone, slowdown))

    def add_list(self, blocks: Any, beside: Any, samples: Any, first: bool) -> None:
        """A block-list run's posting path (`first`: the row's first run), CPU cost per descriptor, the
        model's slowdown range, its samples' range and its contiguous reference, where it has them."""
        entry = {"blocks": blocks, "beside": beside}
        if first:
            self.posting, self.posting_sms, self.posting_green = posting_of(entry)
            self.block_list, self.carveout = block_list_of(entry), carveout_of(entry)
        record = BlockList.from_json(blocks)
        cpu = finite_number(record.cpu_us_per_descriptor) if record is not None else None
        if cpu is not None:
            self.cpu_us = [*(self.cpu_us or ()), cpu]
        contiguous = finite_number(record.contiguous_gbps) if record is not None else None
        if contiguous is not None:
            self.contiguous = [*(self.contiguous or ()), contiguous]
        figure = BesideFigure.from_json(beside)
        if figure is not None and figure.slowdown is None and self.unjudged is None:
            self.unjudged = unjudged_words(figure)  # the first run's reason stands
        found = beside.get("slowdown_range") if isinstance(beside, dict) else None
        low, high = _pair(found)
        if low is not None and high is not None:
            self.slowdown_ranges = [*(self.slowdown_ranges or ()), (low, high)]
        figures = [value for value in map(finite_number, samples) if value is not None] if samples else []
        if figures:
            self.sample_ranges = [*(self.sample_ranges or ()), (min(figures), max(figures))]

    @property
    def cpu_us_per_descriptor(self) -> float | None:
        """The median over runs of the CPU microseconds the posting path spent per descriptor, or None."""
        return median(self.cpu_us) if self.cpu_us else None

    @property
    def slowdown_range(self) -> tuple[float, float] | None:
        """The lowest and highest slowdown of the model over every pair of every run, or None."""
        if not self.slowdown_ranges:
            return None
        return min(r[0] for r in self.slowdown_ranges), max(r[1] for r in self.slowdown_ranges)

    @property
    def gbps_range(self) -> tuple[float, float]:
        """The lowest and highest figure: of every run's samples where kept (block lists), else of the runs."""
        if not self.sample_ranges:
            return min(self.values), max(self.values)
        return min(r[0] for r in self.sample_ranges), max(r[1] for r in self.sample_ranges)

    @property
    def contiguous_gbps(self) -> float | None:
        """The median over runs of the list's contiguous reference (its bytes as one message), or None."""
        return median(self.contiguous) if self.contiguous else None

    @property
    def ceiling_gbps(self) -> float | None:
        """The median over runs of the list's ceiling (a copy kernel over the same list), or None."""
        return median(self.ceilings) if self.ceilings else None

    @property
    def beside(self) -> tuple[float, float] | None:
        """The median over runs of the transfer alone and of the model's slowdown beside it, or None."""
        if not self.besides:
            return None
        return median([b[0] for b in self.besides]), median([b[1] for b in self.besides])

    @property
    def tail_us(self) -> tuple[float, float] | None:
        """The median over runs of the p99 and of the p99.9 of transfer times (us), or None."""
        if not self.tails:
            return None
        return median([t[0] for t in self.tails]), median([t[1] for t in self.tails])

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
        beside = self.beside
        if beside is not None:  # only where a run had compute beside it: older reports keep their shape
            found["transfer_alone"], found["slowdown"] = beside
            found["slowdown_range"] = list(self.slowdown_range) if self.slowdown_range else None
        if self.posting is not None:  # block lists only: older reports keep their shape
            found |= {
                "posting": self.posting, "posting_sms": self.posting_sms, "posting_green": self.posting_green,
                "carveout": self.carveout, "cpu_us_per_descriptor": self.cpu_us_per_descriptor,
            }  # fmt: skip
        return found


# A row's fields set when it is made (its key, labels and a block list's posting path, from its first
# run) or after every run is folded (`differs`); a run's figure may change any other (Row.state).
_FIXED = frozenset(
    {
        "test", "src_mode", "dst_mode", "size_bytes", "link", "link_class", "src_host", "dst_host", "unit", "load",
        "settings", "higher_is_better", "differs", "posting", "posting_sms", "posting_green", "block_list", "carveout",
    }
)  # fmt: skip
_FOLDED = tuple(name for name in Row.__slots__ if name not in _FIXED)
_FOLDED_STATE = attrgetter(*_FOLDED)
_APPENDED = ("values", "shares", "tails", "besides")  # lists a run's figure appends to in place
RowState = tuple[tuple[Any, ...], tuple[int, ...]]


def _pair(found: Any) -> tuple[float | None, float | None]:
    """A [low, high] pair of finite numbers from a file, or (None, None)."""
    if not isinstance(found, (list, tuple)) or len(found) != 2:
        return None, None
    return finite_number(found[0]), finite_number(found[1])
