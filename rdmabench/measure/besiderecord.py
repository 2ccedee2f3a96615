"""A figure beside compute as a record, the one place its keys are named: one GPU's load through a
round's pairs (`GpuFigure`: Pairs.summary, an entry's `beside.gpus[rank]` and the NIXL anchor's ends),
an entry's `beside` (`BesideFigure`: made by the load's side, pairs.beside_figure, passed through by
the entry), and how the settle before the first pair went (`Settle`), each with its JSON both ways:
`to_json` for the results file (docs/results-format.md; the keys, their types and order: the JSON records'),
`from_json` for what reads one back (rows, reports, the NIXL anchor).

A record read back is untrusted input: `from_json` checks each value's type once (a value of the wrong
type reads as missing: None, or an empty list), so its readers use the fields as typed. Also the SMs a
carve-out's posting kernel took are named here (`CARVEOUT_SMS`: a block list's `sms` mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypedDict

from .beside import CARVEOUT, Beside
from .readback import each, flag, number, only, pair, text, whole

KEY = "beside"  # the entry's field the record is written under


class SettleJson(TypedDict, total=False):
    """A settle's JSON (`{}` where it never ran)."""

    settled: bool
    windows: int
    agree: float


class _GpuJson(TypedDict):
    load: str
    unit: str
    alone: float
    beside: float
    slowdown: float | None
    slowdown_pairs: list[float | None]
    duty_pairs: list[float | None]
    lost_s_pairs: list[float | None]
    window_s_pairs: list[float | None]
    span_s_pairs: list[float | None]
    alone_drift: float | None
    drifting_pairs: list[int]
    retakes: int
    operations: list[int]
    after_windows_pairs: list[int]
    after_settled_pairs: list[bool]
    alone_s_pairs: list[list[float | None]]
    reference_s: float | None
    settle: SettleJson
    carveout: int
    carveout_cost: float | None


class GpuFigureJson(_GpuJson, total=False):
    """A GPU's record as a file holds it, in its order (load_sms only where the protocol's kernel took SMs)."""

    load_sms: int


class _BesideJson(TypedDict):
    load: str
    unit: str
    transfer_alone: float | None
    transfer_alone_samples: list[float | None]
    transfer_share_of_alone: float | None
    slowdown: float | None
    slowdown_interval: list[float] | None
    noise_floor: float | None
    pairs_used: int
    slowdown_pairs: list[float | None]
    slowdown_range: list[float] | None
    duty: float | None
    duty_pairs: list[float | None]
    model_ms_per_gib: float | None
    carveout: int
    carveout_cost: float | None
    alone_drift: float | None
    drifting_pairs: list[int]
    pairs: int
    gpus: dict[str, GpuFigureJson]


class BesideFigureJson(_BesideJson, total=False):
    """An entry's `beside` as a file holds it, in its order (note only where some pairs were not judged)."""

    note: str


@dataclass(frozen=True)
class Settle:
    """How the load's clocks settled before the first pair (Pairs.settle): whether two alone windows in a
    row agreed within `agree`, after `windows` windows."""

    settled: bool
    windows: int
    agree: float

    def to_json(self) -> SettleJson:
        return {"settled": self.settled, "windows": self.windows, "agree": self.agree}

    @classmethod
    def from_json(cls, data: object) -> Settle | None:
        if not isinstance(data, dict):
            return None
        settled, windows, agree = flag(data.get("settled")), whole(data.get("windows")), number(data.get("agree"))
        return None if settled is None or windows is None or agree is None else cls(settled, windows, agree)


@dataclass(frozen=True)
class GpuFigure:
    """What one rank's GPU did beside a round: the load's rate alone and beside, and each pair's
    figures (None where a pair's window held no whole operation, or this end could not tell)."""

    load: Beside  # written as its label, with its unit and its carve-out
    alone: float
    beside: float
    slowdown: float | None  # median over the pairs this GPU judged
    slowdown_pairs: list[float | None]
    duty_pairs: list[float | None]
    lost_s_pairs: list[float | None]
    window_s_pairs: list[float | None]
    span_s_pairs: list[float | None]
    alone_drift: float | None
    drifting_pairs: list[int]
    retakes: int
    operations: list[int]
    after_windows_pairs: list[int]  # alone windows each pair took after its shared half until two agreed
    after_settled_pairs: list[bool]  # whether two of them agreed (else the cap was taken)
    alone_s_pairs: list[list[float | None]]  # each pair's windows before and after: mean seconds an operation
    reference_s: float | None  # the settled load alone before the first pair (every pair's drift is held to it)
    settle: Settle | None  # None: it never ran (written as {})
    carveout_cost: float | None
    load_sms: int | None = None  # the load's SMs, where the protocol's posting kernel took a partition of the rest

    def to_json(self) -> GpuFigureJson:
        load = self.load
        found: GpuFigureJson = {
            "load": load.label, "unit": load.unit, "alone": self.alone, "beside": self.beside,
            "slowdown": self.slowdown, "slowdown_pairs": self.slowdown_pairs, "duty_pairs": self.duty_pairs,
            "lost_s_pairs": self.lost_s_pairs, "window_s_pairs": self.window_s_pairs,
            "span_s_pairs": self.span_s_pairs, "alone_drift": self.alone_drift, "drifting_pairs": self.drifting_pairs,
            "retakes": self.retakes, "operations": self.operations, "after_windows_pairs": self.after_windows_pairs,
            "after_settled_pairs": self.after_settled_pairs, "alone_s_pairs": self.alone_s_pairs,
            "reference_s": self.reference_s, "settle": self.settle.to_json() if self.settle is not None else {},
            "carveout": load.carveout, "carveout_cost": self.carveout_cost,
        }  # fmt: skip
        if self.load_sms is not None:
            found["load_sms"] = self.load_sms
        return found

    @classmethod
    def from_json(cls, data: object) -> GpuFigure | None:
        """A GPU's record as a file holds it, each value checked (None where it is no record or names
        no load)."""
        load = _load(data)
        if not isinstance(data, dict) or load is None:
            return None
        return cls(load, **_read(cls, data))

    def at(self, name: str, index: int) -> float | None:
        """Pair `index`'s figure of the per-pair list `name` (slowdown_pairs, duty_pairs, ...), or None."""
        values = getattr(self, name)
        return values[index] if index < len(values) else None


def _read(record: type[GpuFigure | BesideFigure], data: dict[str, Any]) -> dict[str, Any]:
    """Every field but the load of a record as `data` holds it, each read by its declared type (a value
    of the wrong type: None, an empty list, or a number's zero where the field takes no None)."""
    return {item.name: _READS[str(item.type)](data.get(item.name)) for item in fields(record) if item.name != "load"}


def _gpus(value: object) -> dict[str, GpuFigure]:
    if not isinstance(value, dict):
        return {}
    return {str(rank): gpu for rank, record in value.items() if (gpu := GpuFigure.from_json(record)) is not None}


# How a field's value is read back, by its declared type.
_READS: dict[str, Callable[[object], object]] = {
    "float": lambda value: number(value) or 0.0, "int": lambda value: whole(value) or 0, "float | None": number,
    "int | None": whole, "str | None": text, "list[float | None]": each(number), "list[int]": only(whole),
    "list[bool]": only(flag), "list[float] | None": pair, "Settle | None": lambda value: Settle.from_json(value),
    "list[list[float | None]]": only(lambda value: each(number)(value) if isinstance(value, list) else None),
    "dict[str, GpuFigure]": _gpus,
}  # fmt: skip


def _load(data: object) -> Beside | None:
    """A record's load, read back: its label (`gemm:8192,carveout=8`), its carve-out also from its own key
    where the label names none (a record written by hand, or by another tool); None where it names none."""
    if not isinstance(data, dict):
        return None
    load = Beside.from_label(data.get("load"))
    carveout = whole(data.get(CARVEOUT))
    if load is None or load.carveout or not carveout or not load.record.carvable:
        return load
    return replace(load, carveout=carveout)


@dataclass(frozen=True)
class BesideFigure:
    """An entry's `beside`: the load, the transfer alone (each pair's alone half), the model's cost (its
    slowdown over the pairs judged, the worse GPU's, with its 95% interval and the load's noise floor:
    slowdown.py; the worse of the link's GPUs pair by pair, their duty, the model's time lost per GiB
    moved), a carve-out's own cost, and every GPU's own record, by rank."""

    load: Beside  # written as its label, with its unit and its carve-out
    transfer_alone: float | None
    transfer_alone_samples: list[float | None]
    transfer_share_of_alone: float | None
    slowdown: float | None  # the worse GPU's mean over the pairs judged (slowdown.row_estimate)
    slowdown_pairs: list[float | None]
    slowdown_range: list[float] | None  # [low, high] over the pairs judged, the worse GPU pair by pair
    duty: float | None
    duty_pairs: list[float | None]
    model_ms_per_gib: float | None
    carveout_cost: float | None
    alone_drift: float | None
    drifting_pairs: list[int]
    pairs: int  # the pairs judged
    gpus: dict[str, GpuFigure] = field(default_factory=dict)
    note: str | None = None  # where some pairs were not judged, why a pair may not be
    # The slowdown's 95% interval [low, high] (None under two pairs), its half-width from the load's own
    # swing alone (the smallest slowdown the row can tell from none) and the pairs it rests on (null where it has none).
    slowdown_interval: list[float] | None = None
    noise_floor: float | None = None
    pairs_used: int = 0

    key = KEY  # the entry's field it is written under

    def to_json(self) -> BesideFigureJson:
        load = self.load
        found: BesideFigureJson = {
            "load": load.label, "unit": load.unit, "transfer_alone": self.transfer_alone,
            "transfer_alone_samples": self.transfer_alone_samples,
            "transfer_share_of_alone": self.transfer_share_of_alone, "slowdown": self.slowdown,
            "slowdown_interval": self.slowdown_interval, "noise_floor": self.noise_floor,
            "pairs_used": self.pairs_used, "slowdown_pairs": self.slowdown_pairs,
            "slowdown_range": self.slowdown_range, "duty": self.duty, "duty_pairs": self.duty_pairs,
            "model_ms_per_gib": self.model_ms_per_gib, "carveout": load.carveout, "carveout_cost": self.carveout_cost,
            "alone_drift": self.alone_drift, "drifting_pairs": self.drifting_pairs, "pairs": self.pairs,
            "gpus": {rank: gpu.to_json() for rank, gpu in self.gpus.items()},
        }  # fmt: skip
        if self.note is not None:  # written only where some pairs were not judged
            found["note"] = self.note
        return found

    @classmethod
    def from_json(cls, data: object) -> BesideFigure | None:
        """An entry's `beside` as a file holds it, each value checked once (None where it is no record
        or names no load); issue 54's figures no run writes read as missing (_issue54_checked)."""
        load = _load(data)
        if not isinstance(data, dict) or load is None:
            return None
        return cls(load, **_issue54_checked(_read(cls, data)))


def _issue54_checked(found: dict[str, Any]) -> dict[str, Any]:
    """A beside figure's fields with the damaged ones read as missing (review9): a 95% interval not
    positive, not low first or not holding its own slowdown ([-1e308, 1e308] broke the page's plot), a
    noise floor below none, a negative count of pairs."""
    low_high, slowdown = found["slowdown_interval"], found["slowdown"]
    if low_high is not None:
        low, high = low_high
        if not 0 < low <= high or (slowdown is not None and not low <= slowdown <= high):
            found["slowdown_interval"] = None
    if found["noise_floor"] is not None and found["noise_floor"] < 0:
        found["noise_floor"] = None
    found["pairs_used"] = max(found["pairs_used"], 0)
    return found
