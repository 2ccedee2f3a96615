"""What happens when things go wrong, with real ranks: a peer killed mid-run, Ctrl-C, SIGTERM, a
stuck peer, impossible memory requests. The job must end quickly, say why in one line, and keep
every result measured before the failure."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rdmabench.results.files.document import STREAM_SUFFIX
from rdmabench.results.files.document import load as load_results

from .conftest import rdmabench_env, run_cli

# Many small sizes with many samples: a sweep long enough to interrupt in the middle.
LONG_SWEEP = ["run", "--sizes", "8:8KiB", "--samples", "30", "--sample-time", "0.02"]


def _start(results_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rdmabench", *LONG_SWEEP, "-o", str(results_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=rdmabench_env(),
    )


def _wait_for_results(results_path: Path, count: int, timeout: float = 90) -> dict:  # type: ignore[type-arg]
    """The stream's header (with every rank's pid) once `count` results have streamed in."""
    stream = Path(str(results_path) + STREAM_SUFFIX)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stream.exists():
            lines = stream.read_text().splitlines()
            records = [line for line in lines[1:] if line.startswith('{"src":')]  # not profile or rank lines
            if len(records) >= count:
                return json.loads(lines[0])  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("no results streamed in time")


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rdmabench: error:")]


def _assert_partial(results_path: Path, at_least: int) -> dict:  # type: ignore[type-arg]
    doc = load_results(str(results_path))
    assert doc["complete"] is False and doc["stopped"]
    assert len(doc["results"]) >= at_least
    assert all(e["validated"] and e["bandwidth_gbps"] > 0 for e in doc["results"])
    assert not Path(str(results_path) + STREAM_SUFFIX).exists()  # the stream became the file
    return doc


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGABRT])
def test_peer_killed_by_a_signal(results_path: Path, signum: int) -> None:
    """SIGKILL, or SIGABRT as a native library's abort() (a heap check, say) sends it."""
    proc = _start(results_path)
    header = _wait_for_results(results_path, 2)
    victim = header["metadata"]["ranks"][1]["pid"]
    killed_at = time.monotonic()
    os.kill(victim, signum)
    _out, err = proc.communicate(timeout=60)
    assert time.monotonic() - killed_at < 20
    assert proc.returncode != 0
    errors = _errors(err)
    assert len(errors) == 1, err
    assert "rank 1" in errors[0] and ("died" in errors[0] or f"signal {signum}" in errors[0]), errors[0]
    assert "Traceback" not in err and "MPI_ABORT" not in err
    _assert_partial(results_path, at_least=2)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_keeps_partial_results(results_path: Path, signum: int, code: int) -> None:
    proc = _start(results_path)
    _wait_for_results(results_path, 2)
    stopped_at = time.monotonic()
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=60)
    assert time.monotonic() - stopped_at < 20
    assert proc.returncode == code
    assert "Traceback" not in err and _errors(err) == []
    assert "kept in" in err and "(incomplete)" in err
    doc = _assert_partial(results_path, at_least=2)
    assert "SIG" in doc["stopped"]


def test_stuck_peer_trips_the_watchdog(results_path: Path) -> None:
    env = rdmabench_env(RDMABENCH_FAULT="stall:3")
    started = time.monotonic()
    proc = run_cli(
        ["run", "--sizes", "64KiB", "--timeout", "2", "--samples", "2", "-o", str(results_path)], env=env, timeout=60
    )
    assert time.monotonic() - started < 30
    assert proc.returncode != 0
    errors = _errors(proc.stderr)
    assert len(errors) == 1, proc.stderr
    assert "timed out after 2 s" in errors[0] and "rank 0 -> rank 1 (bw, 64KiB" in errors[0]
    doc = load_results(str(results_path))
    assert doc["complete"] is False and doc["results"] == []


def test_a_stuck_peer_seen_by_another_rank_than_0_is_recorded_with_its_reason(results_path: Path) -> None:
    """Rank 0 stalls (it receives the incast); ranks 1 and 2 time out and abort the job. Rank 0,
    ended by the launcher's SIGTERM, must record what they saw, not the signal, and exit 1."""
    env = rdmabench_env(RDMABENCH_FAULT="stall:3")
    args = ["run", "--np", "3", "--pattern", "incast", "--root", "0", "--sizes", "4096", "--timeout", "2"]
    proc = run_cli([*args, "--samples", "2", "-o", str(results_path)], env=env, timeout=90)
    assert proc.returncode == 1, proc.stderr
    assert "SIGTERM" not in proc.stderr, proc.stderr
    doc = load_results(str(results_path))
    assert doc["complete"] is False
    assert doc["stopped"].startswith(("failed on rank 1 ", "failed on rank 2 ")), doc["stopped"]
    assert "timed out after 2 s" in doc["stopped"]


def test_more_host_memory_than_exists_fails_before_any_transfer(results_path: Path) -> None:
    proc = run_cli(["run", "--sizes", "8,16GiB", "-o", str(results_path)])
    assert proc.returncode == 2
    errors = _errors(proc.stderr)
    assert len(errors) == 1 and "of host memory" in errors[0]
    assert not results_path.exists()


@pytest.mark.skipif(not (shutil.which("prlimit") and shutil.which("setpriv")), reason="needs prlimit and setpriv")
def test_pinned_beyond_the_memlock_limit(results_path: Path) -> None:
    from rdmabench.hardware.gpu import visible_gpu_count

    if visible_gpu_count():
        pytest.skip("with a GPU, pinned memory comes from cudaHostAlloc, not mlock")
    command = ["prlimit", "--memlock=1048576"]
    if os.geteuid() == 0:  # root may lock beyond the limit unless it gives up CAP_IPC_LOCK
        command += ["setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock"]
    command += [
        sys.executable,
        "-m",
        "rdmabench",
        "run",
        "--mode",
        "pinned",
        "--sizes",
        "8,4MiB",
        "-o",
        str(results_path),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=rdmabench_env())
    if "setpriv" in proc.stderr and proc.returncode != 2:
        pytest.skip(f"setpriv refused here: {proc.stderr.strip()}")
    assert proc.returncode == 2, proc.stderr
    errors = _errors(proc.stderr)
    assert len(errors) == 1 and "memlock limit of 1MiB" in errors[0]


def test_stream_of_a_dead_run_reads_as_partial(tmp_path: Path) -> None:
    stream = tmp_path / ("r.json" + STREAM_SUFFIX)
    header = {"schema": {"name": "rdmabench-results", "version": 1}, "metadata": {"command_line": "x"}}
    entry = {
        "test": "bw", "src_rank": 0, "dst_rank": 1, "src_mode": "pageable", "dst_mode": "pageable", "size_bytes": 8,
        "bandwidth_gbps": 0.1, "samples": [0.1], "validated": True, "transport": "sysv/memory", "unit": "GB/s",
    }  # fmt: skip
    stream.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n" + json.dumps(entry)[:30])
    doc = load_results(str(stream))
    assert doc["complete"] is False and len(doc["results"]) == 1  # the torn last line is dropped


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        ({"size_bytes": "8"}, r'results\[0\]\.size_bytes is "8", not a whole number'),
        ({"src_rank": -1}, "src_rank is -1: below its minimum 0"),
        ({"samples": ["fast"]}, r'samples\[0\] is "fast", not a number'),
        ({"samples": {"a": 1}}, r'samples is \{"a": 1\}, not a list'),
        ({"validated": "yes"}, 'validated is "yes", not true or false'),
        ({"bandwidth_gbps": True}, "bandwidth_gbps is true, not a number"),
    ],
)
def test_entries_with_wrong_types_are_rejected(tmp_path: Path, mutation: dict, message: str) -> None:  # type: ignore[type-arg]
    from rdmabench.errors import ResultsFileError

    path = _one_entry_file(tmp_path, mutation)
    with pytest.raises(ResultsFileError, match=message):
        load_results(str(path))


def _one_entry_file(tmp_path: Path, mutation: dict) -> Path:  # type: ignore[type-arg]
    """A schema-1 results file of one plausible bw entry, changed by `mutation` (a latency entry
    loses its bandwidth)."""
    entry = {
        "test": "bw", "src_rank": 0, "dst_rank": 1, "src_mode": "pageable", "dst_mode": "pageable", "size_bytes": 8,
        "bandwidth_gbps": 0.1, "samples": [0.1], "validated": True, "transport": None, "unit": "GB/s",
    }  # fmt: skip
    entry.update(mutation)
    if "latency_us" in entry:
        del entry["bandwidth_gbps"]
    path = tmp_path / "r.json"
    path.write_text(
        json.dumps({"schema": {"name": "rdmabench-results", "version": 1}, "metadata": {}, "results": [entry]})
    )
    return path


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (
            {"bandwidth_gbps": -3.0, "samples": [-3.0]},
            r"results\[0\]\.bandwidth_gbps is -3.0: not above 0",
        ),
        ({"bandwidth_gbps": 1e30, "samples": [1e30]}, r"bandwidth_gbps holds 1e\+30 GB/s: at or above 100000 GB/s"),
        ({"samples": [0.1, float("nan")]}, r"not valid JSON \(NaN is not a JSON number\)"),
        ({"bandwidth_gbps": float("inf")}, "Infinity is not a JSON number"),
        ({"samples": [0.1, 0.0]}, r"samples\[1\] is 0.0: not above 0"),
        ({"aggregate_gbps": -1.0}, "aggregate_gbps is -1.0: not above 0"),
        (
            {"test": "lat", "unit": "us", "latency_us": 0.0, "samples": [0.0]},
            r"results\[0\]\.(samples\[0\]|latency_us) is 0.0: not above 0",
        ),
    ],
)
def test_figures_no_link_can_have_are_rejected(tmp_path: Path, mutation: dict, message: str) -> None:  # type: ignore[type-arg]
    """Before: reported and compared (a negative or absurd bandwidth), or dropped without a word (NaN, inf)."""
    from rdmabench.errors import ResultsFileError

    path = _one_entry_file(tmp_path, mutation)
    with pytest.raises(ResultsFileError, match=message) as caught:
        load_results(str(path))
    assert str(caught.value).startswith(f"{path}: ")  # NaN and Infinity: not JSON; the others: results[0]
    proc = run_cli(["report", str(path)])  # the only file: skipped with a warning, then nothing usable
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    warning, error = proc.stderr.strip().splitlines()
    assert warning.startswith(f"rdmabench: warning: skipped {path}: ")
    assert error.startswith("rdmabench: error: no usable results files")


def test_huge_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    from rdmabench.errors import ResultsFileError

    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: costs no disk
    with pytest.raises(ResultsFileError, match="larger than any results file"):
        load_results(str(path))


def test_no_ucx_log_directory_is_left_behind(tmp_path: Path) -> None:
    """Each rank routes UCX's report into a private directory; it goes when the rank ends, with the
    logs of the tools rank 0 ran (ucx_info inherits UCX_LOG_FILE), after a failure too."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    ok = run_cli(
        ["run", "--sizes", "8", "--samples", "1", "-o", str(tmp_path / "a.json")],
        env=rdmabench_env(TMPDIR=str(scratch)),
    )
    assert ok.returncode == 0, ok.stderr
    env = rdmabench_env(TMPDIR=str(scratch), RDMABENCH_FAULT="corrupt:1")
    failed = run_cli(
        ["run", "--sizes", "4096", "--warmup", "1", "--samples", "1", "-o", str(tmp_path / "b.json")], env=env
    )
    assert failed.returncode != 0
    assert sorted(p.name for p in scratch.iterdir() if p.name.startswith("rdmabench-ucx-")) == []


def test_of_ranks_failing_together_the_first_says_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sender into a stalled rank times out at about the same moment: one line, not one a rank
    (the claim in the job's scratch folder), and a later job in the same folder still speaks."""
    from types import SimpleNamespace

    from rdmabench.job import run as job_run
    from rdmabench.wire import ucx_env

    monkeypatch.setenv(ucx_env.SCRATCH_ENV, str(tmp_path))
    job = SimpleNamespace(ranks=[SimpleNamespace(host="h", pid=41)])
    assert job_run._first_to_fail(job) and not job_run._first_to_fail(job)  # type: ignore[arg-type]
    assert job_run._first_to_fail(SimpleNamespace(ranks=[SimpleNamespace(host="h", pid=42)]))  # type: ignore[arg-type]
    monkeypatch.delenv(ucx_env.SCRATCH_ENV)
    assert job_run._first_to_fail(job)  # type: ignore[arg-type]  # another launcher: each rank says its own


def test_ctrl_c_while_the_command_loads_is_one_line(tmp_path: Path) -> None:
    """A Ctrl-C in the command's first fraction of a second, while click and the command group are
    imported, is one line and 130 as it is once the command runs, not Python's traceback. The
    interrupt is made certain, not timed: a `click` on the path that is interrupted as it loads."""
    (tmp_path / "click.py").write_text("raise KeyboardInterrupt\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = run_cli(["--help"], timeout=60, env=rdmabench_env(PYTHONPATH=path))
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == ["rdmabench: error: rdmabench stopped by SIGINT"]
