"""Benchmark: does the attribution name the part that was broken? Planted faults, scored.

    python -m devtools.diagnose --generated            # 1,024 ranks, every fault kind, and a million links
    python -m devtools.diagnose --generated --no-million --ranks 256
    python -m devtools.diagnose --netns                # 30 namespace trials, 8 hosts x 2 rails (root)

`--generated` builds GENERATED results (metadata.generated says so; nothing in them was measured): a
cluster of hosts x GPUs, each GPU sending through the NIC of its rail, every link's figure its
class's typical figure (NVLink within a node, a NIC's rate between nodes, less across rails) times
lognormal noise of a few %, and one planted fault: a GPU slow to send or to receive, a NIC port slow
one way, a host slow on every rail, a pair of hosts slow between them, a single link slow, or none.
Shapes: a screen (a ring within every host, every pair of hosts rail-aligned, its slow links
re-measured alone) and all-pairs. For each, the table gives the planted component, the top suspect,
hit or miss, its confidence and the seconds the attribution took; then a million links (all-pairs
over 1,024 ranks) are written as a schema-2 file and read back, aggregated and attributed, timed,
with the peak RSS of this process.

`--netns` (devtools/netns_trials.py) plants real faults in a namespace cluster (devtools/netns.py: launch/netns-cluster.sh, 8 hosts
x 2 rails, one rank a rail, UCX over tcp on the veths): first a screen unpaced, for the rate its
loaded links reach, and every interface gets a line rate of `--line-share` of that (links limited by
their "wire", not by the shared cores); a paced healthy screen gives the spread a fault must stand
out of. Then each trial plants one fault (netns.Planted: a host's interfaces, one rail of a host,
the path between two hosts, at 50%, 75% or 90% of the line rate; a host's ranks contended for CPU;
none in a fifth of the trials), runs the screen (`rdmabench run --pattern screen`, bounded by
`--trial-timeout`), attributes it and scores it as `--generated` does: a faulty trial is a hit when
the first suspect is the planted component (a CPU fault: its host, either way), a healthy trial
when there is no suspect; the drain list when it names exactly the planted host. Every tc rule
goes at the end of its trial, the namespaces at the end (or on any error).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rdmabench.job.schedule import screen
from rdmabench.results.files import document
from rdmabench.results.files.docrecord import ResultsDocument
from rdmabench.results.files.rows import aggregate
from rdmabench.results.verdicts.attribution import Attribution, attribute
from rdmabench.results.verdicts.drain import drained_hosts

from . import netns_trials

NVLINK = {"gbps": 478.125, "kind": "NVLink", "detail": "18 x NVLink 4", "measured": False}
NIC = {"gbps": 50.0, "kind": "NIC", "detail": "400 Gb/sec (4X NDR)", "measured": False}
TYPICAL = {"intra": 380.0, "aligned": 45.0, "cross": 38.0}  # GB/s: NVLink, a rail, across rails (the spine)
NOISE = 0.03  # lognormal sigma of a link's figure: a few %
SAMPLE_NOISE = 0.01  # of a sample around its link's figure
SIZE = 1 << 26
REMEASURE_BELOW = 0.8  # the screen's default: links below 0.8 x their class median are re-measured alone


@dataclass(frozen=True)
class Cluster:
    """hosts x gpus ranks (rank = host x gpus + gpu); GPU g sends through the NIC of rail g x rails // gpus."""

    hosts: int
    gpus: int
    rails: int

    @property
    def ranks(self) -> int:
        return self.hosts * self.gpus

    def host(self, index: int) -> str:
        return f"node{index:03d}"

    def nic(self, gpu: int) -> str:
        return f"mlx5_{gpu * self.rails // self.gpus}:1"

    def rail(self, gpu: int) -> int:
        return gpu * self.rails // self.gpus


@dataclass(frozen=True)
class Fault:
    """One planted fault: `factor` x the figure of every link through the component."""

    kind: str  # "gpu", "nic", "host", "pair", "link", "none"
    host: int = 0
    device: int = 0  # a GPU's index, a NIC's rail, a link's source GPU
    direction: str = "send"  # "send", "receive", "both"
    peer: int = 0  # a pair's or a link's other host
    peer_device: int = 0  # a link's destination GPU
    factor: float = 1.0

    def name(self, cluster: Cluster) -> str | None:
        """The planted component as a Suspect names it; None for a healthy run."""
        host = cluster.host(self.host)
        if self.kind == "gpu":
            return f"gpu {host}:gpu{self.device} {self.direction}"
        if self.kind == "nic":
            return f"nic {host}:mlx5_{self.device}:1 {self.direction}"
        if self.kind == "host":
            return f"host {host} {self.direction}"
        if self.kind == "pair":
            low, high = sorted((host, cluster.host(self.peer)))
            return f"pair {low} <-> {high}"
        if self.kind == "link":
            return f"link {host}:gpu{self.device} -> {cluster.host(self.peer)}:gpu{self.peer_device}"
        return None

    def hosts(self, cluster: Cluster) -> list[str]:
        """The hosts a drain list should name: the one holding the part (none for a path or a link)."""
        return [cluster.host(self.host)] if self.kind in ("gpu", "nic", "host") else []

    def factors(self, cluster: Cluster, src: Any, dst: Any) -> Any:
        """Per link (arrays of source and destination ranks): the planted factor, or 1."""
        g = cluster.gpus
        sh, sg, dh, dg = src // g, src % g, dst // g, dst % g
        inter = sh != dh
        sends, receives = self.direction in ("send", "both"), self.direction in ("receive", "both")
        if self.kind == "gpu":
            hit = (sends & (sh == self.host) & (sg == self.device)) | (
                receives & (dh == self.host) & (dg == self.device)
            )
        elif self.kind == "nic":
            rail = self.device
            at_src = (sh == self.host) & (sg * cluster.rails // g == rail)
            at_dst = (dh == self.host) & (dg * cluster.rails // g == rail)
            hit = inter & ((sends & at_src) | (receives & at_dst))
        elif self.kind == "host":
            hit = inter & ((sends & (sh == self.host)) | (receives & (dh == self.host)))
        elif self.kind == "pair":
            hit = ((sh == self.host) & (dh == self.peer)) | ((sh == self.peer) & (dh == self.host))
        elif self.kind == "link":
            hit = (src == self.host * g + self.device) & (dst == self.peer * g + self.peer_device)
        else:
            hit = np.zeros(len(src), bool)
        return np.where(hit, self.factor, 1.0)


def faults(cluster: Cluster) -> list[Fault]:
    """One fault of every kind, on hosts and devices spread over the cluster, and none."""
    h = cluster.hosts
    last = cluster.gpus - 1
    a, b = 3 % h, (h - 5) % h
    b = b if b != a else (a + 1) % h
    return [
        Fault("gpu", h // 3, 3 % cluster.gpus, "send", factor=0.8),
        Fault("gpu", h - 2, last, "receive", factor=0.7),
        Fault("nic", h // 2, cluster.rails - 1, "send", factor=0.85),
        Fault("nic", 1, 0, "receive", factor=0.75),
        Fault("host", 2 * h // 3, direction="both", factor=0.9),
        Fault("pair", a, direction="both", peer=b, factor=0.7),
        Fault(
            "link", 4 % h, 1 % cluster.gpus, "send", peer=(4 % h + h // 2) % h, peer_device=1 % cluster.gpus, factor=0.5
        ),
        Fault("none"),
    ]


def _rounds(cluster: Cluster, shape: str) -> Iterator[tuple[Any, Any, int]]:
    """(sources, destinations, links at once) per round: a screen's rounds, or all-pairs a source
    at a time (each link alone)."""
    if shape == "screen":
        hosts = [cluster.host(r // cluster.gpus) for r in range(cluster.ranks)]
        for links in screen(hosts):
            pairs = np.array(links, dtype=np.int64)
            yield pairs[:, 0], pairs[:, 1], len(links)
        return
    everyone = np.arange(cluster.ranks, dtype=np.int64)
    for src in range(cluster.ranks):
        dst = everyone[everyone != src]
        yield np.full(len(dst), src), dst, 1


def _typical(cluster: Cluster, src: Any, dst: Any) -> tuple[Any, Any, Any]:
    """Per link: the typical figure of its class, whether it is inter-node, whether rail-aligned."""
    g = cluster.gpus
    inter = src // g != dst // g
    aligned = (src % g) * cluster.rails // g == (dst % g) * cluster.rails // g
    base = np.where(inter, np.where(aligned, TYPICAL["aligned"], TYPICAL["cross"]), TYPICAL["intra"])
    return base, inter, aligned


_TEMPLATE = {
    "test": "bw", "src_mode": "device", "dst_mode": "device", "size_bytes": SIZE, "unit": "GB/s",
    "scope": "unidirectional", "validated": True, "wrong_bytes": 0, "engine": "native", "window": 8,
    "warmup": 2, "iterations": 4, "passes": 1, "messages_per_sample": 32, "ucx_memory_type_declared": True,
    "warnings": [], "staging": None,
}  # fmt: skip


def _entries(
    cluster: Cluster, src: Any, dst: Any, figures: Any, rng: Any, pattern: str, at_once: int
) -> list[dict[str, Any]]:
    """Entries of links with these figures: each with three samples around its figure."""
    g = cluster.gpus
    _base, inter, _aligned = _typical(cluster, src, dst)
    samples = figures[:, None] * rng.lognormal(0.0, SAMPLE_NOISE, (len(figures), 3))
    found = []
    for s, d, crossing, values in zip(src.tolist(), dst.tolist(), inter.tolist(), samples.tolist(), strict=True):
        limit = NIC if crossing else NVLINK
        value = sorted(values)[1]
        entry = dict(_TEMPLATE, src_rank=s, dst_rank=d, samples=values, bandwidth_gbps=value, pattern=pattern)
        entry.update(src_host=cluster.host(s // g), dst_host=cluster.host(d // g), src_gpu=s % g, dst_gpu=d % g)
        entry.update(link="inter-node" if crossing else "same host", link_limit=limit)
        entry.update(share_of_limit=value / limit["gbps"], concurrent_links=at_once)
        if crossing:
            nic = cluster.nic(s % g)
            entry.update(src_nic=nic, dst_nic=cluster.nic(d % g), transport=f"rc_mlx5/{nic}")
        else:
            entry["transport"] = "cuda_ipc/cuda"
        found.append(entry)
    return found


def batches(cluster: Cluster, shape: str, fault: Fault, seed: int = 1) -> Iterator[list[dict[str, Any]]]:
    """The entries of a generated run, a round at a time; a screen's re-measures alone at the end."""
    rng = np.random.default_rng(seed)
    screened: list[tuple[Any, Any, Any]] = []
    for src, dst, at_once in _rounds(cluster, shape):
        base, _inter, _aligned = _typical(cluster, src, dst)
        true = base * fault.factors(cluster, src, dst)
        figures = true * rng.lognormal(0.0, NOISE, len(src))
        if shape == "screen":
            screened.append((src, dst, figures))
        yield _entries(cluster, src, dst, figures, rng, shape, at_once)
    if screened:
        yield from _remeasured(cluster, fault, screened, rng)


def _remeasured(
    cluster: Cluster, fault: Fault, screened: list[tuple[Any, Any, Any]], rng: Any
) -> Iterator[list[dict[str, Any]]]:
    """A screen's second pass: the links below REMEASURE_BELOW x their link class's median, alone
    (what job.rounds.slow_links picks), each at its own figure's level with fresh noise."""
    src = np.concatenate([s for s, _d, _f in screened])
    dst = np.concatenate([d for _s, d, _f in screened])
    figures = np.concatenate([f for _s, _d, f in screened])
    _base, inter, _aligned = _typical(cluster, src, dst)
    slow = np.zeros(len(src), bool)
    for crossing in (True, False):
        mine = inter == crossing
        if mine.any():
            slow |= mine & (figures < REMEASURE_BELOW * np.median(figures[mine]))
    for index in np.flatnonzero(slow).tolist():
        one_src, one_dst = src[index : index + 1], dst[index : index + 1]
        base, _inter, _aligned = _typical(cluster, one_src, one_dst)
        again = base * fault.factors(cluster, one_src, one_dst) * rng.lognormal(0.0, NOISE, 1)
        (entry,) = _entries(cluster, one_src, one_dst, again, rng, "screen", 1)
        entry["remeasured_from"] = float(figures[index])
        yield [entry]


def metadata(cluster: Cluster, shape: str, fault: Fault, seed: int) -> dict[str, Any]:
    hosts = [cluster.host(r // cluster.gpus) for r in range(cluster.ranks)]
    return {
        "generated": (
            "SYNTHETIC: made by devtools.diagnose, not measured; each link's figure is its class's typical "
            f"figure times lognormal noise (sigma {NOISE}), with one planted fault (metadata.planted)"
        ),
        "planted": asdict(fault) | {"component": fault.name(cluster)},
        "command_line": "python -m devtools.diagnose --generated",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # the schema asks every result for it
        "world_size": cluster.ranks,
        "hosts": sorted(set(hosts)),
        "ranks": [{"rank": r, "host": hosts[r], "local_rank": r % cluster.gpus} for r in range(cluster.ranks)],
        "config": {"pattern": shape, "link_class": "all", "test": "bw", "seed": seed},
    }


def generated(cluster: Cluster, shape: str, fault: Fault, seed: int = 1) -> ResultsDocument:
    """A generated run as a results document in memory (schema 1: a list of entries)."""
    entries = [entry for batch in batches(cluster, shape, fault, seed) for entry in batch]
    return {
        "schema": {"name": document.SCHEMA_NAME, "version": 1},
        "metadata": metadata(cluster, shape, fault, seed),
        "results": entries,
    }


def write_generated(path: str, cluster: Cluster, shape: str, fault: Fault, seed: int = 1) -> int:
    """A generated run written as a schema-2 results file (and its links file); returns its links."""
    stream = document.ResultsStream(path, metadata(cluster, shape, fault, seed))
    for batch in batches(cluster, shape, fault, seed):
        stream.append(batch)
    stream.finish(complete=True)
    return stream.count


@dataclass(frozen=True)
class Trial:
    """One planted fault (or none) and what the attribution named first."""

    planted: str | None
    top: str | None
    confidence: float | None
    seconds: float
    drained: tuple[str, ...]
    expected_drain: tuple[str, ...]

    @property
    def hit(self) -> bool:
        """Faulty: the first suspect is the planted component; healthy: no suspect."""
        return self.top == self.planted

    @property
    def drain_hit(self) -> bool:
        return self.drained == self.expected_drain


def _own_hosts(found: Attribution) -> frozenset[str]:
    """The hosts of the suspects: the benchmark's runs are its own (generated here, or its namespace
    cluster's), so every host a suspect names is one they ran on."""
    return frozenset(suspect.host for suspect in found.suspects)


def score(found: Attribution, planted: str | None, expected_drain: list[str], seconds: float) -> Trial:
    """A trial's score. A planted single link measured once is no suspect (one figure) but the first
    link to measure again: named so, it is a hit."""
    top = found.suspects[0] if found.suspects else None
    single = planted is not None and planted.startswith("link ")
    again = f"link {found.remeasure[0].link}" if single and top is None and found.remeasure else None
    return Trial(
        planted,
        top.name if top else again,
        top.confidence if top else None,
        seconds,
        tuple(drained_hosts(found, _own_hosts(found))),
        tuple(sorted(expected_drain)),
    )


def trial(cluster: Cluster, shape: str, fault: Fault, seed: int = 1) -> tuple[Trial, int]:
    """Generate, aggregate and attribute one run; the trial and its links."""
    doc = generated(cluster, shape, fault, seed)
    rows = aggregate([("generated", doc)])
    began = time.monotonic()
    found = attribute(rows)
    seconds = time.monotonic() - began
    return score(found, fault.name(cluster), fault.hosts(cluster), seconds), len(doc["results"])


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _table(cluster: Cluster, shapes: list[str], seed: int) -> int:
    print(
        f"# {cluster.hosts} hosts x {cluster.gpus} GPUs = {cluster.ranks} ranks, {cluster.rails} rails, noise {NOISE}"
    )
    print(f"{'shape':<10} {'links':>8}  {'fault':<28} {'top suspect':<34} {'hit':<4} {'conf':>5} {'s':>6}  drain")
    misses = 0
    for shape in shapes:
        for fault in faults(cluster):
            found, links = trial(cluster, shape, fault, seed)
            misses += not (found.hit and found.drain_hit)
            conf = f"{found.confidence:.2f}" if found.confidence is not None else "-"
            print(
                f"{shape:<10} {links:>8}  {found.planted or 'none':<28} {found.top or 'none':<34} "
                f"{'hit' if found.hit else 'MISS':<4} {conf:>5} {found.seconds:>6.2f}  "
                f"{','.join(found.drained) or '-'}{'' if found.drain_hit else ' (MISS)'}",
                flush=True,
            )
    return misses


def _million(cluster: Cluster, directory: str, seed: int) -> bool:
    """All-pairs over the cluster, written as a schema-2 file with a NIC fault, read back and attributed."""
    fault = faults(cluster)[2]
    path = os.path.join(directory, f"generated-diagnose-{cluster.ranks}.json")
    began = time.monotonic()
    links = write_generated(path, cluster, "all-pairs", fault, seed)
    print(f"# wrote {links:,} links (all-pairs, {cluster.ranks} ranks) in {time.monotonic() - began:.0f} s: {path}")
    began = time.monotonic()
    rows = aggregate([(path, document.load(path, lazy=True))])
    loaded = time.monotonic() - began
    found = attribute(rows)
    total = time.monotonic() - began
    top = found.suspects[0].name if found.suspects else "none"
    print(
        f"million: {len(rows):,} links: load and aggregate {loaded:.1f} s, attribution {total - loaded:.1f} s, "
        f"total {total:.1f} s; peak RSS {_peak_gib():.2f} GiB; planted {fault.name(cluster)}, top suspect {top}",
        flush=True,
    )
    return top == fault.name(cluster) and total < 60 and _peak_gib() < 4


SHAPES = ("screen", "all-pairs")
MAX_RANKS = 4096  # all-pairs over 4,096 ranks: 16.8 million links, some 2 GB on disk and minutes


def _wrong_options(options: argparse.Namespace) -> str | None:
    """Why the options cannot make a run (one line), before anything is generated or started."""
    if not 1 <= options.per_host <= 64:
        return f"--per-host {options.per_host}: from 1 to 64 GPUs a host"
    hosts, rest = divmod(options.ranks, options.per_host)
    if options.generated and (rest or not 4 <= hosts or options.ranks > MAX_RANKS):
        return (
            f"--ranks {options.ranks}: a multiple of --per-host {options.per_host} of at least 4 hosts "
            f"({4 * options.per_host} ranks) and at most {MAX_RANKS} ranks"
        )
    if options.rails is not None and not 1 <= options.rails <= (options.per_host if options.generated else 16):
        return f"--rails {options.rails}: from 1 to {options.per_host if options.generated else 16}"
    if options.seed < 0:
        return f"--seed {options.seed}: a whole number of at least 0"
    shapes = options.shapes.split(",")
    if not shapes or not set(shapes) <= set(SHAPES):
        return f"--shapes {options.shapes}: one or both of {', '.join(SHAPES)}, comma-separated"
    if options.keep is not None and os.path.exists(options.keep) and not os.path.isdir(options.keep):
        return f"--keep {options.keep}: not a directory"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generated", action="store_true", help="generated runs with planted faults")
    mode.add_argument("--netns", action="store_true", help="planted faults in a namespace cluster (root)")
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--rails", type=int, default=None, help="4 generated; 2 for --netns (a rank per rail)")
    parser.add_argument(
        "--shapes", default="screen,all-pairs", help="all-pairs runs over a quarter of the hosts (at least 16)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-million", action="store_true", help="skip the million-link timing")
    parser.add_argument("--keep", help="a directory for the million-link file or the trials' results")
    netns_options = parser.add_argument_group("--netns")
    netns_options.add_argument("--hosts", type=int, default=8)
    netns_options.add_argument("--trials", type=int, default=30)
    netns_options.add_argument("--line-share", type=float, default=0.3, help="line rate: this share of the unpaced")
    netns_options.add_argument("--sizes", default="1MiB")
    netns_options.add_argument("--window", type=int, default=4)
    netns_options.add_argument("--samples", type=int, default=7)
    netns_options.add_argument("--sample-time", type=float, default=0.08)
    netns_options.add_argument("--remeasure-below", type=float, default=0.9)
    netns_options.add_argument("--cpu-quota", type=float, default=0.15, help="a CPU fault: share of a core")
    netns_options.add_argument("--trial-timeout", type=float, default=120.0)
    netns_options.add_argument("--prefix", default="rdbd", help="the namespaces' names: PREFIX-h<i>")
    netns_options.add_argument("--subnet", type=int, default=100, help="rail r on 10.213.<SUBNET + r>.0/24")
    options = parser.parse_args(argv)
    wrong = _wrong_options(options)
    try:
        if wrong is None and options.keep is not None:
            os.makedirs(options.keep, exist_ok=True)
    except OSError as exc:
        wrong = f"--keep {options.keep}: cannot make it ({exc.strerror or exc})"
    if wrong is not None:
        print(f"rdmabench: error: {wrong}", file=sys.stderr)
        return 2
    if options.netns:
        options.rails = 2 if options.rails is None else options.rails
        return netns_trials.run(options)
    options.rails = 4 if options.rails is None else options.rails
    cluster = Cluster(options.ranks // options.per_host, options.per_host, options.rails)
    shapes = options.shapes.split(",")
    misses = _table(cluster, [s for s in shapes if s == "screen"], options.seed)
    if "all-pairs" in shapes:
        # A quarter of the hosts, at least 16: with 4 hosts, one host's links are half of every class.
        quarter = Cluster(min(max(cluster.hosts // 4, 16), cluster.hosts), cluster.gpus, cluster.rails)
        misses += _table(quarter, ["all-pairs"], options.seed)
    ok = misses == 0
    if not options.no_million:
        with tempfile.TemporaryDirectory(prefix="rdmabench-diagnose-") as scratch:  # gone at the end, unless --keep
            ok = _million(cluster, options.keep or scratch, options.seed) and ok
    print(
        f"# {'every planted component named first' if ok else 'MISSES or targets not met'}; peak {_peak_gib():.2f} GiB"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
