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
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import stat
import time
from typing import Any, TextIO

from ... import privatedirs, userfiles
from ...errors import FileRefusedError, OtherDocumentError, ResultsFileError, ResultsWriteError
from ...measure import registry
from . import compact, derived, identity, schema

SCHEMA_NAME = "rdmabench-results"
SCHEMA_VERSION = 2
MATRICES_UP_TO = 64  # ranks: beyond, N x N matrices are not stored (report draws by GPU and node)
RESULTS_DIR = "results"

STREAM_SUFFIX = ".partial"

ENTRY_KEY = ("test", "src_rank", "dst_rank", "src_mode", "dst_mode", "size_bytes")
_KNOWN_FIGURES = (("bandwidth_gbps", "GB/s"), ("latency_us", "us"))


def figure_field(entry: dict[str, Any]) -> tuple[str, str]:
    """The field holding an entry's figure, and its unit: the test's record says, or (a test this
    process does not know) the figure field the entry has, in that field's own unit."""
    kind = registry.find(entry.get("test"))
    if kind is not None:
        return kind.field, kind.unit
    for name, unit in _KNOWN_FIGURES:
        if name in entry:
            return name, unit
    return _KNOWN_FIGURES[0]


_REQUIRED_ENTRY_FIELDS = {*ENTRY_KEY, "samples", "validated", "transport", "unit"}


def document(metadata: dict[str, Any], entries: list[dict[str, Any]], complete: bool) -> dict[str, Any]:
    """A schema-1 document: every entry in one JSON file (`bench.copy`'s results, small files)."""
    metadata = identity.with_run_id(metadata)
    return {
        "schema": {"name": SCHEMA_NAME, "version": 1},
        "complete": complete,
        "metadata": metadata,
        "results": entries,
        "matrices": build_matrices(metadata, entries, complete),
    }


def build_matrices(metadata: dict[str, Any], entries: list[dict[str, Any]], complete: bool) -> list[dict[str, Any]]:
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
    matrices = []
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


# Set by the launching process for the ranks it starts: the output it reserved for them.
RESERVED_ENV = "RDMABENCH_RESERVED_OUTPUT"


def default_output_path(
    test: str, src_mode: str, dst_mode: str, directory: str = RESULTS_DIR, reserve_it: bool = True
) -> str:
    """results/rdmabench-<test>-<src>-<dst>-<UTC time>.json, with a suffix if that name is taken;
    reserved (see reserve) so that a run started in the same second takes the next name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    modes = src_mode if src_mode == dst_mode else f"{src_mode}-to-{dst_mode}"
    stem = os.path.join(directory, f"rdmabench-{test}-{modes}-{stamp}")
    own_results_dir(directory)
    for counter in range(10_000):
        path = f"{stem}.json" if counter == 0 else f"{stem}-{counter}.json"
        if os.path.exists(path) or os.path.exists(compact.links_path(path)):
            continue
        if not reserve_it:
            return path
        try:
            reserve(path)
        except ResultsFileError:
            continue  # another run took this name a moment ago
        return path
    raise ResultsFileError(f"no free results file name for {stem}.json")


def own_results_dir(directory: str) -> None:
    """The default folder for results (no -o), made 0755 when missing, else checked to be the
    user's own: a real folder (not a link), the user's, that nobody else can write. A `results/`
    another user left in a shared working folder would take the results where they can edit them.
    FileRefusedError, one line, otherwise (a folder the user cannot write in included)."""
    try:
        os.mkdir(directory, 0o755)
    except FileExistsError:
        pass
    except OSError as exc:
        where = os.path.abspath(os.path.dirname(os.path.abspath(directory)))
        raise FileRefusedError(
            f"cannot make the results folder {directory}/ in {where}: {exc.strerror or exc}; give -o PATH"
        ) from None
    try:
        reason = privatedirs.why_not_trusted(os.lstat(directory), directory=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    if reason:
        raise FileRefusedError(f"refusing the results folder {os.path.abspath(directory)}: {reason}; give -o PATH")


def reserve(path: str) -> None:
    """Claim `path` for this run: its stream PATH.partial created exclusively (O_EXCL), empty until
    the run writes its first line. Two runs never share a name, and a stream another run is writing,
    or left behind, is never truncated."""
    partial = stream_path(path)
    try:
        fd = os.open(partial, _CREATE, 0o666)
    except FileExistsError:
        raise ResultsFileError(_taken(path)) from None
    except OSError as exc:
        raise ResultsFileError(f"cannot write results to {path}: {exc.strerror or exc}") from None
    os.close(fd)
    os.environ[RESERVED_ENV] = os.path.abspath(path)  # for this process and the ranks it starts


# A stream is only ever a file this run created: never an existing file, never through a link.
_CREATE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def _reserved_here(path: str) -> bool:
    """`path` was reserved by this run (this process, or the one that started the ranks)."""
    return os.environ.get(RESERVED_ENV) == os.path.abspath(path)


def release(path: str) -> None:
    """Give back a reservation this run did not use (its stream still empty)."""
    partial = stream_path(path)
    with contextlib.suppress(OSError):
        found = os.lstat(partial)
        if stat.S_ISREG(found.st_mode) and found.st_size == 0:
            os.unlink(partial)


def _taken(path: str) -> str:
    partial = stream_path(path)
    try:
        found = os.lstat(partial)
    except OSError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        return (
            f"{partial} is {userfiles.kind_of(found.st_mode)}, not a stream rdmabench wrote; "
            f"remove it or choose another --output"
        )
    size = found.st_size if found is not None else 0
    if size == 0:
        return (
            f"another run is writing {path} ({partial} exists); choose another --output "
            f"(if no run is, remove the empty {partial})"
        )
    return (
        f"{partial} holds the results of a run that did not finish ({size} bytes): read it with "
        f"`rdmabench report {partial}`, or move it away; rdmabench does not overwrite it"
    )


def check_writable(path: str, force: bool) -> None:
    """Fail now, before any measurement, if the results could not be written to `path` (--force
    allows replacing a results file, never the stream of another run): the file, its stream and
    its links file each checked as `userfiles.check_output` does."""
    userfiles.check_output(path, force, "results")
    if os.path.lexists(stream_path(path)) and not _reserved_here(path):
        raise ResultsFileError(_taken(path))
    userfiles.check_output(compact.links_path(path), force, "results")


def write(path: str, doc: dict[str, Any]) -> None:
    """Replace `path` atomically with the JSON document `doc` (never through a link planted there)."""
    with userfiles.replacing(path) as handle:
        json.dump(doc, handle, indent=1)
        handle.write("\n")


SCHEMAS = schema.SCHEMAS


def json_schema(name: str) -> dict[str, Any]:
    """The published JSON Schema `name` (one of SCHEMAS), shipped in rdmabench/results/files/schemas/: the
    loader checks every file against it (schema.py)."""
    return schema.published(name)


def stream_path(path: str) -> str:
    return path + STREAM_SUFFIX


class ResultsStream:
    """The results of a running job, appended to PATH.partial as they are measured (schema 2): rank 0
    keeps only the profiles and the rank table, never the entries."""

    def __init__(self, path: str, metadata: dict[str, Any]):
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

    def _write_line(self, record: dict[str, Any]) -> None:
        try:
            self._handle.write(json.dumps(record, separators=(",", ":")) + "\n")
        except OSError as exc:
            raise self._failed(exc) from None

    def append(self, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            for line in self._compactor.lines(entry, figure_field(entry)[0]):
                self._write_line(line)
        self.count += len(entries)
        self._sync(at_least_every=1.0)

    def finish(self, complete: bool, stopped: str | None = None) -> dict[str, Any]:
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
        if _reserved_here(path):
            with contextlib.suppress(FileNotFoundError):
                # O_NONBLOCK: a FIFO planted there must not hold the open until a reader comes.
                flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                return _reserved_stream(path, os.open(partial, flags))
        return open(os.open(partial, _CREATE, 0o666), "w", encoding="utf-8")
    except FileExistsError:
        raise ResultsFileError(_taken(path)) from None
    except OSError as exc:  # ELOOP: a link planted at the stream's name
        reason = _taken(path) if os.path.lexists(partial) else exc.strerror
        raise ResultsFileError(f"cannot write the results stream {partial}: {reason}") from None


def _reserved_stream(path: str, fd: int) -> TextIO:
    """The reservation opened (without following a link): still the empty regular file of ours it was."""
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_size != 0 or found.st_uid != os.geteuid():
        os.close(fd)
        raise ResultsFileError(_taken(path))
    os.set_blocking(fd, True)
    return open(fd, "w", encoding="utf-8")


def _assemble(path: str, complete: bool, stopped: str | None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
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


def _assemble_files(path: str, complete: bool, stopped: str | None, metadata: dict[str, Any] | None) -> dict[str, Any]:
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
                    entries.append(compact.expand(record, tables.profiles, tables.ranks))
    summary: dict[str, Any] = {
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


def salvage(path: str, stopped: str) -> dict[str, Any] | None:
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


def load(path: str, lazy: bool = False) -> dict[str, Any]:
    """Read a results file (or the .partial stream of a run that did not finish) and check its
    shape; raise ResultsFileError naming the file otherwise. A schema-2 file comes back in the
    schema-1 shape, its entries under "results": a list, or (lazy) read from the links file each
    time they are iterated."""
    if path.endswith(compact.LINKS_SUFFIX):
        raise ResultsFileError(
            f"{path}: the links file of a schema-2 result; give its summary, {path[: -len(compact.LINKS_SUFFIX)]}.json"
        )
    try:  # not a regular file, or too large: FileRefusedError names it (a report skips it)
        text = userfiles.read_input(path, userfiles.max_input_bytes()).decode("utf-8")
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{path}: not valid JSON ({exc})") from None
    doc = _parse_stream(text, path, matrices=not lazy) if path.endswith(STREAM_SUFFIX) else _parse_json(text, path)
    if _version(doc) == 2 and not path.endswith(STREAM_SUFFIX):
        doc = _expand_summary(doc, path, lazy)
    validate(doc, path)
    return doc  # type: ignore[no-any-return]


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
    results = compact.LazyResults(file, links["count"], profiles, ranks, _checked_entry)
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


def _check_test(profile: dict[str, Any], where: str) -> None:
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
    if kind is None and figure not in dict(_KNOWN_FIGURES):
        raise ResultsFileError(
            f"{where}: test {schema.shown(test)} is not known to this rdmabench and its figure {schema.shown(figure)} is none it reads "
            f"({', '.join(dict(_KNOWN_FIGURES))}); load the test's plugin ({registry.PLUGINS_ENV})"
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
            entries.append(compact.entry_of(line, tables.profiles, tables.ranks, where))
    return entries


def validate(doc: Any, path: str = "<results>") -> None:
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
