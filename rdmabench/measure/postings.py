"""Who posts a block list: one registry of posting paths (`POSTINGS`), each a record of its name, who
posts it, what it needs, why it cannot run here, its words for humans and how it posts. The option's
help, the run's agreement on what every rank can run (job/lists.py), the step protocol
(blocksteps.py), the results' settings and the reports all read these records, so a new path is its
record here, its wrapper in wire/devapi.py and its native code, and nothing else.

A path the GPU's side posts (`device`: a one-sided list of device memory at both ends) goes through
`devapi.DevicePlan`, the list as the GPU sees it, with a `DeviceSteps` strategy: the operation it runs
for a put or a get, `arm` (work outside the clock before each step: nothing for the paths here) and
`post` (the timed step). The CPU's path is the native loop's own step (`steps` None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..wire import devapi
from ..wire.native import RMA_GET, RMA_PUT


@dataclass(frozen=True)
class DeviceSteps:
    """How a path posts a list from the GPU's side through a `devapi.DevicePlan`: the plan's operation
    for a put and a get, what the protocol row says ran it, and the step in two parts: `arm`, before
    the clock, and `post`, timed. A path with work to do ahead of its data (arming copies) subclasses
    it and overrides `arm` and `post`."""

    operations: Mapping[int, int]  # RMA_PUT / RMA_GET -> the plan's operation
    how: str  # UCX's protocol report has no row for it: the row's words
    calls: Mapping[int, str]  # RMA_PUT / RMA_GET -> what the row names as the operation
    budget: bool = False  # the posting kernel holds --posting-sms (a grid, or a green context's SMs)

    def path(self, operation: int) -> str:
        """What runs the list, for the results (the entry's `path`)."""
        return devapi.PATHS[self.operations[operation]]

    def arm(self, plan: devapi.DevicePlan, operation: int, size: int) -> None:
        """Work done outside the clock before each step (none here)."""

    def post(self, plan: devapi.DevicePlan, operation: int, size: int) -> tuple[float, list[float], list[float]]:
        """The timed step: (its seconds, each transfer's, each transfer's posting)."""
        return plan.step(self.operations[operation], size)


@dataclass(frozen=True)
class Posting:
    """One posting path of a block list."""

    name: str  # --posting's word, and the entry's `posted_by`
    meaning: str  # --posting's help
    who: str  # who posts the list: "gpu", "copy engines", "cpu"
    needs: tuple[str, ...] = ()  # what it needs, in words
    # Posted from the GPU's side: device lists only (one-sided, device memory at both ends), and each a
    # contiguous reference of such a list (the fastest contiguous transfer of its bytes).
    device: bool = False
    said: str = ""  # what a list's settings add for it (results/files/entries.py): "" for the CPU's
    words: str = ""  # what tables say of it under "by"
    steps: DeviceSteps | None = None  # how the GPU's side posts it; None: the CPU's native loop
    # Why this rank cannot run it (None: it can), as a one-line reason; checked once, before a run.
    problem: Callable[[], str | None] = field(default=lambda: None, compare=False, repr=False)
    in_all: bool = True  # one of the paths `all` runs
    falls_back: bool = False  # the GPU's path where it can, else the CPU's, and the entry says why
    posts_as: str | None = None  # the path the entry names where it posts (auto: gpu); None: its own name

    @property
    def posts(self) -> str:
        """What the entry's `posted_by` says where this path posted the list."""
        return self.posts_as or self.name


def _library_problem() -> str | None:
    available = devapi.load()
    return None if available.library is not None else available.note


def _copy_engines_problem() -> str | None:
    return _library_problem() or devapi.copy_engines_problem(devapi.load().library)


_GPU = DeviceSteps(
    {RMA_PUT: devapi.PUT, RMA_GET: devapi.GET},
    "gpu-initiated (device API)",
    dict(zip((RMA_PUT, RMA_GET), devapi.API_CALLS, strict=True)),
    budget=True,
)
_COPY_ENGINES = DeviceSteps(
    {RMA_PUT: devapi.CE_PUT, RMA_GET: devapi.CE_GET},
    "copy engines (cudaMemcpyBatchAsync)",
    dict.fromkeys((RMA_PUT, RMA_GET), "cudaMemcpyBatchAsync"),
)

_RECORDS = (
    Posting(
        "auto", "the GPU where it can, else the CPU (the entry says why)", "gpu", steps=_GPU, in_all=False,
        falls_back=True, posts_as="gpu",
    ),
    Posting(
        "gpu", "one kernel a transfer posts every block (UCX's device API)", "gpu",
        ("device memory at both ends", "one-sided", "nvcc", "UCX's device API"), device=True,
        said=", posted by the GPU", words="UCX's device API", steps=_GPU, problem=_library_problem,
    ),
    Posting(
        "ce-batch", "the copy engines: one cudaMemcpyBatchAsync a transfer, posted by the CPU", "copy engines",
        ("device memory at both ends", "one-sided", "nvcc", "cudaMemcpyBatchAsync (CUDA 12.8)"), device=True,
        said=", posted to the copy engines", words="the copy engines, one batched call a transfer",
        steps=_COPY_ENGINES, problem=_copy_engines_problem,
    ),
    Posting(
        "cpu", "one ucp_put_nbx/ucp_get_nbx a block from the CPU", "cpu",
        words="a request per block, blocks adjacent at both ends merged into one unless --no-merge",
    ),
)  # fmt: skip
POSTINGS: dict[str, Posting] = {record.name: record for record in _RECORDS}
PATHS = tuple(name for name, record in POSTINGS.items() if record.in_all)  # what `all` runs, in this order
DEVICE_PATHS = tuple(name for name, record in POSTINGS.items() if record.device)
CPU = "cpu"  # the path every list can take


def posting(name: str | None) -> Posting | None:
    """The record of a path by name (None, or a name of an older or newer version: None)."""
    return POSTINGS.get(name) if name else None


def parse_postings(text: str) -> tuple[str, ...]:
    """--posting's paths, in order: a path, a comma-separated list, `all` (every path, PATHS)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    found = [path for name in names for path in (PATHS if name == "all" else (name,))]
    for name in found:
        if name not in POSTINGS:
            raise ConfigError(f"unknown --posting {name!r}: choose {', '.join(POSTINGS)}, all, or a list of them")
    found = list(dict.fromkeys(found))
    if "auto" in found and len(found) > 1:  # auto may choose a path the list names too: one entry for two
        raise ConfigError("--posting auto chooses a path itself: name the paths of a list (or all)")
    return tuple(found) or ("auto",)


def posting_help() -> str:
    """--posting's help: each path and what it means."""
    return "; ".join(f"{name}: {record.meaning}" for name, record in POSTINGS.items())


def by_words() -> str:
    """What tables say under "by": each path that posts a list and how (gpu: UCX's device API, ...)."""
    return "; ".join(f"{name}: {record.words}" for name, record in POSTINGS.items() if record.words)


def problems() -> dict[str, str]:
    """Why this rank cannot run each device path, by path (the one check of availability)."""
    return {name: why for name in DEVICE_PATHS if (why := POSTINGS[name].problem()) is not None}
