"""What every rank checks before any transfer: the schedule, GPUs for GPU modes, memory (what each
rank's rounds allocate, from their protocols' `need`, against what its host and GPU have), the
native loop when it was demanded, and the results file. Each returns this rank's reason the run
cannot start, or None; run.py gathers them and rank 0 prints the first."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import RdmabenchError
from ..hardware import budget, nics
from ..hardware.budget import Amount
from ..hardware.gpu import gpu_unavailable_reason
from ..hardware.memlock import mlock_problem
from ..measure.need import Need
from ..measure.round import RoundSpec
from ..results.files import document
from ..units import format_size
from ..wire.mpi import World
from .config import RunConfig
from .rounds import round_spec, size_plan
from .schedule import Link, roles


def preflight(world: World, config: RunConfig, rounds: list[list[Link]]) -> str | None:
    """This rank's reason the run cannot start, or None. Collective: every rank calls it."""
    # What each rank will hold, known to every rank: memory is judged for all the ranks sharing it.
    needs: list[RankNeed] = world.comm.allgather(rank_need(config, rounds, world.rank, world.spans_hosts))
    sends, receives = roles(rounds, world.rank)
    kind = config.kind
    if kind.both_ways:
        sends = receives = sends or receives  # each rank of a pair sends and receives
    my_modes = ([config.memory.src_mode] if sends else []) + ([config.memory.dst_mode] if receives else [])
    needing = [mode.value for mode in my_modes if mode.needs_gpu]
    if needing and world.me.gpu is None:
        return f"{needing[0]} mode on rank {world.rank} ({world.me.host}): {gpu_unavailable_reason()}"
    problem = _memory_problem(world, config, needs)
    if problem:
        return problem
    if config.what.nics:
        if os.environ.get("UCX_NET_DEVICES"):
            return f"--nics and UCX_NET_DEVICES={os.environ['UCX_NET_DEVICES']} both choose the devices: give one"
        problem = nics.wanted_problem(config.what.nics)
        if problem:
            return f"{problem} (rank {world.rank}, {world.me.host})"
    if config.steps.engine == "native":
        from ..wire import native

        built = native.load()
        if built.library is None:
            return f"--engine native on rank {world.rank} ({world.me.host}): {built.reason}"
    if world.rank == 0 and config.out.output is not None:
        try:
            document.check_writable(config.out.output, config.out.force)
        except RdmabenchError as exc:
            return str(exc)
    return None


@dataclass(frozen=True)
class RankNeed:
    """What one rank will hold at most, and the message (or block) size at which it holds it."""

    need: Need
    size: int


def rank_need(config: RunConfig, rounds: list[list[Link]], rank: int, spans_hosts: bool = False) -> RankNeed:
    """Everything `rank` allocates at most over the run, from its protocol's `need` in each of its
    rounds: rounds of a size run one after another (the largest counts), their buffers are kept
    between rounds of a size and freed at the next; pinned buffers stay in the pool for later sizes."""
    kind = config.kind
    step = kind.protocols(config.shape)[0]
    mine = [scheduled for scheduled in rounds if any(rank in link for link in scheduled)]
    most, most_size, pinned_kept = Need(), max(config.steps.sizes), 0
    for size in config.steps.sizes:
        # The protocol's companions first (block lists: each transfer as one contiguous message), then its own.
        phases = [(found.size, found.protocol) for found in step.companions(size, ())] + [(size, step)]
        at_size = Need()
        for nbytes, protocol in phases:
            plan = size_plan(config, protocol, nbytes, spans_hosts)
            counted: set[tuple[object, ...]] = set()
            for scheduled in mine:
                spec = round_spec(config, kind, scheduled, nbytes, plan, protocol)
                alike = _alike(spec, rank)
                if alike not in counted:  # all-pairs: a round per peer, each needing the same
                    counted.add(alike)
                    at_size = at_size.most(spec.protocol.need(spec, rank))
        pinned_kept += at_size.pinned
        if at_size.host > most.host or at_size.device > most.device:
            most_size = size
        most = most.most(at_size)
    if config.memory.max_pinned is not None:  # the pool gives back smaller buffers to stay under the cap
        pinned_kept = max(most.pinned, min(pinned_kept, config.memory.max_pinned))
    beside = config.beside.first if config.beside else None  # its buffers stay on the rank's GPU all run
    load = beside.device_bytes() if beside is not None and mine else 0
    return RankNeed(Need(most.host - most.pinned + pinned_kept, pinned_kept, most.device + load), most_size)


def _alike(spec: RoundSpec, rank: int) -> tuple[object, ...]:
    """What `rank`'s need in a round depends on: the round's breadth and window, and the memory of
    each link it sends or receives on."""
    sends, receives = spec.ends(rank)
    return (
        len(spec.links), spec.plan.window,
        tuple((link.src_mode, link.dst_mode) for link in sends), tuple((link.src_mode, link.dst_mode) for link in receives),
    )  # fmt: skip


def _amount(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{max(1, round(nbytes / 2**20))} MiB"


def _memory_problem(world: World, config: RunConfig, needs: list[RankNeed]) -> str | None:
    """Refuse a run that cannot fit, before any rank allocates: an out-of-memory kill mid-run helps
    nobody. Host memory is judged for every rank of this host together, GPU memory for every rank
    of this GPU together."""
    mine = needs[world.rank]
    if config.memory.max_pinned is not None and mine.need.pinned > config.memory.max_pinned:
        return (
            f"rank {world.rank} ({world.me.host}) needs {_amount(mine.need.pinned)} of pinned memory at "
            f"{format_size(mine.size)}, more than --max-pinned {format_size(config.memory.max_pinned)}"
        )
    if mine.need.pinned and world.me.gpu is None:
        problem = mlock_problem(mine.need.pinned)
        if problem:
            return f"rank {world.rank} ({world.me.host}): {problem}"
    here = [info.rank for info in world.ranks if info.host == world.me.host]
    problem = _too_much(world, config, needs, here, "host", budget.memory_available())
    if problem or not mine.need.device or world.me.gpu is None:
        return problem
    gpu = world.me.gpu.pci_bus_id
    sharing = [i.rank for i in world.ranks if i.host == world.me.host and i.gpu and i.gpu.pci_bus_id == gpu]
    return _too_much(world, config, needs, sharing, f"GPU {world.me.gpu.index}", _gpu_memory_free())


def _too_much(
    world: World, config: RunConfig, needs: list[RankNeed], ranks: list[int], where: str, available: Amount | None
) -> str | None:
    """One line when the ranks sharing `where` (host or GPU memory) need more than is available."""
    kind = "host" if where == "host" else "device"
    total = sum(getattr(needs[rank].need, kind) for rank in ranks)
    if available is None or total <= 0.9 * available.value:  # a tenth spare: the ranks themselves, the kernel
        return None
    biggest = max(ranks, key=lambda rank: getattr(needs[rank].need, kind))
    what = "host memory" if kind == "host" else f"memory on {where}"
    at = f"blocks of {format_size(needs[biggest].size)}" if config.shape.lists else format_size(needs[biggest].size)
    return (
        f"--test {config.what.test} needs {_amount(getattr(needs[biggest].need, kind))} of {what} per rank (rank {biggest} "
        f"at {at}) and {_amount(total)} for the {len(ranks)} rank(s) on {world.me.host}, more than 90% of the "
        f"{_amount(available.value)} available ({available.source}); use smaller --sizes, --window"
        + (" or --blocks" if config.shape.lists else "")
    )


def _gpu_memory_free() -> Amount | None:
    from ..hardware.gpu import import_cupy

    cupy = import_cupy()
    if cupy is None:
        return None
    free, _total = cupy.cuda.runtime.memGetInfo()
    return Amount(int(free), "free on the GPU")
