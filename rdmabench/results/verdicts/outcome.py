"""What `rdmabench check`, `report --expect` and `run --expect` conclude (one function, `conclude`,
for the three): the suspect parts (attribution.py) first, then the links (verdict.py), then one
outcome for both. A run fails (exit status 1) where a link failed its criterion, a part is suspect,
or re-measured links stayed below their class floor with no part to explain them; it is REMEASURE
(3) where the only slow links are single figures never measured again (measure them again: a
healthy fleet has a few transient ones); it has no verdict (2) where the criterion given judged no
link and nothing is suspect, slow or to re-measure; else it passes (0). The JSON carries the outcome, the failed links and the attribution first, then every
passed link, one line each (a million of them streamed, not built as one document); the JUnit XML
is the verdict's, with the outcome and the suspects as properties of the suite."""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ... import escape
from ...errors import InconclusiveError
from ..files import identity
from ..files.rows import Row
from .attribution import Attribution, attribute
from .suspects import AttributionRecord, remeasure_lines
from .verdict import OUTCOME_EXIT, Judgement, Verdict, VerdictRecord, format_verdict, judge, junit_xml

FAILING = ("SUSPECTS", "SLOW")  # the attribution's outcomes that fail a run


class OutcomeRecord(VerdictRecord, total=False):
    """The verdict's record with the one outcome (`passed`: the outcome is PASS), why the links gave
    no verdict where they did not, and the attribution."""

    outcome: str
    links_inconclusive: str
    attribution: AttributionRecord
    conflicts: list[str]


@dataclass
class Checked:
    verdict: Verdict
    found: Attribution
    conflicts: tuple[str, ...] = ()  # runs whose files disagree (identity.Conflict): left out, so no pass

    @property
    def outcome(self) -> str:
        """FAIL, REMEASURE, PASS or INCONCLUSIVE (see the module's text)."""
        if self.verdict.failed or self.found.outcome in FAILING:
            return "FAIL"
        if self.verdict.remeasure or self.found.outcome == "REMEASURE":
            return "REMEASURE"
        if self.conflicts and self.verdict.outcome == "PASS":  # what was left out may be what fails
            return "INCONCLUSIVE"
        return self.verdict.outcome

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]

    def suspect_lines(self) -> list[str]:
        """The attribution's lines, as terminal text (names from files shown safely)."""
        return [escape.visible(line) for line in self.found.lines()]

    def text(self) -> str:
        """Suspects, then the links, then the outcome: what `check` prints."""
        lines = self.suspect_lines()
        if self.verdict.inconclusive is not None:
            lines.append(f"no verdict on the links: {escape.visible(self.verdict.inconclusive)}")
        else:
            lines += format_verdict(self.verdict).split("\n")[:-1]  # its own last line: the verdict
        lines.append(self.last_line())
        return "\n".join(lines)

    def last_line(self) -> str:
        """`verdict: OUTCOME`, and why where the links' verdict alone would not say it."""
        why = ""
        if self.outcome == "FAIL" and not self.verdict.failed:
            why = " (the suspects above)" if self.found.suspects else " (the slow links above)"
        elif self.outcome == "REMEASURE":
            why = " (measure the links above again: one slow figure is no broken part)"
        return f"verdict: {self.outcome}{why}"

    def verdict_text(self) -> str:
        """The links' verdict and the outcome, without the suspects (a report shows them already)."""
        lines = format_verdict(self.verdict).split("\n")[:-1] if self.verdict.inconclusive is None else []
        if self.found.remeasure and not self.verdict.remeasure:  # floors of no class: the attribution says it
            found = self.found
            said = remeasure_lines(found.remeasure, found.remeasure_ratios, found.params.listed)
            lines += map(escape.visible, said)
        return "\n".join([*lines, self.last_line()])

    def to_dict(self, passed_links: bool = True) -> OutcomeRecord:
        found: OutcomeRecord = {**self.verdict.to_dict(passed_links)}
        found["passed"] = self.outcome == "PASS"
        found["outcome"] = self.outcome
        if self.verdict.inconclusive is not None:
            found["links_inconclusive"] = self.verdict.inconclusive
        found["attribution"] = self.found.to_dict()
        if self.conflicts:
            found["conflicts"] = list(self.conflicts)
        return found

    def json(self) -> str:
        return "".join(self.json_chunks())

    def json_chunks(self) -> Iterator[str]:
        """`to_dict` as JSON, in pieces to write as they come: the outcome, the failed links, the
        culprits and the attribution first (indented), then `passed_links`, the last key, one link
        a line (what `json.dumps(Judgement.to_dict())` writes, made without it: a million lines)."""
        head = self.to_dict(passed_links=False)
        text = json.dumps(head, indent=1)
        yield text[: -len("\n}")] + ',\n "passed_links": ['
        line, first = _JudgementLine(), True
        for judgement in self.verdict.judged:
            if judgement.passed:
                yield ("\n  " if first else ",\n  ") + line(judgement)
                first = False
        yield "\n ]\n}" if not first else "]\n}"

    def junit(self) -> str:
        """The verdict's JUnit XML, with the outcome and every suspect as properties of the suite."""
        text = junit_xml(self.verdict)
        named = [("rdmabench.outcome", self.outcome)]
        named += [(f"rdmabench.suspect.{n}", s.describe()) for n, s in enumerate(self.found.suspects, 1)]
        properties = "".join(
            f"    <property name={escape.xml_attribute(name)} value={escape.xml_attribute(value)}/>\n"
            for name, value in named
        )
        head, _, rest = text.partition(">\n<testsuite ")
        suite, _, cases = rest.partition(">\n")
        return f"{head}>\n<testsuite {suite}>\n  <properties>\n{properties}  </properties>\n{cases}"


def conclude(
    rows: list[Row],
    floors: dict[str, float],
    baseline: list[Row] | None = None,
    tolerance: float = 0.1,
    found: Attribution | None = None,
    conflicts: Iterable[object] = (),
) -> Checked:
    """The one verdict of `check`, `report --expect` and `run --expect`: the attribution of `rows`
    (made here where not given) and the links judged against `floors` and `baseline`, one outcome
    and one exit status for both (a suspect part fails under hand floors too). `conflicts` (runs
    whose files name one run id with other records, none of them counted) make a pass no verdict."""
    found = found if found is not None and found.links is not None else attribute(rows)
    return Checked(judge(rows, floors, baseline, tolerance, found), found, tuple(map(str, conflicts)))


def no_verdict(checked: Checked) -> InconclusiveError:
    """The error of an outcome that is no verdict (INCONCLUSIVE)."""
    if checked.verdict.inconclusive is None and checked.conflicts:
        return InconclusiveError(f"no verdict: {identity.conflict_line(len(checked.conflicts))}")
    return InconclusiveError(f"no verdict: {checked.verdict.inconclusive}")


_ENCODE_STR: Callable[[str], str] = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _number(value: Any) -> str:
    """A figure as json.dumps writes it (repr of a finite float; NaN and infinities as it spells them)."""
    return repr(value) if type(value) is int or (type(value) is float and math.isfinite(value)) else json.dumps(value)


class _JudgementLine:
    """json.dumps(judgement.to_dict()) for a million judgements: each label encoded once."""

    def __init__(self) -> None:
        self._labels: dict[Any, str] = {}

    def _label(self, value: Any) -> str:
        found = self._labels.get(value)
        if found is None:
            found = self._labels[value] = json.dumps(value)
        return found

    def __call__(self, judgement: Judgement) -> str:
        row, label = judgement.row, self._label
        share = row.share
        return (
            f'{{"link": {_ENCODE_STR(row.link)}, "link_class": {label(row.link_class)}, "test": {label(row.test)}, '
            f'"modes": {label(row.modes)}, "size_bytes": {_number(row.size_bytes)}, "load": {label(row.load)}, '
            f'"median": {_number(row.median)}, "unit": {label(row.unit)}, '
            f'"share_of_limit": {"null" if share is None else _number(share)}, '
            f'"passed": {"true" if judgement.passed else "false"}, '
            f'"remeasure": {"true" if judgement.remeasure else "false"}, "reason": {label(judgement.reason)}}}'
        )
