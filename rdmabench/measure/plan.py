"""How much to run for one size: window, steps per sample, warm-up, samples, timeout, and the one
calibration rule every round follows."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

_MAX_ITERATIONS = 10_000_000
# The default window keeps at most this much in flight. Host memory gets a budget that stays within
# the CPU's caches: beyond it, a host-to-host figure measures DRAM, not the transport (and C tools,
# which resend one buffer, report the cached figure). 8 MiB, not 16: with fresh data every step, 4 MiB
# messages moved 1.5x (H200 node) to 1.8x (CI VM) faster two at a time than four at a time, and no
# size got slower. GPU memory has no such cliff, and a deep window hides the per-step handshake.
HOST_WINDOW_BUDGET = 8 << 20
DEVICE_WINDOW_BUDGET = 512 << 20


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

    def shared(self, links: int, window_given: bool) -> Plan:
        """The plan for one of `links` links a rank serves at once: the default window is shared out."""
        if window_given or links <= 1:
            return self
        return replace(self, window=max(1, self.window // links))


def default_window(size: int, device_only: bool = False) -> int:
    budget = DEVICE_WINDOW_BUDGET if device_only else HOST_WINDOW_BUDGET
    return max(1, min(64, budget // size))


def default_warmup(windowed: bool, size: int) -> int:
    if not windowed:
        return 20 if size <= 65536 else 3
    return 2


def default_timeout(window_bytes: int) -> float:
    """Seconds a single step may take before it counts as stuck: generous, even at 50 MB/s."""
    return 60.0 + window_bytes / 50e6


def make_plan(
    windowed: bool,
    size: int,
    device_only: bool,
    window: int | None,
    iterations: int | None,
    warmup: int | None,
    samples: int,
    sample_time: float,
    timeout: float | None,
) -> Plan:
    win = (window or default_window(size, device_only)) if windowed else 1
    warm = default_warmup(windowed, size) if warmup is None else warmup
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
