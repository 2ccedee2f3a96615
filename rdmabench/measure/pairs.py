"""A transfer beside a model's compute, pair by pair: the pairs' choreography, in one module.

A round run beside compute (--beside) times each sample as a pair on the same buffers: the transfer
alone (every pair's, first, on an idle GPU: `pairs_in_a_row`), then the load alone on the whole GPU,
both at once, and the load alone again. The model's cost is what it loses: its shared window is K
operations (K sized so the window lasts WINDOW_SECONDS alone), the transfers run back to back until
every GPU's window has ended, and the pair's slowdown is the window's total operation time over K x
the operation's time alone (a mean over the window, never a median: a median never sees the operations
a few transfers stalled). Operations are timed on the GPU by CUDA events (wire/gpuload.py). Before the
first pair the load runs alone until two windows in a row agree within SETTLE_AGREE, the first of them
after SETTLE_SECONDS of the load (past the moment its power draw reaches the GPU's limit and the clocks
are held down); after each shared half, alone windows again until two in a row agree (a GEMM the
transfers stalled runs faster for a while after: its clocks rise under less power), the last of them
also the next pair's window before. Between pairs the load keeps running, so its clocks never see an
idle GPU. A pair whose alone windows before and after differ by more than judging.DRIFT_LIMIT is taken
again, at most RETAKES times, and kept but not judged where it still drifts (`take_pair`, the round's
ranks agreeing by MPI). The load alone is the mean of those two windows. Each pair records its duty
(the share of the shared half with a transfer in flight). The slowdown is always against the model
alone on the whole GPU, also where a carve-out plans its GEMM for fewer SMs (whose own cost, the carved
GEMM alone over the whole GPU's, is `carveout_cost`). How the pairs are judged: measure/judging.py.

Each rank of the round runs the load on its own GPU, in its own process (kernels of two processes
time-slice a GPU; the engine's transfer and its model share one), from a thread of its own (`Pairs`);
the NIXL anchor keeps its two ends' pairs in step through files instead (anchor/nixl_beside.py).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import TransportError
from ..stats import median
from ..wire.gpuload import RING
from ..wire.mpi import agree_max
from .beside import CARVED, PART, WHOLE, Beside
from .besiderecord import GpuFigure, Settle
from .judging import drifting, judge_pairs, largest_drift

# The load alone, per window: at least this long (as long as the shared window: 8 GEMMs of 8192^3 alone,
# about 11 ms, drifted 4-11% between the windows around one pair on 2 x H100, under a GEMM's power draw) ...
ALONE_SECONDS = 0.08
ALONE_OPERATIONS = 8  # ... and this many operations, after ...
WARM_OPERATIONS = 3  # ... the first few, left out (the GPU's clocks settle)
# Where a pair has no alone window just before it (the load stopped), the load first runs this long,
# left out: a GEMM started after an idle GPU ran 13-19% faster than after its shared window (2 x H100,
# every pair retaken twice); after 0.2 s, still up to 10% faster where the transfers alone had left the
# GPU idle longest (2 x H200). Pairs in a row never need it: the load runs on between them.
WARM_SECONDS = 0.4
# After the shared half, alone windows until two in a row agree within SETTLE_AGREE, at most this many:
# a GEMM the transfers had stalled to half its rate ran 6-10% faster alone just after (its clocks up
# under less power), and a fixed 0.15 s wait left the GPU path's 1 MiB pairs drifting +14% (2 x H200).
AFTER_TRIES = 4
WINDOW_SECONDS = 0.08  # the shared window: operations enough to last this long alone ...
WINDOW_OPERATIONS = 8  # ... and at least this many
# Before the first pair, the load runs this long before its settled windows: a GEMM of 8192^3 from an
# idle H200 ran at one speed for 0.6-0.8 s while its power rose, then hit the 700 W limit, dipped 5-27%
# for 0.2 s and held 2-6% slower than its first windows, swinging a few percent about once a second
# (devtools/probes/loadtrend.py, 4 x H200, measurements/h200x4-20261127-session7/). Windows settled in
# its first 0.3 s (as they were) made a reference every later pair drifted from: 49 of 105 pairs unjudged.
SETTLE_SECONDS = 1.2
SETTLE_AGREE = 0.02  # the clocks are settled when two alone windows in a row agree this well ...
SETTLE_TRIES = 10  # ... within this many windows (else the record says they never did)
RETAKES = 2  # a pair whose alone windows drift past judging.DRIFT_LIMIT is taken again at most this many times
STALLED_SECONDS = 60.0  # a load with no operation finished for this long has stopped (its thread failed)
# The library keeps the latest RING operations of a run; a run holds one window (alone or shared) after
# its first operations: a window is held to a fifth of it, the rest room for the polls' overshoot, so
# that a fast load (decode:1MiB, a few us an operation) keeps its whole window.
SEGMENT_OPERATIONS = RING // 5


def _between(seconds: list[float], number: int, first: int, last: int | None) -> list[float]:
    """Operations `first` up to `last` (None: to the end), numbered from the load's start, of the
    `seconds` whose first is operation `number`: what is kept of the window (its start may be gone)."""
    if last is not None and last <= number:
        return []
    return seconds[max(first - number, 0) : None if last is None else last - number]


def _mean(seconds: list[float]) -> float | None:
    return sum(seconds) / len(seconds) if seconds else None


def rate(work: float, seconds: list[float], unit: str) -> float:
    """The load's rate from its operations' mean time: TFLOP/s (work in flops) or GB/s (bytes)."""
    scale = 1e12 if unit == "TFLOP/s" else 1e9
    mean = _mean(seconds)
    return work / mean / scale if mean else 0.0


@dataclass
class Pair:
    """One pair on one GPU: the load alone before and after (mean seconds an operation), the shared
    window's operations, the share of the shared half with a transfer in flight and its wall seconds."""

    before: float | None
    after: float | None
    window: list[float]
    duty: float | None
    span: float
    after_windows: int = 0  # alone windows taken after the shared half until two agreed
    after_settled: bool = False  # whether two of them agreed (else AFTER_TRIES were taken)
    reference: float | None = None  # the row's settled load alone (Pairs.settle), to which both are held
    retakes: int = 0
    drifting: bool = False

    @property
    def alone(self) -> float | None:
        """The load alone on the whole GPU: the mean of the windows before and after the shared half
        (a clock that drifts steadily through the pair cancels), or the one there is."""
        both = [x for x in (self.before, self.after) if x is not None]
        return sum(both) / len(both) if both else None

    @property
    def drift(self) -> float | None:
        """How far the alone windows moved: after against before, and each against the row's settled
        reference, the furthest (signed). The window before is the last pair's window after, so a load
        still recovering from the stalls would read the same in both and drift by none against each
        other: against the reference, taken before any shared half, it does."""
        pairs = ((self.after, self.before), (self.before, self.reference), (self.after, self.reference))
        drifts = [a / b - 1 for a, b in pairs if a and b]
        return largest_drift(drifts)

    @property
    def slowdown(self) -> float | None:
        """The window's total operation time over its operations x the operation's time alone."""
        alone = self.alone
        return sum(self.window) / (len(self.window) * alone) if self.window and alone else None

    @property
    def lost(self) -> float | None:
        """Seconds of the model's work lost over the window."""
        alone = self.alone
        return sum(self.window) - len(self.window) * alone if self.window and alone else None


@dataclass
class _Open:
    """The pair being taken: its window's first and last operation, and the wait's progress."""

    before: float | None = None
    first: int = 0
    last: int = 0
    began: float = 0.0
    seen: tuple[int, float] = (0, 0.0)  # the last count of operations seen, and when


class Pairs:
    """One rank's load through a round's pairs: settled first, then for each pair the load alone,
    its shared window (WINDOW operations, the transfers running until every GPU's has ended), and the
    load alone again until it has settled (the next pair's window before). Where the shared half runs
    the load elsewhere (an SM partition's SMs, a carved plan) the load restarts there for it; the alone
    windows are always on the whole GPU. Between pairs the load runs on, its operations left out:
    finish() stops it."""

    def __init__(self, beside: Beside, load: Any, partitioned: bool):
        self.beside = beside
        self.load = load  # wire.gpuload.ComputeLoad
        self.partitioned = partitioned
        self.where = CARVED if beside.carveout else PART if partitioned else WHOLE
        self.operations = WINDOW_OPERATIONS  # the shared window's, sized by settle()
        self.kept: list[Pair] = []
        self.retakes = 0  # pairs taken again (their alone windows drifted)
        self.settled: Settle | None = None
        self.carveout_cost: float | None = None
        self._open = _Open()
        self._pending: Pair | None = None
        self._alone: float | None = None  # the latest alone window, the load running on since (or None)
        self._reference: float | None = None  # the settled load alone (settle()), every pair held to it
        self._running = False

    def _wait(self, operations: int, seconds: float = ALONE_SECONDS, kept: bool = True) -> None:
        """Until the load has finished `operations` and `seconds` passed, or (`kept`: what it finishes
        now must stay in what the library keeps) SEGMENT_OPERATIONS more than it had; a load that stops
        making progress (its thread ended on an error) is one line, never a hang."""
        began = time.perf_counter()
        cap = self.load.done() + SEGMENT_OPERATIONS if kept else math.inf
        while (done := self.load.done()) < operations or (time.perf_counter() - began < seconds and done < cap):
            if self.load.failed():  # its thread ended on a CUDA error: stop() raises it, with the reason
                self._stopped()
            if time.perf_counter() - began > STALLED_SECONDS:
                raise TransportError(
                    f"the compute load ({self.beside.label}) finished {self.load.done()} of {operations} operations "
                    f"in {STALLED_SECONDS:g} s: it stopped making progress"
                )
            time.sleep(0.0005)

    def _run(self, where: int) -> None:
        """(Re)start the load `where`, stopping the run kept going between windows (its operations unread).
        Marked running before it starts, so that finish() stops it whatever interrupts the start."""
        if self._running:
            self._stopped()
        self._running = True
        try:
            self.load.start(where)
        except TransportError:  # not started (the library said why)
            self._running = False
            raise

    def _stopped(self) -> tuple[list[float], int]:
        """Stop the load: its operations' seconds and the number of the first of them (the library keeps
        the latest RING operations: a long run's first ones are gone). Marked stopped once the library
        has stopped it (or said why not: its thread ended on an error)."""
        try:
            seconds = self.load.stop().seconds
        except TransportError:
            self._running = False
            raise
        self._running = False
        return seconds, self.load.done() - len(seconds)

    def _window(self, where: int, warm: float = 0.0) -> list[float]:
        """The load alone (`where`) for one window after `warm` seconds left out, stopped: its
        operations' seconds."""
        self._run(where)
        self._wait(WARM_OPERATIONS, warm, kept=False)
        mark = self.load.done()
        self._wait(mark + ALONE_OPERATIONS)
        seconds, number = self._stopped()
        return _between(seconds, number, mark, None)

    def _settled_alone(self, tries: int, warm: float = 0.0) -> tuple[float | None, bool, int]:
        """Alone windows on the whole GPU until two in a row agree within SETTLE_AGREE (at most `tries`),
        the first after `warm` seconds of the load left out: the last one's mean seconds, whether they
        agreed, and the windows taken."""
        previous: float | None = None
        now, agreed, taken = None, False, 0
        while taken < tries and not agreed:
            taken += 1
            now = _mean(self._window(WHOLE, warm if taken == 1 else 0.0))
            agreed = bool(now and previous and abs(now / previous - 1) <= SETTLE_AGREE)
            previous = now
        return now, agreed, taken

    def settle(self) -> None:
        """Before the first pair: the load for SETTLE_SECONDS, then alone windows on the whole GPU until
        two in a row agree within SETTLE_AGREE (at most SETTLE_TRIES); the shared window's operations from
        the settled time; a carve-out's own cost, its GEMM alone against the whole GPU's, from the windows
        around it. The load then runs on until the first pair."""
        now, settled, tries = self._settled_alone(SETTLE_TRIES, SETTLE_SECONDS)
        self.settled = Settle(settled, tries, SETTLE_AGREE)
        if now:
            self.operations = min(max(WINDOW_OPERATIONS, math.ceil(WINDOW_SECONDS / now)), SEGMENT_OPERATIONS)
        self._alone = self._reference = now
        if self.beside.carveout:
            self.load.carve(self.beside.carveout)
            carved = _mean(self._window(CARVED))
            # the whole GPU again, settled after the carved plan's other power draw: the first pair's before
            whole, _, _ = self._settled_alone(AFTER_TRIES)
            if carved and now and whole:  # against the whole GPU's windows before and after it
                self.carveout_cost = carved / ((now + whole) / 2)
            self._alone = whole
        self._run(WHOLE)

    def begin(self) -> None:
        """Before the pair's shared half: the load's latest alone window is this pair's window before
        (one is taken, after WARM_SECONDS, where there is none); the load then runs where the shared
        half runs it, past its first operations."""
        self._pending = None
        self._open = _Open()
        if self._alone is None:
            self._alone = _mean(self._window(WHOLE, WARM_SECONDS))
        self._open.before = self._alone
        self._run(self.where)
        self._wait(WARM_OPERATIONS, 0.0)

    def open(self) -> None:
        """The shared half starts (every GPU's load runs; the transfers start now): the window is the
        next `operations` operations after the one running now (which is in neither half)."""
        mark = self.load.done()
        self._open.first, self._open.last = mark + 1, mark + 1 + self.operations
        self._open.began = time.perf_counter()
        self._open.seen = (mark, self._open.began)

    def over(self) -> bool:
        """Whether this GPU's window has ended: the transfers stop once every GPU's has. A load that
        failed or stalled ends it too (close() says why)."""
        done = self.load.done()
        if done >= self._open.last or self.load.failed():
            return True
        clock = time.perf_counter()
        if done != self._open.seen[0]:
            self._open.seen = (done, clock)
        return clock - self._open.seen[1] > STALLED_SECONDS

    def close(self, duty: float | None) -> float | None:
        """After the shared half (`duty`: its share with a transfer in flight, where this end knows):
        the window's operations, then the load alone until it has settled (at most AFTER_TRIES windows;
        the load runs on after them). Returns the alone windows' drift, or None."""
        span = time.perf_counter() - self._open.began
        first, last = self._open.first, self._open.last
        self._alone = None  # a close that fails leaves no window to chain the next pair to
        seconds, number = self._stopped()
        finished = self.load.done()
        window = _between(seconds, number, first, last)
        if finished < last:
            raise TransportError(
                f"the compute load ({self.beside.label}) finished {max(finished - first, 0)} of its window's "
                f"{self.operations} operations while the transfers ran: it stopped making progress"
            )
        after, agreed, taken = self._settled_alone(AFTER_TRIES)
        self._alone = after
        self._run(WHOLE)
        self._pending = Pair(self._open.before, after, window, duty, span, taken, agreed, self._reference)
        return self._pending.drift

    def finish(self, quiet: bool = False) -> None:
        """After the last pair (or a failed one): the load kept running between pairs stops. `quiet`:
        an error is already on its way, and the load's own (its thread's CUDA error) must not replace it."""
        self._alone = None
        if not self._running:
            return
        if not quiet:
            self._stopped()
            return
        with contextlib.suppress(Exception):
            self._stopped()

    def keep(self, retakes: int, drifting: bool) -> None:
        """File the pair just closed (after `retakes` takes; `drifting`: it still drifted past the limit)."""
        assert self._pending is not None
        self._pending.retakes, self._pending.drifting = retakes, drifting
        self.kept.append(self._pending)
        self._pending = None

    def discard(self) -> None:
        """The pair just closed is taken again (its alone windows drifted)."""
        self._pending = None
        self.retakes += 1

    def summary(self) -> GpuFigure:
        """What this rank's GPU did: the load's rate alone and beside, and each pair's figures."""
        unit, work, kept = self.beside.unit, self.load.work, self.kept
        slowdowns = [pair.slowdown for pair in kept]
        drifts = [pair.drift for pair in kept if pair.drift is not None]
        partition = self.load.partition if self.partitioned else None
        found = GpuFigure(
            load=self.beside,
            alone=round(rate(work, [p.alone for p in kept if p.alone], unit), 3),
            beside=round(rate(work, [s for p in kept for s in p.window], unit), 3),
            slowdown=None,  # below: the median of the pairs judge_pairs judges on this GPU alone
            slowdown_pairs=[_round(s, 4) for s in slowdowns],
            duty_pairs=[_round(pair.duty, 4) for pair in kept],
            lost_s_pairs=[_round(pair.lost, 6) for pair in kept],
            window_s_pairs=[round(sum(pair.window), 6) for pair in kept],
            span_s_pairs=[round(pair.span, 6) for pair in kept],
            alone_drift=_round(largest_drift(drifts), 4),
            drifting_pairs=[index for index, pair in enumerate(kept) if pair.drifting],
            retakes=self.retakes,
            operations=[len(pair.window) for pair in kept],
            after_windows_pairs=[pair.after_windows for pair in kept],
            after_settled_pairs=[pair.after_settled for pair in kept],
            alone_s_pairs=[[_round(pair.before, 9), _round(pair.after, 9)] for pair in kept],
            reference_s=_round(self._reference, 9),
            settle=self.settled,
            carveout_cost=_round(self.carveout_cost, 4),
            load_sms=partition.load_sms if partition is not None else None,
        )
        judged = [s for index in judge_pairs([found], [0] * len(kept)).judged if (s := slowdowns[index]) is not None]
        return replace(found, slowdown=round(median(judged), 4) if judged else None)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# --- a round's pairs, in step over its ranks (run_round's part beside compute) ----------------------

_TAG_PAIR = 15  # MPI tag of the round's agreement on when a pair's shared half starts (every GPU's load running)
_TAG_WINDOW = 16  # and on whether every GPU's shared window has ended (the transfers stop)
_TAG_RETAKE = 17  # and on whether a pair is taken again (the worst drift of its GPUs' alone windows)
_TAG_BESIDE = 14  # and of the exchange of what each GPU's load measured
# The steps between the ranks' agreements that a window is on: about this long, sized from the shared
# half's own steps (an agreement waits on MPI; at 2 ms a batch, taken from the steps alone, the posting
# rank spent 7-17% of the shared half outside a step on 2 x H100).
WINDOW_BATCH_SECONDS = 0.01

Agree = Callable[[bool, float], tuple[bool, int]]


class Stepping(Protocol):
    """A round's steps on this rank as the pairs take them (round._Steps)."""

    def sample(self, iterations: int, links: int) -> list[list[float]]: ...

    def shared(
        self, over: Callable[[], bool], agree: Agree, links: int, batch: int
    ) -> tuple[list[list[float]], float | None]: ...


@dataclass(frozen=True)
class InStep:
    """This rank's part of a round beside compute: MPI, the round's ranks, its samples, the steps a
    sample, the links this rank times, and whether its steps span its transfers (StepProtocol.spans_transfers:
    then its share of a shared half in steps is the pair's duty)."""

    comm: Any
    ranks: list[int]
    samples: int
    iterations: int
    links: int
    spans: bool


@dataclass(frozen=True)
class BesideDetails:
    """Beside compute, what a timed link's rank gathered: every GPU's record of its load, by rank, and
    the link's step times in each pair's alone half."""

    compute: dict[int, GpuFigure]
    alone_step_times: list[list[float]]


def pairs_in_a_row(
    pairs: Pairs, steps: Stepping, round_: InStep, step_seconds: float
) -> tuple[list[list[list[float]]], list[list[list[float]]]]:
    """Every pair's transfer alone first, on an idle GPU, then the load settled and the pairs' shared
    halves in a row, the load running on between them (its clocks never see an idle GPU). Returns the
    alone halves' and the shared halves' step times, [sample][link]; `step_seconds`: a step's, timed
    (what sizes the first batch of a shared half)."""
    batch = max(1, round(WINDOW_BATCH_SECONDS / step_seconds)) if step_seconds > 0 else 1
    alone = [steps.sample(round_.iterations, round_.links) for _ in range(round_.samples)]
    try:
        pairs.settle()  # the load's clocks, before the first pair
        shared = [take_pair(pairs, steps, round_, batch) for _ in alone]
    except BaseException:
        pairs.finish(quiet=True)  # the error on its way is the one to say
        raise
    pairs.finish()
    return alone, shared


def take_pair(pairs: Pairs, steps: Stepping, round_: InStep, batch: int) -> list[list[float]]:
    """One pair's shared half, taken again (at most RETAKES times) while the worst of its GPUs' alone
    windows drift more than DRIFT_LIMIT, then kept (marked where it still drifts): the load alone,
    then the steps back to back through the load's shared window (every rank's: the transfers stop
    when every GPU's window has ended), then the load alone again."""
    comm, ranks = round_.comm, round_.ranks

    def agree(over: bool, step_seconds: float) -> tuple[bool, int]:
        """Whether some GPU's window is still on, and the next batch's steps: the fewest any rank asks
        for (every rank runs the same steps: a step is collective)."""
        wanted = max(1, round(WINDOW_BATCH_SECONDS / step_seconds)) if step_seconds > 0 else 1
        on, fewest = agree_max(comm, ranks, (0.0 if over else 1.0, -float(wanted)), _TAG_WINDOW)
        return on > 0, max(1, int(-fewest))

    for retake in range(RETAKES + 1):
        pairs.begin()  # the load alone on the whole GPU, then on (where the shared half runs it)
        agree_max(comm, ranks, (0.0,), _TAG_PAIR)  # every rank's load runs
        pairs.open()
        shared, duty = steps.shared(pairs.over, agree, round_.links, batch)  # on an error, the caller stops the load
        drift = pairs.close(duty if round_.spans else None)  # None: the other end's duty is the pair's
        (worst,) = agree_max(comm, ranks, (abs(drift or 0.0),), _TAG_RETAKE)
        if not drifting(worst) or retake == RETAKES:
            pairs.keep(retake, drifting(worst))
            return shared
        pairs.discard()
    raise AssertionError("unreachable: the last take is kept")


def gathered(pairs: Pairs, round_: InStep, rank: int, alone: list[list[list[float]]]) -> list[BesideDetails]:
    """Each timed link's compute figures: this rank's GPU and the round's other ranks', and the link's
    alone halves (`alone`: [sample][link], from pairs_in_a_row)."""
    mine = pairs.summary()
    gpus = {rank: mine}
    for peer in sorted(set(round_.ranks) - {rank}):
        gpus[peer] = round_.comm.sendrecv(mine, dest=peer, sendtag=_TAG_BESIDE, source=peer, recvtag=_TAG_BESIDE)
    return [BesideDetails(gpus, [per_link[link] for per_link in alone]) for link in range(round_.links)]
