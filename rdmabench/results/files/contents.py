"""What a results file holds: its schema's name and version, an entry's key and the field of its figure,
a schema-1 document with its matrices, the name of a run's stream; a document written whole, atomically."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from ... import userfiles
from ...measure import registry
from . import identity, schema
from .docrecord import MatrixRecord, ResultsDocument

SCHEMA_NAME = "rdmabench-results"
SCHEMA_VERSION = 2
MATRICES_UP_TO = 64  # ranks: beyond, N x N matrices are not stored (report draws by GPU and node)
STREAM_SUFFIX = ".partial"

ENTRY_KEY = ("test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes")
KNOWN_FIGURES = (("bandwidth_gbps", "GB/s"), ("latency_us", "us"))


class EntryHead(TypedDict):
    """The keys a bandwidth entry of another command than `run` begins with (copy's, torch's, storage's),
    in the order files hold them: what `report` reads of any entry (its link, modes, size and figure)."""

    test: str
    src_rank: int
    dst_rank: int
    src_mode: str
    dst_mode: str
    size_bytes: int
    bandwidth_gbps: float
    unit: str
    scope: str
    stats: dict[str, float]
    samples: list[float]


def figure_field(entry: Mapping[str, object]) -> tuple[str, str]:
    """The field holding an entry's figure, and its unit: the test's record says, or (a test this
    process does not know) the figure field the entry has, in that field's own unit."""
    kind = registry.find(entry.get("test"))
    if kind is not None:
        return kind.field, kind.unit
    for name, unit in KNOWN_FIGURES:
        if name in entry:
            return name, unit
    return KNOWN_FIGURES[0]


def document(metadata: dict[str, Any], entries: list[dict[str, Any]], complete: bool) -> ResultsDocument:
    """A schema-1 document: every entry in one JSON file (`bench.copy`'s results, small files)."""
    metadata = identity.with_run_id(metadata)
    return {
        "schema": {"name": SCHEMA_NAME, "version": 1},
        "complete": complete,
        "metadata": metadata,
        "results": entries,
        "matrices": build_matrices(metadata, entries, complete),
    }


def build_matrices(metadata: dict[str, Any], entries: Iterable[dict[str, Any]], complete: bool) -> list[MatrixRecord]:
    """One N x N matrix per (test, src_mode, dst_mode, size): row = sender rank, column = receiver,
    the entry's figure where the link was measured, else null with the reason in `reasons`."""
    ranks = metadata.get("ranks") or []
    size = int(metadata.get("world_size") or len(ranks) or 0)
    if not 0 < size <= MATRICES_UP_TO:  # a claimed world of 30000 ranks must not cost 30000 squared
        return []
    hosts = [r.get("host") for r in ranks] if len(ranks) == size else [None] * size
    config = metadata.get("config") or {}
    pattern, link_class = config.get("pattern", "pair"), config.get("link_class", "all")
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for entry in entries:
        if entry.get("remeasured_from") is not None:
            continue  # a screen's re-measure alone: the matrix keeps the pattern's own figure
        key = (entry["test"], entry["src_mode"], entry["dst_mode"], entry["size_bytes"])
        groups.setdefault(key, []).append(entry)
    matrices: list[MatrixRecord] = []
    for (test, src_mode, dst_mode, nbytes), members in groups.items():
        field, unit = figure_field(members[0])
        values: list[list[float | None]] = [[None] * size for _ in range(size)]
        for entry in members:
            if 0 <= entry["src_rank"] < size and 0 <= entry["dst_rank"] < size:
                values[entry["src_rank"]][entry["dst_rank"]] = entry.get(field)
        reasons: list[list[str | None]] = [[None] * size for _ in range(size)]
        for i in range(size):
            for j in range(size):
                if values[i][j] is not None:
                    continue
                if i == j:
                    reasons[i][j] = "same rank"
                elif (
                    link_class != "all"
                    and hosts[i] is not None
                    and (hosts[i] == hosts[j]) != (link_class == "intra-node")
                ):
                    reasons[i][j] = f"excluded by --link-class {link_class}"
                elif complete:
                    reasons[i][j] = f"not a link of the {pattern} pattern"
                else:
                    reasons[i][j] = "not measured: the run stopped first"
        matrices.append(
            {
                "test": test,
                "src_mode": src_mode,
                "dst_mode": dst_mode,
                "size_bytes": nbytes,
                "field": field,
                "unit": unit,
                "values": values,
                "reasons": reasons,
            }
        )
    return matrices


def write(path: str, doc: ResultsDocument) -> None:
    """Replace `path` atomically with the JSON document `doc` (never through a link planted there)."""
    with userfiles.replacing(path) as handle:
        json.dump(doc, handle, indent=1)
        handle.write("\n")


SCHEMAS = schema.SCHEMAS


def json_schema(name: str) -> schema.SchemaObject:
    """The published JSON Schema `name` (one of SCHEMAS), shipped in rdmabench/results/files/schemas/: the
    loader checks every file against it (schema.py)."""
    return schema.published(name)


def stream_path(path: str) -> str:
    return path + STREAM_SUFFIX
