"""The stack a GPU-initiated block list stands on (wire/devapi.py): nvcc, which builds the kernel once,
and a UCX library of the version of the headers the kernel is built against.

UCX's device API is compiled into the kernel: the layouts of its device structures come from the
headers. UCX 1.22 changed the device memory-list layout without bumping anything a kernel could
check at run time, so a kernel built against 1.21's headers and run on a 1.22 library (another UCX
loaded first, NIXL's bundled one for instance) reads the lists wrongly. The only safe answer is to
compare the headers' UCP_API_MAJOR.MINOR with the library's version before building or loading,
and refuse a mismatch.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
from pathlib import Path

_VERSION_HEADER = Path("include") / "ucp" / "api" / "ucp_version.h"
_HEADER_LIMIT = 1 << 16  # bytes: ucp_version.h is a few hundred
_VERSION_LIMIT = 256  # bytes: VERSION.txt is one short line
_MAPS = "/proc/self/maps"


def nvcc() -> str | None:
    """The CUDA compiler: $RDMABENCH_NVCC, $NVCC, nvcc on the path, or $CUDA_HOME/bin/nvcc."""
    for candidate in (os.environ.get("RDMABENCH_NVCC"), os.environ.get("NVCC")):
        if candidate:
            return candidate
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return str(Path(home) / "bin" / "nvcc") if (Path(home) / "bin" / "nvcc").exists() else None


def header_version(prefix: Path) -> tuple[int, int] | None:
    """UCP_API_MAJOR and UCP_API_MINOR of the headers under `prefix` (None: no readable header)."""
    try:
        with open(prefix / _VERSION_HEADER, "rb") as handle:
            text = handle.read(_HEADER_LIMIT).decode(errors="replace")
    except OSError:
        return None
    found = [re.search(rf"#define\s+UCP_API_{part}\s+(\d+)", text) for part in ("MAJOR", "MINOR")]
    if found[0] is None or found[1] is None:
        return None
    return int(found[0].group(1)), int(found[1].group(1))


def loaded_ucp() -> Path | None:
    """The libucp this process has loaded already (UCXX, NIXL or the native loop brought it), if any."""
    try:
        with open(_MAPS, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split(maxsplit=5)  # address perms offset device inode [path]
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libucp.so"):
                    return Path(fields[5].strip())
    except OSError:
        return None
    return None


def _asked(library: Path) -> tuple[int, int, int] | None:
    """ucp_get_version() of a library this process holds already (RTLD_NOLOAD: nothing new is loaded)."""
    try:
        handle = ctypes.CDLL(str(library), mode=os.RTLD_NOLOAD)
        major, minor, release = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        handle.ucp_get_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(release))
    except (OSError, AttributeError):
        return None
    return major.value, minor.value, release.value


def version_text(prefix: Path) -> str | None:
    """The VERSION.txt of the UCX installation under `prefix` (the libucx wheel's), stripped and read
    at most 256 bytes of; None where it cannot be read. The one place the package reads it: the
    native libraries' cache names carry it, the loader compares it with the install-time build's tag
    (setup.py, which cannot import the package, reads the same file for that tag), and the version
    check parses it."""
    try:
        with open(prefix / "VERSION.txt", "rb") as handle:
            return handle.read(_VERSION_LIMIT).decode(errors="replace").strip()
    except OSError:
        return None


def library_version(prefix: Path, loaded: Path | None) -> tuple[tuple[int, ...] | None, str]:
    """The UCX library's version and where it was read: ucp_get_version() of the libucp `loaded` in
    this process, else the VERSION.txt of the installation under `prefix` (the libucx wheel's)."""
    if loaded is not None:
        asked = _asked(loaded)
        if asked is not None:
            return asked, f"the libucp this process loaded ({loaded})"
    text = version_text(prefix)
    if text is None:
        return None, f"{prefix} (no VERSION.txt)"
    numbers = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if numbers is None:
        return None, f"{prefix}/VERSION.txt ({text[:20]!r})"
    return tuple(int(part) for part in numbers.groups(default="0")), f"{prefix}/VERSION.txt"


def version_mismatch(prefix: Path, loaded: Path | None = None) -> str | None:
    """Why a kernel built against the headers under `prefix` must not run on the UCX library (one
    line), or None when their major.minor agree. `loaded`: the libucp this process holds (found in
    its memory map when not given)."""
    headers = header_version(prefix)
    if headers is None:
        return f"the UCX headers under {prefix} name no UCP_API_MAJOR/MINOR (include/ucp/api/ucp_version.h)"
    version, where = library_version(prefix, loaded if loaded is not None else loaded_ucp())
    if version is None:
        return (
            f"the UCX library's version is unknown ({where}): it cannot be matched to headers {headers[0]}.{headers[1]}"
        )
    if tuple(version[:2]) == headers:
        return None
    shown = ".".join(str(part) for part in version)
    return (
        f"UCX headers {headers[0]}.{headers[1]} ({prefix}) but library {shown} ({where}): a device kernel built "
        "against one misreads the other's memory lists (1.22 changed them without a version bump); use one UCX "
        "for both (the libucx wheel of the library's version)"
    )
