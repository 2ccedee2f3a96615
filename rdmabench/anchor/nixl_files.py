"""The files NIXL's two ends and the anchor meet through, in the anchor's private folder (0700): each
written whole under a temporary name, then renamed; never through a link, never another user's file
(privatedirs)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from .. import privatedirs

if TYPE_CHECKING:
    from ..measure.besiderecord import GpuFigureJson  # a GPU's load record, as the ends write it
    from ..measure.kvhandoff import ModelRecord

PLAN = "plan.json"  # an AgentPlan: what the anchor asks of a NIXL pair
DONE = "initiator.done"
_POLL_SECONDS = 0.002
_PARENT = os.getppid()  # the anchor that started this end: waiting on once it is gone is waiting forever


class PlanShape(TypedDict):
    """The block list a NIXL pair moves (a measure.blocks.BlockShape's fields the agents rebuild it from)."""

    count: int
    layout: str
    batch: int
    pool_bytes: int | None  # None: enough for the layout
    regions: int


class PlanBeside(TypedDict):
    """The compute load a NIXL pair runs beside (nixl_beside.Beside)."""

    load: str
    size: int


class AgentPlan(TypedDict):
    """What the anchor asks of a NIXL pair (PLAN in its private folder): the operation, memory and size of
    its transfers, the list, how long and how many transfers it times, its threads and load beside."""

    operation: str
    memory: str
    size: int
    seconds: float
    shape: PlanShape
    warmup: int
    min_transfers: int
    max_transfers: int
    timeout: float
    threads: int
    beside: PlanBeside | None
    pairs: int


class Telemetry(TypedDict):
    """NIXL's own account of its median transfer: us posting, us to completion, descriptors posted."""

    post_us_p50: float
    transfer_us_p50: float
    descriptors_posted: int


class _Figures(TypedDict):
    transfers: int
    transfer_us: dict[str, float]  # p50, p99, p99.9, max
    transfer_gbps_p50: float
    transfer_gbps_mean: float  # all bytes over all transfers' time
    descriptors_per_second_p50: float
    post_us_p50: float
    post_share_p50: float
    make_us_p50: float


class Figures(_Figures, total=False):
    """What an initiator reports of timed transfers (the fields rdmabench's block record has), NIXL's
    telemetry where it keeps one, the first transfer and the CPU; beside compute, also its GPU's load
    (measure.pairs.Pairs.summary, as besiderecord.GpuFigure's JSON) and each pair's GB/s."""

    nixl_telemetry: Telemetry
    first_transfer_s: float
    cpu_s_per_gb: float
    load: GpuFigureJson
    pairs_gbps: list[float]


class _TargetCold(TypedDict):
    agent_s: float
    register_s: float
    metadata_s: float


class TargetResult(_TargetCold, total=False):
    """The target's result file: what its set-up cost, its GPU's load beside the initiator's pairs, its
    CPU, and (a WRITE) the blocks that arrived wrong."""

    beside_load: GpuFigureJson
    cpu_s: float
    wrong_blocks: int


class _InitiatorRuns(TypedDict):
    blocks: Figures
    reference: Figures  # the same bytes as one contiguous descriptor
    cold_s: dict[str, float]
    backend: str


class InitiatorResult(_InitiatorRuns, total=False):
    """The initiator's result file: the list's transfers, the contiguous reference, the cold costs, the
    list again beside compute, and (a READ) the blocks that arrived wrong."""

    beside: Figures
    wrong_blocks: int


class PairRun(TypedDict):
    """One NIXL pair's run as the anchor keeps it: both agents' result files and the transport the
    initiator's UCX reported."""

    target: TargetResult
    initiator: InitiatorResult
    transport: str | None


class TargetAddress(TypedDict):
    """target.json: where the target's pool is, and the target's process."""

    address: int
    pid: int


class AgentError(Exception):
    """Why this end stopped: the line the anchor reports."""


# --- files in the private folder ------------------------------------------------------------------


def write_file(folder: Path, name: str, data: bytes) -> None:
    """`name` in `folder`, whole or not at all: written under a fresh temporary name, then renamed."""
    part = folder / f".{name}.part"
    fd = privatedirs.open_in_private_dir(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.rename(part, folder / name)


def read_file(folder: Path, name: str) -> bytes:
    fd = privatedirs.open_in_private_dir(folder / name, os.O_RDONLY)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def wait_for(folder: Path, name: str, deadline: float) -> bytes:
    """`name`'s bytes once the other end has written it; AgentError past the deadline."""
    while not (folder / name).exists():
        if time.monotonic() > deadline:
            raise AgentError(f"the other end wrote no {name} in time")
        check_parent()
        time.sleep(_POLL_SECONDS)
    return read_file(folder, name)


def check_parent() -> None:
    """AgentError once the anchor that started this end has gone (killed, say): no one reads what it
    would measure, and its compute load must not run on."""
    if os.getppid() != _PARENT:
        raise AgentError("the anchor that started this end is gone")


def write_json(
    folder: Path, name: str, data: AgentPlan | ModelRecord | TargetAddress | TargetResult | InitiatorResult
) -> None:
    write_file(folder, name, json.dumps(data).encode())


def throughput(figures: Figures) -> float:
    """A NIXL run's bytes over its transfers' time (its median transfer's, from agents without it)."""
    return float(figures.get("transfer_gbps_mean") or figures["transfer_gbps_p50"])


def mean(values: Iterable[object]) -> float:
    found = [float(value) for value in values]  # type: ignore[arg-type]
    return sum(found) / len(found)
