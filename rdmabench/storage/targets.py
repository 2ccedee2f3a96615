"""The storage targets as ratios measured in the same run: the pinned pipeline against the smaller of
the device's own O_DIRECT read rate and the GPU's PCIe link (target 0.9), against KvikIO on the same
file (target 0.95), and what pinning and pipelining buy over the pageable bounce.

    python -m rdmabench.storage.targets RESULTS.json [RESULTS.json ...]

Each file is one `rdmabench storage` run; with several, each ratio's median and spread is printed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from .. import stats
from ..results.files import document
from ..units import format_size


def ratios(entries: Iterable[Mapping[str, object]]) -> dict[tuple[str, int, int], dict[str, float]]:
    """Per (test, request size, threads): pinned / limit, pinned / kvikio, pinned / pageable (entries read
    back from a results file: an entry without a storage path, or its figure, is not a storage one)."""
    by_key: dict[tuple[str, int, int], dict[str, float]] = {}
    limits: dict[tuple[str, int, int], float] = {}
    for entry in entries:
        path, test, size, threads = (entry.get(name) for name in ("storage_path", "test", "size_bytes", "threads"))
        gbps = entry.get("bandwidth_gbps")
        if not (path and isinstance(path, str) and isinstance(test, str) and isinstance(size, int)):
            continue
        if not isinstance(gbps, (int, float)):
            continue
        key = (test, size, threads if isinstance(threads, int) else 1)
        by_key.setdefault(key, {})[path] = float(gbps)
        limit = entry.get("link_limit")
        if path == "pinned":  # the last pinned entry of the key's limit, as its figure
            figure = limit.get("gbps") if isinstance(limit, Mapping) else None
            limits[key] = float(figure) if isinstance(figure, (int, float)) else 0.0
    result = {}
    for key, paths in sorted(by_key.items()):
        pinned = paths.get("pinned")
        if pinned is None:
            continue
        row = {}
        if limits.get(key):
            row["of_limit"] = pinned / limits[key]
        for other in ("kvikio", "pageable"):
            if other in paths:
                row[f"over_{other}"] = pinned / paths[other]
        result[key] = row
    return result


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    runs = [ratios(document.load(path)["results"]) for path in argv]
    keys = sorted({key for run in runs for key in run})
    print("# pinned pipeline: share of min(device O_DIRECT rate, PCIe) [target 0.9], over KvikIO [0.95], over pageable")
    print(f"{'test':<13} {'request':>8} {'thr':>3} {'of limit':>14} {'over kvikio':>14} {'over pageable':>14}")
    for key in keys:
        cells = []
        for name in ("of_limit", "over_kvikio", "over_pageable"):
            values = [run[key][name] for run in runs if key in run and name in run[key]]
            if not values:
                cells.append(f"{'-':>14}")
                continue
            spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
            cells.append(f"{stats.median(values):>6.2f}{spread:>8}")
        print(f"{key[0]:<13} {format_size(key[1]):>8} {key[2]:>3} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
