"""The native hot loop (hotloop.c): built on first use against the UCX that UCXX loaded, cached, and
called through ctypes for the timed part of a bw, bibw or lat step.

Python costs about 3.5 us per UCX request posted through UCXX; ucx_perftest posts one in well under
0.1 us. Small messages therefore measure the interpreter unless the timed loop is native. Everything
outside the clock (patterns, checks, calibration, statistics) stays in Python.

Building needs a C compiler (`cc`, or $CC) and UCX's headers, which the libucx wheel ships. When
either is missing the Python loop runs instead, and the results say so and why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TransportError

SOURCE = Path(__file__).with_name("hotloop.c")
_OK, _TIMEOUT, _PEER_GONE, _UCX_ERROR, _NO_MEMORY, _INTERRUPTED = range(6)

_ptr, _size, _int, _tag, _double = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64, ctypes.c_double
_out_seconds, _out_status = ctypes.POINTER(_double), ctypes.POINTER(_int)
# (worker, endpoint, buffers..., size, memory type, [count,] three tags, signal buffers, timeout, peer pid, outputs)
_SIGNATURES: dict[str, list[Any]] = {
    "rb_bw_send": [_ptr, _ptr, ctypes.POINTER(_ptr), _size, _int, _int, _tag, _tag, _tag, _ptr, _ptr, _double, _int, _out_seconds, _out_status],
    "rb_bw_recv": [_ptr, _ptr, ctypes.POINTER(_ptr), _size, _int, _int, _tag, _tag, _tag, _ptr, _double, _int, _out_status],
    "rb_lat_ping": [_ptr, _ptr, _ptr, _ptr, _size, _int, _tag, _tag, _tag, _ptr, _double, _int, _out_seconds, _out_status],
    "rb_lat_pong": [_ptr, _ptr, _ptr, _ptr, _size, _int, _tag, _tag, _tag, _ptr, _double, _int, _out_status],
    "rb_bibw": [_ptr, _ptr, ctypes.POINTER(_ptr), ctypes.POINTER(_ptr), _size, _int, _int, ctypes.POINTER(_tag), _ptr, _ptr, _ptr, _double, _int, _out_seconds, _out_status],
}  # fmt: skip
# ucs_memory_type_t of the memory types MemoryMode.ucx_memory names.
UCS_MEMORY_TYPES = {"host": 0, "cuda": 1, "cuda-managed": 2}


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
    """Where the built library may live: the user's cache, else (a read-only home on a compute
    node) a private directory under the system's temporary one."""
    base = os.environ.get("RDMABENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rdmabench"
    )
    return [Path(base), Path(tempfile.gettempdir()) / f"rdmabench-{os.getuid()}"]


def _writable_dir() -> Path:
    for directory in _cache_dirs():
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            continue
        if os.access(directory, os.W_OK):
            return directory
    raise OSError(f"no writable cache directory among {', '.join(str(d) for d in _cache_dirs())}")


def _build(prefix: Path, compiler: list[str]) -> Path:
    source = SOURCE.read_bytes()
    version = (prefix / "VERSION.txt").read_text().strip() if (prefix / "VERSION.txt").exists() else ""
    digest = hashlib.sha256(source + str(prefix).encode() + version.encode() + " ".join(compiler).encode())
    name = f"hotloop-{digest.hexdigest()[:16]}.so"
    for directory in _cache_dirs():
        if (directory / name).exists():
            return directory / name
    target = _writable_dir() / name
    lib = prefix / "lib"
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        command = [*compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(SOURCE)]
        command += [f"-I{prefix / 'include'}", f"-L{lib}", "-lucp", "-lucs", f"-Wl,-rpath,{lib}"]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["no output"])[0]
            raise OSError(f"{shlex.join(compiler)} failed: {first}")
        os.replace(built, target)  # atomic: ranks building at once each publish a whole file
    return target


def load() -> Availability:
    """Build (once per UCX and source) and load the hot loop; never raises."""
    global _loaded
    if _loaded is not None:
        return _loaded
    prefix = ucx_prefix()
    compiler = shlex.split(os.environ.get("CC") or "cc")
    if prefix is None:
        _loaded = Availability(None, "UCX headers not found (the libucx wheel provides them)")
        return _loaded
    try:
        path = _build(prefix, compiler)
        # PyDLL keeps the GIL: the loop calls PyErr_CheckSignals, and ctypes raises what a handler raised.
        library = ctypes.PyDLL(str(path))
        library.rb_init.argtypes = [ctypes.c_void_p]
        library.rb_init.restype = None
        library.rb_init(ctypes.cast(ctypes.pythonapi.PyErr_CheckSignals, ctypes.c_void_p))
        for name, argtypes in _SIGNATURES.items():
            function = getattr(library, name)
            function.argtypes = argtypes
            function.restype = _int
        library.rb_status_string.argtypes = [_int]
        library.rb_status_string.restype = ctypes.c_char_p
    except (OSError, subprocess.SubprocessError) as exc:
        _loaded = Availability(None, f"cannot build the native loop: {exc}")
        return _loaded
    _loaded = Availability(library, f"built with {shlex.join(compiler)} against {prefix}")
    return _loaded


class HotLoop:
    """The native steps for one link end, on this rank's UCP worker and its endpoint to the peer."""

    def __init__(
        self, library: Any, worker: int, endpoint: int, memory: str, timeout: float, peer_pid: int, where: str
    ):
        self._lib = library
        self.memory_type = UCS_MEMORY_TYPES.get(memory, -1)  # declared to UCX for the data buffers
        self._worker = ctypes.c_void_p(worker)
        self._endpoint = ctypes.c_void_p(endpoint)
        self._timeout = timeout
        self._pid = peer_pid
        self._where = where
        self._seconds = ctypes.c_double()
        self._status = ctypes.c_int()

    def _check(self, rc: int, what: str) -> None:
        if rc == _OK:
            return
        if rc == _TIMEOUT:
            raise TransportError(f"timed out after {self._timeout:.0f} s waiting for {what} on {self._where}")
        if rc == _PEER_GONE:
            raise TransportError(
                f"the peer (pid {self._pid} on this host) died while waiting for {what} on {self._where}"
            )
        if rc == _NO_MEMORY:
            raise TransportError(f"out of memory posting {what} on {self._where}")
        text = self._lib.rb_status_string(self._status.value).decode(errors="replace")
        raise TransportError(f"UCX failed {what} on {self._where}: {text}")

    @staticmethod
    def addresses(pointers: list[int]) -> Any:
        return (ctypes.c_void_p * len(pointers))(*pointers)

    def bw_send(self, buffers: Any, count: int, size: int, tags: tuple[int, int, int], ready: int, ack: int) -> float:
        rc = self._lib.rb_bw_send(
            self._worker, self._endpoint, buffers, size, self.memory_type, count, *tags, ready, ack, self._timeout, self._pid,
            ctypes.byref(self._seconds), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a window of messages and its acknowledgement")
        return self._seconds.value

    def bw_recv(self, buffers: Any, count: int, size: int, tags: tuple[int, int, int], signal: int) -> None:
        rc = self._lib.rb_bw_recv(
            self._worker, self._endpoint, buffers, size, self.memory_type, count, *tags, signal, self._timeout, self._pid,
            ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a window of messages")

    def ping(self, out: int, into: int, size: int, tags: tuple[int, int, int], ready: int) -> float:
        rc = self._lib.rb_lat_ping(
            self._worker, self._endpoint, out, into, size, self.memory_type, *tags, ready, self._timeout, self._pid,
            ctypes.byref(self._seconds), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a ping-pong round trip")
        return self._seconds.value

    def pong(self, out: int, into: int, size: int, tags: tuple[int, int, int], signal: int) -> None:
        rc = self._lib.rb_lat_pong(
            self._worker, self._endpoint, out, into, size, self.memory_type, *tags, signal, self._timeout, self._pid,
            ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a ping and its pong")

    def bibw(
        self, send: Any, receive: Any, count: int, size: int, tags: Any, signal: int, ready: int, ack: int
    ) -> float:
        """`tags`: tag_array() of (data out, data in, READY out, READY in, ACK out, ACK in)."""
        rc = self._lib.rb_bibw(
            self._worker, self._endpoint, send, receive, size, self.memory_type, count, tags, signal, ready, ack,
            self._timeout, self._pid, ctypes.byref(self._seconds), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "both windows")
        return self._seconds.value

    @staticmethod
    def tag_array(tags: tuple[int, ...]) -> Any:
        return (ctypes.c_uint64 * len(tags))(*tags)
