"""Payload patterns and buffers, on real pageable and page-locked (mlock) host memory."""

import mmap

import numpy as np
import pytest

from rdmabench.errors import ConfigError, ResourceError
from rdmabench.memory.buffers import allocate, page_aligned_zeros, word_capacity
from rdmabench.memory.payload import Pattern, message_key
from rdmabench.modes import PIN_MLOCK, MemoryMode


@pytest.mark.parametrize("nbytes", [1, 7, 8, 9, 4097, 1 << 16])
@pytest.mark.parametrize("mode", [MemoryMode.PAGEABLE, MemoryMode.PINNED])
def test_fill_then_check_round_trip(nbytes: int, mode: MemoryMode) -> None:
    sent, received = allocate(mode, nbytes, have_gpu=False), allocate(mode, nbytes, have_gpu=False)
    pattern = Pattern(np, nbytes, src_rank=0)
    key = message_key(3, 1)
    pattern.fill(sent, key)
    received.array[:nbytes] = sent.array[:nbytes]  # what a transfer of nbytes delivers
    assert pattern.wrong_bytes(received, key) == 0
    assert pattern.wrong_bytes(received, message_key(4, 1)) > 0  # a stale message is caught
    sent.release()
    received.release()


@pytest.mark.parametrize("nbytes", [4096, 65536, 65544, 1 << 20])
@pytest.mark.parametrize("mode", [MemoryMode.PAGEABLE, MemoryMode.PINNED])
def test_host_buffers_start_a_page_as_ucx_perftests_and_osus_do(nbytes: int, mode: MemoryMode) -> None:
    """An unaligned 64 KiB message spans 17 pages, and cma pins each: 6-9% of host bw at 64 KiB on
    the CI VM (measurements/cpu2-20261124c/align-ab.txt). Several at once, as a window allocates them."""
    buffers = [allocate(mode, nbytes, have_gpu=False) for _ in range(4)]
    for buffer in buffers:
        assert buffer.address % mmap.PAGESIZE == 0 and buffer.array.size == word_capacity(nbytes)
        buffer.array[:] = 7  # every byte of the slice is writable memory of its own
    assert len({b.address for b in buffers}) == 4
    for buffer in buffers:
        assert int(buffer.array.sum()) == 7 * buffer.array.size
        buffer.release()


def test_host_buffers_under_a_page_stay_packed() -> None:
    """Small messages go eagerly (nothing pinned), and a window of them each at a page start would
    share a few L1 sets: they are neither padded to a page nor placed at one."""
    for nbytes in (8, 1000, mmap.PAGESIZE - 8):
        buffer = page_aligned_zeros(nbytes)
        assert buffer.base is None and buffer.nbytes == nbytes  # its own allocation, not a slice of a padded one
    assert page_aligned_zeros(mmap.PAGESIZE).base is not None  # a page or more is padded and sliced


def test_wrong_bytes_are_counted_exactly() -> None:
    nbytes = 1000
    buffer = allocate(MemoryMode.PAGEABLE, nbytes, have_gpu=False)
    pattern = Pattern(np, nbytes, src_rank=1)
    pattern.fill(buffer, 42)
    buffer.array[[0, 500, 999]] ^= 0x01
    assert pattern.wrong_bytes(buffer, 42) == 3
    buffer.array[999] ^= 0x01
    assert pattern.wrong_bytes(buffer, 42) == 2


def test_pattern_depends_on_sender_size_and_message() -> None:
    a = allocate(MemoryMode.PAGEABLE, 64, have_gpu=False)
    Pattern(np, 64, src_rank=0).fill(a, message_key(0, 0))
    assert Pattern(np, 64, src_rank=1).wrong_bytes(a, message_key(0, 0)) > 0
    assert Pattern(np, 64, src_rank=0).wrong_bytes(a, message_key(0, 1)) > 0
    assert Pattern(np, 64, src_rank=0).wrong_bytes(a, message_key(0, 0)) == 0


def test_message_keys_are_distinct_and_non_zero() -> None:
    keys = {message_key(step, slot) for step in range(200) for slot in range(64)}
    assert len(keys) == 200 * 64 and 0 not in keys


def test_pinned_without_gpu_is_mlocked_and_resident() -> None:
    buffer = allocate(MemoryMode.PINNED, 1 << 20, have_gpu=False)
    assert buffer.pinned_method == PIN_MLOCK
    assert buffer.array.size == word_capacity(1 << 20)
    assert not buffer.array.any()
    with open("/proc/self/status") as status:
        locked_kib = next(int(line.split()[1]) for line in status if line.startswith("VmLck:"))
    assert locked_kib >= 1024
    buffer.release()


@pytest.mark.parametrize("mode", [m for m in MemoryMode if m.needs_gpu])
def test_gpu_modes_without_gpu_are_a_clear_error(mode: MemoryMode) -> None:
    with pytest.raises(ResourceError, match=f"^{mode.value} memory needs a GPU"):
        allocate(mode, 8, have_gpu=False)


def test_mode_properties() -> None:
    assert {m.value for m in MemoryMode if m.staged} == {"staged", "bounce"}
    assert {m.value for m in MemoryMode if not m.needs_gpu} == {"pageable", "pinned", "ucx"}
    assert {m.value for m in MemoryMode if m.ucx_allocated} == {"ucx"}
    # UCX is handed host memory for every mode but device and managed memory.
    assert {m.value: m.ucx_memory for m in MemoryMode if m.ucx_memory != "host"} == {
        "device": "cuda",
        "managed": "cuda-managed",
    }


def test_unknown_mode() -> None:
    with pytest.raises(ConfigError, match="unknown memory mode 'gpu'"):
        MemoryMode.parse("gpu")


def test_pinned_pool_reuses_and_respects_its_cap() -> None:
    from rdmabench.memory.buffers import PinnedPool

    pool = PinnedPool()
    pool.cap = 3 << 20
    first = pool.take(1 << 20, PIN_MLOCK)
    first.array[:10] = 9
    pool.give_back(first)
    again = pool.take(512 << 10, PIN_MLOCK)  # a smaller need reuses the pinned megabyte
    assert again is first and pool.allocations == 1 and again.array.size == 512 << 10
    assert not again.array.any()  # handed out clean, like a new allocation
    second = pool.take(2 << 20, PIN_MLOCK)
    assert pool.allocations == 2 and pool.pinned_bytes == 3 << 20
    with pytest.raises(ResourceError, match="over the --max-pinned cap of 3MiB"):
        pool.take(1 << 20, PIN_MLOCK)  # everything pinned is in use
    pool.give_back(again)
    pool.give_back(second)
    bigger = pool.take(3 << 20, PIN_MLOCK)  # the small ones are dropped to make room
    assert pool.pinned_bytes == 3 << 20 and bigger.capacity == 3 << 20
    pool.give_back(bigger)
    pool.clear()
    assert pool.pinned_bytes == 0


def test_copy_needs_a_gpu() -> None:
    from rdmabench.hardware.gpu import visible_gpu_count

    from .conftest import run_cli_here

    if visible_gpu_count():
        pytest.skip("this machine has a GPU")
    proc = run_cli_here(["copy"])
    assert proc.returncode == 2 and proc.stderr.strip().startswith("rdmabench: error: rdmabench copy needs a CUDA GPU")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_staging_shape_of_each_end() -> None:
    from rdmabench.wire.staging import Staging, staging_buffers, wire_chunk

    shape = Staging(chunk=4 << 20, buffers=3)
    assert [staging_buffers(m, shape) for m in (MemoryMode.STAGED, MemoryMode.BOUNCE, MemoryMode.DEVICE)] == [
        3,
        1,
        None,
    ]
    # A staged end cuts the pair's messages into its chunks; without one a message is one piece.
    assert wire_chunk(MemoryMode.STAGED, MemoryMode.DEVICE, 64 << 20, shape) == 4 << 20
    assert wire_chunk(MemoryMode.BOUNCE, MemoryMode.BOUNCE, 64 << 20, shape) == 64 << 20
    assert wire_chunk(MemoryMode.STAGED, MemoryMode.STAGED, 1000, shape) == 1000


def test_host_messages_are_checked_together() -> None:
    nbytes = 4097
    pattern = Pattern(np, nbytes, src_rank=2)
    buffers = [allocate(MemoryMode.PAGEABLE, nbytes, have_gpu=False) for _ in range(3)]
    keys = [message_key(1, slot) for slot in range(3)]
    for buffer, key in zip(buffers, keys, strict=True):
        pattern.fill(buffer, key)
    buffers[1].array[100] ^= 0x10
    assert pattern.wrong_bytes_each(buffers, keys) == [0, 1, 0]


def test_the_recycler_keeps_buffers_for_the_next_round_only_when_on() -> None:
    from rdmabench.memory.buffers import RECYCLER

    first = allocate(MemoryMode.PAGEABLE, 4096, have_gpu=False)
    first.array[:] = 7
    address = first.address
    first.release()
    assert first.array is None  # off: freed
    RECYCLER.enabled = True
    try:
        kept = allocate(MemoryMode.PAGEABLE, 4096, have_gpu=False)
        kept.array[:] = 7
        address = kept.address
        kept.release()
        again = allocate(MemoryMode.PAGEABLE, 4096, have_gpu=False)
        assert again.address == address and not again.array.any()  # same memory, zeroed
        other = allocate(MemoryMode.PAGEABLE, 8192, have_gpu=False)
        assert other.address != address
    finally:
        RECYCLER.enabled = False
        RECYCLER.clear()
