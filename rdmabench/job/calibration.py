"""Steps per sample, decided once per (size, link classes) instead of in every round.

A sweep of many rounds repeats the same kind of round over and over; calibrating each one costs a
synchronisation of its ranks after their warm-up (and the wait for the slowest of them). The first
round of each (size, set of link classes) calibrates as a lone round does (measure.plan's rule);
later rounds of that key reuse its steps per sample. Where a later round's samples take under half
or over four times the timed seconds of the calibrating round (its links run at another rate), the
next round of that key calibrates again. Rank 0 keeps the table: it sees every measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..measure.round import LinkMeasurement
from ..stats import median

Key = tuple[int, tuple[str, ...]]
RULE = (
    "steps per sample calibrated on the first round of each (size, link classes) and reused by later rounds; "
    "calibrated again after a round whose timed samples took under 0.5x or over 4x the calibrating round's"
)
_TOO_SHORT, _TOO_LONG = 0.5, 4.0


def round_key(size: int, links: Sequence[tuple[int, int]], hosts: Sequence[str]) -> Key:
    """The size and the link classes (same host, inter-node) a round's links fall in."""
    classes = {"same host" if hosts[src] == hosts[dst] else "inter-node" for src, dst in links}
    return size, tuple(sorted(classes))


def sample_seconds(measured: Sequence[LinkMeasurement]) -> float:
    """The timed seconds of the round's median sample: in each sample its slowest link's."""
    if not measured:
        return 0.0
    per_sample = [max(sum(m.step_times[s]) for m in measured) for s in range(len(measured[0].step_times))]
    return median(per_sample) if per_sample else 0.0


@dataclass
class _Known:
    iterations: int
    seconds: float  # timed seconds of a sample in the calibrating round


class Calibration:
    """Rank 0's table of steps per sample per round key."""

    def __init__(self) -> None:
        self._known: dict[Key, _Known] = {}
        self.calibrations = 0

    def decide(self, key: Key) -> int:
        """Steps per sample for the next round of `key`, or 0: that round calibrates."""
        known = self._known.get(key)
        return known.iterations if known else 0

    def learn(self, key: Key, iterations: int, calibrated: bool, measured: Sequence[LinkMeasurement]) -> None:
        """After a round of `key`: keep what it calibrated, or forget a count that no longer fits."""
        seconds = sample_seconds(measured)
        if calibrated:
            self.calibrations += 1
            # The round after a calibrating one calibrates too (decisions lag a round): keep the first.
            if seconds > 0 and key not in self._known:
                self._known[key] = _Known(iterations, seconds)
            return
        known = self._known.get(key)
        if known and not _TOO_SHORT * known.seconds <= seconds <= _TOO_LONG * known.seconds:
            del self._known[key]
