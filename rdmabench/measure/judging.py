"""How a figure beside compute is judged from its pairs, the one place of it: which pairs count (a
transfer in flight for at least DUTY_FLOOR of the shared half, the load alone not drifting past
DRIFT_LIMIT), the worse GPU's slowdown pair by pair, why none was judged in words, and the entry's
`beside` record made from a link's pairs (`beside_figure`, on the load's side: the entry passes it
through). The pairs themselves are taken by measure/pairs.py; their records are measure/besiderecord.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from ..stats import median
from .beside import Beside
from .besiderecord import BesideFigure, GpuFigure

DRIFT_LIMIT = 0.03  # a pair whose alone windows differ more is taken again (pairs.RETAKES) ...
DUTY_FLOOR = 0.9  # a pair whose shared half had a transfer in flight for less of it is not judged


def drifting(drift: float | None) -> bool:
    """Whether a pair's alone windows drifted past DRIFT_LIMIT (the pair is then not judged)."""
    return drift is not None and abs(drift) > DRIFT_LIMIT


def largest_drift(drifts: list[float]) -> float | None:
    """The drift furthest from none, signed (None where there is none)."""
    return max(drifts, key=lambda drift: abs(float(drift))) if drifts else None


def _judged(duty: float | None) -> bool:
    """A pair is judged unless its shared half had a transfer in flight for less than DUTY_FLOOR of it
    (None: this end could not tell, the other end's duty decides)."""
    return duty is None or duty >= DUTY_FLOOR


class PairsSaid(Protocol):
    """What a figure's pairs say of why none was judged: an entry's `beside` (BesideFigure), or the NIXL
    anchor's pairs read the same way (Said)."""

    @property
    def duty(self) -> float | None: ...
    @property
    def slowdown_pairs(self) -> list[float | None]: ...
    @property
    def drifting_pairs(self) -> list[int]: ...


@dataclass(frozen=True)
class Said:
    duty: float | None
    slowdown_pairs: list[float | None]
    drifting_pairs: list[int]


def unjudged_words(beside: PairsSaid) -> str | None:
    """Why a figure beside compute has no slowdown, in words: its transfers in flight for too little of
    the window (the duty, below DUTY_FLOOR), or the load alone drifting past DRIFT_LIMIT in every pair;
    None where neither is on record."""
    duty, pairs, drifted = beside.duty, beside.slowdown_pairs, beside.drifting_pairs
    if duty is not None and math.isfinite(duty) and duty < DUTY_FLOOR:
        return f"in flight {duty:.0%} of the window"
    if pairs and len(drifted) >= len(pairs):
        return f"the model alone drifted past {DRIFT_LIMIT:.0%} in every pair"
    return None


@dataclass
class Judged:
    """The pairs of a round's GPUs taken together, pair by pair (the worse GPU's figure of each)."""

    slowdowns: list[float | None] = field(default_factory=list)  # every pair's
    duties: list[float | None] = field(default_factory=list)  # every pair's (the higher GPU's that says)
    judged: list[int] = field(default_factory=list)  # the pairs judged: duty at least DUTY_FLOOR, not drifting
    lost_ms_per_gib: list[float] = field(default_factory=list)  # every pair's where known


def judge_pairs(gpus: list[GpuFigure], moved: list[int]) -> Judged:
    """Pair by pair over the round's GPUs (Pairs.summary each; `moved`: the bytes each pair's shared
    half moved): the worse slowdown, the higher duty of the ends that say (a block list's initiator),
    whether it is judged (its duty at least DUTY_FLOOR and no GPU's alone windows drifting), and the
    model's time lost per GiB the window moved (the shared half's bytes prorated to the window's share)."""
    found = Judged()
    for index, nbytes in enumerate(moved):
        slowdowns = [s for gpu in gpus if (s := gpu.at("slowdown_pairs", index)) is not None]
        duties = [d for gpu in gpus if (d := gpu.at("duty_pairs", index)) is not None]
        found.slowdowns.append(max(slowdowns) if slowdowns else None)
        # The duty is the end's whose steps span its transfers (a block list's initiator; the other end
        # says None: its steps also span the initiator's arming of its copies, and it read 0.52-0.85 beside
        # 0.83-0.93 on the GPU path); where both ends say, the higher.
        found.duties.append(max(duties) if duties else None)
        # The time lost per GiB holds at any duty (a reader scales it to their own): every pair's.
        known = [cost for gpu in gpus if (cost := _per_gib(gpu, index, nbytes)) is not None]
        if known:
            found.lost_ms_per_gib.append(max(known))
        drifted = any(index in gpu.drifting_pairs for gpu in gpus)
        if slowdowns and _judged(found.duties[-1]) and not drifted:
            found.judged.append(index)
    return found


def pairs_of(gpus: list[GpuFigure]) -> int:
    """How many pairs the round's GPUs measured (the most any GPU's record lists)."""
    return max((len(gpu.slowdown_pairs) for gpu in gpus), default=0)


def worse_pairs(gpus: list[GpuFigure]) -> list[float]:
    """The model's slowdown pair by pair, the worse of the GPUs that measured the pair, over the pairs
    judged (judge_pairs): a pair whose window held no whole operation on a GPU is None there, and is
    left out only where no GPU measured it."""
    found = judge_pairs(gpus, [0] * pairs_of(gpus))
    return [s for index in found.judged if (s := found.slowdowns[index]) is not None]


def _per_gib(gpu: GpuFigure, index: int, nbytes: int) -> float | None:
    """One GPU's model milliseconds lost per GiB moved in pair `index`'s window."""
    lost, window, span = (gpu.at(name, index) for name in ("lost_s_pairs", "window_s_pairs", "span_s_pairs"))
    if lost is None or not window or not span or not nbytes:
        return None
    in_window = nbytes * min(1.0, window / span) / (1 << 30)
    return lost * 1e3 / in_window


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def beside_figure(
    load: Beside, alone: list[float], values: list[float], moved: list[int], gpus: dict[int, GpuFigure]
) -> BesideFigure:
    """A link's figure beside compute, from its pairs: the transfer alone (`alone`: each pair's alone
    half's figure; `values`: the shared halves'), the model's cost, the worse of the link's GPUs pair by
    pair (`moved`: each shared half's bytes): its slowdown (median and range over the pairs judged), the
    duty, the model's milliseconds lost per GiB moved, a carve-out's own cost (the carved GEMM alone over
    the whole GPU's), and every GPU's own record."""
    pairs = judge_pairs(list(gpus.values()), moved)
    judged = [s for index in pairs.judged if (s := pairs.slowdowns[index]) is not None]
    duties = [d for d in pairs.duties if d is not None]
    drifts = [drift for gpu in gpus.values() if (drift := gpu.alone_drift) is not None]
    costs = [cost for gpu in gpus.values() if (cost := gpu.carveout_cost) is not None]
    unjudged = len(pairs.slowdowns) - len(pairs.judged)
    note = (
        f"{unjudged} of {len(pairs.slowdowns)} pairs not judged: a transfer in flight for under {DUTY_FLOOR:.0%} "
        f"of the shared half, its alone windows apart by more than {DRIFT_LIMIT:.0%} after every retake, or no "
        "whole operation in its window"
    )
    return BesideFigure(
        load=load,
        transfer_alone=round(median(alone), 6),
        transfer_alone_samples=[round(value, 6) for value in alone],
        transfer_share_of_alone=round(median(values) / median(alone), 4) if median(alone) else None,
        slowdown=round(median(judged), 4) if judged else None,
        slowdown_pairs=[_round(s, 4) for s in pairs.slowdowns],
        slowdown_range=[round(min(judged), 4), round(max(judged), 4)] if judged else None,
        duty=round(median(duties), 4) if duties else None,
        duty_pairs=[_round(d, 4) for d in pairs.duties],
        model_ms_per_gib=round(median(pairs.lost_ms_per_gib), 4) if pairs.lost_ms_per_gib else None,
        carveout_cost=round(max(costs), 4) if costs else None,
        alone_drift=largest_drift(drifts),
        drifting_pairs=sorted({index for gpu in gpus.values() for index in gpu.drifting_pairs}),
        pairs=len(judged),
        gpus={str(rank): gpu for rank, gpu in sorted(gpus.items())},
        note=note if unjudged else None,
    )
