"""bibw: both directions of a pair at once, each timed to its own receiver's acknowledgement; the
round's aggregate counts each direction's bytes once, over the slower direction's time."""

from __future__ import annotations

from ..registry import TestKind, register
from ..window import WINDOW
from .bw import window_gbps

BIBW = register(
    TestKind(
        name="bibw",
        summary="both directions at once",
        field="bandwidth_gbps",
        unit="GB/s",
        higher_is_better=True,
        scope="per-direction",
        protocol=WINDOW,
        pair_links=lambda a, b: [(a, b), (b, a)],
        figure=window_gbps,
        concurrent=False,
    )
)
