"""`rdmabench compare`: two sets of runs, per link and size, with a significance test."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..errors import ConfigError
from ..escape import visible
from . import reading
from .group import SETTINGS, main
from .options import format_option, model_budget_option, selection_options, tolerance_option


@main.command(context_settings=SETTINGS)
@click.argument("base", nargs=1)
@click.argument("new", nargs=1)
@tolerance_option(0.05, "A change for the worse beyond this fraction, if significant, is a regression.")
@format_option(("table", "json"), "Output format.")
@model_budget_option(" (and how that answer changed)")
@selection_options
def compare(base: str, new: str, tolerance: float, output_format: str, model_budget: float, **selection: Any) -> None:
    """Compare two results files (or directories): per link and size, the change of the median and
    whether it is beyond run-to-run noise: a Mann-Whitney U test on the runs' figures (4 runs or
    more on each side; fewer are shown untested), corrected for the number of links tested
    (Benjamini-Hochberg q-values). A run counts once: files of the same run (the same run id or the
    same records) are named and ignored. Exit status 1 when a significant regression is found, 0 when
    none is, 2 for bad input or when no pair could be tested (no verdict), for use in a cluster's CI;
    for a gate on single runs use `rdmabench check --baseline`."""
    from ..results.reports import answer
    from ..results.verdicts import compare as compare_module

    if not 0 < tolerance < 1:
        raise ConfigError(f"--tolerance must be between 0 and 1, not {tolerance}")
    if output_format not in ("table", "json"):
        raise ConfigError(f"unknown format {output_format!r}: choose table or json")
    chosen = reading.filters(**selection)
    base_loaded, new_loaded = reading.load((base,), warn_duplicates=False), reading.load((new,), warn_duplicates=False)
    base_rows = reading.aggregate(base_loaded, chosen)
    new_rows = reading.aggregate(new_loaded, chosen)
    changes, unmatched = compare_module.compare(base_rows, new_rows, tolerance)
    if not changes:
        differ = next((line.split("; ", 1)[1] for line in unmatched if "other settings" in line), "")
        raise ConfigError("BASE and NEW have no link and size in common" + (f" ({differ})" if differ else ""))
    duplicates = [f"{side} {d}" for side, d in (("BASE", base_loaded), ("NEW", new_loaded)) for d in d.duplicates]
    chosen_paths = answer.changes(
        base_rows, new_rows, model_budget
    )  # block lists: which posting path, before and after
    if output_format == "json":
        click.echo(_json(changes, unmatched, duplicates, chosen_paths))
    else:
        click.echo(compare_module.format_changes(changes, unmatched, tolerance, duplicates))
        if chosen_paths:
            click.echo("\n" + "\n".join(visible(line) for line in answer.change_lines(chosen_paths)))
    sys.exit(compare_module.comparison_exit(changes, len(base_loaded.conflicts) + len(new_loaded.conflicts)))


def _json(changes: list[Any], unmatched: list[str], duplicates: list[str], answers: list[Any]) -> str:
    # One change per line: an indented dump of a million changes took minutes.
    rows = ",\n".join(json.dumps(c.to_dict(), separators=(",", ":")) for c in changes)
    chosen = f',\n"answers": {json.dumps(answers, indent=1)}' if answers else ""  # only where block lists chose
    return (
        f'{{"changes": [\n{rows}\n],\n"unmatched": {json.dumps(unmatched, indent=1)},\n'
        f'"duplicates": {json.dumps(duplicates, indent=1)}{chosen}}}'
    )
