"""Faults planted on purpose, for the test suite to prove that rdmabench catches them.

RDMABENCH_FAULT=corrupt:N  the sender flips one byte of message 0 in its N-th window (0-based,
                           warm-up included) after writing the pattern, so the receiver must see it.
"""

from __future__ import annotations

import os

from .errors import ConfigError


def corrupt_window() -> int | None:
    spec = os.environ.get("RDMABENCH_FAULT", "")
    if not spec:
        return None
    kind, _, arg = spec.partition(":")
    if kind != "corrupt" or not arg.isdigit():
        raise ConfigError(f"bad RDMABENCH_FAULT {spec!r}: expected corrupt:N")
    return int(arg)
