"""A class of links (standings.class_key: test, modes, size, link class, load, settings; fleet adds the
rail alignment) as the reports and the verdicts name it: its fields in JSON, its one-line label."""

from __future__ import annotations

from typing import Any, TypedDict

from ...units import format_size


class _ClassLink(TypedDict):
    test: str
    src_mode: str
    dst_mode: str
    size_bytes: int
    link_class: str


class ClassFields(_ClassLink, total=False):
    """A class as a report's JSON names it: `rail` only where its key has the rail alignment."""

    rail: str | None
    load: str
    settings: dict[str, str]


def class_fields(key: tuple[Any, ...]) -> ClassFields:
    """A class key (`class_key`, or fleet's with the rail alignment after it) as the fields a report's
    JSON names: test, modes, size, link class, the rail where the key has one, load, settings."""
    test, src_mode, dst_mode, size, link_class, load, settings, *rail = key
    fields: ClassFields = {
        "test": test, "src_mode": src_mode, "dst_mode": dst_mode, "size_bytes": size, "link_class": link_class
    }  # fmt: skip
    if rail:
        fields["rail"] = rail[0] or None
    fields |= {"load": load, "settings": dict(settings)}
    return fields


def class_label(key: tuple[Any, ...]) -> str:
    """A class key (as class_fields reads it) as one line: 'bw host->host 1 MiB inter-node rail-aligned, alone'."""
    test, src_mode, dst_mode, size, link_class, load, _settings, *rail = key
    place = f"{link_class} {rail[0]}" if rail and rail[0] else link_class
    return f"{test} {src_mode}->{dst_mode} {format_size(size)} {place}, {load}"
