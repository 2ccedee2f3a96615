"""Resources and the launcher: a run that cannot fit, ranks that outnumber their cores, a launcher
that starts no rank and a plugin that breaks at import each end in one line, or are recorded.
Real launchers (/bin/true, /bin/false, Open MPI's mpiexec without HOME), real ranks, real cgroups,
real plugin files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rdmabench.hardware import budget
from rdmabench.job import schedule
from rdmabench.job.config import RunConfig
from rdmabench.job.preflight import rank_need
from rdmabench.measure.need import PER_MESSAGE
from rdmabench.results.files.document import load as load_results

from .conftest import QUICK, rdmabench_env, run_cli

REPO = Path(__file__).resolve().parent.parent


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# --- the launcher ------------------------------------------------------------------------------


@pytest.mark.parametrize("launcher, status", [("/bin/true", 0), ("/bin/false", 1)])
def test_a_launcher_that_starts_no_rank_is_one_line(tmp_path: Path, launcher: str, status: int) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(["run", "--np", "2", "-o", str(out)], env=rdmabench_env(RDMABENCH_MPIEXEC=launcher), timeout=60)
    lines = _lines(proc.stderr)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0] == f"rdmabench: error: the launcher {launcher} exited {status} without starting any rank"
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_launcher_that_cannot_start_is_one_line_and_its_words_are_kept(tmp_path: Path) -> None:
    """Open MPI's mpiexec without HOME prints a box of 14 lines and starts nothing: one line says so,
    with the launcher's first words, and the full text is in a private file."""
    env = rdmabench_env(TMPDIR=str(tmp_path))
    env.pop("HOME", None)
    proc = run_cli(["run", "--np", "2", "-o", str(tmp_path / "r.json"), *QUICK], env=env, timeout=120)
    if proc.returncode == 0:
        pytest.skip("this MPI's launcher starts ranks without HOME")
    lines = _lines(proc.stderr)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("rdmabench: error: the launcher ") and " without starting any rank" in lines[0]
    assert "its full output: " in lines[0], lines[0]
    log = Path(lines[0].rsplit("its full output: ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path and log.stat().st_mode & 0o777 == 0o600 and log.stat().st_uid == os.getuid()
    said = log.read_text()
    assert len(_lines(said)) > 1 and lines[0].split("without starting any rank: ")[1].split(" (its full")[0] in said
    assert not (tmp_path / "r.json").exists()


# --- plugins -----------------------------------------------------------------------------------

_BROKEN = {
    "RuntimeError": 'raise RuntimeError("the plugin is broken")\n',
    "SyntaxError": "def measure(:\n",
    "SystemExit": "import sys\nsys.exit(3)\n",
}


@pytest.mark.parametrize("raised", sorted(_BROKEN))
def test_a_plugin_that_raises_at_import_is_one_line(tmp_path: Path, raised: str) -> None:
    (tmp_path / "brokenplugin.py").write_text(_BROKEN[raised])
    env = rdmabench_env(RDMABENCH_PLUGINS="brokenplugin", PYTHONPATH=str(tmp_path))
    for args in (["--help"], ["run", "--help"]):  # help still helps, and names the plugin in one line
        proc = run_cli(args, env=env, timeout=60)
        lines = _lines(proc.stderr)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
        assert "plugin 'brokenplugin' failed at import" in lines[0] and (
            raised in lines[0] or "sys.exit(3)" in lines[0]
        )
        assert "Usage:" in proc.stdout
    run = run_cli(["run", "--np", "2", "-o", str(tmp_path / "r.json")], env=env, timeout=60)
    lines = _lines(run.stderr)
    assert run.returncode == 2 and len(lines) == 1 and "plugin 'brokenplugin' failed at import" in lines[0], run.stderr
    assert str(tmp_path / "brokenplugin.py") in lines[0] or raised == "SystemExit"


def test_report_says_which_plugin_a_files_test_needs(tmp_path: Path) -> None:
    """A run of a plugin's test records the plugin; `report` without it says which plugin is missing
    (or broken) instead of reading figures whose field and direction only the plugin knows."""
    out = tmp_path / "rtime.json"
    (tmp_path / "rtimeplugin.py").write_text("from tests.test_registry import RTIME  # noqa: F401\n")
    path = os.pathsep.join(filter(None, [str(REPO), str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    plugin = rdmabench_env(RDMABENCH_PLUGINS="rtimeplugin", PYTHONPATH=path)
    proc = run_cli(["run", "--np", "2", "--test", "rtime", "--sizes", "64KiB", "-o", str(out), *QUICK], env=plugin)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["metadata"]["test_plugins"] == {"rtime": "rtimeplugin"}
    assert run_cli(["report", str(out), "--format", "csv"], env=plugin).returncode == 0  # with it: read

    bare = rdmabench_env()
    bare.pop("RDMABENCH_PLUGINS", None)
    report = run_cli(["report", str(out)], env=bare)
    skipped, refused = _lines(report.stderr)
    assert skipped == (
        f"rdmabench: warning: skipped {out}: test kind 'rtime' comes from plugin 'rtimeplugin', which is "
        "not loaded (set RDMABENCH_PLUGINS=rtimeplugin)"
    )
    assert report.returncode != 0 and refused.startswith("rdmabench: error: no usable results files"), refused

    (tmp_path / "rtimeplugin.py").write_text('raise RuntimeError("gone")\n')  # now it breaks at import
    report = run_cli(["report", str(out)], env=plugin)
    assert "plugin 'rtimeplugin', which failed at import (RuntimeError: gone" in report.stderr, report.stderr
    assert report.returncode != 0 and "Traceback" not in report.stderr


# --- memory ------------------------------------------------------------------------------------


def _need(**options: object) -> int:
    config = RunConfig.from_options(options)
    what = config.what
    rounds = schedule.schedule(what.pattern, ["h", "h"], what.link_class, what.concurrent, what.root)
    return max(rank_need(config, rounds, rank).need.host for rank in (0, 1))


def test_a_block_list_needs_its_bookkeeping_as_well_as_its_bytes() -> None:
    """A million 8-byte blocks are 8 MB of data and over a GB of requests, slots and offsets."""
    blocks = _need(test="put", blocks=1_000_000, sizes=[8])
    assert blocks > 1_000_000 * PER_MESSAGE > 100 * _need(test="put", blocks=1_000, sizes=[8])
    assert _need(test="bw", sizes=[64 << 20], window=4) >= 4 * (64 << 20)  # the window's buffers at least


def test_a_million_block_list_is_refused_before_any_rank_allocates(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    started = time.monotonic()
    proc = run_cli(["run", "--np", "2", "--test", "put", "--blocks", "1000000", "-o", str(out)], timeout=120)
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert " of host memory per rank (rank " in lines[0] and " for the 2 rank(s) on " in lines[0], lines[0]
    assert "available (" in lines[0] and "--blocks" in lines[0]
    assert time.monotonic() - started < 60 and not out.exists()


def _memory_cgroup(tmp_path: Path, limit: int) -> tuple[Path, int] | None:
    """A child of this process's memory cgroup, limited to `limit` bytes (root only; None where the
    cgroup cannot be made here)."""
    if os.geteuid() != 0:
        return None
    for folder, version in budget._cgroup_folders("memory"):
        child = Path(folder) / f"rdmabench-test-{os.getpid()}-{tmp_path.name}"
        limit_file = child / ("memory.max" if version == 2 else "memory.limit_in_bytes")
        try:
            child.mkdir()
        except OSError:
            continue
        try:
            limit_file.write_text(str(limit))
            return child, version
        except OSError:
            child.rmdir()
    return None


def test_a_cgroup_memory_limit_is_the_memory_there_is(tmp_path: Path) -> None:
    """A job's cgroup holds it to less than the host's MemAvailable: the preflight asks the cgroup."""
    made = _memory_cgroup(tmp_path, 1 << 30)
    if made is None:
        pytest.skip("needs root and a memory cgroup this process may create children in")
    group, _version = made
    out = tmp_path / "r.json"
    enter = f'echo $$ > {group}/cgroup.procs && exec "$@"'
    command = [
        sys.executable,
        "-m",
        "rdmabench",
        "run",
        "--np",
        "2",
        "--sizes",
        "256MiB",
        "--window",
        "2",
        "-o",
        str(out),
    ]
    try:
        proc = subprocess.run(
            ["sh", "-c", enter, "sh", *command, *QUICK],
            capture_output=True,
            text=True,
            timeout=120,
            env=rdmabench_env(),
        )
    finally:
        group.rmdir()
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"the memory limit of cgroup {group}" in lines[0] and " per rank (rank " in lines[0], lines[0]
    assert not out.exists()


# --- cores -------------------------------------------------------------------------------------


def test_ranks_that_outnumber_their_cores_are_warned_and_recorded(tmp_path: Path) -> None:
    """Two busy-polling ranks on the one core this process may use (its CPU affinity, inherited by
    the launcher and the ranks)."""
    core = min(os.sched_getaffinity(0))
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "rdmabench", "run", "--np", "2", "--sizes", "8", "-o", str(out), *QUICK],
        capture_output=True, text=True, timeout=180, env=rdmabench_env(),
        preexec_fn=lambda: os.sched_setaffinity(0, {core}),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: 2 ranks busy-poll at once on " in proc.stdout and "1 core(s)" in proc.stdout, proc.stdout
    doc = load_results(str(out))
    host = doc["metadata"]["hosts"][0]
    assert doc["metadata"]["oversubscribed"] == [{"host": host, "busy_ranks": 2, "cores": 1}]
