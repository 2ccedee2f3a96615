"""SIGTERM and Ctrl-C at any moment: one line, never a traceback, the exit status a shell expects (143,
130), and nothing lost. A failing rank's path is tried at every instruction (tests/stop_trials.py:
forked children on a stand-in world, ~1 ms a trial), a real job's at a few moments; the commands at
their start and in their work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rdmabench.results.files.document import load as load_results

from .conftest import rdmabench_env

ROOT = Path(__file__).resolve().parents[1]


def _trials(rank: int, first: int, last: int, step: int, folder: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.stop_trials", str(rank), str(first), str(last), str(step), str(folder)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env=rdmabench_env(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))),
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _path_length(rows: list[dict[str, Any]]) -> int:
    """The instructions the failure path ran, from the failure to the abort (a trial that reached it)."""
    return max(int(line.split(":")[1]) for r in rows for line in r["told"].splitlines() if line.startswith("instr"))


def _assert_tidy(row: dict[str, Any]) -> None:
    err = row["stderr"]
    assert "Traceback" not in err and "ignored" not in err, (row["at"], err)
    assert all(line.startswith("rdmabench: ") for line in err.splitlines()), (row["at"], err)
    assert len([line for line in err.splitlines() if line.startswith("rdmabench: error:")]) <= 1, (row["at"], err)


def test_sigterm_at_every_instruction_of_a_failing_rank_other_than_0(tmp_path: Path) -> None:
    """The CI failure of issue 55: rank 1 times out, and the launcher's SIGTERM (which rank 2's abort
    brings) lands while rank 1 is in its failure path. Either the signal came first and the rank
    stops quietly (143: the aborting rank says why), or the failure path runs whole: its one line,
    its reason told to rank 0, the abort's status."""
    rows = _trials(1, 1, 420, 1, tmp_path)
    length = _path_length(rows)
    assert length < 400, f"the failure path grew to {length} instructions: the trials no longer cover it"
    for row in rows:
        _assert_tidy(row)
        if row["status"] == 143:
            assert row["stderr"] == "" and row["told"] == "", row
        else:
            assert row["status"] == 1, row
            assert row["stderr"].startswith("rdmabench: error: failed on rank 1 (node): TimeoutError: timed out"), row
            assert row["told"].startswith("told:failed on rank 1 (node): TimeoutError"), row
    assert sum(r["status"] == 1 for r in rows) > len(rows) // 2  # most land inside the failure path


def test_sigterm_at_every_moment_of_rank_0s_failure_keeps_the_results(tmp_path: Path) -> None:
    """Rank 0's failure path writes the results file: whenever SIGTERM comes, the file is there,
    marked incomplete, with the failure's reason (or the stop's, where the signal came first)."""
    # The path was ~9,900 instructions once the outputs were checked again just before the rename.
    rows = _trials(0, 1, 16000, 50, tmp_path)
    length = _path_length(rows)
    assert length < 16000, f"the failure path grew to {length} instructions: the trials no longer cover it"
    for row in rows:
        _assert_tidy(row)
        kept = row["kept"]
        assert kept is not None and kept["complete"] is False, row
        assert row["status"] in (1, 143), row
        reason = "failed on rank 0 (node): TimeoutError" if row["status"] == 1 else "stopped by SIGTERM"
        assert kept["stopped"].startswith(reason), row
        assert f"kept in {tmp_path}" in row["stderr"], row


def _stream_header(results_path: Path, timeout: float = 90) -> dict[str, Any]:
    stream = Path(str(results_path) + ".partial")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stream.exists() and stream.stat().st_size:
            with stream.open() as handle:
                line = handle.readline()
            if line.endswith("\n"):
                return json.loads(line)  # type: ignore[no-any-return]
        time.sleep(0.02)
    raise AssertionError("no stream header in time")


@pytest.mark.parametrize("late", [1.9, 2.05, 2.2])
def test_sigterm_to_a_timing_out_rank_of_a_real_job(tmp_path: Path, late: float) -> None:
    """Real ranks, as the failing CI test ran them: rank 0 stalls, ranks 1 and 2 time out after 2 s;
    rank 1 is also sent SIGTERM around that moment. One error line, no traceback, and the results
    file kept with a reason."""
    out = tmp_path / "r.json"
    args = ["run", "--np", "3", "--pattern", "incast", "--root", "0", "--sizes", "4096", "--timeout", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rdmabench", *args, "--samples", "2", "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=rdmabench_env(RDMABENCH_FAULT="stall:3"),
    )
    header = _stream_header(out)
    time.sleep(late)  # from the stream's start to the timeout: the rounds' set-up, then 2 s
    try:
        os.kill(header["metadata"]["ranks"][1]["pid"], signal.SIGTERM)
    except ProcessLookupError:
        pass  # already gone: the abort was first
    _out, err = proc.communicate(timeout=90)
    assert proc.returncode in (1, 143), err
    assert "Traceback" not in err and "ignored" not in err, err
    assert len([line for line in err.splitlines() if line.startswith("rdmabench: error:")]) <= 1, err
    doc = load_results(str(out))
    assert doc["complete"] is False and doc["stopped"], doc


def _stopped_command(args: list[str], signum: int, tmp_path: Path, at: str) -> subprocess.CompletedProcess[str]:
    """`rdmabench ARGS`, sent `signum` by itself at a certain moment: `import` while click loads
    (a click module on the path that sends it), `work` once the command runs (its input read)."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    send = f"import os, signal\nos.kill(os.getpid(), {int(signum)})\n"
    if at == "import":
        (hook / "click.py").write_text(send)
        code = "import sys, runpy; sys.argv[0] = 'rdmabench'; runpy.run_module('rdmabench', run_name='__main__')"
    else:
        code = (
            "import sys, runpy, os, signal, rdmabench.userfiles as u; read = u.read_input\n"
            "def stop(*a, **k):\n"
            f"    os.kill(os.getpid(), {int(signum)}); return read(*a, **k)\n"
            "u.read_input = stop; sys.argv[0] = 'rdmabench'; runpy.run_module('rdmabench', run_name='__main__')"
        )
    path = os.pathsep.join(filter(None, [str(hook) if at == "import" else "", os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=rdmabench_env(PYTHONPATH=path),
    )


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("at", ["import", "work"])
def test_a_stopped_command_says_one_line(tmp_path: Path, signum: int, code: int, at: str) -> None:
    """`report` and `check` once ended on SIGTERM without a word, and Ctrl-C's line came after an
    empty line: now one line naming the command and the signal, and 143 or 130."""
    results = Path(__file__).parent / "data"
    summary = next(p for p in sorted(results.rglob("*.json")) if p.with_suffix(".links.jsonl").exists())
    for command in (["report", str(summary)], ["check", str(summary), "--expect", "default"]):
        proc = _stopped_command(command, signum, tmp_path, at)
        name = command[0]
        assert proc.returncode == code, proc.stderr
        assert proc.stderr.splitlines() == [f"rdmabench: error: {name} stopped by {signal.Signals(signum).name}"]


def test_run_stopped_before_its_ranks_start_says_one_line(tmp_path: Path) -> None:
    """`run` was silent on SIGTERM in its first fraction of a second (before its launcher forwarded
    signals): one line, 143, and no stream left behind."""
    out = tmp_path / "r.json"
    proc = _stopped_command(["run", "--sizes", "8", "-o", str(out)], signal.SIGTERM, tmp_path, "import")
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr.splitlines() == ["rdmabench: error: run stopped by SIGTERM"]
    assert list(tmp_path.glob("r.json*")) == []
