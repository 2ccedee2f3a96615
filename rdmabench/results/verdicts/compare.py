"""Compare two sets of runs: per link and size, the change of the median and whether it is beyond run-to-run noise (a Mann-Whitney U test per pair, Benjamini-Hochberg across pairs; see stats.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from ... import escape
from ...errors import InconclusiveError
from ...stats import benjamini_hochberg, mann_whitney_many
from ...units import format_size
from ..files import identity
from ..files.rows import ROW_KEY, Row, bulk

# --- comparing two sets of runs ----------------------------------------------------------------


RUNS_NEEDED = 4  # runs a side before a change is tested: with 3 a side, the smallest two-sided p is 2/20 = 0.1


class ChangeRecord(TypedDict):
    """A Change as `compare --json` writes it: the row it is (test, modes, size, link, unit), each side's
    runs and median, the change, and how the test went."""

    test: str
    src_mode: str
    dst_mode: str
    size_bytes: int
    link: str
    unit: str
    base_runs: int
    new_runs: int
    base_median: float
    new_median: float
    change: float
    tested: bool
    p_value: float | None
    q_value: float | None
    significant: bool
    regression: bool


@dataclass(slots=True)
class Change:
    base: Row
    new: Row
    change: float  # new median / base median - 1
    p_value: float | None  # Mann-Whitney U over the per-run figures; None: fewer than RUNS_NEEDED runs a side
    q_value: float | None  # Benjamini-Hochberg over every tested pair
    significant: bool  # q below the level: a change no run-to-run noise explains
    regression: bool

    def to_dict(self) -> ChangeRecord:
        return {
            "test": self.base.test,
            "src_mode": self.base.src_mode,
            "dst_mode": self.base.dst_mode,
            "size_bytes": self.base.size_bytes,
            "link": self.base.link,
            "unit": self.base.unit,
            "base_runs": len(self.base.values),
            "new_runs": len(self.new.values),
            "base_median": self.base.median,
            "new_median": self.new.median,
            "change": self.change,
            "tested": self.p_value is not None,
            "p_value": self.p_value,
            "q_value": self.q_value,
            "significant": self.significant,
            "regression": self.regression,
        }


@bulk
def compare(base: list[Row], new: list[Row], threshold: float, alpha: float = 0.05) -> tuple[list[Change], list[str]]:
    """Changes per link and size present in both with the same settings, and the keys present in
    only one of them (or under other settings, which are named). A regression is a change for the
    worse beyond `threshold` that the runs say is no noise: the per-run figures of both sides
    (RUNS_NEEDED or more each; one run's samples are not independent of each other) differ by a
    Mann-Whitney U test, its q-value over all tested pairs below `alpha`."""
    by_key = dict(zip(map(ROW_KEY, base), base, strict=True))
    pairs, only_new, seen = [], [], set()
    for row, key in zip(new, map(ROW_KEY, new), strict=True):
        old = by_key.get(key)
        if old is None:
            only_new.append(row)
        else:
            pairs.append((old, row))
            seen.add(key)
    tested = [i for i, (old, row) in enumerate(pairs) if min(len(old.values), len(row.values)) >= RUNS_NEEDED]
    p_values = mann_whitney_many([(pairs[i][0].values, pairs[i][1].values) for i in tested])
    found: list[tuple[float | None, float | None]] = [(None, None)] * len(pairs)
    for index, p, q in zip(tested, p_values, benjamini_hochberg(p_values), strict=True):
        found[index] = (p, q)
    changes = []
    for (old, row), (p_value, q_value) in zip(pairs, found, strict=True):
        before = old.median
        change = row.median / before - 1 if before else 0.0
        significant = q_value is not None and q_value < alpha
        changes.append(
            Change(old, row, change, p_value, q_value, significant, significant and row.worse(change, threshold))
        )
    # Every key of BASE seen (as many as its rows): none left, and no million keys to make again.
    only_base = [] if len(seen) == len(base) else [row for row in base if row.key not in seen]
    return changes, _unmatched(base, new, only_base, only_new)


def comparison_exit(changes: list[Change], conflicts: int = 0) -> int:
    """`compare`'s exit status: 1 a significant regression, 0 none among the tested pairs. No pair
    tested (fewer than RUNS_NEEDED distinct runs a side) is no verdict: an InconclusiveError (2); so
    is no regression where `conflicts` runs were left out (files of one run id that disagree)."""
    if any(change.regression for change in changes):
        return 1
    if conflicts:
        raise InconclusiveError(f"no verdict: {identity.conflict_line(conflicts)}")
    if changes and all(change.p_value is None for change in changes):
        runs = f"{max(len(c.base.values) for c in changes)}/{max(len(c.new.values) for c in changes)}"
        raise InconclusiveError(
            f"no verdict: none of the {len(changes)} link/size pair(s) has {RUNS_NEEDED} distinct runs a side "
            f"(at most {runs}, BASE/NEW), too few to tell a change from run-to-run noise; give BASE and NEW "
            f"as directories of {RUNS_NEEDED} or more runs each"
        )
    return 0


def _unmatched(base: list[Row], new: list[Row], only_base: list[Row], only_new: list[Row]) -> list[str]:
    """A line per row on one side only, naming the settings the other side measured it with."""
    lines = []
    for what, rows, others in (("NEW", only_new, base), ("BASE", only_base, new)):
        if not rows:
            continue
        by_link: dict[tuple[Any, ...], list[Row]] = {}
        for row in others:
            by_link.setdefault(row.link_key, []).append(row)
        lines += [f"only in {what}: {_describe(r)}{_other_settings(r, by_link.get(r.link_key, []))}" for r in rows]
    return lines


def _describe(row: Row) -> str:
    return f"{row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load})"


def _other_settings(row: Row, others: list[Row]) -> str:
    """Where the other side has this link under other settings: which ones differ (not compared)."""
    if not others:
        return ""
    mine = dict(row.settings)
    theirs = dict(others[0].settings)
    differing = [f"{name} {mine[name]} vs {theirs.get(name)}" for name in mine if mine[name] != theirs.get(name)]
    return f"; the other side measured it with other settings ({', '.join(differing)}): not compared"


@bulk
def format_changes(
    changes: list[Change], unmatched: list[str], threshold: float, duplicates: list[str] | None = None
) -> str:
    header = ("test", "modes", "size", "link", "runs", "base", "new", "change", "p", "q", "verdict")
    sizes: dict[int, str] = {}
    olds = [c.base for c in changes]
    columns = [
        [row.test for row in olds],
        [f"{row.src_mode}->{row.dst_mode}" for row in olds],
        [sizes.get(row.size_bytes) or sizes.setdefault(row.size_bytes, format_size(row.size_bytes)) for row in olds],
        [row.link for row in olds],
        [f"{len(c.base.values)}/{len(c.new.values)}" for c in changes],
        [f"{row.median:.3f}" for row in olds],
        [f"{c.new.median:.3f} {c.base.unit}" for c in changes],
        [f"{c.change:+.1%}" for c in changes],
        [f"{c.p_value:.3f}" if c.p_value is not None else "-" for c in changes],
        [f"{c.q_value:.3f}" if c.q_value is not None else "-" for c in changes],
        [_verdict(c, threshold) for c in changes],
    ]
    lines = escape.aligned(header, [escape.column(column, escape.visible) for column in columns])
    regressions = sum(c.regression for c in changes)
    untested = sum(c.p_value is None for c in changes)
    lines.append("")
    lines.append(
        f"{regressions} regression(s) beyond {threshold:.0%}; {len(changes) - untested} of {len(changes)} "
        "link/size pair(s) tested (Mann-Whitney U over the per-run figures, exact without ties; "
        "significant: Benjamini-Hochberg q < 0.05 over the tested pairs)"
    )
    if untested:
        lines.append(
            f"{untested} pair(s) with fewer than {RUNS_NEEDED} runs a side (runs: BASE/NEW): the change is shown, "
            "never called significant (one run's samples are not independent); "
            f"give BASE and NEW as directories of {RUNS_NEEDED} or more runs each"
        )
    if duplicates:
        lines.append(f"{len(duplicates)} duplicate run(s) ignored (a run counts once):")
        lines += [f"  {escape.visible(line)}" for line in duplicates]
    lines += map(escape.visible, unmatched)
    return "\n".join(lines)


def _verdict(change: Change, threshold: float) -> str:
    if change.regression:
        return "REGRESSION"
    if change.p_value is None:
        return "untested"
    return "changed" if change.significant and abs(change.change) > threshold else "same"
