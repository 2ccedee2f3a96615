"""Benchmark: the results and report layers at cluster scale. Writes a GENERATED schema-2 result of
an all-pairs sweep over N ranks (1,024 by default: 1,047,552 links), its links drawn from the
per-link figures and samples of real runs (one file whose links are within a host, one whose links
cross hosts), then times `report` in every format and `compare`, with their peak memory.

    python -m rdmabench.bench.million                       # 1,024 ranks, 8 per host
    python -m rdmabench.bench.million --ranks 256 --keep out/

The document says it is generated (metadata.generated) and from which files; nothing in it was
measured as such. Figures: bytes per link on disk, seconds (and CPU seconds, which a busy machine
does not stretch) and peak RSS per command.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..results import document

SOURCES = {
    "same host": "measurements/h200x2-20261122/allpairs-bw-device.json",
    "inter-node": "measurements/cpu2-20261123/netns-allpairs-1mib.json",
}


def _pool(path: str, link: str, size: int | None) -> list[dict[str, Any]]:
    entries = [e for e in document.load(path)["results"] if e.get("link") == link]
    sizes = sorted({e["size_bytes"] for e in entries})
    if not entries:
        raise SystemExit(f"rdmabench: error: {path} has no {link} links")
    wanted = size if size in sizes else sizes[0]
    return [e for e in entries if e["size_bytes"] == wanted]


def generate(path: str, ranks: int, per_host: int, sources: dict[str, str], seed: int = 1) -> int:
    """Write the generated result to `path` (and its links file); returns the number of links."""
    rng = random.Random(seed)
    pools = {link: _pool(source, link, 1 << 20) for link, source in sources.items()}
    hosts = [f"node{r // per_host:04d}" for r in range(ranks)]
    metadata = {
        "generated": (
            "SYNTHETIC: made by rdmabench.bench.million, not measured; each link's samples are a real link's "
            "samples (drawn from the source runs, same link class) times a random factor around 1"
        ),
        "sources": sources,
        "command_line": "python -m rdmabench.bench.million",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # the schema asks every result for it
        "world_size": ranks,
        "hosts": sorted(set(hosts)),
        "ranks": [{"rank": r, "host": hosts[r], "local_rank": r % per_host} for r in range(ranks)],
        "config": {"pattern": "all-pairs", "link_class": "all", "test": "bw"},
    }
    stream = document.ResultsStream(path, metadata)
    count = 0
    for src in range(ranks):
        batch = []
        for dst in range(ranks):
            if src == dst:
                continue
            link = "same host" if hosts[src] == hosts[dst] else "inter-node"
            entry = dict(rng.choice(pools[link]))
            factor = rng.lognormvariate(0.0, 0.05)
            entry["samples"] = [v * factor for v in entry["samples"]]
            entry["bandwidth_gbps"] *= factor
            if entry.get("share_of_limit") is not None:
                entry["share_of_limit"] *= factor
            entry.update(src_rank=src, dst_rank=dst, src_host=hosts[src], dst_host=hosts[dst])
            entry.update(src_gpu=src % per_host, dst_gpu=dst % per_host)
            if link == "inter-node":
                entry.update(src_nic=f"mlx5_{src % per_host}:1", dst_nic=f"mlx5_{dst % per_host}:1")
            batch.append(entry)
        stream.append(batch)
        count += len(batch)
    stream.finish(complete=True)
    return count


def _timed(command: list[str]) -> tuple[float, float, float, int]:
    """Seconds, CPU seconds (user and system: what a busy machine does not stretch), peak RSS in
    GiB, exit code of `command` (through /usr/bin/time -v)."""
    began = time.monotonic()
    try:
        proc = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return time.monotonic() - began, float("nan"), float("nan"), -9
    seconds = time.monotonic() - began
    if proc.returncode != 0:
        print(f"#   {proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else ''}", flush=True)
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    cpu = sum(float(v) for v in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr))
    return seconds, cpu, (int(match.group(1)) / 2**20 if match else float("nan")), proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--keep", help="a directory to keep the generated files and reports in")
    parser.add_argument("--formats", default="table,markdown,json,csv,html")
    options = parser.parse_args(argv)
    directory = options.keep or tempfile.mkdtemp(prefix="rdmabench-million-")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"generated-{options.ranks}.json")
    began = time.monotonic()
    links = generate(path, options.ranks, options.per_host, SOURCES)
    on_disk = os.path.getsize(path) + os.path.getsize(path[: -len(".json")] + ".links.jsonl")
    print(
        f"# generated {links:,} links over {options.ranks} ranks in {time.monotonic() - began:.0f} s: "
        f"{on_disk / 2**20:.1f} MiB on disk, {on_disk / links:.0f} bytes per link",
        flush=True,
    )
    python = [sys.executable, "-m", "rdmabench"]
    for name in options.formats.split(","):
        out = os.path.join(directory, f"report.{name}")
        seconds, cpu, gib, code = _timed([*python, "report", path, "--format", name, "-o", out, "--force"])
        size = os.path.getsize(out) / 2**20 if os.path.exists(out) else float("nan")
        print(
            f"report --format {name}: {seconds:.1f} s (cpu {cpu:.1f} s), peak {gib:.2f} GiB, exit {code}, {size:.1f} MiB",
            flush=True,
        )
    seconds, cpu, gib, code = _timed([*python, "compare", path, path])
    print(
        f"compare (the file against itself): {seconds:.1f} s (cpu {cpu:.1f} s), peak {gib:.2f} GiB, exit {code}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
