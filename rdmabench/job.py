"""One benchmark job, run by every rank: checks, the size sweep, gathering and the results file.

Any exception in any rank after the checks aborts the whole MPI job with one line naming the rank,
its host and the reason, so no rank is left waiting on a peer that will never answer.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, TextIO

from . import results, ucx_env
from .config import RunConfig
from .errors import RdmabenchError
from .gpu import gpu_unavailable_reason
from .measure import Pair, default_window, make_plan, measure_pair
from .memory import PIN_CUDA, PIN_MLOCK, MemoryMode, word_capacity
from .table import ProgressTable
from .units import format_size
from .world import World, import_ucx_first

SRC_RANK, DST_RANK = 0, 1


def error_line(message: str) -> str:
    return f"rdmabench: error: {message}"


def run_job(config: RunConfig, out: TextIO | None = None) -> int:
    """Entry point of every rank. Returns the process exit code (0 on success)."""
    out = out or sys.stdout
    log_dir = ucx_env.prepare()
    import_ucx_first()
    world = World()
    try:
        problem = _preflight(world, config)
        problems = world.comm.allgather(problem)
        first = next((p for p in problems if p), None)
        if first:
            if world.rank == 0:
                print(error_line(first), file=sys.stderr, flush=True)
            return 2
        return _sweep(world, config, out, log_dir)
    except BaseException as exc:
        _abort(world, exc)
        return 1  # not reached: Abort ends the process
    finally:
        ucx_env.cleanup(log_dir)


def _preflight(world: World, config: RunConfig) -> str | None:
    """This rank's reason the run cannot start, or None. Checked on every rank before any transfer."""
    if world.size < 2:
        return "a point-to-point test needs at least 2 ranks (use --np 2, or mpirun -n 2)"
    my_modes = []
    if world.rank == SRC_RANK:
        my_modes.append(config.src_mode)
    if world.rank == DST_RANK:
        my_modes.append(config.dst_mode)
    if MemoryMode.DEVICE in my_modes and world.me.gpu is None:
        return f"device mode on rank {world.rank} ({world.me.host}): {gpu_unavailable_reason()}"
    if my_modes:
        problem = _memory_problem(world, config, my_modes)
        if problem:
            return problem
    if world.rank == 0 and config.output is not None:
        try:
            results.check_writable(config.output, config.force)
        except RdmabenchError as exc:
            return str(exc)
    return None


def _memory_problem(world: World, config: RunConfig, modes: list[MemoryMode]) -> str | None:
    """Refuse sizes that cannot fit, before allocating: an out-of-memory kill mid-run helps nobody."""
    largest = max(config.sizes)
    window = 1 if config.test == "lat" else (config.window or default_window(largest, config.device_only))
    buffers = 2 if config.test == "lat" else window * (2 if config.test == "bibw" else 1)
    need = buffers * word_capacity(largest) + 2 * word_capacity(largest)  # + pattern and scratch
    for mode in modes:
        if mode is MemoryMode.DEVICE:
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


def _pinned_method(info: Any) -> str:
    return PIN_CUDA if info.gpu is not None else PIN_MLOCK


def _annotate(world: World, entry: dict[str, Any]) -> dict[str, Any]:
    """Add where each end ran: host, GPU, and how pinned memory was pinned."""
    for end in ("src", "dst"):
        info = world.ranks[entry[f"{end}_rank"]]
        entry[f"{end}_host"] = info.host
        entry[f"{end}_gpu"] = info.gpu.index if info.gpu else None
        entry[f"{end}_pinned_method"] = (
            _pinned_method(info) if entry[f"{end}_mode"] == MemoryMode.PINNED.value else None
        )
    entry["link"] = "same host" if entry["src_host"] == entry["dst_host"] else "inter-node"
    warnings = []
    if entry.get("transport") is None:
        warnings.append("UCX did not report the transport it used (UCX_PROTO_INFO disabled or UCX_LOG_FILE set)")
    entry["warnings"] = warnings
    return entry


def _sweep(world: World, config: RunConfig, out: TextIO, log_dir: str | None) -> int:
    from . import metadata
    from .transport import Transport

    transport = Transport(world.comm, log_dir)
    backend = transport.backend
    is_root = world.rank == 0
    table = ProgressTable(config.test, out) if is_root and config.output_format == "table" else None
    meta: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    output = config.output
    if is_root:
        meta = metadata.collect(
            world, config, backend.name, backend.version, getattr(backend, "ucx_version", "unknown")
        )
        if output is None:
            output = results.default_output_path(config.test, config.src_mode.value, config.dst_mode.value)
            results.check_writable(output, force=False)
        results.write(output, results.document(meta, entries, complete=False))
    if table:
        table.header(SRC_RANK, DST_RANK, config.src_mode.value, config.dst_mode.value, config.validate)
        if world.size > 2:
            table.note(f"ranks 2..{world.size - 1} stay idle: the pair test uses ranks 0 and 1")
    in_pair = world.rank in (SRC_RANK, DST_RANK)
    for size in config.sizes:
        pair = Pair(config.test, SRC_RANK, DST_RANK, config.src_mode, config.dst_mode, size, config.validate)
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
        entry = measure_pair(transport, world.comm, pair, plan, world.me.gpu is not None) if in_pair else None
        gathered = world.comm.gather(entry, root=0)
        _release_device_pool(config)
        if is_root:
            new = [_annotate(world, e) for e in gathered or [] if e is not None]
            entries.extend(new)
            results.write(output, results.document(meta, entries, complete=False))  # type: ignore[arg-type]
            if table:
                table.row(new)
    warnings = transport.ucx_warnings()
    all_warnings = world.comm.gather(warnings, root=0)
    world.comm.Barrier()
    transport.close()
    if is_root:
        meta["ucx_warnings"] = sorted({w for ws in all_warnings or [] for w in ws})
        doc = results.document(meta, entries, complete=True)
        results.write(output, doc)  # type: ignore[arg-type]
        if config.output_format == "json":
            import json

            print(json.dumps(doc, indent=1), file=out, flush=True)
        else:
            print(f"# results written to {output}", file=out, flush=True)
    return 0


def _release_device_pool(config: RunConfig) -> None:
    if config.needs_gpu:
        from .gpu import import_cupy

        cupy = import_cupy()
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()


def _abort(world: World, exc: BaseException) -> None:
    if isinstance(exc, RdmabenchError):
        message = str(exc)
        code = exc.exit_code
    elif isinstance(exc, KeyboardInterrupt):
        message, code = "interrupted", 130
    else:
        message, code = f"{type(exc).__name__}: {exc}", 1
    if os.environ.get("RDMABENCH_DEBUG"):
        traceback.print_exc()
    print(error_line(f"rank {world.rank} on {world.me.host}: {message}"), file=sys.stderr, flush=True)
    world.abort(code)
