"""Link limits, shares and path warnings, from topologies and UCX reports written out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rdmabench.hardware import limits, topology
from rdmabench.hardware.pathcheck import is_device_path_warning, path_warnings

GPU0, GPU1 = "0000:19:00.0", "0000:3b:00.0"


def _rank(
    rank: int, host: str, gpu_bus: str | None = None, nvlink_to: str | None = None, nics: Any = ()
) -> limits.RankTopology:
    gpu = None
    if gpu_bus:
        gpu = topology.GpuTopology(index=rank, pci_bus_id=gpu_bus, pcie=topology.PcieLink(5, 16, 5, 16), numa_node=0)
        if nvlink_to:
            gpu.nvlinks[nvlink_to] = topology.NvLink(18, 6)  # NVML code 6 = NVLink 4
    return limits.RankTopology(rank=rank, host=host, gpu=gpu, cpu_numa_nodes=[0], nics=list(nics))


def test_units_of_links() -> None:
    assert topology.PcieLink(5, 16).gbps == pytest.approx(63.0, abs=0.1)
    assert topology.PcieLink(4, 16).gbps == pytest.approx(31.5, abs=0.1)
    assert topology.NvLink(18, 6).gbps == pytest.approx(478.1, abs=0.1)  # H100/H200: NV18, NVML code 6
    assert "18 x NVLink 4 at 26.5625" in topology.NvLink(18, 6).describe()
    assert "below its best" in topology.PcieLink(4, 8, 5, 16).describe()
    assert topology.normalize_bus_id("00000000:19:00.0") == "0000:19:00.0"


def test_device_to_device_over_nvlink() -> None:
    a, b = _rank(0, "n1", GPU0, nvlink_to=GPU1), _rank(1, "n1", GPU1, nvlink_to=GPU0)
    limit, reason = limits.link_limit(a, b, "device", "device", host_copy=10.0)
    assert reason is None and limit is not None
    assert limit.kind == "NVLink" and "18 x NVLink 4" in limit.detail
    share, warning = limits.judge(370.0, limit)
    assert share == pytest.approx(370.0 / limit.gbps)
    assert warning is None


def test_host_to_device_is_bound_by_the_gpus_pcie_link() -> None:
    a, b = _rank(0, "n1"), _rank(1, "n1", GPU1)
    limit, _ = limits.link_limit(a, b, "pinned", "device", host_copy=10.0)
    assert limit is not None and limit.kind == "PCIe" and "Gen5 x16" in limit.detail


def test_staged_device_memory_is_bound_by_pcie_and_the_host_copy() -> None:
    a, b = _rank(0, "n1", GPU0, nvlink_to=GPU1), _rank(1, "n1", GPU1, nvlink_to=GPU0)
    limit, _ = limits.link_limit(a, b, "staged", "staged", host_copy=10.0)  # NVLink is never used
    assert limit is not None and limit.kind == "host memory copy" and limit.gbps == 10.0
    limit, _ = limits.link_limit(a, b, "bounce", "bounce", host_copy=100.0)
    assert limit is not None and limit.kind == "PCIe"
    limit, _ = limits.link_limit(a, b, "staged", "device", host_copy=10.0)  # UCX carries host to GPU
    assert limit is not None and limit.kind == "PCIe"
    # UCX moves managed memory GPU to GPU (CUDA fragments over CUDA IPC), as measured on two H200s.
    limit, reason = limits.link_limit(a, b, "managed", "managed", host_copy=10.0)
    assert limit is not None and limit.kind == "NVLink", reason
    limit, reason = limits.link_limit(a, b, "managed", "pinned", host_copy=10.0)
    assert limit is not None and limit.kind == "PCIe", reason
    limit, reason = limits.link_limit(a, _rank(1, "n1"), "staged", "pinned", host_copy=None)
    assert limit is None and reason == "host memory copy not measured"


def test_without_nvlink_peer_traffic_is_bound_by_pcie() -> None:
    limit, _ = limits.link_limit(_rank(0, "n1", GPU0), _rank(1, "n1", GPU1), "device", "device", None)
    assert limit is not None and limit.kind == "PCIe" and "peer-to-peer" in limit.detail


def test_same_gpu_and_unknown_limits_say_why() -> None:
    limit, reason = limits.link_limit(_rank(0, "n1", GPU0), _rank(1, "n1", GPU0), "device", "device", None)
    assert limit is None and "same GPU" in (reason or "")
    limit, reason = limits.link_limit(_rank(0, "n1"), _rank(1, "n1"), "pageable", "pageable", None)
    assert limit is None and reason


def test_host_to_host_uses_the_measured_copy_with_slack() -> None:
    limit, _ = limits.link_limit(_rank(0, "n1"), _rank(1, "n1"), "pinned", "pageable", host_copy=10.0)
    assert limit is not None and limit.measured and limit.kind == "host memory copy"
    assert limits.judge(11.0, limit) == (pytest.approx(1.1), None)


def test_a_figure_above_the_limit_is_an_error_not_a_record() -> None:
    a, b = _rank(0, "n1", GPU0, nvlink_to=GPU1), _rank(1, "n1", GPU1)
    limit, _ = limits.link_limit(a, b, "device", "device", None)
    assert limit is not None
    share, warning = limits.judge(900.0, limit)
    assert share is None and warning is not None and "measurement error" in warning


def test_between_nodes_the_slower_nic_or_pcie_bounds() -> None:
    fast = topology.NicPort("mlx5_0:1", "infiniband", 50.0, "400 Gb/sec (4X NDR)", 0)
    slow = topology.NicPort("mlx5_0:1", "infiniband", 25.0, "200 Gb/sec (4X HDR)", 0)
    limit, _ = limits.link_limit(
        _rank(0, "n1", GPU0, nics=[fast]), _rank(1, "n2", GPU1, nics=[slow]), "device", "device", None
    )
    assert limit is not None and limit.kind == "NIC" and limit.gbps == 25.0
    limit, reason = limits.link_limit(_rank(0, "n1"), _rank(1, "n2"), "pageable", "pageable", None)
    assert limit is None and "NIC" in (reason or "")


@pytest.mark.parametrize(
    ("entry", "same_host", "expect"),
    [
        (
            dict(
                src_mode="pageable",
                dst_mode="pageable",
                transport="cma/memory",
                protocol="rendezvous zero-copy read from remote",
            ),
            True,
            None,
        ),
        (
            dict(src_mode="pageable", dst_mode="pageable", transport="tcp/lo", protocol="eager short"),
            True,
            "not shared memory",
        ),
        (
            dict(
                src_mode="device",
                dst_mode="device",
                transport="cuda_ipc/cuda",
                protocol="zero-copy read from remote",
                ucx_report={"decided_by": "rendezvous data fetch"},
            ),
            True,
            None,
        ),
        (
            dict(
                src_mode="device",
                dst_mode="device",
                transport="cma/memory",
                protocol="(?) rendezvous zero-copy read from remote",
            ),
            True,
            "without CUDA IPC",
        ),
        (
            dict(src_mode="device", dst_mode="device", transport="sysv/memory", protocol="eager copy-in copy-out"),
            True,
            None,
        ),
        (
            dict(
                src_mode="device",
                dst_mode="device",
                transport="rc_mlx5/mlx5_0:1",
                protocol="rendezvous zero-copy read from remote",
            ),
            False,
            None,
        ),
        (
            dict(
                src_mode="device",
                dst_mode="device",
                transport="rc_mlx5/mlx5_0:1",
                protocol="pipeline cuda_copy, write to remote, frag host",
                ucx_report={"decided_by": "rendezvous data send"},
            ),
            False,
            "GPUDirect RDMA not used",
        ),
        (
            dict(
                src_mode="device",
                dst_mode="pinned",
                transport="tcp/eth0",
                protocol="(?) rendezvous fragmented copy-in copy-out",
            ),
            False,
            "GPUDirect RDMA not used",
        ),
        (dict(src_mode="pageable", dst_mode="pageable", transport=None, protocol=None), True, "did not report"),
        # Managed memory over CUDA IPC is a GPU path (measured on two H200s), not host memory gone astray.
        (
            dict(
                src_mode="managed",
                dst_mode="managed",
                transport="cuda_ipc/cuda",
                protocol="pipeline cuda_copy, flushed write to remote, frag cuda, cuda_copy, frag cuda",
            ),
            True,
            None,
        ),
        # Staged modes hand UCX pinned host memory: shared memory is expected, and it is no GPUDirect miss.
        (dict(src_mode="staged", dst_mode="staged", transport="cma/memory", protocol="rendezvous"), True, None),
        (dict(src_mode="bounce", dst_mode="bounce", transport="tcp/lo", protocol="rendezvous"), True, "not shared"),
    ],
)
def test_path_warnings(entry: dict[str, Any], same_host: bool, expect: str | None) -> None:
    warnings = path_warnings(entry, same_host)
    if expect is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and expect in warnings[0]
        assert is_device_path_warning(warnings[0]) == ("GPUDirect" in expect or "CUDA IPC" in expect)


def test_the_wire_check_catches_tcp_over_loopback_between_ranks_of_one_host(tmp_path: Path) -> None:
    """UCX_TLS without shared memory: the bytes are counted on lo (and the path check names it); with
    shared memory there is no counter, and no figure is invented."""
    from rdmabench.results.document import load as load_results

    from .conftest import rdmabench_env, run_cli

    base = ["run", "--np", "2", "--sizes", "4MiB", "--samples", "2", "--sample-time", "0.02"]
    forced = run_cli([*base, "-o", str(tmp_path / "tcp.json")], env=rdmabench_env(UCX_TLS="tcp,self"))
    assert forced.returncode == 0, forced.stderr
    (entry,) = load_results(str(tmp_path / "tcp.json"))["results"]
    assert entry["transport"] == "tcp/lo" and entry["wire"]["dev"] == "lo", entry.get("wire")
    assert 1.0 <= entry["wire"]["ratio"] <= 1.5 and any("tcp/lo" in w for w in entry["warnings"])
    normal = run_cli([*base, "-o", str(tmp_path / "shm.json")])
    assert normal.returncode == 0, normal.stderr
    (entry,) = load_results(str(tmp_path / "shm.json"))["results"]
    assert "wire" not in entry and not entry["transport"].startswith("tcp")
