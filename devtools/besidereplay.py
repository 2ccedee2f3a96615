"""Replay the committed beside runs through the row estimate (measure/slowdown.py): no GPU needed.

    python -m devtools.besidereplay measurements/*/besidebench*.links.jsonl

Each results file's links (`.links.jsonl`: one link measurement a line, every pair's figures in its
`beside.gpus`) is read as recorded; each block-list row beside compute is judged twice: as it was written
(the median over the pairs within the 3% drift test, `slowdown` and `pairs` of the record) and from every
pair whose duty is at least the floor (slowdown.row_estimate: the worse GPU's mean with its 95% interval
and noise floor). For each row it prints both, and how many pairs its own spread says it would need for
an interval within +-2 points (a projection from this row's pairs, marked as one); then how many rows meet
+-2 points. Files written before 2026-11-27 have no `alone_s_pairs`: their rows have no noise floor, and
their interval is the pairs' spread alone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from rdmabench.measure.besiderecord import GpuFigure
from rdmabench.measure.judging import judge_pairs, pairs_of
from rdmabench.measure.pairs import MAX_PAIRS
from rdmabench.measure.slowdown import TARGET, Estimate, gpu_estimate, row_estimate, t975
from rdmabench.units import format_size

MOST_PAIRS = 40  # a projection past this many pairs is said as more


def rows_of(path: Path) -> list[dict[str, Any]]:
    """The block-list entries beside compute of one links file, in its order."""
    found = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("beside"), dict)
                and isinstance(entry.get("blocks"), dict)
            ):
                found.append(entry)
    return found


def pairs_needed(estimates: list[Estimate], target: float = TARGET) -> int | None:
    """The pairs each GPU's own variance a pair (read back from its interval) would need for an interval
    within +-`target`, the most of the GPUs'; None where a GPU has no interval."""
    needed = 0
    for found in estimates:
        if not found.pairs_used:
            continue
        if found.half_width is None:
            return None
        per_pair = (found.half_width / t975(found.pairs_used - 1)) ** 2 * found.pairs_used
        n = 2
        while n <= MOST_PAIRS and t975(n - 1) * math.sqrt(per_pair / n) > target:
            n += 1
        needed = max(needed, n)
    return needed


def replay(entry: dict[str, Any]) -> dict[str, Any]:
    """One row: its words, the record's own judgement and the estimate from every pair."""
    beside, blocks = entry["beside"], entry["blocks"]
    gpus = [gpu for record in (beside.get("gpus") or {}).values() if (gpu := GpuFigure.from_json(record)) is not None]
    judged = judge_pairs(gpus, [0] * pairs_of(gpus)).judged
    per_gpu = [gpu_estimate(gpu, judged) for gpu in gpus]
    return {
        "row": f"{format_size(blocks.get('block_bytes') or 0):>6} {blocks.get('posted_by', '?'):<8} "
        f"{beside.get('carveout') or 0:>2}",
        "was": (beside.get("slowdown"), beside.get("pairs") or 0, len(beside.get("slowdown_pairs") or [])),
        "now": row_estimate(gpus, judged),
        "needed": pairs_needed(per_gpu),
    }


def _f(value: float | None, form: str = ".3f") -> str:
    return "-" if value is None else format(value, form)


def show(path: Path) -> tuple[int, int, int]:
    """Print one file's rows; (rows, rows with an interval, rows within +-TARGET)."""
    found = [replay(entry) for entry in rows_of(path)]
    print(f"# {path}: {len(found)} rows beside compute")
    print("block    path   carve | was: slowdown judged | now: slowdown [95% interval]   +-pts  floor  pairs | for +-2")
    within = with_interval = 0
    for row in found:
        now: Estimate = row["now"]
        half = now.half_width
        with_interval += half is not None
        within += half is not None and half <= TARGET + 1e-12
        interval = f"[{now.interval[0]:.3f}-{now.interval[1]:.3f}]" if now.interval else "-"
        needed = row["needed"]
        said = "-" if needed is None else f"{needed}" if needed <= MOST_PAIRS else f">{MOST_PAIRS}"
        slowdown, judged, pairs = row["was"]
        print(
            f"{row['row']} | {_f(slowdown):>6}  {judged}/{pairs} | {_f(now.slowdown):>6} {interval:<15} "
            f"{_f(None if half is None else half * 100, '.1f'):>5}  {_f(None if now.noise_floor is None else now.noise_floor * 100, '.1f'):>5}"
            f"  {now.pairs_used}/{pairs} | {said}"
        )
    print(
        f"# {path.name}: {with_interval} of {len(found)} rows with an interval; {within} within +-{TARGET * 100:g} points "
        f"({within / len(found):.0%})"
        if found
        else "# no rows"
    )
    for cap in sorted({MAX_PAIRS, MAX_PAIRS + 2}):
        print(f"# projected (not measured), at most {cap} pairs a row: {projection(found, cap)}")
    return len(found), with_interval, within


def projection(found: list[dict[str, Any]], cap: int) -> str:
    """What each row's own spread says `cap` pairs a row would give: the rows within +-TARGET and the pairs
    taken past the record's (a row is taken to need at least the pairs it had)."""
    usable = [row for row in found if row["now"].pairs_used]
    within = sum(1 for row in usable if row["needed"] is not None and row["needed"] <= cap)
    taken = [row["was"][2] for row in usable]
    more = sum(max(min(row["needed"] or pairs, cap) - pairs, 0) for row, pairs in zip(usable, taken, strict=True))
    return f"{within} of {len(found)} rows within +-{TARGET * 100:g} points, {more} pairs more"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="results files' links (.links.jsonl)")
    args = parser.parse_args()
    totals = [0, 0, 0]
    for path in args.files:
        try:
            counts = show(path)
        except (OSError, ValueError) as exc:
            sys.exit(f"besidereplay: {path}: {exc}")
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        print()
    rows, with_interval, within = totals
    print(f"# all: {rows} rows, {with_interval} with an interval, {within} within +-{TARGET * 100:g} points")
    print("# (`for +-2`: pairs a row's own variance a pair would need, projected from its pairs: not measured)")


if __name__ == "__main__":
    main()
