"""Numbers and lists a user types are read strictly, in one place: whole numbers are ASCII digits
(`str.isdigit()` takes `²`, which `int()` then refuses: a traceback), a list names at least one
item (`--tests ,` measured nothing and passed), seconds are finite (`nan` was accepted)."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import click
import pytest

from rdmabench.cli import main
from rdmabench.errors import ConfigError
from rdmabench.measure.blocks import SmBudget
from rdmabench.units import ascii_float, ascii_int, check_seconds, is_digits, whole_number

from .conftest import rdmabench_env, run_cli, run_cli_here


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


# --- every number a user types: ASCII digits only (issue 55, 5) -----------------------------------

OTHER_DIGITS = ["\u0663", "\uff15", "\u0663.5", "1_0"]  # Arabic-Indic 3, fullwidth 5, 3.5, and 10 with an underscore


@pytest.mark.parametrize("text", OTHER_DIGITS)
def test_int_and_float_of_other_digits_are_refused(text: str) -> None:
    """int() and float() read them (int('\u0663') is 3); the package's readers never do."""
    with pytest.raises(ValueError, match="ASCII digits"):
        ascii_float(text)
    with pytest.raises(ValueError, match="ASCII digits"):
        ascii_int(text)
    assert ascii_int(" -12 ") == -12 and ascii_float("2.5e-1") == 0.25 and math.isnan(ascii_float("nan"))


def _numeric_options() -> list[tuple[str, str]]:
    """(command, option) for every option of every command whose value click reads as a number."""
    commands = main.commands  # type: ignore[attr-defined]
    found = []
    for name, command in sorted(commands.items()):
        for param in command.params:
            kind = getattr(param.type, "inner", param.type)
            if isinstance(param, click.Option) and isinstance(
                kind, (click.types.IntParamType, click.types.FloatParamType)
            ):
                found.append((name, max(param.opts, key=len)))
    return found


NUMERIC_OPTIONS = _numeric_options()


def test_the_numeric_options_are_found() -> None:
    assert ("run", "--blocks") in NUMERIC_OPTIONS and ("run", "--sample-time") in NUMERIC_OPTIONS
    assert ("storage", "--samples") in NUMERIC_OPTIONS and len(NUMERIC_OPTIONS) >= 15


@pytest.mark.parametrize(("command", "option"), NUMERIC_OPTIONS)
def test_every_numeric_option_takes_ascii_digits_only(tmp_path: Path, command: str, option: str) -> None:
    """click's INT and FLOAT call int() and float(): `run --blocks \u0663` measured three blocks."""
    given = {"check": ["x.json"], "compare": ["a", "b"], "report": ["x.json"], "storage": ["f.dat"]}.get(command, [])
    output = ["-o", str(tmp_path / "r.json")] if command in ("run", "anchor", "copy", "storage", "report") else []
    for text in ("\u0663", "1_0"):
        proc = run_cli_here([command, *given, option, text, *output])
        _one_line(proc, option, repr(text), "ASCII digits (0-9)")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--blocks", "3", "--layout", "runs:\u0663"], ["--layout runs:MEAN", "not '\u0663'"]),
        (["anchor", "--against", "nixl", "--blocks", "3", "--layout", "runs:\u0663"], ["--layout runs:MEAN"]),
        (["run", "--model-budget", "\uff15%"], ["--model-budget", "not '\uff15%'"]),
        (["compare", "a", "b", "--model-budget", "0.\uff15"], ["--model-budget"]),
        (["run", "--expect", "all=\u0660.5"], ["--expect", "the floor must be a number"]),
        (["check", "x.json", "--expect", "slowdown=\u0661.05"], ["--expect", "the ceiling must be a number"]),
        (["run", "--beside", "gemm:1_0"], ["--beside gemm:1_0", "not a size for gemm"]),
    ],
)
def test_numbers_inside_option_values_take_ascii_digits_only(tmp_path: Path, args: list[str], words: list[str]) -> None:
    """`--layout runs:\u0663` was kept as a label of its own, never merged with runs:3; `--model-budget \uff15%` was 5%."""
    output = ["-o", str(tmp_path / "r.json")] if args[0] in ("run", "anchor") else []
    _one_line(run_cli_here([*args, *output]), *words)


def test_posting_sms_takes_ascii_digits_only() -> None:
    with pytest.raises(ConfigError, match="give N, green:N or all"):
        SmBudget.parse("green:\u0663")
    assert SmBudget.parse("green:3") == SmBudget(3, True)


@pytest.mark.parametrize("value", ["\u0663MiB", "1_0MiB", "lots"])
def test_a_bad_max_input_is_refused_before_a_run_measures(tmp_path: Path, value: str) -> None:
    """RDMABENCH_MAX_INPUT was read when the run's results were read back: the run measured, then
    ended in two error lines with its stream left behind and no results file."""
    out = tmp_path / "r.json"
    proc = run_cli(["run", "--np", "2", "--sizes", "8", "-o", str(out)], env=rdmabench_env(RDMABENCH_MAX_INPUT=value))
    _one_line(proc, "RDMABENCH_MAX_INPUT: bad size", repr(value))
    assert not list(tmp_path.iterdir()) and proc.stdout == ""
