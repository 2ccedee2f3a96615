"""The records of a figure beside compute, as results files hold them (docs/results-format.md): one
GPU's load through a round's pairs (`GpuRecord`, Pairs.summary, an entry's `beside.gpus[rank]` and
the NIXL anchor's ends), and an entry's `beside` (`BesideRecord`, entry.beside_record).

They are JSON documents written to a file and read back from one: TypedDicts, so their keys and key
order are the dicts' own. A record read back is untrusted input: the readers (beside.judge_pairs,
unjudged_words, the report's rows) check each value they use and tolerate a key missing.
"""

from __future__ import annotations

from typing import TypedDict


class Settle(TypedDict, total=False):
    """How the load's clocks settled before the first pair (Pairs.settle; empty before it ran)."""

    settled: bool  # two alone windows in a row agreed within `agree`
    windows: int  # alone windows taken
    agree: float  # beside.SETTLE_AGREE


class _LoadSms(TypedDict, total=False):
    load_sms: int  # the load's SMs, where the protocol's posting kernel took a partition of the rest


class GpuRecord(_LoadSms):
    """What one rank's GPU did beside a round: the load's rate alone and beside, and each pair's
    figures (None where a pair's window held no whole operation, or this end could not tell)."""

    load: str  # Beside.label
    unit: str  # the rate's unit
    alone: float
    beside: float
    slowdown: float | None  # median over the pairs this GPU judged
    slowdown_pairs: list[float | None]
    duty_pairs: list[float | None]
    lost_s_pairs: list[float | None]
    window_s_pairs: list[float]
    span_s_pairs: list[float]
    alone_drift: float | None
    drifting_pairs: list[int]
    retakes: int
    operations: list[int]
    after_windows_pairs: list[int]  # alone windows each pair took after its shared half until two agreed
    after_settled_pairs: list[bool]  # whether two of them agreed (else the cap was taken)
    alone_s_pairs: list[list[float | None]]  # each pair's windows before and after: mean seconds an operation
    reference_s: float | None  # the settled load alone before the first pair (every pair's drift is held to it)
    settle: Settle
    carveout: int
    carveout_cost: float | None


class PairsSaid(TypedDict):
    """What a figure's pairs say of why none was judged (beside.unjudged_words): an entry's `beside`,
    or the NIXL anchor's pairs read the same way."""

    duty: float | None
    slowdown_pairs: list[float | None]
    drifting_pairs: list[int]


class _Note(TypedDict, total=False):
    note: str  # where some pairs were not judged, why a pair may not be


class BesideRecord(PairsSaid, _Note):
    """An entry's `beside`: the transfer alone, the model's cost (the worse of the link's GPUs pair by
    pair) and every GPU's own record, by rank."""

    load: str
    unit: str
    transfer_alone: float
    transfer_alone_samples: list[float]
    transfer_share_of_alone: float | None
    slowdown: float | None  # slowdown.row_estimate: the worse GPU's mean over the pairs judged
    slowdown_interval: list[float] | None  # its 95% interval, [low, high] (None under two pairs)
    noise_floor: float | None  # the interval's half-width from the load's swing alone: the least slowdown it tells
    pairs_used: int  # the pairs the slowdown rests on
    slowdown_range: list[float] | None
    duty_pairs: list[float | None]
    model_ms_per_gib: float | None
    carveout: int
    carveout_cost: float | None
    alone_drift: float | None
    pairs: int
    gpus: dict[str, GpuRecord]
