"""What a command says when what it writes cannot be written, or what it reads is not what it seems:
a full disk (a small tmpfs in a mount namespace of the test's own), two outputs naming one file, a
links file that is a FIFO or a device, a temporary folder anyone can write without the sticky bit.
Each is one line and an exit status of its own, never the verdict's FAIL and never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devtools.diagnose import Cluster, Fault, generated
from rdmabench.anchor import nixl

from .conftest import QUICK, rdmabench_env, run_cli, run_cli_here

REPO = Path(__file__).resolve().parents[1]
CLI = "from rdmabench.cli import main; main()"
NIC = Fault("nic", 5, 1, "send", factor=0.8)  # a suspect: check's verdict is FAIL (1)


def _screen(path: Path) -> Path:
    path.write_text(json.dumps(generated(Cluster(16, 4, 2), "screen", NIC, seed=3)))
    return path


def _one_line(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


def _on_a_full_disk(disk: Path, pages_left: int, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`argv` run with `disk` a 1 MiB tmpfs (in a mount namespace of its own, gone with it) that holds
    `pages_left` free 4 KiB pages."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a full disk of the test's own needs root and unshare (a mount namespace)")
    disk.mkdir()
    fill = 256 - pages_left
    script = (
        f'mount -t tmpfs -o size=1m none "$0" && dd if=/dev/zero of="$0/fill" bs=4k count={fill} 2>/dev/null; exec "$@"'
    )
    env = rdmabench_env(PYTHONPATH=str(REPO))
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(disk), *argv], env=env, capture_output=True, text=True, timeout=120
    )


def test_check_says_in_one_line_exit_2_when_its_drain_list_cannot_be_written(tmp_path: Path) -> None:
    """A full disk under the drain list: exit 2 and one line (it was 1, check's FAIL)."""
    doc = _screen(tmp_path / "screen.json")
    disk = tmp_path / "disk"
    proc = _on_a_full_disk(
        disk, 0, [sys.executable, "-c", CLI, "check", str(doc), "--expect", "default", "--drain", f"{disk}/drain.txt"]
    )
    line = _one_line(proc)
    assert line == f"rdmabench: error: cannot write the drain list {disk}/drain.txt: No space left on device"


def test_two_outputs_naming_one_file_are_refused_before_anything(tmp_path: Path) -> None:
    """`--json X --drain X`: the drain list found the verdict there (exit 1, after the verdict)."""
    doc = _screen(tmp_path / "screen.json")
    both = tmp_path / "out.txt"
    proc = run_cli_here(["check", str(doc), "--expect", "default", "--json", str(both), "--drain", str(both)])
    assert _one_line(proc) == f"rdmabench: error: --json and --drain name the same file {both}"
    assert not both.exists() and not proc.stdout


_STREAM = """
import json, shutil, sys
from devtools.diagnose import Cluster, Fault, generated
from rdmabench.errors import ResultsWriteError
from rdmabench.results.files import document
disk, out = sys.argv[1], sys.argv[2]
doc = generated(Cluster(8, 4, 1), "screen", Fault("none"), seed=1)
doc["metadata"].setdefault("created_utc", "2026-11-26T00:00:00Z")
stream = document.ResultsStream(disk + "/r.json", doc["metadata"])
said = "the disk never filled"
try:
    for first in range(0, len(doc["results"]), 3):
        stream.append(doc["results"][first:first + 3])
except ResultsWriteError as exc:
    said = str(exc)
shutil.copy(disk + "/r.json.partial", out)
print(said)
"""


def test_a_full_disk_says_how_many_results_the_stream_kept(tmp_path: Path) -> None:
    """The line said the results counted (a batch still in the buffer, or cut short, included)."""
    kept = tmp_path / "kept.json.partial"
    proc = _on_a_full_disk(tmp_path / "disk", 2, [sys.executable, "-c", _STREAM, str(tmp_path / "disk"), str(kept)])
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.strip()
    assert "No space left on device; the " in said and " result(s) measured before are kept in it" in said, said
    number = int(said.split("; the ")[1].split()[0])
    from rdmabench.results.files import document

    assert len(document.load(str(kept))["results"]) == number > 0


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run") / "r.json"
    proc = run_cli(["run", "--np", "2", "--sizes", "8", *QUICK, "-o", str(path)])
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        ("fifo", "it is a FIFO (named pipe), not a regular file; not read"),
        ("/dev/zero", "it is a symbolic link to a character device, not a regular file; not read"),
        ("dangling", "it is a symbolic link to nothing ("),
    ],
)
def test_a_links_file_that_is_no_regular_file_is_named_for_what_it_is(
    real_run: Path, tmp_path: Path, plant: str, says: str
) -> None:
    """Its summary beside a FIFO, a link to /dev/zero or to nothing was said to be 'not beside it'."""
    summary: dict[str, Any] = json.loads(real_run.read_text())
    copy = tmp_path / "r.json"
    shutil.copy(real_run, copy)
    links = tmp_path / summary["links"]["file"]
    if plant == "fifo":
        os.mkfifo(links)
    else:
        links.symlink_to(plant if plant != "dangling" else tmp_path / "gone")
    proc = run_cli(["report", str(copy)], timeout=60)
    assert proc.returncode == 2, proc.stderr
    named = [line for line in proc.stderr.splitlines() if "links file" in line]
    assert len(named) == 1 and says in named[0] and "not beside it" not in named[0], proc.stderr


def _open_folder(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)  # anyone may rename what is in it: no sticky bit
    return rdmabench_env(TMPDIR=str(folder))


def test_a_temporary_folder_anyone_can_write_without_the_sticky_bit_is_refused(tmp_path: Path) -> None:
    """Another user can move a private folder made there and put theirs in its place."""
    env = _open_folder(tmp_path)
    proc = run_cli(["run", "--np", "2", "--sizes", "8", *QUICK, "-o", str(tmp_path / "r.json")], env=env)
    line = _one_line(proc, 1)
    assert f"refusing {tmp_path / 'open'}: anyone can write to it and it has no sticky bit (mode 0777)" in line
    assert not list((tmp_path / "open").iterdir())


@pytest.mark.skipif(nixl.missing() is not None, reason="NIXL is not installed")
def test_the_nixl_anchor_in_such_a_folder_is_one_line(tmp_path: Path) -> None:
    """Its private folder moved away by another user was a FileNotFoundError traceback."""
    env = _open_folder(tmp_path)
    args = ["anchor", "--against", "nixl", "--sizes", "4KiB", "--blocks", "16", "-o", str(tmp_path / "n.json")]
    line = _one_line(run_cli(args, env=env, timeout=120), 1)
    assert "anyone can write to it and it has no sticky bit" in line
