"""How many steps a sample runs: about --sample-time of wall clock, but never so few that a sample
times almost nothing."""

from __future__ import annotations

from pathlib import Path

from rdmabench.job.calibration import RULE, Calibration, round_key
from rdmabench.measure.contract import Link
from rdmabench.measure.plan import HOST, Plan, calibrated_iterations, make_plan
from rdmabench.measure.round import LinkMeasurement
from rdmabench.modes import MemoryMode
from rdmabench.results.files.document import load as load_results

from .conftest import run_cli


def _plan(iterations: int | None = None, sample_time: float = 0.05) -> Plan:
    return make_plan(True, 8, HOST, None, iterations, None, 5, sample_time, None)


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


# --- a sweep calibrates once per (size, link classes) -------------------------------------------------


def _measured(seconds_per_step: float, steps: int) -> list[LinkMeasurement]:
    link = Link(0, 1, MemoryMode.PAGEABLE, MemoryMode.PAGEABLE)
    return [LinkMeasurement(link, [[seconds_per_step] * steps], steps, 4, 2, "native", True)]


def test_round_keys_name_the_size_and_link_classes() -> None:
    hosts = ["a", "a", "b", "b"]
    assert round_key(64, [(0, 1), (2, 3)], hosts) == (64, ("same host",))
    assert round_key(64, [(0, 2), (1, 3)], hosts) == (64, ("inter-node",))
    assert round_key(64, [(0, 1), (1, 2)], hosts) == (64, ("inter-node", "same host"))


def test_the_first_calibration_of_a_key_is_kept_until_a_round_strays() -> None:
    table, key = Calibration(), (64, ("same host",))
    assert table.decide(key) == 0  # unknown: the round calibrates
    table.learn(key, 100, True, _measured(1e-4, 100))  # a sample of 10 ms timed
    table.learn(key, 300, True, _measured(1e-4, 300))  # the lagging second calibration is not kept
    assert table.decide(key) == 100 and table.decide((128, ("same host",))) == 0
    table.learn(key, 100, False, _measured(2e-4, 100))  # 20 ms: within 0.5x..4x, kept
    assert table.decide(key) == 100
    table.learn(key, 100, False, _measured(4e-5, 100))  # 4 ms: under half, calibrate again
    assert table.decide(key) == 0 and table.calibrations == 2


def test_a_concurrent_sweep_reuses_the_first_rounds_steps(results_path: Path) -> None:
    """Rounds 1 and 2 of a size calibrate (decisions lag a round); round 3 runs round 1's count."""
    args = ["run", "--np", "4", "--pattern", "all-pairs", "--concurrent", "--sizes", "4KiB,64KiB"]
    proc = run_cli([*args, "--samples", "2", "--sample-time", "0.02", "-o", str(results_path)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = load_results(str(results_path))
    assert doc["metadata"]["calibration"] == RULE
    for size in (4096, 65536):
        entries = [e for e in doc["results"] if e["size_bytes"] == size]
        assert len(entries) == 12  # 6 rounds of 2 links, in order
        assert entries[4]["iterations"] == entries[5]["iterations"] == entries[0]["iterations"]
