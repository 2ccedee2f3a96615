"""How a message's bytes get onto the wire: handed to UCX in place, or staged through pinned host memory.

Most memory modes hand UCX the message buffer itself. The staged and bounce modes keep the message
in GPU memory but never show it to UCX: the sender copies it to pinned host buffers (device-to-host
on a dedicated copy stream, a CUDA event per buffer), sends those, and the receiver copies each
arriving buffer up to its GPU (host-to-device, same recipe). This is what a program without
GPUDirect or CUDA IPC has to do.

- staged: the message travels in chunks through `buffers` pinned buffers (default two: double
  buffering), so one chunk's device copy overlaps the next chunk's network transfer.
- bounce: one pinned buffer the size of the message, each step waiting for the one before
  (copy out, send, copy in): the unpipelined baseline.

When one end stages, both ends cut messages into the same chunks (tags name the chunk), so a staged
end can talk to a direct one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from ..errors import ConfigError, TransportError
from ..hardware.gpu import import_cupy
from ..memory.buffers import Buffer, allocate
from ..modes import MemoryMode
from .ucx import Request, Transport

DEFAULT_CHUNK = 4 << 20
DEFAULT_BUFFERS = 2
_HOST_TO_DEVICE, _DEVICE_TO_HOST = 1, 2  # cudaMemcpyKind


@dataclass(frozen=True)
class Staging:
    """The staged mode's pipeline shape: bytes per pinned buffer, and how many buffers."""

    chunk: int = DEFAULT_CHUNK
    buffers: int = DEFAULT_BUFFERS

    def check(self) -> Staging:
        if self.chunk < 1:
            raise ConfigError(f"--chunk-size must be at least 1 byte, not {self.chunk}")
        if self.buffers < 1:
            raise ConfigError(f"--stage-buffers must be at least 1, not {self.buffers}")
        return self


DEFAULT_STAGING = Staging()


def wire_chunk(src_mode: MemoryMode, dst_mode: MemoryMode, size: int, staging: Staging) -> int:
    """The largest piece one UCX message carries between these two ends: the staged chunk when
    either end is staged, else the whole message."""
    if "pipelined" in (src_mode.record.staging, dst_mode.record.staging):
        return max(1, min(staging.chunk, size))
    return max(1, size)


class StagingRecord(TypedDict):
    """An entry's `staging` (docs/results-format.md): how a staged link cut its messages."""

    chunk_bytes: int
    chunks_per_message: int
    src_buffers: int | None  # pinned buffers the source end stages through; None where UCX has its buffers
    dst_buffers: int | None
    pinned_buffer_bytes: int


def staging_buffers(mode: MemoryMode, staging: Staging) -> int | None:
    """Pinned buffers an end of this mode stages through (per direction of a link); None for an
    end that hands its buffers to UCX."""
    kind = mode.record.staging
    if kind == "pipelined":
        return staging.buffers
    return 1 if kind == "bounce" else None


def pieces(size: int, chunk: int) -> int:
    """UCX messages per benchmark message."""
    return max(1, math.ceil(size / chunk))


class Carrier(Protocol):
    """Posts one end's share of a window of messages. prepare() turns the window's buffers into a
    batch, once; send() and recv() post a batch every step. `tags` has a UCX tag per piece, in
    order (message by message, chunk by chunk)."""

    def prepare(self, buffers: list[Buffer], nbytes: int) -> list[Any]: ...

    def send(self, peer: int, batch: list[Any], tags: list[Any]) -> list[Request]: ...

    def recv(self, batch: list[Any], tags: list[Any]) -> list[Request]: ...

    def release(self) -> None: ...


def _cuts(nbytes: int, chunk: int) -> list[tuple[int, int]]:
    """(offset, length) of each piece of an `nbytes` message."""
    return [(offset, min(chunk, nbytes - offset)) for offset in range(0, max(nbytes, 1), chunk)]


class DirectCarrier:
    """UCX reads and writes the message buffers themselves, a piece per UCX message."""

    def __init__(self, transport: Transport, chunk: int):
        self.transport = transport
        self.chunk = chunk
        self._posters: dict[int, Any] = {}
        self._take = transport.receiver()

    def prepare(self, buffers: list[Buffer], nbytes: int) -> list[Any]:
        wrap = self.transport.backend.wrap
        return [
            wrap(b.array[offset : offset + length]) for b in buffers for offset, length in _cuts(nbytes, self.chunk)
        ]

    def send(self, peer: int, batch: list[Any], tags: list[Any]) -> list[Request]:
        post = self._posters.get(peer)
        if post is None:
            post = self._posters[peer] = self.transport.sender(peer)
        # `tags` covers the largest window of the link, so it is never the shorter list.
        return [post(message, tag) for message, tag in zip(batch, tags, strict=False)]

    def recv(self, batch: list[Any], tags: list[Any]) -> list[Request]:
        take = self._take
        return [take(message, tag) for message, tag in zip(batch, tags, strict=False)]

    def release(self) -> None:
        pass


_IDLE, _COPYING, _ON_WIRE = 0, 1, 2


class StagedCarrier:
    """Device messages moved through `count` pinned buffers of `chunk` bytes on a copy stream."""

    def __init__(self, transport: Transport, chunk: int, count: int):
        cupy = import_cupy()
        assert cupy is not None
        self.transport = transport
        self.chunk = chunk
        self._memcpy = cupy.cuda.runtime.memcpyAsync
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._wrapped: dict[tuple[int, int], Any] = {}
        self._pipelines: list[_Pipeline] = []
        self.host: list[Buffer] = []
        try:
            for _ in range(count):
                self.host.append(allocate(MemoryMode.PINNED, chunk, have_gpu=True))
        except Exception:
            self.release()
            raise
        self.host_pointers = [int(b.array.ctypes.data) for b in self.host]
        self.events = [cupy.cuda.Event(block=False, disable_timing=True) for _ in range(count)]

    def prepare(self, buffers: list[Buffer], nbytes: int) -> list[tuple[int, int]]:
        """(device address, length) of each chunk of each message."""
        return [
            (int(b.array.data.ptr) + offset, length) for b in buffers for offset, length in _cuts(nbytes, self.chunk)
        ]

    def host_message(self, slot: int, length: int) -> Any:
        key = (slot, length)
        message = self._wrapped.get(key)
        if message is None:
            message = self._wrapped[key] = self.transport.backend.wrap(self.host[slot].array[:length])
        return message

    def copy(self, slot: int, device: int, length: int, to_device: bool) -> None:
        host = self.host_pointers[slot]
        if to_device:
            self._memcpy(device, host, length, _HOST_TO_DEVICE, self.stream.ptr)
        else:
            self._memcpy(host, device, length, _DEVICE_TO_HOST, self.stream.ptr)
        self.events[slot].record(self.stream)

    def send(self, peer: int, batch: list[Any], tags: list[Any]) -> list[Request]:
        return [self._start(_StagedSend(self, peer, batch, tags))]

    def recv(self, batch: list[Any], tags: list[Any]) -> list[Request]:
        return [self._start(_StagedRecv(self, batch, tags))]

    def _start(self, pipeline: _Pipeline) -> _Pipeline:
        self._pipelines = [p for p in self._pipelines if not p.completed]
        self._pipelines.append(pipeline)
        self.transport.drive(pipeline)
        return pipeline

    def release(self) -> None:
        for pipeline in self._pipelines:
            self.transport.stop_driving(pipeline)  # a failed run leaves them unfinished
        self._pipelines.clear()
        if self.host:
            self.stream.synchronize()  # no copy may still read or write a buffer given back
        for buffer in self.host:
            buffer.release()
        self.host.clear()
        self._wrapped.clear()


class _Pipeline:
    """A window of chunks going through the carrier's pinned buffers; advanced by the transport's
    poll loop (Transport.drive) and complete when every chunk has been through."""

    def __init__(self, carrier: StagedCarrier, chunks: list[tuple[int, int]], tags: list[Any]):
        self.carrier = carrier
        self.chunks = chunks
        self.tags = tags
        self.state = [_IDLE] * len(carrier.host)
        self.chunk_of = [0] * len(carrier.host)
        self.requests: list[Any] = [None] * len(carrier.host)
        self.next = 0
        self.finished = 0

    @property
    def completed(self) -> bool:
        return self.finished == len(self.chunks)

    def check_error(self) -> None:
        pass  # a failed UCX request raises from advance(), where it is seen

    def _request_done(self, slot: int, what: str) -> bool:
        request = self.requests[slot]
        if not request.completed:
            return False
        try:
            request.check_error()
        except Exception as exc:
            raise TransportError(f"UCX failed {what} staged chunk {self.chunk_of[slot]}: {exc}") from None
        self.requests[slot] = None
        return True

    def advance(self) -> bool:
        raise NotImplementedError


class _StagedSend(_Pipeline):
    """Copy a chunk down to a free pinned buffer, send it once its copy event fires."""

    def __init__(self, carrier: StagedCarrier, peer: int, chunks: list[tuple[int, int]], tags: list[Any]):
        super().__init__(carrier, chunks, tags)
        self.peer = peer
        self.advance()

    def advance(self) -> bool:
        carrier = self.carrier
        for slot, state in enumerate(self.state):
            if state == _ON_WIRE and self._request_done(slot, "sending"):
                self.finished += 1
                state = _IDLE
            if state == _COPYING and carrier.events[slot].done:
                index = self.chunk_of[slot]
                message = carrier.host_message(slot, self.chunks[index][1])
                self.requests[slot] = carrier.transport.send(self.peer, message, self.tags[index])
                state = _ON_WIRE
            if state == _IDLE and self.next < len(self.chunks):
                device, length = self.chunks[self.next]
                carrier.copy(slot, device, length, to_device=False)
                self.chunk_of[slot] = self.next
                self.next += 1
                state = _COPYING
            self.state[slot] = state
        return self.completed


class _StagedRecv(_Pipeline):
    """Receive a chunk into a free pinned buffer, copy it up to its place in the message, and reuse
    the buffer once that copy's event fires."""

    def __init__(self, carrier: StagedCarrier, chunks: list[tuple[int, int]], tags: list[Any]):
        super().__init__(carrier, chunks, tags)
        self.advance()  # the first receives are posted at once, before the sender is told to go

    def advance(self) -> bool:
        carrier = self.carrier
        for slot, state in enumerate(self.state):
            if state == _ON_WIRE and self._request_done(slot, "receiving"):
                device, length = self.chunks[self.chunk_of[slot]]
                carrier.copy(slot, device, length, to_device=True)
                state = _COPYING
            if state == _COPYING and carrier.events[slot].done:
                self.finished += 1
                state = _IDLE
            if state == _IDLE and self.next < len(self.chunks):
                index = self.next
                message = carrier.host_message(slot, self.chunks[index][1])
                self.requests[slot] = carrier.transport.recv(message, self.tags[index])
                self.chunk_of[slot] = index
                self.next += 1
                state = _ON_WIRE
            self.state[slot] = state
        return self.completed


def make_carrier(transport: Transport, mode: MemoryMode, chunk: int, staging: Staging) -> Carrier:
    """The carrier for one end: `chunk` is the pair's wire chunk (wire_chunk())."""
    count = staging_buffers(mode, staging)
    return DirectCarrier(transport, chunk) if count is None else StagedCarrier(transport, chunk, count)
