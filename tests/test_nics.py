"""Which network device a rank sends through, read from a sysfs tree laid out as on a two-socket
GPU node (real files and links in a temporary directory, the layout /sys has)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rdmabench.hardware.nics import apply, choose, hops


def _device(root: Path, pci_path: str, numa: int) -> Path:
    place = root / "devices" / pci_path
    place.mkdir(parents=True, exist_ok=True)
    (place / "numa_node").write_text(f"{numa}\n")
    return place


def _rdma(root: Path, name: str, pci_path: str, numa: int, state: str = "4: ACTIVE") -> None:
    base = root / "class" / "infiniband" / name
    (base / "ports" / "1").mkdir(parents=True)
    (base / "ports" / "1" / "state").write_text(state + "\n")
    os.symlink(_device(root, pci_path, numa), base / "device")


def _gpu(root: Path, bus_id: str, pci_path: str, numa: int) -> None:
    (root / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
    os.symlink(_device(root, pci_path, numa), root / "bus" / "pci" / "devices" / bus_id)


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """Socket 0: a PCIe switch with GPU 0 and mlx5_0; socket 1: a switch with GPU 1 and mlx5_1."""
    _rdma(tmp_path, "mlx5_0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0", 0)
    _rdma(tmp_path, "mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0/0000:83:00.0", 1)
    _rdma(tmp_path, "mlx5_2", "pci0000:80/0000:80:02.0/0000:90:00.0", 1, state="1: DOWN")
    _gpu(tmp_path, "0000:04:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:04:00.0", 0)
    _gpu(tmp_path, "0000:84:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0/0000:84:00.0", 1)
    return tmp_path


def test_each_gpu_takes_the_port_behind_its_own_switch(node: Path) -> None:
    first = choose("00000000:04:00.0", 0, {}, str(node))  # NVML's spelling of the bus id
    second = choose("0000:84:00.0", 1, {}, str(node))
    assert first is not None and second is not None
    assert (first.name, first.numa_node, first.set_for_ucx) == ("mlx5_0:1", 0, True)
    assert second.name == "mlx5_1:1" and "nearest its GPU (2 PCIe hops)" in second.how


def test_without_a_gpu_ranks_take_the_active_ports_by_local_rank(node: Path) -> None:
    names = [choice.name for rank in range(4) if (choice := choose(None, rank, {}, str(node)))]
    assert names == ["mlx5_0:1", "mlx5_1:1", "mlx5_0:1", "mlx5_1:1"]  # mlx5_2 is down


def test_the_users_setting_wins_and_is_left_alone(node: Path) -> None:
    choice = choose("0000:04:00.0", 0, {"UCX_NET_DEVICES": "mlx5_1:1"}, str(node))
    assert choice is not None and choice.name == "mlx5_1:1" and not choice.set_for_ucx
    environ: dict[str, str] = {}
    apply(choice, environ)
    assert environ == {}
    apply(choose("0000:04:00.0", 0, {}, str(node)), environ)
    assert environ == {"UCX_NET_DEVICES": "mlx5_0:1"}


def test_without_rdma_the_only_interface_is_recorded_not_imposed(tmp_path: Path) -> None:
    net = tmp_path / "class" / "net"
    for name, state in (("lo", "unknown"), ("eth0", "up"), ("eth1", "down"), ("docker0", "up")):
        (net / name).mkdir(parents=True)
        (net / name / "operstate").write_text(state + "\n")
    (net / "docker0" / "bridge").mkdir()
    choice = choose(None, 0, {}, str(tmp_path))
    assert choice is not None and choice.name == "eth0" and not choice.set_for_ucx
    (net / "eth1" / "operstate").write_text("up\n")
    assert choose(None, 0, {}, str(tmp_path)) is None  # two interfaces: UCX chooses, links say which


def test_hops_count_the_way_through_the_common_switch() -> None:
    assert hops("/a/b/c/d", "/a/b/c/e") == 2
    assert hops("/a/b/x/y", "/a/c") == 4
