"""Directories and files of our own under shared directories (/tmp, /dev/shm, $XDG_RUNTIME_DIR, a cache).

Another user of the node can predict every name rdmabench uses there and create it first: a directory
to plant a library in, or a symlink that makes us truncate one of our files. So a directory is used
only when we created it (mode 0700) or, when it exists already, it is a real directory (not a link)
that we own and nobody else can write; a file in one is opened without following links and checked
the same way, before anything in it is written or loaded. Anything else is refused, with the reason.

Scratch directories carry their creator's pid and host in their names (PREFIX<pid>@<host>-<random>),
and its pid namespace and boot in a marker inside (OWNER_MARK), so that a later start can remove the
ones a killed process left behind. A pid means something only in its own pid namespace: containers
often share /tmp, /dev/shm and the host name, not their pids, and a pid dead here may be a live job
there. So only a directory of our own, marked with our namespace on this boot, whose pid is gone
here, is removed; one of another namespace (or without a marker we can read) is left alone, unless
it is from an earlier boot. (The marker, not the name: Open MPI's sockets live under these folders,
and a socket's path is limited to 108 bytes.)
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UnsafePathError
from .units import is_digits

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def why_not_trusted(st: os.stat_result, directory: bool, owners: frozenset[int] | None = None) -> str | None:
    """Why a file or directory (its lstat or fstat) must not be trusted, or None. `owners`: the uids
    that may own it (default: only us)."""
    owners = owners or frozenset({os.geteuid()})
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not (stat.S_ISDIR if directory else stat.S_ISREG)(st.st_mode):
        return f"it is not a {'directory' if directory else 'regular file'}"
    if st.st_uid not in owners:
        return f"it belongs to {_user(st.st_uid)}, not to you"
    if st.st_mode & _OTHERS_WRITE:
        return f"other users can write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _refuse(path: str | Path, reason: str) -> UnsafePathError:
    return UnsafePathError(f"refusing {path}: {reason}")


def private_dir(path: str | Path) -> Path:
    """The directory `path`, created with mode 0700 if it is missing (its parents as usual), else
    checked to be ours: UnsafePathError if it is not, OSError if it cannot be made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    reason = why_not_trusted(os.lstat(path), directory=True)
    if reason:
        raise _refuse(path, reason)
    return path


def open_in_private_dir(path: str | Path, flags: int, mode: int = 0o600, owners: frozenset[int] | None = None) -> int:
    """A descriptor of the file `path`, opened without following links, after checking that its
    directory and (once open, so the checked file is the one used) the file itself are ours.
    UnsafePathError names what is wrong; OSError is any other failure (a missing file). The
    descriptor is non-blocking (no matter for a regular file, the only kind it returns)."""
    path = Path(path)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        reason = why_not_trusted(os.fstat(folder), directory=True, owners=owners)
        if reason:
            raise _refuse(path.parent, reason)
        try:  # never blocks: a FIFO there would wait for its other end forever
            fd = os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
                raise _refuse(path, "it is a symbolic link") from None
            if exc.errno == errno.ENXIO:  # a FIFO (or socket) opened to write, with nobody reading
                raise _refuse(path, "it is not a regular file") from None
            raise
    finally:
        os.close(folder)
    reason = why_not_trusted(os.fstat(fd), directory=False, owners=owners)
    if reason:
        os.close(fd)
        raise _refuse(path, reason)
    return fd


@contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the lock file `path` (in a private directory; created 0600, never
    truncated, never through a link). Opened for reading without blocking: a FIFO there (opened to
    write, it would wait for a reader forever) or a device is refused as not a regular file."""
    fd = open_in_private_dir(path, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def cache_dirs() -> list[Path]:
    """Where rdmabench keeps what it may reuse (native builds, the host memory copy's figure), best
    first: the user's cache ($RDMABENCH_CACHE_DIR, else $XDG_CACHE_HOME/rdmabench or
    ~/.cache/rdmabench), the login's runtime directory ($XDG_RUNTIME_DIR), then (a read-only home on
    a compute node) a private directory under the system's temporary one. Another user can create any
    of these names first: each is used only if it is ours (private_dir, open_in_private_dir)."""
    base = os.environ.get("RDMABENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rdmabench"
    )
    found = [Path(base)]
    if os.environ.get("XDG_RUNTIME_DIR"):
        found.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "rdmabench")
    return [*found, Path(tempfile.gettempdir()) / f"rdmabench-{os.geteuid()}"]


def first_ours(dirs: Iterable[Path], refused: Callable[[UnsafePathError], None]) -> Path | None:
    """The first of `dirs` (cache_dirs, say) that is ours (made, mode 0700, if missing) and
    writable, or None; each one that is not ours is given to `refused`, one that cannot be made is
    passed over."""
    for directory in dirs:
        try:
            private_dir(directory)
        except UnsafePathError as exc:
            refused(exc)
            continue
        except OSError:
            continue
        if os.access(directory, os.W_OK):
            return directory
    return None


def _host() -> str:
    return socket.gethostname().replace("/", "_") or "localhost"


def _namespace() -> str:
    """This process's pid namespace (the inode of /proc/self/ns/pid) and boot (the first 8 hex
    digits of the kernel's boot id) as `<inode>.<boot>`; '' where either cannot be read."""
    try:
        inode = os.stat("/proc/self/ns/pid").st_ino
        with open("/proc/sys/kernel/random/boot_id", "rb") as handle:
            boot = handle.read(64).decode("ascii", "replace").replace("-", "").strip()[:8]
    except OSError:
        return ""
    return f"{inode}.{boot}" if inode and boot.isalnum() else ""


def scratch_dir(prefix: str, base: str | Path | None = None) -> Path:
    """A new private directory (mkdtemp: a fresh name, mode 0700) under `base` (the temporary
    directory by default), named for this process so that a later start can remove it if this
    process is killed before it can (sweep_stale). UnsafePathError for a `base` anyone can write
    without the sticky bit: anyone could rename the new directory away and put theirs in its place."""
    base = base or tempfile.gettempdir()
    try:
        found = os.stat(base)
    except OSError:
        found = None  # mkdtemp says what is wrong with it
    if found is not None and found.st_mode & stat.S_IWOTH and not found.st_mode & stat.S_ISVTX:
        raise _refuse(
            base,
            f"anyone can write to it and it has no sticky bit (mode {stat.S_IMODE(found.st_mode):04o}): another user "
            "could move or replace the private folder made there; use a folder of your own (TMPDIR)",
        )
    made = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}@{_host()}-", dir=base))
    try:
        fd = open_in_private_dir(made / OWNER_MARK, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "w") as mark:
            mark.write(f"{os.getpid()} {_namespace()}\n")
    except OSError:
        pass  # unmarked: never swept by another process, removed by ours (or its reaper) only
    return made


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process now has that pid: not ours to judge
    return True


OWNER_MARK = ".rdmabench-owner"  # "<pid> <pid namespace inode>.<boot>" of the directory's creator


def _marked_namespace(directory: str, pid: str) -> str:
    """The namespace.boot the marker of our `directory` names for `pid`; '' without one that does."""
    try:
        fd = open_in_private_dir(Path(directory) / OWNER_MARK, os.O_RDONLY)
    except (OSError, UnsafePathError):
        return ""
    with os.fdopen(fd, "rb") as mark:
        words = mark.read(128).decode("ascii", "replace").split()
    return words[1] if len(words) == 2 and words[0] == pid else ""


def _gone(pid: str, namespace: str, ours: str) -> bool:
    """Whether the process that named a directory (its pid, and the namespace.boot it ran in) is
    gone: from an earlier boot, or dead here and of our pid namespace on this boot."""
    if not ours or not namespace or not is_digits(pid):
        return False  # an unknown namespace, ours or its: its pid means nothing here
    inode, _, boot = namespace.partition(".")
    if boot != ours.partition(".")[2]:
        return True  # the machine restarted since: every process of that boot is gone
    return inode == ours.partition(".")[0] and not _alive(int(pid))


def stale_dirs(prefix: str, base: str | Path) -> list[Path]:
    """Scratch directories of ours under `base` (named by scratch_dir with `prefix`) whose creating
    process on this host is gone (_gone: a pid of another pid namespace is never judged here)."""
    found = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    ours = _namespace()
    for entry in entries:
        pid, _, rest = entry.name.removeprefix(prefix).partition("@")
        host = rest.rpartition("-")[0]
        if not entry.name.startswith(prefix) or not is_digits(pid) or host != _host():
            continue
        try:
            mine = why_not_trusted(entry.stat(follow_symlinks=False), directory=True) is None
        except OSError:
            continue
        if mine and _gone(pid, _marked_namespace(entry.path, pid), ours):
            found.append(Path(entry.path))
    return found


def sweep_stale(prefix: str, base: str | Path | None = None) -> None:
    """Remove what killed processes of ours left under `base` (see stale_dirs)."""
    for path in stale_dirs(prefix, base or tempfile.gettempdir()):
        shutil.rmtree(path, ignore_errors=True)
