"""The diagnosis's records: how components are judged (`Params`), a suspect part with its evidence
(`Suspect`), a run's attribution (`Attribution`: the suspects, the links to measure again, the classes),
and the words and command for the links to measure again. attribution.py finds them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ...units import is_digits
from ..files.rows import Row
from .fleet import ClassFloor, FloorParams, LinkTable


@dataclass(frozen=True)
class Params:
    """How components are judged (see the module's text); `floors` places each link in its class."""

    floors: FloorParams = field(default_factory=FloorParams)
    majority: float = 0.75  # of a component's links (weighted) slow at its level
    alpha: float = 0.01  # chance of naming a component of a healthy run
    fine_penalty: float = 2.0  # a link through a component that ran fine, against its slow ones
    remeasured_weight: float = 2.0  # a link a screen re-measured alone that stayed slow
    recovered_weight: float = 0.5  # one that ran near its class alone: slow only under load
    min_gain: float = 1.0  # the least weight of slow links a suspect explains
    max_suspects: int = 50
    listed: int = 5  # link names kept per suspect (explained, fine)


class SuspectRecord(TypedDict):
    """A suspect as the attribution's JSON writes it."""

    component: str
    kind: str
    host: str
    device: str | None
    direction: str
    peer: str | None
    links: int
    explained: int
    explained_links: list[str]
    fine: int
    fine_links: list[str]
    ratio: float
    level: float
    confidence: float
    supporting: list[str]
    contradicting: list[str]
    placement: list[str]
    alternatives: list[str]


class RemeasureRecord(TypedDict):
    """A link to measure again, and its figure's ratio to its class."""

    link: str
    test: str
    modes: str
    size_bytes: int
    ratio: float


class AttributionRecord(TypedDict):
    """The attribution as its JSON writes it (a class's record is fleet.ClassFloor.to_dict's)."""

    outcome: str
    suspects: list[SuspectRecord]
    remeasure: list[RemeasureRecord]
    remeasure_command: str | None
    judged: int
    slow: int
    unexplained: int
    unexplained_links: list[str]
    classes: list[dict[str, object]]


@dataclass
class Suspect:
    """A component that explains slow links: what it is, what it explains and how sure that is."""

    kind: str  # "gpu", "rank", "nic", "host", "pair", "link"
    host: str
    device: str | None  # "gpu3", "mlx5_3:1", "rank12"; None for a host or a pair
    direction: str  # "send", "receive", "both" (a link: "send", its own direction)
    peer: str | None  # a pair's other host; a link's other end
    links: int  # its judged links
    explained: int  # of them slow at its level
    explained_links: list[str]  # the worst few
    fine: int
    fine_links: list[str]
    ratio: float  # its slow links' median figure over their classes' medians (below 1: worse)
    level: float  # all its links' median ratio
    confidence: float
    supporting: list[str] = field(default_factory=list)
    contradicting: list[str] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)  # the NICs a GPU used, the GPUs a NIC carried
    alternatives: list[str] = field(default_factory=list)  # components of exactly the same slow links
    rows: list[Row] = field(default_factory=list, repr=False)  # every slow link it explains, worst first

    @property
    def name(self) -> str:
        if self.kind == "link":
            return f"link {self.host}:{self.device} -> {self.peer}"
        if self.kind == "pair":
            arrow = "<->" if self.direction == "both" else "->"
            return f"pair {self.host} {arrow} {self.peer}"
        where = f"{self.host}:{self.device}" if self.device else self.host
        return f"{self.kind} {where} {self.direction}"

    def describe(self) -> str:
        """One line: the component, how far below its class, what it explains, the evidence."""
        evidence = "; ".join(self.supporting[:2] + [f"against: {c}" for c in self.contradicting[:1]])
        return (
            f"{self.name}: {self.explained} of {self.links} link(s) slow, at {self.ratio:.0%} of their class median "
            f"(confidence {self.confidence:.2f})" + (f"; {evidence}" if evidence else "")
        )

    def to_dict(self) -> SuspectRecord:
        return {
            "component": self.name,
            "kind": self.kind,
            "host": self.host,
            "device": self.device,
            "direction": self.direction,
            "peer": self.peer,
            "links": self.links,
            "explained": self.explained,
            "explained_links": self.explained_links,
            "fine": self.fine,
            "fine_links": self.fine_links,
            "ratio": self.ratio,
            "level": self.level,
            "confidence": self.confidence,
            "supporting": self.supporting,
            "contradicting": self.contradicting,
            "placement": self.placement,
            "alternatives": self.alternatives,
        }


@dataclass
class Attribution:
    """The suspects of a run (the one that explains most first), and what the classes say."""

    suspects: list[Suspect]
    classes: list[ClassFloor]
    judged: int  # links in judged classes
    slow: int  # links below their class floor
    unexplained: int  # of them, on no suspect
    unexplained_links: list[str]
    params: Params
    links: LinkTable | None = field(default=None, repr=False)  # where every link stands in its class
    # Slow links with no evidence beyond their one figure (no other slow link through a part, never
    # re-measured): a reason to measure them again, not a broken part. Worst first.
    remeasure: list[Row] = field(default_factory=list, repr=False)
    remeasure_ratios: list[float] = field(default_factory=list, repr=False)  # each one's figure / class median

    @property
    def inconclusive(self) -> list[ClassFloor]:
        """The classes with too few links to judge."""
        return [one for one in self.classes if not one.judged]

    @property
    def outcome(self) -> str:
        """SUSPECTS (a component named), SLOW (slow links, re-measured, that no component explains),
        REMEASURE (only single slow figures never measured again), HEALTHY, or INCONCLUSIVE (no
        class could be judged)."""
        if self.suspects:
            return "SUSPECTS"
        if self.unexplained:
            return "SLOW"
        if self.remeasure:
            return "REMEASURE"
        return "HEALTHY" if self.judged else "INCONCLUSIVE"

    def lines(self) -> list[str]:
        """Suspects first, one line each, then what is left: for `check` and the report."""
        found = [f"suspect {n}: {s.describe()}" for n, s in enumerate(self.suspects, 1)]
        too_few = self.inconclusive
        least = self.params.floors.min_class_links
        # Said once, in one line: a small run has a class per link and size, each too small.
        labels = list(dict.fromkeys(one.label for one in too_few))
        shown = ", ".join(labels[:3]) + (", ..." if len(labels) > 3 else "")
        few = f"{sum(one.links for one in too_few)} link(s) in {len(too_few)} class(es): {shown}" if too_few else ""
        if not self.judged:
            said = f" ({few})" if few else ""
            found.append(
                f"no suspect can be named: no class of links has the {least} links it takes to judge one{said}"
            )
        elif not self.suspects:
            found.append(f"no suspect: {self.judged} link(s) judged against their class, no component stands out")
        if self.unexplained:
            names = ", ".join(self.unexplained_links)
            found.append(f"{self.unexplained} slow link(s) no component explains: {names}")
        if self.remeasure:
            found += remeasure_lines(self.remeasure, self.remeasure_ratios, self.params.listed)
        if too_few and self.judged:
            found.append(f"inconclusive, too small to judge against their class (it takes {least} links): {few}")
        return found

    def to_dict(self) -> AttributionRecord:
        return {
            "outcome": self.outcome,
            "suspects": [s.to_dict() for s in self.suspects],
            "remeasure": [
                {"link": row.link, "test": row.test, "modes": row.modes, "size_bytes": row.size_bytes, "ratio": ratio}
                for row, ratio in zip(self.remeasure, self.remeasure_ratios, strict=True)
            ],
            "remeasure_command": remeasure_command(self.remeasure_ratios) if self.remeasure else None,
            "judged": self.judged,
            "slow": self.slow,
            "unexplained": self.unexplained,
            "unexplained_links": self.unexplained_links,
            "classes": [one.to_dict() for one in self.classes],
        }


REMEASURE_DEFAULT = 0.8  # the screen's own --remeasure-below


def remeasure_command(ratios: list[float]) -> str:
    """The command that measures these links again, alone: a screen whose --remeasure-below is
    above every one of them (a multiple of 0.05, at least the screen's default)."""
    share = max(REMEASURE_DEFAULT, math.ceil((max(ratios) + 0.01) * 20) / 20)
    return f"rdmabench run --pattern screen --remeasure-below {min(share, 0.95):.2f} (and the run's other options)"


def remeasure_lines(rows: list[Row], ratios: list[float], listed: int) -> list[str]:
    """What `check` and the report say of the links to measure again: how many, the worst, and how."""
    names = ", ".join(f"{row.link} ({ratio:.0%})" for row, ratio in zip(rows[:listed], ratios, strict=False))
    more = f" and {len(rows) - listed} more" if len(rows) > listed else ""
    return [
        f"re-measure {len(rows)} link(s): a single slow figure each (of their class median), never measured again "
        f"and through no part with other slow links: {names}{more}",
        f"re-measure with: {remeasure_command(ratios)}; a link slow again alone is evidence, one at its class is not",
    ]


def _natural(text: str) -> tuple[Any, ...]:
    """`node9` before `node10`: digit runs compared as numbers."""
    return tuple(int(part) if is_digits(part) else part for part in re.split(r"(\d+)", text, flags=re.ASCII))


def end_order(rows: list[Row]) -> list[str]:
    """The link ends of `rows` ("node017:gpu3") in the order a heatmap should draw them: by host,
    then by the NIC each sends through, then by device. A slow GPU is then one row (sending) or one
    column (receiving); a slow NIC a band of its GPUs' rows; a slow host a band of all of them."""
    nic_of: dict[str, str] = {}
    ends: set[str] = set()
    for row in rows:
        src, _, dst = row.link.partition(" -> ")
        ends.update((src, dst))
        for end, host in ((src, row.src_host), (dst, row.dst_host)):
            if end not in nic_of:
                nic = next((n for n in sorted(row.nics) if n.startswith(host + "/")), None)
                if nic is not None:
                    nic_of[end] = nic

    def key(end: str) -> tuple[Any, ...]:
        host, _, device = end.rpartition(":")
        return _natural(host), _natural(nic_of.get(end, "")), _natural(device)

    return sorted(ends, key=key)
