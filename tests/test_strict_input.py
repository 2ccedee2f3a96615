"""Numbers and lists a user types are read strictly, in one place: whole numbers are ASCII digits
(`str.isdigit()` takes `²`, which `int()` then refuses: a traceback), a list names at least one
item (`--tests ,` measured nothing and passed), seconds are finite (`nan` was accepted)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rdmabench.errors import ConfigError
from rdmabench.units import check_seconds, is_digits, whole_number

from .conftest import run_cli, run_cli_here


def _one_line(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and all(word in lines[0] for word in words), lines[0]


@pytest.mark.parametrize("text", ["0", "7", "0042", "123456789"])
def test_ascii_digits_are_whole_numbers(text: str) -> None:
    assert is_digits(text) and whole_number(text, "--x") == int(text)


@pytest.mark.parametrize("text", ["", "²", "1²", "\u0663", "\uff13", "-1", "+1", " 1", "1.0", "1_000", "one"])
def test_anything_else_is_refused_by_name(text: str) -> None:
    assert not is_digits(text)
    with pytest.raises(ConfigError, match=r"--x takes whole numbers \(0-9\), not "):
        whole_number(text, "--x")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 0.0, 601.0])
def test_seconds_are_finite_and_within_their_range(value: float) -> None:
    with pytest.raises(ConfigError, match=f"--wait must be above 0 and at most 600 seconds, not {value}"):
        check_seconds(value, "--wait", 600)
    assert check_seconds(0.5, "--wait", 600) == 0.5


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["anchor", "--against", "nixl", "--blocks", "²"], ["--blocks takes whole numbers (0-9), not '²'"]),
        # a trailing comma is no item: still one list, so the line is about the next bad option (whether
        # or not NIXL is installed: nothing is measured)
        (["anchor", "--against", "nixl", "--blocks", "64,", "--nixl-seconds", "nan"], ["--nixl-seconds", "not nan"]),
        (["copy", "--gpus", "0,²"], ["--gpus takes whole numbers (0-9), not '²'"]),
        # the option's name as its help gives it (--tests is its old name, still read)
        (["anchor", "--against", "nixl", "--tests", ","], ["--test names nothing: give at least one"]),
        (["anchor", "--test", ""], ["--test names nothing"]),  # empty is a list of nothing, never the default
        (["anchor", "--against", "nixl", "--test", ""], ["--test names nothing"]),
        (["anchor", "--sizes", ""], ["bad size list", "empty entry"]),
        (["anchor", "--against", "nixl", "--layout", ","], ["--layout names nothing"]),
        (["anchor", "--against", "nixl", "--blocks", ", ,"], ["--blocks names nothing"]),
        (["anchor", "--tests", ","], ["--test names nothing"]),
        (["anchor", "--against", "nixl", "--nixl-seconds", "nan"], ["--nixl-seconds must be above 0", "not nan"]),
        (["anchor", "--against", "nixl", "--nixl-seconds", "inf"], ["--nixl-seconds", "inf"]),
    ],
)
def test_bad_numbers_and_empty_lists_are_one_line(tmp_path: Path, args: list[str], words: list[str]) -> None:
    out = tmp_path / "a.json"
    proc = run_cli_here([*args, "-o", str(out)], timeout=60)
    if not words:  # refused for another reason here (no NIXL), never for the list
        assert "names nothing" not in proc.stderr and "Traceback" not in proc.stderr
        return
    _one_line(proc, *words)
    assert not out.exists()


def test_storage_threads_take_ascii_digits(tmp_path: Path) -> None:
    proc = run_cli(
        ["storage", "f.dat", "--size", "1MiB", "--threads", "1,²", "-o", str(tmp_path / "r.json")], cwd=tmp_path
    )
    _one_line(proc, "--threads takes whole numbers (0-9), not '²'")
    assert not list(tmp_path.iterdir())
