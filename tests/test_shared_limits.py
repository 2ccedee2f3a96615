"""Limits of what a concurrent pattern's links share: NVSwitch-attached GPUs, PCIe, NICs, a host's
memory copies (topologies built from the real dataclasses), and a real fan-out's aggregate."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmabench.hardware import limits, shared, topology
from rdmabench.results.files.document import load as load_results

from .conftest import run_cli

BUSES = ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0"]


def _gpus(nvswitch: bool, host: str = "n1") -> list[limits.RankTopology]:
    ranks = []
    for index, bus in enumerate(BUSES):
        gpu = topology.GpuTopology(index=index, pci_bus_id=bus, pcie=topology.PcieLink(5, 16), nvswitch=nvswitch)
        for peer in BUSES:
            if peer != bus:
                gpu.nvlinks[peer] = topology.NvLink(18 if nvswitch else 6, 6)
        ranks.append(limits.RankTopology(rank=index, host=host, gpu=gpu, cpu_numa_nodes=[0]))
    return ranks


def _bound(ranks: list[limits.RankTopology], pairs: list[tuple[int, int]], mode: str = "device") -> limits.Limit:
    links = []
    for src, dst in pairs:
        own, _ = limits.link_limit(ranks[src], ranks[dst], mode, mode, host_copy=12.0)
        links.append((shared.resources(ranks[src], ranks[dst], mode, mode, 12.0), own.gbps if own else None))
    bound = shared.aggregate_limit(links)
    assert bound is not None
    return bound


def test_a_fan_out_behind_nvswitch_is_bounded_by_the_source_gpus_nvlink_egress() -> None:
    bound = _bound(_gpus(nvswitch=True), [(0, 1), (0, 2), (0, 3)])
    assert bound.kind == "NVLink" and bound.gbps == pytest.approx(topology.NvLink(18, 6).gbps)
    assert "egress of GPU 0" in bound.detail and "shared by 3 of the 3 links" in bound.detail


def test_an_incast_behind_nvswitch_is_bounded_by_the_destinations_ingress() -> None:
    bound = _bound(_gpus(nvswitch=True), [(1, 0), (2, 0), (3, 0)])
    assert "ingress of GPU 0" in bound.detail and bound.gbps == pytest.approx(topology.NvLink(18, 6).gbps)


def test_a_ring_shares_nothing_and_direct_links_are_per_pair() -> None:
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]
    switched = _bound(_gpus(nvswitch=True), ring)
    assert switched.kind == "links" and switched.gbps == pytest.approx(4 * topology.NvLink(18, 6).gbps)
    direct = _bound(_gpus(nvswitch=False), [(0, 1), (0, 2), (0, 3)])  # a mesh: each pair its own links
    assert direct.kind == "links" and direct.gbps == pytest.approx(3 * topology.NvLink(6, 6).gbps)


def test_host_memory_links_of_one_host_share_its_memory_copies() -> None:
    ranks = [limits.RankTopology(rank=i, host="n1", gpu=None, cpu_numa_nodes=[0]) for i in range(4)]
    bound = _bound(ranks, [(0, 1), (0, 2), (0, 3)], mode="pageable")
    assert bound.kind == "host memory copy" and bound.gbps == 12.0 and "shared by 3" in bound.detail


def test_an_incast_between_hosts_is_bounded_by_the_destinations_nic() -> None:
    nic = topology.NicPort("eth0", "ethernet", 12.5, "100 Gb/s", 0)
    ranks = [limits.RankTopology(rank=i, host=f"n{i}", gpu=None, cpu_numa_nodes=[0], nics=[nic]) for i in range(4)]
    bound = _bound(ranks, [(1, 0), (2, 0), (3, 0)], mode="pageable")
    assert bound.kind == "NIC" and bound.gbps == 12.5 and "ingress on n0" in bound.detail


def test_a_real_fan_out_gets_a_limit_and_a_share(tmp_path: Path) -> None:
    """Two links of messages as large as the host's memory copy's buffers keep (at both ends) twice
    its bytes in flight: the copy bounds them; at 1 MiB they may run from the cache, and nothing does."""
    out = tmp_path / "r.json"
    large = topology.probe_bytes(topology.last_level_cache_bytes())
    args = ["run", "--np", "3", "--pattern", "fan-out", "--root", "0", "--sizes", f"1MiB,{large}", "--samples", "2"]
    proc = run_cli([*args, "--sample-time", "0.02", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    entries = load_results(str(out))["results"]
    assert len(entries) == 4
    for entry in entries:
        if entry["size_bytes"] == 1 << 20:
            assert "pattern_limit" not in entry and entry["link_limit_unknown"].startswith("cache regime")
            continue
        limit = entry["pattern_limit"]
        assert limit["kind"] == "host memory copy" and "shared by 2 of the 2 links" in limit["detail"]
        assert entry["pattern_share_of_limit"] == pytest.approx(
            entry["pattern_aggregate_gbps"] / limit["gbps"], rel=1e-3
        )
    assert "aggregate (" in proc.stdout and "host memory copy" not in proc.stderr
