"""`rdmabench storage` on this machine's real files: the host paths (no GPU needed), validation of
what landed, the page cache, and bad input (one line, non-zero exit, nothing left behind). The GPU
paths (device memory, KvikIO) are in tests/test_gpu.py."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench.errors import ConfigError
from rdmabench.hardware import storage as disk
from rdmabench.results.files.document import load as load_results
from rdmabench.storage import config, datafile

from .conftest import run_cli, run_cli_here

SMALL = ["--sizes", "256KiB,1MiB", "--samples", "1", "--memory", "host"]


def _one_line(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1, proc.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_host_paths_read_and_write_a_created_file_and_leave_nothing(tmp_path: Path) -> None:
    data, out = tmp_path / "f.dat", tmp_path / "r.json"
    proc = run_cli(["storage", str(data), "--size", "4MiB", "--test", "read,write", *SMALL, "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # the file and the write file are gone
    entries = load_results(str(out))["results"]
    assert {(e["test"], e["storage_path"], e["size_bytes"]) for e in entries} == {
        (test, path, size)
        for test in ("storage-read", "storage-write")
        for path in ("pageable", "pinned")
        for size in (256 << 10, 1 << 20)
    }
    for entry in entries:
        assert entry["validated"] and entry["wrong_bytes"] == 0 and entry["bandwidth_gbps"] > 0
        assert entry["file_bytes"] == 4 << 20 and entry["iterations"] == (4 << 20) // entry["size_bytes"]
        assert entry["request_latency_us"]["p50"] <= entry["request_latency_us"]["max"]
        assert entry["cpu_s_per_gb"]["src"] > 0
        assert entry["link_limit"] is None or entry["link_limit"]["kind"] == "storage"
    report = run_cli_here(["report", str(out)])
    assert report.returncode == 0 and "storage-read" in report.stdout and "pinned->host" in report.stdout


def test_a_kept_file_is_read_again_and_a_corrupted_byte_is_named(tmp_path: Path) -> None:
    data = tmp_path / "f.dat"
    made = run_cli(["storage", str(data), "--size", "2MiB", "--keep", *SMALL, "-o", str(tmp_path / "a.json")])
    assert made.returncode == 0 and data.stat().st_size == 2 << 20, made.stderr
    again = run_cli(["storage", str(data), *SMALL, "-o", str(tmp_path / "b.json")])
    assert again.returncode == 0, again.stderr
    with open(data, "r+b") as handle:
        handle.seek(1_234_567)
        byte = handle.read(1)
        handle.seek(1_234_567)
        handle.write(bytes([byte[0] ^ 0xFF]))
    bad = run_cli(["storage", str(data), *SMALL, "-o", str(tmp_path / "c.json")])
    _one_line(bad, 1, "wrong from byte 1234567")
    assert not (tmp_path / "c.json").exists() and data.exists()  # the user's file stays; no results


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["missing.dat"], ["no such file", "--size"]),
        (["."], ["is a directory"]),
        (["f.dat", "--size", "1MiB", "--sizes", "4MiB"], ["request sizes"]),
        (["f.dat", "--size", "1MiB", "--sizes", "1000", "--paths", "pinned"], ["O_DIRECT", "4096"]),
        (["f.dat", "--size", "1MiB", "--paths", "kvikio"], ["kvikio", "--mode device"]),
        (["f.dat", "--size", "1MiB", "--test", "readwrite"], ["unknown storage test"]),
        (["f.dat", "--size", "1MiB", "--threads", "two"], ["--threads"]),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path: Path, args: list[str], words: list[str]) -> None:
    command = ["storage", *args, "--memory", "host", "--samples", "1", "-o", str(tmp_path / "r.json")]
    proc = run_cli(command, cwd=tmp_path, timeout=120)
    _one_line(proc, 2, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_no_space_for_the_write_file_is_one_line(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (not root)")
    try:
        data = small / "f.dat"
        proc = run_cli_here(
            ["storage", str(data), "--size", "2MiB", "--test", "write", *SMALL, "-o", str(tmp_path / "r.json")]
        )
        _one_line(proc, 1, "cannot write", "No space left")
        assert list(small.iterdir()) == [] and not (tmp_path / "r.json").exists()
    finally:
        subprocess.run(["umount", str(small)], check=False)


def _resident_pages(path: Path) -> int:
    """Pages of `path` in the page cache, by mincore(2) on a mapping of it."""
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vector = (ctypes.c_ubyte * pages)()
    libc = ctypes.CDLL(None, use_errno=True)
    # A private mapping (writable, so ctypes can take its address) shares the page cache until written.
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        start = ctypes.c_char.from_buffer(mapped)
        status = libc.mincore(ctypes.c_void_p(ctypes.addressof(start)), ctypes.c_size_t(size), vector)
        del start
    assert status == 0, os.strerror(ctypes.get_errno())
    return sum(v & 1 for v in vector)


def test_eviction_really_empties_the_page_cache_of_the_file(tmp_path: Path) -> None:
    data = tmp_path / "f.dat"
    datafile.write_pattern(str(data), 4 << 20)
    data.read_bytes()  # now cached
    assert _resident_pages(data) > 0
    assert datafile.evict(str(data)) is None
    assert _resident_pages(data) == 0


def test_a_file_system_that_refuses_o_direct_is_refused_for_the_pinned_path(tmp_path: Path) -> None:
    """Where this kernel has one (tmpfs refused O_DIRECT before Linux 6.6): a real refusal; and
    always, the refusal for a file system found to refuse it."""
    for candidate in ("/dev/shm", "/run", "/sys/fs/cgroup"):
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK) and disk.direct_io_supported(candidate) is False:
            data = Path(candidate) / f"rdmabench-test-{os.getpid()}.dat"
            proc = run_cli_here(["storage", str(data), "--size", "1MiB", "--paths", "pinned", *SMALL[2:]])
            _one_line(proc, 2, "refuses O_DIRECT")
            assert not data.exists()
            break
    fs = disk.FileSystemInfo(str(tmp_path), "/x", "fuse", "x", None, None, None, False)
    asked = config.StorageConfig(file=str(tmp_path / "f"), paths=["pinned"], memory="host")
    with pytest.raises(ConfigError, match="refuses O_DIRECT"):
        config.chosen_paths(asked, fs, 1 << 20)


def test_doctor_names_the_file_system_and_gpudirect_storage(tmp_path: Path) -> None:
    proc = run_cli(["doctor", "--format", "json", "--path", str(tmp_path)])
    findings = {f["check"]: f for f in json.loads(proc.stdout)["findings"]}
    fs = disk.file_system(str(tmp_path))
    assert fs.fstype in findings["file system"]["detail"] and "O_DIRECT" in findings["file system"]["detail"]
    assert "nvidia-fs" in findings["GPUDirect Storage"]["detail"]


def test_the_targets_benchmark_reads_runs_and_prints_ratios(tmp_path: Path) -> None:
    from rdmabench.storage.targets import ratios

    out = tmp_path / "r.json"
    proc = run_cli(["storage", str(tmp_path / "f.dat"), "--size", "2MiB", *SMALL, "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    rows = ratios(load_results(str(out))["results"])
    assert set(rows) == {("storage-read", 256 << 10, 1), ("storage-read", 1 << 20, 1)}
    assert all(row["over_pageable"] > 0 for row in rows.values())
    shown = subprocess.run(
        [sys.executable, "-m", "rdmabench.storage.targets", str(out), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "storage-read" in shown.stdout and "over pageable" in shown.stdout


def test_a_storage_rate_above_the_devices_own_is_a_finding_not_an_error() -> None:
    """The device's O_DIRECT rate is a reference measured at one request size (read-ahead or a VM's
    host cache may beat it): its share is the plain ratio on load, where a link limit judges."""
    from rdmabench.hardware.limits import Limit
    from rdmabench.results.files.derived import share_of_limit

    assert share_of_limit(6.0, Limit(2.0, "storage", "the device's O_DIRECT read rate, measured", False)) == 3.0
    assert share_of_limit(6.0, Limit(2.0, "PCIe", "Gen4 x16", False)) is None  # a bound: above it is an error


def test_a_storage_entry_keeps_its_keys_in_order() -> None:
    """The entry's JSON shape (records.StorageEntry): every key, in the order results files have held
    them, the pinned path's buffers (device memory) before the limit and its share."""
    from rdmabench.storage.limits import Limits
    from rdmabench.storage.records import Case, entry
    from rdmabench.storage.sampling import Measured

    fs = disk.FileSystemInfo("/f", "/", "ext4", "/dev/vda1", "vda", False, None, True)
    measured = Measured([1.0, 2.0, 3.0], [1e-4, 2e-4], 0.01, [])
    chosen = config.StorageConfig(file="/f", memory="device", buffers=3)
    found = entry(chosen, Case(True, "pinned", 1 << 20, 2), measured, 4 << 20, fs, Limits(device_read_gbps=4.0))
    assert list(found) == [
        "test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes", "bandwidth_gbps", "unit", "scope",
        "stats", "samples", "window", "iterations", "warmup", "messages_per_sample", "validated", "wrong_bytes",
        "engine", "transport", "protocol", "src_host", "dst_host", "src_gpu", "dst_gpu", "link", "storage_path",
        "threads", "file_bytes", "file_system", "request_latency_us", "cpu_s_per_gb", "warnings", "pinned_buffers",
        "link_limit", "share_of_limit",
    ]  # fmt: skip
    assert found["file_system"] == {"fstype": "ext4", "mount_point": "/", "device": "vda"}
    assert found["link_limit"] == {"gbps": 4.0, "kind": "storage", "what": "the device's O_DIRECT read rate, measured"}
    assert found["share_of_limit"] == 0.5 and found["pinned_buffers"] == 3 and found["src_gpu"] == 0


def test_the_targets_read_each_entry_as_it_comes_and_skip_what_is_not_storage() -> None:
    from rdmabench.storage.targets import ratios

    def one(path: str, gbps: object, limit: object = None) -> dict[str, object]:
        return {"test": "storage-read", "size_bytes": 4096, "storage_path": path, "bandwidth_gbps": gbps,
                "link_limit": limit}  # fmt: skip

    entries = [
        {"test": "bw", "size_bytes": 8, "bandwidth_gbps": 1.0},  # a run's entry, no storage path
        one("pinned", 3.0, {"gbps": 4.0}), one("pageable", 1.5), one("kvikio", "fast"),  # a figure not a number
    ]  # fmt: skip
    assert ratios(entries) == {("storage-read", 4096, 1): {"of_limit": 0.75, "over_pageable": 2.0}}
