"""put: one-sided writes into the peer's registered memory, a window per step, timed until a flush of
the endpoint completes (the bytes are in the target's memory)."""

from __future__ import annotations

from ...wire.native import RMA_PUT
from ..onesided import PUT, refuse_staged
from ..registry import TestKind, register
from .bw import window_gbps

PUT_BW = register(
    TestKind(
        name="put",
        summary="one-sided writes (RMA put), a window in flight",
        field="bandwidth_gbps",
        unit="GB/s",
        higher_is_better=True,
        scope="unidirectional",
        protocol=PUT,
        pair_links=lambda a, b: [(a, b)],
        figure=window_gbps,
        block_op=RMA_PUT,
        timing="timed until a flush of the endpoint completed (the bytes are in the target's memory)",
        one_sided=True,
        refuse_mode=refuse_staged,
    )
)
