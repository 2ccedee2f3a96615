"""The docs cannot drift from the code silently: every `rdmabench COMMAND --option` shown in a code
block of README.md or docs/*.md names a command that exists and options its --help lists, every
`python -m rdmabench.X` names a module that exists, and every relative link points to a file (and a
heading) that exists. In-process (click's CliRunner), so it costs a second, not a rank."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rdmabench.cli import main

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Code blocks that hold data or code, not command lines.
NOT_SHELL = {"json", "python", "jsonl", "csv"}
# Commands that start another program: rdmabench may come later on their line (`mpirun -n 2 rdmabench
# run`, `mpiexec ... python3 -m rdmabench run`); anywhere else it is an argument (`ruff check rdmabench`).
LAUNCHERS = {"mpirun", "mpiexec", "srun"}
MODULE = re.compile(r"-m (rdmabench(?:\.\w+)+)")
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _code_lines(page: Path) -> list[str]:
    """The command lines of a page's fenced code blocks: continuation lines joined, comments dropped."""
    lines: list[str] = []
    fence: str | None = None
    pending = ""
    for raw in page.read_text().splitlines():
        stripped = raw.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip() or "text")
            continue
        if fence is None or fence in NOT_SHELL:
            continue
        if fence == "console":  # a session: commands after the prompt, the rest is their output
            if not stripped.startswith("$ "):
                continue
            stripped = stripped[2:]
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    return lines


def _commands_of(line: str) -> list[tuple[str, list[str]]]:
    """(command, long options) of each rdmabench invocation on a command line."""
    found = []
    for piece in re.split(r"\s(?:&&|\|\||;|\|)\s", line):
        piece = piece.split(" # ")[0].split(" > ")[0]  # a trailing comment or redirection is not its options
        words = [w for w in piece.split() if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # VAR=value prefixes
        if not words:
            continue
        names = [i for i, w in enumerate(words) if w.split("/")[-1] == "rdmabench"]
        if words[0].split("/")[-1] in LAUNCHERS or "python" in words[0]:
            names = [i for i in names if i > 0]
        else:
            names = [i for i in names if i == 0]
        for i in names[:1]:
            if i + 1 < len(words):
                found.append((words[i + 1], LONG_OPTION.findall(" ".join(words[i + 2 :]))))
    return found


def _shown() -> list[tuple[str, str, str, list[str]]]:
    return [
        (page.relative_to(REPO).as_posix(), line, command, options)
        for page in PAGES
        for line in _code_lines(page)
        for command, options in _commands_of(line)
    ]


@cache
def _help(command: str) -> str:
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_docs_show_commands() -> None:
    """The parser finds the README's five commands and every command of the CLI somewhere."""
    shown = _shown()
    assert {command for _, _, command, _ in shown} >= set(main.commands)  # type: ignore[attr-defined]
    readme = {command for page, _, command, _ in shown if page == "README.md"}
    assert readme >= {"run", "doctor", "report", "check", "anchor"}


@pytest.mark.parametrize("page", [page.relative_to(REPO).as_posix() for page in PAGES])
def test_every_command_shown_exists_with_its_options(page: str) -> None:
    commands: dict[str, click.Command] = main.commands  # type: ignore[attr-defined]
    problems = []
    for where, line, command, options in _shown():
        if where != page:
            continue
        if command not in commands:
            problems.append(f"{line!r}: no command {command!r}")
            continue
        listed = set(LONG_OPTION.findall(_help(command)))
        problems += [
            f"{line!r}: `rdmabench {command} --help` lists no {option}" for option in options if option not in listed
        ]
    assert problems == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_module_run_with_python_m_exists(page: Path) -> None:
    text = page.read_text()
    missing = [name for name in MODULE.findall(text) if importlib.util.find_spec(name) is None]
    assert missing == []


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but - and _ dropped, spaces as -."""
    anchors = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_relative_link_points_to_what_exists(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    assert broken == []


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    """.ci/run says it runs the README's test command exactly."""
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    command = ci[ci.index("# The README's test command, exactly.") + 1]
    assert command == ".venv/bin/python -m pytest -q"
    assert f"```sh\n{command}\n```" in (REPO / "README.md").read_text()
