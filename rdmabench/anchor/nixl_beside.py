"""NIXL's two ends beside a model's compute (`anchor --against nixl --beside`), in lockstep.

Each end runs the compute load on its own GPU (measure.beside.Pairs, as rdmabench's ranks do), and
the pairs (load alone, then load and transfers at once, then the load alone again) are kept in step
through files in the anchor's private folder: the initiator says `go`, both start their load, the
target says `ready`, the initiator times its transfers, says `stop`, and both close the pair; the
target says `stopped`. So the transfers run while both GPUs compute, and each GPU's slowdown comes
from its own pairs. Loads nothing that loads UCX (wire.gpuload builds a CUDA library of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..measure.beside import Beside, Pairs, load_on_this_gpu, release_loads
from .nixl_files import wait_for, write_file

T = TypeVar("T")


def beside_of(plan: dict[str, Any]) -> Beside | None:
    """The plan's compute load (plan["beside"]: load, size), or None."""
    found = plan.get("beside")
    return None if not found else Beside(str(found["load"]), int(found["size"])).check()


def _mark(folder: Path, name: str) -> None:
    write_file(folder, name, b"")


def initiator_pairs(
    folder: Path, plan: dict[str, Any], beside: Beside, timed: Callable[[], T], deadline: float
) -> tuple[list[T], dict[str, Any]]:
    """Each pair's transfers (`timed()`), run while both GPUs compute; this GPU's load summary."""
    pairs = Pairs(beside, load_on_this_gpu(beside), partitioned=False)
    found: list[T] = []
    try:
        for index in range(int(plan["pairs"])):
            _mark(folder, f"pair-{index}.go")
            pairs.start()
            wait_for(folder, f"pair-{index}.ready", deadline)
            found.append(timed())
            _mark(folder, f"pair-{index}.stop")
            pairs.stop()
            wait_for(folder, f"pair-{index}.stopped", deadline)
        return found, pairs.summary()
    finally:
        release_loads()


def target_pairs(folder: Path, plan: dict[str, Any], beside: Beside, deadline: float) -> dict[str, Any]:
    """This GPU's load through the initiator's pairs: its summary (rate alone and beside, slowdowns)."""
    pairs = Pairs(beside, load_on_this_gpu(beside), partitioned=False)
    try:
        for index in range(int(plan["pairs"])):
            wait_for(folder, f"pair-{index}.go", deadline)
            pairs.start()
            _mark(folder, f"pair-{index}.ready")
            wait_for(folder, f"pair-{index}.stop", deadline)
            pairs.stop()
            _mark(folder, f"pair-{index}.stopped")
        return pairs.summary()
    finally:
        release_loads()
