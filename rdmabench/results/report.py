"""Aggregation of many results files: per link and per (test, modes, size), across runs, with
outliers, filters, and the comparison of two sets of runs."""

from __future__ import annotations

import csv
import functools
import gc
import io
import json
import json.encoder
import math
import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ..errors import OtherDocumentError, ResultsFileError
from ..hardware.limits import Limit
from ..measure import registry
from ..modes import mode_named
from ..units import format_size
from . import compact, derived, distribution, document

GROUPINGS = ("none", "host", "link-class", "mode", "size", "date")
LINK_CLASSES = ("same GPU", "intra-node", "inter-node")


F = TypeVar("F", bound=Callable[..., Any])


def bulk(function: F) -> F:
    """For a function that makes or walks a million rows: no cyclic garbage collection while it
    runs (rows make no cycles: the collector would only rescan them, again and again), and what it
    leaves frozen out of the collector's sight (reference counting still frees it)."""

    @functools.wraps(function)
    def paused(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.freeze()
            if enabled:
                gc.enable()

    return paused  # type: ignore[return-value]


@dataclass
class Loaded:
    documents: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per file that could not be used


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
            loaded.documents.append((path, document.load(path, lazy=True)))  # schema 2: read as aggregated
        except ResultsFileError as exc:
            if not isinstance(exc, OtherDocumentError):  # anchor comparisons live beside results
                loaded.problems.append(str(exc))
    return loaded


def link_class(entry: dict[str, Any]) -> str:
    if entry.get("src_host") != entry.get("dst_host"):
        return "inter-node"
    if (
        entry.get("src_gpu") is not None
        and entry.get("src_gpu") == entry.get("dst_gpu")
        and any(getattr(mode_named(entry.get(f"{end}_mode")), "on_device", False) for end in ("src", "dst"))
    ):
        return "same GPU"
    return "intra-node"


def _end(entry: dict[str, Any], end: str) -> str:
    gpu = entry.get(f"{end}_gpu")
    host = entry.get(f"{end}_host") or "?"
    return f"{host}:gpu{gpu}" if gpu is not None else f"{host}:rank{entry[f'{end}_rank']}"


def link_name(entry: dict[str, Any]) -> str:
    return f"{_end(entry, 'src')} -> {_end(entry, 'dst')}"


def mode_label(entry: dict[str, Any], end: str) -> str:
    """An end's memory mode; a staged end with its pipeline shape, since chunk size and buffer
    count change the figure as much as the mode does."""
    mode = str(entry[f"{end}_mode"])
    staging = entry.get("staging")
    if mode != "staged" or not isinstance(staging, dict):
        return mode
    chunk, buffers = staging.get("chunk_bytes"), staging.get(f"{end}_buffers")
    if isinstance(chunk, int) and isinstance(buffers, int):
        return f"staged({format_size(chunk)} x{buffers})"
    return mode


def load_of(entry: dict[str, Any]) -> str:
    if entry.get("remeasured_from") is not None:
        return "alone, re-measured after the screen"
    links = entry.get("concurrent_links") or 1
    return "alone" if links == 1 else f"{entry.get('pattern', 'concurrent')}, {links} links"


def figure(entry: dict[str, Any]) -> float | None:
    value = entry.get(document.figure_field(entry)[0])
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


# UCX settings that only steer logging or error reports: they do not change a figure.
_UCX_BOOKKEEPING = ("UCX_LOG_", "UCX_PROTO_INFO", "UCX_WARN_", "UCX_ERROR_", "UCX_HANDLE_ERRORS", "UCX_MEMTYPE_CACHE")


def settings_of(entry: dict[str, Any], metadata: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The settings that must match before two runs of a link are merged: who timed the steps,
    whether payloads were checked, the window, and the UCX settings in force. (Load, memory modes
    and a staged pipeline's shape are in the row's key already.) Entries from before the native
    loop carry no engine: the Python loop timed them."""
    ucx: dict[str, Any] = metadata.get("ucx_env") or {}
    if not isinstance(ucx, dict):
        ucx = {}
    tuned = ",".join(
        f"{key}={value}" for key, value in sorted(ucx.items()) if not str(key).startswith(_UCX_BOOKKEEPING)
    )
    settings: tuple[tuple[str, str], ...] = (
        ("engine", str(entry.get("engine") or "python")),
        ("validated", "yes" if entry.get("validated") else "no"),
        ("window", str(entry.get("window"))),
        ("ucx", tuned or "defaults"),
    )
    if entry.get("one_buffer"):  # a cache-resident figure: never merged with a buffer per message
        settings = (*settings, ("buffers", "one"))
    # Passes are not a setting: they adapt to the link and --sample-time from run to run.
    blocks = entry.get("blocks")
    if isinstance(blocks, dict):  # block lists (--blocks): never merged with plain messages or other shapes
        shape = f"{blocks.get('count')} x {blocks.get('layout')}, {blocks.get('batch')} in flight"
        return (*settings, ("blocks", shape))
    return settings


_LINK_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load")
_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load", "settings")  # link_key and settings
_CLASS_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link_class", "load", "settings")


def _median(values: list[float]) -> float:
    """statistics.median, without its cost for the one value most rows hold."""
    return values[0] if len(values) == 1 else statistics.median(values)


@dataclass(slots=True)
class Row:
    """One link at one (test, modes, size), over every run that measured it."""

    test: str
    src_mode: str
    dst_mode: str
    size_bytes: int
    link: str
    link_class: str
    src_host: str
    dst_host: str
    unit: str
    load: str = "alone"  # the link measured alone, or with others at once ("ring, 4 links")
    settings: tuple[tuple[str, str], ...] = ()  # what must match for runs to be merged (settings_of)
    higher_is_better: bool = True
    differs: str = ""  # the settings that tell this row from rows of the same link with other settings
    values: list[float] = field(default_factory=list)  # one figure per run
    samples: list[float] = field(default_factory=list)  # every sample of every run
    shares: list[float] = field(default_factory=list)
    transports: frozenset[str] = frozenset()
    dates: frozenset[str] = frozenset()
    warnings: frozenset[str] = frozenset()
    limit: str | None = None
    limit_kind: str | None = None  # "NVLink", "PCIe", "NIC", "host memory copy"
    nics: frozenset[str] = frozenset()  # inter-node links: "host/device" of each end
    limit_gbps: float | None = None  # the physical limit `limit` names, in GB/s
    # CPU seconds per GB at each end, summed over the runs that recorded it (cpu_runs): a mean, two
    # floats a row rather than two lists, for a million rows.
    cpu_src: float = 0.0
    cpu_dst: float = 0.0
    cpu_runs: int = 0
    # The wire check: the lowest share of the bytes its counter saw over the runs, and the counter.
    wire_ratio: float | None = None
    wire_dev: str | None = None

    @property
    def link_key(self) -> tuple[str, str, str, int, str, str]:
        return _LINK_KEY(self)  # type: ignore[no-any-return]

    @property
    def key(self) -> tuple[Any, ...]:
        return _KEY(self)  # type: ignore[no-any-return]

    def worse(self, off: float, fraction: float) -> bool:
        """Whether a relative change `off` of this row's figure is worse than `fraction`."""
        return off < -fraction if self.higher_is_better else off > fraction

    @property
    def median(self) -> float:
        return _median(self.values)

    @property
    def spread(self) -> float:
        """(max - min) / median across runs: 0 for a single run."""
        median = self.median
        return (max(self.values) - min(self.values)) / median if median else 0.0

    @property
    def share(self) -> float | None:
        return _median(self.shares) if self.shares else None

    @property
    def modes(self) -> str:
        return f"{self.src_mode}->{self.dst_mode}"

    @property
    def cpu_s_per_gb(self) -> dict[str, float] | None:
        """Mean CPU seconds per GB of each end over the runs, or None where no run recorded it."""
        if not self.cpu_runs:
            return None
        return {"src": self.cpu_src / self.cpu_runs, "dst": self.cpu_dst / self.cpu_runs}

    def add_costs(self, cpu: Any, wire: Any, intern: Callable[[str], str]) -> None:
        """A run's CPU cost ({"src", "dst"}) and wire check ({"dev", "ratio"}), where it has them."""
        if isinstance(cpu, dict) and cpu.get("src") is not None and cpu.get("dst") is not None:
            self.cpu_src += float(cpu["src"])
            self.cpu_dst += float(cpu["dst"])
            self.cpu_runs += 1
        if isinstance(wire, dict) and isinstance(wire.get("ratio"), (int, float)):
            ratio = float(wire["ratio"])
            if self.wire_ratio is None or ratio < self.wire_ratio:
                self.wire_ratio, self.wire_dev = ratio, intern(str(wire.get("dev")))

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "src_mode": self.src_mode,
            "dst_mode": self.dst_mode,
            "size_bytes": self.size_bytes,
            "link": self.link,
            "link_class": self.link_class,
            "load": self.load,
            "settings": dict(self.settings),
            "unit": self.unit,
            "runs": len(self.values),
            "median": self.median,
            "min": min(self.values),
            "max": max(self.values),
            "spread": self.spread,
            "share_of_limit": self.share,
            "link_limit": self.limit,
            "cpu_s_per_gb": self.cpu_s_per_gb,
            "wire": {"dev": self.wire_dev, "ratio": self.wire_ratio} if self.wire_dev else None,
            "transports": sorted(self.transports),
            "warnings": sorted(self.warnings),
        }


@dataclass(frozen=True)
class Filters:
    tests: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()  # an entry matches when its src or dst mode is listed
    sizes: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()  # an entry matches when either end ran there
    link_classes: tuple[str, ...] = ()
    since: str | None = None  # ISO dates (or date-times), inclusive
    until: str | None = None

    def accept(self, entry: dict[str, Any], created: str) -> bool:
        if not self.accept_kind(entry["test"], entry["src_mode"], entry["dst_mode"]):
            return False
        klass = link_class(entry) if self.link_classes else ""
        return self.accept_link(entry["size_bytes"], entry.get("src_host"), entry.get("dst_host"), klass, created)

    def accept_kind(self, test: Any, src_mode: Any, dst_mode: Any) -> bool:
        """What the filters say of a test and its memory modes."""
        if self.tests and test not in self.tests:
            return False
        return not (self.modes and src_mode not in self.modes and dst_mode not in self.modes)

    def accept_link(self, size: int, src_host: Any, dst_host: Any, klass: str, created: str) -> bool:
        """What the filters say of a link's size, hosts and class, and of its run's date."""
        if self.sizes and size not in self.sizes:
            return False
        if self.hosts and src_host not in self.hosts and dst_host not in self.hosts:
            return False
        if self.link_classes and klass not in self.link_classes:
            return False
        if self.since and created[: len(self.since)] < self.since:
            return False
        return not (self.until and created[: len(self.until)] > self.until)


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
    """A link from its ends, as `link_name`, `link_class` and the NICs of an entry."""
    if src[0] != dst[0]:
        klass = "inter-node"
    else:
        klass = "same GPU" if src[1] is not None and src[1] == dst[1] and on_device else "intra-node"
    nics = tuple(filter(None, (src[2], dst[2])))
    return _Link(f"{src[3]} -> {dst[3]}", klass, src[0], dst[0], nics)  # type: ignore[arg-type]


def _entry_end(entry: dict[str, Any], end: str) -> End:
    nic = entry.get(f"{end}_nic")
    return (
        entry.get(f"{end}_host"),
        entry.get(f"{end}_gpu"),
        f"{entry.get(f'{end}_host')}/{nic}" if nic else None,
        _end(entry, end),
    )


def _on_device(entry: dict[str, Any]) -> bool:
    return any(getattr(mode_named(entry.get(f"{end}_mode")), "on_device", False) for end in ("src", "dst"))


@bulk
def aggregate(documents: list[tuple[str, dict[str, Any]]], filters: Filters | None = None) -> list[Row]:
    folder = _Folder(filters or Filters())
    for _path, doc in documents:
        folder.document(doc)
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
        self.filtering = any((filters.sizes, filters.hosts, filters.link_classes, filters.since, filters.until))

    def document(self, doc: dict[str, Any]) -> None:
        metadata = doc["metadata"]
        self.created = str(metadata.get("created_utc", ""))
        self.dates = self.intern.set(_NONE, (self.created[:10],))
        results = doc["results"]
        if not isinstance(results, compact.LazyResults):
            for entry in results:
                self.entry(entry, metadata)
            return
        kinds: dict[tuple[int, bool], tuple[_Kind, tuple[bool, ...], tuple[bool, ...]]] = {}
        ends: dict[tuple[int, tuple[bool, ...]], End] = {}
        for profile, item in results.records():
            if profile is None:
                self.entry(item, metadata)
                continue
            remeasured = item.get("remeasured_from") is not None
            found = kinds.get((id(profile), remeasured))
            if found is None:
                found = kinds[(id(profile), remeasured)] = self._profile_kind(profile, remeasured, metadata)
            kind, src_has, dst_has = found
            if not kind.accepted:
                continue
            value = compact.median(item["samples"])
            if not math.isfinite(value):
                continue
            src_end, dst_end = ends.get((item["src"], src_has)), ends.get((item["dst"], dst_has))
            if src_end is None:
                src_end = ends[(item["src"], src_has)] = _rank_end(results.ranks, item["src"], src_has)
            if dst_end is None:
                dst_end = ends[(item["dst"], dst_has)] = _rank_end(results.ranks, item["dst"], dst_has)
            link = _link(src_end, dst_end, kind.on_device)
            self.fold(kind, link, item["size"], value, item["samples"], item.get("cpu"), item.get("wire"))

    def _profile_kind(
        self, profile: compact.Profile, remeasured: bool, metadata: dict[str, Any]
    ) -> tuple[_Kind, tuple[bool, ...], tuple[bool, ...]]:
        """The kind of a profile's links, and which of (host, GPU, NIC) each end takes from the rank table."""
        entry = dict(profile.entry, remeasured_from=True if remeasured else None)
        has = [tuple(names[i] in profile.ends for names in compact.RANK_FIELDS.values()) for i in (0, 1)]
        return self.kind(entry, metadata), has[0], has[1]

    def kind(self, entry: dict[str, Any], metadata: dict[str, Any]) -> _Kind:
        settings = settings_of(entry, metadata)  # once per profile of a schema-2 file
        settings = self.settings.setdefault(settings, settings)  # a million rows share a few
        intern = self.intern
        limit, limit_kind, limit_gbps = _limit(entry.get("link_limit"))
        kind = _Kind(
            entry["test"],
            intern(mode_label(entry, "src")),
            intern(mode_label(entry, "dst")),
            intern(load_of(entry)),
            settings,
            intern(entry.get("unit", "GB/s")),
            registry.higher_is_better(entry["test"], entry.get("unit")),
            intern.set(_NONE, (str(entry["transport"]),) if entry.get("transport") else ()),
            intern.set(_NONE, tuple(str(w) for w in entry["warnings"]) if entry.get("warnings") else ()),
            intern(limit) if limit is not None else None,
            intern(limit_kind) if limit_kind is not None else None,
            limit_gbps,
            _on_device(entry),
            self.filters.accept_kind(entry["test"], entry["src_mode"], entry["dst_mode"]),
            0,
        )
        labels = (kind.test, kind.src_mode, kind.dst_mode, kind.load, kind.settings)
        return replace(kind, labels=self.labels.setdefault(labels, len(self.labels)), bound=derived.limit_of(entry))

    def entry(self, entry: dict[str, Any], metadata: dict[str, Any]) -> None:
        """Fold one entry (a schema-1 file's, or a record that is not ordinary)."""
        value = figure(entry)
        if value is None or not self.filters.accept(entry, self.created):
            return
        kind = self.kind(entry, metadata)
        link = _link(_entry_end(entry, "src"), _entry_end(entry, "dst"), kind.on_device)
        samples = [float(v) for v in entry["samples"]]
        self.fold(kind, link, entry["size_bytes"], value, samples, entry.get("cpu_s_per_gb"), entry.get("wire"))

    def fold(
        self,
        kind: _Kind,
        link: _Link,
        size: int,
        value: float,
        samples: list[float],
        cpu: Any = None,
        wire: Any = None,
    ) -> None:
        """Add a link's figure and its share of its limit (never a file's) to its row; `samples` may become its own."""
        if self.filtering and not self.filters.accept_link(
            size, link.src_host, link.dst_host, link.link_class, self.created
        ):
            return
        key = (kind.labels, size, link.name)
        row = self.rows.get(key)
        intern = self.intern
        share = derived.share_of_limit(value, kind.bound) if kind.bound is not None else None
        shares = [share] if share is not None else []
        if row is None:
            self.rows[key] = Row(
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
                samples,
                shares,
                kind.transports,
                self.dates,
                kind.warnings,
                kind.limit,
                kind.limit_kind,
                frozenset(link.nics),  # a pair of NICs per link: a million of them, not worth keeping once
                kind.limit_gbps,
            )
            if cpu is not None or wire is not None:
                self.rows[key].add_costs(cpu, wire, intern)
            return
        if cpu is not None or wire is not None:
            row.add_costs(cpu, wire, intern)
        row.values.append(value)
        row.samples.extend(samples)
        row.shares.extend(shares)
        row.transports = intern.union(row.transports, kind.transports)
        row.warnings = intern.union(row.warnings, kind.warnings)
        row.nics = row.nics.union(link.nics)
        if kind.limit is not None:
            row.limit, row.limit_kind, row.limit_gbps = kind.limit, kind.limit_kind, kind.limit_gbps
        row.dates = intern.union(row.dates, self.dates)


def _limit(limit: Any) -> tuple[str | None, str | None, float | None]:
    """A known physical limit as a row shows it ("NVLink 478.1 GB/s"), its kind and its GB/s."""
    if not isinstance(limit, dict) or not limit.get("gbps"):
        return None, None, None
    gbps = float(limit["gbps"])
    return f"{limit.get('kind')} {gbps:.1f} GB/s", str(limit.get("kind")), gbps


def _rank_end(ranks: dict[int, dict[str, Any]], rank: int, has: tuple[bool, ...]) -> End:
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
        differing = [name for name, _ in group[0].settings if len({dict(r.settings)[name] for r in group}) > 1]
        for row in group:
            values = dict(row.settings)
            row.differs = ", ".join(f"{name}={values[name]}" for name in differing)


def class_key(row: Row) -> tuple[Any, ...]:
    """A row's class, the links it is judged against: test, modes, size, link class, load, settings."""
    return _CLASS_KEY(row)  # type: ignore[no-any-return]


def classes(rows: list[Row]) -> dict[tuple[Any, ...], list[Row]]:
    """The rows of each class (`class_key`), in the order they first come."""
    found: dict[tuple[Any, ...], list[Row]] = {}
    for row, key in zip(rows, map(_CLASS_KEY, rows), strict=True):
        members = found.get(key)
        if members is None:
            found[key] = [row]
        else:
            members.append(row)
    return found


def standings(rows: list[Row]) -> list[tuple[Row, float, int]]:
    """Each row, how far its figure is off the median of its class (test, modes, size, link class,
    load, settings), and how many rows the class has."""
    found = []
    for members in classes(rows).values():
        medians = [row.median for row in members]
        typical, size = statistics.median(medians), len(members)
        found += [
            (row, median / typical - 1 if typical else 0.0, size) for row, median in zip(members, medians, strict=True)
        ]
    return found


def class_distributions(rows: list[Row], fraction: float) -> list[distribution.Distribution]:
    """How the links of each class spread (see distribution.py), by class."""
    return distribution.distributions(classes(rows).items(), fraction)


def outliers(rows: list[Row], fraction: float) -> list[tuple[Row, float]]:
    """Links worse than their class's median by more than `fraction` (bandwidth below, latency
    above), with how far off they are."""
    # Two links have no majority to stand out from.
    found = [(row, off) for row, off, size in standings(rows) if size >= 3 and row.worse(off, fraction)]
    return sorted(found, key=lambda item: -abs(item[1]))


def group_key(row: Row, by: str) -> str:
    if by == "host":
        return row.src_host if row.src_host == row.dst_host else f"{row.src_host} -> {row.dst_host}"
    if by == "link-class":
        return row.link_class
    if by == "mode":
        return row.modes
    if by == "size":
        return format_size(row.size_bytes)
    if by == "date":
        return ", ".join(sorted(row.dates))
    return ""


_COLUMNS = (
    "test",
    "modes",
    "size",
    "link",
    "class",
    "load",
    "settings",
    "runs",
    "median",
    "min",
    "max",
    "spread",
    "share",
    "CPU s/GB",
    "wire",
    "transport",
)


def _cells(row: Row) -> list[str]:
    return [column[0] for column in _cell_columns([row])]


def _cell_columns(rows: list[Row]) -> list[list[str]]:
    """The cells of `rows` under _COLUMNS, column by column: a million rows format in seconds."""
    sizes: dict[int, str] = {}
    joined: dict[frozenset[str], str] = {}
    medians = [row.median for row in rows]
    lows = [min(row.values) for row in rows]
    highs = [max(row.values) for row in rows]
    shares = [row.share for row in rows]
    return [
        [row.test for row in rows],
        [f"{row.src_mode}->{row.dst_mode}" for row in rows],
        [sizes.get(row.size_bytes) or sizes.setdefault(row.size_bytes, format_size(row.size_bytes)) for row in rows],
        [row.link for row in rows],
        [row.link_class for row in rows],
        [row.load for row in rows],
        [row.differs or "-" for row in rows],
        [str(len(row.values)) for row in rows],
        [f"{median:.3f} {row.unit}" for median, row in zip(medians, rows, strict=True)],
        [f"{low:.3f}" for low in lows],
        [f"{high:.3f}" for high in highs],
        [
            f"{(high - low) / median if median else 0.0:.1%}"
            for high, low, median in zip(highs, lows, medians, strict=True)
        ],
        [f"{share:.0%}" if share is not None else "-" for share in shares],
        [_cpu_cell(row) for row in rows],
        [f"{row.wire_ratio:.2f} {row.wire_dev}" if row.wire_dev else "-" for row in rows],
        [
            joined.get(row.transports) or joined.setdefault(row.transports, ", ".join(sorted(row.transports)) or "-")
            for row in rows
        ],
    ]


def _cpu_cell(row: Row) -> str:
    """'src/dst' CPU seconds per GB, or '-'."""
    cost = row.cpu_s_per_gb
    return f"{cost['src']:.3g}/{cost['dst']:.3g}" if cost else "-"


def _aligned(header: tuple[str, ...], columns: list[list[str]]) -> list[str]:
    """A header and its columns as lines of left-aligned cells, two spaces apart."""
    widths = [max(len(name), max(map(len, column), default=0)) for name, column in zip(header, columns, strict=True)]
    line = "  ".join(f"{{:<{width}}}" for width in widths).format
    return [line(*header).rstrip()] + [line(*cells).rstrip() for cells in zip(*columns, strict=True)]


def _grouped(rows: list[Row], by: str) -> list[tuple[str, list[Row]]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(group_key(row, by), []).append(row)
    return sorted(groups.items())


OUTLIERS_LISTED = 100  # worst first; a cluster with a bad switch has thousands


def _outlier_lines(found: list[tuple[Row, float]], fraction: float) -> list[str]:
    if not found:
        return [f"no outliers: every link within {fraction:.0%} of the median of its class"]
    lines = [f"{len(found)} outlier(s), more than {fraction:.0%} worse than the median of their class:"]
    for row, off in found[:OUTLIERS_LISTED]:
        lines.append(
            f"  {row.link} ({row.link_class}) {row.test} {row.modes} {format_size(row.size_bytes)}: {row.median:.3f} {row.unit}, {off:+.0%}"
        )
    if len(found) > OUTLIERS_LISTED:
        lines.append(f"  ... and {len(found) - OUTLIERS_LISTED} more, less far off (all of them: --format json or csv)")
    if len(found) > 1:
        touched = culprits([row for row, _off in found])
        for what, key in (("node", "nodes"), ("GPU", "gpus"), ("NIC", "nics")):
            if touched[key]:
                top = ", ".join(f"{name} ({count})" for name, count in list(touched[key].items())[:CULPRITS_LISTED])
                lines.append(f"  outlier links per {what}, most first: {top}")
    return lines


CULPRITS_LISTED = 10


def culprits(rows: list[Row]) -> dict[str, dict[str, int]]:
    """How many of `rows` touch each GPU, node and NIC, most first: a slow part of a cluster shows up
    in many of its links (the report's outliers, the verdict's failures)."""
    counts = {
        "gpus": Counter(end for row in rows for end in set(row.link.split(" -> ")) if ":gpu" in end),
        "nodes": Counter(host for row in rows for host in {row.src_host, row.dst_host}),
        "nics": Counter(nic for row in rows for nic in row.nics),
    }
    return {what: dict(sorted(c.items(), key=lambda item: (-item[1], item[0]))) for what, c in counts.items()}


@bulk
def format_table(rows: list[Row], by: str, fraction: float) -> str:
    lines = [*distribution.text_lines(class_distributions(rows, fraction)), ""]
    lines += _outlier_lines(outliers(rows, fraction), fraction)
    for name, members in _grouped(rows, by):
        lines.append("")
        if name:
            lines.append(f"== {by}: {name}")
        lines += _aligned(_COLUMNS, _cell_columns(members))
    lines.append("")
    lines.append(
        "GB/s = 1e9 bytes/s; median/min/max over runs; spread = (max - min) / median; share = of the link's physical limit"
    )
    return "\n".join(lines)


def _escaped(column: list[str]) -> list[str]:
    """A column's cells with | escaped for a Markdown table."""
    if not any("|" in cell for cell in column):
        return column
    return [cell.replace("|", "\\|") for cell in column]


@bulk
def format_markdown(rows: list[Row], by: str, fraction: float) -> str:
    lines = ["# rdmabench report", ""]
    lines += [*distribution.markdown_lines(class_distributions(rows, fraction)), "", "## Outliers", ""]
    lines += [f"- {line.strip()}" for line in _outlier_lines(outliers(rows, fraction), fraction)]
    for name, members in _grouped(rows, by):
        lines.append("")
        if name:
            lines.append(f"## {by}: {name}")
            lines.append("")
        lines.append("| " + " | ".join(_COLUMNS) + " |")
        lines.append("|" + "---|" * len(_COLUMNS))
        columns = [_escaped(column) for column in _cell_columns(members)]
        lines += ["| " + " | ".join(cells) + " |" for cells in zip(*columns, strict=True)]
    lines.append("")
    lines.append("GB/s = 1e9 bytes/s; median/min/max over runs; share = of the link's physical limit.")
    return "\n".join(lines) + "\n"


@bulk
def format_json(rows: list[Row], fraction: float, problems: list[str]) -> str:
    """The rows, the outliers, the files that could not be used and the distribution per link
    class, as one JSON document."""
    found = outliers(rows, fraction)
    listed = [
        {"link": r.link, "test": r.test, "size_bytes": r.size_bytes, "modes": r.modes, "off": off} for r, off in found
    ]
    rest = json.dumps({"outliers": [], "skipped": problems}, indent=1)
    if listed:  # what json.dumps(..., indent=1) writes, without its pure-Python encoder's minutes
        items = ",\n".join(_indented_object(item, "  ") for item in listed)
        rest = rest.replace('"outliers": []', '"outliers": [\n' + items + "\n ]", 1)
    # Row by row, one line each: a million rows as one nested structure took gigabytes.
    spread = ",\n".join(json.dumps(one.to_dict()) for one in class_distributions(rows, fraction))
    rest = rest[: -len("\n}")] + ',\n "distributions": [\n' + spread + "\n ]\n}"  # a line per class
    encoder = _RowJson()
    return '{\n "rows": [\n' + ",\n".join(map(encoder.line, rows)) + "\n ],\n" + rest[2:]


def _indented_object(item: dict[str, Any], indent: str) -> str:
    """json.dumps(item, indent=1) of a flat object nested `indent` deep."""
    inner = ",\n".join(f"{indent} {_ENCODE_STR(key)}: {_json(value)}" for key, value in item.items())
    return f"{indent}{{\n{inner}\n{indent}}}"


_ENCODE_STR: Callable[[str], str] = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _json(value: Any) -> str:
    """json.dumps(value), without its cost for the strings and numbers a million rows hold."""
    kind = type(value)
    if kind is str:
        return _ENCODE_STR(value)
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)
    return json.dumps(value)


class _RowJson:
    """json.dumps(row.to_dict()), for a million rows: labels, settings and sets written once."""

    def __init__(self) -> None:
        self._labels: dict[str, str] = {}
        self._settings: dict[tuple[tuple[str, str], ...], str] = {}
        self._sets: dict[frozenset[str], str] = {}

    def _label(self, value: Any) -> str:
        if type(value) is not str:
            return _json(value)
        found = self._labels.get(value)
        if found is None:
            found = self._labels[value] = _ENCODE_STR(value)
        return found

    def _set(self, values: frozenset[str]) -> str:
        found = self._sets.get(values)
        if found is None:
            found = self._sets[values] = json.dumps(sorted(values))
        return found

    def line(self, row: Row) -> str:
        median, low, high, label = row.median, min(row.values), max(row.values), self._label
        settings = self._settings.get(row.settings)
        if settings is None:
            settings = self._settings[row.settings] = json.dumps(dict(row.settings))
        return (
            f'{{"test": {label(row.test)}, "src_mode": {label(row.src_mode)}, "dst_mode": {label(row.dst_mode)}, '
            f'"size_bytes": {_json(row.size_bytes)}, "link": {_json(row.link)}, "link_class": {label(row.link_class)}, '
            f'"load": {label(row.load)}, "settings": {settings}, "unit": {label(row.unit)}, '
            f'"runs": {len(row.values)}, "median": {_json(median)}, "min": {_json(low)}, "max": {_json(high)}, '
            f'"spread": {_json((high - low) / median if median else 0.0)}, "share_of_limit": {_json(row.share)}, '
            f'"link_limit": {label(row.limit)}, "cpu_s_per_gb": {_json(row.cpu_s_per_gb)}, '
            f'"wire": {_json({"dev": row.wire_dev, "ratio": row.wire_ratio} if row.wire_dev else None)}, '
            f'"transports": {self._set(row.transports)}, '
            f'"warnings": {self._set(row.warnings)}}}'
        )


@bulk
def format_csv(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    fields = [
        "test",
        "src_mode",
        "dst_mode",
        "size_bytes",
        "link",
        "link_class",
        "load",
        "settings",
        "unit",
        "runs",
        "median",
        "min",
        "max",
        "spread",
        "share_of_limit",
        "cpu_src_s_per_gb",
        "cpu_dst_s_per_gb",
        "wire_ratio",
        "wire_dev",
        "transports",
    ]
    writer.writerow(fields)
    for row in rows:
        data = row.to_dict()
        cost = data["cpu_s_per_gb"] or {}
        data["cpu_src_s_per_gb"], data["cpu_dst_s_per_gb"] = cost.get("src"), cost.get("dst")
        data["wire_ratio"], data["wire_dev"] = row.wire_ratio, row.wire_dev
        data["transports"] = ";".join(data["transports"])
        data["settings"] = ";".join(f"{k}={v}" for k, v in row.settings)
        writer.writerow([data[f] for f in fields])
    return buffer.getvalue()


# --- comparing two sets of runs ----------------------------------------------------------------


RUNS_NEEDED = 4  # runs a side before a change is tested: with 3 a side, the smallest two-sided p is 2/20 = 0.1
EXACT_UP_TO = 50  # runs a side up to which a p-value without ties is exact; beyond, the normal approximation


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test: how likely values this far apart are if both
    come from one distribution. Exact where no value is tied and each side has at most EXACT_UP_TO;
    else the normal approximation with tie and continuity corrections (scipy's `asymptotic`)."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    combined = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(combined)
    ties = 0.0
    i = 0
    while i < len(combined):
        j = i
        while j + 1 < len(combined) and combined[j + 1][0] == combined[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        count = j - i + 1
        ties += count**3 - count
        i = j + 1
    rank_a = sum(r for r, (_, group) in zip(ranks, combined, strict=True) if group == 0)
    u = rank_a - n1 * (n1 + 1) / 2
    if ties == 0 and n1 <= EXACT_UP_TO and n2 <= EXACT_UP_TO:
        return _exact_p(_exact_tail(n1, n2), u)
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


@functools.cache
def _exact_tail(n1: int, n2: int) -> tuple[float, ...]:
    """P(U >= k), k = 0 .. n1*n2, for samples of n1 and n2 untied values from one distribution. The
    counts of U are the coefficients of the Gaussian binomial [n1+n2 choose n1], the product over i
    of (1 - q^(n2+i)) / (1 - q^i): multiplied and divided out term by term, in exact integers."""
    top, small, large = n1 * n2, min(n1, n2), max(n1, n2)
    counts = [1] + [0] * top
    for i in range(1, small + 1):
        for k in range(top, large + i - 1, -1):  # times (1 - q^(large+i)); beyond `top` nothing is kept
            counts[k] -= counts[k - large - i]
        for k in range(i, top + 1):  # divided by (1 - q^i): a power series, exact up to `top`
            counts[k] += counts[k - i]
    total, running, tail = math.comb(n1 + n2, n1), 0, [0.0] * (top + 1)
    for k in range(top, -1, -1):
        running += counts[k]
        tail[k] = running / total  # integers divided: the float nearest the exact fraction
    return tuple(tail)


def _exact_p(tail: tuple[float, ...], u: float) -> float:
    """The exact two-sided p-value of U = `u` (an integer: no ties) from its shape's `_exact_tail`."""
    top = len(tail) - 1
    return min(1.0, 2.0 * tail[int(max(u, top - u))])


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini-Hochberg q-values: per test, the smallest false discovery rate at which it counts
    as a discovery among all of them (a NaN p-value counts as 1)."""
    if not p_values:
        return []
    values = np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0)
    order = np.argsort(values, kind="stable")
    count = len(values)
    scaled = values[order] * count / np.arange(1, count + 1)
    found = np.empty(count)
    found[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return found.tolist()  # type: ignore[no-any-return]


@dataclass(slots=True)
class Change:
    base: Row
    new: Row
    change: float  # new median / base median - 1
    p_value: float | None  # Mann-Whitney U over the per-run figures; None: fewer than RUNS_NEEDED runs a side
    q_value: float | None  # Benjamini-Hochberg over every tested pair
    significant: bool  # q below the level: a change no run-to-run noise explains
    regression: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.base.test,
            "src_mode": self.base.src_mode,
            "dst_mode": self.base.dst_mode,
            "size_bytes": self.base.size_bytes,
            "link": self.base.link,
            "unit": self.base.unit,
            "base_runs": len(self.base.values),
            "new_runs": len(self.new.values),
            "base_median": self.base.median,
            "new_median": self.new.median,
            "change": self.change,
            "tested": self.p_value is not None,
            "p_value": self.p_value,
            "q_value": self.q_value,
            "significant": self.significant,
            "regression": self.regression,
        }


@bulk
def compare(base: list[Row], new: list[Row], threshold: float, alpha: float = 0.05) -> tuple[list[Change], list[str]]:
    """Changes per link and size present in both with the same settings, and the keys present in
    only one of them (or under other settings, which are named). A regression is a change for the
    worse beyond `threshold` that the runs say is no noise: the per-run figures of both sides
    (RUNS_NEEDED or more each; one run's samples are not independent of each other) differ by a
    Mann-Whitney U test, its q-value over all tested pairs below `alpha`."""
    by_key = dict(zip(map(_KEY, base), base, strict=True))
    pairs, only_new, seen = [], [], set()
    for row, key in zip(new, map(_KEY, new), strict=True):
        old = by_key.get(key)
        if old is None:
            only_new.append(row)
        else:
            pairs.append((old, row))
            seen.add(key)
    tested = [i for i, (old, row) in enumerate(pairs) if min(len(old.values), len(row.values)) >= RUNS_NEEDED]
    p_values = mann_whitney_many([(pairs[i][0].values, pairs[i][1].values) for i in tested])
    found: list[tuple[float | None, float | None]] = [(None, None)] * len(pairs)
    for index, p, q in zip(tested, p_values, benjamini_hochberg(p_values), strict=True):
        found[index] = (p, q)
    changes = []
    for (old, row), (p_value, q_value) in zip(pairs, found, strict=True):
        before = old.median
        change = row.median / before - 1 if before else 0.0
        significant = q_value is not None and q_value < alpha
        changes.append(
            Change(old, row, change, p_value, q_value, significant, significant and row.worse(change, threshold))
        )
    # Every key of BASE seen (as many as its rows): none left, and no million keys to make again.
    only_base = [] if len(seen) == len(base) else [row for row in base if row.key not in seen]
    return changes, _unmatched(base, new, only_base, only_new)


def _unmatched(base: list[Row], new: list[Row], only_base: list[Row], only_new: list[Row]) -> list[str]:
    """A line per row on one side only, naming the settings the other side measured it with."""
    lines = []
    for what, rows, others in (("NEW", only_new, base), ("BASE", only_base, new)):
        if not rows:
            continue
        by_link: dict[tuple[Any, ...], list[Row]] = {}
        for row in others:
            by_link.setdefault(row.link_key, []).append(row)
        lines += [f"only in {what}: {_describe(r)}{_other_settings(r, by_link.get(r.link_key, []))}" for r in rows]
    return lines


def mann_whitney_many(pairs: list[tuple[list[float], list[float]]]) -> list[float]:
    """`mann_whitney_p` of each pair (the same floats), pairs of equal sample counts at once with
    numpy: a million links compare in seconds."""
    found: list[float | None] = [None] * len(pairs)
    shapes: dict[tuple[int, int], list[int]] = {}
    for index, (a, b) in enumerate(pairs):
        shapes.setdefault((len(a), len(b)), []).append(index)
    for (n1, n2), indices in shapes.items():
        if n1 == 0 or n2 == 0 or len(indices) < _VECTOR_FROM:
            for index in indices:
                found[index] = mann_whitney_p(*pairs[index])
            continue
        for start in range(0, len(indices), _CHUNK):
            chunk = indices[start : start + _CHUNK]
            flat = chain.from_iterable(chain(*pairs[i]) for i in chunk)
            values = np.fromiter(flat, float, len(chunk) * (n1 + n2)).reshape(len(chunk), n1 + n2)
            for index, p_value in zip(chunk, _mann_whitney_rows(values, n1), strict=True):
                found[index] = p_value if p_value is not None else mann_whitney_p(*pairs[index])
    return found  # type: ignore[return-value]


_VECTOR_FROM = 32  # pairs of one shape: fewer go one by one
_CHUNK = 20_000


def _mann_whitney_rows(values: Any, n1: int) -> list[float | None]:
    """Per row of `values` (its first n1 samples one side's, the rest the other's): the p-value,
    computed as mann_whitney_p does, operation for operation; None for a row with a NaN."""
    n = values.shape[1]
    n2 = n - n1
    less = (values[:, None, :] < values[:, :, None]).sum(axis=2)
    equal = (values[:, None, :] == values[:, :, None]).sum(axis=2)
    rank_a = (less[:, :n1] + (equal[:, :n1] + 1) / 2).sum(axis=1)  # half-integers: exact in any order
    ties = (equal * equal - 1).sum(axis=1)  # each value of a tie of c contributes c*c - 1: c**3 - c a tie
    u = rank_a - n1 * (n1 + 1) / 2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))  # n1, n2 >= 1: n > 1
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (np.abs(u - n1 * n2 / 2) - 0.5) / np.sqrt(variance)
    broken = np.isnan(values).any(axis=1)
    root2 = math.sqrt(2)
    found: list[float | None] = [
        None if bad else (1.0 if var <= 0 else max(0.0, min(1.0, math.erfc(max(zed, 0.0) / root2))))
        for bad, var, zed in zip(broken.tolist(), variance.tolist(), z.tolist(), strict=True)
    ]
    if n1 <= EXACT_UP_TO and n2 <= EXACT_UP_TO:  # rows without ties: exact, as mann_whitney_p
        tail = _exact_tail(n1, n2)
        for index in np.flatnonzero((ties == 0) & ~broken).tolist():
            found[index] = _exact_p(tail, float(u[index]))
    return found


def _describe(row: Row) -> str:
    return f"{row.link} {row.test} {row.modes} {format_size(row.size_bytes)} ({row.load})"


def _other_settings(row: Row, others: list[Row]) -> str:
    """Where the other side has this link under other settings: which ones differ (not compared)."""
    if not others:
        return ""
    mine = dict(row.settings)
    theirs = dict(others[0].settings)
    differing = [f"{name} {mine[name]} vs {theirs.get(name)}" for name in mine if mine[name] != theirs.get(name)]
    return f"; the other side measured it with other settings ({', '.join(differing)}): not compared"


@bulk
def format_changes(changes: list[Change], unmatched: list[str], threshold: float) -> str:
    header = ("test", "modes", "size", "link", "runs", "base", "new", "change", "p", "q", "verdict")
    sizes: dict[int, str] = {}
    olds = [c.base for c in changes]
    columns = [
        [row.test for row in olds],
        [f"{row.src_mode}->{row.dst_mode}" for row in olds],
        [sizes.get(row.size_bytes) or sizes.setdefault(row.size_bytes, format_size(row.size_bytes)) for row in olds],
        [row.link for row in olds],
        [f"{len(c.base.values)}/{len(c.new.values)}" for c in changes],
        [f"{row.median:.3f}" for row in olds],
        [f"{c.new.median:.3f} {c.base.unit}" for c in changes],
        [f"{c.change:+.1%}" for c in changes],
        [f"{c.p_value:.3f}" if c.p_value is not None else "-" for c in changes],
        [f"{c.q_value:.3f}" if c.q_value is not None else "-" for c in changes],
        [_verdict(c, threshold) for c in changes],
    ]
    lines = _aligned(header, columns)
    regressions = sum(c.regression for c in changes)
    untested = sum(c.p_value is None for c in changes)
    lines.append("")
    lines.append(
        f"{regressions} regression(s) beyond {threshold:.0%}; {len(changes) - untested} of {len(changes)} "
        "link/size pair(s) tested (Mann-Whitney U over the per-run figures, exact without ties; "
        "significant: Benjamini-Hochberg q < 0.05 over the tested pairs)"
    )
    if untested:
        lines.append(
            f"{untested} pair(s) with fewer than {RUNS_NEEDED} runs a side (runs: BASE/NEW): the change is shown, "
            "never called significant (one run's samples are not independent); "
            f"give BASE and NEW as directories of {RUNS_NEEDED} or more runs each"
        )
    lines += unmatched
    return "\n".join(lines)


def _verdict(change: Change, threshold: float) -> str:
    if change.regression:
        return "REGRESSION"
    if change.p_value is None:
        return "untested"
    return "changed" if change.significant and abs(change.change) > threshold else "same"
