"""One run of rdmabench on every rank: the library entry point is run_job(RunConfig(...)), under any MPI launcher.

Both names load when first asked for: the launcher (`run --np N`) imports job.config and job.spawner,
and importing either ran this file, which imported the whole engine (job.run: the measurement, the
protocols, the preflight) into a process that only starts mpiexec and waits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import RunConfig
    from .run import run_job

__all__ = ["RunConfig", "run_job"]


def __getattr__(name: str) -> Any:
    if name == "RunConfig":
        from .config import RunConfig

        return RunConfig
    if name == "run_job":
        from .run import run_job

        return run_job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
