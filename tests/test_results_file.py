import json
import os
from pathlib import Path

import pytest

from rdmabench.errors import ResultsFileError
from rdmabench.results.files import document as results


def _entry(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "test": "bw",
        "src_rank": 0,
        "dst_rank": 1,
        "src_mode": "pageable",
        "dst_mode": "pageable",
        "size_bytes": 8,
        "bandwidth_gbps": 1.0,
        "samples": [1.0],
        "validated": True,
        "transport": "cma/memory",
        "unit": "GB/s",
    }
    entry.update(changes)
    return entry


def test_write_then_load(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    results.write(str(path), results.document({"a": 1}, [_entry()], complete=True))
    doc = results.load(str(path))
    assert doc["schema"] == {"name": "rdmabench-results", "version": 1}
    assert doc["complete"] is True and doc["results"][0]["bandwidth_gbps"] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind


def test_existing_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("precious")
    with pytest.raises(ResultsFileError, match="already exists"):
        results.check_writable(str(path), force=False)
    results.check_writable(str(path), force=True)
    assert path.read_text() == "precious"


def test_unwritable_locations(tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError, match="is a directory"):
        results.check_writable(str(tmp_path), force=False)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultsFileError, match="cannot write"):
        results.check_writable(str(blocker / "sub" / "r.json"), force=False)


def test_default_paths_do_not_collide(tmp_path: Path) -> None:
    first = results.default_output_path("bw", "pinned", "device", directory=str(tmp_path))
    Path(first).write_text("{}")
    second = results.default_output_path("bw", "pinned", "device", directory=str(tmp_path))
    assert first != second and "pinned-to-device" in first
    assert os.path.dirname(first) == str(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": {"name": "rdmabench-results", "version": 1}, "metadata": {}, "res', "not valid JSON"),
        ('{"hello": 1}', "no schema"),
        ('{"schema": {"name": "osu", "version": 1}, "metadata": {}, "results": []}', "not an rdmabench results file"),
        (
            '{"schema": {"name": "rdmabench-results", "version": 99}, "metadata": {}, "results": []}',
            "newer than this rdmabench",
        ),
        ('{"schema": {"name": "rdmabench-results", "version": 1}, "metadata": {}, "results": {}}', "results a list"),
        (
            '{"schema": {"name": "rdmabench-results", "version": 1}, "metadata": {}, "results": [{"test": "bw"}]}',
            "lacks",
        ),
        ("[" * 100000 + "]" * 100000, "not"),
    ],
)
def test_bad_files_are_rejected_with_the_file_named(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ResultsFileError, match=message) as info:
        results.load(str(path))
    assert str(path) in str(info.value)


def test_entry_without_a_figure(tmp_path: Path) -> None:
    entry = _entry()
    del entry["bandwidth_gbps"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results.document({}, [entry], complete=True)))
    with pytest.raises(ResultsFileError, match="has no bandwidth_gbps"):
        results.load(str(path))
