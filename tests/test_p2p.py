"""Point-to-point tests with real MPI ranks exchanging real payloads over real UCX endpoints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench.results.files.document import load as load_results
from rdmabench.wire import native

from .conftest import QUICK, mpiexec, rdmabench_env, run_cli

SHARED_MEMORY = {"sysv/memory", "posix/memory", "cma/memory", "xpmem/memory", "knem/memory"}


def _run_ok(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = run_cli(args, **kwargs)  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


# Both loops where the native one builds (tests/test_native.py checks how it builds and loads).
ENGINES = ("native", "python") if native.load().library is not None else ("python",)


# Every test in pageable memory, and pinned memory once, in bibw, where both ranks send from it and
# receive into it: a memory mode changes how the buffers are allocated and registered, not the test's
# steps (test_mixed_modes_and_metadata and test_onesided pin memory too).
@pytest.mark.parametrize(
    ("test", "mode"), [("bw", "pageable"), ("bibw", "pageable"), ("lat", "pageable"), ("bibw", "pinned")]
)
def test_each_test_and_host_mode(test: str, mode: str, tmp_path: Path) -> None:
    """Every test and host memory, in the native loop and the Python loop: both give the same
    entries, validated, with what they ran recorded (one run per loop covers both questions)."""
    for engine in ENGINES:
        results_path = tmp_path / f"{engine}.json"
        args = ["--test", test, "--mode", mode, "--sizes", "8,64KiB,100000,1MiB", "--engine", engine]
        proc = _run_ok(["run", "--np", "2", *args, "-o", str(results_path), *QUICK])
        doc = load_results(str(results_path))
        _check_each_test(doc, test, mode, [8, 65536, 100000, 1 << 20])
        assert {e["engine"] for e in doc["results"]} == {engine}
        assert doc["metadata"]["engine"]["requested"] == engine
        assert [r["native"] for r in doc["metadata"]["engine"]["ranks"]] == [engine == "native"] * 2
        # The table shows each size as it completes, with the unit spelled out.
        assert "GB/s = 1e9 bytes/s" in proc.stdout or "microseconds" in proc.stdout
        assert "64KiB" in proc.stdout and "1MiB" in proc.stdout


def _check_each_test(doc: dict, test: str, mode: str, sizes: list[int]) -> None:  # type: ignore[type-arg]
    assert doc["complete"] is True
    entries = doc["results"]
    per_size = 2 if test == "bibw" else 1
    assert len(entries) == per_size * len(sizes)
    assert sorted({e["size_bytes"] for e in entries}) == sizes
    for entry in entries:
        assert entry["test"] == test
        assert entry["src_mode"] == entry["dst_mode"] == mode
        assert entry["validated"] is True and entry["wrong_bytes"] == 0
        assert len(entry["samples"]) == 2
        assert entry["transport"] in SHARED_MEMORY, entry["transport"]
        assert entry["ucx_locality"] == "intra-node" and entry["link"] == "same host"
        assert entry["stats"]["min"] <= entry["stats"]["median"] <= entry["stats"]["max"]
        if mode == "pinned":
            assert entry["src_pinned_method"] == entry["dst_pinned_method"] == "mlock"
        if test == "lat":
            assert entry["latency_us"] > 0 and entry["unit"] == "us" and "bandwidth_gbps" not in entry
        else:
            assert entry["bandwidth_gbps"] > 0 and entry["unit"] == "GB/s"
            assert entry["window"] >= 1
    if test == "bibw":
        for size in sizes:
            both = [e for e in entries if e["size_bytes"] == size]
            assert {(e["src_rank"], e["dst_rank"]) for e in both} == {(0, 1), (1, 0)}
            assert all(e["scope"] == "per-direction" for e in both)
            # Aggregate counts each direction's bytes once, over the slower direction's time.
            assert both[0]["aggregate_gbps"] == both[1]["aggregate_gbps"]
            assert both[0]["aggregate_gbps"] <= both[0]["bandwidth_gbps"] + both[1]["bandwidth_gbps"] + 1e-9


def test_bandwidth_figure_is_bytes_over_time_of_samples(results_path: Path) -> None:
    _run_ok(
        ["run", "--sizes", "4KiB", "--window", "4", "--iters", "3", "--warmup", "1", "-o", str(results_path), *QUICK]
    )
    (entry,) = load_results(str(results_path))["results"]
    assert (entry["window"], entry["iterations"], entry["warmup"]) == (4, 3, 1)
    assert entry["messages_per_sample"] == 3 * 4 * entry["passes"]  # each step streams its passes
    assert entry["bandwidth_gbps"] == pytest.approx(sorted(entry["samples"])[0] / 2 + sorted(entry["samples"])[1] / 2)


def test_mixed_modes_and_metadata(results_path: Path) -> None:
    _run_ok(
        ["run", "--src-mode", "pageable", "--dst-mode", "pinned", "--sizes", "1MiB", "-o", str(results_path), *QUICK]
    )
    doc = load_results(str(results_path))
    (entry,) = doc["results"]
    assert (entry["src_mode"], entry["dst_mode"]) == ("pageable", "pinned")
    assert entry["src_pinned_method"] is None and entry["dst_pinned_method"] == "mlock"
    meta = doc["metadata"]
    assert meta["world_size"] == 2 and [r["local_rank"] for r in meta["ranks"]] == [0, 1]
    assert meta["versions"]["ucx"] and meta["versions"]["mpi_library"] and meta["versions"]["rdmabench"]
    assert meta["units"]["bandwidth"] == "GB/s = 1e9 bytes/s"
    assert "--dst-mode pinned" in meta["command_line"]
    assert meta["config"]["sizes"] == [1 << 20]


def test_forced_tcp_is_recorded_as_tcp_and_flagged(results_path: Path) -> None:
    env = rdmabench_env(UCX_TLS="tcp,self")
    proc = _run_ok(["run", "--sizes", "8,1MiB", "-o", str(results_path), *QUICK], env=env)
    doc = load_results(str(results_path))
    assert all(e["transport"].startswith("tcp/") for e in doc["results"])
    assert doc["metadata"]["ucx_env"]["UCX_TLS"] == "tcp,self"
    for entry in doc["results"]:
        assert any("not shared memory" in w for w in entry["warnings"])
    assert "warning: host memory between ranks of one host went over tcp/" in proc.stdout


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    """One run with the defaults but the table's units (which change the table, not the file)."""
    results_path = tmp_path_factory.mktemp("default") / "out.json"
    proc = _run_ok(["run", "--sizes", "8,1MiB", "--units", "Gb/s", "-o", str(results_path), *QUICK])
    return proc, load_results(str(results_path))


def test_default_run_uses_shared_memory_with_its_limit(default_run: tuple[object, dict]) -> None:  # type: ignore[type-arg]
    _proc, doc = default_run
    for entry in doc["results"]:
        assert entry["transport"] in SHARED_MEMORY and entry["warnings"] == []
        # Messages this small (a window of them, at both ends) may run from the cache: no limit bounds them.
        assert entry["link_limit"] is None and entry["link_limit_unknown"].startswith("cache regime")
    topo = doc["metadata"]["topology"]
    assert len(topo) == 2 and topo[0]["host_copy_gbps"] > 0
    assert any(f["check"] == "UCX" for f in doc["metadata"]["doctor"])


def test_units_change_the_table_not_the_file(default_run: tuple[subprocess.CompletedProcess[str], dict]) -> None:  # type: ignore[type-arg]
    proc, doc = default_run
    (entry,) = [e for e in doc["results"] if e["size_bytes"] == 1 << 20]
    assert entry["unit"] == "GB/s"
    assert "Gb/s = 1e9 bits/s" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("1MiB"))
    printed = row.split()[3]  # to the table's decimals: on a loaded machine 1 MiB may read 0.252 for 0.2517
    decimals = len(printed.partition(".")[2])
    assert float(printed) == pytest.approx(entry["bandwidth_gbps"] * 8, rel=1e-3, abs=0.5 * 10**-decimals)


def test_under_mpiexec_with_an_idle_third_rank(results_path: Path) -> None:
    """The cluster way: the launcher starts the ranks, `rdmabench run` uses the world it finds."""
    command = [mpiexec(), "-n", "3"]
    if "openmpi" in mpiexec_flavor():
        command.append("--oversubscribe")
    command += [sys.executable, "-m", "rdmabench", "run", "--sizes", "64KiB", "-o", str(results_path), *QUICK]
    env = rdmabench_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = load_results(str(results_path))
    assert doc["metadata"]["world_size"] == 3 and len(doc["results"]) == 1
    assert "ranks 2..2 stay idle" in proc.stdout


def mpiexec_flavor() -> str:
    from rdmabench.job.spawner import mpiexec_flavor as flavor

    return flavor(mpiexec())


def test_corrupted_payload_fails_the_run_and_keeps_earlier_sizes(results_path: Path) -> None:
    env = rdmabench_env(RDMABENCH_FAULT="corrupt:2")
    # 8 B runs clean; the fault hits the third step of every size, so 64 KiB is the first bad one.
    proc = run_cli(["run", "--sizes", "64KiB", "--warmup", "1", "-o", str(results_path), *QUICK], env=env)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rdmabench: error:")]
    assert len(errors) == 1, proc.stderr
    assert "1 wrong byte(s) of 65536" in errors[0] and "rank 0 -> rank 1" in errors[0]
    assert "Traceback" not in proc.stderr and "MPI_ABORT" not in proc.stderr
    doc = load_results(str(results_path))
    assert doc["complete"] is False and doc["results"] == []


@pytest.mark.parametrize("test", ["bibw", "lat"])
def test_corruption_is_caught_in_every_test(test: str, results_path: Path) -> None:
    env = rdmabench_env(RDMABENCH_FAULT="corrupt:1")
    proc = run_cli(["run", "--test", test, "--sizes", "100", "--warmup", "1", "-o", str(results_path), *QUICK], env=env)
    assert proc.returncode != 0
    assert "wrong byte(s) of 100" in proc.stderr


def test_no_validate_records_it(results_path: Path) -> None:
    env = rdmabench_env(RDMABENCH_FAULT="corrupt:1")  # ignored: nothing is checked
    proc = _run_ok(["run", "--no-validate", "--sizes", "8", "-o", str(results_path), *QUICK], env=env)
    (entry,) = load_results(str(results_path))["results"]
    assert entry["validated"] is False and entry["wrong_bytes"] is None
    assert "NOT validated" in proc.stdout


@pytest.fixture(scope="module")
def default_output(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[subprocess.CompletedProcess[str]]]:
    """Two runs without -o in one folder, one printing CSV, the other the JSON document."""
    folder = tmp_path_factory.mktemp("cwd")
    as_csv = _run_ok(["run", "--sizes", "8,1KiB", "--format", "csv", *QUICK], cwd=folder)
    as_json = _run_ok(["run", "--format", "json", "--sizes", "8", *QUICK], cwd=folder)
    return folder, [as_csv, as_json]


def _written(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    return [load_results(str(f)) for f in sorted((folder / "results").glob("rdmabench-bw-pageable-*.json"))]


def test_json_format_prints_the_document(default_output: tuple[Path, list[subprocess.CompletedProcess[str]]]) -> None:
    import json

    folder, (_as_csv, as_json) = default_output
    (written,) = [doc for doc in _written(folder) if doc["metadata"]["config"]["sizes"] == [8]]
    assert json.loads(as_json.stdout) == written


def test_default_output_goes_under_results(default_output: tuple[Path, list[subprocess.CompletedProcess[str]]]) -> None:
    folder, _procs = default_output
    assert len(_written(folder)) == 2  # the second run did not overwrite the first


def test_csv_straight_from_run(default_output: tuple[Path, list[subprocess.CompletedProcess[str]]]) -> None:
    import csv
    import io

    _folder, (as_csv, _as_json) = default_output
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [int(r["size_bytes"]) for r in rows] == [8, 1024]  # nothing else on stdout: no table, no notes
    assert all(r["test"] == "bw" and r["load"] == "alone" and float(r["median"]) > 0 for r in rows)


def _cpu_run(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    out = tmp_path / "bw.json"
    proc = run_cli(["run", "--sizes", "1MiB", "--samples", "3", "--sample-time", "0.05", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    (entry,) = load_results(str(out))["results"]
    return entry  # type: ignore[no-any-return]


@pytest.mark.perf
def test_the_receivers_cpu_is_busy_for_about_the_whole_transfer(tmp_path: Path) -> None:
    """On a quiet CPU machine the receiver runs the cma copy of a 1 MiB rendezvous and polls the rest
    of the time: its CPU seconds per GB times the GB/s is close to 1 (handshakes add a little). A
    loaded machine (or the loop yielding its core) makes it less: a benchmark, not a unit test."""
    entry = _cpu_run(tmp_path)
    assert 0.5 < entry["cpu_s_per_gb"]["dst"] * entry["bandwidth_gbps"] < 4, entry


def test_every_bandwidth_entry_says_what_each_end_spent_in_cpu(tmp_path: Path) -> None:
    """CPU seconds per GB at each end, in the sampled steps; none for a latency."""
    entry = _cpu_run(tmp_path)
    cpu = entry["cpu_s_per_gb"]
    assert set(cpu) == {"src", "dst"} and all(v is not None and v > 0 for v in cpu.values())
    # Never more CPU than the wall time of the sampled steps on both ends (each at most one core).
    assert cpu["dst"] * entry["bandwidth_gbps"] < 4, (cpu, entry["bandwidth_gbps"])
    lat = tmp_path / "lat.json"
    assert run_cli(["run", "--test", "lat", "--sizes", "8", "-o", str(lat), *QUICK]).returncode == 0
    assert "cpu_s_per_gb" not in load_results(str(lat))["results"][0]  # a latency moves no bulk
