"""The records of a figure beside compute (measure/besiderecord.py), made on the load's side
(measure/judging.py's beside_figure) and read back from a results file once, each value checked.
Generated GPU records (no GPU)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rdmabench.measure.beside import Beside
from rdmabench.measure.besiderecord import GpuFigure


def _gpu(fields: dict[str, Any]) -> GpuFigure:
    """A GPU's record of a gemm:1024 load, as a results file would hold `fields` (read back)."""
    found = GpuFigure.from_json({"load": "gemm:1024", **fields})
    assert found is not None
    return found


def test_an_entrys_beside_record_takes_the_worse_gpu_and_the_initiators_duty() -> None:
    """What the entry writes beside compute (judging.beside_figure, made on the load's side), from two
    GPUs' records as the ranks gather them: the worse GPU's slowdown pair by pair, the initiator's duty
    (the other end says None), every pair's time lost per GiB, and a pair unjudged where a GPU's alone
    windows drifted; read back from its JSON, the same record."""
    from rdmabench.measure.besiderecord import BesideFigure
    from rdmabench.measure.judging import beside_figure

    initiator = _gpu({
        "slowdown_pairs": [1.1, 1.2, 1.3], "duty_pairs": [0.95, 0.96, 0.97], "lost_s_pairs": [0.01, 0.02, 0.03],
        "window_s_pairs": [0.1] * 3, "span_s_pairs": [0.1] * 3, "alone_drift": 0.01, "drifting_pairs": [],
        "carveout_cost": None, "alone": 600.0,
    })  # fmt: skip
    other = replace(
        initiator, slowdown_pairs=[1.15, 1.1, 1.0], duty_pairs=[None] * 3, drifting_pairs=[2], alone_drift=0.05
    )
    alone = [(1 << 20) / 1e-3 / 1e9] * 3  # each pair's alone half: 1 MiB a step of 1 ms
    found = beside_figure(Beside("gemm", 8192), alone, [1.0, 1.0, 1.0], [100 << 20] * 3, {0: initiator, 1: other})
    assert found.slowdown_pairs == [1.15, 1.2, 1.3] and found.duty_pairs == [0.95, 0.96, 0.97]
    assert found.pairs == 2 and found.slowdown == pytest.approx(1.175) and found.drifting_pairs == [2]
    assert found.alone_drift == 0.05 and "1 of 3 pairs not judged" in (found.note or "")
    assert found.model_ms_per_gib is not None and found.transfer_alone == pytest.approx(1.048576)
    written = found.to_json()
    assert list(written)[:3] == ["load", "unit", "transfer_alone"] and written["load"] == "gemm:8192"
    assert BesideFigure.from_json(written) == found and BesideFigure.from_json({"load": "prefill"}) is None


def test_a_beside_record_read_back_checks_every_value_once() -> None:
    """A results file is untrusted: a value of the wrong type reads as missing (None, or an empty
    list), never as itself, so the readers use the record's fields as typed."""
    from rdmabench.measure.besiderecord import BesideFigure

    found = BesideFigure.from_json({
        "load": "gemm:8192,carveout=8", "transfer_alone": "12", "slowdown": True, "slowdown_range": [1.0],
        "duty_pairs": [0.9, "x", None], "drifting_pairs": 5, "carveout": 4, "gpus": {"0": {"load": 3}, "1": None},
        "pairs": 2.5, "note": 7,
    })  # fmt: skip
    assert found is not None and found.load == Beside("gemm", 8192, 8)  # the carve-out the label names
    assert (found.transfer_alone, found.slowdown, found.slowdown_range, found.note) == (None, None, None, None)
    assert found.duty_pairs == [0.9, None, None] and found.drifting_pairs == [] and found.gpus == {}
    assert found.pairs == 0 and found.to_json()["carveout"] == 8
