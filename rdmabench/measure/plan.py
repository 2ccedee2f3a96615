"""How much to run for one size: window, steps per sample, warm-up, samples, timeout, and the one
calibration rule every round follows."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

_MAX_ITERATIONS = 10_000_000
# Which memory a link's two ends hold, for its default window: both GPU memory, both host memory
# (a CPU copies the bytes: its cache decides), or one of each (a DMA engine copies them).
DEVICE, HOST, MIXED = "device", "host", "mixed"
# The default window keeps at most this much in flight. Host to host the window's source and
# destination together (twice the budget) stay within a core's L2 cache (1 MiB on the CI VM, 2 MiB on
# the H100 host): the core that runs the copy (cma: the receiver's) then holds them, as ucx_perftest
# and osu_bw hold their one buffer. Unchecked at 64 KiB against ucx_perftest on the H100 host (medians
# of 5 rounds, measurements/window-20261124/): 16 messages in flight 0.63, 8 and 4 0.82, 2 0.92, one buffer
# 0.89; on the VM every depth from 2 to 16 gave 0.90-0.94, and at 4 KiB and 256 KiB depth made no
# difference there. A DMA engine has no such cliff, and a deeper window hides the per-step handshake:
# 8 MiB with one end in GPU memory, 512 MiB with both.
WINDOW_BUDGETS = {DEVICE: 512 << 20, HOST: 256 << 10, MIXED: 8 << 20}
# Streaming: bytes a step moves through its window, by the memory its link's ends hold; round trips
# a ping-pong step makes (its byte cap is the host figure whatever the memory); at most this many
# passes of the window per step.
STREAM_BYTES = {DEVICE: 4 << 30, HOST: 64 << 20, MIXED: 64 << 20}
STREAM_ROUND_TRIPS = 200
MAX_PASSES = 64


@dataclass(frozen=True)
class Plan:
    """How much to run for one size. `iterations` None means: calibrate from the warm-up so that
    one sample takes about `sample_time` seconds."""

    window: int  # messages in flight per link (a ping-pong: 1)
    iterations: int | None
    warmup: int
    samples: int
    sample_time: float
    timeout: float
    # Windows per step (round trips, for a ping-pong): a step streams window x passes messages through
    # the window's buffers, the next posted as each completes, with one handshake at each end.
    passes: int = 1
    # The passes are the default's (a byte budget): the first warm-up step, of one pass, may lower
    # them so that a step lasts at most a quarter of sample_time on a slow link (round.py).
    auto_passes: bool = False

    @property
    def per_step(self) -> int:
        """Messages per step on a link (round trips, for a ping-pong)."""
        return self.window * self.passes

    def shared(self, links: int, window_given: bool) -> Plan:
        """The plan for one of `links` links a rank serves at once: the default window is shared out."""
        if window_given or links <= 1:
            return self
        return replace(self, window=max(1, self.window // links))


def default_window(size: int, memory: str = HOST) -> int:
    return max(1, min(64, WINDOW_BUDGETS[memory] // size))


def default_passes(windowed: bool, size: int, window: int, memory: str) -> int:
    """Enough passes that a step's handshake (READY, then ACK; a ping-pong's READY) costs little
    against what it streams, without making one step longer than a sample should be: a step moves
    about STREAM_BYTES, or STREAM_ROUND_TRIPS round trips, and never more than MAX_PASSES windows."""
    if not windowed:
        return max(1, min(STREAM_ROUND_TRIPS, STREAM_BYTES[HOST] // (16 * max(size, 1))))
    return max(1, min(MAX_PASSES, STREAM_BYTES[memory] // (window * max(size, 1))))


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
    memory: str,
    window: int | None,
    iterations: int | None,
    warmup: int | None,
    samples: int,
    sample_time: float,
    timeout: float | None,
    passes: int | None = None,
) -> Plan:
    win = (window or default_window(size, memory)) if windowed else 1
    runs = passes or default_passes(windowed, size, win, memory)
    auto = passes is None and runs > 1
    warm = default_warmup(windowed, size) if warmup is None else warmup
    if iterations is None:
        warm = max(warm, 1)  # the warm-up is what calibrates the iteration count
    return Plan(
        window=win,
        iterations=iterations,
        warmup=warm,
        samples=samples,
        sample_time=sample_time,
        timeout=timeout if timeout is not None else default_timeout(win * runs * size),
        passes=runs,
        auto_passes=auto,
    )


def passes_for(step_seconds: float, plan: Plan) -> int:
    """Passes a step may make when one pass's transfers took `step_seconds` (the slowest rank's): at
    most the plan's, and few enough that a step's transfers last a quarter of sample_time or less."""
    fit = int(plan.sample_time / 4 / max(step_seconds, 1e-7))
    return max(1, min(plan.passes, fit))


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
