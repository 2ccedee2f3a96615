"""A transfer beside a model's compute (--beside): which load runs, and the pairs it is measured in.

A serving engine never moves a KV cache on an idle GPU: the next request's prefill (a matrix
product) or decode (a kernel streaming HBM) runs beside it. A round run beside compute times each
sample as a pair on the same buffers: the transfer alone (every pair's, first, on an idle GPU), then
the load alone on the whole GPU, both at once, and the load alone again. The model's cost is what it
loses: its shared window is K operations (K sized so the window lasts WINDOW_SECONDS alone), the
transfers run back to back until every GPU's window has ended, and the pair's slowdown is the
window's total operation time over K x the operation's time alone (a mean over the window, never a
median: a median never sees the operations a few transfers stalled). Operations are timed on the GPU
by CUDA events (wire/gpuload.py). Before the first pair the load runs alone until two windows in a
row agree within SETTLE_AGREE, the first of them after SETTLE_SECONDS of the load (past the moment its
power draw reaches the GPU's limit and the clocks are held down); after each shared half, alone
windows again until two in a row agree (a GEMM the transfers stalled runs faster for a
while after: its clocks rise under less power), the last of them also the next pair's window before.
Between pairs the load keeps running, so its clocks never see an idle GPU. A pair whose alone windows
before and after differ by more than DRIFT_LIMIT is marked (`drifting_pairs`) and still judged: the
load's swing is noise in both halves of a pair, which the row's interval carries (measure/slowdown.py),
so a retake buys nothing (RETAKES). The load alone is the mean of those two windows. Each pair records
its duty (the share of the shared half with a transfer in flight): a pair below DUTY_FLOOR is kept but
not judged. The slowdown is always against the model alone on the whole GPU, also where a carve-out
plans its GEMM for fewer SMs (whose own cost, the carved GEMM alone over the whole GPU's, is
`carveout_cost`).

Each rank of the round runs the load on its own GPU, in its own process (kernels of two processes
time-slice a GPU; the engine's transfer and its model share one), from a thread of its own.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError, TransportError
from ..stats import median
from ..units import format_size, is_digits, parse_size
from ..wire.gpuload import RING
from .besiderecord import GpuRecord, PairsSaid, Settle

# name: (gpuload kind, default size, what the size is, the rate's unit)
LOADS = {
    "gemm": (0, 8192, "a bf16 SIZE x SIZE x SIZE matrix product through cuBLAS, as prefill", "TFLOP/s"),
    "decode": (1, 1 << 30, "a kernel streaming SIZE bytes of HBM, as attention decode reads a KV cache", "GB/s"),
}
WHOLE, PART, CARVED = 0, 1, 2  # where the load's operations run (wire.gpuload's codes)
CARVEOUTS = (0, 4, 8, 16)  # carveout=all
MAX_CARVEOUT = 1024
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
DRIFT_LIMIT = 0.03  # a pair whose alone windows differ more is marked (and judged: slowdown.py widens the interval)
# Retakes of a drifting pair: none. On H200s at their 700 W limit 124-144 pairs a run were taken again
# (about 0.4 s each, 50-58 s of the beside benchmark) and half the pairs still drifted after them.
RETAKES = 0
DUTY_FLOOR = 0.9  # a pair whose shared half had a transfer in flight for less of it is not judged
STALLED_SECONDS = 60.0  # a load with no operation finished for this long has stopped (its thread failed)
# The library keeps the latest RING operations of a run; a run holds one window (alone or shared) after
# its first operations: a window is held to a fifth of it, the rest room for the polls' overshoot, so
# that a fast load (decode:1MiB, a few us an operation) keeps its whole window.
SEGMENT_OPERATIONS = RING // 5
_MAX_GEMM = 32768


@dataclass(frozen=True)
class Beside:
    """A compute load: `load` (LOADS) of `size`, its GEMM planned for the GPU's SMs less `carveout`."""

    load: str
    size: int
    carveout: int = 0

    @classmethod
    def parse(cls, text: str) -> Beside | None:
        """The first load of `text` (parse_all), or None for `none`."""
        found = cls.parse_all(text)
        return found[0] if found else None

    @classmethod
    def parse_all(cls, text: str) -> list[Beside]:
        """`gemm[:M][,carveout=N|all]`, `decode[:SIZE]` or `none` ([]): one load a carve-out
        (carveout=all: CARVEOUTS), each run as its own entries."""
        head, *options = text.strip().split(",")
        name, _, size = head.partition(":")
        if name == "none" and not size and not options:
            return []
        if name not in LOADS:
            raise ConfigError(f"unknown --beside {text!r}: choose none, gemm[:M][,carveout=N|all] or decode[:SIZE]")
        try:
            if size and not size.isascii():  # int() reads other scripts' digits: '٣٠٠' would be 300
                raise ValueError(size)
            value = LOADS[name][1] if not size else int(size) if name == "gemm" else parse_size(size)
        except ValueError:
            raise ConfigError(f"--beside {text}: {size!r} is not a size for {name}") from None
        load = cls(name, value).check()
        return [replace(load, carveout=n).check() for n in _carveouts(text, options)]

    def check(self) -> Beside:
        if self.load == "gemm" and not 256 <= self.size <= _MAX_GEMM:
            raise ConfigError(f"--beside gemm:M takes M from 256 to {_MAX_GEMM}, not {self.size}")
        if self.load == "decode" and not 1 << 20 <= self.size <= 1 << 36:
            raise ConfigError(f"--beside decode:SIZE takes 1MiB to 64GiB, not {self.size}")
        if self.carveout and self.load != "gemm":
            raise ConfigError("--beside decode: a carve-out plans a GEMM for fewer SMs, and decode has none")
        return self

    @property
    def label(self) -> str:
        name = f"gemm:{self.size}" if self.load == "gemm" else f"decode:{format_size(self.size)}"
        return f"{name},carveout={self.carveout}" if self.carveout else name

    @property
    def unit(self) -> str:
        return LOADS[self.load][3]

    @property
    def kind(self) -> int:
        return LOADS[self.load][0]

    def device_bytes(self) -> int:
        """GPU memory the load holds on each rank's GPU."""
        return 3 * 2 * self.size * self.size if self.load == "gemm" else self.size


def _carveouts(text: str, options: list[str]) -> tuple[int, ...]:
    """The carve-outs `--beside text` asks for (0: none), from its `key=value` options."""
    found: tuple[int, ...] = (0,)
    seen = set()
    for option in options:
        key, equals, value = option.strip().partition("=")
        if key != "carveout" or not equals or key in seen:
            raise ConfigError(f"--beside {text}: {option!r} is not carveout=N or carveout=all (given once)")
        seen.add(key)
        if value == "all":
            found = CARVEOUTS
            continue
        number = int(value) if is_digits(value) else -1
        if not 0 <= number <= MAX_CARVEOUT:
            raise ConfigError(f"--beside {text}: carveout takes 0 to {MAX_CARVEOUT} SMs or all, not {value!r}")
        found = (number,)
    return found


def posts_on_sms(protocol: Any) -> bool:
    """Whether `protocol`'s transfer runs a kernel on the GPU's SMs (a block list posted by the GPU):
    what a carve-out leaves SMs to. The copy engines and the CPU take none."""
    shape = getattr(protocol, "shape", None)
    return getattr(shape, "posting", None) in ("gpu", "auto") and bool(getattr(protocol, "device", False))


def besides_for(besides: list[Beside], protocol: Any) -> list[Beside | None]:
    """The loads a round moved by `protocol` runs beside: every carve-out asked for where its transfer
    runs on SMs, else only the first (a carve-out gives nothing to a transfer that takes no SMs);
    [None] without --beside."""
    if not besides:
        return [None]
    return list(besides) if posts_on_sms(protocol) else list(besides[:1])


def _between(seconds: list[float], number: int, first: int, last: int | None) -> list[float]:
    """Operations `first` up to `last` (None: to the end), numbered from the load's start, of the
    `seconds` whose first is operation `number`: what is kept of the window (its start may be gone)."""
    if last is not None and last <= number:
        return []
    return seconds[max(first - number, 0) : None if last is None else last - number]


def drifting(drift: float | None) -> bool:
    """Whether a pair's alone windows drifted past DRIFT_LIMIT (the pair is then marked)."""
    return drift is not None and abs(drift) > DRIFT_LIMIT


def largest_drift(drifts: list[float]) -> float | None:
    """The drift furthest from none, signed (None where there is none)."""
    return max(drifts, key=lambda drift: abs(float(drift))) if drifts else None


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
        self.settled: Settle = {}
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
        self.settled = {"settled": settled, "windows": tries, "agree": SETTLE_AGREE}
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

    def summary(self) -> GpuRecord:
        """What this rank's GPU did: the load's rate alone and beside, and each pair's figures."""
        unit, work, kept = self.beside.unit, self.load.work, self.kept
        slowdowns = [pair.slowdown for pair in kept]
        drifts = [pair.drift for pair in kept if pair.drift is not None]
        found: GpuRecord = {
            "load": self.beside.label,
            "unit": unit,
            "alone": round(rate(work, [p.alone for p in kept if p.alone], unit), 3),
            "beside": round(rate(work, [s for p in kept for s in p.window], unit), 3),
            "slowdown": None,  # below: the median of the pairs judge_pairs judges on this GPU alone
            "slowdown_pairs": [_round(s, 4) for s in slowdowns],
            "duty_pairs": [_round(pair.duty, 4) for pair in kept],
            "lost_s_pairs": [_round(pair.lost, 6) for pair in kept],
            "window_s_pairs": [round(sum(pair.window), 6) for pair in kept],
            "span_s_pairs": [round(pair.span, 6) for pair in kept],
            "alone_drift": _round(largest_drift(drifts), 4),
            "drifting_pairs": [index for index, pair in enumerate(kept) if pair.drifting],
            "retakes": self.retakes,
            "operations": [len(pair.window) for pair in kept],
            "after_windows_pairs": [pair.after_windows for pair in kept],
            "after_settled_pairs": [pair.after_settled for pair in kept],
            "alone_s_pairs": [[_round(pair.before, 9), _round(pair.after, 9)] for pair in kept],
            "reference_s": _round(self._reference, 9),
            "settle": self.settled,
            "carveout": self.beside.carveout,
            "carveout_cost": _round(self.carveout_cost, 4),
        }
        if self.load.partition is not None and self.partitioned:
            found["load_sms"] = self.load.partition.load_sms
        judged = [s for index in judge_pairs([found], [0] * len(kept)).judged if (s := slowdowns[index]) is not None]
        found["slowdown"] = round(median(judged), 4) if judged else None
        return found


def unjudged_words(beside: PairsSaid) -> str | None:
    """Why a figure beside compute (an entry's `beside`, or a record of its shape) has no slowdown, in
    words: its transfers in flight for too little of the window (the duty, below DUTY_FLOOR), or (in a
    file written before every drifting pair was judged, 2026-11-28) the load alone drifting past
    DRIFT_LIMIT in every pair; None where neither is on record."""
    duty, pairs, drifted = beside.get("duty"), beside.get("slowdown_pairs"), beside.get("drifting_pairs")
    if isinstance(duty, (int, float)) and math.isfinite(duty) and duty < DUTY_FLOOR:
        return f"in flight {duty:.0%} of the window"
    if isinstance(pairs, list) and pairs and isinstance(drifted, list) and len(drifted) >= len(pairs):
        return f"the model alone drifted past {DRIFT_LIMIT:.0%} in every pair"
    return None


def _judged(duty: float | None) -> bool:
    """A pair is judged unless its shared half had a transfer in flight for less than DUTY_FLOOR of it
    (None: this end could not tell, the other end's duty decides)."""
    return duty is None or duty >= DUTY_FLOOR


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def worse_pairs(gpus: list[GpuRecord]) -> list[float]:
    """The model's slowdown pair by pair, the worse of the GPUs (Pairs.summary each) that measured the
    pair, over the pairs judged (judge_pairs): a pair whose window held no whole operation on a GPU is
    None there, and is left out only where no GPU measured it."""
    found = judge_pairs(gpus, [0] * pairs_of(gpus))
    return [s for index in found.judged if (s := found.slowdowns[index]) is not None]


@dataclass
class Judged:
    """The pairs of a round's GPUs taken together, pair by pair (the worse GPU's figure of each)."""

    slowdowns: list[float | None] = field(default_factory=list)  # every pair's
    duties: list[float | None] = field(default_factory=list)  # every pair's (the higher GPU's that says)
    judged: list[int] = field(default_factory=list)  # the pairs judged: duty at least DUTY_FLOOR
    lost_ms_per_gib: list[float] = field(default_factory=list)  # every pair's where known


def judge_pairs(gpus: list[GpuRecord], moved: list[int]) -> Judged:
    """Pair by pair over the round's GPUs (Pairs.summary each; `moved`: the bytes each pair's shared
    half moved): the worse slowdown, the higher duty of the ends that say (a block list's initiator),
    whether it is judged (its duty at least DUTY_FLOOR; a pair whose alone windows drifted is judged too:
    the row's interval carries the load's swing, slowdown.py), and the model's time lost per GiB the
    window moved (the shared half's bytes prorated to the window's share of it)."""
    found = Judged()
    for index, nbytes in enumerate(moved):
        slowdowns = [s for gpu in gpus if (s := _at(gpu, "slowdown_pairs", index)) is not None]
        duties = [d for gpu in gpus if (d := _at(gpu, "duty_pairs", index)) is not None]
        found.slowdowns.append(max(slowdowns) if slowdowns else None)
        # The duty is the end's whose steps span its transfers (a block list's initiator; the other end
        # says None: its steps also span the initiator's arming of its copies, and it read 0.52-0.85 beside 0.83-0.93 on
        # the GPU path); where both ends say, the higher.
        found.duties.append(max(duties) if duties else None)
        # The time lost per GiB holds at any duty (a reader scales it to their own): every pair's.
        known = [cost for gpu in gpus if (cost := _per_gib(gpu, index, nbytes)) is not None]
        if known:
            found.lost_ms_per_gib.append(max(known))
        if slowdowns and _judged(found.duties[-1]):
            found.judged.append(index)
    return found


def pairs_of(gpus: list[GpuRecord]) -> int:
    """How many pairs the round's GPUs measured (the most any GPU's record lists)."""
    return max((len(_list(gpu.get("slowdown_pairs"))) for gpu in gpus), default=0)


def _list(values: object) -> list[object]:
    """A record's list as read back from a file: [] where it is missing or not a list."""
    return values if isinstance(values, list) else []


def _at(gpu: GpuRecord, key: str, index: int) -> float | None:
    """A GPU record's figure for pair `index` under `key`; None where the file has no number there."""
    values = _list(gpu.get(key))
    value = values[index] if index < len(values) else None
    return value if isinstance(value, (int, float)) else None


def _per_gib(gpu: GpuRecord, index: int, nbytes: int) -> float | None:
    """One GPU's model milliseconds lost per GiB moved in pair `index`'s window."""
    lost, window, span = (_at(gpu, key, index) for key in ("lost_s_pairs", "window_s_pairs", "span_s_pairs"))
    if lost is None or not window or not span or not nbytes:
        return None
    in_window = nbytes * min(1.0, window / span) / (1 << 30)
    return lost * 1e3 / in_window


_LOADS: dict[tuple[int, str, int], Any] = {}  # this process's loads, by (GPU, load, size): kept between rounds


def load_on_this_gpu(beside: Beside) -> Any:
    """This rank's load (wire.gpuload.ComputeLoad) on its current GPU, made on first use."""
    from ..hardware.gpu import import_cupy
    from ..wire.gpuload import ComputeLoad

    cupy = import_cupy()
    if cupy is None:
        raise ConfigError("--beside runs a compute load on each rank's GPU: CuPy is not installed")
    key = (int(cupy.cuda.runtime.getDevice()), beside.load, beside.size)  # a carve-out is a plan of the same load
    if key not in _LOADS:
        release_loads()  # one load a process: their buffers are large
        _LOADS[key] = ComputeLoad(key[0], beside.kind, beside.size)
    return _LOADS[key]


def release_loads() -> None:
    for load in _LOADS.values():
        load.release()
    _LOADS.clear()
