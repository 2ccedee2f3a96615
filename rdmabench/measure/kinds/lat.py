"""lat: ping-pong, half a round trip, in microseconds."""

from __future__ import annotations

from ..pingpong import PINGPONG
from ..registry import TestKind, register


def half_round_trip_us(size: int, round_trips: int, step_times: list[float]) -> float:
    """Half the mean round trip: each step made `round_trips` of them in a row."""
    return sum(step_times) / (2 * len(step_times) * round_trips) * 1e6


LAT = register(
    TestKind(
        name="lat",
        summary="ping-pong, half a round trip",
        field="latency_us",
        unit="us",
        higher_is_better=False,
        scope="half round trip",
        protocol=PINGPONG,
        pair_links=lambda a, b: [(a, b)],
        figure=half_round_trip_us,
        concurrent=False,
    )
)
