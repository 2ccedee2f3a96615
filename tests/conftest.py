"""Shared helpers: run rdmabench for real, with real MPI ranks and real UCX endpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Small and quick: CI oversubscribes 2 cores with the ranks, and every byte is still validated.
QUICK = ["--samples", "2", "--sample-time", "0.005"]


def rdmabench_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RDMABENCH_FAULT", None)
    env.update(extra)
    return env


def run_cli(
    args: list[str], timeout: float = 180, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rdmabench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or rdmabench_env(),
        cwd=cwd,
    )


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def mpiexec() -> str:
    from rdmabench.job.spawner import find_mpiexec

    return find_mpiexec()


@pytest.fixture
def results_path(tmp_path: Path) -> Path:
    return tmp_path / "out.json"
