"""Issue 54's figures read back from a damaged file (review9): a huge integer in any numeric key, an interval
that does not hold its slowdown, a rate of nothing or above its own burst, a negative noise floor or count of
pairs. Each reads as missing; `report` prints every format, never a traceback. The file is a real run
(measurements/h200x2-20261126-beside/gpu-sms-16, three 1024-block lists beside a GEMM); the issue 54 keys
planted in it and their damage are GENERATED here."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rdmabench.measure.besiderecord import BesideFigure
from rdmabench.measure.blockrecord import BlockList
from rdmabench.measure.readback import number, whole

from .conftest import run_cli_here

RUN = Path(__file__).resolve().parent.parent / "measurements" / "h200x2-20261126-beside" / "gpu-sms-16"
HUGE = 10**400  # JSON parses it; no float holds it


def _lists(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's block lists beside the load, with issue 54's keys planted (GENERATED: a thread at 0.05 us
    a descriptor, the interval the slowdown +- 1%, a noise floor of 1%)."""
    found = []
    for record in records:
        blocks, beside = record.get("blocks"), record.get("beside")
        if isinstance(blocks, dict) and isinstance(beside, dict) and blocks.get("layout") != "contiguous":
            value = statistics.median(record["samples"])
            blocks |= {"sustained_gbps": value, "host_us_per_descriptor": 0.05}
            slowdown = beside["slowdown"]
            beside |= {"slowdown_interval": [slowdown * 0.99, slowdown * 1.01], "noise_floor": 0.01, "pairs_used": 5}
            found.append(record)
    return found


def _damaged(tmp_path: Path, damage: Callable[[dict[str, Any]], None]) -> Path:
    """The run's files copied to `tmp_path`, each list beside the load damaged by `damage`."""
    head = json.loads(RUN.with_suffix(".json").read_text())
    records = [json.loads(line) for line in RUN.with_suffix(".links.jsonl").read_text().splitlines()]
    for record in _lists(records):
        damage(record)
    (tmp_path / "gpu-sms-16.links.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    path = tmp_path / "gpu-sms-16.json"
    path.write_text(json.dumps(head))
    return path


def _report(path: Path, form: str) -> str:
    done = run_cli_here(["report", "--format", form, str(path)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-600:]
    if form == "table":
        assert max(map(len, done.stdout.splitlines())) <= 120
    return done.stdout


def _candidates(path: Path) -> list[dict[str, Any]]:
    """The answer's candidates beside the load, as the report's JSON gives them (one a list)."""
    found = [point for answer in json.loads(_report(path, "json"))["answers"] for point in answer["candidates"]]
    assert len(found) == 3
    return found


def _set(group: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record[group].__setitem__(key, value)


BIG_KEYS = [
    ("beside", "slowdown_interval"), ("beside", "noise_floor"), ("beside", "slowdown"), ("beside", "transfer_alone"),
    ("blocks", "sustained_gbps"), ("blocks", "host_us_per_descriptor"), ("blocks", "count"),
    ("blocks", "transfer_bytes"), ("blocks", "post_us_p50"),
]  # fmt: skip


@pytest.mark.parametrize(("group", "key"), BIG_KEYS)
def test_a_huge_integer_in_any_figure_reads_as_missing(tmp_path: Path, group: str, key: str) -> None:
    value: Any = [1, HUGE] if key == "slowdown_interval" else HUGE
    path = _damaged(tmp_path, _set(group, key, value))
    _report(path, "table")
    for point in _candidates(path):
        assert point["slowdown_interval"] is None or HUGE not in point["slowdown_interval"]


def test_readback_refuses_an_integer_no_float_or_int64_holds() -> None:
    assert number(HUGE) is None and number(-HUGE) is None and whole(HUGE) is None and whole(2**63) is None
    assert number(10**300) == 10**300 and whole(2**63 - 1) == 2**63 - 1


def test_an_interval_that_does_not_hold_its_slowdown_is_read_as_missing_and_the_page_draws(tmp_path: Path) -> None:
    """[-1e308, 1e308] once broke matplotlib (LinAlgError) on `report --format html`."""
    path = _damaged(tmp_path, _set("beside", "slowdown_interval", [-1e308, 1e308]))
    assert all(point["slowdown_interval"] is None for point in _candidates(path))
    assert "<html" in _report(path, "html").lower()
    for low_high in ([-1e308, 1e308], [0.0, 2.0], [2.0, 3.0], [1.2, 1.1], [1.0]):
        figure = BesideFigure.from_json({"load": "gemm:8192", "slowdown": 1.05, "slowdown_interval": low_high})
        assert figure is not None and figure.slowdown_interval is None, low_high
    figure = BesideFigure.from_json({"load": "gemm:8192", "slowdown": 1.05, "slowdown_interval": [1.0, 1.1]})
    assert figure is not None and figure.slowdown_interval == [1.0, 1.1]


@pytest.mark.parametrize("value", [0, -3.5, 1e308])
def test_a_sustained_rate_of_nothing_or_above_its_burst_is_read_as_missing(tmp_path: Path, value: float) -> None:
    """1e308 once widened the table past 120 columns and won every ranking."""
    path = _damaged(tmp_path, _set("blocks", "sustained_gbps", value))
    for point in _candidates(path):
        assert not point["sustained"] and point["gbps"] == point["burst_gbps"] < 1e6


def test_a_negative_noise_floor_host_time_or_pair_count_reads_as_missing() -> None:
    beside = BesideFigure.from_json({"load": "gemm:8192", "noise_floor": -0.01, "pairs_used": -4})
    assert beside is not None and beside.noise_floor is None and beside.pairs_used == 0
    blocks = BlockList.from_json({"count": 8, "host_us_per_descriptor": -1.0, "sustained_gbps": -2.0})
    assert blocks is not None and blocks.host_us_per_descriptor is None and blocks.sustained_gbps is None
