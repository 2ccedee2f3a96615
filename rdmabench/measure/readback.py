"""A record read back from a results file, each value checked once: a value of the wrong type reads as
missing (None, or an empty list), so a record's readers use its fields as typed (besiderecord,
blockrecord)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


# A whole number a run writes fits a C int64; JSON's integers do not stop there (10**400 parses).
_WHOLE = 2**63


def number(value: object) -> float | None:
    """A finite number of a file (a bool is no number), else None: an integer past a float's range too
    (math.isfinite and every division would raise OverflowError on it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):  # compared exactly: no conversion that could overflow
        return value if -sys.float_info.max <= value <= sys.float_info.max else None
    return value if math.isfinite(value) else None


def whole(value: object) -> int | None:
    """A whole number of a file a run could have written (within an int64), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and -_WHOLE <= value < _WHOLE else None


def text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def each(read: Callable[[object], _T | None]) -> Callable[[object], list[_T | None]]:
    """A list of a file, each item read by `read` (an item of the wrong type: None; no list: [])."""
    return lambda value: [read(item) for item in value] if isinstance(value, list) else []


def only(read: Callable[[object], _T | None]) -> Callable[[object], list[_T]]:
    """A list of a file, the items `read` accepts ([] where it is no list)."""
    return lambda value: (
        [found for item in value if (found := read(item)) is not None] if isinstance(value, list) else []
    )


def pair(value: object) -> list[float] | None:
    """A [low, high] pair of numbers, else None."""
    found = only(number)(value)
    return found if isinstance(value, list) and len(value) == 2 and len(found) == 2 else None
