"""Which files a report reads: results files named or found under folders, each read once (bounded,
regular files only), a run counted once."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...errors import OtherDocumentError, ResultsFileError
from . import compact, document, identity


@dataclass
class Loaded:
    documents: list[tuple[str, document.ResultsDocument]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per file that could not be used
    duplicates: list[identity.Duplicate] = field(default_factory=list)  # files of a run counted already
    conflicts: list[identity.Conflict] = field(default_factory=list)  # one run id, other records: no pass


def find_files(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """Results files named, or found under named directories; and one problem line per path that
    holds none."""
    files, problems = [], []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(root, name)
                for root, _dirs, names in os.walk(path)
                for name in names
                if name.endswith((".json", ".json" + document.STREAM_SUFFIX)) and not name.startswith(".")
            )
            if not found:
                problems.append(f"{path}: no results files (*.json) in this directory")
            files.extend(found)
        elif os.path.exists(path):
            files.append(path)
        else:
            problems.append(f"{path}: no such file or directory")
    return files, problems


def load_all(paths: Iterable[str]) -> Loaded:
    files, problems = find_files(paths)
    loaded = Loaded(problems=problems)
    for path in files:
        try:
            doc = document.load(path, lazy=True)  # schema 2: read as aggregated
        except ResultsFileError as exc:
            if not isinstance(exc, OtherDocumentError):  # anchor comparisons live beside results
                loaded.problems.append(str(exc))
            continue
        loaded.documents.append((path, doc))
    # A run counts once: of its copies, the first that reads through; files that disagree, not at all.
    loaded.documents, loaded.duplicates, broken, loaded.conflicts = identity.distinct(loaded.documents, unreadable)
    loaded.problems += [*broken, *map(str, loaded.conflicts)]
    return loaded


def unreadable(path: str, doc: document.ResultsDocument) -> str | None:
    """Why a loaded document's records do not read through (a bad line, a links file that disagrees
    with its summary), or None: what tells a good copy of a run from a corrupted one."""
    results = doc.get("results")
    if not isinstance(results, compact.LazyResults):
        return None  # read and checked whole when loaded
    try:
        for _record in results.records():
            pass
    except ResultsFileError as exc:
        return str(exc)
    return None
