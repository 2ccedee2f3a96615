"""The native hot loop (hotloop.c and its parts, hotloop_*.c): built on first use against the UCX that
UCXX loaded, cached, and called through ctypes for the timed part of a step: a round of window
transfers (bw, bibw, every concurrent pattern), a ping-pong (lat), a one-sided round or a block list.

Python costs about 3.5 us per UCX request posted through UCXX; ucx_perftest posts one in well under
0.1 us. Small messages therefore measure the interpreter unless the timed loop is native. Everything
outside the clock (patterns, checks, calibration, statistics) stays in Python.

`pip install` builds it (setup.py, against the UCX headers of the libucx wheel); a source tree, or an
install without a compiler, builds it on first use instead. Building needs a C compiler (`cc`, or
$CC) and UCX's headers, which the libucx wheel ships. When either is missing the Python loop runs
instead, and the results say so and why.

This module finds and loads the library (the one built at install, else one built on first use);
beside it: the build cache every native library shares (cache), the ctypes mirror of hotloop.h
(mirror), the steps called through it (loop) and the memory lent to one-sided peers (registrations).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import privatedirs
from ...errors import UnsafePathError
from ...hardware.devstack import version_text
from .cache import FirstUse, build_cached, note, open_descriptor
from .loop import HotLoop, LatEnd
from .mirror import (
    RMA_GET,
    RMA_PUT,
    TAGGED,
    UCS_MEMORY_TYPES,
    BlocksLinkEnd,
    LinkEnd,
    RmaLinkEnd,
    check_abi,
    configure,
    library_abi,
    memory_type,
    mirror_abi,
    parse_abi,
)
from .registrations import Registrations

# What callers import from here (the package), wherever it lives.
__all__ = [
    "HEADER", "HEADERS", "NATIVE_ENV", "RMA_GET", "RMA_PUT", "SOURCES", "TAGGED", "UCS_MEMORY_TYPES", "Availability",
    "BlocksLinkEnd", "HotLoop", "LatEnd", "LinkEnd", "Registrations", "RmaLinkEnd", "build_cached", "check_abi",
    "compile_command", "library_abi", "library_name", "load", "memory_type", "mirror_abi", "open_descriptor",
    "parse_abi", "source_digest", "ucx_prefix",
]  # fmt: skip

HERE = Path(__file__).parent
# The loop's parts, each a translation unit, every one compiled into the one library: hotloop.c (the
# waits and posts they share, and rb_abi) first, then its steps; setup.py builds the same list.
SOURCES = tuple(sorted(HERE.glob("hotloop*.c")))
HEADER = HERE / "hotloop.h"  # the interface: the structs and codes mirrored below
HEADERS = tuple(sorted(HERE.glob("hotloop*.h")))  # the interface and what the parts share (hotloop_parts.h)
# Warnings the C is kept clean of (tests build it with -Werror); UCX's own headers are system headers.
WARNINGS = ("-Wall", "-Wextra")


def source_digest() -> str:
    """The loop's source as one digest: every part and every header they include, in order of their
    names (setup.py computes the same)."""
    return hashlib.sha256(b"".join(path.read_bytes() for path in (*SOURCES, *HEADERS))).hexdigest()[:16]


def compile_command(compiler: list[str], prefix: Path, output: Path, *extra: str) -> list[str]:
    """How the loop is built on first use (and by the tests, with -Werror)."""
    lib = prefix / "lib"
    return [
        *compiler, "-O2", *WARNINGS, *extra, "-shared", "-fPIC", "-o", str(output), *map(str, SOURCES),
        f"-isystem{prefix / 'include'}", f"-L{lib}", "-lucp", "-lucs", f"-Wl,-rpath,{lib}",
    ]  # fmt: skip


# RDMABENCH_NATIVE=build: ignore the library built at install time (the tests of the first-use build).
NATIVE_ENV = "RDMABENCH_NATIVE"


@dataclass
class Availability:
    library: Any  # the loaded ctypes.CDLL, or None
    reason: str  # why not, when library is None; where it came from otherwise


def ucx_prefix() -> Path | None:
    """The UCX installation UCXX uses (the libucx wheel's), with include/ and lib/."""
    try:
        import libucx
    except ImportError:
        return None
    prefix = Path(libucx.__file__).parent
    return prefix if (prefix / "include" / "ucp" / "api" / "ucp.h").exists() else None


def library_name(prefix: Path, compiler: list[str]) -> str:
    """The file name of the library built on first use: one per source, UCX and compiler."""
    version = version_text(prefix) or ""
    digest = hashlib.sha256(
        source_digest().encode() + str(prefix).encode() + version.encode() + " ".join(compiler).encode()
    )
    return f"hotloop-{digest.hexdigest()[:16]}.so"


def _build(prefix: Path, compiler: list[str], refused: list[str]) -> tuple[Any, Path]:
    """The library loaded (built now if no cache holds a usable one) and where it is."""
    return build_cached(
        library_name(prefix, compiler), lambda out: compile_command(compiler, prefix, out), refused, _load_checked
    )


def _load_checked(fd: int) -> Any:
    """dlopen the very file that was checked, through its descriptor: nothing can swap it in between."""
    # PyDLL keeps the GIL: the loop calls PyErr_CheckSignals, and ctypes raises what a handler raised.
    return configure(ctypes.PyDLL(open_descriptor(fd)))


@FirstUse
def load() -> Availability:
    """Load the hot loop: the library built at install time when it matches this UCX and this
    source, else one built (once per UCX and source) on first use; never raises."""
    prefix = ucx_prefix()
    compiler = shlex.split(os.environ.get("CC") or "cc")
    if prefix is None:
        return Availability(None, "UCX headers not found (the libucx wheel provides them)")
    refused: list[str] = []
    prebuilt = _prebuilt(prefix, refused)
    if prebuilt is not None:
        try:
            return Availability(configure(prebuilt[0]), _with_refusals(prebuilt[1], refused))
        except OSError as exc:  # built from this source, yet laid out otherwise: build one here
            note(refused, f"the library built at install: {exc}")
    try:
        library, path = _build(prefix, compiler, refused)
    except (OSError, subprocess.SubprocessError, UnsafePathError) as exc:
        return Availability(None, f"cannot build the native loop: {_with_refusals(str(exc), refused)}")
    where = f"built on first use with {shlex.join(compiler)} against {prefix} ({path})"
    return Availability(library, _with_refusals(where, refused))


def _with_refusals(text: str, refused: list[str]) -> str:
    return f"{text} ({'; '.join(refused)})" if refused else text


def _prebuilt(prefix: Path, refused: list[str]) -> tuple[Any, str] | None:
    """The library setup.py built at install time, if it was built from this very source against
    this UCX version (a source tree may run beside an installed package of another version)."""
    if os.environ.get(NATIVE_ENV) == "build":
        return None
    version = version_text(prefix) or ""
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
        note(refused, str(exc))
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
