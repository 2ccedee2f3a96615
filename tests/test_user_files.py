"""Files a user names are taken for what they are: an output that is a device, FIFO, directory, a
link to nothing or in a folder that does not exist is refused in one line before anything is
measured; an existing file needs --force everywhere; results are written without following a link
planted at their names; an input that is not a regular file (a FIFO, /dev/zero, a socket), or is
larger than rdmabench reads, is skipped by name without being read; and a stream that claims
30000 ranks in a few kilobytes costs what its few kilobytes hold."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rdmabench.cli import main
from rdmabench.errors import FileRefusedError, ResultsFileError
from rdmabench.results.files import document

from .conftest import rdmabench_env

RUNS = Path(__file__).resolve().parent / "data" / "compare" / "base"


@contextlib.contextmanager
def _within(seconds: float) -> Iterator[None]:
    """Fail instead of hanging: an open of a FIFO waits for a writer (the alarm interrupts it)."""

    def expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _cli(args: list[str], **env: str) -> Result:
    with _within(20):
        return CliRunner().invoke(main, args, env=env or None)


def _one_line(result: Result, *expected: str, code: int = 2) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code and len(lines) == 1, (result.exit_code, result.stderr, result.exception)
    assert lines[0].startswith("rdmabench: error: ") and all(e in lines[0] for e in expected), lines[0]
    return lines[0]


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    """A real results file (summary and links) of a run on the CI VM, copied here."""
    for name in ("r01.json", "r01.links.jsonl"):
        shutil.copy(RUNS / name, tmp_path / name)
    return tmp_path / "r01.json"


# --- outputs -----------------------------------------------------------------------------------


def _target(tmp_path: Path, kind: str) -> tuple[str, str]:
    """A path of `kind` to name as an output, and what its refusal says."""
    path = tmp_path / "out" / "target.json"
    path.parent.mkdir()
    if kind == "device":
        return _null_device(path), "it is a character device, not a regular file"
    if kind == "fifo":
        os.mkfifo(path)
        return str(path), "it is a FIFO (named pipe), not a regular file"
    if kind == "directory":
        path.mkdir()
        return str(path), "it is a directory"
    if kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere")
        return str(path), "it is a symbolic link to nothing"
    if kind == "folder name":
        return f"{path.parent / 'new'}/", "it names a folder; give a file name"
    if kind == "missing folder":
        missing = tmp_path / "no-such-folder"
        return str(missing / "target.json"), f"its folder {missing} does not exist"
    assert kind == "existing file"
    path.write_text("precious")
    return str(path), "it already exists; pass --force"


def _null_device(path: Path) -> str:
    """A character device to name as an output: as root a private node of /dev/null's (1, 3), so
    that a regression that renames a results file over its output replaces this node, not the
    machine's /dev/null (it did, on the code before this test); /dev/null itself otherwise."""
    if os.geteuid() != 0:
        return "/dev/null"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return str(path)


OUTPUTS = ["run", "report", "check --json", "check --junit", "check --drain", "anchor", "copy", "storage"]


def _command(name: str, tmp_path: Path, run_file: Path, target: str) -> list[str]:
    commands = {
        "run": ["run", "--sizes", "8", "-o", target],
        "report": ["report", str(run_file), "-o", target],
        "check --json": ["check", str(run_file), "--expect", "default", "--json", target],
        "check --junit": ["check", str(run_file), "--expect", "default", "--junit", target],
        "check --drain": ["check", str(run_file), "--expect", "default", "--drain", target],
        "anchor": ["anchor", "--sizes", "8", "--tests", "bw", "-o", target],
        "copy": ["copy", "--sizes", "1MiB", "-o", target],
        "storage": ["storage", str(tmp_path / "data.bin"), "--size", "1MiB", "-o", target],
    }
    return commands[name]


@pytest.fixture
def launcher(tmp_path: Path) -> tuple[Path, Path]:
    """An mpiexec that only notes it was called: a refused run must never reach it."""
    marker = tmp_path / "launched"
    script = tmp_path / "mpiexec"
    script.write_text(f'#!/bin/sh\necho "$@" >> {marker}\n')
    script.chmod(0o755)
    return script, marker


@pytest.mark.parametrize(
    "kind", ["device", "fifo", "directory", "dangling link", "folder name", "missing folder", "existing file"]
)
@pytest.mark.parametrize("command", OUTPUTS)
def test_an_output_that_is_not_a_new_file_is_refused_before_anything_runs(
    tmp_path: Path, run_file: Path, launcher: tuple[Path, Path], command: str, kind: str
) -> None:
    target, says = _target(tmp_path, kind)
    force = [] if kind == "existing file" else ["--force"]  # --force replaces a file, never anything else
    started = time.monotonic()
    result = _cli([*_command(command, tmp_path, run_file, target), *force], RDMABENCH_MPIEXEC=str(launcher[0]))
    _one_line(result, f"to {target}: {says}")
    assert time.monotonic() - started < 5  # nothing measured: anchor, copy and storage take many seconds
    assert not launcher[1].exists()  # no rank started
    assert not (tmp_path / "data.bin").exists()  # storage created no file to read
    assert not (tmp_path / "no-such-folder").exists()  # and no folder was made for the output
    if kind == "existing file":
        assert Path(target).read_text() == "precious"
    assert result.stdout == ""


@pytest.mark.parametrize("command", OUTPUTS)
@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/2"])
def test_a_standard_stream_is_no_output_file(
    tmp_path: Path, run_file: Path, launcher: tuple[Path, Path], command: str, name: str
) -> None:
    """Its refusal invited --force, and with --force (as root, standard output redirected to a file)
    the link /dev/stdout was replaced by a regular file: every later process of the node lost it."""
    result = _cli(_command(command, tmp_path, run_file, name), RDMABENCH_MPIEXEC=str(launcher[0]))
    line = _one_line(result, f"to {name}: ", "names an open stream", "never replaced")
    assert "--force" not in line and not launcher[1].exists()


@pytest.mark.parametrize("command", OUTPUTS)
def test_a_link_to_an_open_descriptor_is_never_replaced(
    tmp_path: Path, run_file: Path, launcher: tuple[Path, Path], command: str
) -> None:
    """/dev/stdout's own chain (a link to /proc/self/fd/N, which leads to a regular file), planted
    here rather than replaced in /dev: with --force it was replaced by the output."""
    held = tmp_path / "held.txt"
    held.write_text("someone's stream")
    fd = os.open(held, os.O_RDONLY)
    try:
        link = tmp_path / "out.json"
        link.symlink_to(f"/proc/self/fd/{fd}")
        result = _cli(
            [*_command(command, tmp_path, run_file, str(link)), "--force"], RDMABENCH_MPIEXEC=str(launcher[0])
        )
    finally:
        os.close(fd)
    _one_line(result, f"to {link}: /proc/", "names an open stream", "never replaced")
    assert link.is_symlink() and held.read_text() == "someone's stream" and not launcher[1].exists()


def test_the_file_standard_output_is_redirected_to_is_never_replaced(tmp_path: Path, run_file: Path) -> None:
    """`report -o out.txt --force > out.txt` renamed a new file over the one the shell had opened."""
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        proc = subprocess.run(
            [sys.executable, "-m", "rdmabench", "report", str(run_file), "-o", str(out), "--force"],
            stdout=stdout, stderr=subprocess.PIPE, text=True, env=rdmabench_env(), timeout=60,
        )  # fmt: skip
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "it is this command's standard output" in lines[0], lines
    assert "--force" not in lines[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="a link of another user's is made as root")
def test_a_link_of_another_users_is_never_replaced(tmp_path: Path, run_file: Path) -> None:
    """Only a regular file or the user's own link is replaced: a link a neighbour planted is theirs."""
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file")
    link = tmp_path / "report.txt"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    result = _cli(["report", str(run_file), "-o", str(link), "--force"])
    _one_line(result, f"to {link}: it is a symbolic link of another user's (uid 65534): never replaced")
    assert link.is_symlink() and victim.read_text() == "someone's file"


def test_check_never_overwrites_the_file_it_judged(run_file: Path) -> None:
    """Not even with --force: the verdict would replace the results it judged (never a lost results file)."""
    before = run_file.read_bytes()
    for option in ("--json", "--junit"):
        for force in ([], ["--force"]):
            refused = _cli(["check", str(run_file), "--expect", "all=0.0001", option, str(run_file), *force])
            _one_line(
                refused, f"{option} {run_file} is the same file as the input {run_file}: refused, even with --force"
            )
            assert run_file.read_bytes() == before


def test_a_link_at_an_output_is_replaced_never_written_through(tmp_path: Path, run_file: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file")
    link = tmp_path / "report.txt"
    link.symlink_to(victim)
    written = _cli(["report", str(run_file), "-o", str(link), "--force"])
    assert written.exit_code == 0, written.stderr
    assert victim.read_text() == "someone's file"
    assert not link.is_symlink() and "vm:rank0 -> vm:rank1" in link.read_text()


# --- the results stream ------------------------------------------------------------------------


@pytest.fixture
def reserved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An output reserved as the launching process reserves one for its ranks."""
    monkeypatch.delenv(document.RESERVED_ENV, raising=False)
    out = tmp_path / "r.json"
    document.reserve(str(out))
    yield out
    os.environ.pop(document.RESERVED_ENV, None)


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_link_or_fifo_planted_at_a_reserved_stream_is_refused(tmp_path: Path, reserved: Path, planted: str) -> None:
    """Between the reservation and rank 0's open, the empty stream is swapped: a link to an empty
    file of someone else's must not be written through, a FIFO must not block the open."""
    partial = Path(document.stream_path(str(reserved)))
    victim = tmp_path / "victim"
    victim.write_text("")
    partial.unlink()
    if planted == "link":
        partial.symlink_to(victim)
    else:
        os.mkfifo(partial)
    with _within(5), pytest.raises(ResultsFileError, match="not a stream rdmabench wrote") as refused:
        document.ResultsStream(str(reserved), {"world_size": 2})
    assert "\n" not in str(refused.value)
    assert victim.read_text() == "" and not reserved.exists()


def test_a_stream_is_created_exclusively_never_through_a_link(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    Path(document.stream_path(str(out))).symlink_to(tmp_path / "nowhere")
    with pytest.raises(ResultsFileError, match="is a symbolic link, not a stream rdmabench wrote"):
        document.ResultsStream(str(out), {"world_size": 2})
    assert not (tmp_path / "nowhere").exists()


def test_a_stream_is_not_read_back_through_a_link(tmp_path: Path) -> None:
    """A run that died leaves OUT.partial; if that name is a link, salvage reads nothing through it."""
    elsewhere = tmp_path / "elsewhere.partial"
    elsewhere.write_text(json.dumps({"schema": {"name": "rdmabench-results", "version": 2}, "metadata": {}}) + "\n")
    out = tmp_path / "r.json"
    Path(document.stream_path(str(out))).symlink_to(elsewhere)
    with pytest.raises(ResultsFileError, match="it is a symbolic link, not a regular file"):
        document.salvage(str(out), "killed")
    assert not out.exists() and elsewhere.exists()


# --- inputs ------------------------------------------------------------------------------------


def _skipped(result: Result, path: str, says: str) -> None:
    assert f"rdmabench: warning: skipped {path}: {says}" in result.stderr, result.stderr


@pytest.mark.parametrize("command", ["report", "check", "compare"])
def test_a_fifo_among_the_inputs_is_skipped_by_name_without_blocking(
    tmp_path: Path, run_file: Path, command: str
) -> None:
    fifo = tmp_path / "zz.json"
    os.mkfifo(fifo)
    judge = ["--expect", "all=0.0001"] if command == "check" else []
    # Named (compare: as NEW), and found in a directory (compare: on both sides).
    for inputs in ([str(run_file), str(fifo)], [str(tmp_path), str(tmp_path)]):
        result = _cli([command, *inputs, *judge])
        _skipped(result, str(fifo), "it is a FIFO (named pipe), not a regular file; not read")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_input_is_skipped_by_name(run_file: Path, device: str) -> None:
    result = _cli(["report", device, str(run_file)])
    assert result.exit_code == 0, result.stderr
    _skipped(result, device, "it is a character device, not a regular file; not read")
    alone = _cli(["report", device])
    assert alone.exit_code == 2 and "no usable results files" in alone.stderr


def test_a_socket_or_a_link_to_a_device_in_a_directory_is_skipped(tmp_path: Path, run_file: Path) -> None:
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "s.json"))
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    try:
        result = _cli(["report", str(tmp_path)])
    finally:
        listening.close()
    assert result.exit_code == 0, result.stderr
    _skipped(result, str(tmp_path / "s.json"), "it is a socket, not a regular file")
    _skipped(result, str(tmp_path / "zero.json"), "it is a character device, not a regular file")


def test_every_input_is_size_checked_before_it_is_read(run_file: Path) -> None:
    size = run_file.stat().st_size
    result = _cli(["report", str(run_file)], RDMABENCH_MAX_INPUT="4KiB")
    _skipped(result, str(run_file), f"{size} bytes, larger than any results file rdmabench writes (4096 bytes")
    assert "RDMABENCH_MAX_INPUT raises the limit" in result.stderr
    assert _cli(["report", str(run_file)], RDMABENCH_MAX_INPUT="16KiB").exit_code == 0
    _one_line(_cli(["report", str(run_file)], RDMABENCH_MAX_INPUT="lots"), "RDMABENCH_MAX_INPUT: bad size 'lots'")


def test_a_links_file_is_read_a_bounded_line_at_a_time(tmp_path: Path, run_file: Path) -> None:
    links = tmp_path / "r01.links.jsonl"
    real = (RUNS / "r01.links.jsonl").read_text().splitlines(keepends=True)
    links.write_text("[" * 20000 + "\n" + "".join(real[1:]))  # one line longer than a whole document may be
    result = _cli(["report", str(run_file)], RDMABENCH_MAX_INPUT="16KiB")
    _one_line(result, f"{links}: line 1 is longer than 16384 characters", code=2)  # bad input
    links.write_text((RUNS / "r01.links.jsonl").read_text() * 3000)  # 1.5 MB: beyond 64 x 16 KiB
    result = _cli(["report", str(run_file)], RDMABENCH_MAX_INPUT="16KiB")
    # Refused when its lines are counted against its summary, before any is read: the file is left out
    # (a warning naming why) and, being the only one, nothing is left to report.
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 2, (result.exit_code, result.stderr)
    assert f"{links}: 1491000 bytes, larger than any links file rdmabench writes" in lines[0]
    assert lines[1].startswith("rdmabench: error: ") and "no usable results files" in lines[1]


def test_the_library_refuses_a_fifo_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    with _within(5), pytest.raises(ResultsFileError, match="it is a FIFO"):
        document.load(str(fifo))
    from rdmabench import userfiles

    with _within(5), pytest.raises(FileRefusedError, match="it is a FIFO"):
        userfiles.read_input(str(fifo), 1 << 20)


# --- claimed sizes -----------------------------------------------------------------------------


def _stream_claiming(path: Path, world_size: int) -> Path:
    """A stream (OUT.partial) of the real run's records whose header claims `world_size` ranks."""
    summary = json.loads((RUNS / "r01.json").read_text())
    header = {"schema": summary["schema"], "metadata": {**summary["metadata"], "world_size": world_size}}
    lines: list[Any] = [header]
    lines += [{"profile": i, "entry": p} for i, p in enumerate(summary["profiles"])]
    lines += [{"rank_info": r} for r in summary["ranks"]]
    lines += [json.loads(line) for line in (RUNS / "r01.links.jsonl").read_text().splitlines()]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_a_claimed_world_of_30000_ranks_builds_no_matrix_of_that_size(tmp_path: Path) -> None:
    stream = _stream_claiming(tmp_path / "huge.json.partial", 30000)
    assert stream.stat().st_size < 10_000
    with _within(10):
        assert document.load(str(stream))["matrices"] == []  # beyond MATRICES_UP_TO ranks: none
        assert "matrices" not in document.load(str(stream), lazy=True)  # a report reads none
    two = document.load(str(_stream_claiming(tmp_path / "two.json.partial", 2)))
    (matrix,) = [m for m in two["matrices"] if m["size_bytes"] == 8]
    assert len(matrix["values"]) == 2 and all(len(row) == 2 for row in matrix["values"])


def test_report_on_a_stream_claiming_30000_ranks_is_quick_and_small(tmp_path: Path) -> None:
    """A real process, its address space capped at 2 GiB: a 30000 x 30000 matrix of lists is 7 GB."""
    stream = _stream_claiming(tmp_path / "huge.json.partial", 30000)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rdmabench", "report", str(stream), "--format", "json"],
        capture_output=True, text=True, timeout=60, env=rdmabench_env(), preexec_fn=cap,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 20
    assert len(json.loads(proc.stdout)["rows"]) == 3


def test_doctor_does_not_open_a_fifo_named_as_its_storage_path(tmp_path: Path) -> None:
    fifo = tmp_path / "data"
    os.mkfifo(fifo)
    result = _cli(["doctor", "--path", str(fifo), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    (found,) = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "file system"]
    assert "O_DIRECT untried" in found["detail"]
