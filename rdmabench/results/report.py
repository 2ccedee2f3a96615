"""Aggregation of many results files: per link and per (test, modes, size), across runs, with
outliers, filters, and the comparison of two sets of runs."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import OtherDocumentError, ResultsFileError
from ..measure import registry
from ..modes import mode_named
from ..units import format_size
from . import document

GROUPINGS = ("none", "host", "link-class", "mode", "size", "date")
LINK_CLASSES = ("same GPU", "intra-node", "inter-node")


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
    return (
        ("engine", str(entry.get("engine") or "python")),
        ("validated", "yes" if entry.get("validated") else "no"),
        ("window", str(entry.get("window"))),
        ("ucx", tuned or "defaults"),
    )


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

    @property
    def link_key(self) -> tuple[str, str, str, int, str, str]:
        return (self.test, self.src_mode, self.dst_mode, self.size_bytes, self.link, self.load)

    @property
    def key(self) -> tuple[Any, ...]:
        return (*self.link_key, self.settings)

    def worse(self, off: float, fraction: float) -> bool:
        """Whether a relative change `off` of this row's figure is worse than `fraction`."""
        return off < -fraction if self.higher_is_better else off > fraction

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> float:
        """(max - min) / median across runs: 0 for a single run."""
        return (max(self.values) - min(self.values)) / self.median if self.median else 0.0

    @property
    def share(self) -> float | None:
        return statistics.median(self.shares) if self.shares else None

    @property
    def modes(self) -> str:
        return f"{self.src_mode}->{self.dst_mode}"

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
        if self.tests and entry["test"] not in self.tests:
            return False
        if self.modes and entry["src_mode"] not in self.modes and entry["dst_mode"] not in self.modes:
            return False
        if self.sizes and entry["size_bytes"] not in self.sizes:
            return False
        if self.hosts and entry.get("src_host") not in self.hosts and entry.get("dst_host") not in self.hosts:
            return False
        if self.link_classes and link_class(entry) not in self.link_classes:
            return False
        if self.since and created[: len(self.since)] < self.since:
            return False
        return not (self.until and created[: len(self.until)] > self.until)


def aggregate(documents: list[tuple[str, dict[str, Any]]], filters: Filters | None = None) -> list[Row]:
    filters = filters or Filters()
    rows: dict[tuple[Any, ...], Row] = {}
    intern = _Interner()
    for _path, doc in documents:
        created = str(doc["metadata"].get("created_utc", ""))
        settings: dict[tuple[Any, ...], tuple[tuple[str, str], ...]] = {}  # a million entries share a few
        for entry in doc["results"]:
            value = figure(entry)
            if value is None or not filters.accept(entry, created):
                continue
            which = (entry.get("engine"), entry.get("validated"), entry.get("window"))
            if which not in settings:
                settings[which] = settings_of(entry, doc["metadata"])
            src_mode, dst_mode = intern(mode_label(entry, "src")), intern(mode_label(entry, "dst"))
            link, load = link_name(entry), intern(load_of(entry))
            key = (entry["test"], src_mode, dst_mode, entry["size_bytes"], link, load, settings[which])
            row = rows.get(key)
            if row is None:
                row = rows[key] = Row(
                    entry["test"],
                    src_mode,
                    dst_mode,
                    entry["size_bytes"],
                    link,
                    intern(link_class(entry)),
                    intern(str(entry.get("src_host"))),
                    intern(str(entry.get("dst_host"))),
                    intern(entry.get("unit", "GB/s")),
                    load,
                    settings[which],
                    registry.higher_is_better(entry["test"], entry.get("unit")),
                )
            row.values.append(value)
            row.samples.extend(float(v) for v in entry["samples"])
            if isinstance(entry.get("share_of_limit"), (int, float)):
                row.shares.append(float(entry["share_of_limit"]))
            if entry.get("transport"):
                row.transports = intern.set(row.transports, [str(entry["transport"])])
            if entry.get("warnings"):
                row.warnings = intern.set(row.warnings, [str(w) for w in entry["warnings"]])
            nics = [
                f"{entry.get(f'{end}_host')}/{entry[f'{end}_nic']}" for end in ("src", "dst") if entry.get(f"{end}_nic")
            ]
            if nics:
                row.nics = intern.set(row.nics, nics)
            limit = entry.get("link_limit")
            if isinstance(limit, dict) and limit.get("gbps"):
                row.limit = intern(f"{limit.get('kind')} {float(limit['gbps']):.1f} GB/s")
                row.limit_kind = intern(str(limit.get("kind")))
            row.dates = intern.set(row.dates, [created[:10]])
    found = sorted(
        rows.values(), key=lambda r: (r.test, r.src_mode, r.dst_mode, r.size_bytes, r.load, r.link, r.settings)
    )
    _name_differences(found)
    return found


class _Interner:
    """One object for each distinct label or set of labels: a million rows share a handful of them."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}

    def __call__(self, text: str) -> str:
        return self._seen.setdefault(text, text)

    def set(self, old: frozenset[str], more: list[str]) -> frozenset[str]:
        new = old.union(more)
        return self._sets.setdefault(new, new)


def _name_differences(rows: list[Row]) -> None:
    """Where one link was measured under different settings, each row names the settings that differ."""
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


def standings(rows: list[Row]) -> list[tuple[Row, float, int]]:
    """Each row, how far its figure is off the median of its class (test, modes, size, link class,
    load, settings), and how many rows the class has."""
    classes: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        key = (row.test, row.src_mode, row.dst_mode, row.size_bytes, row.link_class, row.load, row.settings)
        classes.setdefault(key, []).append(row)
    found = []
    for members in classes.values():
        typical = statistics.median(r.median for r in members)
        found += [(row, row.median / typical - 1 if typical else 0.0, len(members)) for row in members]
    return found


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
    "transport",
)


def _cells(row: Row) -> list[str]:
    share = f"{row.share:.0%}" if row.share is not None else "-"
    return [
        row.test,
        row.modes,
        format_size(row.size_bytes),
        row.link,
        row.link_class,
        row.load,
        row.differs or "-",
        str(len(row.values)),
        f"{row.median:.3f} {row.unit}",
        f"{min(row.values):.3f}",
        f"{max(row.values):.3f}",
        f"{row.spread:.1%}",
        share,
        ", ".join(sorted(row.transports)) or "-",
    ]


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
    counts: dict[str, Counter[str]] = {"gpus": Counter(), "nodes": Counter(), "nics": Counter()}
    for row in rows:
        counts["gpus"].update(end for end in set(row.link.split(" -> ")) if ":gpu" in end)
        counts["nodes"].update({row.src_host, row.dst_host})
        counts["nics"].update(row.nics)
    return {what: dict(sorted(c.items(), key=lambda item: (-item[1], item[0]))) for what, c in counts.items()}


def format_table(rows: list[Row], by: str, fraction: float) -> str:
    lines = _outlier_lines(outliers(rows, fraction), fraction)
    for name, members in _grouped(rows, by):
        table = [list(_COLUMNS)] + [_cells(r) for r in members]
        widths = [max(len(line[i]) for line in table) for i in range(len(_COLUMNS))]
        lines.append("")
        if name:
            lines.append(f"== {by}: {name}")
        for line in table:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    lines.append("")
    lines.append(
        "GB/s = 1e9 bytes/s; median/min/max over runs; spread = (max - min) / median; share = of the link's physical limit"
    )
    return "\n".join(lines)


def format_markdown(rows: list[Row], by: str, fraction: float) -> str:
    lines = ["# rdmabench report", ""]
    lines += [f"- {line.strip()}" for line in _outlier_lines(outliers(rows, fraction), fraction)]
    for name, members in _grouped(rows, by):
        lines.append("")
        if name:
            lines.append(f"## {by}: {name}")
            lines.append("")
        lines.append("| " + " | ".join(_COLUMNS) + " |")
        lines.append("|" + "---|" * len(_COLUMNS))
        for row in members:
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(row)) + " |")
    lines.append("")
    lines.append("GB/s = 1e9 bytes/s; median/min/max over runs; share = of the link's physical limit.")
    return "\n".join(lines) + "\n"


def format_json(rows: list[Row], fraction: float, problems: list[str]) -> str:
    """The rows, the outliers and the files that could not be used, as one JSON document."""
    found = outliers(rows, fraction)
    rest = json.dumps(
        {
            "outliers": [
                {"link": r.link, "test": r.test, "size_bytes": r.size_bytes, "modes": r.modes, "off": off}
                for r, off in found
            ],
            "skipped": problems,
        },
        indent=1,
    )
    # Row by row, one line each: a million rows as one nested structure took gigabytes.
    return '{\n "rows": [\n' + ",\n".join(json.dumps(r.to_dict()) for r in rows) + "\n ],\n" + rest[2:]


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
        "transports",
    ]
    writer.writerow(fields)
    for row in rows:
        data = row.to_dict()
        data["transports"] = ";".join(data["transports"])
        data["settings"] = ";".join(f"{k}={v}" for k, v in row.settings)
        writer.writerow([data[f] for f in fields])
    return buffer.getvalue()


# --- comparing two sets of runs ----------------------------------------------------------------


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie correction):
    how likely samples this far apart are if both come from one distribution."""
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
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


@dataclass
class Change:
    base: Row
    new: Row
    change: float  # new median / base median - 1
    p_value: float
    regression: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.base.test,
            "src_mode": self.base.src_mode,
            "dst_mode": self.base.dst_mode,
            "size_bytes": self.base.size_bytes,
            "link": self.base.link,
            "unit": self.base.unit,
            "base_median": self.base.median,
            "new_median": self.new.median,
            "change": self.change,
            "p_value": self.p_value,
            "significant": self.p_value < 0.05,
            "regression": self.regression,
        }


def compare(base: list[Row], new: list[Row], threshold: float, alpha: float = 0.05) -> tuple[list[Change], list[str]]:
    """Changes per link and size present in both with the same settings, and the keys present in
    only one of them (or under other settings, which are named). A regression is a change for the
    worse beyond `threshold` that the samples say is no noise."""
    by_key = {row.key: row for row in base}
    by_link: dict[tuple[Any, ...], list[Row]] = {}
    for row in base:
        by_link.setdefault(row.link_key, []).append(row)
    changes, unmatched = [], []
    seen = set()
    for row in new:
        old = by_key.get(row.key)
        if old is None:
            unmatched.append(f"only in NEW: {_describe(row)}{_other_settings(row, by_link.get(row.link_key, []))}")
            continue
        seen.add(row.key)
        change = row.median / old.median - 1 if old.median else 0.0
        p_value = mann_whitney_p(old.samples, row.samples)
        changes.append(Change(old, row, change, p_value, row.worse(change, threshold) and p_value < alpha))
    new_by_link: dict[tuple[Any, ...], list[Row]] = {}
    for row in new:
        new_by_link.setdefault(row.link_key, []).append(row)
    unmatched += [
        f"only in BASE: {_describe(r)}{_other_settings(r, new_by_link.get(r.link_key, []))}"
        for r in base
        if r.key not in seen
    ]
    return changes, unmatched


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


def format_changes(changes: list[Change], unmatched: list[str], threshold: float) -> str:
    header = ("test", "modes", "size", "link", "base", "new", "change", "p", "verdict")
    table = [list(header)]
    for c in changes:
        verdict = (
            "REGRESSION" if c.regression else ("changed" if c.p_value < 0.05 and abs(c.change) > threshold else "same")
        )
        table.append(
            [
                c.base.test,
                c.base.modes,
                format_size(c.base.size_bytes),
                c.base.link,
                f"{c.base.median:.3f}",
                f"{c.new.median:.3f} {c.base.unit}",
                f"{c.change:+.1%}",
                f"{c.p_value:.3f}",
                verdict,
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in table]
    regressions = sum(c.regression for c in changes)
    lines.append("")
    lines.append(
        f"{regressions} regression(s) beyond {threshold:.0%} (Mann-Whitney U over the samples, p < 0.05); "
        f"{len(changes)} link/size pair(s) compared"
    )
    lines += unmatched
    return "\n".join(lines)
