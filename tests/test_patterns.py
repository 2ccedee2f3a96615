"""Per-link bandwidth across many ranks: schedules, and real multi-rank runs on this machine."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from rdmabench.errors import ConfigError
from rdmabench.job.schedule import estimate_seconds, schedule, tournament_rounds
from rdmabench.results.files.document import load as load_results

from .conftest import QUICK, run_cli, run_cli_here


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_tournament_covers_every_pair_once_and_no_rank_twice_a_round(n: int) -> None:
    rounds = tournament_rounds(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [pair for pairs in rounds for pair in pairs]
    assert sorted(seen) == list(itertools.combinations(range(n), 2))
    for pairs in rounds:
        ranks = [r for pair in pairs for r in pair]
        assert len(ranks) == len(set(ranks))


def test_schedules() -> None:
    one_host = ["a"] * 4
    assert schedule("pair", one_host) == [[(0, 1)]]
    assert len(schedule("all-pairs", one_host)) == 12 and all(len(r) == 1 for r in schedule("all-pairs", one_host))
    concurrent = schedule("all-pairs", one_host, concurrent=True)
    assert len(concurrent) == 6 and all(len(r) == 2 for r in concurrent)
    assert sorted(link for r in concurrent for link in r) == sorted(itertools.permutations(range(4), 2))
    assert [r for (r,) in schedule("all-pairs", one_host[:3], bidirectional=True)] == [(0, 1), (0, 2), (1, 2)]
    assert schedule("ring", one_host) == [[(0, 1), (1, 2), (2, 3), (3, 0)]]
    assert schedule("incast", one_host, root=2) == [[(0, 2), (1, 2), (3, 2)]]
    assert schedule("fan-out", one_host) == [[(0, 1), (0, 2), (0, 3)]]
    assert schedule("bisection", one_host) == [[(0, 2), (1, 3), (2, 0), (3, 1)]]
    two_hosts = ["a", "a", "b", "b"]
    inter = schedule("all-pairs", two_hosts, link_class="inter-node")
    assert all(two_hosts[s] != two_hosts[d] for ((s, d),) in inter) and len(inter) == 8
    intra = schedule("all-pairs", two_hosts, link_class="intra-node")
    assert [link for r in intra for link in r] == [(0, 1), (1, 0), (2, 3), (3, 2)]
    with pytest.raises(ConfigError):
        schedule("star", one_host)
    with pytest.raises(ConfigError):
        schedule("incast", one_host, root=7)


def test_all_pairs_time_model() -> None:
    assert estimate_seconds(1024, 2.0, concurrent=False) == 1024 * 1023 * 2.0
    assert estimate_seconds(1024, 2.0, concurrent=True) == 2 * 1023 * 2.0


def test_all_pairs_on_four_ranks(results_path: Path) -> None:
    proc = run_cli(
        ["run", "--np", "4", "--pattern", "all-pairs", "--sizes", "64KiB", "-o", str(results_path), *QUICK], timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    doc = load_results(str(results_path))
    entries = doc["results"]
    assert len(entries) == 12
    assert sorted((e["src_rank"], e["dst_rank"]) for e in entries) == sorted(itertools.permutations(range(4), 2))
    assert all(e["pattern"] == "all-pairs" and e["validated"] and e["transport"] for e in entries)
    (matrix,) = doc["matrices"]
    assert matrix["size_bytes"] == 65536 and len(matrix["values"]) == 4
    by_link = {(e["src_rank"], e["dst_rank"]): e["bandwidth_gbps"] for e in entries}
    for i, j in itertools.product(range(4), repeat=2):
        if i == j:
            assert matrix["values"][i][j] is None and matrix["reasons"][i][j] == "same rank"
        else:
            assert matrix["values"][i][j] == by_link[(i, j)] and matrix["reasons"][i][j] is None
    assert "bw matrix, 64KiB" in proc.stdout and "rounds done" in proc.stdout
    topo = doc["metadata"]["topology"]
    assert [t["rank"] for t in topo] == [0, 1, 2, 3] and all(t["cpu_affinity"] for t in topo)


def test_concurrent_patterns_report_links_and_aggregate(results_path: Path) -> None:
    proc = run_cli(
        ["run", "--np", "3", "--pattern", "incast", "--root", "1", "--sizes", "64KiB", "-o", str(results_path), *QUICK],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = load_results(str(results_path))
    links = sorted((e["src_rank"], e["dst_rank"]) for e in doc["results"])
    assert links == [(0, 1), (2, 1)]
    for entry in doc["results"]:
        assert entry["concurrent_links"] == 2 and entry["pattern_aggregate_gbps"] > 0
        assert entry["validated"] and entry["transport"]
    reasons = doc["matrices"][0]["reasons"]
    assert reasons[1][0] == "not a link of the incast pattern"
    assert "all 2 links together" in proc.stdout


def test_bidirectional_all_pairs_measures_each_pair_once(results_path: Path) -> None:
    proc = run_cli(
        [
            "run",
            "--np",
            "3",
            "--pattern",
            "all-pairs",
            "--test",
            "bibw",
            "--sizes",
            "4KiB",
            "-o",
            str(results_path),
            *QUICK,
        ],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    links = sorted((e["src_rank"], e["dst_rank"]) for e in load_results(str(results_path))["results"])
    assert links == sorted(itertools.permutations(range(3), 2))  # both directions of 3 pairs, once each


RING = ["run", "--np", "3", "--pattern", "ring", *QUICK]


@pytest.fixture(scope="module")
def ring_run(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The entries of one ring of three ranks, at two sizes (the ring tests below share it)."""
    results_path = tmp_path_factory.mktemp("ring") / "ring.json"
    proc = run_cli([*RING, "--sizes", "8,4KiB", "-o", str(results_path)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    return load_results(str(results_path))["results"]  # type: ignore[no-any-return]


def test_ring_and_bad_combinations(ring_run: list[dict[str, Any]], results_path: Path) -> None:
    for size in (8, 4096):
        links = sorted((e["src_rank"], e["dst_rank"]) for e in ring_run if e["size_bytes"] == size)
        assert links == [(0, 1), (1, 2), (2, 0)]
    # Refused by the options alone, before any process starts: in this process (run_cli_here fails the
    # test where the command starts one). The two that need the ranks' hosts and count start them.
    for args, message, here in (
        (["--pattern", "ring", "--test", "lat"], "--test lat measures one link at a time", True),
        (["--pattern", "ring", "--concurrent"], "--concurrent schedules all-pairs", True),
        (["--pattern", "mesh"], "unknown pattern 'mesh'", True),
        (["--pattern", "all-pairs", "--links", "inter-node"], "no inter-node links to measure", False),
        (["--pattern", "incast", "--root", "5"], "--root 5 is not a rank", False),
    ):
        command = ["run", "--np", "2", "--sizes", "8", *args, "-o", str(results_path) + ".bad", *QUICK]
        bad = run_cli_here(command) if here else run_cli(command)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def _native_ok() -> bool:
    from rdmabench.wire import native

    return native.load().library is not None


@pytest.mark.skipif(not _native_ok(), reason="no native loop on this machine")
def test_concurrent_rounds_are_timed_natively_and_faults_reach_them(
    ring_run: list[dict[str, Any]], results_path: Path
) -> None:
    entries = ring_run
    assert len(entries) == 6 and {e["engine"] for e in entries} == {"native"}
    assert all(e["ucx_memory_type_declared"] and e["concurrent_links"] == 3 for e in entries)

    from .conftest import rdmabench_env

    bad = run_cli([*RING, "--sizes", "8", "-o", f"{results_path}.c"], env=rdmabench_env(RDMABENCH_FAULT="corrupt:1"))
    errors = [line for line in bad.stderr.splitlines() if line.startswith("rdmabench: error:")]
    assert bad.returncode != 0 and len(errors) == 1, bad.stderr
    assert "wrong byte(s) of 8" in errors[0] and "a round of 3 concurrent links (bw, 8)" in errors[0]

    stalled = run_cli(
        ["run", "--np", "3", "--pattern", "ring", "--sizes", "4KiB", "--timeout", "2", "-o", str(results_path) + ".s"],
        env=rdmabench_env(RDMABENCH_FAULT="stall:3"),
        timeout=120,
    )
    errors = [line for line in stalled.stderr.splitlines() if line.startswith("rdmabench: error:")]
    assert stalled.returncode != 0 and len(errors) == 1, stalled.stderr
    assert "timed out after 2 s" in errors[0] and "concurrent links (bw, 4KiB)" in errors[0]


def test_many_links_print_a_line_per_round(results_path: Path) -> None:
    """A cluster's sweep prints each round as one line (median, worst link); the file keeps every link."""
    args = ["run", "--np", "4", "--pattern", "all-pairs", "--concurrent", "--sizes", "4KiB", "--progress", "rounds"]
    proc = run_cli([*args, "-o", str(results_path), *QUICK], timeout=300)
    assert proc.returncode == 0, proc.stderr
    rounds = [line for line in proc.stdout.splitlines() if "links: median" in line]
    assert len(rounds) == 6 and all("worst" in line and "rounds done" in line for line in rounds)
    assert not any(" -> " in line and "GB/s  " in line and "links:" not in line for line in proc.stdout.splitlines())
    assert "matrices are in the results file" in proc.stdout and "bw matrix" not in proc.stdout
    assert len(load_results(str(results_path))["results"]) == 12
    bad = run_cli_here(["run", "--progress", "chatty"])  # refused by the options: no process
    assert bad.returncode == 2 and "unknown --progress 'chatty'" in bad.stderr
