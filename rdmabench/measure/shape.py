"""What a run's steps move, resolved once when its configuration is built (job/config.py:
RunConfig.shape): plain messages, a block list (blocks.py: one BlockShape a posting path), or a
model's KV-cache handoff (kvhandoff.py: a block list whose descriptors a model sets).

The test kind turns a shape into the step protocols that move it (registry.TestKind.protocols), and
a protocol declares the measurements its entries are read against (contract.StepProtocol.companions),
so the job runs any shape without knowing which it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .blocks import BlockShape
from .kvhandoff import Handoff


@dataclass(frozen=True)
class Shape:
    """Messages (no lists), a block list (`lists`: its shape for each posting path asked, in the
    order they run) or a model's handoff (`handoff` too). `device`: the lists' pools are device memory
    moved one-sided, so the GPU may post them and copy them for their ceiling (UCX's device lane)."""

    lists: tuple[BlockShape, ...] = ()
    handoff: Handoff | None = None
    device: bool = False

    @property
    def form(self) -> Literal["message", "block list", "handoff"]:
        return "handoff" if self.handoff is not None else "block list" if self.lists else "message"

    @property
    def first(self) -> BlockShape | None:
        """The first posting path's list (the table's header, the preflight's counts)."""
        return self.lists[0] if self.lists else None

    def describe(self) -> str | None:
        """The table's header line for a transfer (None: messages)."""
        first = self.first
        if first is None:
            return None
        return first.describe() if self.handoff is None else f"{self.handoff.describe()}: {first.describe()}"
