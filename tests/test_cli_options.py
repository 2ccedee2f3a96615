"""The command line's options: one name per concept in every command (an old name still parses, and
is not shown), and the choices --help lists are the registries' (tests, memory modes, patterns,
report formats), never a copy that can drift. In-process: click parses, nothing runs."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from rdmabench.cli import main
from rdmabench.job.schedule import PATTERNS
from rdmabench.modes import MemoryMode
from rdmabench.results.reports.formats import FORMATS

COMMANDS: dict[str, click.Command] = main.commands  # type: ignore[attr-defined]


def _parsed(command: str, args: list[str]) -> dict[str, object]:
    with COMMANDS[command].make_context(command, args) as ctx:
        return dict(ctx.params)


def _help(command: str) -> str:
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    ("command", "old", "new", "value", "param", "parsed"),
    [
        ("run", "--links", "--link-class", "inter-node", "link_class", "inter-node"),
        ("report", "--size", "--sizes", "8", "sizes", "8"),
        ("check", "--size", "--sizes", "8", "sizes", "8"),
        ("compare", "--threshold", "--tolerance", "0.2", "tolerance", 0.2),
        ("anchor", "--tests", "--test", "lat", "tests", "lat"),
        ("storage", "--memory", "--mode", "host", "memory", "host"),
        ("storage", "--buffers", "--stage-buffers", "3", "buffers", 3),
    ],
)
def test_an_old_option_name_still_parses_and_is_not_shown(
    command: str, old: str, new: str, value: str, param: str, parsed: object
) -> None:
    args = {"report": ["r.json"], "check": ["r.json"], "compare": ["a", "b"], "storage": ["f.dat"]}.get(command, [])
    assert _parsed(command, [*args, old, value])[param] == parsed
    assert _parsed(command, [*args, new, value])[param] == parsed
    shown = _help(command)
    assert new in shown and f"{old} " not in shown and f"{old}," not in shown


def test_one_name_per_concept_across_commands() -> None:
    """The spellings that differed between commands are gone from every --help (storage's --size is
    another concept: the size of the file it creates)."""
    for command in COMMANDS:
        shown = _help(command)
        for old in ("--links ", "--size ", "--tests ", "--memory ", "--buffers ", "--threshold "):
            if (command, old) != ("storage", "--size "):
                assert old not in shown, f"{command} --help shows {old.strip()}"


def test_run_help_lists_every_test_mode_and_pattern() -> None:
    shown = _help("run")
    # Built from the registry when the command is defined: every built-in kind (a plugin another test
    # registers later in this process is not in it).
    listed = re.search(r"^\s+--test (\S+)", shown, re.M).group(1).split("|")  # type: ignore[union-attr]
    assert {"bw", "bibw", "lat", "put", "get", "put-lat", "get-lat"} <= set(listed)
    assert "--mode " + "|".join(mode.value for mode in MemoryMode) in shown
    assert "--pattern " + "|".join(PATTERNS) in shown


def test_every_mode_and_pattern_says_what_it_is() -> None:
    """Every mode has its line in MODE_HELP; every pattern's record its summary (--pattern's help)."""
    from rdmabench.modes import MODE_HELP

    assert set(MODE_HELP) == set(MemoryMode)
    assert all(pattern.summary for pattern in PATTERNS.values())


def test_report_help_lists_every_format() -> None:
    assert "--format " + "|".join(FORMATS) in _help("report")


def test_a_size_option_names_itself_in_its_error() -> None:
    result = CliRunner().invoke(main, ["run", "--pool", "lots", "--blocks", "4"])
    assert result.exit_code == 2
    assert "rdmabench: error: --pool: bad size 'lots'" in result.output
