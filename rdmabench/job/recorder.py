"""Rank 0's recorder, apart from the sweep every rank runs (job/sweep.py), as pyperf keeps its
master apart from its workers: the results stream and the live table it opens, each round's entries
read against their companions and written, a screen's slow links, and the run's end (the file, the
CSV, the answer, the verdict) or its stop (the file marked incomplete).

The sweep hands it what the ranks gathered; it never talks to another rank itself."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, TypedDict

from ..errors import RdmabenchError, TransportError, error_line
from ..escape import visible
from ..hardware import limits
from ..hardware.pathcheck import is_device_path_warning
from ..measure.entry import Entry, Placement, make_entries
from ..measure.round import LinkMeasurement, RoundSpec
from ..results.files import document
from ..results.reports.table import ProgressTable
from ..units import format_size
from . import closing, schedule
from .config import PER_LINK_UP_TO, RunConfig
from .rounds import is_pattern_round, slow_links

if TYPE_CHECKING:  # the module itself is imported only where a stream opens (_open_stream)
    from .metadata import Oversubscribed


class Progress:
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


class RankEngine(TypedDict):
    """Which loop a rank times its steps in: the native C loop or Python (`detail`: why, or the library)."""

    native: bool
    detail: str


@dataclass(frozen=True)
class Opening:
    """What the sweep's set-up learnt that rank 0 records: every rank's topology and engine, the hosts
    where ranks busy-poll more than their cores, and the posting paths a run asked for but left out
    (with why)."""

    topologies: list[limits.RankTopology]
    engines: list[RankEngine]
    oversubscribed: list[Oversubscribed]
    left_out: dict[str, str]


class Recorder:
    """Rank 0: the results stream and the table a sweep feeds, and what it decides at the end."""

    def __init__(self, config: RunConfig, out: TextIO):
        self.config = config
        self.out = out
        self.stream: document.ResultsStream | None = None
        self.table: ProgressTable | None = None
        self.reserved: str | None = None  # the default output name it reserved
        # This size's screened entries by (src, dst), for a screen's second pass (only a screen keeps them).
        self.screened: dict[tuple[int, int], Entry] = {}
        # At the size being measured: each link's companion entries by name (contract.Companion).
        self.companions: dict[tuple[int, int], dict[str, list[Entry]]] = {}

    # --- the start ------------------------------------------------------------------------------

    def open(self, world: Any, transport: Any, rounds: list[list[schedule.Link]], opening: Opening) -> None:
        """The results stream (its metadata from every rank's set-up) and, for a table, its header."""
        self._open_stream(world, transport, opening)
        if self.stream is not None and opening.left_out:
            self.stream.metadata["skipped_postings"] = opening.left_out
        config = self.config
        if config.out.output_format == "table":
            beside = config.beside.first.label if config.beside else None
            self.table = ProgressTable(config.kind, self.out, config.out.units, beside)
            self._table_header(world.size, rounds, opening)
            for path, reason in opening.left_out.items():
                self.table.note(f"--posting {path} is left out: {reason}")

    def _open_stream(self, world: Any, transport: Any, opening: Opening) -> None:
        from ..hardware import doctor
        from . import metadata

        config, backend = self.config, transport.backend
        meta = metadata.collect(
            world, config, backend.name, backend.version, getattr(backend, "ucx_version", "unknown")
        )
        meta["topology"] = [t.to_dict() for t in opening.topologies]
        if any(t.nic and t.nic.set_for_ucx for t in opening.topologies):
            # rdmabench chose UCX_NET_DEVICES rank by rank (each topology's nic says which): not a
            # setting of the user's, and recorded as one it would keep like runs apart in reports.
            meta["ucx_env"].pop("UCX_NET_DEVICES", None)
        meta["doctor"] = [f.to_dict() for f in doctor.run_checks()]
        meta["placement_warnings"] = placement_warnings(opening.topologies)
        meta["engine"] = {"requested": config.steps.engine, "ranks": opening.engines}
        meta["oversubscribed"] = opening.oversubscribed
        output = config.out.output
        if output is None:  # launched by mpirun/srun: rank 0 reserves a free name itself
            output = document.default_output_path(
                config.what.test, config.memory.src_mode.value, config.memory.dst_mode.value
            )
            self.reserved = output
        self.stream = document.ResultsStream(output, meta)

    def _table_header(self, ranks: int, rounds: list[list[schedule.Link]], opening: Opening) -> None:
        table, config, pattern = self.table, self.config, self.config.pattern
        assert table is not None
        modes = (config.memory.src_mode.value, config.memory.dst_mode.value)
        if pattern.one_pair:
            table.header(0, 1, *modes, config.steps.validate, config.shape.describe())
            if ranks > 2:
                table.note(f"ranks 2..{ranks - 1} stay idle: the pair test uses ranks 0 and 1")
        else:
            links = sum(len(r) for r in rounds)
            progress = config.out.progress
            table.per_link = progress == "links" or (progress == "auto" and links <= PER_LINK_UP_TO)
            table.pattern_header(pattern.name, links, len(rounds), *modes, config.steps.validate)
        if pattern.halves and ranks % 2:
            table.note(f"warning: rank {ranks - 1} stays idle: bisection pairs the two halves of an even count")
        for warning in placement_warnings(opening.topologies):
            table.note(f"warning: {warning}")
        for host in opening.oversubscribed:
            table.note(
                f"warning: {host['busy_ranks']} ranks busy-poll at once on {host['host']}, which has {host['cores']} "
                "core(s) for them: they take turns, so figures include waits for a core (results record it)"
            )
        for rank, engine in enumerate(opening.engines):
            if not engine["native"] and config.steps.engine == "auto":
                table.note(
                    f"warning: rank {rank} times in Python ({engine['detail']}): small messages measure the interpreter"
                )

    # --- the rounds -----------------------------------------------------------------------------

    def new_size(self) -> None:
        """A size begins: its companions and its screen start empty."""
        self.screened, self.companions = {}, {}

    def record(
        self,
        spec: RoundSpec,
        gathered: list[Any],
        placement: Placement,
        seconds: float,
        progress: Progress,
        alone: bool = False,
        companion: str | None = None,
    ) -> list[LinkMeasurement]:
        """The round's entries, read against their companions, into the stream and the table; returns
        its measurements (none once the stream is gone)."""
        if self.stream is None:
            return []
        config = self.config
        measured = [m for part, _rows, _cpu in gathered for m in part]
        rows = {key: value for _part, part_rows, _cpu in gathered for key, value in part_rows.items()}
        cpu = {rank: part[2] for rank, part in enumerate(gathered) if part[2] is not None}
        entries = make_entries(
            spec, measured, rows, placement, config.what.pattern, is_pattern_round(config), seconds, cpu
        )
        for entry in entries:
            link = (entry.src_rank, entry.dst_rank)
            spec.protocol.relate(entry, self.companions.get(link, {}))
            if companion:
                self.companions.setdefault(link, {}).setdefault(companion, []).append(entry)
            if alone:
                entry.remeasured_from = self.screened[link].value
            elif config.pattern.remeasures:
                self.screened[link] = entry
        self.stream.append([entry.to_dict() for entry in entries])
        if self.table and entries:
            if config.pattern.one_pair:
                self.table.row(entries)
            else:
                self.table.link_rows(entries, progress.done, progress.total, progress.eta())
        _check_gdr(config, entries)
        return measured

    def slow_links(self) -> list[schedule.Link]:
        """A screen's second pass: every link of this size well below its class's median."""
        what = self.config.what
        return slow_links(list(self.screened.values()), what.remeasure_below, self.config.kind.higher_is_better)

    def note_remeasure(self, links: int, size: int) -> None:
        if self.table:
            self.table.note(
                f"re-measuring {links} link(s) alone at {format_size(size)}: below "
                f"{self.config.what.remeasure_below:g} x their link class's median in the screen"
            )

    # --- the end --------------------------------------------------------------------------------

    def finish(self, ucx_warnings: list[list[str]], choices: int) -> int:
        """The results file, then what the run prints: the CSV, the JSON, or the table's matrices and,
        where the run chose between `choices` (posting paths) or ran beside compute, the answer;
        with --expect the verdict (its exit status: 1 when a link failed)."""
        if self.stream is None:
            return 0
        config, out = self.config, self.out
        stream, self.stream = self.stream, None
        stream.metadata["ucx_warnings"] = sorted({w for ws in ucx_warnings for w in ws})
        summary = stream.finish(complete=True)
        if self.table and not config.pattern.one_pair:
            self.table.matrices(summary.get("matrices", []))
        # The CSV, the verdict and the answer read the same rows: the file is loaded and aggregated once.
        choice = self.table is not None and (choices > 1 or config.beside is not None)
        csv = config.out.output_format == "csv"
        rows = closing.rows_of(stream.path) if csv or config.verdict.expect or choice else []
        if choice:
            closing.answer(rows, out, config.verdict.model_budget)
        if config.out.output_format == "json":
            print(json.dumps(document.load(stream.path), indent=1), file=out, flush=True)
        elif csv:
            print(closing.csv(rows), file=out, end="", flush=True)
        else:
            print(f"# results written to {stream.path}", file=out, flush=True)
        if not config.verdict.expect:
            return 0
        verdict_out = out if config.out.output_format == "table" else sys.stderr  # beside JSON or CSV: stderr
        return closing.verdict(stream.path, rows, config.verdict.expect, verdict_out)

    def stop(self, reason: str) -> None:
        """Write what was measured as the results file, marked incomplete."""
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


def _check_gdr(config: RunConfig, entries: list[Entry]) -> None:
    if not config.memory.require_gdr:
        return
    for entry in entries:
        for warning in entry.warnings:
            if is_device_path_warning(warning):
                raise TransportError(
                    f"--require-gdr: {format_size(entry.size_bytes)} {entry.src_mode} -> {entry.dst_mode}: {warning}"
                )


def placement_warnings(topologies: list[limits.RankTopology]) -> list[str]:
    """Ranks whose GPU, CPUs and NIC sit on different NUMA nodes: their traffic crosses the socket link."""
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
