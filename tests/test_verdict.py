"""The pass/fail verdict: floors per limit kind or link class, a baseline with a tolerance, every
failing link named with its GPUs and nodes, JSON and JUnit XML for CI; on real runs and on generated
documents (marked as generated) for GPU links this machine does not have."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from rdmabench.hardware import copycache, topology
from rdmabench.results.files.document import load as load_results

from .conftest import QUICK, rdmabench_env, run_cli, run_cli_here


def _gpu_doc(shares: dict[tuple[int, int], float]) -> dict[str, Any]:
    """A results document of device links between GPUs of one node with the given shares of NVLink."""
    limit = {"gbps": 478.125, "kind": "NVLink", "detail": "18 x NVLink 4", "measured": False}
    entries = []
    for (src, dst), share in shares.items():
        value = share * limit["gbps"]
        entries.append(
            {
                "test": "bw", "src_rank": src, "dst_rank": dst, "src_mode": "device", "dst_mode": "device",
                "size_bytes": 1 << 28, "bandwidth_gbps": value, "samples": [value] * 3, "unit": "GB/s",
                "validated": True, "transport": "cuda_ipc/cuda", "engine": "native", "window": 2,
                "src_host": "n1", "dst_host": "n1", "src_gpu": src, "dst_gpu": dst,
                "link_limit": limit, "share_of_limit": share,
            }
        )  # fmt: skip
    metadata = {"generated": "made by tests/test_verdict.py to judge GPU links on a machine without GPUs"}
    return {
        "schema": {"name": "rdmabench-results", "version": 1},
        "complete": True,
        "metadata": metadata,
        "results": entries,
    }


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_a_slow_gpu_link_fails_and_is_named(tmp_path: Path) -> None:
    doc = _write(tmp_path / "gpus.json", _gpu_doc({(0, 1): 0.80, (1, 0): 0.81, (0, 2): 0.50, (2, 0): 0.79}))
    junit, summary = tmp_path / "check.xml", tmp_path / "check.json"
    proc = run_cli_here(["check", str(doc), "--expect", "default", "--junit", str(junit), "--json", str(summary)])
    assert proc.returncode == 1, proc.stderr
    fails = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and "n1:gpu0 -> n1:gpu2" in fails[0] and "below the NVLink floor of 75%" in fails[0]
    assert "failing gpus: n1:gpu0 (1 link(s)), n1:gpu2 (1 link(s))" in proc.stdout.replace(
        "n1:gpu2 (1 link(s)), n1:gpu0", "n1:gpu0 (1 link(s)), n1:gpu2"
    )
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("4", "1")
    assert sum(1 for case in suite if case.find("failure") is not None) == 1
    verdict = json.loads(summary.read_text())
    assert verdict["passed"] is False and verdict["nodes"] == {"n1": 1} and len(verdict["failed"]) == 1
    lenient = run_cli_here(["check", str(doc), "--expect", "NVLink=0.4"])
    assert lenient.returncode == 0 and "verdict: PASS" in lenient.stdout


def test_a_baseline_with_a_tolerance(tmp_path: Path) -> None:
    good = _gpu_doc({(0, 1): 0.80, (1, 0): 0.80})
    base = _write(tmp_path / "base.json", good)
    same = run_cli_here(["check", str(base), "--baseline", str(base)])
    assert same.returncode == 0, same.stdout + same.stderr
    slower = copy.deepcopy(good)
    slower["metadata"]["generated"] += "; link 1 -> 0 made 20% slower"
    slow_entry = slower["results"][1]
    slow_entry["bandwidth_gbps"] *= 0.8
    slow_entry["samples"] = [v * 0.8 for v in slow_entry["samples"]]
    new = _write(tmp_path / "new.json", slower)
    proc = run_cli_here(["check", str(new), "--baseline", str(base), "--tolerance", "0.1"])
    assert proc.returncode == 1
    assert "FAIL n1:gpu1 -> n1:gpu0" in proc.stdout and "-20%" in proc.stdout
    assert run_cli_here(["check", str(new), "--baseline", str(base), "--tolerance", "0.25"]).returncode == 0


PLANTED_GBPS = 1000.0  # far above any one memory copy between two processes: a link's share well below 1


def _plant_host_copy(cache: Path, gbps: float) -> None:
    """This host's memory copy kept in `cache` as `gbps`, by copycache's own hand (a record for this
    host, boot and code): a run with RDMABENCH_CACHE_DIR=`cache` judges its links against it."""
    llc = topology.last_level_cache_bytes()
    planted = topology.HostCopy(gbps, topology.probe_bytes(llc), llc)
    copycache.host_copy(remeasure=True, dirs=[cache], measure=lambda: planted)


def test_run_with_a_floor_gives_a_verdict(tmp_path: Path) -> None:
    """The verdict follows what was measured against the limit the run judged it by: below the floor
    FAIL (exit 1, one line, the results kept), at or above it PASS (0), a floor no link is judged by
    "no verdict" (2); the run, check and report agree. The limit is the host memory copy, which a run
    takes from the per-boot cache: here a planted figure far above the link, so that which verdict
    comes out does not hang on the load this machine's own cached figure was measured under (a link
    more than 25% above that figure has no share at all, and check then gave no verdict)."""
    out, cache = tmp_path / "r.json", tmp_path / "cache"
    _plant_host_copy(cache, PLANTED_GBPS)
    env = rdmabench_env(RDMABENCH_CACHE_DIR=str(cache))
    # Messages as large as the host copy's buffers: judged against it (smaller ones may run from the cache).
    size = str(topology.probe_bytes(topology.last_level_cache_bytes()))
    proc = run_cli(["run", "--sizes", size, "-o", str(out), "--expect", "host memory copy=1", *QUICK], env=env)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rdmabench: error:")]
    doc = json.loads(out.read_text())
    assert doc["complete"] is True  # the results are kept whatever the verdict
    entry = load_results(str(out))["results"][0]
    limit, share = entry.get("link_limit") or {}, entry.get("share_of_limit")
    assert (limit.get("kind"), limit.get("gbps")) == ("host memory copy", PLANTED_GBPS), entry
    assert share is not None and 0 < share < 0.1, entry
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr
    assert "below their --expect floor" in errors[0] and "verdict: FAIL" in proc.stdout
    passed = run_cli_here(["check", str(out), "--expect", "host memory copy=0.00001"])
    assert passed.returncode == 0 and "verdict: PASS" in passed.stdout, passed.stdout + passed.stderr
    assert run_cli_here(["check", str(out), "--expect", "intra-node=0.00001"]).returncode == 0
    failed = run_cli_here(["check", str(out), "--expect", "host memory copy=1"])
    assert failed.returncode == 1 and "verdict: FAIL" in failed.stdout, failed.stdout + failed.stderr
    none = run_cli_here(["check", str(out), "--expect", "NVLink=0.5"])
    assert none.returncode == 2 and "no verdict" in none.stdout + none.stderr, none.stdout + none.stderr
    report = run_cli_here(["report", str(out), "--expect", "all=0.99"])  # the report's verdict on the same figure
    assert report.returncode == 1 and "verdict: FAIL" in report.stderr, report.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--expect", "NVLink=1.5"], "above 0 and at most 1"),
        (["--expect", "rack=0.5"], "unknown limit kind or link class 'rack'"),
        (["--expect", "NVLink"], "give KIND=SHARE"),
        ([], "give --expect"),
        (["--baseline", "ANCHOR"], "no usable results files"),
    ],
)
def test_bad_verdict_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    doc = _write(tmp_path / "gpus.json", _gpu_doc({(0, 1): 0.8}))
    anchor = _write(tmp_path / "anchor.json", {"schema": {"name": "rdmabench-anchor", "version": 1}, "rows": []})
    args = [str(anchor) if a == "ANCHOR" else a for a in args]
    proc = run_cli_here(["check", str(doc), *args])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


def test_failing_inter_node_links_name_the_nic_of_each_end(tmp_path: Path) -> None:
    """Generated: GPUs of two nodes over 400G ports; the links through n2's mlx5_1 fall short."""
    doc = _gpu_doc({(0, 2): 0.9, (1, 3): 0.9, (2, 0): 0.9, (3, 1): 0.5})
    limit = {"gbps": 50.0, "kind": "NIC", "detail": "400 Gb/sec (4X NDR)", "measured": False}
    for entry in doc["results"]:
        src_node, dst_node = ("n1", "n2") if entry["src_rank"] < 2 else ("n2", "n1")
        rails = {0: "mlx5_0:1", 1: "mlx5_1:1", 2: "mlx5_0:1", 3: "mlx5_1:1"}
        entry.update(
            src_host=src_node, dst_host=dst_node, link_limit=limit, transport="rc_mlx5/mlx5_0:1",
            src_nic=rails[entry["src_rank"]], dst_nic=rails[entry["dst_rank"]],
            bandwidth_gbps=entry["share_of_limit"] * 50.0, samples=[entry["share_of_limit"] * 50.0] * 3,
        )  # fmt: skip
    summary = tmp_path / "nic.json"
    proc = run_cli_here(
        ["check", str(_write(tmp_path / "nics.json", doc)), "--expect", "NIC=0.8", "--json", str(summary)]
    )
    assert proc.returncode == 1, proc.stderr
    verdict = json.loads(summary.read_text())
    assert verdict["nics"] == {"n1/mlx5_1:1": 1, "n2/mlx5_1:1": 1}
    assert "failing nics: n1/mlx5_1:1 (1 link(s)), n2/mlx5_1:1 (1 link(s))" in proc.stdout
