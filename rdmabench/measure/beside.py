"""A transfer beside a model's compute (--beside): which load runs, and the pairs it is measured in.

A serving engine never moves a KV cache on an idle GPU: the next request's prefill (a matrix
product) or decode (a kernel streaming HBM) runs beside it. A round run beside compute times each
sample as an interleaved pair on the same buffers: the transfer alone, the load alone on the whole
GPU (a short window), then both at once. So every figure has its alone half from the same moment,
the load's slowdown is taken against the model alone on the whole GPU (also where an SM partition
gives the load fewer SMs), and the spread of the pairs says how far one comparison can be trusted.

Each rank of the round runs the load on its own GPU, in its own process (kernels of two processes
time-slice a GPU; the engine's transfer and its model share one), from a thread of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, TransportError
from ..stats import median
from ..units import format_size, parse_size

# name: (gpuload kind, default size, what the size is, the rate's unit)
LOADS = {
    "gemm": (0, 8192, "a bf16 SIZE x SIZE x SIZE matrix product through cuBLAS, as prefill", "TFLOP/s"),
    "decode": (1, 1 << 30, "a kernel streaming SIZE bytes of HBM, as attention decode reads a KV cache", "GB/s"),
}
ALONE_SECONDS = 0.03  # the load alone, per pair: at least this long ...
ALONE_OPERATIONS = 8  # ... and this many operations, after ...
WARM_OPERATIONS = 3  # ... the first few, left out (the GPU's clocks settle)
STALLED_SECONDS = 60.0  # a load with no operation finished for this long has stopped (its thread failed)
_MAX_GEMM = 32768


@dataclass(frozen=True)
class Beside:
    """A compute load: `load` (LOADS) of `size`."""

    load: str
    size: int

    @classmethod
    def parse(cls, text: str) -> Beside | None:
        """`gemm`, `gemm:M`, `decode`, `decode:SIZE` or `none` (None)."""
        name, _, size = text.strip().partition(":")
        if name == "none" and not size:
            return None
        if name not in LOADS:
            raise ConfigError(f"unknown --beside {text!r}: choose none, {', '.join(f'{n}[:SIZE]' for n in LOADS)}")
        if not size:
            return cls(name, LOADS[name][1])
        try:
            value = int(size) if name == "gemm" else parse_size(size)
        except ValueError:
            raise ConfigError(f"--beside {text}: {size!r} is not a size for {name}") from None
        return cls(name, value).check()

    def check(self) -> Beside:
        if self.load == "gemm" and not 256 <= self.size <= _MAX_GEMM:
            raise ConfigError(f"--beside gemm:M takes M from 256 to {_MAX_GEMM}, not {self.size}")
        if self.load == "decode" and not 1 << 20 <= self.size <= 1 << 36:
            raise ConfigError(f"--beside decode:SIZE takes 1MiB to 64GiB, not {self.size}")
        return self

    @property
    def label(self) -> str:
        return f"gemm:{self.size}" if self.load == "gemm" else f"decode:{format_size(self.size)}"

    @property
    def unit(self) -> str:
        return LOADS[self.load][3]

    @property
    def kind(self) -> int:
        return LOADS[self.load][0]

    def device_bytes(self) -> int:
        """GPU memory the load holds on each rank's GPU."""
        return 3 * 2 * self.size * self.size if self.load == "gemm" else self.size


def _between(seconds: list[float], number: int, first: int, last: int | None) -> list[float]:
    """Operations `first` up to `last` (None: to the end), numbered from the load's start, of the
    `seconds` whose first is operation `number`: what is kept of the window (its start may be gone)."""
    if last is not None and last <= number:
        return []
    return seconds[max(first - number, 0) : None if last is None else last - number]


def _size(drift: float) -> float:
    return abs(drift)


def rate(work: float, seconds: list[float], unit: str) -> float:
    """The load's rate from its operations' median time: TFLOP/s (work in flops) or GB/s (bytes)."""
    scale = 1e12 if unit == "TFLOP/s" else 1e9
    return work / median(seconds) / scale if seconds else 0.0


class Pairs:
    """One rank's load through a round's sampled pairs: each pair's operation times alone and beside.

    The load's alone half brackets the shared one: alone on the whole GPU before the transfer's steps
    and again after them, the load running on through. A GPU's clocks settle under a matrix product's
    power draw over tens of milliseconds (measured on H200: the window before read 17-24% faster than
    the one after, while a memory-bound load drifted 0.1-0.3%), so the alone figure is the window
    after, taken in the same settled state as the shared half; how far the window before differed is
    kept (`alone_drift`), and only where there is no window after does the one before stand in.
    The first operations of each window are left out, and the operation running when the steps start
    or end is counted in neither half. Beside an SM partition the load restarts on the partition's
    SMs for the shared half (a green context's stream cannot take the whole GPU)."""

    def __init__(self, beside: Beside, load: Any, partitioned: bool):
        self.beside = beside
        self.load = load  # wire.gpuload.ComputeLoad
        self.partitioned = partitioned
        self.alone: list[float | None] = []  # each pair's alone median (the window after the shared half)
        self.drifts: list[float] = []  # each pair's after / before - 1
        self.together: list[list[float]] = []
        self._marks: tuple[int, int] = (0, 0)
        self._before: list[float] = []

    def _wait(self, operations: int) -> None:
        """Until the load has finished `operations` (and ALONE_SECONDS passed); a load that stops
        making progress (its thread ended on an error) is one line, never a hang."""
        began = time.perf_counter()
        while self.load.done() < operations or time.perf_counter() - began < ALONE_SECONDS:
            if self.load.failed():  # its thread ended on a CUDA error: stop() raises it, with the reason
                self.load.stop()
            if time.perf_counter() - began > STALLED_SECONDS:
                raise TransportError(
                    f"the compute load ({self.beside.label}) finished {self.load.done()} of {operations} operations "
                    f"in {STALLED_SECONDS:g} s: it stopped making progress"
                )
            time.sleep(0.001)

    def _stopped(self) -> tuple[list[float], int]:
        """Stop the load: its operations' seconds and the number of the first of them (the library keeps
        the latest RING operations: a long run's first ones are gone)."""
        seconds = self.load.stop().seconds
        return seconds, self.load.done() - len(seconds)

    def _window(self, partitioned: bool) -> list[float]:
        """The load alone (or on its partition) for one window, stopped: its operations' seconds."""
        self.load.start(partitioned)
        self._wait(WARM_OPERATIONS + ALONE_OPERATIONS)
        return _between(*self._stopped(), WARM_OPERATIONS, None)

    def start(self) -> None:
        """Before the pair's steps: the load alone, then running on beside the steps."""
        if self.partitioned:
            self._before = self._window(False)
            self.load.start(True)
            self._wait(WARM_OPERATIONS)
            self._marks = (WARM_OPERATIONS, self.load.done())
            return
        self.load.start(False)
        self._wait(WARM_OPERATIONS + ALONE_OPERATIONS)
        self._marks = (WARM_OPERATIONS, self.load.done())

    def stop(self) -> None:
        """After the pair's steps: the operations that ran wholly beside them, and the load alone again."""
        first, mark = self._marks
        last = self.load.done()
        if self.partitioned:
            self.together.append(_between(*self._stopped(), mark + 1, last))
            before, after = self._before, self._window(False)
        else:
            self._wait(last + 1 + WARM_OPERATIONS + ALONE_OPERATIONS)
            seconds, number = self._stopped()
            before, after = (
                _between(seconds, number, first, mark),
                _between(seconds, number, last + 1 + WARM_OPERATIONS, None),
            )
            self.together.append(_between(seconds, number, mark + 1, last))
        self.alone.append(median(after) if after else median(before) if before else None)
        if before and after:
            self.drifts.append(median(after) / median(before) - 1)

    def summary(self) -> dict[str, Any]:
        """What this rank's GPU did: the load's rate alone and beside, and each pair's slowdown."""
        unit, work = self.beside.unit, self.load.work
        # Pair by pair, in order (None where a half had no whole operation), so that the pairs of the
        # round's GPUs line up when the worse of them is taken (entry.beside_record).
        lined = [
            (alone, median(together)) if alone and together else None
            for alone, together in zip(self.alone, self.together, strict=True)
        ]
        pairs = [pair for pair in lined if pair is not None]
        each = [None if pair is None else pair[1] / pair[0] for pair in lined]
        slowdowns = [together / alone for alone, together in pairs]
        drift: float | None = max(self.drifts, key=_size) if self.drifts else None
        found: dict[str, Any] = {
            "load": self.beside.label,
            "unit": unit,
            "alone": round(rate(work, [alone for alone, _ in pairs], unit), 3),
            "beside": round(rate(work, [together for _, together in pairs], unit), 3),
            "slowdown": round(median(slowdowns), 4) if slowdowns else None,
            "slowdown_pairs": [None if s is None else round(s, 4) for s in each],
            "alone_drift": round(drift, 4) if drift is not None else None,
            "operations": [len(pair) for pair in self.together],
        }
        if self.load.partition is not None and self.partitioned:
            found["load_sms"] = self.load.partition.load_sms
        return found


def worse_pairs(gpus: list[dict[str, Any]]) -> list[float]:
    """The model's slowdown pair by pair, the worse of the GPUs (Pairs.summary each) that measured the
    pair: a pair whose halves held no whole operation on a GPU is None there, and is left out only where
    no GPU measured it."""
    lined = zip(*(gpu["slowdown_pairs"] for gpu in gpus), strict=True)
    return [max(known) for known in ([s for s in one if s is not None] for one in lined) if known]


_LOADS: dict[tuple[int, str], Any] = {}  # this process's loads, by (GPU, load): made once, kept between rounds


def load_on_this_gpu(beside: Beside) -> Any:
    """This rank's load (wire.gpuload.ComputeLoad) on its current GPU, made on first use."""
    from ..hardware.gpu import import_cupy
    from ..wire.gpuload import ComputeLoad

    cupy = import_cupy()
    if cupy is None:
        raise ConfigError("--beside runs a compute load on each rank's GPU: CuPy is not installed")
    key = (int(cupy.cuda.runtime.getDevice()), beside.label)
    if key not in _LOADS:
        release_loads()  # one load a process: their buffers are large
        _LOADS[key] = ComputeLoad(key[0], beside.kind, beside.size)
    return _LOADS[key]


def release_loads() -> None:
    for load in _LOADS.values():
        load.release()
    _LOADS.clear()
