"""A run's block lists beyond what a step moves: which posting paths every rank can run, and why a
path asked for is left out (the contiguous references and how an entry reads against them are the
step protocol's companions: measure/blocksteps.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..measure.offloadsteps import pool_problems
from ..measure.postings import REFERENCE_PATHS, Posting, pool_reference, problems
from ..wire.mpi import World
from .config import RunConfig


def posting_problems(config: RunConfig) -> dict[str, str]:
    """Why this rank cannot run a posting path of this run's device lists (measure/postings.py), by path.
    Built here, before anything is measured, so no list's cold costs include the one-time build; the
    compute load beside them too."""
    found: dict[str, str] = {}
    if config.beside is not None:
        from ..wire import gpuload

        loaded = gpuload.load()
        if loaded.library is None:
            return {path: f"--beside: {loaded.note}" for path in (*(p.name for p in config.postings), "beside")}
    if config.kind.offload is not None:  # to this rank's own pool: its companion copies by the copy engines
        return pool_problems((*config.postings, *((pool_reference(),) if config.needs_gpu else ())))
    if not config.shape.device:
        return found
    return problems((*config.postings, *REFERENCE_PATHS))


@dataclass
class Lists:
    """The run's posting paths that every rank can run, those some rank cannot (`refused`, with why:
    what a protocol's companions leave out), and why a path asked for is left out."""

    postings: tuple[Posting, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @classmethod
    def agreed(cls, config: RunConfig, problems: list[dict[str, str]]) -> Lists:
        """From every rank's `posting_problems`. A path asked for alone (not auto) that a rank
        cannot run is one line before any transfer; auto falls back per list; a list leaves such a path
        out and says why."""
        broken: dict[str, str] = {}
        for rank, found in enumerate(problems):
            if "beside" in found:
                raise ConfigError(f"rank {rank} cannot run the compute load: {found['beside']}")
            for path, reason in found.items():
                broken.setdefault(path, f"rank {rank} cannot: {reason}")
        wanted = config.postings
        usable = tuple(path for path in wanted if path.name not in broken)
        if len(usable) < len(wanted) and (len(wanted) == 1 or not usable):
            path = next(path.name for path in wanted if path.name in broken)
            raise ConfigError(f"--posting {path}: {broken[path]}")
        names = {path.name for path in wanted}
        return cls(usable, broken, {path: reason for path, reason in broken.items() if path in names})


def beside_placement(config: RunConfig, world: World) -> None:
    """--beside runs a load on every rank's own GPU: two ranks on one GPU would time-slice it (the
    kernels of two processes do not share a GPU's SMs), so their figures would not be "beside"."""
    if config.beside is None:
        return
    # An offload's link is rank 0 with itself: the other ranks idle, and run no load.
    ranks = world.ranks[:1] if config.kind.offload is not None else world.ranks
    lacking = next((info.rank for info in ranks if info.gpu is None), None)
    if lacking is not None:
        raise ConfigError(f"--beside runs a compute load on each rank's GPU: rank {lacking} has no GPU")
    seen: dict[tuple[str, str], int] = {}
    for info in ranks:
        assert info.gpu is not None
        key = (info.host, info.gpu.pci_bus_id)
        if key in seen:
            raise ConfigError(
                f"--beside needs each rank on a GPU of its own: ranks {seen[key]} and {info.rank} share GPU "
                f"{info.gpu.index} on {info.host} (their kernels would take turns, not run beside each other)"
            )
        seen[key] = info.rank
