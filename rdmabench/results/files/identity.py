"""Which results files hold the same run: a run counts once in a report, a verdict and a comparison.
Copies of one run are not independent samples (four copies a side once made `compare` call a run
against itself a significant regression).

A run is known by its run id (metadata.run_id, a uuid4 every results file written since has) and by
its records: two files with the same id and the same records, or with the same records (an older
file, or a copy whose metadata was edited), are one run. The first file of a run in the order given
is kept. Two files with the same id and other records are no copies: a conflict, neither counted; nor
is a file under another id that holds a side's records (which run they are is not known). The conflicts
are found before any file is kept, so the order of the files never decides them."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from . import compact
from .docrecord import ResultsDocument

RUN_ID = "run_id"  # the metadata field
Doc = TypeVar("Doc", bound=ResultsDocument)  # a results document, as read (reading.load)
_CHUNK = 1 << 20


def new_run_id() -> str:
    return uuid.uuid4().hex


def run_id(doc: ResultsDocument) -> str | None:
    """The run id a document's metadata names, or None (a file from before run ids, or a bad value)."""
    return _named_run_id(doc.get("metadata"))


def _named_run_id(metadata: object) -> str | None:
    value = metadata.get(RUN_ID) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def with_run_id(metadata: dict[str, object]) -> dict[str, object]:
    """`metadata` with a run id: its own where it has one, else a new one (a new dict)."""
    return metadata if _named_run_id(metadata) else {**metadata, RUN_ID: new_run_id()}


def _record_count(doc: ResultsDocument) -> int:
    results = doc.get("results")
    return len(results) if isinstance(results, (list, compact.LazyResults)) else 0


def records_digest(doc: ResultsDocument) -> str:
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


@dataclass(frozen=True)
class Conflict:
    """Files that name one run id but hold different records: at most one is the run it claims (a
    copy planted beside a failing run, healthy figures in its own links file, once made a fleet's
    FAIL a PASS). None of them counts, and no verdict on the rest is a pass (outcome.Checked)."""

    run_id: str
    paths: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"{', '.join(self.paths)}: the same run id ({self.run_id}) with different records: a conflict, "
            "none of them counted (at most one is that run; no pass while they disagree)"
        )


def conflict_line(count: int) -> str:
    """Why files that disagree about one run stop a pass (check, report --expect and compare alike)."""
    return (
        f"{count} run id(s) named by files with different records (warned above): none of "
        "those files is counted, and what they hold may be what fails; remove the wrong file(s)"
    )


class _Runs:
    """The runs seen so far: each run's kept file by run id and by records, and its files' digests
    and health, each computed once and only where another file shares an identity."""

    def __init__(self, broken: Callable[[str, Any], str | None], counts: dict[int, int]):
        self.broken, self.counts = broken, counts
        self.kept: list[tuple[str, Any]] = []
        self.duplicates: list[Duplicate] = []
        self.problems: list[str] = []
        self.index: dict[str, int] = {}  # a run id or a digest: the index in `kept` of its file
        self.conflicted: dict[str, list[str]] = {}  # a run id: its files that disagree
        self.sides: dict[str, tuple[str, str]] = {}  # a conflict's side's digest: its run id and file
        self._health: dict[str, str | None] = {}
        self._digests: dict[str, str] = {}

    def health(self, path: str, doc: ResultsDocument) -> str | None:
        if path not in self._health:
            self._health[path] = self.broken(path, doc)
        return self._health[path]

    def digest(self, path: str, doc: ResultsDocument) -> str:
        if path not in self._digests:
            self._digests[path] = records_digest(doc)
        return self._digests[path]

    def find_conflicts(self, documents: Sequence[tuple[str, ResultsDocument]]) -> None:
        """The run ids whose files that read hold different records, found before any file is kept, so
        that no order of the files decides (review9): each such id's files are added to its conflict as
        they come, and the digest of each side is kept to tell its copies under another id."""
        named: dict[str, list[tuple[str, ResultsDocument]]] = {}
        for path, doc in documents:
            if (identity := run_id(doc)) is not None:
                named.setdefault(identity, []).append((path, doc))
        for identity, files in named.items():
            reading = [(path, doc) for path, doc in files if len(files) > 1 and self.health(path, doc) is None]
            digests = {path: self.digest(path, doc) for path, doc in reading}
            if len(set(digests.values())) > 1:
                self.conflicted[identity] = []
                for path, digest in digests.items():
                    self.sides.setdefault(digest, (identity, path))

    def add(self, path: str, doc: ResultsDocument) -> None:
        identity = run_id(doc)
        if identity is not None and identity in self.conflicted:
            self._conflict(identity, path, doc)
            return
        count = _record_count(doc)
        # Runs without records (stopped before the first) have nothing to tell them apart, nor to count.
        digest = self.digest(path, doc) if count and self.counts[count] > 1 else None
        if digest is not None and digest in self.sides:  # a side's records under another run id: no run
            side_id, side = self.sides[digest]
            mine = self.health(path, doc)
            self.problems.append(
                f"{mine} (a copy of {side}: skipped)"
                if mine is not None
                else f"{path}: the same records as {side}, a file of the run id {side_id} that files disagree "
                "about: skipped (which run they are is not known)"
            )
            return
        keys = [(key, why) for key, why in ((identity, f"the same run id ({identity})"), (digest, "the same records"))]
        match = next(((key, why) for key, why in keys if key is not None and key in self.index), None)
        if match is None:
            self.index.update({key: len(self.kept) for key, _why in keys if key is not None})
            self.kept.append((path, doc))
            return
        index, why = self.index[match[0]], match[1]
        first, first_doc = self.kept[index]
        mine = self.health(path, doc)
        if mine is not None:  # the copy already kept may be good or bad: this one is no use either way
            self.problems.append(f"{mine} (a copy of the run of {first}: skipped)")
        elif (theirs := self.health(first, first_doc)) is not None:
            self.problems.append(f"{theirs} (a copy of the run of {path}, which reads: skipped)")
            self.kept[index] = (path, doc)
            self.index.update({key: index for key, _why in keys if key is not None})
        else:  # one run id and the same records, or the same records: one run (find_conflicts: no other)
            self.duplicates.append(Duplicate(path, first, why))

    def _conflict(self, identity: str, path: str, doc: ResultsDocument) -> None:
        mine = self.health(path, doc)
        if mine is not None:  # a file that does not read is said as such, not as a side of the conflict
            self.problems.append(f"{mine} (a file of the run id {identity}: skipped)")
        elif path not in self.conflicted[identity]:
            self.conflicted[identity].append(path)


def distinct(
    documents: list[tuple[str, Doc]],
    broken: Callable[[str, Doc], str | None] = lambda _path, _doc: None,
) -> tuple[list[tuple[str, Doc]], list[Duplicate], list[str], list[Conflict]]:
    """The documents, each run once, the files left out as copies, a problem line per copy that does
    not read (`broken` says why, or None), and the runs whose files name one run id but hold other
    records (conflicts: none of their files kept). Of the copies of a run the first that reads is
    kept: a corrupted copy listed first never stands in for the good one. Records are digested only
    where another document holds as many or has the same run id, and a copy is read through only when
    another file has its identity: one file (or a set of distinct runs) costs no hashing and no second
    read."""
    counts: dict[int, int] = {}
    for _path, doc in documents:
        count = _record_count(doc)
        counts[count] = counts.get(count, 0) + 1
    runs = _Runs(broken, counts)
    runs.find_conflicts(documents)
    for path, doc in documents:
        runs.add(path, doc)
    kept = runs.kept
    conflicts = [Conflict(identity, tuple(paths)) for identity, paths in runs.conflicted.items() if paths]
    return kept, runs.duplicates, runs.problems, conflicts
