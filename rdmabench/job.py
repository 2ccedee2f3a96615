"""One benchmark job, run by every rank: checks, the size sweep, gathering and the results file.

Any exception in any rank after the checks aborts the whole MPI job with one line naming the rank,
its host and the reason, so no rank is left waiting on a peer that will never answer. SIGINT and
SIGTERM (Ctrl-C, or Slurm before the time limit) stop the job too. Either way rank 0 first turns
what was measured into the results file, marked incomplete.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from dataclasses import replace
from types import FrameType
from typing import Any, TextIO

from . import limits, patterns, results, ucx_env
from .config import RunConfig
from .errors import ConfigError, RdmabenchError, TransportError, error_line
from .gpu import gpu_unavailable_reason
from .measure import Pair, default_window, make_plan, measure_pair, measure_round, round_aggregate
from .memory import PIN_CUDA, PIN_MAPPED, PIN_MLOCK, PINNED_POOL, MemoryMode, mlock_problem, word_capacity
from .pathcheck import is_device_path_warning, path_warnings
from .staging import staging_buffers, wire_chunk
from .stats import summarize
from .table import ProgressTable
from .units import format_size
from .world import World, import_ucx_first

SRC_RANK, DST_RANK = 0, 1


class Stopped(BaseException):
    """A signal asked the job to stop (BaseException: no `except Exception` may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def _ignore_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def run_job(config: RunConfig, out: TextIO | None = None) -> int:
    """Entry point of every rank. Returns the process exit code (0 on success)."""
    out = out or sys.stdout
    if config.require_gdr:
        # UCX then fails instead of quietly staging GPU memory through host memory between nodes.
        os.environ.setdefault("UCX_IB_GPU_DIRECT_RDMA", "yes")
    log_dir = ucx_env.prepare()
    import_ucx_first()
    try:
        world = World()
    except ImportError as exc:
        print(
            error_line(
                f"mpi4py cannot load an MPI library ({exc}); install the mpi extra or build mpi4py against your MPI"
            ),
            file=sys.stderr,
        )
        return 1
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_stopped)
    job = _Job(world, config, out, log_dir)
    PINNED_POOL.cap = config.max_pinned
    try:
        problem = _preflight(world, config)
        problems = world.comm.allgather(problem)
        first = next((p for p in problems if p), None)
        if first:
            if world.rank == 0:
                print(error_line(first), file=sys.stderr, flush=True)
            return 2
        return job.sweep()
    except Stopped as stop:
        _ignore_signals()  # a second signal must not interrupt the saving of the results
        job.stop(f"stopped by {stop}")
        # The launcher is ending the job (or the user is): leave quietly, without MPI_Finalize,
        # which would wait for ranks that are gone.
        sys.stdout.flush()
        os._exit(128 + stop.signum)
    except BaseException as exc:
        _ignore_signals()  # the launcher's SIGTERM, which a failure brings, must not cut the saving short
        _report(world, exc)
        job.stop(f"failed on rank {world.rank} ({world.me.host}): {_describe(exc)[0]}")
        world.abort(_describe(exc)[1])
        return 1  # not reached: Abort ends the process
    finally:
        PINNED_POOL.clear()
        ucx_env.cleanup(log_dir)


def _preflight(world: World, config: RunConfig) -> str | None:
    """This rank's reason the run cannot start, or None. Checked on every rank before any transfer."""
    try:
        rounds = _schedule(world, config)
    except RdmabenchError as exc:
        return str(exc)
    sends, receives = patterns.roles(rounds, world.rank)
    my_modes = []
    if sends:
        my_modes.append(config.src_mode)
    if receives:
        my_modes.append(config.dst_mode)
    needing = [mode.value for mode in my_modes if mode.needs_gpu]
    if needing and world.me.gpu is None:
        return f"{needing[0]} mode on rank {world.rank} ({world.me.host}): {gpu_unavailable_reason()}"
    if my_modes:
        fan = max(
            max(sum(1 for s, d in links if s == world.rank), sum(1 for s, d in links if d == world.rank))
            for links in rounds
        )
        problem = _memory_problem(world, config, my_modes, max(fan, 1))
        if problem:
            return problem
    if config.engine == "native":
        from . import native

        built = native.load()
        if built.library is None:
            return f"--engine native on rank {world.rank} ({world.me.host}): {built.reason}"
    if world.rank == 0 and config.output is not None:
        try:
            results.check_writable(config.output, config.force)
        except RdmabenchError as exc:
            return str(exc)
    return None


def _schedule(world: World, config: RunConfig) -> list[list[tuple[int, int]]]:
    rounds = patterns.schedule(
        config.pattern,
        [info.host for info in world.ranks],
        config.link_class,
        config.concurrent,
        config.root,
        bidirectional=config.test == "bibw",
    )
    if not rounds:
        raise ConfigError(
            f"no {config.link_class} links to measure among {world.size} ranks on {len(world.hosts)} host(s)"
        )
    return rounds


def _memory_problem(world: World, config: RunConfig, modes: list[MemoryMode], links: int) -> str | None:
    """Refuse sizes that cannot fit, before allocating: an out-of-memory kill mid-run helps nobody.
    `links`: the most links this rank serves at once in one direction."""
    largest = max(config.sizes)
    window = 1 if config.test == "lat" else (config.window or default_window(largest, config.device_only))
    buffers = 2 if config.test == "lat" else window * (2 if config.test == "bibw" else 1) * links
    need = buffers * word_capacity(largest) + 2 * word_capacity(largest)  # + pattern and scratch
    pinned_need = buffers * word_capacity(largest) * sum(1 for mode in modes if mode.pinned_host)
    chunk = wire_chunk(config.src_mode, config.dst_mode, largest, config.staging)
    for mode in modes:
        count = staging_buffers(mode, config.staging)  # pinned buffers per link and direction
        if count is not None:
            pinned_need += count * word_capacity(chunk) * links * (2 if config.test != "bw" else 1)
    if config.max_pinned is not None and pinned_need > config.max_pinned:
        return (
            f"rank {world.rank} ({world.me.host}) needs {format_size(pinned_need)} of pinned memory for "
            f"{format_size(largest)} x {buffers} buffers, more than --max-pinned {format_size(config.max_pinned)}"
        )
    for mode in modes:
        if mode.on_device:
            from .gpu import import_cupy

            cupy = import_cupy()
            assert cupy is not None
            free, _total = cupy.cuda.runtime.memGetInfo()
            if need > free:
                return (
                    f"rank {world.rank} ({world.me.host}) needs {format_size(need)} of GPU memory for "
                    f"{format_size(largest)} x {buffers} buffers but {free / 2**30:.1f} GiB is free; "
                    "use smaller --sizes or --window"
                )
        else:
            if mode is MemoryMode.PINNED and world.me.gpu is None:
                problem = mlock_problem(buffers * word_capacity(largest))
                if problem:
                    return f"rank {world.rank} ({world.me.host}): {problem}"
            available = _host_memory_available()
            if available is not None and need * world.me.local_size > 0.9 * available:
                return (
                    f"rank {world.rank} ({world.me.host}) would need {format_size(need)} of host memory per rank "
                    f"for {format_size(largest)} x {buffers} buffers, more than the {available / 2**30:.1f} GiB "
                    "available; use smaller --sizes or --window"
                )
    return None


def _host_memory_available() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _pinned_method(info: Any, mode: str) -> str | None:
    """How an end's page-locked memory was made (staged ends: their staging buffers)."""
    if mode == MemoryMode.MAPPED.value:
        return PIN_MAPPED
    if mode in (MemoryMode.PINNED.value, MemoryMode.STAGED.value, MemoryMode.BOUNCE.value):
        return PIN_CUDA if info.gpu is not None else PIN_MLOCK
    return None


def _annotate(world: World, topologies: list[limits.RankTopology], entry: dict[str, Any]) -> dict[str, Any]:
    """Add where each end ran (host, GPU, how pinned memory was pinned), whether the path UCX took
    fits the modes, and the link's physical limit with the figure's share of it."""
    for end in ("src", "dst"):
        info = world.ranks[entry[f"{end}_rank"]]
        entry[f"{end}_host"] = info.host
        entry[f"{end}_gpu"] = info.gpu.index if info.gpu else None
        entry[f"{end}_pinned_method"] = _pinned_method(info, entry[f"{end}_mode"])
    same_host = entry["src_host"] == entry["dst_host"]
    entry["link"] = "same host" if same_host else "inter-node"
    entry["warnings"] = path_warnings(entry, same_host)
    if entry["test"] != "lat":
        src, dst = topologies[entry["src_rank"]], topologies[entry["dst_rank"]]
        host_copy = next((t.host_copy_gbps for t in topologies if t.host == src.host and t.host_copy_gbps), None)
        limit, reason = limits.link_limit(src, dst, entry["src_mode"], entry["dst_mode"], host_copy)
        limits.judge(entry, limit, reason)
        if limit is not None and "aggregate_gbps" in entry:
            entry["aggregate_share_of_limit"] = entry["aggregate_gbps"] / (2 * limit.gbps)
    return entry


def _check_gdr(config: RunConfig, entries: list[dict[str, Any]]) -> None:
    if not config.require_gdr:
        return
    for entry in entries:
        for warning in entry["warnings"]:
            if is_device_path_warning(warning):
                raise TransportError(
                    f"--require-gdr: {format_size(entry['size_bytes'])} {entry['src_mode']} -> {entry['dst_mode']}: {warning}"
                )


class _Progress:
    """Rounds done, and an estimate of the time left from the pace so far."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def advance(self) -> None:
        self.done += 1

    def eta(self) -> float:
        if not self.done:
            return float("nan")
        return (time.monotonic() - self.started) / self.done * (self.total - self.done)


class _Job:
    """The sweep on one rank, and on rank 0 the results stream it feeds."""

    def __init__(self, world: World, config: RunConfig, out: TextIO, log_dir: str | None):
        self.world = world
        self.config = config
        self.out = out
        self.log_dir = log_dir
        self.stream: results.ResultsStream | None = None

    def stop(self, reason: str) -> None:
        """Rank 0: write what was measured as the results file, marked incomplete."""
        stream, self.stream = self.stream, None
        if stream is None:
            return
        try:
            stream.finish(complete=False, stopped=reason)
            print(
                f"rdmabench: {reason.split(':')[0]}; {len(stream.entries)} result(s) measured before that kept in {stream.path} (incomplete)",
                file=sys.stderr,
                flush=True,
            )
        except OSError as exc:
            print(
                error_line(f"could not write {stream.path}: {exc}; the stream is {results.stream_path(stream.path)}"),
                file=sys.stderr,
            )

    def sweep(self) -> int:
        from . import doctor, metadata
        from .transport import Transport

        world, config, out = self.world, self.config, self.out
        transport = Transport(world.comm, self.log_dir, world.local_peer_pids(), [i.host for i in world.ranks])
        transport.native, engine_detail = _hot_loop(config)
        engines = world.comm.allgather({"native": transport.native is not None, "detail": engine_detail})
        backend = transport.backend
        is_root = world.rank == 0
        peer_gpus = [
            i.gpu.pci_bus_id for i in world.ranks if i.host == world.me.host and i.gpu and i.rank != world.rank
        ]
        mine = limits.collect(world.rank, world.me.host, world.me.local_rank, world.me.gpu, peer_gpus)
        topologies: list[limits.RankTopology] = world.comm.allgather(mine)
        table = ProgressTable(config.test, out, config.units) if is_root and config.output_format == "table" else None
        if is_root:
            meta = metadata.collect(
                world, config, backend.name, backend.version, getattr(backend, "ucx_version", "unknown")
            )
            meta["topology"] = [t.to_dict() for t in topologies]
            meta["doctor"] = [f.to_dict() for f in doctor.run_checks()]
            meta["placement_warnings"] = _placement_warnings(topologies)
            meta["engine"] = {"requested": config.engine, "ranks": engines}
            output = config.output
            if output is None:
                output = results.default_output_path(config.test, config.src_mode.value, config.dst_mode.value)
                results.check_writable(output, force=False)
            self.stream = results.ResultsStream(output, meta)
        rounds = _schedule(world, config)
        progress = _Progress(len(rounds) * len(config.sizes))
        if table:
            if config.pattern == "pair":
                table.header(SRC_RANK, DST_RANK, config.src_mode.value, config.dst_mode.value, config.validate)
                if world.size > 2:
                    table.note(f"ranks 2..{world.size - 1} stay idle: the pair test uses ranks 0 and 1")
            else:
                links = sum(len(r) for r in rounds)
                table.pattern_header(
                    config.pattern, links, len(rounds), config.src_mode.value, config.dst_mode.value, config.validate
                )
            for warning in _placement_warnings(topologies):
                table.note(f"warning: {warning}")
            for rank, engine in enumerate(engines):
                if not engine["native"] and config.engine == "auto":
                    table.note(
                        f"warning: rank {rank} times in Python ({engine['detail']}): small messages measure the interpreter"
                    )
        have_gpu = world.me.gpu is not None
        for size in config.sizes:
            plan = make_plan(
                config.test,
                size,
                config.device_only,
                config.window,
                config.iterations,
                config.warmup,
                config.samples,
                config.sample_time,
                config.timeout,
            )
            for round_links in rounds:
                round_started = time.monotonic()
                if len(round_links) == 1:
                    src, dst = round_links[0]
                    pair = Pair(
                        config.test, src, dst, config.src_mode, config.dst_mode, size, config.validate, config.staging
                    )
                    measured = (
                        [measure_pair(transport, world.comm, pair, plan, have_gpu)] if world.rank in (src, dst) else []
                    )
                else:
                    fan = max(
                        max(sum(1 for s, _ in round_links if s == r), sum(1 for _, d in round_links if d == r))
                        for r in range(world.size)
                    )
                    shared = replace(plan, window=max(1, plan.window // fan)) if config.window is None else plan
                    template = Pair(
                        config.test, -1, -1, config.src_mode, config.dst_mode, size, config.validate, config.staging
                    )
                    measured = list(measure_round(transport, world.comm, round_links, template, shared, have_gpu))
                world.wait_for_all(transport.backend.progress)
                gathered = world.comm.gather(measured, root=0)
                _release_device_pool(config)
                progress.advance()
                if self.stream is not None:
                    new = [e for part in gathered or [] for e in part if e is not None]
                    if len(round_links) > 1:
                        aggregate = round_aggregate(new)
                        for entry in new:
                            entry.pop("_step_times")
                            entry["pattern_aggregate_gbps"] = summarize(aggregate)["median"] if aggregate else None
                    new = [_annotate(world, topologies, e) for e in new]
                    for entry in new:
                        entry["pattern"] = config.pattern
                        entry["round_seconds"] = time.monotonic() - round_started
                    self.stream.append(new)
                    if table and new:
                        if config.pattern == "pair":
                            table.row(new)
                        else:
                            table.link_rows(new, progress.done, progress.total, progress.eta())
                    _check_gdr(config, new)
        warnings = transport.ucx_warnings()
        world.wait_for_all(transport.backend.progress)
        all_warnings = world.comm.gather(warnings, root=0)
        transport.close()
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.metadata["ucx_warnings"] = sorted({w for ws in all_warnings or [] for w in ws})
            doc = stream.finish(complete=True)
            if table and config.pattern != "pair":
                table.matrices(doc.get("matrices", []))
            if config.output_format == "json":
                print(json.dumps(doc, indent=1), file=out, flush=True)
            else:
                print(f"# results written to {stream.path}", file=out, flush=True)
        world.wait_for_all(transport.backend.progress)
        return 0


def _placement_warnings(topologies: list[limits.RankTopology]) -> list[str]:
    return [
        f"rank {t.rank} on {t.host} runs on NUMA node(s) {t.cpu_numa_nodes} but its GPU {t.gpu.index} sits on node "
        f"{t.gpu.numa_node}: host-device traffic crosses the socket link (bind ranks to their GPU's node)"
        for t in topologies
        if t.gpu is not None and t.gpu_numa_local is False
    ]


def _hot_loop(config: RunConfig) -> tuple[Any, str]:
    """The native loop's library for this run (or None), and what to record about it."""
    if config.engine == "python":
        return None, "--engine python"
    from . import native

    built = native.load()
    return built.library, built.reason


def _release_device_pool(config: RunConfig) -> None:
    if config.needs_gpu:
        from .gpu import import_cupy

        cupy = import_cupy()
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()


def _describe(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, RdmabenchError):
        return str(exc), exc.exit_code
    return f"{type(exc).__name__}: {exc}", 1


def _report(world: World, exc: BaseException) -> None:
    if os.environ.get("RDMABENCH_DEBUG"):
        traceback.print_exc()
    print(error_line(f"rank {world.rank} on {world.me.host}: {_describe(exc)[0]}"), file=sys.stderr, flush=True)
