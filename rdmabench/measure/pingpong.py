"""The ping-pong protocol, used by lat: Plan.passes round trips per step, one after the other, timed
on the link's src from the first ping to the last pong's arrival (half the mean round trip is the
latency). Each step starts with an untimed READY from the echoing side, sent once its first ping
receive is posted. Each round trip carries the step's payload; the last one is checked."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..wire.native import HotLoop, LatEnd, memory_type
from ..wire.protoinfo import PathRows
from .contract import DATA, READY, RoundEnd, RoundShape, Side, StepProtocol, round_trip_need, state_of, tag
from .need import Need


class PingPongProtocol(StepProtocol):
    name = "ping-pong"
    windowed = False
    streams = True  # a step is Plan.passes round trips in a row

    def need(self, spec: RoundShape, rank: int) -> Need:
        return round_trip_need(spec, rank)

    def timed(self, end: RoundEnd) -> list[Side]:
        return end.targets

    def rows(self, end: RoundEnd, side: Side) -> PathRows:
        return end.tag_rows(side)

    def setup(self, end: RoundEnd) -> None:
        # The pinging end (src) keeps its link in `targets`, the echoing end in `sources`; each has
        # one outgoing and one incoming buffer, in its own memory.
        halves: dict[int, tuple[Side, Side]] = {}
        for side in end.targets + end.sources:
            outgoing, incoming = _half(side), _half(side)
            end.allocate(outgoing, 1, outgoing=True)
            end.allocate(incoming, 1, outgoing=False)
            halves[id(side)] = (outgoing, incoming)
        me, make = end.rank, end.transport.backend.tag
        side = (end.targets + end.sources)[0]
        pinging = bool(end.targets)
        tags = (
            (tag(DATA, me), tag(DATA, side.peer), tag(READY, side.peer))
            if pinging
            else (tag(DATA, me), tag(DATA, side.peer), tag(READY, me))
        )
        # A staged end cuts the message into chunks: a UCX tag per chunk, as the window protocol does.
        slots = end.slots(side)
        signal, signal_at = end.signal()
        signal_in, signal_in_at = end.signal()
        native = end.native is not None
        end.state = _PingPong(
            halves=halves,
            tags=tags,
            out_tags=[make(tag(DATA, me, k)) for k in range(slots)],
            in_tags=[make(tag(DATA, side.peer, k)) for k in range(slots)],
            ready_tag=make(tags[2]),
            signal=signal,
            signal_at=signal_at,
            signal_in=signal_in,
            signal_in_at=signal_in_at,
            loop=end.hot_loop() if native else None,
            endpoint=end.transport.endpoint_handle(side.peer) if native else 0,
        )

    def fill(self, end: RoundEnd, index: int) -> None:
        halves = state_of(end, _PingPong).halves
        for side in end.targets + end.sources:
            outgoing, _ = halves[id(side)]
            end.fill(outgoing, outgoing.buffers, index)

    def check(self, end: RoundEnd, index: int) -> None:
        halves = state_of(end, _PingPong).halves
        for side in end.targets + end.sources:
            _, incoming = halves[id(side)]
            end.check(incoming, incoming.buffers, index)

    def python_step(self, end: RoundEnd, index: int) -> list[float]:
        times = [self._python_round_trip(end) for _ in range(end.passes)]
        return [sum(t[0] for t in times)] if end.targets else []

    def _python_round_trip(self, end: RoundEnd) -> list[float]:
        state, transport, timeout = state_of(end, _PingPong), end.transport, end.spec.plan.timeout
        side = (end.targets + end.sources)[0]
        outgoing, incoming = state.halves[id(side)]
        data_out, data_in, ready = state.out_tags, state.in_tags, state.ready_tag
        if end.targets:
            pong = incoming.carrier.recv(incoming.batch, data_in)  # type: ignore[union-attr]
            transport.wait(
                [transport.recv(state.signal_in, ready)], timeout, f"the peer's READY on {end.where}", side.peer
            )
            start = time.perf_counter()
            sent = outgoing.carrier.send(side.peer, outgoing.batch, data_out)  # type: ignore[union-attr]
            transport.wait(sent + pong, timeout, f"a ping-pong round trip on {end.where}", side.peer)
            return [time.perf_counter() - start]
        ping = incoming.carrier.recv(incoming.batch, data_in)  # type: ignore[union-attr]
        transport.wait(
            [transport.send(side.peer, state.signal, ready)], timeout, f"sending READY on {end.where}", side.peer
        )
        transport.wait(ping, timeout, f"a ping on {end.where}", side.peer)
        sent = outgoing.carrier.send(side.peer, outgoing.batch, data_out)  # type: ignore[union-attr]
        transport.wait(sent, timeout, f"a pong on {end.where}", side.peer)
        return []

    def native_step(self, end: RoundEnd, index: int) -> list[float]:
        state = state_of(end, _PingPong)
        loop = state.loop
        if loop is None:
            raise TypeError(f"{end.where}: a native ping-pong step on an end set up without the native loop")
        side = (end.targets + end.sources)[0]
        outgoing, incoming = state.halves[id(side)]
        out_at, in_at = outgoing.buffers[0].address, incoming.buffers[0].address
        memory = memory_type(side.mode.ucx_memory)
        pid = end.transport.local_pid(side.peer)
        lat = LatEnd(state.endpoint, pid, out_at, in_at, end.spec.size, memory, state.tags)
        if end.targets:
            return [loop.ping(lat, state.signal_in_at, end.passes)]
        loop.pong(lat, state.signal_at, end.passes)
        return []


@dataclass
class _PingPong:
    """What a ping-pong end keeps between steps: its two halves per link, the message and READY tags,
    the handshake buffers and, stepped natively, the loop and the peer's endpoint."""

    halves: dict[int, tuple[Side, Side]]  # per side (by id): (outgoing, incoming)
    tags: tuple[int, int, int]  # (data out, data in, READY) as the native loop takes them
    out_tags: list[Any]  # UCX tags, a chunk each
    in_tags: list[Any]
    ready_tag: Any
    signal: Any  # the buffer READY goes out of, and its address
    signal_at: int
    signal_in: Any  # the buffer READY comes into, and its address
    signal_in_at: int
    loop: HotLoop | None  # None: stepped in Python
    endpoint: int  # the peer's UCX endpoint, for the native loop (0: stepped in Python)


def _half(side: Side) -> Side:
    """One direction of a ping-pong end (its own buffer and pattern)."""
    return Side(side.link, side.peer, side.mode)


PINGPONG = PingPongProtocol()
