"""A single slow figure, never measured again, is a reason to measure it again, not a broken part
(issue 39): a healthy fleet with a few transient slow links is REMEASURE (exit 3), with the links and
the command; suspects need more than one slow link or a re-measure that stayed slow. And one verdict
for `check`, `report --expect` and `run --expect`: a suspect fails all three under hand floors too.

On GENERATED runs (devtools.diagnose marks them so in their metadata)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from devtools.diagnose import Cluster, Fault, generated
from rdmabench.job.closing import verdict as run_verdict
from rdmabench.results.files.rows import aggregate

from .conftest import run_cli_here

FLEET = Cluster(8, 8, 4)  # 64 ranks, all-pairs: 4,032 links


def _transient(seed: int = 1) -> dict[str, Any]:
    """A healthy fleet (3% noise), every class within the default floors, and about 1 link in 500
    at 0.55-0.75x, scattered: nothing planted, nothing measured again."""
    doc = generated(FLEET, "all-pairs", Fault("none"), seed=seed)
    rng = np.random.default_rng(seed + 100)
    for entry in doc["results"]:
        share = entry["share_of_limit"]
        factor = 1.1 if entry["link_limit"]["kind"] == "NVLink" else 0.95 / (0.76 if share < 0.83 else 0.9)
        if rng.random() < 1 / 500:
            factor *= rng.uniform(0.55, 0.75)
        entry["samples"] = [v * factor for v in entry["samples"]]
        entry["bandwidth_gbps"] *= factor
        entry["share_of_limit"] *= factor
    doc["metadata"]["generated"] += "; classes moved within the default floors, 1 link in 500 made 0.55-0.75x"
    return doc


def test_a_healthy_fleet_with_transient_slow_links_is_to_remeasure(tmp_path: Path) -> None:
    """It was SUSPECTS: ten single-link suspects at confidence 0.5, exit 1."""
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(_transient()))
    verdict, drain = tmp_path / "v.json", tmp_path / "drain.txt"
    proc = run_cli_here(["check", str(path), "--expect", "default", "--json", str(verdict), "--drain", str(drain)])
    lines = proc.stdout.splitlines()
    assert proc.returncode == 3 and not any(line.startswith("suspect ") for line in lines), proc.stdout
    said = next(line for line in lines if line.startswith("re-measure ") and "link(s)" in line)
    count = int(said.split()[1])
    assert 5 <= count <= 15 and "never measured again" in said
    assert any(
        line.startswith("re-measure with: rdmabench run --pattern screen --remeasure-below 0.") for line in lines
    )
    assert lines[-2].startswith("verdict: REMEASURE") and lines[-1].endswith("(no host: 0 of 8 hosts)")
    assert sum(line.startswith("REMEASURE ") for line in lines) == count and "\nFAIL " not in proc.stdout
    found = json.loads(verdict.read_text())
    assert found["outcome"] == "REMEASURE" and found["attribution"]["outcome"] == "REMEASURE"
    assert len(found["attribution"]["remeasure"]) == len(found["remeasure"]) == count and found["failed"] == []
    report = run_cli_here(["report", str(path), "--expect", "default"])
    assert report.returncode == 3 and "verdict: REMEASURE" in report.stderr, report.stderr


def test_a_suspect_fails_check_report_and_run_alike_under_hand_floors(tmp_path: Path) -> None:
    """With hand floors only, a suspect failed `check` but not `report --expect` or `run --expect`."""
    doc = generated(Cluster(16, 4, 2), "screen", Fault("nic", 5, 1, "send", factor=0.8), seed=3)
    path = tmp_path / "screen.json"
    path.write_text(json.dumps(doc))
    codes = {name: run_cli_here([name, str(path), "--expect", "all=0.01"]).returncode for name in ("check", "report")}
    out = io.StringIO()
    codes["run"] = run_verdict(str(path), aggregate([("screen", doc)]), {"all": 0.01}, out)
    assert codes == {"check": 1, "report": 1, "run": 1}, codes
    assert "verdict: FAIL (the suspects above)" in out.getvalue()


def test_classes_too_small_to_judge_are_one_line_of_the_verdict() -> None:
    """A small run has a class per link and size: the verdict said 'too few to judge' once a link."""
    from rdmabench.results.verdicts.verdict import FLEET, judge

    from .test_html import _small_run

    verdict = judge(_small_run(), {FLEET: 1.0})
    assert [line for line in verdict.skipped if "too small" in line] == [
        "10 link(s) in classes too small to judge a link against (fewer than 6)"
    ]
