"""How the NIXL anchor tells of its ends: an end killed by a signal is said so, with the signal's
name and number (it was its last INFO line, no word of the signal), and the wait for a frozen end
is `--nixl-timeout`, named in the message (it was 600 s, fixed). Real processes here, not NIXL's:
what is checked is the anchor's wait on two processes and what it says of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench import privatedirs
from rdmabench.anchor.nixl import _wait
from rdmabench.errors import LaunchError

from .conftest import run_cli_here


def _end(folder: Path, role: str, code: str) -> subprocess.Popen[bytes]:
    """A process standing for one NIXL end, its output in the folder as the anchor's ends write it."""
    output = privatedirs.open_in_private_dir(folder / f"{role}.out", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        return subprocess.Popen([sys.executable, "-c", code], stdout=output, stderr=output, stdin=subprocess.DEVNULL)
    finally:
        os.close(output)


def _waited(processes: dict[str, subprocess.Popen[bytes]], folder: Path, timeout: float) -> str:
    try:
        with pytest.raises(LaunchError) as raised:
            _wait(processes, folder, timeout)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
            process.wait()
    return str(raised.value)


def test_an_end_killed_by_a_signal_is_said_so(tmp_path: Path) -> None:
    folder = privatedirs.scratch_dir("pair-", tmp_path)
    killed = "import os, signal\nprint('nixl target: INFO registered 64 blocks', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)"
    processes = {
        "target": _end(folder, "target", killed),
        "initiator": _end(folder, "initiator", "import time; time.sleep(30)"),
    }
    said = _waited(processes, folder, 60)
    assert f"NIXL's target was killed by signal SIGSEGV ({int(signal.SIGSEGV)})" in said, said
    assert "its last line: nixl target: INFO registered 64 blocks" in said


def test_an_end_that_fails_is_said_by_its_own_line(tmp_path: Path) -> None:
    folder = privatedirs.scratch_dir("pair-", tmp_path)
    failing = "import sys\nprint('nixl initiator: error: no such memory', flush=True)\nsys.exit(1)"
    said = _waited({"initiator": _end(folder, "initiator", failing)}, folder, 60)
    assert said == "NIXL's initiator failed (exit 1): nixl initiator: error: no such memory"


def test_the_wait_for_a_frozen_end_is_named_by_its_option(tmp_path: Path) -> None:
    folder = privatedirs.scratch_dir("pair-", tmp_path)
    frozen = "import time\nprint('nixl target: INFO waiting', flush=True)\ntime.sleep(60)"
    said = _waited({"target": _end(folder, "target", frozen)}, folder, 0.5)
    assert said.startswith("NIXL's target and initiator did not finish in 0.5 s (--nixl-timeout sets this wait)")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--nixl-timeout", "5"], "--nixl-timeout is an option of the NIXL anchor: add --against nixl"),
        (
            ["--against", "nixl", "--nixl-timeout", "nan"],
            "--nixl-timeout must be above 0 and at most 86400 seconds, not nan",
        ),
        (["--against", "nixl", "--nixl-timeout", "0"], "--nixl-timeout must be above 0"),
    ],
)
def test_the_nixl_timeout_option_is_checked(args: list[str], says: str) -> None:
    proc = run_cli_here(["anchor", *args])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
