"""Run metadata: enough to tell, months later, what produced a number."""

from __future__ import annotations

import platform
import sys
import time
from importlib import metadata as importlib_metadata
from typing import Any, TypedDict

from .. import __version__
from ..hardware import budget
from ..hardware.gpu import driver_version, import_cupy
from ..measure import registry
from ..wire import ucx_env
from ..wire.mpi import World
from . import calibration
from .config import RunConfig
from .schedule import Link


def _package_version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def collect(
    world: World, config: RunConfig, backend_name: str, backend_version: str, ucx_version: str
) -> dict[str, Any]:
    cupy = import_cupy()
    mpi_library = world.MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
    return {
        "command_line": config.command_line,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hosts": world.hosts,
        "world_size": world.size,
        "ranks": [info.to_dict() for info in world.ranks],
        "units": {
            "bandwidth": "GB/s = 1e9 bytes/s",
            "latency": "microseconds, half of a round trip",
            "size": "bytes",
            "timing": "sender clock from the first send to the receiver's acknowledgement; checks untimed",
        },
        "config": config.summary(),
        # Which plugin ($RDMABENCH_PLUGINS) each test of this file comes from: `report` names it when missing.
        "test_plugins": {config.what.test: plugin} if (plugin := registry.plugin_of(config.what.test)) else {},
        "calibration": "--iterations given" if config.steps.iterations is not None else calibration.RULE,
        "versions": {
            "rdmabench": __version__,
            "python": platform.python_version(),
            "ucx": ucx_version,
            "ucx_python_backend": f"{backend_name} {backend_version}",
            "mpi_library": mpi_library,
            "mpi_standard": ".".join(str(v) for v in world.MPI.Get_version()),
            "mpi4py": _package_version("mpi4py"),
            "numpy": _package_version("numpy"),
            "cupy": getattr(cupy, "__version__", None) if cupy else None,
            "cuda_driver": driver_version(),
        },
        "ucx_env": ucx_env.recorded_settings(),
        "ucx_env_set_by_ucxx": ucx_env.set_by_ucxx(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
    }


def cpu_report() -> tuple[list[int], int | None]:
    """This rank's share of its host's cores: the cores it may run on, and its cgroup's CPU quota."""
    quota = budget.cpu_quota()
    return budget.affinity(), quota.value if quota else None


class Oversubscribed(TypedDict):
    """A host where more ranks busy-poll at once than the cores they may run on (the metadata's
    "oversubscribed")."""

    host: str
    busy_ranks: int
    cores: int


def oversubscribed(rounds: list[list[Link]], hosts: list[str], reports: list[Any]) -> list[Oversubscribed]:
    """Hosts where more ranks busy-poll at once (the ranks of one round) than the cores they may
    run on: the union of their affinities, or fewer under a cgroup CPU quota. Ranks between rounds
    nap (wire.mpi.Napper) and do not count. `reports`: each rank's cpu_report()."""
    busiest: dict[str, int] = {}
    for scheduled in rounds:
        counts: dict[str, int] = {}
        for rank in {rank for link in scheduled for rank in link}:
            counts[hosts[rank]] = counts.get(hosts[rank], 0) + 1
        for host, count in counts.items():
            busiest[host] = max(busiest.get(host, 0), count)
    found: list[Oversubscribed] = []
    for host, busy in busiest.items():
        here = [reports[rank] for rank, name in enumerate(hosts) if name == host]
        cores = len({core for cores, _quota in here for core in cores}) or 1
        quotas = [quota for _cores, quota in here if quota]
        cores = min([cores, *quotas])
        if busy > cores:
            found.append({"host": host, "busy_ranks": busy, "cores": cores})
    return found
