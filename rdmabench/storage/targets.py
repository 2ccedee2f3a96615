"""The storage targets as ratios measured in the same run: the pinned pipeline against the smaller of
the device's own O_DIRECT read rate and the GPU's PCIe link (target 0.9), against KvikIO on the same
file (target 0.95), and what pinning and pipelining buy over the pageable bounce.

    python -m rdmabench.storage.targets RESULTS.json [RESULTS.json ...]

Each file is one `rdmabench storage` run; with several, each ratio's median and spread is printed.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import stats
from ..results.files import document
from ..units import format_size


def ratios(entries: list[dict[str, Any]]) -> dict[tuple[str, int, int], dict[str, float]]:
    """Per (test, request size, threads): pinned / limit, pinned / kvikio, pinned / pageable."""
    by_key: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for entry in entries:
        if entry.get("storage_path"):
            key = (entry["test"], entry["size_bytes"], entry.get("threads", 1))
            by_key.setdefault(key, {})[entry["storage_path"]] = entry
    result = {}
    for key, paths in sorted(by_key.items()):
        pinned = paths.get("pinned")
        if pinned is None:
            continue
        row = {}
        limit = pinned.get("link_limit")
        if limit:
            row["of_limit"] = pinned["bandwidth_gbps"] / limit["gbps"]
        for other in ("kvikio", "pageable"):
            if other in paths:
                row[f"over_{other}"] = pinned["bandwidth_gbps"] / paths[other]["bandwidth_gbps"]
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
