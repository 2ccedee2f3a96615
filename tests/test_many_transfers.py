"""Many transfers in flight cost what they move, not its square: a block table's reading and a
step's transfers are linear in transfers (they were quadratic: 65,536 one-block transfers took
minutes, a table of 2^20 printed nothing in 150 s), and a step or set-up of seconds is said on stderr."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rdmabench.measure import blocktable
from rdmabench.measure.slow import SLOW_S, Slow
from rdmabench.results.files.document import load as load_results
from rdmabench.wire import native

from .conftest import QUICK, run_cli

needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")


def _one_block_table(path: Path, transfers: int) -> Path:
    path.write_text(
        json.dumps({"block_size": 8, "transfers": [{"local": [t], "remote": [t]} for t in range(transfers)]})
    )
    return path


def _cpu_seconds(path: Path) -> float:
    """The least CPU time of three reads of the table (CPU time: another job on the machine adds little)."""
    best = float("inf")
    for _ in range(3):
        blocktable._PARSED.clear()
        began = time.process_time()
        blocktable.load(str(path))
        best = min(best, time.process_time() - began)
    return best


def test_reading_a_table_is_linear_in_its_transfers(tmp_path: Path) -> None:
    """8x the transfers: 8x the CPU time when linear, 64x when quadratic (it was: each transfer
    summed the blocks before it). The bound, 24x, leaves room for noise either way."""
    small = _cpu_seconds(_one_block_table(tmp_path / "small.json", 2048))
    large = _cpu_seconds(_one_block_table(tmp_path / "large.json", 16384))
    assert large < 24 * max(small, 1e-3), (small, large)


@needs_native
def test_a_step_of_32768_transfers_ends_in_good_time(tmp_path: Path) -> None:
    """2^15 one-block transfers in flight a step, from a table: the run ends, with its row (it took
    minutes: the table read and each step's polling were both quadratic in transfers)."""
    table = _one_block_table(tmp_path / "t.json", 1 << 15)
    out = tmp_path / "r.json"
    proc = run_cli(
        ["run", "--np", "2", "--test", "put", "--blocks-from", str(table), "-o", str(out), *QUICK], timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    _reference, entry = load_results(str(out))["results"]
    assert entry["blocks"]["batch"] == 1 << 15 and entry["validated"] and entry["wrong_bytes"] == 0


def test_what_takes_seconds_is_said_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    slow = Slow("rank 0 -> rank 1 (put, 8)", speaks=True)
    slow.after("step 1", SLOW_S / 2)
    assert capsys.readouterr().err == ""
    slow.after("step 2", SLOW_S + 1)
    assert capsys.readouterr().err == f"# rank 0 -> rank 1 (put, 8): step 2 took {SLOW_S + 1:.1f} s; still measuring\n"
    slow.after("step 3", SLOW_S + 1)  # within SAID_EVERY_S of the last line: not said again
    assert capsys.readouterr().err == ""
    quiet = Slow("elsewhere", speaks=False)  # the round's other ranks
    quiet.after("step 1", SLOW_S + 1)
    assert capsys.readouterr().err == ""
