"""Saying what takes long: a round's set-up, or one of its steps, that runs for seconds is said on
stderr as it happens (a million transfers in flight, a table of a million blocks), so a long run is
never silent. One rank a round speaks (its first link's source); lines of one round come at most
every SAID_EVERY_S seconds."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator

SLOW_S = 3.0  # a set-up or a step at least this long is said
SAID_EVERY_S = 10.0  # seconds between two lines of one round


class Slow:
    """What takes long in one round (`where`), said on stderr where `speaks`."""

    def __init__(self, where: str, speaks: bool):
        self.where, self.speaks = where, speaks
        self._said = -SAID_EVERY_S
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            now = time.monotonic()
            if not self.speaks or now - self._said < SAID_EVERY_S:
                return
            self._said = now
        print(f"# {self.where}: {text}", file=sys.stderr, flush=True)

    def after(self, what: str, seconds: float) -> None:
        """`what` just took `seconds`: said when that is SLOW_S or more (a step: cheap to call)."""
        if seconds >= SLOW_S:
            self.say(f"{what} took {seconds:.1f} s; still measuring")

    @contextlib.contextmanager
    def during(self, what: str) -> Iterator[None]:
        """Say `what` if it is still running after SLOW_S (a thread's timer: for Python work, which
        lets the timer run; a native call holding the interpreter is said by `after`)."""
        began = time.monotonic()
        timer = threading.Timer(SLOW_S, lambda: self.say(f"{what}: {time.monotonic() - began:.0f} s so far"))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
        self.after(what, time.monotonic() - began)
