"""Results files: a versioned JSON document, written atomically, never overwriting by accident.

{
  "schema":   {"name": "rdmabench-results", "version": 1},
  "complete": true,             # false while the run is going, or if it died
  "metadata": {...},            # command line, date, hosts, ranks and GPUs, versions, UCX_* settings
  "results":  [ {...}, ... ]    # one entry per (test, src_rank, dst_rank, src_mode, dst_mode, size_bytes)
}
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from .errors import ResultsFileError

SCHEMA_NAME = "rdmabench-results"
SCHEMA_VERSION = 1
RESULTS_DIR = "results"

ENTRY_KEY = ("test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes")
_REQUIRED_ENTRY_FIELDS = {*ENTRY_KEY, "samples", "validated", "transport", "unit"}


def document(metadata: dict[str, Any], entries: list[dict[str, Any]], complete: bool) -> dict[str, Any]:
    return {
        "schema": {"name": SCHEMA_NAME, "version": SCHEMA_VERSION},
        "complete": complete,
        "metadata": metadata,
        "results": entries,
    }


def default_output_path(test: str, src_mode: str, dst_mode: str, directory: str = RESULTS_DIR) -> str:
    """results/rdmabench-<test>-<src>-<dst>-<UTC time>.json, with a suffix if that name is taken."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    modes = src_mode if src_mode == dst_mode else f"{src_mode}-to-{dst_mode}"
    stem = os.path.join(directory, f"rdmabench-{test}-{modes}-{stamp}")
    path, counter = f"{stem}.json", 1
    while os.path.exists(path):
        path, counter = f"{stem}-{counter}.json", counter + 1
    return path


def check_writable(path: str, force: bool) -> None:
    """Fail now, before any measurement, if the results could not be written to `path`."""
    if os.path.isdir(path):
        raise ResultsFileError(f"output path {path} is a directory; give a file name")
    if os.path.exists(path) and not force:
        raise ResultsFileError(f"output file {path} already exists; choose another --output or pass --force")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".rdmabench-probe-"):
            pass
    except OSError as exc:
        raise ResultsFileError(f"cannot write results to {path}: {exc.strerror or exc}") from None


def write(path: str, doc: dict[str, Any]) -> None:
    """Replace `path` atomically, so a reader (or a crash) never sees half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rdmabench-", suffix=".json.tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(doc, handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path: str) -> dict[str, Any]:
    """Read a results file and check its shape; raise ResultsFileError naming the file otherwise."""
    try:
        with open(path) as handle:
            doc = json.load(handle)
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ResultsFileError(f"{path}: not valid JSON ({exc})") from None
    validate(doc, path)
    return doc  # type: ignore[no-any-return]


def validate(doc: Any, path: str = "<results>") -> None:
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), dict):
        raise ResultsFileError(f"{path}: not an rdmabench results file (no schema)")
    schema = doc["schema"]
    if schema.get("name") != SCHEMA_NAME:
        raise ResultsFileError(f"{path}: not an rdmabench results file (schema {schema.get('name')!r})")
    version = schema.get("version")
    if not isinstance(version, int) or version < 1:
        raise ResultsFileError(f"{path}: bad schema version {version!r}")
    if version > SCHEMA_VERSION:
        raise ResultsFileError(
            f"{path}: schema version {version} is newer than this rdmabench reads ({SCHEMA_VERSION}); upgrade rdmabench"
        )
    if not isinstance(doc.get("metadata"), dict) or not isinstance(doc.get("results"), list):
        raise ResultsFileError(f"{path}: metadata must be an object and results a list")
    for index, entry in enumerate(doc["results"]):
        if not isinstance(entry, dict):
            raise ResultsFileError(f"{path}: results[{index}] is not an object")
        missing = _REQUIRED_ENTRY_FIELDS - entry.keys()
        if missing:
            raise ResultsFileError(f"{path}: results[{index}] lacks {', '.join(sorted(missing))}")
        if "bandwidth_gbps" not in entry and "latency_us" not in entry:
            raise ResultsFileError(f"{path}: results[{index}] has neither bandwidth_gbps nor latency_us")
