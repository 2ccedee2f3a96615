"""bw: one direction, a window of messages in flight, timed until the receiver acknowledged them all."""

from __future__ import annotations

from ...units import gbps
from ...wire.native import TAGGED
from ..registry import TestKind, register
from ..window import WINDOW


def window_gbps(size: int, per_step: int, step_times: list[float]) -> float:
    """Every byte of every step (`per_step` messages: its window's passes) over the sum of the step
    times, in GB/s."""
    return gbps(size * per_step * len(step_times), sum(step_times))


BW = register(
    TestKind(
        name="bw",
        summary="one direction, a window of messages in flight",
        field="bandwidth_gbps",
        unit="GB/s",
        higher_is_better=True,
        scope="unidirectional",
        protocol=WINDOW,
        pair_links=lambda a, b: [(a, b)],
        figure=window_gbps,
        block_op=TAGGED,
    )
)
