"""Results files: versioned, written atomically, never overwriting by accident.

Schema 2 (written since the cluster work; see compact.py) is two files:

  OUTPUT (JSON, small): {"schema": {"name": "rdmabench-results", "version": 2}, "complete": true,
      "stopped": "..." (when it stopped early), "metadata": {...}, "links": {"file": ..., "count": N},
      "profiles": [...], "ranks": [...], "matrices": [...] (up to 64 ranks)}
  OUTPUT without .json + .links.jsonl: one link measurement per line

Schema 1 (one JSON document with every entry under "results") is still read everywhere. load()
returns either as one shape: the schema-1 document, entries expanded (lazily, for a report on a
large file).

While a run goes, its results stream into OUTPUT.partial, one JSON line per record (a header with the
schema and metadata, then profiles, ranks and link records as they come), flushed as each round
completes. The finished files are assembled from the stream; if the run dies, the stream is what is
left, and load() reads it as a partial document.

This module writes the stream and assembles the files from it; beside it: what a file holds
(contents), a file read back and checked (reading), and where a run's results go, claimed before it
measures (reservation). Their names are importable from here too, where callers have always
imported them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import time
from collections.abc import Mapping
from typing import Any, TextIO

from ... import userfiles
from ...errors import ResultsFileError, ResultsWriteError
from . import compact, identity
from .contents import (
    MATRICES_UP_TO,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    SCHEMAS,
    STREAM_SUFFIX,
    ResultsDocument,
    build_matrices,
    document,
    figure_field,
    json_schema,
    stream_path,
    write,
)
from .reading import load, missing_plugin, validate
from .reservation import (
    CREATE,
    RESERVED_ENV,
    check_writable,
    default_output_path,
    release,
    reserve,
    reserved_here,
    taken,
)

# What callers import from here (a results file's one door), wherever it lives.
__all__ = [
    "RESERVED_ENV", "SCHEMAS", "SCHEMA_NAME", "SCHEMA_VERSION", "STREAM_SUFFIX", "ResultsFileError", "ResultsStream",
    "check_writable", "default_output_path", "document", "figure_field", "json_schema", "load", "missing_plugin",
    "release", "reserve", "salvage", "stream_path", "validate", "write",
]  # fmt: skip


class ResultsStream:
    """The results of a running job, appended to PATH.partial as they are measured (schema 2): rank 0
    keeps only the profiles and the rank table, never the entries."""

    def __init__(self, path: str, metadata: dict[str, object]):
        self.path = path
        self.metadata = identity.with_run_id(metadata)  # what tells this run from copies of its files
        self.count = 0
        self.kept = 0  # of them, on disk whole: the stream as it stood after its last good flush
        self._kept_bytes = 0
        self._compactor = compact.Compactor()
        self.broken = False
        self._handle = _open_stream(path)
        self._synced = 0.0
        self._write_line({"schema": {"name": SCHEMA_NAME, "version": SCHEMA_VERSION}, "metadata": metadata})
        # On disk at once: a job aborted by another rank before its first record leaves a readable stream.
        self._sync()

    def _sync(self, at_least_every: float = 0.0) -> None:
        """Flush to the kernel (a job that dies keeps what it measured); fsync (a machine that goes
        down too) at most every `at_least_every` seconds: an fsync per round cost more than a round."""
        try:
            self._handle.flush()
            now = time.monotonic()
            if now - self._synced >= at_least_every:
                os.fsync(self._handle.fileno())
                self._synced = now
            self._kept_bytes, self.kept = os.fstat(self._handle.fileno()).st_size, self.count
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: OSError) -> ResultsWriteError:
        self.broken = True  # finishing would fail the same way
        self._cut_back()
        return ResultsWriteError(
            f"cannot write the results stream {stream_path(self.path)}: {exc.strerror or exc}; "
            f"the {self.kept} result(s) measured before are kept in it"
        )

    def _cut_back(self) -> None:
        """Cut the stream back to its last good flush, so that it holds `kept` results whole (a full
        disk took part of a later line, or of a batch counted but still in the buffer), and send
        what is still buffered nowhere: a later close must not write it after the cut."""
        with contextlib.suppress(OSError):
            fd = self._handle.fileno()
            os.ftruncate(fd, self._kept_bytes)
            null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            os.dup2(null, fd)
            os.close(null)

    def _write_line(self, record: Mapping[str, object]) -> None:
        try:
            self._handle.write(json.dumps(record, separators=(",", ":")) + "\n")
        except OSError as exc:
            raise self._failed(exc) from None

    def append(self, entries: list[dict[str, object]]) -> None:
        for entry in entries:
            for line in self._compactor.lines(entry, figure_field(entry)[0]):
                self._write_line(line)
        self.count += len(entries)
        self._sync(at_least_every=1.0)

    def finish(self, complete: bool, stopped: str | None = None) -> ResultsDocument:
        """Write the results files from the stream, drop the stream, and return the summary."""
        try:
            self._handle.close()
        except OSError as exc:
            raise self._failed(exc) from None
        return _assemble(self.path, complete, stopped, self.metadata)


def _open_stream(path: str) -> TextIO:
    """The stream of `path`: the empty file the launching process reserved for this run, or a new
    one created exclusively (never another run's, never one a dead run left)."""
    partial = stream_path(path)
    try:
        if reserved_here(path):
            with contextlib.suppress(FileNotFoundError):
                # O_NONBLOCK: a FIFO planted there must not hold the open until a reader comes.
                flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                return _reserved_stream(path, os.open(partial, flags))
        return open(os.open(partial, CREATE, userfiles.OUTPUT_MODE), "w", encoding="utf-8")
    except FileExistsError:
        raise ResultsFileError(taken(path)) from None
    except OSError as exc:  # ELOOP: a link planted at the stream's name
        reason = taken(path) if os.path.lexists(partial) else exc.strerror
        raise ResultsFileError(f"cannot write the results stream {partial}: {reason}") from None


def _reserved_stream(path: str, fd: int) -> TextIO:
    """The reservation opened (without following a link): still the empty regular file of ours it was."""
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_size != 0 or found.st_uid != os.geteuid():
        os.close(fd)
        raise ResultsFileError(taken(path))
    os.set_blocking(fd, True)
    return open(fd, "w", encoding="utf-8")


def _assemble(
    path: str, complete: bool, stopped: str | None, metadata: dict[str, Any] | None = None
) -> ResultsDocument:
    """The two files of a schema-2 result from the stream PATH.partial: the links file first, so the
    summary never names a file that is not there. Up to MATRICES_UP_TO ranks the entries are also
    expanded on the way, for the matrices."""
    try:
        return _assemble_files(path, complete, stopped, metadata)
    except OSError as exc:
        name = getattr(exc, "filename", None) or compact.links_path(path)
        raise ResultsWriteError(
            f"cannot write {name}: {exc.strerror or exc}; the measured records are kept in {stream_path(path)}"
        ) from None


def _assemble_files(path: str, complete: bool, stopped: str | None, metadata: dict[str, Any] | None) -> ResultsDocument:
    partial, links = stream_path(path), compact.links_path(path)
    meta: dict[str, Any] = metadata or {}
    tables, entries = compact.Tables(), []
    count, small, cut = 0, False, False
    with userfiles.replacing(links) as out, _open_partial(partial) as stream:
        for number, line in enumerate(stream):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                cut = True  # the line being written when the run died: said in the summary
                break
            if number == 0:
                meta = metadata if metadata is not None else record.get("metadata") or {}
                small = int(meta.get("world_size") or 0) <= MATRICES_UP_TO
            elif not tables.absorb(record):
                out.write(line if line.endswith("\n") else line + "\n")
                count += 1
                if small:
                    entries.append(compact.expand(record, tables))
    summary: ResultsDocument = {
        "schema": {"name": SCHEMA_NAME, "version": SCHEMA_VERSION},
        "complete": complete,
        "metadata": meta,
        "links": {
            "file": os.path.basename(links),
            "count": count,
            "format": "JSON Lines, one link measurement per line (pandas: read_json(path, lines=True))",
        },
        "profiles": tables.profiles,
        "ranks": [tables.ranks[r] for r in sorted(tables.ranks)],
    }
    if stopped:
        summary["stopped"] = stopped
    if cut:
        summary["dropped"] = "the last record of the stream was cut off (the run died while writing it)"
    if small:
        summary["matrices"] = build_matrices(meta, entries, complete)
    write(path, summary)
    os.unlink(partial)
    return summary


def _open_partial(partial: str) -> TextIO:
    """A stream to read back: a regular file, opened without following a link planted at its name."""
    limit = userfiles.max_by_line_bytes()
    return io.TextIOWrapper(userfiles.open_input(partial, limit, "results stream", follow_links=False), "utf-8")


def salvage(path: str, stopped: str) -> ResultsDocument | None:
    """Turn the stream of a run that died into its results files, marked incomplete; None if there
    is no stream (the run never started measuring, or it finished)."""
    partial = stream_path(path)
    if not os.path.lexists(partial):
        return None
    with _open_partial(partial) as stream:
        first = stream.readline(userfiles.max_input_bytes())
    if not first:  # reserved, never written: nothing was measured
        os.unlink(partial)
        return None
    try:
        version = json.loads(first).get("schema", {}).get("version")
    except (json.JSONDecodeError, AttributeError):
        raise ResultsFileError(f"{partial}: not an rdmabench results stream (no header line)") from None
    if version == 1:  # a stream of an earlier rdmabench: one document, as it was then
        doc = load(partial)
        doc["stopped"] = stopped
        doc["matrices"] = build_matrices(doc["metadata"], doc["results"], complete=False)
        write(path, doc)
        os.unlink(partial)
        return doc
    return _assemble(path, False, stopped)
