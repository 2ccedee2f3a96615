"""`rdmabench report`: results files aggregated into a table, Markdown, CSV, HTML or JSON."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ..errors import ConfigError, RdmabenchError
from ..results.reports.formats import FORMATS, GROUPINGS
from . import reading
from .group import SETTINGS, Written, fail, main, writes
from .options import choices, expect_option, format_option, model_budget_option, selection_options

if TYPE_CHECKING:
    from ..results.files.filters import Filters


@main.command(context_settings=SETTINGS)
@click.argument("paths", nargs=-1, required=True)
@format_option(FORMATS, "Output format; html is one self-contained page with plots.")
@writes(
    Written(
        ("--output", "-o"),
        "output",
        "the report",
        "Write here instead of standard output (`-`: standard output).",
        dash_is_stdout=True,
    ),
    reads=lambda given: reading.results_inputs(given["paths"], outputs=[given["output"]]),
)
@click.option("--by", default=GROUPINGS[0], metavar=choices(GROUPINGS), help="Group the rows.")
@click.option("--outlier-fraction", default=0.2, help="List links this much worse than the median of their class.")
@expect_option(
    "Also judge every link at its largest size against a floor (see `rdmabench check`; 'default' also "
    "against its class in the run); exit 1 if one fails or a part is suspect, 3 if single slow figures are to "
    "measure again, 2 if no link could be judged."
)
@model_budget_option()
@click.option(
    "--wide",
    is_flag=True,
    help="Every column, however wide, and the answer's prose (its front); by default table and Markdown lines "
    "keep within 120 columns (the JSON has everything).",
)
@selection_options
def report(
    paths: tuple[str, ...],
    output_format: str,
    output: str | None,
    force: bool,
    by: str,
    outlier_fraction: float,
    expect: dict[str, float],
    model_budget: float,
    wide: bool,
    **selection: Any,
) -> None:
    """Aggregate results files (or directories of them): per link and per (test, modes, size), the
    median over runs, the spread and the count; the suspect parts first (but in CSV), then outliers."""
    try:
        if by not in GROUPINGS:  # bad options are reported before any file is read
            raise ConfigError(f"unknown grouping {by!r}: choose one of {', '.join(GROUPINGS)}")
        if output_format not in FORMATS:
            raise ConfigError(f"unknown format {output_format!r}: choose {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
        if not 0 < outlier_fraction < 1:
            raise ConfigError(f"--outlier-fraction must be between 0 and 1, not {outlier_fraction}")
        chosen = reading.filters(**selection)
        judged = _report(paths, output_format, output, by, outlier_fraction, expect, chosen, model_budget, wide)
    except RdmabenchError as exc:
        fail(exc)
    if judged is not None:
        click.echo(judged.verdict_text(), err=True)
        sys.exit(judged.exit_code)


def _report(
    paths: tuple[str, ...],
    output_format: str,
    output: str | None,
    by: str,
    outlier_fraction: float,
    floors: dict[str, float],
    chosen: Filters,
    budget: float,
    wide: bool = False,
) -> Any:
    """The report written or printed; the verdict when floors were given, else None."""
    from ..results.reports import formats
    from ..results.verdicts.attribution import attribute
    from ..results.verdicts.outcome import conclude, no_verdict

    loaded = reading.load(paths)
    rows = reading.aggregate(loaded, chosen)  # a run whose links file is damaged: left out
    if not rows:
        raise ConfigError("no results match the filters")
    skipped = [*loaded.problems, *map(str, loaded.duplicates)]  # files left out, each with why
    sources = [path for path, _ in loaded.documents]
    found = attribute(rows) if output_format != "csv" or floors else None  # once
    reading.write_or_print(
        formats.render_chunks(
            rows, output_format, formats.Rendering(by, outlier_fraction, skipped, sources, found, budget, wide)
        ),
        output,
    )
    judged = (
        conclude(rows, floors, found=found, conflicts=loaded.conflicts) if floors else None
    )  # check's verdict, and exit status
    if judged is not None and judged.outcome == "INCONCLUSIVE":
        raise no_verdict(judged)
    return judged
