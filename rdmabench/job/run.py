"""One benchmark job, run by every rank: set-up, the rounds of every size, and the record of each.

Data flows one way: the configuration gives a schedule, the schedule rounds, every rank runs its
part of each round (measure.round), rank 0 gathers the measurements, turns them into entries
(measure.entry) and streams them into the results file (results.document) and the table.

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

from .. import privatedirs
from ..errors import ConfigError, RdmabenchError, TransportError, UnsafePathError, error_line
from ..escape import visible
from ..hardware import counters, limits, nics
from ..hardware.pathcheck import is_device_path_warning
from ..measure.beside import Beside, besides_for, release_loads
from ..measure.contract import StepProtocol
from ..measure.entry import Entry, Placement, make_entries
from ..measure.round import LinkMeasurement, RoundSpec, fetch_rows, run_round
from ..memory.buffers import PINNED_POOL, RECYCLER
from ..results.files import document
from ..results.reports.table import ProgressTable
from ..units import format_size
from ..wire import ucx_env
from ..wire.mpi import World, import_ucx_first
from . import closing, schedule
from .calibration import Calibration, round_key
from .config import PER_LINK_UP_TO, RunConfig
from .lists import Lists, beside_placement, posting_problems
from .preflight import preflight
from .rounds import is_pattern_round, round_spec, size_plan, slow_links


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


def _before_ucx(config: RunConfig) -> str | None:
    """The UCX settings that must be in place before UCX loads; the private UCX log directory."""
    if config.memory.require_gdr:
        # UCX then fails instead of quietly staging GPU memory through host memory between nodes.
        os.environ.setdefault("UCX_IB_GPU_DIRECT_RDMA", "yes")
    return ucx_env.prepare()


def run_job(config: RunConfig, out: TextIO | None = None) -> int:
    """Entry point of every rank. Returns the process exit code (0 on success)."""
    out = out or sys.stdout
    try:
        log_dir = _before_ucx(config)
    except RdmabenchError as exc:  # before MPI: every rank says it, the launcher shows it once
        print(error_line(str(exc)), file=sys.stderr)
        return exc.exit_code
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
    PINNED_POOL.cap = config.memory.max_pinned
    try:
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
            return 2
        return job.sweep(rounds)
    except Stopped as stop:
        _ignore_signals()  # a second signal must not interrupt the saving of the results
        # A signal on rank 0 is often the launcher's answer to another rank's abort: that rank said why.
        told = world.told_by_a_rank() if world.rank == 0 and stop.signum == signal.SIGTERM else None
        job.stop(told or f"stopped by {stop}")
        # The launcher is ending the job (or the user is): leave quietly, without MPI_Finalize,
        # which would wait for ranks that are gone.
        sys.stdout.flush()
        ucx_env.cleanup(log_dir)  # os._exit skips the `finally` below
        os._exit(1 if told else 128 + stop.signum)
    except BaseException as exc:
        _ignore_signals()  # the launcher's SIGTERM, which a failure brings, must not cut the saving short
        reason = _report(world, exc)
        world.tell_rank0(reason)
        job.stop(reason)
        ucx_env.cleanup(log_dir)  # MPI_Abort ends the process before the `finally` below
        world.abort(_describe(exc)[1])
        return 1  # not reached: Abort ends the process
    finally:
        release_loads()
        PINNED_POOL.clear()
        RECYCLER.enabled = False
        RECYCLER.clear()
        ucx_env.cleanup(log_dir)


def schedule_of(world: World, config: RunConfig) -> list[list[schedule.Link]]:
    kind = config.kind
    rounds = schedule.schedule(
        config.what.pattern,
        [info.host for info in world.ranks],
        config.what.link_class,
        config.what.concurrent,
        config.what.root,
        bidirectional=kind.both_ways,
    )
    if not rounds:
        raise ConfigError(
            f"no {config.what.link_class} links to measure among {world.size} ranks on {len(world.hosts)} host(s)"
        )
    return rounds


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
    """The sweep on one rank, and on rank 0 the results stream and table it feeds."""

    def __init__(self, world: World, config: RunConfig, out: TextIO, log_dir: str | None):
        self.world = world
        self.config = config
        self.out = out
        self.log_dir = log_dir
        self.kind = config.kind
        self.stream: document.ResultsStream | None = None
        self.table: ProgressTable | None = None
        self.transport: Any = None
        self.placement: Placement | None = None
        self.calibration = Calibration()
        # Passes per step, one decision per size for the whole run (the first round of the size makes
        # it): every round of a sweep, and a screen's re-measurements, stream the same way.
        self.passes: dict[int, int] = {}
        # Rank 0, for a screen's second pass: this size's screened entries by (src, dst). Only a
        # screen keeps them: rank 0 holds no sweep's entries otherwise.
        self.screened: dict[tuple[int, int], Entry] = {}
        self.reserved: str | None = None  # rank 0: the default output name it reserved
        self.lists = Lists(config.postings)  # block lists: the paths every rank can run
        # Rank 0, at the size being measured: each link's companion entries by name (contract.Companion).
        self.companions: dict[tuple[int, int], dict[str, list[Entry]]] = {}
        # Hosts where more ranks busy-poll at once than they have cores (metadata.oversubscribed).
        self.oversubscribed: list[dict[str, Any]] = []

    def stop(self, reason: str) -> None:
        """Rank 0: write what was measured as the results file, marked incomplete."""
        stream, self.stream = self.stream, None
        if stream is None or stream.broken:  # nothing streamed, or a stream that cannot be written
            if self.reserved:
                document.release(self.reserved)
            return
        try:
            stream.finish(complete=False, stopped=reason)
            print(
                visible(
                    f"rdmabench: {reason.split(':')[0]}; {stream.count} result(s) measured before that kept in "
                    f"{stream.path} (incomplete)"
                ),
                file=sys.stderr,
                flush=True,
            )
        except OSError as exc:
            print(
                error_line(f"could not write {stream.path}: {exc}; the stream is {document.stream_path(stream.path)}"),
                file=sys.stderr,
            )
        except RdmabenchError as exc:  # a full disk, say: the message says where the records are
            print(error_line(str(exc)), file=sys.stderr)

    # --- set-up ----------------------------------------------------------------------------------

    def setup(self, rounds: list[list[schedule.Link]]) -> None:
        """Transport, native loop, topology of every rank; on rank 0 the results stream and table."""
        from ..wire.ucx import Transport
        from . import metadata

        world = self.world
        config = self.config
        nic = nics.choose(
            world.me.gpu.pci_bus_id if world.me.gpu else None,
            world.me.local_rank,
            dict(os.environ),
            wanted=config.what.nics,
        )
        nics.apply(nic)  # before UCX reads its settings
        counters.watch_gpu(world.me.gpu.pci_bus_id if world.me.gpu else None)  # the wire check's NVLinks
        hosts = [i.host for i in world.ranks]
        transport = Transport(
            world.comm, self.log_dir, world.local_peer_pids(), hosts, self.kind.one_sided, config.shape.device
        )
        transport.native, engine_detail = _hot_loop(config)
        self.transport = transport
        engines = world.comm.allgather({"native": transport.native is not None, "detail": engine_detail})
        self.lists = Lists.agreed(config, world.comm.allgather(posting_problems(config)))
        beside_placement(config, world)
        cpus = world.comm.allgather(metadata.cpu_report())
        self.oversubscribed = metadata.oversubscribed(rounds, hosts, cpus)
        lacking = next((rank for rank, engine in enumerate(engines) if not engine["native"]), None)
        if (self.kind.one_sided or config.lists.blocks) and lacking is not None:
            raise ConfigError(
                f"{'--blocks' if config.lists.blocks else f'--test {config.what.test}'} runs in the native loop only; "
                f"rank {lacking} has none: {engines[lacking]['detail']}"
            )
        peer_gpus = [
            i.gpu.pci_bus_id for i in world.ranks if i.host == world.me.host and i.gpu and i.rank != world.rank
        ]
        remeasure = config.steps.remeasure_host_copy  # else this boot's figure, where one is kept
        mine = limits.collect(world.rank, world.me.host, world.me.local_rank, world.me.gpu, peer_gpus, nic, remeasure)
        topologies: list[limits.RankTopology] = world.comm.allgather(mine)
        self.placement = Placement(
            [i.host for i in world.ranks], [i.gpu.index if i.gpu else None for i in world.ranks], topologies
        )
        if world.rank == 0:
            self._open_stream(topologies, engines)
            if self.stream is not None and self.lists.skipped:
                self.stream.metadata["skipped_postings"] = self.lists.skipped
            if config.out.output_format == "table":
                beside = config.beside_load
                self.table = ProgressTable(self.kind, self.out, config.out.units, beside.label if beside else None)
                self._table_header(rounds, topologies, engines)
                for path, reason in self.lists.skipped.items():
                    self.table.note(f"--posting {path} is left out: {reason}")

    def _open_stream(self, topologies: list[limits.RankTopology], engines: list[dict[str, Any]]) -> None:
        from ..hardware import doctor
        from . import metadata

        config, backend = self.config, self.transport.backend
        meta = metadata.collect(
            self.world, config, backend.name, backend.version, getattr(backend, "ucx_version", "unknown")
        )
        meta["topology"] = [t.to_dict() for t in topologies]
        if any(t.nic and t.nic.set_for_ucx for t in topologies):
            # rdmabench chose UCX_NET_DEVICES rank by rank (each topology's nic says which): not a
            # setting of the user's, and recorded as one it would keep like runs apart in reports.
            meta["ucx_env"].pop("UCX_NET_DEVICES", None)
        meta["doctor"] = [f.to_dict() for f in doctor.run_checks()]
        meta["placement_warnings"] = _placement_warnings(topologies)
        meta["engine"] = {"requested": config.steps.engine, "ranks": engines}
        meta["oversubscribed"] = self.oversubscribed
        output = config.out.output
        if output is None:  # launched by mpirun/srun: rank 0 reserves a free name itself
            output = document.default_output_path(
                config.what.test, config.memory.src_mode.value, config.memory.dst_mode.value
            )
            self.reserved = output
        self.stream = document.ResultsStream(output, meta)

    def _table_header(
        self, rounds: list[list[schedule.Link]], topologies: list[limits.RankTopology], engines: list[dict[str, Any]]
    ) -> None:
        table, config, world = self.table, self.config, self.world
        assert table is not None
        if schedule.PATTERNS[config.what.pattern].one_pair:
            blocks = config.shape.describe()
            table.header(
                0, 1, config.memory.src_mode.value, config.memory.dst_mode.value, config.steps.validate, blocks
            )
            if world.size > 2:
                table.note(f"ranks 2..{world.size - 1} stay idle: the pair test uses ranks 0 and 1")
        else:
            links = sum(len(r) for r in rounds)
            table.per_link = config.out.progress == "links" or (
                config.out.progress == "auto" and links <= PER_LINK_UP_TO
            )
            table.pattern_header(
                config.what.pattern,
                links,
                len(rounds),
                config.memory.src_mode.value,
                config.memory.dst_mode.value,
                config.steps.validate,
            )
        if schedule.PATTERNS[config.what.pattern].halves and world.size % 2:
            table.note(f"warning: rank {world.size - 1} stays idle: bisection pairs the two halves of an even count")
        for warning in _placement_warnings(topologies):
            table.note(f"warning: {warning}")
        for host in self.oversubscribed:
            table.note(
                f"warning: {host['busy_ranks']} ranks busy-poll at once on {host['host']}, which has {host['cores']} "
                "core(s) for them: they take turns, so figures include waits for a core (results record it)"
            )
        for rank, engine in enumerate(engines):
            if not engine["native"] and config.steps.engine == "auto":
                table.note(
                    f"warning: rank {rank} times in Python ({engine['detail']}): small messages measure the interpreter"
                )

    # --- the rounds ------------------------------------------------------------------------------

    def sweep(self, rounds: list[list[schedule.Link]]) -> int:
        self.setup(rounds)
        config = self.config
        # What moves the bytes (a block list: a protocol a posting path every rank can run), and what
        # its entries are read against, run alone just before them (the protocol's companions).
        steps = self.kind.protocols(config.shape, self.lists.postings)
        sizes, refused = config.steps.sizes, self.lists.refused
        loads = {id(step): besides_for(config.beside_loads, step) for step in steps}  # a carve-out each
        each = sum(len(found) for found in loads.values())
        progress = _Progress(len(rounds) * len(sizes) * (each + len(steps[0].companions(sizes[0], refused))))
        RECYCLER.enabled = True
        for size in sizes:
            self.screened, self.companions = {}, {}
            for companion in steps[0].companions(size, refused):
                self.run_rounds(companion.size, rounds, progress, companion.protocol, companion=companion.name)
                _release_buffers(config)
            for step in steps:
                for load in loads[id(step)]:
                    self.run_rounds(size, rounds, progress, step, load=load)
                if schedule.PATTERNS[config.what.pattern].remeasures and config.what.remeasure_below > 0:
                    self.remeasure(size, progress, step)
                _release_buffers(config)  # the next size needs buffers of its own
        return self.finish()

    def run_rounds(
        self,
        size: int,
        rounds: list[list[schedule.Link]],
        progress: _Progress,
        step: StepProtocol,
        alone: bool = False,
        companion: str | None = None,
        load: Beside | None = None,
    ) -> None:
        """Every round of one size moved by `step`; `alone`: a screen's re-measures; `companion`: the
        name of the rounds another protocol's entries are read against, never beside compute; `load`:
        which of --beside's loads (a carve-out of it) runs beside them."""
        config = self.config
        assert self.placement is not None
        plan = size_plan(config, step, size, self.world.spans_hosts)
        if plan.auto_passes and size in self.passes:
            plan = replace(plan, passes=self.passes[size], auto_passes=False)
        keys = [round_key(size, scheduled, self.placement.hosts) for scheduled in rounds]
        given = 0  # steps per sample of this round (0: it calibrates), decided by rank 0
        for index, scheduled in enumerate(rounds):
            started = time.monotonic()
            # (Passes need no offer: after the first round of a size, `plan` carries the size's passes.)
            spec = round_spec(
                config,
                self.kind,
                scheduled,
                size,
                replace(plan, iterations=given) if given else plan,
                step,
                bool(companion),
                load,
            )
            # Rank 0 decides the next round's steps while this one ends: it has learnt from the rounds
            # before this one, and the decision rides on the round's closing barrier.
            offer = self.calibration.decide(keys[index + 1]) if index + 1 < len(rounds) else 0
            gathered, following = self.run_round(spec, offer if plan.iterations is None else 0)
            progress.advance()
            measured = self.record(spec, gathered, time.monotonic() - started, progress, alone, companion)
            if measured and plan.iterations is None:
                self.calibration.learn(keys[index], measured[0].iterations, not given, measured)
            if plan.auto_passes:  # the first round of this size decided: every rank keeps its passes
                decided = self.world.share(measured[0].passes if measured else 0, self.transport.backend.progress) or 1
                self.passes[size] = decided
                plan = replace(plan, passes=decided, auto_passes=False)
            given = following

    def remeasure(self, size: int, progress: _Progress, step: StepProtocol) -> None:
        """A screen's second pass: every link well below its class's median, measured alone."""
        slow = slow_links(list(self.screened.values()), self.config.what.remeasure_below, self.kind.higher_is_better)
        links: list[schedule.Link] = self.world.share(slow, self.transport.backend.progress)
        if not links:
            return
        progress.total += len(links)
        if self.table:
            self.table.note(
                f"re-measuring {len(links)} link(s) alone at {format_size(size)}: below "
                f"{self.config.what.remeasure_below:g} x their link class's median in the screen"
            )
        self.run_rounds(size, [[link] for link in links], progress, step, alone=True)

    def run_round(self, spec: RoundSpec, offer: int = 0) -> tuple[list[Any], int]:
        """This rank's part of one round, gathered on rank 0: [(measurements, fetch rows)] per rank;
        and rank 0's `offer`, handed to every rank by the round's closing barrier."""
        world, transport = self.world, self.transport
        mine: tuple[list[Any], dict[Any, Any], float | None] = ([], {}, None)
        if world.rank in spec.ranks:
            measured, cpu = run_round(transport, world.comm, spec, world.me.gpu is not None, transport.native)
            mine = (measured, fetch_rows(transport, spec), cpu)
        decided = world.wait_for_all(transport.backend.progress, offer if world.rank == 0 else 0)
        gathered = world.comm.gather(mine, root=0)
        return gathered or [], decided

    def record(
        self,
        spec: RoundSpec,
        gathered: list[Any],
        seconds: float,
        progress: _Progress,
        alone: bool = False,
        companion: str | None = None,
    ) -> list[LinkMeasurement]:
        """Rank 0: the round's entries, read against their companions, into the stream and the table;
        returns its measurements."""
        if self.stream is None:
            return []
        assert self.placement is not None
        measured = [m for part, _rows, _cpu in gathered for m in part]
        rows = {key: value for _part, part_rows, _cpu in gathered for key, value in part_rows.items()}
        cpu = {rank: part[2] for rank, part in enumerate(gathered) if part[2] is not None}
        entries = make_entries(
            spec, measured, rows, self.placement, self.config.what.pattern, is_pattern_round(self.config), seconds, cpu
        )
        for entry in entries:
            link = (entry.src_rank, entry.dst_rank)
            spec.protocol.relate(entry, self.companions.get(link, {}))
            if companion:
                self.companions.setdefault(link, {}).setdefault(companion, []).append(entry)
            if alone:
                entry.remeasured_from = self.screened[(entry.src_rank, entry.dst_rank)].value
            elif schedule.PATTERNS[self.config.what.pattern].remeasures:
                self.screened[(entry.src_rank, entry.dst_rank)] = entry
        self.stream.append([entry.to_dict() for entry in entries])
        if self.table and entries:
            if schedule.PATTERNS[self.config.what.pattern].one_pair:
                self.table.row(entries)
            else:
                self.table.link_rows(entries, progress.done, progress.total, progress.eta())
        _check_gdr(self.config, entries)
        return measured

    def finish(self) -> int:
        """Close the job; on rank 0 write the results file and, with --expect, the verdict (1: a link failed)."""
        world, transport, config = self.world, self.transport, self.config
        code = 0
        warnings = transport.ucx_warnings()
        world.wait_for_all(transport.backend.progress)
        all_warnings = world.comm.gather(warnings, root=0)
        transport.close()
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.metadata["ucx_warnings"] = sorted({w for ws in all_warnings or [] for w in ws})
            summary = stream.finish(complete=True)
            if self.table and not schedule.PATTERNS[config.what.pattern].one_pair:
                self.table.matrices(summary.get("matrices", []))
            # The CSV, the verdict and the answer read the same rows: the file is loaded and aggregated once.
            choice = self.table is not None and (len(self.lists.postings) > 1 or config.beside_load is not None)
            rows = (
                closing.rows_of(stream.path)
                if config.out.output_format == "csv" or config.verdict.expect or choice
                else []
            )
            if choice:
                closing.answer(rows, self.out, config.verdict.model_budget)
            if config.out.output_format == "json":
                print(json.dumps(document.load(stream.path), indent=1), file=self.out, flush=True)
            elif config.out.output_format == "csv":
                print(closing.csv(rows), file=self.out, end="", flush=True)
            else:
                print(f"# results written to {stream.path}", file=self.out, flush=True)
            if config.verdict.expect:  # beside a JSON or CSV document on stdout, the verdict goes to stderr
                verdict_out = self.out if config.out.output_format == "table" else sys.stderr
                code = closing.verdict(stream.path, rows, config.verdict.expect, verdict_out)
        world.wait_for_all(transport.backend.progress)
        return code


def _check_gdr(config: RunConfig, entries: list[Entry]) -> None:
    if not config.memory.require_gdr:
        return
    for entry in entries:
        for warning in entry.warnings:
            if is_device_path_warning(warning):
                raise TransportError(
                    f"--require-gdr: {format_size(entry.size_bytes)} {entry.src_mode} -> {entry.dst_mode}: {warning}"
                )


def _placement_warnings(topologies: list[limits.RankTopology]) -> list[str]:
    warnings = [
        f"rank {t.rank} on {t.host} runs on NUMA node(s) {t.cpu_numa_nodes} but its GPU {t.gpu.index} sits on node "
        f"{t.gpu.numa_node}: host-device traffic crosses the socket link (bind ranks to their GPU's node)"
        for t in topologies
        if t.gpu is not None and t.gpu_numa_local is False
    ]
    for t in topologies:
        if t.gpu is None or t.nic is None or None in (t.gpu.numa_node, t.nic.numa_node):
            continue
        gpu_node, nic_node = t.gpu.numa_node, t.nic.numa_node
        if gpu_node != nic_node:
            warnings.append(
                f"rank {t.rank} on {t.host} sends through {t.nic.name} on NUMA node {nic_node}, its GPU "
                f"{t.gpu.index} sits on node {gpu_node}: GPUDirect traffic crosses the socket link"
            )
    return warnings


def _hot_loop(config: RunConfig) -> tuple[Any, str]:
    """The native loop's library for this run (or None), and what to record about it."""
    if config.steps.engine == "python":
        return None, "--engine python"
    from ..wire import native

    built = native.load()
    return built.library, built.reason


def _release_buffers(config: RunConfig) -> None:
    """Free the buffers kept between rounds, and CuPy's cached device memory with them."""
    RECYCLER.clear()
    if config.needs_gpu:
        from ..hardware.gpu import import_cupy

        cupy = import_cupy()
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()


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
