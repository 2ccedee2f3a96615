"""KV offload between a GPU's pool and this process's pinned pool (wire/offload.py, native/offload.cu).

Where no GPU is: the library compiles for Hopper without a warning, its codes agree with the wrapper's,
a pace is read and refused in one line, and a plan is refused in one line. On the GPU machine
(`-m gpu`): random blocks swapped out and in by every path (the kernel at several paces, the copy
engines batched, armed and direct, the contiguous copy), every byte compared at both ends.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rdmabench.errors import ConfigError, TransportError
from rdmabench.hardware.devstack import nvcc
from rdmabench.hardware.gpu import import_cupy, visible_gpu_count
from rdmabench.wire import armed, offload

_HAVE_NVCC = nvcc() is not None and shutil.which(str(nvcc())) is not None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """offload.cu built for Hopper with every warning an error, and loaded (no GPU needed to load it)."""
    if not _HAVE_NVCC:
        pytest.skip("needs nvcc")
    output = tmp_path_factory.mktemp("offload") / "offload.so"
    command = offload.compile_command(str(nvcc()), output)
    command = ["-arch=sm_90" if part == "-arch=native" else part for part in command]
    proc = subprocess.run(
        [*command, "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    return offload.configure(ctypes.CDLL(str(output)))


def test_offload_cu_compiles_for_hopper_and_says_its_codes(built: Any) -> None:
    said = built.rb_off_abi().decode()
    assert f"LANE_BYTES={offload.LANE_BYTES};" in said and f"RB_OFF_MAX_THREADS={offload.MAX_THREADS};" in said


def test_a_library_whose_codes_differ_is_refused(tmp_path: Path) -> None:
    if not _HAVE_NVCC:
        pytest.skip("needs nvcc")
    source = tmp_path / "offload.cu"
    source.write_text(offload.SOURCE.read_text().replace("LANE_BYTES=128;", "LANE_BYTES=256;"))
    output = tmp_path / "other.so"
    command = [str(nvcc()), "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-I", str(offload.COMMON.parent)]
    proc = subprocess.run([*command, "-o", str(output), str(source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(OSError, match="disagree on their codes"):
        offload.configure(ctypes.CDLL(str(output)))


@pytest.mark.parametrize(
    ("text", "grid", "in_flight"),
    [("8x2x128", 16, 2048), ("16x1x128", 16, 2048), ("4x4x256", 16, 4096), (" 1x1x32 ", 1, 32)],
)
def test_a_pace_is_sms_ctas_and_threads_and_counts_its_threads_in_flight(text: str, grid: int, in_flight: int) -> None:
    pace = offload.Pace.parse(text)
    assert (pace.grid, pace.in_flight, pace.bytes_in_flight) == (grid, in_flight, in_flight * offload.LANE_BYTES)
    assert offload.Pace.parse(pace.label) == pace


@pytest.mark.parametrize("text", ["8x2", "8x2x100", "0x1x128", "8x0x128", "8x2x2048", "8x2x16", "ax2x128", "8x2x٣٢"])
def test_a_pace_that_cannot_run_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ConfigError) as found:
        offload.Pace.parse(text)
    assert "\n" not in str(found.value) and "pace" in str(found.value)


def test_the_library_without_a_gpu_says_why_in_one_line(built: Any) -> None:
    if visible_gpu_count() > 0:
        pytest.skip("a GPU is here")
    why = ctypes.create_string_buffer(512)
    assert built.rb_off_unsupported(0, why, 512) != 0
    assert "no GPU 0" in why.value.decode()
    assert built.rb_off_sm_count(0) == 0


def test_a_plan_is_refused_in_one_line_before_or_without_the_gpu() -> None:
    with pytest.raises(ConfigError, match="as many host as device offsets"):
        offload.OffloadPlan(0, (1, 4096), (2, 4096), [0, 4096], [0], 4096)
    with pytest.raises(ConfigError, match="not negative"):
        offload.OffloadPlan(0, (1, 4096), (2, 4096), [-4096], [0], 4096)
    if visible_gpu_count() > 0:
        return
    with pytest.raises(TransportError) as found:
        offload.OffloadPlan(0, (1, 4096), (2, 4096), [0], [0], 4096)
    assert "\n" not in str(found.value)


class _Pools:
    """A device pool and a pinned host pool of `slots` blocks each on GPU `gpu`, `blocks` of them at
    random slots, and the plan of them."""

    def __init__(self, cupy: Any, gpu: int, blocks: int, block: int, slots: int):
        self.cupy, self.block, self.nbytes = cupy, block, slots * block
        with cupy.cuda.Device(gpu):
            self.dev = cupy.zeros(self.nbytes, dtype=cupy.uint8)
        self.host_ptr = cupy.cuda.runtime.hostAlloc(self.nbytes, 1 | 2)
        self.host = np.ctypeslib.as_array((ctypes.c_uint8 * self.nbytes).from_address(self.host_ptr))
        rng = np.random.default_rng(blocks + block)
        self.dev_off = rng.permutation(slots)[:blocks].astype(np.int64) * block
        self.host_off = rng.permutation(slots)[:blocks].astype(np.int64) * block
        self.plan = offload.OffloadPlan(
            gpu, (self.dev.data.ptr, self.nbytes), (self.host_ptr, self.nbytes), self.dev_off, self.host_off, block
        )
        self.source = rng.integers(0, 256, self.nbytes, dtype=np.uint8)

    def fill(self, direction: int) -> None:
        if direction == offload.OUT:
            self.dev[...] = self.cupy.asarray(self.source)
            self.host[...] = 0
        else:
            self.host[...] = self.source
            self.dev[...] = 0
        self.cupy.cuda.runtime.deviceSynchronize()

    def landed(self, contiguous: bool = False) -> bool:
        dev = self.cupy.asnumpy(self.dev)
        if contiguous:
            n = len(self.dev_off) * self.block
            return bool(np.array_equal(dev[:n], self.host[:n]))
        return all(
            np.array_equal(dev[d : d + self.block], self.host[h : h + self.block])
            for d, h in zip(self.dev_off, self.host_off, strict=True)
        )

    def close(self) -> None:
        self.plan.close()
        self.cupy.cuda.runtime.freeHost(self.host_ptr)


def _pools(blocks: int, block: int, slots: int) -> _Pools:
    cupy = import_cupy()
    if cupy is None or visible_gpu_count() < 1:
        pytest.skip("needs a GPU")
    return _Pools(cupy, 0, blocks, block, slots)


@pytest.mark.gpu
@pytest.mark.parametrize("direction", [offload.OUT, offload.IN])
@pytest.mark.parametrize("block", [4096, 65536, 4112])
def test_every_path_moves_every_byte_both_ways(direction: int, block: int) -> None:
    """The kernel at three paces (one with more warps than blocks, one with fewer), the batch, direct
    and the contiguous copy: every block lands whole, and nothing else of the target pool is touched."""
    pools = _pools(300, block, 700)
    try:
        paces = [offload.Pace.parse(p) for p in ("1x1x32", "4x2x128", "64x4x256")]
        for path, pace in [(offload.KERNEL, p) for p in paces] + [(offload.CE_BATCH, None), (offload.DIRECT, None)]:
            pools.fill(direction)
            step = pools.plan.step(path, direction, 0, None, 2, pace)
            assert step.gpu_seconds > 0 and step.post_seconds > 0
            assert pools.landed(), (path, pace)
            target = pools.host if direction == offload.OUT else pools.cupy.asnumpy(pools.dev)
            untouched = np.ones(pools.nbytes, dtype=bool)
            for offset in pools.host_off if direction == offload.OUT else pools.dev_off:
                untouched[offset : offset + block] = False
            assert not target[untouched].any(), (path, pace)
        pools.fill(direction)
        pools.plan.step(offload.CONTIGUOUS, direction)
        assert pools.landed(contiguous=True)
    finally:
        pools.close()


@pytest.mark.gpu
@pytest.mark.parametrize("direction", ["out", "in"])
def test_the_armed_copy_engines_take_a_pinned_pool_as_their_far_end(direction: str) -> None:
    pools = _pools(256, 4096, 512)
    try:
        dev = pools.dev.data.ptr + pools.dev_off
        host = pools.host_ptr + pools.host_off
        sizes = np.full(len(dev), 4096, dtype=np.int64)
        src, dst = (dev, host) if direction == "out" else (host, dev)
        with armed.ArmedPlan(src, dst, sizes, direction="put" if direction == "out" else "get", timeout=30) as plan:
            assert plan.describe()["peer"] == -1
            for _ in range(2):
                pools.fill(offload.DIRECTIONS[direction])
                plan.arm()
                assert plan.release().wall_seconds > 0
                assert pools.landed()
    finally:
        pools.close()


@pytest.mark.gpu
def test_a_step_the_plan_cannot_post_is_refused_in_one_line() -> None:
    pools = _pools(16, 4096, 32)
    try:
        with pytest.raises(ConfigError, match="needs a pace"):
            pools.plan.step(offload.KERNEL, offload.OUT)
        with pytest.raises(TransportError, match="no such step"):
            pools.plan.step(offload.CE_BATCH, offload.OUT, 10, 10)
        with pytest.raises(TransportError, match="neither swap-out"):
            pools.plan.step(offload.DIRECT, 7)
    finally:
        pools.close()
    cupy = import_cupy()
    host = np.zeros(1 << 16, dtype=np.uint8)  # pageable: no pinned pool
    dev = cupy.zeros(1 << 16, dtype=cupy.uint8)
    with pytest.raises(TransportError, match="not pinned host memory"):
        offload.OffloadPlan(0, (dev.data.ptr, 1 << 16), (host.ctypes.data, 1 << 16), [0], [0], 4096)
    pinned = cupy.cuda.runtime.hostAlloc(1 << 16, 3)
    try:
        with pytest.raises(TransportError, match="runs past its pool"):
            offload.OffloadPlan(0, (dev.data.ptr, 1 << 16), (pinned, 1 << 16), [0], [61440 + 16], 4096)
        with offload.OffloadPlan(0, (dev.data.ptr, 1 << 16), (pinned, 1 << 16), [8], [0], 4096) as odd:
            with pytest.raises(TransportError, match="16-byte words"):
                odd.step(offload.KERNEL, offload.OUT, pace=offload.Pace.parse("1x1x32"))
            odd.step(offload.DIRECT, offload.OUT)  # the copy engines take any offset
    finally:
        cupy.cuda.runtime.freeHost(pinned)
    assert offload.why_not(visible_gpu_count()) is not None


def test_the_copy_engines_are_asked_through_the_offload_library_itself() -> None:
    """The batch path's availability comes from offload.cu (the devlists library's call, asked of this
    one, was an AttributeError on the first GPU that reached it)."""
    if not _HAVE_NVCC:
        pytest.skip("needs nvcc")
    found = offload.copy_engines_problem()
    assert found is None or ("\n" not in found and found)
    if visible_gpu_count() == 0:
        assert found is not None and "driver" in found
