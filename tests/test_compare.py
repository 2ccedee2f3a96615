"""`compare`'s statistics: the per-run figures are the independent values (one run's samples are
not), many links are corrected for at once (Benjamini-Hochberg), small samples get exact p-values.

tests/data/compare holds ten real runs of one command, made one after another on the 2-core CI VM
(`rdmabench run --np 2 --sizes 8,64KiB,1MiB --samples 5`): the odd ones in base/, the even ones in
new/. Their run-to-run noise is large (a link's median moves 3x from run to run at 64KiB): the
pooled samples of both sides called that a regression."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rdmabench import stats
from rdmabench.results.files.document import load
from rdmabench.results.verdicts.compare import ChangeRecord

from .conftest import run_cli_here

DATA = Path(__file__).resolve().parent / "data" / "compare"


def _compare(base: Path, new: Path) -> tuple[int, dict[str, Any]]:
    proc = run_cli_here(["compare", str(base), str(new), "--format", "json"])
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_runs_of_one_command_are_no_regression() -> None:
    code, found = _compare(DATA / "base", DATA / "new")
    changes = found["changes"]
    assert code == 0 and len(changes) == 3
    assert all(c["tested"] and c["base_runs"] == c["new_runs"] == 5 for c in changes)
    assert not any(c["significant"] or c["regression"] for c in changes)
    assert min(c["change"] for c in changes) < -0.5  # noise this large: pooled samples called it significant
    assert all(list(c) == list(ChangeRecord.__annotations__) for c in changes)  # every field, in order


def _jittered_runs(directory: Path, template: dict[str, Any], factor: float) -> None:
    """Five runs made of one real run's entries, each sample times `factor` and a small per-run
    jitter (a few %), written as schema-1 files."""
    for run in range(5):
        doc = {key: value for key, value in template.items() if key not in ("links", "profiles", "ranks")}
        doc["schema"] = {"name": "rdmabench-results", "version": 1}
        doc["results"] = [dict(entry) for entry in template["results"]]
        for entry in doc["results"]:
            scale = factor * (1 + 0.01 * (run - 2))
            entry["samples"] = [v * scale for v in entry["samples"]]
            entry["bandwidth_gbps"] = entry["bandwidth_gbps"] * scale
        (directory / f"run{run}.json").write_text(json.dumps(doc))


def test_a_planted_slowdown_is_caught(tmp_path: Path) -> None:
    """Five runs a side, one real run with a few % run-to-run noise; NEW 20% slower on every link."""
    template = load(str(DATA / "base" / "r01.json"))
    for side, factor in (("base", 1.0), ("new", 0.8)):
        (tmp_path / side).mkdir()
        _jittered_runs(tmp_path / side, template, factor)
    code, found = _compare(tmp_path / "base", tmp_path / "new")
    changes = found["changes"]
    assert code == 1 and len(changes) == 3
    for change in changes:
        assert change["regression"] and change["change"] == pytest.approx(-0.2)
        assert change["p_value"] == pytest.approx(2 / math.comb(10, 5)) and change["q_value"] < 0.05  # exact
    same = run_cli_here(["compare", str(tmp_path / "base"), str(tmp_path / "base")])
    assert same.returncode == 0 and "0 regression(s)" in same.stdout


def test_single_runs_show_the_change_untested() -> None:
    """One run a side: its samples are not independent, so nothing is called significant, and with
    no pair tested there is no verdict (exit 2, as `check` when nothing could be judged)."""
    proc = run_cli_here(["compare", str(DATA / "base" / "r01.json"), str(DATA / "new" / "r02.json")])
    assert proc.returncode == 2 and "no verdict: none of the 3 link/size pair(s)" in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["test", "modes", "size", "link", "runs", "base", "new", "change", "p", "q", "verdict"]
    assert all(line.split()[-1] == "untested" and " 1/1 " in line for line in lines[1:4])
    assert "0 of 3 link/size pair(s) tested" in proc.stdout
    assert "3 pair(s) with fewer than 4 runs a side" in proc.stdout


def test_p_values_match_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(11)
    pairs: list[tuple[list[float], list[float]]] = []
    for k in range(300):
        n1, n2 = [(4, 4), (5, 5), (3, 7), (8, 6), (12, 9), (60, 55)][k % 6]
        shift = rng.choice([0.0, 0.5, 2.0])
        if k % 4 == 0:  # ties: the normal approximation
            pairs.append((rng.integers(0, 4, n1).tolist(), (rng.integers(0, 4, n2) + shift).tolist()))
        else:
            pairs.append((rng.random(n1).tolist(), (rng.random(n2) + shift).tolist()))
    pairs = [([float(v) for v in a], [float(v) for v in b]) for a, b in pairs]
    ours = stats.mann_whitney_many(pairs)
    for (a, b), p_value in zip(pairs, ours, strict=True):
        tied = len(set(a + b)) < len(a) + len(b)
        method = "asymptotic" if tied or max(len(a), len(b)) > stats.EXACT_UP_TO else "exact"
        theirs = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method=method, use_continuity=True).pvalue
        assert p_value == pytest.approx(theirs, rel=1e-9, abs=1e-15), (a, b, method)
        assert stats.mann_whitney_p(a, b) == p_value  # one by one: the same float
    q_values = stats.benjamini_hochberg(ours)
    assert q_values == pytest.approx(scipy_stats.false_discovery_control(ours, method="bh").tolist(), rel=1e-12)


def test_many_links_are_corrected_for() -> None:
    """One small p-value among a thousand is no discovery; a thousand of them are."""
    assert stats.benjamini_hochberg([0.01] + [0.9] * 999)[0] == pytest.approx(0.9)  # 0.01 x 1000, capped by the rest
    assert stats.benjamini_hochberg([0.01] * 1000) == pytest.approx([0.01] * 1000)
    assert stats.benjamini_hochberg([]) == []
