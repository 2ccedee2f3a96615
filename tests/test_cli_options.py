"""The command line's options: one name per concept in every command (an old name still parses, and
is not shown), and the choices --help lists are the registries' (tests, memory modes, patterns,
report formats), never a copy that can drift. In-process: click parses, nothing runs."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import rdmabench
from rdmabench.cli import main
from rdmabench.errors import ConfigError
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


SHARED_WITH_ANCHOR = ("--blocks", "--layout", "--model", "--kv-layout", "--prompt", "--posting", "--beside")


def _option(command: str, flag: str) -> click.Option:
    return next(p for p in COMMANDS[command].params if isinstance(p, click.Option) and flag in p.opts)


@pytest.mark.parametrize("flag", SHARED_WITH_ANCHOR)
def test_anchor_spells_runs_block_list_options_as_run_does(flag: str) -> None:
    """anchor --against nixl takes run's block-list, handoff and --beside options from run's groups: the
    same metavar (a list where anchor takes several) and run's help, never a second spelling."""
    ran, anchored = _option("run", flag), _option("anchor", flag)
    assert anchored.metavar in (ran.metavar, f"{ran.metavar}[,...]", f"{ran.metavar}[,N...]")
    run_help, anchor_help = ran.help or "", anchored.help or ""
    if flag == "--beside":  # what each command does with the load, then the same loads
        assert run_help.partition(" Loads: ")[2] == anchor_help.partition(" Loads: ")[2] != ""
    else:
        assert anchor_help.startswith(run_help)


def test_several_block_counts_and_layouts_parse_for_anchor_one_for_run() -> None:
    parsed = _parsed("anchor", ["--blocks", "1,1024,32768", "--layout", "contiguous,runs:4"])
    assert parsed["counts"] == (1, 1024, 32768) and parsed["layouts"] == ("contiguous", "runs:4")
    assert _parsed("run", ["--blocks", "16", "--layout", "random"])["blocks"] == 16
    with pytest.raises(ConfigError, match="--blocks takes whole numbers"):
        _parsed("anchor", ["--blocks", "8,x"])


def test_the_handoff_checks_are_written_once() -> None:
    """run and anchor refuse --kv-layout or --prompt without --model, and --model with what it sets, by
    one check of the configuration's (job.sizes.model_handoff): each message is written in one place."""
    package = Path(rdmabench.__file__).parent
    for words in ("give --model as well", "--model sets the blocks and their size"):
        holding = [p.name for p in package.rglob("*.py") if words in p.read_text()]
        assert holding == ["sizes.py"], (words, holding)
