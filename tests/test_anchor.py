"""The anchor's reading of ucx_perftest and its table; one small side-by-side run end to end (the
comparisons themselves are a benchmark, run by hand: see the README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmabench.anchor.anchor import format_rows, median_rows
from rdmabench.anchor.perftest import Bracket, PerftestResult, parse_final
from rdmabench.anchor.rounds import DRIFT_LIMIT
from rdmabench.errors import LaunchError
from rdmabench.wire import native

from .conftest import run_cli, run_cli_here

# ucx_perftest -t tag_bw -s 8 on the CI VM (UCX 1.21): its "MB/s" are MiB/s.
_PERFTEST_TAIL = """\
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
Final:                 20000      0.062     0.070     0.070      108.31     108.31    14196324    14196324
"""


def test_perftest_final_line_in_si_units() -> None:
    result = parse_final(_PERFTEST_TAIL)
    assert result.bandwidth_gbps == pytest.approx(108.31 * 2**20 / 1e9)
    assert result.message_rate == 14196324 and result.latency_us == pytest.approx(0.070)
    with pytest.raises(LaunchError, match="no Final line"):
        parse_final("ucx_perftest: connection refused")


def test_rows_print_every_ratio_and_the_message_rate() -> None:
    row = {
        "test": "bw", "mode": "host", "size_bytes": 8, "anchor": 0.1136, "validated": 0.05, "unvalidated": 0.11,
        "python_loop": 0.002, "ratio_validated": 0.44, "ratio_unvalidated": 0.97, "ratio_python_loop": 0.018,
        "overhead_us_per_msg": 0.002, "engine": "native", "transport": "sysv/memory",
        "rdmabench_msg_rate": 13.75e6, "anchor_msg_rate": 14.2e6, "one_buffer": 0.1125, "ratio_one_buffer": 0.99,
    }  # fmt: skip
    text = format_rows([row])
    assert "0.97" in text and "0.018" not in text and "0.02" in text and "native sysv/memory" in text
    assert "0.113" in text and "0.99" in text and "1 buffer" in text
    assert "message rate at 8 B: rdmabench 13.75 M/s (unchecked), ucx_perftest 14.20 M/s: ratio 0.97" in text


@pytest.mark.skipif(native.load().library is None, reason="one-sided tests need the native loop")
def test_the_anchor_runs_end_to_end_on_a_one_sided_test(tmp_path: Path) -> None:
    """Both programs really run and their figures land in one row (a results-format change once broke
    the anchor without any test noticing)."""
    out = tmp_path / "anchor.json"
    proc = run_cli(["anchor", "--mode", "host", "--sizes", "64KiB", "--tests", "put", "-o", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    # The program's own (pageable) memory, and memory UCX allocates as ucx_perftest's is.
    assert [(r["mode"], r["rdmabench_mode"]) for r in rows] == [("host", "pageable"), ("host/ucx", "ucx")]
    for row in rows:
        assert row["test"] == "put" and row["anchor_test"] == "ucp_put_bw" and row["python_loop"] is None
        assert row["anchor"] > 0 and row["validated"] > 0
        assert row["ratio_validated"] == row["validated"] / row["anchor"]
        # ucx_perftest ran before rdmabench and after it: the anchor is their mean.
        assert row["anchor"] == pytest.approx((row["anchor_before"] + row["anchor_after"]) / 2)
        assert row["anchor_drift"] >= 0 and row["anchor_before"] > 0 and row["anchor_after"] > 0
    assert "put " in proc.stdout and "host/ucx" in proc.stdout


@pytest.mark.parametrize("test", ["bibw", "incast"])
def test_copy_engine_anchors_are_only_for_gpu_memory(test: str, tmp_path: Path) -> None:
    proc = run_cli_here(
        ["anchor", "--mode", "host", "--sizes", "1MiB", "--tests", test, "-o", str(tmp_path / "a.json")]
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and test in lines[0], proc.stderr
    assert not (tmp_path / "a.json").exists()


def test_a_bad_test_is_refused_before_the_good_ones_run(tmp_path: Path) -> None:
    """bw first, then a name that does not exist: nothing is measured (a comparison takes minutes)."""
    proc = run_cli_here(["anchor", "--mode", "host", "--tests", "bw,bandwidth", "--repeat", "3"])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and "'bandwidth'" in lines[0], proc.stderr
    assert proc.stdout == ""  # no round started, no table


def test_a_ceiling_row_prints_without_a_python_column() -> None:
    row = {
        "test": "bibw", "mode": "device", "size_bytes": 1 << 28, "anchor": 760.0, "validated": 740.0,
        "unvalidated": 750.0, "ratio_validated": 740 / 760, "ratio_unvalidated": 750 / 760, "python_loop": None,
        "ratio_python_loop": None, "overhead_us_per_msg": None, "engine": "native", "transport": "cuda_ipc/cuda",
    }  # fmt: skip
    text = format_rows([row])
    assert "bibw" in text and "0.97" in text and "0.99" in text and "native cuda_ipc/cuda" in text


def _round_row(size: int, anchor: float, checked: float, unchecked: float, drift: float = 0.02) -> dict[str, object]:
    return {
        "test": "bw", "mode": "host", "size_bytes": size, "anchor": anchor, "validated": checked,
        "unvalidated": unchecked, "python_loop": None, "ratio_validated": checked / anchor,
        "ratio_unvalidated": unchecked / anchor, "ratio_python_loop": None, "one_buffer": None,
        "ratio_one_buffer": None, "overhead_us_per_msg": 0.1, "engine": "native", "transport": "cma/memory",
        "anchor_before": anchor * (1 - drift / 2), "anchor_after": anchor * (1 + drift / 2), "anchor_drift": drift,
    }  # fmt: skip


def _perftest(gbps: float) -> PerftestResult:
    return PerftestResult(latency_us=1 / gbps, bandwidth_gbps=gbps, message_rate=gbps * 1e5)


def test_the_anchor_is_the_mean_of_the_runs_around_rdmabench_and_their_difference_its_drift() -> None:
    bracket = Bracket(_perftest(10.0), _perftest(12.0))
    assert bracket.mean(latency=False) == 11.0 and bracket.drift(latency=False) == pytest.approx(2 / 11)
    assert bracket.pair(latency=False) == (10.0, 12.0) and bracket.message_rate == pytest.approx(11e5)
    assert bracket.mean(latency=True) == pytest.approx((0.1 + 1 / 12) / 2)
    assert bracket.drift(latency=True) == pytest.approx((0.1 - 1 / 12) / ((0.1 + 1 / 12) / 2))
    assert Bracket(_perftest(10.0), _perftest(10.0)).drift(latency=True) == 0.0


def test_a_round_whose_anchor_moved_is_flagged_unsteady() -> None:
    steady, moved = _round_row(4096, 14.0, 13.0, 13.5), _round_row(16384, 27.0, 13.0, 13.5, drift=1.0)
    text = format_rows([steady, moved])
    lines = text.splitlines()
    assert any(line.startswith("bw ") and "4KiB" in line and " 2.0% " in line for line in lines), text
    assert any(line.startswith("bw ") and "16KiB" in line and "100.0%!" in line for line in lines), text
    unsteady = [line for line in lines if line.startswith("# UNSTEADY")]
    assert len(unsteady) == 1 and "16KiB" in unsteady[0] and "13.500 before" in unsteady[0], text
    assert "--repeat" in text


def test_repeated_rounds_give_the_steady_rounds_medians_beside_all_rounds() -> None:
    """A VM that flips between a slow and a fast state gives ratios of 0.3 or 2.6 in rounds where the
    two programs ran in different states; the steady rounds' medians leave those out."""
    assert DRIFT_LIMIT < 0.15
    rounds = [
        [_round_row(4096, 14.0, 13.0, 13.3, drift=0.03)],
        [_round_row(4096, 28.0, 38.0, 37.0, drift=0.9)],  # perftest slow then fast, rdmabench fast
        [_round_row(4096, 40.0, 36.0, 36.0, drift=0.05)],
        [_round_row(4096, 27.0, 13.0, 13.0, drift=1.0)],
        [_round_row(4096, 13.0, 12.0, 12.5, drift=0.15)],  # over the limit too
    ]
    (row,) = median_rows(rounds)  # type: ignore[arg-type]
    assert row["steady_rounds"] == 2 and row["anchor_drift"] == 0.15
    assert row["steady_ratio_unvalidated"] == pytest.approx((13.3 / 14 + 36 / 40) / 2)
    assert row["steady_ratio_validated"] == pytest.approx((13 / 14 + 36 / 40) / 2)
    assert "steady_ratio_one_buffer" not in row  # no round had the column
    assert row["ratio_unvalidated"] == pytest.approx(13.3 / 14)  # all five rounds' median, unchanged
    text = format_rows([row])
    assert f"steady rounds 2 of 5: checked {(13 / 14 + 36 / 40) / 2:.2f}, unchecked" in text, text
    assert "UNSTEADY" not in text  # the per-round warning is for one-round tables
    bw_line = next(line for line in text.splitlines() if line.startswith("bw "))
    assert " 15.0% " in bw_line and "!" not in bw_line  # the rounds' median drift, not a verdict on a round
    none_steady = median_rows([[_round_row(4096, 27.0, 13.0, 13.0, drift=1.0)]] * 2)  # type: ignore[list-item]
    assert none_steady[0]["steady_rounds"] == 0 and "steady_ratio_validated" not in none_steady[0]
    assert "steady rounds 0 of 2" in format_rows(none_steady)


def test_a_round_at_the_drift_limit_is_steady_and_a_ceiling_row_has_no_bracket() -> None:
    at_limit = [[_round_row(65536, 10.0, 9.0, 9.5, drift=DRIFT_LIMIT)] for _ in range(3)]
    (row,) = median_rows(at_limit)  # type: ignore[arg-type]
    assert row["steady_rounds"] == 3 and row["steady_ratio_unvalidated"] == pytest.approx(0.95)
    ceiling = {
        "test": "bibw", "mode": "device", "size_bytes": 1 << 28, "anchor": 760.0, "validated": 740.0,
        "unvalidated": 750.0, "ratio_validated": 740 / 760, "ratio_unvalidated": 750 / 760, "python_loop": None,
        "ratio_python_loop": None, "overhead_us_per_msg": None, "engine": "native", "transport": "cuda_ipc/cuda",
    }  # fmt: skip
    (merged,) = median_rows([[dict(ceiling)], [dict(ceiling)]])
    assert "steady_rounds" not in merged and "anchor_drift" not in merged["runs"]
    assert "steady rounds" not in format_rows([merged]) and "UNSTEADY" not in format_rows([merged])


def test_an_incomplete_repeat_of_one_finished_round_still_warns_of_its_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Generated rounds stand in for the comparisons: this is the merging and printing.)"""
    from rdmabench.anchor import anchor

    calls = []

    def one_round(mode: str, sizes: list[int], tests: list[str]) -> list[dict[str, object]]:
        calls.append(1)
        if len(calls) == 2:
            raise LaunchError("ucx_perftest client failed: connection refused")
        return [_round_row(4096, 27.0, 13.0, 13.0, drift=1.0)]

    monkeypatch.setattr(anchor, "_compare_once", one_round)
    rows = anchor.compare("host", [4096], ["bw"], repeat=3)
    assert rows[0]["rounds"] == 1 and rows[0]["incomplete"]
    text = format_rows(rows)
    assert "# UNSTEADY: bw 4KiB" in text and "100.0%!" in text


def test_repeated_rounds_keep_each_ratio_side_by_side_then_take_medians() -> None:
    """The median of the rounds' ratios, not the ratio of the medians: a round whose anchor and
    rdmabench both ran slow (the machine was busy) must not skew the ratio."""
    rounds = [
        [_round_row(65536, 10.0, 9.0, 9.5)],
        [_round_row(65536, 4.0, 3.8, 3.6)],  # everything slow in this round: the ratio still 0.9-0.95
        [_round_row(65536, 12.0, 10.0, 12.0)],
    ]
    (row,) = median_rows(rounds)  # type: ignore[arg-type]
    assert row["rounds"] == 3 and row["anchor"] == 10.0 and row["validated"] == 9.0
    assert row["ratio_unvalidated"] == pytest.approx(0.95)  # medians of 0.95, 0.9, 1.0
    assert row["runs"]["ratio_validated"] == pytest.approx([0.9, 0.95, 10 / 12])
    assert row["python_loop"] is None and "python_loop" not in row["runs"]
    text = format_rows([row])
    assert "median of 3 rounds" in text and "unchecked 0.90-1.00" in text and "anchor 4.000-12.000" in text


def test_a_figure_some_rounds_lack_is_not_shown_and_a_changed_engine_is() -> None:
    rounds = [[_round_row(65536, 10.0, 9.0, 9.5)] for _ in range(3)]
    rounds[0][0]["python_loop"], rounds[0][0]["ratio_python_loop"] = 5.0, 0.5  # only the first round has it
    rounds[2][0]["engine"] = "python"
    (row,) = median_rows(rounds)  # type: ignore[arg-type]
    assert row["python_loop"] is None and row["ratio_python_loop"] is None and "python_loop" not in row["runs"]
    assert row["engine"] == "native | python" and row["transport"] == "cma/memory"


def test_repeated_latency_rows_print_without_a_message_rate() -> None:
    """lat rows have no message rate: merging rounds must not invent one (a --repeat lat run once
    crashed printing None / 1e6 after five rounds of measuring)."""
    row = dict(_round_row(8, 0.07, 0.09, 0.09), test="lat")
    (merged,) = median_rows([[dict(row)], [dict(row)], [dict(row)]])  # type: ignore[list-item]
    assert "anchor_msg_rate" not in merged and "message rate" not in format_rows([merged])
    assert "lat " in format_rows([merged])


def test_rounds_that_measured_different_rows_are_refused() -> None:
    with pytest.raises(LaunchError, match="different rows"):
        median_rows([[_round_row(4096, 1, 1, 1)], [_round_row(65536, 1, 1, 1)]])  # type: ignore[list-item]


def test_repeat_below_one_is_one_line() -> None:
    proc = run_cli_here(["anchor", "--repeat", "0"])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and "--repeat" in lines[0], proc.stderr


STEADY_KEYS = ["steady_ratio_validated", "steady_ratio_unvalidated"]  # no one-buffer figure here


def test_a_failed_round_keeps_the_rounds_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five host rounds take minutes: the third failing keeps the medians of two, marked incomplete.
    (Generated rounds stand in for the comparisons: this is the merging, not the measuring.)"""
    from rdmabench.anchor import anchor

    calls = []

    def one_round(mode: str, sizes: list[int], tests: list[str]) -> list[dict[str, object]]:
        calls.append(1)
        if len(calls) == 3:
            raise LaunchError("ucx_perftest client failed: connection refused")
        return [_round_row(65536, 10.0, 9.0, 9.0 + len(calls))]

    monkeypatch.setattr(anchor, "_compare_once", one_round)
    (row,) = anchor.compare("host", [65536], ["bw"], repeat=5)
    assert len(calls) == 3 and row["rounds"] == 2 and row["unvalidated"] == 10.5
    assert row["incomplete"].startswith("round 3 of 5 failed (ucx_perftest client failed")
    # The JSON's shape: the round's own keys in their order, then the merge's, `incomplete` last.
    own = list(_round_row(65536, 10.0, 9.0, 9.0))
    assert list(row) == [*own, "rounds", "runs", "steady_rounds", *STEADY_KEYS, "incomplete"]
    assert "INCOMPLETE: round 3 of 5" in format_rows([row])

    def broken(mode: str, sizes: list[int], tests: list[str]) -> list[dict[str, object]]:
        raise LaunchError("rdmabench run failed: no UCX")

    monkeypatch.setattr(anchor, "_compare_once", broken)
    with pytest.raises(LaunchError, match="no UCX"):  # the first round failing has nothing to keep
        anchor.compare("host", [65536], ["bw"], repeat=3)
