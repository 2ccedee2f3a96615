"""A rank's sweep: every rank's set-up (the NIC, UCX, the native loop, its topology), then the rounds
of every size, each protocol's companions first, a screen's slow links again alone, and the close.

Every rank runs the same sweep; what the ranks gather lands on rank 0, whose recorder
(job/recorder.py) writes it. The sweep never reads an entry: it hands the round to the recorder and
takes back what calibration needs. What a step moves (messages, a block list, a model's handoff) the
sweep does not know: the test kind turns the run's shape into the step protocols, one a posting path
every rank can run, and each protocol names its companions."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from ..errors import ConfigError
from ..hardware import counters, limits, nics
from ..measure.beside import Beside
from ..measure.contract import StepProtocol
from ..measure.entry import Placement
from ..measure.round import RoundSpec, fetch_rows, run_round
from ..memory.buffers import RECYCLER
from ..wire.mpi import World
from . import schedule
from .calibration import Calibration, round_key
from .config import RunConfig
from .lists import Lists, beside_placement, posting_problems
from .recorder import Opening, Progress, RankEngine, Recorder
from .rounds import round_spec, size_plan


class Sweep:
    """The sweep on one rank; `recorder` on rank 0 (None on the others)."""

    def __init__(self, world: World, config: RunConfig, log_dir: str | None, recorder: Recorder | None):
        self.world = world
        self.config = config
        self.log_dir = log_dir
        self.recorder = recorder
        self.transport: Any = None
        self.placement: Placement | None = None
        self.calibration = Calibration()
        # Passes per step, one decision per size for the whole run (the first round of the size makes
        # it): every round of a sweep, and a screen's re-measurements, stream the same way.
        self.passes: dict[int, int] = {}

    def run(self, rounds: list[list[schedule.Link]]) -> int:
        """Set up, measure every size, close; the exit status (rank 0's verdict, where asked)."""
        config = self.config
        lists = self.setup(rounds)
        # What moves the bytes (a block list: a protocol a posting path every rank can run), and what
        # its entries are read against, run alone just before them (the protocol's companions).
        steps = config.kind.protocols(config.shape, lists.postings)
        sizes, refused = config.steps.sizes, lists.refused
        # Beside compute, a round a carve-out where the transfer runs on SMs a carve-out leaves it.
        loads = {id(step): config.beside.for_transfer(step.carvable()) if config.beside else [None] for step in steps}
        each = sum(len(found) for found in loads.values())
        progress = Progress(len(rounds) * len(sizes) * (each + len(steps[0].companions(sizes[0], refused))))
        RECYCLER.enabled = True
        for size in sizes:
            if self.recorder:
                self.recorder.new_size()
            for companion in steps[0].companions(size, refused):
                self.run_rounds(companion.size, rounds, progress, companion.protocol, companion=companion.name)
                _release_buffers(config)
            for step in steps:
                for load in loads[id(step)]:
                    self.run_rounds(size, rounds, progress, step, load=load)
                if config.pattern.remeasures and config.what.remeasure_below > 0:
                    self.remeasure(size, progress, step)
                _release_buffers(config)  # the next size needs buffers of its own
        return self.finish(len(steps))

    # --- set-up ----------------------------------------------------------------------------------

    def setup(self, rounds: list[list[schedule.Link]]) -> Lists:
        """Transport, native loop, topology of every rank; on rank 0 the recorder opens. Returns the
        posting paths every rank can run."""
        from ..wire.ucx import Transport
        from . import metadata

        world, config = self.world, self.config
        gpu = world.me.gpu.pci_bus_id if world.me.gpu else None
        nic = nics.choose(gpu, world.me.local_rank, dict(os.environ), wanted=config.what.nics)
        nics.apply(nic)  # before UCX reads its settings
        counters.watch_gpu(gpu)  # the wire check's NVLinks
        hosts = [i.host for i in world.ranks]
        one_sided = config.kind.one_sided
        transport = Transport(world.comm, self.log_dir, world.local_peer_pids(), hosts, one_sided, config.shape.device)
        transport.native, engine_detail = _hot_loop(config)
        self.transport = transport
        engine: RankEngine = {"native": transport.native is not None, "detail": engine_detail}
        engines: list[RankEngine] = world.comm.allgather(engine)
        lists = Lists.agreed(config, world.comm.allgather(posting_problems(config)))
        beside_placement(config, world)
        cpus = world.comm.allgather(metadata.cpu_report())
        _refuse_without_native(config, engines)
        peer_gpus = [
            i.gpu.pci_bus_id for i in world.ranks if i.host == world.me.host and i.gpu and i.rank != world.rank
        ]
        remeasure = config.steps.remeasure_host_copy  # else this boot's figure, where one is kept
        mine = limits.collect(world.rank, world.me.host, world.me.local_rank, world.me.gpu, peer_gpus, nic, remeasure)
        topologies: list[limits.RankTopology] = world.comm.allgather(mine)
        self.placement = Placement(hosts, [i.gpu.index if i.gpu else None for i in world.ranks], topologies)
        if self.recorder is not None:
            busy = metadata.oversubscribed(rounds, hosts, cpus)
            self.recorder.open(world, transport, rounds, Opening(topologies, engines, busy, lists.skipped))
        return lists

    # --- the rounds ------------------------------------------------------------------------------

    def run_rounds(
        self,
        size: int,
        rounds: list[list[schedule.Link]],
        progress: Progress,
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
            planned = replace(plan, iterations=given) if given else plan
            spec = round_spec(config, config.kind, scheduled, size, planned, step, bool(companion), load)
            # Rank 0 decides the next round's steps while this one ends: it has learnt from the rounds
            # before this one, and the decision rides on the round's closing barrier.
            offer = self.calibration.decide(keys[index + 1]) if index + 1 < len(rounds) else 0
            gathered, following = self.run_round(spec, offer if plan.iterations is None else 0)
            progress.advance()
            measured = []
            if self.recorder is not None:
                seconds = time.monotonic() - started
                measured = self.recorder.record(spec, gathered, self.placement, seconds, progress, alone, companion)
            if measured and plan.iterations is None:
                self.calibration.learn(keys[index], measured[0].iterations, not given, measured)
            if plan.auto_passes:  # the first round of this size decided: every rank keeps its passes
                decided = self.world.share(measured[0].passes if measured else 0, self.transport.backend.progress) or 1
                self.passes[size] = decided
                plan = replace(plan, passes=decided, auto_passes=False)
            given = following

    def remeasure(self, size: int, progress: Progress, step: StepProtocol) -> None:
        """A screen's second pass: every link well below its class's median (rank 0 names them), alone."""
        slow = self.recorder.slow_links() if self.recorder is not None else []
        links: list[schedule.Link] = self.world.share(slow, self.transport.backend.progress)
        if not links:
            return
        progress.total += len(links)
        if self.recorder is not None:
            self.recorder.note_remeasure(len(links), size)
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

    def finish(self, choices: int) -> int:
        """Close the transport on every rank; on rank 0 the recorder ends the run (its exit status)."""
        world, transport = self.world, self.transport
        warnings = transport.ucx_warnings()
        world.wait_for_all(transport.backend.progress)
        all_warnings = world.comm.gather(warnings, root=0)
        transport.close()
        code = self.recorder.finish(all_warnings or [], choices) if self.recorder is not None else 0
        world.wait_for_all(transport.backend.progress)
        return code


def _refuse_without_native(config: RunConfig, engines: list[RankEngine]) -> None:
    """One-sided tests and block lists step in the native loop only: every rank must have it."""
    lacking = next((rank for rank, engine in enumerate(engines) if not engine["native"]), None)
    if (config.kind.one_sided or config.shape.lists) and lacking is not None:
        what = f"--test {config.what.test}" + (f" with a {config.shape.form}" if config.shape.lists else "")
        raise ConfigError(f"{what} runs in the native loop only; rank {lacking} has none: {engines[lacking]['detail']}")


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
