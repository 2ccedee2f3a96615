"""NIXL's two ends beside a model's compute (`anchor --against nixl --beside`), in lockstep.

Each end runs the compute load on its own GPU (measure.pairs.Pairs, as rdmabench's ranks do: settled
first, the model's cost as the work it loses over a shared window of its operations), and the pairs
(load alone, then load and transfers at once, then the load alone again) are kept in step through
files in the anchor's private folder: the initiator says `go`, both take their last window after as
this pair's before and start the shared half's run (the load runs on between pairs), the target
says `ready`, the initiator opens its own window, says `started` and
times transfers back to back, the target opens its window once it sees `started` (a window opened
before the transfers began held a few operations alone), the initiator stops when its window has
ended and the target has said `over` (its window ended), says `stop`, and both close the pair; the
target says `stopped`. So the transfers run through both GPUs' windows, and each GPU's slowdown comes
from its own pairs. A pair is not taken again for drift here; one that drifted past the limit is
marked and not judged. Loads nothing that loads UCX (wire.gpuload builds a CUDA library of its own).
A row's figures beside compute, both sides', are read here too (`beside_figures`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import reduce
from pathlib import Path
from typing import Protocol, TypeVar

from ..measure.beside import Beside, load_on_this_gpu, release_loads
from ..measure.besiderecord import BesideFigure, GpuFigure, GpuFigureJson
from ..measure.judging import Said, drifting, judge_pairs, pairs_of, unjudged_words, worse_pairs
from ..measure.pairs import Pairs
from ..stats import median
from .nixl_files import AgentPlan, PairRun, mean, throughput, wait_for, write_file
from .nixl_row import NixlFigures
from .rounds import figure


class _Adds(Protocol):
    def __add__(self: T, other: T) -> T: ...


T = TypeVar("T", bound=_Adds)  # a run of timed transfers (nixl_agent.Timed): runs add up


def beside_of(plan: AgentPlan) -> Beside | None:
    """The plan's compute load (plan["beside"]: load, size), or None."""
    found = plan.get("beside")
    return None if not found else Beside(str(found["load"]), int(found["size"])).check()


def _mark(folder: Path, name: str) -> None:
    write_file(folder, name, b"")


def _marked(folder: Path, name: str) -> bool:
    """Whether the other end has said `name` (its file is there: a name in the anchor's private folder)."""
    return (folder / name).is_file()


def initiator_pairs(
    folder: Path, plan: AgentPlan, beside: Beside, timed: Callable[[], T], deadline: float
) -> tuple[list[T], GpuFigureJson]:
    """Each pair's transfers, run while both GPUs compute: `timed()` again and again, back to back,
    until both GPUs' shared windows have ended (this one's, and the target's `over`); this GPU's load
    summary (GpuFigure's JSON, for its result file). A pair's runs add up to one; the duty is the share of the shared half spent in `timed()`."""
    pairs = Pairs(beside, load_on_this_gpu(beside), partitioned=False)
    found: list[T] = []
    try:
        pairs.settle()
        for index in range(int(plan["pairs"])):
            _mark(folder, f"pair-{index}.go")
            pairs.begin()
            wait_for(folder, f"pair-{index}.ready", deadline)
            pairs.open()
            _mark(folder, f"pair-{index}.started")  # the target opens its window on it
            runs: list[T] = []
            busy, began = 0.0, time.perf_counter()
            while not runs or not (pairs.over() and _marked(folder, f"pair-{index}.over")):
                started = time.perf_counter()
                runs.append(timed())
                busy += time.perf_counter() - started
            span = time.perf_counter() - began
            found.append(reduce(lambda a, b: a + b, runs))
            _mark(folder, f"pair-{index}.stop")
            drift = pairs.close(busy / span if span > 0 else None)
            pairs.keep(0, drifting(drift))
            wait_for(folder, f"pair-{index}.stopped", deadline)
        pairs.finish()
        return found, pairs.summary().to_json()
    finally:
        pairs.finish(quiet=True)  # the load runs on between pairs; an error on its way is the one to say
        release_loads()


def target_pairs(folder: Path, plan: AgentPlan, beside: Beside, deadline: float) -> GpuFigureJson:
    """This GPU's load through the initiator's pairs: its summary (rate alone and beside, slowdowns).
    It says `over` when its shared window has ended; the initiator's transfers run until then."""
    pairs = Pairs(beside, load_on_this_gpu(beside), partitioned=False)
    try:
        pairs.settle()
        for index in range(int(plan["pairs"])):
            wait_for(folder, f"pair-{index}.go", deadline)
            pairs.begin()
            _mark(folder, f"pair-{index}.ready")
            wait_for(folder, f"pair-{index}.started", deadline)
            pairs.open()
            while not pairs.over():
                time.sleep(0.0005)
            _mark(folder, f"pair-{index}.over")
            wait_for(folder, f"pair-{index}.stop", deadline)
            drift = pairs.close(None)  # the initiator's transfers: its duty is the pair's
            pairs.keep(0, drifting(drift))
            _mark(folder, f"pair-{index}.stopped")
        pairs.finish()
        return pairs.summary().to_json()
    finally:
        pairs.finish(quiet=True)  # the load runs on between pairs; an error on its way is the one to say
        release_loads()


def beside_figures(beside: Beside, before: PairRun, after: PairRun, unchecked: Mapping[str, object]) -> NixlFigures:
    """Both sides beside compute: each one's list alone and beside as a throughput (all bytes over all
    transfers' time: beside a load the median transfer hides those that waited for SMs the load held),
    and the model's slowdown (the worse of the two GPUs, pair by pair; NIXL's over the pairs of both
    its runs) with its range."""
    runs = (before, after)
    pairs = [slowdown for run in runs for slowdown in worse_pairs(_nixl_gpus(run))]
    record = BesideFigure.from_json(unchecked["beside"])  # the rdmabench entry's, read back once
    assert record is not None  # run_blocks kept entries with one
    out: NixlFigures = {
        "beside_load": beside.label, "beside_unit": beside.unit,
        "nixl_alone_gbps": mean(throughput(run["initiator"]["blocks"]) for run in runs),
        "nixl_beside_gbps": mean(throughput(run["initiator"]["beside"]) for run in runs),
        "rdmabench_alone_gbps": record.transfer_alone,  # its steps' figure in each pair's alone half
        "rdmabench_beside_gbps": figure(unchecked, "bandwidth_gbps"),  # its steps' figure beside the load
        "nixl_slowdown": median(pairs) if pairs else None,
        "nixl_slowdown_min": min(pairs) if pairs else None, "nixl_slowdown_max": max(pairs) if pairs else None,
        "rdmabench_slowdown": record.slowdown,
    }  # fmt: skip
    out["ratio_beside_gbps"] = out["rdmabench_beside_gbps"] / max(out["nixl_beside_gbps"], 1e-12)
    low_high = record.slowdown_range
    out["rdmabench_slowdown_min"], out["rdmabench_slowdown_max"] = low_high if low_high else (None, None)
    if record.slowdown is None:  # no pair judged: why, where the pairs say
        out["rdmabench_unjudged"] = unjudged_words(record) or "no pair judged"
    if (said := _nixl_said(runs, pairs)) is not None:
        out["nixl_unjudged"] = unjudged_words(said) or "no pair judged"
    out["nixl_load_alone"] = _load_alone(_nixl_gpus(before))  # the load's own rate alone, the slower GPU's
    out["rdmabench_load_alone"] = _load_alone(list(record.gpus.values()))
    return out


def _nixl_said(runs: tuple[PairRun, PairRun], judged: list[float]) -> Said | None:
    """Where no NIXL pair was judged, the pairs of both its runs as a beside record reads them (their
    duty and which drifted), for unjudged_words; None where some were."""
    if judged:
        return None
    duties: list[float] = []
    slowdowns: list[float | None] = []
    drifting: list[int] = []
    for run in runs:
        gpus = _nixl_gpus(run)
        found = judge_pairs(gpus, [0] * pairs_of(gpus))
        drifting += [len(slowdowns) + i for i in sorted({i for gpu in gpus for i in gpu.drifting_pairs})]
        slowdowns += found.slowdowns
        duties += [d for d in found.duties if d is not None]
    return Said(median(duties) if duties else None, slowdowns, drifting)


def _nixl_gpus(run: PairRun) -> list[GpuFigure]:
    """What each of a NIXL run's GPUs measured of its load (Pairs.summary): the initiator's, the target's,
    each read back from its end's file once."""
    found = (GpuFigure.from_json(run["initiator"]["beside"]["load"]), GpuFigure.from_json(run["target"]["beside_load"]))
    return [gpu for gpu in found if gpu is not None]


def _load_alone(gpus: list[GpuFigure]) -> float | None:
    """The compute's rate alone (TFLOP/s or GB/s) of the slower of `gpus` (Pairs.summary each)."""
    rates = [gpu.alone for gpu in gpus if gpu.alone]
    return min(rates) if rates else None
