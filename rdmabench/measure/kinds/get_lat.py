"""get-lat: one get of the peer's memory, start to completion: a full round trip, in microseconds."""

from __future__ import annotations

from ..onesided import GET_ONCE, refuse_staged
from ..registry import TestKind, register


def round_trip_us(size: int, window: int, step_times: list[float]) -> float:
    return sum(step_times) / len(step_times) * 1e6


GET_LAT = register(
    TestKind(
        name="get-lat",
        summary="one-sided get, start to completion (a round trip)",
        field="latency_us",
        unit="us",
        higher_is_better=False,
        scope="round trip",
        protocol=GET_ONCE,
        pair_links=lambda a, b: [(a, b)],
        figure=round_trip_us,
        concurrent=False,
        one_sided=True,
        refuse_mode=refuse_staged,
    )
)
