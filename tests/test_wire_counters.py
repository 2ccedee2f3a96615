"""The NVLink side of the wire check, read through an NVML stand-in (NVML is hardware monitoring,
not the data path: the data path's counters are tested for real across namespace hosts and, on the
GPU machine, in test_gpu.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rdmabench.hardware import counters


class FakeNvml:
    """Per-link cumulative KiB counters for one GPU, as nvmlDeviceGetFieldValues returns them."""

    NVML_NVLINK_MAX_LINKS = 4

    def __init__(self, active: list[int], failing: int | None = None) -> None:
        self.active, self.failing = active, failing
        self.kib = {(field, link): 0 for link in active for field in (138, 139)}

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: bytes) -> str:
        return "gpu"

    def nvmlDeviceGetNvLinkState(self, handle: str, link: int) -> int:
        return 1 if link in self.active else 0

    def nvmlDeviceGetFieldValues(self, handle: str, fields: list[tuple[int, int]]) -> list[Any]:
        """Per link, or summed over every link for scope id 0xFFFFFFFF (what NVML does)."""
        values = []
        for field, scope in fields:
            links = self.active if scope == 0xFFFFFFFF else [scope]
            values.append(
                SimpleNamespace(
                    fieldId=field,
                    nvmlReturn=3 if self.failing in links else 0,
                    value=SimpleNamespace(ullVal=sum(self.kib.get((field, link), 0) for link in links)),
                )
            )
        return values


@pytest.fixture(autouse=True)
def _unwatch() -> Any:
    yield
    counters.watch_gpu(None)


def _watch(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml) -> bool:
    monkeypatch.setattr(counters, "nvml", lambda: fake)
    return counters.watch_gpu("0000:18:00.0")


def test_nvlink_bytes_are_the_sum_over_the_active_links_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(active=[0, 2])
    assert _watch(monkeypatch, fake)
    before = counters.read()
    fake.kib[(138, 0)] += 3  # sent on link 0
    fake.kib[(138, 2)] += 5  # and link 2
    fake.kib[(139, 2)] += 7  # received
    moved = counters.spanning([counters.Window(before, counters.read())], counters.NVLINK)
    assert moved == (7 * 1024, 8 * 1024)


def test_nvlink_that_moved_nothing_is_zero_not_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _watch(monkeypatch, FakeNvml(active=[1]))
    before = counters.read()
    assert counters.spanning([counters.Window(before, counters.read())], counters.NVLINK) == (0, 0)


def test_a_gpu_without_nvlink_or_with_an_unreadable_link_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _watch(monkeypatch, FakeNvml(active=[]))
    assert counters.NVLINK not in counters.read()
    assert not _watch(monkeypatch, FakeNvml(active=[0, 1], failing=1))  # NVML refuses the sum
    assert counters.NVLINK not in counters.read()


def test_without_nvml_only_interfaces_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counters, "nvml", lambda: None)
    assert not counters.watch_gpu("0000:18:00.0")
    reading = counters.read()
    assert counters.NVLINK not in reading and "lo" in reading


def test_rdma_port_counters_are_read_in_bytes_under_ucx_device_names(tmp_path: Path) -> None:
    """A sysfs tree laid out as an RDMA host's: port counters count 4-byte words."""
    for device, port, rx, tx in (("mlx5_0", 1, 10, 20), ("mlx5_1", 1, 7, 0)):
        here = tmp_path / "class" / "infiniband" / device / "ports" / str(port) / "counters"
        here.mkdir(parents=True)
        (here / "port_rcv_data").write_text(f"{rx}\n")
        (here / "port_xmit_data").write_text(f"{tx}\n")
    (tmp_path / "class" / "infiniband" / "mlx5_2" / "ports" / "1").mkdir(parents=True)  # no counters: left out
    assert counters.rdma_counters(str(tmp_path)) == {"mlx5_0:1": (40, 80), "mlx5_1:1": (28, 0)}
    assert counters.rdma_counters(str(tmp_path / "none")) == {}


def test_a_counter_shared_by_ranks_spans_all_their_readings() -> None:
    """Two ranks on one GPU sample at slightly different times: only the span from the first
    reading to the last holds both ranks' bytes; each rank's own window holds part of them."""
    first = counters.Window({counters.NVLINK: (0, 100)}, {counters.NVLINK: (0, 300)})
    second = counters.Window({counters.NVLINK: (0, 150)}, {counters.NVLINK: (0, 400)})
    assert counters.spanning([first, second], counters.NVLINK) == (0, 300)
    assert counters.spanning([first], "eth0") is None


# The check's bookkeeping (measure/entry.py): which counter each link is held to, read from windows
# built here. The readings themselves are real in test_multinode_netns.py and test_gpu.py.

_SIZE = 1 << 20


def _measured(src: int, dst: int, timer: int, before: counters.Counters, after: counters.Counters) -> Any:
    from rdmabench.measure.contract import Link
    from rdmabench.measure.round import LinkMeasurement
    from rdmabench.modes import MemoryMode

    link = Link(src, dst, MemoryMode.DEVICE, MemoryMode.DEVICE)
    return LinkMeasurement(
        link, [[0.001] * 4], 4, 1, 1, "native", True, wire=counters.Window(before, after), timer=timer
    )


def _entry(src: int, dst: int, transport: str, **known: Any) -> Any:
    from rdmabench.measure.entryrecord import Ends, Entry, Limit, Steps, UcxPath

    entry = Entry(
        "bw", src, dst, "device", "device", _SIZE, "bandwidth_gbps", 1.0, "GB/s", "link", {}, [],
        Steps(1, 4, 1, 4, "native", True), False, None, None, path=UcxPath(transport),
    )  # fmt: skip
    limit = {name: known.pop(name) for name in ("link_limit",) if name in known}
    entry.ends, entry.limit = Ends(**known), Limit(**limit)
    return entry


def _placement(hosts: list[str], bus_ids: list[str | None]) -> Any:
    from rdmabench.hardware.limits import RankTopology
    from rdmabench.hardware.topology import GpuTopology
    from rdmabench.measure.entry import Placement

    gpus = [GpuTopology(0, bus) if bus else None for bus in bus_ids]
    topologies = [RankTopology(rank, host, gpu, [0]) for rank, (host, gpu) in enumerate(zip(hosts, gpus, strict=True))]
    return Placement(hosts, [0 if bus else None for bus in bus_ids], topologies)


def _check(entries: list[Any], measured: list[Any], placement: Any) -> None:
    from rdmabench.measure.costs import wire_check

    wire_check(entries, measured, SimpleNamespace(size=_SIZE), placement)  # type: ignore[arg-type]


def test_gpus_that_all_are_cuda_device_0_keep_their_own_nvlink_counters() -> None:
    """One GPU per rank by CUDA_VISIBLE_DEVICES: every rank's GPU is ordinal 0. Two links from two
    GPUs must each be held to their own GPU's counter, told apart by PCI bus id."""
    moved = 4 * _SIZE
    nvlink = {"kind": "NVLink", "gbps": 450.0}
    placement = _placement(["n"] * 4, ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"])
    measured = [
        _measured(0, 1, 0, {counters.NVLINK: (0, 10_000)}, {counters.NVLINK: (0, 10_000 + moved)}),
        _measured(2, 3, 2, {counters.NVLINK: (0, 900_000_000)}, {counters.NVLINK: (0, 900_000_000 + moved)}),
    ]
    common = {"src_host": "n", "dst_host": "n", "src_gpu": 0, "dst_gpu": 0, "link_limit": nvlink}
    entries = [_entry(0, 1, "cuda_ipc/cuda", **common), _entry(2, 3, "cuda_ipc/cuda", **common)]
    _check(entries, measured, placement)
    assert [e.wire["ratio"] for e in entries] == [1.0, 1.0]
    assert all(e.wire["dev"] == "nvlink/gpu0" and not e.warnings for e in entries)


def test_an_rdma_link_is_held_to_the_timing_ends_own_port() -> None:
    """A rendezvous fetch row names the receiver's port; the sender reads its own."""
    moved = 4 * _SIZE
    placement = _placement(["a", "b"], [None, None])
    before = {"mlx5_0:1": (0, 500), "eth0": (0, 0)}
    measured = [_measured(0, 1, 0, before, {"mlx5_0:1": (0, 500 + moved), "eth0": (0, 0)})]
    known = {"src_host": "a", "dst_host": "b", "src_nic": "mlx5_0:1", "dst_nic": "mlx5_3:1"}
    entries = [_entry(0, 1, "rc_mlx5/mlx5_3:1", **known)]
    _check(entries, measured, placement)
    assert entries[0].wire["dev"] == "mlx5_0:1" and entries[0].wire["ratio"] == 1.0, entries[0].wire
    assert not entries[0].warnings


def test_a_counter_nobody_could_read_is_na_not_zero() -> None:
    placement = _placement(["a", "b"], [None, None])
    measured = [_measured(0, 1, 0, {"eth0": (0, 0)}, {"eth0": (0, 0)})]
    entries = [_entry(0, 1, "rc_mlx5/mlx5_0:1", src_host="a", dst_host="b")]
    _check(entries, measured, placement)
    wire = entries[0].wire
    assert wire["ratio"] is None and wire["gbps"] is None and "mlx5_0:1" in wire["n/a"], wire
    assert not entries[0].warnings
    # The same counter, read and idle, is a real 0%: the bytes went another way.
    measured = [_measured(0, 1, 0, {"mlx5_0:1": (0, 7)}, {"mlx5_0:1": (0, 7)})]
    entries = [_entry(0, 1, "rc_mlx5/mlx5_0:1", src_host="a", dst_host="b")]
    _check(entries, measured, placement)
    assert entries[0].wire["ratio"] == 0.0 and "went another way" in entries[0].warnings[0]
