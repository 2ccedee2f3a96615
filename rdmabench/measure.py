"""The point-to-point tests: bw, bibw and lat between two ranks, each run by both ranks of the pair.

Every test is built the same way. Each timed step (a window of messages, or one round trip) is
preceded by an untimed handshake: the receiver posts its receives, then says READY. The timer runs
on the sender from the first send until the receiver's acknowledgement arrives, so a figure is never
a sender-side estimate. Between steps, outside the timer, the sender writes a fresh pattern into
every message and the receiver checks every byte it got, so each transfer is validated without
timing the checks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import faults
from .errors import ConfigError, ValidationError
from .memory import Buffer, MemoryMode, allocate, synchronize
from .native import HotLoop
from .pattern import Pattern, message_key
from .staging import DEFAULT_STAGING, Carrier, Staging, make_carrier, pieces, staging_buffers, wire_chunk
from .stats import summarize
from .transport import Request, Transport, describe_path
from .units import format_size, gbps
from .world import exchange

TESTS = ("bw", "bibw", "lat")

# Tag layout: kind in the top byte, sender rank in the next three, message slot below.
_DATA, _READY, _ACK = 1, 2, 3
_TAG_ITERATIONS, _TAG_SAMPLES, _TAG_PATH = 7, 8, 9  # MPI tags of the pair's control messages
_MAX_ITERATIONS = 10_000_000
# The default window keeps at most this much in flight. Host memory gets a budget that stays within
# the CPU's caches: beyond it, a host-to-host figure measures DRAM, not the transport (and C tools,
# which resend one buffer, report the cached figure). 8 MiB, not 16: with fresh data every step, 4 MiB
# messages moved 1.5x (H200 node) to 1.8x (CI VM) faster two at a time than four at a time, and no
# size got slower. GPU memory has no such cliff, and a deep window hides the per-step handshake.
HOST_WINDOW_BUDGET = 8 << 20
DEVICE_WINDOW_BUDGET = 512 << 20


def tag(kind: int, sender: int, slot: int = 0) -> int:
    return (kind << 56) | (sender << 32) | slot


@dataclass(frozen=True)
class Plan:
    """How much to run for one size. `iterations` None means: calibrate from the warm-up so that
    one sample takes about `sample_time` seconds."""

    window: int
    iterations: int | None
    warmup: int
    samples: int
    sample_time: float
    timeout: float


def default_window(size: int, device_only: bool = False) -> int:
    budget = DEVICE_WINDOW_BUDGET if device_only else HOST_WINDOW_BUDGET
    return max(1, min(64, budget // size))


def default_warmup(test: str, size: int) -> int:
    if test == "lat":
        return 20 if size <= 65536 else 3
    return 2


def default_timeout(window_bytes: int) -> float:
    """Seconds a single step may take before it counts as stuck: generous, even at 50 MB/s."""
    return 60.0 + window_bytes / 50e6


def make_plan(
    test: str,
    size: int,
    device_only: bool,
    window: int | None,
    iterations: int | None,
    warmup: int | None,
    samples: int,
    sample_time: float,
    timeout: float | None,
) -> Plan:
    win = 1 if test == "lat" else (window or default_window(size, device_only))
    warm = default_warmup(test, size) if warmup is None else warmup
    if iterations is None:
        warm = max(warm, 1)  # the warm-up is what calibrates the iteration count
    return Plan(
        window=win,
        iterations=iterations,
        warmup=warm,
        samples=samples,
        sample_time=sample_time,
        timeout=timeout if timeout is not None else default_timeout(win * size),
    )


def calibrated_iterations(step_seconds: float, plan: Plan, timed_seconds: float | None = None) -> int:
    """Steps per sample so that a sample lasts about sample_time of wall clock (`step_seconds`, checks
    included). Where the timed part is a small share of a step (validation of large messages, the
    native loop's small ones), up to four times more steps, so that each sample still times at least
    a fifth of sample_time of transfers and one hiccup does not make a sample."""
    if plan.iterations is not None:
        return plan.iterations
    per_step = max(step_seconds, 1e-7)
    iterations = math.ceil(plan.sample_time / per_step)
    if timed_seconds is not None and timed_seconds > 0:
        enough_timed = math.ceil(plan.sample_time / 5 / timed_seconds)
        iterations = max(iterations, min(enough_timed, 4 * iterations))
    return max(1, min(_MAX_ITERATIONS, iterations))


@dataclass(frozen=True)
class Pair:
    test: str
    src: int
    dst: int
    src_mode: MemoryMode
    dst_mode: MemoryMode
    size: int
    validate: bool
    staging: Staging = DEFAULT_STAGING

    @property
    def wire_chunk(self) -> int:
        return wire_chunk(self.src_mode, self.dst_mode, self.size, self.staging)


class Side:
    """One rank's half of a pair measurement: its buffers, its peer and the handshake messages."""

    def __init__(self, transport: Transport, comm: Any, pair: Pair, plan: Plan, have_gpu: bool):
        self.transport = transport
        self.comm = comm
        self.pair = pair
        self.plan = plan
        self.rank = transport.rank
        self.is_src = self.rank == pair.src
        self.peer = pair.dst if self.is_src else pair.src
        self.mode = pair.src_mode if self.is_src else pair.dst_mode
        self.have_gpu = have_gpu
        self._buffers: list[Buffer] = []
        self._signal = np.zeros(8, dtype=np.uint8)
        self._signal_in = np.zeros(8, dtype=np.uint8)
        self._ack_in = np.zeros(8, dtype=np.uint8)
        self.signal = transport.backend.wrap(self._signal)
        self.signal_in = transport.backend.wrap(self._signal_in)
        self.ack_in = transport.backend.wrap(self._ack_in)
        self.corrupt_at = faults.corrupt_step()
        self.stall_at = None if self.is_src else faults.stall_step()
        make = transport.backend.tag
        # UCX tags made once: kind and sender in the high bits, the piece of the window in the low ones.
        slots = max(plan.window, 1) * pieces(pair.size, pair.wire_chunk)
        self._data_out = [make(tag(_DATA, self.rank, s)) for s in range(slots)]
        self._data_in = [make(tag(_DATA, self.peer, s)) for s in range(slots)]
        self._tags_out = {kind: make(tag(kind, self.rank)) for kind in (_READY, _ACK)}
        self._tags_in = {kind: make(tag(kind, self.peer)) for kind in (_READY, _ACK)}
        # Separate carriers for the two directions: a staged one owns its pinned buffers.
        self._carriers: dict[bool, Carrier] = {}
        self._post = transport.sender(self.peer)
        self._take = transport.receiver()

    def carrier(self, outgoing: bool) -> Carrier:
        carrier = self._carriers.get(outgoing)
        if carrier is None:
            carrier = make_carrier(self.transport, self.mode, self.pair.wire_chunk, self.pair.staging)
            self._carriers[outgoing] = carrier
        return carrier

    def hot_loop(self) -> HotLoop | None:
        """The native loop for this end, when the run has one and the link is not staged (staged
        pipelines interleave CUDA copies with the messages, in Python)."""
        library = self.transport.native
        if library is None or self.pair.src_mode.staged or self.pair.dst_mode.staged:
            return None
        backend = self.transport.backend
        endpoint = backend.endpoint_handle(self.transport.endpoint(self.peer))
        return HotLoop(
            library, backend.worker_handle(), endpoint, self.mode.ucx_memory, self.plan.timeout,
            self.transport.local_pid(self.peer), self.link_name(),
        )  # fmt: skip

    def buffers(self, count: int, outgoing: bool) -> tuple[list[Buffer], list[Any]]:
        """`count` message buffers and the batch that posts them all."""
        buffers = [allocate(self.mode, self.pair.size, self.have_gpu) for _ in range(count)]
        self._buffers.extend(buffers)
        return buffers, self.carrier(outgoing).prepare(buffers, self.pair.size)

    def pattern(self, sender: int) -> Pattern | None:
        if not self.pair.validate:
            return None
        xp = self._buffers[0].xp
        return Pattern(xp, self.pair.size, sender)

    def link_name(self) -> str:
        p = self.pair
        return (
            f"rank {p.src} -> rank {p.dst} ({p.test}, {format_size(p.size)}, {p.src_mode.value} -> {p.dst_mode.value})"
        )

    def wait(self, requests: list[Request], what: str) -> None:
        self.transport.wait(requests, self.plan.timeout, f"{what} on {self.link_name()}", self.peer)

    def send(self, message: Any, kind: int) -> Request:
        """A handshake message (READY, ACK)."""
        return self._post(message, self._tags_out[kind])

    def recv(self, message: Any, kind: int) -> Request:
        return self._take(message, self._tags_in[kind])

    def send_data(self, batch: list[Any]) -> list[Request]:
        """Post a window of messages (a batch from buffers(outgoing=True))."""
        return self._carriers[True].send(self.peer, batch, self._data_out)

    def recv_data(self, batch: list[Any]) -> list[Request]:
        return self._carriers[False].recv(batch, self._data_in)

    def fill(self, pattern: Pattern | None, buffers: list[Buffer], step: int) -> None:
        if pattern is None:
            return
        for slot, buffer in enumerate(buffers):
            pattern.fill(buffer, message_key(step, slot))
        if self.corrupt_at == step:
            buffers[0].array[self.pair.size // 2] ^= 0xFF
        synchronize(self.mode)

    def check(self, pattern: Pattern | None, buffers: list[Buffer], step: int) -> None:
        if pattern is not None:
            keys = [message_key(step, slot) for slot in range(len(buffers))]
            check_messages(pattern, buffers, keys, self.rank, self.peer, step, self.link_name())

    def agree_iterations(self, wall_seconds: float, timed_seconds: float) -> int:
        """The src rank calibrates; its peer follows, so both run the same number of steps."""
        if self.is_src:
            iterations = calibrated_iterations(wall_seconds, self.plan, timed_seconds)
            exchange(self.comm, iterations, self.peer, _TAG_ITERATIONS)
            return iterations
        return int(exchange(self.comm, None, self.peer, _TAG_ITERATIONS))

    def release(self) -> None:
        for carrier in self._carriers.values():
            carrier.release()
        self._carriers.clear()
        for buffer in self._buffers:
            buffer.release()
        self._buffers.clear()


def check_messages(
    pattern: Pattern, buffers: list[Buffer], keys: list[int], receiver: int, sender: int, step: int, where: str
) -> None:
    """Raise ValidationError at the first message of a step whose bytes are not what `sender` wrote."""
    for slot, (buffer, key) in enumerate(zip(buffers, keys, strict=True)):
        wrong = pattern.wrong_bytes(buffer, key)
        if wrong:
            raise ValidationError(
                f"rank {receiver} received {wrong} wrong byte(s) of {pattern.nbytes} in message {slot} "
                f"of step {step} from rank {sender} on {where}"
            )


def _run_steps(side: Side, step: Callable[[int], float]) -> tuple[list[list[float]], int]:
    """Warm up, calibrate, then run `samples` x `iterations` steps; returns each sample's step times."""
    plan = side.plan
    if side.stall_at is not None:
        planted, stall_at = step, side.stall_at

        def step(index: int) -> float:
            if index == stall_at:
                faults.stall_forever()
            return planted(index)

    # Calibrate on the wall-clock time of a step, checks included: with the native loop a small
    # message's timed part is a sliver of the step, and a sample must still end in about sample_time.
    wall = timed = 0.0
    for index in range(plan.warmup):
        began = time.perf_counter()
        timed = step(index)
        wall = time.perf_counter() - began
    iterations = side.agree_iterations(wall, timed)
    index = plan.warmup
    samples: list[list[float]] = []
    for _ in range(plan.samples):
        times = []
        for _ in range(iterations):
            times.append(step(index))
            index += 1
        samples.append(times)
    return samples, iterations


def _bw(side: Side) -> dict[str, Any] | None:
    window, size = side.plan.window, side.pair.size
    buffers, messages = side.buffers(window, outgoing=side.is_src)
    loop = side.hot_loop()
    if loop is not None:
        addresses = loop.addresses([buffer.address for buffer in buffers])
        if side.is_src:
            pattern = side.pattern(side.rank)
            tags = (tag(_DATA, side.rank), tag(_READY, side.peer), tag(_ACK, side.peer))
            ready_in, ack_in = side._signal_in.ctypes.data, side._ack_in.ctypes.data

            def step(index: int) -> float:
                side.fill(pattern, buffers, index)
                return loop.bw_send(addresses, window, size, tags, ready_in, ack_in)

        else:
            pattern = side.pattern(side.peer)
            tags = (tag(_DATA, side.peer), tag(_READY, side.rank), tag(_ACK, side.rank))
            signal = side._signal.ctypes.data

            def step(index: int) -> float:
                loop.bw_recv(addresses, window, size, tags, signal)
                side.check(pattern, buffers, index)
                return 0.0

    elif side.is_src:
        pattern = side.pattern(side.rank)

        def step(index: int) -> float:
            side.fill(pattern, buffers, index)
            ack = side.recv(side.ack_in, _ACK)
            side.wait([side.recv(side.signal_in, _READY)], "the receiver's READY")
            start = time.perf_counter()
            requests = side.send_data(messages)
            requests.append(ack)
            side.wait(requests, "a window of messages and its acknowledgement")
            return time.perf_counter() - start

    else:
        pattern = side.pattern(side.peer)

        def step(index: int) -> float:
            requests = side.recv_data(messages)
            requests.append(side.send(side.signal, _READY))
            side.wait(requests, "a window of messages")
            side.wait([side.send(side.signal, _ACK)], "sending the acknowledgement")
            side.check(pattern, buffers, index)
            return 0.0

    samples, iterations = _run_steps(side, step)
    if not side.is_src:
        return None
    moved = side.pair.size * window * iterations
    values = [gbps(moved, sum(times)) for times in samples]
    entry = _link_entry(side.pair, side.plan, iterations, values, "bandwidth_gbps", "GB/s", scope="unidirectional")
    return _engine_fields(entry, loop)


def _bibw(side: Side) -> dict[str, Any] | None:
    window = side.plan.window
    send_buffers, send_messages = side.buffers(window, outgoing=True)
    recv_buffers, recv_messages = side.buffers(window, outgoing=False)
    own_pattern = side.pattern(side.rank)
    peer_pattern = side.pattern(side.peer)
    loop = side.hot_loop()
    if loop is not None:
        size = side.pair.size
        send_at = loop.addresses([buffer.address for buffer in send_buffers])
        recv_at = loop.addresses([buffer.address for buffer in recv_buffers])
        me, peer = side.rank, side.peer
        tags = loop.tag_array(
            (tag(_DATA, me), tag(_DATA, peer), tag(_READY, me), tag(_READY, peer), tag(_ACK, me), tag(_ACK, peer))
        )
        signal, ready_in, ack_in = side._signal.ctypes.data, side._signal_in.ctypes.data, side._ack_in.ctypes.data

        def step(index: int) -> float:
            side.fill(own_pattern, send_buffers, index)
            elapsed = loop.bibw(send_at, recv_at, window, size, tags, signal, ready_in, ack_in)
            side.check(peer_pattern, recv_buffers, index)
            return elapsed

    else:

        def step(index: int) -> float:
            side.fill(own_pattern, send_buffers, index)
            incoming = side.recv_data(recv_messages)
            ack = side.recv(side.ack_in, _ACK)
            ready = side.recv(side.signal_in, _READY)
            side.wait([ready, side.send(side.signal, _READY)], "the peer's READY")
            start = time.perf_counter()
            outgoing = side.send_data(send_messages)
            acked: Request | None = None
            acked_at = 0.0

            # Acknowledge the peer's window as soon as it has landed, and stop this direction's clock
            # when the peer's acknowledgement of ours arrives: each direction is timed on its own.
            def finished() -> bool:
                nonlocal acked, acked_at
                if acked is None and all(request.completed for request in incoming):
                    acked = side.send(side.signal, _ACK)
                if not acked_at and ack.completed:
                    acked_at = time.perf_counter()
                return acked is not None and acked.completed and bool(acked_at) and all(r.completed for r in outgoing)

            side.transport.poll_until(finished, side.plan.timeout, f"both windows on {side.link_name()}", side.peer)
            assert acked is not None
            side.transport.check(incoming + outgoing + [ack, acked], f"bidirectional window on {side.link_name()}")
            elapsed = acked_at - start
            side.check(peer_pattern, recv_buffers, index)
            return elapsed

    samples, iterations = _run_steps(side, step)
    peer_samples = exchange(side.comm, samples, side.peer, _TAG_SAMPLES)
    moved = side.pair.size * window * iterations
    values = [gbps(moved, sum(times)) for times in samples]
    # Aggregate: both directions' bytes over the time the slower direction took, step by step.
    aggregate = [
        gbps(2 * moved, sum(max(a, b) for a, b in zip(mine, theirs, strict=True)))
        for mine, theirs in zip(samples, peer_samples, strict=True)
    ]
    entry = _link_entry(side.pair, side.plan, iterations, values, "bandwidth_gbps", "GB/s", scope="per-direction")
    entry["src_rank"], entry["dst_rank"] = side.rank, side.peer
    entry["src_mode"] = side.mode.value
    entry["dst_mode"] = (side.pair.dst_mode if side.is_src else side.pair.src_mode).value
    entry["aggregate_gbps"] = summarize(aggregate)["median"]
    entry["aggregate_samples"] = aggregate
    return _engine_fields(entry, loop)


def _lat(side: Side) -> dict[str, Any] | None:
    out_buf, out_msg = side.buffers(1, outgoing=True)
    in_buf, in_msg = side.buffers(1, outgoing=False)
    own_pattern = side.pattern(side.rank)
    peer_pattern = side.pattern(side.peer)
    size = side.pair.size
    loop = side.hot_loop()

    if loop is not None:
        out_at, in_at = out_buf[0].address, in_buf[0].address
        if side.is_src:
            tags = (tag(_DATA, side.rank), tag(_DATA, side.peer), tag(_READY, side.peer))
            ready_in = side._signal_in.ctypes.data

            def step(index: int) -> float:
                side.fill(own_pattern, out_buf, index)
                elapsed = loop.ping(out_at, in_at, size, tags, ready_in)
                side.check(peer_pattern, in_buf, index)
                return elapsed

        else:
            tags = (tag(_DATA, side.rank), tag(_DATA, side.peer), tag(_READY, side.rank))
            signal = side._signal.ctypes.data

            def step(index: int) -> float:
                side.fill(own_pattern, out_buf, index)
                loop.pong(out_at, in_at, size, tags, signal)
                side.check(peer_pattern, in_buf, index)
                return 0.0

    elif side.is_src:

        def step(index: int) -> float:
            side.fill(own_pattern, out_buf, index)
            pong = side.recv_data(in_msg)
            side.wait([side.recv(side.signal_in, _READY)], "the peer's READY")
            start = time.perf_counter()
            side.wait(side.send_data(out_msg) + pong, "a ping-pong round trip")
            elapsed = time.perf_counter() - start
            side.check(peer_pattern, in_buf, index)
            return elapsed

    else:

        def step(index: int) -> float:
            ping = side.recv_data(in_msg)
            side.fill(own_pattern, out_buf, index)
            side.wait([side.send(side.signal, _READY)], "sending READY")
            side.wait(ping, "a ping")
            side.wait(side.send_data(out_msg), "a pong")
            side.check(peer_pattern, in_buf, index)
            return 0.0

    samples, iterations = _run_steps(side, step)
    if not side.is_src:
        return None
    values = [sum(times) / (2 * len(times)) * 1e6 for times in samples]
    entry = _link_entry(side.pair, side.plan, iterations, values, "latency_us", "us", scope="half round trip")
    return _engine_fields(entry, loop)


def _engine_fields(entry: dict[str, Any], loop: HotLoop | None) -> dict[str, Any]:
    """Who timed the steps, and whether UCX was told the buffers' memory type or looked it up."""
    entry["engine"] = "native" if loop is not None else "python"
    entry["ucx_memory_type_declared"] = loop is not None and loop.memory_type >= 0
    return entry


def _link_entry(
    pair: Pair,
    plan: Plan,
    iterations: int,
    values: list[float],
    field: str = "bandwidth_gbps",
    unit: str = "GB/s",
    scope: str = "unidirectional",
) -> dict[str, Any]:
    stats = summarize(values)
    lat = pair.test == "lat"
    return {
        "test": pair.test,
        "src_rank": pair.src,
        "dst_rank": pair.dst,
        "src_mode": pair.src_mode.value,
        "dst_mode": pair.dst_mode.value,
        "size_bytes": pair.size,
        field: stats["median"],
        "unit": unit,
        "scope": scope,
        "stats": stats,
        "samples": values,
        "window": None if lat else plan.window,
        "iterations": iterations,
        "warmup": plan.warmup,
        "messages_per_sample": iterations * (1 if lat else plan.window),
        "validated": pair.validate,
        "wrong_bytes": 0 if pair.validate else None,
        "staging": staging_record(pair),
    }


def staging_record(pair: Pair) -> dict[str, Any] | None:
    """How a staged link cut its messages and how many pinned buffers each staged end used."""
    if not (pair.src_mode.staged or pair.dst_mode.staged):
        return None
    return {
        "chunk_bytes": pair.wire_chunk,
        "chunks_per_message": pieces(pair.size, pair.wire_chunk),
        "src_buffers": staging_buffers(pair.src_mode, pair.staging),
        "dst_buffers": staging_buffers(pair.dst_mode, pair.staging),
        "pinned_buffer_bytes": pair.wire_chunk,
    }


_RUNNERS: dict[str, Callable[[Side], dict[str, Any] | None]] = {"bw": _bw, "bibw": _bibw, "lat": _lat}


def measure_pair(transport: Transport, comm: Any, pair: Pair, plan: Plan, have_gpu: bool) -> dict[str, Any] | None:
    """Run one test between pair.src and pair.dst; call on both ranks of the pair. Returns the result
    entry on the rank that timed it (src; both ranks for bibw), else None."""
    runner = _RUNNERS.get(pair.test)
    if runner is None:
        raise ConfigError(f"unknown test {pair.test!r}: choose one of {', '.join(TESTS)}")
    side = Side(transport, comm, pair, plan, have_gpu)
    try:
        transport.endpoint(side.peer)
        entry = runner(side)
    finally:
        side.release()
    # Which transport carried the bytes needs both ends' UCX reports: the sender's choice for eager
    # messages, the receiver's or sender's rendezvous data table for large ones.
    peer_mode = pair.dst_mode if side.is_src else pair.src_mode
    # Rows for one UCX message: a staged link's messages are its chunks.
    mine = transport.path_rows(side.peer, side.mode.ucx_memory, peer_mode.ucx_memory, pair.wire_chunk)
    theirs = exchange(comm, mine, side.peer, _TAG_PATH)
    if entry is not None:
        entry.update(describe_path(mine, theirs))
    return entry


def measure_round(
    transport: Transport,
    comm: Any,
    links: list[tuple[int, int]],
    template: Pair,
    plan: Plan,
    have_gpu: bool,
) -> list[dict[str, Any]]:
    """`bw` over several links at once; every rank of the job calls it. Each rank posts windows to
    all its targets together; each link's clock stops at its own receiver's acknowledgement.
    Returns the entries of the links this rank sends on, with their per-step times under
    "_step_times" for the round's aggregate (computed on rank 0)."""
    me = transport.rank
    targets = [dst for src, dst in links if src == me]
    sources = [src for src, dst in links if dst == me]
    window, size = plan.window, template.size
    backend = transport.backend
    make = backend.tag
    allocated: list[Buffer] = []
    carriers: dict[tuple[str, int], Carrier] = {}

    def buffers(mode: MemoryMode, direction: str, peer: int) -> tuple[list[Buffer], list[Any]]:
        carrier = carriers[(direction, peer)] = make_carrier(transport, mode, template.wire_chunk, template.staging)
        made = [allocate(mode, size, have_gpu) for _ in range(window)]
        allocated.extend(made)
        return made, carrier.prepare(made, size)

    def signal() -> Any:
        return backend.wrap(np.zeros(8, dtype=np.uint8))

    slots = window * pieces(size, template.wire_chunk)
    try:
        out = {d: buffers(template.src_mode, "out", d) for d in targets}
        inc = {s: buffers(template.dst_mode, "in", s) for s in sources}
    except BaseException:
        _release(carriers, allocated)
        raise
    own_pattern = Pattern(out[targets[0]][0][0].xp, size, me) if targets and template.validate else None
    peer_patterns = {s: Pattern(inc[s][0][0].xp, size, s) for s in sources} if template.validate else {}
    data_out = [make(tag(_DATA, me, k)) for k in range(slots)]
    data_in = {s: [make(tag(_DATA, s, k)) for k in range(slots)] for s in sources}
    ready_out, ack_out = make(tag(_READY, me)), make(tag(_ACK, me))
    ready_in = {d: make(tag(_READY, d)) for d in targets}
    ack_in = {d: make(tag(_ACK, d)) for d in targets}
    ready_bufs = {d: signal() for d in targets}
    ack_bufs = {d: signal() for d in targets}
    outgoing_signal = signal()
    what = f"a round of {len(links)} concurrent links ({template.test}, {format_size(size)})"

    def step(index: int) -> dict[int, float]:
        incoming = {s: carriers[("in", s)].recv(inc[s][1], data_in[s]) for s in sources}
        readies_sent = [transport.send(s, outgoing_signal, ready_out) for s in sources]
        if own_pattern is not None:
            for d in targets:
                for slot, buffer in enumerate(out[d][0]):
                    own_pattern.fill(buffer, message_key(index, slot, d))
            synchronize(template.src_mode)
        acks = {d: transport.recv(ack_bufs[d], ack_in[d]) for d in targets}
        readies = [transport.recv(ready_bufs[d], ready_in[d]) for d in targets]
        transport.wait(readies + readies_sent, plan.timeout, f"READY on {what}")
        start = time.perf_counter()
        sends = [r for d in targets for r in carriers[("out", d)].send(d, out[d][1], data_out)]
        acked_at: dict[int, float] = {}
        acks_sent: dict[int, Request] = {}

        def finished() -> bool:
            for s in sources:
                if s not in acks_sent and all(r.completed for r in incoming[s]):
                    acks_sent[s] = transport.send(s, outgoing_signal, ack_out)
            for d in targets:
                if d not in acked_at and acks[d].completed:
                    acked_at[d] = time.perf_counter()
            return (
                len(acked_at) == len(targets)
                and len(acks_sent) == len(sources)
                and all(r.completed for r in acks_sent.values())
                and all(r.completed for r in sends)
            )

        transport.poll_until(finished, plan.timeout, what, sorted(set(targets) | set(sources)))
        transport.check(sends + list(acks.values()) + list(acks_sent.values()), what)
        for s in sources:
            transport.check(incoming[s], what)
            pattern = peer_patterns.get(s)
            if pattern is not None:
                keys = [message_key(index, slot, me) for slot in range(window)]
                check_messages(pattern, inc[s][0], keys, me, s, index, what)
        return {d: acked_at[d] - start for d in targets}

    try:
        warm = [step(index) for index in range(plan.warmup)]
        slowest = max((max(t.values(), default=0.0) for t in warm[-1:]), default=0.0)
        slowest = comm.allreduce(slowest, op=_mpi_max())
        iterations = calibrated_iterations(slowest, plan)
        index = plan.warmup
        samples: dict[int, list[list[float]]] = {d: [] for d in targets}
        for _ in range(plan.samples):
            times: dict[int, list[float]] = {d: [] for d in targets}
            for _ in range(iterations):
                for d, seconds in step(index).items():
                    times[d].append(seconds)
                index += 1
            for d in targets:
                samples[d].append(times[d])
    finally:
        _release(carriers, allocated)
    entries = []
    memory, peer_memory = template.src_mode.ucx_memory, template.dst_mode.ucx_memory
    rows = {d: transport.path_rows(d, memory, peer_memory, template.wire_chunk) for d in targets}
    fetch_rows = {s: transport.path_rows(s, peer_memory, memory, template.wire_chunk) for s in sources}
    gathered_fetch = comm.allgather({s: fetch_rows[s]["fetch"] for s in sources})
    moved = size * window * iterations
    for d in targets:
        values = [gbps(moved, sum(t)) for t in samples[d]]
        pair = Pair(
            template.test, me, d, template.src_mode, template.dst_mode, size, template.validate, template.staging
        )
        side_plan = Plan(window, iterations, plan.warmup, plan.samples, plan.sample_time, plan.timeout)
        entry = _link_entry(pair, side_plan, iterations, values)
        entry.update(describe_path(rows[d], {"fetch": gathered_fetch[d].get(me)}))
        entry["concurrent_links"] = len(links)
        entry["_step_times"] = samples[d]
        entries.append(entry)
    return entries


def _release(carriers: dict[Any, Carrier], buffers: list[Buffer]) -> None:
    for carrier in carriers.values():
        carrier.release()
    for buffer in buffers:
        buffer.release()


def _mpi_max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def round_aggregate(entries: list[dict[str, Any]]) -> list[float]:
    """Per sample: all links' bytes over the time the slowest link took, step by step."""
    if not entries:
        return []
    per_step = entries[0]["size_bytes"] * entries[0]["window"]
    aggregate = []
    for sample in range(len(entries[0]["_step_times"])):
        steps = zip(*(e["_step_times"][sample] for e in entries), strict=True)
        slowest = sum(max(times) for times in steps)
        moved = per_step * len(entries) * len(entries[0]["_step_times"][sample])
        aggregate.append(gbps(moved, slowest))
    return aggregate
