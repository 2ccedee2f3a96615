"""The answer a serving engine's author asks of block lists: which posting path for my block size, and
what it costs my model.

For each (test, memory modes, link, block size, compute load) with block lists of device memory, from
the report's rows: the fastest path on an idle GPU (a path's figure alone: its idle run, or the alone
half of its pairs beside compute), and the fastest path beside the load whose slowdown of the load
stays within a budget (5% by default), with the Pareto front of GB/s against slowdown they come from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...measure.postings import POSTINGS
from ...units import format_size
from ..files.rows import Row

BUDGET = 1.05  # the slowdown of the model a path may cost: 5%


_HELD = re.compile(r", (\d+) SMs( \(green context\))?")


def path_of(row: Row) -> str | None:
    """The posting path of a block-list row (measure/postings.py, with its SM budget), or None."""
    path, held, green = row.posting
    if path is None:
        return None
    return f"{path} ({held} SMs{' (green context)' if green else ''})" if held is not None else path


def _list_of(row: Row) -> str:
    """A block-list row's list apart from who posted it: rows of one list by different paths compare."""
    shape = dict(row.settings).get("blocks", "")
    for record in POSTINGS.values():
        shape = shape.replace(record.said, "") if record.said else shape
    return _HELD.sub("", shape)


@dataclass(frozen=True)
class Point:
    path: str
    gbps: float
    slowdown: float | None  # None: measured on an idle GPU

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "gbps": round(self.gbps, 6), "slowdown": self.slowdown}


@dataclass
class Answer:
    """One block size's answer on one link, beside one load (or on an idle GPU only)."""

    test: str
    modes: str
    link: str
    size_bytes: int
    load: str  # "beside gemm:8192", or "alone"
    shape: str = ""  # the list, apart from who posted it (rows of other lists never share an answer)
    idle: Point | None = None
    within: Point | None = None  # the fastest beside the load within the budget
    front: list[Point] = field(default_factory=list)  # beside: no other path both faster and cheaper

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test, "modes": self.modes, "link": self.link, "size_bytes": self.size_bytes,
            "load": self.load, "list": self.shape, "budget": BUDGET, "fastest_idle": self.idle.to_dict() if self.idle else None,
            "fastest_within_budget": self.within.to_dict() if self.within else None,
            "front": [point.to_dict() for point in self.front],
        }  # fmt: skip


def answers(rows: list[Row], budget: float = BUDGET) -> list[Answer]:
    """Per block size and link, the fastest path idle and the fastest within `budget` beside compute;
    only where some size was measured by more than one path or beside a load (else there is no choice)."""
    groups: dict[tuple[Any, ...], list[tuple[str, Row]]] = {}
    for row in rows:
        path = path_of(row)
        if path is None or row.unit != "GB/s" or dict(row.settings)["blocks"].startswith("1 x contiguous"):
            continue  # not a block list, or a list's contiguous reference
        beside = row.load if row.load.startswith("beside ") else "alone"
        key = (row.test, row.modes, row.link, row.size_bytes, beside, _list_of(row))  # one list, its paths
        groups.setdefault(key, []).append((path, row))
    found = []
    for (test, modes, link, size, load, shape), members in sorted(groups.items()):
        if len(members) < 2 and load == "alone":
            continue
        answer = Answer(test, modes, link, size, load, shape)
        idle = [Point(path, row.beside[0] if row.beside else row.median, None) for path, row in members]
        answer.idle = max(idle, key=lambda point: point.gbps)
        if load != "alone":
            points = [Point(path, row.median, row.beside[1]) for path, row in members if row.beside]
            answer.front = _front(points)
            cheap = [point for point in points if point.slowdown is not None and point.slowdown <= budget]
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


def lines(found: list[Answer], budget: float = BUDGET) -> list[str]:
    """The answers as text, one line a block size (names escaped by the caller's format)."""
    if not found:
        return []
    out = [
        "which posting path: the fastest on an idle GPU, and the fastest beside the load that slows it by at most "
        f"{budget - 1:.0%} (front: the paths no other beats in both GB/s and slowdown)"
    ]
    for answer in found:
        head = f"  {answer.test} {answer.modes} {answer.link} {format_size(answer.size_bytes)}"
        idle = f"idle: {answer.idle.path} {answer.idle.gbps:.3f} GB/s" if answer.idle else "idle: -"
        if answer.load == "alone":
            out.append(f"{head}: {idle}")
            continue
        within = answer.within
        chosen = (
            f"{within.path} {within.gbps:.3f} GB/s (model x{within.slowdown:.3f})"
            if within and within.slowdown is not None
            else "no path within the budget"
        )
        front = "; ".join(f"{p.path} {p.gbps:.3f} x{p.slowdown:.3f}" for p in answer.front if p.slowdown is not None)
        out.append(f"{head}: {idle}; {answer.load}: {chosen} [front: {front}]")
    return out


def _said(point: Point | None) -> str:
    if point is None:
        return "none"
    cost = f" (x{point.slowdown:.3f})" if point.slowdown is not None else ""
    return f"{point.path} {point.gbps:.3f} GB/s{cost}"


def _answer_key(answer: Answer) -> tuple[Any, ...]:
    return (answer.test, answer.modes, answer.link, answer.size_bytes, answer.load, answer.shape)


def changes(base: list[Row], new: list[Row], budget: float = BUDGET) -> list[dict[str, Any]]:
    """The answers of two sets of runs side by side, for every block size and load both answer:
    which path each names idle and within the budget, and whether that choice changed."""
    before = {_answer_key(answer): answer for answer in answers(base, budget)}
    found = []
    for answer in answers(new, budget):
        old = before.get(_answer_key(answer))
        if old is None:
            continue
        paths = [(p.path if p else None) for p in (old.idle, answer.idle, old.within, answer.within)]
        found.append(
            {"base": old.to_dict(), "new": answer.to_dict(), "changed": paths[0] != paths[1] or paths[2] != paths[3]}
        )
    return found


def change_lines(found: list[dict[str, Any]]) -> list[str]:
    """`changes` as text, one line a block size: BASE's choice -> NEW's, idle and within the budget."""
    if not found:
        return []
    out = ["which posting path, BASE -> NEW (idle; within the load's slowdown budget); * where the choice changed:"]
    for one in found:
        base, new = one["base"], one["new"]
        points = [_point(part) for part in (base["fastest_idle"], new["fastest_idle"])]
        within = [_point(part) for part in (base["fastest_within_budget"], new["fastest_within_budget"])]
        head = f"{'*' if one['changed'] else ' '} {new['test']} {new['modes']} {new['link']} {format_size(new['size_bytes'])}"
        line = f"{head}: idle {_said(points[0])} -> {_said(points[1])}"
        if new["load"] != "alone":
            line += f"; {new['load']}: {_said(within[0])} -> {_said(within[1])}"
        out.append(line)
    return out


def _point(found: dict[str, Any] | None) -> Point | None:
    return Point(found["path"], found["gbps"], found["slowdown"]) if found else None
