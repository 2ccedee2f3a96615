"""A run's block lists, beyond their rounds: which posting paths every rank can run (and why a path is
left out), who posts each list's contiguous references, and how an entry reads against them (its
share of the fastest contiguous transfer of its bytes, of its ceiling, and the handoff it was)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..measure.entry import Entry
from ..wire.mpi import World
from .config import RunConfig


def posting_problems(config: RunConfig) -> dict[str, str]:
    """Why this rank cannot run a posting path of this run's device lists (gpu, ce-batch), by path.
    Built here, before anything is measured, so no list's cold costs include the one-time build; the
    compute load beside them too."""
    found: dict[str, str] = {}
    if config.beside_load is not None:
        from ..wire import gpuload

        loaded = gpuload.load()
        if loaded.library is None:
            return {path: f"--beside: {loaded.note}" for path in (*config.postings, "beside")}
    if not config.device_lists:
        return found
    from ..wire import devapi

    available = devapi.load()
    if available.library is None:
        return {"gpu": available.note, "ce-batch": available.note}
    problem = devapi.copy_engines_problem(available.library)
    if problem:
        found["ce-batch"] = problem
    return found


@dataclass
class Lists:
    """The run's posting paths that every rank can run, who posts the contiguous references, why a
    path asked for is left out, and (rank 0) each link's fastest reference at the size being measured."""

    postings: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)
    contiguous: dict[tuple[int, int], tuple[float, str]] = field(default_factory=dict)

    @classmethod
    def agreed(cls, config: RunConfig, problems: list[dict[str, str]]) -> Lists:
        """From every rank's `posting_problems`. A path asked for alone (gpu, ce-batch) that a rank
        cannot run is one line before any transfer; auto falls back per list; a list leaves such a path
        out and says why. A device list's references are the GPU's kernel and the copy engines where
        they run, so that "vs one" is against the fastest contiguous transfer; other lists' are posted
        as the list."""
        broken: dict[str, str] = {}
        for rank, found in enumerate(problems):
            if "beside" in found:
                raise ConfigError(f"rank {rank} cannot run the compute load: {found['beside']}")
            for path, reason in found.items():
                broken.setdefault(path, f"rank {rank} cannot: {reason}")
        wanted = config.postings
        usable = tuple(path for path in wanted if path not in broken)
        if len(usable) < len(wanted) and (len(wanted) == 1 or not usable):
            path = next(path for path in wanted if path in broken)
            raise ConfigError(f"--posting {path}: {broken[path]}")
        if not config.lists.blocks:
            references: tuple[str, ...] = ()
        elif config.device_lists:
            references = tuple(path for path in ("gpu", "ce-batch") if path not in broken) or ("cpu",)
        else:
            references = usable[:1]
        return cls(usable, references, {path: reason for path, reason in broken.items() if path in wanted})

    def relate(self, entry: Entry, handoff: Any) -> None:
        """A block-list entry against its link's contiguous references, measured just before it (a
        reference itself is kept: the fastest of a link's at this size)."""
        blocks = entry.blocks
        if blocks is None:
            return
        link = (entry.src_rank, entry.dst_rank)
        if handoff is not None and blocks["count"] == handoff.count and entry.size_bytes == handoff.block_bytes:
            blocks["handoff"] = handoff.record()
        if blocks.get("ceiling_gbps"):
            blocks["share_of_ceiling"] = entry.value / blocks["ceiling_gbps"]
        if blocks["count"] == 1 and blocks["layout"] == "contiguous":
            found = (entry.value, blocks.get("posted_by") or "cpu")
            self.contiguous[link] = max(self.contiguous.get(link, found), found)
            return
        reference = self.contiguous.get(link)
        if reference:
            blocks["contiguous_gbps"], blocks["contiguous_posted_by"] = reference
            blocks["share_of_contiguous"] = entry.value / reference[0]


def beside_placement(config: RunConfig, world: World) -> None:
    """--beside runs a load on every rank's own GPU: two ranks on one GPU would time-slice it (the
    kernels of two processes do not share a GPU's SMs), so their figures would not be "beside"."""
    if config.beside_load is None:
        return
    lacking = next((info.rank for info in world.ranks if info.gpu is None), None)
    if lacking is not None:
        raise ConfigError(f"--beside runs a compute load on each rank's GPU: rank {lacking} has no GPU")
    seen: dict[tuple[str, str], int] = {}
    for info in world.ranks:
        assert info.gpu is not None
        key = (info.host, info.gpu.pci_bus_id)
        if key in seen:
            raise ConfigError(
                f"--beside needs each rank on a GPU of its own: ranks {seen[key]} and {info.rank} share GPU "
                f"{info.gpu.index} on {info.host} (their kernels would take turns, not run beside each other)"
            )
        seen[key] = info.rank
