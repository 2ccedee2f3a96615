"""Rows against their class (test, modes, size, link class, load, settings): the classes, each row's
standing in its class, the outliers, and the GPUs, nodes and NICs the slow rows share (culprits)."""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import Any

import numpy as np

from ...stats import median, sorted_median
from .row import Row

_CLASS_KEY = attrgetter("test", "src_mode", "dst_mode", "size_bytes", "link_class", "load", "settings")


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
