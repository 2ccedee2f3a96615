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
from dataclasses import dataclass
from typing import Any

from . import compact

RUN_ID = "run_id"  # the metadata field
_CHUNK = 1 << 20


def new_run_id() -> str:
    return uuid.uuid4().hex


def run_id(doc: dict[str, Any]) -> str | None:
    """The run id a document's metadata names, or None (a file from before run ids, or a bad value)."""
    metadata = doc.get("metadata")
    value = metadata.get(RUN_ID) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def with_run_id(metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` with a run id: its own where it has one, else a new one (a new dict)."""
    return metadata if run_id({"metadata": metadata}) else {**metadata, RUN_ID: new_run_id()}


def _record_count(doc: dict[str, Any]) -> int:
    results = doc.get("results")
    return len(results) if isinstance(results, (list, compact.LazyResults)) else 0


def records_digest(doc: dict[str, Any]) -> str:
    """A digest of a document's link records: the bytes of a schema-2 links file (with the profiles
    and ranks its lines refer to), or the entries of a schema-1 file or stream."""
    digest = hashlib.blake2b(digest_size=16)
    results = doc.get("results")
    if isinstance(results, compact.LazyResults):
        digest.update(json.dumps([results.profiles, sorted(results.ranks.items())], sort_keys=True).encode())
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
    documents: list[tuple[str, dict[str, Any]]],
) -> tuple[list[tuple[str, dict[str, Any]]], list[Duplicate]]:
    """The documents, each run once (the first of its files), and the files left out. Records are
    digested only where another document holds as many: one file (or a set of distinct runs) costs
    no hashing."""
    by_id: dict[str, str] = {}
    counts: dict[int, int] = {}
    for _path, doc in documents:
        count = _record_count(doc)
        counts[count] = counts.get(count, 0) + 1
    by_digest: dict[str, str] = {}
    kept: list[tuple[str, dict[str, Any]]] = []
    duplicates: list[Duplicate] = []
    for path, doc in documents:
        identity = run_id(doc)
        if identity is not None and identity in by_id:
            duplicates.append(Duplicate(path, by_id[identity], f"the same run id ({identity})"))
            continue
        count = _record_count(doc)
        # Runs without records (stopped before the first) have nothing to tell them apart, nor to count.
        digest = records_digest(doc) if count and counts[count] > 1 else None
        if digest is not None and digest in by_digest:
            duplicates.append(Duplicate(path, by_digest[digest], "the same records"))
            continue
        if identity is not None:
            by_id[identity] = path
        if digest is not None:
            by_digest[digest] = path
        kept.append((path, doc))
    return kept, duplicates
