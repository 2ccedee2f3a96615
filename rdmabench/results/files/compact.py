"""Schema 2: results that hold a cluster. A link measurement is one short line of JSON; what many
links share is stored once and referenced.

A schema-1 entry is about 1.6 KB: its UCX report rows, limits, settings, hosts and GPUs are repeated
in every entry. Schema 2 splits each entry into
- a **record** (one line of `<results>.links.jsonl`): the ranks, the size, the figure, its samples,
  the steps per sample, the share of the link's limit, the round's time, and a profile number;
- a **profile** (stored once, in the summary): every field many entries share (test, modes, window,
  transport, protocol, UCX report, limit, warnings, settings...), with which per-rank fields apply;
- a **rank table** (stored once): each rank's host, GPU and NIC.
`expand` joins them back into the schema-1 entry (stats recomputed from the samples), so every
reader sees one shape. Floats keep 6 significant digits (the samples vary far more than that).

JSON Lines, not Parquet: it streams as rounds complete with nothing but the standard library, a
partly written file stays readable, and pandas (`pd.read_json(path, lines=True)`) and polars
(`pl.read_ndjson(path)`) load it in one line.
"""

from __future__ import annotations

import dataclasses
import io
import json
import json.scanner
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ... import userfiles
from ...errors import FileRefusedError, ResultsFileError
from ...measure.blockrecord import OFFLOADS
from ...stats import summarize
from ...units import MAX_BANDWIDTH_GBPS
from . import schema

LINKS_SUFFIX = ".links.jsonl"
T = TypeVar("T")
# Entry fields that vary from link to link, and their names in a record.
RECORD_FIELDS = {
    "src_rank": "src",
    "dst_rank": "dst",
    "size_bytes": "size",
    "samples": "samples",
    "iterations": "iterations",
    "share_of_limit": "share",
    "round_seconds": "round_s",
    "pattern_aggregate_gbps": "together",
    "pattern_share_of_limit": "together_share",
    "wire": "wire",
    "aggregate_gbps": "agg",
    "aggregate_samples": "agg_samples",
    "aggregate_share_of_limit": "agg_share",
    "remeasured_from": "remeasured_from",
    "cpu_s_per_gb": "cpu",
    "blocks": "blocks",  # block lists: per-transfer percentiles differ link by link
    "beside": "beside",  # --beside: each link's pairs of the transfer and the load, alone and together
}
# Fields of each end that belong to the rank: stored once in the rank table.
RANK_FIELDS = {"host": ("src_host", "dst_host"), "gpu": ("src_gpu", "dst_gpu"), "nic": ("src_nic", "dst_nic")}
_PER_RANK = {name for names in RANK_FIELDS.values() for name in names}
_RANK_FIELD_OF = {name: field for field, names in RANK_FIELDS.items() for name in names}  # src_host: host
DERIVED = ("stats", "messages_per_sample")  # recomputed on expansion
# Entry fields a record, the rank table or expansion fills in: never a profile's (the schema says
# so), except `blocks`, which profiles of earlier versions held.
FILLED_IN = frozenset({*RECORD_FIELDS, *_PER_RANK, *DERIVED, "bandwidth_gbps", "latency_us"})
_FIGURE = "_figure"  # the profile's name for the entry's figure field
_ENDS = "_ends"  # the per-rank fields the profile's entries carry


def ceiling(unit: Any) -> float:
    """The bound a figure in `unit` stays below: MAX_BANDWIDTH_GBPS for a bandwidth, none for a time."""
    return MAX_BANDWIDTH_GBPS if unit == "GB/s" else math.inf


def plausible(values: list[float], bound: float) -> bool:
    """Whether every value is finite, above 0 and below `bound` (False for an empty list): what a
    link's figures and samples must be. Three calls in C, not a loop: a million records take them.
    (Values so large that their sum overflows read as not plausible: the entry check decides.)"""
    return bool(values) and math.isfinite(sum(values)) and min(values) > 0 and max(values) < bound


def links_path(path: str) -> str:
    """Where the records of the results file `path` go: beside it, `.json` replaced."""
    stem = path[: -len(".json")] if path.endswith(".json") else path
    return stem + LINKS_SUFFIX


# Significant digits a record keeps: 6, or fewer for figures that vary more than that from run to
# run (CPU seconds per GB, a shared counter's rate): about 15 bytes a link.
_DIGITS = {"cpu_s_per_gb": 3, "wire": 4}


def _short(value: object, digits: int = 6) -> object:
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, list):
        return [_short(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: _short(v, digits) for k, v in value.items()}
    return value


class Compactor:
    """Turns entries into stream lines: a profile or rank line when one is new, then the record."""

    def __init__(self) -> None:
        self.tables = Tables()  # what the lines declared so far
        self._ids: dict[str, int] = {}

    def lines(self, entry: Mapping[str, object], figure: str) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        record: dict[str, object] = {}
        for name, short in RECORD_FIELDS.items():
            if entry.get(name) is not None:
                record[short] = _short(entry[name], _DIGITS.get(name, 6))
        record["value"] = _short(entry[figure])
        ends = []
        for field, names in RANK_FIELDS.items():
            for end, name in zip(("src_rank", "dst_rank"), names, strict=True):
                if name not in entry:
                    continue
                rank = entry[end]
                if not isinstance(rank, int):
                    raise TypeError(f"{end} must be a rank, not {rank!r}")
                known = self.tables.ranks.setdefault(rank, {"rank": rank})
                if field not in known:
                    known[field] = entry[name]
                    out.append({"rank_info": dict(known)})
                if known[field] == entry[name]:
                    ends.append(name)
                else:  # not this rank's usual value: kept in the record
                    record[name] = entry[name]
        skip = {*RECORD_FIELDS, *DERIVED, figure, *_PER_RANK}
        shared = {k: v for k, v in entry.items() if k not in skip}
        shared[_FIGURE], shared[_ENDS] = figure, ends
        key = json.dumps(shared, sort_keys=True)
        if key not in self._ids:
            self._ids[key] = len(self.tables.profiles)
            self.tables.profiles.append(shared)
            out.append({"profile": self._ids[key], "entry": shared})
        record["profile"] = self._ids[key]
        out.append(record)
        return out


@dataclass
class Tables:
    """The profiles and the rank table of a schema-2 file: what its link records expand against,
    declared as a stream goes (gathered by a reader, or by the Compactor that writes them) or read
    from a summary. A profile is an entry's shared fields (open: its keys are the entry's); a rank's
    row, its per-rank fields by rank."""

    profiles: list[dict[str, object]] = dataclasses.field(default_factory=list)
    ranks: dict[int, dict[str, object]] = dataclasses.field(default_factory=dict)
    # Record fields the run's configuration says it never wrote, with why (`not_run`): a record that
    # holds one is damaged. Empty where the configuration does not say (a stream, an older file).
    unrun: dict[str, str] = dataclasses.field(default_factory=dict)

    def absorb(self, line: Mapping[str, object]) -> bool:
        """Take a profile or rank line (True); a link record is left to the caller (False). Raises
        TypeError or ValueError for a line that says it is one and is not an object with a rank."""
        if "profile" in line and "entry" in line:
            self.profiles.append(_object(line["entry"], "a profile's entry"))
            return True
        if "rank_info" in line:
            info = _object(line["rank_info"], "rank_info")
            self.ranks[int(_number(info["rank"], "a rank"))] = info
            return True
        return False


def not_run(config: object) -> dict[str, str]:
    """The record fields a run of this configuration (a summary's metadata.config) never writes,
    each with why: `blocks` without --blocks (or --model, --blocks-from, which set it), `beside`
    without --beside. Only a configuration a run wrote whole says so (it always records `blocks`)."""
    if not isinstance(config, dict) or "blocks" not in config:
        return {}
    unrun = {}
    if config["blocks"] is None:
        unrun["blocks"] = "a block list's record in a run without block lists (its configuration has no --blocks)"
    if config.get("beside", "none") in ("none", None):
        unrun["beside"] = "a record of compute beside the link in a run without --beside"
    return unrun


def same_rank(src: object, dst: object, blocks: object = None) -> str | None:
    """Why a link record from `src` to `dst` is none: both ends one rank (no protocol measures a rank
    against itself), but for an offload, a block list between a rank's GPU pool and its own pinned pool,
    whose record's `offload` says which way ("out" or "in": measure/blockrecord.py): that field is what
    makes a rank with itself a link. Schema-1 documents of one process (`storage`, `copy`) name rank 0
    at both ends and are no link records."""
    if src != dst:
        return None
    if isinstance(blocks, dict) and blocks.get("offload") in OFFLOADS:
        return None
    return f"src and dst are both rank {src}: a link record joins two ranks (or is an offload's, which says so)"


def _object(value: object, what: str) -> dict[str, object]:
    """A JSON object read back (TypeError where `value` is none)."""
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be an object")
    return value


def _number(value: object, what: str) -> int | float | str:
    """A value int() takes as JSON holds it: a number (or a string of one: int() says what is wrong)."""
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"{what} must be a number, not {value!r}")
    return value


def expand(record: dict[str, Any], tables: Tables) -> dict[str, Any]:
    """The schema-1 entry a record stands for. Raises KeyError, IndexError, TypeError or ValueError
    if the record does not fit its profiles (the loader names the line)."""
    profiles, ranks = tables.profiles, tables.ranks
    if not 0 <= record["profile"] < len(profiles):
        raise ValueError(f"profile {record['profile']} is not among the summary's {len(profiles)} profiles")
    profile = profiles[record["profile"]]
    for short, why in tables.unrun.items():
        if short in record:
            raise ValueError(f"it holds {short}: {why}")
    if (one := same_rank(record["src"], record["dst"], record.get("blocks", profile.get("blocks")))) is not None:
        raise ValueError(one)
    entry = {k: v for k, v in profile.items() if k not in (_FIGURE, _ENDS)}
    for name, short in RECORD_FIELDS.items():
        if short in record:
            entry[name] = record[short]
    for field, names in RANK_FIELDS.items():
        for end, name in zip((record["src"], record["dst"]), names, strict=True):
            if name in record:
                entry[name] = record[name]
            elif name in profile[_ENDS]:
                if field not in ranks.get(end, {}):
                    raise ValueError(
                        f"rank {end} has no {field} in the ranks table, which profile {record['profile']} takes"
                    )
                entry[name] = ranks[end][field]
    samples = record["samples"]
    if not isinstance(samples, list) or not samples or not all(isinstance(v, (int, float)) for v in samples):
        raise TypeError("samples must be a list of numbers")
    entry["stats"] = summarize([float(v) for v in samples])
    # The figure is the median sample, as in schema 1 (`value` in the record is that, rounded).
    entry[profile[_FIGURE]] = entry["stats"]["median"] if isinstance(record["value"], (int, float)) else None
    window, passes = profile.get("window"), profile.get("passes")
    entry["messages_per_sample"] = record["iterations"] * (window if window else 1) * (passes if passes else 1)
    return entry


def entry_of(record: Any, tables: Tables, where: str) -> dict[str, Any]:
    """The entry of a link record checked against the published link schema, or ResultsFileError
    naming `where` and what is wrong."""
    record = schema.parts().link(record, where)
    try:
        return expand(record, tables)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ResultsFileError(f"{where} is not a link record of this result ({exc})") from None


def check_entry(entry: dict[str, Any], figure: str, where: str) -> None:
    """Check each field of an entry against the part of schema 2 it is stored in (a record's field,
    an end's rank row, or its profile), so schema-1 files follow the published schema field by
    field; integral floats of integer fields become ints. ResultsFileError names the first field
    that breaks it."""
    parts = schema.parts()
    check: schema.Check | None
    for name, value in list(entry.items()):
        if name in DERIVED:
            continue  # recomputed on load (derived.py), never read
        if name == figure:
            check = parts.link_fields["value"]
        elif name in RECORD_FIELDS:
            check = parts.link_fields.get(RECORD_FIELDS[name])
        elif name in _PER_RANK:
            check = parts.rank_fields.get(_RANK_FIELD_OF[name])
        else:
            check = parts.profile_fields.get(name)
        if check is not None:
            entry[name] = schema.check_field(check, value, name, where)


def read_links(path: str, tables: Tables, check: Callable[[Any, str], None] | None = None) -> Iterator[dict[str, Any]]:
    """The entries of a links file, one at a time, each passed to `check` (the loader's entry
    check); a bad line raises ResultsFileError naming it."""
    for number, record in _lines(path):
        yield _expanded(path, number, record, tables, check)


@dataclass(frozen=True)
class Profile:
    """What the ordinary records of one profile share: `entry`, the checked entry of its first
    ordinary record (use only its profile's fields: test, modes, limit, settings...), and `ends`, the
    per-rank fields (src_host, dst_gpu...) its entries take from the rank table."""

    entry: dict[str, Any]
    ends: frozenset[str]


# An ordinary record: the fields the Compactor writes, nothing an end overrides.
_ORDINARY_KEYS = frozenset({*RECORD_FIELDS.values(), "value", "profile"})
_NUMBER_TYPES = (int, float)
_FLOATS = {float}


class _Scanner:
    """Tells the ordinary records of a links file from the others, and keeps one checked entry per
    profile: an ordinary record differs from it only in fields this class checks itself."""

    def __init__(self, tables: Tables):
        self.profiles, self.ranks = tables.profiles, tables.ranks
        self.known: dict[int, Profile] = {}
        self._fits: dict[int, tuple[set[int], set[int]] | None] = {}  # per profile: ranks usable as src, as dst
        self._ceilings: dict[int, float] = {}  # per profile: the bound its figures stay below
        self._check = schema.parts().link
        self.unrun = tables.unrun.keys()

    def _fit(self, index: int) -> tuple[set[int], set[int]] | None:
        """Per end, the ranks whose table row holds every field the profile's entries take from it;
        None for a profile holding a field that a record, a rank or the figure fills in (the
        Compactor's never do)."""
        if index not in self._fits:
            profile = self.profiles[index]
            if not isinstance(profile, dict):
                self._fits[index] = None
                return None
            clash = FILLED_IN & profile.keys()
            ends = profile.get(_ENDS)
            if clash or not isinstance(ends, list):
                self._fits[index] = None
                return None
            fits = [
                {
                    rank
                    for rank, info in self.ranks.items()
                    if {f for f, n in RANK_FIELDS.items() if n[i] in ends} <= info.keys()
                }
                for i in (0, 1)
            ]
            self._fits[index] = (fits[0], fits[1])
        return self._fits[index]

    def ordinary(self, record: Any) -> int | None:
        """The profile of `record` if it expands like any other of that profile's and passes the
        entry check wherever the profile's first ordinary record did; else None."""
        if type(record) is not dict or not record.keys() <= _ORDINARY_KEYS:
            return None
        try:
            self._check(record, "")  # every field as the published schema has it
        except ResultsFileError:
            return None  # expanded and checked again, to name what is wrong
        index, src, dst = record["profile"], record["src"], record["dst"]  # whole numbers, at least 0
        if index >= len(self.profiles) or {*map(type, record["samples"])} != _FLOATS:
            return None  # a profile past the end; samples that are not all floats (rows keep floats)
        if src == dst or not self.unrun.isdisjoint(record):
            return None  # one rank at both ends, a field the run never wrote: expanded, and refused by name
        fit = self._fit(index)
        if fit is None or src not in fit[0] or dst not in fit[1] or not self._plausible(index, record):
            return None
        return index

    def _plausible(self, index: int, record: dict[str, Any]) -> bool:
        """Whether the samples (and a bibw record's aggregate) are figures a link can have, by the
        rule of `reading`'s entry check; a record that fails is expanded, and the check names it."""
        bound = self._ceilings.get(index)
        if bound is None:
            bound = self._ceilings[index] = ceiling(self.profiles[index].get("unit"))
        if not plausible(record["samples"], bound):
            return False
        if "agg" not in record and "agg_samples" not in record:
            return True
        agg, together = record.get("agg"), record.get("agg_samples")
        if type(agg) not in _NUMBER_TYPES or type(together) is not list or {*map(type, together)} - _FLOATS:
            return False
        return plausible([float(agg), *together], MAX_BANDWIDTH_GBPS)  # type: ignore[arg-type]

    def profile(self, record: Any) -> Profile | None:
        """The Profile of an ordinary record whose profile has a checked entry already."""
        index = self.ordinary(record)
        return self.known.get(index) if index is not None else None

    def learn(self, record: Any, entry: dict[str, Any]) -> None:
        """Keep the checked entry of an ordinary record as its profile's first."""
        index = self.ordinary(record)
        if index is not None and index not in self.known:
            ends = self.profiles[index][_ENDS]  # a list: `ordinary` took only a profile whose ends are one
            self.known[index] = Profile(entry, frozenset(ends if isinstance(ends, list) else ()))


def read_records(
    path: str, tables: Tables, check: Callable[[Any, str], None] | None = None
) -> Iterator[tuple[Profile | None, dict[str, Any]]]:
    """The links of a links file, without expanding a million entries: (its Profile, the record)
    for an ordinary record whose profile's first ordinary record was expanded and checked already,
    else (None, the entry, expanded and checked as `read_links` does). Ranks, size, samples and
    figure of an ordinary record are checked here, with the rule of `reading`'s entry check."""
    scanner = _Scanner(tables)
    for number, record in _lines(path):
        profile = scanner.profile(record)
        if profile is not None:
            yield profile, record
            continue
        entry = _expanded(path, number, record, tables, check)
        scanner.learn(record, entry)
        yield None, entry


# What json.loads calls, without its wrapper: a million lines parse a fifth quicker.
_SCAN = json.scanner.make_scanner(json.JSONDecoder(parse_constant=schema.not_json))  # type: ignore[arg-type]


def _lines(path: str) -> Iterator[tuple[int, Any]]:
    """Each line of a links file, its number and its JSON (what json.loads makes of it); a line
    that is not JSON raises ResultsFileError naming it."""
    longest = userfiles.max_input_bytes()
    try:
        handle = io.TextIOWrapper(userfiles.open_input(path, userfiles.max_by_line_bytes(), "links file"), "utf-8")
    except FileRefusedError as exc:
        raise ResultsFileError(f"{exc} (the links file)") from None
    with handle:  # a line at a time, each bounded: a file of one endless line is not read whole
        for number, line in enumerate(iter(lambda: _line(handle, path, longest), ""), start=1):
            if len(line) == longest and not line.endswith("\n"):
                raise ResultsFileError(f"{path}: line {number} is longer than {longest} characters: not a link record")
            if schema.too_deep(line):
                raise ResultsFileError(
                    f"{path}: line {number} nests more than {schema.MAX_NESTING} levels deep: not a link record"
                )
            try:
                record, end = _SCAN(line, 0)
                if end == len(line) or line[end:] == "\n":
                    yield number, record
                    continue
            except (StopIteration, ValueError, RecursionError):
                pass  # json.loads says what is wrong, or reads what the scanner alone did not
            try:
                record = json.loads(line, parse_constant=schema.not_json)
            except (ValueError, RecursionError) as exc:  # json.JSONDecodeError among them
                raise ResultsFileError(f"{path}: line {number} is not a link record ({exc})") from None
            yield number, record


def _line(handle: io.TextIOWrapper, path: str, longest: int) -> str:
    """The file's next line (at most `longest` characters); bytes that are not UTF-8 are one line
    naming the file, never a traceback."""
    try:
        return handle.readline(longest)
    except UnicodeDecodeError as exc:
        raise ResultsFileError(
            f"{path}: a line is not UTF-8 ({exc.reason} at byte {exc.start}): not a link record"
        ) from None


def _expanded(
    path: str, number: int, record: Any, tables: Tables, check: Callable[[Any, str], None] | None
) -> dict[str, Any]:
    entry = entry_of(record, tables, f"{path}: line {number}")
    if check is not None:
        check(entry, f"{path}: line {number}")
    return entry


def count_lines(path: str) -> int:
    """The lines of a links file (a last line without its newline counts), read in bounded chunks:
    a million links are counted in a fraction of a second."""
    try:
        handle = userfiles.open_input(path, userfiles.max_by_line_bytes(), "links file")
    except FileRefusedError as exc:
        raise ResultsFileError(f"{exc} (the links file)") from None
    lines, last = 0, b"\n"
    with handle:
        while chunk := handle.read(_COUNT_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


_COUNT_CHUNK = 1 << 20


def agree(path: str, expected: int, found: int) -> None:
    """The one check of a links file against its own summary: as many records as the summary's
    `links.count`. A file cut short (its failing links removed, say) or added to is refused."""
    if found != expected:
        raise ResultsFileError(
            f"{path}: {found} link record(s), but its summary says {expected}: the links file was "
            f"{'cut short' if found < expected else 'added to'}; not read (keep the two files as rdmabench wrote them)"
        )


class LazyResults:
    """A schema-2 file's entries, read from its links file each time they are iterated: a report on
    a million links never holds them all. The file must hold as many records as its summary says
    (checked when made, and again on each full pass: a file that changes between is refused too)."""

    def __init__(self, path: str, count: int, tables: Tables, check: Callable[[Any, str], None] | None = None):
        self.path, self.count, self.tables, self.check = path, count, tables, check
        agree(path, count, count_lines(path))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._counted(read_links(self.path, self.tables, self.check))

    def records(self) -> Iterator[tuple[Profile | None, dict[str, Any]]]:
        """The links as `read_records` gives them: a report's pass over a million links."""
        return self._counted(read_records(self.path, self.tables, self.check))

    def _counted(self, items: Iterator[T]) -> Iterator[T]:
        found = 0
        for item in items:
            found += 1
            yield item
        agree(self.path, self.count, found)

    def __len__(self) -> int:
        return self.count
