"""One benchmark job, run by every rank: its start, its checks, its sweep, and how it ends.

Data flows one way: the configuration gives a schedule, the schedule rounds, every rank's sweep
(job/sweep.py) runs its part of each round (measure.round), rank 0 gathers the measurements and its
recorder (job/recorder.py) turns them into entries (measure.entry) and streams them into the results
file (results.document) and the table.

Any exception in any rank after the checks aborts the whole MPI job with one line naming the rank,
its host and the reason, so no rank is left waiting on a peer that will never answer. SIGINT and
SIGTERM (Ctrl-C, or Slurm before the time limit) stop the job too. Either way rank 0 first turns
what was measured into the results file, marked incomplete.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import TextIO

from .. import privatedirs
from ..errors import ConfigError, RdmabenchError, UnsafePathError, error_line
from ..measure.beside import release_loads
from ..memory.buffers import PINNED_POOL, RECYCLER
from ..wire import ucx_env
from ..wire.mpi import World, import_ucx_first
from . import schedule, stopping
from .config import RunConfig
from .preflight import preflight
from .recorder import Recorder
from .stopping import Stopped
from .sweep import Sweep


def _before_ucx(config: RunConfig) -> str | None:
    """The UCX settings that must be in place before UCX loads; the private UCX log directory."""
    if config.memory.require_gdr:
        # UCX then fails instead of quietly staging GPU memory through host memory between nodes.
        os.environ.setdefault("UCX_IB_GPU_DIRECT_RDMA", "yes")
    return ucx_env.prepare()


def run_job(config: RunConfig, out: TextIO | None = None) -> int:
    """Entry point of every rank. Returns the process exit code (0 on success)."""
    started = _start(config)
    if isinstance(started, int):
        return started
    world, log_dir = started
    return run_started(world, log_dir, config, out)


def run_started(world: World, log_dir: str | None, config: RunConfig, out: TextIO | None = None) -> int:
    """The job on a rank whose world has started: its sweep, and how it ends. A signal stops it at
    most once (job/stopping.py); where that one lands outside the sweep's own `except Stopped` (in a
    failure's first steps, before the failure path has said that nothing may interrupt it, or in the
    clean-up) it ends the job as the stop it is, quietly."""
    recorder: Recorder | None = None
    try:
        stopping.arm()  # the launcher stops ranks with signals
        recorder = Recorder(config, out or sys.stdout) if world.rank == 0 else None
        return _sweep(world, log_dir, config, recorder)
    except Stopped as stop:
        _stopped(world, recorder, stop, log_dir)
        return stop.status  # not reached: _stopped ends the process


def _sweep(world: World, log_dir: str | None, config: RunConfig, recorder: Recorder | None) -> int:
    PINNED_POOL.cap = config.memory.max_pinned
    try:
        rounds = _checked_rounds(world, config)
        return Sweep(world, config, log_dir, recorder).run(rounds) if rounds is not None else 2
    except Stopped as stop:
        _stopped(world, recorder, stop, log_dir)  # before the clean-up below: the results first
        return stop.status  # not reached: _stopped ends the process
    except BaseException as exc:
        stopping.end()  # the launcher's SIGTERM, which a failure brings, must not cut the saving short
        _failed(world, recorder, exc, log_dir)
        return 1  # not reached: Abort ends the process
    finally:
        stopping.end(block=False)  # the job is over: no Stopped in its clean-up or the exit that follows
        release_loads()
        PINNED_POOL.clear()
        RECYCLER.enabled = False
        RECYCLER.clear()
        ucx_env.cleanup(log_dir)


def _stopped(world: World, recorder: Recorder | None, stop: Stopped, log_dir: str | None) -> None:
    """A signal stopped the job: rank 0 keeps what was measured; then leave at once."""
    stopping.end()  # a second signal must not interrupt the saving of the results
    # A signal on rank 0 is often the launcher's answer to another rank's abort: that rank said why.
    told = world.told_by_a_rank() if world.rank == 0 and stop.signum == signal.SIGTERM else None
    if recorder is not None:
        recorder.stop(told or f"stopped by {stop}")
    # The launcher is ending the job (or the user is): leave quietly, without MPI_Finalize,
    # which would wait for ranks that are gone.
    sys.stdout.flush()
    ucx_env.cleanup(log_dir)  # os._exit skips the clean-up of a `finally`
    os._exit(1 if told else stop.status)


def _failed(world: World, recorder: Recorder | None, exc: BaseException, log_dir: str | None) -> None:
    """A rank failed: it says why (once for the job), rank 0 learns it and keeps what was measured,
    and the job is aborted, so that no rank waits on this one."""
    reason = _report(world, exc)
    world.tell_rank0(reason)
    if recorder is not None:
        recorder.stop(reason)
    ucx_env.cleanup(log_dir)  # MPI_Abort ends the process before the `finally`
    world.abort(_describe(exc)[1])


def _start(config: RunConfig) -> tuple[World, str | None] | int:
    """UCX's settings, then MPI: this rank's world and its private UCX log directory, or the exit
    status of a rank that cannot start (said on stderr)."""
    try:
        log_dir = _before_ucx(config)
    except RdmabenchError as exc:  # before MPI: every rank says it, the launcher shows it once
        print(error_line(str(exc)), file=sys.stderr)
        return exc.exit_code
    import_ucx_first()
    try:
        return World(), log_dir
    except ImportError as exc:
        print(
            error_line(
                f"mpi4py cannot load an MPI library ({exc}); install the mpi extra or build mpi4py against your MPI"
            ),
            file=sys.stderr,
        )
        return 1


def _checked_rounds(world: World, config: RunConfig) -> list[list[schedule.Link]] | None:
    """The schedule, once every rank's preflight has passed; None when one refused (rank 0 said why)."""
    try:
        rounds = schedule_of(world, config)
        problem = preflight(world, config, rounds)
    except RdmabenchError as exc:
        problem = str(exc)
    problems = world.comm.allgather(problem)
    first = next((p for p in problems if p), None)
    if first:
        if world.rank == 0:
            print(error_line(first), file=sys.stderr, flush=True)
        return None
    return rounds


def schedule_of(world: World, config: RunConfig) -> list[list[schedule.Link]]:
    what = config.what
    hosts = [info.host for info in world.ranks]
    rounds = schedule.schedule(
        config.pattern, hosts, what.link_class, what.concurrent, what.root, bidirectional=config.kind.both_ways
    )
    if not rounds:
        raise ConfigError(
            f"no {what.link_class} links to measure among {world.size} ranks on {len(world.hosts)} host(s)"
        )
    return rounds


def _describe(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, RdmabenchError):
        return str(exc), exc.exit_code
    return f"{type(exc).__name__}: {exc}", 1


def _report(world: World, exc: BaseException) -> str:
    """Say why this rank failed; the same words go into the results file, also when the launcher
    kills rank 0 before it writes and the file is salvaged from this first error line. Of the ranks
    `run --np` started that fail together (every sender into a stalled rank times out), the first
    says it; the others' reasons still reach rank 0 and the results file."""
    if os.environ.get("RDMABENCH_DEBUG"):
        traceback.print_exc()
    reason = f"failed on rank {world.rank} ({world.me.host}): {_describe(exc)[0]}"
    if _first_to_fail(world):
        print(error_line(reason), file=sys.stderr, flush=True)
    return reason


def _first_to_fail(world: World) -> bool:
    """Whether no other rank of this job has failed yet: the first claims a name in the private
    scratch directory the local launcher made for the job (O_EXCL: exactly one wins). Ranks of
    another launcher share no such directory: each says its own line."""
    scratch = os.environ.get(ucx_env.SCRATCH_ENV)
    if not scratch:
        return True
    first = world.ranks[0]
    claim = os.path.join(scratch, f".failed-{first.host}-{first.pid}")
    try:
        os.close(privatedirs.open_in_private_dir(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    except (OSError, UnsafePathError):
        return True  # cannot tell: better a second line than none
    return True
