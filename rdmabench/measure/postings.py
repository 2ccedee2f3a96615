"""Who posts a block list: one registry of posting paths (`POSTINGS`), each a record of its name, who
posts it, what it needs, why it cannot run here, its words for humans and how it posts. The option's
help, the run's agreement on what every rank can run (job/lists.py), the step protocol
(blocksteps.py), the results' settings and the reports all read these records, so a new path is its
record here, its wrapper in wire/ (devapi.py, or a module of its own: armed.py) and its native
code, and nothing else.

A path the GPU's side posts (`device`: a one-sided list of device memory at both ends) goes through
`devapi.DevicePlan`, the list as the GPU sees it, with a `DeviceSteps` strategy over the round's list
(`DeviceList`): `open` and `close` once a round, `arm` (work outside the clock before each step: copies
armed ahead of the data) and `post` (the timed step). The CPU's path is the native loop's own step
(`steps` None).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, TransportError
from ..hardware.gpu import visible_gpu_count
from ..wire import armed, devapi, offload
from ..wire.native import RMA_GET, RMA_PUT


@dataclass
class DeviceList:
    """A round's block list as the GPU's side posts it: the plan (UCX's view of both pools), the
    operation (RMA_PUT or RMA_GET), the block size, this end's pool and every block's offset in a step
    at both ends, and what a path keeps between steps (`kept`)."""

    plan: devapi.DevicePlan
    operation: int
    size: int
    pool: int  # this end's pool address
    offsets: np.ndarray  # a step's blocks, in bytes from this end's pool
    remote_offsets: np.ndarray  # and from the peer's
    batch: int  # transfers a step
    timeout: float
    where: str
    kept: Any = None  # ce-armed: its armed.ArmedPlan
    idle: float = 0.0  # of the last step's wall, the seconds spent ahead with no copy in flight (post)


@dataclass(frozen=True)
class Arming:
    """What a path that arms its list ahead of the data spent on it, outside the clock: the host's
    seconds arming each timed step, the copies armed each time, the lists armed whole at once and the
    most copies armed at once (the bound)."""

    seconds: list[float]
    copies: int
    lists: int
    bound: int


@dataclass(frozen=True)
class DeviceSteps:
    """How a path posts a list from the GPU's side: the plan's operation for a put and a get, what the
    protocol row says ran it, and the step in parts: `open` and `close` once a round, `arm` before
    each step, outside the clock, and `post`, timed. A path with work to do ahead of its data (arming
    copies) subclasses it and overrides them."""

    operations: Mapping[int, int]  # RMA_PUT / RMA_GET -> the plan's operation
    how: str  # UCX's protocol report has no row for it: the row's words
    calls: Mapping[int, str]  # RMA_PUT / RMA_GET -> what the row names as the operation

    def path(self, operation: int) -> str:
        """What runs the list, for the results (the entry's `path`)."""
        return devapi.PATHS[self.operations[operation]]

    def open(self, found: DeviceList) -> None:
        """Prepare the round's list (TransportError in one line where it cannot): nothing here."""

    def close(self, found: DeviceList) -> None:
        """Release what `open` made, before the plan and the pools: nothing here."""

    def arm(self, found: DeviceList) -> float | None:
        """Work done outside the clock before each step: the host's seconds on it (None: no work)."""
        return None

    def post(self, found: DeviceList, streak: bool = False) -> tuple[float, list[float], list[float]]:
        """The timed step: (its seconds, each transfer's, each transfer's posting). `streak`: inside a
        streak of steps back to back (StepProtocol.streak), where a path may post ahead."""
        return found.plan.step(self.operations[found.operation], found.size)

    def drain(self, found: DeviceList) -> None:
        """At a streak's end, what was posted ahead run out, untimed: nothing here."""

    def arming(self, found: DeviceList, seconds: list[float]) -> Arming | None:
        """What arming cost, from each timed step's `arm` seconds (None: the path arms nothing)."""
        return None


class ArmedSteps(DeviceSteps):
    """ce-armed: each step's lists armed on the copy engines before the step, outside the clock (one
    cudaMemcpyBatchAsync a list behind cuStreamWaitValue32 on a flag, at most armed.ARM_BOUND copies
    at once, the rest submitted behind the release), then released inside it and timed from the
    release to the last copy landed (armed.ArmedPlan). Each transfer is a list."""

    def path(self, operation: int) -> str:
        return armed.ARMED_PATH

    def open(self, found: DeviceList) -> None:
        peer = found.plan.mapped  # the peer's pool as UCX maps it into this process
        if not peer:
            raise TransportError(f"the peer's pool is not mapped into this process ({found.where})")
        local = found.pool + found.offsets.astype(np.int64)
        remote = peer + found.remote_offsets.astype(np.int64)
        put = found.operation == RMA_PUT
        src, dst = (local, remote) if put else (remote, local)
        sizes = np.full(len(local), found.size, dtype=np.int64)
        found.kept = armed.ArmedPlan(
            src, dst, sizes, found.batch, "put" if put else "get", timeout=found.timeout, where=found.where
        )

    def close(self, found: DeviceList) -> None:
        if found.kept is not None:
            found.kept.close()

    def arm(self, found: DeviceList) -> float | None:
        plan = found.kept
        if plan.armed:  # armed while the last step flew (a streak's post): that arming's seconds
            return float(plan.arm_seconds)
        return float(plan.arm())

    def post(self, found: DeviceList, streak: bool = False) -> tuple[float, list[float], list[float]]:
        """Released and landed; the step's seconds are the GPU's (its events, from the release to the
        last landing), in a streak or not, so that its figures beside compute and alone compare. In a
        streak (a step of one wave), the next step is armed between the two, while this one flies; the
        host's wall then outlasts the copies where the arming does, by `found.idle`."""
        plan, found.idle = found.kept, 0.0
        if not (streak and plan.overlaps):
            released = plan.release()
            late = released.late_seconds / found.batch  # the host's submitting behind the release, in the clock
            return max(released.list_seconds), list(released.list_seconds), [late] * found.batch
        plan.launch()
        plan.arm()
        released = plan.land()
        flight = max(released.list_seconds)
        found.idle = max(0.0, released.wall_seconds - flight)  # the arming outlasted the copies by this
        return flight, list(released.list_seconds), [0.0] * found.batch

    def drain(self, found: DeviceList) -> None:
        """A step armed during the streak's last and never released: released and landed, untimed (it
        moves the streak's payload again)."""
        if found.kept is not None and found.kept.armed:
            found.kept.release()

    def arming(self, found: DeviceList, seconds: list[float]) -> Arming | None:
        layout = found.kept.layout
        return Arming(seconds, layout.armed_copies, layout.armed_lists, layout.bound)


def _runs_anywhere() -> str | None:
    """A path every rank can run: no reason (a module's function, so that a record travels by MPI)."""
    return None


PEER, POOL = "peer", "pool"  # a list's far end: another rank's pool, or this process's own pinned pool (offload)


@dataclass(frozen=True)
class Posting:
    """One posting path of a block list: resolved from its name once (the run's configuration), passed
    as this record, and written by its name (an entry's `posted_by`); and which far ends it applies to
    (`far`: PEER, a list to another rank; POOL, an offload between a rank's GPU and its own pinned pool)."""

    name: str  # --posting's word, and the entry's `posted_by`
    meaning: str  # --posting's help
    who: str  # who posts the list: "gpu", "copy engines", "cpu"
    needs: tuple[str, ...] = ()  # what it needs, in words
    device: bool = False  # posted from the GPU's side: device lists only (one-sided, device memory at both ends)
    # A contiguous reference of such a list (the fastest contiguous transfer of its bytes), run before it.
    reference: bool = False
    said: str = ""  # what a list's settings add for it (results/files/entries.py): "" for the CPU's
    words: str = ""  # what tables say of it under "by"
    steps: DeviceSteps | None = None  # how the GPU's side posts it; None: the CPU's native loop
    # Why this rank cannot run it (None: it can), as a one-line reason; checked once, before a run.
    problem: Callable[[], str | None] = field(default=_runs_anywhere, compare=False, repr=False)
    in_all: bool = True  # one of the paths `all` runs
    posts_as: str | None = None  # the path the entry names where it posts (auto: gpu); None: its own name
    # Its posting kernel runs on the GPU's SMs: --posting-sms holds it to a few (a grid, or a green context's).
    takes_sms: bool = False
    # A --beside carve-out leaves its kernel the SMs the model gives up: every carve-out asked for is run
    # beside it (a path that takes no SMs gains nothing from one: the first carve-out only).
    carvable: bool = False
    far: tuple[str, ...] = (PEER,)  # the far ends it applies to
    # Why this rank cannot run it to its own pinned pool (None: it can), checked once before an offload.
    pool_problem: Callable[[], str | None] = field(default=_runs_anywhere, compare=False, repr=False)
    # To this process's own pool: the offload plan's path (wire/offload.py's KERNEL, CE_BATCH, DIRECT;
    # None: the armed plan's, or the CPU's), and what the entry says ran it.
    pool_code: int | None = None
    pool_words: str = ""

    @property
    def posts(self) -> str:
        """What the entry's `posted_by` says where this path posted the list."""
        return self.posts_as or self.name


def _library_problem() -> str | None:
    available = devapi.load()
    return None if available.library is not None else available.note


def _copy_engines_problem() -> str | None:
    return _library_problem() or devapi.copy_engines_problem(devapi.load().library)


def _offload_problem() -> str | None:
    """Why this rank's GPU cannot move a list to its own pinned pool (offload.cu), or None."""
    if visible_gpu_count() < 1:
        return "the offload paths move a list between this rank's GPU and its pinned pool: this rank sees no GPU"
    return offload.why_not(0)


def _offload_batch_problem() -> str | None:
    return _offload_problem() or offload.copy_engines_problem()


def _offload_armed_problem() -> str | None:
    return _offload_problem() or armed.why_not()


def _armed_problem() -> str | None:
    if visible_gpu_count() < 2:  # within one GPU the first arm blocked the arming thread (armed.cu says why)
        return "the copy engines armed ahead need the other end on another GPU: this rank sees one GPU"
    return _library_problem() or armed.why_not()  # the peer's pool is mapped through UCX's plan


_GPU = DeviceSteps(
    {RMA_PUT: devapi.PUT, RMA_GET: devapi.GET},
    "gpu-initiated (device API)",
    dict(zip((RMA_PUT, RMA_GET), devapi.API_CALLS, strict=True)),
)
_COPY_ENGINES = DeviceSteps(
    {RMA_PUT: devapi.CE_PUT, RMA_GET: devapi.CE_GET},
    "copy engines (cudaMemcpyBatchAsync)",
    dict.fromkeys((RMA_PUT, RMA_GET), "cudaMemcpyBatchAsync"),
)
_ARMED = ArmedSteps(
    {},
    "copy engines armed ahead (cudaMemcpyBatchAsync behind a flag)",
    dict.fromkeys((RMA_PUT, RMA_GET), "cudaMemcpyBatchAsync"),
)

_RECORDS = (
    Posting(
        "auto", "the GPU where it can, else the CPU (the entry says why)", "gpu", steps=_GPU, in_all=False,
        posts_as="gpu", takes_sms=True, carvable=True,
    ),
    Posting(
        "gpu", "one kernel a transfer posts every block (UCX's device API)", "gpu",
        ("device memory at both ends", "one-sided", "nvcc", "UCX's device API"), device=True, reference=True,
        said=", posted by the GPU", words="UCX's device API", steps=_GPU, problem=_library_problem,
        takes_sms=True, carvable=True,
    ),
    Posting(
        "ce-batch", "the copy engines: one cudaMemcpyBatchAsync a transfer, posted by the CPU", "copy engines",
        ("device memory at both ends", "one-sided", "nvcc", "cudaMemcpyBatchAsync (CUDA 12.8)"), device=True,
        reference=True, said=", posted to the copy engines", words="the copy engines, one batched call a transfer",
        steps=_COPY_ENGINES, problem=_copy_engines_problem, far=(PEER, POOL), pool_problem=_offload_batch_problem,
        pool_code=offload.CE_BATCH, pool_words=offload.PATHS[offload.CE_BATCH],
    ),
    Posting(
        "ce-armed", "the copy engines armed ahead of the data: each transfer's cudaMemcpyBatchAsync held on the "
        "GPU behind a flag, released inside the step (arming, outside the clock, is recorded)", "copy engines",
        ("device memory at both ends", "one-sided", "nvcc", "UCX's device API (the peer's pool mapped)",
         "cudaMemcpyBatchAsync and stream memory operations"), device=True,
        said=", armed on the copy engines", words="the copy engines armed ahead, released in the step",
        steps=_ARMED, problem=_armed_problem, far=(PEER, POOL), pool_problem=_offload_armed_problem,
        pool_words=armed.ARMED_PATH,
    ),
    Posting(
        "cpu", "one ucp_put_nbx/ucp_get_nbx a block from the CPU (an offload: the CPU copies each block)", "cpu",
        words="a request per block, blocks adjacent at both ends merged into one unless --no-merge",
        far=(PEER, POOL), pool_words="the CPU copies each block (host memory at both ends)",
    ),
    Posting(
        "kernel", "an offload's copy kernel through the pinned pool's mapped pointers, a warp a block, at --pace",
        "gpu", ("a GPU", "nvcc", "pinned host memory the GPU maps"), said=", copied by the offload kernel",
        words="rdmabench's copy kernel through mapped pinned memory, at a pace", takes_sms=True, carvable=True,
        far=(POOL,), pool_problem=_offload_problem, pool_code=offload.KERNEL, pool_words=offload.PATHS[offload.KERNEL],
    ),
    Posting(
        "direct", "an offload's one cudaMemcpyAsync a block, posted by the CPU (SGLang's direct)", "copy engines",
        ("a GPU", "nvcc"), said=", one cudaMemcpyAsync a block", words="one cudaMemcpyAsync a block (direct)",
        far=(POOL,), pool_problem=_offload_problem, pool_code=offload.DIRECT, pool_words=offload.PATHS[offload.DIRECT],
    ),
)  # fmt: skip
POSTINGS: dict[str, Posting] = {record.name: record for record in _RECORDS}
REFERENCE_PATHS = tuple(record for record in POSTINGS.values() if record.reference)
CPU = POSTINGS["cpu"]  # the path every list can take
AUTO = POSTINGS["auto"]  # --posting's default


def register(record: Posting) -> Posting:
    """Add a posting path (a plugin's, or a test's): the option's help, the run's checks, the step
    protocol and the reports read it from here on. A name taken already is refused."""
    if record.name in POSTINGS:
        raise ConfigError(f"a posting path named {record.name!r} exists already")
    POSTINGS[record.name] = record
    return record


def unregister(name: str) -> None:
    """Take a path `register` added away again (a test's, at its end); the built-in paths stay."""
    if all(name != record.name for record in _RECORDS):
        POSTINGS.pop(name, None)


def posting(name: str | None) -> Posting | None:
    """The record of a path by name (None, or a name of an older or newer version: None)."""
    return POSTINGS.get(name) if name else None


def armed_ahead(record: Posting) -> bool:
    """Whether a path arms its copies ahead of the data (its steps are ArmedSteps)."""
    return isinstance(record.steps, ArmedSteps)


def pool_paths() -> tuple[Posting, ...]:
    """The paths that move a list to this process's own pinned pool (an offload), in the order `all` runs them."""
    return tuple(record for record in POSTINGS.values() if POOL in record.far)


def pool_reference() -> Posting:
    """The path an offload's contiguous reference takes: the first to a pool that is a reference."""
    return next(record for record in pool_paths() if record.reference)


def parse_postings(text: str, far: str = PEER) -> tuple[Posting, ...]:
    """--posting's paths, in order, as records (resolved here once): a path, a comma-separated list,
    `all` (every path `all` runs to `far`: another rank's pool, PEER, or this process's own, POOL)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):  # `,`, `cpu,` or nothing: a path left out, never the default in its place
        raise ConfigError(f"--posting {text!r} leaves a name empty: name each path, or all")
    # registered ones included
    everything = [name for name, record in POSTINGS.items() if record.in_all and far in record.far]
    found = [path for name in names for path in (everything if name == "all" else (name,))]
    for name in found:
        if name not in POSTINGS:
            named = ", ".join(known for known, record in POSTINGS.items() if far in record.far)
            raise ConfigError(f"unknown --posting {name!r}: choose {named}, all, or a list of them")
        if far not in POSTINGS[name].far:
            where = "an offload to this rank's own pinned pool" if far == POOL else "a list to another rank"
            raise ConfigError(f"--posting {name} does not apply to {where}: choose {', '.join(everything)}, all")
    records = [POSTINGS[name] for name in dict.fromkeys(found)]
    if AUTO in records and len(records) > 1:  # auto may choose a path the list names too: one entry for two
        raise ConfigError("--posting auto chooses a path itself: name the paths of a list (or all)")
    return tuple(records)


def posting_help() -> str:
    """--posting's help: each path and what it means."""
    return "; ".join(f"{name}: {record.meaning}" for name, record in POSTINGS.items())


def by_words() -> str:
    """What tables say under "by": each path that posts a list and how (gpu: UCX's device API, ...)."""
    return "; ".join(f"{name}: {record.words}" for name, record in POSTINGS.items() if record.words)


def problems(records: Iterable[Posting]) -> dict[str, str]:
    """Why this rank cannot run each path of `records` the GPU's side posts, by name (the one check of
    availability: a path's library is built here, before anything is measured)."""
    names = {record.name for record in records}
    found = {name: record.problem() for name, record in POSTINGS.items() if name in names and record.device}
    return {name: why for name, why in found.items() if why is not None}
