"""What a file's storage is and allows: its file system and block device, whether it takes O_DIRECT,
whether its pages can be dropped from the page cache, and what GPUDirect Storage needs (the
nvidia-fs driver, cuFile's configuration). `doctor --path` and `rdmabench storage` ask here."""

from __future__ import annotations

import errno
import os
import tempfile
from dataclasses import dataclass
from typing import TypedDict

from .topology import read_text

# O_DIRECT transfers must be aligned to the logical block size; 4 KiB covers every common device.
DIRECT_ALIGNMENT = 4096
_NVIDIA_FS = "/proc/driver/nvidia-fs/version"
# File systems cuFile can drive without its compatibility mode (with nvidia-fs loaded).
_GDS_FILE_SYSTEMS = ("ext4", "xfs", "lustre", "wekafs", "gpfs", "beegfs", "nfs")


class FileSystemRecord(TypedDict):
    """A FileSystemInfo as a storage results file's metadata keeps it."""

    path: str
    mount_point: str
    fstype: str
    source: str
    block_device: str | None
    rotational: bool | None
    model: str | None
    direct_io: bool | None


class GdsRecord(TypedDict):
    nvidia_fs: str | None
    cufile_json: str | None


@dataclass(frozen=True)
class FileSystemInfo:
    path: str
    mount_point: str
    fstype: str
    source: str
    block_device: str | None  # e.g. vda, nvme0n1
    rotational: bool | None
    model: str | None
    direct_io: bool | None  # None: could not be tried (no file to open, no write access)

    def to_dict(self) -> FileSystemRecord:
        return {
            "path": self.path, "mount_point": self.mount_point, "fstype": self.fstype, "source": self.source,
            "block_device": self.block_device, "rotational": self.rotational, "model": self.model,
            "direct_io": self.direct_io,
        }  # fmt: skip


@dataclass(frozen=True)
class GdsInfo:
    nvidia_fs: str | None  # the nvidia-fs driver's version, None when it is not loaded
    cufile_json: str | None  # cuFile's configuration file, where one exists

    def to_dict(self) -> GdsRecord:
        return {"nvidia_fs": self.nvidia_fs, "cufile_json": self.cufile_json}


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, file system type, source, major:minor) of every mount, from mountinfo."""
    mounts = []
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 2:
            point = fields[4].replace("\\040", " ")
            mounts.append((point, tail[0], tail[1], fields[2]))
    return mounts


def _block_device(major_minor: str) -> tuple[str | None, bool | None, str | None]:
    base = f"/sys/dev/block/{major_minor}"
    if not os.path.exists(base):
        return None, None, None
    name = os.path.basename(os.path.realpath(base))
    disk = os.path.realpath(os.path.join(base, "..")) if os.path.exists(os.path.join(base, "partition")) else base
    rotational = read_text(os.path.join(disk, "queue", "rotational"))
    model = read_text(os.path.join(disk, "device", "model"))
    return name, None if rotational is None else rotational.strip() == "1", (model or "").strip() or None


def direct_io_supported(path: str) -> bool | None:
    """Whether the file system of `path` (a file, or a directory to try a file in) accepts O_DIRECT;
    None for anything else (a FIFO's open would wait for a writer: never opened)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_DIRECT", 0)
    try:
        if os.path.isdir(path):
            with tempfile.NamedTemporaryFile(dir=path, prefix=".rdmabench-odirect-") as probe:
                os.close(os.open(probe.name, flags))
        elif os.path.isfile(path):
            os.close(os.open(path, flags))
        else:
            return None
        return True
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        return None


def file_system(path: str) -> FileSystemInfo:
    """The mount that holds `path` (the longest mount point that prefixes its real path)."""
    real = os.path.realpath(path)
    best = ("/", "unknown", "unknown", "")
    for mount in _mounts():
        point = mount[0]
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = mount
    device, rotational, model = _block_device(best[3]) if best[3] else (None, None, None)
    return FileSystemInfo(real, best[0], best[1], best[2], device, rotational, model, direct_io_supported(path))


def gds() -> GdsInfo:
    version = read_text(_NVIDIA_FS)
    configured = os.environ.get("CUFILE_ENV_PATH_JSON") or "/etc/cufile.json"
    return GdsInfo(
        nvidia_fs=(version or "").strip().splitlines()[0] if version else None,
        cufile_json=configured if os.path.exists(configured) else None,
    )


def gds_verdict(fs: FileSystemInfo, driver: GdsInfo) -> str:
    """What a GPUDirect Storage read of a file there would really do, in one line."""
    if driver.nvidia_fs is None:
        return (
            "no GPUDirect Storage: the nvidia-fs driver is not loaded, so cuFile (and KvikIO) fall back to "
            "POSIX reads through host memory (compatibility mode)"
        )
    if fs.fstype not in _GDS_FILE_SYSTEMS:
        return f"no GPUDirect Storage on {fs.fstype}: cuFile supports {', '.join(_GDS_FILE_SYSTEMS)}"
    if fs.direct_io is False:
        return f"no GPUDirect Storage: {fs.mount_point} refuses O_DIRECT"
    if fs.block_device and fs.block_device.startswith("vd"):
        return f"GPUDirect Storage unlikely: {fs.block_device} is a virtio disk, not NVMe the GPU can reach over PCIe"
    return f"GPUDirect Storage possible: nvidia-fs {driver.nvidia_fs}, {fs.fstype} on {fs.block_device or fs.source}"
