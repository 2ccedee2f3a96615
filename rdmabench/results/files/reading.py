"""A results file read back (a summary and its links file, a schema-1 document, or the stream of a run
that did not finish) and checked: every field against the published schema, each figure its test's
field in its test's unit and one a link can have; the figures that follow from others recomputed."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from typing import Any, cast

from ... import userfiles
from ...errors import OtherDocumentError, RdmabenchError, ResultsFileError
from ...measure import registry
from . import compact, derived, schema
from .contents import (
    ENTRY_KEY,
    KNOWN_FIGURES,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    STREAM_SUFFIX,
    ResultsDocument,
    build_matrices,
    figure_field,
)

_REQUIRED_ENTRY_FIELDS = {*ENTRY_KEY, "samples", "validated", "transport", "unit"}


def load(path: str, lazy: bool = False) -> ResultsDocument:
    """Read a results file (or the .partial stream of a run that did not finish) and check its
    shape; raise ResultsFileError naming the file otherwise. A schema-2 file comes back in the
    schema-1 shape, its entries under "results": a list, or (lazy) read from the links file each
    time they are iterated."""
    if path.endswith(compact.LINKS_SUFFIX):
        raise ResultsFileError(
            f"{path}: the links file of a schema-2 result; give its summary, {path[: -len(compact.LINKS_SUFFIX)]}.json"
        )
    try:  # not a regular file, or too large: FileRefusedError names it (a report skips it)
        # a run's stream is read back as it was written: never through a link (docs/security.md)
        stream = path.endswith(STREAM_SUFFIX)
        text = userfiles.read_input(path, userfiles.max_input_bytes(), follow_links=not stream).decode("utf-8")
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{path}: not valid JSON ({exc})") from None
    doc = _parse_stream(text, path, matrices=not lazy) if path.endswith(STREAM_SUFFIX) else _parse_json(text, path)
    if _version(doc) == 2 and not path.endswith(STREAM_SUFFIX):
        doc = _expand_summary(doc, path, lazy)
    return validate(doc, path)


def other_document(path: str) -> bool:
    """Whether `path` is JSON that is no rdmabench results (a report, a verdict kept beside them), read
    bounded: what an output may replace among a folder's files. A results file, a run's stream and a
    file that cannot be read or parsed (a damaged result, perhaps) are not."""
    doc = _peek(path)
    if doc is None:
        return False
    found = doc.get("schema")
    return not (isinstance(found, dict) and found.get("name") == SCHEMA_NAME)


def named_links_file(path: str) -> str | None:
    """The links file a summary's record names (`links.file`, beside the summary: what `load` reads,
    under any name), read bounded; None for a file that names none (schema 1, a stream, other JSON,
    a file that cannot be read or parsed)."""
    doc = _peek(path)
    links = doc.get("links") if doc is not None else None
    name = links.get("file") if isinstance(links, dict) else None
    if not isinstance(name, str) or os.path.basename(name) in ("", ".", ".."):
        return None
    return os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(name))


def _peek(path: str) -> dict[str, Any] | None:
    """A file's JSON object, read bounded, for a look at one of its keys (other_document,
    named_links_file); None for a run's stream, or a file that cannot be read or parsed, or no object."""
    if path.endswith(STREAM_SUFFIX):
        return None
    try:
        doc = json.loads(userfiles.read_input(path, userfiles.max_input_bytes()), parse_constant=schema.not_json)
    except (OSError, ValueError, RecursionError, RdmabenchError):  # unreadable, refused, not JSON
        return None
    return doc if isinstance(doc, dict) else None


def _version(doc: Any) -> Any:
    schema = doc.get("schema") if isinstance(doc, dict) else None
    return schema.get("version") if isinstance(schema, dict) and schema.get("name") == SCHEMA_NAME else None


def _expand_summary(doc: dict[str, Any], path: str, lazy: bool) -> dict[str, Any]:
    doc = schema.parts().summary(doc, path)  # every field as the published schema has it
    links, profiles = doc["links"], doc["profiles"]
    missing = missing_plugin(doc)
    if missing:  # before its profiles: only the plugin knows their figure and direction
        raise ResultsFileError(f"{path}: {missing}")
    for index, profile in enumerate(profiles):
        _check_test(profile, f"{path}: profiles[{index}]")
    ranks = {r["rank"]: r for r in doc["ranks"]}
    file = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(links["file"]))
    why = _links_file_problem(file)
    if why:
        raise ResultsFileError(f"{path}: cannot read its links file {os.path.basename(file)} ({why})")
    metadata = doc.get("metadata")
    unrun = compact.not_run(metadata.get("config") if isinstance(metadata, dict) else None)
    results = compact.LazyResults(file, links["count"], compact.Tables(profiles, ranks, unrun), _checked_entry)
    doc["results"] = results if lazy else list(results)
    return doc


def _links_file_problem(file: str) -> str | None:
    """Why the links file beside a summary cannot be read, as it is: missing, a link to nothing, or
    no regular file (a FIFO, a device, a link to /dev/zero); None when it is one."""
    try:
        found = os.stat(file)
    except FileNotFoundError:
        if os.path.islink(file):
            return f"it is a symbolic link to nothing ({os.readlink(file)})"
        return "not beside it; keep the two files together"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISREG(found.st_mode):
        return None
    linked = " a symbolic link to" if os.path.islink(file) else ""
    return f"it is{linked} {userfiles.kind_of(found.st_mode)}, not a regular file; not read"


def missing_plugin(doc: Mapping[str, object]) -> str | None:
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


def _check_test(profile: Mapping[str, object], where: str) -> None:
    """A profile's unit and figure field are its test's, as this process's registry has them (the
    schema holds the built-in tests to theirs; a plugin's come from its record). A test this
    process does not know is read by a figure field it knows, in that field's unit."""
    test, unit, figure = profile["test"], profile["unit"], profile["_figure"]
    kind = registry.find(test)
    if kind is not None and (figure, unit) != (kind.field, kind.unit):
        raise ResultsFileError(
            f"{where}: a {test} result in {schema.shown(unit)} under {schema.shown(figure)}: "
            f"the test measures {kind.field} in {kind.unit}"
        )
    if kind is None and figure not in dict(KNOWN_FIGURES):
        raise ResultsFileError(
            f"{where}: test {schema.shown(test)} is not known to this rdmabench and its figure {schema.shown(figure)} is none it reads "
            f"({', '.join(dict(KNOWN_FIGURES))}); load the test's plugin ({registry.PLUGINS_ENV})"
        )


def _parse_json(text: str, path: str) -> Any:
    try:
        return json.loads(text, parse_constant=schema.not_json)
    except (ValueError, RecursionError) as exc:
        raise ResultsFileError(f"{path}: not valid JSON ({exc})") from None


def _parse_stream(text: str, path: str, matrices: bool = True) -> dict[str, Any]:
    """A stream as a schema-1 document; its matrices only when asked (a report reads none, and a
    stream's groups each cost up to MATRICES_UP_TO squared cells, whatever few bytes made them)."""
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines):
        try:
            if schema.too_deep(line):  # refused before json and the checks recurse into it
                raise ValueError(f"nested more than {schema.MAX_NESTING} deep")
            records.append(json.loads(line, parse_constant=schema.not_json))
        except (ValueError, RecursionError):
            if number == len(lines) - 1:
                break  # the line being written when the run died
            raise ResultsFileError(f"{path}: line {number + 1} is not valid JSON") from None
    if not records or not isinstance(records[0], dict) or "schema" not in records[0]:
        raise ResultsFileError(f"{path}: not an rdmabench results stream (no header line)")
    header = records[0]
    entries = records[1:]
    if _version(header) == 2:
        schema.parts().metadata(header.get("metadata"), f"{path}: its metadata")  # before matrices are built of it
        entries = _stream_entries(records[1:], path)
    doc = {
        "schema": header.get("schema"),
        "complete": False,
        "stopped": "the run did not finish; read from its stream",
        "metadata": header.get("metadata"),
        "results": entries,
    }
    if matrices and isinstance(doc["metadata"], dict) and all(isinstance(e, dict) for e in entries):
        try:
            doc["matrices"] = build_matrices(doc["metadata"], entries, complete=False)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # validate() names what is wrong with the entries (a schema-1 stream's metadata has no schema)
    return doc


def _stream_entries(lines: list[Any], path: str) -> list[dict[str, Any]]:
    """The entries of a schema-2 stream: its profile and rank lines (each checked against the
    published schema's part for it) joined with its records."""
    tables, entries, parts = compact.Tables(), [], schema.parts()
    for number, line in enumerate(lines, start=2):
        where = f"{path}: line {number}"
        if not isinstance(line, dict):
            raise ResultsFileError(f"{where} is not a record of this stream (not a JSON object)")
        if "profile" in line and "entry" in line:
            if line["profile"] != len(tables.profiles):
                raise ResultsFileError(
                    f"{where} declares profile {line['profile']!r}; profile {len(tables.profiles)} comes next"
                )
            _check_test(parts.profile(line["entry"], where), where)
        elif "rank_info" in line:
            parts.rank(line["rank_info"], where)
        if not tables.absorb(line):
            entries.append(compact.entry_of(line, tables, where))
    return entries


def validate(doc: Any, path: str = "<results>") -> ResultsDocument:
    """`doc` (parsed JSON), checked as a results document; ResultsFileError naming `path` where it is not."""
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), dict):
        raise ResultsFileError(f"{path}: not an rdmabench results file (no schema)")
    declared = doc["schema"]
    if declared.get("name") != SCHEMA_NAME:
        kind = OtherDocumentError if str(declared.get("name", "")).startswith("rdmabench-") else ResultsFileError
        raise kind(f"{path}: not an rdmabench results file (schema {declared.get('name')!r})")
    version = declared.get("version")
    if type(version) is float and version.is_integer():
        version = int(version)  # one JSON number, however it is spelled
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ResultsFileError(f"{path}: bad schema version {version!r}")
    if version > SCHEMA_VERSION:
        raise ResultsFileError(
            f"{path}: schema version {version} is newer than this rdmabench reads ({SCHEMA_VERSION}); upgrade rdmabench"
        )
    results = doc.get("results")
    if not isinstance(doc.get("metadata"), dict) or not isinstance(results, (list, compact.LazyResults)):
        raise ResultsFileError(f"{path}: metadata must be an object and results a list")
    if version == 2:
        schema.parts().metadata(doc["metadata"], f"{path}: its metadata")
    if isinstance(results, list):  # lazy results are checked as they are read
        for index, entry in enumerate(results):
            _checked_entry(entry, f"{path}: results[{index}]")
    return cast(ResultsDocument, doc)  # what the checks above established


def _checked_entry(entry: Any, where: str) -> None:
    """Check an entry (see _validate_entry), then recompute the figures that follow from others."""
    _validate_entry(entry, where)
    derived.recompute(entry, figure_field(entry)[0])


def _validate_entry(entry: Any, where: str) -> None:
    """An entry (of a schema-1 file, or a schema-2 record joined with its profile and ranks): each
    field as schema 2 has it where it would be stored, its unit its test's, and figures a link
    can have."""
    if not isinstance(entry, dict):
        raise ResultsFileError(f"{where} is not an object")
    missing = _REQUIRED_ENTRY_FIELDS - entry.keys()
    if missing:
        raise ResultsFileError(f"{where} lacks {', '.join(sorted(missing))}")
    field, unit = figure_field(entry)
    if field not in entry:
        unknown = registry.find(entry["test"]) is None  # a plugin's test, read without its plugin
        hint = f" (test kind {entry['test']!r} is not known here: name its plugin in {registry.PLUGINS_ENV})"
        raise ResultsFileError(f"{where} has no {field}" + (hint if unknown else ""))
    compact.check_entry(entry, field, where)
    if entry["unit"] != unit:
        raise ResultsFileError(
            f"{where}: a {schema.shown(entry['test'])} result in {schema.shown(entry['unit'])}: its {field} is in {unit}"
        )
    _validate_figures(entry, where)


def _validate_figures(entry: dict[str, Any], where: str) -> None:
    """Refuse figures no link can have, beyond what the schema says of any number: a bandwidth at or
    above MAX_BANDWIDTH_GBPS (a report would rank it, and compare call a corrupt file an
    improvement). The bound depends on the unit, which a schema-2 record's profile holds."""
    field, unit = figure_field(entry)
    bound = compact.ceiling(unit)
    for name, values in ((field, [entry[field]]), ("samples", entry["samples"])):
        for value in values:
            if not math.isfinite(value) or value <= 0:
                raise ResultsFileError(f"{where}.{name} holds {value}: a figure must be a finite number above 0")
            if value >= bound:
                raise ResultsFileError(
                    f"{where}.{name} holds {value:g} {unit}: at or above {bound:g} GB/s (100 TB/s), beyond any link"
                )
