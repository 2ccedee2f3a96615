"""The window protocol, used by bw, bibw and every concurrent pattern: in each step every sender
streams window x passes messages to each of its targets through the window's buffers, timed from
its start to each target's acknowledgement.

Each step starts with an untimed handshake: a receiver pre-posts a window of receives (so no
message arrives unexpected) and sends READY to each of its sources. A sender starts a link's clock
when its READY is in and stops it when that link's ACK (sent once the step's last message has
landed) arrives. The native step (wire/native/hotloop_tagged.c, rb_round) streams: each end posts the next
message into a buffer as soon as the message before it in that buffer has completed, so `window`
messages stay in flight through all the passes, as ucx_perftest keeps its window full. The Python
step makes the passes one after the other, each a window with its own READY and ACK (the interpreter
could not refill a window at line rate anyway); both move the same bytes per step.

Validation: every pass carries the same payload in a buffer (written once per step, untimed), so
what is checked after the step is each buffer's last message, in full, against that step's pattern
(the previous step's pattern is still there if it did not land); the earlier passes' messages were
each completed by UCX with their full length. A step of one pass is the old drained window.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..wire.native import HotLoop, LinkEnd, memory_type
from ..wire.protoinfo import PathRows
from ..wire.ucx import Request
from .contract import ACK, DATA, READY, RoundEnd, RoundShape, Side, StepProtocol, state_of, tag
from .need import Need


class WindowProtocol(StepProtocol):
    name = "window"
    windowed = True
    streams = True  # a step streams window x Plan.passes messages through the window's buffers

    def need(self, spec: RoundShape, rank: int) -> Need:
        targets, sources = spec.ends(rank)
        window = spec.plan.window
        ends = [spec.end_need(link, link.src_mode, window, receiving=False) for link in targets]
        ends += [spec.end_need(link, link.dst_mode, window, receiving=True) for link in sources]
        return sum(ends, Need())

    def timed(self, end: RoundEnd) -> list[Side]:
        return end.targets

    def rows(self, end: RoundEnd, side: Side) -> PathRows:
        return end.tag_rows(side)

    def setup(self, end: RoundEnd) -> None:
        for side in end.targets:
            end.allocate(side, end.window, outgoing=True)
        for side in end.sources:
            end.allocate(side, end.window, outgoing=False)
        if end.native is not None:
            self._setup_native(end)
        else:
            self._setup_python(end)

    def fill(self, end: RoundEnd, index: int) -> None:
        end.fill_targets(index)

    def check(self, end: RoundEnd, index: int) -> None:
        end.check_sources(index)

    # --- Python ------------------------------------------------------------------------------

    def _setup_python(self, end: RoundEnd) -> None:
        make = end.transport.backend.tag
        me = end.rank
        end.state = _PythonWindow(
            data_out={id(s): [make(tag(DATA, me, k)) for k in range(end.slots(s))] for s in end.targets},
            data_in={id(s): [make(tag(DATA, s.peer, k)) for k in range(end.slots(s))] for s in end.sources},
            ready_out=make(tag(READY, me)),
            ack_out=make(tag(ACK, me)),
            ready_in=[make(tag(READY, s.peer)) for s in end.targets],
            ack_in=[make(tag(ACK, s.peer)) for s in end.targets],
            ready_bufs=[end.signal()[0] for _ in end.targets],
            ack_bufs=[end.signal()[0] for _ in end.targets],
            signal=end.signal()[0],
        )

    def python_step(self, end: RoundEnd, index: int) -> list[float]:
        totals = [0.0] * len(end.targets)
        for _ in range(end.passes):
            totals = [a + b for a, b in zip(totals, self._python_pass(end), strict=True)]
        return totals

    def _python_pass(self, end: RoundEnd) -> list[float]:
        transport, state, plan = end.transport, state_of(end, _PythonWindow), end.spec.plan
        signal, targets = state.signal, end.targets
        incoming = [s.carrier.recv(s.batch, state.data_in[id(s)]) for s in end.sources]  # type: ignore[union-attr]
        readies_sent = [transport.send(s.peer, signal, state.ready_out) for s in end.sources]
        acks = [transport.recv(buf, t) for buf, t in zip(state.ack_bufs, state.ack_in, strict=True)]
        readies = [transport.recv(buf, t) for buf, t in zip(state.ready_bufs, state.ready_in, strict=True)]
        started = [0.0] * len(targets)
        acked_at = [0.0] * len(targets)
        sends: list[list[Request]] = [[] for _ in targets]
        acks_sent: dict[int, Request] = {}
        landed = [0] * len(incoming)  # cursors: a poll checks one request per list, not the window

        def finished() -> bool:
            for position, side in enumerate(targets):
                if not started[position] and readies[position].completed:
                    started[position] = time.perf_counter()  # this link's clock: its receiver is ready
                    sends[position] = side.carrier.send(side.peer, side.batch, state.data_out[id(side)])  # type: ignore[union-attr]
                if started[position] and not acked_at[position] and acks[position].completed:
                    acked_at[position] = time.perf_counter()
            for position, requests in enumerate(incoming):
                if position in acks_sent:
                    continue
                at = landed[position]
                while at < len(requests) and requests[at].completed:
                    at += 1
                landed[position] = at
                if at == len(requests):
                    acks_sent[position] = transport.send(end.sources[position].peer, signal, state.ack_out)
            return (
                all(acked_at)
                and len(acks_sent) == len(incoming)
                and all(r.completed for r in acks_sent.values())
                and all(r.completed for r in readies_sent)
                and all(r.completed for requests in sends for r in requests)
            )

        what = f"a window of messages and its acknowledgement on {end.where}"
        transport.poll_until(finished, plan.timeout, what, end.peers)
        for requests in [*sends, acks, readies, readies_sent, list(acks_sent.values()), *incoming]:
            transport.check(requests, end.where)
        return [at - start for at, start in zip(acked_at, started, strict=True)]

    # --- native ------------------------------------------------------------------------------

    def _setup_native(self, end: RoundEnd) -> None:
        transport = end.transport
        me = end.rank
        keep: list[Any] = []  # the pointer arrays the link ends point into

        def link_end(side: Side, data: int, ready: int, ack: int) -> LinkEnd:
            pointers = HotLoop.addresses([buffer.address for buffer in side.buffers])
            keep.append(pointers)
            return LinkEnd(
                transport.endpoint_handle(side.peer),
                transport.local_pid(side.peer),
                len(side.buffers) * end.passes,
                len(side.buffers),
                memory_type(side.mode.ucx_memory),
                end.spec.size,
                pointers,
                data,
                ready,
                ack,
            )

        targets = [link_end(s, tag(DATA, me), tag(READY, s.peer), tag(ACK, s.peer)) for s in end.targets]
        sources = [link_end(s, tag(DATA, s.peer), tag(READY, me), tag(ACK, me)) for s in end.sources]
        scratch = np.zeros(16 * max(1, len(targets)), dtype=np.uint8)
        end.state = _NativeWindow(
            loop=end.hot_loop(),
            targets=HotLoop.link_ends(targets),
            sources=HotLoop.link_ends(sources),
            passes=end.passes,  # the link ends' counts above
            scratch=scratch,
            signal_at=end.signal()[1],
            keep=keep,
        )

    def native_step(self, end: RoundEnd, index: int) -> list[float]:
        state = state_of(end, _NativeWindow)
        if state.passes != end.passes:  # the first warm-up step may change them (plan.auto_passes)
            for ends, count in ((state.targets, len(end.targets)), (state.sources, len(end.sources))):
                for position in range(count):
                    ends[position].count = ends[position].slots * end.passes
            state.passes = end.passes
        return state.loop.round(
            state.targets,
            len(end.targets),
            state.sources,
            len(end.sources),
            state.signal_at,
            int(state.scratch.ctypes.data),
        )


@dataclass
class _PythonWindow:
    """What a window end stepped in Python keeps between steps: the UCX tags of its messages and
    handshakes, and the handshakes' buffers."""

    data_out: dict[int, list[Any]]  # per target side (by id): a tag per message slot
    data_in: dict[int, list[Any]]  # per source side (by id)
    ready_out: Any
    ack_out: Any
    ready_in: list[Any]  # per target: its receiver's READY tag
    ack_in: list[Any]
    ready_bufs: list[Any]
    ack_bufs: list[Any]
    signal: Any  # the buffer this end's READY and ACK go out of


@dataclass
class _NativeWindow:
    """What a window end stepped by the native loop keeps between steps."""

    loop: HotLoop
    targets: Any  # the native loop's LinkEnd array for the targets
    sources: Any
    passes: int  # the passes the link ends' counts hold
    scratch: np.ndarray
    signal_at: int
    keep: list[Any]  # the arrays the link ends point into


WINDOW = WindowProtocol()
