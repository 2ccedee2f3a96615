"""Files a user names on the command line, taken for what they are: an output is checked before
anything is measured or computed and written without following links; an input is read only when
it is a regular file of a bounded size, and never opened when it is a FIFO, a device or a socket
(opening a FIFO for reading waits for a writer; /dev/zero never ends)."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO, TextIO

from .errors import ConfigError, FileRefusedError
from .units import format_size, parse_size

MAX_INPUT_ENV = "RDMABENCH_MAX_INPUT"
DEFAULT_MAX_INPUT = 256 << 20  # bytes: larger than any results document rdmabench writes


def max_input_bytes() -> int:
    """The most bytes rdmabench reads whole from one input ($RDMABENCH_MAX_INPUT, e.g. 1GiB)."""
    text = os.environ.get(MAX_INPUT_ENV)
    if not text:
        return DEFAULT_MAX_INPUT
    try:
        return parse_size(text)
    except ConfigError as exc:
        raise ConfigError(f"{MAX_INPUT_ENV}: {exc}") from None


# A file read a line at a time (a links file, a stream) may hold this many times what one read
# whole may; each of its lines at most max_input_bytes().
BY_LINE_FACTOR = 64


def max_by_line_bytes() -> int:
    """The most bytes rdmabench reads, a line at a time, from a links file or a results stream."""
    return BY_LINE_FACTOR * max_input_bytes()


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, as a phrase ("a FIFO (named pipe)")."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((phrase for test, phrase in kinds if test(mode)), "not a regular file")


# --- outputs ---------------------------------------------------------------------------------------


def check_output(path: str, force: bool, what: str) -> None:
    """Refuse now, in one line, an output that could not hold `what` as a file: a device, FIFO,
    socket, directory, a link to one of them or to nothing, a name of an open stream (`stream_name`),
    a link another user owns, a path whose folder does not exist or cannot be written, or an existing
    file without `force`. A link of the user's own to a regular file is an existing file; writing
    replaces the link itself (see `replacing`), never its target."""
    refuse = f"cannot write {what} to {path}"
    if os.path.basename(path) in ("", ".", ".."):  # "out/": a folder's name, not a file's
        raise FileRefusedError(f"{refuse}: it names a folder; give a file name")
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    except OSError as exc:  # a file where a folder should be, no search permission, a name too long
        raise FileRefusedError(f"{refuse}: {exc.strerror or exc}") from None
    if (stream := stream_name(path)) is not None:
        raise FileRefusedError(f"{refuse}: {stream}")
    if found is not None:
        mode = _followed(path, found.st_mode, refuse)
        if stat.S_ISDIR(mode):
            raise FileRefusedError(f"{refuse}: it is a directory; give a file name")
        if not stat.S_ISREG(mode):
            raise FileRefusedError(f"{refuse}: it is {kind_of(mode)}, not a regular file")
        if (why := _not_replaceable(found)) is not None:
            raise FileRefusedError(f"{refuse}: {why}")
        if not force:
            raise FileRefusedError(f"{refuse}: it already exists; pass --force to replace it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileRefusedError(f"{refuse}: its folder {folder} does not exist")
    try:  # permission, a read-only file system: found now, not after the measurement
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".rdmabench-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise FileRefusedError(f"{refuse}: {exc.strerror or exc}") from None


# Names that are no file of their own but an open descriptor of the process that opens them: the
# standard streams' links (/dev/stdout -> /proc/self/fd/1) and every /proc entry. Renaming a file over
# one replaced /dev/stdout itself for every later process of the node (as root); writing through one
# is not "a file written whole or not at all" either.
_STREAM_NAMES = re.compile(r"/dev/(stdin|stdout|stderr|fd(/.*)?)|/proc(/.*)?")
_MOST_HOPS = 40  # as the kernel's own limit on links followed (ELOOP)


def stream_name(path: str) -> str | None:
    """Why `path` names an open stream rather than a file (a standard stream's name, /dev/fd/N,
    anything under /proc, a link to one of them, or the very file this process's standard input,
    output or error is), or None. Such a name is never written as a file, whatever --force says."""
    hop = os.path.abspath(path)
    for _ in range(_MOST_HOPS):
        hop = os.path.join(os.path.realpath(os.path.dirname(hop)), os.path.basename(hop))
        if _STREAM_NAMES.fullmatch(hop):
            return (
                f"{hop} names an open stream of the process (standard output, error or another descriptor), "
                "not a file: never replaced; leave the option out (or give -, where it means standard output) "
                "and redirect the command's output instead"
            )
        try:
            hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
        except OSError:  # not a link, or nothing there: the end of the chain
            break
    return _standard_stream(identities(path))


def _standard_stream(found: frozenset[tuple[int, int]]) -> str | None:
    """Why a file of these identities is this process's standard input, output or error, or None."""
    for fd, name in ((0, "input"), (1, "output"), (2, "error")):
        try:
            seen = os.fstat(fd)
        except OSError:
            continue
        if (seen.st_dev, seen.st_ino) in found and stat.S_ISREG(seen.st_mode):
            return f"it is this command's standard {name} (redirected there): never replaced; write elsewhere"
    return None


def _not_replaceable(found: os.stat_result) -> str | None:
    """Why what `lstat` found at an output may not be replaced, or None: only a regular file or a
    link of the user's own is (a link another user planted, or a system's, is theirs to remove)."""
    if stat.S_ISREG(found.st_mode):
        return None
    if stat.S_ISLNK(found.st_mode) and found.st_uid == os.geteuid():
        return None
    if stat.S_ISLNK(found.st_mode):
        return f"it is a symbolic link of another user's (uid {found.st_uid}): never replaced; give another name"
    return f"it is {kind_of(found.st_mode)}, not a regular file: never replaced"


def identities(path: str) -> frozenset[tuple[int, int]]:
    """The (device, inode) of `path` and, where it is a symbolic link, of what it points to: how two
    names (another spelling, a hard or a symbolic link) are known to be one file. Empty where nothing
    is there."""
    found = set()
    for look in (os.stat, os.lstat):
        try:
            seen = look(path)
        except (OSError, ValueError):  # missing, unreadable folder, a NUL in the name
            continue
        found.add((seen.st_dev, seen.st_ino))
    return frozenset(found)


def check_not_an_input(outputs: Iterable[tuple[str, str]], inputs: Iterable[str]) -> None:
    """Refuse an output (its option, its path) that is one of the command's `inputs` (by device and
    inode, so another spelling, a hard link or a symbolic link either way is caught), even with --force:
    the write would replace what the command reads, a results file lost. A path where nothing is yet is
    none. Each input is looked at once, whatever the number of outputs."""
    existing = [(option, path, mine) for option, path in outputs if (mine := identities(path))]
    if not existing:
        return
    for name in inputs:
        theirs = identities(name)
        for option, path, mine in existing:
            if mine & theirs:
                raise ConfigError(
                    f"{option} {path} is the same file as the input {name}: refused, even with --force "
                    "(the output would replace what the command reads); write it elsewhere"
                )


def _followed(path: str, mode: int, refuse: str) -> int:
    """The mode of what a link leads to (a link's own mode is no answer); a link to nothing refused."""
    if not stat.S_ISLNK(mode):
        return mode
    try:
        return os.stat(path).st_mode
    except OSError:
        raise FileRefusedError(
            f"{refuse}: it is a symbolic link to nothing ({os.readlink(path)}); remove it or give another name"
        ) from None


# What rdmabench writes (results, reports, verdicts): readable as the umask allows, never writable
# by anyone but its owner, whatever the umask (a umask of 000 or 002 would let a neighbour edit it).
OUTPUT_MODE = 0o644


@contextlib.contextmanager
def replacing(path: str) -> Iterator[TextIO]:
    """A file that replaces `path` atomically once written (synced; OUTPUT_MODE less the umask), so a
    reader or a crash never sees half of it. It is created beside `path` under a new name (O_EXCL:
    never an existing file or link) and renamed over it: a link planted at `path` is replaced, never
    followed. On an error `path` is left as it was."""
    folder = os.path.dirname(os.path.abspath(path))
    _replaceable(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".rdmabench-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fchmod(handle.fileno(), OUTPUT_MODE & ~_umask())  # on the descriptor: never through a name
            os.fsync(handle.fileno())
        _replaceable(path)  # what is there now, not what was checked before the command ran
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _replaceable(path: str) -> None:
    """Refuse to rename over `path` anything but a regular file or a link of the user's own, and
    any name of an open stream (`stream_name`), whoever checked it before."""
    if (stream := stream_name(path)) is not None:
        raise FileRefusedError(f"cannot write {path}: {stream}")
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FileRefusedError(f"cannot write {path}: {exc.strerror or exc}") from None
    if (why := _not_replaceable(found)) is not None:
        raise FileRefusedError(f"cannot write {path}: {why}")


def write_text(path: str, text: str) -> None:
    """Replace `path` atomically with `text` (see `replacing`)."""
    with replacing(path) as handle:
        handle.write(text)


def write_chunks(path: str, chunks: Iterable[str]) -> None:
    """Replace `path` atomically with the text of `chunks`, written as they come: a report of a
    million links is never held as one string (see `replacing`)."""
    with replacing(path) as handle:
        handle.writelines(chunks)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- inputs ----------------------------------------------------------------------------------------


def open_input(path: str, limit: int, what: str = "results file", follow_links: bool = True) -> BinaryIO:
    """`path` opened for reading, once it is known to be a regular file of at most `limit` bytes;
    anything else refused by name before it is opened (a FIFO would block the open, a device never
    end). The open itself cannot block (O_NONBLOCK), and what was opened is checked again (fstat):
    a file swapped in between is refused too. Without `follow_links` a link is refused as well."""
    try:
        found = os.stat(path) if follow_links else os.lstat(path)
    except OSError as exc:
        raise FileRefusedError(f"{path}: cannot read ({exc.strerror or exc})") from None
    _readable(path, found, limit, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefusedError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        _readable(path, os.fstat(fd), limit, what)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str, limit: int, what: str = "results file", follow_links: bool = True) -> bytes:
    """The bytes of `path` (see `open_input`), never more than `limit` of them: a file that grew
    past its checked size while being read is refused, not read on."""
    with open_input(path, limit, what, follow_links) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileRefusedError(_too_large(path, len(data), limit, what))
    return data


def _readable(path: str, found: os.stat_result, limit: int, what: str) -> None:
    if not stat.S_ISREG(found.st_mode):
        raise FileRefusedError(f"{path}: it is {kind_of(found.st_mode)}, not a regular file; not read")
    if found.st_size > limit:
        raise FileRefusedError(_too_large(path, found.st_size, limit, what))


def _too_large(path: str, size: int, limit: int, what: str) -> str:
    return (
        f"{path}: {size} bytes, larger than any {what} rdmabench writes ({limit} bytes = {format_size(limit)}; "
        f"{MAX_INPUT_ENV} raises the limit)"
    )
