"""The docs cannot drift from the code silently: every `rdmabench COMMAND --option` shown in a code
block of README.md or docs/*.md names a command that exists and options its --help lists, every
`python -m rdmabench.X` (or `devtools.X`) names a module of this tree, every relative link points to a
file (and a heading) that exists, ARCHITECTURE.md's layer table is the one tests/test_layout.py
enforces and names modules that exist, and the environment table names every RDMABENCH_* variable the
package reads. In-process (click's CliRunner), so it costs a second, not a rank."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rdmabench.cli import main

from .test_layout import BASE, LAYERS, ROOMS, WINGS

REPO = Path(__file__).resolve().parents[1]
PAGES = [
    REPO / "README.md",
    REPO / "ARCHITECTURE.md",
    REPO / "CHANGELOG.md",
    REPO / "results" / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
]
# Code blocks that hold data or code, not command lines.
NOT_SHELL = {"json", "python", "jsonl", "csv"}
# Commands that start another program: rdmabench may come later on their line (`mpirun -n 2 rdmabench
# run`, `mpiexec ... python3 -m rdmabench run`); anywhere else it is an argument (`ruff check rdmabench`).
LAUNCHERS = {"mpirun", "mpiexec", "srun"}
MODULE = re.compile(r"-m ((?:rdmabench|devtools)(?:\.\w+)+)")
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
    """In this tree (not wherever the import system would find a module of that name: an editable
    install of another checkout still has the modules this one moved)."""
    text = page.read_text()
    missing = [
        name
        for name in MODULE.findall(text)
        if not (
            REPO.joinpath(*name.split(".")).with_suffix(".py").is_file() or REPO.joinpath(*name.split(".")).is_dir()
        )
    ]
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


def _layer_rows() -> list[tuple[str, str]]:
    """ARCHITECTURE.md's layer table: (layer cell, what it holds) per row."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    table = text.split("## Layers", 1)[1].split("\n\n| layer |", 1)[1].split("\n\n", 1)[0]
    return [tuple(cell.strip() for cell in line.strip("|").split("|", 1)) for line in table.splitlines()[2:]]  # type: ignore[misc]


def _layer_name(cell: str) -> str:
    """'base: `errors`, ...' -> base; '`hardware/`' -> hardware; '`cli.py`' -> cli."""
    if ":" in cell:
        return cell.split(":", 1)[0]
    return cell.strip("`").removesuffix("/").removesuffix(".py")


def test_the_architecture_layer_table_is_the_one_the_layout_test_enforces() -> None:
    rows = _layer_rows()
    assert [_layer_name(cell) for cell, _ in rows] == LAYERS
    named = dict((_layer_name(cell), cell) for cell, _ in rows)
    assert set(re.findall(r"`(\w+)`", named["base"])) == BASE - {"__init__", "__version__"}
    assert set(re.findall(r"`(\w+)/`", named["wings"])) == WINGS
    results = dict((_layer_name(cell), held) for cell, held in rows)["results"]
    assert [room for room in re.findall(r"`(\w+)/`", results) if room in ROOMS] == ROOMS


def _exists_in(folders: list[Path], name: str) -> bool:
    stem = name.removesuffix("/")
    return any(
        folder.name == stem
        or folder.joinpath(stem).exists()
        or any(folder.rglob(stem + ".py"))
        or any(folder.rglob(stem))
        for folder in folders
    )


def test_every_module_the_architecture_names_exists() -> None:
    """Each name in backticks in a layer's row (`contract`, `kinds/`, `hotloop.h`) is a module, a
    package or a file of that layer; each dotted module of the flow of one run exists."""
    package = REPO / "rdmabench"
    missing = []
    for cell, held in _layer_rows():
        layer = _layer_name(cell)
        folders = {"base": [package], "wings": [package / wing for wing in WINGS], "cli": [package]}.get(
            layer, [package / layer]
        )
        for name in re.findall(r"`([a-z_]+(?:/|\.py|\.[ch]|\.cu)?)`", cell + " " + held):
            if layer == "base" and not name.endswith("/"):
                found = (package / f"{name}.py").is_file() or (name.endswith(".py") and (package / name).is_file())
            else:
                found = _exists_in(folders, name)
            if not found:
                missing.append(f"{layer}: {name}")
    flow = (REPO / "ARCHITECTURE.md").read_text().split("## The flow of one run", 1)[1].split("```")[1]
    for dotted in re.findall(r"\b([a-z_]+(?:\.[a-z_]+)+)", flow):
        parts = dotted.split(".")
        module = package.joinpath(*parts[:-1]).with_suffix(".py")
        if package.joinpath(*parts).with_suffix(".py").is_file() or package.joinpath(*parts).is_dir():
            continue
        if not (module.is_file() and re.search(rf"^(?:def|class) {parts[-1]}\b", module.read_text(), flags=re.M)):
            missing.append(f"flow: {dotted}")  # neither a module nor a function or class of one
    assert missing == []


# Variables rdmabench sets itself, for the ranks it starts: not the user's to set.
INTERNAL_VARIABLES = {
    "RDMABENCH_RESERVED_OUTPUT": "the results file the launcher reserved for its ranks",
    "RDMABENCH_STARTED_DIR": "the job directory the launcher made for its ranks",
    "RDMABENCH_UCX_SCRATCH": "where the launcher's ranks put their UCX log directories",
}


def test_the_environment_table_names_every_variable_the_package_reads() -> None:
    read = {
        name
        for path in (REPO / "rdmabench").rglob("*.py")
        for name in re.findall(r"\bRDMABENCH_[A-Z_]+\b", path.read_text())
    }
    usage = (REPO / "docs" / "usage.md").read_text()
    section = usage.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    table = set(re.findall(r"^\| `(RDMABENCH_[A-Z_]+)", section, flags=re.M))
    assert read - set(INTERNAL_VARIABLES) == table
    assert set(INTERNAL_VARIABLES) <= read  # each still exists


def test_every_committed_results_file_keeps_its_links_file_beside_it() -> None:
    """A committed measurement whose summary names a links file that is not beside it cannot be read
    by `report` (it is skipped with a warning): files renamed after the run broke five of them once."""
    missing = []
    for summary in sorted((REPO / "measurements").rglob("*.json")):
        try:
            document = json.loads(summary.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        links = document.get("links") if isinstance(document, dict) else None
        if isinstance(links, dict) and links.get("file") and not (summary.parent / str(links["file"])).exists():
            missing.append(f"{summary.relative_to(REPO)} -> {links['file']}")
    assert not missing, missing


def test_no_page_cites_a_notes_file_the_repository_does_not_have() -> None:
    """docs/methodology.md cited "FIELD_NOTES", a file of the sessions' own, outside the repository."""
    pages = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for name in re.findall(r"\b[A-Z][A-Z_]*NOTES[A-Z_]*(?:\.md)?\b", page.read_text()):
            assert list(REPO.rglob(name if name.endswith(".md") else f"{name}*")), f"{page.name} cites {name}"
