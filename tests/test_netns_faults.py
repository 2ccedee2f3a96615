"""A fault planted in a real namespace cluster (four hosts, one rail each; launch/netns-cluster.sh
as tests/test_multinode_netns.py builds it) is named by `check`, and its host drained; a healthy
cluster has no suspect. Every interface runs at one line rate (tc, bench/netns.py), so that a link
is held by its wire and not by the cores the namespaces share; one host's interface sends at half
of it. Root only: skipped, saying why, elsewhere."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmabench.bench.netns import NamespaceCluster, Planted

from .conftest import rdmabench_env, run_cli
from .test_multinode_netns import SCRIPT, Cluster, _why_not

PREFIX = f"rf{os.getpid() % 100000}"
SUBNET = 150 + os.getpid() % 50  # 10.213.<SUBNET>.0/24: apart from the other namespace tests' 10.213.0.0/24
HOSTS = 4
LINE = 200e6  # bits/s on every interface: far below what a link reaches unpaced here (1-2 Gbit/s)
SCREEN = ["--pattern", "screen", "--sizes", "256KiB", "--window", "8", "--samples", "4", "--warmup", "1"]
SCREEN += ["--sample-time", "0.1", "--remeasure-below", "0", "--progress", "rounds"]


@pytest.fixture
def paced() -> Iterator[tuple[Cluster, NamespaceCluster]]:
    """Four namespace hosts of one rail (test_multinode_netns's Cluster builds and removes them), and
    the same namespaces as bench.netns sees them, to pace."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    made = Cluster(rdmabench_env(RDMABENCH_NETNS_PREFIX=PREFIX, RDMABENCH_NETNS_SUBNET=str(SUBNET)))
    try:
        made.up(HOSTS)
        yield made, NamespaceCluster(HOSTS, 1, PREFIX, SUBNET)
    finally:
        if made.count:
            subprocess.run([str(SCRIPT), "down", str(made.count)], capture_output=True, env=made.env)


def _screen(cluster: Cluster, out: Path) -> None:
    proc = cluster.run(1, [*SCREEN, "-o", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_host_sending_at_half_its_line_rate_is_named_and_drained(
    paced: tuple[Cluster, NamespaceCluster], tmp_path: Path
) -> None:
    cluster, namespaces = paced
    fault = Planted("nic", host=2, rail=0, direction="send", factor=0.5)  # one rail: the host's one interface
    namespaces.pace(LINE, fault)
    out, drain = tmp_path / "screen.json", tmp_path / "drain.txt"
    _screen(cluster, out)
    proc = run_cli(["check", str(out), "--expect", "default", "--drain", str(drain)], env=cluster.env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"suspect 1: nic {PREFIX}-h2:eth0 send: 3 of 3 link(s) slow, at "), proc.stdout
    assert fault.named_by(lines[0].split(": ")[1], PREFIX)
    assert not any(line.startswith("suspect 2") for line in lines)
    assert lines[-1] == f"drain list: {drain} ({PREFIX}-h2)"
    assert f'scontrol update NodeName={PREFIX}-h2 State=DRAIN Reason="rdmabench: nic eth0 send at' in drain.read_text()


def test_a_healthy_namespace_cluster_has_no_suspect(paced: tuple[Cluster, NamespaceCluster], tmp_path: Path) -> None:
    cluster, namespaces = paced
    namespaces.pace(LINE, Planted("none"))
    out = tmp_path / "screen.json"
    _screen(cluster, out)
    proc = run_cli(["check", str(out), "--expect", "default"], env=cluster.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"no suspect: {HOSTS * (HOSTS - 1)} link(s) judged against their class")
    assert proc.stdout.splitlines()[-1] == "verdict: PASS"
