"""The native hot loop (hotloop.c): built on first use against the UCX that UCXX loaded, cached, and
called through ctypes for the timed part of a step: a round of window transfers (bw, bibw, every
concurrent pattern) or a ping-pong (lat).

Python costs about 3.5 us per UCX request posted through UCXX; ucx_perftest posts one in well under
0.1 us. Small messages therefore measure the interpreter unless the timed loop is native. Everything
outside the clock (patterns, checks, calibration, statistics) stays in Python.

`pip install` builds it (setup.py, against the UCX headers of the libucx wheel); a source tree, or an
install without a compiler, builds it on first use instead. Building needs a C compiler (`cc`, or
$CC) and UCX's headers, which the libucx wheel ships. When either is missing the Python loop runs
instead, and the results say so and why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ... import privatedirs
from ...errors import TransportError, UnsafePathError
from ...modes import UcxMemory

SOURCE = Path(__file__).with_name("hotloop.c")
HEADER = SOURCE.with_name("hotloop.h")  # the interface: the structs and codes mirrored below
# Warnings the C is kept clean of (tests build it with -Werror); UCX's own headers are system headers.
WARNINGS = ("-Wall", "-Wextra")


def source_digest() -> str:
    """The loop's source as one digest: the .c and the header it includes (setup.py computes the same)."""
    return hashlib.sha256(SOURCE.read_bytes() + HEADER.read_bytes()).hexdigest()[:16]


def compile_command(compiler: list[str], prefix: Path, output: Path, *extra: str) -> list[str]:
    """How the loop is built on first use (and by the tests, with -Werror)."""
    lib = prefix / "lib"
    return [
        *compiler, "-O2", *WARNINGS, *extra, "-shared", "-fPIC", "-o", str(output), str(SOURCE),
        f"-isystem{prefix / 'include'}", f"-L{lib}", "-lucp", "-lucs", f"-Wl,-rpath,{lib}",
    ]  # fmt: skip


# RDMABENCH_NATIVE=build: ignore the library built at install time (the tests of the first-use build).
NATIVE_ENV = "RDMABENCH_NATIVE"
_STATUS_NAMES = ("RB_OK", "RB_TIMEOUT", "RB_PEER_GONE", "RB_UCX_ERROR", "RB_NO_MEMORY", "RB_INTERRUPTED")
_OK, _TIMEOUT, _PEER_GONE, _UCX_ERROR, _NO_MEMORY, _INTERRUPTED = range(len(_STATUS_NAMES))

_ptr, _size, _int, _tag, _double = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64, ctypes.c_double
_out_seconds, _out_int = ctypes.POINTER(_double), ctypes.POINTER(_int)


class LinkEnd(ctypes.Structure):
    """rb_link: one end of a link in a round, as hotloop.c reads it."""

    _fields_ = [
        ("ep", _ptr),
        ("peer_pid", _int),
        ("count", _int),
        ("slots", _int),
        ("memory_type", _int),
        ("size", _size),
        ("buffers", ctypes.POINTER(_ptr)),
        ("data_tag", _tag),
        ("ready_tag", _tag),
        ("ack_tag", _tag),
    ]


class RmaLinkEnd(ctypes.Structure):
    """rb_rma_link: one end of a one-sided link, as hotloop.c reads it."""

    _fields_ = [
        ("ep", _ptr),
        ("peer_pid", _int),
        ("count", _int),
        ("memory_type", _int),
        ("size", _size),
        ("buffers", ctypes.POINTER(_ptr)),
        ("remote", ctypes.POINTER(_tag)),
        ("rkeys", ctypes.POINTER(_ptr)),
        ("ready_tag", _tag),
        ("done_tag", _tag),
    ]


class BlocksLinkEnd(ctypes.Structure):
    """rb_blocks_link: one end of a link moving block lists, as hotloop.c reads it: a step's requests
    (descriptors: blocks, or blocks adjacent at both ends merged), transfer by transfer."""

    _fields_ = [
        ("ep", _ptr),
        ("peer_pid", _int),
        ("memory_type", _int),
        ("batch", _int),
        ("first", ctypes.POINTER(_int)),
        ("pool", _ptr),
        ("offsets", ctypes.POINTER(_tag)),
        ("lengths", ctypes.POINTER(_tag)),
        ("remote_pool", _tag),
        ("remote_offsets", ctypes.POINTER(_tag)),
        ("rkey", _ptr),
        ("ready_tag", _tag),
        ("done_tag", _tag),
        ("data_tag", _tag),
    ]


_links = ctypes.POINTER(LinkEnd)
_rma_links = ctypes.POINTER(RmaLinkEnd)
# (worker, ...buffers and tags..., timeout, [peer pid,] outputs)
_SIGNATURES: dict[str, list[Any]] = {
    "rb_round": [_ptr, _links, _int, _links, _int, _ptr, _ptr, _double, _out_seconds, _out_int, _out_int],
    "rb_lat_ping": [
        _ptr,
        _ptr,
        _ptr,
        _ptr,
        _size,
        _int,
        _tag,
        _tag,
        _tag,
        _ptr,
        _int,
        _double,
        _int,
        _out_seconds,
        _out_int,
        _out_int,
    ],
    "rb_lat_pong": [
        _ptr,
        _ptr,
        _ptr,
        _ptr,
        _size,
        _int,
        _tag,
        _tag,
        _tag,
        _ptr,
        _int,
        _double,
        _int,
        _out_int,
        _out_int,
    ],
    "rb_rma_round": [
        _ptr,
        _int,
        _rma_links,
        _int,
        _rma_links,
        _int,
        _ptr,
        _ptr,
        _double,
        _out_seconds,
        _out_int,
        _out_int,
    ],
    "rb_put_pingpong": [_ptr, _int, _rma_links, _ptr, ctypes.c_uint8, _ptr, _double, _out_seconds, _out_int, _out_int],
    "rb_blocks_active": [
        _ptr,
        _int,
        ctypes.POINTER(BlocksLinkEnd),
        _ptr,
        _ptr,
        _double,
        _double,
        _out_seconds,
        _out_seconds,
        _out_seconds,
        _out_int,
        _out_int,
    ],
    "rb_blocks_passive": [_ptr, _int, ctypes.POINTER(BlocksLinkEnd), _ptr, _ptr, _double, _out_int, _out_int],
    "rb_blocks_ready": [_ptr, ctypes.POINTER(BlocksLinkEnd), _ptr, _double, _out_int, _out_int],
    "rb_blocks_done": [_ptr, ctypes.POINTER(BlocksLinkEnd), _ptr, _double, _out_int, _out_int],
    "rb_mem_map": [
        _ptr,
        ctypes.POINTER(_ptr),
        _size,
        _int,
        ctypes.POINTER(_ptr),
        ctypes.POINTER(_ptr),
        ctypes.POINTER(_size),
        _out_int,
    ],
    "rb_rkey_unpack": [_ptr, _ptr, ctypes.POINTER(_ptr), _out_int],
}
# Functions that return nothing: (name, argument types).
_VOIDS: dict[str, list[Any]] = {
    "rb_rkey_buffer_release": [_ptr],
    "rb_mem_unmap": [_ptr, _ptr],
    "rb_rkey_destroy": [_ptr],
}  # fmt: skip
# ucs_memory_type_t of the memory types MemoryMode.ucx_memory names.
UCS_MEMORY_TYPES: dict[UcxMemory, int] = {"host": 0, "cuda": 1, "cuda-managed": 2}


@dataclass
class Availability:
    library: Any  # the loaded ctypes.CDLL, or None
    reason: str  # why not, when library is None; where it came from otherwise


_loaded: Availability | None = None


def ucx_prefix() -> Path | None:
    """The UCX installation UCXX uses (the libucx wheel's), with include/ and lib/."""
    try:
        import libucx
    except ImportError:
        return None
    prefix = Path(libucx.__file__).parent
    return prefix if (prefix / "include" / "ucp" / "api" / "ucp.h").exists() else None


def _cache_dirs() -> list[Path]:
    """Where the built library may live, best first: the user's cache ($RDMABENCH_CACHE_DIR, else
    $XDG_CACHE_HOME/rdmabench or ~/.cache/rdmabench), the login's runtime directory
    ($XDG_RUNTIME_DIR), then (a read-only home on a compute node) a private directory under the
    system's temporary one. Another user can create any of these names first: each is used only if
    it is ours (privatedirs)."""
    base = os.environ.get("RDMABENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rdmabench"
    )
    found = [Path(base)]
    if os.environ.get("XDG_RUNTIME_DIR"):
        found.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "rdmabench")
    return [*found, Path(tempfile.gettempdir()) / f"rdmabench-{os.geteuid()}"]


def library_name(prefix: Path, compiler: list[str]) -> str:
    """The file name of the library built on first use: one per source, UCX and compiler."""
    version = (prefix / "VERSION.txt").read_text().strip() if (prefix / "VERSION.txt").exists() else ""
    digest = hashlib.sha256(
        source_digest().encode() + str(prefix).encode() + version.encode() + " ".join(compiler).encode()
    )
    return f"hotloop-{digest.hexdigest()[:16]}.so"


def _note(refused: list[str], problem: str) -> None:
    if problem not in refused:
        refused.append(problem)


def _build_dir(refused: list[str]) -> Path:
    """The first cache directory that is ours (made, mode 0700, if missing) and writable."""
    for directory in _cache_dirs():
        try:
            privatedirs.private_dir(directory)
        except UnsafePathError as exc:
            _note(refused, str(exc))
            continue
        except OSError:
            continue
        if os.access(directory, os.W_OK):
            return directory
    raise OSError(f"no cache directory of yours among {', '.join(str(d) for d in _cache_dirs())}")


def _open_built(name: str, refused: list[str]) -> tuple[int, Path] | None:
    """A descriptor of a library built earlier, from the first cache directory that holds it,
    checked (the directory and the file ours, nobody else's to write) on the descriptor itself."""
    for directory in _cache_dirs():
        try:
            return privatedirs.open_in_private_dir(directory / name, os.O_RDONLY), directory / name
        except UnsafePathError as exc:
            _note(refused, str(exc))
        except OSError:
            continue  # not there (yet)
    return None


def _build(prefix: Path, compiler: list[str], refused: list[str]) -> tuple[Any, Path]:
    """The library loaded (built now if no cache holds a usable one) and where it is."""
    return build_cached(
        library_name(prefix, compiler), lambda out: compile_command(compiler, prefix, out), refused, _load_checked
    )


T = TypeVar("T")


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
            _note(refused, f"{exc}: rebuilt")
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
            _note(refused, f"{exc}: rebuilt")
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
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["no output"])[0]
            raise OSError(f"{Path(argv[0]).name} failed: {first}")
        os.chmod(built, 0o700)  # whatever the umask: the loader refuses a library others can write
        os.replace(built, target)  # atomic: a reader never loads half a library


def _load_checked(fd: int) -> Any:
    """dlopen the very file that was checked, through its descriptor: nothing can swap it in between."""
    # PyDLL keeps the GIL: the loop calls PyErr_CheckSignals, and ctypes raises what a handler raised.
    return _configure(ctypes.PyDLL(open_descriptor(fd)))


_HELD: list[int] = []  # descriptors of loaded libraries, open for the life of the process


def open_descriptor(fd: int) -> str:
    """The path dlopen loads the checked file `fd` by. The descriptor stays open: dlopen knows a
    library by its path, and a closed descriptor's number, reused for another library, would hand
    back the first one."""
    _HELD.append(fd)
    return f"/proc/self/fd/{fd}"


def load() -> Availability:
    """Load the hot loop: the library built at install time when it matches this UCX and this
    source, else one built (once per UCX and source) on first use; never raises."""
    global _loaded
    if _loaded is not None:
        return _loaded
    prefix = ucx_prefix()
    compiler = shlex.split(os.environ.get("CC") or "cc")
    if prefix is None:
        _loaded = Availability(None, "UCX headers not found (the libucx wheel provides them)")
        return _loaded
    refused: list[str] = []
    prebuilt = _prebuilt(prefix, refused)
    if prebuilt is not None:
        try:
            _loaded = Availability(_configure(prebuilt[0]), _with_refusals(prebuilt[1], refused))
            return _loaded
        except OSError as exc:  # built from this source, yet laid out otherwise: build one here
            _note(refused, f"the library built at install: {exc}")
    try:
        library, path = _build(prefix, compiler, refused)
    except (OSError, subprocess.SubprocessError, UnsafePathError) as exc:
        _loaded = Availability(None, f"cannot build the native loop: {_with_refusals(str(exc), refused)}")
        return _loaded
    where = f"built on first use with {shlex.join(compiler)} against {prefix} ({path})"
    _loaded = Availability(library, _with_refusals(where, refused))
    return _loaded


def _with_refusals(text: str, refused: list[str]) -> str:
    return f"{text} ({'; '.join(refused)})" if refused else text


def _configure(library: Any) -> Any:
    library.rb_init.argtypes = [ctypes.c_void_p]
    library.rb_init.restype = None
    library.rb_init(ctypes.cast(ctypes.pythonapi.PyErr_CheckSignals, ctypes.c_void_p))
    for name, argtypes in _SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes = argtypes
        function.restype = _int
    for name, argtypes in _VOIDS.items():
        function = getattr(library, name)
        function.argtypes = argtypes
        function.restype = None
    library.rb_status_string.argtypes = [_int]
    library.rb_status_string.restype = ctypes.c_char_p
    check_abi(library)
    return library


def mirror_abi() -> dict[str, int]:
    """The interface as this module's ctypes mirror lays it out, in rb_abi()'s terms (hotloop.h)."""
    items = {name: value for name, value in zip(_STATUS_NAMES, range(len(_STATUS_NAMES)), strict=True)}
    items.update(RB_PUT=RMA_PUT, RB_GET=RMA_GET, RB_TAG=TAGGED)
    for cname, struct in (("rb_link", LinkEnd), ("rb_rma_link", RmaLinkEnd), ("rb_blocks_link", BlocksLinkEnd)):
        items[cname] = ctypes.sizeof(struct)
        for field, *_ in struct._fields_:
            items[f"{cname}.{field}"] = getattr(struct, field).offset
    return items


def library_abi(library: Any) -> dict[str, int]:
    """The interface as the library was compiled (rb_abi: "name=value;" items)."""
    library.rb_abi.restype = ctypes.c_char_p
    return parse_abi((library.rb_abi() or b"").decode())


def parse_abi(text: str) -> dict[str, int]:
    """A native library's description of itself: "name=value;" items (rb_abi, rb_dev_abi)."""
    return {name: int(value) for name, _, value in (item.partition("=") for item in text.split(";") if item)}


def check_abi(library: Any) -> None:
    """Refuse a library whose structs or codes differ from the ctypes mirror: a field added to
    hotloop.h and not here would otherwise shift every field after it, silently."""
    try:
        theirs = library_abi(library)
    except (AttributeError, ValueError) as exc:
        raise OSError(f"the native loop does not describe its interface (rb_abi: {exc})") from None
    ours = mirror_abi()
    differ = sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))
    if differ:
        shown = ", ".join(
            f"{name} {theirs.get(name, 'absent')} in C, {ours.get(name, 'absent')} in Python" for name in differ[:3]
        )
        raise OSError(f"hotloop.h and its ctypes mirror disagree: {shown}")


def _prebuilt(prefix: Path, refused: list[str]) -> tuple[Any, str] | None:
    """The library setup.py built at install time, if it was built from this very source against
    this UCX version (a source tree may run beside an installed package of another version)."""
    if os.environ.get(NATIVE_ENV) == "build":
        return None
    version = (prefix / "VERSION.txt").read_text().strip() if (prefix / "VERSION.txt").exists() else ""
    wanted = f"{version}|{source_digest()}".encode()
    for path in _prebuilt_candidates():
        if not _trusted_prebuilt(path, refused):
            continue
        try:
            library = ctypes.PyDLL(str(path))
            built_against = library.rb_built_against
        except (OSError, AttributeError):
            continue
        built_against.restype = ctypes.c_char_p
        if built_against() == wanted:
            return library, f"built at install against UCX {version} ({path.name})"
    return None


def _trusted_prebuilt(path: Path, refused: list[str]) -> bool:
    """Whether an install-time library may be loaded (loading runs its code): it and its directory
    belong to us, to root or to whoever installed this package (whose Python code runs already), and
    nobody else can write them. A copy found through sys.path may sit in the current directory,
    which may be /tmp."""
    owners = frozenset({os.geteuid(), 0, Path(__file__).parent.stat().st_uid})
    try:
        os.close(privatedirs.open_in_private_dir(path, os.O_RDONLY, owners=owners))
    except UnsafePathError as exc:
        _note(refused, str(exc))
        return False
    except OSError:
        return False
    return True


def _prebuilt_candidates() -> list[Path]:
    """Where setup.py's library may be: beside this module, or in an installed copy of the package
    on the path (tests and source trees run beside the installed package, whose library they may use
    when it was built from the same source)."""
    found = sorted(Path(__file__).parent.glob("_hotloop*.so"))
    for entry in sys.path:
        installed = Path(entry or ".").absolute() / "rdmabench" / "wire" / "native"
        if installed.is_dir() and installed.resolve() != Path(__file__).parent.resolve():
            found += sorted(installed.glob("_hotloop*.so"))
    return found


def memory_type(ucx_memory: UcxMemory) -> int:
    """The ucs_memory_type_t declared to UCX for buffers of this kind (MemoryMode.ucx_memory). A name
    it does not know is a bug, refused here: declaring a wrong type (or none) to UCX would measure
    another path without a word."""
    try:
        return UCS_MEMORY_TYPES[ucx_memory]
    except KeyError:
        raise ValueError(
            f"no ucs_memory_type_t for UCX memory {ucx_memory!r}: one of {', '.join(UCS_MEMORY_TYPES)}"
        ) from None


class HotLoop:
    """The native steps on this rank's UCP worker. `where` names the link or round in errors;
    `ranks_by_pid` turns a dead peer's pid back into its rank."""

    def __init__(self, library: Any, worker: int, timeout: float, where: str, ranks_by_pid: dict[int, int]):
        self._lib = library
        self._worker = ctypes.c_void_p(worker)
        self._timeout = timeout
        self._where = where
        self._ranks_by_pid = ranks_by_pid
        self._status = ctypes.c_int()
        self._dead = ctypes.c_int()
        self._seconds = ctypes.c_double()

    def _check(self, rc: int, what: str) -> None:
        if rc == _OK:
            return
        if rc == _TIMEOUT:
            raise TransportError(f"timed out after {self._timeout:.0f} s waiting for {what} on {self._where}")
        if rc == _PEER_GONE:
            pid = self._dead.value
            rank = self._ranks_by_pid.get(pid)
            who = f"rank {rank} (pid {pid} on this host)" if rank is not None else f"the peer (pid {pid} on this host)"
            raise TransportError(f"{who} died while waiting for {what} on {self._where}")
        if rc == _NO_MEMORY:
            raise TransportError(f"out of memory posting {what} on {self._where}")
        text = self._lib.rb_status_string(self._status.value).decode(errors="replace")
        raise TransportError(f"UCX failed {what} on {self._where}: {text}")

    @staticmethod
    def rma_link_ends(ends: list[RmaLinkEnd]) -> Any:
        return (RmaLinkEnd * max(1, len(ends)))(*ends)

    def rma_round(
        self, op: int, active: Any, nactive: int, passive: Any, npassive: int, signal: int, scratch: int
    ) -> list[float]:
        """One step of a one-sided round: seconds from each active link's start to its completion."""
        seconds = (ctypes.c_double * max(1, nactive))()
        rc = self._lib.rb_rma_round(
            self._worker, op, active, nactive, passive, npassive, signal, scratch, self._timeout, seconds,
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a round of one-sided transfers and their completion")
        return list(seconds[:nactive])

    def put_pingpong(self, ping: bool, link: Any, flag: int, expect: int, signal: int) -> float:
        """A put each way, each noticed by polling the last byte it writes; seconds on the pinging side."""
        rc = self._lib.rb_put_pingpong(
            self._worker, int(ping), link, flag, expect, signal, self._timeout,
            ctypes.byref(self._seconds), ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a put ping-pong round trip")
        return self._seconds.value

    def blocks(
        self, op: int, active: bool, link: Any, signal: int, scratch: int, batch: int, stall: float = 0.0
    ) -> tuple[float, list[float], list[float]]:
        """One step of block-list transfers. The initiator gets (step seconds, each transfer's
        seconds, each transfer's posting seconds); the other end (0.0, [], []). `stall`: seconds
        the first transfer is held up on purpose (the test suite's planted slow transfer)."""
        if not active:
            rc = self._lib.rb_blocks_passive(
                self._worker,
                op,
                link,
                signal,
                scratch,
                self._timeout,
                ctypes.byref(self._dead),
                ctypes.byref(self._status),
            )
            self._check(rc, "a step of block transfers")
            return 0.0, [], []
        seconds, posting = (ctypes.c_double * batch)(), (ctypes.c_double * batch)()
        rc = self._lib.rb_blocks_active(
            self._worker, op, link, signal, scratch, self._timeout, stall, posting, seconds, ctypes.byref(self._seconds),
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a step of block transfers")
        return self._seconds.value, list(seconds), list(posting)

    def blocks_ready(self, link: Any, scratch: int) -> None:
        """The initiator's wait for the other end's READY, for a step moved elsewhere (the GPU's)."""
        rc = self._lib.rb_blocks_ready(
            self._worker, link, scratch, self._timeout, ctypes.byref(self._dead), ctypes.byref(self._status)
        )
        self._check(rc, "the other end's READY")

    def blocks_done(self, link: Any, signal: int) -> None:
        """The initiator's DONE after a step moved elsewhere."""
        rc = self._lib.rb_blocks_done(
            self._worker, link, signal, self._timeout, ctypes.byref(self._dead), ctypes.byref(self._status)
        )
        self._check(rc, "sending DONE")

    @property
    def worker(self) -> int:
        return int(self._worker.value or 0)

    @property
    def timeout(self) -> float:
        return self._timeout

    @staticmethod
    def addresses(pointers: list[int]) -> Any:
        return (ctypes.c_void_p * len(pointers))(*pointers)

    @staticmethod
    def link_ends(ends: list[LinkEnd]) -> Any:
        return (LinkEnd * max(1, len(ends)))(*ends)

    def round(self, targets: Any, ntargets: int, sources: Any, nsources: int, signal: int, scratch: int) -> list[float]:
        """One step of a round: seconds from the start of the clock to each target's acknowledgement."""
        seconds = (ctypes.c_double * max(1, ntargets))()
        rc = self._lib.rb_round(
            self._worker, targets, ntargets, sources, nsources, signal, scratch, self._timeout, seconds,
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a round of windows and their acknowledgements")
        return list(seconds[:ntargets])

    def ping(
        self,
        endpoint: int,
        peer_pid: int,
        out: int,
        into: int,
        size: int,
        memory: int,
        tags: tuple[int, int, int],
        ready: int,
        count: int,
    ) -> float:
        """Seconds for `count` round trips in a row."""
        rc = self._lib.rb_lat_ping(
            self._worker, endpoint, out, into, size, memory, *tags, ready, count, self._timeout, peer_pid,
            ctypes.byref(self._seconds), ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a ping-pong round trip")
        return self._seconds.value

    def pong(
        self,
        endpoint: int,
        peer_pid: int,
        out: int,
        into: int,
        size: int,
        memory: int,
        tags: tuple[int, int, int],
        signal: int,
        count: int,
    ) -> None:
        rc = self._lib.rb_lat_pong(
            self._worker, endpoint, out, into, size, memory, *tags, signal, count, self._timeout, peer_pid,
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a ping and its pong")


RMA_PUT, RMA_GET, TAGGED = 0, 1, 2  # the operations of one-sided and block-list steps


class Registrations:
    """Memory this rank lends to one-sided peers (ucp_mem_map, a packed remote key per buffer) and the
    peers' keys it holds; everything is given back by release(), keys before the memory."""

    def __init__(self, library: Any, context: int):
        self._lib = library
        self._context = ctypes.c_void_p(context)
        self._maps: list[Any] = []
        self._keys: list[Any] = []
        self._allocated: dict[int, bytes] = {}  # address -> packed key of memory UCX allocated
        self._handles: dict[int, int] = {}  # address -> ucp_mem_h of memory mapped here

    def _check(self, rc: int, status: Any, what: str) -> None:
        if rc != _OK:
            text = self._lib.rb_status_string(status.value).decode(errors="replace")
            raise TransportError(f"UCX could not {what}: {text}")

    def lend(self, address: int, length: int, memory: int) -> bytes:
        """Map `length` bytes at `address` for remote access; returns the packed remote key (memory
        UCX allocated here is mapped already: its key)."""
        if address in self._allocated:
            return self._allocated[address]
        return self._map(address, length, memory, f"map {length} bytes for remote access")[1]

    def memory_handle(self, address: int, length: int, memory: int) -> int:
        """The ucp_mem_h of the memory at `address` (mapped now if it is not yet): what UCX's device
        descriptor lists need for local memory."""
        if address not in self._handles:
            self._map(address, length, memory, f"map {length} bytes for the GPU's own transfers")
        return self._handles[address]

    def allocate(self, length: int) -> tuple[int, bytes]:
        """`length` bytes of host memory allocated by UCX and lent for remote access: (address, key).
        The memory lives until release()."""
        address, key = self._map(0, length, -1, f"allocate {length} bytes of host memory")
        self._allocated[address] = key
        return address, key

    def _map(self, address: int, length: int, memory: int, what: str) -> tuple[int, bytes]:
        """rb_mem_map: the program's memory at `address`, or (0) memory UCX allocates; (address, key)."""
        where, memh, packed = ctypes.c_void_p(address or None), ctypes.c_void_p(), ctypes.c_void_p()
        size, status = ctypes.c_size_t(), ctypes.c_int()
        rc = self._lib.rb_mem_map(
            self._context, ctypes.byref(where), length, memory, ctypes.byref(memh), ctypes.byref(packed),
            ctypes.byref(size), ctypes.byref(status),
        )  # fmt: skip
        self._check(rc, status, what)
        self._maps.append(memh)
        self._handles[int(where.value or 0)] = int(memh.value or 0)
        key = ctypes.string_at(packed, size.value)
        self._lib.rb_rkey_buffer_release(packed)
        return int(where.value or 0), key

    def borrow(self, endpoint: int, key: bytes) -> int:
        """The peer's packed key unpacked for `endpoint`: a ucp_rkey_h."""
        rkey, status = ctypes.c_void_p(), ctypes.c_int()
        rc = self._lib.rb_rkey_unpack(endpoint, key, ctypes.byref(rkey), ctypes.byref(status))
        self._check(rc, status, "unpack a peer's remote key")
        self._keys.append(rkey)
        return int(rkey.value or 0)

    def release(self) -> None:
        for rkey in self._keys:
            self._lib.rb_rkey_destroy(rkey)
        for memh in self._maps:
            self._lib.rb_mem_unmap(self._context, memh)
        self._keys.clear()
        self._maps.clear()
        self._handles.clear()
        self._allocated.clear()
