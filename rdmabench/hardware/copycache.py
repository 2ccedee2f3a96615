"""The host memory copy's figure, kept per host and boot.

Local rank 0 of every job measures one memory copy of its host beyond the last-level cache
(topology.host_copy: 64 to 256 MiB buffers, about a second of a run's start). The figure belongs to
the machine, not to the job: it is kept in the user's private cache directory (privatedirs.cache_dirs,
the first that is ours), one file per host name, and later runs on the same boot take it from there.
A record is taken only when everything that could change the figure matches (`_key`: the host name,
the kernel's boot id, a hash of the measuring code and numpy's version, the copy's size, the cache it
was sized by, the NUMA nodes the process may run on), and it holds a plausible figure.

The file is ours and is treated as untrusted input all the same: read only from a directory that is
ours and nobody else's to write, without following links, at most MAX_BYTES; written beside its old
self and renamed over it (a link planted there is replaced, never followed). A link, another user's
file, an oversized or corrupt one is ignored, the copy measured again, and the reason kept in the
figure's provenance (HostCopy.note). `run --remeasure-host-copy` measures again and replaces the record.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import inspect
import json
import math
import os
import re
import socket
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypedDict

import numpy as np

from .. import privatedirs
from ..errors import UnsafePathError
from . import topology

FORMAT = 1  # the file's layout
MAX_BYTES = 64 << 10  # the most read of a cache file: MAX_RECORDS records are a few KiB
MAX_RECORDS = 16  # records kept per host (one per NUMA binding, say); older ones are dropped
GBPS_RANGE = (0.01, 10_000.0)  # a figure outside it is no memory copy's: measured again
BOOT_ID = "/proc/sys/kernel/random/boot_id"
REMEASURED = "--remeasure-host-copy"  # the note of a figure measured again on request
_UTC = "%Y-%m-%dT%H:%M:%SZ"


def host_copy(
    remeasure: bool = False,
    dirs: list[Path] | None = None,
    measure: Callable[[], topology.HostCopy] = topology.host_copy,
) -> topology.HostCopy:
    """This host's memory copy: the figure kept for this host and boot where there is one (unless
    `remeasure`), else `measure`d now and kept (one measurement per host at a time: a second job
    that finds none waits for the first's). `dirs`: where it may be kept (privatedirs.cache_dirs)."""
    notes: list[str] = [REMEASURED] if remeasure else []
    key = _key()
    directory = _directory(privatedirs.cache_dirs() if dirs is None else dirs, notes) if key else None
    if key is None or directory is None:
        return _measured(measure, notes + ([] if key else [f"not kept: no boot id in {BOOT_ID}"]))
    path = directory / _file_name(str(key["host"]))
    found = None if remeasure else _cached(path, key, notes)
    if found is not None:
        return found
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(privatedirs.locked(path.with_name(f".{path.name}.lock")))
        except (OSError, UnsafePathError) as exc:
            return _measured(measure, [*notes, f"not kept: {exc}"])
        found = None if remeasure else _cached(path, key, [])  # a job beside this one measured it meanwhile
        if found is not None:
            return found
        copy = _measured(measure, notes)
        try:
            _keep(path, key, copy)
        except OSError as exc:
            return replace(copy, note="; ".join(filter(None, (copy.note, f"not kept: {exc}"))))
        return copy


def _measured(measure: Callable[[], topology.HostCopy], notes: list[str]) -> topology.HostCopy:
    now = datetime.datetime.now(datetime.timezone.utc).strftime(_UTC)
    return replace(measure(), measured_utc=now, cached=False, note="; ".join(dict.fromkeys(notes)))


def boot_id() -> str | None:
    """The kernel's id of this boot (a UUID), or None where it cannot be read."""
    try:
        with open(BOOT_ID, "rb") as handle:
            text = handle.read(64).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if re.fullmatch(r"[0-9a-f-]{32,36}", text) else None


class CopyKey(TypedDict):
    """What a kept figure depends on (its record's "key"): this host, boot and code, the copy's and the
    cache's bytes, the CPUs' NUMA nodes."""

    host: str
    boot_id: str
    code: str
    copy_bytes: int
    cache_bytes: int | None
    numa_nodes: list[int]


def _key() -> CopyKey | None:
    """What the figure depends on, as stored beside it; None without a boot id (never kept then)."""
    boot = boot_id()
    if boot is None:
        return None
    cache = topology.last_level_cache_bytes()
    return {
        "host": socket.gethostname(),
        "boot_id": boot,
        "code": _code_version(),
        "copy_bytes": topology.probe_bytes(cache),
        "cache_bytes": cache,
        "numa_nodes": topology.cpu_numa_nodes(),
    }


def _code_version() -> str:
    """A hash of the code that measures the copy (topology's source) and of numpy's version, whose
    copy it times: a figure kept by other code is measured again."""
    try:
        source = inspect.getsource(topology)
    except (OSError, TypeError):
        source = topology.__name__  # no source (a zipped install): numpy's version and the format only
    parts = [f"format {FORMAT}", f"numpy {np.__version__}", source]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _directory(dirs: list[Path], notes: list[str]) -> Path | None:
    """The first of `dirs` that is ours (made, mode 0700, if missing) and writable; refusals noted."""
    found = privatedirs.first_ours(dirs, lambda exc: notes.append(f"{exc}: not used"))
    if found is None:
        notes.append("not kept: no cache directory of yours")
    return found


def _file_name(host: str) -> str:
    """The host's file: its name where it is plain, else its plain part and a hash (a name of a
    shared home's other hosts never collides)."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:64].lstrip(".") or "host"
    if plain != host:
        plain += "-" + hashlib.sha256(host.encode()).hexdigest()[:8]
    return f"host-copy-{plain}.json"


def _records(path: Path, notes: list[str]) -> list[dict[str, object]]:
    """The records of the cache file `path` (checked: ours, no link, a regular file of at most
    MAX_BYTES, this layout); [] where it is missing, and, with a note, where it is refused."""
    try:
        fd = privatedirs.open_in_private_dir(path, os.O_RDONLY)
    except UnsafePathError as exc:
        notes.append(f"{exc}: ignored")
        return []
    except OSError:
        return []  # not there yet
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    try:
        if len(data) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        document = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not a format-{FORMAT} cache file")
        records = document.get("records")
        if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
            raise ValueError("its records are not a list of objects")
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; RecursionError: [[[[...
        notes.append(f"ignoring {path}: {str(exc)[:120] or type(exc).__name__}")
        return []
    return [record for record in records if isinstance(record, dict)]  # (all are: checked above)


def _cached(path: Path, key: CopyKey, notes: list[str]) -> topology.HostCopy | None:
    """The figure kept in `path` for `key`, where it holds one that is plausible; else None."""
    for record in _records(path, notes):
        if record.get("key") != key:
            continue
        copy = _figure(record, key)
        if copy is None:
            notes.append(f"ignoring {path}: its record for this boot is not a plausible figure")
        return copy
    return None


def _figure(record: dict[str, object], key: CopyKey) -> topology.HostCopy | None:
    gbps, when = record.get("gbps"), record.get("measured_utc")
    if isinstance(gbps, bool) or not isinstance(gbps, (int, float)) or not math.isfinite(gbps):
        return None
    if not GBPS_RANGE[0] <= gbps <= GBPS_RANGE[1] or not isinstance(when, str):
        return None
    try:
        at = datetime.datetime.strptime(when, _UTC).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    if at > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5):
        return None  # measured in the future: a clock set back since, or no real record
    return topology.HostCopy(float(gbps), key["copy_bytes"], key["cache_bytes"], when, cached=True)


def _same_boot_other_key(found: object, key: CopyKey) -> bool:
    """Whether a record's key (read back: open JSON) is another of this boot's."""
    return isinstance(found, dict) and found.get("boot_id") == key["boot_id"] and found != key


def _keep(path: Path, key: CopyKey, copy: topology.HostCopy) -> None:
    """Write `copy` as `key`'s record to `path` (under the host's lock), with the file's other
    records of this boot (at most MAX_RECORDS in all): a new file renamed over the old one."""
    kept = [record for record in _records(path, []) if _same_boot_other_key(record.get("key"), key)]
    mine = {"key": key, "gbps": copy.gbps, "measured_utc": copy.measured_utc}
    text = json.dumps({"format": FORMAT, "records": [*kept[-(MAX_RECORDS - 1) :], mine]}, indent=1)
    if len(text) > MAX_BYTES:
        text = json.dumps({"format": FORMAT, "records": [mine]})
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=".host-copy-", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(scratch, path)  # atomic; a link planted at `path` is replaced, never followed
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
