"""Block lists shaped like KV caches: one transfer moves `count` blocks of one size from slots of a
source pool to slots of a destination pool, as a batch of puts, gets or tagged messages.

Every block starts on a slot boundary of its pool (a slot is one block), so a pool reads as a matrix
of slots and payloads are written and checked for all blocks at once. Layouts:

- contiguous: the blocks of a transfer are consecutive slots (the one-message ideal, cut up);
- strided: every other slot (a layer's blocks interleaved with another's);
- random: slots drawn without repetition from a pool `pool_factor` times larger, from a seeded table
  (a paged KV cache after some churn); source and destination tables differ.

`batch` transfers are in flight per step, each with slots of its own.

A pool may hold `regions` equal regions (a KV cache's layers, and their K and V, each a tensor of its
own: kvhandoff.py): a transfer's blocks are then split evenly among the regions, and every region's
share takes the same slots of its own region, as a KV cache's block ids are shared by its layers. The
list posts region by region, as vLLM's NIXL connector does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

LAYOUTS = ("contiguous", "strided", "random")
# Who posts a one-sided list of device memory: the GPU (UCX's device API, wire/devapi.py), the copy
# engines (one cudaMemcpyBatchAsync a transfer, posted by the CPU), the CPU (one request per block),
# or auto: the GPU where it can, else the CPU, and the entry says why.
POSTINGS = {
    "auto": "the GPU where it can, else the CPU (the entry says why)",
    "gpu": "one kernel a transfer posts every block (UCX's device API)",
    "ce-batch": "the copy engines: one cudaMemcpyBatchAsync a transfer, posted by the CPU",
    "cpu": "one ucp_put_nbx/ucp_get_nbx a block from the CPU",
}
PATHS = ("gpu", "ce-batch", "cpu")  # what `all` runs, in this order
MAX_BLOCKS = 1 << 20  # per step (blocks x batch): a tag's slot bits and the tables' size
_SEED = 0x6B76  # "kv"


_SPREAD = {"contiguous": 1, "strided": 2, "random": 4}  # pool slots per block moved, by default


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
            sms = int(count)
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
    posting: str = "auto"  # POSTINGS
    budget: SmBudget | None = None  # the SMs the GPU's posting kernel may take (None: all)

    def check(self) -> BlockShape:
        if self.count < 1:
            raise ConfigError(f"--blocks must be at least 1, not {self.count}")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"unknown --layout {self.layout!r}: choose one of {', '.join(LAYOUTS)}")
        if self.batch < 1:
            raise ConfigError(f"--batch must be at least 1, not {self.batch}")
        if self.per_step > MAX_BLOCKS:
            raise ConfigError(
                f"--blocks {self.count} x --batch {self.batch} is {self.per_step} blocks per step, more than {MAX_BLOCKS}"
            )
        if self.pool_bytes is not None and self.pool_bytes < 8:
            raise ConfigError(f"--pool must be at least 8 bytes, not {self.pool_bytes}")
        if self.posting not in POSTINGS:
            raise ConfigError(f"unknown --posting {self.posting!r}: choose one of {', '.join(POSTINGS)}, all")
        if self.regions < 1 or self.count % self.regions:
            raise ConfigError(f"{self.count} blocks do not split evenly into {self.regions} regions of the pool")
        return self

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
        return self.per_step // self.regions * _SPREAD[self.layout]

    def check_fits(self, block: int) -> None:
        """Blocks of whole 64-bit words (payloads are written a word at a time), in a pool that holds
        the layout."""
        if block < 8 or block % 8:
            raise ConfigError(f"--block-size must be a multiple of 8 bytes, not {block}")
        if self.pool_bytes is None:
            return
        if block > self.pool_bytes:
            raise ConfigError(f"--block-size {block} is larger than the --pool of {self.pool_bytes} bytes")
        needed = self.per_step * (2 if self.layout == "strided" else 1)
        if self.region_slots(block) < needed // self.regions:
            raise ConfigError(
                f"--layout {self.layout} of {self.per_step} blocks of {block} bytes needs {needed} slots "
                f"({needed * block} bytes), more than the --pool of {self.pool_bytes} bytes"
            )

    def slots(self, end: str, block: int) -> np.ndarray:
        """The pool slot of every block of a step, transfer by transfer ("src" or "dst" end), and
        within a transfer region by region."""
        if self.regions == 1:
            return self._region_slots(end, block, self.per_step)
        per_region = self.count // self.regions
        ids = self._region_slots(end, block, per_region * self.batch).reshape(self.batch, 1, per_region)
        bases = (np.arange(self.regions, dtype=np.int64) * self.region_slots(block)).reshape(1, self.regions, 1)
        return (bases + ids).reshape(-1)

    def _region_slots(self, end: str, block: int, moved: int) -> np.ndarray:
        """The slots `moved` blocks take in one region, by the layout."""
        if self.layout == "contiguous":
            return np.arange(moved, dtype=np.int64)
        if self.layout == "strided":
            return np.arange(moved, dtype=np.int64) * 2
        pool = self.region_slots(block)
        seed = [_SEED, self.count, self.batch, pool, 0 if end == "src" else 1]
        rng = np.random.default_rng(seed if self.regions == 1 else [*seed, self.regions])
        return rng.choice(pool, size=moved, replace=False).astype(np.int64)

    def describe(self) -> str:
        regions = f" in {self.regions} regions" if self.regions > 1 else ""
        return f"{self.count} blocks{regions}, {self.layout}" + (
            f", {self.batch} transfers in flight" if self.batch > 1 else ""
        )

    def contiguous(self, block: int, posting: str | None = None) -> tuple[BlockShape, int]:
        """A reference of this shape at `block`: each transfer's bytes as one contiguous message, posted
        as `posting` (default: as this list), on the whole GPU."""
        return BlockShape(1, "contiguous", self.batch, posting=posting or self.posting), self.count * block
