"""A round's steps on this rank, numbered as they run: each filled, timed and checked (`one`, `sample`),
and a pair's shared half beside compute: steps back to back, its payload written before and checked
after (`shared`, measure/pairs.py's take_pair runs it). The round engine (round.py) makes it over its
end (round.EngineEnd: its protocol, the planted stall, how errors name the round)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import faults
from .slow import SLOW_S, Slow


class Steps:
    """A round's steps on this rank, numbered as they run: each filled, timed and checked, with the
    CPU seconds of the timed parts (fills and checks left out: the cost of moving the bytes)."""

    def __init__(self, end: Any, step: Callable[[Any, int], list[float]]):
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
    ) -> tuple[list[list[float]], float | None]:
        """A pair's shared half: steps back to back, `batch` at a time (then as many as the ranks agree
        from the last batch's steps), until `agree(over(), seconds a step)` says every GPU's window has
        ended. Its payload is written before the first step and checked after the last
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
