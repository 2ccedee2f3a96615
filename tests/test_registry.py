"""A test kind of its own, added through the public registry only: this file is the whole test type.

`rtime` times the pair's link in the reverse direction (rank 1 to rank 0) and reports microseconds
per MiB moved, where smaller is better. The ranks load it as a plugin ($RDMABENCH_PLUGINS), run it
over real UCX endpoints, and `report` and `compare` read it back with its own unit and direction.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rdmabench.measure import registry
from rdmabench.measure.window import WINDOW
from rdmabench.results.files.document import load as load_results
from rdmabench.results.files.rows import aggregate, outliers
from rdmabench.results.verdicts.compare import compare

from .conftest import QUICK, rdmabench_env, run_cli


def _us_per_mib(size: int, window: int, step_times: list[float]) -> float:
    return sum(step_times) * 1e6 / (size * window * len(step_times) / 2**20)


RTIME = registry.register(
    registry.TestKind(
        name="rtime",
        summary="rank 1 to rank 0, microseconds per MiB",
        field="time_per_mib_us",
        unit="us/MiB",
        higher_is_better=False,
        scope="unidirectional",
        protocol=WINDOW,
        pair_links=lambda a, b: [(b, a)],
        figure=_us_per_mib,
    ),
    replace=True,
)
REPO = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    return rdmabench_env(RDMABENCH_PLUGINS="tests.test_registry", PYTHONPATH=path)


def _scaled(doc: dict, factor: float) -> dict:  # type: ignore[type-arg]
    """A copy of a real run whose times are `factor` times longer (generated: for compare only)."""
    out = json.loads(json.dumps(doc))
    out["metadata"]["generated"] = f"samples of a real run scaled by {factor} for a compare test"
    for entry in out["results"]:
        entry["samples"] = [v * factor for v in entry["samples"]]
        entry["time_per_mib_us"] *= factor
    return out  # type: ignore[no-any-return]


def test_a_registered_test_runs_reports_and_compares(tmp_path: Path) -> None:
    out = tmp_path / "rtime.json"
    proc = run_cli(["run", "--np", "2", "--test", "rtime", "--sizes", "64KiB,1MiB", "-o", str(out), *QUICK], env=_env())
    assert proc.returncode == 0, proc.stderr
    doc = load_results(str(out))
    assert len(doc["results"]) == 2
    for entry in doc["results"]:
        assert (entry["test"], entry["src_rank"], entry["dst_rank"]) == ("rtime", 1, 0)  # the reverse direction
        assert entry["unit"] == "us/MiB" and entry["time_per_mib_us"] > 0 and "bandwidth_gbps" not in entry
        assert entry["engine"] in ("native", "python") and entry["validated"] and entry["transport"]
    (matrix,) = [m for m in doc["matrices"] if m["size_bytes"] == 1 << 20]
    assert matrix["unit"] == "us/MiB" and matrix["values"][1][0] == doc["results"][1]["time_per_mib_us"]
    assert registry.get("rtime").higher_is_better is False

    rows = aggregate([("rtime.json", doc)])
    assert {r.unit for r in rows} == {"us/MiB"} and all(not r.higher_is_better for r in rows)
    slower = _scaled(doc, 1.5)
    changes, _ = compare(rows, aggregate([("slower", slower)]), threshold=0.05)
    assert all(c.change > 0.4 for c in changes)  # more microseconds per MiB...
    assert all(c.base.worse(c.change, 0.05) for c in changes)  # ...is worse for this test
    faster, _ = compare(rows, aggregate([("faster", _scaled(doc, 0.5))]), threshold=0.05)
    assert not any(c.regression for c in faster)
    assert outliers(rows, 0.2) == []

    # Written back as one schema-1 document (the scaled entries, not the run's links file).
    old = {k: v for k, v in slower.items() if k not in ("links", "profiles", "ranks")}
    old["schema"] = {"name": "rdmabench-results", "version": 1}
    (tmp_path / "slower.json").write_text(json.dumps(old))
    report = run_cli(["report", str(out), "--format", "csv"], env=_env())
    assert report.returncode == 0, report.stderr
    assert "rtime" in report.stdout and "us/MiB" in report.stdout
    verdict = run_cli(["compare", str(out), str(tmp_path / "slower.json")], env=_env())
    assert verdict.returncode == 2 and "no verdict" in verdict.stderr, verdict.stderr  # one run a side: untested
    assert "+50.0%" in verdict.stdout


def test_an_unknown_plugin_is_one_line() -> None:
    proc = run_cli(["run", "--np", "2"], env=rdmabench_env(RDMABENCH_PLUGINS="no_such_module_here"))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "RDMABENCH_PLUGINS" in lines[0] and "no_such_module_here" in lines[0]
