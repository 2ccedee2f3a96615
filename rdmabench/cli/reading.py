"""What `report`, `check` and `compare` share: the results files they read, the filters of
`selection_options`, and a report written whole or printed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import click

from .. import userfiles
from ..errors import ConfigError, ResultsWriteError
from ..escape import visible
from ..units import parse_sizes

if TYPE_CHECKING:
    from ..results.files.filters import Filters


def filters(
    tests: tuple[str, ...],
    modes: tuple[str, ...],
    sizes: str | None,
    hosts: tuple[str, ...],
    link_classes: tuple[str, ...],
    since: str | None,
    until: str | None,
) -> Filters:
    """The options of `selection_options` as the rows' Filters."""
    from ..results.files import dates
    from ..results.files.rows import LINK_CLASSES, Filters

    for cls in link_classes:
        if cls not in LINK_CLASSES:
            raise ConfigError(f"unknown link class {cls!r}: choose one of {', '.join(LINK_CLASSES)}")
    first, last = dates.parse_bounds(since, until)
    return Filters(tests, modes, tuple(parse_sizes(sizes)) if sizes else (), hosts, link_classes, first, last)


def results_inputs(*paths: str | tuple[str, ...] | None, outputs: Iterable[str | None] = ()) -> Iterator[str]:
    """The files `report` and `check` would read of these arguments (a path, a tuple of them, or
    None), as far as an output could replace one (cli.group.writes): each file named (a results file,
    a baseline, a node list); each results file found under a named folder; every links file beside
    any of them; and, where an output already exists, the links file each summary's record names (a
    summary reads it under any name: `s.data` as much as `s.links.jsonl`), each summary read bounded.
    A file found under a folder that is other JSON (the command's own report or verdict, kept there:
    `reading.other_document`) is no input; only where it is one of `outputs` is it opened (bounded) to
    tell."""
    from ..results.files import compact
    from ..results.files.loading import find_files
    from ..results.files.reading import named_links_file, other_document
    from ..userfiles import identities

    named = [path for given in paths if given is not None for path in ((given,) if isinstance(given, str) else given)]
    written = frozenset().union(*(identities(path) for path in outputs if path is not None))
    files, _problems = find_files(named)
    folders = set()
    summaries = []
    for path in files:
        explicit = path in named
        if explicit or not written or not written & identities(path) or not other_document(path):
            yield path
            summaries.append(path)
        folders.add(os.path.dirname(path) or ".")
    for folder in sorted(folders):  # each folder listed, nothing in it read
        with contextlib.suppress(OSError):
            yield from (os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(compact.LINKS_SUFFIX))
    if written:  # an output already there may be a links file by another name: only then are summaries read
        yield from (links for path in summaries if (links := named_links_file(path)) is not None)


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


def aggregate(loaded: Any, chosen: Any) -> Any:
    """The rows of loaded documents (`loading.Loaded`); a warning per file whose records repeat a
    link (counted once). Of several runs, one whose links file turns out damaged while it is folded
    is left out as a bad summary is: a warning naming the file and why, the run taken out of
    `loaded.documents` (its rows taken back) and put among `loaded.problems`; the others are
    aggregated. A single run that is damaged stops the command in one line, as before; so does a set
    of runs that are all damaged (nothing usable)."""
    from ..results.files.rows import aggregate as rows_of

    notes: list[str] = []
    documents = loaded.documents
    dropped: list[tuple[str, str]] | None = [] if len(documents) > 1 else None
    rows = rows_of(documents, chosen, notes, dropped)
    for note in notes:
        click.echo(f"rdmabench: warning: {visible(note)}", err=True)
    if dropped:
        left_out = {path for path, _why in dropped}
        for path, why in dropped:
            problem = f"{why} (the run of {path}: left out)"
            loaded.problems.append(problem)
            click.echo(f"rdmabench: warning: skipped {visible(problem)}", err=True)
        loaded.documents = [(path, doc) for path, doc in documents if path not in left_out]
        if not loaded.documents:
            raise ConfigError("no usable results files among " + ", ".join(path for path, _doc in documents))
    return rows
