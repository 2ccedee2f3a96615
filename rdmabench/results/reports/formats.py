"""The report's formats (table, markdown, json, csv, html), one dispatch (`render`) shared by `rdmabench report` and the end of `rdmabench run`; every name from a file escaped for the format it lands in. Every format but CSV (a row per link, for a spreadsheet) opens with the suspect parts (attribution.py)."""

from __future__ import annotations

import csv
import io
import json
import json.encoder
import math
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ... import escape
from ...errors import ConfigError
from ...units import format_size
from ..files.rows import Row, bulk, bulk_chunks, outliers
from ..verdicts.attribution import Attribution, attribute
from . import answer, distribution
from .cells import WIDTH, class_distributions, fitted, markdown_width, outlier_lines, text_width
from .paces import pace_lines

GROUPINGS = ("none", "host", "link-class", "mode", "size", "date")


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


def _grouped(rows: list[Row], by: str) -> list[tuple[str, list[Row]]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(group_key(row, by), []).append(row)
    return sorted(groups.items())


def suspect_lines(found: Attribution, escaped: Callable[[str], str]) -> list[str]:
    """The attribution's lines (suspects first, one a line), each through `escaped`."""
    return [escaped(line) for line in found.lines()]


LEGEND = (
    "GB/s = 1e9 bytes/s; median/min/max over runs; spread = (max - min) / median (of a single run: over its "
    "samples); p99/p99.9 us = a block list's transfer times (the median over runs); share = of the link's "
    "physical limit"
)


def _fold(lines: list[str], wide: bool) -> list[str]:
    """Lines of prose within WIDTH (their continuations indented two spaces), unless `wide`."""
    if wide:
        return lines
    return [part for line in lines for part in textwrap.wrap(line, WIDTH, subsequent_indent="  ") or [""]]


def answer_text(rows: list[Row], budget: float, wide: bool, markdown: bool) -> list[str]:
    """The answer (block lists by several paths, or beside compute), as every text format leads with it: a
    table per link and load, its notes, and with `wide` its prose (the front); [] where there is none."""
    found = answer.answers(rows, budget)
    if not found:
        return []
    name = escape.markdown if markdown else escape.visible
    out = ["## Which posting path" if markdown else "== which posting path", ""]
    for caption, cells in answer.table(found):
        columns = [escape.column(list(column), name) for column in zip(*cells, strict=True)]
        if markdown:  # no padding: a row is as wide as its cells
            out += [f"{name(caption)}:", "", "|" + "|".join(answer.TABLE_COLUMNS) + "|"]
            out += [
                "|" + "---|" * len(answer.TABLE_COLUMNS),
                *("|" + "|".join(c) + "|" for c in zip(*columns, strict=True)),
            ]
        else:
            out += [f"{name(caption)}:", *escape.aligned(answer.TABLE_COLUMNS, columns)]
        out.append("")
    said = [name(note) for note in answer.notes(found)]
    out += answer.wrapped(said, "- ", "  ") if markdown else answer.wrapped(said)
    if wide:
        prose = answer.lines(found, budget)
        out += ["", prose[0], *(f"-{name(line[1:])}" if markdown else name(line) for line in prose[1:])]
    return out


@bulk
def format_table(
    rows: list[Row],
    by: str,
    fraction: float,
    found: Attribution | None = None,
    budget: float = answer.BUDGET,
    wide: bool = False,
) -> str:
    found = found if found is not None else attribute(rows)
    chosen = answer_text(rows, budget, wide, markdown=False)
    lines = [*chosen, ""] if chosen else []  # the answer first: it is what a block list's reader came for
    lines += ["== suspects", *_fold(suspect_lines(found, escape.visible), wide)]
    if found.judged:  # a run with no link to judge against its class has no distribution to give (as html)
        lines += ["", *distribution.text_lines(class_distributions(rows, fraction)), ""]  # a line a class
        lines += outlier_lines(outliers(rows, fraction), fraction)
    for name, members in _grouped(rows, by):
        lines.append("")
        if name:
            lines.append(f"== {by}: {escape.visible(name)}")
        above, header, columns = fitted(members, text_width, wide)
        lines += _fold([escape.visible(line) for line in above], wide)
        lines += escape.aligned(header, [escape.column(column, escape.visible) for column in columns])
    paced = pace_lines(rows)
    if paced:  # an offload's kernel at several paces beside a model
        lines += ["", *_fold([escape.visible(line) for line in paced], wide)]
    lines.append("")
    lines += _fold([LEGEND], wide)
    return "\n".join(lines)


@bulk
def format_markdown(
    rows: list[Row],
    by: str,
    fraction: float,
    found: Attribution | None = None,
    budget: float = answer.BUDGET,
    wide: bool = False,
) -> str:
    found = found if found is not None else attribute(rows)
    lines = ["# rdmabench report", ""]
    chosen = answer_text(rows, budget, wide, markdown=True)
    lines += [*chosen, ""] if chosen else []  # the answer first
    lines += ["## Suspects", ""]
    lines += _fold([f"- {line}" for line in suspect_lines(found, escape.markdown)], wide)
    if found.judged:  # as the table: no distribution where no link could be judged
        lines += ["", *distribution.markdown_lines(class_distributions(rows, fraction)), "", "## Outliers", ""]
        lines += [f"- {line.strip()}" for line in outlier_lines(outliers(rows, fraction), fraction, escape.markdown)]
    for name, members in _grouped(rows, by):
        lines.append("")
        if name:
            lines.append(f"## {by}: {escape.markdown(name)}")
            lines.append("")
        above, header, columns = fitted(members, markdown_width, wide)
        lines += [*_fold([escape.markdown(line) for line in above], wide), ""] if above else []
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        columns = [escape.column(column, escape.markdown) for column in columns]
        lines += ["| " + " | ".join(cells) + " |" for cells in zip(*columns, strict=True)]
    lines.append("")
    lines += _fold([LEGEND + "."], wide)
    return "\n".join(lines) + "\n"


def format_json(
    rows: list[Row],
    fraction: float,
    problems: list[str],
    found: Attribution | None = None,
    budget: float = answer.BUDGET,
) -> str:
    """The rows, the outliers, the files that could not be used, the suspects (one line each, and
    the whole attribution) and the distribution per link class, as one JSON document."""
    return "".join(json_chunks(rows, fraction, problems, found, budget))


ROWS_A_CHUNK = 20_000  # rows joined into one piece of a streamed report


@bulk_chunks
def json_chunks(
    rows: list[Row],
    fraction: float,
    problems: list[str],
    found: Attribution | None = None,
    budget: float = answer.BUDGET,
) -> Iterator[str]:
    """`format_json` in pieces, to be written as they come: a million rows (a line each) are never
    held as one string, nor as one nested structure (that took gigabytes)."""
    attribution = found if found is not None else attribute(rows)
    listed = [
        {"link": r.link, "test": r.test, "size_bytes": r.size_bytes, "modes": r.modes, "off": off}
        for r, off in outliers(rows, fraction)
    ]
    suspects = [suspect.describe() for suspect in attribution.suspects]
    rest = json.dumps(
        {"outliers": [], "skipped": problems, "suspects": suspects, "attribution": attribution.to_dict()}, indent=1
    )
    if listed:  # what json.dumps(..., indent=1) writes, without its pure-Python encoder's minutes
        items = ",\n".join(_indented_object(item, "  ") for item in listed)
        rest = rest.replace('"outliers": []', '"outliers": [\n' + items + "\n ]", 1)
    del listed
    spread = ",\n".join(json.dumps(one.to_dict()) for one in class_distributions(rows, fraction))
    rest = rest[: -len("\n}")] + ',\n "distributions": [\n' + spread + "\n ]\n}"  # a line per class
    chosen = answer.answers(rows, budget)
    if chosen:  # block lists measured by several paths, or beside compute: the key only then
        listed_answers = ",\n".join(json.dumps(one.to_dict()) for one in chosen)
        rest = rest[: -len("\n}")] + ',\n "answers": [\n' + listed_answers + "\n ]\n}"
    encoder = _RowJson()
    yield '{\n "rows": [\n'
    for start in range(0, len(rows), ROWS_A_CHUNK):
        yield ("" if start == 0 else ",\n") + ",\n".join(map(encoder.line, rows[start : start + ROWS_A_CHUNK]))
    yield "\n ],\n" + rest[2:]


def _indented_object(item: dict[str, object], indent: str) -> str:
    """json.dumps(item, indent=1) of a flat object nested `indent` deep."""
    inner = ",\n".join(f"{indent} {_ENCODE_STR(key)}: {_json(value)}" for key, value in item.items())
    return f"{indent}{{\n{inner}\n{indent}}}"


_ENCODE_STR: Callable[[str], str] = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _json(value: Any) -> str:
    """json.dumps(value), without its cost for the strings and numbers a million rows hold."""
    if value is None:  # most rows hold no share, CPU cost, wire check or tail
        return "null"
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
        median, low, high, label, tail = row.median, min(row.values), max(row.values), self._label, row.tail_us
        settings = self._settings.get(row.settings)
        if settings is None:
            settings = self._settings[row.settings] = json.dumps(dict(row.settings))
        return (
            f'{{"test": {label(row.test)}, "src_mode": {label(row.src_mode)}, "dst_mode": {label(row.dst_mode)}, '
            f'"size_bytes": {_json(row.size_bytes)}, "link": {_json(row.link)}, "link_class": {label(row.link_class)}, '
            f'"load": {label(row.load)}, "settings": {settings}, "unit": {label(row.unit)}, '
            f'"runs": {len(row.values)}, "median": {_json(median)}, "min": {_json(low)}, "max": {_json(high)}, '
            f'"spread": {_json(row.spread)}, "share_of_limit": {_json(row.share)}, '
            f'"link_limit": {label(row.limit)}, "cpu_s_per_gb": {_json(row.cpu_s_per_gb)}, '
            f'"wire": {_json({"dev": row.wire_dev, "ratio": row.wire_ratio} if row.wire_dev else None)}, '
            f'"transfer_p99_us": {_json(tail[0] if tail else None)}, '
            f'"transfer_p999_us": {_json(tail[1] if tail else None)}, '
            f'"transports": {self._set(row.transports)}, '
            f'"warnings": {self._set(row.warnings)}}}'
        )


def format_csv(rows: list[Row]) -> str:
    return "".join(csv_chunks(rows))


CSV_FIELDS = (
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
    "transfer_p99_us",
    "transfer_p999_us",
    "transports",
)


@bulk_chunks
def csv_chunks(rows: list[Row]) -> Iterator[str]:
    """A row per link, in pieces of ROWS_A_CHUNK rows to be written as they come."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_FIELDS)
    for number, row in enumerate(rows, start=1):
        record = row.to_dict()
        data: dict[str, object] = {**record}
        cost = record["cpu_s_per_gb"] or {}
        data["cpu_src_s_per_gb"], data["cpu_dst_s_per_gb"] = cost.get("src"), cost.get("dst")
        data["wire_ratio"], data["wire_dev"] = row.wire_ratio, row.wire_dev
        data["transports"] = ";".join(record["transports"])
        data["settings"] = ";".join(f"{k}={v}" for k, v in row.settings)
        writer.writerow(
            [escape.csv_cell(value) if type(value) is str else value for value in map(data.get, CSV_FIELDS)]
        )
        if number % ROWS_A_CHUNK == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


FORMATS = ("table", "markdown", "csv", "json", "html")


@dataclass(frozen=True)
class Rendering:
    """How a report renders its rows, apart from the format: the grouping (`by`), the outliers' fraction,
    the inputs left out, each with why (`problems`), the files read (`sources`: html names them), the
    attribution of the rows (`found`: made here, but for CSV, where not given), the model's slowdown a
    posting path may cost in the answer (`budget`: --model-budget) and the answer's wide prose (`wide`)."""

    by: str = "none"
    fraction: float = 0.2
    problems: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    found: Attribution | None = None
    budget: float = answer.BUDGET
    wide: bool = False


def render(rows: list[Row], name: str, how: Rendering = Rendering()) -> str:
    """The rows in format `name` (one of FORMATS), whole: render_chunks joined."""
    return "".join(render_chunks(rows, name, how))


def render_chunks(rows: list[Row], name: str, how: Rendering = Rendering()) -> Iterator[str]:
    """The rows in format `name` (one of FORMATS), the one dispatch `report` and `run` share, in pieces to
    write as they come (userfiles.write_chunks): the JSON and CSV of a million rows are never held whole.
    Bad names raise here, before any piece is made."""
    by, fraction, problems, sources, budget, wide = (
        how.by,
        how.fraction,
        how.problems,
        how.sources,
        how.budget,
        how.wide,
    )
    if name not in FORMATS:
        raise ConfigError(f"unknown format {name!r}: choose {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    if by not in GROUPINGS:
        raise ConfigError(f"unknown grouping {by!r}: choose one of {', '.join(GROUPINGS)}")
    if name == "csv":
        return csv_chunks(rows)
    found = how.found if how.found is not None else attribute(rows)
    if name == "json":
        return json_chunks(rows, fraction, problems, found, budget)
    if name == "table":
        return iter((format_table(rows, by, fraction, found, budget, wide),))
    if name == "markdown":
        return iter((format_markdown(rows, by, fraction, found, budget, wide),))
    from .html import render as render_html  # matplotlib: loaded only for a page

    return iter((render_html(rows, sources, problems, fraction, found, budget),))
