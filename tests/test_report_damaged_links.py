"""A damaged links file among several runs costs only its own run, as a damaged summary does: `report`,
`check` and `compare` leave that run out with one warning naming the file and why, take back what it
had given the rows before the damage was met (one pass: the file is judged while it is aggregated),
and aggregate the others; the verdict and exit code are those of the other runs. A single damaged run
is still one error line and exit 2. The runs are GENERATED (devtools.million, marked so in their
metadata), written to real files and read by the CLI in this process."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rdmabench.results.files import compact, document
from rdmabench.results.files.rows import aggregate

from .conftest import RESULTS_DATA, million_sources, run_cli_here

BAD_LINE = 7  # of 12: six records of the damaged run are folded into rows of other runs first
NAMES = ("a", "b", "c", "d", "e")  # five runs: four a side are what compare tests


def _runs(folder: Path, names: tuple[str, ...]) -> None:
    """Runs of four ranks (twelve links), each drawn with its own seed: distinct runs."""
    from devtools.million import generate

    folder.mkdir(exist_ok=True)
    for seed, name in enumerate(names, start=1):
        generate(str(folder / f"{name}.json"), 4, 8, million_sources(), seed=seed)


def _replace_line(links: Path, line: bytes) -> None:
    lines = links.read_bytes().splitlines(keepends=True)
    lines[BAD_LINE - 1] = line
    links.write_bytes(b"".join(lines))


def _bad_json(links: Path) -> str:
    _replace_line(links, b'{"src": 0, "dst": \n')
    return f"line {BAD_LINE} is not a link record"


def _not_utf8(links: Path) -> str:
    _replace_line(links, b'{"src": "\xff\xfe"}\n')
    return "a line is not UTF-8"


def _not_a_record(links: Path) -> str:
    record = json.loads(links.read_bytes().splitlines()[BAD_LINE - 1])
    _replace_line(links, json.dumps(dict(record, samples=[-1.0, -2.0])).encode() + b"\n")  # JSON, not the schema
    return f"line {BAD_LINE}"


def _too_long(links: Path) -> str:
    _replace_line(links, b'{"src": "' + b"x" * (80 << 10) + b'"}\n')  # RDMABENCH_MAX_INPUT is 64 KiB here
    return f"line {BAD_LINE} is longer than"


def _cut_short(links: Path) -> str:
    links.write_bytes(b"".join(links.read_bytes().splitlines(keepends=True)[:-1]))
    return "the links file was cut short"


def _too_big(links: Path) -> str:
    with open(links, "r+b") as handle:
        handle.truncate(5 << 20)  # sparse: over 64 x 64 KiB
    return "larger than"


def _link_to_a_device(links: Path) -> str:
    links.unlink()
    links.symlink_to("/dev/zero")
    return "a symbolic link to a character device"


def _link_to_nothing(links: Path) -> str:
    links.unlink()
    links.symlink_to(links.with_name("nowhere.jsonl"))
    return "a symbolic link to nothing"


# Damage met while the run is folded (before: the whole command stopped, exit 2), then damage met
# when the summary is loaded (skipped before too: kept so).
DAMAGE: dict[str, Callable[[Path], str]] = {
    "bad JSON": _bad_json,
    "not UTF-8": _not_utf8,
    "not the schema": _not_a_record,
    "line too long": _too_long,
    "cut short": _cut_short,
    "too big": _too_big,
    "link to a device": _link_to_a_device,
    "link to nothing": _link_to_nothing,
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("made")
    _runs(folder, NAMES)
    return folder


def _folders(made: Path, tmp_path: Path, damage: Callable[[Path], str], damaged: str = "b") -> tuple[Path, Path, str]:
    """`mixed` (the five runs; `damaged`'s links file damaged) and `clean` (the four others), and
    what the warning must say."""
    mixed, clean = tmp_path / "mixed", tmp_path / "clean"
    mixed.mkdir()
    clean.mkdir()
    for name in NAMES:
        for suffix in (".json", compact.LINKS_SUFFIX):
            shutil.copy(made / f"{name}{suffix}", mixed / f"{name}{suffix}")
            if name != damaged:
                shutil.copy(made / f"{name}{suffix}", clean / f"{name}{suffix}")
    says = damage(mixed / f"{damaged}{compact.LINKS_SUFFIX}")
    return mixed, clean, says


def _one_warning(stderr: str, folder: Path, name: str, says: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("rdmabench: warning: skipped ") and says in lines[0], stderr
    assert f"{name}.links.jsonl" in lines[0] or f"{name}.json" in lines[0], stderr


@pytest.fixture(autouse=True)
def _small_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDMABENCH_MAX_INPUT", "64KiB")  # a line too long, a file too big: cheap to make


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_links_file_costs_only_its_run_in_a_report(made: Path, tmp_path: Path, kind: str) -> None:
    mixed, clean, says = _folders(made, tmp_path, DAMAGE[kind])
    got, want = (
        run_cli_here(["report", str(mixed), "--format", "json"]),
        run_cli_here(["report", str(clean), "--format", "json"]),
    )
    assert got.returncode == want.returncode == 0, got.stderr
    _one_warning(got.stderr, mixed, "b", says)
    report, expected = json.loads(got.stdout), json.loads(want.stdout)
    # The rows are the four other runs' exactly: the six records of b folded before the damage are taken back.
    assert report["rows"] == expected["rows"] and {row["runs"] for row in report["rows"]} == {len(NAMES) - 1}
    assert len(report["skipped"]) == 1 and says in report["skipped"][0]


@pytest.mark.parametrize("damaged", ["a", "e"])
def test_the_damaged_run_may_come_first_or_last(made: Path, tmp_path: Path, damaged: str) -> None:
    """First: the rows it made are removed (the next runs make them anew); last: every row it changed
    is put back."""
    mixed, clean, says = _folders(made, tmp_path, _bad_json, damaged)
    got, want = (
        run_cli_here(["report", str(mixed), "--format", "json"]),
        run_cli_here(["report", str(clean), "--format", "json"]),
    )
    assert got.returncode == 0, got.stderr
    _one_warning(got.stderr, mixed, damaged, says)
    assert json.loads(got.stdout)["rows"] == json.loads(want.stdout)["rows"]


@pytest.mark.parametrize("kind", ["bad JSON", "not UTF-8", "line too long"])
@pytest.mark.parametrize("floors", ["default", "all=0.01"])  # a FAIL and a PASS: each kept, with its exit code
def test_check_judges_the_other_runs_as_it_does_beside_a_skipped_summary(
    made: Path, tmp_path: Path, kind: str, floors: str
) -> None:
    mixed, clean, says = _folders(made, tmp_path, DAMAGE[kind])
    verdicts = {folder: tmp_path / f"{folder.name}.verdict.json" for folder in (mixed, clean)}
    got, want = (
        run_cli_here(["check", "--expect", floors, str(folder), "--json", str(verdicts[folder])])
        for folder in (mixed, clean)
    )
    assert got.returncode == want.returncode == (1 if floors == "default" else 0), got.stdout + got.stderr
    assert got.stdout == want.stdout and verdicts[mixed].read_text() == verdicts[clean].read_text()
    _one_warning(got.stderr, mixed, "b", says)
    broken = tmp_path / "broken"  # a damaged summary beside the same runs: the same verdict, the same exit
    shutil.copytree(clean, broken)
    (broken / "b.json").write_text('{"schema": ')
    same = run_cli_here(["check", "--expect", floors, str(broken)])
    assert (same.returncode, same.stdout) == (got.returncode, got.stdout)


def test_a_drain_list_leaves_out_the_hosts_only_a_damaged_run_names(made: Path, tmp_path: Path) -> None:
    """The damaged run ran on a host of its own: the links it gave before the damage (rows of their
    own, failing every floor) are taken back: neither the verdict nor the drain list names its host."""
    mixed, clean, _says = _folders(made, tmp_path, _bad_json)
    summary = json.loads((mixed / "b.json").read_text())
    for rank in summary["ranks"]:
        rank["host"] = "node0009"
    (mixed / "b.json").write_text(json.dumps(summary))
    drains = {folder: tmp_path / f"{folder.name}.drain.txt" for folder in (mixed, clean)}
    got, want = (
        run_cli_here(["check", "--expect", "default", str(folder), "--drain", str(drains[folder])])
        for folder in (mixed, clean)
    )
    assert got.returncode == want.returncode == 1 and drains[mixed].read_text() == drains[clean].read_text()
    assert "node0009" not in got.stdout + drains[mixed].read_text() and "node0000" in got.stdout


@pytest.mark.parametrize("kind", ["bad JSON", "not the schema"])
def test_compare_leaves_out_a_damaged_run_on_either_side(made: Path, tmp_path: Path, kind: str) -> None:
    mixed, clean, says = _folders(made, tmp_path, DAMAGE[kind])
    for base, new in ((mixed, clean), (clean, mixed)):
        got, want = run_cli_here(["compare", str(base), str(new)]), run_cli_here(["compare", str(clean), str(clean)])
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
        _one_warning(got.stderr, mixed, "b", says)


@pytest.mark.parametrize("command", ["report", "check", "compare"])
def test_one_damaged_run_alone_is_still_one_error_line(made: Path, tmp_path: Path, command: str) -> None:
    """Given alone (or alone in its folder), a damaged run is bad input: one line naming its file, exit 2."""
    mixed, _clean, says = _folders(made, tmp_path, _bad_json)
    alone = str(mixed / "b.json")
    args = {"report": [alone], "check": ["--expect", "default", alone], "compare": [alone, str(made / "a.json")]}
    proc = run_cli_here([command, *args[command]])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("rdmabench: error: "), proc.stderr
    assert says in lines[0] and "b.links.jsonl" in lines[0]


def test_runs_all_damaged_are_nothing_usable(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "damaged"
    folder.mkdir()
    for name in ("a", "b"):
        for suffix in (".json", compact.LINKS_SUFFIX):
            shutil.copy(made / f"{name}{suffix}", folder / f"{name}{suffix}")
        _bad_json(folder / f"{name}{compact.LINKS_SUFFIX}")
    proc = run_cli_here(["report", str(folder)])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert all(line.startswith("rdmabench: warning: skipped ") for line in lines[:2])
    assert lines[2].startswith("rdmabench: error: no usable results files among ")


@pytest.mark.parametrize("name", ["blocks-bw-device", "wire-d2d", "netns-allpairs-1mib"])
def test_rows_a_damaged_run_changed_are_put_back_field_by_field(tmp_path: Path, name: str) -> None:
    """Real runs (block lists' tails and ceilings, a wire check, CPU costs): a copy whose last line is
    damaged is folded onto every row of the run first, then taken back; every field of every row is
    as the run alone gives it."""
    for suffix in (".json", compact.LINKS_SUFFIX):
        shutil.copy(RESULTS_DATA / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    links = tmp_path / f"{name}{compact.LINKS_SUFFIX}"
    lines = links.read_bytes().splitlines(keepends=True)
    links.write_bytes(b"".join(lines[:-1]) + b"{\n")
    real = str(RESULTS_DATA / f"{name}.json")
    alone = aggregate([(real, document.load(real, lazy=True))])
    dropped: list[tuple[str, str]] = []
    copy = str(tmp_path / f"{name}.json")
    both = aggregate(
        [(real, document.load(real, lazy=True)), (copy, document.load(copy, lazy=True))], None, [], dropped
    )
    assert both == alone and len(alone) >= 2
    assert [path for path, _why in dropped] == [copy]
    assert dropped[0][1].startswith(f"{links}: line {len(lines)} is not a link record (")


def _fold_a_run(row: Any, scale: float) -> None:
    """What `rows._Folder.fold` does to a row another run made: a figure, a share, labels, a limit,
    and every add_ with all it can take."""
    from rdmabench.results.files.entries import records_of

    blocks = {
        "transfer_us": {"p99": 9.0 * scale, "p99.9": 12.0}, "ceiling_gbps": 300.0 * scale,
        "cpu_us_per_descriptor": 0.4 * scale, "contiguous_gbps": 250.0 * scale,
    }  # fmt: skip
    beside: dict[str, Any] = {
        "load": "gemm:8192", "transfer_alone": 200.0 * scale, "slowdown": 1.1 * scale,
        "slowdown_range": [1.0, 1.2 * scale],
    }  # fmt: skip
    if scale == 3.0:  # a figure not judged: why is kept too
        beside |= {"slowdown": None, "duty": 0.01}
    records = records_of(blocks, beside)  # read back once, as the rows read a file's
    assert records.blocks is not None and records.beside is not None
    row.run += 1
    row.values.append(100.0 * scale)
    row.shares.append(0.3 * scale)
    row.transports, row.warnings = row.transports | {f"t{scale}"}, row.warnings | {f"w{scale}"}
    row.nics, row.dates = row.nics | {f"n{scale}"}, row.dates | {f"d{scale}"}
    row.limit, row.limit_kind, row.limit_gbps = f"NVLink {scale}", "NVLink", 478.1 * scale
    row.add_costs({"src": 1.0 * scale, "dst": 2.0}, {"dev": f"mlx5_{scale}", "ratio": 1.0 / scale}, str)
    row.add_list(records.blocks, [99.0, 101.0 * scale], False)
    row.add_beside(records.beside, records.blocks.posted, False)


def test_a_row_is_put_back_as_it_was_after_any_run_folded_onto_it() -> None:
    """Row.state and Row.restore: every field a run's figure changes (its costs, wire check, block
    list's tails, ceiling, CPU per descriptor and contiguous reference, what ran beside it) comes
    back, the lists a run appends to in place included."""
    from rdmabench.results.files.row import Row

    row = Row("put", "device", "device", 1 << 20, "a -> b", "intra-node", "a", "a", "GB/s", values=[100.0])
    for scale in (2.0, 3.0):  # a row of one run, without lists or costs; then one that has them
        kept, state = copy.deepcopy(row), row.state()
        _fold_a_run(row, scale)
        assert row != kept
        row.restore(state)
        assert row == kept
        _fold_a_run(row, scale + 0.5)  # kept: the next round starts from a row with lists and costs
