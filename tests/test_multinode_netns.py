"""Several hosts on one machine: network namespaces with their own hostnames, joined by veth links,
with Open MPI starting its daemons in them as over ssh (launch/netns-cluster.sh). Links between the
namespaces carry real traffic through the kernel's network stack, and rdmabench labels them
inter-node. Skipped, with the reason, where the machine does not allow namespaces."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmabench.results.document import load as load_results

from .conftest import mpiexec, rdmabench_env

SCRIPT = Path(__file__).resolve().parents[1] / "launch" / "netns-cluster.sh"
PREFIX = f"rb{os.getpid() % 100000}"


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    from rdmabench.job.spawner import mpiexec_flavor

    if mpiexec_flavor(mpiexec()) != "openmpi":
        return "the namespace launch uses Open MPI's ssh agent"
    probe = subprocess.run(["ip", "netns", "add", f"{PREFIX}-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"this machine forbids network namespaces: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"{PREFIX}-probe"], capture_output=True)
    return None


@pytest.fixture
def two_hosts() -> Iterator[dict[str, str]]:
    reason = _why_not()
    if reason:
        print(f"namespace multi-node test skipped: {reason}")
        pytest.skip(reason)
    env = rdmabench_env(RDMABENCH_NETNS_PREFIX=PREFIX)
    up = subprocess.run([str(SCRIPT), "up", "2"], capture_output=True, text=True, env=env)
    try:
        if up.returncode != 0:
            pytest.skip(f"could not build the namespaces: {up.stderr.strip()}")
        yield env
    finally:
        subprocess.run([str(SCRIPT), "down", "2"], capture_output=True, env=env)


def _tx_bytes(interface: str) -> int:
    return int(Path(f"/sys/class/net/{interface}/statistics/tx_bytes").read_text())


def test_links_between_namespaces_are_inter_node_and_cross_the_veth_network(
    two_hosts: dict[str, str], tmp_path: Path
) -> None:
    env = dict(two_hosts, UCX_TLS="tcp,self", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    options = subprocess.run(
        [str(SCRIPT), "mpiexec-options", "2", "2"], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    out = tmp_path / "netns.json"
    before = [_tx_bytes(f"{PREFIX}-v{i}") for i in (0, 1)]
    command = [mpiexec(), "-n", "4", *options, sys.executable, "-m", "rdmabench", "run", "--pattern", "all-pairs"]
    command += ["--sizes", "64KiB", "--samples", "2", "--sample-time", "0.005", "-o", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    sent = sum(_tx_bytes(f"{PREFIX}-v{i}") - before[i] for i in (0, 1))
    doc = load_results(str(out))
    assert doc["metadata"]["hosts"] == [f"{PREFIX}-h0", f"{PREFIX}-h1"]
    entries = doc["results"]
    assert len(entries) == 12
    inter = [e for e in entries if e["src_host"] != e["dst_host"]]
    assert len(inter) == 8 and all(e["link"] == "inter-node" for e in inter)
    assert all(e["transport"] == "tcp/eth0" and e["validated"] for e in inter)
    assert all(e["link_limit"] is None and "NIC" in e["link_limit_unknown"] for e in inter)  # veth has no rate
    moved = sum(e["size_bytes"] * e["messages_per_sample"] * len(e["samples"]) for e in inter)
    assert sent >= moved  # the inter-node bytes really went through the veth links
