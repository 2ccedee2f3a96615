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
