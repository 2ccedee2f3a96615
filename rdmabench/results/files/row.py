"""Row: one link at one (test, modes, size, load, settings), over every run that measured it: its
figures, shares of the link's limit, costs, tails and what ran beside it, and its keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from ...measure.blockrecord import BlockList
from ...stats import median
from .entries import finite_number, posting_of_record

_LINK_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load")
ROW_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load", "settings")  # link_key and settings


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
    # Block lists: who posted the list, its SM budget and whether green (entries.posting_of); None: no list.
    posting: tuple[str | None, int | None, bool] = (None, None, False)
    run: int = -1  # the run (the aggregate's count of documents) that gave its last figure: one figure a run

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
        `blocks`), where it has them; and who posted the list."""
        self.posting = posting_of_record(blocks)
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

    def to_dict(self) -> dict[str, Any]:
        tail = self.tail_us
        found = {
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
        return found
