"""When a run was made, and the `--since`/`--until` bounds that pick runs by it: one strict parser,
compared as datetimes (never as strings: `20261125` or `2026-W48` once passed as dates and dropped
runs they should have kept).

A bound is a UTC day, YYYY-MM-DD (`--since`: from its first instant; `--until`: through its last),
or a moment with its zone, YYYY-MM-DDTHH:MM[:SS] then Z or +HH:MM / -HH:MM. Nothing else:
no ISO week or ordinal dates, no basic (unpunctuated) form, no time without a zone (whose zone would
be a guess)."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timezone

from ...errors import ConfigError

BOUND_FORMATS = "a date (YYYY-MM-DD) or a date and time with its zone (YYYY-MM-DDTHH:MM[:SS] then Z or +HH:MM)"

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_MOMENT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:[0-9]{2})")
# What results files hold in metadata.created_utc ("%Y-%m-%dT%H:%M:%SZ"); without a zone it is UTC.
_CREATED = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})?")


def parse_bound(text: str, option: str, *, last: bool) -> datetime:
    """`text` of `option` as an aware datetime: a day is its first instant, or with `last` (for
    --until) its last; a ConfigError in one line for anything but the two documented forms."""
    try:
        if _DAY.fullmatch(text):
            day = date.fromisoformat(text)
            return datetime.combine(day, time.max if last else time.min, tzinfo=timezone.utc)
        if _MOMENT.fullmatch(text):
            return _iso(text)
    except ValueError:
        pass  # the form is right, a field is out of range (month 13, hour 25): said below
    raise ConfigError(f"{option} wants {BOUND_FORMATS}, not {text!r}")


def parse_bounds(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """--since and --until as inclusive datetime bounds; bounds no run can fall between are refused
    (a filter that can only match nothing)."""
    first = parse_bound(since, "--since", last=False) if since is not None else None
    last = parse_bound(until, "--until", last=True) if until is not None else None
    if first is not None and last is not None and first > last:
        raise ConfigError(f"--since {since} is after --until {until}: no run can match")
    return first, last


def parse_created(value: object) -> datetime | None:
    """A results file's metadata.created_utc as an aware datetime (UTC where it names no zone), or
    None where it is missing or not a date and time: such a run falls outside any date bound."""
    if not isinstance(value, str) or not _CREATED.fullmatch(value):
        return None
    try:
        moment = _iso(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _iso(text: str) -> datetime:
    """datetime.fromisoformat of a form matched above (before Python 3.11 it does not read Z)."""
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
