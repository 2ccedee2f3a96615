"""Which results files hold the same run: a run counts once in a report, a verdict and a comparison.
Copies of one run are not independent samples (four copies a side once made `compare` call a run
against itself a significant regression).

A run is known by its run id (metadata.run_id, a uuid4 every results file written since has) and by
its records: two files with the same id, or with the same records (an older file, or a copy whose
metadata was edited), are one run. The first file of a run in the order given is kept."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from . import compact

RUN_ID = "run_id"  # the metadata field
Doc = TypeVar("Doc", bound=Mapping[str, object])  # a results document, as read (reading.load)
_CHUNK = 1 << 20


def new_run_id() -> str:
    return uuid.uuid4().hex


def run_id(doc: Mapping[str, object]) -> str | None:
    """The run id a document's metadata names, or None (a file from before run ids, or a bad value)."""
    metadata = doc.get("metadata")
    value = metadata.get(RUN_ID) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def with_run_id(metadata: dict[str, object]) -> dict[str, object]:
    """`metadata` with a run id: its own where it has one, else a new one (a new dict)."""
    return metadata if run_id({"metadata": metadata}) else {**metadata, RUN_ID: new_run_id()}


def _record_count(doc: Mapping[str, object]) -> int:
    results = doc.get("results")
    return len(results) if isinstance(results, (list, compact.LazyResults)) else 0


def records_digest(doc: Mapping[str, object]) -> str:
    """A digest of a document's link records: the bytes of a schema-2 links file (with the profiles
    and ranks its lines refer to), or the entries of a schema-1 file or stream."""
    digest = hashlib.blake2b(digest_size=16)
    results = doc.get("results")
    if isinstance(results, compact.LazyResults):
        digest.update(
            json.dumps([results.tables.profiles, sorted(results.tables.ranks.items())], sort_keys=True).encode()
        )
        try:
            with open(results.path, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
        except OSError:
            digest.update(os.fsencode(os.path.abspath(results.path)))  # unreadable: the loader says so later
    else:
        digest.update(json.dumps(results, sort_keys=True, separators=(",", ":"), default=str).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class Duplicate:
    path: str  # the file left out
    kept: str  # the file of the same run that counts
    why: str  # "the same run id ..." or "the same records"

    def __str__(self) -> str:
        return f"{self.path}: {self.why} as {self.kept}: counted once"


def distinct(
    documents: list[tuple[str, Doc]],
    broken: Callable[[str, Doc], str | None] = lambda _path, _doc: None,
) -> tuple[list[tuple[str, Doc]], list[Duplicate], list[str]]:
    """The documents, each run once, the files left out as copies, and a problem line per copy
    that does not read (`broken` says why, or None). Of the copies of a run the first that reads
    is kept: a corrupted copy listed first never stands in for the good one. Records are digested
    only where another document holds as many, and a copy is read through only when another file
    has its identity: one file (or a set of distinct runs) costs no hashing and no second read."""
    counts: dict[int, int] = {}
    for _path, doc in documents:
        count = _record_count(doc)
        counts[count] = counts.get(count, 0) + 1
    runs: dict[str, int] = {}  # a run id or a digest: the index in `kept` of its file
    kept: list[tuple[str, Doc]] = []
    duplicates: list[Duplicate] = []
    problems: list[str] = []
    health: dict[str, str | None] = {}

    def why_broken(path: str, doc: Doc) -> str | None:
        if path not in health:
            health[path] = broken(path, doc)
        return health[path]

    for path, doc in documents:
        identity = run_id(doc)
        count = _record_count(doc)
        # Runs without records (stopped before the first) have nothing to tell them apart, nor to count.
        digest = records_digest(doc) if count and counts[count] > 1 else None
        keys = [(key, why) for key, why in ((identity, f"the same run id ({identity})"), (digest, "the same records"))]
        match = next(((key, why) for key, why in keys if key is not None and key in runs), None)
        if match is None:
            runs.update({key: len(kept) for key, _why in keys if key is not None})
            kept.append((path, doc))
            continue
        index, why = runs[match[0]], match[1]
        first, first_doc = kept[index]
        mine = why_broken(path, doc)
        if mine is not None:  # the copy already kept may be good or bad: this one is no use either way
            problems.append(f"{mine} (a copy of the run of {first}: skipped)")
        elif (theirs := why_broken(first, first_doc)) is not None:
            problems.append(f"{theirs} (a copy of the run of {path}, which reads: skipped)")
            kept[index] = (path, doc)
            runs.update({key: index for key, _why in keys if key is not None})
        else:
            duplicates.append(Duplicate(path, first, why))
    return kept, duplicates, problems
