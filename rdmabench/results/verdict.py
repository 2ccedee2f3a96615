"""A pass/fail verdict over results: every link at its largest measured size against a floor (a share
of its physical limit, per limit kind or link class) or against a baseline run (within a tolerance).
The verdict names every failing link, and the GPUs, nodes and NICs they touch; it can be written as JSON
or JUnit XML for a cluster's CI. Like nccl-tests' minimum-bandwidth gate, the largest size is judged:
small messages never approach a link's limit."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import quoteattr

from ..errors import ConfigError
from ..units import format_size
from .report import LINK_CLASSES, Row, culprits

LIMIT_KINDS = ("NVLink", "PCIe", "NIC", "host memory copy")
# Floors that `--expect default` sets, with where each comes from.
DEFAULT_FLOORS = {
    "NVLink": 0.75,  # device-to-device on two H200s: 0.79-0.80 of 18 x NVLink 4 at 64-256 MiB (this project)
    "PCIe": 0.70,  # pinned <-> device through UCX: 0.79-0.81 of PCIe Gen5 x16 at 256 MiB (this project)
    "NIC": 0.80,  # published health checks ask 375 Gb/s of a 400G port (0.94) with GPUDirect; not yet measured here
}
DEFAULT_SOURCES = (
    "NVLink 0.75 and PCIe 0.70: below what this project measured on two H200s (0.79-0.81 at 64-256 MiB); "
    "NIC 0.80: below the 0.94 of a port that published cluster health checks ask for; host memory copies "
    "are not judged by default (a copy between processes is a fraction of the measured copy rate)"
)


def parse_expect(texts: tuple[str, ...] | list[str]) -> dict[str, float]:
    """`KIND=SHARE` floors (KIND: a limit kind, a link class, or all), or `default`."""
    floors: dict[str, float] = {}
    for text in texts:
        if text.strip() == "default":
            floors.update(DEFAULT_FLOORS)
            continue
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"--expect {text!r}: give KIND=SHARE (e.g. NVLink=0.75) or default")
        if key not in (*LIMIT_KINDS, *LINK_CLASSES, "all"):
            choices = ", ".join((*LIMIT_KINDS, *LINK_CLASSES, "all"))
            raise ConfigError(f"--expect {text!r}: unknown limit kind or link class {key!r}: choose {choices}")
        try:
            share = float(value)
        except ValueError:
            raise ConfigError(f"--expect {text!r}: the floor must be a number, a share of the limit") from None
        if not 0 < share <= 1:
            raise ConfigError(f"--expect {text!r}: the floor is a share of the physical limit, above 0 and at most 1")
        floors[key] = share
    return floors


@dataclass
class Judgement:
    row: Row
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "link": self.row.link,
            "link_class": self.row.link_class,
            "test": self.row.test,
            "modes": self.row.modes,
            "size_bytes": self.row.size_bytes,
            "load": self.row.load,
            "median": self.row.median,
            "unit": self.row.unit,
            "share_of_limit": self.row.share,
            "passed": self.passed,
            "reason": self.reason,
        }


@dataclass
class Verdict:
    judged: list[Judgement] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # links that could not be judged, and why

    @property
    def failed(self) -> list[Judgement]:
        return [j for j in self.judged if not j.passed]

    @property
    def passed(self) -> bool:
        return not self.failed

    def culprits(self) -> dict[str, dict[str, int]]:
        """How many failing links touch each GPU, node and NIC: the slow part shows up most."""
        return culprits([judgement.row for judgement in self.failed])

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "judged": len(self.judged),
            "failed": [j.to_dict() for j in self.failed],
            "passed_links": [j.to_dict() for j in self.judged if j.passed],
            "skipped": self.skipped,
            **self.culprits(),
        }


def _largest(rows: list[Row]) -> list[Row]:
    """Each link's row at its largest measured size (per test, modes, load and settings)."""
    best: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        settings = tuple(item for item in row.settings if item[0] != "window")  # the default window follows the size
        key = (row.test, row.src_mode, row.dst_mode, row.link, row.load, settings)
        if key not in best or row.size_bytes > best[key].size_bytes:
            best[key] = row
    return list(best.values())


def _floor(row: Row, floors: dict[str, float]) -> tuple[str, float] | None:
    for key in (row.limit_kind, row.link_class, "all"):
        if key is not None and key in floors:
            return key, floors[key]
    return None


def judge(
    rows: list[Row], floors: dict[str, float], baseline: list[Row] | None = None, tolerance: float = 0.1
) -> Verdict:
    """Every link at its largest size: against its floor (share of the limit), and against the same
    link in `baseline` (no worse than `tolerance`)."""
    verdict = Verdict()
    base = {row.key: row for row in baseline or []}
    for row in _largest(rows):
        what = f"{row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load})"
        reasons: list[str] = []
        checked = False
        floor = _floor(row, floors)
        if floor is not None and row.higher_is_better:
            if row.share is None:
                why = (
                    f"its figure is above its {row.limit}, a measurement error"
                    if row.limit
                    else "no physical limit known"
                )
                verdict.skipped.append(f"{what}: {why}; its {floor[0]} floor cannot apply")
            else:
                checked = True
                if row.share < floor[1]:
                    reasons.append(f"{row.share:.0%} of its {row.limit}, below the {floor[0]} floor of {floor[1]:.0%}")
        old = base.get(row.key)
        if baseline is not None:
            if old is None:
                verdict.skipped.append(f"{what}: not in the baseline")
            else:
                checked = True
                change = row.median / old.median - 1 if old.median else 0.0
                if row.worse(change, tolerance):
                    reasons.append(
                        f"{row.median:.3f} {row.unit} against {old.median:.3f} in the baseline ({change:+.0%}, "
                        f"tolerance {tolerance:.0%})"
                    )
        if checked:
            verdict.judged.append(Judgement(row, not reasons, "; ".join(reasons) or "ok"))
    return verdict


def format_verdict(verdict: Verdict) -> str:
    lines = [
        f"check: {len(verdict.judged)} link(s) judged at their largest size, {len(verdict.failed)} failed"
        + (f", {len(verdict.skipped)} not judged" if verdict.skipped else "")
    ]
    for judgement in verdict.failed:
        row = judgement.row
        lines.append(
            f"FAIL {row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load}): {judgement.reason}"
        )
    culprits = verdict.culprits()
    for name in ("gpus", "nodes", "nics"):
        if culprits[name]:
            lines.append(f"failing {name}: " + ", ".join(f"{k} ({v} link(s))" for k, v in culprits[name].items()))
    lines += [f"not judged: {line}" for line in verdict.skipped]
    lines.append("verdict: PASS" if verdict.passed else "verdict: FAIL")
    return "\n".join(lines)


def junit_xml(verdict: Verdict) -> str:
    """One JUnit test case per judged link, a failure for each that failed."""
    cases = []
    for judgement in verdict.judged:
        row = judgement.row
        name = quoteattr(f"{row.link} {format_size(row.size_bytes)} ({row.load})")
        classname = quoteattr(f"rdmabench.{row.test}.{row.modes}")
        failure = "" if judgement.passed else f"<failure message={quoteattr(judgement.reason)}/>"
        cases.append(f"  <testcase classname={classname} name={name}>{failure}</testcase>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="rdmabench check" tests="{len(verdict.judged)}" failures="{len(verdict.failed)}" '
        f'skipped="{len(verdict.skipped)}">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )


def summary_json(verdict: Verdict) -> str:
    return json.dumps(verdict.to_dict(), indent=1)
