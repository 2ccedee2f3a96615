"""swap-out and swap-in: KV offload between this rank's GPU and its own pinned pool (measure/offloadsteps.py),
a block list (--blocks) in the one process that owns both ends, as a serving engine's offload is."""

from __future__ import annotations

from ...modes import MemoryMode
from ..blocks import BlockShape
from ..offloadsteps import IN, OUT, OffloadProtocol
from ..postings import CPU
from ..registry import TestKind, register
from .bw import window_gbps


def _refuse(mode: MemoryMode) -> str | None:
    if mode.staged or mode.ucx_allocated or mode is MemoryMode.MANAGED:
        return "an offload's ends are this rank's own pools: device memory and pinned (or other host) memory"
    return None


def _kind(name: str, direction: str, summary: str) -> TestKind:
    return TestKind(
        name=name,
        summary=summary,
        field="bandwidth_gbps",
        unit="GB/s",
        higher_is_better=True,
        scope="unidirectional",
        protocol=OffloadProtocol(direction, BlockShape(1, posting=CPU)),  # what --blocks shapes replaces
        pair_links=lambda a, b: [(a, a)],  # the rank with itself: its GPU's pool and its own pinned pool
        figure=window_gbps,
        timing="timed on the GPU from the list's first post to its last block landed",
        concurrent=True,  # --pattern each: every rank with itself at once
        offload=direction,
        refuse_mode=_refuse,
    )


SWAP_OUT = register(_kind("swap-out", OUT, "KV offload: blocks of this rank's GPU into its own pinned pool (--blocks)"))
SWAP_IN = register(_kind("swap-in", IN, "KV offload: blocks of this rank's pinned pool into its GPU (--blocks)"))
