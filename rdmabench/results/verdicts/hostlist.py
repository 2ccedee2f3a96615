"""Slurm hostlists: `node[003,017-018],gpu7,login` from host names and back, and the check that a
name is a hostname before it goes into a line a scheduler will read.

A name's last run of digits is its number (`node017`: prefix `node`, 17, 3 digits); a name that does
not end in a digit stands alone (`login`, `node3-ib`). Names of one prefix share a bracket when their
numbers are written alike: zero-padded to one width (`node[003-010]`), or without padding (`n[9-10]`);
an unpadded number as long as a padded group's width joins it (`node100` with `node099`), as Slurm
writes them. `expand` reverses `compress` exactly: expand(compress(names)) is the sorted set of names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...errors import ConfigError

# RFC 1123: dot-separated labels of letters, digits and hyphens, none starting or ending with a
# hyphen (so no name reads as an option), at most 63 characters each and 253 in all.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_NUMBERED = re.compile(r"(.*?)(\d+)", re.ASCII)
_RANGE = re.compile(r"(\d+)(?:-(\d+))?", re.ASCII)
EXPAND_UP_TO = 1_000_000  # names one hostlist may expand to: a typo like node[1-999999999] is refused


def is_hostname(name: str) -> bool:
    """Whether `name` is a hostname (RFC 1123), safe to write into a Slurm command line."""
    return len(name) <= 253 and _HOSTNAME.fullmatch(name) is not None


def check_hostname(name: str) -> str:
    """`name`, or a ConfigError naming it where it is not a hostname."""
    if not is_hostname(name):
        raise ConfigError(
            f"{name!r} is not a hostname (letters, digits, hyphens and dots; no hyphen first): refused in a drain list"
        )
    return name


def _split(name: str) -> tuple[str, int, int] | None:
    """(prefix, number, width) of a name ending in digits; width 0: written without padding."""
    match = _NUMBERED.fullmatch(name)
    if match is None:
        return None
    prefix, digits = match.groups()
    padded = len(digits) > 1 and digits[0] == "0"
    return prefix, int(digits), len(digits) if padded else 0


def _ranges(numbers: list[int], width: int) -> str:
    """Sorted distinct numbers as `a-b` runs, comma-separated, each written at `width` digits."""
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    text = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
    return ",".join(text)


def compress(names: Iterable[str]) -> str:
    """The Slurm hostlist of `names` (duplicates dropped): `node[003,017-018]`. Each name must be a
    hostname (ConfigError otherwise)."""
    groups: dict[tuple[str, int], set[int]] = {}
    alone: set[str] = set()
    for name in map(check_hostname, names):
        split = _split(name)
        if split is None:
            alone.add(name)
        else:
            prefix, number, width = split
            groups.setdefault((prefix, width), set()).add(number)
    for (prefix, width), numbers in list(groups.items()):
        padded = [w for p, w in groups if p == prefix and w]
        if width == 0 and padded:  # unpadded numbers as long as a padded width are written alike
            for number in [n for n in numbers if len(str(n)) in padded]:
                numbers.discard(number)
                groups[(prefix, len(str(number)))].add(number)
    parts = [(name, name) for name in alone]
    for (prefix, width), numbers in groups.items():
        if not numbers:
            continue
        ordered = sorted(numbers)
        text = _ranges(ordered, width)
        single = len(ordered) == 1
        first = f"{prefix}{ordered[0]:0{width}d}"
        parts.append((first, f"{prefix}{text}" if single else f"{prefix}[{text}]"))
    return ",".join(text for _key, text in sorted(parts))


def _top_level(hostlist: str) -> list[str]:
    """The comma-separated items of a hostlist, commas inside brackets kept."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(hostlist):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(hostlist[start:index])
            start = index + 1
        if depth not in (0, 1):
            raise ConfigError(f"hostlist {hostlist!r}: brackets do not pair")
    if depth:
        raise ConfigError(f"hostlist {hostlist!r}: brackets do not pair")
    return [*items, hostlist[start:]]


def _expand_item(item: str, hostlist: str) -> list[str]:
    if "[" not in item:
        return [check_hostname(item)]
    prefix, _, rest = item.partition("[")
    inside, _, suffix = rest.partition("]")
    names: list[str] = []
    for part in inside.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            raise ConfigError(f"hostlist {hostlist!r}: {part!r} is not a number or a range a-b")
        first, last = match.group(1), match.group(2) or match.group(1)
        width = len(first) if len(first) > 1 and first[0] == "0" else 0
        low, high = int(first), int(last)
        if high < low or high - low >= EXPAND_UP_TO or len(names) + high - low >= EXPAND_UP_TO:
            raise ConfigError(f"hostlist {hostlist!r}: range {part!r} is reversed or over {EXPAND_UP_TO:,} names")
        names += [check_hostname(f"{prefix}{n:0{width}d}{suffix}") for n in range(low, high + 1)]
    return names


def expand(hostlist: str) -> list[str]:
    """The sorted distinct host names of a Slurm hostlist (`node[003,017-018],login`)."""
    if not hostlist.strip():
        return []
    found: set[str] = set()
    for item in _top_level(hostlist.strip()):
        found.update(_expand_item(item, hostlist))
        if len(found) > EXPAND_UP_TO:
            raise ConfigError(f"hostlist {hostlist!r}: over {EXPAND_UP_TO:,} names")
    return sorted(found)
