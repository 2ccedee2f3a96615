"""A results document as a record: what a results file holds at its top, as written and as read back
(docs/results-format.md), its keys and their types; an entry's keys are its own (measure/entryrecord.py)."""

from __future__ import annotations

from typing import Any, TypedDict

from .compact import LazyResults


class MatrixRecord(TypedDict):
    """An N x N matrix of a results file: row = sender rank, column = receiver, the figure where the
    link was measured, else null with the reason in `reasons`."""

    test: str
    src_mode: str
    dst_mode: str
    size_bytes: int
    field: str
    unit: str
    values: list[list[float | None]]
    reasons: list[list[str | None]]


class SchemaName(TypedDict):
    """A results file's schema: SCHEMA_NAME and its version (1: entries in the file, 2: in its links file)."""

    name: str
    version: int


class LinksFile(TypedDict):
    """Where a schema-2 summary's link records are: the links file beside it, and how many it holds."""

    file: str
    count: int
    format: str


class _DocumentHead(TypedDict):
    schema: SchemaName
    metadata: dict[str, Any]  # the run's (job/metadata.py; copy's and storage's records of their own)


class ResultsDocument(_DocumentHead, total=False):
    """A results file as written or read back (docs/results-format.md). Written: a schema-1 document
    (`results` and `matrices`) or a schema-2 summary (`links`, `profiles`, `ranks`, and `matrices` up to
    MATRICES_UP_TO ranks). Read back (reading.load): either in the schema-1 shape, a summary's entries
    under `results` (a list, or read from its links file each time they are iterated)."""

    complete: bool  # every file rdmabench writes says; validation asks it of a schema-2 summary only
    results: list[dict[str, Any]] | LazyResults
    matrices: list[MatrixRecord]
    stopped: str  # why the run stopped before its end
    dropped: str  # the stream's last record, cut off
    links: LinksFile
    profiles: list[dict[str, object]]  # compact.Tables: what the entries of many links share, once
    ranks: list[dict[str, Any]]  # each rank's host, GPU and NIC (as the schema checked them)
