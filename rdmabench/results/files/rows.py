"""Rows: the links of many results files aggregated per link and per (test, modes, size, load, settings), across runs, with the link classes, standings, outliers and culprits computed from them."""

from __future__ import annotations

import functools
import gc
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ...hardware.limits import Limit
from ...measure import registry
from ...modes import mode_named
from ...stats import median, sorted_median
from ...units import format_size
from . import compact, dates, derived, document

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


G = TypeVar("G", bound=Callable[..., Iterator[Any]])


def bulk_chunks(function: G) -> G:
    """`bulk` for a generator (a streamed report): the collector paused from its first piece to
    its last, not only while the generator is made."""

    @functools.wraps(function)
    def paused(*args: Any, **kwargs: Any) -> Iterator[Any]:
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield from function(*args, **kwargs)
        finally:
            gc.freeze()
            if enabled:
                gc.enable()

    return paused  # type: ignore[return-value]


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
    beside = entry.get("beside")
    if isinstance(beside, dict) and beside.get("load"):  # a model's compute ran beside the link (--beside)
        return f"beside {beside['load']}"
    links = entry.get("concurrent_links") or 1
    return "alone" if links == 1 else f"{entry.get('pattern', 'concurrent')}, {links} links"


def figure(entry: dict[str, Any]) -> float | None:
    value = entry.get(document.figure_field(entry)[0])
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _number(value: Any) -> float | None:
    """A finite number from a file, or None."""
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
        handoff = blocks.get("handoff")
        if isinstance(handoff, dict) and isinstance(handoff.get("model"), dict):  # --model: whose cache, how laid out
            shape += (
                f", {handoff['model'].get('name')} {handoff.get('kv_layout')} {handoff.get('prompt_tokens')} tokens"
            )
        if blocks.get("posted_by") == "gpu":  # one kernel a transfer, not a request per block: another path
            shape += ", posted by the GPU"
        elif blocks.get("posted_by") == "ce-batch":  # one batched copy a transfer, by the copy engines
            shape += ", posted to the copy engines"
        sms = blocks.get("sms")
        if isinstance(sms, dict) and sms.get("mode") in ("budget", "green"):  # the posting kernel held to few SMs
            shape += f", {sms.get('transfer')} SMs" + (" (green context)" if sms["mode"] == "green" else "")
        if blocks.get("merged") is False:  # --no-merge: a request per block, where merging would post fewer
            shape += ", unmerged"
        table = blocks.get("table")
        if isinstance(table, dict):  # --blocks-from: lists of their own, known by the file's digest
            shape += f", table {str(table.get('sha256'))[:12]}"
        return (*settings, ("blocks", shape))
    return settings


_LINK_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load")
ROW_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link", "load", "settings")  # link_key and settings
_CLASS_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link_class", "load", "settings")


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
    values: list[float] = field(default_factory=list)  # one figure per run (a run's samples are not kept: no
    # output shows them, and a million rows' lists of samples took a fifth of their memory)
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
    # Block lists (--blocks, --model): each run's p99 and p99.9 of its transfer times, in us.
    tails: list[tuple[float, float]] | None = None
    # Beside compute (--beside): each run's transfer alone (its unit) and the model's slowdown.
    besides: list[tuple[float, float]] | None = None
    ceilings: list[float] | None = None  # block lists: each run's ceiling (a copy kernel over the list), GB/s
    run: int = -1  # the run (the aggregate's count of documents) that gave its last figure: one figure a run

    @property
    def link_key(self) -> tuple[str, str, str, int, str, str]:
        return _LINK_KEY(self)  # type: ignore[no-any-return]

    @property
    def key(self) -> tuple[Any, ...]:
        return ROW_KEY(self)  # type: ignore[no-any-return]

    def worse(self, off: float, fraction: float) -> bool:
        """Whether a relative change `off` of this row's figure is worse than `fraction`."""
        return off < -fraction if self.higher_is_better else off > fraction

    @property
    def median(self) -> float:
        values = self.values  # one run, most rows: no call (a million rows ask it several times)
        return float(values[0]) if len(values) == 1 else median(values)

    @property
    def spread(self) -> float:
        """(max - min) / median across runs: 0 for a single run."""
        median = self.median
        return (max(self.values) - min(self.values)) / median if median else 0.0

    @property
    def share(self) -> float | None:
        return median(self.shares) if self.shares else None

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

    def add_tail(self, blocks: Any) -> None:
        """A block-list run's p99 and p99.9 of transfer times and its list's ceiling (its entry's
        `blocks`), where it has them."""
        ceiling = _number(blocks.get("ceiling_gbps")) if isinstance(blocks, dict) else None
        if ceiling is not None:
            self.ceilings = [*(self.ceilings or ()), ceiling]
        us = blocks.get("transfer_us") if isinstance(blocks, dict) else None
        if not isinstance(us, dict):
            return
        p99, p999 = _number(us.get("p99")), _number(us.get("p99.9"))
        if p99 is not None and p999 is not None:
            if self.tails is None:
                self.tails = []
            self.tails.append((p99, p999))

    def add_beside(self, beside: Any) -> None:
        """A run beside compute: its transfer alone and the load's slowdown (its entry's `beside`)."""
        if not isinstance(beside, dict):
            return
        alone, slowdown = _number(beside.get("transfer_alone")), _number(beside.get("slowdown"))
        if alone is not None and slowdown is not None:
            if self.besides is None:
                self.besides = []
            self.besides.append((alone, slowdown))

    @property
    def beside(self) -> tuple[float, float] | None:
        """The median over runs of the transfer alone and of the model's slowdown beside it, or None."""
        if not self.besides:
            return None
        return median([b[0] for b in self.besides]), median([b[1] for b in self.besides])

    @property
    def tail_us(self) -> tuple[float, float] | None:
        """The median over runs of the p99 and of the p99.9 of transfer times (us), or None."""
        if not self.tails:
            return None
        return median([t[0] for t in self.tails]), median([t[1] for t in self.tails])

    def to_dict(self) -> dict[str, Any]:
        tail = self.tail_us
        found = {
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
            "transfer_p99_us": tail[0] if tail else None,
            "transfer_p999_us": tail[1] if tail else None,
            "transports": sorted(self.transports),
            "warnings": sorted(self.warnings),
        }
        beside = self.beside
        if beside is not None:  # only where a run had compute beside it: older reports keep their shape
            found["transfer_alone"], found["slowdown"] = beside
        return found


@dataclass(frozen=True)
class Filters:
    tests: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()  # an entry matches when its src or dst mode is listed
    sizes: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()  # an entry matches when either end ran there
    link_classes: tuple[str, ...] = ()
    since: datetime | None = None  # inclusive bounds on a run's time (dates.parse_bound), compared as datetimes
    until: datetime | None = None

    def accept(self, entry: dict[str, Any]) -> bool:
        if not self.accept_kind(entry["test"], entry["src_mode"], entry["dst_mode"]):
            return False
        klass = link_class(entry) if self.link_classes else ""
        return self.accept_link(entry["size_bytes"], entry.get("src_host"), entry.get("dst_host"), klass)

    def accept_run(self, created: datetime | None) -> bool:
        """What the date bounds say of a run made at `created` (None: its time is unknown, so it is
        within no bound)."""
        if self.since is None and self.until is None:
            return True
        if created is None:
            return False
        return not (
            (self.since is not None and created < self.since) or (self.until is not None and created > self.until)
        )

    def accept_kind(self, test: Any, src_mode: Any, dst_mode: Any) -> bool:
        """What the filters say of a test and its memory modes."""
        if self.tests and test not in self.tests:
            return False
        return not (self.modes and src_mode not in self.modes and dst_mode not in self.modes)

    def accept_link(self, size: int, src_host: Any, dst_host: Any, klass: str) -> bool:
        """What the filters say of a link's size, hosts and class."""
        if self.sizes and size not in self.sizes:
            return False
        if self.hosts and src_host not in self.hosts and dst_host not in self.hosts:
            return False
        return not (self.link_classes and klass not in self.link_classes)


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
def aggregate(
    documents: list[tuple[str, dict[str, Any]]], filters: Filters | None = None, notes: list[str] | None = None
) -> list[Row]:
    """The rows of `documents`, each a run: a row takes one figure a run, the first record of its
    link, size and settings in the file; records that repeat one (a file edited or joined, never one
    rdmabench writes) are not runs: counted once, and a line per file says so in `notes`."""
    folder = _Folder(filters or Filters())
    for number, (path, doc) in enumerate(documents):
        folder.run, before = number, folder.repeated
        folder.document(doc)
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

    def document(self, doc: dict[str, Any]) -> None:
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
            value = sorted_median(sorted(item["samples"]))  # stats.median of a list of floats, without its checks
            if not math.isfinite(value):
                continue
            src_end, dst_end = ends.get((item["src"], src_has)), ends.get((item["dst"], dst_has))
            if src_end is None:
                src_end = ends[(item["src"], src_has)] = _rank_end(results.ranks, item["src"], src_has)
            if dst_end is None:
                dst_end = ends[(item["dst"], dst_has)] = _rank_end(results.ranks, item["dst"], dst_has)
            link = _link(src_end, dst_end, kind.on_device)
            self.fold(
                kind,
                link,
                item["size"],
                value,
                item.get("cpu"),
                item.get("wire"),
                item.get("blocks"),
                item.get("beside"),
            )

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
        if value is None or not self.filters.accept(entry):
            return
        kind = self.kind(entry, metadata)
        link = _link(_entry_end(entry, "src"), _entry_end(entry, "dst"), kind.on_device)
        self.fold(
            kind,
            link,
            entry["size_bytes"],
            value,
            entry.get("cpu_s_per_gb"),
            entry.get("wire"),
            entry.get("blocks"),
            entry.get("beside"),
        )

    def fold(
        self,
        kind: _Kind,
        link: _Link,
        size: int,
        value: float,
        cpu: Any = None,
        wire: Any = None,
        blocks: Any = None,
        beside: Any = None,
    ) -> None:
        """Add a link's figure and its share of its limit (never a file's) to its row."""
        if self.filtering and not self.filters.accept_link(size, link.src_host, link.dst_host, link.link_class):
            return
        key = (kind.labels, size, link.name)
        row = self.rows.get(key)
        intern = self.intern
        share = derived.share_of_limit(value, kind.bound) if kind.bound is not None else None
        shares = [share] if share is not None else []
        if row is None:
            row = self.rows[key] = self._new_row(kind, link, size, value, shares)
            row.run = self.run
        elif row.run == self.run:  # a record repeated in one file is not another run
            self.repeated += 1
            return
        else:
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
        if blocks is not None:
            row.add_tail(blocks)
        if beside is not None:
            row.add_beside(beside)

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
        )


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
        typical, size = median(medians), len(members)
        found += [
            (row, median / typical - 1 if typical else 0.0, size) for row, median in zip(members, medians, strict=True)
        ]
    return found


def outliers(rows: list[Row], fraction: float) -> list[tuple[Row, float]]:
    """Links worse than their class's median by more than `fraction` (bandwidth below, latency
    above), with how far off they are: `standings` filtered, class by class in numpy (a million
    rows, most of them fine, make no million tuples)."""
    found: list[tuple[Row, float]] = []
    for members in classes(rows).values():
        if len(members) < 3:  # two links have no majority to stand out from
            continue
        medians = np.fromiter((row.median for row in members), float, len(members))
        typical = sorted_median(np.sort(medians))
        off = medians / typical - 1 if typical else np.zeros(len(members))
        higher = np.fromiter((row.higher_is_better for row in members), bool, len(members))
        worse = np.flatnonzero(np.where(higher, off < -fraction, off > fraction))
        found += [(members[i], off) for i, off in zip(worse.tolist(), off[worse].tolist(), strict=True)]
    return sorted(found, key=lambda item: -abs(item[1]))


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
