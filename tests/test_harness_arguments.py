"""The developer harnesses (bench.diagnose, bench.million) refuse what they cannot run in one line and
exit 2, before generating anything (issue 39: tracebacks, `--rails 0` taken as 4, `--shapes bogus`
running nothing with exit 0); diagnose's own generated file loads, and its scratch folder goes.

Cheap: argument checks in-process; one diagnose run over 32 GENERATED ranks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devtools import diagnose, million
from rdmabench.results.files import document


def _one_line(capsys: pytest.CaptureFixture[str], code: int, words: str) -> None:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rdmabench: error:") and words in lines[0], err


@pytest.mark.parametrize(
    "args, words",
    [
        (["--ranks", "0"], "--ranks 0: a multiple of --per-host 8"),
        (["--ranks", "-8"], "--ranks -8"),
        (["--ranks", "7"], "--ranks 7"),
        (["--ranks", "1000000000"], "at most 4096"),
        (["--per-host", "0"], "--per-host 0"),
        (["--seed", "-1"], "--seed -1"),
        (["--rails", "0"], "--rails 0: from 1 to 8"),
        (["--shapes", "bogus"], "--shapes bogus: one or both of screen, all-pairs"),
        (["--keep", "{file}"], "not a directory"),
    ],
)
def test_diagnose_refuses_what_it_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    (tmp_path / "file").write_text("")
    argv = ["--generated", *(arg.replace("{file}", str(tmp_path / "file")) for arg in args)]
    _one_line(capsys, diagnose.main(argv), words)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--ranks", "0"], "--ranks 0"),
        (["--ranks", "-8"], "--ranks -8"),
        (["--ranks", "7"], "--ranks 7"),
        (["--ranks", "1000000000"], "at most 4096"),
        (["--per-host", "0"], "--per-host 0"),
        (["--repeat", "0"], "--repeat 0"),
        (["--keep", "{file}"], "not a directory"),
    ],
)
def test_million_refuses_what_it_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    (tmp_path / "file").write_text("")
    _one_line(capsys, million.main([arg.replace("{file}", str(tmp_path / "file")) for arg in args]), words)


def test_million_outside_a_checkout_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed without measurements/ (or its sources named from elsewhere): one line, nothing made."""
    monkeypatch.setattr(million, "SOURCES", {"same host": "measurements/not-here/allpairs-bw-device.json"})
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    _one_line(capsys, million.main(["--ranks", "16"]), "run it from an rdmabench checkout")
    assert list(tmp_path.iterdir()) == []


def test_diagnose_generated_loads_and_leaves_no_scratch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its million-link step once crashed (no created_utc in its own file) and left its folder."""
    cluster = diagnose.Cluster(4, 2, 2)
    path = tmp_path / "g.json"
    diagnose.write_generated(str(path), cluster, "screen", diagnose.faults(cluster)[0])
    assert document.load(str(path))["metadata"]["generated"].startswith("SYNTHETIC")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    code = diagnose.main(["--generated", "--ranks", "32", "--per-host", "8", "--shapes", "screen"])
    out = capsys.readouterr().out
    assert "million: 992 links" in out and code in (0, 1), out
    assert os.listdir(scratch) == []
