"""Benchmark: what does a round of a concurrent all-pairs sweep cost beyond its transfers? Runs the
sweep several times and prints, per run, the job's wall time, rounds per second, the median round's
wall time and the share of it that the transfers themselves took (the anchor, measured in the same
run: the slowest link's timed seconds in that round). A share near 1 says rounds cost what their
transfers cost.

    python -m devtools.sweep --np 8 --sizes 64KiB                           # CPU machine
    python -m devtools.sweep --np 64 --mode device --sizes 1MiB --runs 3     # 4-GPU node

Each run is `rdmabench run --pattern all-pairs --concurrent --samples 1 --sample-time 0.01` (the
issue's sweep) with --np; the last line gives the medians over runs and their spread.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Any

from rdmabench import stats

from .runs import run_entries


def transfer_seconds(entry: dict[str, Any]) -> float:
    """Seconds a bandwidth entry's link spent in timed transfers: its bytes over each sample's figure."""
    moved = entry["size_bytes"] * entry["messages_per_sample"]
    return sum(moved / (gbps * 1e9) for gbps in entry["samples"] if gbps > 0)


def round_shares(entries: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Per round (entries sharing size and round wall time): its wall seconds, and the share of them
    its slowest link spent in transfers."""
    rounds: dict[tuple[int, float], list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        rounds[(entry["size_bytes"], entry["round_seconds"])].append(entry)
    walls = [wall for _size, wall in rounds]
    shares = [max(transfer_seconds(e) for e in group) / wall for (_s, wall), group in rounds.items() if wall > 0]
    return walls, shares


def _one(args: list[str]) -> tuple[float, int, list[float], list[float]]:
    entries, wall = run_entries([*args, "--progress", "rounds"], timeout=3600)
    walls, shares = round_shares(entries)
    return wall, len(walls), walls, shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--np", type=int, default=4, help="ranks")
    parser.add_argument("--sizes", default="1MiB")
    parser.add_argument("--mode", default="pageable", help="memory mode of every end")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sample-time", type=float, default=0.01)
    options, extra = parser.parse_known_args(argv)  # anything else goes to `rdmabench run` as it is
    args = ["--np", str(options.np), "--pattern", "all-pairs", "--concurrent", "--mode", options.mode]
    args += ["--sizes", options.sizes, "--samples", "1", "--sample-time", str(options.sample_time), *extra]
    print(f"# concurrent all-pairs sweep: {' '.join(args)}", flush=True)
    summary: dict[str, list[float]] = defaultdict(list)
    for run in range(options.runs):
        wall, rounds, walls, shares = _one(args)
        median_round, share = stats.median(walls), stats.median(shares)
        summary["wall"].append(wall)
        summary["rate"].append(rounds / sum(walls))
        summary["round"].append(median_round)
        summary["share"].append(share)
        print(
            f"run {run + 1}: {wall:.1f} s for {rounds} rounds ({rounds / sum(walls):.1f} rounds/s in rounds), "
            f"median round {median_round * 1e3:.1f} ms, of which transfers {share:.2f}",
            flush=True,
        )

    def spread(name: str, fmt: str) -> str:
        values = summary[name]
        return f"{stats.median(values):{fmt}} (min {min(values):{fmt}}, max {max(values):{fmt}})"

    print(
        f"median of {options.runs} runs: job {spread('wall', '.1f')} s, {spread('rate', '.1f')} rounds/s, "
        f"round {spread('round', '.3f')} s, transfer share {spread('share', '.2f')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
