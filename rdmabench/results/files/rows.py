"""Rows: the links of many results files aggregated per link and per (test, modes, size, load, settings),
across runs (aggregate). What a row is (row), what an entry gives it (entries), which entries a report
takes (filters) and how rows stand against their class (standings) live beside it; their names are
importable from here too, where callers have always imported them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, NamedTuple

from ...errors import ResultsFileError
from ...hardware.limits import Limit
from ...measure import registry
from ...modes import mode_named
from ...stats import sorted_median
from . import compact, dates, derived
from .bulk import bulk, bulk_chunks
from .docrecord import ResultsDocument
from .entries import (
    LINK_CLASSES,
    NO_RECORDS,
    Records,
    end_name,
    figure,
    load_of,
    mode_label,
    record_key,
    records_of,
    settings_of,
)
from .filters import Filters
from .row import ROW_KEY, Row, RowState
from .standings import CULPRITS_LISTED, class_key, classes, culprits, outliers, standings

# What callers import from here, wherever it lives.
__all__ = [
    "CULPRITS_LISTED", "LINK_CLASSES", "ROW_KEY", "Filters", "Row", "aggregate", "bulk", "bulk_chunks", "class_key",
    "classes", "culprits", "load_of", "outliers", "settings_of", "standings",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Kind:
    """What the links of one profile share in a report: their row's labels and what it gathers."""

    test: str
    src_mode: str  # labels (a staged end with its pipeline's shape)
    dst_mode: str
    load: str
    settings: tuple[tuple[str, str], ...]
    unit: str
    higher_is_better: bool
    transports: frozenset[str]
    warnings: frozenset[str]
    limit: str | None
    limit_kind: str | None
    limit_gbps: float | None
    on_device: bool  # an end's memory is on a GPU (a link between one GPU's ends is "same GPU")
    remeasured: bool  # a screen's slow link measured again, alone
    at_once: int  # the links measured at once in its round
    accepted: bool  # by the filters on test and modes
    labels: int  # one number per (test, modes, load, settings): with size and link, a row's key
    bound: Limit | None = None  # the limit a figure's share is taken of (derived.share_of_limit)


class _Link(NamedTuple):
    """What one link (its two ends) gives its row."""

    name: str
    link_class: str
    src_host: Any
    dst_host: Any
    nics: tuple[str, ...]


End = tuple[Any, Any, str | None, str]  # an end's host, GPU, "host/NIC" (None: no NIC known) and name


def _link(src: End, dst: End, on_device: bool) -> _Link:
    """A link from its ends (its name: each end's `entries.end_name`, src -> dst), as `entries.link_class`
    and the NICs of an entry."""
    if src[0] != dst[0]:
        klass = "inter-node"
    else:
        klass = "same GPU" if src[1] is not None and src[1] == dst[1] and on_device else "intra-node"
    nics = tuple(filter(None, (src[2], dst[2])))
    return _Link(f"{src[3]} -> {dst[3]}", klass, src[0], dst[0], nics)  # type: ignore[arg-type]


def _entry_end(entry: Mapping[str, object], end: str) -> End:
    nic = entry.get(f"{end}_nic")
    return (
        entry.get(f"{end}_host"),
        entry.get(f"{end}_gpu"),
        f"{entry.get(f'{end}_host')}/{nic}" if nic else None,
        end_name(entry, end),
    )


def _at_once(entry: Mapping[str, object]) -> int:
    links = entry.get("concurrent_links")
    return links if isinstance(links, int) and links > 1 else 1


def _on_device(entry: Mapping[str, object]) -> bool:
    return any(getattr(mode_named(entry.get(f"{end}_mode")), "on_device", False) for end in ("src", "dst"))


@bulk
def aggregate(
    documents: list[tuple[str, ResultsDocument]],
    filters: Filters | None = None,
    notes: list[str] | None = None,
    dropped: list[tuple[str, str]] | None = None,
) -> list[Row]:
    """The rows of `documents`, each a run: a row takes one figure a run, the first record of its
    link, size and settings in the file; records that repeat one (a file edited or joined, never one
    rdmabench writes) are not runs: counted once, and a line per file says so in `notes`.

    A links file is judged as it is folded, in the one pass: a bad line, bytes that are not UTF-8, a
    line too long or a count its summary does not give raise ResultsFileError. Without `dropped` that
    stops the aggregation; with it, the damaged file costs only its own run: what it had given the rows
    is taken back, and (its path, why) is added to `dropped`."""
    folder = _Folder(filters or Filters())
    for number, (path, doc) in enumerate(documents):
        folder.run, before = number, folder.repeated
        if dropped is None:
            folder.document(doc)
        elif (why := folder.whole_or_none(doc)) is not None:
            dropped.append((path, why))
            continue
        if notes is not None and folder.repeated > before:
            notes.append(
                f"{path}: {folder.repeated - before} record(s) repeat a link, size and settings measured "
                "earlier in the same file: one run gives one figure a link, the first counts"
            )
    found = sorted(
        folder.rows.values(), key=attrgetter("test", "src_mode", "dst_mode", "size_bytes", "load", "link", "settings")
    )
    _name_differences(found)
    return found


class _Folder:
    """Folds entries into rows, one per link at one (test, modes, size, load, settings). A schema-2
    file's ordinary records are folded as they are read, what their profile gives worked out once."""

    def __init__(self, filters: Filters):
        self.filters = filters
        self.rows: dict[tuple[Any, ...], Row] = {}
        self.labels: dict[tuple[Any, ...], int] = {}
        self.settings: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        self.intern = _Interner()
        self.filtering = any((filters.sizes, filters.hosts, filters.link_classes))
        self.run = 0  # which document is being folded
        self.repeated = 0  # records that repeated a row's figure of the same run: not counted
        # While a run that may turn out damaged is folded: the key of each row it made, or the key and
        # the state of a row it changed (Row.state), to put the rows back as they were. None: not kept.
        self.undo: list[tuple[tuple[Any, ...], RowState | None]] | None = None

    def whole_or_none(self, doc: ResultsDocument) -> str | None:
        """Fold a document; if its records turn out damaged on the way (ResultsFileError), put the
        rows back as they were before it and say why. The rows of other runs it touched are kept as
        they were: a new row removed, a changed one restored."""
        self.undo, repeated = [], self.repeated
        try:
            self.document(doc)
        except ResultsFileError as exc:
            for key, state in reversed(self.undo):
                if state is None:
                    del self.rows[key]
                else:
                    self.rows[key].restore(state)
            self.repeated = repeated
            return str(exc)
        finally:
            self.undo = None
        return None

    def document(self, doc: ResultsDocument) -> None:
        metadata = doc["metadata"]
        if not self.filters.accept_run(dates.parse_created(metadata.get("created_utc"))):
            return  # a run outside --since/--until: none of its links
        self.created = str(metadata.get("created_utc", ""))
        self.dates = self.intern.set(_NONE, (self.created[:10],))
        results = doc["results"]
        if not isinstance(results, compact.LazyResults):
            for entry in results:
                self.entry(entry, metadata)
            return
        kinds: dict[tuple[int, bool, str | None], tuple[_Kind, tuple[bool, ...], tuple[bool, ...]]] = {}
        ends: dict[tuple[int, tuple[bool, ...]], End] = {}
        for profile, item in results.records():
            if profile is None:
                self.entry(item, metadata)
                continue
            remeasured = item.get("remeasured_from") is not None
            records = records_of(item.get("blocks"), item.get("beside"))  # read back once, here
            # A record's own list and load beside it are settings too: paths and carve-outs of one profile.
            varies = record_key(records)
            found = kinds.get((id(profile), remeasured, varies))
            if found is None:
                found = kinds[(id(profile), remeasured, varies)] = self._profile_kind(profile, item, metadata, records)
            kind, src_has, dst_has = found
            if not kind.accepted:
                continue
            value = sorted_median(sorted(item["samples"]))  # stats.median of a list of floats, without its checks
            if not math.isfinite(value):
                continue
            src_end, dst_end = ends.get((item["src"], src_has)), ends.get((item["dst"], dst_has))
            if src_end is None:
                src_end = ends[(item["src"], src_has)] = _rank_end(results.tables.ranks, item["src"], src_has)
            if dst_end is None:
                dst_end = ends[(item["dst"], dst_has)] = _rank_end(results.tables.ranks, item["dst"], dst_has)
            link = _link(src_end, dst_end, kind.on_device)
            self.fold(
                kind,
                link,
                item["size"],
                value,
                item.get("cpu"),
                item.get("wire"),
                records,
                item["samples"],
            )

    def _profile_kind(
        self, profile: compact.Profile, item: dict[str, Any], metadata: dict[str, Any], records: Records
    ) -> tuple[_Kind, tuple[bool, ...], tuple[bool, ...]]:
        """The kind of a profile's links (with the record's own block list and load beside it: `records`),
        and which of (host, GPU, NIC) each end takes from the rank table."""
        remeasured = True if item.get("remeasured_from") is not None else None
        entry = dict(profile.entry, remeasured_from=remeasured)
        has = [tuple(names[i] in profile.ends for names in compact.RANK_FIELDS.values()) for i in (0, 1)]
        return self.kind(entry, metadata, records), has[0], has[1]

    def kind(self, entry: dict[str, Any], metadata: dict[str, Any], records: Records = NO_RECORDS) -> _Kind:
        settings = settings_of(entry, metadata, records)  # once per profile of a schema-2 file
        settings = self.settings.setdefault(settings, settings)  # a million rows share a few
        intern = self.intern
        limit, limit_kind, limit_gbps = _limit(entry.get("link_limit"))
        kind = _Kind(
            entry["test"],
            intern(mode_label(entry, "src")),
            intern(mode_label(entry, "dst")),
            intern(load_of(entry, records.beside)),
            settings,
            intern(entry.get("unit", "GB/s")),
            registry.higher_is_better(entry["test"], entry.get("unit")),
            intern.set(_NONE, (str(entry["transport"]),) if entry.get("transport") else ()),
            intern.set(_NONE, tuple(str(w) for w in entry["warnings"]) if entry.get("warnings") else ()),
            intern(limit) if limit is not None else None,
            intern(limit_kind) if limit_kind is not None else None,
            limit_gbps,
            _on_device(entry),
            entry.get("remeasured_from") is not None,
            _at_once(entry),
            self.filters.accept_kind(entry["test"], entry["src_mode"], entry["dst_mode"]),
            0,
        )
        labels = (kind.test, kind.src_mode, kind.dst_mode, kind.load, kind.settings)
        return replace(kind, labels=self.labels.setdefault(labels, len(self.labels)), bound=derived.limit_of(entry))

    def entry(self, entry: dict[str, Any], metadata: dict[str, Any]) -> None:
        """Fold one entry (a schema-1 file's, or a record that is not ordinary)."""
        value = figure(entry)
        if value is None or not self.filters.accept(entry):
            return
        records = records_of(entry.get("blocks"), entry.get("beside"))
        kind = self.kind(entry, metadata, records)
        link = _link(_entry_end(entry, "src"), _entry_end(entry, "dst"), kind.on_device)
        self.fold(
            kind,
            link,
            entry["size_bytes"],
            value,
            entry.get("cpu_s_per_gb"),
            entry.get("wire"),
            records,
            entry.get("samples"),
        )

    def fold(
        self,
        kind: _Kind,
        link: _Link,
        size: int,
        value: float,
        cpu: Any = None,
        wire: Any = None,
        records: Records = NO_RECORDS,
        samples: Any = None,
    ) -> None:
        """Add a link's figure and its share of its limit (never a file's) to its row."""
        if self.filtering and not self.filters.accept_link(size, link.src_host, link.dst_host, link.link_class):
            return
        key = (kind.labels, size, link.name)
        row = self.rows.get(key)
        intern = self.intern
        share = derived.share_of_limit(value, kind.bound) if kind.bound is not None else None
        shares = [share] if share is not None else []
        first = row is None
        if row is None:
            row = self.rows[key] = self._new_row(kind, link, size, value, shares)
            row.run = self.run
            if self.undo is not None:
                self.undo.append((key, None))
        elif row.run == self.run:  # a record repeated in one file is not another run
            self.repeated += 1
            return
        else:
            if self.undo is not None:  # the row as another run left it (a run changes a row once)
                self.undo.append((key, row.state()))
            row.run = self.run
            row.values.append(value)
            row.shares.extend(shares)
            row.transports = intern.union(row.transports, kind.transports)
            row.warnings = intern.union(row.warnings, kind.warnings)
            row.nics = row.nics.union(link.nics)
            if kind.limit is not None:
                row.limit, row.limit_kind, row.limit_gbps = kind.limit, kind.limit_kind, kind.limit_gbps
            row.dates = intern.union(row.dates, self.dates)
        if cpu is not None or wire is not None:
            row.add_costs(cpu, wire, intern)
        blocks, beside = records.blocks, records.beside
        if blocks is not None:
            row.add_list(blocks, samples, first)
        elif samples:  # a run's own spread (a block list's add_list keeps it)
            row.add_samples(samples)
        if beside is not None:
            row.add_beside(beside, blocks.posted if blocks is not None else None, first)

    def _new_row(self, kind: _Kind, link: _Link, size: int, value: float, shares: list[float]) -> Row:
        intern = self.intern
        return Row(
            kind.test,
            kind.src_mode,
            kind.dst_mode,
            size,
            link.name,
            link.link_class,
            intern(str(link.src_host)),
            intern(str(link.dst_host)),
            kind.unit,
            kind.load,
            kind.settings,
            kind.higher_is_better,
            "",
            [value],
            shares,
            kind.transports,
            self.dates,
            kind.warnings,
            kind.limit,
            kind.limit_kind,
            frozenset(link.nics),  # a pair of NICs per link: a million of them, not worth keeping once
            kind.limit_gbps,
            remeasured=kind.remeasured,
            at_once=kind.at_once,
        )


def _limit(limit: Any) -> tuple[str | None, str | None, float | None]:
    """A known physical limit as a row shows it ("NVLink 478.1 GB/s"), its kind and its GB/s."""
    if not isinstance(limit, dict) or not limit.get("gbps"):
        return None, None, None
    gbps = float(limit["gbps"])
    return f"{limit.get('kind')} {gbps:.1f} GB/s", str(limit.get("kind")), gbps


def _rank_end(ranks: dict[int, dict[str, object]], rank: int, has: tuple[bool, ...]) -> End:
    """An end from the rank table: the fields its profile takes from there."""
    info = ranks[rank]
    host, gpu, nic = (info[name] if wanted else None for name, wanted in zip(compact.RANK_FIELDS, has, strict=True))
    shown = host or "?"
    return (
        host,
        gpu,
        f"{host}/{nic}" if nic else None,
        f"{shown}:gpu{gpu}" if gpu is not None else f"{shown}:rank{rank}",
    )


_NONE: frozenset[str] = frozenset()


class _Interner:
    """One object for each distinct label or set of labels: a million rows share a handful of them."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}
        self._unions: dict[tuple[frozenset[str], frozenset[str]], frozenset[str]] = {}

    def __call__(self, text: str) -> str:
        return self._seen.setdefault(text, text)

    def set(self, old: frozenset[str], more: tuple[str, ...]) -> frozenset[str]:
        new = old.union(more)
        return self._sets.setdefault(new, new)

    def union(self, old: frozenset[str], more: frozenset[str]) -> frozenset[str]:
        """The one object for `old | more` (both interned: a handful of them, their unions remembered)."""
        found = self._unions.get((old, more))
        if found is None:
            found = self._unions[(old, more)] = self.set(old, tuple(more))
        return found


def _name_differences(rows: list[Row]) -> None:
    """Where one link was measured under different settings, each row names the settings that differ."""
    if len(set({id(row.settings): row.settings for row in rows}.values())) < 2:
        return  # one set of settings: no link was measured under two
    variants: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        variants.setdefault(row.link_key, []).append(row)
    for group in variants.values():
        if len(group) < 2:
            continue
        names = dict.fromkeys(name for row in group for name, _ in row.settings)  # a carve-out: some rows only
        differing = [name for name in names if len({dict(r.settings).get(name) for r in group}) > 1]
        for row in group:
            values = dict(row.settings)
            row.differs = ", ".join(f"{name}={values[name]}" for name in differing if name in values)
