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
from .beside import Beside, load_on_this_gpu
from .contract import Link, Side, StepProtocol, StepRecord
from .need import Need, message_end
from .pairs import BesideDetails, InStep, Pairs, gathered, pairs_in_a_row
from .plan import Plan, calibrated_iterations, passes_for
from .registry import TestKind
from .slow import Slow
from .steps import Steps


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
    # Beside compute: every GPU's load figures and the link's alone halves (pairs.gathered).
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
# (Tags 14-17: a round's pairs beside compute, measure/pairs.py.)


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
        # Beside compute, this rank's load through the round's pairs; in the partition's SMs where the
        # protocol's posting kernel took a green context's (blocksteps: SmBudget.green).
        pairs = Pairs(spec.beside, end.load, end.partitioned) if spec.beside is not None else None
        samples, iterations, cpu, wire, alone = _sample(end, comm, step, len(timed), pairs)
        rows = [protocol.rows(end, side) for side in timed]
        kept = [protocol.record(end, side) for side in timed]
        besides: list[BesideDetails | None] = [None] * len(timed)
        if pairs is not None:
            besides = list(gathered(pairs, _in_step(end, comm, iterations, len(timed)), end.rank, alone))
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


def _sample(
    end: EngineEnd,
    comm: Any,
    step: Callable[[EngineEnd, int], list[float]],
    links: int,
    pairs: Pairs | None = None,
) -> tuple[list[list[list[float]]], int, float, counters.Window, list[list[list[float]]]]:
    """Warm up, agree on the steps per sample, then time `samples` x `iterations` steps. Returns
    samples[sample][link] = that link's step times, the iterations per sample, this process's
    CPU seconds in the sampled steps (fills and checks left out: the cost of moving the bytes), and
    its link counters read around them (its GPU's NVLinks only where both ends of one of its links
    are in GPU memory: NVML's reads are not free). Beside compute (`pairs`), each sample is a pair
    (pairs.pairs_in_a_row): the steps alone, taken first and returned last, and as many as the load's
    shared window takes."""
    plan = end.spec.plan
    steps = Steps(end, step)
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
    alone: list[list[list[float]]] = []
    if pairs is None:
        samples = [steps.sample(iterations, links) for _ in range(plan.samples)]
    else:
        alone, samples = pairs_in_a_row(pairs, steps, _in_step(end, comm, iterations, links), timed)
    return samples, iterations, steps.cpu, counters.Window(before, counters.read(nvlink)), alone


def _in_step(end: EngineEnd, comm: Any, iterations: int, links: int) -> InStep:
    spec = end.spec
    return InStep(comm, spec.ranks, spec.plan.samples, iterations, links, spec.protocol.spans_transfers(end))


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
