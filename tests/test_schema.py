"""The published JSON Schemas of results files (rdmabench/results/files/schemas/), held against real results
files (tests/data/results/) and against the runtime validator: what one rejects, the other rejects too."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rdmabench.errors import ResultsFileError
from rdmabench.results.files import document

from .conftest import QUICK, RESULTS_DATA, run_cli

jsonschema = pytest.importorskip("jsonschema")  # the dev extra


def _validators() -> tuple[Any, Any]:
    summary, link = (document.json_schema(name) for name in document.SCHEMAS)
    for schema in (summary, link):
        jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(summary), jsonschema.Draft202012Validator(link)


def _schema_errors(summary: dict[str, Any], links: list[dict[str, Any]]) -> list[str]:
    summary_check, link_check = _validators()
    found = [e.message for e in summary_check.iter_errors(summary)]
    for line in links:
        found += [e.message for e in link_check.iter_errors(line)]
    return found


def _files(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = json.loads(path.read_text())
    links = path.with_name(summary["links"]["file"])
    return summary, [json.loads(line) for line in links.read_text().splitlines()]


def test_every_real_schema_2_results_file_follows_the_published_schema() -> None:
    checked = 0
    for path in sorted(RESULTS_DATA.glob("*.json")):
        try:
            summary = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if not isinstance(summary, dict) or summary.get("schema") != {"name": "rdmabench-results", "version": 2}:
            continue
        assert _schema_errors(*_files(path)) == [], path
        checked += 1
    assert checked >= 5


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "r.json"
    proc = run_cli(["run", "--np", "3", "--pattern", "ring", "--sizes", "8,4KiB", "-o", str(out), *QUICK])
    assert proc.returncode == 0, proc.stderr
    return out


def _set(where: str, key: str, value: Any) -> Callable[[dict[str, Any], list[dict[str, Any]]], None]:
    def mutate(summary: dict[str, Any], links: list[dict[str, Any]]) -> None:
        target = summary if where == "summary" else links[0]
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value

    return mutate


_DELETE = object()
MUTATIONS = {
    "no links file entry": _set("summary", "links", _DELETE),
    "another kind of document": _set("summary", "schema", {"name": "rdmabench-anchor", "version": 2}),
    "complete as a string": _set("summary", "complete", "yes"),
    "a figure as a string": _set("link", "value", "fast"),
    "no samples": _set("link", "samples", _DELETE),
    "no sample at all": _set("link", "samples", []),
    "a negative figure": _set("link", "value", -1.0),
    "a negative rank": _set("link", "src", -3),
    "a zero size": _set("link", "size", 0),
}


def test_a_real_run_follows_the_published_schema(real_run: Path) -> None:
    assert _schema_errors(*_files(real_run)) == []
    assert len(document.load(str(real_run))["results"]) == 6


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_schema_and_the_runtime_validator_reject_the_same_documents(
    real_run: Path, tmp_path: Path, mutation: str
) -> None:
    summary, links = _files(real_run)
    summary, links = copy.deepcopy(summary), copy.deepcopy(links)
    MUTATIONS[mutation](summary, links)
    if mutation == "a negative figure":
        links[0]["samples"] = [-1.0]
    assert _schema_errors(summary, links), f"the schema accepts {mutation}"
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(summary))
    (tmp_path / "r.links.jsonl").write_text("".join(json.dumps(line) + "\n" for line in links))
    with pytest.raises(ResultsFileError):
        document.load(str(bad))


def test_a_wire_check_without_a_readable_counter_follows_the_schema(real_run: Path, tmp_path: Path) -> None:
    summary, links = _files(real_run)
    links[0]["wire"] = {"dev": "mlx5_0:1", "ratio": None, "gbps": None, "n/a": "no byte counter readable"}
    links[1]["wire"] = {"dev": "eth0", "ratio": 0.998, "gbps": 11.2}
    assert _schema_errors(summary, links) == []
    links[1]["wire"]["ratio"] = "most"
    assert _schema_errors(summary, links)
