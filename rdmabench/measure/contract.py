"""The measurement contract: what a step protocol and the round engine agree on, and nothing of
either's workings. Protocols (window, pingpong, onesided, blocksteps) import this module (and of
measure/ only need, faults and the block shapes: tests/test_layout.py) to know a round; the engine
(round.py) implements `RoundEnd` and drives any `StepProtocol`. So a new protocol is one module
beside the others and its registry line, and the engine never names one.

Holds: the message tags, a link and one end of it on a rank (`Side`), the round as a protocol sees
it (`RoundShape`), this rank's part of a round (`RoundEnd`), the protocol itself (`StepProtocol`),
its own record of a link (`StepRecord`, `StepFigure`), and what a protocol's entries are read against
(`Companion`, `Figure`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..memory.buffers import Buffer
from ..memory.payload import Pattern
from ..modes import MemoryMode
from ..wire.protoinfo import PathRows, RmaRows, TagRows
from ..wire.staging import Carrier
from .need import Need

if TYPE_CHECKING:
    from ..wire.native import HotLoop
    from ..wire.ucx import Transport
    from .plan import Plan

# Tag layout: kind in the top byte, sender rank in the next three, message slot below.
DATA, READY, ACK = 1, 2, 3


def tag(kind: int, sender: int, slot: int = 0) -> int:
    return (kind << 56) | (sender << 32) | slot


@dataclass(frozen=True)
class Link:
    """Bytes from src to dst: src's buffers are in src_mode, dst's in dst_mode."""

    src: int
    dst: int
    src_mode: MemoryMode
    dst_mode: MemoryMode


@dataclass
class Side:
    """One end of one link on this rank: the peer, the memory, the buffers and how they are posted."""

    link: Link
    peer: int
    mode: MemoryMode
    buffers: list[Buffer] = field(default_factory=list)
    batch: list[Any] = field(default_factory=list)  # the buffers as UCX messages (or staged chunks)
    carrier: Carrier | None = None
    pattern: Pattern | None = None  # the sender's payload pattern (for an incoming end: the peer's)


class RoundShape(Protocol):
    """The round as a protocol reads it: the same on every rank."""

    @property
    def size(self) -> int: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def validate(self) -> bool: ...
    @property
    def beside(self) -> Any: ...  # measure.beside.Beside or None: a compute load runs beside the steps
    def ends(self, rank: int) -> tuple[list[Link], list[Link]]:
        """The links `rank` sends on (targets) and receives on (sources) in this round."""
        ...

    def end_need(self, link: Link, mode: MemoryMode, count: int, receiving: bool) -> Need:
        """What one end of `link`, in `mode`, holds for `count` messages a step (measure/need.py)."""
        ...


def round_trip_need(spec: RoundShape, rank: int) -> Need:
    """What a rank holds for a round trip on each of its links (lat, put-lat): each end both sends and
    receives one message, both in its own memory."""
    targets, sources = spec.ends(rank)
    ends = [(link, link.src_mode) for link in targets] + [(link, link.dst_mode) for link in sources]
    halves = [spec.end_need(link, mode, 1, receiving) for link, mode in ends for receiving in (False, True)]
    return sum(halves, Need())


class RoundEnd(Protocol):
    """This rank's part of a round, as the engine hands it to a protocol: the links it sends on
    (`targets`) and receives on (`sources`), its transport, and the services a step needs."""

    transport: Transport
    comm: Any  # MPI, for what a protocol exchanges when the round is set up (remote keys)
    rank: int
    targets: list[Side]
    sources: list[Side]
    window: int
    passes: int
    where: str  # how errors name the round
    native: Any  # the native loop's library, or None where the round runs in Python
    state: (
        object  # what the protocol keeps between steps: its own typed record (None until its setup), read by `state_of`
    )
    load: Any  # the compute load on this rank's GPU (measure.beside, --beside), or None
    partitioned: bool  # the protocol took a green context's SMs from the load (the load runs in the rest)
    ucx_allocator: Callable[[int], Buffer] | None  # memory UCX allocates, provided by a one-sided protocol
    corrupt_at: int | None  # the planted fault's step (RDMABENCH_FAULT), on the round's first sender

    @property
    def spec(self) -> RoundShape: ...
    @property
    def peers(self) -> list[int]: ...
    def allocate(self, side: Side, count: int, outgoing: bool) -> None: ...
    def pool(self, side: Side, nbytes: int) -> Buffer: ...
    def hot_loop(self) -> HotLoop: ...
    def signal(self) -> tuple[Any, int]: ...
    def slots(self, side: Side) -> int: ...
    def fill(self, side: Side, buffers: list[Buffer], index: int) -> None: ...
    def fill_targets(self, index: int) -> None: ...
    def check_sources(self, index: int) -> None: ...
    def check(self, side: Side, buffers: list[Buffer], index: int) -> None: ...
    def on_release(self, release: Callable[[], None]) -> None: ...
    def tag_rows(self, side: Side) -> TagRows: ...
    def rma_rows(self, side: Side, operation: str) -> RmaRows: ...


State = TypeVar("State")


def state_of(end: RoundEnd, kind: type[State]) -> State:
    """The protocol's own state on `end` (the record its setup left in `RoundEnd.state`), as its type:
    the engine keeps it for the protocol and never reads it."""
    found = end.state
    if not isinstance(found, kind):
        raise TypeError(f"{end.where}: the protocol's state is {type(found).__name__}, not {kind.__name__}")
    return found


class StepFigure(Protocol):
    """What an entry carries of its protocol's own record (a block list's: blockrecord.BlockList),
    written under `key` as `to_json()` gives it."""

    @property
    def key(self) -> str: ...
    def to_json(self) -> dict[str, Any]: ...


class StepRecord(Protocol):
    """What a protocol keeps of a link it times beyond its step times (a block list's:
    blockrecord.BlockSteps), sent to rank 0; the engine passes it through without reading it."""

    def figure(self, size: int) -> StepFigure | None:
        """The entry's record at message size `size` (None: nothing to write)."""
        ...

    def end_bytes(self, size: int) -> int | None:
        """The bytes each end keeps in flight (a block list: its pool); None: the window's buffers."""
        ...


class Figure(Protocol):
    """An entry as a protocol reads it against its companions' (measure.entry.Entry)."""

    size_bytes: int
    value: float
    step: StepFigure | None  # the protocol's own record of the entry (StepRecord.figure)


class StepProtocol(Protocol):
    """What a step protocol provides to the round engine: the buffers an end needs, and one timed
    step in Python and (where the native loop is built) in C. Four exist: window.py (bw, bibw and
    every concurrent pattern), pingpong.py (lat), onesided.py (put, get, put-lat, get-lat; native
    only) and blocksteps.py (--blocks; native only). Each subclasses this, so that what has a default
    here (no companions, the plan's window) is declared once."""

    name: str
    windowed: bool  # a window of messages per step (False: one message each way)
    streams: bool  # a step may make several passes of its window (Plan.passes); False: always one
    # Messages a step keeps in flight where the protocol fixes them (a block list: every block of its
    # transfers); None: the plan's window (--window, or its default for the size and memory).
    in_flight: int | None = None

    def companions(self, size: int, refused: Collection[str]) -> list[Companion]:
        """The rounds the job runs alone, just before this protocol's own rounds at `size`, for their
        entries to be read against (block lists: each transfer's bytes as one contiguous message), of
        those every rank can run (`refused`: what some rank cannot, by name); none by default."""
        return []

    def relate(self, entry: Figure, companions: Mapping[str, Sequence[Figure]]) -> None:
        """Read `entry` (on rank 0, before it is written) against its link's companion entries at its
        size, measured just before it, by companion name (block lists: the share of the fastest
        contiguous transfer of its bytes, and of the list's ceiling); nothing by default."""
        return None

    def need(self, spec: RoundShape, rank: int) -> Need:
        """Everything `rank` allocates for its part of round `spec` (measure/need.py): checked before
        any rank allocates, so it must count what setup, fill and check hold at once."""
        ...

    def timed(self, end: RoundEnd) -> list[Side]:
        """The sides of links this rank times, in the order its steps return their seconds."""
        ...

    def rows(self, end: RoundEnd, side: Side) -> PathRows:
        """What this rank's UCX reported for a link it times (RoundEnd.tag_rows for tagged messages)."""
        ...

    def record(self, end: RoundEnd, side: Side) -> StepRecord | None:
        """What the protocol keeps of a link it times beyond its step times, for the entry (block lists:
        every transfer's time, the path that posted them, the list's ceiling); None by default."""
        return None

    def setup(self, end: RoundEnd) -> None:
        """Allocate this rank's buffers and everything its steps reuse."""
        ...

    def python_step(self, end: RoundEnd, index: int) -> list[float]:
        """One timed step (fill and check excluded): seconds per link this rank times."""
        ...

    def native_step(self, end: RoundEnd, index: int) -> list[float]: ...

    def fill(self, end: RoundEnd, index: int) -> None:
        """Write step `index`'s payloads into this rank's outgoing buffers (untimed)."""
        ...

    def ahead(self, end: RoundEnd, index: int) -> None:
        """What step `index` needs done before it that `fill` does too, untimed (block lists: a path that
        arms its copies ahead): called alone before each step after the first of a shared half beside
        compute, which writes its payloads once; nothing by default."""
        return None

    def streak(self, end: RoundEnd, on: bool) -> None:
        """A streak of steps back to back begins (`on`) or ends: a pair's shared half beside compute, its
        payloads written before and checked after, none between. Within one a protocol may post ahead
        (block lists armed ahead arm the next step while this one flies); at its end it leaves nothing
        posted. Nothing by default."""
        return None

    def idle(self, end: RoundEnd) -> float:
        """Of the last step's wall, the seconds it spent on work ahead with no transfer in flight
        (block lists armed ahead: arming the next step for longer than this one's copies took to
        land), which the duty leaves out; 0 by default."""
        return 0.0

    def spans_transfers(self, end: RoundEnd) -> bool:
        """Whether this end's steps span its transfers, so that its share of a shared half spent in
        steps is the duty beside compute. Block lists: only the initiator's (the other end's step
        also spans what the initiator does ahead, a path's arming of its copies, with no transfer in flight)."""
        return True

    def carvable(self) -> bool:
        """Whether a --beside carve-out leaves this protocol's transfer SMs of its own (a block list a
        path posts by a kernel on the GPU's SMs: postings.Posting.carvable), so that every carve-out
        asked for runs beside it; False by default (the copy engines and the CPU take no SMs)."""
        return False

    def check(self, end: RoundEnd, index: int) -> None:
        """Check every byte this rank received in step `index` (untimed)."""
        ...


@dataclass(frozen=True)
class Companion:
    """A round the job runs alone (never beside compute) before a protocol's own rounds of a size, for
    their entries to be read against (StepProtocol.relate): its protocol, its message size, and the
    name its entries are handed back under."""

    protocol: StepProtocol
    size: int
    name: str
