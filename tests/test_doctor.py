"""The doctor on this machine: every check runs, with a verdict, and it says what it cannot see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmabench.hardware.gpu import visible_gpu_count

from .conftest import rdmabench_env, run_cli, run_cli_here

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
    proc = run_cli_here(["doctor", "--format", "xml"])
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


def _ucx_prefix(folder: Path, headers: str, library: str) -> Path:
    """A UCX installation as a folder of files: headers of one version, a VERSION.txt of another."""
    api = folder / "include" / "ucp" / "api"
    (api / "device").mkdir(parents=True)
    (api / "device" / "ucp_host.h").write_text("/* the device API's host header */\n")
    major, minor = headers.split(".")
    (api / "ucp_version.h").write_text(f"#define UCP_API_MAJOR    {major}\n#define UCP_API_MINOR    {minor}\n")
    (folder / "VERSION.txt").write_text(f"{library}\n")
    return folder


def test_the_gpu_initiated_stack_is_n_a_without_a_gpu_and_says_what_it_found() -> None:
    from rdmabench.hardware import doctor

    findings = {f.check: f for f in doctor.check_gpu_initiated(0, ["posix", "sysv"])}
    assert list(findings) == ["nvcc", "UCX device API", "GPU peer mapping", "UCX device lanes"]
    assert all(f.verdict == doctor.NA and f.detail.startswith("no GPU") for f in findings.values())
    assert findings["UCX device lanes"].detail == "no GPU: UCX has no cuda_ipc transport"
    with_lane = doctor.check_gpu_initiated(0, ["cuda_ipc", "posix"])[-1]
    assert with_lane.detail == "no GPU: cuda_ipc is among UCX's transports"
    proc = run_cli(["doctor", "--format", "json"])
    checks = {f["check"] for f in json.loads(proc.stdout)["findings"]}
    assert {"nvcc", "UCX device API", "UCX device lanes"} <= checks


def test_a_ucx_library_of_other_headers_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """UCX 1.22 changed the device memory lists without a version bump: headers 1.22 with a 1.21 library
    (the VERSION.txt here, or the real libucp the process may hold: 1.21 too) is refused, in one line."""
    from rdmabench.hardware import devstack, doctor
    from rdmabench.wire import devapi, native

    assert devstack.version_mismatch(_ucx_prefix(tmp_path / "same", "1.21", "1.21.0")) is None
    prefix = _ucx_prefix(tmp_path / "mixed", "1.22", "1.21.0")
    why = devstack.version_mismatch(prefix)
    assert why is not None and "UCX headers 1.22" in why and "but library 1.21.0" in why and "\n" not in why
    # At load: the kernel is neither built nor loaded; --posting auto keeps the CPU's path, with this reason.
    monkeypatch.setattr(native, "ucx_prefix", lambda: prefix)
    monkeypatch.setattr(devapi.load, "kept", None)
    found = devapi.load()
    assert found.library is None and found.note == why
    monkeypatch.setattr(doctor, "_ucx_root", lambda: str(prefix))
    (api,) = [f for f in doctor.check_gpu_initiated(2, ["cuda_ipc"]) if f.check == "UCX device API"]
    assert api.verdict == doctor.WARN and api.detail == why
    (api,) = [f for f in doctor.check_gpu_initiated(0, ["cuda_ipc"]) if f.check == "UCX device API"]
    assert api.verdict == doctor.NA and api.detail == f"no GPU: {why}"
    (prefix / "include" / "ucp" / "api" / "ucp_version.h").write_text("/* no version here */\n")
    assert "name no UCP_API_MAJOR/MINOR" in str(devstack.version_mismatch(prefix))


def test_ucx_version_txt_is_read_in_one_place_and_names_the_native_builds(tmp_path: Path) -> None:
    """VERSION.txt is read by devstack.version_text alone, at most 256 bytes of it: the hot loop's and the
    device lists' cache names follow it, and a missing one names them without it."""
    from rdmabench.hardware import devstack
    from rdmabench.wire import devapi, native

    prefix = _ucx_prefix(tmp_path / "ucx", "1.21", "1.21.0")
    assert devstack.version_text(prefix) == "1.21.0"
    before = (native.library_name(prefix, ["cc"]), devapi.library_name(prefix, "nvcc"))
    (prefix / "VERSION.txt").write_text("1.21.1\n")
    after = (native.library_name(prefix, ["cc"]), devapi.library_name(prefix, "nvcc"))
    assert after[0] != before[0] and after[1] != before[1]
    (prefix / "VERSION.txt").write_bytes(b"1.21.1" + b" " * (1 << 20) + b"tail")  # never read whole
    assert devstack.version_text(prefix) == "1.21.1"
    assert (native.library_name(prefix, ["cc"]), devapi.library_name(prefix, "nvcc")) == after
    (prefix / "VERSION.txt").unlink()
    assert devstack.version_text(prefix) is None and native.library_name(prefix, ["cc"]) not in after
    package = Path(devstack.__file__).parent.parent
    readers = [path.name for path in package.rglob("*.py") if '"VERSION.txt"' in path.read_text()]
    assert readers == ["devstack.py"]


def test_peer_mapping_is_checked_both_ways_for_every_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """cudaDeviceCanAccessPeer through CuPy's runtime (a stand-in here: this machine has no GPU)."""
    from rdmabench.hardware import doctor

    class Runtime:
        @staticmethod
        def deviceCanAccessPeer(device: int, peer: int) -> int:
            return int((device, peer) != (1, 0))  # GPU 1 cannot map GPU 0

    class FakeCupy:
        class cuda:
            runtime = Runtime

    monkeypatch.setattr(doctor, "import_cupy", lambda: FakeCupy)
    found = {f.check: f for f in doctor._peer_mapping(3)}
    assert list(found) == [f"GPU {a} <-> {b} peer mapping" for a, b in ((0, 1), (0, 2), (1, 2))]
    assert found["GPU 0 <-> 1 peer mapping"].verdict == doctor.FAIL
    assert "GPU 1 cannot map GPU 0's memory" in found["GPU 0 <-> 1 peer mapping"].detail
    assert found["GPU 0 <-> 2 peer mapping"].verdict == found["GPU 1 <-> 2 peer mapping"].verdict == doctor.OK
    assert [f.detail for f in doctor._peer_mapping(1)] == ["one GPU: no pair"]


def test_the_library_version_is_asked_of_the_libucp_this_process_loaded() -> None:
    """ucp_get_version() of the real libucp once loaded (what a rank holds after UCXX started)."""
    import ctypes

    from rdmabench.hardware import devstack
    from rdmabench.wire import native

    prefix = native.ucx_prefix()
    if prefix is None:
        pytest.skip("no libucx wheel")
    ctypes.CDLL(str(prefix / "lib" / "libucp.so"))
    loaded = devstack.loaded_ucp()
    assert loaded is not None and loaded.name.startswith("libucp.so")
    version, where = devstack.library_version(prefix, loaded)
    assert where == f"the libucp this process loaded ({loaded})"
    assert version is not None and version[:2] == devstack.header_version(prefix)
