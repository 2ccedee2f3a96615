"""Byte sizes and rates. GB/s is 1e9 bytes/s everywhere in rdmabench; sizes use binary suffixes."""

from __future__ import annotations

import math
import re

from .errors import ConfigError

GB = 1e9  # bandwidth unit: GB/s = 1e9 bytes per second, never 2**30

# Units a table may show bandwidth in: factor from GB/s, and how the unit is spelled out.
DISPLAY_UNITS = {
    "GB/s": (1.0, "GB/s = 1e9 bytes/s"),
    "GiB/s": (1e9 / 2**30, "GiB/s = 2^30 bytes/s"),
    "Gb/s": (8.0, "Gb/s = 1e9 bits/s"),
}

_SUFFIXES = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GIB": 1 << 30,
    # Decimal units mean what they say, so '1MB' is 1e6 bytes, not 1 MiB.
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$", re.ASCII)  # 0-9 only, never another script's digits

# Larger messages than this are not a transfer benchmark any more, they are a memory test.
MAX_MESSAGE_BYTES = 16 << 30

# No link moves 1e5 GB/s (100 TB/s): a figure at or above it is a broken clock or a corrupt file, not a
# measurement. The fastest links rdmabench meets are NVLink 5 (1.8 TB/s a GPU, both ways) and a node's
# memory bus (a few TB/s): fifty times headroom, and still far below what a zero or tiny time gives.
MAX_BANDWIDTH_GBPS = 1e5


def is_digits(text: str) -> bool:
    """Whether `text` is a whole number written in ASCII digits, 0-9, and nothing else. The one test
    for digits a user typed: `str.isdigit()` also takes `²` and `٣`, which `int()` refuses or reads."""
    return text.isascii() and text.isdigit()


# A number as a user types it, in ASCII only: `int()` and `float()` also read other scripts' digits
# ('٣' is 3, a fullwidth 5 is 5) and underscores ('1_0' is 10), so a value was taken and kept as typed.
_INTEGER_RE = re.compile(r"\s*[+-]?\d+\s*", re.ASCII)
_DECIMAL_RE = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf|infinity|nan)\s*", re.ASCII | re.I)


def ascii_int(text: str) -> int:
    """`int(text)` for a whole number in ASCII digits (a sign and spaces around allowed); ValueError
    otherwise, as `int()` raises it: the one reading of a whole number a user typed."""
    if not _INTEGER_RE.fullmatch(text):
        raise ValueError(f"not a whole number in ASCII digits (0-9): {text!r}")
    return int(text)


def ascii_float(text: str) -> float:
    """`float(text)` for a decimal number in ASCII digits (a sign, a point, an exponent; inf and nan
    spelled out, which each caller's own range refuses); ValueError otherwise, as `float()` raises it."""
    if not _DECIMAL_RE.fullmatch(text):
        raise ValueError(f"not a number in ASCII digits (0-9): {text!r}")
    return float(text)


def whole_number(text: str, option: str) -> int:
    """`text` as a whole number (is_digits), or a ConfigError naming `option`."""
    if not is_digits(text):
        raise ConfigError(f"{option} takes whole numbers (0-9), not {text!r}")
    return int(text)


def check_seconds(value: float, option: str, most: float) -> float:
    """`value`, seconds an option sets, when above 0 and at most `most`: NaN and infinities never are
    (every comparison with NaN is false, so it is refused by asking for what holds, not what fails)."""
    if not (math.isfinite(value) and 0 < value <= most):
        raise ConfigError(f"{option} must be above 0 and at most {most:g} seconds, not {value}")
    return value


def parse_size(text: str) -> int:
    """Parse '8', '64KiB', '1MiB', '4M', '1G' (binary) or '1MB' (decimal, 1e6) into bytes."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ConfigError(f"bad size {text!r}: expected a whole number with an optional KiB/MiB/GiB suffix")
    number, suffix = match.groups()
    factor = _SUFFIXES.get(suffix.upper())
    if factor is None:
        raise ConfigError(f"bad size {text!r}: unknown suffix {suffix!r} (use B, KiB, MiB or GiB)")
    value = int(number) * factor
    if value < 1:
        raise ConfigError(f"bad size {text!r}: a message must hold at least 1 byte")
    if value > MAX_MESSAGE_BYTES:
        raise ConfigError(f"bad size {text!r}: larger than the {format_size(MAX_MESSAGE_BYTES)} limit")
    return value


def parse_sizes(text: str) -> list[int]:
    """Parse a size list: '8,1MiB,64MiB', a power-of-two range '1:64MiB', or a range with a
    step factor '1:64MiB:x4'. Returns sorted, unique sizes."""
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ConfigError(f"bad size list {text!r}: empty entry")
        if ":" in part:
            sizes.extend(_parse_range(part))
        else:
            sizes.append(parse_size(part))
    return sorted(set(sizes))


def _parse_range(part: str) -> list[int]:
    fields = part.split(":")
    if len(fields) not in (2, 3):
        raise ConfigError(f"bad size range {part!r}: expected LOW:HIGH or LOW:HIGH:xFACTOR")
    low, high = parse_size(fields[0]), parse_size(fields[1])
    factor = 2
    if len(fields) == 3:
        step = fields[2].strip().lower().lstrip("x")
        if not is_digits(step) or int(step) < 2:
            raise ConfigError(f"bad size range {part!r}: the step must be x2 or more, like x4")
        factor = int(step)
    if low > high:
        raise ConfigError(f"bad size range {part!r}: {fields[0]} is larger than {fields[1]}")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= factor
    return sizes


def format_size(nbytes: int) -> str:
    """Shortest exact binary form: 8 -> '8', 65536 -> '64KiB', 3 MiB + 1 -> '3145729'."""
    for suffix, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return str(nbytes)


def gbps(nbytes: float, seconds: float) -> float:
    """Bandwidth in GB/s (1e9 bytes per second)."""
    return nbytes / seconds / GB if seconds > 0 else float("inf")
