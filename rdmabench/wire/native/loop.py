"""The hot loop's steps, called through ctypes on this rank's UCP worker: a round of windows, a
ping-pong, a one-sided round, block-list steps; a status other than RB_OK becomes a TransportError
naming the link and, for a dead peer, its rank."""

from __future__ import annotations

import ctypes
from typing import Any, NamedTuple

from ...errors import TransportError
from .mirror import NO_MEMORY, OK, PEER_GONE, TIMEOUT, LinkEnd, RmaLinkEnd


class LatEnd(NamedTuple):
    """One end of a ping-pong as both halves of the native loop take it: its endpoint, the peer's pid (a
    dead peer is named by it), its outgoing and incoming buffers, the size, their memory type and the
    message and READY tags."""

    endpoint: int
    peer_pid: int
    out: int
    into: int
    size: int
    memory: int
    tags: tuple[int, int, int]

    @property
    def arguments(self) -> tuple[int, ...]:
        """What rb_lat_ping and rb_lat_pong take first, after the worker."""
        return (self.endpoint, self.out, self.into, self.size, self.memory, *self.tags)


class HotLoop:
    """The native steps on this rank's UCP worker. `where` names the link or round in errors;
    `ranks_by_pid` turns a dead peer's pid back into its rank."""

    def __init__(self, library: Any, worker: int, timeout: float, where: str, ranks_by_pid: dict[int, int]):
        self._lib = library
        self._worker = ctypes.c_void_p(worker)
        self._timeout = timeout
        self._where = where
        self._ranks_by_pid = ranks_by_pid
        self._status = ctypes.c_int()
        self._dead = ctypes.c_int()
        self._seconds = ctypes.c_double()

    def _check(self, rc: int, what: str) -> None:
        if rc == OK:
            return
        if rc == TIMEOUT:
            raise TransportError(f"timed out after {self._timeout:.0f} s waiting for {what} on {self._where}")
        if rc == PEER_GONE:
            pid = self._dead.value
            rank = self._ranks_by_pid.get(pid)
            who = f"rank {rank} (pid {pid} on this host)" if rank is not None else f"the peer (pid {pid} on this host)"
            raise TransportError(f"{who} died while waiting for {what} on {self._where}")
        if rc == NO_MEMORY:
            raise TransportError(f"out of memory posting {what} on {self._where}")
        text = self._lib.rb_status_string(self._status.value).decode(errors="replace")
        raise TransportError(f"UCX failed {what} on {self._where}: {text}")

    @staticmethod
    def rma_link_ends(ends: list[RmaLinkEnd]) -> Any:
        return (RmaLinkEnd * max(1, len(ends)))(*ends)

    def rma_round(
        self, op: int, active: Any, nactive: int, passive: Any, npassive: int, signal: int, scratch: int
    ) -> list[float]:
        """One step of a one-sided round: seconds from each active link's start to its completion."""
        seconds = (ctypes.c_double * max(1, nactive))()
        rc = self._lib.rb_rma_round(
            self._worker, op, active, nactive, passive, npassive, signal, scratch, self._timeout, seconds,
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a round of one-sided transfers and their completion")
        return list(seconds[:nactive])

    def put_pingpong(self, ping: bool, link: Any, flag: int, expect: int, signal: int) -> float:
        """A put each way, each noticed by polling the last byte it writes; seconds on the pinging side."""
        rc = self._lib.rb_put_pingpong(
            self._worker, int(ping), link, flag, expect, signal, self._timeout,
            ctypes.byref(self._seconds), ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a put ping-pong round trip")
        return self._seconds.value

    def blocks(
        self, op: int, active: bool, link: Any, signal: int, scratch: int, batch: int, stall: float = 0.0
    ) -> tuple[float, list[float], list[float]]:
        """One step of block-list transfers. The initiator gets (step seconds, each transfer's
        seconds, each transfer's posting seconds); the other end (0.0, [], []). `stall`: seconds
        the first transfer is held up on purpose (the test suite's planted slow transfer)."""
        if not active:
            rc = self._lib.rb_blocks_passive(
                self._worker,
                op,
                link,
                signal,
                scratch,
                self._timeout,
                ctypes.byref(self._dead),
                ctypes.byref(self._status),
            )
            self._check(rc, "a step of block transfers")
            return 0.0, [], []
        seconds, posting = (ctypes.c_double * batch)(), (ctypes.c_double * batch)()
        rc = self._lib.rb_blocks_active(
            self._worker, op, link, signal, scratch, self._timeout, stall, posting, seconds, ctypes.byref(self._seconds),
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a step of block transfers")
        return self._seconds.value, list(seconds), list(posting)

    def blocks_ready(self, link: Any, scratch: int) -> None:
        """The initiator's wait for the other end's READY, for a step moved elsewhere (the GPU's)."""
        rc = self._lib.rb_blocks_ready(
            self._worker, link, scratch, self._timeout, ctypes.byref(self._dead), ctypes.byref(self._status)
        )
        self._check(rc, "the other end's READY")

    def blocks_done(self, link: Any, signal: int) -> None:
        """The initiator's DONE after a step moved elsewhere."""
        rc = self._lib.rb_blocks_done(
            self._worker, link, signal, self._timeout, ctypes.byref(self._dead), ctypes.byref(self._status)
        )
        self._check(rc, "sending DONE")

    @property
    def worker(self) -> int:
        return int(self._worker.value or 0)

    @property
    def timeout(self) -> float:
        return self._timeout

    @staticmethod
    def addresses(pointers: list[int]) -> Any:
        return (ctypes.c_void_p * len(pointers))(*pointers)

    @staticmethod
    def link_ends(ends: list[LinkEnd]) -> Any:
        return (LinkEnd * max(1, len(ends)))(*ends)

    def round(self, targets: Any, ntargets: int, sources: Any, nsources: int, signal: int, scratch: int) -> list[float]:
        """One step of a round: seconds from the start of the clock to each target's acknowledgement."""
        seconds = (ctypes.c_double * max(1, ntargets))()
        rc = self._lib.rb_round(
            self._worker, targets, ntargets, sources, nsources, signal, scratch, self._timeout, seconds,
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a round of windows and their acknowledgements")
        return list(seconds[:ntargets])

    def ping(self, end: LatEnd, ready: int, count: int) -> float:
        """Seconds for `count` round trips in a row, from the end that pings (`ready`: its READY signal)."""
        rc = self._lib.rb_lat_ping(
            self._worker, *end.arguments, ready, count, self._timeout, end.peer_pid,
            ctypes.byref(self._seconds), ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a ping-pong round trip")
        return self._seconds.value

    def pong(self, end: LatEnd, signal: int, count: int) -> None:
        """`count` pongs, each after its ping, from the other end (`signal`: its READY signal)."""
        rc = self._lib.rb_lat_pong(
            self._worker, *end.arguments, signal, count, self._timeout, end.peer_pid,
            ctypes.byref(self._dead), ctypes.byref(self._status),
        )  # fmt: skip
        self._check(rc, "a ping and its pong")
