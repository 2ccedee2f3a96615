"""The CUDA-event probe of the GPU path beside a GEMM (devtools/probes/gpusustained.py): how it cuts the
load's kept operations into its three stretches, on GENERATED operation times (the probe itself needs two
GPUs: run by the beside benchmark, devtools/besidebench.py)."""

from __future__ import annotations

import pytest

from devtools.probes.gpusustained import line, windows


def test_the_stretches_leave_out_the_operation_running_at_each_mark():
    """Operations 0-29 alone at 1 ms, 30-59 beside at 3 ms, 60-89 alone at 1.2 ms; marks at 10, 30, 60,
    90 done: each stretch from the one after its mark, the first ten before the settle mark left out."""
    kept = [1e-3] * 30 + [3e-3] * 30 + [1.2e-3] * 30
    found = windows(kept, 0, [10, 30, 60, 90], 250.0)
    assert found.operations == (19, 29, 29)
    assert found.before == pytest.approx(1e-3) and found.after == pytest.approx(1.2e-3)
    assert found.slowdown == pytest.approx(3e-3 / 1.1e-3)
    assert "GEMM x2.727" in line(found, 1 << 20) and "list 250.0 GB/s" in line(found, 1 << 20)


def test_operations_past_the_ring_are_numbered_from_the_first_kept():
    """The library keeps the latest operations only: the first kept is operation 20 here, so the first
    stretch holds operations 20-29 of its 11-29."""
    kept = [1e-3] * 10 + [2e-3] * 30 + [1e-3] * 30
    found = windows(kept, 20, [10, 30, 60, 90], 0.0)
    assert found.operations == (10, 29, 29) and found.slowdown == pytest.approx(2.0)
