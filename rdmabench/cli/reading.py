"""What `report`, `check` and `compare` share: the results files they read, the filters of
`selection_options`, and a report written whole or printed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from .. import userfiles
from ..errors import ConfigError, ResultsWriteError
from ..escape import visible
from ..units import parse_sizes


def filters(
    tests: tuple[str, ...],
    modes: tuple[str, ...],
    sizes: str | None,
    hosts: tuple[str, ...],
    link_classes: tuple[str, ...],
    since: str | None,
    until: str | None,
) -> Any:
    """The options of `selection_options` as the rows' Filters."""
    from ..results.files import dates
    from ..results.files.rows import LINK_CLASSES, Filters

    for cls in link_classes:
        if cls not in LINK_CLASSES:
            raise ConfigError(f"unknown link class {cls!r}: choose one of {', '.join(LINK_CLASSES)}")
    first, last = dates.parse_bounds(since, until)
    return Filters(tests, modes, tuple(parse_sizes(sizes)) if sizes else (), hosts, link_classes, first, last)


def write_or_print(chunks: Iterable[str], output: str | None) -> None:
    """A report's pieces, written as they come to `output` (whole or not at all) or standard output,
    which ends with a line break."""
    if output is None:
        last = ""
        for chunk in chunks:
            click.echo(chunk, nl=False)
            last = chunk or last
        if not last.endswith("\n"):
            click.echo("")
        return
    try:
        userfiles.write_chunks(output, chunks)
    except OSError as exc:
        raise ResultsWriteError(f"cannot write the report to {output}: {exc.strerror or exc}") from None
    click.echo(f"# report written to {output}", err=True)


def load(paths: tuple[str, ...], warn_duplicates: bool = True) -> Any:
    from ..results.files.loading import load_all

    loaded = load_all(paths)
    for problem in loaded.problems:
        click.echo(f"rdmabench: warning: skipped {visible(problem)}", err=True)
    if warn_duplicates:  # compare lists them in its output
        for duplicate in loaded.duplicates:
            click.echo(f"rdmabench: warning: ignored {visible(str(duplicate))}", err=True)
    if not loaded.documents:
        raise ConfigError("no usable results files among " + ", ".join(paths))
    return loaded


def aggregate(documents: list[tuple[str, Any]], chosen: Any) -> Any:
    """The rows of loaded documents; a warning per file whose records repeat a link (counted once)."""
    from ..results.files.rows import aggregate as rows_of

    notes: list[str] = []
    rows = rows_of(documents, chosen, notes)
    for note in notes:
        click.echo(f"rdmabench: warning: {visible(note)}", err=True)
    return rows
