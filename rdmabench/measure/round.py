"""The round engine: every measurement is a round of links run at the same time, timed by one
sampling driver. A pair is a round of one link (two for a test that goes both ways); a ring, an
incast or a concurrent all-pairs round is a round of many.

Every rank of a round runs `run_round` with the same RoundSpec. It allocates its ends, warms up,
agrees with the round's other ranks on the steps per sample (one calibration rule: the wall-clock
time of a step, checks included, see plan.calibrated_iterations), then times `samples` x
`iterations` steps. Payloads are written before each step and checked after it, outside the clock;
the planted faults (faults.py) and the deadline-and-liveness watch apply to every round alike. The
step itself belongs to the test's protocol: native (C) where the loop is built and no end stages
through pinned buffers, else Python; every measurement says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TransportError, ValidationError
from ..hardware import counters
from ..memory.buffers import Buffer, allocate, synchronize
from ..memory.payload import Pattern, message_key
from ..modes import MemoryMode
from ..units import format_size
from ..wire.mpi import agree_max
from ..wire.native import HotLoop
from ..wire.protoinfo import PathRows, ProtoRow, RmaRows, TagRows
from ..wire.staging import Carrier, Staging, StagingRecord, make_carrier, pieces, staging_buffers, wire_chunk
from ..wire.ucx import Transport
from . import faults
from .beside import RETAKES, Beside, Pairs, drifting, load_on_this_gpu
from .besiderecord import GpuRecord
from .contract import Link, Side, StepProtocol, StepRecord
from .need import Need, message_end
from .plan import Plan, calibrated_iterations, passes_for
from .registry import TestKind
from .slow import SLOW_S, Slow


@dataclass(frozen=True)
class RoundSpec:
    """One round, the same on every rank: which links, what size, how much to run."""

    kind: TestKind
    links: tuple[Link, ...]
    size: int
    plan: Plan
    validate: bool
    staging: Staging
    # The step protocol that moves the bytes (TestKind.protocols: a block list's, say); None: the test's own.
    step: StepProtocol | None = None
    one_buffer: bool = False  # every message of a window in one buffer per end (--one-buffer)
    beside: Beside | None = None  # a model's compute on every rank's GPU during the sampled steps (--beside)

    @property
    def protocol(self) -> StepProtocol:
        return self.step or self.kind.protocol

    @property
    def ranks(self) -> list[int]:
        return sorted({r for link in self.links for r in (link.src, link.dst)})

    @property
    def staged(self) -> bool:
        return any(link.src_mode.staged or link.dst_mode.staged for link in self.links)

    def distinct_buffers(self, slots: int) -> int:
        """How many separate buffers `slots` messages of a window fill at one link end: one under
        --one-buffer (ucx_perftest's layout: every slot is the same memory), else one per slot."""
        return min(1, slots) if self.one_buffer else slots

    def chunk(self, link: Link) -> int:
        return wire_chunk(link.src_mode, link.dst_mode, self.size, self.staging)

    def ends(self, rank: int) -> tuple[list[Link], list[Link]]:
        """The links `rank` sends on (targets) and receives on (sources) in this round."""
        return [link for link in self.links if link.src == rank], [link for link in self.links if link.dst == rank]

    def end_need(self, link: Link, mode: MemoryMode, count: int, receiving: bool) -> Need:
        """What one end of `link`, in `mode`, holds for `count` messages a step (RoundEnd.allocate's
        buffers, pattern and carrier; a receiving end checks): measure.need.message_end with this
        round's settings."""
        return message_end(
            mode, self.size, count, self.distinct_buffers(count), receiving if self.validate else None,
            self.chunk(link), staging_buffers(mode, self.staging),
        )  # fmt: skip

    def describe(self) -> str:
        """How errors name the round: its link when it joins two ranks, else its size."""
        first = self.links[0]
        if len({frozenset((link.src, link.dst)) for link in self.links}) == 1:
            return (
                f"rank {first.src} -> rank {first.dst} ({self.kind.name}, {format_size(self.size)}, "
                f"{first.src_mode.value} -> {first.dst_mode.value})"
            )
        return f"a round of {len(self.links)} concurrent links ({self.kind.name}, {format_size(self.size)})"


@dataclass(frozen=True)
class BesideDetails:
    """Beside compute, what a timed link's rank gathered: every GPU's record of its load, by rank, and
    the link's step times in each pair's alone half."""

    compute: dict[int, GpuRecord]
    alone_step_times: list[list[float]]


@dataclass
class LinkMeasurement:
    """What the rank that timed a link measured: its step times, sample by sample, and how."""

    link: Link
    step_times: list[list[float]]
    iterations: int
    window: int
    warmup: int
    engine: str  # "native" or "python": who timed the steps
    memory_type_declared: bool  # UCX was told the buffers' memory type (native) or looked it up
    sender_rows: PathRows | None = None  # the timing rank's UCX report rows
    record: StepRecord | None = None  # what the protocol keeps beyond step times (StepProtocol.record)
    passes: int = 1  # windows (round trips) per step
    # The timing rank's link counters read before and after the sampled steps (the wire check).
    wire: counters.Window = field(default_factory=lambda: counters.Window({}, {}))
    timer: int = -1  # the rank that timed the link (its src, or a get's dst)
    # Beside compute: every GPU's load figures and the link's alone halves (round._beside_details).
    beside: BesideDetails | None = None

    @property
    def per_step(self) -> int:
        """Messages (round trips) per step: what a figure divides the step times by."""
        return self.window * self.passes

    @property
    def messages_per_sample(self) -> int:
        return self.iterations * self.per_step

    def sampled_bytes(self, size: int) -> int:
        """Every byte the link moved in its sampled steps (a shared half beside compute runs as many
        steps as its window takes, so each sample's own count)."""
        return size * self.per_step * sum(len(times) for times in self.step_times)


class EngineEnd:
    """This rank's part of a round, as the engine builds it (contract.RoundEnd): the links it sends on
    (targets) and receives on (sources)."""

    def __init__(self, transport: Transport, spec: RoundSpec, have_gpu: bool, native: Any, comm: Any = None):
        self.transport = transport
        self.comm = comm  # MPI, for what a protocol exchanges when the round is set up (remote keys)
        self.spec = spec
        self.have_gpu = have_gpu
        self.rank = transport.rank
        self.targets = [Side(link, link.dst, link.src_mode) for link in spec.links if link.src == self.rank]
        self.sources = [Side(link, link.src, link.dst_mode) for link in spec.links if link.dst == self.rank]
        self.window = spec.plan.window
        self.passes = spec.plan.passes if spec.protocol.streams else 1
        self.where = spec.describe()
        self.native = native if native is not None and not spec.staged else None
        self.state: object = None  # what the protocol keeps between steps (its own record: contract.state_of)
        self.load: Any = None  # the compute load on this rank's GPU (--beside)
        self.partitioned = False  # the protocol took a green context's SMs from the load
        self.alone_steps: list[list[list[float]]] = []  # beside compute: per timed link, each pair's alone half
        self._allocated: list[Buffer] = []
        self._carriers: list[Carrier] = []
        self._signals: list[Any] = []
        self._releasers: list[Callable[[], None]] = []
        # Memory UCX allocates (MemoryMode.UCX): a one-sided protocol provides it before allocating.
        self.ucx_allocator: Callable[[int], Buffer] | None = None
        first = spec.links[0]
        self.corrupt_at = faults.corrupt_step() if self.rank == first.src else None
        self.stall_at = faults.stall_step() if self.rank == first.dst else None

    @property
    def peers(self) -> list[int]:
        return sorted({side.peer for side in self.targets + self.sources})

    def allocate(self, side: Side, count: int, outgoing: bool) -> None:
        """`count` message buffers for `side`, their batch for UCX and the payload pattern."""
        buffers = self._take(side, self.spec.size, count)
        carrier = make_carrier(self.transport, side.mode, self.spec.chunk(side.link), self.spec.staging)
        self._carriers.append(carrier)
        side.carrier = carrier
        side.batch.extend(carrier.prepare(buffers, self.spec.size))
        if self.spec.validate:
            sender = self.rank if outgoing else side.peer
            side.pattern = Pattern(buffers[0].xp, self.spec.size, sender)

    def pool(self, side: Side, nbytes: int) -> Buffer:
        """One buffer of `nbytes` for `side` (a pool of block slots), given back when the round ends."""
        return self._take(side, nbytes, 1)[0]

    def _take(self, side: Side, nbytes: int, count: int) -> list[Buffer]:
        """`count` buffers of `nbytes` in `side`'s memory, kept on `side` and released with the round."""
        distinct = [self._allocate(side.mode, nbytes) for _ in range(self.spec.distinct_buffers(count))]
        buffers = [distinct[slot % len(distinct)] for slot in range(count)]  # --one-buffer: all the one
        # Zeroing a device buffer (new or kept from the last round) is queued on CuPy's stream; it
        # must land before UCX copies a message in on its own streams, or it wipes the message (seen
        # with 64 ranks sharing one GPU, where queued work waits for a time slice).
        synchronize(side.mode)
        self._allocated.extend(dict.fromkeys(buffers))  # released once each
        side.buffers.extend(buffers)
        return buffers

    def _allocate(self, mode: MemoryMode, nbytes: int) -> Buffer:
        if mode.ucx_allocated:
            if self.ucx_allocator is None:
                raise TransportError(f"{mode.value} memory is allocated by a one-sided protocol ({self.where})")
            return self.ucx_allocator(nbytes)
        return allocate(mode, nbytes, self.have_gpu)

    def hot_loop(self) -> HotLoop:
        """The native loop's steps on this rank's worker (for a round that runs natively)."""
        transport = self.transport
        return HotLoop(
            self.native, transport.backend.worker_handle(), self.spec.plan.timeout, self.where,
            transport.local_pid_ranks(),
        )  # fmt: skip

    def signal(self) -> tuple[Any, int]:
        """An 8-byte handshake buffer (READY, ACK): as a UCX message, and its address for C."""
        array = np.zeros(8, dtype=np.uint8)
        self._signals.append(array)
        return self.transport.backend.wrap(array), int(array.ctypes.data)

    def slots(self, side: Side) -> int:
        """UCX messages per step on a link: its window, each message cut into its staged chunks."""
        return self.window * pieces(self.spec.size, self.spec.chunk(side.link))

    def fill(self, side: Side, buffers: list[Buffer], index: int) -> None:
        if side.pattern is None:
            return
        for slot, buffer in enumerate(buffers):
            side.pattern.fill(buffer, message_key(index, slot, side.link.dst))
        if self.corrupt_at == index and side.link == self.spec.links[0]:
            buffers[0].array[self.spec.size // 2] ^= 0xFF
        synchronize(side.mode)

    def fill_targets(self, index: int) -> None:
        """Write step `index`'s payloads into the buffers of every link this rank sends on."""
        for side in self.targets:
            self.fill(side, side.buffers, index)

    def check_sources(self, index: int) -> None:
        """Check what every link this rank receives on brought in step `index`."""
        for side in self.sources:
            self.check(side, side.buffers, index)

    def check(self, side: Side, buffers: list[Buffer], index: int) -> None:
        """Raise ValidationError at the first message whose bytes are not what the sender wrote."""
        if side.pattern is None:
            return
        keys = [message_key(index, slot, side.link.dst) for slot in range(len(buffers))]
        for slot, wrong in enumerate(side.pattern.wrong_bytes_each(buffers, keys)):
            if wrong:
                raise ValidationError(
                    f"rank {self.rank} received {wrong} wrong byte(s) of {side.pattern.nbytes} in message {slot} "
                    f"of step {index} from rank {side.peer} on {self.where}"
                )

    def on_release(self, release: Callable[[], None]) -> None:
        """Run `release` when the round ends, before the buffers are given back (memory a protocol
        registered with UCX is unregistered while it still exists)."""
        self._releasers.append(release)

    def tag_rows(self, side: Side) -> TagRows:
        """What this rank's UCX reported for the tagged messages of the link it sends on."""
        link = side.link
        return self.transport.path_rows(
            side.peer, side.mode.ucx_memory, link.dst_mode.ucx_memory, self.spec.chunk(link)
        )

    def rma_rows(self, side: Side, operation: str) -> RmaRows:
        """What this rank's UCX reported for one-sided `operation` (protoinfo.RMA_PUT or RMA_GET) on the
        link it initiates (its own end's memory, and the peer's)."""
        link = side.link
        peer_mode = link.dst_mode if link.src == self.rank else link.src_mode
        return self.transport.rma_rows(side.peer, operation, side.mode.ucx_memory, peer_mode.ucx_memory, self.spec.size)

    def release(self) -> None:
        for release in reversed(self._releasers):
            release()
        self._releasers.clear()
        for carrier in self._carriers:
            carrier.release()
        for buffer in self._allocated:
            buffer.release()
        self._carriers.clear()
        self._allocated.clear()


_TAG_CALIBRATE = 10  # MPI tag of the round's agreement on steps per sample
_TAG_PASSES = 12  # and on passes per step
_TAG_START = 13  # and on when a concurrent round's samples start
_TAG_PAIR = 15  # and on when a pair's shared half starts (every GPU's load running)
_TAG_WINDOW = 16  # and on whether every GPU's shared window has ended (the transfers stop)
_TAG_RETAKE = 17  # and on whether a pair is taken again (the worst drift of its GPUs' alone windows)
# Beside compute, the steps between the ranks' agreements that a window is on: about this long, sized
# from the shared half's own steps (an agreement waits on MPI; at 2 ms a batch, taken from the steps
# alone, the posting rank spent 7-17% of the shared half outside a step on 2 x H100).
WINDOW_BATCH_SECONDS = 0.01


def run_round(
    transport: Transport, comm: Any, spec: RoundSpec, have_gpu: bool, native: Any
) -> tuple[list[LinkMeasurement], float]:
    """Run `spec` on this rank (a rank of the round); returns the measurements of the links it timed
    and the CPU seconds this process spent in the sampled steps."""
    end = EngineEnd(transport, spec, have_gpu, native, comm)
    protocol = spec.protocol
    try:
        for peer in end.peers:
            transport.endpoint(peer)
        if spec.beside is not None:  # before the protocol: an SM partition's transfer stream is the load's
            end.load = load_on_this_gpu(spec.beside)
        with Slow(end.where, end.rank == spec.links[0].src).during("setting up the round"):
            protocol.setup(end)
        step = protocol.native_step if end.native is not None else protocol.python_step
        timed = protocol.timed(end)
        pairs = _pairs(end) if spec.beside is not None else None
        samples, iterations, cpu, wire = _sample(end, comm, step, len(timed), pairs)
        rows = [protocol.rows(end, side) for side in timed]
        kept = [protocol.record(end, side) for side in timed]
        besides = _beside_details(end, comm, pairs, len(timed)) if pairs is not None else [None] * len(timed)
    finally:
        end.release()
    engine = "native" if end.native is not None else "python"
    measured = []
    # A rank times the links the protocol gives it: those it sends on (a ping too), a get's receiver.
    for position, side in enumerate(timed):
        measured.append(
            LinkMeasurement(
                side.link,
                [per_link[position] for per_link in samples],
                iterations,
                spec.plan.window,
                spec.plan.warmup,
                engine,
                end.native is not None,
                rows[position],
                kept[position],
                end.passes,
                wire,
                end.rank,
                besides[position],
            )
        )
    return measured, cpu


def fetch_rows(transport: Transport, spec: RoundSpec) -> dict[tuple[int, int], ProtoRow | None]:
    """The receiver's half of each incoming link's UCX report (its rendezvous-fetch rows)."""
    rank = transport.rank
    return {
        (link.src, link.dst): transport.path_rows(
            link.src, link.dst_mode.ucx_memory, link.src_mode.ucx_memory, spec.chunk(link)
        ).fetch
        for link in spec.links
        if link.dst == rank
    }


def _pairs(end: EngineEnd) -> Pairs:
    """This rank's compute load through the round's pairs; in the partition's SMs where the
    protocol's posting kernel took a green context's (blocksteps: SmBudget.green)."""
    spec = end.spec
    assert spec.beside is not None
    return Pairs(spec.beside, end.load, end.partitioned)


_TAG_BESIDE = 14  # MPI tag of the round's exchange of what each GPU's load measured


def _beside_details(end: EngineEnd, comm: Any, pairs: Pairs, links: int) -> list[BesideDetails | None]:
    """Each timed link's compute figures: this rank's GPU and the round's other ranks' (pair rounds)."""
    mine = pairs.summary()
    gpus = {end.rank: mine}
    for peer in sorted(set(end.spec.ranks) - {end.rank}):
        gpus[peer] = comm.sendrecv(mine, dest=peer, sendtag=_TAG_BESIDE, source=peer, recvtag=_TAG_BESIDE)
    return [BesideDetails(gpus, end.alone_steps.pop(0)) for _ in range(links)]


class _Steps:
    """A round's steps on this rank, numbered as they run: each filled, timed and checked, with the
    CPU seconds of the timed parts (fills and checks left out: the cost of moving the bytes)."""

    def __init__(self, end: EngineEnd, step: Callable[[EngineEnd, int], list[float]]):
        self.end, self.step = end, step
        self.index = 0
        self.cpu = 0.0
        self.slow = Slow(end.where, end.rank == end.spec.links[0].src)  # a step of seconds is said

    def one(self) -> list[float]:
        end, protocol = self.end, self.end.spec.protocol
        if end.stall_at == self.index:
            faults.stall_forever()
        wall = time.perf_counter()
        protocol.fill(end, self.index)
        began = time.process_time()
        times = self.step(end, self.index)
        self.cpu += time.process_time() - began
        protocol.check(end, self.index)
        self.index += 1
        if (wall := time.perf_counter() - wall) >= SLOW_S:  # said on stderr: a long step is never silent
            self.slow.after(f"step {self.index} (its fill, transfers and check)", wall)
        return times

    def warm_up(self, steps: int) -> tuple[float, float]:
        """Untimed steps; the wall and timed seconds of the last."""
        wall = timed = 0.0
        for _ in range(steps):
            began = time.perf_counter()
            times = self.one()
            wall, timed = time.perf_counter() - began, max(times, default=0.0)
        return wall, timed

    def shared(
        self, over: Callable[[], bool], agree: Callable[[bool, float], tuple[bool, int]], links: int, batch: int
    ) -> Any:
        """A pair's shared half: steps back to back, `batch` at a time (then as many as the ranks agree from
        the last batch's steps), until `agree(over(), seconds a step)` says every GPU's window has ended. Its payload is written before the first step and checked after the last
        (the steps between move the same bytes: writing and checking each would leave the window
        without a transfer for most of its time). Per link its step times, and the duty: the share of
        the half's wall time spent in steps, less what a step spent ahead with no transfer in flight
        (StepProtocol.idle: a path's arming of the next step, where it outlasts this one's copies)."""
        end, protocol = self.end, self.end.spec.protocol
        per_link: list[list[float]] = [[] for _ in range(links)]
        protocol.fill(end, self.index)
        protocol.streak(end, True)
        busy, began, cpu = 0.0, time.perf_counter(), time.process_time()
        first = True
        while True:
            batch_began = time.perf_counter()
            for _ in range(batch):
                if end.stall_at == self.index:
                    faults.stall_forever()
                if not first:  # what the step needs ahead (a path's arming of its copies): no transfer in flight
                    protocol.ahead(end, self.index)
                first = False
                started = time.perf_counter()
                times = self.step(end, self.index)
                busy += time.perf_counter() - started - protocol.idle(end)
                for position, seconds in enumerate(times):
                    per_link[position].append(seconds)
            on, batch = agree(over(), (time.perf_counter() - batch_began) / batch)
            if not on:
                break
        span = time.perf_counter() - began
        self.cpu += time.process_time() - cpu
        protocol.streak(end, False)
        protocol.check(end, self.index)
        self.index += 1
        return per_link, busy / span if span > 0 else None

    def sample(self, iterations: int, links: int) -> list[list[float]]:
        """`iterations` timed steps: per link, its step times."""
        per_link: list[list[float]] = [[] for _ in range(links)]
        for _ in range(iterations):
            for position, seconds in enumerate(self.one()):
                per_link[position].append(seconds)
        return per_link


def _sample(
    end: EngineEnd,
    comm: Any,
    step: Callable[[EngineEnd, int], list[float]],
    links: int,
    pairs: Pairs | None = None,
) -> tuple[list[list[list[float]]], int, float, counters.Window]:
    """Warm up, agree on the steps per sample, then time `samples` x `iterations` steps. Returns
    samples[sample][link] = that link's step times, the iterations per sample, this process's
    CPU seconds in the sampled steps (fills and checks left out: the cost of moving the bytes), and
    its link counters read around them (its GPU's NVLinks only where both ends of one of its links
    are in GPU memory: NVML's reads are not free). Beside compute (`pairs`), each sample is a pair
    (_pairs_in_a_row): the steps alone, taken first, and as many as the load's shared window takes
    (the alone halves go to end.alone_steps)."""
    plan = end.spec.plan
    steps = _Steps(end, step)
    if plan.auto_passes and end.passes > 1:
        # The warm-up makes one pass a step (the first steps pay for connections and caches); the
        # last one's transfer time (not its fills and checks, which passes do not repeat), the
        # slowest rank's, says how many passes a step may make here.
        end.passes = 1
        _, one_pass = steps.warm_up(max(1, plan.warmup))
        (slowest,) = agree_max(comm, end.spec.ranks, (one_pass,), _TAG_PASSES)
        end.passes = passes_for(slowest, plan)
        wall, timed = steps.warm_up(1)  # a step as it will be timed, for the steps per sample
    else:
        wall, timed = steps.warm_up(plan.warmup)
    steps.cpu = 0.0  # the warm-up's steps are not measured
    wall, timed = _agree_to_start(end, comm, wall, timed)
    iterations = calibrated_iterations(wall, plan, timed)
    nvlink = any(side.link.src_mode.on_device and side.link.dst_mode.on_device for side in end.targets + end.sources)
    before = counters.read(nvlink)
    if pairs is None:
        samples = [steps.sample(iterations, links) for _ in range(plan.samples)]
    else:
        batch = max(1, round(WINDOW_BATCH_SECONDS / timed)) if timed > 0 else 1
        samples = _pairs_in_a_row(end, comm, steps, pairs, (iterations, links, batch))
    return samples, iterations, steps.cpu, counters.Window(before, counters.read(nvlink))


def _pairs_in_a_row(
    end: EngineEnd, comm: Any, steps: _Steps, pairs: Pairs, sizes: tuple[int, int, int]
) -> list[list[list[float]]]:
    """Beside compute: every pair's transfer alone first, on an idle GPU (end.alone_steps, per timed
    link, which run_round files), then the load settled and the pairs' shared halves in a row, the load
    running on between them (its clocks never see an idle GPU); the shared halves' step times."""
    iterations, links, _ = sizes
    alone = [steps.sample(iterations, links) for _ in range(end.spec.plan.samples)]
    end.alone_steps = [[per_link[position] for per_link in alone] for position in range(links)]
    try:
        pairs.settle()  # the load's clocks, before the first pair
        shared = [_pair(end, comm, steps, pairs, sizes) for _ in alone]
    except BaseException:
        pairs.finish(quiet=True)  # the error on its way is the one to say
        raise
    pairs.finish()
    return shared


def _pair(end: EngineEnd, comm: Any, steps: _Steps, pairs: Pairs, sizes: tuple[int, int, int]) -> list[list[float]]:
    """One pair's shared half, taken again (at most RETAKES times) while the worst of its GPUs' alone
    windows drift more than DRIFT_LIMIT, then kept (marked where it still drifts): the load alone,
    then the steps back to back through the load's shared window (every rank's: the transfers stop
    when every GPU's window has ended), then the load alone again."""
    _, links, batch = sizes
    ranks = end.spec.ranks

    def agree(over: bool, step_seconds: float) -> tuple[bool, int]:
        """Whether some GPU's window is still on, and the next batch's steps: the fewest any rank asks
        for (every rank runs the same steps: a step is collective)."""
        wanted = max(1, round(WINDOW_BATCH_SECONDS / step_seconds)) if step_seconds > 0 else 1
        on, fewest = agree_max(comm, ranks, (0.0 if over else 1.0, -float(wanted)), _TAG_WINDOW)
        return on > 0, max(1, int(-fewest))

    for retake in range(RETAKES + 1):
        pairs.begin()  # the load alone on the whole GPU, then on (where the shared half runs it)
        agree_max(comm, ranks, (0.0,), _TAG_PAIR)  # every rank's load runs
        pairs.open()
        shared, duty = steps.shared(pairs.over, agree, links, batch)  # on an error, the caller stops the load
        drift = pairs.close(duty if end.spec.protocol.spans_transfers(end) else None)  # None: the other end's
        (worst,) = agree_max(comm, ranks, (abs(drift or 0.0),), _TAG_RETAKE)
        if not drifting(worst) or retake == RETAKES:
            pairs.keep(retake, drifting(worst))
            return shared
        pairs.discard()
    raise AssertionError("unreachable: the last take is kept")


def _agree_to_start(end: EngineEnd, comm: Any, wall: float, timed: float) -> tuple[float, float]:
    """The round's ranks agree on the slowest step's wall and timed seconds (what sizes a sample),
    unless the steps are given (--iterations, or an earlier round's); a concurrent round's ranks
    still agree on when to start, so that each link is timed under the load of all and the counters
    they share (wire check) see one span of traffic."""
    if end.spec.plan.iterations is None:
        wall, timed = agree_max(comm, end.spec.ranks, (wall, timed), _TAG_CALIBRATE)
    elif len(end.spec.links) > 1:
        agree_max(comm, end.spec.ranks, (0.0,), _TAG_START)
    return wall, timed


def staging_record(spec: RoundSpec, link: Link) -> StagingRecord | None:
    """How a staged link cut its messages and how many pinned buffers each staged end used."""
    if not (link.src_mode.staged or link.dst_mode.staged):
        return None
    chunk = spec.chunk(link)
    return {
        "chunk_bytes": chunk,
        "chunks_per_message": pieces(spec.size, chunk),
        "src_buffers": staging_buffers(link.src_mode, spec.staging),
        "dst_buffers": staging_buffers(link.dst_mode, spec.staging),
        "pinned_buffer_bytes": chunk,
    }
