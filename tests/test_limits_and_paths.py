"""Link limits, shares and path warnings, from topologies and UCX reports written out by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from rdmabench.hardware import limits, topology
from rdmabench.hardware.pathcheck import is_device_path_warning, path_warnings
from rdmabench.results.files.document import load as load_results

from .conftest import run_cli

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


def _sysfs_cache(root: Path, sizes: dict[int, str]) -> None:
    """A CPU's cache folder as sysfs writes it: index per cache, its level, type and size."""
    caches = [(1, "Data", sizes[1]), (1, "Instruction", sizes[1])] + [
        (lv, "Unified", sizes[lv]) for lv in sizes if lv > 1
    ]
    for index, (level, kind, size) in enumerate(caches):
        folder = root / "cpu0" / "cache" / f"index{index}"
        folder.mkdir(parents=True)
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")


def test_the_last_level_cache_is_read_from_sysfs(tmp_path: Path) -> None:
    _sysfs_cache(tmp_path / "three", {1: "48K", 2: "2048K", 3: "107520K"})  # an H100 host's Xeon
    assert topology.last_level_cache_bytes(str(tmp_path / "three")) == 107520 << 10
    _sysfs_cache(tmp_path / "two", {1: "32K", 2: "1M"})
    assert topology.last_level_cache_bytes(str(tmp_path / "two")) == 1 << 20
    assert topology.last_level_cache_bytes(str(tmp_path / "none")) is None
    # The memory copy's buffers: each as large as the cache, within bounds; the largest when unknown.
    assert topology.probe_bytes(107520 << 10) == 107520 << 10
    assert topology.probe_bytes(1 << 20) == topology.PROBE_MIN_BYTES
    assert topology.probe_bytes(None) == topology.PROBE_MAX_BYTES == topology.probe_bytes(1 << 40)


def _this_hosts_copy(gbps: float) -> topology.HostCopy:
    """A memory copy of `gbps` measured as this host would measure it: beyond its cache (read from
    sysfs; 105 MiB, an H200 host's, where unreadable)."""
    cache = topology.last_level_cache_bytes() or 105 << 20
    return topology.HostCopy(gbps, topology.probe_bytes(cache), cache)


def test_a_copy_that_may_run_from_the_cache_is_no_measurement_error() -> None:
    """A 4 MiB put over cma on an H200 host ran 13.1 GB/s against a copy measured at 9.37 GB/s: a
    copy that may run from the cache has no known limit, and says so; the same figure with as many
    bytes in flight as the measuring copy kept is an error."""
    copy = _this_hosts_copy(9.37)
    a, b = _rank(0, "n1"), _rank(1, "n1")
    assert copy.cache_bytes is not None
    for in_flight in (2 * (4 << 20), copy.cache_bytes // 2):  # a 4 MiB message at each end; half the cache
        limit, reason = limits.link_limit(a, b, "pageable", "pageable", copy, in_flight)
        assert limit is None and reason is not None and reason.startswith(limits.CACHE_REGIME), reason
        assert "within the cache" in reason and "9.4 GB/s" in reason and "no limit is known" in reason
    # Between the cache and the measuring copy's bytes: not surely beyond the cache, not judged as such.
    limit, reason = limits.link_limit(a, b, "pageable", "pageable", copy, copy.in_flight - 1)
    assert limit is None and "fewer than the measuring copy" in (reason or "")
    limit, _ = limits.link_limit(a, b, "pageable", "pageable", copy, copy.in_flight)
    assert limit is not None and limit.regime == limits.MEMORY and "memory regime" in limit.detail
    assert limit.to_dict()["regime"] == "memory" and limit.kind == "host memory copy"
    share, warning = limits.judge(13.1, limit)
    assert share is None and warning is not None and "measurement error, not a record" in warning
    # The same figure above a limit kept from an earlier run of this boot: the kept limit is suspect first.
    kept = dataclasses.replace(limit, provenance="cached from 2026-11-26T20:20:28Z on this boot")
    share, warning = limits.judge(13.1, kept)
    assert share is None and warning is not None and "may be from a busier moment" in warning
    assert "else a measurement error" in warning


def test_a_cached_copy_is_bound_by_the_other_links_it_crosses() -> None:
    a, b = _rank(0, "n1", GPU0), _rank(1, "n1", GPU1)
    copy = _this_hosts_copy(9.37)  # below the GPUs' PCIe Gen5 x16 (63 GB/s)
    limit, _ = limits.link_limit(a, b, "staged", "staged", copy, 2 * copy.in_flight)
    assert limit is not None and limit.kind == "host memory copy"
    limit, _ = limits.link_limit(a, b, "staged", "staged", copy, 1 << 20)
    assert limit is not None and limit.kind == "PCIe"


@pytest.fixture(scope="module")
def shared_memory_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """One run over shared memory, 64 KiB and 4 MiB: the regime test's and the wire check's."""
    path = tmp_path_factory.mktemp("shm") / "shm.json"
    proc = run_cli(
        ["run", "--np", "2", "--sizes", "64KiB,4MiB", "--samples", "2", "--sample-time", "0.02", "-o", str(path)]
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, load_results(str(path))


def test_a_real_run_says_which_regime_its_limit_is_in(shared_memory_run: tuple[str, dict[str, Any]]) -> None:
    stdout, doc = shared_memory_run
    measured = next(t for t in doc["metadata"]["topology"] if t["host_copy_gbps"])
    assert measured["host_copy_bytes"] >= topology.PROBE_MIN_BYTES
    assert measured["last_level_cache_bytes"] == topology.last_level_cache_bytes()
    (entry,) = [e for e in doc["results"] if e["size_bytes"] == 64 << 10]
    assert entry["link_limit"] is None and entry["link_limit_unknown"].startswith("cache regime: this link keeps")
    assert entry.get("share_of_limit") is None and not any("measurement error" in w for w in entry["warnings"])
    assert "in cache" in stdout  # the table's share column names the regime


def test_between_nodes_the_slower_nic_or_pcie_bounds() -> None:
    fast = topology.NicPort("mlx5_0:1", "infiniband", 50.0, "400 Gb/sec (4X NDR)", 0)
    slow = topology.NicPort("mlx5_0:1", "infiniband", 25.0, "200 Gb/sec (4X HDR)", 0)
    limit, _ = limits.link_limit(
        _rank(0, "n1", GPU0, nics=[fast]), _rank(1, "n2", GPU1, nics=[slow]), "device", "device", None
    )
    assert limit is not None and limit.kind == "NIC" and limit.gbps == 25.0
    limit, reason = limits.link_limit(_rank(0, "n1"), _rank(1, "n2"), "pageable", "pageable", None)
    assert limit is None and "NIC" in (reason or "")


# (an entry's transport and protocol, whether its ends share a host, the warning expected or None)
PATH_CASES: list[tuple[dict[str, Any], bool, str | None]] = [
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
]


@pytest.mark.parametrize(("entry", "same_host", "expect"), PATH_CASES)
def test_path_warnings(entry: dict[str, Any], same_host: bool, expect: str | None) -> None:
    warnings = path_warnings(entry, same_host)
    if expect is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and expect in warnings[0]
        assert is_device_path_warning(warnings[0]) == ("GPUDirect" in expect or "CUDA IPC" in expect)


def test_the_wire_check_catches_tcp_over_loopback_between_ranks_of_one_host(
    tmp_path: Path, shared_memory_run: tuple[str, dict[str, Any]]
) -> None:
    """UCX_TLS without shared memory: the bytes are counted on lo (and the path check names it); with
    shared memory there is no counter, and no figure is invented."""
    from rdmabench.results.files.document import load as load_results

    from .conftest import rdmabench_env

    base = ["run", "--np", "2", "--sizes", "4MiB", "--samples", "2", "--sample-time", "0.02"]
    forced = run_cli([*base, "-o", str(tmp_path / "tcp.json")], env=rdmabench_env(UCX_TLS="tcp,self"))
    assert forced.returncode == 0, forced.stderr
    (entry,) = load_results(str(tmp_path / "tcp.json"))["results"]
    assert entry["transport"] == "tcp/lo" and entry["wire"]["dev"] == "lo", entry.get("wire")
    assert 1.0 <= entry["wire"]["ratio"] <= 1.5 and any("tcp/lo" in w for w in entry["warnings"])
    _stdout, normal = shared_memory_run  # the same 4 MiB over shared memory
    (entry,) = [e for e in normal["results"] if e["size_bytes"] == 4 << 20]
    assert "wire" not in entry and not entry["transport"].startswith("tcp")


@pytest.mark.parametrize(
    "limit",
    [
        limits.Limit(46.0, "NVLink", "NVLink between GPU 0 and GPU 1"),
        limits.Limit(12.5, "host memory copy", "one core's copy", True, "memory", "measured"),
        limits.Limit(25.0, "NIC", "mlx5_0", provenance="cached from 2026-11-26T00:00:00Z on this boot"),
    ],
)
def test_a_limits_record_is_its_fields_in_order_the_unset_optional_ones_left_out(limit: limits.Limit) -> None:
    """Limit.to_dict (a LimitRecord, an entry's link_limit and pattern_limit): the dataclass's fields in
    their order, regime and provenance only where set, as the file has always held them."""
    expected = {name: value for name, value in dataclasses.asdict(limit).items()}
    for optional in ("regime", "provenance"):
        if expected[optional] is None:
            del expected[optional]
    assert list(limit.to_dict().items()) == list(expected.items())


def test_a_ranks_topology_record_is_what_asdict_wrote_field_for_field_in_order() -> None:
    """RankTopology.to_dict and the records in it (RankRecord, GpuTopologyRecord, PcieRecord, NicPortRecord,
    NicRecord, GpuRecord: a results file's metadata) hold every field of their dataclasses in order, as
    dataclasses.asdict wrote them before they were typed, with pcie_gbps after a GPU's own fields."""
    from rdmabench.hardware.gpu import GpuInfo
    from rdmabench.hardware.nics import NicChoice

    pcie = topology.PcieLink(4, 16, 5, 16)
    gpu = topology.GpuTopology(0, "0000:19:00.0", pcie, 1, {"0000:3b:00.0": topology.NvLink(18, 4)}, True)
    port = topology.NicPort("mlx5_0:1", "infiniband", 50.0, "400 Gb/sec (4X NDR)", 1)
    nic = NicChoice("mlx5_0:1", "the GPU's closest port", 1, True)
    copy = topology.HostCopy(9.4, 1 << 27, 1 << 25, "2026-11-26T17:57:56Z", cached=True)
    rank = limits.RankTopology(1, "node-a", gpu, [0, 1], "0-15", [port], copy, nic)
    expected_gpu = dataclasses.asdict(gpu) | {"pcie_gbps": pcie.gbps}
    record = rank.to_dict()
    assert list(record["gpu"].items()) == list(expected_gpu.items())
    assert record["nics"] == [dataclasses.asdict(port)] and list(record["nics"][0]) == list(dataclasses.asdict(port))
    assert list(record["nic"].items()) == list(dataclasses.asdict(nic).items())
    assert record["host_copy_provenance"] == copy.provenance and record["gpu_numa_local"] is True
    info = GpuInfo(0, "NVIDIA H100 80GB HBM3", "GPU-0", "0000:19:00.0", 2)
    assert list(info.to_dict().items()) == list(dataclasses.asdict(info).items())
    assert list(rank.to_dict()) == [
        "rank", "host", "gpu", "cpu_affinity", "cpu_numa_nodes", "gpu_numa_local", "nics", "host_copy_gbps",
        "host_copy_bytes", "last_level_cache_bytes", "host_copy_measured_utc", "host_copy_provenance", "nic",
    ]  # fmt: skip


def test_a_ranks_info_and_a_file_systems_records_are_what_asdict_wrote() -> None:
    """RankInfo.to_dict (RankInfoRecord), FileSystemInfo and GdsInfo (FileSystemRecord, GdsRecord): every
    field in its dataclass's order, as the metadata held them before they were typed."""
    from rdmabench.hardware.gpu import GpuInfo
    from rdmabench.hardware.storage import FileSystemInfo, GdsInfo
    from rdmabench.wire.mpi import RankInfo

    info = RankInfo(1, "node-a", 1, 2, 4242, GpuInfo(1, "NVIDIA H100", "GPU-1", "0000:3b:00.0", 2))
    assert list(info.to_dict().items()) == list(dataclasses.asdict(info).items())
    fs = FileSystemInfo("/data", "/", "ext4", "/dev/vda1", "vda", False, None, True)
    assert list(fs.to_dict().items()) == list(dataclasses.asdict(fs).items())
    gds = GdsInfo("2.20", None)
    assert list(gds.to_dict().items()) == list(dataclasses.asdict(gds).items())
