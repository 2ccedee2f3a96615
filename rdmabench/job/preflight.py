"""What every rank checks before any transfer: the schedule, GPUs for GPU modes, memory for the
largest size, the native loop when it was demanded, and the results file. Each returns this rank's
reason the run cannot start, or None; run.py gathers them and rank 0 prints the first."""

from __future__ import annotations

import os

from ..errors import RdmabenchError
from ..hardware import nics
from ..hardware.gpu import gpu_unavailable_reason
from ..hardware.memlock import mlock_problem
from ..measure import registry
from ..memory.buffers import word_capacity
from ..modes import MemoryMode
from ..results import document
from ..units import format_size
from ..wire.mpi import World
from ..wire.staging import staging_buffers
from .config import RunConfig
from .rounds import round_links, round_spec, size_plan
from .schedule import Link, roles


def preflight(world: World, config: RunConfig, rounds: list[list[Link]]) -> str | None:
    """This rank's reason the run cannot start, or None."""
    sends, receives = roles(rounds, world.rank)
    kind = registry.get(config.test)
    if kind.both_ways:
        sends = receives = sends or receives  # each rank of a pair sends and receives
    my_modes = ([config.src_mode] if sends else []) + ([config.dst_mode] if receives else [])
    needing = [mode.value for mode in my_modes if mode.needs_gpu]
    if needing and world.me.gpu is None:
        return f"{needing[0]} mode on rank {world.rank} ({world.me.host}): {gpu_unavailable_reason()}"
    if my_modes:
        problem = _memory_problem(world, config, rounds, my_modes)
        if problem:
            return problem
    if config.nics:
        if os.environ.get("UCX_NET_DEVICES"):
            return f"--nics and UCX_NET_DEVICES={os.environ['UCX_NET_DEVICES']} both choose the devices: give one"
        problem = nics.wanted_problem(config.nics)
        if problem:
            return f"{problem} (rank {world.rank}, {world.me.host})"
    if config.engine == "native":
        from ..wire import native

        built = native.load()
        if built.library is None:
            return f"--engine native on rank {world.rank} ({world.me.host}): {built.reason}"
    if world.rank == 0 and config.output is not None:
        try:
            document.check_writable(config.output, config.force)
        except RdmabenchError as exc:
            return str(exc)
    return None


def _busiest_round(world: World, config: RunConfig, rounds: list[list[Link]], size: int) -> tuple[int, int, int]:
    """(buffers, staging carriers, window) of the round in which this rank holds the most buffers."""
    kind = registry.get(config.test)
    plan = size_plan(config, kind, size, spans_hosts=world.spans_hosts)
    best = (0, 0, plan.window)
    for scheduled in rounds:
        if not any(world.rank in link for link in scheduled):
            continue  # a rank holds buffers only in its own rounds
        spec = round_spec(config, kind, scheduled, size, plan)
        sends = sum(1 for link in round_links(config, kind, scheduled) if link.src == world.rank)
        receives = sum(1 for link in round_links(config, kind, scheduled) if link.dst == world.rank)
        buffers = spec.protocol.buffers(spec.distinct_buffers(spec.plan.window), sends, receives)
        carriers = buffers if not spec.protocol.windowed else sends + receives
        if buffers > best[0]:
            best = (buffers, carriers, spec.plan.window)
    return best


def _memory_problem(world: World, config: RunConfig, rounds: list[list[Link]], modes: list[MemoryMode]) -> str | None:
    """Refuse sizes that cannot fit, before allocating: an out-of-memory kill mid-run helps nobody."""
    largest = max(config.sizes)
    buffers, carriers, _window = _busiest_round(world, config, rounds, largest)
    need = buffers * word_capacity(largest) + 2 * word_capacity(largest)  # + pattern and scratch
    pinned_need = buffers * word_capacity(largest) * sum(1 for mode in modes if mode.pinned_host)
    from ..wire.staging import wire_chunk

    chunk = wire_chunk(config.src_mode, config.dst_mode, largest, config.staging)
    for mode in modes:
        count = staging_buffers(mode, config.staging)  # pinned buffers per carrier
        if count is not None:
            pinned_need += count * word_capacity(chunk) * carriers
    if config.max_pinned is not None and pinned_need > config.max_pinned:
        return (
            f"rank {world.rank} ({world.me.host}) needs {format_size(pinned_need)} of pinned memory for "
            f"{format_size(largest)} x {buffers} buffers, more than --max-pinned {format_size(config.max_pinned)}"
        )
    for mode in modes:
        problem = _device_problem(world, need, largest, buffers) if mode.on_device else None
        if not mode.on_device:
            problem = _host_problem(world, mode, need, largest, buffers)
        if problem:
            return problem
    return None


def _device_problem(world: World, need: int, largest: int, buffers: int) -> str | None:
    from ..hardware.gpu import import_cupy

    cupy = import_cupy()
    assert cupy is not None
    free, _total = cupy.cuda.runtime.memGetInfo()
    if need > free:
        return (
            f"rank {world.rank} ({world.me.host}) needs {format_size(need)} of GPU memory for "
            f"{format_size(largest)} x {buffers} buffers but {free / 2**30:.1f} GiB is free; "
            "use smaller --sizes or --window"
        )
    return None


def _host_problem(world: World, mode: MemoryMode, need: int, largest: int, buffers: int) -> str | None:
    if mode is MemoryMode.PINNED and world.me.gpu is None:
        problem = mlock_problem(buffers * word_capacity(largest))
        if problem:
            return f"rank {world.rank} ({world.me.host}): {problem}"
    available = host_memory_available()
    if available is not None and need * world.me.local_size > 0.9 * available:
        return (
            f"rank {world.rank} ({world.me.host}) would need {format_size(need)} of host memory per rank "
            f"for {format_size(largest)} x {buffers} buffers, more than the {available / 2**30:.1f} GiB "
            "available; use smaller --sizes or --window"
        )
    return None


def host_memory_available() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
