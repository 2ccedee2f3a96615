"""What this process may use of the machine: memory (MemAvailable, bounded by the memory limit of
its cgroup) and cores (its CPU affinity, bounded by its cgroup's CPU quota). A container or a batch
job sees the host's /proc/meminfo and, often, every core; its cgroup is what bounds it. Both cgroup
versions are read: v2 (memory.max, cpu.max) and v1 (memory.limit_in_bytes, cpu.cfs_quota_us), at
the process's own cgroup and every cgroup above it."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..units import is_digits
from .topology import read_text

_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a page-rounded LONG_MAX


@dataclass(frozen=True)
class Amount:
    """How much of something there is, and what said so (for the one line that quotes it)."""

    value: int
    source: str


def memory_available() -> Amount | None:
    """Host memory this process can still allocate: MemAvailable, or less where a cgroup's limit
    minus what the cgroup holds (its reclaimable file cache aside) is smaller. None if unknown."""
    found = _meminfo_available()
    best = Amount(found, "MemAvailable") if found is not None else None
    for folder, version in _cgroup_folders("memory"):
        room = _cgroup_memory_room(folder, version)
        if room is not None and (best is None or room < best.value):
            limit_file = "memory.max" if version == 2 else "memory.limit_in_bytes"
            best = Amount(max(0, room), f"the memory limit of cgroup {folder} ({limit_file})")
    return best


def cpu_quota() -> Amount | None:
    """The fewest cores a CPU quota of this process's cgroup or one above it allows, or None."""
    best: Amount | None = None
    for folder, version in _cgroup_folders("cpu"):
        quota = _cgroup_cpu_quota(folder, version)
        if quota is not None and (best is None or quota < best.value):
            best = Amount(quota, f"the CPU quota of cgroup {folder}")
    return best


def affinity() -> list[int]:
    """The cores this process may run on (every core os.cpu_count() knows where that cannot be read)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _number(path: str) -> int | None:
    text = read_text(path)
    if text is None or not is_digits(text.lstrip("-")):
        return None  # absent, or "max"
    return int(text)


def _stat(path: str, key: str) -> int:
    for line in (read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and is_digits(value.strip()):
            return int(value)
    return 0


def _cgroup_memory_room(folder: str, version: int) -> int | None:
    """A cgroup's memory limit less what it holds that cannot be reclaimed; None without a limit."""
    if version == 2:
        limit, used = _number(f"{folder}/memory.max"), _number(f"{folder}/memory.current")
        cache = _stat(f"{folder}/memory.stat", "inactive_file")
    else:
        limit, used = _number(f"{folder}/memory.limit_in_bytes"), _number(f"{folder}/memory.usage_in_bytes")
        cache = _stat(f"{folder}/memory.stat", "total_inactive_file")
    if limit is None or limit >= _UNLIMITED:
        return None
    return limit - max(0, (used or 0) - cache)


def _cgroup_cpu_quota(folder: str, version: int) -> int | None:
    """Cores a cgroup's CPU quota allows, rounded up; None without a quota."""
    if version == 2:
        parts = (read_text(f"{folder}/cpu.max") or "").split()
        if len(parts) != 2 or not is_digits(parts[0]) or not is_digits(parts[1]):
            return None  # "max 100000": no quota
        quota, period = int(parts[0]), int(parts[1])
    else:
        quota_or_none, period_or_none = _number(f"{folder}/cpu.cfs_quota_us"), _number(f"{folder}/cpu.cfs_period_us")
        if quota_or_none is None or period_or_none is None:
            return None
        quota, period = quota_or_none, period_or_none
    if quota <= 0 or period <= 0:
        return None  # -1: no quota
    return max(1, math.ceil(quota / period))


def _cgroup_folders(controller: str) -> list[tuple[str, int]]:
    """The folders of this process's cgroup and its ancestors (up to the mount) that carry
    `controller`, each with its cgroup version."""
    mounts = _cgroup_mounts()
    folders: list[tuple[str, int]] = []
    for line in (read_text("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hierarchy, controllers, path = parts
        version = 2 if controllers == "" else 1
        if version == 1 and controller not in controllers.split(","):
            continue
        for root, mount_point in mounts.get((version, controller if version == 1 else ""), []):
            if not (path == root or path.startswith(root.rstrip("/") + "/")):
                continue
            inner = path[len(root.rstrip("/")) :].strip("/")
            while True:
                folder = os.path.join(mount_point, inner) if inner else mount_point
                if os.path.isdir(folder):
                    folders.append((folder, version))
                if not inner:
                    break
                inner = os.path.dirname(inner)
            break
    return folders


def _cgroup_mounts() -> dict[tuple[int, str], list[tuple[str, str]]]:
    """(version, v1 controller or "") -> [(the cgroup path the mount shows, where it is mounted)]."""
    mounts: dict[tuple[int, str], list[tuple[str, str]]] = {}
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount_point = _unescape(fields[3]), _unescape(fields[4])
        if tail[0] == "cgroup2":
            mounts.setdefault((2, ""), []).append((root, mount_point))
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                mounts.setdefault((1, option), []).append((root, mount_point))
    return mounts


def _unescape(text: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text
