"""One run of rdmabench on every rank: the library entry point is run_job(RunConfig(...)), under any MPI launcher."""

from .config import RunConfig
from .run import run_job

__all__ = ["RunConfig", "run_job"]
