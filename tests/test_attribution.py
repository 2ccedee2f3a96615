"""Naming the broken part: planted faults in GENERATED runs (devtools.diagnose marks them so
in their metadata) are named first, healthy runs name none, and the evidence and the fleet-relative
floors say what the links say."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from devtools import diagnose
from devtools.diagnose import Cluster, Fault, faults, generated
from rdmabench.results.files.rows import Row, aggregate, culprits, outliers
from rdmabench.results.verdicts.attribution import Params, attribute
from rdmabench.results.verdicts.fleet import REMEASURED, FloorParams, below_floor, fleet_floors, student_quantile
from rdmabench.results.verdicts.suspects import end_order

SCREEN = Cluster(16, 8, 2)  # 2,176 links a screen
ALL_PAIRS = Cluster(16, 4, 2)  # 4,032 links


def _rows(doc: dict[str, Any]) -> list[Row]:
    return aggregate([("generated", doc)])


@pytest.mark.parametrize("fault", faults(SCREEN), ids=lambda f: f"{f.kind}-{f.direction}")
def test_a_screen_names_the_planted_part_first(fault: Fault) -> None:
    doc = generated(SCREEN, "screen", fault, seed=3)
    assert doc["metadata"]["generated"].startswith("SYNTHETIC") and doc["metadata"]["planted"]["kind"] == fault.kind
    found = attribute(_rows(doc))
    names = [s.name for s in found.suspects]
    if fault.kind == "none":
        assert names == [] and found.outcome == "HEALTHY" and found.unexplained == 0
        return
    assert names == [fault.name(SCREEN)]  # the planted part, and nothing else
    top = found.suspects[0]
    assert top.confidence >= 0.5 and top.ratio == pytest.approx(fault.factor, abs=0.06)
    assert top.explained >= 0.75 * top.links and found.outcome == "SUSPECTS"


@pytest.mark.parametrize("fault", faults(ALL_PAIRS), ids=lambda f: f"{f.kind}-{f.direction}")
def test_all_pairs_names_the_planted_part_first(fault: Fault) -> None:
    """A single slow link, measured once, is the one link to measure again (no suspect: one figure)."""
    found = attribute(_rows(generated(ALL_PAIRS, "all-pairs", fault, seed=5)))
    named = [fault.name(ALL_PAIRS)] if fault.kind not in ("none", "link") else []
    assert [s.name for s in found.suspects][:1] == named and len(found.suspects) <= 1
    if fault.kind == "link":
        assert ["link " + row.link for row in found.remeasure] == [fault.name(ALL_PAIRS)]


def test_a_slow_sender_does_not_blame_its_healthy_receivers() -> None:
    """The issue's example: one slow sender of 16 hosts. Outliers per node blame the receivers too;
    the attribution names the sender's host, sending, alone."""
    fault = Fault("host", 0, direction="send", factor=0.6)
    rows = _rows(generated(SCREEN, "screen", fault, seed=1))
    nodes = culprits([row for row, _off in outliers(rows, 0.2)])["nodes"]
    assert nodes["node000"] > 1 and len(nodes) > 1  # the old count blames every receiver as well
    found = attribute(rows)
    assert [s.name for s in found.suspects] == ["host node000 send"]
    assert found.suspects[0].explained == 15 * 8  # every link it sent to another host
    assert found.unexplained == 0


def test_a_nic_shared_by_gpus_beats_either_gpu_and_a_gpu_beats_its_own_nic() -> None:
    """With one NIC per GPU only the links within the node tell a GPU from its NIC: they decide."""
    cluster = Cluster(16, 8, 8)
    nic = attribute(_rows(generated(cluster, "all-pairs", Fault("nic", 5, 2, "send", factor=0.8), seed=2)))
    gpu = attribute(_rows(generated(cluster, "all-pairs", Fault("gpu", 5, 2, "send", factor=0.8), seed=2)))
    assert [s.name for s in nic.suspects] == ["nic node005:mlx5_2:1 send"]
    assert [s.name for s in gpu.suspects] == ["gpu node005:gpu2 send"]
    assert nic.suspects[0].placement == ["carrying node005:gpu2"]
    assert gpu.suspects[0].placement == ["through node005/mlx5_2:1"]


def _screen_with_one_slow_link(alone_factor: float) -> list[Row]:
    """A healthy screen but one link at half its class, re-measured alone at `alone_factor`."""
    doc = generated(SCREEN, "screen", Fault("none"), seed=4)
    entries = doc["results"]
    slow = next(e for e in entries if e["src_host"] == "node002" and e["dst_host"] == "node009" and e["src_gpu"] == 0)
    slow["samples"] = [v * 0.5 for v in slow["samples"]]
    slow["bandwidth_gbps"] *= 0.5
    again = dict(slow, remeasured_from=slow["bandwidth_gbps"], concurrent_links=1)
    again["samples"] = [v * alone_factor / 0.5 for v in slow["samples"]]
    again["bandwidth_gbps"] = sorted(again["samples"])[1]
    entries.append(again)
    return _rows(doc)


def test_links_remeasured_alone_weigh_more_and_a_link_that_recovers_alone_is_not_named() -> None:
    confirmed = attribute(_screen_with_one_slow_link(0.5))
    assert any(row.load == REMEASURED for row in _screen_with_one_slow_link(0.5))
    (link,) = confirmed.suspects
    assert link.name == "link node002:gpu0 -> node009:gpu0" and link.confidence == pytest.approx(2 / 3, abs=0.01)
    assert "re-measured alone stayed slow" in link.supporting[0]
    recovered = attribute(_screen_with_one_slow_link(1.0))
    assert recovered.suspects == [] and recovered.outcome == "SLOW" and recovered.unexplained == 1
    assert recovered.unexplained_links == ["node002:gpu0 -> node009:gpu0"]
    # Not re-measured at all: one slow figure is no suspect, but the link to measure again.
    plain = attribute(_rows(generated(ALL_PAIRS, "all-pairs", faults(ALL_PAIRS)[6], seed=5)))
    assert plain.suspects == [] and plain.outcome == "REMEASURE" and plain.unexplained == 0
    assert [row.link for row in plain.remeasure] == [faults(ALL_PAIRS)[6].name(ALL_PAIRS).removeprefix("link ")]


def test_a_part_whose_slow_links_all_recover_alone_is_not_named() -> None:
    """node002 sends slowly to node009 from every GPU in the screen (a stall of one round, say), and
    the links run above their class's figure alone: slow under load only, no part is named. Near
    it but below (a part at 90% may reach 96% alone) or still slow alone: the pair is named."""
    for alone, named in ((1.05, []), (0.96, ["pair node002 -> node009"]), (0.7, ["pair node002 -> node009"])):
        doc = generated(SCREEN, "screen", Fault("none"), seed=4)
        entries = doc["results"]
        pair = [e for e in entries if e["src_host"] == "node002" and e["dst_host"] == "node009"]
        for slow in pair:
            slow["samples"] = [v * 0.7 for v in slow["samples"]]
            slow["bandwidth_gbps"] *= 0.7
            again = dict(slow, remeasured_from=slow["bandwidth_gbps"], concurrent_links=1)
            again["samples"] = [diagnose.TYPICAL["aligned"] * alone] * 3  # the class's typical figure, or less
            again["bandwidth_gbps"] = sorted(again["samples"])[1]
            entries.append(again)
        found = attribute(_rows(doc))
        assert [s.name for s in found.suspects] == named, (alone, [s.describe() for s in found.suspects])


def test_evidence_for_and_against_a_suspect() -> None:
    """A GPU behind a downtrained PCIe link warning of its NUMA node; a NIC whose bytes went elsewhere."""
    doc = generated(SCREEN, "screen", Fault("gpu", 6, 3, "send", factor=0.3), seed=6)
    pcie = {"gbps": 15.75, "kind": "PCIe", "detail": "Gen4 x8", "measured": False}
    for entry in doc["results"]:
        if entry["src_host"] == "node006" and entry["src_gpu"] == 3:
            entry.update(link_limit=pcie, share_of_limit=entry["bandwidth_gbps"] / pcie["gbps"])
            entry["warnings"] = ["GPU 3 and its NIC are on different NUMA nodes"]
    (gpu,) = attribute(_rows(doc)).suspects
    assert gpu.name == "gpu node006:gpu3 send"
    assert any(s.startswith("placement: its slow links' limit is PCIe 15.8 GB/s where") for s in gpu.supporting)
    assert "its slow links warn, unlike their class: GPU 3 and its NIC are on different NUMA nodes" in gpu.supporting
    doc = generated(SCREEN, "screen", Fault("nic", 7, 1, "send", factor=0.5), seed=6)
    for entry in doc["results"]:
        if entry["src_host"] == "node007" and entry.get("src_nic") == "mlx5_1:1" and "remeasured_from" not in entry:
            entry["wire"] = {"dev": "mlx5_1:1", "ratio": 0.4, "gbps": 10.0}
    (nic,) = attribute(_rows(doc)).suspects
    assert nic.name == "nic node007:mlx5_1:1 send"
    assert any("counted under 90% of their bytes on mlx5_1:1" in c for c in nic.contradicting)
    data = json.loads(json.dumps(nic.to_dict()))
    assert data["component"] == nic.name and data["kind"] == "nic" and data["explained_links"]


def _class(values: list[float], test: str = "bw", host_of: Any = None) -> dict[str, Any]:
    """A document of one class: a link per value, node<i> to node<i+1>, rail-aligned."""
    entries = []
    for i, value in enumerate(values):
        entry = {
            "test": test, "src_rank": i, "dst_rank": i + 1, "src_mode": "host", "dst_mode": "host",
            "size_bytes": 1 << 20, "samples": [value], "validated": True, "transport": "tcp/eth0",
            "unit": "us" if test == "lat" else "GB/s", "src_host": f"node{i}", "dst_host": f"node{i + 1}",
            "src_nic": "eth0", "dst_nic": "eth0", "link_limit": {"gbps": 12.5, "kind": "NIC"},
            "share_of_limit": value / 12.5,
        }  # fmt: skip
        entry["latency_us" if test == "lat" else "bandwidth_gbps"] = value
        entries.append(entry)
    return {
        "schema": {"name": "rdmabench-results", "version": 1},
        "metadata": {"generated": "test"},
        "results": entries,
    }


def test_fleet_floors_are_robust_and_say_what_they_cannot_judge() -> None:
    rng = np.random.default_rng(1)
    healthy = (10.0 * np.exp(rng.normal(0, 0.02, 60))).tolist()
    (alone,) = fleet_floors(_rows(_class(healthy)))
    (hit,) = fleet_floors(_rows(_class(healthy + [5.0] * 20)))  # a quarter of the class at half speed
    assert alone.judged and alone.slow == 0 and alone.median == pytest.approx(10.0, rel=0.01)
    assert hit.floor == pytest.approx(alone.floor, rel=0.05) and hit.slow == 20  # the bad links move no floor
    assert alone.limit == "NIC 12.5 GB/s" and alone.median_share == pytest.approx(0.8, rel=0.01)
    assert alone.sigma == pytest.approx(0.02, rel=0.3)
    slow = below_floor(_rows(_class([*healthy, 7.0])))
    assert [(row.src_host, round(ratio, 2)) for row, _floor, ratio in slow] == [("node60", 0.70)]
    (few,) = fleet_floors(_rows(_class([10.0, 10.1, 3.0])))
    assert not few.judged and few.slow == 0
    found = attribute(_rows(_class([10.0, 10.1, 3.0])))
    assert found.outcome == "INCONCLUSIVE" and found.lines() == [
        "no suspect can be named: no class of links has the 6 links it takes to judge one "
        "(3 link(s) in 1 class(es): bw host->host 1MiB inter-node rail-aligned, alone)"
    ]


def test_a_latency_is_worse_above_its_class() -> None:
    rng = np.random.default_rng(2)
    values = [*(5.0 * np.exp(rng.normal(0, 0.02, 40))).tolist(), 9.0]
    (floor,) = fleet_floors(_rows(_class(values, "lat")))
    assert not floor.higher_is_better and floor.floor > floor.median and floor.slow == 1
    ((row, _floor, ratio),) = below_floor(_rows(_class(values, "lat")))
    assert row.median == 9.0 and ratio == pytest.approx(floor.median / 9.0)


def test_floor_parameters_are_the_documented_ones() -> None:
    """k grows with a class to the t quantile of alpha over its links; min_drop bounds a tight class."""
    assert student_quantile(0.025, 10) == pytest.approx(2.228, abs=1e-3)
    assert student_quantile(1e-5, 1e6) == pytest.approx(4.265, abs=1e-3)
    tight = [10.0, 10.001, 9.999] * 10 + [9.7]  # 3% down in a class of almost equal figures: not slow
    (floor,) = fleet_floors(_rows(_class(tight)))
    assert floor.slow == 0 and floor.floor == pytest.approx(floor.median * 0.95)
    (loose,) = fleet_floors(_rows(_class(tight)), FloorParams(min_drop=0.01, alpha=None))
    assert loose.slow == 1
    strict = attribute(_rows(generated(SCREEN, "screen", faults(SCREEN)[4], seed=3)), Params(majority=1.0))
    assert strict.suspects == [] or strict.suspects[0].name != faults(SCREEN)[4].name(SCREEN)


def test_the_benchmark_scores_planted_faults(capsys: pytest.CaptureFixture[str]) -> None:
    code = diagnose.main(["--generated", "--ranks", "64", "--per-host", "4", "--rails", "2", "--no-million"])
    out = capsys.readouterr().out
    trials = [line for line in out.splitlines() if line.startswith(("screen ", "all-pairs "))]
    assert code == 0 and "MISS" not in out and len(trials) == 16 and all(" hit " in line for line in trials)
    assert diagnose.main(["--netns", "--hosts", "2"]) == 2  # refused before a namespace is made
    assert capsys.readouterr().err.count("\n") == 1


def test_no_suspect_in_healthy_runs_over_seeds() -> None:
    for seed in range(6):
        found = attribute(_rows(generated(ALL_PAIRS, "all-pairs", Fault("none"), seed=seed)))
        assert found.suspects == [], (seed, [s.name for s in found.suspects])
        assert math.isfinite(found.classes[0].sigma)


def test_heatmap_order_puts_a_nics_gpus_together() -> None:
    doc = generated(Cluster(10, 4, 2), "screen", Fault("none"), seed=1)
    for entry in doc["results"]:  # on node000, GPU 0 sends through the second NIC and GPU 1 through the first
        for end in ("src", "dst"):
            if entry[f"{end}_host"] == "node000" and entry.get(f"{end}_nic") and entry[f"{end}_gpu"] in (0, 1):
                entry[f"{end}_nic"] = "mlx5_1:1" if entry[f"{end}_gpu"] == 0 else "mlx5_0:1"
    order = end_order(_rows(doc))
    assert order[:4] == ["node000:gpu1", "node000:gpu0", "node000:gpu2", "node000:gpu3"]
    assert len(order) == 40 and order[-1] == "node009:gpu3"


def test_several_runs_are_judged_together() -> None:
    """Two runs of one cluster: each link's figure is its median over both; the part slow in both is named."""
    fault = Fault("nic", 9, 0, "receive", factor=0.8)
    docs = [
        ("a", generated(ALL_PAIRS, "all-pairs", fault, seed=1)),
        ("b", generated(ALL_PAIRS, "all-pairs", fault, seed=2)),
    ]
    docs[1][1]["metadata"]["created_utc"] = "2026-01-02T00:00:00Z"  # another run, not a copy of the first
    rows = aggregate(docs)
    assert {len(row.values) for row in rows} == {2}
    found = attribute(rows)
    assert [s.name for s in found.suspects] == ["nic node009:mlx5_0:1 receive"]
    assert found.lines()[0].startswith("suspect 1: nic node009:mlx5_0:1 receive: ")
    assert attribute([]).outcome == "INCONCLUSIVE" and attribute([]).lines()[0].startswith(
        "no suspect can be named: no class"
    )
