"""A report row's groups, each with what a run adds to it: a block list's (`ListFigures`: who posted it,
the list, and each run's tails, ceiling, CPU per descriptor, pace and contiguous reference) and beside
compute's (`BesideCompute`: the model's load, size and carve-out and the posting path beside it as
fields, and each run's figures), read from an entry's records (BlockList, BesideFigure) decoded once
by the rows. A group's lists are replaced by a run, never grown in place: Row.state keeps a copy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from ...measure.beside import CARVEOUT, Beside
from ...measure.besiderecord import BesideFigure
from ...measure.blockrecord import BlockList
from ...measure.judging import unjudged_words
from ...measure.postings import posting
from .entries import block_list_of, finite_number, posting_of

_T = TypeVar("_T")


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
    work alone allows (None: nothing says, or the thread's time took no clock's tick; whether it is below a
    figure is the reader's to ask), and a posting kernel's
    CTA-microseconds per descriptor (None: no kernel posts, or its grid was not recorded), and the posting
    call's time per descriptor (`post_us_p50` over the descriptors: where a file has no host figure)."""

    sustained: float | None
    host_gbps: float | None
    cta_us: float | None
    post_us: float | None = None  # the posting call's median time per descriptor (older files' CPU figure)


@dataclass(slots=True)
class ListFigures:
    """A block-list row's own group (--blocks, --model): who posted its lists (entries.posting_of: the
    path, the SMs its kernel was held to, a green context) and the list apart from its path (None: a
    list's one-message reference), from its first run; and, per run where recorded, its p99 and p99.9 of
    transfer times (us), its ceiling (a copy kernel over the list, GB/s), the posting thread's CPU
    microseconds per descriptor, its pace (ListPace) and its contiguous reference (GB/s). A run's figures
    replace a list, never append to it in place (Row.state keeps the group as a run found it)."""

    posting: str | None = None
    posting_sms: int | None = None
    posting_green: bool = False
    block_list: str | None = None
    tails: list[tuple[float, float]] | None = None
    ceilings: list[float] | None = None
    cpu_us: list[float] | None = None
    paces: list[ListPace] | None = None
    contiguous: list[float] | None = None
    kernel: bool = False  # a kernel on the GPU's SMs posted it (its path's record: Posting.takes_sms)

    @classmethod
    def of(cls, record: BlockList) -> ListFigures:
        """The group of a row whose first run moved `record`'s list."""
        path, sms, green = posting_of(record)
        return cls(path, sms, green, block_list_of(record), kernel=_kernel_posted(record))

    def add(self, record: BlockList, samples: Any) -> None:
        """A run's p99 and p99.9 of transfer times, ceiling, CPU cost per descriptor, pace and contiguous
        reference, where it has them (`samples`: its GB/s, the burst its sustained rate cannot pass)."""
        us = record.transfer_us
        p99, p999 = (us.get("p99"), us.get("p99.9")) if isinstance(us, dict) else (None, None)
        if p99 is not None and p999 is not None:
            self.tails = [*(self.tails or ()), (p99, p999)]
        self.ceilings = _with(self.ceilings, record.ceiling_gbps)
        self.cpu_us = _with(self.cpu_us, host_us_of(record))
        self.contiguous = _with(self.contiguous, record.contiguous_gbps)
        self.paces = _with(self.paces, list_pace(record, samples))


@dataclass(slots=True)
class BesideCompute:
    """A row beside compute (--beside), its own group: what ran beside its link, as fields (the model's
    load and size, the SMs carved from it, the posting path beside it: None for plain messages), from
    its first run; and each run's figures (BesideRun), the model's slowdown range over a block list's
    pairs, and why a block list's model figure was not judged (its duty, its drift). The row's `load`
    names the model for print; nothing reads it back."""

    load: str
    size: int
    carveout: int
    path: str | None = None
    runs: list[BesideRun] = field(default_factory=list)
    slowdown_ranges: list[tuple[float, float]] | None = None
    unjudged: str | None = None

    @property
    def model(self) -> str:
        """The model as it prints: `gemm:8192` (its carve-out apart)."""
        return Beside(self.load, self.size).name

    @classmethod
    def of(cls, load: Beside, path: str | None) -> BesideCompute:
        """The group of a row whose first run ran beside `load` (posted by `path`)."""
        return cls(load.load, load.size, load.carveout, path)

    def add(self, beside: BesideFigure) -> None:
        """A run's transfer alone, kept whether or not the load's slowdown was judged (the idle answer reads
        it), the slowdown, its interval and the noise floor; a block list's slowdown range and why its
        figure was not judged."""
        if self.path is not None:  # a block list's model figures (plain messages have none in the report)
            self.slowdown_ranges = _with(self.slowdown_ranges, _span(beside.slowdown_range))
            if beside.slowdown is None and self.unjudged is None:
                self.unjudged = unjudged_words(beside)  # the first run's reason stands
        alone, slowdown = beside.transfer_alone, beside.slowdown
        if alone is not None or slowdown is not None:
            interval, noise = _span(beside.slowdown_interval), beside.noise_floor
            self.runs = [*self.runs, BesideRun(alone, slowdown, interval, noise)]


def _with(found: list[_T] | None, value: _T | None) -> list[_T] | None:
    """A run's figure added to a group's list (a new list: Row.state keeps the old one), where it has one."""
    return found if value is None else [*(found or ()), value]


def _span(found: object) -> tuple[float, float] | None:
    """A [low, high] pair of finite numbers, low first, or None."""
    if not isinstance(found, (list, tuple)) or len(found) != 2:
        return None
    low, high = finite_number(found[0]), finite_number(found[1])
    return (low, high) if low is not None and high is not None and low <= high else None


def host_us_of(record: BlockList) -> float | None:
    """The posting thread's CPU microseconds per descriptor: `host_us_per_descriptor` where the file has it
    (every path, issue 54), else the armed path's arming (`cpu_us_per_descriptor`, the one path that
    recorded it before)."""
    found = record.host_us_per_descriptor
    return found if found is not None else record.cpu_us_per_descriptor


def list_pace(record: BlockList, samples: Any) -> ListPace | None:
    """A block-list run's ListPace, or None where its record says nothing of it. The host's bound: a
    descriptor's bytes over the posting thread's microseconds a descriptor where the file has them
    (BlockList.host_bound: the same bound for the idle figure and the one beside a load; issue 54: the
    sustained rate, computed against the entry's own figure, bounds only that one); in older files, the
    list's bytes over its arming's CPU time where the arming ran outside the clock (ce-armed: the one path
    whose host work the timed step leaves out)."""
    sustained = record.sustained_gbps
    figures = sorted(v for v in map(finite_number, samples or ()) if v is not None)
    if sustained is not None and (not figures or sustained > figures[len(figures) // 2] * 1.001):
        sustained = None  # above its own burst (the run's median sample): damaged, read as missing
    host: float | None = None
    if record.host_us_per_descriptor is not None:  # the thread's own bound, whichever figure it is read against
        host = record.host_bound()
    elif sustained is None:
        arming, moved = finite_number(record.arm_us), record.transfer_bytes
        host = moved / (arming * 1e3) if arming and isinstance(moved, int) else None  # bytes per us / 1e3: GB/s
    cta_us, post = _cta_us(record), record.post_us_p50
    count = record.count if isinstance(record.count, int) and record.count > 0 else None
    post_us = post / count if post is not None and count else None
    if sustained is None and host is None and cta_us is None and post_us is None:
        return None
    return ListPace(sustained, host, cta_us, post_us)


def _kernel_posted(record: BlockList) -> bool:
    """Whether a posting kernel on the GPU's SMs posted the list (its path's record: Posting.takes_sms)."""
    found = posting(record.posted)
    return found is not None and found.takes_sms


def _cta_us(record: BlockList) -> float | None:
    """A posting kernel's CTA-microseconds per descriptor: its grid (a carve-out's `ctas`, or a budget's one
    CUDA block per SM) times its median transfer time, over the list's descriptors. None where no kernel
    posts or its grid is not recorded (the whole GPU's kernel: its grid is the device API's choice)."""
    sms, us = record.sms, record.transfer_us
    if not _kernel_posted(record) or not isinstance(sms, dict) or not isinstance(us, dict):
        return None
    ctas = (
        sms.get("ctas") if sms.get("mode") == CARVEOUT else sms.get("transfer") if sms.get("mode") == "budget" else None
    )
    p50, count = finite_number(us.get("p50")), record.count
    if not isinstance(ctas, int) or p50 is None or not isinstance(count, int) or count <= 0:
        return None
    return ctas * p50 / count
