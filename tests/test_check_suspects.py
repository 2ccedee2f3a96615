"""`check` and `report` name the broken part: suspects first, the drain list in Slurm's words, the
fleet-relative floors of `--expect default` the same in check, report and run. On GENERATED runs
(devtools.diagnose marks them so in their metadata) with one planted fault; a real namespace
cluster is tests/test_netns_faults.py's."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from devtools.diagnose import Cluster, Fault, generated
from rdmabench.results.files.rows import aggregate
from rdmabench.results.reports import html
from rdmabench.results.verdicts.suspects import end_order

from .conftest import QUICK, run_cli, run_cli_here

CLUSTER = Cluster(16, 4, 2)  # a screen of 544 links: 16 hosts x 4 GPUs, 2 rails
NIC = Fault("nic", 5, 1, "send", factor=0.8)  # node005's mlx5_1:1, on its way out
MILD = Fault("host", 9, direction="receive", factor=0.9)  # every link into node009 at 90%: within the floor


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _screen(tmp_path: Path, fault: Fault, name: str = "screen.json", seed: int = 3) -> Path:
    return _write(tmp_path / name, generated(CLUSTER, "screen", fault, seed=seed))


def _nvlink_with_room(doc: dict[str, Any]) -> dict[str, Any]:
    """The generated NVLink links at 87% of their limit, not 80%: 3% noise then puts none of a
    healthy run below the default NVLink floor (75%), which judges each link alone."""
    for entry in doc["results"]:
        if entry["link_limit"]["kind"] == "NVLink":
            entry["samples"] = [v * 1.1 for v in entry["samples"]]
            entry["bandwidth_gbps"] *= 1.1
            entry["share_of_limit"] *= 1.1
    doc["metadata"]["generated"] += "; NVLink links made 10% faster by tests/test_check_suspects.py"
    return doc


def test_check_names_the_suspect_first_then_the_links_then_the_verdict(tmp_path: Path) -> None:
    doc = _screen(tmp_path, NIC)
    summary, junit, drain = tmp_path / "v.json", tmp_path / "v.xml", tmp_path / "drain.txt"
    args = ["check", str(doc), "--expect", "default", "--json", str(summary), "--junit", str(junit)]
    proc = run_cli_here([*args, "--drain", str(drain)])
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("suspect 1: nic node005:mlx5_1:1 send: ") and "of their class median" in lines[0]
    assert not any(line.startswith("suspect 2") for line in lines)
    judged = next(n for n, line in enumerate(lines) if line.startswith("check: "))
    assert judged == 1 and lines[-2] == "verdict: FAIL"
    fails = [line for line in lines if line.startswith("FAIL ")]
    blamed = [line for line in fails if "explained by suspect nic node005:mlx5_1:1 send" in line]
    assert len(blamed) == 30 and all(line.startswith("FAIL node005:gpu") for line in blamed)  # 2 GPUs x 15 hosts
    assert lines[-1] == f"drain list: {drain} (node005: 1 of 16 hosts)"
    text = drain.read_text()
    assert 'scontrol update NodeName=node005 State=DRAIN Reason="rdmabench: nic mlx5_1:1 send at' in text
    assert "# hostlist: node005" in text and len(re.findall("^scontrol ", text, re.M)) == 1
    verdict = json.loads(summary.read_text())
    assert verdict["outcome"] == "FAIL" and verdict["passed"] is False
    assert verdict["attribution"]["outcome"] == "SUSPECTS"
    assert [s["component"] for s in verdict["attribution"]["suspects"]] == ["nic node005:mlx5_1:1 send"]
    assert len(verdict["failed"]) == len(fails)
    suite = ET.parse(junit).getroot()
    named = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert named["rdmabench.outcome"] == "FAIL" and named["rdmabench.suspect.1"].startswith("nic node005:mlx5_1:1")
    assert suite.get("failures") == str(len(fails)) and len(suite.findall("testcase")) == int(suite.get("tests", ""))


def test_a_healthy_screen_passes_and_drains_no_host(tmp_path: Path) -> None:
    doc = _write(tmp_path / "healthy.json", _nvlink_with_room(generated(CLUSTER, "screen", Fault("none"), seed=3)))
    drain = tmp_path / "drain.txt"
    proc = run_cli_here(["check", str(doc), "--expect", "default", "--drain", str(drain)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("no suspect: ") and lines[-2] == "verdict: PASS"
    assert lines[-1] == f"drain list: {drain} (no host: 0 of 16 hosts)" and "\nscontrol " not in drain.read_text()


def test_a_mild_fault_within_every_floor_still_fails_as_a_suspect(tmp_path: Path) -> None:
    """A host receiving at 90%: no link of it falls below its class floor, but together they name
    it, and `default` fails them in check, report --expect and the JSON alike."""
    doc = _screen(tmp_path, MILD)
    proc = run_cli_here(["check", str(doc), "--expect", "default"])
    assert proc.returncode == 1 and proc.stdout.startswith("suspect 1: host node009 receive: "), proc.stdout
    fails = [line for line in proc.stdout.splitlines() if line.startswith("FAIL ")]
    blamed = [line for line in fails if "explained by suspect host node009 receive" in line]
    assert len(blamed) == 15 * 4 and all(" -> node009:gpu" in line for line in blamed)
    below = [line for line in blamed if "of its class median" in line]  # below the class floor alone
    assert len(below) < len(blamed) / 4, below
    report = run_cli_here(["report", str(doc), "--expect", "default"])
    assert report.returncode == 1 and f" link(s) judged at their largest size, {len(fails)} failed" in report.stderr
    assert report.stderr.count("explained by suspect host node009 receive") == len(blamed)
    # Hand floors judge what they judge; the suspect still fails the check, and the report's verdict alike.
    lenient = run_cli_here(["check", str(doc), "--expect", "all=0.01"])
    assert lenient.returncode == 1 and lenient.stdout.splitlines()[-1] == "verdict: FAIL (the suspects above)"
    assert run_cli_here(["report", str(doc), "--expect", "all=0.01"]).returncode == 1


def test_a_link_below_its_class_floor_says_how_far(tmp_path: Path) -> None:
    doc = _nvlink_with_room(generated(CLUSTER, "screen", Fault("none"), seed=3))
    slow = next(e for e in doc["results"] if e["src_host"] != e["dst_host"] and e.get("remeasured_from") is None)
    slow["samples"] = [v * 0.5 for v in slow["samples"]]
    slow["bandwidth_gbps"] *= 0.5
    proc = run_cli_here(["check", str(_write(tmp_path / "one.json", doc)), "--expect", "default"])
    assert proc.returncode == 3, proc.stdout  # one figure, never measured again: measure it again
    (again,) = [line for line in proc.stdout.splitlines() if line.startswith("REMEASURE ")]
    assert re.search(r": 5\d% of its class median, floor [89]\d%; .*never measured again", again), again
    # Re-measured alone and slow again: evidence, a suspect, and a failure.
    doc["results"].append(dict(slow, remeasured_from=slow["bandwidth_gbps"], concurrent_links=1))
    proc = run_cli_here(["check", str(_write(tmp_path / "two.json", doc)), "--expect", "default"])
    assert proc.returncode == 1, proc.stdout
    fails = [line for line in proc.stdout.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 2 and "re-measured after the screen" in fails[0], proc.stdout  # alone, and in the screen
    assert re.search(r": 5\d% of its class median, floor [89]\d%; explained by suspect link ", fails[1]), fails


def test_default_means_the_same_in_run_report_and_check(tmp_path: Path) -> None:
    """Two real ranks: one link, too few to judge against a class, and host memory, which no default
    floor judges: no verdict in all three, for the same reason."""
    out = tmp_path / "r.json"
    run = run_cli(["run", "--np", "2", "--sizes", "64KiB", "-o", str(out), "--expect", "default", *QUICK])
    reason = "no class of links holds the 6 it takes to judge a link against its class"
    errors = {}
    for name, proc in (
        ("run", run),
        ("report", run_cli_here(["report", str(out), "--expect", "default"])),
        ("check", run_cli_here(["check", str(out), "--expect", "default"])),
    ):
        (line,) = [one for one in proc.stderr.splitlines() if one.startswith("rdmabench: error:")]
        assert proc.returncode == 2 and reason in line, (name, proc.stderr)
        errors[name] = line.split(" (results kept in")[0]
    assert errors["run"] == errors["report"] == errors["check"]


def test_the_drain_list_goes_through_the_output_checks(tmp_path: Path) -> None:
    doc = _screen(tmp_path, NIC)
    drain = tmp_path / "drain.txt"
    drain.write_text("mine\n")
    proc = run_cli_here(["check", str(doc), "--expect", "default", "--drain", str(drain)])
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "already exists; pass --force" in lines[0], proc.stderr
    assert drain.read_text() == "mine\n" and not proc.stdout  # refused before anything was judged
    proc = run_cli_here(["check", str(doc), "--expect", "default", "--drain", str(tmp_path), "--force"])
    assert proc.returncode == 2 and "it is a directory" in proc.stderr
    proc = run_cli_here(["check", str(doc), "--expect", "default", "--drain", str(drain), "--force"])
    assert proc.returncode == 1 and "NodeName=node005" in drain.read_text()


def _all_for(doc: dict[str, Any], host: str, prefix: str = "") -> dict[str, Any]:
    """A crafted file: `host` renamed `ALL` (Slurm: every node) in its links and ranks, the others `prefix`ed."""

    def renamed(name: str) -> str:
        return "ALL" if name == host else prefix + name

    for entry in doc["results"]:
        for end in ("src", "dst"):
            entry[f"{end}_host"] = renamed(entry[f"{end}_host"])
    doc["metadata"]["hosts"] = [renamed(h) for h in doc["metadata"]["hosts"]]
    for rank in doc["metadata"]["ranks"]:
        rank["host"] = renamed(rank["host"])
    return doc


def test_a_crafted_results_file_cannot_drain_the_cluster(tmp_path: Path) -> None:
    """Its slow host named `ALL` in its links and ranks: the verdict stands, the host is left out of
    the drain list with a comment saying why."""
    doc = _all_for(generated(CLUSTER, "screen", Fault("host", 5, direction="both", factor=0.5), seed=3), "node005")
    drain = tmp_path / "drain.txt"
    proc = run_cli_here(
        ["check", str(_write(tmp_path / "crafted.json", doc)), "--expect", "default", "--drain", str(drain)]
    )
    assert proc.returncode == 1 and proc.stdout.splitlines()[-2] == "verdict: FAIL", proc.stderr
    assert proc.stdout.splitlines()[-1] == f"drain list: {drain} (no host: 0 of 16 hosts; 1 refused: ALL)"
    text = drain.read_text()
    assert "# not drained, refused: host 'ALL' is a word Slurm reads as a set of nodes" in text
    assert "NodeName=ALL" not in text and "\nscontrol " not in text


def test_one_crafted_file_costs_only_its_own_hosts_not_the_fleets_fail(tmp_path: Path) -> None:
    """A shared results folder: a fleet's run with a failing NIC, and beside it one crafted file whose
    slow host is `ALL`. The fleet's FAIL is printed, its exit code kept, its host drained; the JSON
    verdict says the same; only `ALL` is left out."""
    folder = tmp_path / "shared"
    folder.mkdir()
    _write(folder / "fleet.json", generated(CLUSTER, "screen", Fault("nic", 5, 1, "send", factor=0.8), seed=3))
    crafted = generated(CLUSTER, "screen", Fault("host", 2, direction="both", factor=0.5), seed=4)
    _write(folder / "crafted.json", _all_for(crafted, "node002", prefix="b-"))
    summary, drain = tmp_path / "v.json", tmp_path / "drain.txt"
    proc = run_cli_here(["check", str(folder), "--expect", "default", "--json", str(summary), "--drain", str(drain)])
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1 and lines[-2] == "verdict: FAIL", proc.stderr
    assert lines[-1] == f"drain list: {drain} (node005: 1 of 32 hosts; 1 refused: ALL)"
    text = drain.read_text()
    assert 'scontrol update NodeName=node005 State=DRAIN Reason="rdmabench: nic mlx5_1:1 send' in text
    assert len(re.findall("^scontrol ", text, re.M)) == 1 and "NodeName=ALL" not in text
    assert "# not drained, refused: host 'ALL' is a word Slurm reads as a set of nodes" in text
    verdict = json.loads(summary.read_text())
    assert verdict["outcome"] == "FAIL" and verdict["passed"] is False


HOSTILE = "evil|<b>x</b>"


def test_report_puts_the_suspects_first_in_every_format_escaped(tmp_path: Path) -> None:
    doc = generated(CLUSTER, "screen", NIC, seed=3)
    for entry in doc["results"]:  # node005 renamed: a name from a file reaches every format escaped
        for end in ("src", "dst"):
            if entry[f"{end}_host"] == "node005":
                entry[f"{end}_host"] = HOSTILE
    path = _write(tmp_path / "hostile.json", doc)
    table = run_cli_here(["report", str(path)])
    assert table.returncode == 0 and table.stdout.splitlines()[:2] == [
        "== suspects",
        table.stdout.splitlines()[1],
    ]
    assert table.stdout.splitlines()[1].startswith(f"suspect 1: nic {HOSTILE}:mlx5_1:1 send: ")
    markdown = run_cli_here(["report", str(path), "--format", "markdown"]).stdout
    first = markdown.split("## Suspects\n\n", 1)[1].splitlines()[0]
    assert first.startswith("- suspect 1: nic evil\\|&lt;b>x&lt;/b>:mlx5_1:1 send: "), first
    assert markdown.index("## Suspects") < markdown.index("## Outliers")
    page = run_cli_here(["report", str(path), "--format", "html"]).stdout
    assert "<ul class='suspects'><li>suspect 1: nic evil|&lt;b&gt;x&lt;/b&gt;:mlx5_1:1 send: " in page
    assert "<b>x</b>" not in page and page.index("Suspects") < page.index("Per-link matrices")
    data = json.loads(run_cli_here(["report", str(path), "--format", "json"]).stdout)
    assert data["suspects"][0].startswith(f"nic {HOSTILE}:mlx5_1:1 send: ")
    assert data["attribution"]["suspects"][0]["host"] == HOSTILE and data["attribution"]["outcome"] == "SUSPECTS"
    csv = run_cli_here(["report", str(path), "--format", "csv"]).stdout
    assert csv.startswith("test,") and "suspect" not in csv


def test_the_heatmap_draws_ends_by_host_then_nic_so_a_bad_nic_is_a_band() -> None:
    doc = generated(Cluster(10, 4, 2), "screen", Fault("none"), seed=1)
    for entry in doc["results"]:  # on node000, GPU 0 sends through the second NIC and GPU 1 through the first
        for end in ("src", "dst"):
            if entry[f"{end}_host"] == "node000" and entry.get(f"{end}_nic") and entry[f"{end}_gpu"] in (0, 1):
                entry[f"{end}_nic"] = "mlx5_1:1" if entry[f"{end}_gpu"] == 0 else "mlx5_0:1"
    rows = aggregate([("generated", doc)])
    order = {end: n for n, end in enumerate(end_order(rows))}
    members = [row for row in rows if row.load.startswith("screen") and row.size_bytes == rows[0].size_bytes]
    sources, targets, _grid, by = html._grid(members, order)
    assert by == "per link" and sources[:4] == ["node000:gpu1", "node000:gpu0", "node000:gpu2", "node000:gpu3"]
    assert sources == sorted(sources, key=order.__getitem__) and targets == sorted(targets, key=order.__getitem__)


def test_a_heatmap_per_pair_of_hosts_keeps_the_hosts_in_order() -> None:
    """80 ends: a map per pair of hosts, n2 before n10 (not as text sorts them)."""
    hosts = 20
    doc = generated(Cluster(hosts, 4, 2), "screen", Fault("none"), seed=1)
    for entry in doc["results"]:
        for end in ("src", "dst"):
            entry[f"{end}_host"] = f"n{int(entry[f'{end}_host'][4:])}"
    rows = aggregate([("generated", doc)])
    order = {end: n for n, end in enumerate(end_order(rows))}
    members = [row for row in rows if row.link_class == "inter-node" and row.load.startswith("screen")]
    sources, _targets, _grid, by = html._grid(members, order)
    assert by.startswith("per pair of hosts") and sources == [f"n{i}" for i in range(hosts)]
