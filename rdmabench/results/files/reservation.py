"""Where a run's results go, claimed before it measures: the default name under results/ (a folder of
the user's own), the stream PATH.partial created exclusively as the reservation, and the check that
the results could be written there, made before any measurement."""

from __future__ import annotations

import contextlib
import os
import stat
import time

from ... import privatedirs, userfiles
from ...errors import FileRefusedError, ResultsFileError
from . import compact
from .contents import stream_path

RESULTS_DIR = "results"


# Set by the launching process for the ranks it starts: the output it reserved for them.
RESERVED_ENV = "RDMABENCH_RESERVED_OUTPUT"


def default_output_path(
    test: str, src_mode: str, dst_mode: str, directory: str = RESULTS_DIR, reserve_it: bool = True
) -> str:
    """results/rdmabench-<test>-<src>-<dst>-<UTC time>.json, with a suffix if that name is taken;
    reserved (see reserve) so that a run started in the same second takes the next name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    modes = src_mode if src_mode == dst_mode else f"{src_mode}-to-{dst_mode}"
    stem = os.path.join(directory, f"rdmabench-{test}-{modes}-{stamp}")
    own_results_dir(directory)
    for counter in range(10_000):
        path = f"{stem}.json" if counter == 0 else f"{stem}-{counter}.json"
        if os.path.exists(path) or os.path.exists(compact.links_path(path)):
            continue
        if not reserve_it:
            return path
        try:
            reserve(path)
        except ResultsFileError:
            continue  # another run took this name a moment ago
        return path
    raise ResultsFileError(f"no free results file name for {stem}.json")


def own_results_dir(directory: str) -> None:
    """The default folder for results (no -o), made 0755 when missing, else checked to be the
    user's own: a real folder (not a link), the user's, that nobody else can write. A `results/`
    another user left in a shared working folder would take the results where they can edit them.
    FileRefusedError, one line, otherwise (a folder the user cannot write in included)."""
    try:
        os.mkdir(directory, 0o755)
    except FileExistsError:
        pass
    except OSError as exc:
        where = os.path.abspath(os.path.dirname(os.path.abspath(directory)))
        raise FileRefusedError(
            f"cannot make the results folder {directory}/ in {where}: {exc.strerror or exc}; give -o PATH"
        ) from None
    try:
        reason = privatedirs.why_not_trusted(os.lstat(directory), directory=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    if reason:
        raise FileRefusedError(f"refusing the results folder {os.path.abspath(directory)}: {reason}; give -o PATH")


def reserve(path: str) -> None:
    """Claim `path` for this run: its stream PATH.partial created exclusively (O_EXCL), empty until
    the run writes its first line. Two runs never share a name, and a stream another run is writing,
    or left behind, is never truncated."""
    partial = stream_path(path)
    try:
        fd = os.open(partial, CREATE, userfiles.OUTPUT_MODE)
    except FileExistsError:
        raise ResultsFileError(taken(path)) from None
    except OSError as exc:
        raise ResultsFileError(f"cannot write results to {path}: {exc.strerror or exc}") from None
    os.close(fd)
    os.environ[RESERVED_ENV] = os.path.abspath(path)  # for this process and the ranks it starts


# A stream is only ever a file this run created: never an existing file, never through a link.
CREATE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def reserved_here(path: str) -> bool:
    """`path` was reserved by this run (this process, or the one that started the ranks)."""
    return os.environ.get(RESERVED_ENV) == os.path.abspath(path)


def release(path: str) -> None:
    """Give back a reservation this run did not use (its stream still empty)."""
    partial = stream_path(path)
    with contextlib.suppress(OSError):
        found = os.lstat(partial)
        if stat.S_ISREG(found.st_mode) and found.st_size == 0:
            os.unlink(partial)


def taken(path: str) -> str:
    """Why `path` is not this run's to write: its stream is another run's, a dead run's, or no stream."""
    partial = stream_path(path)
    try:
        found = os.lstat(partial)
    except OSError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        return (
            f"{partial} is {userfiles.kind_of(found.st_mode)}, not a stream rdmabench wrote; "
            f"remove it or choose another --output"
        )
    size = found.st_size if found is not None else 0
    if size == 0:
        return (
            f"another run is writing {path} ({partial} exists); choose another --output "
            f"(if no run is, remove the empty {partial})"
        )
    return (
        f"{partial} holds the results of a run that did not finish ({size} bytes): read it with "
        f"`rdmabench report {partial}`, or move it away; rdmabench does not overwrite it"
    )


def check_writable(path: str, force: bool) -> None:
    """Fail now, before any measurement, if the results could not be written to `path` (--force
    allows replacing a results file, never the stream of another run): the file, its stream and
    its links file each checked as `userfiles.check_output` does."""
    userfiles.check_output(path, force, "results")
    if os.path.lexists(stream_path(path)) and not reserved_here(path):
        raise ResultsFileError(taken(path))
    userfiles.check_output(compact.links_path(path), force, "results")
