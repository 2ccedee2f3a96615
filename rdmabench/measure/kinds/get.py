"""get: one-sided reads of the peer's registered memory (bytes move src -> dst, dst initiates and
times), a window per step, timed until the last get has landed."""

from __future__ import annotations

from ...wire.native import RMA_GET
from ..onesided import GET, refuse_staged
from ..registry import TestKind, register
from .bw import window_gbps

GET_BW = register(
    TestKind(
        name="get",
        summary="one-sided reads (RMA get) by the receiver, a window in flight",
        field="bandwidth_gbps",
        unit="GB/s",
        higher_is_better=True,
        scope="unidirectional",
        protocol=GET,
        pair_links=lambda a, b: [(a, b)],
        figure=window_gbps,
        block_op=RMA_GET,
        timing="timed by the receiver until its last get had landed",
        one_sided=True,
        refuse_mode=refuse_staged,
    )
)
