"""The answer a serving engine's author asks of block lists: which posting path for my block size, and
what it costs my model.

For each (test, memory modes, link, block size, compute load, list) of block lists, from the report's
rows: every candidate (a posting path at its SM budget and the model's carve-out: the same path at two
carve-outs is two candidates), the fastest on an idle GPU (a candidate's figure alone: its idle run, or
the alone half of its pairs beside compute), and the fastest beside the load whose slowdown of the load
stays within a budget (`--model-budget`, 5% by default), with the Pareto front of GB/s against
slowdown. Each choice carries its three costs: the model's slowdown (with its range over the pairs),
the SMs carved from the model, and the CPU time per descriptor. Every fact is read from the row's
fields (results.files.entries.posting_of and friends), never parsed back from a label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ...errors import ConfigError
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
    """A candidate as the JSON writes it; `unjudged` only where its slowdown was not judged."""

    unjudged: str


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
    gbps: float
    slowdown: float | None  # the model's slowdown beside it; None: no model ran
    sms: int | None = None  # the SMs its posting kernel was held to; None: no budget
    green: bool = False  # held there by a green context
    carveout: int = 0  # SMs carved from the model for it (0: none)
    cpu_us: float | None = None  # CPU microseconds per descriptor; None: not recorded
    slowdown_range: tuple[float, float] | None = None
    gbps_range: tuple[float, float] | None = None
    unjudged: str | None = None  # beside a model, why its slowdown was not judged (Row.unjudged)

    @property
    def label(self) -> str:
        """The candidate's name: the path, its SM budget and the model's carve-out where there are."""
        held = f" ({self.sms} SMs{', green context' if self.green else ''})" if self.sms is not None else ""
        carved = f", model carved {self.carveout} SMs" if self.carveout else ""
        return f"{self.path}{held}{carved}"

    def costs(self) -> str:
        """Its three costs: the model's slowdown with its range, the SMs taken, the CPU per descriptor."""
        if self.slowdown is None:
            model = f"model not judged: {self.unjudged}" if self.unjudged else "model -"
        else:
            spread = f" [{self.slowdown_range[0]:.3f}-{self.slowdown_range[1]:.3f}]" if self.slowdown_range else ""
            model = f"model x{self.slowdown:.3f}{spread}"
        cpu = f"{self.cpu_us:.3g}" if self.cpu_us is not None else "-"
        return f"{model}, {self.carveout} SMs taken, CPU {cpu} us/descriptor"

    def to_dict(self) -> PointRecord:
        found: PointRecord = {
            "path": self.path, "sms": self.sms, "green": self.green, "carveout": self.carveout,
            "label": self.label, "gbps": round(self.gbps, 6),
            "gbps_range": [round(v, 6) for v in self.gbps_range] if self.gbps_range else None,
            "slowdown": self.slowdown,
            "slowdown_range": list(self.slowdown_range) if self.slowdown_range else None,
            "cpu_us_per_descriptor": self.cpu_us,
        }  # fmt: skip
        if self.unjudged:
            found["unjudged"] = self.unjudged
        return found


def _point(row: Row, idle: bool) -> Point:
    """A row as a candidate: its figure idle (the alone half beside compute) or beside the load."""
    beside = row.beside
    alone = idle and beside is not None
    return Point(
        row.posting or "cpu",
        beside[0] if alone and beside else row.median,
        beside[1] if beside else None,
        row.posting_sms,
        row.posting_green,
        row.carveout or 0,
        row.cpu_us_per_descriptor,
        row.slowdown_range,
        None if alone else row.gbps_range,
        row.unjudged,
    )


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
        beside = row.load if row.load.startswith("beside ") else "alone"
        others = tuple(item for item in row.settings if item[0] not in ("blocks", "carveout"))
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
        answer.idle = max((_point(row, idle=True) for row in members), key=lambda point: point.gbps)
        answer.points = [_point(row, idle=False) for row in members]
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
    """A choice in words: the candidate, its GB/s and its three costs."""
    if point is None:
        return "none"
    return f"{point.label} {point.gbps:.3f} GB/s ({point.costs()})"


def lines(found: list[Answer], budget: float = BUDGET) -> list[str]:
    """The answers as text, one line a block size (names escaped by the caller's format)."""
    if not found:
        return []
    out = [
        "which posting path: the fastest on an idle GPU, and the fastest beside the load that slows it by at most "
        f"{budget_words(budget)}, each with its costs: the model's slowdown [range over pairs], the SMs carved "
        "from the model, the CPU time per descriptor (front: the candidates no other beats in both GB/s and slowdown)"
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
    if not found:
        return None
    low_high = found["slowdown_range"]
    return Point(
        found["path"], found["gbps"], found["slowdown"], found["sms"], bool(found["green"]),
        found["carveout"] or 0, found["cpu_us_per_descriptor"],
        (low_high[0], low_high[1]) if low_high else None, None, found.get("unjudged"),
    )  # fmt: skip
