"""What rank 0 prints and decides when a run ends, from the run's own results file read back as
`report` reads it: the CSV, which posting path for each block size (the answer), and the verdict
`check` would give, with its exit status."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..errors import error_line
from ..results.files import document


def rows_of(path: str) -> list[Any]:
    """The run's report rows: one per link and size, as `report` makes them."""
    from ..results.files.rows import aggregate

    return aggregate([(path, document.load(path, lazy=True))])


def answer(rows: list[Any], out: TextIO, budget: float = 1.05) -> None:
    """Under the table: which posting path for each block size, idle and within `budget` beside the load,
    as `report` leads with it (a table and its notes; names escaped there)."""
    from ..results.reports.formats import answer_text

    for line in answer_text(rows, budget, wide=False, markdown=False):
        print(f"# {line}".rstrip(), file=out, flush=True)


def csv(rows: list[Any]) -> str:
    from ..results.reports.formats import render

    return render(rows, "csv")


def verdict(path: str, rows: list[Any], floors: dict[str, float], out: TextIO) -> int:
    """The verdict `check` would give on this run's file; its exit status (2: nothing was judged)."""
    from ..results.verdicts.outcome import conclude, no_verdict

    checked = conclude(rows, floors)  # `check`'s own: the same outcome and exit status
    if checked.outcome == "INCONCLUSIVE":
        print(error_line(f"{no_verdict(checked)} (results kept in {path})"), file=sys.stderr, flush=True)
        return checked.exit_code
    print(checked.verdict_text(), file=out, flush=True)
    if checked.outcome == "PASS":
        return checked.exit_code
    failed = len(checked.verdict.failed)
    why = {
        "FAIL": f"{failed} link(s) below their --expect floor" if failed else "a suspect part (see above)",
        "REMEASURE": "single slow figure(s) to measure again (see above)",
    }[checked.outcome]
    print(error_line(f"{why} (results kept in {path})"), file=sys.stderr, flush=True)
    return checked.exit_code
