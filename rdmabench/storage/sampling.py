"""The samples of one (test, path, request size, threads): every worker over the whole file at once,
timed (a write's fdatasync inside the clock), with each request's time and the CPU spent, and what
landed checked after each sample, untimed."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ..errors import ResourceError, ValidationError
from ..units import format_size, gbps
from .config import StorageConfig
from .datafile import evict, file_first_wrong, first_wrong, opened, reset
from .paths import WORKERS, Region, Worker, open_flags


def destination(cupy: ModuleType | None, size: int) -> Region:
    """The memory the file is read into and written from: a GPU's (`cupy` given: the run's memory is the
    GPU's, storage.config.cupy_or_none), or page-locked host memory."""
    from ..memory.buffers import allocate
    from ..modes import MemoryMode

    if cupy is not None:
        try:
            return Region(cupy.zeros(size, dtype=cupy.uint8), cupy, True)
        except cupy.cuda.memory.OutOfMemoryError:
            raise ResourceError(f"cannot allocate {format_size(size)} of GPU memory for the file") from None
    buffer = allocate(MemoryMode.PINNED, size, False)  # page-aligned and page-locked: O_DIRECT-ready
    return Region(buffer.array[:size], np, False)


@dataclass
class Measured:
    gbps: list[float]
    request_seconds: list[float]
    cpu_seconds: float
    warnings: list[str]


def _sample(
    workers: list[Worker], plan: list[list[tuple[int, int]]], reading: bool, fd: int
) -> tuple[float, list[float]]:
    """One timed pass over the whole file by every worker at once: (seconds, request times)."""
    times: list[list[float]] = [[] for _ in workers]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            workers[index].run(plan[index], reading, times[index])
        except BaseException as exc:  # raised again in the caller's thread
            errors.append(exc)

    began = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers:
        worker.drain()
    if not reading:
        os.fdatasync(fd)
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return elapsed, [t for each in times for t in each]


def _plan(size: int, request: int, threads: int) -> list[list[tuple[int, int]]]:
    """Every request of a pass over the file, dealt out to the workers in turn."""
    requests = [(offset, min(request, size - offset)) for offset in range(0, size, request)]
    return [requests[worker::threads] for worker in range(threads)]


def measure(
    config: StorageConfig,
    path_name: str,
    reading: bool,
    target: str,
    region: Region,
    request: int,
    threads: int,
) -> Measured:
    """Samples of one (test, path, request size, threads) on `target` (the file read, or written)."""
    size = int(region.array.size)
    warnings: list[str] = []
    speeds: list[float] = []
    request_times: list[float] = []
    cpu = 0.0
    with opened(target, open_flags(path_name, reading)) as fd:
        workers = [WORKERS[path_name](target, fd, region, request, config.buffers, reading) for _ in range(threads)]
        try:
            plan = _plan(size, request, threads)
            for _ in range(config.samples):
                if not reading:
                    reset(target, size)
                problem = evict(target) if reading else None
                if problem and problem not in warnings:
                    warnings.append(problem)
                began = time.process_time()
                seconds, times = _sample(workers, plan, reading, fd)
                cpu += time.process_time() - began
                speeds.append(gbps(size, seconds))
                request_times.extend(times)
                _validate(config, region, target, size, reading, path_name)
        finally:
            for worker in workers:
                worker.close()
    return Measured(speeds, request_times, cpu, warnings)


def _validate(config: StorageConfig, region: Region, target: str, size: int, reading: bool, path_name: str) -> None:
    if not config.validate:
        return
    wrong = first_wrong(region, size) if reading else file_first_wrong(target, size)
    if wrong is not None:
        what = "memory read from" if reading else "file written to"
        raise ValidationError(
            f"storage-{'read' if reading else 'write'} ({path_name}): the {what} {target} is wrong from byte "
            f"{wrong} on: the file was corrupted or does not hold rdmabench's pattern (create it with --size, "
            "or pass --no-validate)"
        )
