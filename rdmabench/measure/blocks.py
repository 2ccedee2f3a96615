"""Block lists shaped like KV caches: one transfer moves `count` blocks of one size from slots of a
source pool to slots of a destination pool, as a batch of puts, gets or tagged messages.

Every block starts on a slot boundary of its pool (a slot is one block), so a pool reads as a matrix
of slots and payloads are written and checked for all blocks at once. Layouts:

- contiguous: the blocks of a transfer are consecutive slots (the one-message ideal, cut up);
- strided: every other slot (a layer's blocks interleaved with another's);
- random: slots drawn without repetition from a pool `pool_factor` times larger, from a seeded table
  (a paged KV cache after some churn); source and destination tables differ;
- runs:MEAN: runs of adjacent slots, as an engine's block allocator leaves them, of seeded geometric
  lengths (at least 1) of mean MEAN, placed without overlap (and never touching) at random in a pool
  four times larger; source and destination drawn separately, as for random;
- a table read from a file (--blocks-from, blocktable.py): the slots an engine's block table named.

A CPU-posted list merges blocks adjacent at both ends (and in one region) into one request, as NIXL
does (its makeXferReq): `descriptors` gives what the native loop posts; `merge=False` keeps a
request per block.

`batch` transfers are in flight per step, each with slots of its own.

A pool may hold `regions` equal regions (a KV cache's layers, and their K and V, each a tensor of its
own: kvhandoff.py): a transfer's blocks are then split evenly among the regions, and every region's
share takes the same slots of its own region, as a KV cache's block ids are shared by its layers. The
list posts region by region, as vLLM's NIXL connector does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..units import ascii_float, ascii_int
from .postings import AUTO, Posting

# The layouts --layout takes, with what each means (the option's help is built from these).
LAYOUTS = {
    "contiguous": "consecutive slots",
    "strided": "every other slot",
    "random": "slots drawn from a seeded table in a pool four times larger (or --pool)",
    "runs:MEAN": "runs of adjacent slots of seeded geometric lengths of mean MEAN (an engine's allocator after "
    "churn), placed at random in a pool four times larger (or --pool)",
}
TABLE = "table"  # the layout of a list read from a file (--blocks-from)
MAX_BLOCKS = 1 << 20  # per step (blocks x batch): a tag's slot bits and the tables' size
_SEED = 0x6B76  # "kv"


_SPREAD = {"contiguous": 1, "strided": 2, "random": 4, "runs": 4}  # pool slots per block moved, by default


def layout_help() -> str:
    """--layout's help: each layout and what it means."""
    return "; ".join(f"{name}: {meaning}" for name, meaning in LAYOUTS.items())


@dataclass(frozen=True)
class Layout:
    """A --layout parsed: its kind (contiguous, strided, random, runs) and, for runs, the mean length."""

    kind: str
    mean: float = 1.0


def parse_layout(text: str) -> Layout:
    """--layout's value as a Layout; ConfigError in one line when it is none of LAYOUTS."""
    kind, colon, value = text.partition(":")
    if kind == "runs" and colon:
        try:
            mean = ascii_float(value)  # float() reads other scripts' digits: runs:٣ was a label of its own
        except ValueError:
            mean = float("nan")
        if not mean >= 1 or mean > MAX_BLOCKS:  # nan fails too
            raise ConfigError(
                f"--layout runs:MEAN takes a mean run length of at least 1 block (at most {MAX_BLOCKS}), not {value!r}"
            )
        return Layout("runs", mean)
    if colon or kind not in LAYOUTS:
        raise ConfigError(f"unknown --layout {text!r}: choose one of {', '.join(LAYOUTS)}")
    return Layout(kind)


CTAS_PER_SM = 4  # the GPU's posting kernel beside a --beside carve-out of N SMs: a grid of N x 4 CUDA blocks


@dataclass(frozen=True)
class SmBudget:
    """How many SMs the GPU's posting kernel may occupy: a grid of at most `sms` CUDA blocks (a fixed
    budget, as DeepEP gives its kernels), or with `green` a partition of the GPU through green contexts
    that owns `sms` SMs (rounded up as the GPU splits them) while --beside's load runs on the rest."""

    sms: int
    green: bool = False

    @classmethod
    def parse(cls, text: str) -> SmBudget | None:
        """`N`, `green:N`, or `all` / `0` (None: the whole GPU)."""
        green, _, count = text.strip().rpartition(":")
        if green not in ("", "green"):
            raise ConfigError(f"--posting-sms {text!r}: give N, green:N or all")
        if count in ("all", "0") and not green:
            return None
        try:
            sms = ascii_int(count)
        except ValueError:
            raise ConfigError(f"--posting-sms {text!r}: give N, green:N or all") from None
        if not 1 <= sms <= 1024:
            raise ConfigError(f"--posting-sms takes 1 to 1024 SMs, not {sms}")
        return cls(sms, bool(green))

    @property
    def label(self) -> str:
        return f"green:{self.sms}" if self.green else str(self.sms)


@dataclass(frozen=True)
class BlockShape:
    count: int  # blocks per transfer
    layout: str = "contiguous"
    batch: int = 1  # transfers in flight per step
    pool_bytes: int | None = None  # each end's pool (default: enough for the layout; 4x for random)
    regions: int = 1  # the pool's regions (layers x K/V); count is a multiple of it
    posting: Posting = AUTO  # who posts it: its record (postings.POSTINGS), resolved from --posting once
    merge: bool = True  # CPU-posted: blocks adjacent at both ends in one request
    # A table read from a file (layout TABLE): each end's slots, a step's blocks transfer by transfer.
    table: Any = field(default=None, compare=False, repr=False)
    budget: SmBudget | None = None  # the SMs the GPU's posting kernel may take (None: all)
    # The model's KV-cache handoff these descriptors are (kvhandoff.Handoff; --model), None: none.
    handoff: Any = field(default=None, compare=False, repr=False)
    pace: str | None = None  # an offload kernel's pace, SMSxCTASxTHREADS (--pace; None: its direction's default)

    def check(self) -> BlockShape:
        if self.count < 1:
            raise ConfigError(f"--blocks must be at least 1, not {self.count}")
        if (self.layout == TABLE) != (self.table is not None):
            raise ConfigError("a block table comes from a file (--blocks-from), not from --layout")
        if self.table is None:
            self.parsed  # noqa: B018 (refuses an unknown layout now)
        if self.batch < 1:
            raise ConfigError(f"--batch must be at least 1, not {self.batch}")
        if self.per_step > MAX_BLOCKS:
            raise ConfigError(
                f"--blocks {self.count} x --batch {self.batch} is {self.per_step} blocks per step, more than {MAX_BLOCKS}"
            )
        if self.pool_bytes is not None and self.pool_bytes < 8:
            raise ConfigError(f"--pool must be at least 8 bytes, not {self.pool_bytes}")
        if self.regions < 1 or self.count % self.regions:
            raise ConfigError(f"{self.count} blocks do not split evenly into {self.regions} regions of the pool")
        return self

    @functools.cached_property
    def parsed(self) -> Layout:
        """The layout, parsed once."""
        return Layout(TABLE) if self.table is not None else parse_layout(self.layout)

    @property
    def per_step(self) -> int:
        return self.count * self.batch

    def pool_slots(self, block: int) -> int:
        """Slots (blocks) in each end's pool: `regions` regions of region_slots each."""
        return self.region_slots(block) * self.regions

    def region_slots(self, block: int) -> int:
        """Slots in each region of the pool (the whole pool when it has one region)."""
        if self.pool_bytes is not None:
            return self.pool_bytes // block // self.regions
        if self.table is not None:
            return int(self.table.slots_needed)
        return self.per_step // self.regions * _SPREAD[self.parsed.kind]

    def _slots_needed(self) -> int:
        """The fewest slots each region of a pool needs for its share of a step (runs: one between
        two runs, at whichever end drew more runs)."""
        moved = self.per_step // self.regions
        kind = self.parsed.kind
        if kind == TABLE:
            return int(self.table.slots_needed)
        if kind == "runs":
            runs = max(len(_run_lengths(self._seed(end, 0), moved, self.parsed.mean)) for end in ("src", "dst"))
            return moved + runs - 1
        return moved * (2 if kind == "strided" else 1)

    def check_fits(self, block: int) -> None:
        """Blocks of whole 64-bit words (payloads are written a word at a time), in a pool that holds
        the layout."""
        if block < 8 or block % 8:
            raise ConfigError(f"--block-size must be a multiple of 8 bytes, not {block}")
        if self.pool_bytes is None:
            return
        if block > self.pool_bytes:
            raise ConfigError(f"--block-size {block} is larger than the --pool of {self.pool_bytes} bytes")
        needed = self._slots_needed()
        if self.region_slots(block) < needed:
            what = "--blocks-from's table" if self.table is not None else f"--layout {self.layout}"
            raise ConfigError(
                f"{what} of {self.per_step} blocks of {block} bytes needs {needed * self.regions} slots "
                f"({needed * self.regions * block} bytes), more than the --pool of {self.pool_bytes} bytes"
            )

    def slots(self, end: str, block: int) -> np.ndarray:
        """The pool slot of every block of a step, transfer by transfer ("src" or "dst" end), and
        within a transfer region by region."""
        if self.table is not None:
            return np.array(self.table.src if end == "src" else self.table.dst, dtype=np.int64)
        if self.regions == 1:
            return self._region_slots(end, block, self.per_step)
        per_region = self.count // self.regions
        ids = self._region_slots(end, block, per_region * self.batch).reshape(self.batch, 1, per_region)
        bases = (np.arange(self.regions, dtype=np.int64) * self.region_slots(block)).reshape(1, self.regions, 1)
        return (bases + ids).reshape(-1)

    def _region_slots(self, end: str, block: int, moved: int) -> np.ndarray:
        """The slots `moved` blocks take in one region, by the layout."""
        kind = self.parsed.kind
        if kind == "contiguous":
            return np.arange(moved, dtype=np.int64)
        if kind == "strided":
            return np.arange(moved, dtype=np.int64) * 2
        pool = self.region_slots(block)
        if kind == "runs":
            return _runs(self._seed(end, 0), self._seed(end, pool), moved, self.parsed.mean, pool)
        rng = np.random.default_rng(self._seed(end, pool))
        return rng.choice(pool, size=moved, replace=False).astype(np.int64)

    def _seed(self, end: str, pool: int) -> list[int]:
        seed = [_SEED, self.count, self.batch, pool, 0 if end == "src" else 1]
        return seed if self.regions == 1 else [*seed, self.regions]

    def descriptors(self, local: np.ndarray, remote: np.ndarray, block: int) -> tuple[np.ndarray, ...]:
        """The requests a CPU posts for a step whose blocks sit at byte offsets `local` and `remote`:
        (each transfer's first request, batch + 1 of them; each request's local offset, remote
        offset and length). Blocks adjacent at both ends, in one transfer and one region, are one
        request (unless merge is off)."""
        index = np.arange(len(local))
        starts = index % (self.count // self.regions) == 0  # a transfer's, and a region's, first block
        if self.merge and len(local) > 1:
            follows = (local[1:] == local[:-1] + block) & (remote[1:] == remote[:-1] + block)
            starts[1:] |= ~follows
        else:
            starts[:] = True
        first_block = np.flatnonzero(starts)
        lengths = np.diff(np.append(first_block, len(local))).astype(np.uint64) * np.uint64(block)
        per_transfer = np.add.reduceat(starts.astype(np.int64), np.arange(0, len(local), self.count))
        first = np.concatenate(([0], np.cumsum(per_transfer))).astype(np.int32)
        return first, local[first_block], remote[first_block], lengths

    def describe(self) -> str:
        regions = f" in {self.regions} regions" if self.regions > 1 else ""
        layout = self.table.describe() if self.table is not None else self.layout
        return (
            f"{self.count} blocks{regions}, {layout}"
            + (f", {self.batch} transfers in flight" if self.batch > 1 else "")
            + ("" if self.merge else ", a CPU request per block (--no-merge)")
            + (f", kernel at pace {self.pace}" if self.pace else "")
        )

    def contiguous(self, block: int, posting: Posting | None = None) -> tuple[BlockShape, int]:
        """A reference of this shape at `block`: each transfer's bytes as one contiguous message, posted
        as `posting` (default: as this list), on the whole GPU."""
        return (
            BlockShape(
                1, "contiguous", self.batch, posting=posting or self.posting, merge=self.merge, handoff=self.handoff
            ),
            self.count * block,
        )


def _run_lengths(seed: list[int], moved: int, mean: float) -> np.ndarray:
    """Run lengths (geometric, at least 1, of mean `mean`) that add up to `moved` (the last cut short)."""
    rng = np.random.default_rng([*seed, 0x72756E])  # "run": its own stream beside the placement's
    lengths = rng.geometric(1.0 / mean, size=int(moved / mean) + 16)
    while lengths.sum() < moved:
        lengths = np.concatenate((lengths, rng.geometric(1.0 / mean, size=len(lengths))))
    ends = np.cumsum(lengths)
    count = int(np.searchsorted(ends, moved)) + 1
    lengths = lengths[:count].astype(np.int64)
    lengths[-1] -= int(ends[count - 1]) - moved
    return lengths


def _runs(lengths_seed: list[int], seed: list[int], moved: int, mean: float, pool: int) -> np.ndarray:
    """The slots of `moved` blocks in runs of adjacent slots, placed in a pool of `pool` slots without
    overlapping or touching (a slot at least between two runs: they stay runs of their own), in an
    order of their own (an allocator hands out free runs in no order)."""
    lengths = _run_lengths(lengths_seed, moved, mean)
    runs = len(lengths)
    spare = pool - moved - (runs - 1)
    if spare < 0:
        raise ConfigError(f"{runs} runs of {moved} blocks need {moved + runs - 1} slots, more than the pool's {pool}")
    rng = np.random.default_rng(seed)
    # Stars and bars: each run starts after its share of the spare slots and the runs before it.
    shares = np.sort(rng.choice(spare + runs, size=runs, replace=False)) - np.arange(runs)
    starts = shares + np.concatenate(([0], np.cumsum(lengths[:-1] + 1)))
    order = rng.permutation(runs)
    lengths, starts = lengths[order], starts[order]
    within = np.arange(moved, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths).astype(np.int64) + within
