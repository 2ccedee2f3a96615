"""A transfer beside a model's compute (--beside): which loads there are, as records, and the option
resolved once into what a run asks for.

A serving engine never moves a KV cache on an idle GPU: the next request's prefill (a matrix
product) or decode (a kernel streaming HBM) runs beside it. Each load is a record (`Load`: its
library code, default size, words, the rate's unit, its sizes, whether a carve-out plans it for fewer
SMs). `--beside` is read once (`asked`, by the run's configuration and by `anchor --against nixl`)
into a `BesideLoads`: the load, its size and every carve-out asked for; a round runs beside one of
them, a `Beside` (the load at one carve-out), and an entry's record names it by its `label`, read
back by `from_label`. How a load is measured beside the transfers, pair by pair, is measure/pairs.py;
how the pairs are judged, measure/judging.py; the records results files hold, measure/besiderecord.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..units import format_size, is_digits, parse_size

WHOLE, PART, CARVED = 0, 1, 2  # where the load's operations run (wire.gpuload's codes)
CARVEOUTS = (0, 4, 8, 16)  # carveout=all
MAX_CARVEOUT = 1024


@dataclass(frozen=True)
class Load:
    """One compute load: its name (--beside's word), wire.gpuload's code for it, its default size, what
    the size is, the rate's unit, the sizes it takes, and whether a carve-out plans it for fewer SMs."""

    name: str
    code: int
    default: int
    meaning: str
    unit: str
    low: int
    high: int
    carvable: bool = False  # a GEMM plans for fewer SMs; a kernel streaming HBM has no plan to carve
    counted: bool = True  # its SIZE is a count (gemm:M); else bytes (decode:1GiB)

    def size_of(self, text: str) -> int:
        """SIZE as --beside gives it (ValueError where it is none)."""
        if not text:
            return self.default
        if not text.isascii():  # int() reads other scripts' digits: '٣٠٠' would be 300
            raise ValueError(text)
        return int(text) if self.counted else parse_size(text)

    def size_text(self, size: int) -> str:
        return str(size) if self.counted else format_size(size)

    def check(self, size: int) -> None:
        if self.low <= size <= self.high:
            return
        if self.counted:
            raise ConfigError(f"--beside {self.name}:M takes M from {self.low} to {self.high}, not {size}")
        low, high = format_size(self.low), format_size(self.high)
        raise ConfigError(f"--beside {self.name}:SIZE takes {low} to {high}, not {size}")

    def device_bytes(self, size: int) -> int:
        """GPU memory the load holds on each rank's GPU: a GEMM's three bf16 matrices, or the bytes read."""
        return 3 * 2 * size * size if self.counted else size


_RECORDS = (
    Load(
        "gemm", 0, 8192, "a bf16 SIZE x SIZE x SIZE matrix product through cuBLAS, as prefill", "TFLOP/s", 256, 32768,
        carvable=True,
    ),
    Load(
        "decode", 1, 1 << 30, "a kernel streaming SIZE bytes of HBM, as attention decode reads a KV cache", "GB/s",
        1 << 20, 1 << 36, counted=False,
    ),
)  # fmt: skip
LOADS: dict[str, Load] = {record.name: record for record in _RECORDS}


@dataclass(frozen=True)
class Beside:
    """What a round runs beside its transfers: `load` (LOADS) of `size`, its GEMM planned for the GPU's
    SMs less `carveout`."""

    load: str
    size: int
    carveout: int = 0

    def check(self) -> Beside:
        record = LOADS.get(self.load)
        if record is None:
            raise ConfigError(f"unknown --beside load {self.load!r}: choose {', '.join(LOADS)}")
        record.check(self.size)
        if self.carveout and not record.carvable:
            raise ConfigError(f"--beside {self.load}: a carve-out plans a GEMM for fewer SMs, and {self.load} has none")
        return self

    @property
    def record(self) -> Load:
        return LOADS[self.load]

    @property
    def label(self) -> str:
        """How results files name it: `gemm:8192`, `decode:1GiB`, `gemm:8192,carveout=8` (from_label reads it)."""
        name = f"{self.load}:{self.record.size_text(self.size)}"
        return f"{name},carveout={self.carveout}" if self.carveout else name

    @property
    def name(self) -> str:
        """The load and its size, without the carve-out: `gemm:8192`."""
        return f"{self.load}:{self.record.size_text(self.size)}"

    @property
    def unit(self) -> str:
        return self.record.unit

    @property
    def kind(self) -> int:
        return self.record.code

    def device_bytes(self) -> int:
        """GPU memory the load holds on each rank's GPU."""
        return self.record.device_bytes(self.size)

    @classmethod
    def from_label(cls, text: object) -> Beside | None:
        """A load as a results file names it (`label`), checked; None where it names none."""
        if not isinstance(text, str):
            return None
        try:
            found = asked(text)
        except ConfigError:
            return None
        return found.first if found is not None and len(found.carveouts) == 1 else None


@dataclass(frozen=True)
class BesideLoads:
    """--beside resolved: the load, its size, and each carve-out asked for (0: none; carveout=all:
    CARVEOUTS), each run as its own entries."""

    load: str
    size: int
    carveouts: tuple[int, ...] = (0,)

    @property
    def each(self) -> list[Beside]:
        """A load a carve-out, in the order asked."""
        return [Beside(self.load, self.size, carveout) for carveout in self.carveouts]

    @property
    def first(self) -> Beside:
        """The load at its first carve-out (what a round runs beside where one is enough)."""
        return self.each[0]

    def for_transfer(self, carvable: bool) -> list[Beside]:
        """The loads a transfer runs beside: every carve-out where its transfer runs on SMs a carve-out
        leaves it (`carvable`: StepProtocol.carvable), else only the first (a carve-out gives nothing to
        a transfer that takes no SMs)."""
        return self.each if carvable else self.each[:1]


def asked(text: str) -> BesideLoads | None:
    """`--beside`: `gemm[:M][,carveout=N|all]`, `decode[:SIZE]` or `none` (None), read and checked once."""
    head, *options = text.strip().split(",")
    name, _, size = head.partition(":")
    if name == "none" and not size and not options:
        return None
    record = LOADS.get(name)
    if record is None:
        raise ConfigError(f"unknown --beside {text!r}: choose none, gemm[:M][,carveout=N|all] or decode[:SIZE]")
    try:
        value = record.size_of(size)
    except ValueError:
        raise ConfigError(f"--beside {text}: {size!r} is not a size for {name}") from None
    Beside(name, value).check()
    carveouts = _carveouts(text, options)
    for carveout in carveouts:
        Beside(name, value, carveout).check()
    return BesideLoads(name, value, carveouts)


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


_LOADED: dict[tuple[int, str, int], Any] = {}  # this process's loads, by (GPU, load, size): kept between rounds


def load_on_this_gpu(beside: Beside) -> Any:
    """This rank's load (wire.gpuload.ComputeLoad) on its current GPU, made on first use."""
    from ..hardware.gpu import import_cupy
    from ..wire.gpuload import ComputeLoad

    cupy = import_cupy()
    if cupy is None:
        raise ConfigError("--beside runs a compute load on each rank's GPU: CuPy is not installed")
    key = (int(cupy.cuda.runtime.getDevice()), beside.load, beside.size)  # a carve-out is a plan of the same load
    if key not in _LOADED:
        release_loads()  # one load a process: their buffers are large
        _LOADED[key] = ComputeLoad(key[0], beside.kind, beside.size)
    return _LOADED[key]


def release_loads() -> None:
    for load in _LOADED.values():
        load.release()
    _LOADED.clear()
