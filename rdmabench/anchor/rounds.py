"""What both anchors (ucx_perftest's, anchor.py; NIXL's, nixl.py) share: one `rdmabench run` as a
subprocess, the repeated rounds of a comparison (a failed round keeps the ones before it), the
rounds' medians with the steady rounds (the anchor's runs before and after rdmabench's within
DRIFT_LIMIT) beside them, and the lines under a --repeat table."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast

from .. import stats
from ..errors import LaunchError, RdmabenchError
from ..pystart import python_module

if TYPE_CHECKING:
    from ..results.files.docrecord import ResultsDocument

# A row of an anchor's table: each anchor's own TypedDict (anchor.AnchorRow, nixl.NixlRow). What is
# said here of every anchor's rows reads them by name, as the Mapping every TypedDict is.
Row = TypeVar("Row", bound=Mapping[str, object])


class AnchorName(TypedDict):
    """The schema of an anchor's JSON document (`anchor -o`): its name and version."""

    name: str
    version: int


# Beyond this difference between the anchor's run before rdmabench's and its run after (relative to
# their mean), the machine did not hold still while the two programs ran and their ratio is not
# trusted: the VMs here flip between states 2-3x apart within a minute.
DRIFT_LIMIT = 0.10


def run_entries(
    options: list[str], ranks: int = 2, samples: int = 5, sample_time: float = 0.2
) -> list[Mapping[str, object]]:
    """The entries of one `rdmabench run --np ranks OPTIONS` (samples of about `sample_time` seconds),
    as read back from its results file: open JSON, each figure narrowed where it is read (figure)."""
    found = run_document(options, ranks, samples, sample_time).get("results")
    if not isinstance(found, list):
        raise LaunchError("rdmabench run wrote no list of results")
    return [entry for entry in found if isinstance(entry, Mapping)]


def run_document(options: list[str], ranks: int = 2, samples: int = 5, sample_time: float = 0.2) -> ResultsDocument:
    """The results document of one `rdmabench run --np ranks OPTIONS` (its metadata, its entries)."""
    from ..results.files import document

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        command = python_module("rdmabench", "run", "--np", str(ranks), *options)
        command += ["--samples", str(samples), "--sample-time", str(sample_time), "-o", out]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise LaunchError(f"rdmabench run failed: {proc.stderr.strip()[-500:]}")
        return document.load(out)


def figure(entry: Mapping[str, object], name: str) -> float:
    """A number of an rdmabench entry read back (as written: an int stays one), or LaunchError."""
    value = entry.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LaunchError(f"rdmabench run's entry has no figure {name!r} (found {value!r})")
    return value


def text(entry: Mapping[str, object], name: str) -> str | None:
    """A word of an rdmabench entry read back (its engine, its transport), or None where it has none."""
    value = entry.get(name)
    return value if isinstance(value, str) else None


def repeated(
    one_round: Callable[[], list[Row]],
    repeat: int,
    merge: Callable[[list[list[Row]], str | None], list[Row]],
    progress: Callable[[str], None] | None,
    name: str,
    announce_one: bool = False,
) -> list[Row]:
    """`repeat` rounds of a comparison, merged (`merge`: the rounds' medians) where there are several.
    A round that fails after others finished keeps theirs (minutes of measurements), merged with why
    the rest is missing (each row's `incomplete`); a first round that fails raises. Each round is
    announced as `name round i of n` (a single one too with `announce_one`)."""
    rounds: list[list[Row]] = []
    for index in range(repeat):
        if progress is not None and (repeat > 1 or announce_one):
            progress(f"{name} round {index + 1} of {repeat}")
        try:
            rounds.append(one_round())
        except RdmabenchError as exc:
            if not rounds:
                raise
            why = f"round {index + 1} of {repeat} failed ({exc}); medians of the {len(rounds)} before it"
            return merge(rounds, why)
    return rounds[0] if repeat == 1 else merge(rounds, None)


def rounds_median(
    rounds: list[list[Row]],
    key: tuple[str, ...],
    figures: tuple[str, ...],
    labels: tuple[str, ...],
    drift: str,
    steady: tuple[tuple[str, str], ...],
    incomplete: str | None = None,
) -> list[Row]:
    """One row per `key` of several rounds of the same comparison: each of `figures`' median over the
    rounds, `rounds` their count and `runs` each figure's values, round by round; each of `labels`
    joins the rounds' distinct values; `incomplete`, where given, says why rounds are missing.
    The steady rounds are those whose `drift` stayed within DRIFT_LIMIT (see _steady).
    Each merged row has its first round's keys, figures and labels of their own types (a figure some
    rounds lack: None), and the merge's own (`rounds`, `runs`, `steady_*`, `incomplete`), which each
    anchor's row type declares: the one place a row is rebuilt by name."""
    first = rounds[0]
    keys = [tuple(r.get(name) for name in key) for r in first]
    for other in rounds[1:]:
        if [tuple(r.get(name) for name in key) for r in other] != keys:
            raise LaunchError("the anchor's rounds measured different rows: cannot take their medians")
    merged = []
    for position, row in enumerate(first):
        out: dict[str, object] = dict(row)
        runs: dict[str, list[float]] = {}
        for name in figures:
            values = [r[position].get(name) for r in rounds]
            numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(numbers) == len(values):
                runs[name] = numbers
                out[name] = stats.median(numbers)
            elif numbers:  # a column some rounds lack has no median of all: not shown (one a test lacks stays)
                out[name] = None
        for label in labels:  # a round that ran otherwise must not hide behind the first
            out[label] = " | ".join(dict.fromkeys(str(r[position].get(label)) for r in rounds))
        out["rounds"], out["runs"] = len(rounds), runs
        out |= _steady(runs, drift, steady)
        if incomplete is not None:
            out["incomplete"] = incomplete
        merged.append(cast(Row, out))
    return merged


def _steady(runs: dict[str, list[float]], drift: str, ratios: tuple[tuple[str, str], ...]) -> dict[str, float]:
    """How many rounds were steady (the anchor's two runs around rdmabench's within DRIFT_LIMIT)
    and, where any was, the median of each ratio over those rounds alone; nothing for rows without a
    bracket (a copy-engine ceiling)."""
    drifts = runs.get(drift)
    if drifts is None:
        return {}
    steady = [index for index, value in enumerate(drifts) if value <= DRIFT_LIMIT]
    out: dict[str, float] = {"steady_rounds": len(steady)}
    for _name, ratio in ratios:
        if steady and ratio in runs:
            out[f"steady_{ratio}"] = stats.median(runs[ratio][index] for index in steady)
    return out


def spread(row: Mapping[str, object], name: str, digits: int = 2) -> str:
    """A figure's min-max over the rounds (`runs`), or '-'."""
    runs = row.get("runs")
    values = runs.get(name) if isinstance(runs, Mapping) else None
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}" if isinstance(values, list) and values else "-"


def round_lines(rows: Sequence[Row], heading: Callable[[list[Row]], str], line: Callable[[Row], str]) -> list[str]:
    """Under a --repeat table: whether every round finished, then `heading` of the repeated rows and a
    `line` each (each ratio's spread over the rounds)."""
    lines = []
    if rows and rows[0].get("incomplete"):
        lines.append(f"# INCOMPLETE: {rows[0]['incomplete']}")
    repeated = [r for r in rows if r.get("rounds")]
    if repeated:
        lines.append(heading(repeated))
        lines += [line(r) for r in repeated]
    return lines
