"""The collector paused for work that makes or walks a million rows (aggregating, reporting, comparing):
rows make no reference cycles, so a collection would only rescan them, again and again."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def bulk(function: F) -> F:
    """For a function that makes or walks a million rows: no cyclic garbage collection while it
    runs (rows make no cycles: the collector would only rescan them, again and again), and what it
    leaves frozen out of the collector's sight (reference counting still frees it)."""

    @functools.wraps(function)
    def paused(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.freeze()
            if enabled:
                gc.enable()

    return paused  # type: ignore[return-value]


G = TypeVar("G", bound=Callable[..., Iterator[Any]])


def bulk_chunks(function: G) -> G:
    """`bulk` for a generator (a streamed report): the collector paused from its first piece to
    its last, not only while the generator is made."""

    @functools.wraps(function)
    def paused(*args: Any, **kwargs: Any) -> Iterator[Any]:
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield from function(*args, **kwargs)
        finally:
            gc.freeze()
            if enabled:
                gc.enable()

    return paused  # type: ignore[return-value]
