"""What `rdmabench storage` is asked to do (StorageConfig) and the refusals made before anything is
written: tests, paths, sizes, threads, the file, and the paths this file system and memory allow."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType

from ..errors import ConfigError
from ..hardware import storage as disk
from ..units import format_size
from .paths import GPU_ONLY_PATHS, PATHS

TESTS = ("read", "write")
DEFAULT_SIZES = (1 << 20, 16 << 20)


@dataclass
class StorageConfig:
    file: str
    create_size: int | None = None  # create the file with rdmabench's pattern (removed at the end unless keep)
    tests: list[str] = field(default_factory=lambda: ["read"])
    paths: list[str] | None = None  # None: every path this machine can run
    memory: str | None = None  # "device" or "host"; None: device where there is a GPU
    sizes: list[int] | None = None  # request sizes; None: DEFAULT_SIZES that fit in the file
    threads: list[int] = field(default_factory=lambda: [1])
    buffers: int = 2
    samples: int = 3
    validate: bool = True
    keep: bool = False
    gpu: int = 0


def cupy_or_none(config: StorageConfig) -> ModuleType | None:
    """CuPy where the run's memory is a GPU's (--mode settled here when it was left out), else None."""
    from ..hardware.gpu import gpu_unavailable_reason, import_cupy, visible_gpu_count

    cupy = import_cupy()
    have = cupy is not None and visible_gpu_count() > 0
    if config.memory == "device" and not have:
        raise ConfigError(f"--mode device needs a CUDA GPU: {gpu_unavailable_reason()}")
    if config.memory is None:
        config.memory = "device" if have else "host"
    if config.memory == "device" and config.gpu >= visible_gpu_count():
        raise ConfigError(f"--gpu {config.gpu}: this machine has GPUs 0..{visible_gpu_count() - 1}")
    return cupy if config.memory == "device" else None


def check(config: StorageConfig) -> int:
    """Refuse bad input before anything is written; returns the file size the run will move."""
    if config.memory not in (None, "device", "host"):
        raise ConfigError(f"unknown --mode {config.memory!r}: choose device or host")
    for test in config.tests:
        if test not in TESTS:
            raise ConfigError(f"unknown storage test {test!r}: choose read or write")
    for name in config.paths or []:
        if name not in PATHS:
            raise ConfigError(f"unknown storage path {name!r}: choose {', '.join(PATHS)}")
    if not 1 <= config.samples <= 1000 or not 1 <= config.buffers <= 64:
        raise ConfigError("--samples must be 1..1000 and --stage-buffers 1..64")
    if not config.threads or any(not 1 <= t <= 256 for t in config.threads):
        raise ConfigError("--threads must be 1..256")
    if os.path.isdir(config.file):
        raise ConfigError(f"{config.file} is a directory: give a file (one to create with --size, or one to read)")
    if os.path.exists(config.file):
        if config.create_size is not None:
            raise ConfigError(f"{config.file} exists: --size creates a new file; leave it out to read this one")
        if not os.path.isfile(config.file):
            raise ConfigError(f"{config.file} is not a regular file")
        size = os.path.getsize(config.file)
    elif config.create_size is None:
        raise ConfigError(f"no such file: {config.file} (give --size to create one with rdmabench's pattern)")
    else:
        size = config.create_size
    if size <= 0:
        raise ConfigError(f"{config.file} is empty")
    if config.sizes is None:
        config.sizes = [s for s in DEFAULT_SIZES if s <= size] or [size]
    too_big = [s for s in config.sizes if s > size]
    if too_big or not config.sizes or any(s <= 0 for s in config.sizes):
        raise ConfigError(
            f"request sizes must be 1 byte..the file's {format_size(size)}, not {format_size(max(config.sizes or [0]))}"
        )
    return size


def chosen_paths(config: StorageConfig, fs: disk.FileSystemInfo, size: int) -> list[str]:
    """The paths to run, refused where the memory or the file system cannot take them."""
    on_gpu = config.memory == "device"
    wanted = config.paths or [p for p in PATHS if on_gpu or p not in GPU_ONLY_PATHS]
    if not on_gpu and any(p in GPU_ONLY_PATHS for p in wanted):
        raise ConfigError("the kvikio path moves a file to or from GPU memory: use --mode device")
    if "pinned" in wanted:
        if fs.direct_io is False:
            raise ConfigError(
                f"{fs.mount_point} ({fs.fstype}) refuses O_DIRECT, which the pinned path needs: use --paths pageable"
            )
        odd = [s for s in config.sizes or () if s % disk.DIRECT_ALIGNMENT] + (
            [size] if size % disk.DIRECT_ALIGNMENT else []
        )
        if odd:
            raise ConfigError(
                f"O_DIRECT (the pinned path) moves multiples of {disk.DIRECT_ALIGNMENT} bytes: "
                f"{format_size(odd[0])} is not one"
            )
    if "kvikio" in wanted:
        from .paths import import_kvikio

        import_kvikio()
    return wanted
