"""Copy engines armed ahead of the data (a posting path of measure/postings.py; native/armed.cu, a library of its
own that needs no UCX, built on first use with nvcc): a step's lists of device memory handed to the
copy engines before the data is ready, held on the GPU behind a flag in its memory, released by a
stream write inside the timed step.

The other end of an armed list is the peer's pool as UCX maps it into this process
(`devapi.DevicePlan.mapped`); this module only copies between device pointers. `why_not(device)` says
in one line why the path cannot run on a GPU (no nvcc, a CUDA runtime or driver without
cudaMemcpyBatchAsync or stream memory operations, no such GPU).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, TransportError
from . import native
from .native import nvccbuild
from .native.cache import FirstUse
from .native.nvccbuild import WHY_LEN, CudaLibrary

SOURCE = Path(native.__file__).with_name("armed.cu")
COMMON = nvccbuild.COMMON  # included by the source: part of what a build is of
ARM_BOUND = 8192  # armed.cu's RB_ARM_BOUND: the most copies a plan holds armed at once, over all its streams
ARM_STREAMS = 7  # armed.cu's RB_ARM_STREAMS: the most list streams a plan arms (its release stream the 8th)
ARM_PUT, ARM_GET = 0, 1
DIRECTIONS = {"put": ARM_PUT, "get": ARM_GET}
_CODES = {"RB_ARM_OK": 0, "RB_ARM_TIMEOUT": 1, "RB_ARM_CUDA": 2, "RB_ARM_NO_MEMORY": 3}
_CODES.update(RB_ARM_UNSUPPORTED=4, RB_ARM_ARGUMENT=5, RB_ARM_PUT=ARM_PUT, RB_ARM_GET=ARM_GET)
_CODES.update(RB_ARM_BOUND=ARM_BOUND, RB_ARM_STREAMS=ARM_STREAMS)
ARMED_PATH = (
    "copy engines armed ahead: cuStreamWaitValue32 on a flag in device memory, one cudaMemcpyBatchAsync a list, "
    "released by cuStreamWriteValue32"
)


def compile_command(compiler: str, output: Path) -> list[str]:
    """armed.cu alone (no UCX; the driver's calls come through the runtime: no libcuda to link)."""
    return nvccbuild.nvcc_command(compiler, output, str(SOURCE))


def library_name(compiler: str) -> str:
    """The cached library's name: a digest of every source it compiles (armed.cu, the shared header)
    and the compiler."""
    return nvccbuild.digest_name("armed", (SOURCE, COMMON), compiler)


@FirstUse
def load() -> CudaLibrary:
    """The armed-lists library, built once per source and compiler; never raises."""
    return nvccbuild.build(
        "the armed copy engines' path",
        "the armed copy engines' path needs it once",
        library_name,
        compile_command,
        configure,
    )


def configure(library: Any) -> Any:
    """The library's calls typed; OSError when its codes or bounds differ from this module's."""
    ptr, size, text, out_size = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)
    u64s, doubles, out_int = (
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.POINTER(ctypes.c_double),
        ctypes.POINTER(ctypes.c_int),
    )
    library.rb_arm_abi.restype = ctypes.c_char_p
    said = (library.rb_arm_abi() or b"").decode()  # first: a library of another source lacks the rest
    if native.parse_abi(said) != _CODES:
        raise OSError(f"armed.cu and armed.py disagree on their codes ({said})")
    library.rb_arm_layout.argtypes = [size, ctypes.c_int, size, out_size, out_size, out_size]
    library.rb_arm_layout.restype = None
    library.rb_arm_unsupported.argtypes = [ctypes.c_int, text, size]
    library.rb_arm_unsupported.restype = ctypes.c_int
    library.rb_arm_create.argtypes = [ctypes.c_int, u64s, u64s, u64s, size, ctypes.c_int, size, ctypes.POINTER(ptr)]
    library.rb_arm_create.argtypes += [text, size]
    library.rb_arm_create.restype = ctypes.c_int
    library.rb_arm_arm.argtypes = [ptr, doubles, text, size]
    library.rb_arm_arm.restype = ctypes.c_int
    library.rb_arm_release.argtypes = [ptr, ctypes.c_double, doubles, doubles, doubles, text, size]
    library.rb_arm_release.restype = ctypes.c_int
    library.rb_arm_launch.argtypes = [ptr, doubles, text, size]
    library.rb_arm_launch.restype = ctypes.c_int
    library.rb_arm_land.argtypes = [ptr, ctypes.c_double, doubles, doubles, text, size]
    library.rb_arm_land.restype = ctypes.c_int
    library.rb_arm_state.argtypes = [ptr, out_int, out_int]
    library.rb_arm_state.restype = None
    library.rb_arm_describe.argtypes = [ptr, out_int, out_int, out_int, out_size, out_int, out_size]
    library.rb_arm_describe.restype = None
    library.rb_arm_destroy.argtypes = [ptr]
    library.rb_arm_destroy.restype = None
    return library


def why_not(device: int = 0) -> str | None:
    """Why the armed copy engines cannot run on GPU `device`, in one line (no nvcc, a CUDA runtime or driver
    without cudaMemcpyBatchAsync or stream memory operations, no such GPU), or None. Probes the GPU:
    a flag in its memory written, then waited for, by a stream."""
    available = load()
    if available.library is None:
        return available.note
    why = ctypes.create_string_buffer(WHY_LEN)
    if available.library.rb_arm_unsupported(device, why, WHY_LEN) != 0:
        return why.value.decode(errors="replace")
    return None


@dataclass(frozen=True)
class ArmLayout:
    """How a step of armed lists is cut (armed.cu's rb_arm_layout): `waves` of at most `bound` copies
    (the first armed ahead, the rest submitted behind the release), `chunks` (a list's copies within
    one wave: one batch call each), and the lists armed whole ahead of the release."""

    waves: int
    chunks: int
    armed_lists: int
    bound: int
    armed_copies: int  # copies armed ahead (the first wave): what arm()'s CPU time is spent on


def arm_layout(total: int, lists: int, bound: int = ARM_BOUND) -> ArmLayout:
    """The layout of `total` copies in `lists` lists of equal count, armed `bound` at a time."""
    per, chunks, whole = total // lists, 0, 0
    for t in range(lists):
        first, end = t * per, (t + 1) * per
        chunks += (end - 1) // bound - first // bound + 1 if end > first else 0
        whole += end <= bound
    return ArmLayout(-(-total // bound), chunks, whole, bound, min(total, bound))


def check_armed_list(
    src: Any, dst: Any, sizes: Any, lists: int, direction: str, bound: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The list's sources, targets and sizes as uint64 arrays, checked: one size per copy, none empty,
    no null pointer, lists of equal count, a known direction, a bound of 1 to ARM_BOUND. ConfigError
    in one line otherwise."""
    if direction not in DIRECTIONS:
        raise ConfigError(f"an armed list is a put or a get, not {direction!r}")
    if not 1 <= bound <= ARM_BOUND:
        raise ConfigError(f"an armed list's bound is 1 to {ARM_BOUND} copies at once, not {bound}")
    try:
        found = [np.ascontiguousarray(np.asarray(x, dtype=np.int64).reshape(-1)) for x in (src, dst, sizes)]
    except (TypeError, ValueError, OverflowError):
        raise ConfigError("an armed list's pointers and sizes are integers") from None
    total = len(found[0])
    if total == 0 or any(len(x) != total for x in found):
        raise ConfigError(
            f"an armed list needs as many targets and sizes as sources, and some: {[len(x) for x in found]}"
        )
    if lists < 1 or total % lists:
        raise ConfigError(f"{total} copies do not split into {lists} armed lists of equal count")
    if (found[0] == 0).any() or (found[1] == 0).any():
        raise ConfigError("an armed list's copy has a null source or target")
    if (found[2] <= 0).any():
        raise ConfigError("an armed list's copies are each at least one byte")
    return tuple(x.view(np.uint64) for x in found)  # type: ignore[return-value]


@dataclass(frozen=True)
class Released:
    """One release: the host's seconds from the release to the last copy landed, each list's seconds
    from the release to its landing (CUDA events), and the host's seconds submitting waves past the
    bound behind the release (0 when the step was armed whole)."""

    wall_seconds: float
    list_seconds: list[float]
    late_seconds: float


class ArmedPlan:
    """A step of `lists` lists (copies src[i] -> dst[i] of sizes[i] bytes, device memory, list after
    list) armed ahead on this process's GPU: `direction` "put" (the sources are this GPU's) or "get"
    (the targets are). Made once a round; `arm()` before each timed step (outside the clock),
    `release()` inside it (returns when every copy has landed), `close()` at the end. `launch()` and
    `land()` are `release()` in two: between them a step of one wave (`overlaps`) may arm the next
    (`arm()`), so that its CPU time runs while the copies fly. Keeps the arrays it was given alive for
    its life."""

    def __init__(
        self, src: Any, dst: Any, sizes: Any, lists: int = 1, direction: str = "put", bound: int = ARM_BOUND,
        timeout: float = 60.0, where: str = "",
    ):  # fmt: skip
        self._src, self._dst, self._sizes = check_armed_list(src, dst, sizes, lists, direction, bound)
        self._where, self._timeout, self.lists, self.direction = where, timeout, lists, direction
        self._plan = ctypes.c_void_p()
        available = load()
        if available.library is None:
            raise TransportError(self._said(available.note))
        self._lib = available.library
        u64s, why = ctypes.POINTER(ctypes.c_uint64), ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_arm_create(
            DIRECTIONS[direction], *(x.ctypes.data_as(u64s) for x in (self._src, self._dst, self._sizes)),
            len(self._src), lists, bound, ctypes.byref(self._plan), why, WHY_LEN,
        )  # fmt: skip
        if rc != 0:
            self.close()
            raise TransportError(self._said(why.value.decode(errors="replace")))
        self.layout = arm_layout(len(self._src), lists, bound)
        self.arm_seconds = 0.0  # the host's time in the last arm()
        self.armed = False  # a step is armed and not yet released
        self.flying = False  # a step is released and not yet landed

    def _said(self, line: str) -> str:
        return f"{line} ({self._where})" if self._where else line

    def _check(self, rc: int, why: Any) -> None:
        """`armed` and `flying` as the plan has them after a call (a failed one too), then the call's error."""
        armed, flying = ctypes.c_int(), ctypes.c_int()
        if self._plan.value:
            self._lib.rb_arm_state(self._plan, ctypes.byref(armed), ctypes.byref(flying))
        self.armed, self.flying = bool(armed.value), bool(flying.value)
        if rc != 0:
            raise TransportError(self._said(why.value.decode(errors="replace")))

    def describe(self) -> dict[str, int]:
        """What the plan was made as: its GPU, the other end's, waves, chunks, streams and bound."""
        ints = [ctypes.c_int() for _ in range(4)]
        chunks, bound = ctypes.c_size_t(), ctypes.c_size_t()
        device, peer, waves, streams = ints
        self._lib.rb_arm_describe(self._plan, *map(ctypes.byref, (device, peer, waves, chunks, streams, bound)))
        found = {"device": device, "peer": peer, "waves": waves, "chunks": chunks, "streams": streams, "bound": bound}
        return {name: int(value.value) for name, value in found.items()}

    def arm(self) -> float:
        """Arm the step's first wave (every list of it held on the GPU behind the flag): the host's
        seconds in the arming calls, also kept as `arm_seconds`."""
        seconds, why = ctypes.c_double(), ctypes.create_string_buffer(WHY_LEN)
        self._check(self._lib.rb_arm_arm(self._plan, ctypes.byref(seconds), why, WHY_LEN), why)
        self.arm_seconds = seconds.value
        return seconds.value

    @property
    def overlaps(self) -> bool:
        """Whether the next step may be armed while this one flies (a step of one wave: the GPU then
        holds at most one wave armed, behind copies already released)."""
        return self.layout.waves == 1

    @property
    def arm_seconds_per_descriptor(self) -> float:
        """The last arm()'s host seconds per copy it armed (the entry's cpu_us_per_descriptor, in s)."""
        return self.arm_seconds / self.layout.armed_copies

    def release(self) -> Released:
        """Release the armed lists and wait until every copy has landed (at most the plan's timeout)."""
        wall, late = ctypes.c_double(), ctypes.c_double()
        seconds, why = (ctypes.c_double * self.lists)(), ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_arm_release(
            self._plan, self._timeout, ctypes.byref(wall), seconds, ctypes.byref(late), why, WHY_LEN
        )
        self._check(rc, why)
        return Released(wall.value, list(seconds), late.value)

    def launch(self) -> float:
        """Release the armed lists without waiting: the host's seconds submitting waves past the bound."""
        late, why = ctypes.c_double(), ctypes.create_string_buffer(WHY_LEN)
        self._check(self._lib.rb_arm_launch(self._plan, ctypes.byref(late), why, WHY_LEN), why)
        return late.value

    def land(self) -> Released:
        """Wait until every copy of the last launch has landed (at most the plan's timeout from it); the
        later waves were submitted by launch(), whose seconds it returned."""
        wall = ctypes.c_double()
        seconds, why = (ctypes.c_double * self.lists)(), ctypes.create_string_buffer(WHY_LEN)
        self._check(self._lib.rb_arm_land(self._plan, self._timeout, ctypes.byref(wall), seconds, why, WHY_LEN), why)
        return Released(wall.value, list(seconds), 0.0)

    def close(self) -> None:
        if self._plan.value:
            self._lib.rb_arm_destroy(self._plan)
            self._plan = ctypes.c_void_p()

    def __enter__(self) -> ArmedPlan:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
