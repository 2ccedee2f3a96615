"""The model's cost beside compute, measured (measure/pairs.py's Pairs and pairs in a row, the engine's
shared half in measure/steps.py): the work lost over the whole window, the duty, settling and drift, the pairs judged,
and what the load library keeps. Stand-in loads of known speed (tests/conftest.py's StandInLoad) and
the engine's own steps on a clock of the test's: no GPU."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rdmabench.errors import TransportError
from rdmabench.measure import pairs as taking
from rdmabench.measure.beside import Beside
from rdmabench.measure.besiderecord import GpuFigure
from rdmabench.measure.pairs import InStep, Pairs

from .conftest import StandInLoad

SETTLE_SECONDS = taking.SETTLE_SECONDS


@pytest.fixture(autouse=True)
def _no_power_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in load has no power limit to reach: the settle's wait for one would only cost the test
    time (the test of that wait gives it back)."""
    monkeypatch.setattr(taking, "SETTLE_SECONDS", 0.0)


def _one_pair(pairs: Pairs, load: StandInLoad, busy_share: float) -> None:
    """A pair on a stand-in load: its operations take `beside` seconds (the transfer in flight) for
    the first `busy_share` of the shared window, then `alone` again."""
    pairs.begin()
    pairs.open()
    busy = round(pairs.operations * busy_share)
    load.busy = True
    while load.done() < pairs._open.first + busy:
        pass
    load.busy = False
    while not pairs.over():
        pass
    pairs.close(1.0)
    pairs.keep(0, False)


def _row_of_pairs(load: StandInLoad, count: int) -> Pairs:
    """A row: the load settled, `count` pairs each with a transfer in flight the whole window, the load
    stopped."""
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    for _ in range(count):
        _one_pair(pairs, load, 1.0)
    pairs.finish()
    return pairs


@pytest.mark.parametrize(("busy_share", "expected"), [(1.0, 2.0), (0.5, 1.5), (0.25, 1.25)])
def test_the_slowdown_is_the_work_lost_over_the_whole_window(busy_share: float, expected: float) -> None:
    """The load's operations take twice as long while a transfer is in flight, for a known share of
    the shared window: the slowdown reads that share (a median over the window would read 1 or 2)."""
    load = StandInLoad(step=1, ring=1 << 16)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    assert (
        pairs.settled is not None and pairs.settled.settled and pairs.settled.windows == 2 and pairs.operations == 80
    )  # 80 ms at 1 ms
    for _ in range(3):
        _one_pair(pairs, load, busy_share)
    found = pairs.summary()
    assert found.slowdown_pairs == [expected] * 3 and found.slowdown == expected
    assert found.operations == [80] * 3 and found.duty_pairs == [1.0] * 3
    assert found.lost_s_pairs == [pytest.approx(80 * busy_share * 1e-3)] * 3  # 1 ms lost a busy operation
    assert found.alone_drift == 0.0 and found.drifting_pairs == [] and found.carveout_cost is None


@pytest.mark.parametrize("ring", [1 << 16, 1000])
def test_what_is_kept_of_the_window_stands_past_the_ring(ring: int) -> None:
    """The library keeps only the latest `ring` operations of a run, and a run holds one window: where
    the ring keeps only the shared window's last operations, they still give the slowdown, and the
    windows alone (runs of their own) still give the drift."""
    load = StandInLoad(step=1, ring=ring)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.operations = 2000  # a window longer than the ring
    for _ in range(2):
        _one_pair(pairs, load, 1.0)
    found = pairs.summary()
    assert found.slowdown_pairs == [2.0, 2.0] and found.alone_drift == 0.0
    assert [count < 2000 for count in found.operations] == [ring == 1000] * 2


class _RecoveringLoad(StandInLoad):
    """Its first alone run after a run the transfers stalled goes 10% faster (its clocks up under less
    power, as a GEMM's do), then back to its own speed."""

    def __init__(self) -> None:
        super().__init__(step=1, ring=1 << 16)
        self.fast_next = False

    def start(self, where: int = 0) -> None:
        super().start(where)
        self.times[0] = 0.9e-3 if self.fast_next else 1e-3
        self.fast_next = False

    def stop(self) -> Any:
        run = super().stop()
        self.fast_next = any(seconds > 1.5e-3 for seconds in run.seconds)
        return run


def test_the_window_after_waits_until_the_load_has_settled_and_the_load_runs_on_between_pairs() -> None:
    """Right after a stalled window the load runs 10% fast: the pair takes alone windows until two in
    a row agree (3), so the window after reads the load's own speed and the pair does not drift; the
    load runs on between pairs (its clocks never see an idle GPU) until finish()."""
    load = _RecoveringLoad()
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    assert load.running
    for _ in range(2):
        _one_pair(pairs, load, 1.0)
        assert load.running
    pairs.finish()
    assert not load.running
    found = pairs.summary()
    assert found.after_windows_pairs == [3, 3] and found.alone_drift == 0.0
    assert found.slowdown_pairs == [2.0, 2.0] and found.drifting_pairs == []


class _SlowlyRecoveringLoad(StandInLoad):
    """After a run the transfers stalled, its alone runs go 10% faster, then 1% less fast each run: two
    windows in a row agree within 2% long before it is back to its own speed."""

    def __init__(self) -> None:
        super().__init__(step=1, ring=1 << 16)
        self.fast = 0.0

    def start(self, where: int = 0) -> None:
        super().start(where)
        self.times[0] = 1e-3 * (1 - self.fast)
        self.fast = max(self.fast - 0.01, 0.0)

    def stop(self) -> Any:
        run = super().stop()
        if any(seconds > 1.5e-3 for seconds in run.seconds):
            self.fast = 0.10
        return run


def test_a_load_still_recovering_is_held_to_the_rows_settled_reference() -> None:
    """The window after agrees with the one before it while both are still fast (the load recovering
    from the stalls), and each pair's window before is the last pair's after: against each other they
    drift by none. Held to the reference settled before the first pair, every pair drifts about -9%."""
    pairs = _row_of_pairs(_SlowlyRecoveringLoad(), 3)
    assert [pair.after_windows for pair in pairs.kept] == [2, 2, 2] and all(p.after_settled for p in pairs.kept)
    assert pairs.kept[1].after == pytest.approx(pairs.kept[1].before)  # the chained windows agree ...
    assert all(pair.drift is not None and pair.drift < -0.08 for pair in pairs.kept)  # ... the reference does not
    found = pairs.summary()
    assert found.reference_s == pytest.approx(1e-3) and found.alone_s_pairs[0][0] == pytest.approx(1e-3)


def test_pairs_in_a_row_start_the_load_once_a_window_and_never_warm_it_again() -> None:
    """Chained pairs: a start for the shared window, one per window after, one to run on between pairs;
    no window before nor warm-up of its own (the last pair's window after is this one's before)."""
    load = StandInLoad(step=1, ring=1 << 16)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    for _ in range(3):
        began = load.starts
        _one_pair(pairs, load, 1.0)
        assert load.starts - began == 1 + 2 + 1
    assert [pair.before for pair in pairs.kept[1:]] == [pair.after for pair in pairs.kept[:-1]]


def test_a_window_after_that_never_settles_stops_at_after_tries() -> None:
    """A load whose every alone window differs from the last by 5% is given AFTER_TRIES windows after
    the shared half, no more; the last is the window after, the pair says none agreed, and its drift
    (which the engine would retake and mark) is on record."""
    from rdmabench.measure.pairs import AFTER_TRIES

    load = StandInLoad(step=1, ring=1 << 16)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    plain_start = load.start

    def slower_each_run(where: int = 0) -> None:
        plain_start(where)
        if not load.busy:
            load.times[0] *= 1.05

    load.start = slower_each_run  # type: ignore[method-assign]
    _one_pair(pairs, load, 1.0)
    found = pairs.summary()
    assert AFTER_TRIES == 4 and found.after_windows_pairs == [AFTER_TRIES]
    assert found.after_settled_pairs == [False]
    assert found.alone_drift is not None and found.alone_drift > 0.2


def test_a_carve_out_costs_its_own_share_and_the_slowdown_stays_against_the_whole_gpu() -> None:
    """The carved GEMM alone runs 1.1x the whole GPU's: carveout_cost reads 1.1; the shared window runs
    the carved plan, and its slowdown is taken against the whole GPU alone (1.1 x 2 = 2.2)."""
    load = StandInLoad(step=1, ring=1 << 16, carved=1.1)
    pairs = Pairs(Beside("gemm", 1024, carveout=8), load, partitioned=False)
    pairs.settle()
    assert load.carveout == 8 and pairs.carveout_cost == pytest.approx(1.1)
    _one_pair(pairs, load, 1.0)
    found = pairs.summary()
    assert found.load.carveout == 8 and found.carveout_cost == 1.1 and found.slowdown_pairs == [2.2]


class _End:
    """What _Steps reads of a round's end: the protocol's fill and check, the planted stall, the ranks."""

    def __init__(self, clock: list[float]):
        self.clock, self.stall_at, self.checked = clock, None, list[int]()
        self.spec = self
        self.protocol = self
        self.ranks = [0]
        self.where, self.rank, self.links = "here", 0, [self]  # what a slow step names (measure/slow.py)
        self.src = 0
        self.spans = True  # whether this end's steps span its transfers (the initiator's do)
        self.idle_seconds = 0.0  # of each step's wall, spent ahead with no transfer in flight

    def spans_transfers(self, end: object) -> bool:
        return self.spans

    def fill(self, end: object, index: int) -> None:
        self.clock[0] += 5.0  # untimed, before the shared half's clock starts

    def check(self, end: object, index: int) -> None:
        self.checked.append(index)

    def ahead(self, end: object, index: int) -> None:
        self.aheads = getattr(self, "aheads", 0) + 1

    def streak(self, end: object, on: bool) -> None:
        self.streaks = [*getattr(self, "streaks", []), (on, len(self.checked))]

    def idle(self, end: object) -> float:
        return self.idle_seconds


def test_the_duty_is_the_shared_halfs_time_in_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock of the test's own: each step takes 3 s and each agreement between batches 1 s, so a
    transfer is in flight for 3/4 of the shared half; with 4 steps a batch, 12/13. The payload is
    written once and checked once, after the last step."""
    import functools
    import types

    from rdmabench.measure import steps as engine
    from rdmabench.measure.steps import Steps

    clock = [0.0]
    monkeypatch.setattr(engine, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], process_time=lambda: 0.0))
    for batch, duty in ((1, 0.75), (4, 12 / 13)):
        end = _End(clock)

        def step(end: object, index: int) -> list[float]:
            clock[0] += 3.0
            return [3.0]

        seen: list[float] = []

        def agree(over: bool, step_seconds: float, batch: int = batch, seen: list[float] = seen) -> tuple[bool, int]:
            seen.append(step_seconds)  # each batch's seconds a step, the agreement's own left out
            clock[0] += 1.0
            return not over, batch

        rounds = iter([False, False, True])
        steps = Steps(end, step)  # type: ignore[arg-type]
        per_link, found = steps.shared(functools.partial(next, rounds), agree, 1, batch)
        assert found == pytest.approx(duty) and per_link == [[3.0] * 3 * batch] and end.checked == [0]
        assert seen == [3.0, 3.0, 3.0]
        # ce-armed's arming before every step but the first (the fill did it), outside the steps' time
        assert end.aheads == 3 * batch - 1
        assert end.streaks == [(True, 0), (False, 0)]  # a streak around the steps, ended before the check


def test_the_duty_leaves_out_what_a_step_spent_ahead_with_nothing_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step of 4 s whose protocol says 3 s of it were spent ahead with no transfer in flight (ce-armed
    arming the next step for longer than this one's copies took) adds 1 s to the duty's time in flight."""
    import functools
    import types

    from rdmabench.measure import steps as engine
    from rdmabench.measure.steps import Steps

    clock = [0.0]
    monkeypatch.setattr(engine, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], process_time=lambda: 0.0))
    for idle, duty in ((3.0, 3 / 15), (0.0, 12 / 15)):

        def step(end: object, index: int) -> list[float]:
            clock[0] += 4.0
            return [1.0]

        def agree(over: bool, step_seconds: float) -> tuple[bool, int]:
            clock[0] += 1.0
            return not over, 1

        end = _End(clock)
        end.idle_seconds = idle
        steps = Steps(end, step)  # type: ignore[arg-type]
        _, found = steps.shared(functools.partial(next, iter([False, False, True])), agree, 1, 1)
        assert found == pytest.approx(duty)


def test_the_shared_half_runs_the_batch_the_ranks_agree_on() -> None:
    """Each batch's steps are the fewest any rank asked for from its last batch's seconds a step
    (WINDOW_BATCH_SECONDS a batch), so every rank runs the same steps between agreements."""
    from rdmabench.measure.steps import Steps

    batches: list[int] = []
    end = _End([0.0])
    answers = iter([(True, 7), (True, 2), (False, 5)])

    def agree(over: bool, step_seconds: float) -> tuple[bool, int]:
        return next(answers)

    def step(end: object, index: int) -> list[float]:
        batches.append(index)
        return [1e-3]

    per_link, _ = Steps(end, step).shared(lambda: False, agree, 1, 3)  # type: ignore[arg-type]
    assert len(per_link[0]) == 3 + 7 + 2


class _Comm:
    """A round of one rank: agree_max answers its own values (no message is sent)."""

    def Get_rank(self) -> int:
        return 0


def _gpu(fields: dict[str, Any]) -> GpuFigure:
    """A GPU's record of a gemm:1024 load, as a results file would hold `fields` (read back)."""
    found = GpuFigure.from_json({"load": "gemm:1024", **fields})
    assert found is not None
    return found


def _in_step(end: _End, samples: int = 1) -> InStep:
    """A round of one rank (`end`'s), 2 steps a sample, one link."""
    return InStep(_Comm(), [0], samples, 2, 1, end.spans)


class _DriftingLoad(StandInLoad):
    """After each shared window its operations alone take `drift` longer (first `takes` windows only)."""

    def __init__(self, drift: float, takes: int):
        super().__init__(step=1, ring=1 << 16)
        self.drift, self.takes = drift, takes

    def set_busy(self, busy: bool) -> None:
        if self.running and self.busy and not busy and self.takes > 0:
            self.takes -= 1
            self.times[0] *= 1 + self.drift
        self.busy = busy


@pytest.mark.parametrize(("takes", "kept_after", "drifting"), [(1, 1, False), (99, 2, True)])
def test_a_drifting_pair_is_taken_again_at_most_retakes_times(takes: int, kept_after: int, drifting: bool) -> None:
    """Alone windows 5% apart: the pair is taken again; it is kept once they agree, or after RETAKES
    more takes, marked as drifting (never silently)."""
    from rdmabench.measure.pairs import RETAKES
    from rdmabench.measure.steps import Steps

    load = _DriftingLoad(0.05, takes)
    end = _End([0.0])
    end.fill = lambda _end, _index: load.set_busy(True)  # type: ignore[method-assign]
    end.check = lambda _end, _index: load.set_busy(False)  # type: ignore[method-assign]
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    steps = Steps(end, lambda _end, _index: [1e-3])  # type: ignore[arg-type]
    taking.take_pair(pairs, steps, _in_step(end), 1)  # type: ignore[arg-type]
    assert RETAKES == 2 and pairs.retakes == kept_after and len(pairs.kept) == 1
    found = pairs.summary()
    assert found.retakes == kept_after and found.drifting_pairs == ([0] if drifting else [])
    assert found.alone_drift == (0.05 if drifting else 0.0)


@pytest.mark.parametrize("fails", [None, "step", "agreement"])
def test_every_transfer_alone_is_taken_first_on_an_idle_gpu_and_the_load_stops_after_the_pairs(
    fails: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pair's transfer alone is taken before the load starts (the load then runs on through the
    pairs, never stopping for a transfer alone); after the last pair, or a step that failed, the load
    has stopped, so the next round's transfers alone see an idle GPU."""

    from rdmabench.measure.steps import Steps

    load = _DriftingLoad(0.0, 0)
    end = _End([0.0])
    seen: list[tuple[bool, bool]] = []  # (in the shared half, the load running) at each step

    def step(_end: object, _index: int) -> list[float]:
        seen.append((load.busy, load.running))
        if fails == "step" and load.busy:
            raise TransportError("a step failed")
        return [1e-3]

    if fails == "agreement":  # the ranks' agreement on the drift, after the pair closed: the load runs on then
        plain = taking.agree_max

        def agree_max(comm: Any, ranks: Any, values: Any, tag: int) -> Any:
            if tag == taking._TAG_RETAKE:
                raise TransportError("a step failed")
            return plain(comm, ranks, values, tag)

        monkeypatch.setattr(taking, "agree_max", agree_max)

    end.streak = lambda _end, on: load.set_busy(on)  # type: ignore[method-assign]  # the shared half's steps
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    steps = Steps(end, step)  # type: ignore[arg-type]
    if fails is not None:
        with pytest.raises(TransportError, match="a step failed"):
            taking.pairs_in_a_row(pairs, steps, _in_step(end, samples=3), 1.0)
    else:
        alone, found = taking.pairs_in_a_row(pairs, steps, _in_step(end, samples=3), 1.0)
        assert len(found) == 3 and len(pairs.kept) == 3 and alone == [[[1e-3] * 2]] * 3
    assert seen[:6] == [(False, False)] * 6  # 3 samples x 2 steps alone, the load not started
    assert all(running for _, running in seen[6:]) and len(seen) > 6
    assert not load.running


@pytest.mark.parametrize("spans", [True, False])
def test_only_an_end_whose_steps_span_its_transfers_says_the_duty(spans: bool) -> None:
    """The end that does not initiate a block list waits in its step while the initiator arms
    (ce-armed): its share of the shared half is not the duty, and it says none."""
    from rdmabench.measure.steps import Steps

    load = _DriftingLoad(0.0, 0)
    end = _End([0.0])
    end.spans = spans
    end.fill = lambda _end, _index: load.set_busy(True)  # type: ignore[method-assign]
    end.check = lambda _end, _index: load.set_busy(False)  # type: ignore[method-assign]
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    steps = Steps(end, lambda _end, _index: [1e-3])  # type: ignore[arg-type]
    taking.take_pair(pairs, steps, _in_step(end), 1)  # type: ignore[arg-type]
    assert (pairs.kept[0].duty is None) == (not spans)


def test_a_pair_below_the_duty_floor_is_kept_but_not_judged() -> None:
    """Pair by pair over two GPUs: the worse slowdown, the higher duty (a transfer is in flight while
    either end is in a step: the posting end's share); a pair below 0.9 is left out of the judged
    figures; the model's time lost per GiB is prorated to the window's share of the half's bytes."""
    from rdmabench.measure.judging import judge_pairs, worse_pairs

    gpus = [
        _gpu({"slowdown_pairs": [1.5, 3.0, None], "duty_pairs": [0.95, 0.5, 0.99], "lost_s_pairs": [0.04, 0.2, None],
              "window_s_pairs": [0.12, 0.24, 0.1], "span_s_pairs": [0.15, 0.3, 0.1]}),
        _gpu({"slowdown_pairs": [1.2, 2.0, 1.1], "duty_pairs": [0.93, 0.6, None], "lost_s_pairs": [0.02, 0.1, 0.01],
              "window_s_pairs": [0.1, 0.2, 0.1], "span_s_pairs": [0.1, 0.2, 0.1]}),
    ]  # fmt: skip
    found = judge_pairs(gpus, [1 << 30, 1 << 30, 1 << 29])
    assert found.slowdowns == [1.5, 3.0, 1.1] and found.duties == [0.95, 0.6, 0.99] and found.judged == [0, 2]
    # pair 0: GPU 0 lost 40 ms over 0.8 GiB in its window (50 ms/GiB), GPU 1 20 ms over 1 GiB: the worse;
    # the time lost per GiB is every pair's, judged or not (pair 1: 200 ms over 0.8 GiB)
    assert found.lost_ms_per_gib == [pytest.approx(50.0), pytest.approx(250.0), pytest.approx(20.0)]
    drifting = [replace(gpus[0], drifting_pairs=[2]), gpus[1]]  # a pair still drifting after its retakes
    assert judge_pairs(drifting, [1 << 30, 1 << 30, 1 << 29]).judged == [0]
    assert worse_pairs(gpus) == [1.5, 1.1]


def test_a_load_that_failed_says_why_at_once_not_after_the_stall_limit() -> None:
    """The load's thread ended on a CUDA error: the pair's next wait raises the library's own reason
    right away (the stall limit, a minute, is for a load that stops without one)."""
    import time

    from rdmabench.measure.pairs import STALLED_SECONDS

    load = StandInLoad(step=1, ring=100)
    load.error = "waiting for a load operation: an illegal memory access was encountered"
    began = time.perf_counter()
    with pytest.raises(TransportError, match="illegal memory access"):
        Pairs(Beside("gemm", 1024), load, partitioned=False).begin()
    assert time.perf_counter() - began < STALLED_SECONDS / 10


def test_the_worse_gpu_is_taken_pair_by_pair() -> None:
    """Each pair's slowdown is the worse of the GPUs that measured it; a pair no GPU measured is left out."""
    from rdmabench.measure.judging import worse_pairs

    gpus = [_gpu({"slowdown_pairs": [1.1, None, None, 0.9]}), _gpu({"slowdown_pairs": [1.0, 1.2, None, 1.3]})]
    assert worse_pairs(gpus) == [1.1, 1.2, 1.3]


@pytest.mark.parametrize(("drift", "expected"), [(None, False), (0.03, False), (-0.031, True), (0.2, True)])
def test_a_drift_past_the_limit_either_way_marks_the_pair(drift: float | None, expected: bool) -> None:
    """What rdmabench's pairs and the NIXL anchor's both mark as drifting (and leave unjudged)."""
    from rdmabench.measure.judging import DRIFT_LIMIT, drifting

    assert DRIFT_LIMIT == 0.03 and drifting(drift) is expected


def test_a_fast_load_keeps_its_whole_pair_in_what_the_library_keeps() -> None:
    """A load of a few microseconds an operation (decode:1MiB) finishes more operations in a window
    than the library keeps (RING) unless the window is held to a fifth of it: each run holds one window
    and its first operations, so the shared window keeps every one of its operations and the windows
    alone theirs."""
    from rdmabench.measure.pairs import RING, SEGMENT_OPERATIONS

    load = StandInLoad(step=2000, ring=RING, alone=4e-6, beside=8e-6)  # 2,000 operations a poll
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    assert pairs.operations == SEGMENT_OPERATIONS
    _one_pair(pairs, load, 1.0)
    pairs.finish()
    found = pairs.summary()
    assert found.slowdown_pairs == [2.0] and found.alone_drift == 0.0
    assert found.operations == [SEGMENT_OPERATIONS]  # the whole shared window, none of it lost


@pytest.mark.parametrize("operation", ["put", "get"])
def test_only_the_active_end_of_a_one_sided_round_says_the_duty(operation: str) -> None:
    """The end that owns the memory waits in its step from READY to DONE, across the active end's gaps
    between steps: a put's sender and a get's receiver say the duty, the other end does not."""
    from types import SimpleNamespace

    from rdmabench.measure.onesided import OneSidedProtocol
    from rdmabench.wire.native import RMA_GET, RMA_PUT

    protocol = OneSidedProtocol(RMA_PUT if operation == "put" else RMA_GET)
    sender, receiver = SimpleNamespace(targets=["link"], sources=[]), SimpleNamespace(targets=[], sources=["link"])
    said = [protocol.spans_transfers(end) for end in (sender, receiver)]  # type: ignore[arg-type]
    assert said == ([True, False] if operation == "put" else [False, True])


class _PowerLimitedLoad(StandInLoad):
    """As a GEMM from an idle GPU (whose power reached the H200's limit after 0.6-0.8 s; sooner here,
    the test's time): its own speed for its first 0.25 s of running, then 20% slower for 0.2 s as the
    GPU's power limit bites, then 4% slower for good."""

    def __init__(self) -> None:
        super().__init__(step=1, ring=1 << 16)
        self.first_start: float | None = None

    def start(self, where: int = 0) -> None:
        import time

        super().start(where)
        self.first_start = self.first_start or time.perf_counter()

    def done(self) -> int:
        import time

        ran = time.perf_counter() - (self.first_start or time.perf_counter())
        self.times[0] = 1e-3 * (1.0 if ran < 0.25 else 1.2 if ran < 0.45 else 1.04)
        return super().done()


def test_the_reference_is_settled_past_the_power_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The load settles for SETTLE_SECONDS before its windows: the row's reference is the load under
    its power limit, which every later window reads, so no pair drifts from it. Settled in the load's
    first fraction of a second (as before), the reference was 4% fast and every pair drifted past 3%."""
    monkeypatch.setattr(taking, "SETTLE_SECONDS", SETTLE_SECONDS)
    assert SETTLE_SECONDS >= 1.0  # past the limit's onset and its dip (0.6-1.0 s on H200)
    pairs = _row_of_pairs(_PowerLimitedLoad(), 3)
    found = pairs.summary()
    assert found.reference_s == pytest.approx(1.04e-3)
    assert all(pair.drift is not None and abs(pair.drift) < 0.001 for pair in pairs.kept)
    assert found.slowdown_pairs == [pytest.approx(2e-3 / 1.04e-3, rel=1e-3)] * 3
