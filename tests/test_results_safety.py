"""No lost or mislabelled results: names reserved atomically, a dead run's stream never destroyed, a
full disk reported in one line with the path of what was kept, a cut-off record said."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench.results.files import document

from .conftest import QUICK, load, rdmabench_env, run_cli, run_cli_here


def _written(stdout: str) -> str:
    return next(line.split("results written to ", 1)[1] for line in stdout.splitlines() if "results written to" in line)


def test_two_runs_started_together_keep_their_own_files(tmp_path: Path) -> None:
    """Same test, same modes, same second: the default names differ and each file holds its own run."""
    command = [sys.executable, "-m", "rdmabench", "run", *QUICK]
    runs = [
        subprocess.Popen(
            [*command, "--sizes", size],
            cwd=tmp_path,
            env=rdmabench_env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for size in ("8", "16")
    ]
    outputs = [run.communicate(timeout=180) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _out, err in outputs]
    paths = [_written(out) for out, _err in outputs]
    assert len(set(paths)) == 2
    for path, size in zip(paths, (8, 16), strict=True):
        assert [e["size_bytes"] for e in document.load(str(tmp_path / path))["results"]] == [size]
    assert not list((tmp_path / "results").glob("*.partial"))  # no reservation left behind


def test_the_stream_of_a_dead_run_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    dead = tmp_path / "r.json.partial"
    dead.write_text('{"schema": {"name": "rdmabench-results", "version": 2}, "metadata": {}}\n{"half')
    before = dead.read_bytes()
    for force in ([], ["--force"]):
        proc = run_cli(["run", "--sizes", "8", "-o", str(out), *QUICK, *force])
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode != 0 and len(lines) == 1, proc.stderr
        assert "holds the results of a run that did not finish" in lines[0] and "rdmabench report" in lines[0]
        assert dead.read_bytes() == before and not out.exists()


def test_an_output_another_run_is_writing_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    document.reserve(str(out))  # as a run that has just started would
    os.environ.pop(document.RESERVED_ENV, None)  # ...in another process
    proc = run_cli(["run", "--sizes", "8", "-o", str(out), *QUICK])
    assert proc.returncode != 0 and "another run is writing" in proc.stderr, proc.stderr
    assert (tmp_path / "r.json.partial").exists()


def test_a_default_name_taken_in_the_same_second_moves_on(tmp_path: Path) -> None:
    first = document.default_output_path("bw", "pageable", "pageable", str(tmp_path))
    second = document.default_output_path("bw", "pageable", "pageable", str(tmp_path))
    os.environ.pop(document.RESERVED_ENV, None)
    assert first != second and Path(first + ".partial").exists() and Path(second + ".partial").exists()
    document.release(first)
    assert not Path(first + ".partial").exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root to mount a small tmpfs")
@pytest.mark.parametrize("room", ["12k", "24k"])
def test_a_full_disk_is_one_line_naming_what_was_kept(tmp_path: Path, room: str) -> None:
    """12k fills while results stream; 24k when the links file is written at the end."""
    disk = tmp_path / "disk"
    disk.mkdir()
    run = [
        sys.executable,
        "-m",
        "rdmabench",
        "run",
        "--np",
        "4",
        "--pattern",
        "all-pairs",
        "--sizes",
        "8,16,32,64,128,256",
    ]
    run += ["--samples", "1", "--sample-time", "0.001", "-o", str(disk / "r.json")]
    script = f"mount -t tmpfs -o size={room} tmpfs {disk} && {' '.join(run)}; code=$?; ls {disk}; exit $code"
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=180, env=rdmabench_env()
    )
    if "mount" in proc.stderr and "permission" in proc.stderr.lower():
        pytest.skip(proc.stderr.strip())
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "No space left on device" in lines[0] and str(disk / "r.json.partial") in lines[0]
    assert "kept in" in lines[0]
    assert "r.json.partial" in proc.stdout.splitlines()[-1]  # still there


def test_a_record_cut_off_by_a_dying_run_is_said(tmp_path: Path) -> None:
    source = tmp_path / "ok.json"
    proc = run_cli(["run", "--sizes", "8,16", "-o", str(source), *QUICK])
    assert proc.returncode == 0, proc.stderr
    links = (tmp_path / "ok.links.jsonl").read_text().splitlines()
    summary = load(source)
    stream = tmp_path / "dead.json.partial"
    header = {"schema": summary["schema"], "metadata": summary["metadata"]}
    tables = [{"profile": i, "entry": p} for i, p in enumerate(summary["profiles"])]
    tables += [{"rank_info": r} for r in summary["ranks"]]
    stream.write_text("\n".join(json.dumps(x) for x in [header, *tables]) + "\n" + links[0] + "\n" + links[1][:20])
    doc = document.salvage(str(tmp_path / "dead.json"), "killed")
    assert doc is not None and doc["dropped"].startswith("the last record of the stream was cut off")
    assert len(document.load(str(tmp_path / "dead.json"))["results"]) == 1


def test_results_files_are_never_writable_by_others_whatever_the_umask(tmp_path: Path) -> None:
    """Under a umask of 000 the results and links files are still 0644 (the stream's and the
    replacement's mode), never writable by a neighbour."""
    out = tmp_path / "r.json"
    proc = subprocess.run(
        ["sh", "-c", f"umask 000; {sys.executable} -m rdmabench run --sizes 8 -o {out} " + " ".join(QUICK)],
        capture_output=True,
        text=True,
        timeout=120,
        env=rdmabench_env(),
    )
    assert proc.returncode == 0, proc.stderr
    for path in (out, tmp_path / "r.links.jsonl"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(("umask", "mode"), [(0o000, 0o644), (0o002, 0o644), (0o077, 0o600)])
def test_a_report_follows_the_umask_but_is_never_writable_by_others(tmp_path: Path, umask: int, mode: int) -> None:
    from rdmabench import userfiles

    out = tmp_path / "report.txt"
    old = os.umask(umask)
    try:
        userfiles.write_text(str(out), "a report\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_a_partial_stream_behind_a_link_is_not_read(tmp_path: Path) -> None:
    """A run's .partial stream is read back as it was written: never through a symbolic link."""
    target = tmp_path / "elsewhere.txt"
    target.write_text('{"schema": {"name": "rdmabench-results", "version": 2}}\n')
    (tmp_path / "r.json.partial").symlink_to(target)
    proc = run_cli_here(["report", str(tmp_path / "r.json.partial")])
    assert proc.returncode == 2 and "symbolic link" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
