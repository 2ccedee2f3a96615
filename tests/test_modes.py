"""Memory modes are records: every mode has one, and what the package asks of a mode reads it."""

from __future__ import annotations

from typing import get_args

import pytest

from rdmabench.modes import PIN_CUDA, PIN_MAPPED, PIN_MLOCK, RECORDS, MemoryMode, ModeRecord, UcxMemory, pinned_method
from rdmabench.wire.staging import DEFAULT_STAGING, staging_buffers, wire_chunk

# What each mode meant before the records (the membership predicates they replace), kept as the oracle:
# (UCX memory, CuPy, needs a GPU, UCX allocates, staged, pool-pinned, CPU-copied)
EXPECTED = {
    "pageable": ("host", False, False, False, False, False, True),
    "pinned": ("host", False, False, False, False, True, True),
    "device": ("cuda", True, True, False, False, False, False),
    "managed": ("cuda-managed", True, True, False, False, False, False),
    "mapped": ("host", False, True, False, False, True, True),
    "staged": ("host", True, True, False, True, False, False),
    "bounce": ("host", True, True, False, True, False, False),
    "ucx": ("host", False, False, True, False, False, True),
}


def test_every_mode_has_a_record() -> None:
    assert set(RECORDS) == set(MemoryMode)
    assert set(EXPECTED) == {mode.value for mode in MemoryMode}


@pytest.mark.parametrize("mode", list(MemoryMode), ids=lambda m: m.value)
def test_a_mode_answers_from_its_record(mode: MemoryMode) -> None:
    got = (mode.ucx_memory, mode.on_device, mode.needs_gpu, mode.ucx_allocated, mode.staged, mode.pinned_host,
           mode.cpu_copied)  # fmt: skip
    assert got == EXPECTED[mode.value]


def test_staging_and_pinning_follow_the_record() -> None:
    assert staging_buffers(MemoryMode.STAGED, DEFAULT_STAGING) == DEFAULT_STAGING.buffers
    assert staging_buffers(MemoryMode.BOUNCE, DEFAULT_STAGING) == 1
    assert staging_buffers(MemoryMode.DEVICE, DEFAULT_STAGING) is None
    big = 64 * DEFAULT_STAGING.chunk
    assert wire_chunk(MemoryMode.STAGED, MemoryMode.PINNED, big, DEFAULT_STAGING) == DEFAULT_STAGING.chunk
    assert wire_chunk(MemoryMode.BOUNCE, MemoryMode.PINNED, big, DEFAULT_STAGING) == big
    assert pinned_method(MemoryMode.MAPPED, True) == PIN_MAPPED
    assert pinned_method(MemoryMode.STAGED, True) == PIN_CUDA
    assert pinned_method(MemoryMode.PINNED, False) == PIN_MLOCK
    assert pinned_method(MemoryMode.DEVICE, True) is None


def test_a_record_field_outside_its_literal_is_refused() -> None:
    """A typo in a record ("cude", "pipeline") fails when the record is made, not as a silent other path."""
    with pytest.raises(ValueError, match="ucx_memory 'cude'"):
        ModeRecord("cude", "device")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="staging 'pipeline'"):
        ModeRecord("host", "device", staging="pipeline")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allocation"):
        ModeRecord("host", "hugepage")  # type: ignore[arg-type]


def test_every_ucx_memory_declares_its_type_and_a_typo_is_refused() -> None:
    """native.memory_type covers every UCX memory a record can name; an unknown name raises (it
    returned -1, 'let UCX detect it', so a typo measured another path)."""
    from rdmabench.wire import native

    assert set(native.UCS_MEMORY_TYPES) == set(get_args(UcxMemory))
    assert {native.memory_type(mode.ucx_memory) for mode in MemoryMode} == {0, 1, 2}
    with pytest.raises(ValueError, match="cude"):
        native.memory_type("cude")  # type: ignore[arg-type]


def test_the_deep_device_window_follows_the_record() -> None:
    """The default window's memory class asks the record (gpu_direct), not for one mode by name."""
    from rdmabench.job.config import Memory, RunConfig
    from rdmabench.measure import plan

    assert [mode for mode in MemoryMode if mode.record.gpu_direct] == [MemoryMode.DEVICE]
    classes = {mode: RunConfig(memory=Memory(mode, mode)).memory_class for mode in MemoryMode}
    assert classes[MemoryMode.DEVICE] == plan.DEVICE and classes[MemoryMode.PAGEABLE] == plan.HOST
    assert classes[MemoryMode.MANAGED] == classes[MemoryMode.STAGED] == plan.MIXED
