"""Filters: which entries, links and runs a report takes (--test, --mode, --size, --host, --link-class,
--since, --until)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .entries import link_class


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
