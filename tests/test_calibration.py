"""How many steps a sample runs: about --sample-time of wall clock, but never so few that a sample
times almost nothing."""

from __future__ import annotations

from rdmabench.measure.plan import Plan, calibrated_iterations, make_plan


def _plan(iterations: int | None = None, sample_time: float = 0.05) -> Plan:
    return make_plan(True, 8, False, None, iterations, None, 5, sample_time, None)


def test_wall_clock_sets_the_count_when_the_step_is_mostly_transfer() -> None:
    assert calibrated_iterations(0.001, _plan(), timed_seconds=0.0009) == 50


def test_cheap_timed_part_gets_more_steps_but_at_most_four_times_more() -> None:
    # A native 8-byte window: 5 us timed inside a 1 ms step of checks.
    assert calibrated_iterations(0.001, _plan(), timed_seconds=5e-6) == 200
    # A validated 16 MiB message: 3 ms timed inside 60 ms: 1 step by wall clock, 4 so that a sample
    # still times a fifth of sample_time.
    assert calibrated_iterations(0.06, _plan(), timed_seconds=0.003) == 4


def test_explicit_iterations_win() -> None:
    assert calibrated_iterations(10.0, _plan(iterations=7), timed_seconds=1e-9) == 7
