"""put-lat: a put each way, each noticed by polling its last byte; half the round trip, in microseconds."""

from __future__ import annotations

from ..onesided import PUT_PINGPONG, refuse_staged, refuse_unpollable
from ..registry import TestKind, register
from .lat import half_round_trip_us

PUT_LAT = register(
    TestKind(
        name="put-lat",
        summary="one-sided put ping-pong (polling the last byte), half a round trip",
        field="latency_us",
        unit="us",
        higher_is_better=False,
        scope="half round trip",
        protocol=PUT_PINGPONG,
        pair_links=lambda a, b: [(a, b)],
        figure=half_round_trip_us,
        concurrent=False,
        one_sided=True,
        refuse_mode=lambda mode: refuse_staged(mode) or refuse_unpollable(mode),
    )
)
