"""The doctor on this machine: every check runs, with a verdict, and it says what it cannot see."""

from __future__ import annotations

import json

import pytest

from rdmabench.hardware.gpu import visible_gpu_count

from .conftest import rdmabench_env, run_cli

VERDICTS = {"ok", "warn", "fail", "n/a"}


def test_doctor_table() -> None:
    proc = run_cli(["doctor"])
    assert "Traceback" not in proc.stderr
    assert "device-direct runs:" in proc.stdout
    for check in ("GPUs", "memlock limit", "UCX", "MPI", "NUMA placement", "transparent huge pages"):
        assert check in proc.stdout
    if visible_gpu_count() == 0:
        assert proc.returncode == 0  # no GPU is reported, not a failure
        assert "device-direct runs: not applicable" in proc.stdout


def test_doctor_json_and_conflicting_settings() -> None:
    proc = run_cli(["doctor", "--format", "json"], env=rdmabench_env(UCX_TLS="tcp", UCX_LOG_FILE="/tmp/x.log"))
    payload = json.loads(proc.stdout)
    assert payload["device_direct"] in ("ready", "blocked", "not applicable")
    findings = {f["check"]: f for f in payload["findings"]}
    assert all(f["verdict"] in VERDICTS for f in payload["findings"])
    assert findings["UCX_TLS"]["verdict"] == "warn" and "shared memory" in findings["UCX_TLS"]["detail"]
    assert findings["UCX_LOG_FILE"]["verdict"] == "warn"
    assert findings["UCX host memory"]["verdict"] == "ok"  # the library still offers shared memory


def test_doctor_bad_format() -> None:
    proc = run_cli(["doctor", "--format", "xml"])
    assert proc.returncode == 2 and proc.stderr.startswith("rdmabench: error:")


def test_a_gpu_node_without_cupy_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML (nvidia-ml-py) sees the GPUs where CuPy is missing: doctor says what that costs."""
    from rdmabench.hardware import doctor

    class FakeNvml:
        @staticmethod
        def nvmlDeviceGetCount() -> int:
            return 2

        @staticmethod
        def nvmlDeviceGetHandleByIndex(index: int) -> int:
            return index

        @staticmethod
        def nvmlDeviceGetName(handle: int) -> bytes:
            return b"NVIDIA H200"

    monkeypatch.setattr(doctor, "visible_gpu_count", lambda: 0)
    monkeypatch.setattr(doctor, "import_cupy", lambda: None)
    monkeypatch.setattr(doctor.topology, "nvml", lambda: FakeNvml)
    (finding,) = doctor.check_gpus()
    assert finding.verdict == doctor.WARN and "NVML sees 2: NVIDIA H200, NVIDIA H200" in finding.detail
    assert "CuPy is not installed" in finding.detail
