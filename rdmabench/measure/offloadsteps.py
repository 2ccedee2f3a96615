"""KV offload (--test swap-out, swap-in): a block list between this rank's GPU pool and its own pinned
pool, in the one process that owns both, as a serving engine's offload is (vLLM's KV offloading
connector, SGLang's HiCache). The link is the rank with itself: its source end the pool of
--src-mode, its target end the pool of --dst-mode (swap-out: device -> pinned; swap-in: pinned ->
device); the record says so (`offload`), so that no reader takes it for a link between two ranks.

Who posts it is a path of the posting registry that applies to a pool (postings.Posting.far): the
copy kernel through the pinned pool's mapped pointers at a pace (`kernel`), the copy engines batched
(one batch a list) or armed ahead, one cudaMemcpyAsync a block (`direct`), or the CPU copying
each block (`cpu`: host memory at both ends, the path where no GPU is). Each step is timed on the
GPU's events from before its first post to its last landing (the host's posting seconds kept beside
it); the payload is written before and every byte checked after each step, outside the clock. The
round engine runs it alone and beside compute as every block list (no second implementation).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, TransportError, ValidationError
from ..memory.buffers import Buffer, synchronize, word_capacity
from ..memory.payload import BlockPayload, block_keys
from ..wire import armed, offload
from ..wire.protoinfo import PathRows, ProtoRow, RmaRows
from .blockrecord import CONTIGUOUS, OFFLOADS, BlockSteps, SmsRecord, relate_list
from .blocks import BlockShape
from .contract import Companion, Figure, RoundEnd, RoundShape, Side, StepProtocol, state_of
from .need import PER_BLOCK_PYTHON, Need, beside, in_memory
from .postings import CPU, Arming, Posting, armed_ahead, pool_paths, pool_reference

OUT, IN = OFFLOADS
NAMES = {OUT: "swap-out", IN: "swap-in"}
# The kernel's pace where none is given, per direction (devtools/probes/offload.py, an H200 beside a bf16
# 8192^3 GEMM carved the pace's SMs, 1,024 random blocks: measurements/h200x2-20261128-session8/): reading
# host memory stalls nothing, so swap-in takes 8 SMs' worth of one CTA of 128 (45-48 GB/s at 4 KiB, the
# model within 2%); storing to it backs up into the model past a few warps in flight (16 warps: 1.09x at
# 4 KiB, 1.3x at 64 KiB), so swap-out takes 8 warps on 2 SMs, the one pace that held the model within 2%
# at 4 and 64 KiB (27 and 41 GB/s). Faster can pay: 12 warps moved 48 GB/s at 4 KiB for about 3%. Sweep it.
DEFAULT_PACES = {OUT: "2x1x128", IN: "8x1x128"}
_CEILING_STEPS = 5


@dataclass
class _Pools:
    """What an offload end keeps between steps."""

    src: Buffer
    dst: Buffer
    src_slots: np.ndarray
    dst_slots: np.ndarray
    path: str
    posted_by: str
    cold: dict[str, float]
    plan: offload.OffloadPlan | None = None
    armed: armed.ArmedPlan | None = None
    pace: offload.Pace | None = None
    sms: SmsRecord | None = None
    src_payload: BlockPayload | None = None
    dst_payload: BlockPayload | None = None
    transfers: list[float] = field(default_factory=list)
    posting: list[float] = field(default_factory=list)
    arming: list[float] = field(default_factory=list)
    ceiling: list[float] | None = None


def _pools(end: RoundEnd) -> _Pools:
    return state_of(end, _Pools)


def offload_direction(src_on_device: bool, dst_on_device: bool) -> str | None:
    """OUT where the source is the GPU's and the target host memory, IN the reverse, else None."""
    if src_on_device and not dst_on_device:
        return OUT
    if dst_on_device and not src_on_device:
        return IN
    return None


class OffloadProtocol(StepProtocol):
    """A block list between this rank's two pools in `direction` (OUT, IN), shaped by `shape` (its
    posting path one of postings.pool_paths(), its pace the kernel's)."""

    windowed = True
    streams = False

    def __init__(self, direction: str, shape: BlockShape):
        if direction not in NAMES:
            raise ConfigError(f"an offload moves out or in, not {direction!r}")
        self.direction, self.shape = direction, shape
        self.name = f"offload-{direction}"
        self.in_flight = shape.per_step

    def companions(self, size: int, refused: Collection[str]) -> list[Companion]:
        """The list's bytes as one copy: the copy engines' (one descriptor), or the CPU's where they are refused."""
        path = pool_reference()
        path = path if path.name not in refused and self.shape.posting != CPU else CPU
        whole, nbytes = self.shape.contiguous(size, path)
        return [Companion(OffloadProtocol(self.direction, whole), nbytes, CONTIGUOUS)]

    def carvable(self) -> bool:
        """The kernel's CTAs run on the SMs a --beside carve-out leaves: every carve-out runs beside it."""
        return self.shape.posting.carvable

    def relate(self, entry: Figure, companions: Mapping[str, Sequence[Figure]]) -> None:
        relate_list(entry, self.shape.handoff, companions)

    def need(self, spec: RoundShape, rank: int) -> Need:
        """Both pools, a step's blocks copied out for the check (validated), each block's slots in Python."""
        targets, sources = spec.ends(rank)
        if not targets or not sources:
            return Need()
        link, size, blocks = targets[0], spec.size, self.shape.per_step
        pool = word_capacity(self.shape.pool_slots(size) * size)
        need = in_memory(link.src_mode, pool) + in_memory(link.dst_mode, pool)
        if spec.validate:  # the expected blocks (source) and the blocks read back (target)
            need += beside(link.src_mode, blocks * word_capacity(size)) + beside(link.dst_mode, 2 * blocks * size)
        return need + Need(host=PER_BLOCK_PYTHON * blocks + 16 * self.shape.pool_slots(size))

    def timed(self, end: RoundEnd) -> list[Side]:
        return end.targets[:1]

    def rows(self, end: RoundEnd, side: Side) -> PathRows:
        """No UCX call ran: the row says what moved the list, over PCIe to this process's own pool."""
        record = self.shape.posting
        return RmaRows(record.name, ProtoRow(0, float("inf"), record.pool_words, "own pool"), "this process")

    def record(self, end: RoundEnd, side: Side) -> BlockSteps:
        pools = _pools(end)
        arming = None
        if pools.armed is not None:
            layout = pools.armed.layout
            arming = Arming(pools.arming, layout.armed_copies, layout.armed_lists, layout.bound)
        return BlockSteps(
            self.shape, NAMES[self.direction], pools.transfers, pools.posting, dict(pools.cold), pools.path,
            pools.posted_by, None, pools.ceiling, pools.sms, self.shape.per_step, arming,
            offload=self.direction, pace=pools.pace.label if pools.pace else None,
        )  # fmt: skip

    def setup(self, end: RoundEnd) -> None:
        """Both pools (the rank's own link: one side that sends, one that receives), the list's slots at
        each, the path's plan, and the payloads."""
        if len(end.targets) != 1 or len(end.sources) != 1 or end.targets[0].link != end.sources[0].link:
            raise TransportError(f"an offload moves one list between this rank's own pools ({end.where})")
        size, shape = end.spec.size, self.shape
        pool_bytes = shape.pool_slots(size) * size
        began = time.perf_counter()
        src, dst = end.pool(end.targets[0], pool_bytes), end.pool(end.sources[0], pool_bytes)
        record = shape.posting
        pools = _Pools(
            src, dst, shape.slots("src", size), shape.slots("dst", size), record.pool_words, record.posts, {}
        )
        end.state = pools
        if shape.posting != CPU:
            self._plan(end, pools, size, pool_bytes)
        pools.cold["prepare_s"] = time.perf_counter() - began
        if pools.plan is not None and shape.count > 1:  # the GPU's own time for the list: the kernel at full pace
            pools.ceiling = self._ceiling(pools.plan)
        if end.spec.validate:
            pools.src_payload = BlockPayload(src, size, pools.src_slots, end.rank)
            pools.dst_payload = BlockPayload(dst, size, pools.dst_slots, end.rank)

    def _plan(self, end: RoundEnd, pools: _Pools, size: int, pool_bytes: int) -> None:
        """The offload plan (and, for the copy engines armed ahead, the armed plan) over both pools; the kernel's pace and SMs."""
        device, host = (pools.src, pools.dst) if self.direction == OUT else (pools.dst, pools.src)
        dev_slots, host_slots = (
            (pools.src_slots, pools.dst_slots) if self.direction == OUT else (pools.dst_slots, pools.src_slots)
        )
        gpu = int(device.array.device.id)  # a CuPy array on the rank's GPU
        plan = offload.OffloadPlan(
            gpu, (device.address, pool_bytes), (host.address, pool_bytes), dev_slots * size, host_slots * size, size,
            timeout=end.spec.plan.timeout, where=end.where,
        )  # fmt: skip
        end.on_release(plan.close)
        pools.plan = plan
        if armed_ahead(self.shape.posting):
            sizes = np.full(len(dev_slots), size, dtype=np.int64)
            ends = (pools.src.address + pools.src_slots * size, pools.dst.address + pools.dst_slots * size)
            way = "put" if self.direction == OUT else "get"
            pools.armed = armed.ArmedPlan(*ends, sizes, 1, way, timeout=end.spec.plan.timeout, where=end.where)
            end.on_release(pools.armed.close)
        if self.shape.posting.name == "kernel":
            pools.pace, pools.sms = self._pace(end)

    def _pace(self, end: RoundEnd) -> tuple[offload.Pace, SmsRecord]:
        """The kernel's pace: the shape's (--pace), else the direction's default; --posting-sms N sets
        its SMs. What the entry records of its SMs (a carve-out's beside compute)."""
        pace = offload.Pace.parse(self.shape.pace or DEFAULT_PACES[self.direction])
        budget = self.shape.budget
        if budget is not None and budget.green:
            raise TransportError("--posting-sms green:N: the offload kernel runs on the carve-out, not a green context")
        if budget is not None:
            pace = offload.Pace(budget.sms, pace.ctas, pace.threads).check()
        carveout = end.spec.beside.carveout if end.spec.beside is not None else 0
        mode = "carveout" if carveout else "budget" if budget is not None else "pace"
        record: SmsRecord = {"mode": mode, "transfer": carveout or pace.sms, "ctas": pace.grid}
        return pace, record

    def _ceiling(self, plan: offload.OffloadPlan) -> list[float]:
        """Seconds of the step's list by the kernel at a full pace (8 CTAs of 256 an SM on 16 SMs), alone:
        the GPU's own ceiling for the list, one warm-up first."""
        pace, way = offload.Pace(16, 8, 256), offload.DIRECTIONS[self.direction]
        plan.step(offload.KERNEL, way, pace=pace)
        return [plan.step(offload.KERNEL, way, pace=pace).gpu_seconds for _ in range(_CEILING_STEPS)]

    def fill(self, end: RoundEnd, index: int) -> None:
        pools = _pools(end)
        if pools.src_payload is not None:
            pools.src_payload.fill(block_keys(pools.src_payload.xp, index, self.shape.per_step, end.rank))
            if end.corrupt_at == index:
                first = int(pools.src_payload.slots[0])
                pools.src_payload.matrix[first].view(pools.src_payload.xp.uint8)[end.spec.size // 2] ^= 0xFF
            synchronize(end.targets[0].mode)
        self.ahead(end, index)

    def ahead(self, end: RoundEnd, index: int) -> None:
        """The copy engines armed ahead: the step's list armed on the copy engines, outside the clock (its seconds kept)."""
        pools = _pools(end)
        if pools.armed is not None and not pools.armed.armed:
            seconds = pools.armed.arm()
            if index >= end.spec.plan.warmup:
                pools.arming.append(seconds)

    def streak(self, end: RoundEnd, on: bool) -> None:
        """At a streak's end, a list armed for a step that never came is released, untimed."""
        pools = _pools(end)
        if not on and pools.armed is not None and pools.armed.armed:
            pools.armed.release()

    def check(self, end: RoundEnd, index: int) -> None:
        pools = _pools(end)
        if pools.dst_payload is None:
            return
        payload = pools.dst_payload
        block, wrong = payload.wrong(block_keys(payload.xp, index, self.shape.per_step, end.rank))
        if wrong:
            raise ValidationError(
                f"rank {end.rank}'s {NAMES[self.direction]} left {wrong} wrong byte(s) of {end.spec.size} in block "
                f"{block} of step {index} on {end.where}"
            )

    def native_step(self, end: RoundEnd, index: int) -> list[float]:
        pools = _pools(end)
        step, posted = self._step(end, pools)
        if index == 0:
            pools.cold["first_transfer_s"] = step
        if index >= end.spec.plan.warmup:
            pools.transfers.append(step)
            pools.posting.append(min(posted, step))
        return [step]

    python_step = native_step

    def _step(self, end: RoundEnd, pools: _Pools) -> tuple[float, float]:
        """One list by the path: (its seconds, the host's seconds posting it)."""
        if pools.armed is not None:
            if not pools.armed.armed:  # a step after the first of a shared half: armed by ahead()
                self.ahead(end, end.spec.plan.warmup)
            released = pools.armed.release()
            return max(released.list_seconds), released.late_seconds
        if pools.plan is not None:
            code = self.shape.posting.pool_code
            assert code is not None  # a path with a plan has its code (postings.Posting.pool_code)
            found = pools.plan.step(code, offload.DIRECTIONS[self.direction], pace=pools.pace)
            return found.gpu_seconds, found.post_seconds
        return _cpu_copy(pools, end.spec.size)


def _cpu_copy(pools: _Pools, size: int) -> tuple[float, float]:
    """The CPU's request per block: each block copied by the CPU (host memory at both ends)."""
    src = pools.src.array.view(np.uint8)
    dst = pools.dst.array.view(np.uint8)
    began = time.perf_counter()
    for s, d in zip(pools.src_slots.tolist(), pools.dst_slots.tolist(), strict=True):
        dst[d * size : (d + 1) * size] = src[s * size : (s + 1) * size]
    seconds = time.perf_counter() - began
    return seconds, seconds


def pool_problems(records: Collection[Posting]) -> dict[str, str]:
    """Why this rank cannot run each offload path of `records`, by name (the GPU's: no GPU, no nvcc, ...)."""
    found: dict[str, str] = {}
    for record in records:  # by name: a record holds mappings, so it is no key
        if record.name not in found and record in pool_paths() and (why := record.pool_problem()) is not None:
            found[record.name] = why
    return found
