"""Row: one link at one (test, modes, size, load, settings), over every run that measured it: its
figures, shares of the link's limit, costs, tails and what ran beside it, and its keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple, TypedDict

from ...measure.besiderecord import BesideFigure
from ...measure.blockrecord import BlockList
from ...measure.judging import unjudged_words
from ...stats import median
from .entries import block_list_of, carveout_of, finite_number, posting_of

_LINK_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load")
ROW_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load", "settings")  # link_key and settings


class BesideRun(NamedTuple):
    """One run beside compute (its entry's `beside`): the transfer alone on an idle GPU (the pairs' alone
    halves, kept whether or not the model's slowdown was judged), the model's slowdown (None: not judged),
    its 95% interval (`slowdown_interval`) and the load's own swing in the row (`noise_floor`), where the
    file has them (files before issue 54 have neither)."""

    alone: float | None
    slowdown: float | None
    interval: tuple[float, float] | None = None
    noise: float | None = None


class ListPace(NamedTuple):
    """What one run of a block list sustains and what its posting costs: the rate kept going back to back
    from one posting thread (`sustained_gbps`, where the file has it), the rate the posting thread's host
    work alone allows (None: the GPU's step is the longer, or nothing says), and a posting kernel's
    CTA-microseconds per descriptor (None: no kernel posts, or its grid was not recorded), and the posting
    call's time per descriptor (`post_us_p50` over the descriptors: where a file has no host figure)."""

    sustained: float | None
    host_gbps: float | None
    cta_us: float | None
    post_us: float | None = None  # the posting call's median time per descriptor (older files' CPU figure)


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
    transfer_alone_idle: float | None
    slowdown_interval: list[float] | None
    noise_floor: float | None
    sustained_gbps: float | None
    host_bound_gbps: float | None
    cta_us_per_descriptor: float | None


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
    # Beside compute (--beside): each run's transfer alone (its unit), the model's slowdown and its interval.
    besides: list[BesideRun] | None = None
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
    # range over the pairs, the min and max of the run's samples (GB/s) and the list's contiguous reference;
    # a block list's sustained rate and posting costs (ListPace).
    cpu_us: list[float] | None = None
    paces: list[ListPace] | None = None
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
        """(max - min) / median across runs; of a single run, across its own samples where they were kept
        (its one figure has no spread of its own: 0.0 there said nothing)."""
        median = self.median
        low, high = self.gbps_range if len(self.values) == 1 else (min(self.values), max(self.values))
        return (high - low) / median if median else 0.0

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
        """A run beside compute (its entry's `beside`): its transfer alone, kept whether or not the load's
        slowdown was judged (the idle answer reads it), the slowdown, its interval and the noise floor."""
        if not isinstance(beside, dict):
            return
        alone, slowdown = finite_number(beside.get("transfer_alone")), finite_number(beside.get("slowdown"))
        if alone is None and slowdown is None:
            return
        low, high = _pair(beside.get("slowdown_interval"))
        interval = (low, high) if low is not None and high is not None and low <= high else None
        if self.besides is None:
            self.besides = []
        self.besides.append(BesideRun(alone, slowdown, interval, finite_number(beside.get("noise_floor"))))

    def add_list(self, blocks: Any, beside: Any, samples: Any, first: bool) -> None:
        """A block-list run's posting path (`first`: the row's first run), CPU cost per descriptor, the
        model's slowdown range, its samples' range and its contiguous reference, where it has them."""
        entry = {"blocks": blocks, "beside": beside}
        if first:
            self.posting, self.posting_sms, self.posting_green = posting_of(entry)
            self.block_list, self.carveout = block_list_of(entry), carveout_of(entry)
        record = BlockList.from_json(blocks)
        cpu = host_us_of(blocks, record)
        if cpu is not None:
            self.cpu_us = [*(self.cpu_us or ()), cpu]
        contiguous = finite_number(record.contiguous_gbps) if record is not None else None
        if contiguous is not None:
            self.contiguous = [*(self.contiguous or ()), contiguous]
        pace = list_pace(blocks, record, samples)
        if pace is not None:
            self.paces = [*(self.paces or ()), pace]
        figure = BesideFigure.from_json(beside)
        if figure is not None and figure.slowdown is None and self.unjudged is None:
            self.unjudged = unjudged_words(figure)  # the first run's reason stands
        found = beside.get("slowdown_range") if isinstance(beside, dict) else None
        low, high = _pair(found)
        if low is not None and high is not None:
            self.slowdown_ranges = [*(self.slowdown_ranges or ()), (low, high)]
        self.add_samples(samples)

    def add_samples(self, samples: Any) -> None:
        """The min and max of a run's samples (its figure's own spread, where the row has one run)."""
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
        found = [p.sustained for p in self.paces or () if p.sustained is not None]
        return median(found) if found else None

    @property
    def host_bound_gbps(self) -> float | None:
        """The median over runs of the rate the posting thread's host work alone allows, where it is below
        the timed step's (the burst), or None."""
        found = [p.host_gbps for p in self.paces or () if p.host_gbps is not None]
        return median(found) if found else None

    @property
    def post_us_per_descriptor(self) -> float | None:
        """The median over runs of the posting call's time per descriptor, or None."""
        found = [p.post_us for p in self.paces or () if p.post_us is not None]
        return median(found) if found else None

    @property
    def cta_us_per_descriptor(self) -> float | None:
        """The median over runs of a posting kernel's CTA-microseconds per descriptor, or None."""
        found = [p.cta_us for p in self.paces or () if p.cta_us is not None]
        return median(found) if found else None

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
        if self.besides:
            interval = self.slowdown_interval
            found |= {
                "transfer_alone_idle": self.alone_gbps, "slowdown_interval": list(interval) if interval else None,
                "noise_floor": self.noise_floor,
            }  # fmt: skip
        if self.posting is not None:  # block lists only: older reports keep their shape
            found |= {
                "posting": self.posting, "posting_sms": self.posting_sms, "posting_green": self.posting_green,
                "carveout": self.carveout, "cpu_us_per_descriptor": self.cpu_us_per_descriptor,
                "sustained_gbps": self.sustained_gbps, "host_bound_gbps": self.host_bound_gbps,
                "cta_us_per_descriptor": self.cta_us_per_descriptor,
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


def host_us_of(blocks: Any, record: BlockList | None) -> float | None:
    """The posting thread's CPU microseconds per descriptor: `host_us_per_descriptor` where the file has it
    (every path, issue 54), else the armed path's arming (`cpu_us_per_descriptor`, the one path that
    recorded it before)."""
    found = finite_number(blocks.get("host_us_per_descriptor")) if isinstance(blocks, dict) else None
    if found is None and record is not None:
        found = finite_number(record.cpu_us_per_descriptor)
    return found


def list_pace(blocks: Any, record: BlockList | None, samples: Any) -> ListPace | None:
    """A block-list run's ListPace, or None where its record says nothing of it. The host's bound: the
    sustained rate where the file has it and it is below the burst (the run's median sample); in older
    files, the list's bytes over its arming's CPU time where the arming ran outside the clock (ce-armed:
    the one path whose host work the timed step leaves out)."""
    if record is None or not isinstance(blocks, dict):
        return None
    sustained = finite_number(blocks.get("sustained_gbps"))
    figures = sorted(v for v in map(finite_number, samples or ()) if v is not None)
    burst = figures[len(figures) // 2] if figures else None
    host: float | None = None
    if sustained is not None:
        host = sustained if burst is not None and sustained < burst * 0.999 else None
    else:
        arming, moved = finite_number(record.arm_us), record.transfer_bytes
        host = moved / (arming * 1e3) if arming and isinstance(moved, int) else None  # bytes per us / 1e3: GB/s
    cta_us, post = _cta_us(record), finite_number(blocks.get("post_us_p50"))
    count = record.count if isinstance(record.count, int) and record.count > 0 else None
    post_us = post / count if post is not None and count else None
    if sustained is None and host is None and cta_us is None and post_us is None:
        return None
    return ListPace(sustained, host, cta_us, post_us)


def _cta_us(record: BlockList) -> float | None:
    """A posting kernel's CTA-microseconds per descriptor: its grid (a carve-out's `ctas`, or a budget's one
    CUDA block per SM) times its median transfer time, over the list's descriptors. None where no kernel
    posts or its grid is not recorded (the whole GPU's kernel: its grid is the device API's choice)."""
    sms, us = record.sms, record.transfer_us
    if record.posted != "gpu" or not isinstance(sms, dict) or not isinstance(us, dict):
        return None
    ctas = (
        sms.get("ctas")
        if sms.get("mode") == "carveout"
        else sms.get("transfer")
        if sms.get("mode") == "budget"
        else None
    )
    p50, count = finite_number(us.get("p50")), record.count
    if not isinstance(ctas, int) or p50 is None or not isinstance(count, int) or count <= 0:
        return None
    return ctas * p50 / count
