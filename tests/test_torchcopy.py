"""`rdmabench copy --framework torch` where there is no GPU: what it says, and the DataLoader's host
side. The GPU figures are in tests/test_gpu.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench.errors import ConfigError
from rdmabench.results.files.document import document, write

from .conftest import run_cli_here


def _one_line(proc: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1 and words in lines[0], proc.stderr


def test_without_pytorch_the_extra_is_named_in_one_line(tmp_path: Path) -> None:
    code = "import sys; sys.modules['torch'] = None; from rdmabench.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "copy", "--framework", "torch", "-o", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    _one_line(proc, 2, "pip install 'rdmabench[torch]'")
    assert not (tmp_path / "r.json").exists()


def test_a_gpu_less_pytorch_says_so_in_one_line(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU PyTorch can use")
    proc = run_cli_here(["copy", "--framework", "torch", "-o", str(tmp_path / "r.json")])
    _one_line(proc, 2, "needs a CUDA GPU")
    assert not (tmp_path / "r.json").exists()


def test_the_dataloader_host_side_runs_and_pinning_is_refused_without_cuda() -> None:
    torch = pytest.importorskip("torch")
    from rdmabench.copy.torchcopy import dataloader_rate

    row = dataloader_rate(torch, False, 12, 64 << 10, to_gpu=False)
    assert row["batches"] == 12 and row["batches_per_second"] > 0 and row["cpu_seconds_per_batch"] > 0
    assert row["batch_bytes"] == 64 << 10
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="pin_memory needs CUDA"):
            dataloader_rate(torch, True, 4, 64 << 10, to_gpu=False)


def test_torch_rows_are_their_own_rows_in_a_report(tmp_path: Path) -> None:
    """A generated document (marked so) with a CuPy copy entry and two torch ones of the same copy:
    three rows, none merged."""
    base = {
        "test": "copy-h2d", "src_rank": 0, "dst_rank": 0, "src_mode": "pinned", "dst_mode": "device",
        "size_bytes": 1 << 26, "unit": "GB/s", "scope": "one copy engine direction", "validated": True,
        "wrong_bytes": 0, "src_host": "gen", "dst_host": "gen", "link": "same host", "transport": "cudaMemcpyAsync",
    }  # fmt: skip
    entries = []
    for engine, value in ((None, 55.0), ("torch blocking", 50.0), ("torch non_blocking", 54.0)):
        entry = dict(base, bandwidth_gbps=value, samples=[value], stats={"median": value, "min": value, "max": value})
        if engine:
            entry.update(engine=engine, framework="torch", framework_version="generated")
        entries.append(entry)
    doc = document({"generated": "by tests/test_torchcopy.py, not measured", "hosts": ["gen"]}, entries, True)
    path = tmp_path / "r.json"
    write(str(path), doc)
    proc = run_cli_here(["report", str(path), "--format", "csv"])
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("copy-h2d")]
    assert len(rows) == 3 and sum("torch" in row for row in rows) == 2, proc.stdout


def test_both_copy_entries_keep_their_keys_in_order() -> None:
    """The entries `rdmabench copy` writes (copy.CopyResult.entry, torchcopy's): every key, in the order
    results files have held them (copy/records.py, torchcopy.TorchEntry)."""
    from types import SimpleNamespace

    from rdmabench.copy.copy import CopyResult
    from rdmabench.copy.torchcopy import CopyTimes, _entry

    found = CopyResult(0, "h2d", "pinned", 4096, [1.0, 2.0, 3.0], 4.0, 0.001, True).entry()
    assert list(found) == [
        "test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes", "bandwidth_gbps", "unit", "scope",
        "stats", "samples", "validated", "wrong_bytes", "transport", "protocol", "gpu", "src_host", "dst_host",
        "src_gpu", "dst_gpu", "link", "reference_gbps", "ratio_to_reference", "host_prepare_seconds", "warnings",
    ]  # fmt: skip
    assert (found["src_mode"], found["dst_mode"], found["ratio_to_reference"]) == ("pinned", "device", 0.5)
    torch = SimpleNamespace(__version__="2.9", version=SimpleNamespace(cuda="13.0"))
    entry = _entry(torch, "d2h", "pinned", 4096, True, CopyTimes([2.0], 1e-5), None)
    assert list(entry) == [
        "test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes", "bandwidth_gbps", "unit", "scope",
        "stats", "samples", "validated", "wrong_bytes", "engine", "transport", "protocol", "framework",
        "framework_version", "cuda_version", "call_seconds", "raw_cupy_gbps", "ratio_to_raw", "src_host", "dst_host",
        "link",
    ]  # fmt: skip
    assert (entry["src_mode"], entry["dst_mode"], entry["ratio_to_raw"]) == ("device", "pinned", None)
