"""The block-list step protocol (--blocks): each step moves `batch` transfers of `count` blocks between
slots of two pools (blocks.py), as puts, gets or tagged messages, in the native loop.

The initiator (the sender for tagged messages, the receiver for gets) times every transfer, from the
start of its posting to its completion (put: the endpoint flush posted after its blocks; get: its last
block; tagged: the receiver's acknowledgement of its last block), and how long posting took; a step's
figure is all its bytes over the time from the first post to the last completion. Each transfer's time
is kept (not only sample means), so the entry can give p50, p99 and p99.9 of transfers.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TransportError, ValidationError
from ..memory.buffers import Buffer, synchronize, word_capacity
from ..memory.payload import BlockPayload, block_keys
from ..wire import devapi
from ..wire.native import RMA_GET, RMA_PUT, TAGGED, BlocksLinkEnd, HotLoop, Registrations, memory_type
from ..wire.protoinfo import PathRows, ProtoRow, RmaRows
from . import faults
from .blockrecord import CARVEOUT_SMS, CONTIGUOUS, BlockSteps, SmsRecord, relate_list
from .blocks import CTAS_PER_SM, BlockShape
from .contract import ACK, DATA, READY, Companion, Figure, RoundEnd, RoundShape, Side, StepProtocol, state_of, tag
from .need import PER_BLOCK_PYTHON, PER_MESSAGE, Need, beside, in_memory
from .onesided import OPERATIONS, lend_and_borrow, native_loop
from .postings import CPU, REFERENCE_PATHS, DeviceList, DeviceSteps

NAMES = {RMA_PUT: "put", RMA_GET: "get", TAGGED: "tagged"}
_CEILINGS = {RMA_PUT: devapi.CEILING_PUT, RMA_GET: devapi.CEILING_GET}
_CEILING_STEPS = 7  # timed runs of the list's ceiling (after one to warm up): their median


@dataclass
class _Lists:
    """What a block list's end keeps between steps."""

    loop: HotLoop
    regs: Registrations  # what this rank lends and borrows (onesided.native_loop)
    pool: Buffer
    initiator: bool
    cold: dict[str, float]  # what the list cost before its warm transfers, seconds
    slow_every: int | None  # the planted slow transfer's period (faults), 0: none
    transfers: list[float] = field(default_factory=list)
    posting: list[float] = field(default_factory=list)
    link: Any = None  # the native loop's BlocksLinkEnd
    keep: tuple[np.ndarray, ...] = ()  # the arrays the link points into
    posted: int = 0  # the requests the CPU posts a step
    path: str = devapi.HOST_POSTED
    posted_by: str = CPU.name  # the entry's `posted_by`: the path's name
    path_note: str | None = None  # why not the GPU, where auto fell back
    plan: devapi.DevicePlan | None = None  # the list as the GPU sees it (device memory at both ends)
    steps: DeviceSteps | None = None  # how the GPU's side posts the list; None: the CPU's native loop
    device: DeviceList | None = None  # the list as that path posts it
    armed: list[float] = field(default_factory=list)  # the host's seconds arming each timed step (DeviceSteps.arm)
    sms: SmsRecord | None = None
    ceiling: list[float] | None = None
    payload: BlockPayload | None = None
    scratch: np.ndarray = field(default_factory=lambda: np.zeros(8, dtype=np.uint8))
    signal_at: int = 0
    streak: bool = False  # inside a streak of back-to-back steps (StepProtocol.streak)


def _lists(end: RoundEnd) -> _Lists:
    return state_of(end, _Lists)


class BlocksProtocol(StepProtocol):
    """Block lists moved by `operation` (RMA_PUT, RMA_GET or TAGGED); one link per rank. `device`: a
    one-sided list of device memory at both ends, which the GPU may post (shape.Shape.device)."""

    windowed = True
    streams = False

    def __init__(self, operation: int, shape: BlockShape, device: bool = False):
        self.operation = operation
        self.shape = shape
        self.device = device
        self.name = f"blocks-{NAMES[operation]}"
        self.in_flight = shape.per_step  # a step moves every block of its transfers: they are its window

    def companions(self, size: int, refused: Collection[str]) -> list[Companion]:
        """Each transfer's bytes as one contiguous message, the reference "vs one" reads against: a
        device list's posted by each of the GPU's paths every rank can run (else by the CPU), so that
        it is the fastest contiguous transfer of those bytes; another list's posted as the list."""
        if self.device:
            paths = [path for path in REFERENCE_PATHS if path.name not in refused] or [CPU]
        else:
            paths = [self.shape.posting]
        found = []
        for path in paths:
            whole, nbytes = self.shape.contiguous(size, path)
            found.append(Companion(BlocksProtocol(self.operation, whole, self.device), nbytes, CONTIGUOUS))
        return found

    def carvable(self) -> bool:
        return self.device and self.shape.posting.carvable

    def relate(self, entry: Figure, companions: Mapping[str, Sequence[Figure]]) -> None:
        """The model's handoff the list is; its share of its ceiling; and, but for a list that is itself
        one contiguous message, the fastest of its link's contiguous references and its share of it."""
        relate_list(entry, self.shape.handoff, companions)

    def need(self, spec: RoundShape, rank: int) -> Need:
        """The pool; a step's blocks copied out and compared by a check (validated); each block's
        slot and offsets in Python; and a request per block in flight (the initiator's puts or gets,
        both ends' tagged messages)."""
        targets, sources = spec.ends(rank)
        if not targets and not sources:
            return Need()
        mode = targets[0].src_mode if targets else sources[0].dst_mode
        shape, size, blocks = self.shape, spec.size, self.shape.per_step
        slots = shape.pool_slots(size)
        need = in_memory(mode, word_capacity(slots * size))
        if spec.validate:  # a step's blocks as one array: filled (the sender), or copied out and compared
            need += beside(mode, (3 if sources else 1) * blocks * word_capacity(size) + word_capacity(size))
        table = 16 * slots if shape.parsed.kind in ("random", "runs") else 0  # drawn from a permutation of the pool
        in_flight = blocks if self._initiates(bool(targets), bool(sources)) or self.operation == TAGGED else 0
        return need + Need(host=PER_BLOCK_PYTHON * blocks + table + PER_MESSAGE * in_flight)

    def _initiates(self, sends: bool, receives: bool) -> bool:
        """Whether the end that sends (or receives) on the link posts the transfers: a get's receiver."""
        return receives if self.operation == RMA_GET else sends

    def _initiator(self, end: RoundEnd) -> bool:
        return self._initiates(bool(end.targets), bool(end.sources))

    def spans_transfers(self, end: RoundEnd) -> bool:
        return self._initiator(end)

    def timed(self, end: RoundEnd) -> list[Side]:
        return (end.sources if self.operation == RMA_GET else end.targets) if self._initiator(end) else []

    def rows(self, end: RoundEnd, side: Side) -> PathRows:
        if self.operation == TAGGED:
            return end.tag_rows(side)
        steps = _lists(end).steps
        if steps is not None:
            # No ucp_put_nbx ran, so UCX's protocol report has no row: the lane that mapped the peer's
            # pool for the kernel or the copy engines is cuda_ipc's (the only one UCX maps pointers with).
            row = ProtoRow(0, float("inf"), steps.how, "cuda_ipc/cuda")
            return RmaRows(steps.calls[self.operation], row, "intra-node")
        return end.rma_rows(side, OPERATIONS[self.operation])

    def record(self, end: RoundEnd, side: Side) -> BlockSteps:
        """Every timed transfer, and the shape, operation and path that moved them (for the entry)."""
        lists = _lists(end)
        arming = lists.steps.arming(lists.device, lists.armed) if lists.steps and lists.device else None
        return BlockSteps(
            self.shape, self.name, lists.transfers, lists.posting, dict(lists.cold), lists.path, lists.posted_by,
            lists.path_note, lists.ceiling, lists.sms, lists.posted, arming,
        )  # fmt: skip

    def setup(self, end: RoundEnd) -> None:
        """The pool, the block lists and (one-sided) the peer's keys. The initiator keeps what each
        cost (`cold`): the peer's registration and the key exchange, preparing the lists (slots,
        offsets, the native link), and later its first transfer."""
        if len(end.targets) + len(end.sources) != 1:
            raise TransportError(f"block lists move one link per rank at a time ({end.where})")
        shape, size = self.shape, end.spec.size
        outgoing = bool(end.targets)
        side = (end.targets + end.sources)[0]
        loop, regs = native_loop(end)  # first: it provides the memory UCX allocates (MemoryMode.UCX)
        pool_bytes = shape.pool_slots(size) * size
        pool = end.pool(side, pool_bytes)
        mine, theirs = ("src", "dst") if outgoing else ("dst", "src")
        began = time.perf_counter()
        slots = shape.slots(mine, size)  # a random table costs a permutation of the pool: drawn once
        other = shape.slots(theirs, size) * size  # the peer's offsets: its pool's, and what merges
        clock: dict[str, float] = {}
        lists = _Lists(loop, regs, pool, self._initiator(end), clock, faults.slow_every())
        end.state = lists
        remote: tuple[Any, Any, Any] = (0, None, None)
        if self.operation != TAGGED:
            lent = [] if lists.initiator else [(side, [pool])]
            borrowed = lend_and_borrow(end, regs, lent, [side] if lists.initiator else [], pool_bytes, clock)
            if lists.initiator:
                addresses, rkeys = borrowed[id(side)]
                remote = (addresses[0], rkeys[0], other)
        lists.link = self._link(end, side, pool, slots * size, remote, other)
        if self.operation == TAGGED:
            lists.path = "tagged: one ucp_tag_send_nbx per descriptor"
        if self.operation != TAGGED and lists.initiator:
            self._gpu_plan(end, side, (pool, pool_bytes), slots * size, remote)
        clock["prepare_s"] = time.perf_counter() - began - clock.get("keys_s", 0.0)
        if lists.plan is not None:  # after the costs: the GPU's own time for the same list
            lists.ceiling = self._ceiling(lists.plan, size)
        if end.spec.validate:  # outside the costs: what checking every block adds, not what moving them does
            sender = end.rank if outgoing else side.peer
            lists.payload = BlockPayload(pool, size, slots, sender)
        lists.scratch = np.zeros(8 * (shape.batch + 2), dtype=np.uint8)
        lists.signal_at = end.signal()[1]

    def _link(
        self, end: RoundEnd, side: Side, pool: Buffer, offsets: np.ndarray, remote: tuple[Any, ...], other: np.ndarray
    ) -> Any:
        """The native link: the step's requests, blocks adjacent at both ends merged (--no-merge: one
        a block), computed alike at both ends (a tagged receiver posts a receive per request)."""
        address, rkey, _ = remote
        first, mine, theirs, lengths = self.shape.descriptors(offsets, other, end.spec.size)
        first = np.ascontiguousarray(first, dtype=np.int32)
        local, far, lengths = (np.ascontiguousarray(found, dtype=np.uint64) for found in (mine, theirs, lengths))
        lists = _lists(end)
        lists.keep, lists.posted = (first, local, far, lengths), int(first[-1])
        src, dst = side.link.src, side.link.dst
        initiator = dst if self.operation == RMA_GET else src
        peer = src if initiator == dst else dst
        # READY comes from the end that does not initiate; DONE (one-sided) from the initiator, the
        # ACK of each transfer (tagged) from the receiver.
        done = tag(ACK, peer if self.operation == TAGGED else initiator)
        endpoint = end.transport.endpoint_handle(side.peer)
        as_pointer, as_ints = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int)
        return BlocksLinkEnd(
            endpoint, end.transport.local_pid(side.peer), memory_type(side.mode.ucx_memory), self.shape.batch,
            first.ctypes.data_as(as_ints), pool.address, local.ctypes.data_as(as_pointer),
            lengths.ctypes.data_as(as_pointer), int(address or 0), far.ctypes.data_as(as_pointer), rkey,
            tag(READY, peer), done, tag(DATA, src),
        )  # fmt: skip

    def _gpu_plan(
        self, end: RoundEnd, side: Side, pool: tuple[Buffer, int], offsets: np.ndarray, remote: tuple[Any, ...]
    ) -> None:
        """The list on the GPU's side (devapi.DevicePlan), where both ends hold device memory: the
        step's path for a path the GPU's side posts (postings.Posting.steps), and the list's ceiling
        for every posting. Where the GPU cannot, auto keeps the CPU's path and the reason; a device
        path fails with it. (Whether a path can run on this rank was checked once, before the run:
        job/lists.py.)"""
        lists, wanted = _lists(end), self.shape.posting
        if any(mode.ucx_memory != "cuda" for mode in (side.link.src_mode, side.link.dst_mode)):
            return
        available = devapi.load()
        try:
            if available.library is None:
                raise TransportError(available.note)
            buffer, pool_bytes = pool
            memh = lists.regs.memory_handle(buffer.address, pool_bytes, memory_type(side.mode.ucx_memory))
            address, rkey, remote_offsets = remote
            handles = (lists.loop.worker, end.transport.endpoint_handle(side.peer), memh)
            plan = devapi.DevicePlan(
                available.library, end.where, handles, (buffer.address, pool_bytes), (int(address), int(rkey or 0)),
                offsets, remote_offsets, self.shape.batch, lists.loop.timeout,
            )  # fmt: skip
            end.on_release(plan.release)  # before the pools are unmapped (releases run last first)
            found = DeviceList(
                plan, self.operation, end.spec.size, buffer.address, offsets, remote_offsets, self.shape.batch,
                lists.loop.timeout, end.where,
            )  # fmt: skip
            if wanted.steps is not None:
                wanted.steps.open(found)
                end.on_release(lambda: wanted.steps.close(found) if wanted.steps else None)  # before the plan's
        except TransportError as exc:
            if wanted.device:
                raise TransportError(f"--posting {wanted.name}: {exc}") from None
            lists.path_note = f"the GPU cannot post this list: {exc}"
            return
        lists.plan = plan
        if wanted.steps is not None:  # the GPU's side posts the list (auto: where it can)
            lists.steps, lists.device = wanted.steps, found
            lists.path, lists.posted_by = wanted.steps.path(self.operation), wanted.posts
            lists.sms = self._budget(end, plan) if wanted.takes_sms else {"mode": wanted.who}

    def _budget(self, end: RoundEnd, plan: devapi.DevicePlan) -> SmsRecord:
        """Hold the posting kernel to --posting-sms: a grid of N CUDA blocks, or a green context of N SMs
        beside the load's (the load then runs in the rest); without it, to a --beside carve-out's N SMs
        (a grid of N x CTAS_PER_SM). What the entry records of its SMs."""
        budget = self.shape.budget
        carveout = end.spec.beside.carveout if end.spec.beside is not None else 0
        if budget is None and carveout:  # the SMs the model's carve-out leaves: N x CTAS_PER_SM CUDA blocks
            plan.configure(carveout * CTAS_PER_SM)
            return {"mode": CARVEOUT_SMS, "transfer": carveout, "ctas": carveout * CTAS_PER_SM}
        if budget is None:
            return {"mode": "whole GPU"}
        if not budget.green:
            plan.configure(budget.sms)
            return {"mode": "budget", "transfer": budget.sms}
        if end.load is None:
            raise TransportError("--posting-sms green:N splits the GPU with --beside's load: give --beside")
        partition = end.load.split(budget.sms)
        plan.configure(0, partition.stream, partition.context)
        end.partitioned = True
        return {"mode": "green", "transfer": partition.transfer_sms, "load": partition.load_sms}

    def _ceiling(self, plan: devapi.DevicePlan, size: int) -> list[float]:
        """Seconds of the whole step's list copied by a plain kernel over both pools (the GPU's own
        ceiling for this list, no UCX in the way): one warm-up, then _CEILING_STEPS timed."""
        operation = _CEILINGS[self.operation]
        plan.step(operation, size)
        return [plan.step(operation, size)[0] for _ in range(_CEILING_STEPS)]

    def ahead(self, end: RoundEnd, index: int) -> None:
        """On the initiator of a path the GPU's side posts, what it does ahead of step `index`
        (DeviceSteps.arm: a path that arms its copies ahead of the data), outside the clock."""
        lists = _lists(end)
        if lists.steps is not None and lists.device is not None:
            seconds = lists.steps.arm(lists.device)
            if seconds is not None and index >= end.spec.plan.warmup:
                lists.armed.append(seconds)

    def streak(self, end: RoundEnd, on: bool) -> None:
        """A path the GPU's side posts may post ahead within a streak (DeviceSteps.post); at its end
        what it posted ahead runs out (DeviceSteps.drain), before the payload is checked."""
        lists = _lists(end)
        lists.streak = on and lists.initiator
        if not on and lists.steps is not None and lists.device is not None:
            lists.steps.drain(lists.device)

    def idle(self, end: RoundEnd) -> float:
        found = _lists(end).device
        return found.idle if found is not None else 0.0

    def fill(self, end: RoundEnd, index: int) -> None:
        """The sender's payloads of step `index`, then what its path does ahead of it (`ahead`), both
        outside the clock. In that order: the first fill loads its kernel, and loading a kernel may
        wait for the whole GPU, armed copies included, which wait for the step's release (a put of
        the copy engines armed ahead hung there on 2 x H200 where no earlier round had loaded it)."""
        lists = _lists(end)
        payload = lists.payload
        if payload is not None and end.targets:
            payload.fill(block_keys(payload.xp, index, self.shape.per_step, end.targets[0].link.dst))
            if end.corrupt_at == index:
                first = int(payload.slots[0])
                payload.matrix[first].view(payload.xp.uint8)[end.spec.size // 2] ^= 0xFF
            synchronize(end.targets[0].mode)
        self.ahead(end, index)

    def check(self, end: RoundEnd, index: int) -> None:
        payload = _lists(end).payload
        if payload is None or not end.sources:
            return
        side = end.sources[0]
        block, wrong = payload.wrong(block_keys(payload.xp, index, self.shape.per_step, side.link.dst))
        if wrong:
            transfer, position = divmod(block, self.shape.count)
            raise ValidationError(
                f"rank {end.rank} received {wrong} wrong byte(s) of {end.spec.size} in block {position} of transfer "
                f"{transfer} of step {index} from rank {side.peer} on {end.where}"
            )

    def native_step(self, end: RoundEnd, index: int) -> list[float]:
        lists = _lists(end)
        if lists.initiator and lists.steps is not None:
            step, seconds, posting = self._gpu_step(end, lists)
        else:
            step, seconds, posting = lists.loop.blocks(
                self.operation,
                lists.initiator,
                lists.link,
                lists.signal_at,
                int(lists.scratch.ctypes.data),
                self.shape.batch,
                faults.SLOW_SECONDS if lists.slow_every and index % lists.slow_every == 0 else 0.0,
            )
        if not lists.initiator:
            return []
        if index == 0:  # the first transfer of the list: what a cold request pays beyond a warm one
            lists.cold["first_transfer_s"] = step
        if index >= end.spec.plan.warmup:
            lists.transfers.extend(seconds)
            lists.posting.extend(posting)
        return [step]

    def _gpu_step(self, end: RoundEnd, lists: _Lists) -> tuple[float, list[float], list[float]]:
        """The initiator's step posted from the GPU's side, inside the same READY and DONE as the CPU's."""
        assert lists.steps is not None and lists.device is not None
        lists.loop.blocks_ready(lists.link, int(lists.scratch.ctypes.data))
        found = lists.steps.post(lists.device, lists.streak)
        lists.loop.blocks_done(lists.link, lists.signal_at)
        return found

    python_step = native_step  # native_loop() refused a rank without the native loop
