"""Benchmark: the results and report layers at cluster scale. Writes a GENERATED schema-2 result of
an all-pairs sweep over N ranks (1,024 by default: 1,047,552 links), its links drawn from the
per-link figures and samples of real runs (one file whose links are within a host, one whose links
cross hosts), and a second one of other draws (seed 2), then times `report` in every format,
`compare` of the file against itself and against the second file (what a user compares: two runs),
and `check --expect default --json --drain`, with their CPU seconds and peak memory.

    python -m devtools.million                       # 1,024 ranks, 8 per host
    python -m devtools.million --ranks 256 --keep out/
    python -m devtools.million --keep out/ --reuse --repeat 3   # the files kept in out/, 3 runs each

The document says it is generated (metadata.generated) and from which files; nothing in it was
measured as such. Figures: bytes per link on disk, seconds (and CPU seconds, which a busy machine
does not stretch) and peak RSS per command.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from rdmabench.pystart import python_module
from rdmabench.results.files import compact, document

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
            "SYNTHETIC: made by devtools.million, not measured; each link's samples are a real link's "
            "samples (drawn from the source runs, same link class) times a random factor around 1"
        ),
        "sources": sources,
        "command_line": "python -m devtools.million",
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


_SAID: set[str] = set()  # the error lines printed already


def _timed(command: list[str]) -> tuple[float, float, float, int]:
    """Seconds, CPU seconds (user and system: what a busy machine does not stretch), peak RSS in
    GiB, exit code of `command` (through /usr/bin/time -v)."""
    began = time.monotonic()
    try:
        proc = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return time.monotonic() - began, float("nan"), float("nan"), -9
    seconds = time.monotonic() - began
    said = [line for line in proc.stderr.splitlines() if line.startswith("rdmabench:")]
    if proc.returncode != 0 and said and said[0] not in _SAID:  # why, once per message
        _SAID.add(said[0])
        print(f"#   {said[0]}", flush=True)
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    cpu = sum(float(v) for v in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr))
    return seconds, cpu, (int(match.group(1)) / 2**20 if match else float("nan")), proc.returncode


def _generated(directory: str, ranks: int, per_host: int, seed: int, reuse: bool, sources: dict[str, str]) -> str:
    """The generated file of `seed` in `directory`: made (and its size and time printed), or with
    `reuse` the one made there before."""
    suffix = "" if seed == 1 else f"-seed{seed}"
    path = os.path.join(directory, f"generated-{ranks}{suffix}.json")
    if reuse and os.path.exists(path) and os.path.exists(compact.links_path(path)):
        print(f"# reused {path}", flush=True)
        return path
    began = time.monotonic()
    links = generate(path, ranks, per_host, sources, seed)
    on_disk = os.path.getsize(path) + os.path.getsize(compact.links_path(path))
    print(
        f"# generated {links:,} links over {ranks} ranks (seed {seed}) in {time.monotonic() - began:.0f} s: "
        f"{on_disk / 2**20:.1f} MiB on disk, {on_disk / links:.0f} bytes per link",
        flush=True,
    )
    return path


def _commands(path: str, other: str, directory: str, formats: list[str]) -> list[tuple[str, list[str], str | None]]:
    """(label, rdmabench arguments, the file it writes) of each timed command."""
    found: list[tuple[str, list[str], str | None]] = []
    for name in formats:
        out = os.path.join(directory, f"report.{name}")
        found.append((f"report --format {name}", ["report", path, "--format", name, "-o", out, "--force"], out))
    found.append(("compare (the file against itself)", ["compare", path, path], None))
    found.append(("compare (seed 1 against seed 2)", ["compare", path, other], None))
    verdict, drain = os.path.join(directory, "check.json"), os.path.join(directory, "drain.txt")
    check = ["check", path, "--expect", "default", "--json", verdict, "--drain", drain, "--force"]
    found.append(("check --expect default --json --drain", check, verdict))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--keep", help="a directory to keep the generated files and reports in")
    parser.add_argument("--reuse", action="store_true", help="with --keep: use the generated files made there before")
    parser.add_argument("--formats", default="table,markdown,json,csv,html")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (the median and spread printed)")
    options = parser.parse_args(argv)
    sources, wrong = _sources(), _wrong_options(options)
    try:
        if wrong is None and options.keep is not None:
            os.makedirs(options.keep, exist_ok=True)
    except OSError as exc:
        wrong = f"--keep {options.keep}: cannot make it ({exc.strerror or exc})"
    missing = [path for path in sources.values() if not os.path.isfile(path)]
    if wrong is None and missing:
        wrong = f"no source run {missing[0]}: run it from an rdmabench checkout (its measurements/ hold them)"
    if wrong is not None:
        print(f"rdmabench: error: {wrong}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rdmabench-million-") as scratch:  # about 1 GB: gone at the end
        return _run(options, options.keep or scratch, sources)


MAX_RANKS = 4096  # 16.8 million links: some 2 GB on disk


def _wrong_options(options: argparse.Namespace) -> str | None:
    """Why the options cannot make a run (one line), before anything is generated."""
    if not 1 <= options.per_host <= 64:
        return f"--per-host {options.per_host}: from 1 to 64 GPUs a host"
    hosts, rest = divmod(options.ranks, options.per_host)
    if rest or hosts < 2 or options.ranks > MAX_RANKS:
        return (
            f"--ranks {options.ranks}: a multiple of --per-host {options.per_host} of at least 2 hosts "
            f"({2 * options.per_host} ranks: links within a host and between hosts) and at most {MAX_RANKS}"
        )
    if options.repeat < 1:
        return f"--repeat {options.repeat}: at least 1 run of each command"
    if options.keep is not None and os.path.exists(options.keep) and not os.path.isdir(options.keep):
        return f"--keep {options.keep}: not a directory"
    if options.reuse and options.keep is None:
        return "--reuse takes --keep: the directory the files were made in before"
    return None


def _sources() -> dict[str, str]:
    """SOURCES in the checkout this rdmabench runs from (not the current folder)."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(document.__file__))))
    return {link: os.path.join(checkout, path) for link, path in SOURCES.items()}


def _run(options: argparse.Namespace, directory: str, sources: dict[str, str]) -> int:
    print(f"# {os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    path = _generated(directory, options.ranks, options.per_host, 1, options.reuse, sources)
    other = _generated(directory, options.ranks, options.per_host, 2, options.reuse, sources)
    python = python_module("rdmabench")
    for label, arguments, out in _commands(path, other, directory, options.formats.split(",")):
        runs = [_timed([*python, *arguments]) for _ in range(options.repeat)]
        size = f", {os.path.getsize(out) / 2**20:.1f} MiB" if out and os.path.exists(out) else ""
        print(f"{label}: {_figures(runs)}, exit {runs[-1][3]}{size}", flush=True)
    return 0


def _figures(runs: list[tuple[float, float, float, int]]) -> str:
    """Seconds, CPU seconds and peak GiB: one run's, or the median of several with their range."""
    if len(runs) == 1:
        seconds, cpu, gib, _ = runs[0]
        return f"{seconds:.1f} s (cpu {cpu:.1f} s), peak {gib:.2f} GiB"
    columns = list(zip(*runs, strict=True))

    def spread(values: tuple[float, ...], digits: int) -> str:
        return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"

    return (
        f"{spread(columns[0], 1)} s (cpu {spread(columns[1], 1)} s), peak {spread(columns[2], 2)} GiB "
        f"(median [min-max] of {len(runs)}; load average {os.getloadavg()[0]:.2f} at the end)"
    )


if __name__ == "__main__":
    sys.exit(main())
