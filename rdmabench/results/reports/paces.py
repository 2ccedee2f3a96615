"""Where a faster pace of an offload's copy kernel cost the model more than it gained (issue 53): the
rows of one list, size and load beside a model, posted by the kernel at several paces, ordered by the
threads in flight; each pace against the next slower one, one line where the model's extra time (the
ratio of their slowdowns) outgrew the GB/s it bought. Read from the row's path (entries.posting_of:
"kernel at SMSxCTASxTHREADS") and its beside figures; no line where a row has no judged slowdown."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from ...units import format_size
from ..files.row import Row


def _threads(path: str | None) -> tuple[str, int] | None:
    """The pace of a path "kernel at SMSxCTASxTHREADS" and its threads in flight, or None."""
    _, at, pace = (path or "").partition(" at ")
    parts = pace.split("x")
    if not at or len(parts) != 3 or not all(part.isascii() and part.isdigit() for part in parts):
        return None
    sms, ctas, threads = (int(part) for part in parts)
    return pace, sms * ctas * threads


def pace_lines(rows: Sequence[Row]) -> list[str]:
    """One line for each faster pace that cost the model more than it gained, in the rows' order."""
    groups: dict[tuple[str, str, str | None, int, str], list[tuple[int, str, Row]]] = {}
    for row in rows:
        found = _threads(row.posting)
        if found is None or row.beside is None or row.median <= 0:
            continue
        key = (row.test, row.link, row.block_list, row.size_bytes, row.load)
        groups.setdefault(key, []).append((found[1], found[0], row))
    lines = []
    for (test, _, listed, size, _), paced in groups.items():
        paced.sort(key=lambda item: item[0])
        for (_, slow_pace, slow), (_, fast_pace, fast) in pairwise(paced):
            assert slow.beside is not None and fast.beside is not None
            gain = fast.median / slow.median - 1
            cost = fast.beside[1] / slow.beside[1] - 1
            if cost > 0 and cost > gain:
                lines.append(
                    f"{test} {format_size(size)} ({listed}): pace {fast_pace} moved {gain:+.1%} against {slow_pace} "
                    f"({fast.median:.2f} against {slow.median:.2f} GB/s) and cost the model {cost:+.1%} "
                    f"(x{fast.beside[1]:.3f} against x{slow.beside[1]:.3f}): it cost more than it gained"
                )
    return lines
