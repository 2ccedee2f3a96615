"""Copy engines armed ahead of the data (posting path `ce-armed`: wire/armed.ArmedPlan, native/armed.cu).

Where no GPU is: the library compiles for Hopper without a warning, its codes and bound agree with
the wrapper's, its cut of a step into waves is the wrapper's, and what it refuses it refuses in one
line. On the GPU machine (`-m gpu`): random 4 KiB blocks armed, held until the release, released,
and every landed byte compared, for puts and gets between two GPUs (refused within one), and for lists
bigger than the bound (armed in waves).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rdmabench.errors import ConfigError, TransportError
from rdmabench.hardware.devstack import nvcc
from rdmabench.hardware.gpu import import_cupy, visible_gpu_count
from rdmabench.wire import armed

_HAVE_NVCC = nvcc() is not None and shutil.which(str(nvcc())) is not None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """armed.cu built for Hopper with every warning an error, and loaded (no GPU needed to load it)."""
    if not _HAVE_NVCC:
        pytest.skip("needs nvcc")
    output = tmp_path_factory.mktemp("armed") / "armed.so"
    command = armed.compile_command(str(nvcc()), output)
    command = ["-arch=sm_90" if part == "-arch=native" else part for part in command]
    proc = subprocess.run(
        [*command, "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    return armed.configure(ctypes.CDLL(str(output)))


def test_armed_cu_compiles_for_hopper_and_says_its_bound(built: Any) -> None:
    said = built.rb_arm_abi().decode()
    assert f"RB_ARM_BOUND={armed.ARM_BOUND};" in said and f"RB_ARM_STREAMS={armed.ARM_STREAMS};" in said


@pytest.mark.parametrize(
    ("total", "lists", "bound", "expected"),
    [
        (1024, 1, armed.ARM_BOUND, (1, 1, 1)),  # the usual list: armed whole
        (10000, 1, armed.ARM_BOUND, (2, 2, 0)),  # one list past the bound: two waves, nothing armed whole
        (16384, 16, armed.ARM_BOUND, (2, 16, 8)),  # 16 lists of 1,024: half armed ahead
        (300, 3, 128, (3, 5, 1)),  # lists crossing waves: 1 + 2 + 2 chunks, the first armed whole
        (384, 3, 128, (3, 3, 1)),  # lists on the waves' edges
    ],
)
def test_a_step_is_cut_into_waves_of_the_bound_alike_in_c_and_python(
    built: Any, total: int, lists: int, bound: int, expected: tuple[int, int, int]
) -> None:
    ours = armed.arm_layout(total, lists, bound)
    assert (ours.waves, ours.chunks, ours.armed_lists) == expected
    assert ours.armed_copies == min(total, bound) and ours.bound == bound
    waves, chunks, whole = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_size_t()
    built.rb_arm_layout(total, lists, bound, ctypes.byref(waves), ctypes.byref(chunks), ctypes.byref(whole))
    assert (waves.value, chunks.value, whole.value) == expected


def test_the_library_refuses_a_plan_it_cannot_make_in_one_line(built: Any) -> None:
    """Checked before any GPU is touched: a direction, lists of equal count, a bound past RB_ARM_BOUND."""
    u64s = ctypes.POINTER(ctypes.c_uint64)
    pointers = (ctypes.c_uint64 * 4)(1, 2, 3, 4)
    plan, why = ctypes.c_void_p(), ctypes.create_string_buffer(256)
    for direction, lists, bound, said in [
        (7, 1, 0, "neither a put"),
        (armed.ARM_PUT, 3, 0, "4 copies in 3 lists"),
        (armed.ARM_GET, 1, armed.ARM_BOUND + 1, f"at most {armed.ARM_BOUND}"),
    ]:
        rc = built.rb_arm_create(
            direction, ctypes.cast(pointers, u64s), ctypes.cast(pointers, u64s), ctypes.cast(pointers, u64s), 4,
            lists, bound, ctypes.byref(plan), why, 256,
        )  # fmt: skip
        assert rc == 5 and plan.value is None, (rc, why.value)
        assert said in why.value.decode() and "\n" not in why.value.decode()


@pytest.mark.skipif(visible_gpu_count() > 0, reason="a machine without a GPU")
def test_without_a_gpu_the_library_says_why_in_one_line(built: Any) -> None:
    why = ctypes.create_string_buffer(256)
    assert built.rb_arm_unsupported(0, why, 256) == 4
    line = why.value.decode()
    assert line and "\n" not in line and ("driver" in line or "no GPU" in line), line


def test_a_library_whose_bound_differs_is_refused(tmp_path: Path) -> None:
    """The wrapper's ARM_BOUND mirrors the library's: a library that would arm more is not loaded."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    codes = ";".join(f"{name}={value}" for name, value in armed._CODES.items()).replace(
        f"RB_ARM_BOUND={armed.ARM_BOUND}", "RB_ARM_BOUND=30000"
    )
    source = tmp_path / "codes.c"
    source.write_text(f'const char *rb_arm_abi(void) {{ return "{codes};"; }}\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "codes.so"), str(source)], check=True)
    with pytest.raises(OSError, match="disagree on their codes"):
        armed.configure(ctypes.CDLL(str(tmp_path / "codes.so")))


def test_the_armed_build_is_named_by_every_source_it_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """armed.cu, the header it includes and the compiler each give the cached library a new name: a
    build of an older source is never loaded for a newer one."""
    before = armed.library_name("nvcc")
    assert before.startswith("armed-") and armed.library_name("/other/nvcc") != before
    for name in ("SOURCE", "COMMON"):
        other = tmp_path / f"{name}.changed"
        other.write_bytes(getattr(armed, name).read_bytes() + b"\n/* changed */\n")
        with monkeypatch.context() as patch:
            patch.setattr(armed, name, other)
            assert armed.library_name("nvcc") != before, name
    assert armed.library_name("nvcc") == before


def test_without_nvcc_ce_armed_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDMABENCH_NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(armed.load, "kept", None)
    line = armed.why_not(0)
    assert line is not None and "cannot build the armed copy engines' path" in line and "no-nvcc" in line


@pytest.mark.parametrize(
    ("src", "dst", "sizes", "lists", "direction", "bound", "said"),
    [
        ([1, 2], [3, 4], [4096, 4096], 1, "sideways", armed.ARM_BOUND, "a put or a get"),
        ([1, 2], [3, 4], [4096, 4096], 1, "put", 0, "bound is 1 to"),
        ([1, 2], [3, 4], [4096, 4096], 1, "get", armed.ARM_BOUND + 1, "bound is 1 to"),
        ([1, 2], [3], [4096, 4096], 1, "put", 8, "as many targets and sizes"),
        ([], [], [], 1, "put", 8, "and some"),
        ([1, 2, 3], [4, 5, 6], [1, 1, 1], 2, "put", 8, "3 copies do not split into 2"),
        ([1, 0], [3, 4], [1, 1], 1, "put", 8, "null source or target"),
        ([1, 2], [3, 4], [1, 0], 1, "get", 8, "at least one byte"),
        ([1, 2], [3, 4], [1, -5], 1, "get", 8, "at least one byte"),
        (["x"], [3], [1], 1, "get", 8, "integers"),
    ],
)
def test_an_armed_list_is_checked_before_the_gpu_is_asked(
    src: list[Any], dst: list[Any], sizes: list[Any], lists: int, direction: str, bound: int, said: str
) -> None:
    with pytest.raises(ConfigError, match=said) as caught:
        armed.ArmedPlan(src, dst, sizes, lists, direction, bound)
    assert "\n" not in str(caught.value)


def test_a_checked_list_is_three_uint64_arrays() -> None:
    src, dst, sizes = armed.check_armed_list([1, 2], np.array([3, 4]), (5, 6), 2, "put", 1)
    assert all(x.dtype == np.uint64 for x in (src, dst, sizes)) and dst.tolist() == [3, 4] and sizes.tolist() == [5, 6]


# --- on the GPU machine -------------------------------------------------------------------------------

BLOCK = 4096
_needs_gpu = pytest.mark.skipif(visible_gpu_count() == 0, reason="needs a CUDA GPU and CuPy")


def _pair(count: int) -> list[Any]:
    """(local, other) GPU pairs to run on: GPU 0 and 1 where there are two (within one GPU the first arm
    blocked the arming thread on an H100: a rank that sees one GPU skips the path, test_postings)."""
    return [pytest.param((0, 1), id="two-gpus", marks=pytest.mark.skipif(count < 2, reason="needs two GPUs"))]


def _peers(cupy: Any, gpus: tuple[int, int]) -> None:
    """Each GPU of the pair may reach the other's memory."""
    for gpu in set(gpus):
        with cupy.cuda.Device(gpu):
            for other in set(gpus) - {gpu}:
                try:
                    cupy.cuda.runtime.deviceEnablePeerAccess(other)
                except cupy.cuda.runtime.CUDARuntimeError:
                    pass  # enabled already


class _Pools:
    """Two pools of 4 KiB slots, the source filled with a seeded pattern and the target zeroed, and a
    random list of `total` blocks between them (slots drawn without repetition from pools four times
    larger), in the direction asked: a put's sources on the local GPU, a get's targets."""

    def __init__(self, cupy: Any, gpus: tuple[int, int], direction: str, total: int, seed: int = 5):
        self.cupy, self.total = cupy, total
        src_gpu, dst_gpu = gpus if direction == "put" else gpus[::-1]
        slots, rng = 4 * total, np.random.default_rng(seed)
        _peers(cupy, gpus)
        with cupy.cuda.Device(src_gpu):
            self.src = cupy.asarray(rng.integers(0, 256, size=(slots, BLOCK), dtype=np.uint8))
        with cupy.cuda.Device(dst_gpu):
            self.dst = cupy.zeros((slots, BLOCK), dtype=cupy.uint8)
        for gpu in set(gpus):
            cupy.cuda.Device(gpu).synchronize()
        self.src_slots = rng.permutation(slots)[:total]
        self.dst_slots = rng.permutation(slots)[:total]

    def arguments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = self.src.data.ptr + self.src_slots.astype(np.int64) * BLOCK
        dst = self.dst.data.ptr + self.dst_slots.astype(np.int64) * BLOCK
        return src, dst, np.full(self.total, BLOCK, dtype=np.int64)

    def target(self) -> np.ndarray:
        """The target pool on the host, read on a stream of its own (the armed streams never waited for)."""
        with self.cupy.cuda.Device(self.dst.device.id):
            stream = self.cupy.cuda.Stream(non_blocking=True)
            found = self.cupy.asnumpy(self.dst, stream=stream)
            stream.synchronize()
        return found

    def check(self) -> None:
        """Every block landed in its slot, byte for byte, and no other slot was written."""
        found, source = self.target(), self.cupy.asnumpy(self.src)
        wrong = np.flatnonzero((found[self.dst_slots] != source[self.src_slots]).any(axis=1))
        assert wrong.size == 0, f"{wrong.size} of {self.total} blocks wrong, first copy {wrong[:5].tolist()}"
        untouched = np.ones(len(found), dtype=bool)
        untouched[self.dst_slots] = False
        assert not found[untouched].any(), "a slot outside the list was written"

    def refill(self, step: int) -> None:
        """A new pattern before a step: every source byte moved on by 1 to 255 (never back to itself)."""
        with self.cupy.cuda.Device(self.src.device.id):
            self.src += np.uint8(step % 255 + 1)
            self.cupy.cuda.Device().synchronize()


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("gpus", _pair(visible_gpu_count()))
@pytest.mark.parametrize("direction", ["put", "get"])
@pytest.mark.parametrize("lists", [1, 4])
def test_armed_blocks_wait_for_the_release_and_all_land(gpus: tuple[int, int], direction: str, lists: int) -> None:
    """1,024 random 4 KiB blocks a list: nothing lands while armed, every byte lands once released,
    three steps running (each a new pattern), each list timed from release to landed."""
    pools = _Pools(import_cupy(), gpus, direction, 1024 * lists)
    with armed.ArmedPlan(*pools.arguments(), lists=lists, direction=direction, timeout=30, where="test") as plan:
        shape = plan.describe()
        assert shape["device"] == gpus[0] and shape["peer"] == gpus[1] and shape["waves"] == 1
        assert shape["streams"] == lists and plan.layout.armed_lists == lists
        for step in range(3):
            pools.refill(100 + step)
            assert plan.arm() > 0 and plan.arm_seconds == pytest.approx(plan.arm_seconds_per_descriptor * 1024 * lists)
            if step == 0:
                time.sleep(0.05)  # ample for 4 MiB to land, were it not held
                assert not pools.target().any(), "an armed copy moved before the release"
            released = plan.release()
            pools.check()
            assert len(released.list_seconds) == lists and released.late_seconds < 1e-3  # no later wave: an empty loop
            assert all(0 < s <= released.wall_seconds + 1e-3 for s in released.list_seconds), released


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("gpus", _pair(visible_gpu_count()))
@pytest.mark.parametrize(
    ("total", "lists", "bound"),
    [(armed.ARM_BOUND + 1808, 2, armed.ARM_BOUND), (4095, 3, 1000), (9 * 500, 9, 2000)],
    ids=["past-the-bound", "small-bound", "lists-sharing-streams"],
)
def test_a_list_bigger_than_the_bound_is_armed_in_waves_and_all_lands(
    gpus: tuple[int, int], total: int, lists: int, bound: int
) -> None:
    """No more than the bound armed ahead; the rest submitted behind the release, and every byte lands."""
    pools = _Pools(import_cupy(), gpus, "put", total, seed=9)
    with armed.ArmedPlan(*pools.arguments(), lists=lists, direction="put", bound=bound, timeout=60) as plan:
        layout = armed.arm_layout(total, lists, bound)
        shape = plan.describe()
        assert layout.waves > 1 and shape["waves"] == layout.waves == plan.layout.waves
        assert shape["chunks"] == layout.chunks and shape["streams"] == min(lists, armed.ARM_STREAMS)
        for step in range(2):
            pools.refill(200 + step)
            plan.arm()
            released = plan.release()
            pools.check()
            assert released.late_seconds > 0 and all(s > 0 for s in released.list_seconds)


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("gpus", _pair(visible_gpu_count()))
@pytest.mark.parametrize("direction", ["put", "get"])
def test_the_next_step_armed_while_this_one_flies_lands_after_it(gpus: tuple[int, int], direction: str) -> None:
    """A streak's step (ArmedSteps.post): launched, the next step armed while it flies, landed. Every
    byte lands each step, the armed next step moves nothing until its own launch, and the GPU's
    times are the step's: a launch while one flies, a land with none in flight and a step of two
    waves armed while one flies are each refused in one line."""
    cupy = import_cupy()
    pools = _Pools(cupy, gpus, direction, 2048, seed=11)
    with cupy.cuda.Device(pools.src.device.id):
        stream = cupy.cuda.Stream(non_blocking=True)
        pools.refill(0)  # its kernel loaded now: loading one may wait for the whole GPU, armed copies too
    with armed.ArmedPlan(*pools.arguments(), lists=2, direction=direction, timeout=30, where="test") as plan:
        assert plan.overlaps
        plan.arm()
        for step in range(3):
            plan.launch()
            with pytest.raises(TransportError, match="land it first"):
                plan.launch()
            plan.arm()  # the next step, behind this one's copies
            released = plan.land()
            assert plan.armed and not plan.flying and all(s > 0 for s in released.list_seconds)
            pools.check()
            with cupy.cuda.Device(pools.src.device.id):  # never the whole GPU: the next step waits on it
                with stream:
                    pools.src += np.uint8(step + 1)
                stream.synchronize()
            time.sleep(0.02)
            with pytest.raises(AssertionError, match="blocks wrong"):
                pools.check()  # the new pattern stays put until the armed step is launched
        plan.release()
        pools.check()
        with pytest.raises(TransportError, match="no release is in flight"):
            plan.land()
    waves = _Pools(cupy, gpus, "put", 3000, seed=12)
    with armed.ArmedPlan(*waves.arguments(), lists=3, bound=1000, timeout=30) as plan:
        assert not plan.overlaps
        plan.arm()
        plan.launch()
        with pytest.raises(TransportError, match="more than one wave"):
            plan.arm()
        plan.land()
        waves.check()


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("gpus", _pair(visible_gpu_count()))
def test_a_landing_that_times_out_leaves_nothing_waiting_on_the_gpu(gpus: tuple[int, int]) -> None:
    """A streak's step whose landing times out (8 MiB blocks, ~22 ms of copies on NVLink, against a
    timeout of a microsecond; arming the next 1,024 copies takes about 1 ms, so its copies are still in
    flight when it lands) with the next step armed behind it: one line, the step armed ahead let go
    with it, and after close() the whole GPU drains and every block lands (a wait left on the GPU would
    hold its hardware queue, and every stream sharing it, for ever)."""
    cupy, block, count = import_cupy(), 8 << 20, 1024
    _peers(cupy, gpus)
    with cupy.cuda.Device(gpus[0]):
        pattern = (cupy.arange(block, dtype=cupy.int64) % 251).astype(cupy.uint8)
        src = cupy.tile(pattern, count)
        cupy.cuda.Device().synchronize()
    with cupy.cuda.Device(gpus[1]):
        dst = cupy.zeros(count * block, dtype=cupy.uint8)
        cupy.cuda.Device().synchronize()
    offsets = np.arange(count, dtype=np.int64) * block
    sizes = np.full(count, block, dtype=np.int64)
    plan = armed.ArmedPlan(src.data.ptr + offsets, dst.data.ptr + offsets, sizes, 2, "put", timeout=1e-6, where="test")
    try:
        plan.arm()
        plan.launch()
        plan.arm()
        with pytest.raises(TransportError, match="had not"):
            plan.land()
        assert not plan.armed  # the step armed ahead went with the timeout
    finally:
        plan.close()
    for gpu in gpus:
        with cupy.cuda.Device(gpu):
            cupy.cuda.Device().synchronize()  # returns: nothing is left waiting on the flag
    with cupy.cuda.Device(gpus[1]):
        expected = (cupy.arange(block, dtype=cupy.int64) % 251).astype(cupy.uint8)
        assert bool((dst.reshape(count, block) == expected).all())


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs two GPUs")
def test_a_probe_of_another_gpu_leaves_the_callers_gpu_current() -> None:
    """why_not(0) from a process on GPU 1 probes GPU 0 and sets GPU 1 back (a rank that probed GPU
    0 once allocated its next pools there)."""
    cupy = import_cupy()
    with cupy.cuda.Device(1):
        assert armed.why_not(0) is None
        assert cupy.cuda.runtime.getDevice() == 1


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs two GPUs")
def test_the_armed_path_refuses_in_one_line_on_the_gpu() -> None:
    """Host memory, a release not armed, an arm twice, a GPU that is not there: each one line, and the
    plan still releases; a plan closed while armed neither hangs nor leaves its copies waiting."""
    cupy = import_cupy()
    assert armed.why_not(0) is None
    missing = armed.why_not(visible_gpu_count())
    assert missing is not None and "no GPU" in missing
    pools = _Pools(cupy, (0, 1), "put", 64)
    src, dst, sizes = pools.arguments()
    host = np.zeros(64 * BLOCK, dtype=np.uint8)
    on_host = host.ctypes.data + np.arange(64, dtype=np.int64) * BLOCK
    with pytest.raises(TransportError, match="is not device memory"):
        armed.ArmedPlan(src, on_host, sizes)
    with armed.ArmedPlan(src, dst, sizes, timeout=30) as plan:
        with pytest.raises(TransportError, match="not armed"):
            plan.release()
        plan.arm()
        with pytest.raises(TransportError, match="armed already"):
            plan.arm()
        plan.release()
        pools.check()
    pools.refill(7)
    with armed.ArmedPlan(src, dst, sizes, timeout=30) as plan:
        plan.arm()  # and closed unreleased: the teardown lets the list go instead of waiting for ever
    pools.check()
