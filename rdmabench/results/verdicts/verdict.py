"""A pass/fail verdict over results: every link at its largest measured size against a floor (a share
of its physical limit, per limit kind or link class; or, with `default`, also the floor of its class
in the run itself: fleet.py) or against a baseline run (within a tolerance).
The verdict names every failing link, and the GPUs, nodes and NICs they touch; it can be written as JSON
or JUnit XML for a cluster's CI. Like nccl-tests' minimum-bandwidth gate, the largest size is judged:
small messages never approach a link's limit.

A verdict that judged nothing is no verdict: `conclude` (what `check`, `report --expect` and
`run --expect` all call) refuses it. Exit status: 0 every judged link passed, 1 a link failed,
2 nothing could be judged (InconclusiveError, as bad input)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from ... import escape
from ...errors import ConfigError, InconclusiveError
from ...measure.postings import posting
from ...units import ascii_float, format_size
from ..files.rows import LINK_CLASSES, Row, culprits

if TYPE_CHECKING:
    from .attribution import Attribution, Suspect
    from .fleet import ClassFloor

LIMIT_KINDS = ("NVLink", "PCIe", "NIC", "host memory copy")
# Floors that `--expect default` sets, with where each comes from; host memory copies are not judged
# by default (a copy between processes is a fraction of the measured copy rate).
DEFAULT_FLOORS = {
    "NVLink": 0.75,  # device-to-device on two H200s: 0.79-0.80 of 18 x NVLink 4 at 64-256 MiB (this project)
    "PCIe": 0.70,  # pinned <-> device through UCX: 0.79-0.81 of PCIe Gen5 x16 at 256 MiB (this project)
    "NIC": 0.80,  # published health checks ask 375 Gb/s of a 400G port (0.94) with GPUDirect; not yet measured here
}
# What `default` adds beside DEFAULT_FLOORS: each link against the floor of its class in the same
# run(s) (fleet.py: the class median less k robust spreads, at least 5% below it; classes of 6 links
# or more). Not a limit kind: no hand floor can name it, and its value means only "on".
FLEET = "class floor"
# A ceiling, not a floor: the most a link beside a model's compute (--beside) may slow that compute, as a
# factor (slowdown=1.05: 5%). Judges the links that ran beside a load; the others it does not name.
SLOWDOWN = "slowdown"


def parse_expect(texts: tuple[str, ...] | list[str]) -> dict[str, float]:
    """`KIND=SHARE` floors (KIND: a limit kind, a link class, or all), or `default`."""
    floors: dict[str, float] = {}
    for text in texts:
        if text.strip() == "default":
            floors.update(DEFAULT_FLOORS)
            floors[FLEET] = 1.0
            continue
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"--expect {text!r}: give KIND=SHARE (e.g. NVLink=0.75) or default")
        if key == SLOWDOWN:
            floors[SLOWDOWN] = _ceiling(text, value)
            continue
        if key not in (*LIMIT_KINDS, *LINK_CLASSES, "all"):
            choices = ", ".join((*LIMIT_KINDS, *LINK_CLASSES, "all"))
            raise ConfigError(f"--expect {text!r}: unknown limit kind or link class {key!r}: choose {choices}")
        try:
            share = ascii_float(value)
        except ValueError:
            raise ConfigError(f"--expect {text!r}: the floor must be a number, a share of the limit") from None
        if not 0 < share <= 1:
            raise ConfigError(f"--expect {text!r}: the floor is a share of the physical limit, above 0 and at most 1")
        floors[key] = share
    return floors


def _ceiling(text: str, value: str) -> float:
    try:
        ceiling = ascii_float(value)
    except ValueError:
        raise ConfigError(f"--expect {text!r}: the ceiling must be a number, a factor (1.05: 5% slower)") from None
    if not 1 <= ceiling <= 100:
        raise ConfigError(f"--expect {text!r}: a slowdown ceiling is a factor of at least 1 (1.05: 5% slower)")
    return ceiling


def _beside_cost(row: Row, floors: dict[str, float]) -> tuple[bool, str | None]:
    """Whether `row` is judged against the slowdown ceiling (it ran beside a load), and why it fails: the
    posting path and its setting first (a link's rows differ by them; the GPUs are not at fault)."""
    ceiling = floors.get(SLOWDOWN)
    if ceiling is None or row.beside is None:
        return False, None
    slowdown, interval = row.beside[1], row.slowdown_interval
    within = f" [95%: {interval[0]:.3f}-{interval[1]:.3f}]" if interval else ""
    model = row.compute.model if row.compute is not None else row.load
    return True, (f"{path_words(row)} slowed {model} x{slowdown:.3f}{within}, above the "
                  f"ceiling of x{ceiling:g}" if slowdown > ceiling else None)  # fmt: skip


def path_words(row: Row) -> str:
    """Who posted a row's block list and how: the path, its SMs (the whole GPU for a kernel that takes
    SMs and was given no budget or carve-out), the model's carve-out, and the list; a row of plain
    messages, its settings."""
    if row.posting is None:
        return dict(row.settings).get("blocks") or row.differs or "its messages"
    held = f" on {row.posting_sms} SMs{' (green context)' if row.posting_green else ''}" if row.posting_sms else ""
    record = posting(row.posting)
    if record is not None and record.takes_sms and not held and not row.carveout:
        held = " on the whole GPU"
    carved = f", the model carved {row.carveout} SMs" if row.carveout else ""
    return f"posted by {row.posting}{held}{carved} ({row.block_list or 'one message'})"


class JudgementRecord(TypedDict):
    """A judged link as the verdict's JSON writes it."""

    link: str
    link_class: str
    test: str
    modes: str
    size_bytes: int
    load: str
    median: float
    unit: str
    share_of_limit: float | None
    passed: bool
    remeasure: bool
    reason: str


class _VerdictCounts(TypedDict):
    passed: bool
    judged: int
    failed: list[JudgementRecord]
    remeasure: list[JudgementRecord]


class VerdictRecord(_VerdictCounts, total=False):
    """The verdict as its JSON writes it: `passed_links` left out where written a line each
    (outcome.Checked.json_chunks), then the skipped links and the failing links' culprits."""

    passed_links: list[JudgementRecord]
    skipped: list[str]
    gpus: dict[str, int]
    nodes: dict[str, int]
    nics: dict[str, int]


@dataclass
class Judgement:
    row: Row
    passed: bool
    reason: str
    # Not passed, not failed: below its class on one figure never measured again (attribution.py),
    # by no floor of its own: measure it again.
    remeasure: bool = False
    by_cost: bool = False  # failed only by the model's slowdown beside it: the posting path's, no part's fault

    def to_dict(self) -> JudgementRecord:
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
            "remeasure": self.remeasure,
            "reason": self.reason,
        }


EXIT_PASS, EXIT_FAIL = 0, 1  # and InconclusiveError.exit_code (2): nothing could be judged
EXIT_REMEASURE = 3  # no failure, but single slow figures to measure again before a verdict


@dataclass
class Verdict:
    judged: list[Judgement] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # links that could not be judged, and why
    # Why there is no verdict: a criterion given (floors, a baseline) judged no link. None: one did.
    inconclusive: str | None = None

    @property
    def failed(self) -> list[Judgement]:
        return [j for j in self.judged if not j.passed and not j.remeasure]

    @property
    def remeasure(self) -> list[Judgement]:
        return [j for j in self.judged if j.remeasure]

    @property
    def passed(self) -> bool:
        """Every judged link passed, and something was judged: nothing judged is no pass."""
        return self.inconclusive is None and not self.failed and not self.remeasure

    @property
    def outcome(self) -> str:
        if self.inconclusive is not None:
            return "INCONCLUSIVE"
        return "FAIL" if self.failed else "REMEASURE" if self.remeasure else "PASS"

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]

    def culprits(self) -> dict[str, dict[str, int]]:
        """How many failing links touch each GPU, node and NIC: the slow part shows up most. A link failing only
        by the model's slowdown beside it is its posting path's (format_verdict names it), no part's."""
        return culprits([judgement.row for judgement in self.failed if not judgement.by_cost])

    def to_dict(self, passed_links: bool = True) -> VerdictRecord:
        """The verdict; without `passed_links`, all but the list of passed links (a million of
        them are written a line each: outcome.Checked.json_chunks)."""
        found: VerdictRecord = {
            "passed": self.passed,
            "judged": len(self.judged),
            "failed": [j.to_dict() for j in self.failed],
            "remeasure": [j.to_dict() for j in self.remeasure],
        }
        if passed_links:
            found["passed_links"] = [j.to_dict() for j in self.judged if j.passed]
        counts = self.culprits()
        found |= {"skipped": self.skipped, "gpus": counts["gpus"], "nodes": counts["nodes"], "nics": counts["nics"]}
        return found


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


class _FleetMark(NamedTuple):
    """Where a row stands in its class (fleet.py), and the suspect that explains it, if one does."""

    ratio: float  # figure / class median (a time too: above 1 is slower)
    klass: ClassFloor
    slow: bool
    suspect: Suspect | None
    remeasure: bool  # slow on one figure alone, never measured again


class _FleetMarks:
    """Where each row fleet.py places in a class stands, and what explains it, made per row as the
    verdict asks (a million rows, no million records kept); a screen's re-measures are joined to
    their screen row there and get none."""

    def __init__(self, rows: list[Row], found: Attribution | None):
        if found is None or found.links is None:
            from .attribution import attribute  # numpy: loaded only for a `default` verdict

            found = attribute(rows)
        links = found.links
        assert links is not None
        self.links = links
        self.position = {id(row): n for n, row in enumerate(links.rows)}
        self.blamed = {id(row): suspect for suspect in reversed(found.suspects) for row in suspect.rows}  # first wins
        self.again = {id(row) for row in found.remeasure}  # one slow figure: to measure again
        self.sign = [1.0 if one.higher_is_better else -1.0 for one in links.classes]

    def get(self, row: Row) -> _FleetMark | None:
        n = self.position.get(id(row))
        if n is None:
            return None
        klass = int(self.links.klass[n])
        ratio = math.exp(self.sign[klass] * float(self.links.x[n]))
        return _FleetMark(
            ratio, self.links.classes[klass], bool(self.links.slow[n]), self.blamed.get(id(row)), id(row) in self.again
        )


def _against_class(mark: _FleetMark) -> str | None:
    """Why a row fails against its class, in one phrase: below the class floor, or one of the slow
    links of a suspect part (fleet.py, attribution.py); None where it does not."""
    klass, reasons = mark.klass, []
    if mark.slow and klass.higher_is_better:
        reasons.append(f"{mark.ratio:.0%} of its class median, floor {klass.floor / klass.median:.0%}")
    elif mark.slow:
        reasons.append(f"{mark.ratio:.0%} of its class median (a time), ceiling {klass.floor / klass.median:.0%}")
    if mark.suspect is not None:
        reasons.append(f"explained by suspect {mark.suspect.name}")
    return "; ".join(reasons) or None


def _what(row: Row) -> str:
    """A link as the verdict names it: made only for the few it says something of, not a million."""
    return f"{row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load})"


def _no_share(row: Row) -> str:
    """Why a link has no share of a limit for a floor to judge."""
    return f"its figure is above its {row.limit}, a measurement error" if row.limit else "no physical limit known"


def judge(
    rows: list[Row],
    floors: dict[str, float],
    baseline: list[Row] | None = None,
    tolerance: float = 0.1,
    found: Attribution | None = None,
) -> Verdict:
    """Every link at its largest size: against its floor (share of the limit); with FLEET (what
    `default` sets) against its class in the run, a link below its class floor or explained by a
    suspect part failing (`found`: the attribution of `rows`, made here where not given); and against
    the same link in `baseline` (no worse than `tolerance`). A link that fails a floor only on one
    slow figure in its class, never measured again (`found.remeasure`), is to re-measure, not failed.
    A criterion given that judged no link makes the verdict inconclusive (see outcome.conclude)."""
    verdict = Verdict()
    base = {row.key: row for row in baseline or []}
    largest = _largest(rows)
    marks = _FleetMarks(rows, found) if FLEET in floors else None
    again = {id(row) for row in found.remeasure} if found is not None else set()
    by_floor = by_baseline = too_few = 0
    for row in largest:
        reasons: list[str] = []
        checked = False
        mark = marks.get(row) if marks is not None else None
        if mark is not None and mark.klass.judged:
            checked = True
            by_floor += 1
            against = _against_class(mark)
            if against is not None:
                reasons.append(against)
        costed, cost = _beside_cost(row, floors)
        if costed:
            checked, by_floor, reasons = True, by_floor + 1, [*reasons, *([cost] if cost else [])]
        floor = _floor(row, floors)
        if floor is not None and row.higher_is_better:
            if row.share is None:
                if not checked:  # judged against its class already: no limit is no gap
                    verdict.skipped.append(f"{_what(row)}: {_no_share(row)}; its {floor[0]} floor cannot apply")
            else:
                checked = True
                by_floor += 1
                if row.share < floor[1]:
                    reasons.append(f"{row.share:.0%} of its {row.limit}, below the {floor[0]} floor of {floor[1]:.0%}")
        judged, worse = _against_baseline(row, base, baseline, tolerance, verdict)
        if judged:
            checked = True
            by_baseline += 1
        if mark is not None and not mark.klass.judged and not checked:
            too_few += 1  # said once, below: a small run has a class per link
        if checked and reasons and worse is None and id(row) in again:  # one slow figure alone
            reason = "; ".join(reasons) + "; one slow figure in its class, never measured again: measure it again"
            verdict.judged.append(Judgement(row, False, reason, True))
        elif checked:
            reasons += [worse] if worse is not None else []
            verdict.judged.append(Judgement(row, not reasons, "; ".join(reasons) or "ok", by_cost=reasons == [cost]))
    if too_few and marks is not None:
        least = marks.links.params.min_class_links
        verdict.skipped.append(f"{too_few} link(s) in classes too small to judge a link against (fewer than {least})")
    verdict.inconclusive = _inconclusive(largest, floors, baseline, by_floor, by_baseline)
    return verdict


def _against_baseline(
    row: Row, base: dict[Any, Row], baseline: list[Row] | None, tolerance: float, verdict: Verdict
) -> tuple[bool, str | None]:
    """Whether `row` was judged against the baseline, and why it is worse than there (None: it is not)."""
    if baseline is None:
        return False, None
    old = base.get(row.key)
    if old is None:
        verdict.skipped.append(f"{_what(row)}: not in the baseline")
        return False, None
    change = row.median / old.median - 1 if old.median else 0.0
    if not row.worse(change, tolerance):
        return True, None
    return (
        True,
        f"{row.median:.3f} {row.unit} against {old.median:.3f} in the baseline ({change:+.0%}, tolerance {tolerance:.0%})",
    )


def _inconclusive(
    largest: list[Row], floors: dict[str, float], baseline: list[Row] | None, by_floor: int, by_baseline: int
) -> str | None:
    """Why the verdict on `largest` (each link at its largest size) is none: no link at all, or a
    criterion given that judged none of them. None when every criterion judged a link."""
    if not largest:
        return "no results to judge"
    if not floors and baseline is None:
        return "no criterion: give a floor (--expect) or a baseline"
    reasons = []
    if floors and not by_floor:
        reasons.append(_no_floor_applies(largest, floors))
    if baseline is not None and not by_baseline:
        held = f"it holds {len(baseline)} row(s), none of the same link, test, modes, load and settings"
        reasons.append(
            f"none of the {len(largest)} link(s) is in the baseline ({held if baseline else 'it holds no results'})"
        )
    return "; ".join(reasons) or None


def _no_floor_applies(largest: list[Row], floors: dict[str, float]) -> str:
    """Why no floor judged any link: the limits no floor names, links without a known limit, latencies,
    classes too small to judge a link against."""
    fleet = FLEET in floors
    floors = {key: share for key, share in floors.items() if key not in (FLEET, SLOWDOWN)}
    bandwidths = [row for row in largest if row.higher_is_better]
    unnamed = Counter(row.limit_kind or "no known limit" for row in bandwidths if _floor(row, floors) is None)
    limitless = sum(1 for row in bandwidths if _floor(row, floors) is not None and row.share is None)
    latencies = len(largest) - len(bandwidths)
    parts = []
    if unnamed:
        parts.append("no floor for their limit (" + ", ".join(f"{kind}: {n}" for kind, n in unnamed.items()) + ")")
    if limitless:
        parts.append(f"{limitless} with no known physical limit to take a share of")
    if latencies:
        parts.append(f"{latencies} lower-is-better figure(s) (latencies: floors judge bandwidth)")
    if fleet:
        from .fleet import FloorParams

        least = FloorParams().min_class_links
        parts.append(f"and no class of links holds the {least} it takes to judge a link against its class")
    return (
        f"no --expect floor ({', '.join(floors)}) applies to any of the {len(largest)} link(s) at their largest "
        f"size: {'; '.join(parts)}"
    )


def format_verdict(verdict: Verdict) -> str:
    """The verdict as terminal text: every name from a file shows its control characters as escapes."""
    shown = escape.visible
    lines = [
        f"check: {len(verdict.judged)} link(s) judged at their largest size, {len(verdict.failed)} failed"
        + (f", {len(verdict.remeasure)} to measure again" if verdict.remeasure else "")
        + (f", {len(verdict.skipped)} not judged" if verdict.skipped else "")
    ]
    for judgement in verdict.failed:
        row = judgement.row
        what = f"{row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load})"
        lines.append(f"FAIL {shown(what)}: {shown(judgement.reason)}")
    culprits = verdict.culprits()
    for name in ("gpus", "nodes", "nics"):
        if culprits[name]:
            lines.append(
                f"failing {name}: " + ", ".join(f"{shown(k)} ({v} link(s))" for k, v in culprits[name].items())
            )
    for judgement in verdict.remeasure:
        row = judgement.row
        what = f"{row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load})"
        lines.append(f"REMEASURE {shown(what)}: {shown(judgement.reason)}")
    lines += [f"not judged: {shown(line)}" for line in verdict.skipped]
    lines.append(f"verdict: {verdict.outcome}")
    return "\n".join(lines)


OUTCOME_EXIT = {
    "PASS": EXIT_PASS,
    "FAIL": EXIT_FAIL,
    "REMEASURE": EXIT_REMEASURE,
    "INCONCLUSIVE": InconclusiveError.exit_code,
}


def junit_xml(verdict: Verdict) -> str:
    """One JUnit test case per judged link, a failure for each that failed; names and reasons as
    XML 1.0 allows them (control characters shown as escapes, markup escaped)."""
    cases = []
    for judgement in verdict.judged:
        row = judgement.row
        name = escape.xml_attribute(f"{row.link} {format_size(row.size_bytes)} ({row.load})")
        classname = escape.xml_attribute(f"rdmabench.{row.test}.{row.modes}")
        failure = "" if judgement.passed else f"<failure message={escape.xml_attribute(judgement.reason)}/>"
        if judgement.remeasure:
            failure = f"<skipped message={escape.xml_attribute('re-measure: ' + judgement.reason)}/>"
        cases.append(f"  <testcase classname={classname} name={name}>{failure}</testcase>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="rdmabench check" tests="{len(verdict.judged)}" failures="{len(verdict.failed)}" '
        f'skipped="{len(verdict.skipped) + len(verdict.remeasure)}">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )
