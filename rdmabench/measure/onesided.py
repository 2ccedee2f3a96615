"""One-sided step protocols (put, get and their latencies): UCP remote memory access in the native loop.

A link's passive end (dst for a put, src for a get) lends its buffers: it maps them with UCX
(ucp_mem_map) and sends their addresses and packed remote keys to the active end over MPI when the
round is set up. Each step the passive end says READY once its memory holds what the step needs; the
active end starts its clock, posts a window of puts (then a flush of the endpoint: UCX's remote
completion) or gets, stops the clock when the flush or the last get completes, and says DONE.
Payloads are written by src and checked by dst outside the clock, as for the tagged tests.

The put latency is a ping-pong of puts, each noticed by polling the last byte it writes (as
ucx_perftest's put latency), so it needs memory the CPU can read: pageable, pinned or mapped. The
get latency is the time of one get (a full round trip, as OSU and ucx_perftest report it).
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TransportError
from ..memory.buffers import Buffer, word_capacity
from ..memory.payload import Pattern
from ..modes import MemoryMode
from ..wire import protoinfo
from ..wire.mpi import receive
from ..wire.native import RMA_GET, RMA_PUT, HotLoop, Registrations, RmaLinkEnd, memory_type
from .contract import ACK, READY, RoundEnd, RoundShape, Side, StepProtocol, round_trip_need, state_of, tag
from .need import Need

_TAG_KEYS = 11  # MPI tag of a round's remote keys
OPERATIONS = {RMA_PUT: protoinfo.RMA_PUT, RMA_GET: protoinfo.RMA_GET}
# The CPU polls the last byte of a put latency's message: memory it can read while UCX writes it.


def refuse_staged(mode: MemoryMode) -> str | None:
    """Why a one-sided test cannot use `mode`, or None. Staged modes hand UCX pinned chunks that a
    copy engine fills step by step; a peer cannot address them, so there is nothing to put into."""
    if mode.staged:
        return "remote memory access needs the message's own memory mapped for UCX; use device or pinned"
    return None


def refuse_unpollable(mode: MemoryMode) -> str | None:
    if not mode.record.pollable:
        return (
            "the put latency polls the last byte from the CPU: use pageable, pinned, mapped or ucx memory "
            "(get-lat measures device memory)"
        )
    return None


def lend_and_borrow(
    end: RoundEnd,
    regs: Registrations,
    lent: list[tuple[Side, list[Any]]],
    borrowing: list[Side],
    length: int | None = None,
    clock: dict[str, float] | None = None,
) -> dict[int, Any]:
    """Send each passive side's (addresses, keys) to its peer; returns, per borrowing side, the
    peer's addresses and unpacked keys. Every send is posted before any receive: no rank waits on a
    peer that waits on it. Each buffer is lent for `length` bytes (default: the round's size).
    `clock` gets what the keys cost a borrowing end: `register_s`, the seconds its peer took to map
    the memory and pack its keys (the peer's clock), and `keys_s`, its own wait for them and their
    unpacking (the peer's mapping included). `regs`: this rank's registrations (native_loop)."""
    comm = end.comm
    memory_of = {id(side): memory_type(side.mode.ucx_memory) for side, _ in lent}
    sends = []
    for side, buffers in lent:
        began = time.perf_counter()
        keys = [regs.lend(b.address, length or end.spec.size, memory_of[id(side)]) for b in buffers]
        mapped = time.perf_counter() - began
        sends.append(comm.isend(([b.address for b in buffers], keys, mapped), dest=side.peer, tag=_TAG_KEYS))
    borrowed: dict[int, Any] = {}
    for side in borrowing:
        began = time.perf_counter()
        addresses, keys, mapped = receive(comm, side.peer, _TAG_KEYS)
        endpoint = end.transport.endpoint_handle(side.peer)
        rkeys = [regs.borrow(endpoint, key) for key in keys]
        borrowed[id(side)] = ((ctypes.c_uint64 * len(addresses))(*addresses), HotLoop.addresses(rkeys))
        if clock is not None:
            clock["register_s"] = clock.get("register_s", 0.0) + mapped
            clock["keys_s"] = clock.get("keys_s", 0.0) + time.perf_counter() - began
    for request in sends:
        request.wait()
    return borrowed


def rma_link_end(
    end: RoundEnd,
    side: Side,
    buffers: list[Buffer],
    signals: tuple[int, int],
    keep: list[Any],
    remote: Any = None,
    rkeys: Any = None,
) -> RmaLinkEnd:
    """rb_rma_link for `side`: its local `buffers`, its (READY, DONE) tags, and for the initiating
    end the peer's buffer addresses and unpacked keys. The ctypes arrays it points to go to `keep`
    (the protocol's state holds them as long as the link)."""
    local = HotLoop.addresses([buffer.address for buffer in buffers])
    keep.extend([local, remote, rkeys])
    ready, done = signals
    return RmaLinkEnd(
        end.transport.endpoint_handle(side.peer), end.transport.local_pid(side.peer), len(buffers),
        memory_type(side.mode.ucx_memory), end.spec.size, local, remote, rkeys, ready, done,
    )  # fmt: skip


def ucx_buffer(regs: Registrations, nbytes: int) -> Buffer:
    """Host memory UCX allocates and lends (MemoryMode.UCX), as a buffer; UCX frees it at release."""
    capacity = word_capacity(nbytes)
    address, _key = regs.allocate(capacity)
    array = np.ctypeslib.as_array((ctypes.c_uint8 * capacity).from_address(address))
    array[:] = 0
    return Buffer(array, MemoryMode.UCX, None)


def native_loop(end: RoundEnd) -> tuple[HotLoop, Registrations]:
    """The native loop of a one-sided round and this rank's registrations (the memory it lends and
    borrows), released with the round; also the memory UCX allocates (MemoryMode.UCX)."""
    if end.native is None:
        raise TransportError(f"one-sided tests run in the native loop, which this rank could not load ({end.where})")
    transport = end.transport
    regs = Registrations(end.native, transport.backend.context_handle())
    end.on_release(regs.release)
    end.ucx_allocator = lambda nbytes: ucx_buffer(regs, nbytes)
    return end.hot_loop(), regs


class OneSidedProtocol(StepProtocol):
    """put or get of a window of messages per step (windowed), or of one (the get latency)."""

    def __init__(self, operation: int, windowed: bool = True):
        self.operation = operation
        self.windowed = windowed
        self.streams = False
        self.name = ("put" if operation == RMA_PUT else "get") + ("" if windowed else "-once")

    def need(self, spec: RoundShape, rank: int) -> Need:
        targets, sources = spec.ends(rank)
        count = spec.plan.window if self.windowed else 1
        ends = [spec.end_need(link, link.src_mode, count, receiving=False) for link in targets]
        ends += [spec.end_need(link, link.dst_mode, count, receiving=True) for link in sources]
        return sum(ends, Need())

    def _count(self, end: RoundEnd) -> int:
        return end.window if self.windowed else 1

    def active(self, end: RoundEnd) -> list[Side]:
        """The sides this rank drives and times: it sends on them (put) or receives on them (get)."""
        return end.targets if self.operation == RMA_PUT else end.sources

    def spans_transfers(self, end: RoundEnd) -> bool:
        # The end that owns the memory waits in its step from READY to DONE, across the active end's
        # gaps between steps: only the active end's share of a shared half is the duty.
        return bool(self.active(end))

    def passive(self, end: RoundEnd) -> list[Side]:
        return end.sources if self.operation == RMA_PUT else end.targets

    timed = active

    def rows(self, end: RoundEnd, side: Side) -> protoinfo.PathRows:
        return end.rma_rows(side, OPERATIONS[self.operation])

    def setup(self, end: RoundEnd) -> None:
        count = self._count(end)
        loop, regs = native_loop(end)  # first: it provides the memory UCX allocates (MemoryMode.UCX)
        for side in end.targets:
            end.allocate(side, count, outgoing=True)
        for side in end.sources:
            end.allocate(side, count, outgoing=False)
        active, passive = self.active(end), self.passive(end)
        borrowed = lend_and_borrow(end, regs, [(side, side.buffers) for side in passive], active)
        me, keep = end.rank, list[Any]()
        actives = [
            rma_link_end(end, s, s.buffers, (tag(READY, s.peer), tag(ACK, me)), keep, *borrowed[id(s)]) for s in active
        ]
        passives = [rma_link_end(end, s, s.buffers, (tag(READY, me), tag(ACK, s.peer)), keep) for s in passive]
        end.state = _OneSided(
            loop=loop,
            active=HotLoop.rma_link_ends(actives),
            passive=HotLoop.rma_link_ends(passives),
            counts=(len(active), len(passive)),
            scratch=np.zeros(8 * max(1, len(active) + len(passive)), dtype=np.uint8),
            signal_at=end.signal()[1],
            keep=keep,
        )

    def fill(self, end: RoundEnd, index: int) -> None:
        end.fill_targets(index)

    def check(self, end: RoundEnd, index: int) -> None:
        end.check_sources(index)

    def native_step(self, end: RoundEnd, index: int) -> list[float]:
        state = state_of(end, _OneSided)
        nactive, npassive = state.counts
        return state.loop.rma_round(
            self.operation,
            state.active,
            nactive,
            state.passive,
            npassive,
            state.signal_at,
            int(state.scratch.ctypes.data),
        )

    python_step = native_step  # native_loop() refused a rank without the native loop


def _marker(index: int) -> int:
    """The last byte of step `index`'s put-latency message: never 0, the value a poll waits for."""
    return index % 255 + 1


class PutPingPongProtocol(StepProtocol):
    """The put latency: src puts into dst's buffer, dst notices the last byte and puts back."""

    name = "put-ping-pong"
    windowed = False
    streams = False

    def need(self, spec: RoundShape, rank: int) -> Need:
        return round_trip_need(spec, rank)

    def timed(self, end: RoundEnd) -> list[Side]:
        return end.targets

    def rows(self, end: RoundEnd, side: Side) -> protoinfo.PathRows:
        return end.rma_rows(side, protoinfo.RMA_PUT)

    def setup(self, end: RoundEnd) -> None:
        side = (end.targets + end.sources)[0]
        outgoing, incoming = Side(side.link, side.peer, side.mode), Side(side.link, side.peer, side.mode)
        loop, regs = native_loop(end)
        end.allocate(outgoing, 1, outgoing=True)
        end.allocate(incoming, 1, outgoing=False)
        size = end.spec.size
        # The last byte is the step's marker: the payload pattern covers the bytes before it.
        for half, sender in ((outgoing, end.rank), (incoming, side.peer)):
            if half.pattern is not None:
                half.pattern = Pattern(half.buffers[0].xp, size - 1, sender)
        borrowed = lend_and_borrow(end, regs, [(side, incoming.buffers)], [side])
        pinging = bool(end.targets)
        ready = tag(READY, side.peer) if pinging else tag(READY, end.rank)
        keep: list[Any] = []
        link = rma_link_end(end, side, outgoing.buffers, (ready, 0), keep, *borrowed[id(side)])
        end.state = _PutPingPong(
            loop=loop,
            halves=(outgoing, incoming),
            link=HotLoop.rma_link_ends([link]),
            flag=incoming.buffers[0].address + size - 1,
            signal_at=end.signal()[1],
            pinging=pinging,
            keep=keep,
        )

    def fill(self, end: RoundEnd, index: int) -> None:
        outgoing, incoming = state_of(end, _PutPingPong).halves
        end.fill(outgoing, outgoing.buffers, index)
        size = end.spec.size
        outgoing.buffers[0].array[size - 1] = _marker(index)
        incoming.buffers[0].array[size - 1] = 0

    def check(self, end: RoundEnd, index: int) -> None:
        _, incoming = state_of(end, _PutPingPong).halves
        end.check(incoming, incoming.buffers, index)

    def native_step(self, end: RoundEnd, index: int) -> list[float]:
        state = state_of(end, _PutPingPong)
        seconds = state.loop.put_pingpong(state.pinging, state.link, state.flag, _marker(index), state.signal_at)
        return [seconds] if state.pinging else []

    python_step = native_step


@dataclass
class _OneSided:
    """What a put or get end keeps between steps: the native link ends it drives (active) and lends
    (passive), their counts, and what the loop polls and signals through."""

    loop: HotLoop
    active: Any  # the native loop's RmaLinkEnd array
    passive: Any
    counts: tuple[int, int]  # (active, passive) link ends
    scratch: np.ndarray
    signal_at: int
    keep: list[Any]  # the arrays the link ends point into


@dataclass
class _PutPingPong:
    """What a put-latency end keeps between steps: its two halves, its one native link end, and the
    address of the byte it polls."""

    loop: HotLoop
    halves: tuple[Side, Side]  # (outgoing, incoming)
    link: Any  # the native loop's RmaLinkEnd array of one
    flag: int  # the incoming message's last byte: the step's marker lands there
    signal_at: int
    pinging: bool
    keep: list[Any]


PUT = OneSidedProtocol(RMA_PUT)
GET = OneSidedProtocol(RMA_GET)
GET_ONCE = OneSidedProtocol(RMA_GET, windowed=False)
PUT_PINGPONG = PutPingPongProtocol()
