"""What the benchmarks share: one `rdmabench run` as a subprocess, its entries and its wall time."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from typing import Any

from rdmabench.pystart import python_module
from rdmabench.results.files import document


def run_entries(args: list[str], timeout: float = 600) -> tuple[list[dict[str, Any]], float]:
    """The entries of `rdmabench run ARGS` (written to a scratch file) and the seconds it took;
    a failed run ends the benchmark with its error."""
    with tempfile.TemporaryDirectory(prefix="rdmabench-bench-") as directory:
        out = os.path.join(directory, "r.json")
        command = python_module("rdmabench", "run", *args, "-o", out)
        began = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        wall = time.monotonic() - began
        if proc.returncode != 0:
            raise SystemExit(f"rdmabench: error: {' '.join(command)} failed: {proc.stderr.strip()[-400:]}")
        return list(document.load(out)["results"]), wall  # read whole (not lazy): a list
