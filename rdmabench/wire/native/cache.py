"""The build cache every native library shares (the hot loop; through nvccbuild the GPU's device
lists, the armed lists, the GPU load): a private cache directory per user, one build per node at a
time, a cached copy loaded through the descriptor that was checked, and a stale or broken copy
rebuilt in place; and each library's load kept for the process (`FirstUse`: the library, or the one
line saying why it cannot be had)."""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from ... import privatedirs
from ...errors import UnsafePathError


def note(refused: list[str], problem: str) -> None:
    if problem not in refused:
        refused.append(problem)


def _build_dir(refused: list[str]) -> Path:
    """The first cache directory that is ours (made, mode 0700, if missing) and writable."""
    found = privatedirs.first_ours(privatedirs.cache_dirs(), lambda exc: note(refused, str(exc)))
    if found is None:
        raise OSError(f"no cache directory of yours among {', '.join(str(d) for d in privatedirs.cache_dirs())}")
    return found


def _open_built(name: str, refused: list[str]) -> tuple[int, Path] | None:
    """A descriptor of a library built earlier, from the first cache directory that holds it,
    checked (the directory and the file ours, nobody else's to write) on the descriptor itself."""
    for directory in privatedirs.cache_dirs():
        try:
            return privatedirs.open_in_private_dir(directory / name, os.O_RDONLY), directory / name
        except UnsafePathError as exc:
            note(refused, str(exc))
        except OSError:
            continue  # not there (yet)
    return None


T = TypeVar("T")


class FirstUse(Generic[T]):
    """A native library's `load()`, run on its first call and kept for the life of the process: the
    decorated function never raises, it answers the library or why it cannot be had, and every later
    call answers the same. `kept` holds it (None until the first call; a test sets it back to None,
    through monkeypatch, to load anew)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self.kept: T | None = None
        functools.update_wrapper(self, make)

    def __call__(self) -> T:
        if self.kept is None:
            self.kept = self._make()
        return self.kept


def build_cached(
    name: str, command: Callable[[Path], list[str]], refused: list[str], load: Callable[[int], T], timeout: float = 120
) -> tuple[T, Path]:
    """The library `name` loaded by `load` (given a checked descriptor; it checks the symbols and
    the interface, OSError or AttributeError if they differ) from a private cache directory, and
    where it is. A cached copy that is not a library, or that `load` refuses (a stale build: a
    symbol missing, another layout), is rebuilt in place by `command` (given the output path), as
    is a missing one. Shared by every native library."""
    found, stale = _open_built(name, refused), None
    if found is not None:
        seen = os.fstat(found[0])
        try:
            return _load_cached(found, load), found[1]
        except OSError as exc:
            note(refused, f"{exc}: rebuilt")
            stale = (seen.st_dev, seen.st_ino)
    directory = _build_dir(refused)
    # One build per node: the ranks that start together wait for the first one's, then load it.
    with privatedirs.locked(directory / ".build.lock"):
        target = directory / name
        try:  # another rank of this node may have (re)built it while this one waited
            now = os.stat(target, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != stale:  # not the copy just refused
                return _load_cached((privatedirs.open_in_private_dir(target, os.O_RDONLY), target), load), target
        except FileNotFoundError:
            pass
        except OSError as exc:
            note(refused, f"{exc}: rebuilt")
        _compile(command, target, timeout)
    return _load_cached((privatedirs.open_in_private_dir(target, os.O_RDONLY), target), load), target


_ELF = b"\x7fELF"


def _load_cached(found: tuple[int, Path], load: Callable[[int], T]) -> T:
    """`load` of the cached library `found` (a descriptor and its file); OSError naming the file
    (never the /proc/self/fd/N it is loaded through) when it is no library or not this one."""
    fd, path = found
    try:
        if os.pread(fd, len(_ELF), 0) != _ELF:  # empty, cut short by a full disk, or not one
            size = os.fstat(fd).st_size
            os.close(fd)
            raise OSError(f"the cached library {path} is not a shared library ({size} bytes)")
        return load(fd)
    except (OSError, AttributeError) as exc:
        said = str(exc).replace(f"/proc/self/fd/{fd}", str(path))
        raise OSError(said if str(path) in said else f"the cached library {path}: {said}") from None


def _compile(command: Callable[[Path], list[str]], target: Path, timeout: float) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        argv = command(built)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:  # an OSError like every other failure: the loaders say it in one line
            raise OSError(f"{Path(argv[0]).name} ran past {timeout:g} s and was stopped") from None
        if proc.returncode != 0:
            raise OSError(f"{Path(argv[0]).name} failed: {_first_error(proc.stderr)}")
        os.chmod(built, 0o700)  # whatever the umask: the loader refuses a library others can write
        os.replace(built, target)  # atomic: a reader never loads half a library


def _first_error(stderr: str) -> str:
    """The first line of a compiler's output that says error, else its first line: a warning printed
    before the error (nvcc's "Cannot find valid GPU for '-arch=native'") must not hide it."""
    lines = stderr.strip().splitlines() or ["no output"]
    return next((line for line in lines if "error" in line.lower()), lines[0])


_HELD: list[int] = []  # descriptors of loaded libraries, open for the life of the process


def open_descriptor(fd: int) -> str:
    """The path dlopen loads the checked file `fd` by. The descriptor stays open: dlopen knows a
    library by its path, and a closed descriptor's number, reused for another library, would hand
    back the first one."""
    _HELD.append(fd)
    return f"/proc/self/fd/{fd}"
