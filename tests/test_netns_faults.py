"""A fault planted in a real namespace cluster (four hosts, one rail each; launch/netns-cluster.sh
as tests/test_multinode_netns.py builds it) is named by `check`, and its host drained; a healthy
cluster has no suspect. Every interface runs at one line rate (tc, devtools/netns.py), so that a link
is held by its wire and not by the cores the namespaces share; one host's interface sends at half
of it. Root only: skipped, saying why, elsewhere."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.netns import NamespaceCluster, Planted
from devtools.netns_trials import netns_plan

from .conftest import free_netns_subnet, rdmabench_env, run_cli
from .test_multinode_netns import SCRIPT, Cluster, _why_not

PREFIX = f"rf{os.getpid() % 100000}"
SUBNET = free_netns_subnet(150, 199, rails=1)  # 10.213.<SUBNET>.0/24: apart from the other namespace tests
HOSTS = 4
LINE = 200e6  # bits/s on every interface: far below what a link reaches unpaced here (1-2 Gbit/s)
SCREEN = ["--pattern", "screen", "--sizes", "256KiB", "--window", "8", "--samples", "4", "--warmup", "1"]
SCREEN += ["--sample-time", "0.1", "--remeasure-below", "0", "--progress", "rounds"]


@pytest.fixture
def paced(private_cache: Path) -> Iterator[tuple[Cluster, NamespaceCluster]]:
    """Four namespace hosts of one rail (test_multinode_netns's Cluster builds and removes them), and
    the same namespaces as devtools.netns sees them, to pace; what their runs keep goes to the
    session's cache."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    names = {"RDMABENCH_NETNS_PREFIX": PREFIX, "RDMABENCH_NETNS_SUBNET": str(SUBNET)}
    made = Cluster(rdmabench_env(**names, RDMABENCH_CACHE_DIR=str(private_cache)))
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
    assert lines[-1] == f"drain list: {drain} ({PREFIX}-h2: 1 of {HOSTS} hosts)"
    assert f'scontrol update NodeName={PREFIX}-h2 State=DRAIN Reason="rdmabench: nic eth0 send at' in drain.read_text()


def test_a_healthy_namespace_cluster_has_no_suspect(paced: tuple[Cluster, NamespaceCluster], tmp_path: Path) -> None:
    cluster, namespaces = paced
    namespaces.pace(LINE, Planted("none"))
    out = tmp_path / "screen.json"
    _screen(cluster, out)
    proc = run_cli(["check", str(out), "--expect", "default"], env=cluster.env)
    # No broken part is named. Namespace links on a loaded machine can leave one figure just under its
    # class floor: at most that is a link to measure again (REMEASURE, exit 3), never a suspect.
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"no suspect: {HOSTS * (HOSTS - 1)} link(s) judged against their class")
    assert proc.stdout.splitlines()[-1] in (
        "verdict: PASS",
        "verdict: REMEASURE (measure the links above again: one slow figure is no broken part)",
    )


def test_the_trial_plan_is_a_fifth_healthy_and_meets_every_kind_at_every_share() -> None:
    plan = netns_plan(30, hosts=8, rails=2, seed=1, quota=0.1, busy=1)
    assert plan == netns_plan(30, hosts=8, rails=2, seed=1, quota=0.1, busy=1)  # a seed is a plan
    kinds = Counter(fault.kind for fault in plan)
    assert kinds == {"none": 6, "host": 6, "nic": 6, "pair": 6, "cpu": 6}
    paced = Counter((fault.kind, fault.factor) for fault in plan if fault.kind in ("host", "nic", "pair"))
    assert set(paced.values()) == {2} and {factor for _kind, factor in paced} == {0.5, 0.75, 0.9}
    assert all(fault.peer != fault.host for fault in plan if fault.kind == "pair")
    assert all(0 <= fault.host < 8 and 0 <= fault.rail < 2 for fault in plan)


def test_a_trial_is_scored_on_the_planted_part_and_a_cpu_fault_on_its_host() -> None:
    assert Planted("nic", 3, 1, "receive").component("p") == "nic p-h3:eth1 receive"
    assert Planted("pair", 5, peer=2).component("p") == "pair p-h2 <-> p-h5"
    assert Planted("host", 3, direction="send").named_by("host p-h3 send", "p")
    assert not Planted("host", 3, direction="send").named_by("host p-h3 both", "p")
    cpu = Planted("cpu", 3, busy=1, quota=0.1)
    assert cpu.named_by("host p-h3 send", "p") and cpu.named_by("host p-h3 both", "p")
    assert not cpu.named_by("rank p-h3:rank6 send", "p") and not cpu.named_by(None, "p")
    assert Planted("none").named_by(None, "p") and not Planted("none").named_by("host p-h1 send", "p")
    assert cpu.drained("p") == ["p-h3"] and Planted("pair", 1, peer=2).drained("p") == []
