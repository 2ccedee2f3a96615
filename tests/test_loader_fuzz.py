"""The loader under random mutations of real results files (tests/data/schema, made by real runs):
every result it accepts follows the published schemas; every one it refuses is one ResultsFileError
line, and `report` and `check` say it in one line of their own, never a traceback.

Mutations: a value anywhere in the summary or a link record replaced by any JSON value, a key
removed or added, a line duplicated, dropped or cut short, a character of either file changed.
A `.partial` stream is fuzzed too: the stream the run's own writer (ResultsStream) makes of the
real entries, as a run that died leaves it.
"""

from __future__ import annotations

import copy
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmabench.cli import main
from rdmabench.errors import ResultsFileError
from rdmabench.results.files import document
from rdmabench.results.files.rows import aggregate

from .conftest import run_cli_here
from .test_schema_agreement import DATA, LINK_CHECK, SUMMARY, SUMMARY_CHECK, schema_errors

SOURCES = ("allpairs-bw", "bibw", "ring-bw", "lat", "lat512")
KEYS = sorted({*SUMMARY["properties"], *SUMMARY["properties"]["profiles"]["items"]["properties"], "gbps", "host"})
JUNK: list[Any] = [None, True, False, 0, -1, 1, 0.0, -3.5, 1e5, 1e300, 1048576.0, 2**63, "", "us", "GB/s", [], [1], {}]
JUNK += [{"gbps": 0}, {"src": "x"}, [0.5, -1], "x" * 50, "\n", "a\u2028b"]


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON tree: the keys and indexes that lead to it."""
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


def _mutate_tree(tree: Any, rng: random.Random) -> Any:
    """One change at a random place of a JSON tree: a new value, a key removed, or a key added."""
    path, junk = rng.choice(_paths(tree)), copy.deepcopy(rng.choice(JUNK))
    if not path:
        return junk
    parent = tree
    for part in path[:-1]:
        parent = parent[part]
    action = rng.random()
    if action < 0.7:
        parent[path[-1]] = junk
    elif isinstance(parent, dict) and action < 0.85:
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[rng.choice(KEYS)] = junk
    return tree


def _mutate_text(text: str, rng: random.Random) -> str:
    """A change a disk, an editor or a dying run makes: a line duplicated, dropped or cut, a character changed."""
    lines = text.splitlines(keepends=True)
    action = rng.randrange(4)
    if action == 0 and lines:
        at = rng.randrange(len(lines))
        lines.insert(at, lines[at])
    elif action == 1 and lines:
        del lines[rng.randrange(len(lines))]
    elif action == 2 and text:
        return text[: rng.randrange(len(text))]
    elif text:
        at = rng.randrange(len(text))
        return text[:at] + rng.choice('0-9.e"{}[],: x\x00') + text[at + 1 :]
    return "".join(lines)


def mutated_files(directory: Path, source: str, rng: random.Random) -> Path:
    """r.json and r.links.jsonl: the real result `source`, changed one to three times."""
    summary = json.loads((DATA / f"{source}.json").read_text())
    summary["links"]["file"] = "r.links.jsonl"
    records = [json.loads(line) for line in (DATA / f"{source}.links.jsonl").read_text().splitlines()]
    texts = [json.dumps(summary), "".join(json.dumps(r) + "\n" for r in records)]
    for _ in range(rng.randint(1, 3)):
        which = rng.randrange(2)
        if rng.random() < 0.3:
            texts[which] = _mutate_text(texts[which], rng)
            continue
        try:
            if which == 0:
                texts[0] = json.dumps(_mutate_tree(json.loads(texts[0]), rng))
            else:
                lines = [json.loads(line) for line in texts[1].splitlines()]
                at = rng.randrange(len(lines)) if lines else 0
                lines[at : at + 1] = [_mutate_tree(lines[at], rng)] if lines else []
                texts[1] = "".join(json.dumps(line) + "\n" for line in lines)
        except ValueError:
            texts[which] = _mutate_text(texts[which], rng)  # no longer JSON: change its text
    (directory / "r.json").write_text(texts[0])
    (directory / "r.links.jsonl").write_text(texts[1])
    return directory / "r.json"


def accepted(path: Path) -> bool:
    """Whether the loader accepts the result both ways it reads one; a refusal must be one line."""
    outcomes = []
    for lazy in (False, True):
        try:
            doc = document.load(str(path), lazy)
            if lazy:
                aggregate([(str(path), doc)])
            outcomes.append(True)
        except ResultsFileError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(path.parent)), str(exc)
            outcomes.append(False)
    assert outcomes[0] == outcomes[1], outcomes
    return outcomes[0]


def _valid_files(path: Path) -> list[str]:
    summary = json.loads(path.read_text())
    links = [json.loads(line) for line in (path.parent / "r.links.jsonl").read_text().splitlines()]
    return schema_errors(summary, links)


FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(source=st.sampled_from(SOURCES), rng=st.randoms(use_true_random=False))
def test_a_mutated_result_is_valid_or_refused_in_one_line(tmp_path: Path, source: str, rng: random.Random) -> None:
    path = mutated_files(tmp_path, source, rng)
    if accepted(path):
        assert _valid_files(path) == []


def _stream(directory: Path, source: str) -> Path:
    """The .partial stream rdmabench's writer makes of a real result's entries (a run that died)."""
    doc = document.load(str(DATA / f"{source}.json"))
    out = Path(tempfile.mkdtemp(dir=directory)) / "s.json"  # a stream is never written over
    stream = document.ResultsStream(str(out), doc["metadata"])
    stream.append(doc["results"])
    stream._handle.close()  # as the run's death leaves it: no summary written
    return out.with_name("s.json.partial")


PARTS = {"profile": "profiles", "rank_info": "ranks"}


def _stream_errors(lines: list[Any]) -> list[str]:
    """Each line of a stream against its part of the published schemas."""
    header, found = lines[0], []
    found += [
        e.message
        for e in SUMMARY_CHECK.evolve(schema=SUMMARY["properties"]["metadata"]).iter_errors(header["metadata"])
    ]
    for line in lines[1:]:
        if "profile" in line and "entry" in line:
            node = SUMMARY["properties"]["profiles"]["items"]
            found += [e.message for e in SUMMARY_CHECK.evolve(schema=node).iter_errors(line["entry"])]
        elif "rank_info" in line:
            node = SUMMARY["properties"]["ranks"]["items"]
            found += [e.message for e in SUMMARY_CHECK.evolve(schema=node).iter_errors(line["rank_info"])]
        else:
            found += [e.message for e in LINK_CHECK.iter_errors(line)]
    return found


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(source=st.sampled_from(SOURCES), rng=st.randoms(use_true_random=False))
def test_a_mutated_stream_is_valid_or_refused_in_one_line(tmp_path: Path, source: str, rng: random.Random) -> None:
    path = _stream(tmp_path, source)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    at = rng.randrange(len(lines))
    lines[at] = _mutate_tree(lines[at], rng)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    try:
        document.load(str(path))
    except ResultsFileError as exc:
        assert "\n" not in str(exc), str(exc)
        return
    assert _stream_errors(lines) == []


@pytest.mark.parametrize("seed", range(12))
def test_report_and_check_say_a_refusal_in_one_line(tmp_path: Path, seed: int) -> None:
    """Through the CLI (in this process: click's runner; an exception escaping it fails the test)."""
    rng = random.Random(seed)
    path = mutated_files(tmp_path, rng.choice(SOURCES), rng)
    for command in (["report", str(path)], ["check", str(path), "--expect", "all=0.5"]):
        result = CliRunner().invoke(main, command, catch_exceptions=False)
        lines = result.stderr.splitlines()
        assert all(line.startswith("rdmabench: ") for line in lines), result.stderr
        assert len([line for line in lines if line.startswith("rdmabench: error: ")]) <= 1, result.stderr
        assert result.exit_code in (0, 1, 2), result.stderr


def test_a_refused_result_is_one_line_from_the_command_itself(tmp_path: Path) -> None:
    """The same through a real `rdmabench` process: its whole stderr."""
    summary = json.loads((DATA / "bibw.json").read_text())
    summary["links"]["file"] = "r.links.jsonl"
    summary["ranks"][1]["host"] = ["not", "a", "name"]
    (tmp_path / "r.json").write_text(json.dumps(summary))
    (tmp_path / "r.links.jsonl").write_text((DATA / "bibw.links.jsonl").read_text())
    proc = run_cli_here(["check", str(tmp_path / "r.json"), "--expect", "all=0.5"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert 'ranks[1].host is ["not", "a", "name"], not a string' in proc.stderr
    assert all(line.startswith("rdmabench: ") for line in proc.stderr.splitlines()), proc.stderr
