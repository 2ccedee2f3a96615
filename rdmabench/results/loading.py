"""Which files a report reads: results files named or found under folders, each read once (bounded,
regular files only), a run counted once, a file whose test comes from a missing plugin named."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import OtherDocumentError, ResultsFileError
from ..measure import registry
from . import document, identity


@dataclass
class Loaded:
    documents: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per file that could not be used
    duplicates: list[identity.Duplicate] = field(default_factory=list)  # files of a run counted already


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
        missing = missing_plugin(doc)
        if missing:
            loaded.problems.append(f"{path}: {missing}")
        else:
            loaded.documents.append((path, doc))
    loaded.documents, loaded.duplicates = identity.distinct(loaded.documents)  # a run counts once
    return loaded


def missing_plugin(doc: dict[str, Any]) -> str | None:
    """Why a file cannot be read here: a test of it comes from a plugin ($RDMABENCH_PLUGINS) this
    process has not loaded, so its figure, unit and direction are unknown. None when it can be."""
    metadata = doc.get("metadata")
    plugins = metadata.get("test_plugins") if isinstance(metadata, dict) else None
    for test, plugin in (plugins if isinstance(plugins, dict) else {}).items():
        if registry.find(test) is None:
            broken = registry.plugin_failure(str(plugin))
            state = f"failed at import ({broken})" if broken else f"is not loaded (set {registry.PLUGINS_ENV}={plugin})"
            return f"test kind {test!r} comes from plugin {plugin!r}, which {state}"
    return None
