"""Benchmark: does a concurrent round cost a link anything? The per-link message rate of a ring
against the same pair measured alone (bw) or both ways at once (bibw), in the same invocation,
several times: a ratio near 1 says the round engine times a loaded link as well as a lone one.

    python -m devtools.rounds --ring 2 --against bibw        # CPU machine: 2 ranks, 2 cores
    python -m devtools.rounds --ring 4 --against bw          # GPU node: a core per rank

Each run is `rdmabench run` with --np; ratios, then their median and spread, are printed.
"""

from __future__ import annotations

import argparse
import sys

from rdmabench import stats
from rdmabench.units import parse_size

from .runs import run_entries


def _rates(args: list[str], size: int) -> list[float]:
    """Messages per second of every link of one run."""
    entries, _wall = run_entries(args)
    engines = {e["engine"] for e in entries}
    if engines != {"native"}:
        print(f"# warning: engine {sorted(engines)} for {' '.join(args)}", flush=True)
    return [e["bandwidth_gbps"] * 1e9 / size for e in entries]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ring", type=int, default=2, help="ranks in the ring (2: both directions of one pair)")
    parser.add_argument("--against", choices=("bw", "bibw"), default="bibw", help="the pair measured alone")
    parser.add_argument("--size", default="8", help="message size")
    parser.add_argument("--mode", default="pageable", help="memory mode of every end")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--sample-time", type=float, default=0.05)
    options = parser.parse_args(argv)
    size = parse_size(options.size)
    common = ["--sizes", str(size), "--mode", options.mode, "--samples", str(options.samples)]
    common += ["--sample-time", str(options.sample_time)]
    ratios = []
    print(f"# per-link message rate at {size} B, {options.mode}: {options.ring}-rank ring vs {options.against} alone")
    for run in range(options.runs):
        ring = _rates(["--np", str(options.ring), "--pattern", "ring", *common], size)
        alone = _rates(["--np", "2", "--test", options.against, *common], size)
        ratio = stats.median(ring) / stats.median(alone)
        ratios.append(ratio)
        print(
            f"run {run + 1}: ring {stats.median(ring) / 1e6:.3f} M msg/s per link (links "
            f"{', '.join(f'{r / 1e6:.2f}' for r in ring)}), {options.against} {stats.median(alone) / 1e6:.3f} "
            f"M msg/s per direction: ratio {ratio:.2f}",
            flush=True,
        )
    print(
        f"ratio ring/{options.against}: median {stats.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {len(ratios)} runs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
