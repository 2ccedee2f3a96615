"""A figure beside compute as a record, the one place its keys are named: one GPU's load through a
round's pairs (`GpuFigure`: Pairs.summary, an entry's `beside.gpus[rank]` and the NIXL anchor's ends),
an entry's `beside` (`BesideFigure`: made by the load's side, pairs.beside_figure, passed through by
the entry), and how the settle before the first pair went (`Settle`), each with its JSON both ways:
`to_json` for the results file (docs/results-format.md; the keys and their order are the fields'),
`from_json` for what reads one back (rows, reports, the NIXL anchor).

A record read back is untrusted input: `from_json` checks each value's type once (a value of the wrong
type reads as missing: None, or an empty list), so its readers use the fields as typed. Also the SMs a
carve-out's posting kernel took are named here (`CARVEOUT_SMS`: a block list's `sms` mode).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from .beside import Beside

KEY = "beside"  # the entry's field the record is written under
CARVEOUT_SMS = "carveout"  # a block list's `sms` mode where a --beside carve-out set its kernel's SMs

_T = TypeVar("_T")


def _number(value: object) -> float | None:
    """A finite number of a file (a bool is no number), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _each(read: Callable[[object], _T | None]) -> Callable[[object], list[_T | None]]:
    """A list of a file, each item read by `read` (an item of the wrong type: None; no list: [])."""
    return lambda value: [read(item) for item in value] if isinstance(value, list) else []


def _only(read: Callable[[object], _T | None]) -> Callable[[object], list[_T]]:
    """A list of a file, the items `read` accepts ([] where it is no list)."""
    return lambda value: (
        [found for item in value if (found := read(item)) is not None] if isinstance(value, list) else []
    )


def _pair(value: object) -> list[float] | None:
    """A [low, high] pair of numbers, else None."""
    found = _only(_number)(value)
    return found if isinstance(value, list) and len(value) == 2 and len(found) == 2 else None


@dataclass(frozen=True)
class Settle:
    """How the load's clocks settled before the first pair (Pairs.settle): whether two alone windows in a
    row agreed within `agree`, after `windows` windows."""

    settled: bool
    windows: int
    agree: float

    def to_json(self) -> dict[str, object]:
        return {"settled": self.settled, "windows": self.windows, "agree": self.agree}

    @classmethod
    def from_json(cls, data: object) -> Settle | None:
        if not isinstance(data, dict):
            return None
        settled, windows, agree = _flag(data.get("settled")), _whole(data.get("windows")), _number(data.get("agree"))
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

    def to_json(self) -> dict[str, object]:
        found = _written(self)
        found["settle"] = self.settle.to_json() if self.settle is not None else {}
        if self.load_sms is None:
            del found["load_sms"]
        return _ordered(found, _GPU_ORDER)

    @classmethod
    def from_json(cls, data: object) -> GpuFigure | None:
        """A GPU's record as a file holds it, each value checked (None where it is no record or names
        no load)."""
        load = Beside.from_label(data.get("load")) if isinstance(data, dict) else None
        if not isinstance(data, dict) or load is None:
            return None
        found: dict[str, Any] = {name: read(data.get(name)) for name, read in _GPU_READS.items()}
        return cls(load, **found)

    def at(self, name: str, index: int) -> float | None:
        """Pair `index`'s figure of the per-pair list `name` (slowdown_pairs, duty_pairs, ...), or None."""
        values = getattr(self, name)
        return values[index] if index < len(values) else None


_GPU_READS: dict[str, Callable[[object], object]] = {
    "alone": lambda value: _number(value) or 0.0, "beside": lambda value: _number(value) or 0.0,
    "slowdown": _number, "slowdown_pairs": _each(_number), "duty_pairs": _each(_number),
    "lost_s_pairs": _each(_number), "window_s_pairs": _each(_number), "span_s_pairs": _each(_number),
    "alone_drift": _number, "drifting_pairs": _only(_whole), "retakes": lambda value: _whole(value) or 0,
    "operations": _only(_whole), "after_windows_pairs": _only(_whole), "after_settled_pairs": _only(_flag),
    "alone_s_pairs": _only(lambda value: _each(_number)(value) if isinstance(value, list) else None),
    "reference_s": _number, "settle": Settle.from_json, "carveout_cost": _number, "load_sms": _whole,
}  # fmt: skip
# The file's order (the load's unit and carve-out in their places).
_GPU_ORDER = (
    "load unit alone beside slowdown slowdown_pairs duty_pairs lost_s_pairs window_s_pairs span_s_pairs alone_drift "
    "drifting_pairs retakes operations after_windows_pairs after_settled_pairs alone_s_pairs reference_s settle "
    "carveout carveout_cost load_sms"
).split()


def _written(record: GpuFigure | BesideFigure) -> dict[str, object]:
    """A record's fields by name, its load written as its label, unit and carve-out."""
    found: dict[str, object] = {item.name: getattr(record, item.name) for item in fields(record)}
    found.update(load=record.load.label, unit=record.load.unit, carveout=record.load.carveout)
    return found


def _ordered(found: dict[str, object], order: list[str]) -> dict[str, object]:
    return {name: found[name] for name in order if name in found}


@dataclass(frozen=True)
class BesideFigure:
    """An entry's `beside`: the load, the transfer alone (each pair's alone half), the model's cost (the
    worse of the link's GPUs pair by pair: its slowdown over the pairs judged, their duty, the model's
    time lost per GiB moved), a carve-out's own cost, and every GPU's own record, by rank."""

    load: Beside  # written as its label, with its unit and its carve-out
    transfer_alone: float | None
    transfer_alone_samples: list[float | None]
    transfer_share_of_alone: float | None
    slowdown: float | None
    slowdown_pairs: list[float | None]
    slowdown_range: list[float] | None  # [low, high] over the pairs judged
    duty: float | None
    duty_pairs: list[float | None]
    model_ms_per_gib: float | None
    carveout_cost: float | None
    alone_drift: float | None
    drifting_pairs: list[int]
    pairs: int  # the pairs judged
    gpus: dict[str, GpuFigure] = field(default_factory=dict)
    note: str | None = None  # where some pairs were not judged, why a pair may not be

    key = KEY  # the entry's field it is written under

    def to_json(self) -> dict[str, object]:
        found = _written(self)
        found["gpus"] = {rank: gpu.to_json() for rank, gpu in self.gpus.items()}
        if self.note is None:
            del found["note"]
        return _ordered(found, _BESIDE_ORDER)

    @classmethod
    def from_json(cls, data: object) -> BesideFigure | None:
        """An entry's `beside` as a file holds it, each value checked once (None where it is no record
        or names no load)."""
        load = Beside.from_label(data.get("load")) if isinstance(data, dict) else None
        if not isinstance(data, dict) or load is None:
            return None
        found: dict[str, Any] = {name: read(data.get(name)) for name, read in _BESIDE_READS.items()}
        return cls(load, **found)


def _gpus(value: object) -> dict[str, GpuFigure]:
    if not isinstance(value, dict):
        return {}
    return {str(rank): gpu for rank, record in value.items() if (gpu := GpuFigure.from_json(record)) is not None}


_BESIDE_READS: dict[str, Callable[[object], object]] = {
    "transfer_alone": _number, "transfer_alone_samples": _each(_number), "transfer_share_of_alone": _number,
    "slowdown": _number, "slowdown_pairs": _each(_number), "slowdown_range": _pair, "duty": _number,
    "duty_pairs": _each(_number), "model_ms_per_gib": _number, "carveout_cost": _number, "alone_drift": _number, "drifting_pairs": _only(_whole),
    "pairs": lambda value: _whole(value) or 0, "gpus": _gpus, "note": _text,
}  # fmt: skip
_BESIDE_ORDER = (
    "load unit transfer_alone transfer_alone_samples transfer_share_of_alone slowdown slowdown_pairs slowdown_range "
    "duty duty_pairs model_ms_per_gib carveout carveout_cost alone_drift drifting_pairs pairs gpus note"
).split()
