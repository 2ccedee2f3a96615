"""No output replaces one of its command's inputs, not even with --force ("never a lost results file"):
`report -o`, `check --json/--junit/--drain`, `run -o` (its --blocks-from table), `anchor -o` (a --model
file), `storage -o` (the file it measures) naming a file the command reads, by any spelling, a hard link or a symbolic link either
way, is refused in one line naming the option and the file (exit 2), before anything is read or
written. Real files (GENERATED runs of devtools.million), the CLI in this process."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import million_sources, run_cli_here


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two runs (a and b), a damaged summary beside them (c.json: read, it is a warning)
    and a node list."""
    from devtools.million import generate

    folder = tmp_path_factory.mktemp("runs")
    for seed, name in enumerate(("a", "b"), start=1):
        generate(str(folder / f"{name}.json"), 4, 8, million_sources(), seed=seed)
    (folder / "c.json").write_text('{"schema": ')
    (folder / "nodes.txt").write_text("node0000\n")
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if not path.is_symlink()}


def _refused(folder: Path, args: list[str], option: str, output: str, input_name: str) -> None:
    before = _snapshot(folder)
    proc = run_cli_here(args)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr  # no "skipped c.json": nothing was read
    assert lines[0].startswith(f"rdmabench: error: {option} {output} is the same file as the input "), lines[0]
    assert input_name in lines[0] and "refused, even with --force" in lines[0], lines[0]
    assert proc.stdout == "" and _snapshot(folder) == before


# Other names of runs/a.json: (the output's spelling, the input's), made in the folder `runs`.
SPELLINGS: dict[str, Callable[[Path], tuple[str, str]]] = {
    "the same path": lambda d: (str(d / "a.json"), str(d / "a.json")),
    "another spelling": lambda d: (f"{d}/./../{d.name}//a.json", str(d / "a.json")),
    "relative and absolute": lambda d: (os.path.relpath(d / "a.json"), str(d / "a.json")),
    "a folder that holds it": lambda d: (str(d / "a.json"), str(d)),
    "its links file": lambda d: (str(d / "a.links.jsonl"), str(d / "a.json")),
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_report_never_replaces_its_own_input(runs: Path, spelling: str) -> None:
    output, given = SPELLINGS[spelling](runs)
    for force in ([], ["--force"]):  # the refusal is this one, with --force or without
        shown = os.path.basename(output if spelling != "a folder that holds it" else "a.json")
        _refused(runs, ["report", given, "-o", output, "--format", "json", *force], "--output", output, shown)


@pytest.mark.parametrize("link", ["hard", "symbolic to the input", "symbolic from the input"])
def test_a_link_to_an_input_is_the_input(runs: Path, tmp_path: Path, link: str) -> None:
    """The output is another name of an input (a hard link, or a symbolic link to it), or the input is a
    symbolic link to the output: the write would replace the results all the same."""
    other = tmp_path / "other.json"
    if link == "hard":
        os.link(runs / "b.json", other)
        given, output = str(runs / "b.json"), str(other)
    elif link == "symbolic to the input":
        other.symlink_to(runs / "b.json")
        given, output = str(runs / "b.json"), str(other)
    else:
        other.symlink_to(runs / "b.json")
        given, output = str(other), str(runs / "b.json")
    _refused(runs, ["report", given, "-o", output, "--force"], "--output", output, os.path.basename(given))


@pytest.mark.parametrize(
    ("option", "more"),
    [("--json", []), ("--junit", []), ("--drain", []), ("--drain", ["--nodes", "nodes.txt"])],
)
def test_check_never_replaces_what_it_judged(runs: Path, option: str, more: list[str]) -> None:
    nodes = [more[0], str(runs / more[1])] if more else []
    output = str(runs / "nodes.txt") if more else str(runs / "b.json")
    args = ["check", "--expect", "default", str(runs), option, output, *nodes, "--force"]
    _refused(runs, args, option, output, "nodes.txt" if more else "b.json")


def test_check_never_replaces_its_baseline(runs: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "base.links.jsonl"  # the baseline's links file, named beside its summary
    baseline.write_text("")
    (tmp_path / "base.json").write_text("{}")
    args = ["check", "--expect", "default", str(runs / "a.json"), "--baseline", str(tmp_path / "base.json")]
    _refused(tmp_path, [*args, "--json", str(baseline), "--force"], "--json", str(baseline), "base.links.jsonl")


def test_run_anchor_and_storage_never_replace_the_file_they_read(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    table.write_text('{"block_bytes": 4096, "transfers": [[[0, 0]]]}')
    _refused(
        tmp_path, ["run", "--blocks-from", str(table), "-o", str(table), "--force"], "--output", str(table), "table"
    )
    model = ["anchor", "--against", "nixl", "--model", f"{table},tp=2", "-o", str(table), "--force"]
    _refused(tmp_path, model, "--output", str(table), "table")  # a --model file, before its overrides
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * 4096)
    _refused(tmp_path, ["storage", str(data), "-o", str(data), "--force"], "--output", str(data), "data.bin")


def test_an_output_beside_the_inputs_is_written(runs: Path, tmp_path: Path) -> None:
    """Not an input: a new file in the folder reported on, and an existing file elsewhere with --force."""
    beside = runs / "report.md"
    try:
        first = run_cli_here(["report", str(runs / "a.json"), "-o", str(beside), "--format", "markdown"])
        assert first.returncode == 0 and beside.read_text().startswith("# rdmabench report"), first.stderr
    finally:
        beside.unlink(missing_ok=True)
    elsewhere = tmp_path / "verdict.json"
    elsewhere.write_text("last week's verdict")
    judged = run_cli_here(["check", "--expect", "all=0.01", str(runs), "--json", str(elsewhere), "--force"])
    assert judged.returncode == 0 and '"outcome"' in elsewhere.read_text(), judged.stderr


def test_a_renamed_summarys_links_file_is_its_input(runs: Path, tmp_path: Path) -> None:
    """A summary renamed (or copied) still reads the links file its record names, `a.links.jsonl`: that
    file is an input though no name derives from the summary's, and `check`'s verdict or a report never
    replaces it."""
    folder = tmp_path / "renamed"
    folder.mkdir()
    (folder / "kept.json").write_bytes((runs / "a.json").read_bytes())
    (folder / "a.links.jsonl").write_bytes((runs / "a.links.jsonl").read_bytes())
    links = str(folder / "a.links.jsonl")
    args = ["report", str(folder / "kept.json"), "--format", "json", "-o", links, "--force"]
    _refused(folder, args, "--output", links, "a.links.jsonl")
    args = ["check", "--expect", "default", str(folder / "kept.json"), "--json", links, "--force"]
    _refused(folder, args, "--json", links, "a.links.jsonl")


def test_a_links_file_of_any_name_is_its_summarys_input(runs: Path, tmp_path: Path) -> None:
    """A summary reads the links file its record names, whatever that name ends with; only
    `*.links.jsonl` was listed, so `report s.json -o s.data --force` replaced the links file it had
    just read (a folder given as the input too)."""
    folder = tmp_path / "odd"
    folder.mkdir()
    summary = json.loads((runs / "a.json").read_text())
    summary["links"]["file"] = "s.data"
    (folder / "s.json").write_text(json.dumps(summary))
    (folder / "s.data").write_bytes((runs / "a.links.jsonl").read_bytes())
    assert run_cli_here(["report", str(folder / "s.json"), "--format", "json"]).returncode == 0  # it reads
    links = str(folder / "s.data")
    for given in (str(folder / "s.json"), str(folder)):
        _refused(folder, ["report", given, "--format", "json", "-o", links, "--force"], "--output", links, "s.data")
        args = ["check", "--expect", "default", given, "--junit", links, "--force"]
        _refused(folder, args, "--junit", links, "s.data")


@pytest.mark.parametrize("command", ["report", "check"])
def test_a_report_or_verdict_kept_in_the_folder_is_replaced_on_the_next_run(
    runs: Path, tmp_path: Path, command: str
) -> None:
    """The command's own JSON kept in the results folder is found there as a file that is no results
    (the loader skips it): the next run's --force replaces it, as any earlier output. A results file
    there, even damaged (c.json), stays an input."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("a.json", "a.links.jsonl", "c.json"):
        (folder / name).write_bytes((runs / name).read_bytes())
    kept = str(folder / "kept.json")
    args = ["report", str(folder), "--format", "json", "-o", kept]
    if command == "check":
        args = ["check", "--expect", "all=0.01", str(folder), "--json", kept]
    for force in ([], ["--force"]):  # written, then replaced
        proc = run_cli_here([*args, *force])
        assert proc.returncode == 0 and "same file as the input" not in proc.stderr, proc.stderr
    assert Path(kept).read_text().startswith("{")
    damaged = str(folder / "c.json")
    option = "--output" if command == "report" else "--json"
    _refused(folder, [*args[:-1], damaged, "--force"], option, damaged, "c.json")


def test_a_report_to_dash_goes_to_standard_output(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o -` is standard output, as in the tools a user knows (it wrote a file named `-`)."""
    monkeypatch.chdir(tmp_path)
    proc = run_cli_here(["report", str(runs / "a.json"), "--format", "json", "-o", "-"])
    assert proc.returncode == 0 and proc.stdout.startswith("{"), proc.stderr
    assert not (tmp_path / "-").exists()
