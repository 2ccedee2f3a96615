"""What a step protocol provides to the round engine: the buffers an end needs, and one timed step
in Python and (where the native loop is built) in C. Two exist: window.py (bw, bibw and every
concurrent pattern) and pingpong.py (lat)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .need import Need
    from .round import RoundEnd, RoundSpec, Side


class StepProtocol(Protocol):
    name: str
    windowed: bool  # a window of messages per step (False: one message each way)
    streams: bool  # a step may make several passes of its window (Plan.passes); False: always one

    def need(self, spec: RoundSpec, rank: int) -> Need:
        """Everything `rank` allocates for its part of round `spec` (measure/need.py): checked before
        any rank allocates, so it must count what setup, fill and check hold at once."""
        ...

    def timed(self, end: RoundEnd) -> list[Side]:
        """The sides of links this rank times, in the order its steps return their seconds."""
        ...

    def rows(self, end: RoundEnd, side: Side) -> dict[str, Any]:
        """What this rank's UCX reported for a link it times (RoundEnd.tag_rows for tagged messages)."""
        ...

    def setup(self, end: RoundEnd) -> None:
        """Allocate this rank's buffers and everything its steps reuse."""
        ...

    def python_step(self, end: RoundEnd, index: int) -> list[float]:
        """One timed step (fill and check excluded): seconds per link this rank times."""
        ...

    def native_step(self, end: RoundEnd, index: int) -> list[float]: ...

    def fill(self, end: RoundEnd, index: int) -> None:
        """Write step `index`'s payloads into this rank's outgoing buffers (untimed)."""
        ...

    def check(self, end: RoundEnd, index: int) -> None:
        """Check every byte this rank received in step `index` (untimed)."""
        ...
