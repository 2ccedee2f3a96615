"""The answer a serving engine's author asks of block lists: which posting path for my block size, and
what it costs my model.

For each (test, memory modes, link, block size, compute load, list) of block lists, from the report's
rows: every candidate (a posting path at its SM budget and the model's carve-out: the same path at two
carve-outs is two candidates), the fastest on an idle GPU (idle figures only: a candidate's idle run, or
the alone halves of its pairs beside compute, whether or not its cost was judged), and the fastest beside
the load whose judged slowdown of the load stays within a budget (`--model-budget`, 5% by default), with
the Pareto front of GB/s against slowdown. A candidate's figure is what it sustains back to back from one
posting thread where the file says (`sustained_gbps`), its burst (the timed step) beside it. Each choice
carries its four costs: the model's slowdown with its 95% interval (the row's noise floor beside it), the
SMs it holds, the CPU time per descriptor and a posting kernel's CTA-us per descriptor. Every fact is read
from the row's fields (results.files.entries.posting_of and friends), never parsed back from a label.
Every text format leads with the answer as a table (`table`, `notes`); its prose (`lines`: the front, in
words) is --wide's, and the JSON has every candidate.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ...errors import ConfigError
from ...measure.besiderecord import CARVEOUT
from ...stats import median
from ...units import ascii_float, format_size
from ..files.rows import Row

BUDGET = 1.05  # the slowdown of the model a path may cost: 5%
MOST_BUDGET = 10.0  # 1000%: beyond, no budget is a budget


def parse_budget(text: str) -> float:
    """--model-budget: a share of the model's time a path may cost, written as a percentage ("5%",
    "2.5%") or as a fraction below 1 ("0.05"); as the slowdown factor it allows (1.05). A bare number
    of 1 or more is refused: "5" could be 5% or a factor of 5."""
    said = text.strip()
    try:
        share = ascii_float(said[:-1]) / 100 if said.endswith("%") else ascii_float(said)
    except ValueError:
        share = math.nan
    if not said.endswith("%") and share >= 1:
        raise ConfigError(f"--model-budget {text!r} is ambiguous: write a percentage (5%) or a fraction below 1 (0.05)")
    if not math.isfinite(share) or not 0 < share <= MOST_BUDGET:
        raise ConfigError(
            f"--model-budget takes a percentage above 0% and at most {MOST_BUDGET:.0%} (5%) or a fraction "
            f"below 1 (0.05), not {text!r}"
        )
    return 1.0 + share


def budget_words(budget: float) -> str:
    """A budget as the user wrote it: a percentage of the model's time (1.05: '5%')."""
    return f"{(budget - 1) * 100:.4g}%"


class _PointFigures(TypedDict):
    path: str
    sms: int | None
    green: bool
    carveout: int
    label: str
    gbps: float
    gbps_range: list[float] | None
    slowdown: float | None
    slowdown_range: list[float] | None
    cpu_us_per_descriptor: float | None


class PointRecord(_PointFigures, total=False):
    """A candidate as the JSON writes it; `unjudged` only where its slowdown was not judged; the rest
    where known (issue 54): `idle` (a figure on an idle GPU), its burst, whether `gbps` is the sustained
    rate, the host's bound, the slowdown's 95% interval and the noise floor, the SMs it holds, the posting
    call's and a kernel's costs per descriptor."""

    unjudged: str
    idle: bool
    burst_gbps: float | None
    sustained: bool
    host_bound_gbps: float | None
    slowdown_interval: list[float] | None
    noise_floor: float | None
    sms_held: str
    post_us_per_descriptor: float | None
    cta_us_per_descriptor: float | None


class AnswerRecord(TypedDict):
    """One block size's answer as the JSON writes it."""

    test: str
    modes: str
    link: str
    size_bytes: int
    load: str
    list: str
    budget: float
    fastest_idle: PointRecord | None
    fastest_within_budget: PointRecord | None
    front: list[PointRecord]
    candidates: list[PointRecord]
    contiguous_gbps: float | None
    ceiling_gbps: float | None


class AnswerChange(TypedDict):
    """One block size's answers of two sets of runs, and whether the choice changed."""

    base: AnswerRecord
    new: AnswerRecord
    changed: bool


@dataclass(frozen=True)
class Point:
    """A candidate at one block size: a posting path at its SM budget and carve-out, and its figures."""

    path: str  # the posting path's name (entries.posting_of)
    gbps: float  # what it is ranked by: the sustained rate where the file gives it, else the burst
    slowdown: float | None  # the model's slowdown beside it; None: no model ran, or not judged
    sms: int | None = None  # the SMs its posting kernel was held to; None: no budget
    green: bool = False  # held there by a green context
    carveout: int = 0  # SMs carved from the model for it (0: none)
    cpu_us: float | None = None  # the posting thread's CPU microseconds per descriptor; None: not recorded
    slowdown_range: tuple[float, float] | None = None
    gbps_range: tuple[float, float] | None = None
    unjudged: str | None = None  # beside a model, why its slowdown was not judged (Row.unjudged)
    idle: bool = False  # a figure on an idle GPU: no model, no carve-out beside it
    burst: float | None = None  # the timed step's figure (idle: the alone halves); None: as gbps
    sustained: bool = False  # gbps is the sustained rate (the file's sustained_gbps)
    host_gbps: float | None = None  # what one posting thread's host work allows (below the burst: `!`)
    interval: tuple[float, float] | None = None  # the slowdown's 95% interval (slowdown_interval)
    noise: float | None = None  # the row's noise floor: the load's own swing
    post_us: float | None = None  # the posting call's time per descriptor (files without cpu_us)
    cta_us: float | None = None  # a posting kernel's CTA-microseconds per descriptor
    kernel: bool = False  # a kernel on the GPU's SMs posts it (Posting.takes_sms), whatever the path's name

    @property
    def label(self) -> str:
        """The candidate's name: the path, its SM budget and, beside a model, its carve-out. Idle, a
        carve-out's kernel is named by its grid (the SMs it was sized for): no model ran to carve from."""
        held = f" ({self.sms} SMs{', green context' if self.green else ''})" if self.sms is not None else ""
        if self.idle:
            grid = f" ({self.carveout}-SM grid)" if self.carveout and self.sms is None else ""
            return f"{self.path}{held}{grid}"
        carved = f", model carved {self.carveout} SMs" if self.carveout else ""
        return f"{self.path}{held}{carved}"

    @property
    def sms_held(self) -> str:
        """The SMs the path holds from the model: a carve-out's or a budget's, the whole GPU for an
        uncarved kernel, none for the copy engines and the CPU."""
        if not self.kernel:
            return "0"
        if self.carveout and not self.idle:
            return str(self.carveout)
        if self.sms is not None:
            return f"{self.sms}{' (green)' if self.green else ''}"
        return "whole GPU" if not self.carveout else f"{self.carveout}-SM grid"

    @property
    def burst_gbps(self) -> float:
        return self.burst if self.burst is not None else self.gbps

    def model_words(self) -> str:
        """The model's slowdown with its 95% interval (older files: its range over the pairs), or why not."""
        if self.idle:
            return "-"
        if self.slowdown is None:
            return f"not judged: {self.unjudged}" if self.unjudged else "-"
        if self.interval is not None:
            return f"x{self.slowdown:.3f} [{self.interval[0]:.3f}-{self.interval[1]:.3f}]"
        if self.slowdown_range is not None:
            return f"x{self.slowdown:.3f} (range {self.slowdown_range[0]:.3f}-{self.slowdown_range[1]:.3f})"
        return f"x{self.slowdown:.3f}"

    def cpu_words(self) -> str:
        """CPU us per descriptor: recorded, else the posting call's time per descriptor (~), else '-'."""
        if self.cpu_us is not None:
            return f"{self.cpu_us:.3g}"
        return f"~{self.post_us:.3g}" if self.post_us is not None else "-"

    def costs(self) -> str:
        """Its four costs: the model's slowdown with its interval, the SMs held, CPU and CTA time per descriptor."""
        noise = f", noise {self.noise:.1%}" if self.noise is not None and not self.idle else ""
        model = "" if self.idle else f"model {self.model_words()}{noise}, "
        cta = f", {self.cta_us:.3g} CTA-us/descriptor" if self.cta_us is not None else ""
        return f"{model}SMs held {self.sms_held}, CPU {self.cpu_words()} us/descriptor{cta}"

    def to_dict(self) -> PointRecord:
        found: PointRecord = {
            "path": self.path, "sms": self.sms, "green": self.green, "carveout": self.carveout,
            "label": self.label, "gbps": round(self.gbps, 6),
            "gbps_range": [round(v, 6) for v in self.gbps_range] if self.gbps_range else None,
            "slowdown": self.slowdown,
            "slowdown_range": list(self.slowdown_range) if self.slowdown_range else None,
            "cpu_us_per_descriptor": self.cpu_us, "idle": self.idle, "burst_gbps": self.burst_gbps,
            "sustained": self.sustained, "host_bound_gbps": self.host_gbps,
            "slowdown_interval": list(self.interval) if self.interval else None, "noise_floor": self.noise,
            "sms_held": self.sms_held, "post_us_per_descriptor": self.post_us, "cta_us_per_descriptor": self.cta_us,
        }  # fmt: skip
        if self.unjudged:
            found["unjudged"] = self.unjudged
        return found


def _path(row: Row) -> str:
    """A candidate row's posting path (a block list's: the answer reads only those)."""
    assert row.posting is not None
    return row.posting


def _idle_point(row: Row) -> Point | None:
    """A row's figure on an idle GPU, or None where it has none: a row beside compute gives the alone
    halves of its pairs (judged or not: whether the model's cost was judged says nothing of the idle
    figure), never its figure beside the load; a row with no load beside it, its figure."""
    beside = row.compute is not None
    burst = row.alone_gbps if beside else row.median
    if burst is None:
        return None
    sustained, host = row.sustained_gbps, row.host_bound_gbps
    # The thread's bound is the list's, not the beside figure's: the row's sustained rate beside a load
    # says nothing of the alone burst (issue 54), so the idle figure is ranked by min(burst, bound).
    gbps = min(burst, host) if sustained is not None and host is not None else burst
    if sustained is not None and not beside:
        gbps = sustained
    return Point(
        _path(row), gbps, None, row.posting_sms, row.posting_green, row.carveout or 0,
        row.cpu_us_per_descriptor, None, None if beside else row.gbps_range, None, True, burst,
        sustained is not None, host, None, None, row.post_us_per_descriptor, row.cta_us_per_descriptor,
        row.kernel_posted,
    )  # fmt: skip


def _point(row: Row) -> Point:
    """A row as a candidate beside its load (or alone, where no load ran): its judged slowdown only."""
    beside = row.beside
    sustained = row.sustained_gbps
    return Point(
        _path(row), sustained if sustained is not None else row.median,
        beside[1] if beside else None, row.posting_sms, row.posting_green, row.carveout or 0,
        row.cpu_us_per_descriptor, row.slowdown_range, row.gbps_range, row.unjudged, False, row.median,
        sustained is not None, row.host_bound_gbps, row.slowdown_interval, row.noise_floor,
        row.post_us_per_descriptor, row.cta_us_per_descriptor, row.kernel_posted,
    )  # fmt: skip


@dataclass
class Answer:
    """One block size's answer on one link, beside one load (or on an idle GPU only)."""

    test: str
    modes: str
    link: str
    size_bytes: int
    load: str  # "beside gemm:8192", or "alone"
    shape: str = ""  # the list, apart from who posted it (rows of other lists never share an answer)
    budget: float = BUDGET
    idle: Point | None = None
    within: Point | None = None  # the fastest beside the load within the budget
    front: list[Point] = field(default_factory=list)  # beside: no other candidate both faster and cheaper
    points: list[Point] = field(default_factory=list)  # every candidate, as measured (beside the load, if any)
    contiguous_gbps: float | None = None  # the list's bytes as one message (its reference)
    ceiling_gbps: float | None = None  # a copy kernel over the same list

    def to_dict(self) -> AnswerRecord:
        return {
            "test": self.test, "modes": self.modes, "link": self.link, "size_bytes": self.size_bytes,
            "load": self.load, "list": self.shape, "budget": self.budget,
            "fastest_idle": self.idle.to_dict() if self.idle else None,
            "fastest_within_budget": self.within.to_dict() if self.within else None,
            "front": [point.to_dict() for point in self.front],
            "candidates": [point.to_dict() for point in self.points],
            "contiguous_gbps": self.contiguous_gbps, "ceiling_gbps": self.ceiling_gbps,
        }  # fmt: skip


def _groups(rows: list[Row]) -> dict[tuple[Any, ...], list[Row]]:
    """Block-list rows (never a list's one-message reference) by the choice they are candidates of:
    one list on one link at one size beside one load, under the same other settings."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        if row.block_list is None or row.unit != "GB/s":
            continue  # not a block list, or a list's contiguous reference
        beside = row.load if row.compute is not None else "alone"
        others = tuple(item for item in row.settings if item[0] not in ("blocks", CARVEOUT))
        key = (row.test, row.modes, row.link, row.size_bytes, beside, row.block_list, others)
        groups.setdefault(key, []).append(row)
    return groups


def _median(values: list[float]) -> float | None:
    return median(values) if values else None


def answers(rows: list[Row], budget: float = BUDGET, every: bool = False) -> list[Answer]:
    """Per block size and link, the fastest candidate idle and the fastest within `budget` beside
    compute; only where some size was measured by more than one candidate or beside a load (else there
    is no choice), unless `every` (the page draws a lone path too)."""
    found = []
    for (test, modes, link, size, load, shape, _others), members in sorted(_groups(rows).items()):
        if len(members) < 2 and load == "alone" and not every:
            continue
        answer = Answer(test, modes, link, size, load, shape, budget)
        idle = [point for point in map(_idle_point, members) if point is not None]
        answer.idle = max(idle, key=lambda point: point.gbps) if idle else None
        answer.points = [_point(row) for row in members]
        answer.contiguous_gbps = _median([g for row in members if (g := row.contiguous_gbps) is not None])
        answer.ceiling_gbps = _median([g for row in members if (g := row.ceiling_gbps) is not None])
        if load != "alone":
            beside = [point for point in answer.points if point.slowdown is not None]
            answer.front = _front(beside)
            cheap = [point for point in beside if point.slowdown is not None and point.slowdown <= budget]
            answer.within = max(cheap, key=lambda point: point.gbps) if cheap else None
        found.append(answer)
    return found


def _front(points: list[Point]) -> list[Point]:
    """The points no other point beats at once in GB/s (higher) and slowdown (lower), fastest first."""
    front = [
        point
        for point in points
        if not any(
            other.gbps >= point.gbps and (other.slowdown or 0.0) <= (point.slowdown or 0.0) and other != point
            for other in points
        )
    ]
    return sorted(front, key=lambda point: -point.gbps)


def said(point: Point | None) -> str:
    """A choice in words: the candidate, its GB/s (the burst beside it where it sustains less) and its costs."""
    if point is None:
        return "none"
    burst = f" (burst {point.burst_gbps:.3f})" if point.burst_gbps > point.gbps * 1.001 else ""
    if not burst and point.host_gbps is not None and _host_bound(point):  # a file before sustained_gbps
        burst = f" (a burst: one thread's host work sustains {point.host_gbps:.3f})"
    return f"{point.label} {point.gbps:.3f} GB/s{burst} ({point.costs()})"


def lines(found: list[Answer], budget: float = BUDGET) -> list[str]:
    """The answers as prose, one line a block size with the front (--wide; names escaped by the caller)."""
    if not found:
        return []
    out = [
        "which posting path, in words: the fastest on an idle GPU, and the fastest beside the load that slows it by "
        f"at most {budget_words(budget)}, each with its costs (front: the candidates no other beats in both GB/s "
        "and slowdown)"
    ]
    for answer in found:
        head = f"  {answer.test} {answer.modes} {answer.link} {format_size(answer.size_bytes)}"
        idle = f"idle: {said(answer.idle)}"
        if answer.load == "alone":
            out.append(f"{head}: {idle}")
            continue
        chosen = said(answer.within) if answer.within else "no path within the budget"
        front = "; ".join(f"{p.label} {p.gbps:.3f} x{p.slowdown:.3f}" for p in answer.front if p.slowdown is not None)
        out.append(f"{head}: {idle}; {answer.load} within {budget_words(budget)}: {chosen} [front: {front}]")
    return out


TABLE_COLUMNS = ("block", "choice", "path", "GB/s", "burst", "slowdown [95%]", "noise", "SMs held", "CPU us",
                 "CTA-us")  # fmt: skip
WIDTH = 120  # the answer's notes are wrapped to it, as the table keeps within it


def _figure(gbps: float) -> str:
    """GB/s to four figures: 170.4, 62.90, 0.785, 0.0142 (a small figure never reads 0.0)."""
    if gbps >= 1:
        return f"{gbps:.{max(0, 4 - len(str(int(gbps))))}f}"
    return f"{gbps:.3g}"


def short_label(point: Point) -> str:
    """The candidate's name for the table: the path, its SM budget, the model's carve-out beside it."""
    held = f" {point.sms} SMs{' green' if point.green else ''}" if point.sms is not None else ""
    if point.idle:
        return f"{point.path}{held}" + (f", {point.carveout}-SM grid" if point.carveout and point.sms is None else "")
    return f"{point.path}{held}" + (f", carve {point.carveout}" if point.carveout else "")


def _host_bound(point: Point) -> bool:
    """Whether one posting thread's host work sustains less than the burst (the GB/s cell's !)."""
    return point.host_gbps is not None and point.host_gbps < point.burst_gbps * 0.999


def _slowdown_cell(point: Point) -> str:
    if point.slowdown is None and point.unjudged:
        return "not judged"
    return point.model_words()


def _cells(size: str, choice: str, point: Point | None, budget: float) -> list[str]:
    if point is None:  # idle: no run measured the list alone (files before the alone halves were kept)
        return [
            size,
            choice,
            "no idle figure" if choice == "idle" else f"none within {budget_words(budget)}",
            *["-"] * 7,
        ]
    mark = "!" if _host_bound(point) and not point.sustained else ""
    noise = f"{point.noise:.1%}" if point.noise is not None and not point.idle else "-"
    return [
        size, choice, short_label(point), _figure(point.gbps) + mark, _figure(point.burst_gbps),
        _slowdown_cell(point), noise, point.sms_held, point.cpu_words(),
        f"{point.cta_us:.3g}" if point.cta_us is not None else "-",
    ]  # fmt: skip


def table(found: list[Answer]) -> list[tuple[str, list[list[str]]]]:
    """The answer as tables, one per (test, modes, link, list, load): its caption and its rows, a row per
    block size idle and one within the budget beside a load (names escaped by the caller's format)."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for answer in found:
        caption = f"{answer.test} {answer.modes} {answer.link}, {answer.shape}, {answer.load}"
        size = format_size(answer.size_bytes)
        rows = groups.setdefault((caption,), [])
        rows.append(_cells(size, "idle", answer.idle, answer.budget))
        if answer.load != "alone":
            rows.append(_cells(size, f"within {budget_words(answer.budget)}", answer.within, answer.budget))
    return [(key[0], rows) for key, rows in groups.items()]


def notes(found: list[Answer]) -> list[str]:
    """What the table's marks and columns mean, and what no cell can say: where a burst leaves out the host
    work that one thread needs to keep it going, why a cost was not judged (each note a line: `wrapped`)."""
    if not found:
        return []
    said_once: dict[str, None] = {}
    beside = any(answer.load != "alone" for answer in found)
    said_once[
        "GB/s: what one posting thread sustains back to back where the file says, else the burst (the timed "
        "step); burst: the timed step (idle: the alone halves of the pairs). SMs held: from the model (whole GPU: "
        "an uncarved kernel). CPU us and CTA-us: per descriptor (~: the posting call's time, the file has no CPU "
        "figure; CTA-us: a kernel's grid times its transfer time). !: the burst is more than one posting thread "
        "sustains (below)."
    ] = None
    if beside:
        said_once[
            "slowdown [95%]: the model's slowdown with its 95% interval ((a-b): the range over the pairs, where the "
            "row has no interval: a file before it, or a GPU with under two pairs), measured with the transfers running back to back beside it: a path used less often "
            "costs the model less. noise: the load's own swing in that row, the least slowdown it can tell."
        ] = None
    for answer in found:
        size = format_size(answer.size_bytes)
        for point in (answer.idle, answer.within):
            if point is not None and point.host_gbps is not None and _host_bound(point):
                said_once[
                    f"{'' if point.sustained else '! '}{short_label(point)} at {size}: its burst "
                    f"({_figure(point.burst_gbps)} GB/s) is more than one thread sustains: its host work "
                    f"({point.cpu_words()} us a descriptor) allows {_figure(point.host_gbps)} GB/s back to back"
                ] = None
        for point in answer.points:
            if point.slowdown is None and point.unjudged:
                said_once[f"{short_label(point)} at {size}: the model's cost not judged: {point.unjudged}"] = None
    return list(said_once)


def wrapped(found: list[str], first: str = "", rest: str = "") -> list[str]:
    """Notes wrapped to WIDTH, each note's first line led by `first` and its others by `rest`."""
    return [line for text in found for line in textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest)]


def _answer_key(answer: Answer) -> tuple[Any, ...]:
    return (answer.test, answer.modes, answer.link, answer.size_bytes, answer.load, answer.shape)


def changes(base: list[Row], new: list[Row], budget: float = BUDGET) -> list[AnswerChange]:
    """The answers of two sets of runs side by side, for every block size and load both answer:
    which candidate each names idle and within the budget, with its costs, and whether that choice
    changed (another path, SM budget or carve-out)."""
    before = {_answer_key(answer): answer for answer in answers(base, budget)}
    found: list[AnswerChange] = []
    for answer in answers(new, budget):
        old = before.get(_answer_key(answer))
        if old is None:
            continue
        names = [(p.label if p else None) for p in (old.idle, answer.idle, old.within, answer.within)]
        found.append(
            {"base": old.to_dict(), "new": answer.to_dict(), "changed": names[0] != names[1] or names[2] != names[3]}
        )
    return found


def change_lines(found: list[AnswerChange]) -> list[str]:
    """`changes` as text, one line a block size: BASE's choice -> NEW's, idle and within the budget,
    each with its costs."""
    if not found:
        return []
    budget = budget_words(found[0]["new"]["budget"])
    out = [
        f"which posting path, BASE -> NEW (idle; within the load's slowdown budget of {budget}), each with its "
        "costs; * where the choice changed:"
    ]
    for one in found:
        base, new = one["base"], one["new"]
        idle = [_from_dict(part) for part in (base["fastest_idle"], new["fastest_idle"])]
        within = [_from_dict(part) for part in (base["fastest_within_budget"], new["fastest_within_budget"])]
        head = f"{'*' if one['changed'] else ' '} {new['test']} {new['modes']} {new['link']} {format_size(new['size_bytes'])}"
        line = f"{head}: idle {said(idle[0])} -> {said(idle[1])}"
        if new["load"] != "alone":
            line += f"; {new['load']}: {said(within[0])} -> {said(within[1])}"
        out.append(line)
    return out


def _from_dict(found: PointRecord | None) -> Point | None:
    """A candidate back from its record (older records: the keys of issue 54 absent)."""
    if not found:
        return None
    low_high, interval = found["slowdown_range"], found.get("slowdown_interval")
    return Point(
        found["path"], found["gbps"], found["slowdown"], found["sms"], bool(found["green"]),
        found["carveout"] or 0, found["cpu_us_per_descriptor"],
        (low_high[0], low_high[1]) if low_high else None, None, found.get("unjudged"), bool(found.get("idle")),
        found.get("burst_gbps"), bool(found.get("sustained")), found.get("host_bound_gbps"),
        (interval[0], interval[1]) if interval else None, found.get("noise_floor"),
        found.get("post_us_per_descriptor"), found.get("cta_us_per_descriptor"),
        found.get("sms_held", "0") != "0",  # a kernel held SMs (records before it said: none)
    )  # fmt: skip
