"""Faults planted on purpose, for the test suite to prove that rdmabench catches them.

RDMABENCH_FAULT=corrupt:N  the sender flips one byte of message 0 in its N-th step (0-based, warm-up
                           included) after writing the pattern, so the receiver must see it.
RDMABENCH_FAULT=stall:N    the receiving rank stops answering before its N-th step, as a hung peer
                           would, so the sender's watchdog (--timeout) must fire.
RDMABENCH_FAULT=slow:N     block lists the CPU posts: the first transfer of every N-th step takes 5 ms
                           longer (the initiator stalls inside it, after posting its first block), so
                           a tail percentile must move while the median does not.
"""

from __future__ import annotations

import os
import time

from ..errors import ConfigError
from ..units import is_digits

_KINDS = ("corrupt", "stall", "slow")
SLOW_SECONDS = 0.005


def _planted(kind: str) -> int | None:
    spec = os.environ.get("RDMABENCH_FAULT", "")
    if not spec:
        return None
    name, _, arg = spec.partition(":")
    if name not in _KINDS or not is_digits(arg):
        raise ConfigError(f"bad RDMABENCH_FAULT {spec!r}: expected corrupt:N, stall:N or slow:N")
    return int(arg) if name == kind else None


def corrupt_step() -> int | None:
    return _planted("corrupt")


def stall_step() -> int | None:
    return _planted("stall")


def slow_every() -> int | None:
    every = _planted("slow")
    return every if every else None


def stall_forever() -> None:
    """Hang the way a stuck peer does: no progress, no messages; only a signal or a kill ends it."""
    while True:
        time.sleep(0.1)
