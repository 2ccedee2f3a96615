"""The private directories of a job started by `rdmabench run --np N`, and their removal however
the launcher ends.

Everything the ranks and Open MPI write for the job goes into directories of the launcher's own
(privatedirs.scratch_dir: new, mode 0700): the ranks' UCX logs and Open MPI's session directory
under the temporary directory, Open MPI's shared-memory segments under /dev/shm. The launcher
removes them when the job ends; if it is killed outright, a reaper process in its own session
(reaper.py) removes them as soon as it is gone; and if the reaper was killed with it (a batch
system's kill of the whole job), the next start removes what a dead launcher of this user on this
host left.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import privatedirs, pystart, reaper
from ..errors import LaunchError
from ..wire import ucx_env

PREFIX = "rdmabench-run-"
SHARED_MEMORY = "/dev/shm"
# Where Open MPI puts its session files and its shared-memory segments (a user's own setting wins).
_SESSION_DIR_ENV = "PRTE_MCA_prte_tmpdir_base"
_SEGMENTS_DIR_ENV = "OMPI_MCA_btl_sm_backing_directory"


def _sweep() -> None:
    """Remove what killed launchers and ranks of this user on this host left behind."""
    for prefix, base in ((PREFIX, None), (ucx_env.LOG_PREFIX, None), (PREFIX, SHARED_MEMORY)):
        privatedirs.sweep_stale(prefix, base)


def _shared_memory_dir() -> Path | None:
    """A private directory under /dev/shm for Open MPI's segments (None: no usable /dev/shm, and
    Open MPI's own choice stands)."""
    try:
        return privatedirs.scratch_dir(PREFIX, SHARED_MEMORY)
    except OSError:
        return None


def _start_reaper(paths: list[Path]) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            pystart.python_module(reaper.__name__, *map(str, paths), bare=True),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # holds no pipe of ours open: whoever reads our output sees its end
            start_new_session=True,
        )
    except OSError:
        return None  # the next start sweeps instead


@contextmanager
def job_dirs(env: dict[str, str]) -> Iterator[list[Path]]:
    """Make the job's private directories and point the ranks' environment `env` at them; remove
    them at the end, or (the reaper) when this process dies."""
    _sweep()
    try:
        made = [privatedirs.scratch_dir(PREFIX)]
    except OSError as exc:
        raise LaunchError(f"cannot make the job's directory under {tempfile.gettempdir()}: {exc.strerror}") from None
    env[ucx_env.SCRATCH_ENV] = str(made[0])
    env.setdefault(_SESSION_DIR_ENV, str(made[0]))
    segments = _shared_memory_dir()
    if segments is not None:
        made.append(segments)
        env.setdefault(_SEGMENTS_DIR_ENV, str(segments))
    watcher = _start_reaper(made)
    try:
        yield made
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        if watcher is not None:
            assert watcher.stdin is not None
            watcher.stdin.close()  # nothing left to remove: it finds them gone and exits
            try:
                watcher.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass  # it ends on its own once its patience runs out
